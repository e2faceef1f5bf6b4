//! The counters the workers publish for the main lcore, and what `raceway show clear`
//! asks of them: each worker copies its switch's counters into its own slot once per
//! `PUBLISH_EVERY` (`Ticker::publish`), with the watermark clears asked for since applied
//! first; the main lcore sums the slots (`snapshot`).
//!
//! Invariant: a worker writes only its own slot, under that slot's lock; each slot sits on
//! cache lines of its own, so one worker's publish never invalidates another's. The counters
//! themselves are never reset: `clear counters` keeps a baseline the views subtract.

use crate::config::Config;
use crate::counters::{ControlStats, SwitchStats, WatermarkClear};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A value alone on its cache line(s), so that workers writing neighbouring slots do not
/// invalidate each other's lines (false sharing).
#[repr(align(64))]
pub(super) struct CacheAligned<T>(pub T);

pub(super) struct Published {
    /// Counters each worker publishes.
    pub stats: Vec<CacheAligned<Mutex<SwitchStats>>>,
    /// Frames the tx queues never took before shutdown (freed).
    pub unsent: Mutex<u64>,
    /// The control thread's counters (`[control]`).
    pub control: Option<Arc<Mutex<ControlStats>>>,
    /// Watermark clears asked for (`raceway show clear watermarks`), user and persistent:
    /// each worker applies them to its counters at its next publish, then says so in
    /// `cleared` (per stats slot).
    clears: [AtomicU64; 2],
    cleared: Vec<[AtomicU64; 2]>,
    /// The counters when `raceway show clear counters` last ran: `show` prints what was
    /// counted since (`SwitchStats::since`); the counters themselves, which Prometheus,
    /// telemetry and the stats JSON read, are never reset.
    counters_cleared: Mutex<Option<SwitchStats>>,
}

impl Published {
    /// `slots` stats slots, one per worker.
    pub fn new(config: &Config, slots: usize, control: Option<Arc<Mutex<ControlStats>>>) -> Self {
        Self {
            stats: (0..slots).map(|_| CacheAligned(Mutex::new(SwitchStats::new(config)))).collect(),
            unsent: Mutex::new(0),
            control,
            clears: [AtomicU64::new(0), AtomicU64::new(0)],
            cleared: (0..slots).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
            counters_cleared: Mutex::new(None),
        }
    }

    /// `show clear counters`: the views count from now.
    pub fn clear_counters(&self) {
        *self.counters_cleared.lock().expect("cleared counters lock") = Some(self.snapshot());
    }

    /// What `raceway show` prints: the counters since the last `show clear counters`.
    pub fn shown_snapshot(&self) -> SwitchStats {
        let now = self.snapshot();
        match &*self.counters_cleared.lock().expect("cleared counters lock") {
            Some(baseline) => now.since(baseline),
            None => now,
        }
    }

    /// After a reload: the cleared baseline's ACL counters follow the tables, those of a
    /// table the reload kept moving with it, those of a new or changed one from zero.
    pub(super) fn remap_cleared_acls(&self, running: &Config, new: &Config) {
        if let Some(baseline) = &mut *self.counters_cleared.lock().expect("cleared counters lock") {
            let old = std::mem::take(&mut baseline.acl);
            baseline.acl = new
                .acls
                .iter()
                .map(|table| match running.acls.iter().position(|kept| kept == table) {
                    Some(index) => old.get(index).cloned().unwrap_or_default(),
                    None => vec![Default::default(); table.rules.len()],
                })
                .collect();
        }
    }

    /// At a worker's publish: applies the watermark clears asked for since it last looked.
    pub(super) fn apply_clears(&self, stats: &mut SwitchStats, seen: &mut [u64; 2]) {
        let persistent = self.clears[1].load(Ordering::Acquire);
        if persistent != seen[1] {
            stats.clear_watermarks(WatermarkClear::Persistent);
            seen[1] = persistent;
        }
        let user = self.clears[0].load(Ordering::Acquire);
        if user != seen[0] {
            stats.clear_watermarks(WatermarkClear::User);
            seen[0] = user;
        }
    }

    /// After that publish: the clears in `seen` are in the published counters.
    pub(super) fn acknowledge_clears(&self, slot: usize, seen: &[u64; 2]) {
        self.cleared[slot][0].store(seen[0], Ordering::Release);
        self.cleared[slot][1].store(seen[1], Ordering::Release);
    }

    /// Asks every worker to clear watermarks and waits (at most `within`) until each has
    /// published its counters without them; false if one did not in time, or `stop` was set.
    pub fn clear_watermarks(&self, which: WatermarkClear, within: Duration, stop: &AtomicBool) -> bool {
        let kind = usize::from(which == WatermarkClear::Persistent);
        let target = self.clears[kind].fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + within;
        loop {
            if self.cleared.iter().all(|slot| slot[kind].load(Ordering::Acquire) >= target) {
                return true;
            }
            if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The sum of every worker's last published counters.
    pub fn snapshot(&self) -> SwitchStats {
        let mut total = self.stats[0].0.lock().expect("stats lock").clone();
        for stats in &self.stats[1..] {
            total.add(&stats.0.lock().expect("stats lock"));
        }
        if let Some(control) = &self.control {
            total.control = Some(control.lock().expect("control stats").clone());
        }
        total
    }
}
