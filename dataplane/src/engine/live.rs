//! The live engine: the switch pipeline on DPDK ports, polled by workers on pinned lcores.
//!
//! Two models (`[dpdk] model`):
//! - run-to-completion (default): the ports are dealt to the worker lcores in contiguous
//!   blocks (`tm::shard`); each worker polls its ports' rx queue and runs every stage for what
//!   it receives, owns its ports' egress queues, schedulers and shapers, and transmits on
//!   them. A frame for another worker's port crosses over the single-producer
//!   single-consumer ring of that (from, to) pair, a batch of up to one rx burst at a time.
//!   A worker with a batch it cannot hand over (the ring is full) polls no rx until it can;
//!   it keeps taking its own rings meanwhile, so two workers never wait on each other.
//!   With one worker lcore this is the whole switch on one core, with no hand-off.
//! - pipelined: the last worker lcore owns the switch (buffer, PFC, ECN, group choice,
//!   schedulers, shaping, tx); every other worker lcore owns some ports' rx queues, runs the
//!   stateless classify stage (parse, route, class, TTL rewrite) and hands frames over its own
//!   bounded lock-free ring. It spreads the per-frame work over two or more cores. An RX worker
//!   whose ring is full waits rather than drop (the NIC's rx ring then fills and its
//!   `missed` counter, logged at exit, shows it).
//!
//! The main lcore starts ports, sums the workers' counters and prints them, watches for
//! SIGINT/SIGTERM or the end of `--duration`, and tears down.
//!
//! Each egress port is shaped to its configured speed: a frame may leave when the port's
//! virtual link is free, allowing a lookahead window of one tx burst of maximum standard frames
//! (`plan::lookahead_ps`: 3.95 us at 100G) so each loop can fill a tx burst. The window must
//! cover a poll loop: time the link idles between loops is lost, and with a 1.01 us window one
//! core forwarded 1 KB frames at 1.8 Mpps instead of 8.0. Frames handed to the NIC cannot be
//! recalled by a PFC pause that arrives later, so raceway answers a pause within the window
//! (plus the loop that reads it), longer than a NIC's 394 quanta (2.02 us at 100G); the auto
//! headroom counts raceway's response (`plan::peer_response_wire_bytes`), so raceways facing
//! each other stay lossless.
//! PFC frames leave in a tx burst of their own, ahead of data already pending for the port,
//! and on a tx queue of their own where the port has one (`[[port]] pfc_tx_queue`): in the
//! data's queue they would wait on the wire behind the whole window, which the headroom then
//! counts too (`plan::HeadroomParts`).
//!
//! A frame longer than an mbuf (a jumbo frame, which drivers chain) is copied into one mbuf of
//! a second pool before any stage sees it (`whole_frame`), so the pipeline always works on a
//! frame in one segment.
//!
//! Invariant: at exit every mbuf is back in its pool. Queued frames drain (shaped) for up to
//! a second; whatever is still queued then, or still between workers, is dropped and counted
//! (`buffer_full`), frames the tx queue never took are freed and reported, and ports are
//! closed before the pool is freed. All workers read time on one epoch (the TSC at start),
//! so a frame's arrival stamp means the same on the worker that sends it.

use crate::config::{device_name, is_pci_address, Config, WorkerModel};
use crate::control::{self, ControlLink, ControlPlane};
use crate::dpdk::{self, Burst, DpdkError, Eal, Mbuf, Mempool, Port, BURST};
use crate::drops::DropReason;
use crate::engine::link_watch::{self, LinkWatch};
use crate::engine::port_tx;
use crate::link::{Follower, PortStates};
use crate::observe::stats::WatermarkClear;
use crate::observe::stats::{CoreStats, SwitchStats};
use crate::pipeline::classify::{Classifier, Verdict};
use crate::switch::{self, Switch};
use crate::tm::shard::{Batch, ShardBoard, BATCH};
use crossbeam_queue::ArrayQueue;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub duration: Option<Duration>,
    pub stats_interval: Duration,
    /// Extra EAL arguments from the command line (after `--`).
    pub extra_eal: Vec<String>,
    /// Seed of the workers' random choices (each worker mixes in its index).
    pub seed: u64,
    /// Serve Prometheus metrics on this (already bound) socket while running.
    pub metrics: Option<Arc<std::net::TcpListener>>,
    /// Ports to capture into pcapng files.
    pub capture: Vec<crate::observe::capture::CaptureRequest>,
    /// Where the FIB is written on SIGUSR1 and at exit (with `[control]`).
    pub fib_dump: Option<PathBuf>,
}

/// What a live run reports beyond the switch counters.
#[derive(Debug, Clone, Default)]
pub struct LiveReport {
    pub stats: SwitchStats,
    pub mbufs_in_pool: u32,
    pub mbufs_available_at_exit: u32,
    /// Frames the tx queues never accepted before shutdown (freed).
    pub unsent_at_exit: u64,
    pub elapsed: Duration,
    /// What `--capture` wrote, when asked.
    pub capture: Option<crate::observe::capture::CaptureSummary>,
}

impl LiveReport {
    /// The stats JSON of a live run (docs/STATS.md): the switch's counters, plus the run's
    /// length, the mbuf pool at exit and what `--capture` wrote.
    pub fn to_json(&self, config: &Config) -> serde_json::Value {
        let mut json = self.stats.to_json(config);
        json["elapsed_s"] = serde_json::json!(self.elapsed.as_secs_f64());
        json["mbufs"] = serde_json::json!({
            "pool": self.mbufs_in_pool,
            "available_at_exit": self.mbufs_available_at_exit,
            "unsent_at_exit": self.unsent_at_exit,
        });
        if let Some(summary) = &self.capture {
            let files: serde_json::Map<String, serde_json::Value> = summary
                .written
                .iter()
                .map(|(file, frames)| (file.display().to_string(), serde_json::json!(frames)))
                .collect();
            json["capture"] = serde_json::json!({ "files": files, "not_captured": summary.not_captured });
        }
        json
    }
}

/// How often the worker publishes its counters for the main lcore.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// How long queued frames may drain at shutdown.
const DRAIN_FOR: Duration = Duration::from_secs(1);

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

