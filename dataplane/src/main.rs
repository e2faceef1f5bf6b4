//! The `raceway` command line: `run` (live on DPDK), `show` (a running switch's views, over
//! its telemetry socket), `replay` (deterministic virtual time), `check` (validate a config,
//! print derived values), `blast` (send a trace at a rate from a DPDK port), `fabric` (a
//! leaf-spine with DCQCN hosts in virtual time) and `gen` (synthetic traces).
//!
//! Invariant: a user's mistake (flag, file, config) ends with one line on stderr naming the
//! file, the field and the problem, and exit status 2; never a panic or a backtrace.

use clap::{Args, Parser, Subcommand};
use raceway::blast;
use raceway::config::{Config, GroupMode};
use raceway::engine::{fabric, replay};
use raceway::live::{self, LiveOptions, MetricsListener};
use raceway::observe::capture::CaptureRequest;
use raceway::traffic::gen;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "raceway",
    version,
    about = "A software leaf switch for AI backend networks: PFC, ECN and spraying on DPDK"
)]
struct Cli {
    /// Log filter (error, warn, info, debug, trace, or a RUST_LOG directive).
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    /// No progress bar (it shows only on a terminal anyway).
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the switch live on DPDK ports.
    Run(RunArgs),
    /// Ask a running switch (`raceway run`) over its DPDK telemetry socket: interfaces,
    /// counters, pfc, queues, watermarks, routes, neighbors; clear watermarks.
    Show(ShowArgs),
    /// Make a running switch re-read its config file and apply what changed, live: QoS maps,
    /// ECN, PFC thresholds, the watchdog, trimming, CoPP rates, ACLs, sFlow. Exits 0 once every
    /// worker runs it; an invalid file, or a change that needs a restart, changes nothing
    /// and exits 2 with one line saying why.
    Reload(ReloadArgs),
    /// Replay pcap or pcapng traces through the switch in virtual time; writes
    /// DIR/<port>.pcap (or .pcapng) and DIR/stats.json.
    Replay(ReplayArgs),
    /// Validate a config and print derived values.
    Check(CheckArgs),
    /// Send a trace's frames on one DPDK device at a paced rate (a load generator).
    Blast(BlastArgs),
    /// Run a leaf-spine fabric of raceway switches and RoCEv2 hosts in virtual time.
    Fabric(FabricArgs),
    /// Write synthetic traces as pcap.
    Gen(GenArgs),
    /// Let go of the namespace and host interfaces a stopped switch left for its restart
    /// (`[control] keep_interfaces_s`); refused while a switch runs on them.
    Clean(CleanArgs),
    /// The keeper a switch with [control] starts: holds its namespace and host interfaces
    /// while it restarts (not run by hand).
    #[command(hide = true)]
    Keep(KeepArgs),
}

#[derive(Args)]
struct CleanArgs {
    /// The switch's config (its [control] netns names what is kept).
    #[arg(short, long)]
    config: PathBuf,
}

#[derive(Args)]
struct KeepArgs {
    #[arg(long)]
    netns: String,
    /// The ports' names, comma-separated: the host interfaces to hold.
    #[arg(long)]
    ports: String,
}

#[derive(Args)]
struct RunArgs {
    #[arg(short, long)]
    config: PathBuf,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Write the stats JSON here at exit.
    #[arg(long)]
    stats_json: Option<PathBuf>,
    /// With [control]: let go of the host interfaces a switch before left for its restart,
    /// and start with new ones (their addresses, routes and neighbours gone).
    #[arg(long)]
    clean: bool,
    /// Start beside the switch already running this config, and take its ports (and with
    /// [control], its host interfaces) over once ready: forwarding stops for the hand-over
    /// alone, not for the start (make-before-break). Without one running, a plain start.
    #[arg(long, conflicts_with = "clean")]
    take_over: bool,
    /// With [control]: write the FIB the workers forward by (routes, what each resolves
    /// to, neighbours) here on SIGUSR1 and at exit, replacing the file whole.
    #[arg(long, value_name = "FILE")]
    fib_dump: Option<PathBuf>,
    /// Seconds between counter lines.
    #[arg(long, default_value_t = 1.0)]
    stats_interval: f64,
    /// Seed of the workers' random choices (ECN marking).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics: PORT (on 127.0.0.1) or HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// PORT=FILE.pcapng: write what PORT receives and sends (repeat per port; ports may
    /// share a file).
    #[arg(long = "capture", value_name = "PORT=FILE")]
    captures: Vec<String>,
    /// Extra EAL arguments.
    #[arg(last = true)]
    eal: Vec<String>,
}

