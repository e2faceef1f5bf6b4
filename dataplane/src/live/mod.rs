//! The live engine: the switch pipeline on DPDK ports, polled by workers on pinned lcores.
//!
//! The ports are dealt to the worker lcores in contiguous blocks (`tm::shard`), run to
//! completion: each worker polls its rx queues and runs every stage for what it receives, owns
//! its ports' egress queues, schedulers and shapers, and transmits on them. A port's rx
//! queues (`[[port]] rx_queues`) go round the workers from its owner's, so one hot port's
//! work is shared. A frame for another worker's port crosses over the single-producer
//! single-consumer ring of that (from, to) pair, a batch of up to one rx burst at a time. A
//! worker with a batch it cannot hand over (the ring is full) polls no rx until it can; it
//! keeps taking its own rings meanwhile, so two workers never wait on each other. With one
//! worker lcore this is the whole switch on one core, with no hand-off. (A pipelined model,
//! RX/classify workers feeding one worker that owned the whole switch, was retired: one core
//! owned every egress and took a cache miss on every frame handed to it, and two of its cores
//! forwarded less than one run-to-completion core; perf/RESULTS.md.)
//!
//! The main lcore starts ports, sums the workers' counters and prints them, watches for
//! SIGINT/SIGTERM, a take-over's request to hand over (`take_over`) or the end of
//! `--duration`, and tears down: each worker first holds its lossless senders with XOFF until
//! they are quiet (`worker::StopHold`), then drains, and the ports stop before the rest of the
//! teardown, so that a host honouring PFC loses nothing to a stop.
//!
//! Each egress port is shaped to its configured speed: a frame may leave when the port's
//! virtual link is free, allowing a lookahead window of one tx burst of maximum standard frames
//! (`plan::lookahead_ps`: 3.95 us at 100G) so each loop can fill a tx burst. The window must
//! cover a poll loop: time the link idles between loops is lost (a window shorter than a loop
//! cut 1 KB forwarding on one core to a quarter: perf/RESULTS.md, "Figures once in code
//! comments"). Frames handed to the NIC cannot be
//! recalled by a PFC pause that arrives later, so raceway answers a pause within the window
//! (plus the loop that reads it), longer than a NIC's 394 quanta (2.02 us at 100G); the auto
//! headroom counts raceway's response (`plan::peer_response_wire_bytes`), so raceways facing
//! each other stay lossless.
//! PFC frames leave in a tx burst of their own, ahead of data already pending for the port,
//! and on a tx queue of their own where the port has one (`[[port]] pfc_tx_queue`): in the
//! data's queue they would wait on the wire behind the whole window, which the headroom then
//! counts too (`plan::HeadroomParts`).
//!
//! A frame longer than an mbuf (a jumbo frame, which drivers chain) crosses as its chain:
//! the pipeline reads and rewrites headers only, in the first segment, and counts the whole
//! length; where a port's device cannot send chains it is copied into one jumbo mbuf first
//! (`ingress::LongFrames`).
//!
//! Invariant: at exit every mbuf is back in its pool. Queued frames drain (shaped) for up to
//! a second; whatever is still queued then, or still between workers, is dropped and counted
//! (`buffer_full`), frames the tx queue never took are freed and reported, and ports are
//! closed before the pool is freed. All workers read time on one epoch (the TSC at start),
//! so a frame's arrival stamp means the same on the worker that sends it.

mod clock;
mod ingress;
pub mod link_watch;
mod memif_socket;
mod published;
mod reload;
mod sample_ring;
mod setup;
mod sflow;
mod shard_ring;
mod shared;
mod supervise;
pub mod take_over;
mod worker;

pub use setup::{eal_arguments, jumbo_pool_size, mempool_size};
pub use worker::shaper_window_ps;

use crate::config::Config;
use crate::counters::SwitchStats;
use crate::dpdk::{self, DpdkError, Eal, Mbuf};
use crate::switch::{self, Switch};
use crate::tm::shard::ShardBoard;
use clock::Clock;
use setup::{Layout, MetricsServer, Resources};
use shard_ring::{frames_per_loop, Links, ShardRing};
use shared::Shared;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use supervise::{FibDump, Supervisor};
use take_over::{PortsFrom, PortsLock, TakeOver};
use worker::Worker;

