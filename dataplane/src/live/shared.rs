//! What the workers and the main lcore share, and the bookkeeping every worker's loop keeps
//! alike: the clock on the common epoch (`Clock`), the cycles charged per loop and the
//! counters published for the main lcore (`Ticker`).
//!
//! A live reload (`reload`) also goes through here: the new config is checked against the
//! running one, made ready for each worker off the packet path, and picked up by each worker
//! between bursts; the config in force (`running`) is replaced once every worker runs it.
//!
//! Invariant: a worker writes only its own stats slot, under that slot's lock, once per
//! `PUBLISH_EVERY` and at exit; the main lcore only reads the slots (summing them in
//! `snapshot`). Each slot sits on cache lines of its own, so one worker's publish never
//! invalidates another's. A worker takes a lock outside its publish only when a reload is
//! waiting for it.

use super::PUBLISH_EVERY;
use crate::config::Config;
use crate::counters::{ControlStats, CoreStats, SwitchStats, WatermarkClear};
use crate::dpdk;
use crate::link::PortStates;
use crate::switch::Reconfiguration;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A value alone on its cache line(s), so that workers writing neighbouring slots do not
/// invalidate each other's lines (false sharing).
#[repr(align(64))]
pub(super) struct CacheAligned<T>(pub T);

pub(super) struct Shared {
    pub stop: AtomicBool,
    /// A new switch asked this one to hand over (`raceway run --take-over`): it stops, and
    /// leaves the host interfaces to the new one whatever its keep time.
    pub handing_over: AtomicBool,
    /// Counters each worker publishes.
    pub stats: Vec<CacheAligned<Mutex<SwitchStats>>>,
    /// Run-to-completion workers that, stopping, have handed over every batch: when all
    /// have, rings that are empty stay empty.
    pub quiet: AtomicUsize,
    /// Frames the tx queues never took before shutdown (freed).
    pub unsent: Mutex<u64>,
    /// The control thread's counters (`[control]`).
    pub control: Option<Arc<Mutex<ControlStats>>>,
    /// Each port's link, administrative state and MTU, as the link watcher and the control
    /// plane follow them; every worker applies them to its switch.
    pub port_states: Arc<PortStates>,
    /// Watermark clears asked for (`raceway show clear watermarks`), user and persistent:
    /// each worker applies them to its counters at its next publish, then says so in
    /// `cleared` (per stats slot).
    clears: [AtomicU64; 2],
    cleared: Vec<[AtomicU64; 2]>,
    /// The config in force: the telemetry, metrics and counter views read it (never a worker).
    running: Mutex<Arc<Config>>,
    /// Where it was read from, which a reload reads again.
    config_path: Option<std::path::PathBuf>,
    /// Reloads published so far; each worker's last applied, per stats slot.
    reloads: AtomicU64,
    reloaded: Vec<AtomicU64>,
    /// Per stats slot: the reconfiguration waiting for its worker, and what it replaced
    /// (handed back so that the worker frees nothing).
    pending: Vec<Mutex<Option<Reconfiguration>>>,
    retired: Vec<Mutex<Option<Reconfiguration>>>,
    /// One reload at a time (a command and a SIGHUP may race).
    reloading: Mutex<()>,
    /// The counters when `raceway show clear counters` last ran: `show` prints what was
    /// counted since (`SwitchStats::since`); the counters themselves, which Prometheus,
    /// telemetry and the stats JSON read, are never reset.
    counters_cleared: Mutex<Option<SwitchStats>>,
    /// The workers' sFlow samples on their way to the exporter (`live::sflow`).
    pub samples: super::sflow::SampleQueues,
    /// With `[control]`: where a reload's static routes and neighbours go (the FIB thread's
    /// writer applies them).
    control_link: Option<Arc<crate::control::ControlLink>>,
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reloaded {
    /// The sections now in force from the file (none: the file matched what runs).
    Applied(Vec<&'static str>),
    /// Nothing changed: the file is invalid or changes what needs a restart; the one line
    /// says which.
    Refused(String),
    /// Published, but not every worker took it in time (the switch is stopping): those that
    /// did not will at their next loop.
    Unconfirmed(String),
}

impl Shared {
    /// `slots` stats slots, one per worker.
    pub fn new(
        config: &Config,
        config_path: Option<std::path::PathBuf>,
        slots: usize,
        control: Option<Arc<Mutex<ControlStats>>>,
        control_link: Option<Arc<crate::control::ControlLink>>,
        port_states: Arc<PortStates>,
    ) -> Self {
        Self {
            control_link,
            stop: AtomicBool::new(false),
            handing_over: AtomicBool::new(false),
            stats: (0..slots).map(|_| CacheAligned(Mutex::new(SwitchStats::new(config)))).collect(),
            quiet: AtomicUsize::new(0),
            unsent: Mutex::new(0),
            control,
            port_states,
            clears: [AtomicU64::new(0), AtomicU64::new(0)],
            cleared: (0..slots).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
            running: Mutex::new(Arc::new(config.clone())),
            config_path,
            reloads: AtomicU64::new(0),
            reloaded: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            pending: (0..slots).map(|_| Mutex::new(None)).collect(),
            retired: (0..slots).map(|_| Mutex::new(None)).collect(),
            reloading: Mutex::new(()),
            counters_cleared: Mutex::new(None),
            samples: super::sflow::SampleQueues::new(slots),
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
    fn remap_cleared_acls(&self, running: &Config, new: &Config) {
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

    /// The config in force.
    pub fn running(&self) -> Arc<Config> {
        Arc::clone(&self.running.lock().expect("running config lock"))
    }

    /// The file a reload reads.
    pub fn config_path(&self) -> Option<&std::path::Path> {
        self.config_path.as_deref()
    }

    /// Re-reads the config file and applies what changed, waiting (at most `within`) until
    /// every worker runs it. Refused, with nothing changed, when the file does not validate
    /// or changes a key that needs a restart (`config::reload`).
    pub fn reload(&self, within: Duration) -> Reloaded {
        let _one_at_a_time = self.reloading.lock().expect("reload lock");
        let Some(path) = &self.config_path else {
            return Reloaded::Refused("this switch was not started from a config file".into());
        };
        let new = match Config::load(path) {
            Ok(new) => new,
            Err(err) => return Reloaded::Refused(err.to_string()),
        };
        let running = self.running();
        let changed = match crate::config::reload::live_changes(&running, &new) {
            Ok(changed) => changed,
            Err(refused) => return Reloaded::Refused(format!("{}: {refused}", path.display())),
        };
        if changed.is_empty() {
            return Reloaded::Applied(changed);
        }
        let new = Arc::new(new);
        for (pending, retired) in self.pending.iter().zip(&self.retired) {
            let prepared = Reconfiguration::prepare(&running, Arc::clone(&new));
            *pending.lock().expect("reload slot") = Some(prepared);
            retired.lock().expect("reload slot").take();
        }
        let target = self.reloads.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + within;
        while !self.reloaded.iter().all(|slot| slot.load(Ordering::Acquire) >= target) {
            if Instant::now() >= deadline || self.stop.load(Ordering::Relaxed) {
                // Those that took it run it; the others will at their next loop. Say so.
                *self.running.lock().expect("running config lock") = new;
                return Reloaded::Unconfirmed(format!(
                    "{}: not every worker took the new config within {} ms (is the switch stopping?)",
                    path.display(),
                    within.as_millis()
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.remap_cleared_acls(&running, &new);
        if let Some(link) = &self.control_link {
            if crate::config::reload::fib_changed(&running, &new) {
                link.reconfigure_fib(Arc::clone(&running), Arc::clone(&new));
            }
        }
        let ports = self.apply_port_changes(&running, &new);
        *self.running.lock().expect("running config lock") = new;
        match ports {
            Ok(()) => Reloaded::Applied(changed),
            Err(err) => Reloaded::Unconfirmed(format!("{}: {err}", path.display())),
        }
    }

    /// A reload's port MTUs and addresses: each MTU into the port's state (the workers check
    /// it between bursts) and, with `[control]`, onto its host interface, so that the kernel's
    /// ICMP errors give it; each address added to or removed from the host interface, which
    /// the FIB follows as it follows `ip address` (an address needs `[control]`).
    fn apply_port_changes(&self, running: &Config, new: &Config) -> Result<(), String> {
        for (index, (old, port)) in running.ports.iter().zip(&new.ports).enumerate() {
            if old.mtu != port.mtu {
                let set = self.port_states.set_mtu(index, port.mtu);
                if set != port.mtu {
                    tracing::warn!(
                        "reload: port '{}': MTU {} is more than it takes; it sends at most {set}",
                        port.name,
                        port.mtu
                    );
                }
                if let Some(control) = &new.control {
                    let mtu = set.to_string();
                    crate::control::ip(&["-n", &control.netns, "link", "set", "dev", &port.name, "mtu", &mtu])?;
                }
            }
            let Some(control) = new.control.as_ref().filter(|_| old.addresses != port.addresses) else { continue };
            for gone in old.addresses.iter().filter(|address| !port.addresses.contains(address)) {
                let gone = gone.to_string();
                crate::control::ip(&["-n", &control.netns, "address", "del", &gone, "dev", &port.name])?;
            }
            for added in port.addresses.iter().filter(|address| !old.addresses.contains(address)) {
                let added = added.to_string();
                crate::control::ip(&["-n", &control.netns, "address", "replace", &added, "dev", &port.name])?;
            }
        }
        Ok(())
    }

    /// On a worker, between bursts: `Some` when a reload was published since `seen` (one
    /// atomic load when none was), with the reconfiguration waiting for stats slot `slot`
    /// (`None` inside if a later reload's already took its place and was applied).
    #[inline(always)]
    pub fn take_reconfiguration(&self, slot: usize, seen: &mut u64) -> Option<Option<Reconfiguration>> {
        let published = self.reloads.load(Ordering::Acquire);
        if published == *seen {
            return None;
        }
        *seen = published;
        Some(self.pending[slot].lock().expect("reload slot").take())
    }

    /// After the worker applied it: hands back what it replaced and says it runs reload `seen`.
    pub fn reconfigured(&self, slot: usize, seen: u64, replaced: Option<Reconfiguration>) {
        if replaced.is_some() {
            *self.retired[slot].lock().expect("reload slot") = replaced;
        }
        self.reloaded[slot].store(seen, Ordering::Release);
    }

    /// At a worker's publish: applies the watermark clears asked for since it last looked.
    fn apply_clears(&self, stats: &mut SwitchStats, seen: &mut [u64; 2]) {
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
    fn acknowledge_clears(&self, slot: usize, seen: &[u64; 2]) {
        self.cleared[slot][0].store(seen[0], Ordering::Release);
        self.cleared[slot][1].store(seen[1], Ordering::Release);
    }

    /// Asks every worker to clear watermarks and waits (at most `within`) until each has
    /// published its counters without them; false if one did not in time (it is stopping).
    pub fn clear_watermarks(&self, which: WatermarkClear, within: Duration) -> bool {
        let kind = usize::from(which == WatermarkClear::Persistent);
        let target = self.clears[kind].fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + within;
        loop {
            if self.cleared.iter().all(|slot| slot[kind].load(Ordering::Acquire) >= target) {
                return true;
            }
            if Instant::now() >= deadline || self.stop.load(Ordering::Relaxed) {
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
    /// The worker's slot in `Shared::stats`.
    slot: usize,
    publish_ticks: u64,
    next_publish: u64,
    iteration_start: u64,
    /// The TSC the next loop starts at: the last loop's end, or the end of a publish after it.
    next_loop_tsc: u64,
    /// The watermark clears already applied (`Shared::apply_clears`).
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
        shared.apply_clears(stats, &mut self.clears_seen);
        shared.stats[self.slot].0.lock().expect("stats lock").clone_from(stats);
        shared.acknowledge_clears(self.slot, &self.clears_seen);
    }

    /// After work between loops (a publish): the next loop's frames arrive after it, not
    /// before. Its cycles are still charged to the next loop.
    pub fn resume(&mut self) {
        self.next_loop_tsc = dpdk::rdtsc();
    }

    /// The last publish, at exit.
    pub fn publish_final(&self, shared: &Shared, stats: &SwitchStats) {
        shared.stats[self.slot].0.lock().expect("stats lock").clone_from(stats);
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