/// Mbufs needed: rx rings (`rx_queues_per_port` each) and tx rings (two on a port with a
/// PFC tx queue), the bursts in flight, and
/// as many frames as the buffer can hold (one per cell). With several run-to-completion
/// workers, also the frames between them (rings and batches being filled) and the frames
/// their stale views of the pools may overcommit (`tm::shard`). With `[control]`, also the
/// rings to and from the control thread and each worker's punt outbox.
pub fn mempool_size(config: &Config, rx_queues_per_port: u64, workers: u64) -> u32 {
    let ports = config.ports.len() as u64;
    // A PFC tx queue holds the PFC frames it sent until the driver recycles its descriptors.
    let tx_queues = ports + config.ports.iter().filter(|port| port.pfc_tx_queue).count() as u64;
    let rings =
        ports * u64::from(dpdk::RX_DESCRIPTORS) * rx_queues_per_port + tx_queues * u64::from(dpdk::TX_DESCRIPTORS);
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
pub fn jumbo_pool_size(config: &Config, rx_queues_per_port: u64, workers: u64) -> u32 {
    let all = u64::from(mempool_size(config, rx_queues_per_port, workers));
    let queued = Switch::<Mbuf>::arena_capacity(config) as u64;
    let frame_room = u64::from(dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE - dpdk_sys::RTE_PKTMBUF_HEADROOM);
    let cells_per_jumbo = crate::tm::plan::charge(frame_room as usize + 1) / crate::tm::plan::CELL_BYTES;
    // The rx rings hold plain mbufs (chains): what is not queued, less the rx rings, may be
    // jumbo; what is queued is at most one jumbo frame per `cells_per_jumbo` cells.
    let ports = config.ports.len() as u64;
    let rx_rings = ports * u64::from(dpdk::RX_DESCRIPTORS) * rx_queues_per_port;
    let elsewhere = all - queued - rx_rings;
    (queued.div_ceil(cells_per_jumbo) + elsewhere).min(u64::from(u32::MAX)) as u32
}

/// Batches a ring between two run-to-completion workers holds.
const SHARD_RING: usize = 16;

/// The batches crossing from one run-to-completion worker to another. They are boxed and go
/// round: the sender fills one, hands it over in `full` and takes an emptied one from
/// `empty`; the receiver drains it and gives it back. A hand-over moves a pointer (moving
/// the 1.3 KB batch through the ring by value was ~10% of the receiving worker's samples).
/// `SHARD_RING` + 1 boxes go round each pair, allocated at start, so neither queue is ever
/// full when pushed to: the sender can hand over only with an empty box to take.
struct ShardRing {
    full: ArrayQueue<Box<Batch<Mbuf>>>,
    empty: ArrayQueue<Box<Batch<Mbuf>>>,
}

impl ShardRing {
    fn new() -> Self {
        let empty = ArrayQueue::new(SHARD_RING);
        for _ in 0..SHARD_RING {
            let _ = empty.push(Box::default());
        }
        Self { full: ArrayQueue::new(SHARD_RING), empty }
    }

    /// Hands `batch` over and puts an empty one in its place; false (nothing moved) when
    /// the receiver holds every other box.
    fn hand_over(&self, batch: &mut Box<Batch<Mbuf>>) -> bool {
        let Some(fresh) = self.empty.pop() else { return false };
        let full = std::mem::replace(batch, fresh);
        if let Err(full) = self.full.push(full) {
            // Cannot happen with SHARD_RING + 1 boxes; undone rather than lost.
            let fresh = std::mem::replace(batch, full);
            let _ = self.empty.push(fresh);
            return false;
        }
        true
    }

    /// The oldest batch handed over.
    fn pop(&self) -> Option<Box<Batch<Mbuf>>> {
        self.full.pop()
    }

    /// Gives a drained batch back to the sender.
    fn recycle(&self, batch: Box<Batch<Mbuf>>) {
        debug_assert!(batch.is_empty());
        let _ = self.empty.push(batch);
    }

    fn is_empty(&self) -> bool {
        self.full.is_empty()
    }
}

/// Frames a run-to-completion worker may admit in one loop at most: an rx burst per port it
/// owns (the most any worker owns), a batch from each other worker, a burst from the control
/// plane.
fn frames_per_loop(config: &Config, workers: usize) -> usize {
    let most_ports = config.ports.len().div_ceil(workers.max(1));
    (most_ports + workers + 1) * BATCH
}

/// A run-to-completion worker's rings to and from the others (none with one worker).
struct Links {
    workers: usize,
    /// To each worker (`None` for itself).
    to: Vec<Option<Arc<ShardRing>>>,
    /// From each other worker.
    from: Vec<Arc<ShardRing>>,
}

/// Hands every waiting batch to its ring; false when a ring was full (the batch waits).
#[inline]
fn hand_over(switch: &mut Switch<Mbuf>, links: &Links) -> bool {
    let mut all = true;
    for (worker, ring) in links.to.iter().enumerate() {
        let (Some(ring), Some(batch)) = (ring, switch.outgoing(worker)) else { continue };
        if !batch.is_empty() && !ring.hand_over(batch) {
            all = false;
        }
    }
    all
}

/// Deals every (port, rx queue) pair to the RX workers in turn, port by port: a port with a
/// queue per worker gives each worker one of its queues, and single-queue ports go round the
/// workers. A flow stays on one queue (RSS, or one source per queue), hence on one worker and
/// one hand-off ring, so it stays in order.
fn deal_rx_queues(rx_queues: &[u16], workers: usize) -> Vec<Vec<(usize, u16)>> {
    let workers = workers.max(1);
    let mut dealt = vec![Vec::new(); workers];
    let pairs = rx_queues.iter().enumerate().flat_map(|(port, &count)| (0..count).map(move |queue| (port, queue)));
    for (index, pair) in pairs.enumerate() {
        dealt[index % workers].push(pair);
    }
    dealt
}

/// Bursts an RX worker's ring holds (up to 32 frames each).
const HANDOFF_RING: usize = 128;

/// A burst of classified frames on its way from an RX worker to the scheduler worker: one
/// queue operation per burst, not per frame (per frame, the atomics of the hand-off cost the
/// pipeline more than the classify work it moved to another core).
struct Handoff {
    frames: [Option<(Mbuf, u16, Verdict)>; BURST],
}

/// A value alone on its cache line(s), so that workers writing neighbouring slots do not
/// invalidate each other's lines (false sharing).
#[repr(align(64))]
struct CacheAligned<T>(T);

struct Shared {
    stop: AtomicBool,
    /// Counters each worker publishes: the scheduler's first, then each RX worker's.
    stats: Vec<CacheAligned<Mutex<SwitchStats>>>,
    /// RX workers still running (the scheduler drains their rings until none is).
    rx_running: AtomicUsize,
    /// Run-to-completion workers that, stopping, have handed over every batch: when all
    /// have, rings that are empty stay empty.
    quiet: AtomicUsize,
    unsent: Mutex<u64>,
    /// The control thread's counters (`[control]`).
    control: Option<Arc<Mutex<crate::observe::stats::ControlStats>>>,
    /// Each port's link, administrative state and MTU, as the link watcher and the control
    /// plane follow them; every worker applies them to its switch.
    port_states: Arc<PortStates>,
    /// Watermark clears asked for (`raceway show clear watermarks`), user and persistent:
    /// each worker applies them to its counters at its next publish, then says so in
    /// `cleared` (per stats slot).
    clears: [AtomicU64; 2],
    cleared: Vec<[AtomicU64; 2]>,
}

impl Shared {
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
    fn clear_watermarks(&self, which: WatermarkClear, within: Duration) -> bool {
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
    fn snapshot(&self) -> SwitchStats {
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

/// What a worker polls for frames.
enum Input {
    /// Its ports' rx queues and the rings from the other workers (run-to-completion).
    Ports(Links),
    /// The RX workers' rings (pipelined).
    Rings(Vec<Arc<ArrayQueue<Handoff>>>),
}

/// Runs the live switch until SIGINT/SIGTERM or the end of the duration.
pub fn run(config: &Config, options: &LiveOptions) -> Result<LiveReport, DpdkError> {
    let args =
        eal_arguments(config, &options.extra_eal).map_err(|problem| DpdkError { context: "config".into(), problem })?;
    tracing::info!("EAL arguments: {}", args.join(" "));
    dpdk::install_stop_signals();
    // rte_eal_cleanup runs when the last handle goes: this one, the pool's or a port's.
    run_with_eal(&Eal::init(&args)?, config, options)
}

fn run_with_eal(eal: &Eal, config: &Config, options: &LiveOptions) -> Result<LiveReport, DpdkError> {
    let workers = eal.worker_lcores();
    let rx_lcores: Vec<u32> = match config.model {
        WorkerModel::RunToCompletion => {
            if workers.len() > config.ports.len() {
                tracing::warn!(
                    "run-to-completion deals whole ports to workers: {} worker lcores for {} ports leaves {} idle",
                    workers.len(),
                    config.ports.len(),
                    workers.len() - config.ports.len()
                );
            }
            Vec::new()
        }
        WorkerModel::Pipelined if workers.len() >= 2 => workers[..workers.len() - 1].to_vec(),
        WorkerModel::Pipelined => {
            return Err(DpdkError {
                context: "dpdk.model".into(),
                problem: format!(
                    "pipelined needs at least two worker lcores besides the main one; lcores gives {}",
                    workers.len()
                ),
            })
        }
    };
    // Run-to-completion workers: one per worker lcore, at most one per port (on the main
    // lcore when there is no worker lcore).
    let shard_workers = match config.model {
        WorkerModel::RunToCompletion => workers.len().clamp(1, config.ports.len().max(1)),
        WorkerModel::Pipelined => 1,
    };
    let pool_size = mempool_size(config, rx_lcores.len().max(1) as u64, shard_workers as u64);
    let data_room = (dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE) as u16;
    let pool =
        Arc::new(Mempool::new(eal, "raceway_mbufs", pool_size, 256, data_room, -1).map_err(|err| DpdkError {
            context: err.context,
            problem: format!(
                "{} (about {} MiB): give the EAL more memory (-m) or lower switch.buffer_bytes",
                err.problem,
                (u64::from(pool_size) * (u64::from(data_room) + 192)) >> 20
            ),
        })?);
    tracing::info!("mbuf pool: {pool_size} mbufs of {data_room} bytes");
    // Frames longer than one mbuf (jumbo frames up to switch.mtu) are copied out of their
    // chains into mbufs of a second pool, sized by the buffer's bytes, not its frame count.
    let jumbo_room = config.mtu as usize + dpdk::LINK_HEADERS;
    let jumbo = if jumbo_room > pool.frame_room() {
        let size = jumbo_pool_size(config, rx_lcores.len().max(1) as u64, shard_workers as u64);
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
        Some(Arc::new(jumbo))
    } else {
        None
    };
    let mut ports = Vec::with_capacity(config.ports.len());
    for port in &config.ports {
        let name = device_name(port.device.as_deref().unwrap_or_default());
        let id = Port::find(name).map_err(|err| DpdkError {
            context: format!("port '{}'", port.name),
            problem: format!("device '{name}' not found after EAL init ({})", err.problem),
        })?;
        // One rx queue per RX worker (RSS spreads flows over them where the device hashes);
        // run-to-completion's single worker polls one.
        let started = Port::start(id, &port.name, &pool, rx_lcores.len().max(1) as u16, config.mtu, port.pfc_tx_queue)?;
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
        ports.push(started);
    }
    let ports = Arc::new(ports);
    // A port's MTU goes up to switch.mtu (what the buffer, headroom and jumbo mbufs are sized
    // for) or the device's maximum, whichever is lower.
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
    let interfaces: Vec<Option<String>> = config
        .ports
        .iter()
        .map(|port| port.device.as_deref().and_then(link_watch::af_packet_interface).map(str::to_string))
        .collect();
    let mut control = match &config.control {
        Some(control_config) => {
            let fib = crate::pipeline::fib::Fib::new(config, &crate::pipeline::fib::Learned::default(), 1);
            let link = Arc::new(ControlLink::new(fib).map_err(|err| DpdkError {
                context: "control".into(),
                problem: format!("cannot create an eventfd: {err}"),
            })?);
            let pools = control::Pools { small: Arc::clone(&pool), jumbo: jumbo.clone() };
            let plane = ControlPlane::start(config, Arc::clone(&port_states), pools, link)
                .map_err(|problem| DpdkError { context: "control".into(), problem })?;
            tracing::info!(
                "control: a host interface per port in network namespace {} (ip -n {} link)",
                control_config.netns,
                control_config.netns
            );
            Some(plane)
        }
        None => None,
    };
    // The control thread mirrors each link onto its port's host interface as soon as it changes.
    let wake_control: Box<dyn Fn() + Send> = match &control {
        Some(plane) => {
            let link = Arc::clone(&plane.link);
            Box::new(move || link.link_changed())
        }
        None => Box::new(|| {}),
    };
    let link_watch = LinkWatch::start(Arc::clone(&ports), interfaces, Arc::clone(&port_states), wake_control)
        .map_err(|err| DpdkError { context: "link watcher".into(), problem: err.to_string() })?;
    let fib_dump = match (&options.fib_dump, &control) {
        (Some(path), Some(plane)) => Some(FibDump {
            link: Arc::clone(&plane.link),
            path: path.clone(),
            ports: config.ports.iter().map(|port| port.name.clone()).collect(),
        }),
        _ => None,
    };
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        stats: (0..rx_lcores.len() + shard_workers)
            .map(|_| CacheAligned(Mutex::new(SwitchStats::new(config))))
            .collect(),
        rx_running: AtomicUsize::new(rx_lcores.len()),
        quiet: AtomicUsize::new(0),
        unsent: Mutex::new(0),
        control: control.as_ref().map(|plane| Arc::clone(&plane.stats)),
        port_states: Arc::clone(&port_states),
        clears: [AtomicU64::new(0), AtomicU64::new(0)],
        cleared: (0..rx_lcores.len() + shard_workers).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
    });
    // DPDK telemetry: dpdk-telemetry.py reads /raceway/* from the published counters.
    let telemetry_shared = Arc::clone(&shared);
    let telemetry_config = config.clone();
    let pager = crate::observe::show::Pager::default();
    // Weak: the telemetry handler outlives the run, and the control link's rings must go
    // before their pool.
    let show_fib = control.as_ref().map(|plane| Arc::downgrade(&plane.link));
    let answer = move |command: &str, params: &str| {
        if command != "/raceway/show" {
            return crate::observe::telemetry::reply(command, &telemetry_shared.snapshot(), &telemetry_config)
                .map(dpdk::TelemetryReply::Sections);
        }
        let build = |view: &str| {
            let fib = show_fib.as_ref().and_then(std::sync::Weak::upgrade);
            show_view(view, &telemetry_shared, &telemetry_config, fib.as_deref())
        };
        pager.answer(params, build).map(dpdk::TelemetryReply::Text)
    };
    let commands: Vec<_> =
        crate::observe::telemetry::COMMANDS.iter().chain(&[crate::observe::telemetry::SHOW]).copied().collect();
    match dpdk::register_telemetry(&commands, Box::new(answer)) {
        Ok(()) => tracing::info!(
            "telemetry: /raceway/ports, /raceway/queues, /raceway/pfc, /raceway/groups, /raceway/control"
        ),
        Err(err) => tracing::warn!("telemetry commands not registered: {err}"),
    }
    let metrics_stop = Arc::new(AtomicBool::new(false));
    let metrics_thread = match &options.metrics {
        Some(listener) => {
            let (listener, shared, stop) = (Arc::clone(listener), Arc::clone(&shared), Arc::clone(&metrics_stop));
            let config = config.clone();
            if let Ok(address) = listener.local_addr() {
                tracing::info!("metrics on http://{address}/metrics");
            }
            let serve = move || {
                crate::observe::metrics::serve(&listener, &stop, || {
                    crate::observe::metrics::render(&shared.snapshot(), &config)
                })
            };
            let thread = std::thread::Builder::new().name("raceway-metrics".into()).spawn(serve).map_err(|err| {
                DpdkError { context: "--metrics".into(), problem: format!("cannot start the metrics thread: {err}") }
            })?;
            Some(thread)
        }
        None => None,
    };
    let capture = if options.capture.is_empty() {
        None
    } else {
        let capture = crate::observe::capture::Capture::start(&options.capture, eal.tsc_hz(), dpdk::rdtsc())
            .map_err(|problem| DpdkError { context: "--capture".into(), problem })?;
        for request in &options.capture {
            tracing::info!("capturing port '{}' into {}", request.port_name, request.file.display());
        }
        Some(capture)
    };
    let epoch_tsc = dpdk::rdtsc();
    let started = Instant::now();
    let new_worker = |switch: Switch<Mbuf>, slot: usize| {
        let mut worker = Worker::new(config, eal.tsc_hz(), Arc::clone(&pool), switch, slot, epoch_tsc);
        worker.jumbo = jumbo.clone();
        worker.tap = capture.as_ref().map(crate::observe::capture::Capture::tap);
        worker.control = control.as_ref().map(|plane| Arc::clone(&plane.link));
        worker
    };
    // (worker, what it polls): the run-to-completion shards, or the pipelined scheduler.
    let mut forwarders: Vec<(Worker, Input)> = Vec::new();
    let mut launched = Vec::new();
    // Every ring between workers, to count what is left in them after the workers stop.
    let mut between_workers: Vec<Arc<ShardRing>> = Vec::new();
    if rx_lcores.is_empty() {
        let owner = ShardBoard::deal(config.ports.len(), shard_workers);
        let board = Arc::new(ShardBoard::new(owner.clone(), frames_per_loop(config, shard_workers)));
        // rings[from][to]
        let rings: Vec<Vec<Option<Arc<ShardRing>>>> = (0..shard_workers)
            .map(|from| (0..shard_workers).map(|to| (from != to).then(|| Arc::new(ShardRing::new()))).collect())
            .collect();
        between_workers.extend(rings.iter().flatten().flatten().cloned());
        for (me, to) in rings.iter().enumerate() {
            let seed = crate::rng::stream_seed(options.seed, me as u64);
            let switch = if shard_workers == 1 {
                Switch::new(config, seed)
            } else {
                Switch::sharded(config, seed, Arc::clone(&board), me)
            };
            let mut worker = new_worker(switch, me);
            worker.owned = (0..config.ports.len()).filter(|&port| owner[port] == me).collect();
            worker.rx_queues = worker
                .owned
                .iter()
                .flat_map(|&port| (0..ports[port].rx_queues).map(move |queue| (port, queue)))
                .collect();
            // The control plane's frames enter through worker 0, which hands on those for
            // other workers' ports.
            worker.injects = me == 0;
            let links = Links {
                workers: shard_workers,
                to: to.clone(),
                from: (0..shard_workers).filter_map(|from| rings[from][me].clone()).collect(),
            };
            forwarders.push((worker, Input::Ports(links)));
        }
        if shard_workers > 1 {
            let held = board.overcommit_frames();
            tracing::info!(
                "{shard_workers} run-to-completion workers, ports dealt in blocks; pools may be overcommitted by {held} frames of stale views, which the mbuf pool holds"
            );
        }
    } else {
        let mut rings = Vec::new();
        let queue_counts: Vec<u16> = ports.iter().map(|port| port.rx_queues).collect();
        let dealt = deal_rx_queues(&queue_counts, rx_lcores.len());
        for (index, &lcore) in rx_lcores.iter().enumerate() {
            let ring = Arc::new(ArrayQueue::new(HANDOFF_RING));
            rings.push(Arc::clone(&ring));
            let owned = dealt[index].clone();
            let mut rx = RxWorker::new(config, owned, ring, index + 1, eal.tsc_hz());
            rx.jumbo = jumbo.clone();
            rx.tap = capture.as_ref().map(crate::observe::capture::Capture::tap);
            rx.control = control.as_ref().map(|plane| Arc::clone(&plane.link));
            let (task_ports, task_shared) = (Arc::clone(&ports), Arc::clone(&shared));
            let polled: Vec<String> =
                rx.queues.iter().map(|&(port, queue)| format!("{}/{queue}", config.ports[port].name)).collect();
            tracing::info!("RX/classify worker on lcore {lcore} for port/queue {}", polled.join(" "));
            launched.push(eal.launch(lcore, move || {
                rx.run(&task_ports, &task_shared);
                0
            })?);
        }
        let mut worker = new_worker(Switch::new(config, crate::rng::stream_seed(options.seed, 0)), 0);
        worker.owned = (0..config.ports.len()).collect();
        worker.injects = true;
        forwarders.push((worker, Input::Rings(rings)));
    }
    let forwarder_lcores = &workers[rx_lcores.len()..];
    if !forwarder_lcores.is_empty() {
        for ((worker, input), &lcore) in forwarders.into_iter().zip(forwarder_lcores) {
            let names: Vec<&str> = worker.owned.iter().map(|&port| config.ports[port].name.as_str()).collect();
            tracing::info!("forwarding worker on lcore {lcore} for ports {}", names.join(" "));
            let (task_ports, task_shared) = (Arc::clone(&ports), Arc::clone(&shared));
            launched.push(eal.launch(lcore, move || {
                worker.run(&task_ports, &task_shared, &input);
                0
            })?);
        }
        tracing::info!("main lcore {} prints counters", eal.main_lcore());
        let mut printer = RatePrinter::new(config);
        loop {
            std::thread::sleep(Duration::from_millis(10));
            let finished = dpdk::stop_requested() || options.duration.is_some_and(|d| started.elapsed() >= d);
            if finished {
                shared.stop.store(true, Ordering::Relaxed);
                break;
            }
            printer.maybe_print(&shared, options.stats_interval);
            FibDump::if_asked(fib_dump.as_ref());
        }
        for task in launched {
            task.wait();
        }
    } else {
        tracing::info!("one lcore: forwarding and counters both on lcore {}", eal.main_lcore());
        let shared_for_main = Arc::clone(&shared);
        let duration = options.duration;
        let interval = options.stats_interval;
        let mut printer = RatePrinter::new(config);
        let dump = fib_dump.as_ref();
        let watcher = move || {
            let finished = dpdk::stop_requested() || duration.is_some_and(|d| started.elapsed() >= d);
            if finished {
                shared_for_main.stop.store(true, Ordering::Relaxed);
            } else {
                printer.maybe_print(&shared_for_main, interval);
                FibDump::if_asked(dump);
            }
        };
        let (worker, input) = forwarders.pop().expect("one worker on the main lcore");
        worker.run_with_watcher(&ports, &shared, &input, watcher);
    }
    // What the workers could not hand over in time (shutdown): dropped and counted.
    {
        let mut stats = shared.stats[0].0.lock().expect("stats lock");
        let left: u64 = between_workers
            .iter()
            .map(|ring| {
                std::iter::from_fn(|| ring.pop())
                    .map(|mut batch| switch::discard_transfers(&mut stats, &mut batch))
                    .sum::<u64>()
            })
            .sum();
        if left > 0 {
            tracing::warn!("{left} frames still between workers at shutdown; counted as buffer_full");
        }
    }
    let final_stats = shared.snapshot();
    metrics_stop.store(true, Ordering::Relaxed);
    if let Some(thread) = metrics_thread {
        let _ = thread.join();
    }
    let capture = match capture.map(crate::observe::capture::Capture::finish).transpose() {
        Ok(summary) => summary,
        Err(problem) => return Err(DpdkError { context: "--capture".into(), problem }),
    };
    if let Some(summary) = &capture {
        for (file, frames) in &summary.written {
            tracing::info!("capture: {frames} frames written to {}", file.display());
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
        tracing::info!("port '{}': device counters rx {rx} tx {tx} missed/errors {missed} no-mbuf {nombuf}", port.name);
    }
    let unsent = *shared.unsent.lock().expect("unsent lock");
    // The control thread stops after the workers: it frees what they punted last, and the
    // rings are emptied before the pool is counted.
    let mut final_stats = final_stats;
    if let Some(dump) = &fib_dump {
        dump.write();
    }
    if let Some(plane) = control.as_mut() {
        plane.stop();
        final_stats.control = Some(plane.stats.lock().expect("control stats").clone());
    }
    drop(control);
    drop(link_watch);
    // Ports close (flushing capture files, returning driver-held mbufs) before we count.
    match Arc::try_unwrap(ports) {
        Ok(ports) => drop(ports),
        Err(_) => unreachable!("the worker has exited and released its ports"),
    }
    // Both pools: what is missing from either at exit leaked.
    let pools = std::iter::once(&pool).chain(jumbo.as_ref());
    let (size, available) =
        pools.fold((0, 0), |(size, available), pool| (size + pool.size(), available + pool.available()));
    if available != size {
        tracing::warn!("{} mbufs not back in the pool at exit", size - available);
    }
    Ok(LiveReport {
        stats: final_stats,
        mbufs_in_pool: size,
        mbufs_available_at_exit: available,
        unsent_at_exit: unsent,
        elapsed,
        capture,
    })
}

/// A `raceway show` document (`observe::show`): `state`, `fib`, or a watermark clear.
fn show_view(view: &str, shared: &Shared, config: &Config, control: Option<&ControlLink>) -> Option<serde_json::Value> {
    match view {
        "state" => {
            let interfaces = config
                .ports
                .iter()
                .enumerate()
                .map(|(index, port)| {
                    // The speed the port is shaped to, as SONiC shows the configured speed
                    // (net_af_packet reports 10G whatever its interface does).
                    crate::observe::show::interface_entry(port, shared.port_states.get(index), port.speed_mbps)
                })
                .collect();
            Some(crate::observe::show::state_document(config, interfaces, shared.snapshot().to_json(config)))
        }
        "fib" => {
            let names: Vec<&str> = config.ports.iter().map(|port| port.name.as_str()).collect();
            let text = match control {
                Some(link) => link.fib.load().to_text(&names),
                None => {
                    crate::pipeline::fib::Fib::new(config, &crate::pipeline::fib::Learned::default(), 1).to_text(&names)
                }
            };
            Some(serde_json::json!({ "fib": text }))
        }
        "clear" | "clear-persistent" => {
            let which = if view == "clear" { WatermarkClear::User } else { WatermarkClear::Persistent };
            let cleared = shared.clear_watermarks(which, Duration::from_secs(2));
            Some(serde_json::json!({ "cleared": cleared }))
        }
        _ => None,
    }
}

/// Prints the live counter table (`SwitchStats::rate_table`) every stats interval, with rates
/// over the time since its previous table.
struct RatePrinter {
    config: Config,
    previous: SwitchStats,
    printed_at: Instant,
}

impl RatePrinter {
    fn new(config: &Config) -> Self {
        Self { config: config.clone(), previous: SwitchStats::new(config), printed_at: Instant::now() }
    }

    fn maybe_print(&mut self, shared: &Shared, interval: Duration) {
        let elapsed = self.printed_at.elapsed();
        if elapsed < interval {
            return;
        }
        let now = shared.snapshot();
        tracing::info!(
            "counters over the last {:.1} s\n{}",
            elapsed.as_secs_f64(),
            now.rate_table(&self.previous, elapsed.as_secs_f64(), &self.config)
        );
        self.previous = now;
        self.printed_at = Instant::now();
    }
}

/// How far ahead of its wire time the shaper hands frames to a port's NIC: a tx burst of
/// maximum standard frames (what is handed over cannot be recalled by a pause, so the auto
/// headroom counts it; see the module notes).
pub fn shaper_window_ps(port: &crate::config::PortConfig) -> u64 {
    const _: () = assert!(crate::tm::plan::LOOKAHEAD_FRAMES == BURST as u64, "the lookahead is one tx burst");
    crate::tm::plan::lookahead_ps(port)
}

/// The per-lcore forwarding state: the switch, tx bursts and shapers for the ports it owns.
struct Worker {
    switch: Switch<Mbuf>,
    config: Config,
    tsc_hz: u64,
    /// Its slot in the published counters.
    slot: usize,
    /// The TSC every worker counts time from.
    epoch_tsc: u64,
    /// The ports it transmits on.
    owned: Vec<usize>,
    /// The (port, rx queue) pairs it polls (run-to-completion).
    rx_queues: Vec<(usize, u16)>,
    /// Whether it takes the control plane's frames (one worker does).
    injects: bool,
    /// For the PFC frames the switch sends.
    pool: Arc<Mempool>,
    /// Jumbo mbufs that frames longer than one of `pool`'s are copied into (`whole_frame`).
    jumbo: Option<Arc<Mempool>>,
    /// Copies captured ports' frames for `--capture`.
    tap: Option<crate::observe::capture::Tap>,
    /// The rings to and from the control thread, and the FIB it publishes (`[control]`).
    control: Option<Arc<ControlLink>>,
}

/// Per-port transmit state on the worker. When the port's virtual link is next free is the
/// switch's `link_free_ps`, which load balancing reads too.
struct Egress {
    pending: Burst,
    /// A PFC frame the tx queue has not taken yet (it goes before any pending data).
    control: Burst,
    /// How far ahead of now the shaper lets frames go, so tx bursts fill.
    window_ps: u64,
}

impl Worker {
    fn new(
        config: &Config,
        tsc_hz: u64,
        pool: Arc<Mempool>,
        switch: Switch<Mbuf>,
        slot: usize,
        epoch_tsc: u64,
    ) -> Self {
        Self {
            switch,
            config: config.clone(),
            tsc_hz,
            slot,
            epoch_tsc,
            owned: Vec::new(),
            rx_queues: Vec::new(),
            injects: false,
            pool,
            jumbo: None,
            tap: None,
            control: None,
        }
    }

    fn run(self, ports: &[Port], shared: &Shared, input: &Input) {
        self.run_with_watcher(ports, shared, input, || {});
    }

    /// The poll loop; `watch` runs every publish period (the single-lcore case prints there).
    fn run_with_watcher(mut self, ports: &[Port], shared: &Shared, input: &Input, mut watch: impl FnMut()) {
        let start_tsc = self.epoch_tsc;
        let tsc_hz = u128::from(self.tsc_hz.max(1));
        // ps per TSC tick in 32.32 fixed point: a multiply per loop instead of a u128 division.
        let ps_per_tick = (1_000_000_000_000u128 << 32) / tsc_hz;
        let now_ps = || ((u128::from(dpdk::rdtsc() - start_tsc) * ps_per_tick) >> 32) as u64;
        let publish_ticks = (self.tsc_hz as u128 * PUBLISH_EVERY.as_millis() / 1000) as u64;
        let mut egress: Vec<Egress> = self
            .config
            .ports
            .iter()
            .map(|port| Egress {
                pending: Burst::default(),
                control: Burst::default(),
                window_ps: shaper_window_ps(port),
            })
            .collect();
        let mut rx = Burst::default();
        // Arrival stamps of frames from other workers that cut through this loop (at most a
        // batch from each; the capacity is never exceeded, so it never allocates).
        let mut earlier: Vec<u64> = Vec::with_capacity(match input {
            Input::Ports(links) => links.from.len() * BATCH,
            Input::Rings(_) => 0,
        });
        let mut next_publish = dpdk::rdtsc() + publish_ticks;
        // This core's cycles: one TSC read per loop iteration, charged to busy when the
        // iteration received or sent frames, else to idle.
        self.switch.stats.cores.clear();
        self.switch.stats.cores.push(CoreStats { lcore: dpdk::current_lcore(), ..CoreStats::default() });
        let mut iteration_start = dpdk::rdtsc();
        let mut followed = Follower::new();
        let mut clears_seen = [0u64; 2];
        loop {
            if shared.stop.load(Ordering::Relaxed) {
                // Pipelined: keep taking frames until every RX worker has stopped and its
                // ring is empty, so nothing handed over is lost.
                let rx_done = match input {
                    Input::Ports(_) => true,
                    Input::Rings(rings) => {
                        shared.rx_running.load(Ordering::Acquire) == 0 && rings.iter().all(|ring| ring.is_empty())
                    }
                };
                if rx_done {
                    break;
                }
            }
            let now = now_ps();
            if let Some(link) = &self.control {
                // One atomic load unless the control plane published a new FIB.
                self.switch.refresh_fib(&link.fib);
            }
            // One atomic load unless a link, a shutdown or an MTU changed: then a port that
            // went down drops what it queued, groups skip it, and frames for it are dropped.
            let switch = &mut self.switch;
            followed.follow(&shared.port_states, |port, state| {
                switch.set_port_state(port, state);
            });
            // Credits, pools and gauges to and from the other workers (nothing with one).
            self.switch.sync_shard(now);
            let mut received = 0;
            // Frames that cut through to a tx burst this loop: their latency is recorded below,
            // on the transmit half's clock, as a queued frame's is.
            let mut cut_through = 0;
            match input {
                Input::Ports(links) => {
                    // No rx while a batch for another worker waits: the NIC's rx ring holds
                    // what arrives meanwhile, and the batch never overflows.
                    let mut handed = hand_over(&mut self.switch, links);
                    for &(index, queue) in &self.rx_queues {
                        if !handed {
                            break;
                        }
                        if ports[index].rx_burst(queue, &mut rx) == 0 {
                            continue;
                        }
                        let tap = self.tap.as_ref().filter(|tap| tap.wants(index));
                        let tsc = if tap.is_some() { dpdk::rdtsc() } else { 0 };
                        let mut cut = CutToTx::new(&mut egress, self.tap.as_ref(), now, tsc, &mut earlier);
                        for mbuf in rx.drain() {
                            received += 1;
                            let mbuf = match whole_frame(mbuf, self.jumbo.as_deref()) {
                                Ok(mbuf) => mbuf,
                                Err((mbuf, reason)) => {
                                    self.switch.receive_classified(index, mbuf, Verdict::Drop(reason), now);
                                    continue;
                                }
                            };
                            if let Some(tap) = tap {
                                tap.copy(index, false, tsc, crate::packet::PacketBuf::data(&mbuf));
                            }
                            self.switch.receive_cutting(index, mbuf, now, &mut cut);
                        }
                        cut_through += cut.sent;
                        handed = hand_over(&mut self.switch, links);
                    }
                    let tsc = if self.tap.is_some() { dpdk::rdtsc() } else { 0 };
                    let mut cut = CutToTx::new(&mut egress, self.tap.as_ref(), now, tsc, &mut earlier);
                    for ring in &links.from {
                        if let Some(mut batch) = ring.pop() {
                            received += self.switch.accept(&mut batch, now, &mut cut);
                            ring.recycle(batch);
                        }
                    }
                    cut_through += cut.sent;
                }
                Input::Rings(rings) => {
                    for ring in rings {
                        let Some(mut handoff) = ring.pop() else { continue };
                        for (mbuf, ingress, verdict) in handoff.frames.iter_mut().map_while(Option::take) {
                            received += 1;
                            self.switch.receive_classified(usize::from(ingress), mbuf, verdict, now);
                        }
                    }
                }
            }
            if let Some(link) = &self.control {
                // Injected frames for another worker's port join its batch: only into an
                // empty one, so that it never overflows.
                let injects = self.injects && !self.switch.outgoing_pending();
                received += exchange_with_control(&mut self.switch, link, now, injects);
            }
            // A fresh clock for the transmit half, so that latency (rx to tx hand-off) counts
            // the time the burst spent in classify and queue, not zero.
            let received_at = now;
            let now = now_ps();
            self.switch.stats.latency.record_many((now - received_at) / 1000, cut_through);
            for arrival in earlier.drain(..) {
                self.switch.stats.latency.record(now.saturating_sub(arrival) / 1000);
            }
            self.switch.advance(now);
            let sent = self.transmit_all(ports, &mut egress, now);
            let iteration_end = dpdk::rdtsc();
            self.switch.stats.cores[0].charge_iteration(iteration_end - iteration_start, received, received + sent > 0);
            iteration_start = iteration_end;
            if iteration_end >= next_publish {
                next_publish = iteration_end + publish_ticks;
                self.switch.refresh_gauges(now);
                shared.apply_clears(&mut self.switch.stats, &mut clears_seen);
                shared.stats[self.slot].0.lock().expect("stats lock").clone_from(&self.switch.stats);
                shared.acknowledge_clears(self.slot, &clears_seen);
                watch();
            }
        }
        // Drain: no more rx; hand over what waits for other workers, take what they hand
        // over, and let queued frames leave at line rate, for a bounded time.
        let deadline = Instant::now() + DRAIN_FOR;
        let mut quiet = false;
        loop {
            let mut between_workers = false;
            if let Input::Ports(links) = input {
                let handed = hand_over(&mut self.switch, links);
                if handed && !quiet {
                    quiet = true;
                    shared.quiet.fetch_add(1, Ordering::AcqRel);
                }
                for ring in &links.from {
                    while let Some(mut batch) = ring.pop() {
                        self.switch.accept(&mut batch, now_ps(), &mut switch::QueueAll);
                        ring.recycle(batch);
                    }
                }
                between_workers = !handed
                    || shared.quiet.load(Ordering::Acquire) < links.workers
                    || links.from.iter().any(|ring| !ring.is_empty());
            }
            let now = now_ps();
            self.switch.sync_shard(now);
            self.switch.advance(now);
            self.transmit_all(ports, &mut egress, now);
            let queued = self.switch.queued_packets() > 0
                || egress.iter().any(|e| !e.pending.is_empty() || !e.control.is_empty());
            if !(queued || between_workers) || Instant::now() >= deadline {
                break;
            }
        }
        let leftover = self.switch.drain() + self.switch.discard_outgoing();
        if leftover > 0 {
            tracing::warn!("{leftover} queued frames could not be sent before shutdown; counted as buffer_full");
        }
        let unsent: u64 = egress.iter().map(|e| (e.pending.len() + e.control.len()) as u64).sum();
        if unsent > 0 {
            tracing::warn!("{unsent} frames were never accepted by a tx queue; freed");
        }
        drop(egress);
        *shared.unsent.lock().expect("unsent lock") += unsent;
        shared.stats[self.slot].0.lock().expect("stats lock").clone_from(&self.switch.stats);
    }

    /// Hands every port's due frames to its tx queue; returns how many the queues took.
    #[inline]
    fn transmit_all(&mut self, ports: &[Port], egress: &mut [Egress], now: u64) -> u64 {
        let mut sent = 0;
        for &index in &self.owned {
            let port = &ports[index];
            let state = &mut egress[index];
            // What an earlier turn left: the PFC frame first, never behind data.
            if !state.control.is_empty() {
                sent += port.tx_control_burst(&mut state.control) as u64;
                if !state.control.is_empty() {
                    continue; // the tx queue is full: data waits behind the PFC frame
                }
            }
            if !state.pending.is_empty() {
                sent += port.tx_burst(&mut state.pending) as u64;
            }
            let tap = self.tap.as_ref().filter(|tap| tap.wants(index));
            let window_ps = state.window_ps;
            let tsc = if tap.is_some() { dpdk::rdtsc() } else { 0 };
            let mut bursts = TxBursts { egress: state, pool: &self.pool, tap, port: index, tsc };
            port_tx::serve(&mut self.switch, index, now, window_ps, &mut bursts);
            if !state.control.is_empty() {
                sent += port.tx_control_burst(&mut state.control) as u64;
                if !state.control.is_empty() {
                    continue;
                }
            }
            if !state.pending.is_empty() {
                sent += port.tx_burst(&mut state.pending) as u64;
            }
        }
        sent
    }
}

/// The tx bursts as the cut-through path fills them (`Switch::receive_cutting`): a frame
/// may join a port's pending burst when it has room, no PFC frame waits, and the port's link
/// is free within the shaper's window.
struct CutToTx<'a> {
    egress: &'a mut [Egress],
    tap: Option<&'a crate::observe::capture::Tap>,
    now: u64,
    tsc: u64,
    /// Frames taken that were received this loop (at `now`).
    sent: u64,
    /// Arrival stamps of frames taken that were received earlier (on another worker).
    earlier: &'a mut Vec<u64>,
}

impl<'a> CutToTx<'a> {
    /// The tx bursts of a loop at `now`; `tsc` stamps captured frames.
    fn new(
        egress: &'a mut [Egress],
        tap: Option<&'a crate::observe::capture::Tap>,
        now: u64,
        tsc: u64,
        earlier: &'a mut Vec<u64>,
    ) -> Self {
        Self { egress, tap, now, tsc, sent: 0, earlier }
    }
}

impl switch::CutThrough<Mbuf> for CutToTx<'_> {
    #[inline(always)]
    fn may_send(&self, port: usize, link_free_ps: u64) -> bool {
        let egress = &self.egress[port];
        egress.control.is_empty() && !egress.pending.is_full() && link_free_ps <= self.now + egress.window_ps
    }

    #[inline(always)]
    fn send(&mut self, port: usize, mbuf: Mbuf, arrival_ps: u64) {
        if let Some(tap) = self.tap.filter(|tap| tap.wants(port)) {
            tap.copy(port, true, self.tsc, crate::packet::PacketBuf::data(&mbuf));
        }
        self.egress[port].pending.push(mbuf);
        if arrival_ps == self.now {
            self.sent += 1;
        } else {
            self.earlier.push(arrival_ps);
        }
    }
}

/// A port's tx bursts as `port_tx` fills them: a PFC frame in a burst of its own (one at a
/// time, in an mbuf from the pool), data in the pending burst. Captured frames are those
/// handed to the tx queue (as a NIC's tx capture sees them).
struct TxBursts<'a> {
    egress: &'a mut Egress,
    pool: &'a Mempool,
    tap: Option<&'a crate::observe::capture::Tap>,
    port: usize,
    tsc: u64,
}