#[derive(Args)]
struct ShowArgs {
    /// The running switch's config (its EAL file prefix finds the switch).
    #[arg(short, long, required_unless_present = "prefix")]
    config: Option<PathBuf>,
    /// The running switch's EAL file prefix (instead of --config).
    #[arg(long)]
    prefix: Option<String>,
    /// JSON for scripts: each table's rows as objects keyed by column.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    what: ShowWhat,
}

#[derive(Args)]
struct ReloadArgs {
    /// The running switch's config file, checked here first (its EAL file prefix finds the
    /// switch, which reads the file it was started from).
    #[arg(short, long)]
    config: PathBuf,
    /// The running switch's EAL file prefix, when it was given on its command line rather
    /// than in the config.
    #[arg(long)]
    prefix: Option<String>,
}

#[derive(Args)]
struct ReplayArgs {
    #[arg(short, long)]
    config: PathBuf,
    /// PORT=FILE: what the host on PORT offers, a pcap or pcapng file (repeat per port);
    /// for pcapng, FILE:if=N|NAME picks an interface and FILE:dir=in|out a direction.
    #[arg(long = "in", value_name = "PORT=FILE")]
    inputs: Vec<String>,
    #[arg(long)]
    out: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// PORT: the peer on this port ignores PFC (repeat per port).
    #[arg(long = "peer-ignores-pfc", value_name = "PORT")]
    ignore_pfc: Vec<String>,
    /// Write charts (SVG), series.json and index.html here.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// The output captures' format: pcap (DIR/<port>.pcap) or pcapng (DIR/<port>.pcapng,
    /// an interface block named after the port).
    #[arg(long = "out-format", value_parser = ["pcap", "pcapng"], default_value = "pcap")]
    out_format: String,
}

#[derive(Args)]
struct CheckArgs {
    #[arg(short, long)]
    config: PathBuf,
}

