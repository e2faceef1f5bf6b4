//! Where an IP address may appear on a router's wire: the address ranges RFC 1812 §4.2.3.1 and
//! §5.3.7 (IPv4), RFC 3927 §2.7 (IPv4 link-local) and RFC 4291 §2.5 and §2.7 (IPv6) set apart,
//! judged once per packet from the integer form the parser already holds.
//!
//! Invariant: every address falls in exactly one scope of each kind, and the scopes only say
//! what the address is; what the switch does with each (drop, punt, forward) is the
//! classifier's.

use super::IpAddress;

/// What a packet's source address allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceScope {
    /// May be forwarded.
    Routable,
    /// Only for the switch itself, never forwarded: IPv4 0.0.0.0 (a DHCP client) and
    /// 169.254/16 (RFC 3927 §2.7), IPv6 :: (duplicate address detection) and fe80::/10.
    OnLink,
    /// Never valid as a source (RFC 1812 §5.3.7, RFC 4291 §2.5.3, §2.5.5.2, §2.7): IPv4 0/8
    /// other than 0.0.0.0, 127/8, multicast (224/4), 240/4 including the limited broadcast;
    /// IPv6 ::1, IPv4-mapped (::ffff:0:0/96) and multicast (ff00::/8).
    Martian,
}

/// What a packet's destination address asks of a router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestinationScope {
    /// Looked up in the FIB.
    Routable,
    /// Never leaves the link, for the control plane: IPv4 limited broadcast and link-local
    /// multicast (224.0.0.0/24), IPv6 link-local unicast (fe80::/10) and link-scope multicast
    /// (ff02::/16, and ff12::, ff32:: ... with flags).
    OnLink,
    /// IPv4 169.254/16: the switch's own if a route says so, else never forwarded (RFC 3927
    /// §2.7).
    LinkLocalV4,
    /// Multicast beyond the link, which only a multicast router forwards.
    Multicast,
    /// Never valid as a destination on the wire: IPv4 0/8, 127/8 and 240/4 other than the
    /// limited broadcast; IPv6 ::, ::1, IPv4-mapped, and multicast of the reserved (0, f) and
    /// interface-local (1) scopes.
    Martian,
}

/// The top 96 bits of an IPv4-mapped IPv6 address (::ffff:0:0/96), which is never on the wire
/// (RFC 4291 §2.5.5.2).
const V4_MAPPED_PREFIX: u128 = 0xffff;

/// An IPv6 multicast address's scope nibble for link-local (RFC 4291 §2.7).
const MULTICAST_SCOPE_LINK: u128 = 2;

/// The first octets of IPv4 addresses that are routable as a source and as a destination
/// whatever the other three octets: 1-126, 128-168 and 170-223, a bit each. Nearly every
/// packet's addresses are in them, so one lookup settles both scopes; the other octets (0,
/// 127, 169, 224 and above) take the comparisons below.
const PLAIN_V4_FIRST_OCTETS: [u64; 4] = {
    let mut bits = [0u64; 4];
    let mut octet = 1;
    while octet <= 223 {
        if octet != 127 && octet != 169 {
            bits[octet / 64] |= 1 << (octet % 64);
        }
        octet += 1;
    }
    bits
};

/// Whether IPv4 `address` is in one of the `PLAIN_V4_FIRST_OCTETS`.
#[inline(always)]
pub(crate) fn plain_v4(address: u32) -> bool {
    let first = (address >> 24) as usize;
    PLAIN_V4_FIRST_OCTETS[first / 64] >> (first % 64) & 1 != 0
}

/// The scope of `address` as a source.
#[inline(always)]
pub fn source(address: IpAddress) -> SourceScope {
    match address {
        IpAddress::V4(address) if plain_v4(address) => SourceScope::Routable,
        IpAddress::V4(address) => {
            let first = address >> 24;
            if address == 0 || address >> 16 == 0xa9fe {
                SourceScope::OnLink
            } else if first == 0 || first == 127 || first >= 224 {
                SourceScope::Martian
            } else {
                SourceScope::Routable
            }
        }
        IpAddress::V6(address) => {
            if address == 0 || address >> 118 == 0x3fa {
                SourceScope::OnLink
            } else if address == 1 || address >> 120 == 0xff || address >> 32 == V4_MAPPED_PREFIX {
                SourceScope::Martian
            } else {
                SourceScope::Routable
            }
        }
    }
}

