//! What a live run opens before its workers start and closes after they stop: the EAL's
//! arguments, which lcores do what (`Layout`), the mbuf pools, the ports, the link watcher,
//! the control plane, the metrics server and the capture writer, all held in one
//! `Resources`.
//!
//! Invariant: `Resources`' fields are declared in teardown order (Rust drops a struct's
//! fields in declaration order), so a run that fails half way tears down as a finished one
//! does: whatever holds mbufs (the control plane's rings, the ports' queues) goes before the
//! pools they came from, and the pools are counted last.

use super::ingress::LongFrames;
use super::shard_ring::{frames_per_loop, SHARD_RING};
use super::shared::Shared;
use super::take_over::{self, PortsFrom, PortsLock};
use crate::config::Config;
use crate::config::{device_name, is_pci_address};
use crate::control::{self, ControlLink, ControlPlane};
use crate::counters::SwitchStats;
use crate::dpdk::{self, DpdkError, Eal, Mbuf, Mempool, Port, TxQueues, BURST};
use crate::link::PortStates;
use crate::live::link_watch::{self, LinkWatch};
use crate::observe::capture::{Capture, CaptureSummary, Tap};
use crate::switch::Switch;
use crate::tm::shard::BATCH;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The EAL arguments: the config's, the lcores, one `--vdev`/`-a` per port, then the extras.
pub fn eal_arguments(config: &Config, extra: &[String]) -> Result<Vec<String>, String> {
    let mut args = config.eal.clone();
    if let Some(lcores) = &config.lcores {
        // "0-1" is a core list (-l); "0@0,1@1,2@0" maps lcores to CPUs (--lcores).
        args.push(if lcores.contains(['@', '(']) { "--lcores" } else { "-l" }.into());
        args.push(lcores.clone());
    }
    for (index, port) in config.ports.iter().enumerate() {
        let device = port
            .device
            .as_deref()
            .ok_or_else(|| format!("port[{index}].device: live mode needs a device for port '{}'", port.name))?;
        if is_pci_address(device_name(device)) {
            args.push("-a".into());
        } else {
            args.push("--vdev".into());
        }
        args.push(device.to_string());
    }
    args.extend(extra.iter().cloned());
    Ok(args)
}

/// Mbufs needed: rx rings (`rx_queues` of them, all ports together) and tx rings (two on a
/// port with a PFC tx queue), the bursts in flight, and
/// as many frames as the buffer can hold (one per cell; a chained frame holds one mbuf per
/// segment, and a segment of up to 2,048 bytes is at least one of the frame's cells). With several run-to-completion
/// workers, also the frames between them (rings and batches being filled) and the frames
/// their stale views of the pools may overcommit (`tm::shard`). With `[control]`, also the
/// rings to and from the control thread and each worker's punt outbox.
pub fn mempool_size(config: &Config, rx_queues: u64, workers: u64) -> u32 {
    let ports = config.ports.len() as u64;
    // A PFC tx queue holds the PFC frames it sent until the driver recycles its descriptors.
    let tx_queues = ports + config.ports.iter().filter(|port| port.pfc_tx_queue).count() as u64;
    let rings = rx_queues * u64::from(dpdk::RX_DESCRIPTORS) + tx_queues * u64::from(dpdk::TX_DESCRIPTORS);
    let bursts = ports * 2 * BURST as u64;
    let queued = Switch::<Mbuf>::arena_capacity(config) as u64;
    let between_workers = workers * (workers - 1) * (SHARD_RING as u64 + 1) * BATCH as u64;
    let overcommit = workers * (workers - 1) * frames_per_loop(config, workers as usize) as u64;
    let control = match config.control {
        Some(_) => (crate::control::RING_MBUFS + workers as usize * crate::switch::PUNT_OUTBOX) as u64,
        None => 0,
    };
    (rings + bursts + queued + between_workers + overcommit + control + 512).min(u64::from(u32::MAX)) as u32
}

