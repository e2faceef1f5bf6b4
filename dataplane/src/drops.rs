//! Why the switch dropped a packet: one `Copy` enum shared by counters, logs and stats JSON.
//!
//! Invariant: every packet the switch receives is forwarded, consumed (PFC), punted to the
//! control plane (counted by `punt::CoppClass`) or counted under exactly one of these
//! reasons; `ALL` lists each reason once, in stats JSON order.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// The frame failed to parse: truncated, lying lengths, bad IPv4 checksum, too many tags.
    Malformed,
    /// A well-formed frame the switch does not route: not IPv4/IPv6 (ARP, LLDP, ...), or a MAC
    /// control frame that is not PFC or PAUSE (another opcode, a destination other than
    /// 01:80:C2:00:00:01, or a VLAN tag). Never acted on.
    Unsupported,
    /// No route matches the destination, the route discards, or every port it leads to is
    /// disabled or down.
    NoRoute,
    /// TTL or hop limit would reach zero.
    TtlExpired,
    /// A lossy frame over its egress queue's dynamic limit (lossy_alpha x the free lossy pool)
    /// or the lossy pool itself (tail drop), or a frame still queued at shutdown.
    BufferFull,
    /// A lossless priority overflowed its PFC headroom.
    HeadroomOverflow,
    /// Dropped by the PFC watchdog during a pause storm.
    PfcWatchdog,
    /// A non-ECT frame on a lossy class that its ECN/WRED profile said to mark.
    Wred,
    /// An IP packet longer than `switch.mtu`: the switch does not fragment.
    Oversize,
    /// An 802.3x PAUSE frame. raceway's ports run PFC, and PFC and link-level PAUSE are
    /// exclusive on a port (as on switches that refuse to enable both): counted, never obeyed.
    PauseIgnored,
    /// A frame for the control plane over the rate of its port and CoPP class
    /// (`[control.copp.<class>]`; `policed` breaks these down by class).
    PuntPoliced,
    /// A frame for the control plane that found the queue to it full.
    PuntQueueFull,
}

impl DropReason {
    pub const COUNT: usize = 12;
    pub const ALL: [DropReason; Self::COUNT] = [
        Self::Malformed,
        Self::Unsupported,
        Self::NoRoute,
        Self::TtlExpired,
        Self::BufferFull,
        Self::HeadroomOverflow,
        Self::PfcWatchdog,
        Self::Wred,
        Self::Oversize,
        Self::PauseIgnored,
        Self::PuntPoliced,
        Self::PuntQueueFull,
    ];

    /// The name used in stats JSON and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Unsupported => "unsupported",
            Self::NoRoute => "no_route",
            Self::TtlExpired => "ttl_expired",
            Self::BufferFull => "buffer_full",
            Self::HeadroomOverflow => "headroom_overflow",
            Self::PfcWatchdog => "pfc_watchdog",
            Self::Wred => "wred",
            Self::Oversize => "oversize",
            Self::PauseIgnored => "pause_ignored",
            Self::PuntPoliced => "punt_policed",
            Self::PuntQueueFull => "punt_queue_full",
        }
    }

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
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }
}