/// The scope of `address` as a destination.
#[inline(always)]
pub fn destination(address: IpAddress) -> DestinationScope {
    match address {
        IpAddress::V4(address) if plain_v4(address) => DestinationScope::Routable,
        IpAddress::V4(address) => {
            let first = address >> 24;
            if address == u32::MAX || address >> 8 == 0x00e0_0000 {
                DestinationScope::OnLink
            } else if first >> 4 == 0xe {
                DestinationScope::Multicast
            } else if first == 0 || first == 127 || first >= 240 {
                DestinationScope::Martian
            } else if address >> 16 == 0xa9fe {
                DestinationScope::LinkLocalV4
            } else {
                DestinationScope::Routable
            }
        }
        IpAddress::V6(address) => {
            if address >> 120 == 0xff {
                // The scope is the low nibble of the second byte, whatever the flags above it.
                match (address >> 112) & 0xf {
                    MULTICAST_SCOPE_LINK => DestinationScope::OnLink,
                    0 | 1 | 0xf => DestinationScope::Martian,
                    _ => DestinationScope::Multicast,
                }
            } else if address >> 118 == 0x3fa {
                DestinationScope::OnLink
            } else if address <= 1 || address >> 32 == V4_MAPPED_PREFIX {
                DestinationScope::Martian
            } else {
                DestinationScope::Routable
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(text: &str) -> IpAddress {
        IpAddress::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn v6(text: &str) -> IpAddress {
        IpAddress::V6(u128::from(text.parse::<std::net::Ipv6Addr>().unwrap()))
    }

    /// The lookup that settles most addresses says what the comparisons say, for every first
    /// octet, with the other octets at their edges and in between.
    #[test]
    fn the_plain_first_octets_are_routable_both_ways_and_no_others_are_taken_for_them() {
        for first in 0u32..=255 {
            for rest in [0, 1, 0x00fe_0000, 0x00fe_ffff, 0x0000_00ff, 0x00ff_ffff, 0x0012_3456] {
                let address = first << 24 | rest;
                let source_by_comparison = match IpAddress::V4(address) {
                    IpAddress::V4(a) if a == 0 || a >> 16 == 0xa9fe => SourceScope::OnLink,
                    IpAddress::V4(a) if a >> 24 == 0 || a >> 24 == 127 || a >> 24 >= 224 => SourceScope::Martian,
                    _ => SourceScope::Routable,
                };
                assert_eq!(source(IpAddress::V4(address)), source_by_comparison, "{address:#010x}");
                if plain_v4(address) {
                    assert_eq!(destination(IpAddress::V4(address)), DestinationScope::Routable, "{address:#010x}");
                }
            }
            let plain = (1..=223).contains(&first) && first != 127 && first != 169;
            assert_eq!(plain_v4(first << 24), plain, "first octet {first}");
        }
    }

    #[test]
    fn sources_are_judged_at_the_edges_of_each_range() {
        use SourceScope::*;
        let cases = [
            ("0.0.0.0", OnLink),
            ("0.0.0.1", Martian),
            ("0.255.255.255", Martian),
            ("1.0.0.0", Routable),
            ("10.0.0.1", Routable),
            ("126.255.255.255", Routable),
            ("127.0.0.1", Martian),
            ("128.0.0.0", Routable),
            ("169.253.255.255", Routable),
            ("169.254.0.0", OnLink),
            ("169.254.255.255", OnLink),
            ("169.255.0.0", Routable),
            ("223.255.255.255", Routable),
            ("224.0.0.1", Martian),
            ("239.255.255.255", Martian),
            ("240.0.0.0", Martian),
            ("255.255.255.255", Martian),
        ];
        for (text, scope) in cases {
            assert_eq!(source(v4(text)), scope, "{text}");
        }
        let cases = [
            ("::", OnLink),
            ("::1", Martian),
            ("::2", Routable),
            ("::ffff:10.0.0.1", Martian),
            ("::fffe:10.0.0.1", Routable),
            ("fe7f:ffff::1", Routable),
            ("fe80::1", OnLink),
            ("febf:ffff::1", OnLink),
            ("fec0::1", Routable),
            ("ff02::1", Martian),
            ("ff0e::1", Martian),
            ("2001:db8::1", Routable),
        ];
        for (text, scope) in cases {
            assert_eq!(source(v6(text)), scope, "{text}");
        }
    }

    #[test]
    fn destinations_are_judged_at_the_edges_of_each_range() {
        use DestinationScope::*;
        let cases = [
            ("0.0.0.0", Martian),
            ("0.255.255.255", Martian),
            ("1.0.0.0", Routable),
            ("126.255.255.255", Routable),
            ("127.0.0.0", Martian),
            ("127.255.255.255", Martian),
            ("128.0.0.0", Routable),
            ("169.253.255.255", Routable),
            ("169.254.0.1", LinkLocalV4),
            ("169.254.255.255", LinkLocalV4),
            ("169.255.0.0", Routable),
            ("223.255.255.255", Routable),
            ("224.0.0.0", OnLink),
            ("224.0.0.255", OnLink),
            ("224.0.1.0", Multicast),
            ("239.255.255.250", Multicast),
            ("240.0.0.0", Martian),
            ("255.255.255.254", Martian),
            ("255.255.255.255", OnLink),
        ];
        for (text, scope) in cases {
            assert_eq!(destination(v4(text)), scope, "{text}");
        }
        let cases = [
            ("::", Martian),
            ("::1", Martian),
            ("::2", Routable),
            ("::ffff:10.0.0.1", Martian),
            ("fe7f:ffff::1", Routable),
            ("fe80::1", OnLink),
            ("febf:ffff::1", OnLink),
            ("fec0::1", Routable),
            ("ff00::1", Martian),
            ("ff01::1", Martian),
            ("ff02::1:ff00:1", OnLink),
            ("ff03::1", Multicast),
            ("ff05::2", Multicast),
            ("ff0e::1", Multicast),
            ("ff0f::1", Martian),
            ("ff11::1", Martian),
            ("ff12::1", OnLink),
            ("ff32::1:2", OnLink),
            ("ff35::1", Multicast),
            ("2001:db8::1", Routable),
        ];
        for (text, scope) in cases {
            assert_eq!(destination(v6(text)), scope, "{text}");
        }
    }
}