#[derive(Args)]
struct BlastArgs {
    /// The trace whose frames are sent, in a loop.
    #[arg(long)]
    trace: PathBuf,
    /// Device devargs, e.g. net_memif0,role=client,socket=/tmp/raceway.sock
    #[arg(long)]
    device: String,
    /// Offered rate in Gb/s, counting 24 bytes of preamble, IFG and FCS per frame.
    #[arg(long)]
    rate_gbps: f64,
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Behave as a RoCE NIC: honour received PFC per priority (pause quanta at this link
    /// speed in Gb/s, normally the switch port's speed_gbps) and wait for tx room instead
    /// of dropping.
    #[arg(long, value_name = "LINK_GBPS")]
    pfc: Option<f64>,
    /// Bursts take turns on this many tx queues (over net_memif, the peer's rx queues).
    #[arg(long, default_value_t = 1)]
    tx_queues: u16,
    /// EAL arguments.
    #[arg(last = true)]
    eal: Vec<String>,
}

#[derive(Args)]
struct FabricArgs {
    /// The fabric file (config/fabric/*.toml).
    #[arg(short, long)]
    config: PathBuf,
    /// The collective the hosts run.
    #[arg(long, value_enum)]
    workload: fabric::workload::Workload,
    /// For incast: the receiving host's index (leaf-major).
    #[arg(long, default_value_t = 0)]
    target: usize,
    #[arg(long, default_value_t = 1_048_576)]
    message_bytes: u64,
    /// Messages per sender (per destination for all-to-all; iterations for all-reduce).
    #[arg(long, default_value_t = 4)]
    messages: u32,
    /// Leaf uplink group mode, overriding the file.
    #[arg(long, value_enum)]
    mode: Option<GroupMode>,
    /// Senders at line rate, no CNPs (DCQCN off), whatever the file says.
    #[arg(long)]
    no_dcqcn: bool,
    /// For `--workload flows`: the flow file (the HPCC simulator's flow.txt format).
    #[arg(long)]
    flow_file: Option<PathBuf>,
    /// For `--workload poisson`: the flow size distribution (config/fabric/cdf/*.txt).
    #[arg(long)]
    cdf: Option<PathBuf>,
    /// For `--workload poisson`: each host's offered load, a fraction of its link (0-1].
    #[arg(long)]
    load: Option<f64>,
    /// For `--workload poisson`: flows start during this long (virtual microseconds).
    #[arg(long)]
    duration_us: Option<f64>,
    /// Start each message that waits for no other at a random time in [0, this) (us).
    #[arg(long, default_value_t = 0.0)]
    jitter_us: f64,
    /// Sample queue depths (and, with --qp-rates, queue pairs' rates) every this many
    /// virtual microseconds. Default: about 500 samples over the workload.
    #[arg(long)]
    sample_us: Option<f64>,
    /// What a queue-depth sample holds.
    #[arg(long, value_enum, default_value_t = raceway::observe::report::Sampling::Max)]
    sample: raceway::observe::report::Sampling,
    /// Write qp_rates.csv: each active queue pair's DCQCN rate at every sample.
    #[arg(long)]
    qp_rates: bool,
    /// How hosts recover losses, overriding the file's `[fabric] transport`.
    #[arg(long, value_enum)]
    transport: Option<fabric::transport::TransportKind>,
    /// RDMA payload per frame (RoCE path MTU).
    #[arg(long, default_value_t = 4096)]
    roce_mtu: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Give up at this virtual time (ms) and report what did not complete.
    #[arg(long, default_value_t = 1000.0)]
    horizon_ms: f64,
    /// Threads to run the fabric's partitions (a switch with its hosts each) on; the
    /// results are the same for any number. Default: the machine's cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Write results.json and per-switch stats and charts here.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct GenArgs {
    #[command(subcommand)]
    kind: GenKind,
}

/// What `raceway show` prints.
#[derive(Subcommand)]
enum ShowWhat {
    /// Each port: administrative and operational state, carrier, speed, MTU, addresses.
    Interfaces,
    /// Each port: frames, rates over --period, utilisation, drops; then drops by reason.
    Counters {
        /// Seconds between the two samples the rates come from.
        #[arg(long, default_value_t = 1.0)]
        period: f64,
    },
    /// PFC frames received and sent per priority, the time pauses held each class, the
    /// watchdog of each lossless priority.
    Pfc,
    /// Each port's queues: frames, bytes, drops, ECN marks, depth, watermark.
    Queues,
    /// Queue and priority-group watermarks (shared pool, headroom).
    Watermarks {
        /// The persistent watermarks (since start or the last persistent clear).
        #[arg(long)]
        persistent: bool,
        /// Clear them once printed (read and clear).
        #[arg(long)]
        clear: bool,
    },
    /// The FIB: each route and what it resolves to, groups with their members.
    Routes {
        /// Only the routes inside this prefix (it included).
        prefix: Option<String>,
    },
    /// The FIB's answer for each address, as `ip route get` gives the kernel's: the prefix
    /// that matches, the action (forward, drop, kernel, glean) and why, and the next hops.
    Route {
        /// IPv4 or IPv6 addresses (thousands at once are fine).
        #[arg(required = true)]
        addresses: Vec<String>,
    },
    /// The neighbours next hops resolve through.
    Neighbors,
    /// The ACL tables: each rule best first, its match, action, packets and bytes.
    Acl,
    /// The config in force (as `raceway check` prints it, defaults resolved) and its file.
    RunningConfig,
    /// sFlow: the collector, agent, polling interval, datagrams sent, and each port's rate.
    Sflow,
    /// Clear counters that are cleared rather than counted.
    Clear {
        #[command(subcommand)]
        what: ClearWhat,
    },
}

#[derive(Subcommand)]
enum ClearWhat {
    /// Every `show` view's counters count from now, as SONiC's `sonic-clear counters`: an
    /// offset the switch keeps for `show`; Prometheus, telemetry and the stats JSON still read
    /// the counters from the start.
    Counters,
    /// The queue and priority-group watermarks since the last clear.
    Watermarks {
        /// The persistent ones too.
        #[arg(long)]
        persistent: bool,
    },
}

#[derive(Subcommand)]
enum GenKind {
    /// RoCEv2 flows taking turns at one frame size: a benchmark trace.
    Flows {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 64)]
        flows: u32,
        #[arg(long, default_value_t = 10_000)]
        packets: usize,
        /// Frame size without FCS (60-9216).
        #[arg(long, default_value_t = 60)]
        size: usize,
        /// Offered rate in Gb/s.
        #[arg(long, default_value_t = 100.0)]
        rate_gbps: f64,
        /// Send to 10.0.N.x (a benchmark with several port pairs routes each pair's subnet).
        #[arg(long, default_value_t = 1)]
        to_subnet: u8,
        #[arg(long, default_value_t = 26)]
        dscp: u8,
    },
    /// A host's mixed traffic: RoCEv2 (local and across uplinks), CNPs, TCP, IPv6, VLAN, and a few frames to drop.
    Mixed {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1000)]
        packets: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Frame size without FCS (60-9216).
        #[arg(long, default_value_t = 60)]
        size: usize,
        /// Offered rate in Gb/s.
        #[arg(long, default_value_t = 10.0)]
        rate_gbps: f64,
        /// Host index: sources 10.0.<host>.x, destinations mostly 10.0.<host^1>.x.
        #[arg(long, default_value_t = 0)]
        host: u8,
        /// Percent of frames the switch must drop.
        #[arg(long, default_value_t = 2)]
        bad_percent: u8,
    },
    /// N:1 incast: every host but the target sends its messages to the target.
    Incast {
        /// The receiving host.
        #[arg(long, default_value_t = 0)]
        target: u8,
        #[command(flatten)]
        common: PatternArgs,
    },
    /// Ring all-reduce: each host sends 2 x (hosts - 1) chunks of message/hosts to the next.
    Allreduce {
        #[command(flatten)]
        common: PatternArgs,
    },
    /// All-to-all: every host sends each message to every other host, taking turns.
    Alltoall {
        #[command(flatten)]
        common: PatternArgs,
    },
    /// A PFC storm: one host sends XOFF frames for a priority every interval while the
    /// others send to it.
    PfcStorm {
        /// The host whose NIC sends the storm.
        #[arg(long, default_value_t = 0)]
        storm: u8,
        /// The paused priority.
        #[arg(long, default_value_t = 3)]
        priority: u8,
        /// Microseconds between XOFF frames.
        #[arg(long, default_value_t = 10.0)]
        interval_us: f64,
        #[command(flatten)]
        common: PatternArgs,
    },
}

