//! Punting: frames the data plane hands to the control plane (the Linux kernel in the switch's
//! namespace) instead of forwarding, the control-plane policing (CoPP) class each belongs to,
//! and the policer that keeps a flood of one class from reaching the kernel or crowding out
//! another.
//!
//! The classifier sorts every punted frame into a `CoppClass` (the list and its default rates
//! are `config/copp.rs`), as SONiC's CoPP traps do (BGP, BFD, LACP, ARP/ND, LLDP, IP-to-me,
//! glean, TTL errors, no route, MTU exceeded, the rest). The switch polices it with
//! the token bucket of its (ingress port, class) (`[control.copp.<class>] pps`, `burst`) in
//! the frame's arrival time, so a replay polices exactly as a live run at the same times. What
//! passes waits in a bounded outbox the engine drains after each burst onto the class's own
//! ring to the control thread, which serves the rings in class order (`CoppClass::ALL` is
//! highest priority first).
//!
//! Where SONiC differs: its policers are per trap group for the whole switch, so a flood on one
//! port spends every port's budget; here each port has its own, so one misbehaving neighbour
//! cannot starve the sessions on other ports (the kernel then sees up to ports x rate).
//!
//! Invariant: a punted frame is counted exactly once: as `punted` under its class when the
//! outbox takes it, or as a drop (`punt_policed`, also counted under its class in `policed`,
//! over the rate; `punt_queue_full` when the outbox or its ring is full). The policers and the
//! outbox never allocate after construction.

use crate::config::CoppClass;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

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

impl Policer {
    /// `admit` against a bucket shared by every port and worker (`SwitchPolicers`), with this
    /// policer's rate and burst: the same token bucket, kept as the time its credit runs out
    /// (GCRA's theoretical arrival time) in one atomic word, moved on with compare-and-swap.
    #[inline]
    pub fn admit_shared(&self, empty_at_ps: &AtomicU64, now: u64) -> bool {
        // A full bucket holds `depth` of credit: a frame passes while the credit it leaves
        // runs out no later than that far ahead.
        let tolerance = self.depth_ps - self.ps_per_token;
        let mut seen = empty_at_ps.load(Ordering::Relaxed);
        loop {
            let from = seen.max(now);
            if from - now > tolerance {
                return false;
            }
            match empty_at_ps.compare_exchange_weak(seen, from + self.ps_per_token, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(current) => seen = current,
            }
        }
    }
}

/// One policer per CoPP class for the whole switch (`[control.copp] scope = "switch"`, as
/// SONiC's trap groups): every port's frames of a class, on every worker, spend one bucket.
/// Only the buckets' state is here; their rates are each worker's config (`Policer`), so a
/// reload changes them without touching it.
#[derive(Debug, Default)]
pub struct SwitchPolicers {
    empty_at_ps: [AtomicU64; CoppClass::COUNT],
}

impl SwitchPolicers {
    /// `class`'s bucket.
    pub fn bucket(&self, class: CoppClass) -> &AtomicU64 {
        &self.empty_at_ps[class.index()]
    }
}

/// A frame on its way to the control plane.
#[derive(Debug)]
pub struct Punted<P> {
    pub port: usize,
    pub class: CoppClass,
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

/// Bounded lock-free rings to the control plane, one per CoPP class: any thread pushes to a
/// class's ring, the consumer always takes from the highest class that has a frame, so a full
/// or busy ring of one class never delays another above it.
pub struct ClassRings<T> {
    rings: Vec<crossbeam_queue::ArrayQueue<T>>,
}

impl<T> ClassRings<T> {
    /// `capacity` frames per class.
    pub fn new(capacity: usize) -> Self {
        Self { rings: CoppClass::ALL.iter().map(|_| crossbeam_queue::ArrayQueue::new(capacity)).collect() }
    }

    /// Queues `item` in `class`'s ring; gives it back when that ring is full.
    #[inline]
    pub fn push(&self, class: CoppClass, item: T) -> Result<(), T> {
        self.rings[class.index()].push(item)
    }

    /// The oldest item of the highest class that has one.
    #[inline]
    pub fn pop(&self) -> Option<(CoppClass, T)> {
        CoppClass::ALL.iter().zip(&self.rings).find_map(|(class, ring)| ring.pop().map(|item| (*class, item)))
    }