impl port_tx::TxQueue<Mbuf> for TxBursts<'_> {
    #[inline]
    fn pfc(&mut self, frame: &[u8]) -> bool {
        if !self.egress.control.is_empty() {
            return false;
        }
        // Without an mbuf the frame stays pending and goes on a later turn.
        let Some(mut mbuf) = self.pool.alloc() else { return false };
        if !mbuf.append(frame) {
            return false;
        }
        if let Some(tap) = self.tap {
            tap.copy(self.port, true, dpdk::rdtsc(), frame);
        }
        self.egress.control.push(mbuf);
        true
    }

    #[inline(always)]
    fn data(&mut self, mbuf: Mbuf) {
        if let Some(tap) = self.tap {
            tap.copy(self.port, true, self.tsc, crate::packet::PacketBuf::data(&mbuf));
        }
        mbuf.prefetch_header();
        self.egress.pending.push(mbuf);
    }

    #[inline(always)]
    fn has_room(&self) -> bool {
        !self.egress.pending.is_full()
    }
}

/// `--fib-dump`: the FIB the workers forward by, written as text (`Fib::to_text`) on SIGUSR1
/// and at exit, by the main lcore, off the packet path.
struct FibDump {
    link: Arc<ControlLink>,
    path: PathBuf,
    ports: Vec<String>,
}

