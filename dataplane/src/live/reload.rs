//! A live reload (`raceway reload`, SIGHUP): the new config is checked against the running one
//! (`config::reload`), made ready for each worker off the packet path
//! (`Reconfiguration::prepare`), and picked up by each worker between bursts
//! (`take_reconfiguration`); the config in force (`running`) is replaced once every worker runs
//! it, and the port MTUs and addresses and, with `[control]`, the FIB follow.
//!
//! Invariant: one reload at a time; a worker takes a lock here only when a reload is waiting
//! for it (one atomic load a loop otherwise), and frees nothing: what it replaced is handed
//! back (`reconfigured`).

use super::published::Published;
use crate::config::Config;
use crate::link::PortStates;
use crate::switch::Reconfiguration;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct Reloads {
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

/// What a reload acts on besides the config: the switch's stop flag (a reload stops waiting
/// for a stopping switch), its ports' states, and the published counters (whose cleared
/// baseline follows the ACL tables).
pub(super) struct ReloadTargets<'a> {
    pub stop: &'a AtomicBool,
    pub port_states: &'a PortStates,
    pub counters: &'a Published,
}

impl Reloads {
    /// For `slots` workers.
    pub fn new(
        config: &Config,
        config_path: Option<std::path::PathBuf>,
        slots: usize,
        control_link: Option<Arc<crate::control::ControlLink>>,
    ) -> Self {
        Self {
            running: Mutex::new(Arc::new(config.clone())),
            config_path,
            reloads: AtomicU64::new(0),
            reloaded: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            pending: (0..slots).map(|_| Mutex::new(None)).collect(),
            retired: (0..slots).map(|_| Mutex::new(None)).collect(),
            reloading: Mutex::new(()),
            control_link,
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
    pub fn reload(&self, within: Duration, targets: ReloadTargets) -> Reloaded {
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
            if Instant::now() >= deadline || targets.stop.load(Ordering::Relaxed) {
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
        targets.counters.remap_cleared_acls(&running, &new);
        if let Some(link) = &self.control_link {
            if crate::config::reload::fib_changed(&running, &new) {
                link.reconfigure_fib(Arc::clone(&running), Arc::clone(&new));
            }
        }
        let ports = apply_port_changes(targets.port_states, &running, &new);
        *self.running.lock().expect("running config lock") = new;
        match ports {
            Ok(()) => Reloaded::Applied(changed),
            Err(err) => Reloaded::Unconfirmed(format!("{}: {err}", path.display())),
        }
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
}

/// A reload's port MTUs and addresses: each MTU into the port's state (the workers check
/// it between bursts) and, with `[control]`, onto its host interface, so that the kernel's
/// ICMP errors give it; each address added to or removed from the host interface, which
/// the FIB follows as it follows `ip address` (an address needs `[control]`).
fn apply_port_changes(port_states: &PortStates, running: &Config, new: &Config) -> Result<(), String> {
    for (index, (old, port)) in running.ports.iter().zip(&new.ports).enumerate() {
        if old.mtu != port.mtu {
            let set = port_states.set_mtu(index, port.mtu);
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