/// Options shared by the AI-fabric patterns. Host h is 10.0.h.1 (the leaf's port for
/// 10.0.h.0/24); each sending host's trace goes to DIR/host<h>.pcap.
#[derive(Args)]
struct PatternArgs {
    /// Directory for the traces, one per sending host.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 4)]
    hosts: u8,
    /// RDMA message size in bytes.
    #[arg(long, default_value_t = 65536)]
    message_bytes: u64,
    /// Messages per sender (per destination for all-to-all).
    #[arg(long, default_value_t = 4)]
    messages: u32,
    /// Frame size without FCS (60-9216).
    #[arg(long, default_value_t = 1078)]
    size: usize,
    /// Each host's rate in Gb/s.
    #[arg(long, default_value_t = 100.0)]
    rate_gbps: f64,
    /// Queue pairs per (sender, destination).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    #[arg(long, default_value_t = 26)]
    dscp: u8,
    /// ECN bits of data frames: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    #[arg(long, default_value_t = 2)]
    ecn: u8,
    /// Tag data frames (VLAN 100) with this PCP.
    #[arg(long)]
    pcp: Option<u8>,
    /// Stop every sender after this many microseconds (the storm's length; default 1000 there).
    #[arg(long)]
    duration_us: Option<f64>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// A user-facing failure: one line, exit 2.
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(err: E) -> Self {
        Failure(err.to_string())
    }
}

/// A flag mistake as one line, as every other input error: clap's message with its context
/// (`[possible values: ...]`, a tip) joined, without the pointer to `--help`.
fn one_line(clap_message: &str) -> String {
    let lines = clap_message.lines().map(str::trim).filter(|line| !line.is_empty());
    lines.filter(|line| !line.starts_with("For more information")).collect::<Vec<_>>().join("; ")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if err.use_stderr() => {
            eprintln!("{}", one_line(&err.render().to_string()));
            return ExitCode::from(2);
        }
        Err(help) => {
            let _ = help.print();
            return ExitCode::SUCCESS;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cli.log_level));
    let filter = match filter {
        Ok(filter) => filter,
        Err(err) => {
            eprintln!("error: --log-level: {err}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).init();
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(line)) => {
            eprintln!("error: {line}");
            ExitCode::from(2)
        }
    }
}

