//! ECN marking as SONiC's WRED_PROFILE with ECN does it, for DCQCN: per traffic class, a
//! profile (kmin, kmax, pmax) turns the egress queue's depth into a marking probability.
//!
//! - depth < kmin: never; kmin <= depth <= kmax: pmax x (depth - kmin) / (kmax - kmin);
//!   depth > kmax: always.
//! - The depth is the buffer cells the queue's frames hold (`measure = "cells"`, the default:
//!   WRED on Broadcom and Spectrum compares buffer occupancy, the unit PFC's XOFF is in, so a
//!   queue of small frames is marked before it pauses; in frame bytes a 60-byte frame counts
//!   60 of the 256 it holds, and a 2:1 incast of them paused its senders with 4.7% marked),
//!   or its frame bytes (`measure = "frame_bytes"`): at enqueue (default) what is ahead of the frame, at
//!   dequeue (`mark_on = "dequeue"`) what it leaves behind. Dequeue marking reports the queue
//!   as it is when the frame leaves, a fresher signal that reaches senders sooner under a
//!   growing queue; enqueue marking is what most ASICs do and decides before the frame
//!   takes buffer, so a lossy non-ECT frame is dropped without ever being queued.
//! - "Mark" on an ECT(0)/ECT(1) frame sets CE (IPv4: RFC 1624 checksum update; IPv6: traffic
//!   class bits; behind any VLAN tags). A CE frame stays CE and is not counted again. A non-ECT
//!   frame is never marked: on a lossy class it is dropped (`wred`); on a lossless class it
//!   passes, because PFC protects it.
//!
//! Invariant: a random draw happens only when kmin <= depth <= kmax and kmin < kmax, from the
//! switch's seeded PRNG, so replays with one seed mark the same frames.

use crate::config::{EcnMeasure, EcnProfile, MarkOn};
use crate::drops::DropReason;
use crate::rng::Rng;
use crate::units::TRAFFIC_CLASSES;
use crate::wire::{ipv4, ipv6};

pub const NOT_ECT: u8 = 0b00;
pub const CE: u8 = 0b11;

/// What a profile says for a frame at `depth` bytes.
#[inline]
pub fn should_mark(profile: &EcnProfile, depth: u64, rng: &mut Rng) -> bool {
    if depth < profile.kmin_bytes {
        return false;
    }
    if depth > profile.kmax_bytes {
        return true;
    }
    if profile.kmax_bytes == profile.kmin_bytes {
        return false;
    }
    let probability =
        profile.pmax * (depth - profile.kmin_bytes) as f64 / (profile.kmax_bytes - profile.kmin_bytes) as f64;
    rng.unit() < probability
}

/// Sets CE in the IP header at `l3_offset` (checked by the parser earlier).
#[inline(always)]
pub fn set_ce(frame: &mut [u8], l3_offset: usize, is_ipv6: bool) {
    let l3 = &mut frame[l3_offset..];
    if is_ipv6 {
        ipv6::Packet::new_unchecked(l3).set_ecn(CE);
    } else {
        ipv4::Packet::new_unchecked(l3).set_ecn(CE);
    }
}

/// The switch's ECN profiles per class, and what they do to a frame.
#[derive(Debug, Clone)]
pub struct EcnMarker {
    profiles: [Option<EcnProfile>; TRAFFIC_CLASSES],
    lossless_mask: u8,
    /// Bit n set: class n's profile does nothing at depth 0 (`idle_at_empty`).
    idle_at_empty: u8,
}

impl EcnMarker {
    pub fn new(profiles: [Option<EcnProfile>; TRAFFIC_CLASSES], lossless_mask: u8) -> Self {
        let idle_at_empty = profiles.iter().enumerate().fold(0, |mask, (tc, profile)| {
            let idle = profile.as_ref().is_none_or(|profile| profile.kmin_bytes > 0 || profile.kmax_bytes == 0);
            mask | u8::from(idle) << tc
        });
        Self { profiles, lossless_mask, idle_at_empty }
    }

    /// Whether class `tc`'s profile does nothing at all to a frame at depth 0 (an empty
    /// queue): no profile, or kmin above 0 (below kmin a profile neither marks nor draws), or
    /// kmin and kmax both 0. A profile from 0 up draws at depth 0 (with probability 0 to mark),
    /// and the draw moves the generator.
    #[inline(always)]
    pub fn idle_at_empty(&self, tc: usize) -> bool {
        self.idle_at_empty & (1 << tc) != 0
    }

    /// Whether class `tc` marks at `when` (enqueue or dequeue).
    #[inline]
    pub fn marks_on(&self, tc: usize, when: MarkOn) -> bool {
        self.profiles[tc].as_ref().is_some_and(|profile| profile.mark_on == when)
    }

    /// What class `tc`'s profile compares with kmin/kmax (cells for a class without one).
    #[inline]
    pub fn measure(&self, tc: usize) -> EcnMeasure {
        self.profiles[tc].as_ref().map_or(EcnMeasure::Cells, |profile| profile.measure)
    }