#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub duration: Option<Duration>,
    pub stats_interval: Duration,
    /// Extra EAL arguments from the command line (after `--`).
    pub extra_eal: Vec<String>,
    /// Seed of the workers' random choices (each worker mixes in its index).
    pub seed: u64,
    /// Serve Prometheus metrics while running.
    pub metrics: Option<MetricsListener>,
    /// `--take-over`: start beside the switch running this config and take its ports over
    /// once ready (`take_over`).
    pub take_over: bool,
    /// Ports to capture into pcapng files.
    pub capture: Vec<crate::observe::capture::CaptureRequest>,
    /// Where the FIB is written on SIGUSR1 and at exit (with `[control]`).
    pub fib_dump: Option<PathBuf>,
    /// The config file, which a reload (`raceway reload`, SIGHUP) reads again.
    pub config_path: Option<PathBuf>,
}

/// Where the metrics server listens.
#[derive(Debug, Clone)]
pub enum MetricsListener {
    /// A socket bound before the EAL's start, so that a busy address fails first.
    Bound(Arc<std::net::TcpListener>),
    /// An address bound once the switch taken over has let it go.
    AfterTakeOver(std::net::SocketAddr),
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
            let failed: serde_json::Map<String, serde_json::Value> =
                summary.failed.iter().map(|(file, why)| (file.display().to_string(), serde_json::json!(why))).collect();
            json["capture"] =
                serde_json::json!({ "files": files, "not_captured": summary.not_captured, "failed": failed });
        }
        json
    }
}

/// How often a worker publishes its counters for the main lcore.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// How long queued frames may drain at shutdown.
const DRAIN_FOR: Duration = Duration::from_secs(1);

/// Runs the live switch until SIGINT/SIGTERM or the end of the duration.
pub fn run(config: &Config, options: &LiveOptions) -> Result<LiveReport, DpdkError> {
    let args =
        eal_arguments(config, &options.extra_eal).map_err(|problem| DpdkError { context: "config".into(), problem })?;
    let take_over = if options.take_over { TakeOver::find(&args)? } else { None };
    let args = match &take_over {
        Some(running) => {
            tracing::info!(
                "take-over: pid {} runs this config's switch; starting beside it on file prefix {}",
                running.pid,
                running.prefix
            );
            take_over::arguments(&args, config, &running.prefix)
        }
        None if options.take_over => {
            tracing::info!("take-over: no switch runs this config; starting as usual");
            args
        }
        None => args,
    };
    // A second plain start on a running switch's prefix is refused here, before its EAL.
    let ports = match take_over {
        Some(running) => PortsFrom::TakeOver(running),
        None => {
            let lock = PortsLock::take(&crate::show::prefix_of(&args))?;
            // No switch of this config runs: a memif socket file left by one that was killed
            // would keep the port's device from being created.
            memif_socket::clear_stale_files(config)?;
            PortsFrom::Start(lock)
        }
    };
    tracing::info!("EAL arguments: {}", args.join(" "));
    dpdk::install_stop_signals();
    // rte_eal_cleanup runs when the last handle goes: this one, the pool's or a port's.
    run_with_eal(&Eal::init(&args)?, config, options, ports)
}