/// `--quiet`: no progress bar.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the long commands show a progress bar (stderr is a terminal, no `--quiet`).
fn show_progress() -> bool {
    raceway::progress::Progress::wanted(QUIET.load(std::sync::atomic::Ordering::Relaxed))
}

/// Writes a generated trace and says so.
fn write_trace<B: AsRef<[u8]>>(out: &Path, frames: impl ExactSizeIterator<Item = (u64, B)>) -> Result<(), Failure> {
    let written = gen::write_trace(out, frames, show_progress())?;
    println!("wrote {written} frames to {}", out.display());
    Ok(())
}

/// Validates the shared pattern flags and writes one trace per sending host.
fn write_pattern(pattern: gen::Pattern, args: PatternArgs) -> Result<(), Failure> {
    let options = gen::PatternOptions {
        pattern,
        hosts: args.hosts,
        message_bytes: args.message_bytes,
        messages: args.messages,
        frame_len: args.size,
        rate_gbps: args.rate_gbps,
        flows: args.flows,
        dscp: args.dscp,
        ecn: args.ecn,
        pcp: args.pcp,
        duration_us: args.duration_us,
        seed: args.seed,
    };
    options.validate()?;
    std::fs::create_dir_all(&args.out)
        .map_err(|err| Failure(format!("{}: cannot create: {err}", args.out.display())))?;
    for (host, frames) in gen::pattern(&options).iter().enumerate() {
        if !frames.is_empty() {
            write_trace(&args.out.join(format!("host{host}.pcap")), frames.iter().map(|(time, bytes)| (*time, bytes)))?;
        }
    }
    Ok(())
}

fn seconds(flag: &str, value: f64) -> Result<Duration, Failure> {
    if value.is_finite() && value > 0.0 && value < 1e9 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(Failure(format!("{flag}: {value} is not a positive number of seconds")))
    }
}

fn execute(command: Command) -> Result<(), Failure> {
    match command {
        Command::Run(args) => run_switch(args),
        Command::Show(args) => show_switch(args),
        Command::Reload(args) => reload_switch(args),
        Command::Replay(args) => replay_traces(args),
        Command::Check(args) => check_config(args),
        Command::Blast(args) => blast_trace(args),
        Command::Fabric(args) => run_fabric(args),
        Command::Gen(args) => gen_traces(args),
        Command::Clean(args) => clean_kept(args),
        Command::Keep(args) => keep_interfaces(args),
    }
}