    pub fn is_empty(&self) -> bool {
        self.rings.iter().all(crossbeam_queue::ArrayQueue::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CoppRate;

    const MS: u64 = 1_000_000_000;

    #[test]
    fn all_lists_each_class_at_its_index_with_distinct_names_that_parse_back() {
        for (index, class) in CoppClass::ALL.iter().enumerate() {
            assert_eq!(class.index(), index);
            assert_eq!(CoppClass::parse(class.name()), Some(*class));
        }
        let mut names: Vec<_> = CoppClass::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CoppClass::COUNT);
        assert_eq!(CoppClass::parse("ip2me "), None);
    }

    #[test]
    fn routing_protocols_come_first_and_defaults_follow_sonic() {
        // The control thread serves rings in this order: sessions before neighbours, before
        // what hosts send to the switch, before exceptions.
        assert_eq!(&CoppClass::ALL[..3], &[CoppClass::Bgp, CoppClass::Bfd, CoppClass::Lacp]);
        assert_eq!(CoppClass::ALL[CoppClass::COUNT - 1], CoppClass::Other);
        let rate = |class| CoppRate::default_for(class);
        assert_eq!(rate(CoppClass::Bgp), CoppRate { pps: 6000, burst: 6000 });
        assert_eq!(rate(CoppClass::Arp), CoppRate { pps: 600, burst: 600 });
        assert_eq!(rate(CoppClass::Lldp).pps, 100);
        assert_eq!(rate(CoppClass::Ip2me).pps, 6000);
        assert_eq!(rate(CoppClass::Glean).pps, 200);
        assert_eq!(rate(CoppClass::Ttl).pps, 600);
    }

    #[test]
    fn a_shared_bucket_admits_as_a_port_s_own_does() {
        // One user: the same answers as `admit`, frame by frame, over bursts, gaps and floods.
        for (rate, burst) in [(1_000, 10), (600, 600), (1, 1), (6_000, 1)] {
            let mut own = Policer::new(rate, burst);
            let params = Policer::new(rate, burst);
            let shared = SwitchPolicers::default();
            let mut now = 3 * MS;
            let mut step = 12_345_678u64;
            for frame in 0..20_000u64 {
                // A deterministic walk of gaps from 0 to about 4 ms.
                step = step.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                now += (step >> 33) % (4 * MS) * u64::from(frame % 7 == 0) + (step >> 40) % 1_000;
                assert_eq!(
                    params.admit_shared(shared.bucket(CoppClass::Bgp), now),
                    own.admit(now),
                    "rate {rate} burst {burst}, frame {frame} at {now} ps"
                );
            }
        }
    }

    #[test]
    fn workers_spend_one_shared_bucket_together() {
        // Four threads, each offering 1,000 frames at one instant to a bucket of 100: exactly
        // 100 pass in all, then the class's bucket is another's.
        let shared = std::sync::Arc::new(SwitchPolicers::default());
        let policer = Policer::new(6_000, 100);
        let passed: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let (shared, policer) = (&shared, &policer);
                    scope.spawn(move || {
                        (0..1_000).filter(|_| policer.admit_shared(shared.bucket(CoppClass::Arp), MS)).count()
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).sum()
        });
        assert_eq!(passed, 100);
        assert!(policer.admit_shared(shared.bucket(CoppClass::Bgp), MS), "each class its own bucket");
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
    fn class_rings_serve_the_highest_class_first_and_fill_apart() {
        let rings = ClassRings::new(2);
        assert!(rings.is_empty() && rings.pop().is_none());
        // A flood of ip2me fills its own ring only.
        assert!(rings.push(CoppClass::Ip2me, 1).is_ok());
        assert!(rings.push(CoppClass::Ip2me, 2).is_ok());
        assert_eq!(rings.push(CoppClass::Ip2me, 3), Err(3));
        assert!(rings.push(CoppClass::Ttl, 4).is_ok());
        assert!(rings.push(CoppClass::Bfd, 5).is_ok());
        assert!(rings.push(CoppClass::Bgp, 6).is_ok());
        assert!(!rings.is_empty());
        // BGP and BFD jump the queue; each class stays first in, first out.
        assert_eq!(rings.pop(), Some((CoppClass::Bgp, 6)));
        assert_eq!(rings.pop(), Some((CoppClass::Bfd, 5)));
        assert_eq!(rings.pop(), Some((CoppClass::Ip2me, 1)));
        assert!(rings.push(CoppClass::Arp, 7).is_ok(), "arrives later, served sooner");
        assert_eq!(rings.pop(), Some((CoppClass::Arp, 7)));
        assert_eq!(rings.pop(), Some((CoppClass::Ip2me, 2)));
        assert_eq!(rings.pop(), Some((CoppClass::Ttl, 4)));
        assert!(rings.is_empty() && rings.pop().is_none());
    }

    #[test]
    fn the_outbox_is_bounded_and_first_in_first_out() {
        let mut outbox = Outbox::new(2);
        let punted = |packet: u32| Punted { port: 1, class: CoppClass::Arp, packet };
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