/// Jumbo mbufs a run needs: a frame that takes one is longer than a plain mbuf, so it
/// charges more than `frame_room` bytes of buffer, and the buffer (with the staleness
/// overcommit of sharded workers, `mempool_size`) holds proportionally fewer of them; plus
/// the tx rings and bursts, the rings between workers and a margin, which may all be jumbo.
pub fn jumbo_pool_size(config: &Config, rx_queues: u64, workers: u64) -> u32 {
    let all = u64::from(mempool_size(config, rx_queues, workers));
    let queued = Switch::<Mbuf>::arena_capacity(config) as u64;
    let frame_room = u64::from(config.mbuf_bytes);
    let cells_per_jumbo = crate::config::plan::charge(frame_room as usize + 1) / crate::config::plan::CELL_BYTES;
    // The rx rings hold plain mbufs (chains): what is not queued, less the rx rings, may be
    // jumbo; what is queued is at most one jumbo frame per `cells_per_jumbo` cells.
    let rx_rings = u64::from(dpdk::RX_DESCRIPTORS) * rx_queues;
    let elsewhere = all - queued - rx_rings;
    (queued.div_ceil(cells_per_jumbo) + elsewhere).min(u64::from(u32::MAX)) as u32
}

/// Which lcores forward.
pub(super) struct Layout {
    /// The workers' lcores. Empty when the main lcore forwards (no worker lcore).
    pub forwarder_lcores: Vec<u32>,
    /// Workers: one per worker lcore, at most one per port (on the main lcore when there is
    /// no worker lcore).
    pub workers: usize,
}

impl Layout {
    pub fn of(config: &Config, workers: &[u32]) -> Self {
        if workers.len() > config.ports.len() {
            tracing::warn!(
                "ports are dealt whole to workers: {} worker lcores for {} ports leaves {} idle",
                workers.len(),
                config.ports.len(),
                workers.len() - config.ports.len()
            );
        }
        Self { forwarder_lcores: workers.to_vec(), workers: workers.len().clamp(1, config.ports.len().max(1)) }
    }

    /// Rx queues all ports open together (`[[port]] rx_queues`; RSS spreads flows over a
    /// port's queues where the device hashes), dealt over the workers from each port's owner
    /// on (`ShardBoard::rx_worker`).
    pub fn all_rx_queues(config: &Config) -> u64 {
        config.ports.iter().map(|port| u64::from(port.rx_queues)).sum()
    }
}

/// `--metrics`: the thread serving Prometheus text from the workers' published counters;
/// stops and joins when dropped.
pub(super) struct MetricsServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(listener: &Arc<std::net::TcpListener>, shared: &Arc<Shared>) -> Result<Self, DpdkError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (listener, shared, stopped) = (Arc::clone(listener), Arc::clone(shared), Arc::clone(&stop));
        if let Ok(address) = listener.local_addr() {
            tracing::info!("metrics on http://{address}/metrics");
        }
        let serve = move || {
            crate::observe::metrics::serve(&listener, &stopped, || {
                crate::observe::metrics::render(&shared.counters.snapshot(), &shared.config.running())
            })
        };
        let thread = std::thread::Builder::new().name("raceway-metrics".into()).spawn(serve).map_err(|err| {
            DpdkError { context: "--metrics".into(), problem: format!("cannot start the metrics thread: {err}") }
        })?;
        Ok(Self { stop, thread: Some(thread) })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Everything a live run opens, in teardown order (see the module notes).
pub(super) struct Resources {
    /// Reads the published counters: stops first.
    pub metrics: Option<MetricsServer>,
    /// `--capture`: finishing flushes its files.
    pub capture: Option<Capture>,
    /// `[control]`: stops after the workers (its thread frees what they punted last) and
    /// empties its rings before the pools are counted.
    pub control: Option<ControlPlane>,
    /// `None` once `stop_ports` has stopped it.
    pub link_watch: Option<LinkWatch>,
    /// Close before the pools are counted, returning what their drivers hold.
    pub ports: Vec<Arc<Port>>,
    /// Held while the ports (and host interfaces) are open, for a switch taking over.
    ports_lock: PortsLock,
    /// Each port's link, administrative state and MTU, as the link watcher and the control
    /// plane follow them.
    pub port_states: Arc<PortStates>,
    /// Mbufs of `switch.mtu`'s size: what the control plane's long frames are copied into,
    /// and the forwarded ones where chains are not carried (`LongFrames`).
    pub jumbo: Option<Arc<Mempool>>,
    pub pool: Arc<Mempool>,
    /// Whether frames longer than one mbuf cross as the chains they arrive in (every port's
    /// device sends chains) or are copied into jumbo mbufs.
    pub carry_chains: bool,
}

