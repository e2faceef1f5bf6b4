//! The live control plane's data path: a Linux interface (TAP) per port in the switch's own
//! network namespace, the frames punted to it and the frames its kernel sends back.
//!
//! The switch worker never blocks on the kernel: punted frames go to the control thread over
//! a bounded lock-free ring (full: `punt_queue_full`), and frames the kernel sends come back
//! over another, which the worker drains once per loop into the scheduler (`Switch::inject`,
//! in the control class). The control thread writes punted frames to the port's TAP, reads
//! what the kernel writes on each TAP into mbufs, mirrors each port's link to its TAP's
//! carrier, and publishes new FIB snapshots (see `kernel` for what it learns).
//!
//! The namespace (`[control] netns`) is created if missing and then removed at exit; one that
//! existed stays. The TAPs vanish when the switch exits. Forwarding is on in the namespace, so
//! the kernel answers for frames the data plane cannot (glean: it resolves the neighbour and
//! forwards the first packets itself; TTL expiry: it sends time-exceeded), and redirects are
//! off (the kernel would otherwise redirect hosts to the neighbour on their own link).
//!
//! Invariant: every punted mbuf is written to its TAP or counted, then freed by the control
//! thread; every mbuf the control thread allocates is injected or freed; at exit both rings
//! are emptied (dropping frees) before the pool is checked.

pub mod kernel;

use crate::config::{Config, ControlConfig};
use crate::dpdk::host::{self, Tap};
use crate::dpdk::{Mbuf, Mempool, Port};
use crate::observe::stats::ControlStats;
use crate::pipeline::fib::FibHandle;
use crossbeam_queue::ArrayQueue;
use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Frames each ring holds: a few bursts of control traffic.
pub const RING_FRAMES: usize = 1024;
/// Frames read from one TAP per turn, so one chatty interface cannot starve the others.
const READ_PER_TURN: usize = 32;
/// Largest frame raceway's mbufs carry in one segment (their 2048-byte data room), which bounds
/// the TAPs' MTU.
pub const MAX_FRAME: usize = 2048;
/// How often link states are mirrored and counters published.
const HOUSEKEEPING: Duration = Duration::from_millis(50);

/// What the workers and the control thread share.
pub struct ControlLink {
    /// (port, frame) for the kernel.
    pub punt: ArrayQueue<(u16, Mbuf)>,
    /// (port, frame) from the kernel, to send out of that port.
    pub inject: ArrayQueue<(u16, Mbuf)>,
    pub fib: FibHandle,
}

/// A running control thread.
pub struct ControlPlane {
    pub link: Arc<ControlLink>,
    pub stats: Arc<Mutex<ControlStats>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The namespace raceway created (and removes at exit).
    created_netns: Option<String>,
}

/// Runs `ip` with `args`; the error names the command and what it printed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).output().map_err(|err| format!("cannot run ip: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
}

fn namespace_exists(name: &str) -> bool {
    std::path::Path::new(&format!("/run/netns/{name}")).exists()
}

