//! What the workers and the main lcore share, a part per concern: the run's signals (stop,
//! hand-over, quiet), the ports' states, the counters the workers publish (`Published`), the
//! live reload (`Reloads`) and the sFlow sample rings (`SampleQueues`). The clock and the
//! loop's bookkeeping are `live::clock`'s.
//!
//! Invariant: a worker reads the signals and the ports' generation with one atomic load each
//! per loop, writes only its own counters slot, and takes a lock outside its publish only when
//! a reload is waiting for it.

use super::published::Published;
use super::reload::{ReloadTargets, Reloaded, Reloads};
use super::sample_ring::SampleQueues;
use crate::config::Config;
use crate::counters::ControlStats;
use crate::link::PortStates;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) struct Shared {
    pub stop: AtomicBool,
    /// A new switch asked this one to hand over (`raceway run --take-over`): it stops, and
    /// leaves the host interfaces to the new one whatever its keep time.
    pub handing_over: AtomicBool,
    /// Run-to-completion workers that, stopping, have handed over every batch: when all
    /// have, rings that are empty stay empty.
    pub quiet: AtomicUsize,
    /// Each port's link, administrative state and MTU, as the link watcher and the control
    /// plane follow them; every worker applies them to its switch.
    pub port_states: Arc<PortStates>,
    /// The counters each worker publishes, and the clears asked of them.
    pub counters: Published,
    /// The config in force and the reloads on their way to the workers.
    pub config: Reloads,
    /// The workers' sFlow samples on their way to the exporter (`live::sflow`).
    pub samples: SampleQueues,
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
            stop: AtomicBool::new(false),
            handing_over: AtomicBool::new(false),
            quiet: AtomicUsize::new(0),
            port_states,
            counters: Published::new(config, slots, control),
            config: Reloads::new(config, config_path, slots, control_link),
            samples: SampleQueues::new(slots),
        }
    }

    /// Re-reads the config file and applies what changed (`Reloads::reload`).
    pub fn reload(&self, within: Duration) -> Reloaded {
        let targets = ReloadTargets { stop: &self.stop, port_states: &self.port_states, counters: &self.counters };
        self.config.reload(within, targets)
    }

    /// Asks every worker to clear watermarks (`Published::clear_watermarks`).
    pub fn clear_watermarks(&self, which: crate::counters::WatermarkClear, within: Duration) -> bool {
        self.counters.clear_watermarks(which, within, &self.stop)
    }
}