/// `raceway run`: the live switch until a signal or `--duration`; writes the stats JSON.
fn run_switch(args: RunArgs) -> Result<(), Failure> {
    let RunArgs {
        config: config_path,
        duration,
        stats_json,
        clean,
        take_over,
        fib_dump,
        stats_interval,
        seed,
        metrics,
        captures,
        eal,
    } = args;
    let config = Config::load(&config_path)?;
    if let (true, Some(control)) = (clean, &config.control) {
        if raceway::control::keep::clean(&control.netns).map_err(Failure)? {
            tracing::info!("--clean: let go of the host interfaces kept in {}", control.netns);
        }
    }
    if fib_dump.is_some() && config.control.is_none() {
        return Err(Failure(format!(
            "--fib-dump: {} has no [control]: the FIB is the config's alone (see `raceway check`)",
            config_path.display()
        )));
    }
    let mut capture = Vec::new();
    for (port, file) in config.port_files("--capture", &captures, &config_path)? {
        // Fail before the EAL starts if the file cannot be written.
        std::fs::File::create(&file)
            .map_err(|err| Failure(format!("--capture: {}: cannot create: {err}", file.display())))?;
        capture.push(CaptureRequest { port, port_name: config.ports[port].name.clone(), file });
    }
    let metrics = match metrics {
        Some(text) => {
            let address = raceway::observe::metrics::parse_address(&text).map_err(Failure)?;
            // A take-over's address is the running switch's until it hands over.
            if take_over {
                Some(MetricsListener::AfterTakeOver(address))
            } else {
                let listener = std::net::TcpListener::bind(address)
                    .map_err(|err| Failure(format!("--metrics {address}: cannot listen: {err}")))?;
                Some(MetricsListener::Bound(std::sync::Arc::new(listener)))
            }
        }
        None => None,
    };
    let options = LiveOptions {
        duration: duration.map(|d| seconds("--duration", d)).transpose()?,
        stats_interval: seconds("--stats-interval", stats_interval)?,
        extra_eal: eal,
        seed,
        metrics,
        take_over,
        capture,
        fib_dump,
        config_path: Some(std::fs::canonicalize(&config_path).unwrap_or_else(|_| config_path.clone())),
    };
    let report = live::run(&config, &options)?;
    tracing::info!("{}", report.stats.summary_line(&config));
    tracing::info!(
        "ran {:.1} s; mbufs back in pool: {}/{}",
        report.elapsed.as_secs_f64(),
        report.mbufs_available_at_exit,
        report.mbufs_in_pool
    );
    if let Some(path) = stats_json {
        let text = serde_json::to_string_pretty(&report.to_json(&config)).expect("stats serialise") + "\n";
        std::fs::write(&path, text).map_err(|err| Failure(format!("{}: cannot write: {err}", path.display())))?;
    }
    Ok(())
}