/// How long a take-over waits for its FIB thread's first whole read before it asks for the
/// hand-over anyway (a million routes take about a second).
const READ_WHOLE_WITHIN: Duration = Duration::from_secs(60);
/// How long a plain restart waits for the kernel's tables before its ports open: a small FIB
/// is read whole first, and a large one (a million routes take over a second) does not keep
/// the data plane down past the routing daemons' BFD detection (900 ms at 300 ms x 3); its
/// first frames to routes not yet read miss, as they did before the tables were read early.
const RESTART_READS_AT_MOST: Duration = Duration::from_millis(250);

/// What closing the resources reports.
pub(super) struct Closed {
    pub capture: Option<CaptureSummary>,
    pub elapsed: std::time::Duration,
    pub mbufs_in_pool: u32,
    pub mbufs_available_at_exit: u32,
}

impl Resources {
    /// Opens the pools, the ports, the control plane and the link watcher; the metrics
    /// server and the capture start later, once the workers' counters exist.
    /// With `take_over`, the switch running before is asked to hand over once the pools are
    /// open, and the ports are probed once it has exited.
    pub fn open(eal: &Eal, config: &Config, layout: &Layout, ports_from: PortsFrom) -> Result<Self, DpdkError> {
        let taking_over = matches!(ports_from, PortsFrom::TakeOver(_));
        // Until the ports exist (a take-over's wait), whether they send chains is not known:
        // the jumbo pool is made in case.
        let carry_chains = !taking_over && every_device_sends_chains(config)?;
        let (pool, jumbo) = open_pools(eal, config, layout, carry_chains)?;
        let control_link = control_link(config)?;
        // The kernel's tables are read whole before the ports open: a take-over's while the
        // switch before still forwards, a restart's on the host interfaces its keeper held (for
        // at most `RESTART_READS_AT_MOST`), so that the switch forwards by the whole FIB from its
        // first frame (one forwarded before them would find no route).
        let within = if taking_over { READ_WHOLE_WITHIN } else { RESTART_READS_AT_MOST };
        let early_control = control_link.as_ref().and_then(|link| read_tables_early(config, link, within));
        let (carry_chains, ports_lock) = match ports_from {
            PortsFrom::Start(lock) => (carry_chains, lock),
            PortsFrom::TakeOver(running) => {
                let lock = running.complete()?;
                take_over::probe_ports(config)?;
                (every_device_sends_chains(config)?, lock)
            }
        };
        let ports = open_ports(config, &pool)?;
        // A port's MTU goes up to switch.mtu (what the buffer, headroom and jumbo mbufs are
        // sized for) or the device's maximum, whichever is lower.
        let port_states = Arc::new(PortStates::new(
            config.ports.iter().zip(ports.iter()).map(|(port, device)| (port.mtu, device.mtu.min(config.mtu))),
        ));
        for (index, port) in config.ports.iter().enumerate() {
            let mtu = port_states.get(index).mtu;
            if mtu < port.mtu {
                tracing::warn!(
                    "port '{}': mtu {} is more than its device takes; it sends at most {mtu}",
                    port.name,
                    port.mtu
                );
            }
        }
        // The links are read before the control plane starts, so that it sets each host
        // interface's carrier from the truth: one taken over in a restart does not flap.
        let link_watch = Some(start_link_watch(config, &ports, &port_states, control_link.as_ref())?);
        let control = start_control(config, &port_states, &pool, jumbo.as_ref(), control_link, early_control)?;
        Ok(Self {
            metrics: None,
            capture: None,
            control,
            link_watch,
            ports,
            ports_lock,
            port_states,
            jumbo,
            pool,
            carry_chains,
        })
    }

    /// Once the workers are done (they held the lossless senders and drained): stops the
    /// link watcher, then every port, before the rest of the shutdown, so that no host resumes
    /// sending into rings nobody reads once its pause runs out. The watcher goes first: the
    /// stopped ports' links must not take the kept host interfaces' carriers down with them
    /// (the routing daemons would drop their sessions over a restart).
    pub fn stop_ports(&mut self) {
        self.link_watch = None;
        for port in &self.ports {
            port.stop_when_idle();
        }
    }

