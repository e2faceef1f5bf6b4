//! The `raceway` command line: `run` (live on DPDK), `replay` (deterministic virtual time),
//! `check` (validate a config, print derived values) and `gen` (synthetic traces).
//!
//! Invariant: a user's mistake (flag, file, config) ends with one line on stderr naming the
//! file, the field and the problem, and exit status 2; never a panic or a backtrace.

#![forbid(unsafe_code)]

use clap::{Args, Parser, Subcommand};
use raceway::config::Config;
use raceway::engine::live::{self, LiveOptions};
use raceway::engine::replay;
use raceway::traffic::gen;
use std::path::PathBuf;
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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the switch live on DPDK ports.
    Run {
        #[arg(short, long)]
        config: PathBuf,
        /// Stop after this many seconds (default: until SIGINT/SIGTERM).
        #[arg(long)]
        duration: Option<f64>,
        /// Write the stats JSON here at exit.
        #[arg(long)]
        stats_json: Option<PathBuf>,
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
    },
    /// Replay pcaps through the switch in virtual time; writes DIR/<port>.pcap and DIR/stats.json.
    Replay {
        #[arg(short, long)]
        config: PathBuf,
        /// PORT=FILE.pcap: what the host on PORT offers (repeat per port).
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
    },
    /// Validate a config and print derived values.
    Check {
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Send a trace's frames on one DPDK device at a paced rate (a load generator).
    Blast {
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
        /// EAL arguments.
        #[arg(last = true)]
        eal: Vec<String>,
    },
    /// Run a leaf-spine fabric of raceway switches and RoCEv2 hosts in virtual time.
    Fabric {
        /// The fabric file (config/fabric/*.toml).
        #[arg(short, long)]
        config: PathBuf,
        /// incast, alltoall or allreduce.
        #[arg(long)]
        workload: String,
        /// For incast: the receiving host's index (leaf-major).
        #[arg(long, default_value_t = 0)]
        target: usize,
        #[arg(long, default_value_t = 1_048_576)]
        message_bytes: u64,
        /// Messages per sender (per destination for all-to-all; iterations for all-reduce).
        #[arg(long, default_value_t = 4)]
        messages: u32,
        /// Leaf uplink group mode, overriding the file: ecmp, flowlet, spray, random, adaptive.
        #[arg(long)]
        mode: Option<String>,
        /// Senders at line rate, no CNPs (DCQCN off), whatever the file says.
        #[arg(long)]
        no_dcqcn: bool,
        /// RDMA payload per frame (RoCE path MTU).
        #[arg(long, default_value_t = 4096)]
        roce_mtu: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Give up at this virtual time (ms) and report what did not complete.
        #[arg(long, default_value_t = 1000.0)]
        horizon_ms: f64,
        /// Write results.json and per-switch stats and charts here.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write synthetic traces as pcap.
    Gen {
        #[command(subcommand)]
        kind: GenKind,
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
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
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(line)) => {
            eprintln!("error: {line}");
            ExitCode::from(2)
        }
    }
}

fn check_gen_options(size: usize, rate_gbps: f64) -> Result<(), Failure> {
    if !(60..=9216).contains(&size) {
        return Err(Failure(format!("--size: {size} is not 60-9216")));
    }
    if !(rate_gbps.is_finite() && rate_gbps > 0.0) {
        return Err(Failure(format!("--rate-gbps: {rate_gbps} is not positive")));
    }
    Ok(())
}