impl FibDump {
    /// Writes the dump if SIGUSR1 asked for one since the last call.
    fn if_asked(dump: Option<&FibDump>) {
        if dpdk::take_dump_request() {
            match dump {
                Some(dump) => dump.write(),
                None => tracing::warn!("SIGUSR1: no --fib-dump FILE to write the FIB to"),
            }
        }
    }

    /// Writes the published snapshot to a temporary file renamed over the path, so a reader
    /// sees the old dump or the new one, never half of one. A failure is a warning: the
    /// switch goes on.
    fn write(&self) {
        let names: Vec<&str> = self.ports.iter().map(String::as_str).collect();
        let fib = self.link.fib.load();
        let text = fib.to_text(&names);
        let mut partial = self.path.clone().into_os_string();
        partial.push(".partial");
        let written = std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, &self.path));
        match written {
            Ok(()) => tracing::info!(
                "FIB generation {} ({} routes) written to {}",
                fib.generation,
                fib.routes(),
                self.path.display()
            ),
            Err(err) => tracing::warn!("--fib-dump {}: cannot write: {err}", self.path.display()),
        }
    }
}

/// Hands what the switch punted to the control thread and injects up to a burst of what the
/// kernel sent; returns how many frames were injected.
fn exchange_with_control(switch: &mut Switch<Mbuf>, link: &ControlLink, now: u64, injects: bool) -> u64 {
    let mut punted_any = false;
    while let Some(punted) = switch.take_punted() {
        punted_any = true;
        if link.punt(punted.class, (punted.port as u16, punted.packet, std::time::Instant::now())).is_err() {
            // The control thread is behind on this class: the frame is freed (dropping it) and
            // counted.
            switch.punt_refused(punted.port, punted.class);
        }
    }
    if punted_any {
        link.punted();
    }
    let mut injected = 0;
    while injects && injected < BURST as u64 {
        let Some((port, mbuf, since)) = link.inject.pop() else { break };
        link.took_injected(since);
        switch.inject(usize::from(port), mbuf, now);
        injected += 1;
    }
    injected
}