    /// `--capture`: starts the writer for the requested ports.
    pub fn start_capture(
        &mut self,
        requests: &[crate::observe::capture::CaptureRequest],
        tsc_hz: u64,
    ) -> Result<(), DpdkError> {
        if requests.is_empty() {
            return Ok(());
        }
        let capture = Capture::start(requests, tsc_hz, dpdk::rdtsc())
            .map_err(|problem| DpdkError { context: "--capture".into(), problem })?;
        for request in requests {
            tracing::info!("capturing port '{}' into {}", request.port_name, request.file.display());
        }
        self.capture = Some(capture);
        Ok(())
    }

    /// What a worker needs of the resources: the pools, a capture tap, the control link.
    pub fn worker_kit(&self, config: &Config) -> WorkerKit {
        WorkerKit {
            pool: Arc::clone(&self.pool),
            long_frames: LongFrames {
                max_len: config.mtu as usize + dpdk::LINK_HEADERS,
                copy_into: if self.carry_chains { None } else { self.jumbo.clone() },
            },
            tap: self.capture.as_ref().map(Capture::tap),
            control: self.control.as_ref().map(|plane| Arc::clone(&plane.link)),
        }
    }

    /// After the workers stopped: closes everything in teardown order and counts the mbufs
    /// back in the pools. `stats` gets the control plane's final counters; `dump_fib` runs
    /// while the control plane still publishes the FIB; `handing_over` says a successor waits
    /// for the ports.
    pub fn close(
        self,
        stats: &mut SwitchStats,
        started: Instant,
        handing_over: bool,
        dump_fib: impl FnOnce(),
    ) -> Result<Closed, DpdkError> {
        let Self {
            metrics,
            capture,
            mut control,
            link_watch,
            ports,
            ports_lock,
            port_states,
            jumbo,
            pool,
            carry_chains: _,
        } = self;
        drop(metrics);
        let capture = capture
            .map(Capture::finish)
            .transpose()
            .map_err(|problem| DpdkError { context: "--capture".into(), problem })?;
        if let Some(summary) = &capture {
            for (file, frames) in &summary.written {
                tracing::info!("capture: {frames} frames written to {}", file.display());
            }
            for (file, why) in &summary.failed {
                tracing::warn!("capture: {} stopped being written: {why}", file.display());
            }
            if summary.not_captured > 0 {
                tracing::warn!(
                    "capture: {} frames forwarded but not captured (the writer fell behind)",
                    summary.not_captured
                );
            }
        }
        let elapsed = started.elapsed();
        for port in ports.iter() {
            let (rx, tx, missed, nombuf) = port.hw_stats();
            tracing::info!(
                "port '{}': device counters rx {rx} tx {tx} missed/errors {missed} no-mbuf {nombuf}",
                port.name
            );
        }
        dump_fib();
        drop(link_watch);
        // Ports close (flushing capture files, returning driver-held mbufs) before we count.
        // Every queue handle and the link watcher's clones are gone by now, so each `Port` drops
        // here; one still held would close later, and the count below would say so.
        // Each in a thread of its own, and beside the control plane's stop: closing a kernel
        // socket (net_af_packet's) waits out an RCU grace period, tens of milliseconds, and a
        // restart waits for the sum.
        std::thread::scope(|scope| {
            for port in ports {
                scope.spawn(move || drop(port));
            }
            if let Some(plane) = control.as_mut() {
                plane.stop();
                stats.control = Some(plane.stats.lock().expect("control stats").clone());
            }
            drop(control);
        });
        // A switch taking over opens the ports from here on.
        ports_lock.let_go(handing_over);
        drop(port_states);
        // Both pools: what is missing from either at exit leaked.
        let pools = std::iter::once(&pool).chain(jumbo.as_ref());
        let (size, available) =
            pools.fold((0, 0), |(size, available), pool| (size + pool.size(), available + pool.available()));
        if available != size {
            tracing::warn!("{} mbufs not back in the pool at exit", size - available);
        }
        // The process ends after a live run: the pools' memory goes with the EAL's.
        for pool in std::iter::once(&pool).chain(jumbo.as_ref()) {
            pool.end_with_process();
        }
        Ok(Closed { capture, elapsed, mbufs_in_pool: size, mbufs_available_at_exit: available })
    }
}