impl ControlPlane {
    /// Creates the namespace if needed, a TAP per port in it (the switch's MAC, the port's
    /// MTU up to `MAX_FRAME`, the configured addresses), and starts the control thread.
    /// Returns once the interfaces exist, or with the first thing that failed.
    pub fn start(
        config: &Config,
        ports: Arc<Vec<Port>>,
        pool: Arc<Mempool>,
        link: Arc<ControlLink>,
    ) -> Result<Self, String> {
        let control = config.control.clone().expect("start needs [control]");
        let created_netns = if namespace_exists(&control.netns) {
            None
        } else {
            ip(&["netns", "add", &control.netns])?;
            Some(control.netns.clone())
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(ControlStats {
            punt_tap_errors: vec![0; config.ports.len()],
            inject_dropped: vec![0; config.ports.len()],
            ..ControlStats::default()
        }));
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = {
            let (config, link, stop, stats) =
                (config.clone(), Arc::clone(&link), Arc::clone(&stop), Arc::clone(&stats));
            std::thread::Builder::new()
                .name("raceway-control".into())
                .spawn(move || {
                    let opened = open_interfaces(&config, &control).and_then(|taps| {
                        let sync = crate::control::kernel::Sync::open().map_err(|err| {
                            format!("control: cannot open a netlink socket in {}: {err}", control.netns)
                        })?;
                        let mut interfaces = Vec::with_capacity(taps.len());
                        for tap in &taps {
                            interfaces.push(
                                host::interface_index(&tap.name)
                                    .map_err(|err| format!("control: index of '{}': {err}", tap.name))?,
                            );
                        }
                        Ok((taps, sync, interfaces))
                    });
                    let (taps, sync, interfaces) = match opened {
                        Ok(opened) => {
                            let _ = ready_tx.send(Ok(()));
                            opened
                        }
                        Err(err) => {
                            let _ = ready_tx.send(Err(err));
                            return;
                        }
                    };
                    ControlThread { taps, sync, interfaces, ports, pool, link, stop, stats, config }.run();
                })
                .map_err(|err| format!("cannot start the control thread: {err}"))?
        };
        let mut plane = Self { link, stats, stop, thread: Some(thread), created_netns };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(plane),
            Ok(Err(err)) => {
                plane.stop();
                Err(err)
            }
            Err(_) => {
                plane.stop();
                Err("the control thread ended before its interfaces were up".into())
            }
        }
    }

    /// Stops the thread (after the workers: it frees what they punted last), empties both
    /// rings, and removes a namespace raceway created.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        while self.link.punt.pop().is_some() {}
        while self.link.inject.pop().is_some() {}
        if let Some(netns) = self.created_netns.take() {
            if let Err(err) = ip(&["netns", "del", &netns]) {
                tracing::warn!("control: {err}");
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// In the control thread: enters the namespace and brings up a TAP per port.
fn open_interfaces(config: &Config, control: &ControlConfig) -> Result<Vec<Tap>, String> {
    host::enter_netns(&control.netns)
        .map_err(|err| format!("control.netns: cannot enter '{}': {err}", control.netns))?;
    let netns = control.netns.as_str();
    let sysctl = |setting: &str| -> Result<(), String> {
        let output = Command::new("ip")
            .args(["netns", "exec", netns, "sysctl", "-q", "-w", setting])
            .output()
            .map_err(|err| format!("cannot run sysctl: {err}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!("sysctl {setting} in {netns}: {}", String::from_utf8_lossy(&output.stderr).trim()))
        }
    };
    for setting in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.default.send_redirects=0",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        // Addresses usable at once: duplicate detection would hold them tentative for a second.
        "net.ipv6.conf.default.accept_dad=0",
    ] {
        sysctl(setting)?;
    }
    let mtu = (config.mtu as usize).min(MAX_FRAME - 18);
    if mtu < config.mtu as usize {
        tracing::info!("control: host interfaces get MTU {mtu} (one mbuf per frame), switch.mtu is {}", config.mtu);
    }
    let mut taps = Vec::with_capacity(config.ports.len());
    for port in &config.ports {
        let tap = Tap::create(&port.name)
            .map_err(|err| format!("control: cannot create TAP '{}' in {netns}: {err}", port.name))?;
        let mac = config.mac.to_string();
        let mtu = mtu.to_string();
        ip(&["-n", netns, "link", "set", "dev", &port.name, "address", &mac, "mtu", &mtu, "up"])?;
        for address in &port.addresses {
            ip(&["-n", netns, "address", "replace", &address.to_string(), "dev", &port.name])?;
        }
        // Down until the data-plane port says otherwise.
        tap.set_carrier(false).map_err(|err| format!("control: carrier of '{}': {err}", port.name))?;
        taps.push(tap);
    }
    Ok(taps)
}

struct ControlThread {
    taps: Vec<Tap>,
    sync: crate::control::kernel::Sync,
    /// The kernel's interface index of each port's TAP.
    interfaces: Vec<u32>,
    ports: Arc<Vec<Port>>,
    pool: Arc<Mempool>,
    link: Arc<ControlLink>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<ControlStats>>,
    config: Config,
}

impl ControlThread {
    fn run(mut self) {
        let mut counters = self.stats.lock().expect("control stats").clone();
        let mut carrier: Vec<Option<bool>> = vec![None; self.taps.len()];
        let mut buffer = vec![0u8; 65_536];
        let mut next_housekeeping = Instant::now();
        loop {
            let stopping = self.stop.load(Ordering::Relaxed);
            let mut busy = false;
            while let Some((port, mbuf)) = self.link.punt.pop() {
                busy = true;
                let port = usize::from(port);
                if self.taps[port].write(crate::packet::PacketBuf::data(&mbuf)).is_err() {
                    counters.punt_tap_errors[port] += 1;
                }
            }
            if stopping {
                break;
            }
            for (port, tap) in self.taps.iter().enumerate() {
                for _ in 0..READ_PER_TURN {
                    let len = match tap.read(&mut buffer) {
                        Ok(len) => len,
                        Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                        Err(err) => {
                            tracing::warn!("control: reading TAP '{}': {err}", tap.name);
                            break;
                        }
                    };
                    busy = true;
                    let injected = self.pool.alloc().and_then(|mut mbuf| mbuf.append(&buffer[..len]).then_some(mbuf));
                    match injected.map(|mbuf| self.link.inject.push((port as u16, mbuf))) {
                        Some(Ok(())) => {}
                        // No mbuf, too long for one, or the ring full (dropping the pair frees it).
                        _ => counters.inject_dropped[port] += 1,
                    }
                }
            }
            let started = Instant::now();
            match self.sync.poll() {
                Ok(true) => {
                    busy = true;
                    self.publish_fib(&mut counters, started);
                }
                Ok(false) => {}
                Err(err) => tracing::warn!("control: netlink: {err}"),
            }
            if Instant::now() >= next_housekeeping {
                next_housekeeping = Instant::now() + HOUSEKEEPING;
                // Snapshots the workers have let go of are freed here, off the packet path.
                self.link.fib.reclaim();
                for (index, (tap, port)) in self.taps.iter().zip(self.ports.iter()).enumerate() {
                    let up = port.link_up() && self.config.ports[index].enabled;
                    if carrier[index] != Some(up) {
                        match tap.set_carrier(up) {
                            Ok(()) => carrier[index] = Some(up),
                            Err(err) => tracing::warn!("control: carrier of '{}': {err}", tap.name),
                        }
                    }
                }
                self.stats.lock().expect("control stats").clone_from(&counters);
            }
            if !busy {
                // Idle: the kernel's frames wake the poll; punted ones wait at most this long.
                let mut fds: Vec<i32> = self.taps.iter().map(Tap::raw_fd).collect();
                fds.push(self.sync.raw_fd());
                let _ = host::wait_readable(&fds, 1);
            }
        }
        self.stats.lock().expect("control stats").clone_from(&counters);
    }

    /// Builds the FIB from the config and the kernel's tables and publishes it; the latency
    /// counted runs from reading the kernel's messages to the snapshot being published.
    fn publish_fib(&self, counters: &mut ControlStats, started: Instant) {
        let interfaces = &self.interfaces;
        let learned = self.sync.tables.learned(|index| interfaces.iter().position(|&i| i == index));
        let generation = counters.fib_generation.max(1) + 1;
        counters.fib_routes = (learned.routes.len() + self.config.routes.len()) as u64;
        counters.fib_neighbors = (learned.neighbors.len() + self.config.neighbors.len()) as u64;
        self.link.fib.publish(crate::pipeline::fib::Fib::new(&self.config, &learned, generation));
        counters.fib_generation = generation;
        counters.last_update_ns = started.elapsed().as_nanos() as u64;
        // Published at once (not at the next housekeeping): readers time updates by it.
        self.stats.lock().expect("control stats").clone_from(counters);
    }
}