/// A received frame as the pipeline takes it: in one segment. A driver chains a frame longer
/// than an mbuf's room; it is copied into a jumbo mbuf (the chain is freed). When it cannot
/// be, the frame comes back with why it is dropped: longer than the jumbo room, which holds
/// `switch.mtu` plus Ethernet and two VLAN tags (`oversize`, as the classifier would say),
/// or no jumbo mbuf free (`buffer_full`; the jumbo pool is sized so that it never runs dry).
#[inline(always)]
fn whole_frame(mbuf: Mbuf, jumbo: Option<&Mempool>) -> Result<Mbuf, (Mbuf, DropReason)> {
    if !mbuf.is_chained() {
        return Ok(mbuf);
    }
    linearized(mbuf, jumbo)
}

#[inline(never)]
fn linearized(mbuf: Mbuf, jumbo: Option<&Mempool>) -> Result<Mbuf, (Mbuf, DropReason)> {
    let Some(pool) = jumbo.filter(|pool| crate::packet::PacketBuf::len(&mbuf) <= pool.frame_room()) else {
        return Err((mbuf, DropReason::Oversize));
    };
    match mbuf.linearize(pool) {
        Some(single) => Ok(single),
        None => Err((mbuf, DropReason::BufferFull)),
    }
}

/// A pipelined RX worker: polls its ports, classifies, hands frames to the scheduler worker.
struct RxWorker {
    classifier: Classifier,
    /// The (port, rx queue) pairs it polls.
    queues: Vec<(usize, u16)>,
    ring: Arc<ArrayQueue<Handoff>>,
    /// Its counters: classify drops (with their rx counts) and its core's cycles; frames it
    /// hands over are counted by the scheduler worker's switch.
    stats: SwitchStats,
    slot: usize,
    tsc_hz: u64,
    /// Copies captured ports' received frames for `--capture`.
    tap: Option<crate::observe::capture::Tap>,
    /// Where the control plane publishes the FIB (`[control]`).
    control: Option<Arc<ControlLink>>,
    /// Jumbo mbufs that frames longer than one mbuf are copied into (`whole_frame`).
    jumbo: Option<Arc<Mempool>>,
}