/// What every worker is handed from the resources.
pub(super) struct WorkerKit {
    /// For the PFC frames the switch sends.
    pub pool: Arc<Mempool>,
    /// What the rx prologue does with frames longer than one mbuf.
    pub long_frames: LongFrames,
    /// Copies captured ports' frames for `--capture`.
    pub tap: Option<Tap>,
    /// The rings to and from the control thread, and the FIB it publishes (`[control]`).
    pub control: Option<Arc<ControlLink>>,
}

/// Whether every port's device sends chained mbufs; the log names those that do not.
fn every_device_sends_chains(config: &Config) -> Result<bool, DpdkError> {
    let mut refusing = Vec::new();
    for port in &config.ports {
        let name = device_name(port.device.as_deref().unwrap_or_default());
        let sends = Port::find(name).and_then(Port::sends_chains).unwrap_or(false);
        if !sends {
            refusing.push(format!("'{}' ({name})", port.name));
        }
    }
    if !refusing.is_empty() {
        tracing::info!(
            "frames longer than one mbuf are copied into one jumbo mbuf: port {} cannot send a chain",
            refusing.join(", ")
        );
    }
    Ok(refusing.is_empty())
}

/// The mbuf pool, and the jumbo pool when switch.mtu allows frames longer than one mbuf and
/// something copies them: the control plane (frames from the kernel), or the rx prologue
/// where chains are not carried.
fn open_pools(
    eal: &Eal,
    config: &Config,
    layout: &Layout,
    carry_chains: bool,
) -> Result<(Arc<Mempool>, Option<Arc<Mempool>>), DpdkError> {
    let rx_queues = Layout::all_rx_queues(config);
    let workers = layout.workers as u64;
    let pool_size = mempool_size(config, rx_queues, workers);
    let data_room = (config.mbuf_bytes + dpdk_sys::RTE_PKTMBUF_HEADROOM) as u16;
    let pool =
        Arc::new(Mempool::new(eal, "raceway_mbufs", pool_size, 256, data_room, -1).map_err(|err| DpdkError {
            context: err.context,
            problem: format!(
                "{} (about {} MiB): give the EAL more memory (-m), or lower switch.buffer_bytes or dpdk.mbuf_bytes",
                err.problem,
                (u64::from(pool_size) * (u64::from(data_room) + 192)) >> 20
            ),
        })?);
    tracing::info!("mbuf pool: {pool_size} mbufs of {data_room} bytes");
    // Frames longer than one mbuf (jumbo frames up to switch.mtu) copied whole go into
    // mbufs of a second pool, sized by the buffer's bytes, not its frame count.
    let jumbo_room = config.mtu as usize + dpdk::LINK_HEADERS;
    if jumbo_room <= pool.frame_room() || (carry_chains && config.control.is_none()) {
        return Ok((pool, None));
    }
    let size = jumbo_pool_size(config, rx_queues, workers);
    let data_room = (jumbo_room + dpdk_sys::RTE_PKTMBUF_HEADROOM as usize) as u16;
    let jumbo = Mempool::new(eal, "raceway_jumbo", size, 64, data_room, -1).map_err(|err| DpdkError {
        context: err.context,
        problem: format!(
            "{} (about {} MiB for frames up to switch.mtu = {}): give the EAL more memory (-m), or lower \
             switch.mtu or switch.buffer_bytes",
            err.problem,
            (u64::from(size) * (u64::from(data_room) + 192)) >> 20,
            config.mtu
        ),
    })?;
    tracing::info!("jumbo mbuf pool: {size} mbufs of {data_room} bytes");
    Ok((pool, Some(Arc::new(jumbo))))
}

