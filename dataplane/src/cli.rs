//! The `raceway` command line as clap reads it: every command, its flags and their help. The
//! commands' work is `main.rs`'s (parsing aside) and their modules'.
//!
//! Invariant: what a flag means is said once, in its doc comment here, which is its `--help`.

use clap::{Args, Parser, Subcommand};
use raceway::config::GroupMode;
use raceway::engine::fabric;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "raceway",
    version,
    about = "A software leaf switch for AI backend networks: PFC, ECN and spraying on DPDK"
)]
pub(crate) struct Cli {
    /// Log filter (error, warn, info, debug, trace, or a RUST_LOG directive).
    #[arg(long, global = true, default_value = "info")]
    pub(crate) log_level: String,
    /// No progress bar (it shows only on a terminal anyway).
    #[arg(long, global = true)]
    pub(crate) quiet: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
pub(crate) struct CleanArgs {
    /// The switch's config (its [control] netns names what is kept).
    #[arg(short, long)]
    pub(crate) config: PathBuf,
}

#[derive(Args)]
pub(crate) struct KeepArgs {
    #[arg(long)]
    pub(crate) netns: String,
    /// The ports' names, comma-separated: the host interfaces to hold.
    #[arg(long)]
    pub(crate) ports: String,
}

#[derive(Args)]
pub(crate) struct RunArgs {
    #[arg(short, long)]
    pub(crate) config: PathBuf,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Write the stats JSON here at exit.
    #[arg(long)]
    pub(crate) stats_json: Option<PathBuf>,
    /// With [control]: let go of the host interfaces a switch before left for its restart,
    /// and start with new ones (their addresses, routes and neighbours gone).
    #[arg(long)]
    pub(crate) clean: bool,
    /// Start beside the switch already running this config, and take its ports (and with
    /// [control], its host interfaces) over once ready: forwarding stops for the hand-over
    /// alone, not for the start (make-before-break). Without one running, a plain start.
    #[arg(long, conflicts_with = "clean")]
    pub(crate) take_over: bool,
    /// With [control]: write the FIB the workers forward by (routes, what each resolves
    /// to, neighbours) here on SIGUSR1 and at exit, replacing the file whole.
    #[arg(long, value_name = "FILE")]
    pub(crate) fib_dump: Option<PathBuf>,
    /// Seconds between counter lines.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) stats_interval: f64,
    /// Seed of the workers' random choices (ECN marking).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics: PORT (on 127.0.0.1) or HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<String>,
    /// PORT=FILE.pcapng: write what PORT receives and sends (repeat per port; ports may
    /// share a file).
    #[arg(long = "capture", value_name = "PORT=FILE")]
    pub(crate) captures: Vec<String>,
    /// Extra EAL arguments.
    #[arg(last = true)]
    pub(crate) eal: Vec<String>,
}

#[derive(Args)]
pub(crate) struct ShowArgs {
    /// The running switch's config (its EAL file prefix finds the switch).
    #[arg(short, long, required_unless_present = "prefix")]
    pub(crate) config: Option<PathBuf>,
    /// The running switch's EAL file prefix (instead of --config).
    #[arg(long)]
    pub(crate) prefix: Option<String>,
    /// JSON for scripts: each table's rows as objects keyed by column (anywhere on the
    /// `show` command line, like `--quiet`).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) what: ShowWhat,
}

#[derive(Args)]
pub(crate) struct ReloadArgs {
    /// The running switch's config file, checked here first (its EAL file prefix finds the
    /// switch, which reads the file it was started from).
    #[arg(short, long)]
    pub(crate) config: PathBuf,
    /// The running switch's EAL file prefix, when it was given on its command line rather
    /// than in the config.
    #[arg(long)]
    pub(crate) prefix: Option<String>,
}

#[derive(Args)]
pub(crate) struct ReplayArgs {
    #[arg(short, long)]
    pub(crate) config: PathBuf,
    /// PORT=FILE: what the host on PORT offers, a pcap or pcapng file (repeat per port);
    /// for pcapng, FILE:if=N|NAME picks an interface and FILE:dir=in|out a direction.
    #[arg(long = "in", value_name = "PORT=FILE")]
    pub(crate) inputs: Vec<String>,
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// PORT: the peer on this port ignores PFC (repeat per port).
    #[arg(long = "peer-ignores-pfc", value_name = "PORT")]
    pub(crate) ignore_pfc: Vec<String>,
    /// Write charts (SVG), series.json and index.html here.
    #[arg(long, value_name = "DIR")]
    pub(crate) report: Option<PathBuf>,
    /// The output captures' format: pcap (DIR/<port>.pcap) or pcapng (DIR/<port>.pcapng,
    /// an interface block named after the port).
    #[arg(long = "out-format", value_parser = ["pcap", "pcapng"], default_value = "pcap")]
    pub(crate) out_format: String,
}

#[derive(Args)]
pub(crate) struct CheckArgs {
    #[arg(short, long)]
    pub(crate) config: PathBuf,
}

#[derive(Args)]
pub(crate) struct BlastArgs {
    /// The trace whose frames are sent, in a loop.
    #[arg(long)]
    pub(crate) trace: PathBuf,
    /// Device devargs, e.g. net_memif0,role=client,socket=/tmp/raceway.sock
    #[arg(long)]
    pub(crate) device: String,
    /// Offered rate in Gb/s, counting 24 bytes of preamble, IFG and FCS per frame.
    #[arg(long)]
    pub(crate) rate_gbps: f64,
    #[arg(long, default_value_t = 5.0)]
    pub(crate) duration: f64,
    /// Behave as a RoCE NIC: honour received PFC per priority (pause quanta at this link
    /// speed in Gb/s, normally the switch port's speed_gbps) and wait for tx room instead
    /// of dropping.
    #[arg(long, value_name = "LINK_GBPS")]
    pub(crate) pfc: Option<f64>,
    /// Bursts take turns on this many tx queues (over net_memif, the peer's rx queues).
    #[arg(long, default_value_t = 1)]
    pub(crate) tx_queues: u16,
    /// Stamp RoCEv2 frames with consecutive PSNs per flow, and count the RoCEv2 frames
    /// received by their PSNs: in order, lost (a gap), late.
    #[arg(long)]
    pub(crate) sequence: bool,
    /// Write the report to this file every 100 ms while sending (to read counts mid-run).
    #[arg(long, value_name = "FILE")]
    pub(crate) progress: Option<PathBuf>,
    /// Answer ARP requests for the addresses of this IPv4 prefix, as hosts behind the port
    /// would: each address with its own MAC, 02:00 and the address's four bytes.
    #[arg(long, value_name = "PREFIX")]
    pub(crate) answer_arp: Option<String>,
    /// EAL arguments.
    #[arg(last = true)]
    pub(crate) eal: Vec<String>,
}

#[derive(Args)]
pub(crate) struct FabricArgs {
    /// The fabric file (config/fabric/*.toml).
    #[arg(short, long)]
    pub(crate) config: PathBuf,
    /// The collective the hosts run.
    #[arg(long, value_enum)]
    pub(crate) workload: fabric::workload::Workload,
    /// For incast: the receiving host's index (leaf-major).
    #[arg(long, default_value_t = 0)]
    pub(crate) target: usize,
    #[arg(long, default_value_t = 1_048_576)]
    pub(crate) message_bytes: u64,
    /// Messages per sender (per destination for all-to-all; iterations for all-reduce).
    #[arg(long, default_value_t = 4)]
    pub(crate) messages: u32,
    /// Leaf uplink group mode, overriding the file.
    #[arg(long, value_enum)]
    pub(crate) mode: Option<GroupMode>,
    /// Senders at line rate, no CNPs (DCQCN off), whatever the file says.
    #[arg(long)]
    pub(crate) no_dcqcn: bool,
    /// For `--workload flows`: the flow file (the HPCC simulator's flow.txt format).
    #[arg(long)]
    pub(crate) flow_file: Option<PathBuf>,
    /// For `--workload flows`: the HPCC topology.txt the flow file numbers its hosts by
    /// (HPCC's node numbers, mapped to the fabric's hosts in order, rack by leaf).
    #[arg(long, value_name = "FILE")]
    pub(crate) hpcc_topology: Option<PathBuf>,
    /// For `--workload poisson`: the flow size distribution (config/fabric/cdf/*.txt).
    #[arg(long)]
    pub(crate) cdf: Option<PathBuf>,
    /// For `--workload poisson`: each host's offered load, a fraction of its link (0-1].
    #[arg(long)]
    pub(crate) load: Option<f64>,
    /// For `--workload poisson`: flows start during this long (virtual microseconds).
    #[arg(long)]
    pub(crate) duration_us: Option<f64>,
    /// Start each message that waits for no other at a random time in [0, this) (us).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) jitter_us: f64,
    /// Sample queue depths (and, with --qp-rates, queue pairs' rates) every this many
    /// virtual microseconds. Default: about 500 samples over the workload.
    #[arg(long)]
    pub(crate) sample_us: Option<f64>,
    /// What a queue-depth sample holds.
    #[arg(long, value_enum, default_value_t = raceway::observe::report::Sampling::Max)]
    pub(crate) sample: raceway::observe::report::Sampling,
    /// Write qp_rates.csv: each active queue pair's DCQCN rate at every sample.
    #[arg(long)]
    pub(crate) qp_rates: bool,
    /// How hosts recover losses, overriding the file's `[fabric] transport`.
    #[arg(long, value_enum)]
    pub(crate) transport: Option<fabric::transport::TransportKind>,
    /// RDMA payload per frame (RoCE path MTU).
    #[arg(long, default_value_t = 4096)]
    pub(crate) roce_mtu: usize,
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Give up at this virtual time (ms) and report what did not complete.
    #[arg(long, default_value_t = 1000.0)]
    pub(crate) horizon_ms: f64,
    /// Threads to run the fabric's partitions (a switch with its hosts each) on; the
    /// results are the same for any number. Default: one per 32 hosts, at most the
    /// machine's cores (a small fabric runs fastest on one).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Write results.json and per-switch stats and charts here.
    #[arg(long)]
    pub(crate) out: PathBuf,
}

#[derive(Args)]
pub(crate) struct GenArgs {
    #[command(subcommand)]
    pub(crate) kind: GenKind,
}

/// What `raceway show` prints.
#[derive(Subcommand)]
pub(crate) enum ShowWhat {
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
pub(crate) enum ClearWhat {
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
pub(crate) enum GenKind {
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
pub(crate) struct PatternArgs {
    /// Directory for the traces, one per sending host.
    #[arg(long)]
    pub(crate) out: PathBuf,
    #[arg(long, default_value_t = 4)]
    pub(crate) hosts: u8,
    /// RDMA message size in bytes.
    #[arg(long, default_value_t = 65536)]
    pub(crate) message_bytes: u64,
    /// Messages per sender (per destination for all-to-all).
    #[arg(long, default_value_t = 4)]
    pub(crate) messages: u32,
    /// Frame size without FCS (60-9216).
    #[arg(long, default_value_t = 1078)]
    pub(crate) size: usize,
    /// Each host's rate in Gb/s.
    #[arg(long, default_value_t = 100.0)]
    pub(crate) rate_gbps: f64,
    /// Queue pairs per (sender, destination).
    #[arg(long, default_value_t = 1)]
    pub(crate) flows: u32,
    #[arg(long, default_value_t = 26)]
    pub(crate) dscp: u8,
    /// ECN bits of data frames: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    #[arg(long, default_value_t = 2)]
    pub(crate) ecn: u8,
    /// Tag data frames (VLAN 100) with this PCP.
    #[arg(long)]
    pub(crate) pcp: Option<u8>,
    /// Stop every sender after this many microseconds (the storm's length; default 1000 there).
    #[arg(long)]
    pub(crate) duration_us: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
}
