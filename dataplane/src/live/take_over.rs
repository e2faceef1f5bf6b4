//! `raceway run --take-over`: a restart that makes before it breaks. The new process starts
//! its EAL, with its own file prefix, and its pools while the running switch still forwards;
//! only then does it ask that switch to hand over (`raceway show`'s telemetry socket, view
//! `hand-over`), wait until it has closed its ports (it holds a lock on a file while they are open,
//! `PortsLock`), and open them itself. Forwarding stops for the
//! old switch's stop and the new one's port and control-plane start, not for the EAL's start
//! (perf/RESULTS.md, "Issue 46: make-before-break").
//!
//! The two processes alternate between two file prefixes, the config's and the config's with
//! `-2` (`show::prefix_slots`), so that their runtime directories, telemetry sockets and, with
//! hugepages, their memory files never meet; `raceway show` and `reload` ask whichever
//! answers. Ports are not given to the new EAL at its start: virtual devices are created, and
//! PCI devices (blocked with `-b` at the start) probed, once the old switch has closed them.
//!
//! Invariant: the running switch is asked to hand over only once the new process has its EAL
//! and pools; until then a failure leaves it forwarding, untouched.

use super::memif_socket;
use crate::config::{device_name, is_pci_address, Config};
use crate::dpdk::{DpdkError, Port};
use crate::show::{self, Client};
use std::time::{Duration, Instant};

/// How long the switch before gets to drain its queues and close its ports once it was asked.
const STOPS_WITHIN: Duration = Duration::from_secs(30);

/// The running switch this process takes over, found and not yet asked.
pub struct TakeOver {
    client: Client,
    /// The running switch's process.
    pub pid: u32,
    /// The file prefix this process starts its EAL with: the slot the running one is not in.
    pub prefix: String,
    /// The ports lock of the prefix's slots.
    lock: std::path::PathBuf,
}

impl TakeOver {
    /// The switch running with the file prefix of EAL arguments `args` (in either slot);
    /// `None` when none answers.
    pub fn find(args: &[String]) -> Result<Option<Self>, DpdkError> {
        let slots = show::prefix_slots(&show::prefix_of(args));
        for (index, slot) in slots.iter().enumerate() {
            let Some(client) = show::Client::try_connect(&show::socket_path(slot)) else { continue };
            let pid = client.pid().ok_or_else(|| DpdkError {
                context: "--take-over".into(),
                problem: format!("the switch on prefix '{slot}' did not say its pid"),
            })?;
            let prefix = slots[1 - index].clone();
            return Ok(Some(Self { client, pid, prefix, lock: ports_lock_path(&slots[0]) }));
        }
        Ok(None)
    }

    /// Asks the running switch to hand over and waits until it has closed its ports and host
    /// interfaces (it lets go of the ports lock then, and the kernel does if it dies); returns
    /// the lock, which this process holds from now on.
    pub fn complete(mut self) -> Result<PortsLock, DpdkError> {
        let pid = self.pid;
        let fail = move |problem: String| DpdkError { context: format!("--take-over (pid {pid})"), problem };
        let asked = Instant::now();
        let answer = self.client.fetch("hand-over").map_err(fail)?;
        if answer["handing_over"] != serde_json::Value::Bool(true) {
            return Err(fail(format!("the running switch refused to hand over: {answer}")));
        }
        drop(self.client);
        // flock has no timeout: it waits on a thread of its own, and this one on the thread.
        let path = self.lock.clone();
        let path_taken = self.lock.clone();
        let (locked, taken) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("raceway-take-over".into())
            .spawn(move || {
                let _ = locked.send(crate::linux::lock_file(&path, true));
            })
            .map_err(|err| fail(format!("cannot start a thread: {err}")))?;
        match taken.recv_timeout(STOPS_WITHIN) {
            Ok(Ok(Some(file))) => {
                tracing::info!(
                    "take-over: pid {pid} closed its ports {} ms after it was asked",
                    asked.elapsed().as_millis()
                );
                Ok(PortsLock { held: Some((file, path_taken)) })
            }
            Ok(Ok(None)) => Err(fail("the ports lock was not taken".into())),
            Ok(Err(err)) => Err(fail(format!("{}: {err}", self.lock.display()))),
            Err(_) => {
                Err(fail(format!("the switch before did not close its ports within {} s", STOPS_WITHIN.as_secs())))
            }
        }
    }
}

/// How a run comes by its ports.
pub enum PortsFrom {
    /// The EAL created them at its start; the ports lock is held (when it was free).
    Start(PortsLock),
    /// A running switch hands them over (`TakeOver::complete`).
    TakeOver(TakeOver),
}

/// Held while this process has the ports open: a switch taking over waits for it.
#[derive(Debug)]
pub struct PortsLock {
    /// The locked file and its path; closing it lets the lock go.
    held: Option<(std::fs::File, std::path::PathBuf)>,
}

impl PortsLock {
    /// At a plain start with EAL prefix `prefix`, before the EAL: the lock, or the refusal
    /// when a switch on the same prefix holds it. A second switch would share the first's
    /// runtime directory and telemetry socket and open its ports beside it; replacing a
    /// running switch is `--take-over`'s work. A lock that cannot be taken at all (the runtime
    /// directory unwritable) leaves the run without one: only a take-over needs it.
    pub fn take(prefix: &str) -> Result<Self, DpdkError> {
        let path = ports_lock_path(prefix);
        match crate::linux::lock_file(&path, false) {
            Ok(Some(file)) => Ok(Self { held: Some((file, path)) }),
            Ok(None) => {
                let slots = show::prefix_slots(prefix);
                let pid = slots.iter().find_map(|slot| show::Client::try_connect(&show::socket_path(slot))?.pid());
                let who = pid.map_or_else(String::new, |pid| format!(" (pid {pid})"));
                Err(DpdkError {
                    context: path.display().to_string(),
                    problem: format!(
                        "held by another switch{who} on EAL prefix '{prefix}': stop it first, or replace it \
                         with `raceway run --take-over`"
                    ),
                })
            }
            Err(err) => {
                tracing::warn!("{}: {err}; a take-over would not know when the ports are closed", path.display());
                Ok(Self { held: None })
            }
        }
    }