/// The control plane before the ports open (a take-over's before the hand-over, a restart's
/// on the interfaces its keeper held): its FIB thread, once it has read the kernel's tables
/// whole (or `within` passed). `None` when there are no host interfaces of this
/// config's yet (a first start): then everything starts once the ports are open.
fn read_tables_early(config: &Config, link: &Arc<ControlLink>, within: Duration) -> Option<ControlPlane> {
    let plane = ControlPlane::prepare(config, Arc::clone(link))
        .map_err(|err| tracing::debug!("control: the kernel's tables are read once the ports are open ({err})"))
        .ok()?;
    if !plane.wait_until_read_whole(within) {
        tracing::info!(
            "control: the kernel's tables not read whole in {} ms; the ports open, and the rest follows",
            within.as_millis()
        );
    }
    Some(plane)
}

/// Finds and starts each configured port's device.
fn open_ports(config: &Config, pool: &Arc<Mempool>) -> Result<Vec<Arc<Port>>, DpdkError> {
    let mut ports = Vec::with_capacity(config.ports.len());
    for port in &config.ports {
        let name = device_name(port.device.as_deref().unwrap_or_default());
        let id = Port::find(name).map_err(|err| DpdkError {
            context: format!("port '{}'", port.name),
            problem: format!("device '{name}' not found after EAL init ({})", err.problem),
        })?;
        let rx_queues = port.rx_queues;
        let tx = if port.pfc_tx_queue { TxQueues::WithPfcQueue } else { TxQueues::One };
        let started = Port::start(id, &port.name, pool, rx_queues, config.mtu, tx)?;
        if started.rx_queues < rx_queues {
            tracing::warn!(
                "port '{}': driver {} offers {} rx queue(s), not the {rx_queues} asked for; fewer workers share it",
                port.name,
                started.driver,
                started.rx_queues
            );
        }
        tracing::info!(
            "port '{}': ethdev {id}, driver {}, {} Gb/s configured, {} rx queue(s){}",
            port.name,
            started.driver,
            port.speed_mbps as f64 / 1000.0,
            started.rx_queues,
            if started.rss { " with RSS" } else { "" }
        );
        if started.driver == "net_pcap" && started.max_rx_queues > started.rx_queues {
            tracing::warn!(
                "port '{}': {} rx_pcap files but {} rx queue(s), one per RX worker: the other files are not read",
                port.name,
                started.max_rx_queues,
                started.rx_queues
            );
        }
        ports.push(Arc::new(started));
    }
    Ok(ports)
}

/// `[control]`: what the workers and the control threads will share.
fn control_link(config: &Config) -> Result<Option<Arc<ControlLink>>, DpdkError> {
    if config.control.is_none() {
        return Ok(None);
    }
    let fib = crate::pipeline::fib::Fib::new(config, &crate::pipeline::fib::Learned::default(), 1);
    let link = ControlLink::new(fib)
        .map_err(|err| DpdkError { context: "control".into(), problem: format!("cannot create an eventfd: {err}") })?;
    Ok(Some(Arc::new(link)))
}

/// `[control]`: the host interfaces in their namespace, and the control and FIB threads (a
/// take-over's FIB thread, `prepared`, already runs).
fn start_control(
    config: &Config,
    port_states: &Arc<PortStates>,
    pool: &Arc<Mempool>,
    jumbo: Option<&Arc<Mempool>>,
    link: Option<Arc<ControlLink>>,
    prepared: Option<ControlPlane>,
) -> Result<Option<ControlPlane>, DpdkError> {
    let (Some(control_config), Some(link)) = (&config.control, link) else { return Ok(None) };
    let pools = control::Pools { small: Arc::clone(pool), jumbo: jumbo.cloned() };
    let started = match prepared {
        // A take-over's, its FIB thread running since before the hand-over.
        Some(mut plane) => plane.take_interfaces(config, Arc::clone(port_states), pools).map(|()| plane),
        None => ControlPlane::start(config, Arc::clone(port_states), pools, link),
    };
    // The control plane's errors name their own context (`control: ...`, `control.netns: ...`).
    let plane = started.map_err(|said| match said.split_once(": ") {
        Some((context, problem)) if context.starts_with("control") => {
            DpdkError { context: context.into(), problem: problem.into() }
        }
        _ => DpdkError { context: "control".into(), problem: said },
    })?;
    tracing::info!(
        "control: a host interface per port in network namespace {} (ip -n {} link)",
        control_config.netns,
        control_config.netns
    );
    Ok(Some(plane))
}

