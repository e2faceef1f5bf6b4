//! The bookkeeping every worker's loop keeps alike: the clock on the epoch all workers share
//! (`Clock`), and the TSC side of a loop (`Ticker`): one TSC read a loop, its cycles charged
//! to busy or idle, and when the counters are published (`Published`).
//!
//! Invariant: a loop reads the TSC once, at its end, which is the next loop's receive time
//! unless the counters were published in between.

use super::shared::Shared;
use super::PUBLISH_EVERY;
use crate::counters::{CoreStats, SwitchStats};
use crate::dpdk;

/// Time in picoseconds since the epoch every worker shares (the TSC at start), so a frame's
/// arrival stamp means the same on the worker that sends it.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    epoch_tsc: u64,
    /// Picoseconds per TSC tick in 32.32 fixed point: a multiply per loop instead of a u128
    /// division.
    ps_per_tick: u128,
}

impl Clock {
    pub fn new(epoch_tsc: u64, tsc_hz: u64) -> Self {
        Self { epoch_tsc, ps_per_tick: (1_000_000_000_000u128 << 32) / u128::from(tsc_hz.max(1)) }
    }

    #[inline(always)]
    pub fn now_ps(&self) -> u64 {
        self.ps_at(dpdk::rdtsc())
    }

    /// The time at TSC `tsc`, read earlier.
    #[inline(always)]
    pub fn ps_at(&self, tsc: u64) -> u64 {
        ((u128::from(tsc - self.epoch_tsc) * self.ps_per_tick) >> 32) as u64
    }
}

/// The TSC side of a worker's loop: one TSC read per loop, its cycles charged to busy when
/// the loop received or sent frames, else to idle; and when to publish the counters. The read
/// that ends a loop is the next loop's receive time (`next_loop_tsc`): nothing runs between
/// them but the stop check, unless the counters were published.
pub(super) struct Ticker {
    /// The worker's slot in `Published::stats`.
    slot: usize,
    publish_ticks: u64,
    next_publish: u64,
    iteration_start: u64,
    /// The TSC the next loop starts at: the last loop's end, or the end of a publish after it.
    next_loop_tsc: u64,
    /// The watermark clears already applied (`Published::apply_clears`).
    clears_seen: [u64; 2],
}

impl Ticker {
    pub fn new(slot: usize, tsc_hz: u64) -> Self {
        let publish_ticks = (u128::from(tsc_hz) * PUBLISH_EVERY.as_millis() / 1000) as u64;
        Self { slot, publish_ticks, next_publish: 0, iteration_start: 0, next_loop_tsc: 0, clears_seen: [0; 2] }
    }

    /// On the worker's lcore, before its first loop: the counters get this core's entry.
    pub fn start(&mut self, stats: &mut SwitchStats) {
        stats.cores.clear();
        stats.cores.push(CoreStats { lcore: dpdk::current_lcore(), ..CoreStats::default() });
        let now = dpdk::rdtsc();
        self.next_publish = now + self.publish_ticks;
        self.iteration_start = now;
        self.next_loop_tsc = now;
    }

    /// The TSC a loop starts at: read when the last one ended, so a loop reads it once.
    #[inline(always)]
    pub fn next_loop_tsc(&self) -> u64 {
        self.next_loop_tsc
    }

    /// At the end of a loop: charges its cycles; true when the counters are due to publish.
    #[inline(always)]
    pub fn end_iteration(&mut self, core: &mut CoreStats, received: u64, busy: bool) -> bool {
        let end = dpdk::rdtsc();
        core.charge_iteration(end - self.iteration_start, received, busy);
        self.iteration_start = end;
        self.next_loop_tsc = end;
        if end < self.next_publish {
            return false;
        }
        self.next_publish = end + self.publish_ticks;
        true
    }

    /// Publishes `stats` to the worker's slot, with the watermark clears asked for since the
    /// last publish applied first.
    pub fn publish(&mut self, shared: &Shared, stats: &mut SwitchStats) {
        let counters = &shared.counters;
        counters.apply_clears(stats, &mut self.clears_seen);
        counters.stats[self.slot].0.lock().expect("stats lock").clone_from(stats);
        counters.acknowledge_clears(self.slot, &self.clears_seen);
    }

    /// After work between loops (a publish): the next loop's frames arrive after it, not
    /// before. Its cycles are still charged to the next loop.
    pub fn resume(&mut self) {
        self.next_loop_tsc = dpdk::rdtsc();
    }

    /// The last publish, at exit.
    pub fn publish_final(&self, shared: &Shared, stats: &SwitchStats) {
        shared.counters.stats[self.slot].0.lock().expect("stats lock").clone_from(stats);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_turns_tsc_ticks_into_picoseconds_since_its_epoch() {
        // 2 GHz: a tick is 500 ps.
        let clock = Clock::new(1_000, 2_000_000_000);
        assert_eq!(clock.ps_at(1_000), 0);
        assert_eq!(clock.ps_at(3_000), 1_000_000);
        assert_eq!(clock.ps_at(2_000_001_000), 1_000_000_000_000, "a second");
    }

    #[test]
    fn a_loop_starts_at_the_tsc_the_last_one_ended_at_or_after_a_publish() {
        let mut ticker = Ticker::new(0, 2_000_000_000);
        let mut core = CoreStats::default();
        let before = dpdk::rdtsc();
        ticker.end_iteration(&mut core, 3, true);
        let ended = ticker.next_loop_tsc();
        assert!(ended >= before && ended <= dpdk::rdtsc());
        assert_eq!(ticker.iteration_start, ended, "the next loop's cycles count from its start");
        // A publish between loops: the next loop's frames arrive after it.
        let moved_on = (0..1_000_000).any(|_| dpdk::rdtsc() > ended);
        assert!(moved_on, "the TSC counts");
        ticker.resume();
        assert!(ticker.next_loop_tsc() > ended);
        assert_eq!(ticker.iteration_start, ended, "the publish's cycles are still the next loop's");
    }
}