    /// Lets go of the lock once the ports are closed. With no successor waiting on it, the
    /// file goes too, removed while still locked: a switch starting later creates it anew, and
    /// none is waiting on the old one (a successor waits only after its hand-over was
    /// answered, and the answers stopped before the ports closed).
    pub fn let_go(mut self, successor_waits: bool) {
        if let Some((file, path)) = self.held.take() {
            if !successor_waits {
                let _ = std::fs::remove_file(&path);
            }
            drop(file);
        }
    }
}

impl Drop for PortsLock {
    /// A run that ends without `let_go` (a port that failed to start, an error before the
    /// ports closed) hands over to no one: the file goes with the lock, as `let_go(false)`.
    fn drop(&mut self) {
        if let Some((file, path)) = self.held.take() {
            let _ = std::fs::remove_file(&path);
            drop(file);
        }
    }
}

/// The lock file both slots of `prefix` (the first slot's name) share, in DPDK's runtime
/// base directory.
fn ports_lock_path(prefix: &str) -> std::path::PathBuf {
    let base = show::runtime_base();
    let _ = std::fs::create_dir_all(&base);
    base.join(format!("raceway-{prefix}.ports.lock"))
}

/// The EAL arguments of a take-over: `args` (the config's, with its ports) with the file
/// prefix set to `prefix` and no port device: a PCI port's address is blocked (`-b`) so the
/// EAL leaves it to the running switch until `probe_ports`.
pub fn arguments(args: &[String], config: &Config, prefix: &str) -> Vec<String> {
    let devices: Vec<&str> = config.ports.iter().filter_map(|port| port.device.as_deref()).collect();
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--file-prefix" => {
                words.next();
            }
            "--vdev" | "-a" => match words.next() {
                Some(device) if devices.contains(&device.as_str()) => {
                    if is_pci_address(device_name(device)) {
                        out.extend(["-b".to_string(), device_name(device).to_string()]);
                    }
                }
                Some(device) => out.extend([word.clone(), device.clone()]),
                None => out.push(word.clone()),
            },
            _ if word.starts_with("--file-prefix=") => {}
            _ => out.push(word.clone()),
        }
    }
    out.extend(["--file-prefix".to_string(), prefix.to_string()]);
    out
}

/// How long a device the switch before closed may stay busy. net_memif closes a server's
/// listening socket on the EAL's interrupt thread after the port is closed, so for a moment
/// its name is still taken; and a probe that fails on it leaves the ethdev half made, so
/// that it cannot be tried again. So the socket is waited for before the probe.
const DEVICE_FREE_WITHIN: Duration = Duration::from_secs(2);
/// How often a busy device's socket is looked for again.
const LOOK_AGAIN_EVERY: Duration = Duration::from_millis(5);

/// Creates every port's device once the switch before has let it go (waiting, for at most
/// `DEVICE_FREE_WITHIN`, until a memif server's socket is free), and logs how long it took
/// (the larger part of a take-over's gap).
pub fn probe_ports(config: &Config) -> Result<(), DpdkError> {
    let probing = Instant::now();
    for port in &config.ports {
        let devargs = port.device.as_deref().unwrap_or_default();
        let fail = |problem: String| DpdkError { context: format!("port '{}'", port.name), problem };
        if let Some(socket) = memif_socket::server_socket(devargs) {
            let deadline = Instant::now() + DEVICE_FREE_WITHIN;
            while memif_socket::bound(&socket) {
                if Instant::now() >= deadline {
                    let within = DEVICE_FREE_WITHIN.as_secs();
                    return Err(fail(format!("its memif socket '{socket}' is still bound after {within} s")));
                }
                std::thread::sleep(LOOK_AGAIN_EVERY);
            }
        }
        Port::probe(devargs).map_err(|err| fail(err.problem))?;
    }
    tracing::info!("take-over: {} port(s) probed in {} ms", config.ports.len(), probing.elapsed().as_millis());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn a_take_over_starts_the_eal_on_the_other_prefix_without_the_ports() {
        let config = Config::parse(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n\
             [[port]]\nname = \"host0\"\ndevice = \"net_af_packet0,iface=v0\"\nspeed_gbps = 10\npeer_mac = \"02:00:00:00:00:02\"\n\
             [[port]]\nname = \"up0\"\ndevice = \"0000:3b:00.0,txq=2\"\nspeed_gbps = 10\npeer_mac = \"02:00:00:00:00:03\"\n",
            "t.toml",
        )
        .unwrap();
        let args = words(
            "--no-huge --file-prefix leaf1 -l 0-1 --vdev net_af_packet0,iface=v0 -a 0000:3b:00.0,txq=2 --vdev net_null9",
        );
        assert_eq!(
            arguments(&args, &config, "leaf1-2"),
            words("--no-huge -l 0-1 -b 0000:3b:00.0 --vdev net_null9 --file-prefix leaf1-2"),
            "the ports' devices go, a PCI one blocked; another device and the rest stay"
        );
        let args = words("--file-prefix=leaf1 -l 0-1");
        assert_eq!(arguments(&args, &config, "leaf1"), words("-l 0-1 --file-prefix leaf1"));
    }
}
