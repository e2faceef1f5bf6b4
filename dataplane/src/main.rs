//! The `raceway` command line: `run` (live on DPDK), `show` (a running switch's views, over
//! its telemetry socket), `replay` (deterministic virtual time), `check` (validate a config,
//! print derived values), `blast` (send a trace at a rate from a DPDK port), `fabric` (a
//! leaf-spine with DCQCN hosts in virtual time) and `gen` (synthetic traces). Their flags, as
//! clap reads them, are `cli.rs`'s; here each command calls into the module that does its
//! work.
//!
//! Invariant: a user's mistake (flag, file, config) ends with one line on stderr naming the
//! file, the field and the problem, and exit status 2; never a panic or a backtrace.

use clap::Parser;
use cli::*;
use raceway::blast::{self, ArpAnswerer};

mod cli;
use raceway::config::{Config, Prefix};
use raceway::engine::{fabric, replay};
use raceway::live::{self, LiveOptions, MetricsListener};
use raceway::observe::capture::CaptureRequest;
use raceway::traffic::gen;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

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
    // Colours only on a terminal: logs written to files (a keeper's, a test's) and to the
    // journal read plain.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .init();
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
        (None, Some(path)) => match Config::load(&path) {
            Ok(config) => show::file_prefix(&config),
            // The switch runs on the config it last loaded: `show` still finds it from the
            // file's EAL prefix, and says the file is not what runs.
            Err(err) => {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let Some(prefix) = show::file_prefix_of_text(&text) else { return Err(err.into()) };
                tracing::warn!(
                    "{err}; the running switch's config differs from this file (`show running-config` \
                     shows it): asking the switch on EAL prefix '{prefix}'"
                );
                prefix
            }
        },
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
        if std::path::Path::new(&format!("/run/netns/{}", control.netns)).exists() {
            println!(
                "the namespace {} stays: raceway did not create it, or processes run in it ({} says which)",
                control.netns,
                raceway::control::keep::log_path(&control.netns).display()
            );
        }
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
    // A fabric file (`[fabric]`, for `raceway fabric`): its shape.
    let is_fabric = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .is_some_and(|table| table.contains_key("fabric"));
    if is_fabric {
        print!("{}", fabric::Fabric::load(&path, None)?.shape_report());
        return Ok(());
    }
    let config = Config::load(&path)?;
    print!("{}", raceway::config::check::report(&config));
    Ok(())
}

/// `raceway blast`: a trace sent on one DPDK device at a paced rate.
fn blast_trace(args: BlastArgs) -> Result<(), Failure> {
    let BlastArgs { trace, device, rate_gbps, duration, pfc, tx_queues, sequence, progress, answer_arp, eal } = args;
    let answer_arp = answer_arp
        .map(|text| {
            Prefix::parse(&text).ok().and_then(ArpAnswerer::new).ok_or_else(|| {
                raceway::error::InputError::flag(
                    "--answer-arp",
                    format!("'{text}' is not an IPv4 prefix (a.b.c.d/len, no host bits)"),
                )
            })
        })
        .transpose()?;
    let options = blast::BlastOptions {
        device,
        rate_gbps,
        duration: seconds("--duration", duration)?,
        eal,
        pfc_link_gbps: pfc,
        tx_queues,
        sequence,
        progress,
        answer_arp,
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
        hpcc_topology,
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
    let source = fabric::workload::FlowSource { flow_file, hpcc_topology, cdf, load, duration_us };
    let (flows, origin) = fabric::workload::flows_of(&fabric, workload, source, seed)?;
    let (jitter_ps, sample_ps) = fabric::engine::FabricOptions::times_of_flags(jitter_us, sample_us)?;
    let options = fabric::engine::FabricOptions {
        collective,
        message_bytes,
        messages,
        roce_mtu,
        seed,
        horizon_ms,
        progress: show_progress(),
        // A rank's default: its share of the hosts on its share of this machine's cores.
        threads: threads.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let ranks = raceway::ranks::launched_ranks().unwrap_or(1).max(1);
            let sharing = raceway::ranks::ranks_on_this_machine();
            fabric::engine::default_threads(fabric.hosts.len() / ranks, (cores / sharing).max(1))
        }),
        flows,
        origin,
        jitter_ps,
        sample: sample_ps.map(|ps| (ps, sample)),
        qp_rates,
    };
    options.validate(&fabric)?;
    match raceway::ranks::launched_ranks() {
        Some(ranks) if ranks > 1 => run_fabric_ranks(ranks, &fabric, &options, &out),
        _ => {
            let results = fabric::engine::run(&fabric, &options, Some(&out))?;
            println!("{}", results.summary_line());
            Ok(())
        }
    }
}

/// This process's share of a fabric run an MPI launcher split over `ranks` processes: rank 0
/// prints the summary; a rank that fails ends every rank (they may be waiting for it).
#[cfg(feature = "mpi")]
fn run_fabric_ranks(
    _ranks: usize,
    fabric: &fabric::Fabric,
    options: &fabric::engine::FabricOptions,
    out: &Path,
) -> Result<(), Failure> {
    use raceway::engine::fabric::ranks::Exchange;
    use std::io::Write;
    // Ranks share the launcher's stderr: each line goes out in one write, or lines of
    // different ranks would interleave.
    let say = |line: String| {
        let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
    };
    let mut ranks = raceway::ranks::MpiRanks::init().map_err(Failure)?;
    let started = std::time::Instant::now();
    match fabric::engine::run_on(fabric, options, Some(out), &mut ranks) {
        Ok(Some(results)) => println!("{}", results.summary_line()),
        Ok(None) => {}
        Err(error) => {
            say(format!("error: {error}"));
            ranks.abort(2);
        }
    }
    // What each rank cost: perf/fabric-scale.sh reads these lines.
    let exchanges = ranks.exchanges.max(1);
    say(format!(
        "rank {} of {}: {:.3} s, {} exchanges, {:.3} s in them ({:.1} us each), peak RSS {} MB",
        ranks.rank(),
        ranks.ranks(),
        started.elapsed().as_secs_f64(),
        ranks.exchanges,
        ranks.exchange_time.as_secs_f64(),
        ranks.exchange_time.as_secs_f64() * 1e6 / exchanges as f64,
        raceway::ranks::peak_rss_mb().map_or("unknown".to_string(), |mb| mb.to_string()),
    ));
    Ok(())
}

/// Without MPI a rank would run the whole fabric and write over the others' outputs.
#[cfg(not(feature = "mpi"))]
fn run_fabric_ranks(
    ranks: usize,
    _fabric: &fabric::Fabric,
    _options: &fabric::engine::FabricOptions,
    _out: &Path,
) -> Result<(), Failure> {
    Err(Failure(format!(
        "a launcher started {ranks} ranks, but this raceway was built without MPI: \
         build it with `cargo build --release -p raceway --features mpi`, or run one process"
    )))
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
