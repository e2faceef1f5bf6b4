//! Punting: frames the data plane hands to the control plane (the Linux kernel in the switch's
//! namespace) instead of forwarding, why, and the per-port policer that keeps a flood of them
//! from reaching the kernel (SONiC's CoPP does the same).
//!
//! The classifier says why a frame is for the control plane (`PuntReason`); the switch polices
//! it per ingress port with a token bucket (`[control] punt_pps`, `punt_burst`) in the frame's
//! arrival time, so a replay polices exactly as a live run at the same times. What passes waits
//! in a bounded outbox the engine drains after each burst.
//!
//! Invariant: a punted frame is counted exactly once: as `punted` under its reason when the
//! outbox takes it, or as a drop (`punt_policed` over the rate, `punt_queue_full` when the
//! outbox is full). The policer and the outbox never allocate after construction.

use std::collections::VecDeque;

/// Why a frame goes to the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PuntReason {
    /// ARP (EtherType 0x0806): the kernel answers for the port's addresses and learns MACs.
    Arp,
    /// IPv6 neighbour discovery: router/neighbour solicitations and advertisements, redirects.
    Nd,
    /// IP to one of the switch's addresses, or link-local (IPv6 fe80::/10, or multicast that
    /// stays on the link): ping, BGP, SSH, other ICMPv6.
    Local,
    /// TTL or hop limit 1 or less: the kernel sends the ICMP time-exceeded.
    Ttl,
    /// A routed frame whose next hop has no resolved neighbour: the kernel resolves it.
    Glean,
    /// LLDP (EtherType 0x88cc).
    Lldp,
    /// An EtherType listed in `[control] punt_ethertypes`.
    Other,
}

impl PuntReason {
    pub const COUNT: usize = 7;
    pub const ALL: [PuntReason; Self::COUNT] =
        [Self::Arp, Self::Nd, Self::Local, Self::Ttl, Self::Glean, Self::Lldp, Self::Other];

    /// The name used in stats JSON, metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Arp => "arp",
            Self::Nd => "nd",
            Self::Local => "local",
            Self::Ttl => "ttl",
            Self::Glean => "glean",
            Self::Lldp => "lldp",
            Self::Other => "other",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A token bucket in frames: `rate_pps` tokens per second up to `burst`, one per frame. Time is
/// the caller's (ps), so replay and live police alike. Tokens are kept as ps of credit (one
/// token = 1e12 / rate_pps ps), so no fractions are lost between frames.
#[derive(Debug, Clone)]
pub struct Policer {
    ps_per_token: u64,
    /// Capacity: burst x ps_per_token.
    depth_ps: u64,
    credit_ps: u64,
    last_ps: u64,
}

impl Policer {
    /// A full bucket. `rate_pps` and `burst` are at least 1 (config validation).
    pub fn new(rate_pps: u64, burst: u64) -> Self {
        let ps_per_token = (1_000_000_000_000 / rate_pps.max(1)).max(1);
        let depth_ps = ps_per_token.saturating_mul(burst.max(1));
        Self { ps_per_token, depth_ps, credit_ps: depth_ps, last_ps: 0 }
    }

    /// Takes a token at `now` (ps) if there is one.
    #[inline]
    pub fn admit(&mut self, now: u64) -> bool {
        self.credit_ps = self.credit_ps.saturating_add(now.saturating_sub(self.last_ps)).min(self.depth_ps);
        self.last_ps = self.last_ps.max(now);
        if self.credit_ps >= self.ps_per_token {
            self.credit_ps -= self.ps_per_token;
            true
        } else {
            false
        }
    }
}

/// A frame on its way to the control plane.
#[derive(Debug)]
pub struct Punted<P> {
    pub port: usize,
    pub reason: PuntReason,
    pub packet: P,
}

/// Frames punted during a burst, until the engine takes them. Bounded, allocated up front.
pub struct Outbox<P> {
    frames: VecDeque<Punted<P>>,
    capacity: usize,
}

impl<P> Outbox<P> {
    pub fn new(capacity: usize) -> Self {
        Self { frames: VecDeque::with_capacity(capacity), capacity }
    }

    /// Takes a frame; gives it back when full.
    #[inline]
    pub fn push(&mut self, punted: Punted<P>) -> Result<(), Punted<P>> {
        if self.frames.len() == self.capacity {
            return Err(punted);
        }
        self.frames.push_back(punted);
        Ok(())
    }

    #[inline]
    pub fn pop(&mut self) -> Option<Punted<P>> {
        self.frames.pop_front()
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    #[test]
    fn all_lists_each_reason_at_its_index_with_distinct_names() {
        for (index, reason) in PuntReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), index);
        }
        let mut names: Vec<_> = PuntReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PuntReason::COUNT);
    }

    #[test]
    fn a_full_bucket_passes_its_burst_then_the_rate() {
        // 1,000 pps, burst 10: at t = 5 ms, 10 pass at once, the 11th does not.
        let mut policer = Policer::new(1_000, 10);
        let now = 5 * MS;
        assert_eq!((0..10).filter(|_| policer.admit(now)).count(), 10);
        assert!(!policer.admit(now));
        // One token per ms after that.
        assert!(!policer.admit(now + MS - 1));
        assert!(policer.admit(now + MS));
        assert!(!policer.admit(now + MS));
        // Over one second of a flood at 100 frames per ms, exactly the rate passes.
        let start = 100 * MS;
        let mut passed = 0;
        let mut policer = Policer::new(1_000, 10);
        for frame in 0..100_000u64 {
            passed += u64::from(policer.admit(start + frame * MS / 100));
        }
        // The burst of 10 at the start, then one per ms for 999.99 ms.
        assert_eq!(passed, 10 + 999);
    }

    #[test]
    fn an_idle_bucket_refills_to_its_burst_and_no_further() {
        let mut policer = Policer::new(2_000, 4);
        let now = 10 * MS;
        assert_eq!((0..10).filter(|_| policer.admit(now)).count(), 4);
        // Half a ms later: one token (2 per ms).
        assert_eq!((0..10).filter(|_| policer.admit(now + MS / 2)).count(), 1);
        // After a long idle time, the burst again, not more.
        assert_eq!((0..10).filter(|_| policer.admit(now + 1_000 * MS)).count(), 4);
    }

    #[test]
    fn at_time_zero_the_bucket_is_full() {
        let mut policer = Policer::new(1, 3);
        assert_eq!((0..5).filter(|_| policer.admit(0)).count(), 3);
    }

    #[test]
    fn the_outbox_is_bounded_and_first_in_first_out() {
        let mut outbox = Outbox::new(2);
        let punted = |packet: u32| Punted { port: 1, reason: PuntReason::Arp, packet };
        assert!(outbox.is_empty());
        assert!(outbox.push(punted(1)).is_ok());
        assert!(!outbox.is_empty());
        assert!(outbox.push(punted(2)).is_ok());
        assert_eq!(outbox.push(punted(3)).unwrap_err().packet, 3);
        assert_eq!(outbox.len(), 2);
        assert_eq!(outbox.pop().unwrap().packet, 1);
        assert_eq!(outbox.pop().unwrap().packet, 2);
        assert!(outbox.pop().is_none() && outbox.is_empty());
    }
}