/// Validates the shared pattern flags and writes one trace per sending host.
fn write_pattern(pattern: gen::Pattern, args: PatternArgs) -> Result<(), Failure> {
    check_gen_options(args.size, args.rate_gbps)?;
    let checks: [(bool, String); 7] = [
        ((2..=250).contains(&args.hosts), format!("--hosts: {} is not 2-250", args.hosts)),
        (args.dscp <= 63, format!("--dscp: {} is not 0-63", args.dscp)),
        (args.ecn <= 3, format!("--ecn: {} is not 0-3", args.ecn)),
        (args.pcp.is_none_or(|pcp| pcp <= 7), format!("--pcp: {} is not 0-7", args.pcp.unwrap_or(0))),
        (
            args.flows >= 1 && args.messages >= 1 && args.message_bytes >= 1,
            "--flows, --messages and --message-bytes must be at least 1".into(),
        ),
        (
            args.duration_us.is_none_or(|us| us.is_finite() && us > 0.0),
            format!("--duration-us: {} is not positive", args.duration_us.unwrap_or(0.0)),
        ),
        (
            match pattern {
                gen::Pattern::Incast { target } => target < args.hosts,
                gen::Pattern::PfcStorm { storm, priority, interval_us } => {
                    storm < args.hosts && priority <= 7 && interval_us.is_finite() && interval_us > 0.0
                }
                _ => true,
            },
            "--target/--storm must be a host below --hosts, --priority 0-7, --interval-us positive".into(),
        ),
    ];
    if let Some((_, problem)) = checks.iter().find(|(ok, _)| !ok) {
        return Err(Failure(problem.clone()));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|err| Failure(format!("{}: cannot create: {err}", args.out.display())))?;
    let traces = gen::pattern(&gen::PatternOptions {
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
    });
    for (host, frames) in traces.iter().enumerate() {
        if !frames.is_empty() {
            write_trace(&args.out.join(format!("host{host}.pcap")), frames)?;
        }
    }
    Ok(())
}

