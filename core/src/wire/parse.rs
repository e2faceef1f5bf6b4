//! The frame parser: from raw bytes to the few facts the pipeline needs (where the IP header
//! is, the destination, DSCP/ECN, TTL, PCP, a flow hash for ECMP), or a PFC frame's meaning.
//!
//! Nearly every frame a leaf routes is untagged IPv4 without options to a routable address:
//! `plain_ipv4` takes those from one fixed-size view of their first 42 bytes, and says nothing
//! of any other frame, which `parse` takes.
//!
//! Invariant: `parse` reads only through the checked views of this module's siblings, and
//! `plain_ipv4` only through a fixed-size array, so no input, however hostile, makes either
//! panic; every rejection is a `WireError`, which the pipeline counts as `malformed`. Whatever
//! `plain_ipv4` takes, `parse` takes with the same facts (the test
//! `the_plain_view_takes_only_what_parse_takes_and_says_the_same`). Neither writes.

use super::ethernet::{self, EtherType};
use super::scope::{self, SourceScope};
use super::{bth, ipv4, ipv6, pfc, tcp, udp, vlan, IpAddress, Result, WireError};

/// At most this many VLAN tags (QinQ) are walked.
const MAX_VLAN_TAGS: usize = 2;
/// At most this many IPv6 extension headers are walked before giving up on L4 (not an error).
const MAX_IPV6_EXTENSIONS: usize = 8;

/// RoCEv2 facts from the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roce {
    pub opcode: u8,
    pub dest_qp: u32,
}

/// What the pipeline needs of an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPacket {
    /// Offset of the IP header from the start of the frame (after any VLAN tags).
    pub l3_offset: usize,
    pub destination: IpAddress,
    /// What the source address allows (`scope::source`): kept instead of the address, which
    /// only the flow hash needs.
    pub source_scope: SourceScope,
    pub dscp: u8,
    pub ecn: u8,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// L4 protocol (IPv6: after the extension headers walked).
    pub protocol: u8,
    pub roce: Option<Roce>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    Ip(IpPacket),
    /// A PFC frame: untagged, to 01:80:C2:00:00:01, opcode 0x0101. Consumed by the switch,
    /// never forwarded.
    FlowControl(pfc::Repr),
    /// An 802.3x PAUSE frame (untagged, to 01:80:C2:00:00:01 or a unicast address, opcode
    /// 0x0001), with its time.
    LinkPause(u16),
    /// A MAC control frame that is not flow control (another opcode, another destination, PFC
    /// to a unicast address, or behind a VLAN tag, which 802.1Qbb does not allow), or an EtherType the switch does not
    /// route.
    NotRoutable(EtherType),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedFrame {
    /// PCP of the outermost VLAN tag, if the frame is tagged.
    pub pcp: Option<u8>,
    pub payload: Payload,
}

/// Parses one frame.
#[inline(always)]
pub fn parse(frame: &[u8]) -> Result<ParsedFrame> {
    parse_beyond(frame, 0)
}

/// The facts the classifier needs of a plain IPv4 packet (`plain_ipv4`): those `parse` would
/// give, the header's offset being `ethernet::HEADER_LEN` and both addresses routable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainIpv4 {
    pub destination: u32,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
}

/// The bytes `plain_ipv4` reads at once: Ethernet, IPv4 without options, 8 bytes of L4 (a
/// UDP header; a TCP header's ports and sequence number).
const PLAIN_HEAD: usize = ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN + udp::HEADER_LEN;