/// `raceway show`: asks a running switch and prints what it says.
fn show_switch(args: ShowArgs) -> Result<(), Failure> {
    let ShowArgs { config, prefix, json, what } = args;
    use raceway::show::{self, View};
    let prefix = match (prefix, config) {
        (Some(prefix), _) => prefix,
        (None, Some(path)) => show::file_prefix(&Config::load(&path)?),
        (None, None) => return Err(Failure("show: give --config or --prefix".into())),
    };
    let mut period = Duration::from_secs(1);
    let view = match what {
        ShowWhat::Interfaces => View::Interfaces,
        ShowWhat::Counters { period: seconds_given } => {
            period = seconds("--period", seconds_given)?;
            View::Counters
        }
        ShowWhat::Pfc => View::Pfc,
        ShowWhat::Queues => View::Queues,
        ShowWhat::Watermarks { persistent, clear } => View::Watermarks { persistent, clear },
        ShowWhat::Routes { prefix } => View::Routes(
            prefix
                .map(|text| {
                    raceway::config::Prefix::parse(&text)
                        .map_err(|err| Failure(format!("show routes: '{text}': {err}")))
                })
                .transpose()?,
        ),
        ShowWhat::Route { addresses } => View::Route(
            addresses
                .iter()
                .map(|text| {
                    text.parse().map_err(|_| Failure(format!("show route: '{text}' is not an IPv4 or IPv6 address")))
                })
                .collect::<Result<_, _>>()?,
        ),
        ShowWhat::Neighbors => View::Neighbors,
        ShowWhat::Acl => View::Acl,
        ShowWhat::RunningConfig => View::RunningConfig,
        ShowWhat::Sflow => View::Sflow,
        ShowWhat::Clear { what: ClearWhat::Watermarks { persistent } } => View::ClearWatermarks { persistent },
        ShowWhat::Clear { what: ClearWhat::Counters } => View::ClearCounters,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match show::run(&show::running_socket(&prefix), view, period, json, &mut out) {
        // A reader that stopped early (`| head`) wanted no more.
        Err(said) if said == show::READER_GONE => Ok(()),
        result => result.map_err(Failure),
    }
}

/// `raceway reload`: the running switch re-reads its config file; prints what changed.
fn reload_switch(args: ReloadArgs) -> Result<(), Failure> {
    let config = Config::load(&args.config)?;
    let prefix = args.prefix.unwrap_or_else(|| raceway::show::file_prefix(&config));
    let socket = raceway::show::running_socket(&prefix);
    let said = raceway::show::reload(&socket).map_err(Failure)?;
    println!("{said}");
    Ok(())
}

/// `raceway clean`: lets a keeper's namespace and host interfaces go.
fn clean_kept(args: CleanArgs) -> Result<(), Failure> {
    let config = Config::load(&args.config)?;
    let Some(control) = &config.control else {
        return Err(Failure(format!("{}: no [control]: nothing is kept", args.config.display())));
    };
    if raceway::control::keep::clean(&control.netns).map_err(Failure)? {
        println!("let go of the host interfaces kept in {}", control.netns);
    } else {
        println!("nothing kept for {}", control.netns);
    }
    Ok(())
}

/// `raceway keep`: the keeper process (`control::keep`). What stops it before it holds the
/// interfaces is its first line on standard output, which the switch reads.
fn keep_interfaces(args: KeepArgs) -> Result<(), Failure> {
    let ports: Vec<String> = args.ports.split(',').map(str::to_string).collect();
    raceway::control::keep::run_keeper(&args.netns, &ports).map_err(|err| {
        println!("{err}");
        Failure(err)
    })
}

/// `raceway replay`: the traces through the switch in virtual time.
fn replay_traces(args: ReplayArgs) -> Result<(), Failure> {
    let ReplayArgs { config: config_path, inputs, out, seed, ignore_pfc, report, out_format } = args;
    let config = Config::load(&config_path)?;
    if inputs.is_empty() {
        return Err(Failure("--in: give at least one PORT=FILE (pcap or pcapng)".into()));
    }
    let inputs = config
        .port_files("--in", &inputs, &config_path)?
        .into_iter()
        .map(|(port, file)| Ok((port, raceway::traffic::pcap::TraceSpec::parse("--in", &file.to_string_lossy())?)))
        .collect::<Result<Vec<_>, raceway::error::InputError>>()?;
    let ignore_pfc = ignore_pfc
        .iter()
        .map(|port| config.port_for_flag("--peer-ignores-pfc", port, &config_path))
        .collect::<Result<Vec<usize>, _>>()?;
    let out_format = match out_format.as_str() {
        "pcapng" => raceway::traffic::pcap::OutputFormat::PcapNg,
        _ => raceway::traffic::pcap::OutputFormat::Pcap,
    };
    let progress = show_progress();
    let options = replay::ReplayOptions { seed, ignore_pfc, report, out_format, progress };
    let stats = replay::run(&config, &inputs, &out, &options)?;
    println!("{}", stats.summary_line(&config));
    Ok(())
}

/// `raceway check`: the config validated, and what it derives.
fn check_config(args: CheckArgs) -> Result<(), Failure> {
    let CheckArgs { config: path } = args;
    let config = Config::load(&path)?;
    print!("{}", raceway::config::check::report(&config));
    Ok(())
}

/// `raceway blast`: a trace sent on one DPDK device at a paced rate.
fn blast_trace(args: BlastArgs) -> Result<(), Failure> {
    let BlastArgs { trace, device, rate_gbps, duration, pfc, tx_queues, eal } = args;
    let options = blast::BlastOptions {
        device,
        rate_gbps,
        duration: seconds("--duration", duration)?,
        eal,
        pfc_link_gbps: pfc,
        tx_queues,
    };
    options.validate()?;
    let frames = blast::load_frames(&trace)?;
    let report = blast::run(&frames, &options)?;
    println!("{}", report.to_json(pfc.is_some()));
    Ok(())
}

/// `raceway fabric`: a leaf-spine of raceway switches and DCQCN hosts in virtual time.
fn run_fabric(args: FabricArgs) -> Result<(), Failure> {
    let FabricArgs {
        config,
        workload,
        target,
        message_bytes,
        messages,
        mode,
        no_dcqcn,
        transport,
        flow_file,
        cdf,
        load,
        duration_us,
        jitter_us,
        sample_us,
        sample,
        qp_rates,
        roce_mtu,
        seed,
        horizon_ms,
        threads,
        out,
    } = args;
    let mut fabric = fabric::Fabric::load(&config, mode)?;
    if no_dcqcn {
        fabric.dcqcn.enabled = false;
    }
    if let Some(kind) = transport {
        fabric.transport.kind = kind;
    }
    let collective = fabric::workload::Collective::of(workload, target);
    let flows = workload_flows(&fabric, workload, (flow_file, cdf, load, duration_us), seed)?;
    if !(jitter_us.is_finite() && (0.0..=1e9).contains(&jitter_us)) {
        return Err(raceway::error::InputError::flag("--jitter-us", format!("{jitter_us} is not 0-1e9")).into());
    }
    if let Some(us) = sample_us {
        if !(us.is_finite() && (0.001..=1e6).contains(&us)) {
            return Err(raceway::error::InputError::flag("--sample-us", format!("{us} is not 0.001-1e6")).into());
        }
    }
    let options = fabric::engine::FabricOptions {
        collective,
        message_bytes,
        messages,
        roce_mtu,
        seed,
        horizon_ms,
        progress: show_progress(),
        threads: threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        flows,
        jitter_ps: (jitter_us * 1e6) as u64,
        sample: sample_us.map(|us| ((us * 1e6) as u64, sample)),
        qp_rates,
    };
    options.validate(&fabric)?;
    let results = fabric::engine::run(&fabric, &options, Some(&out))?;
    println!("{}", results.summary_line());
    Ok(())
}

/// The flows of `--workload flows` (its flow file) or `poisson` (drawn from `--cdf` at
/// `--load` for `--duration-us`, at the first host's link speed); none for the collectives.
fn workload_flows(
    fabric: &fabric::Fabric,
    workload: fabric::workload::Workload,
    (flow_file, cdf, load, duration_us): (Option<PathBuf>, Option<PathBuf>, Option<f64>, Option<f64>),
    seed: u64,
) -> Result<Vec<fabric::flows::Flow>, raceway::error::InputError> {
    use fabric::workload::Workload;
    let hosts = fabric.hosts.len();
    match workload {
        Workload::Flows => {
            let path = flow_file.ok_or_else(|| {
                raceway::error::InputError::flag("--flow-file", "--workload flows reads its flows from it")
            })?;
            fabric::flows::read_flow_file(&path, hosts)
        }
        Workload::Poisson => {
            let path = cdf.ok_or_else(|| {
                raceway::error::InputError::flag("--cdf", "--workload poisson draws its sizes from it")
            })?;
            let load = load
                .ok_or_else(|| raceway::error::InputError::flag("--load", "--workload poisson needs the load (0-1]"))?;
            if !(load > 0.0 && load <= 1.0) {
                return Err(raceway::error::InputError::flag("--load", format!("{load} is not in (0, 1]")));
            }
            let duration_us = duration_us
                .ok_or_else(|| raceway::error::InputError::flag("--duration-us", "--workload poisson needs it"))?;
            if !(duration_us.is_finite() && duration_us > 0.0 && duration_us <= 1e7) {
                return Err(raceway::error::InputError::flag(
                    "--duration-us",
                    format!("{duration_us} is not in (0, 1e7]"),
                ));
            }
            let cdf = fabric::flows::SizeCdf::load(&path)?;
            let speed = fabric
                .links
                .iter()
                .find(|link| matches!(link.a, fabric::Endpoint::Host(_)))
                .map_or(100_000, |link| link.speed_mbps);
            Ok(fabric::flows::poisson(hosts, speed, &cdf, load, (duration_us * 1e6) as u64, seed))
        }
        _ => Ok(Vec::new()),
    }
}

/// `raceway gen`: synthetic traces as pcap.
fn gen_traces(args: GenArgs) -> Result<(), Failure> {
    match args.kind {
        GenKind::Flows { out, flows, packets, size, rate_gbps, dscp, to_subnet } => {
            let options = gen::FlowsOptions { flows, packets, frame_len: size, rate_gbps, dscp, to_subnet };
            options.validate()?;
            write_trace(&out, gen::flows(&options))
        }
        GenKind::Mixed { out, packets, seed, size, rate_gbps, host, bad_percent } => {
            let options = gen::MixedOptions { packets, seed, frame_len: size, rate_gbps, host, bad_percent };
            options.validate()?;
            write_trace(&out, gen::mixed(&options).into_iter())
        }
        GenKind::Incast { target, common } => write_pattern(gen::Pattern::Incast { target }, common),
        GenKind::Allreduce { common } => write_pattern(gen::Pattern::AllReduce, common),
        GenKind::Alltoall { common } => write_pattern(gen::Pattern::AllToAll, common),
        GenKind::PfcStorm { storm, priority, interval_us, common } => {
            write_pattern(gen::Pattern::PfcStorm { storm, priority, interval_us }, common)
        }
    }
}