/// Opens the resources, starts the workers, supervises them from the main lcore until the
/// stop, and closes everything in teardown order.
fn run_with_eal(eal: &Eal, config: &Config, options: &LiveOptions, ports: PortsFrom) -> Result<LiveReport, DpdkError> {
    let layout = Layout::of(config, &eal.worker_lcores());
    let takes_over = matches!(ports, PortsFrom::TakeOver(_));
    let mut resources = Resources::open(eal, config, &layout, ports)?;
    let shared = Arc::new(Shared::new(
        config,
        options.config_path.clone(),
        layout.workers,
        resources.control.as_ref().map(|plane| Arc::clone(&plane.stats)),
        resources.control.as_ref().map(|plane| Arc::clone(&plane.link)),
        Arc::clone(&resources.port_states),
    ));
    let control_link = resources.control.as_ref().map(|plane| Arc::clone(&plane.link));
    supervise::register_telemetry(&shared, control_link.as_ref());
    match &options.metrics {
        Some(MetricsListener::Bound(listener)) => resources.metrics = Some(MetricsServer::start(listener, &shared)?),
        Some(MetricsListener::AfterTakeOver(address)) => {
            let listener = std::net::TcpListener::bind(address).map_err(|err| DpdkError {
                context: format!("--metrics {address}"),
                problem: format!("cannot listen: {err}"),
            })?;
            resources.metrics = Some(MetricsServer::start(&Arc::new(listener), &shared)?);
        }
        None => {}
    }
    resources.start_capture(&options.capture, eal.tsc_hz())?;
    let fib_dump = FibDump::new(options.fib_dump.as_ref(), control_link.as_ref(), config);
    let clock = Clock::new(dpdk::rdtsc(), eal.tsc_hz());
    let started = Instant::now();
    let deadline = options.duration.map(|duration| started + duration);
    let mut supervisor = Supervisor::new(config, &shared, options.stats_interval, deadline, fib_dump.as_ref());
    let crew = Crew::assemble(eal, config, options, &layout, &resources, clock)?;
    // sFlow's exporter runs whether or not the config has [sflow]: a reload may add it.
    let exporter = sflow::spawn(Arc::clone(&shared)).map_err(|err| DpdkError {
        context: "sflow".into(),
        problem: format!("cannot start the exporter thread: {err}"),
    })?;
    // Under systemd (Type=notify): started; a switch that took over is the unit's process now.
    let ready = if takes_over { format!("MAINPID={}\nREADY=1", std::process::id()) } else { "READY=1".into() };
    if let Err(err) = crate::linux::notify_service_manager(&ready) {
        tracing::warn!("cannot tell the service manager the switch is ready: {err}");
    }
    let between_workers = crew.run(eal, config, &layout, &shared, &mut supervisor)?;
    resources.stop_ports();
    let _ = exporter.join();
    // What the workers could not hand over in time (shutdown): dropped and counted.
    {
        let mut stats = shared.counters.stats[0].0.lock().expect("stats lock");
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
    let mut final_stats = shared.counters.snapshot();
    let unsent = *shared.counters.unsent.lock().expect("unsent lock");
    drop(supervisor);
    let handing_over = shared.handing_over.load(std::sync::atomic::Ordering::Relaxed);
    if handing_over {
        if let Some(plane) = resources.control.as_mut() {
            plane.leave_to_successor();
        }
    }
    let closed = resources.close(&mut final_stats, started, handing_over, || {
        if let Some(dump) = &fib_dump {
            dump.write();
        }
    })?;
    Ok(LiveReport {
        stats: final_stats,
        mbufs_in_pool: closed.mbufs_in_pool,
        mbufs_available_at_exit: closed.mbufs_available_at_exit,
        unsent_at_exit: unsent,
        elapsed: closed.elapsed,
        capture: closed.capture,
    })
}

/// The workers of a run, wired and not yet started, each with its links to the others.
struct Crew {
    forwarders: Vec<(Worker, Links)>,
    /// Every ring between run-to-completion workers, to count what is left in them after the
    /// workers stop.
    between_workers: Vec<Arc<ShardRing>>,
}

impl Crew {
    fn assemble(
        eal: &Eal,
        config: &Config,
        options: &LiveOptions,
        layout: &Layout,
        resources: &Resources,
        clock: Clock,
    ) -> Result<Self, DpdkError> {
        let new_worker = |switch: Switch<Mbuf>, slot: usize| {
            Worker::new(config, resources.worker_kit(config), switch, slot, clock, eal.tsc_hz())
        };
        let workers = layout.workers;
        let owner = ShardBoard::deal(config.ports.len(), workers);
        // The rx queues the devices opened (a driver may offer fewer than asked for).
        let rx_queues = resources.ports.iter().map(|port| port.rx_queues).collect();
        let board = Arc::new(ShardBoard::with_rx_queues(owner.clone(), rx_queues, frames_per_loop(config, workers)));
        let rings = Links::rings(workers);
        let between_workers = rings.iter().flatten().flatten().cloned().collect();
        let mut forwarders = Vec::new();
        // `[control.copp] scope = "switch"`: one bucket per class for every worker's ports.
        let switch_policers = Arc::default();
        for me in 0..workers {
            let seed = crate::rng::stream_seed(options.seed, me as u64);
            let mut switch = if workers == 1 {
                Switch::new(config, seed)
            } else {
                Switch::sharded(config, seed, Arc::clone(&board), me)
            };
            switch.share_switch_policers(&switch_policers);
            let mut worker = new_worker(switch, me);
            // Each queue's handle goes to the worker that polls it, each port's transmitter to
            // its owner: a queue dealt twice would be refused here, not polled by two lcores.
            let port_name = |port: usize| config.ports[port].name.as_str();
            for port in (0..config.ports.len()).filter(|&port| owner[port] == me) {
                let tx = resources.ports[port].transmitter().ok_or_else(|| DpdkError {
                    context: format!("port '{}'", port_name(port)),
                    problem: "its tx queues were dealt to two workers".into(),
                })?;
                worker.own(port, tx);
            }
            for (port, queue) in board.polled_by(me) {
                let rx = resources.ports[port].rx_queue(queue).ok_or_else(|| DpdkError {
                    context: format!("port '{}' rx queue {queue}", port_name(port)),
                    problem: "dealt to two workers".into(),
                })?;
                worker.rx.push((port, rx));
            }
            // The control plane's frames enter through worker 0, which hands on those for
            // other workers' ports.
            worker.injects = me == 0;
            forwarders.push((worker, Links::of(&rings, me)));
        }
        if workers > 1 {
            let held = board.overcommit_frames();
            tracing::info!(
                "{workers} run-to-completion workers, ports dealt in blocks; pools may be overcommitted by {held} frames of stale views, which the mbuf pool holds"
            );
        }
        Ok(Self { forwarders, between_workers })
    }

    /// Launches the workers on their lcores (or forwards on the main lcore when there is no
    /// worker lcore) and supervises them until they have all stopped; returns the rings
    /// between workers, for what is left in them.
    fn run(
        self,
        eal: &Eal,
        config: &Config,
        layout: &Layout,
        shared: &Arc<Shared>,
        supervisor: &mut Supervisor,
    ) -> Result<Vec<Arc<ShardRing>>, DpdkError> {
        let Self { mut forwarders, between_workers } = self;
        let mut launched = Vec::new();
        if layout.forwarder_lcores.is_empty() {
            tracing::info!("one lcore: forwarding and counters both on lcore {}", eal.main_lcore());
            let (worker, links) = forwarders.pop().expect("one worker on the main lcore");
            worker.run_to_completion(shared, &links, || {
                supervisor.tick();
            });
            return Ok(between_workers);
        }
        for ((worker, links), &lcore) in forwarders.into_iter().zip(&layout.forwarder_lcores) {
            let names: Vec<&str> = worker.owned.iter().map(|&port| config.ports[port].name.as_str()).collect();
            let polled: Vec<String> =
                worker.rx.iter().map(|(port, rx)| format!("{}/{}", config.ports[*port].name, rx.queue())).collect();
            tracing::info!(
                "forwarding worker on lcore {lcore} for ports {}, polling port/queue {}",
                names.join(" "),
                polled.join(" ")
            );
            let task_shared = Arc::clone(shared);
            launched.push(eal.launch(lcore, move || {
                worker.run_to_completion(&task_shared, &links, || {});
                0
            })?);
        }
        tracing::info!("main lcore {} prints counters", eal.main_lcore());
        loop {
            std::thread::sleep(Duration::from_millis(10));
            if supervisor.tick() {
                break;
            }
        }
        for task in launched {
            task.wait();
        }
        Ok(between_workers)
    }
}