/// An untagged IPv4 packet without options, not a fragment, whose source and destination
/// are both routable (`scope`) and whose every header `parse_beyond` would accept: its
/// facts, read at fixed offsets of one 42-byte view with none of `parse`'s dispatch. `None`
/// for any other frame, valid or not, which `parse_beyond` then judges.
#[inline(always)]
pub fn plain_ipv4(frame: &[u8], beyond: usize) -> Option<PlainIpv4> {
    const IP: usize = ethernet::HEADER_LEN;
    const L4: usize = IP + ipv4::MIN_HEADER_LEN;
    let head: &[u8; PLAIN_HEAD] = frame.first_chunk()?;
    let be16 = |at: usize| u16::from_be_bytes([head[at], head[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    // Version 4, IHL 5; a whole datagram.
    if be16(12) != IPV4_NUMBER || head[IP] != 0x45 || be16(IP + 6) & 0x3fff != 0 {
        return None;
    }
    let (source, destination) = (be32(IP + 12), be32(IP + 16));
    if !scope::plain_v4(source) || !scope::plain_v4(destination) {
        return None;
    }
    // `ipv4::Packet::check_len_beyond`: the declared length covers the header and lies within
    // the frame (the bytes at hand and `beyond`).
    let total_len = usize::from(be16(IP + 2));
    let ip_at_hand = frame.len() - IP;
    if total_len < ipv4::MIN_HEADER_LEN || ip_at_hand + beyond < total_len {
        return None;
    }
    if !super::checksum::sums_to_all_ones(&head[IP..L4]) {
        return None;
    }
    // `parse_l4` on the payload the IPv4 view gives (up to the declared length).
    let l4_at_hand = total_len.min(ip_at_hand) - ipv4::MIN_HEADER_LEN;
    let l4_beyond = (IP + total_len).saturating_sub(frame.len());
    let l4_fits = match head[IP + 9] {
        ipv4::protocol::UDP => {
            let declared = usize::from(be16(L4 + 4));
            let fits =
                l4_at_hand >= udp::HEADER_LEN && declared >= udp::HEADER_LEN && declared <= l4_at_hand + l4_beyond;
            // RoCEv2: a BTH at hand and room declared for it and the ICRC.
            fits && (be16(L4 + 2) != udp::ROCEV2_PORT
                || (declared - udp::HEADER_LEN >= bth::HEADER_LEN + bth::ICRC_LEN
                    && declared.min(l4_at_hand) - udp::HEADER_LEN >= bth::HEADER_LEN))
        }
        ipv4::protocol::TCP => {
            // The data offset is past the 42 bytes: read where the header fits whole.
            l4_at_hand >= tcp::MIN_HEADER_LEN
                && frame.get(L4 + 12).is_some_and(|&offset| {
                    let header_len = usize::from(offset >> 4) * 4;
                    header_len >= tcp::MIN_HEADER_LEN && header_len <= l4_at_hand
                })
        }
        _ => true,
    };
    l4_fits.then_some(PlainIpv4 { destination, dscp: head[IP + 1] >> 2, ecn: head[IP + 1] & 0x03, ttl: head[IP + 8] })
}

/// IPv4's EtherType as a number (`EtherType::Ipv4`).
const IPV4_NUMBER: u16 = 0x0800;

/// Parses a frame of which `frame` holds the first bytes and `beyond` more follow elsewhere
/// (a chained mbuf's first segment): every header must be in `frame`, and the lengths the
/// headers declare are checked against the whole frame. With `beyond` 0 it is `parse`.
#[inline(always)]
pub fn parse_beyond(frame: &[u8], beyond: usize) -> Result<ParsedFrame> {
    let ethernet = ethernet::Frame::new_checked(frame)?;
    // Untagged IPv4, nearly every frame: its EtherType compared as it is on the wire, where
    // the general path below would name it first and then dispatch on the name.
    if ethernet.ethertype_number() == IPV4_NUMBER {
        let ip = parse_ipv4(frame, ethernet::HEADER_LEN, beyond)?;
        return Ok(ParsedFrame { pcp: None, payload: Payload::Ip(ip) });
    }
    let mut ethertype = ethernet.ethertype();
    let mut offset = ethernet::HEADER_LEN;
    let mut pcp = None;
    let mut tags = 0;
    while matches!(ethertype, EtherType::Vlan | EtherType::ServiceVlan) {
        if tags == MAX_VLAN_TAGS {
            return Err(WireError::TooManyTags);
        }
        let tag = vlan::Tag::new_checked(&frame[offset..])?;
        pcp.get_or_insert(tag.pcp());
        ethertype = tag.ethertype();
        offset += vlan::TAG_LEN;
        tags += 1;
    }
    let payload = match ethertype {
        EtherType::Ipv4 => Payload::Ip(parse_ipv4(frame, offset, beyond)?),
        EtherType::Ipv6 => Payload::Ip(parse_ipv6(frame, offset, beyond)?),
        EtherType::MacControl => {
            let control = pfc::Payload::new_checked(&frame[offset..])?;
            let destination = ethernet.destination();
            // 802.3 Annex 31B: PAUSE goes to the reserved multicast address or to the
            // station's own unicast address (which station is the classifier's to check);
            // 802.1Qbb's PFC only to the reserved address.
            let unicast = destination.0[0] & 1 == 0;
            if tags > 0 || (destination != pfc::DESTINATION && !unicast) {
                Payload::NotRoutable(ethertype)
            } else if let Some(repr) = pfc::Repr::parse(&control).filter(|_| destination == pfc::DESTINATION) {
                Payload::FlowControl(repr)
            } else if control.opcode() == pfc::OPCODE_PAUSE {
                Payload::LinkPause(control.pause_time())
            } else {
                Payload::NotRoutable(ethertype)
            }
        }
        other => Payload::NotRoutable(other),
    };
    Ok(ParsedFrame { pcp, payload })
}

/// The PFC frame's meaning, if `frame` is one: `parse`'s `FlowControl`, without parsing
/// frames of any other EtherType (PFC is untagged, so the type is at offset 12).
#[inline]
pub fn flow_control(frame: &[u8]) -> Option<pfc::Repr> {
    if frame.get(12..14) != Some(&0x8808u16.to_be_bytes()[..]) {
        return None;
    }
    match parse(frame) {
        Ok(ParsedFrame { payload: Payload::FlowControl(repr), .. }) => Some(repr),
        _ => None,
    }
}

#[inline(always)]
fn parse_ipv4(frame: &[u8], l3_offset: usize, beyond: usize) -> Result<IpPacket> {
    let packet = ipv4::Packet::new_checked_beyond(&frame[l3_offset..], beyond)?;
    if !packet.verify_checksum() {
        return Err(WireError::BadChecksum);
    }
    let ports = ipv4_l4(&packet, frame.len(), l3_offset)?;
    Ok(IpPacket {
        l3_offset,
        destination: IpAddress::V4(u32::from(packet.destination())),
        source_scope: scope::source(IpAddress::V4(u32::from(packet.source()))),
        dscp: packet.dscp(),
        ecn: packet.ecn(),
        ttl: packet.ttl(),
        protocol: packet.protocol(),
        roce: ports.roce,
    })
}

/// The L4 header of an IPv4 packet that lies at `l3_offset` of a frame whose first
/// `frame_len` bytes are at hand: checked whole, nothing for a fragment.
#[inline(always)]
fn ipv4_l4(packet: &ipv4::Packet<&[u8]>, frame_len: usize, l3_offset: usize) -> Result<L4> {
    if packet.is_fragment() {
        return Ok(L4::default());
    }
    // What of the packet lies past the bytes at hand (0 unless the frame is chained).
    let l4_beyond = (l3_offset + usize::from(packet.total_len())).saturating_sub(frame_len);
    parse_l4(packet.protocol(), packet.payload(), l4_beyond)
}

// Inlined like `parse_ipv4`: as a call, its result came back through memory and the IPv4
// path's result was merged into the same stack slot, which the classifier then read in
// pieces other than those written: store-forwarding stalls (perf/RESULTS.md, "Figures once
// in code comments").
#[inline(always)]
fn parse_ipv6(frame: &[u8], l3_offset: usize, beyond: usize) -> Result<IpPacket> {
    let packet = ipv6::Packet::new_checked_beyond(&frame[l3_offset..], beyond)?;
    let (protocol, ports) = ipv6_l4(&packet, frame.len(), l3_offset)?;
    Ok(IpPacket {
        l3_offset,
        destination: IpAddress::V6(u128::from(packet.destination())),
        source_scope: scope::source(IpAddress::V6(u128::from(packet.source()))),
        dscp: packet.dscp(),
        ecn: packet.ecn(),
        ttl: packet.hop_limit(),
        protocol,
        roce: ports.roce,
    })
}

/// The L4 protocol of an IPv6 packet (after the extension headers walked) and its L4 header,
/// checked whole; nothing when a fragment or an unknown chain hides it.
#[inline(always)]
fn ipv6_l4(packet: &ipv6::Packet<&[u8]>, frame_len: usize, l3_offset: usize) -> Result<(u8, L4)> {
    let (protocol, l4) = walk_extensions(packet.next_header(), packet.payload())?;
    let l4_beyond = (l3_offset + ipv6::HEADER_LEN + usize::from(packet.payload_len())).saturating_sub(frame_len);
    let ports = match l4 {
        Some(bytes) => parse_l4(protocol, bytes, l4_beyond)?,
        None => L4::default(),
    };
    Ok((protocol, ports))
}

/// The flow of an IP packet `parse` accepted, at `l3_offset` of `frame` (of which `beyond`
/// more bytes follow elsewhere, as for `parse_beyond`): a hash of its addresses, protocol,
/// ports and (RoCEv2) destination QP, and IPv6's flow label, stable per flow. Only group
/// routes need it (ECMP, flowlets), so the switch computes it when it picks a group's member,
/// not the parse for every frame. 0 for bytes `parse` would not accept.
pub fn flow_hash(frame: &[u8], l3_offset: usize, is_ipv6: bool, beyond: usize) -> u32 {
    let Some(l3) = frame.get(l3_offset..) else { return 0 };
    let words = if is_ipv6 {
        let Ok(packet) = ipv6::Packet::new_checked_beyond(l3, beyond) else { return 0 };
        let Ok((protocol, ports)) = ipv6_l4(&packet, frame.len(), l3_offset) else { return 0 };
        [
            fold128(u128::from(packet.source())),
            fold128(u128::from(packet.destination())),
            u32::from(protocol),
            ports.ports,
            ports.dest_qp,
            packet.flow_label(),
        ]
    } else {
        let Ok(packet) = ipv4::Packet::new_checked_beyond(l3, beyond) else { return 0 };
        let Ok(ports) = ipv4_l4(&packet, frame.len(), l3_offset) else { return 0 };
        let (source, destination) = (u32::from(packet.source()), u32::from(packet.destination()));
        // No flow label: its word is 0, which pairs with the QP as an odd word out would.
        [source, destination, u32::from(packet.protocol()), ports.ports, ports.dest_qp, 0]
    };
    hash_words(&words)
}

/// The L4 protocol and (source, destination) ports of an IP packet `parse` accepted, read
/// again from the frame: for the rare frames that need them (sorting punted frames into CoPP
/// classes), so the forwarding path does not carry them. `None` for a non-first fragment, an
/// unwalkable IPv6 chain, or a protocol other than TCP and UDP.
pub fn transport_ports(frame: &[u8], ip: &IpPacket, beyond: usize) -> Option<(u8, u16, u16)> {
    let is_ipv6 = matches!(ip.destination, IpAddress::V6(_));
    let (protocol, l4) = transport(frame, ip.l3_offset, is_ipv6, beyond)?;
    let l4 = l4?;
    let (source, destination) = l4.ports?;
    Some((protocol, source, destination))
}

/// An IP packet's L4 header as `transport` finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    /// (source, destination) ports of a TCP or UDP header that is whole in the frame.
    pub ports: Option<(u16, u16)>,
    /// A TCP header's flags byte (CWR to FIN).
    pub tcp_flags: Option<u8>,
}

/// The L4 protocol of the IP packet at `l3_offset` of a frame `parse` accepted (IPv6: after
/// the extension headers), and its transport header, `None` for a non-first fragment or an
/// unwalkable IPv6 chain. `None` overall when the IP header does not check.
pub fn transport(frame: &[u8], l3_offset: usize, is_ipv6: bool, beyond: usize) -> Option<(u8, Option<Transport>)> {
    let l3 = frame.get(l3_offset..)?;
    let (protocol, bytes, l3_len) = if is_ipv6 {
        let packet = ipv6::Packet::new_checked_beyond(l3, beyond).ok()?;
        let l3_len = ipv6::HEADER_LEN + usize::from(packet.payload_len());
        let payload = &l3[ipv6::HEADER_LEN..l3_len.min(l3.len())];
        match walk_extensions(packet.next_header(), payload).ok()? {
            (protocol, Some(bytes)) => (protocol, bytes, l3_len),
            (protocol, None) => return Some((protocol, None)),
        }
    } else {
        let packet = ipv4::Packet::new_checked_beyond(l3, beyond).ok()?;
        if packet.is_fragment() && u16::from_be_bytes([l3[6], l3[7]]) & 0x1fff != 0 {
            return Some((packet.protocol(), None));
        }
        let total_len = usize::from(packet.total_len());
        // The checked view vouches for these bounds (the payload ends with the buffer).
        (packet.protocol(), &l3[packet.header_len()..total_len.min(l3.len())], total_len)
    };
    let l4_beyond = l3_len.saturating_sub(l3.len());
    let transport = match protocol {
        ipv4::protocol::UDP => Transport {
            ports: udp::Datagram::new_checked_beyond(bytes, l4_beyond).ok().map(|d| (d.src_port(), d.dst_port())),
            tcp_flags: None,
        },
        ipv4::protocol::TCP => match tcp::Segment::new_checked(bytes) {
            // The flags are byte 13 of the header, which the checked view holds whole.
            Ok(segment) => {
                Transport { ports: Some((segment.src_port(), segment.dst_port())), tcp_flags: Some(bytes[13]) }
            }
            Err(_) => Transport { ports: None, tcp_flags: None },
        },
        _ => Transport { ports: None, tcp_flags: None },
    };
    Some((protocol, Some(transport)))
}

/// Walks hop-by-hop, routing, destination-options and fragment headers. Returns the final
/// protocol and, unless a non-first fragment or an unknown chain hides it, the L4 bytes.
fn walk_extensions(mut next: u8, mut bytes: &[u8]) -> Result<(u8, Option<&[u8]>)> {
    for _ in 0..MAX_IPV6_EXTENSIONS {
        match next {
            0 | 43 | 60 => {
                if bytes.len() < 8 {
                    return Err(WireError::Truncated);
                }
                let len = (usize::from(bytes[1]) + 1) * 8;
                if bytes.len() < len {
                    return Err(WireError::Truncated);
                }
                next = bytes[0];
                bytes = &bytes[len..];
            }
            44 => {
                if bytes.len() < 8 {
                    return Err(WireError::Truncated);
                }
                let offset_and_more = u16::from_be_bytes([bytes[2], bytes[3]]);
                next = bytes[0];
                if offset_and_more & 0xfff9 != 0 {
                    // A fragment: flows hash on addresses alone, like IPv4 fragments.
                    return Ok((next, None));
                }
                bytes = &bytes[8..];
            }
            _ => return Ok((next, Some(bytes))),
        }
    }
    Ok((next, None))
}

#[derive(Default)]
struct L4 {
    /// Source port << 16 | destination port.
    ports: u32,
    dest_qp: u32,
    roce: Option<Roce>,
}

#[inline(always)]
fn parse_l4(protocol: u8, bytes: &[u8], beyond: usize) -> Result<L4> {
    match protocol {
        ipv4::protocol::UDP => {
            let datagram = udp::Datagram::new_checked_beyond(bytes, beyond)?;
            let ports = u32::from(datagram.src_port()) << 16 | u32::from(datagram.dst_port());
            if datagram.dst_port() != udp::ROCEV2_PORT {
                return Ok(L4 { ports, ..L4::default() });
            }
            // The payload's length as declared (the bytes at hand may end sooner, in a chain).
            let payload_len = usize::from(datagram.len()) - udp::HEADER_LEN;
            if payload_len < bth::HEADER_LEN + bth::ICRC_LEN {
                return Err(WireError::Truncated);
            }
            let payload = datagram.payload();
            let header = bth::Header::new_checked(payload)?;
            let roce = Roce { opcode: header.opcode(), dest_qp: header.dest_qp() };
            Ok(L4 { ports, dest_qp: roce.dest_qp, roce: Some(roce) })
        }
        ipv4::protocol::TCP => {
            let segment = tcp::Segment::new_checked(bytes)?;
            Ok(L4 { ports: u32::from(segment.src_port()) << 16 | u32::from(segment.dst_port()), ..L4::default() })
        }
        _ => Ok(L4::default()),
    }
}

fn fold128(value: u128) -> u32 {
    (value as u32) ^ ((value >> 32) as u32) ^ ((value >> 64) as u32) ^ ((value >> 96) as u32)
}

/// A deterministic hash of the flow's words, so replays hash the same on every machine and
/// run. Not keyed: ECMP needs spread, not resistance to chosen collisions. Words are folded
/// two at a time into 64-bit multiplies and finished with a xor-shift-multiply (the
/// SplitMix64 finaliser), so every input bit reaches the top 32 bits that are returned.
/// Murmur3's per-word mix, used before, showed as a larger share of a live frame's cycles in
/// `perf` profiles.
#[inline(always)]
fn hash_words(words: &[u32]) -> u32 {
    const K: u64 = crate::rng::GOLDEN_GAMMA;
    let mut hash: u64 = K;
    for pair in words.chunks(2) {
        let word = u64::from(pair[0]) | u64::from(pair.get(1).copied().unwrap_or(0)) << 32;
        hash = (hash ^ word).wrapping_mul(K).rotate_left(29);
    }
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    (hash >> 32) as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::checksum::internet_checksum;

    /// A RoCEv2 SEND-only frame: 10.0.0.1 -> 10.0.1.2, DSCP 26 ECT(0), TTL 64, UDP 49152 ->
    /// 4791, BTH to QP 0x11, 4-byte ICRC; optionally behind one 802.1Q tag with PCP 3.
    pub(crate) fn rocev2_frame(vlan: bool) -> Vec<u8> {
        let mut frame = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0x10, 0x01];
        if vlan {
            frame.extend_from_slice(&[0x81, 0x00, 0x60, 0x64]);
        }
        frame.extend_from_slice(&[0x08, 0x00]);
        let ip_start = frame.len();
        frame.extend_from_slice(&[
            0x45, 0x6a, 0x00, 0x2c, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0, 1, 2,
        ]);
        frame.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0x00, 0x18, 0x00, 0x00]);
        frame.extend_from_slice(&[0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05]);
        frame.extend_from_slice(&[0x11, 0x22, 0x33, 0x44]);
        let sum = internet_checksum(&frame[ip_start..ip_start + 20]);
        frame[ip_start + 10..ip_start + 12].copy_from_slice(&sum.to_be_bytes());
        frame
    }

    #[test]
    fn the_untagged_ipv4_shortcut_names_the_same_ethertype() {
        assert_eq!(u16::from(EtherType::Ipv4), IPV4_NUMBER);
    }

    #[test]
    fn rocev2_over_ipv4() {
        let parsed = parse(&rocev2_frame(false)).unwrap();
        assert_eq!(parsed.pcp, None);
        let Payload::Ip(ip) = parsed.payload else { panic!("not IP") };
        assert_eq!(ip.l3_offset, 14);
        assert_eq!(ip.destination, IpAddress::V4(0x0a00_0102));
        assert_eq!((ip.dscp, ip.ecn, ip.ttl, ip.protocol), (26, 0b10, 64, 17));
        assert_eq!(ip.roce, Some(Roce { opcode: 0x04, dest_qp: 0x11 }));
    }

    #[test]
    fn vlan_tag_gives_pcp_and_shifts_l3() {
        let parsed = parse(&rocev2_frame(true)).unwrap();
        assert_eq!(parsed.pcp, Some(3));
        let Payload::Ip(ip) = parsed.payload else { panic!("not IP") };
        assert_eq!(ip.l3_offset, 18);
        // The tag does not change the flow.
        assert_eq!(hash_of(&rocev2_frame(true)), hash_of(&rocev2_frame(false)));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let frame = rocev2_frame(true);
        for len in 0..frame.len() {
            assert!(parse(&frame[..len]).is_err(), "length {len} parsed");
        }
    }

    #[test]
    fn corrupted_checksum_is_rejected() {
        let mut frame = rocev2_frame(false);
        frame[14 + 11] ^= 1;
        assert_eq!(parse(&frame).err(), Some(WireError::BadChecksum));
    }

    #[test]
    fn three_tags_are_too_many() {
        let mut frame = vec![0u8; 12];
        for _ in 0..3 {
            frame.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.resize(80, 0);
        assert_eq!(parse(&frame).err(), Some(WireError::TooManyTags));
    }

    #[test]
    fn pfc_and_other_ethertypes() {
        let mut frame = vec![0x01, 0x80, 0xc2, 0, 0, 0x01, 2, 0, 0, 0, 0, 9, 0x88, 0x08, 0x01, 0x01, 0x00, 0x18];
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x00, 0x10, 0x00, 0x20, 0, 0, 0, 0, 0, 0]);
        frame.resize(60, 0);
        let parsed = parse(&frame).unwrap();
        let Payload::FlowControl(repr) = parsed.payload else { panic!("not PFC") };
        assert_eq!(repr.class_enable, 0x18);
        assert_eq!((repr.times[3], repr.times[4]), (0x10, 0x20));

        // The same frame to another address, or behind a VLAN tag, is not PFC.
        let mut unicast = frame.clone();
        unicast[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(parse(&unicast).unwrap().payload, Payload::NotRoutable(EtherType::MacControl));
        let mut tagged = frame[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x64]);
        tagged.extend_from_slice(&frame[12..]);
        assert_eq!(parse(&tagged).unwrap().payload, Payload::NotRoutable(EtherType::MacControl));

        // 802.3x PAUSE: its one time.
        let mut pause = frame[..14].to_vec();
        pause.extend_from_slice(&[0x00, 0x01, 0x12, 0x34]);
        pause.resize(60, 0);
        assert_eq!(parse(&pause).unwrap().payload, Payload::LinkPause(0x1234));
        // PAUSE may go to a station's unicast address too (802.3 Annex 31B; whose, the
        // classifier checks), never to another group address.
        let mut unicast_pause = pause.clone();
        unicast_pause[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(parse(&unicast_pause).unwrap().payload, Payload::LinkPause(0x1234));
        unicast_pause[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(parse(&unicast_pause).unwrap().payload, Payload::NotRoutable(EtherType::MacControl));
        // Another opcode (GATE) is not flow control.
        pause[15] = 0x02;
        assert_eq!(parse(&pause).unwrap().payload, Payload::NotRoutable(EtherType::MacControl));

        let mut arp = vec![0xff; 6];
        arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
        arp.resize(60, 0);
        assert_eq!(parse(&arp).unwrap().payload, Payload::NotRoutable(EtherType::Unknown(0x0806)));

        // `flow_control` answers what `parse` does, for PFC and everything else.
        assert_eq!(flow_control(&frame), Some(repr));
        for other in [&unicast, &tagged, &pause, &arp, &rocev2_frame(false), &frame[..13].to_vec()] {
            assert_eq!(flow_control(other), None);
        }
    }

    #[test]
    fn ipv6_tcp_through_a_hop_by_hop_header() {
        let mut frame = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0x10, 0x01, 0x86, 0xdd];
        frame.extend_from_slice(&[0x60, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x40]);
        frame.extend_from_slice(&"2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        frame.extend_from_slice(&"2001:db8:1::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
        // Hop-by-hop: next TCP, length 0 (8 bytes), PadN padding.
        frame.extend_from_slice(&[0x06, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00]);
        frame.extend_from_slice(&[0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        let Payload::Ip(ip) = parse(&frame).unwrap().payload else { panic!("not IP") };
        assert_eq!(ip.protocol, 6);
        assert_eq!(ip.ttl, 64);
        assert_eq!(ip.destination, IpAddress::V6(u128::from("2001:db8:1::2".parse::<std::net::Ipv6Addr>().unwrap())));
        // Another TCP source port is another flow.
        let mut other = frame.clone();
        other[14 + 40 + 8 + 1] = 0x3a;
        assert_ne!(hash_of(&frame), hash_of(&other));
        // A hop-by-hop header that claims more bytes than there are is malformed.
        frame[14 + 40 + 1] = 9;
        assert!(parse(&frame).is_err());
    }

    #[test]
    fn transport_ports_are_read_again_through_extensions_but_not_from_later_fragments() {
        let ports = |frame: &[u8]| {
            let Payload::Ip(ip) = parse(frame).unwrap().payload else { panic!("not IP") };
            transport_ports(frame, &ip, 0)
        };
        assert_eq!(ports(&rocev2_frame(true)), Some((17, 49152, 4791)));
        // IPv6 TCP 12345 -> 80 behind a hop-by-hop header.
        let mut v6 = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0x10, 0x01, 0x86, 0xdd];
        v6.extend_from_slice(&[0x60, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x40]);
        v6.extend_from_slice(&[0xfd; 32]);
        v6.extend_from_slice(&[0x06, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00]);
        v6.extend_from_slice(&[0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(ports(&v6), Some((6, 12345, 80)));
        // ICMPv6 instead of TCP: no ports.
        v6[14 + 40] = 58;
        assert_eq!(ports(&v6), None);
        // A first IPv4 fragment (MF set) still has its UDP header; a later one does not.
        let mut first = rocev2_frame(false);
        let refill = |frame: &mut Vec<u8>, flags: u16| {
            frame[14 + 6..14 + 8].copy_from_slice(&flags.to_be_bytes());
            frame[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
            let sum = internet_checksum(&frame[14..14 + 20]);
            frame[14 + 10..14 + 12].copy_from_slice(&sum.to_be_bytes());
        };
        refill(&mut first, 0x2000);
        assert_eq!(ports(&first), Some((17, 49152, 4791)));
        let mut later = rocev2_frame(false);
        refill(&mut later, 0x0001);
        assert_eq!(ports(&later), None);
    }

    #[test]
    fn a_rocev2_datagram_without_its_icrc_is_truncated() {
        // The BTH whole but no room for the 4-byte ICRC: IP length 40, UDP length 20.
        let mut frame = rocev2_frame(false);
        frame.truncate(frame.len() - 4);
        frame[14 + 2..14 + 4].copy_from_slice(&40u16.to_be_bytes());
        frame[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
        let sum = internet_checksum(&frame[14..14 + 20]);
        frame[14 + 10..14 + 12].copy_from_slice(&sum.to_be_bytes());
        frame[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&20u16.to_be_bytes());
        assert_eq!(parse(&frame).err(), Some(WireError::Truncated));
    }

    /// The flow hash of an IP frame `parse` accepts, whole in `frame`.
    fn hash_of(frame: &[u8]) -> u32 {
        let Payload::Ip(ip) = parse(frame).unwrap().payload else { panic!("not IP") };
        flow_hash(frame, ip.l3_offset, matches!(ip.destination, IpAddress::V6(_)), 0)
    }

    #[test]
    fn flows_hash_apart() {
        let mut a = rocev2_frame(false);
        let first = hash_of(&a);
        a[14 + 20 + 8 + 7] = 0x12; // another destination QP, same 5-tuple
        assert_ne!(first, hash_of(&a));
        // Plain UDP (not to 4791): the ports alone tell flows apart.
        let mut udp = rocev2_frame(false);
        udp[14 + 20 + 2..14 + 20 + 4].copy_from_slice(&[0x12, 0x34]);
        let first = hash_of(&udp);
        udp[14 + 20 + 1] = 0x01; // another source port
        assert_ne!(first, hash_of(&udp));
        let Payload::Ip(ip) = parse(&udp).unwrap().payload else { panic!() };
        assert_eq!(ip.roce, None);
    }

    /// The hash is of the flow's words, as replays and fabrics of earlier versions hashed
    /// them: 10.0.0.1 -> 10.0.1.2, UDP, ports 49152 -> 4791, QP 0x11 (IPv4 has no sixth
    /// word); a later IPv4 fragment hashes on addresses and protocol alone.
    #[test]
    fn the_flow_hash_is_of_the_flows_words() {
        let words = [0x0a00_0001, 0x0a00_0102, 17, 49152 << 16 | 4791, 0x11];
        assert_eq!(hash_of(&rocev2_frame(false)), hash_words(&words));
        assert_eq!(hash_of(&rocev2_frame(false)), 0x22cd_7281);
        let mut later = rocev2_frame(false);
        later[14 + 6..14 + 8].copy_from_slice(&0x0001u16.to_be_bytes());
        crate::wire::ipv4::Packet::new_unchecked(&mut later[14..]).fill_checksum();
        assert_eq!(hash_of(&later), hash_words(&[0x0a00_0001, 0x0a00_0102, 17, 0, 0]));
        // Bytes parse would not take hash to 0.
        assert_eq!(flow_hash(&rocev2_frame(false)[..30], 14, false, 0), 0);
        assert_eq!(flow_hash(&rocev2_frame(false), 14, true, 0), 0);
    }

    /// A RoCE frame of 9,000 bytes parses from its first 2,048 bytes (a chained mbuf's first
    /// segment) as it does whole, over IPv4 and IPv6, with and without a VLAN tag; what the
    /// headers declare is checked against the whole frame.
    #[test]
    fn a_chained_frame_parses_from_its_first_segment_as_it_does_whole() {
        use crate::traffic::frames::{FrameSpec, Transport};
        let v4 = FrameSpec {
            frame_len: 9000,
            ..FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7)
        };
        let v6 = FrameSpec {
            source: "fd00::1".parse().unwrap(),
            destination: "fd00:1::2".parse().unwrap(),
            vlan: Some((3, 100)),
            ..v4.clone()
        };
        let tcp = FrameSpec { transport: Transport::Tcp { source: 1, destination: 179 }, ..v4.clone() };
        for spec in [v4, v6, tcp] {
            let frame = spec.build();
            assert_eq!(frame.len(), 9000);
            let whole = parse(&frame).unwrap();
            let head = &frame[..2048];
            assert_eq!(parse_beyond(head, frame.len() - head.len()).unwrap(), whole);
            let Payload::Ip(ip) = whole.payload else { panic!("not IP") };
            assert_eq!(transport_ports(head, &ip, frame.len() - head.len()), transport_ports(&frame, &ip, 0));
            let is_ipv6 = matches!(ip.destination, IpAddress::V6(_));
            let whole_hash = flow_hash(&frame, ip.l3_offset, is_ipv6, 0);
            assert_eq!(flow_hash(head, ip.l3_offset, is_ipv6, frame.len() - head.len()), whole_hash);
            // Shorter than its headers say: truncated, in one buffer or in a chain.
            assert_eq!(parse(&frame[..8999]), Err(WireError::Truncated));
            assert_eq!(parse_beyond(head, frame.len() - head.len() - 1), Err(WireError::Truncated));
            // Headers must be in the first segment.
            assert_eq!(parse_beyond(&frame[..40], frame.len() - 40), Err(WireError::Truncated));
        }
    }

    /// A UDP length past the end of its IP packet is truncated, whether the bytes after the
    /// packet are padding in one buffer or the rest of a chain.
    #[test]
    fn a_udp_length_past_its_ip_packet_is_truncated() {
        use crate::traffic::frames::FrameSpec;
        let v4 = FrameSpec {
            frame_len: 300,
            ..FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7)
        };
        let v6 =
            FrameSpec { source: "fd00::1".parse().unwrap(), destination: "fd00:1::2".parse().unwrap(), ..v4.clone() };
        for (spec, udp) in [(v4, 34), (v6, 54)] {
            let mut frame = spec.build();
            let ip_end = frame.len();
            let Ok(ParsedFrame { payload: Payload::Ip(ip), .. }) = parse(&frame) else { panic!("not IP") };
            let declared = u16::from_be_bytes([frame[udp + 4], frame[udp + 5]]);
            frame[udp + 4..udp + 6].copy_from_slice(&(declared + 1).to_be_bytes());
            frame.resize(ip_end + 64, 0);
            assert_eq!(parse(&frame), Err(WireError::Truncated), "padding is not the datagram's");
            assert_eq!(parse_beyond(&frame[..100], frame.len() - 100), Err(WireError::Truncated), "nor a chain's rest");
            assert_eq!(transport_ports(&frame, &ip, 0), None);
            assert_eq!(transport_ports(&frame[..100], &ip, frame.len() - 100), None);
        }
    }

    /// Wherever a frame is split, its head parses as the whole frame does, or is truncated
    /// (a header crosses the split); never another answer, never a panic.
    #[test]
    fn a_head_parses_as_the_whole_frame_or_not_at_all() {
        let mut frames = vec![rocev2_frame(false), rocev2_frame(true)];
        let tcp = crate::traffic::frames::FrameSpec {
            source: "fd00::1".parse().unwrap(),
            destination: "fd00:1::2".parse().unwrap(),
            transport: crate::traffic::frames::Transport::Tcp { source: 9, destination: 179 },
            frame_len: 200,
            ..crate::traffic::frames::FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 1)
        };
        frames.push(tcp.build());
        for frame in &frames {
            let whole = parse(frame);
            assert!(whole.is_ok());
            for split in 0..=frame.len() {
                let head = parse_beyond(&frame[..split], frame.len() - split);
                assert!(head == whole || head == Err(WireError::Truncated), "split at {split}: {head:?}");
            }
        }
    }

    /// `frame` with its IPv4 header (at 14, of the length its IHL says) summing to all ones,
    /// where the frame holds that header and it reaches the checksum field.
    pub(crate) fn with_checksum(mut frame: Vec<u8>) -> Vec<u8> {
        let header_len = usize::from(frame.get(14).map_or(0, |ihl| ihl & 0x0f)) * 4;
        if header_len >= 12 && frame.len() >= 14 + header_len {
            frame[24..26].copy_from_slice(&[0, 0]);
            let sum = internet_checksum(&frame[14..14 + header_len]);
            frame[24..26].copy_from_slice(&sum.to_be_bytes());
        }
        frame
    }

    /// The frames the plain view is for: RoCEv2, UDP, TCP, ICMP, a bare header; with and
    /// without a datagram past the bytes at hand.
    fn plain_frames() -> Vec<(Vec<u8>, usize)> {
        let roce = rocev2_frame(false);
        let mut udp = roce.clone();
        udp[36..38].copy_from_slice(&5000u16.to_be_bytes());
        let mut tcp = roce[..34].to_vec();
        tcp[23] = ipv4::protocol::TCP;
        tcp[16..18].copy_from_slice(&40u16.to_be_bytes());
        tcp.extend_from_slice(&[0xc0, 0x01, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0x01, 0x00, 0, 0, 0, 0]);
        let mut icmp = roce[..34].to_vec();
        icmp[23] = 1;
        icmp[16..18].copy_from_slice(&28u16.to_be_bytes());
        icmp.extend_from_slice(&[8, 0, 0xf7, 0xff, 0, 0, 0, 0]);
        // A header and nothing after it, in a frame Ethernet's minimum pads.
        let mut bare = roce[..34].to_vec();
        bare[23] = 59;
        bare[16..18].copy_from_slice(&20u16.to_be_bytes());
        bare.resize(60, 0);
        let mut chained = roce.clone();
        chained[16..18].copy_from_slice(&1044u16.to_be_bytes());
        chained[38..40].copy_from_slice(&1024u16.to_be_bytes());
        [(roce, 0), (udp, 0), (tcp, 0), (icmp, 0), (bare, 0), (chained, 1000)]
            .into_iter()
            .map(|(frame, beyond)| (with_checksum(frame), beyond))
            .collect()
    }

    #[test]
    fn the_plain_view_takes_the_common_frames_with_the_facts_parse_gives() {
        for (frame, beyond) in plain_frames() {
            let plain = plain_ipv4(&frame, beyond).expect("a plain frame");
            assert_eq!(plain, PlainIpv4 { destination: 0x0a00_0102, dscp: 26, ecn: 0b10, ttl: 64 });
            assert!(matches!(parse_beyond(&frame, beyond), Ok(ParsedFrame { pcp: None, payload: Payload::Ip(_) })));
        }
    }

    #[test]
    fn the_plain_view_leaves_every_other_frame_to_parse() {
        let roce = with_checksum(rocev2_frame(false));
        let changed = |at: usize, value: u8| {
            let mut frame = roce.clone();
            frame[at] = value;
            with_checksum(frame)
        };
        let mut bad_checksum = roce.clone();
        bad_checksum[25] ^= 1;
        let others = [
            ("tagged", with_checksum(rocev2_frame(true))),
            ("options", changed(14, 0x46)),
            ("version 6", changed(14, 0x65)),
            ("more fragments", changed(20, 0x20)),
            ("a later fragment", changed(21, 0x08)),
            ("a loopback source", changed(26, 127)),
            ("a link-local destination", changed(30, 169)),
            ("a multicast destination", changed(30, 224)),
            ("a bad checksum", bad_checksum),
            ("short of the ICRC", changed(39, 0x17)),
            ("a UDP length past the packet", changed(39, 0x19)),
            ("a total length past the frame", changed(17, 0x2d)),
            ("a total length short of the header", changed(17, 19)),
            ("42 bytes", roce[..42].to_vec()),
        ];
        let (tcp, _) = plain_frames().swap_remove(2);
        let tcp_offset = |offset: u8| {
            let mut frame = tcp.clone();
            frame[46] = offset << 4 | (frame[46] & 0x0f);
            frame
        };
        let others = others.into_iter().chain([
            ("a TCP header shorter than 20 bytes", tcp_offset(4)),
            ("a TCP header longer than the packet", tcp_offset(6)),
            ("a TCP header cut short", {
                let mut frame = tcp[..53].to_vec();
                frame[16..18].copy_from_slice(&39u16.to_be_bytes());
                with_checksum(frame)
            }),
        ]);
        for (what, frame) in others {
            assert_eq!(plain_ipv4(&frame, 0), None, "{what}");
        }
    }

    proptest::proptest! {
        /// Whatever the plain view takes, `parse_beyond` takes with the same facts: frames
        /// of every kind above with bytes changed, cut short, or said to go on, most with
        /// their checksum made good again.
        #[test]
        fn the_plain_view_takes_only_what_parse_takes_and_says_the_same(
            kind in 0usize..6,
            changes in proptest::collection::vec((0usize..64, proptest::prelude::any::<u8>()), 0..4),
            cut in proptest::prop_oneof![proptest::strategy::Just(0usize), 0usize..24],
            beyond in proptest::prop_oneof![proptest::strategy::Just(0usize), 0usize..2000],
            fix in proptest::prelude::any::<bool>(),
        ) {
            let (mut frame, _) = plain_frames().swap_remove(kind);
            for (at, value) in changes {
                if let Some(byte) = frame.get_mut(at) {
                    *byte = value;
                }
            }
            frame.truncate(frame.len().saturating_sub(cut));
            if fix {
                frame = with_checksum(frame);
            }
            if let Some(plain) = plain_ipv4(&frame, beyond) {
                let parsed = parse_beyond(&frame, beyond);
                let Ok(ParsedFrame { pcp: None, payload: Payload::Ip(ip) }) = parsed else {
                    return Err(proptest::test_runner::TestCaseError::fail(format!("parse said {parsed:?}")));
                };
                proptest::prop_assert_eq!(ip.l3_offset, ethernet::HEADER_LEN);
                proptest::prop_assert_eq!(ip.destination, IpAddress::V4(plain.destination));
                proptest::prop_assert_eq!(ip.source_scope, SourceScope::Routable);
                proptest::prop_assert_eq!(scope::destination(ip.destination), scope::DestinationScope::Routable);
                proptest::prop_assert_eq!((ip.dscp, ip.ecn, ip.ttl), (plain.dscp, plain.ecn, plain.ttl));
            }
        }
    }
}