impl RxWorker {
    fn new(
        config: &Config,
        queues: Vec<(usize, u16)>,
        ring: Arc<ArrayQueue<Handoff>>,
        slot: usize,
        tsc_hz: u64,
    ) -> Self {
        Self {
            classifier: Classifier::new(config),
            queues,
            ring,
            stats: SwitchStats::new(config),
            slot,
            tsc_hz,
            tap: None,
            control: None,
            jumbo: None,
        }
    }

    fn run(mut self, ports: &[Port], shared: &Shared) {
        let publish_ticks = (self.tsc_hz as u128 * PUBLISH_EVERY.as_millis() / 1000) as u64;
        let mut next_publish = dpdk::rdtsc() + publish_ticks;
        self.stats.cores.push(CoreStats { lcore: dpdk::current_lcore(), ..CoreStats::default() });
        let mut rx = Burst::default();
        let mut iteration_start = dpdk::rdtsc();
        let mut followed = Follower::new();
        let mut clears_seen = [0u64; 2];
        while !shared.stop.load(Ordering::Relaxed) {
            if let Some(link) = &self.control {
                self.classifier.refresh(&link.fib);
            }
            let classifier = &mut self.classifier;
            followed.follow(&shared.port_states, |port, state| classifier.set_port_up(port, state.usable()));
            let mut received = 0;
            for &(index, queue) in &self.queues {
                if ports[index].rx_burst(queue, &mut rx) == 0 {
                    continue;
                }
                let mut handoff = Handoff { frames: std::array::from_fn(|_| None) };
                let mut count = 0;
                let tap = self.tap.as_ref().filter(|tap| tap.wants(index));
                let tsc = if tap.is_some() { dpdk::rdtsc() } else { 0 };
                for mbuf in rx.drain() {
                    received += 1;
                    let len = crate::packet::PacketBuf::len(&mbuf) as u64;
                    let (mbuf, verdict) = match whole_frame(mbuf, self.jumbo.as_deref()) {
                        Ok(mut mbuf) => {
                            if let Some(tap) = tap {
                                tap.copy(index, false, tsc, crate::packet::PacketBuf::data(&mbuf));
                            }
                            let verdict = self.classifier.classify(crate::packet::PacketBuf::data_mut(&mut mbuf));
                            (mbuf, verdict)
                        }
                        Err((mbuf, reason)) => (mbuf, Verdict::Drop(reason)),
                    };
                    if let Verdict::Drop(reason) = verdict {
                        let port = &mut self.stats.ports[index];
                        port.rx_packets += 1;
                        port.rx_bytes += len;
                        port.count_drop(reason);
                        continue;
                    }
                    handoff.frames[count] = Some((mbuf, index as u16, verdict));
                    count += 1;
                }
                if count == 0 {
                    continue;
                }
                // A full ring means the scheduler is behind: wait for room, never drop.
                while let Err(back) = self.ring.push(handoff) {
                    handoff = back;
                    std::hint::spin_loop();
                }
            }
            let iteration_end = dpdk::rdtsc();
            self.stats.cores[0].charge_iteration(iteration_end - iteration_start, received, received > 0);
            iteration_start = iteration_end;
            if iteration_end >= next_publish {
                next_publish = iteration_end + publish_ticks;
                shared.apply_clears(&mut self.stats, &mut clears_seen);
                shared.stats[self.slot].0.lock().expect("stats lock").clone_from(&self.stats);
                shared.acknowledge_clears(self.slot, &clears_seen);
            }
        }
        shared.stats[self.slot].0.lock().expect("stats lock").clone_from(&self.stats);
        shared.rx_running.fetch_sub(1, Ordering::Release);
    }
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
        assert_eq!(mempool_size(&pci, 1, 1), mempool_size(&config, 1, 1) + 4 * 1024);
        assert_eq!(mempool_size(&pci, 1, 1), 78_593);
        // 4 x (1024 rx + 1024 tx descriptors) + 4 x 2 bursts of 32 + 16 MiB / 256 + 1 + 512:
        // the README's figure.
        assert_eq!(mempool_size(&config, 1, 1), 8192 + 256 + 65_537 + 512);
        assert_eq!(mempool_size(&config, 1, 1), 74_497);
        assert_eq!(mempool_size(&config, 2, 1), 74_497 + 4 * 1024);
        // Two workers: two rings of 16 batches and a batch being filled each way, and one loop
        // of the other worker each (2 ports, 2 rings + 1, of 32 frames).
        assert_eq!(mempool_size(&config, 1, 2), 74_497 + 2 * 17 * 32 + 2 * (5 * 32));
        // Jumbo mbufs: a jumbo frame takes at least 9 cells (2,049 bytes or more), so the
        // buffer holds 65,537 / 9 of them; everything else but the rx rings may be jumbo.
        assert_eq!(jumbo_pool_size(&config, 1, 1), 65_537u32.div_ceil(9) + (74_497 - 65_537 - 4 * 1024));
        assert_eq!(jumbo_pool_size(&config, 1, 1), 12_146);
    }

    #[test]
    fn the_shaper_commits_one_tx_burst_of_maximum_frames_as_the_headroom_assumes() {
        let text = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n\
                    [[port]]\nname = \"a\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n\
                    [[port]]\nname = \"b\"\nspeed_gbps = 1\npeer_mac = \"02:00:00:00:00:03\"\n\
                    [[port]]\nname = \"c\"\nspeed_gbps = 800\npeer_mac = \"02:00:00:00:00:04\"\n";
        let config = Config::parse(text, "t.toml").unwrap();
        // 32 x 1542 wire bytes: 3.95 us at 100G, 394.8 us at 1G, 493 ns at 800G.
        assert_eq!(shaper_window_ps(&config.ports[0]), 3_947_520);
        assert_eq!(shaper_window_ps(&config.ports[1]), 394_752_000);
        assert_eq!(shaper_window_ps(&config.ports[2]), 493_440);
        // Exactly the response the auto headroom allows for, at every speed.
        for port in &config.ports {
            assert_eq!(
                shaper_window_ps(port),
                crate::tm::plan::peer_response_wire_bytes() * 8_000_000 / port.speed_mbps,
                "{}",
                port.name
            );
        }
    }

    #[test]
    fn rx_queues_are_dealt_so_each_worker_gets_one_queue_of_a_multi_queue_port() {
        assert_eq!(deal_rx_queues(&[1, 1, 1], 2), vec![vec![(0, 0), (2, 0)], vec![(1, 0)]]);
        assert_eq!(deal_rx_queues(&[2, 2], 2), vec![vec![(0, 0), (1, 0)], vec![(0, 1), (1, 1)]]);
        assert_eq!(deal_rx_queues(&[2, 1, 1], 2), vec![vec![(0, 0), (1, 0)], vec![(0, 1), (2, 0)]]);
        assert_eq!(deal_rx_queues(&[1], 1), vec![vec![(0, 0)]]);
    }

    #[test]
    fn pdump_needs_shared_memory() {
        let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(dpdk::shares_memory(&args(&["-l", "0-1", "--file-prefix", "x"])));
        assert!(!dpdk::shares_memory(&args(&["--no-huge", "-m", "1024"])));
        assert!(!dpdk::shares_memory(&args(&["--in-memory"])));
        assert!(!dpdk::shares_memory(&args(&["--no-shconf"])));
    }

    #[test]
    fn pci_addresses_and_vdevs_are_told_apart() {
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(is_pci_address("3b:00.1"));
        assert!(!is_pci_address("net_pcap0"));
        assert!(!is_pci_address("net_memif0"));
        assert!(!is_pci_address("0000:3b:00.9"));
        assert_eq!(device_name("net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap"), "net_pcap0");
    }
}