/// The link watcher; with `[control]` it wakes the control thread, which mirrors each link
/// onto its port's host interface as soon as it changes.
fn start_link_watch(
    config: &Config,
    ports: &[Arc<Port>],
    port_states: &Arc<PortStates>,
    control: Option<&Arc<ControlLink>>,
) -> Result<LinkWatch, DpdkError> {
    let interfaces: Vec<Option<String>> = config
        .ports
        .iter()
        .map(|port| port.device.as_deref().and_then(link_watch::af_packet_interface).map(str::to_string))
        .collect();
    let wake_control: Box<dyn Fn() + Send> = match control {
        Some(link) => {
            let link = Arc::clone(link);
            Box::new(move || link.link_changed())
        }
        None => Box::new(|| {}),
    };
    LinkWatch::start(ports.to_vec(), interfaces, Arc::clone(port_states), wake_control)
        .map_err(|err| DpdkError { context: "link watcher".into(), problem: err.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mbuf_pool_holds_rings_bursts_and_a_frame_per_buffer_cell() {
        let config_on = |device: &dyn Fn(usize) -> String| {
            let mut text = String::from("[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n");
            for port in 0..4 {
                text.push_str(&format!(
                    "[[port]]\nname = \"p{port}\"\ndevice = \"{}\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n",
                    device(port)
                ));
            }
            Config::parse(&text, "t.toml").unwrap()
        };
        let config = config_on(&|port| format!("net_null{port}"));
        // PCI NICs open a PFC tx queue each, whose ring may hold as many mbufs.
        let pci = config_on(&|port| format!("0000:3b:00.{port}"));
        assert_eq!(mempool_size(&pci, 4, 1), mempool_size(&config, 4, 1) + 4 * 1024);
        assert_eq!(mempool_size(&pci, 4, 1), 78_593);
        // 4 x (1024 rx + 1024 tx descriptors) + 4 x 2 bursts of 32 + 16 MiB / 256 + 1 + 512:
        // docs/DEPLOY.md's figure.
        assert_eq!(mempool_size(&config, 4, 1), 8192 + 256 + 65_537 + 512);
        assert_eq!(mempool_size(&config, 4, 1), 74_497);
        assert_eq!(mempool_size(&config, 8, 1), 74_497 + 4 * 1024);
        // Two workers: two rings of 16 batches and a batch being filled each way, and one loop
        // of the other worker each (2 rx queues, 2 rings + 1, of 32 frames).
        assert_eq!(mempool_size(&config, 4, 2), 74_497 + 2 * 17 * 32 + 2 * (5 * 32));
        // Jumbo mbufs: a jumbo frame takes at least 9 cells (2,049 bytes or more), so the
        // buffer holds 65,537 / 9 of them; everything else but the rx rings may be jumbo.
        assert_eq!(jumbo_pool_size(&config, 4, 1), 65_537u32.div_ceil(9) + (74_497 - 65_537 - 4 * 1024));
        assert_eq!(jumbo_pool_size(&config, 4, 1), 12_146);
    }

    #[test]
    fn the_default_mbuf_is_dpdks() {
        assert_eq!(
            crate::config::DEFAULT_MBUF_BYTES,
            dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE - dpdk_sys::RTE_PKTMBUF_HEADROOM
        );
    }

    fn config_with(ports: usize, rx_queues: u16) -> Config {
        let mut text = String::from("[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n");
        for port in 0..ports {
            text.push_str(&format!(
                "[[port]]\nname = \"p{port}\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\nrx_queues = {rx_queues}\n"
            ));
        }
        Config::parse(&text, "t.toml").unwrap()
    }

    #[test]
    fn ports_are_dealt_to_at_most_one_worker_each() {
        let config = config_with(2, 3);
        let one = Layout::of(&config, &[]);
        assert_eq!((one.workers, one.forwarder_lcores.len()), (1, 0));
        let three = Layout::of(&config, &[1, 2, 3]);
        assert_eq!(three.workers, 2, "a third worker would own no port");
        assert_eq!(three.forwarder_lcores, vec![1, 2, 3]);
        assert_eq!(Layout::all_rx_queues(&config), 6);
    }
}