fn write_trace(out: &std::path::Path, frames: &[(u64, Vec<u8>)]) -> Result<(), Failure> {
    let mut writer = replay::pcap::CaptureWriter::create(out)?;
    for (time_ns, bytes) in frames {
        writer.write(time_ns * 1000, bytes)?;
    }
    writer.finish()?;
    println!("wrote {} frames to {}", frames.len(), out.display());
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
        Command::Run { config: config_path, duration, stats_json, stats_interval, seed, metrics, captures, eal } => {
            let config = Config::load(&config_path)?;
            let mut capture = Vec::new();
            for text in &captures {
                let (port, file) =
                    text.split_once('=').ok_or_else(|| Failure(format!("--capture: '{text}' is not PORT=FILE")))?;
                let index = config.port_index(port).ok_or_else(|| {
                    Failure(format!("--capture: '{port}' is not a port of {}", config_path.display()))
                })?;
                if capture.iter().any(|c: &raceway::observe::capture::CaptureRequest| c.port == index) {
                    return Err(Failure(format!("--capture: port '{port}' is given twice")));
                }
                // Fail before the EAL starts if the file cannot be written.
                std::fs::File::create(file)
                    .map_err(|err| Failure(format!("--capture: {file}: cannot create: {err}")))?;
                capture.push(raceway::observe::capture::CaptureRequest {
                    port: index,
                    port_name: port.to_string(),
                    file: PathBuf::from(file),
                });
            }
            let metrics = match metrics {
                Some(text) => {
                    let address = raceway::observe::metrics::parse_address(&text).map_err(Failure)?;
                    let listener = std::net::TcpListener::bind(address)
                        .map_err(|err| Failure(format!("--metrics {address}: cannot listen: {err}")))?;
                    Some(std::sync::Arc::new(listener))
                }
                None => None,
            };
            let options = LiveOptions {
                duration: duration.map(|d| seconds("--duration", d)).transpose()?,
                stats_interval: seconds("--stats-interval", stats_interval)?,
                stats_json: stats_json.clone(),
                extra_eal: eal,
                seed,
                metrics,
                capture,
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
                let mut json = report.stats.to_json(&config);
                json["elapsed_s"] = serde_json::json!(report.elapsed.as_secs_f64());
                json["mbufs"] = serde_json::json!({
                    "pool": report.mbufs_in_pool,
                    "available_at_exit": report.mbufs_available_at_exit,
                    "unsent_at_exit": report.unsent_at_exit,
                });
                if let Some(summary) = &report.capture {
                    let files: serde_json::Map<String, serde_json::Value> = summary
                        .written
                        .iter()
                        .map(|(file, frames)| (file.display().to_string(), serde_json::json!(frames)))
                        .collect();
                    json["capture"] = serde_json::json!({ "files": files, "not_captured": summary.not_captured });
                }
                let text = serde_json::to_string_pretty(&json).expect("stats serialise") + "\n";
                std::fs::write(&path, text)
                    .map_err(|err| Failure(format!("{}: cannot write: {err}", path.display())))?;
            }
            Ok(())
        }
        Command::Replay { config: config_path, inputs, out, seed, ignore_pfc, report } => {
            let config = Config::load(&config_path)?;
            if inputs.is_empty() {
                return Err(Failure("--in: give at least one PORT=FILE.pcap".into()));
            }
            let mut parsed: Vec<(usize, PathBuf)> = Vec::new();
            for input in &inputs {
                let (port, file) =
                    input.split_once('=').ok_or_else(|| Failure(format!("--in: '{input}' is not PORT=FILE")))?;
                let index = config
                    .port_index(port)
                    .ok_or_else(|| Failure(format!("--in: '{port}' is not a port of {}", config_path.display())))?;
                if parsed.iter().any(|(other, _)| *other == index) {
                    return Err(Failure(format!("--in: port '{port}' is given twice")));
                }
                parsed.push((index, PathBuf::from(file)));
            }
            let mut options = replay::ReplayOptions { seed, ignore_pfc: Vec::new(), report };
            for port in &ignore_pfc {
                let index = config.port_index(port).ok_or_else(|| {
                    Failure(format!("--peer-ignores-pfc: '{port}' is not a port of {}", config_path.display()))
                })?;
                options.ignore_pfc.push(index);
            }
            let stats = replay::run(&config, &parsed, &out, &options)?;
            println!("{}", stats.summary_line(&config));
            Ok(())
        }
        Command::Fabric {
            config,
            workload,
            target,
            message_bytes,
            messages,
            mode,
            no_dcqcn,
            roce_mtu,
            seed,
            horizon_ms,
            out,
        } => {
            let mut fabric = raceway::engine::fabric::Fabric::load(&config, mode.as_deref()).map_err(Failure)?;
            if no_dcqcn {
                fabric.dcqcn.enabled = false;
            }
            let collective =
                raceway::engine::fabric::workload::Collective::parse(&workload, target).map_err(Failure)?;
            if target >= fabric.hosts.len() {
                return Err(Failure(format!(
                    "--target: {target} is not a host (the fabric has {})",
                    fabric.hosts.len()
                )));
            }
            if message_bytes == 0 || messages == 0 {
                return Err(Failure("--message-bytes and --messages must be at least 1".into()));
            }
            if !(64..=9000).contains(&roce_mtu)
                || roce_mtu + raceway::engine::fabric::host::ROCE_OVERHEAD > fabric.mtu() as usize + 14
            {
                return Err(Failure(format!(
                    "--roce-mtu: {roce_mtu} is not 64-9000 or does not fit the switches' mtu {}",
                    fabric.mtu()
                )));
            }
            if !(horizon_ms.is_finite() && horizon_ms > 0.0) {
                return Err(Failure(format!("--horizon-ms: {horizon_ms} is not positive")));
            }
            let options = raceway::engine::fabric::engine::FabricOptions {
                collective,
                message_bytes,
                messages,
                roce_mtu,
                seed,
                horizon_ms,
            };
            let result = raceway::engine::fabric::engine::run(&fabric, &options, Some(&out)).map_err(Failure)?;
            println!(
                "{} {} mode {} dcqcn {}: completion {} us, FCT p50 {:.1} us p99 {:.1} us, PFC pause {:.1} us, CNPs {}, drops {}, incomplete {}",
                fabric.name,
                workload,
                result["mode"].as_str().unwrap_or(""),
                fabric.dcqcn.enabled,
                result["completion_us"].as_f64().map_or("-".to_string(), |c| format!("{c:.1}")),
                result["fct_us"]["p50"].as_f64().unwrap_or(0.0),
                result["fct_us"]["p99"].as_f64().unwrap_or(0.0),
                result["pfc_pause_total_us"].as_f64().unwrap_or(0.0),
                result["cnps_sent"],
                result["drops"],
                result["incomplete_messages"],
            );
            Ok(())
        }
        Command::Blast { trace, device, rate_gbps, duration, pfc, eal } => {
            if !(rate_gbps.is_finite() && rate_gbps > 0.0) {
                return Err(Failure(format!("--rate-gbps: {rate_gbps} is not positive")));
            }
            if let Some(link) = pfc.filter(|link| !(link.is_finite() && *link > 0.0)) {
                return Err(Failure(format!("--pfc: {link} is not a positive link speed in Gb/s")));
            }
            let frames: Vec<Vec<u8>> = replay::pcap::read_trace(&trace)?.into_iter().map(|frame| frame.bytes).collect();
            if frames.is_empty() {
                return Err(Failure(format!("{}: no frames to send", trace.display())));
            }
            if let Some(index) = frames.iter().position(|frame| frame.len() > 2048) {
                return Err(Failure(format!("{}: record {index}: longer than an mbuf (2048 bytes)", trace.display())));
            }
            let options = raceway::traffic::blast::BlastOptions {
                device,
                rate_gbps,
                duration: seconds("--duration", duration)?,
                eal,
                pfc_link_gbps: pfc,
            };
            let report = raceway::traffic::blast::run(&frames, &options)?;
            let seconds = report.elapsed.as_secs_f64();
            println!(
                "{}",
                serde_json::json!({
                    "sent": report.sent,
                    "sent_bytes": report.sent_bytes,
                    "refused": report.refused,
                    "unsent": report.unsent,
                    "received": report.received,
                    "pfc_rx": report.pfc_rx,
                    "paused_us": report.paused_ns.map(|ns| ns as f64 / 1000.0),
                    "elapsed_s": seconds,
                    "mpps": report.sent as f64 / seconds / 1e6,
                    "gbps_on_wire": (report.sent_bytes + 24 * report.sent) as f64 * 8.0 / seconds / 1e9,
                    "honours_pfc": pfc.is_some(),
                    "mbufs": { "pool": report.mbufs_in_pool, "available_at_exit": report.mbufs_available_at_exit },
                })
            );
            Ok(())
        }
        Command::Check { config: path } => {
            let config = Config::load(&path)?;
            print!("{}", raceway::config::check::report(&config));
            Ok(())
        }
        Command::Gen { kind: GenKind::Flows { out, flows, packets, size, rate_gbps, dscp } } => {
            check_gen_options(size, rate_gbps)?;
            if dscp > 63 {
                return Err(Failure(format!("--dscp: {dscp} is not 0-63")));
            }
            let frames = gen::flows(&gen::FlowsOptions { flows, packets, frame_len: size, rate_gbps, dscp });
            write_trace(&out, &frames)
        }
        Command::Gen { kind: GenKind::Mixed { out, packets, seed, size, rate_gbps, host, bad_percent } } => {
            check_gen_options(size, rate_gbps)?;
            if bad_percent > 100 {
                return Err(Failure(format!("--bad-percent: {bad_percent} is over 100")));
            }
            let frames =
                gen::mixed(&gen::MixedOptions { packets, seed, frame_len: size, rate_gbps, host, bad_percent });
            write_trace(&out, &frames)
        }
        Command::Gen { kind: GenKind::Incast { target, common } } => {
            write_pattern(gen::Pattern::Incast { target }, common)
        }
        Command::Gen { kind: GenKind::Allreduce { common } } => write_pattern(gen::Pattern::AllReduce, common),
        Command::Gen { kind: GenKind::Alltoall { common } } => write_pattern(gen::Pattern::AllToAll, common),
        Command::Gen { kind: GenKind::PfcStorm { storm, priority, interval_us, common } } => {
            write_pattern(gen::Pattern::PfcStorm { storm, priority, interval_us }, common)
        }
    }
}