    /// Decides what class `tc`'s profile does at `depth` to a frame whose ECN bits are `ecn`:
    /// mark an ECT frame CE (`Ok(true)`: the caller writes it, `set_ce`), drop a lossy
    /// non-ECT frame (`wred`), or nothing (`Ok(false)`). It reads no frame, so a caller's
    /// record stays its own.
    #[inline]
    pub fn decide(&self, tc: usize, depth: u64, ecn: u8, rng: &mut Rng) -> Result<bool, DropReason> {
        let Some(profile) = &self.profiles[tc] else { return Ok(false) };
        if !should_mark(profile, depth, rng) {
            return Ok(false);
        }
        match ecn {
            CE => Ok(false),
            NOT_ECT if self.lossless_mask & (1 << tc) != 0 => Ok(false),
            NOT_ECT => Err(DropReason::Wred),
            _ => Ok(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MarkOn;
    use crate::traffic::frames::FrameSpec;
    use crate::wire::parse::{parse, Payload};

    fn profile(kmin: u64, kmax: u64, pmax: f64) -> EcnProfile {
        EcnProfile { kmin_bytes: kmin, kmax_bytes: kmax, pmax, mark_on: MarkOn::Enqueue, measure: EcnMeasure::Cells }
    }

    #[test]
    fn a_class_is_idle_at_empty_without_a_profile_or_below_its_kmin() {
        let mut profiles: [Option<EcnProfile>; TRAFFIC_CLASSES] = Default::default();
        profiles[1] = Some(profile(1000, 2000, 0.5));
        profiles[3] = Some(profile(0, 2000, 0.5));
        profiles[5] = Some(profile(0, 0, 1.0));
        profiles[7] = Some(profile(0, 2000, 0.5));
        let marker = EcnMarker::new(profiles, 0);
        let idle: Vec<bool> = (0..TRAFFIC_CLASSES).map(|tc| marker.idle_at_empty(tc)).collect();
        // Classes 3 and 7 draw at depth 0; the others never act on an empty queue.
        assert_eq!(idle, [true, true, true, false, true, true, true, false]);
    }

    #[test]
    fn below_kmin_never_above_kmax_always() {
        let mut rng = Rng::new(1);
        let p = profile(1000, 2000, 1.0);
        assert!((0..1000).all(|_| !should_mark(&p, 999, &mut rng)));
        assert!((0..1000).all(|_| should_mark(&p, 2001, &mut rng)));
        let degenerate = profile(1000, 1000, 0.5);
        assert!(!should_mark(&degenerate, 1000, &mut rng));
        assert!(should_mark(&degenerate, 1001, &mut rng));
    }

    #[test]
    fn between_the_thresholds_the_rate_is_linear() {
        let mut rng = Rng::new(2);
        let p = profile(0, 1000, 0.2);
        for (depth, expected) in [(250u64, 0.05f64), (500, 0.10), (1000, 0.20)] {
            let marks = (0..100_000).filter(|_| should_mark(&p, depth, &mut rng)).count() as f64 / 100_000.0;
            // 4 standard deviations of a binomial over 100,000 draws.
            let sigma = (expected * (1.0 - expected) / 100_000.0).sqrt();
            assert!((marks - expected).abs() < 4.0 * sigma, "depth {depth}: {marks} vs {expected}");
        }
    }

    #[test]
    fn the_rate_is_linear_from_kmin_not_from_zero() {
        // kmin 1000, kmax 3000, pmax 0.4: at 1500, a quarter of the way, 0.1; at 2500, 0.3.
        let mut rng = Rng::new(3);
        let p = profile(1000, 3000, 0.4);
        for (depth, expected) in [(1500u64, 0.1f64), (2500, 0.3)] {
            let marks = (0..100_000).filter(|_| should_mark(&p, depth, &mut rng)).count() as f64 / 100_000.0;
            let sigma = (expected * (1.0 - expected) / 100_000.0).sqrt();
            assert!((marks - expected).abs() < 4.0 * sigma, "depth {depth}: {marks} vs {expected}");
        }
    }

    #[test]
    fn the_prng_is_drawn_only_between_the_thresholds() {
        // Replays stay comparable when a profile changes only where it never draws.
        let p = profile(1000, 2000, 0.5);
        let drew = |depth: u64| {
            let mut rng = Rng::new(4);
            should_mark(&p, depth, &mut rng);
            rng.next_u64() != Rng::new(4).next_u64()
        };
        assert!(!drew(999) && !drew(2001));
        assert!(drew(1000) && drew(1500) && drew(2000));
        let mut rng = Rng::new(4);
        should_mark(&profile(1000, 1000, 0.5), 1000, &mut rng);
        assert_eq!(rng.next_u64(), Rng::new(4).next_u64(), "kmin = kmax never draws");
    }

    #[test]
    fn ce_rewrite_on_ipv4_vlan_and_ipv6() {
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 1);
        for vlan in [None, Some((3, 100))] {
            spec.vlan = vlan;
            let mut frame = spec.build();
            let l3 = if vlan.is_some() { 18 } else { 14 };
            set_ce(&mut frame, l3, false);
            let Payload::Ip(ip) = parse(&frame).expect("the checksum stays valid").payload else { panic!() };
            assert_eq!((ip.ecn, ip.dscp), (CE, 26));
        }
        spec.vlan = None;
        spec.source = "2001:db8::1".parse().unwrap();
        spec.destination = "2001:db8:1::2".parse().unwrap();
        let mut frame = spec.build();
        set_ce(&mut frame, 14, true);
        let Payload::Ip(ip) = parse(&frame).unwrap().payload else { panic!() };
        assert_eq!((ip.ecn, ip.dscp), (CE, 26));
    }
}
