//! Why the switch dropped a packet: one `Copy` enum shared by counters, logs and stats JSON.
//!
//! Invariant: every packet the switch receives is forwarded, consumed (PFC), punted to the
//! control plane (counted by `config::CoppClass`) or counted under exactly one of these
//! reasons; `ALL` lists each reason once, in stats JSON order.

/// Defines `DropReason` from one list, so a reason is added in one place: its variant, its
/// name in stats JSON, metrics and logs, and its place in `ALL` (the stats JSON order).
/// `COUNT` and `ALL` follow from the list, so they cannot disagree with it.
macro_rules! drop_reasons {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum DropReason {
            $($(#[doc = $doc])* $variant,)*
        }

        impl DropReason {
            pub const COUNT: usize = [$($name),*].len();
            pub const ALL: [DropReason; Self::COUNT] = [$(Self::$variant),*];

            /// The name used in stats JSON and logs.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// The frame failed to parse: truncated, lying lengths, bad IPv4 checksum, too many tags.
    Malformed => "malformed";
    /// A well-formed frame the switch does not route: not IPv4/IPv6 (ARP, LLDP, ...), or a MAC
    /// control frame that is not PFC or PAUSE (another opcode, a destination other than
    /// 01:80:C2:00:00:01, or a VLAN tag). Never acted on.
    Unsupported => "unsupported";
    /// No route matches the destination, without `[control]` (with it, the kernel answers
    /// with its ICMP unreachable: CoPP class `unreachable`); or, without `[control]`, a
    /// destination only a control plane takes (the switch's addresses, IPv6 link-local).
    NoRoute => "no_route";
    /// A frame to a unicast MAC other than the switch's, or one that would be routed but came
    /// to a broadcast or multicast MAC (RFC 1812 §5.3.4): a router takes only what is sent to
    /// it.
    NotRouterMac => "not_router_mac";
    /// Multicast beyond the link (IPv4 outside 224.0.0.0/24, IPv6 of a scope wider than the
    /// link): raceway does not route multicast. Without `[control]`, link-scope multicast and
    /// the limited broadcast too, which only a control plane takes.
    Multicast => "multicast";
    /// A source or destination no router accepts (RFC 1812 §5.3.7, RFC 4291 §2.5, §2.7):
    /// IPv4 0/8, 127/8, 240/4, multicast or limited broadcast as a source; IPv6 ::1,
    /// IPv4-mapped, multicast as a source, multicast of the reserved or interface-local
    /// scope, :: as a destination. And, in a packet that would be routed, a link-local source
    /// or an IPv4 link-local destination (169.254/16, RFC 3927 §2.7) or the unspecified
    /// source; these reach the switch itself.
    Martian => "martian";
    /// The destination's route is a `blackhole` (the kernel's, mirrored).
    Blackhole => "blackhole";
    /// TTL or hop limit would reach zero.
    TtlExpired => "ttl_expired";
    /// A lossy frame over its egress queue's dynamic limit (lossy_alpha x the free lossy pool)
    /// or the lossy pool itself (tail drop), or a frame still queued at shutdown.
    BufferFull => "buffer_full";
    /// A lossless priority overflowed its PFC headroom.
    HeadroomOverflow => "headroom_overflow";
    /// Dropped by the PFC watchdog during a pause storm.
    PfcWatchdog => "pfc_watchdog";
    /// A non-ECT frame on a lossy class that its ECN/WRED profile said to mark.
    Wred => "wred";
    /// An IP packet longer than its egress port's MTU, without `[control]` (with it, the kernel
    /// sends the ICMP error or fragments: CoPP class `mtu`).
    Oversize => "oversize";
    /// A frame for the control plane over the rate of its port and CoPP class
    /// (`[control.copp.<class>]`; `policed` breaks these down by class).
    PuntPoliced => "punt_policed";
    /// A frame for the control plane that found the queue to it full.
    PuntQueueFull => "punt_queue_full";
    /// A frame for the control plane from a source its CoPP class does not take
    /// (`[control.acl]`: by default BGP and BFD only from the port's known neighbours);
    /// `refused` breaks these down by class. Dropped before the class's policer.
    ControlAcl => "control_acl";
    /// A frame for a port whose link is down or that is administratively down, one received
    /// on an administratively down port, or one queued on a port when its link went down
    /// (flushed, not held). Groups skip such members, so this counts frames with no other way.
    LinkDown => "link_down";
    /// A rule of an `[[acl]]` table bound to the port (at ingress, or the egress port's at
    /// egress) said to drop it; the rule's own counters say which.
    Acl => "acl";
}

impl DropReason {
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_each_reason_at_its_index() {
        for (index, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), index);
        }
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        // Sorted first: `dedup` only removes neighbours.
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }
}
