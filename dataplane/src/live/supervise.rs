//! What the main lcore does while the workers forward: prints the counter table every stats
//! interval, writes the FIB on SIGUSR1, and answers DPDK telemetry and `raceway show`. All
//! of it reads what the workers published; none of it is on the packet path.
//!
//! Invariant: the main lcore never writes a worker's state; what it asks of the workers (a
//! watermark clear, a reload) goes through `Shared` and is applied by each worker itself.
//! Every view reads the config in force (`Shared::running`), so after a reload `show` and the
//! metrics name what runs.

use super::reload::Reloaded;
use super::shared::Shared;
use crate::config::Config;
use crate::control::ControlLink;
use crate::counters::{SwitchStats, WatermarkClear};
use crate::dpdk;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Registers the `/raceway/*` telemetry commands, answered from the published counters.
pub(super) fn register_telemetry(shared: &Arc<Shared>, control: Option<&Arc<ControlLink>>) {
    let telemetry_shared = Arc::clone(shared);
    let pager = crate::show::serve::Pager::default();
    let route_streams = crate::show::route_stream::RouteStreams::default();
    // Weak: the telemetry handler outlives the run, and the control link's rings must go
    // before their pool.
    let show_fib = control.map(Arc::downgrade);
    let answer = move |command: &str, params: &str| {
        let telemetry_config = telemetry_shared.config.running();
        if command != "/raceway/show" {
            return crate::observe::telemetry::reply(command, &telemetry_shared.counters.snapshot(), &telemetry_config)
                .map(dpdk::TelemetryReply::Sections);
        }
        let control = show_fib.as_ref().and_then(std::sync::Weak::upgrade);
        if params.split_whitespace().nth(1).is_some_and(|view| view.starts_with(crate::show::route_stream::VIEW)) {
            let names: Vec<&str> = telemetry_config.ports.iter().map(|port| port.name.as_str()).collect();
            let fib = || current_fib(&telemetry_config, control.as_deref());
            return route_streams.answer(params, fib, &names).map(dpdk::TelemetryReply::Text);
        }
        let build = |view: &str| show_view(view, &telemetry_shared, &telemetry_config, control.as_deref());
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
}

/// A `raceway show` document (`observe::show`): `state`, `fib`, `running-config`, a
/// watermark clear or a reload.
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
                    crate::show::serve::interface_entry(port, shared.port_states.get(index), port.speed_mbps)
                })
                .collect();
            let mut document = crate::show::serve::state_document(
                config,
                interfaces,
                shared.counters.shown_snapshot().to_json(config),
            );
            document["sflow"] = sflow_state(config, shared);
            Some(document)
        }
        "fib" => {
            let names: Vec<&str> = config.ports.iter().map(|port| port.name.as_str()).collect();
            Some(serde_json::json!({ "fib": current_fib(config, control).to_text(&names) }))
        }
        _ if view.starts_with("route:") => {
            let addresses = crate::show::serve::route_view_addresses(view)?;
            let names: Vec<&str> = config.ports.iter().map(|port| port.name.as_str()).collect();
            let fib = current_fib(config, control);
            Some(crate::show::serve::route_document(&fib, &addresses, &names, control.is_some()))
        }
        "running-config" => Some(serde_json::json!({
            "file": shared.config.config_path().map(|path| path.display().to_string()),
            "config": crate::config::check::report(config),
        })),
        "reload" => Some(reload_answer(shared.reload(RELOAD_WITHIN))),
        "hand-over" => {
            tracing::info!("take-over: a new switch takes over; stopping, the host interfaces left to it");
            shared.handing_over.store(true, std::sync::atomic::Ordering::Relaxed);
            Some(serde_json::json!({ "handing_over": true, "pid": std::process::id() }))
        }
        "clear-counters" => {
            shared.counters.clear_counters();
            Some(serde_json::json!({ "cleared": true }))
        }
        "clear" | "clear-persistent" => {
            let which = if view == "clear" { WatermarkClear::User } else { WatermarkClear::Persistent };
            let cleared = shared.clear_watermarks(which, Duration::from_secs(2));
            Some(serde_json::json!({ "cleared": cleared }))
        }
        _ => None,
    }
}

/// `[sflow]` as it runs and what the exporter did, for `show sflow` (null when off).
fn sflow_state(config: &Config, shared: &Shared) -> serde_json::Value {
    let Some(sflow) = &config.sflow else { return serde_json::Value::Null };
    let rates: serde_json::Map<String, serde_json::Value> =
        config.ports.iter().zip(&sflow.rates).map(|(port, rate)| (port.name.clone(), (*rate).into())).collect();
    serde_json::json!({
        "collector": sflow.collector.to_string(),
        "agent": sflow.agent.to_string(),
        "polling_interval_s": sflow.polling_interval_s,
        "header_bytes": sflow.header_bytes,
        "rates": rates,
        "datagrams_sent": shared.samples.sent.load(std::sync::atomic::Ordering::Relaxed),
        "send_failures": shared.samples.failed.load(std::sync::atomic::Ordering::Relaxed),
        "samples_lost": shared.samples.lost(),
    })
}

/// SIGUSR2: starts this switch's successor, `raceway run --take-over` with this process's own
/// arguments, from the binary at the path this one was started by (a new one, after an
/// upgrade). It takes the ports over once started (`live::take_over`), so forwarding stops for
/// the hand-over alone; under systemd it is in the unit and tells it its pid (`MAINPID=`). This
/// switch goes on until asked to hand over; if the successor fails first, it says so and
/// nothing changes.
fn start_successor(signal: &str) {
    let mut args = std::env::args_os();
    let Some(binary) = args.next() else { return };
    let mut successor = std::process::Command::new(&binary);
    successor.args(successor_arguments(args.collect()));
    successor.stdin(std::process::Stdio::null());
    match successor.spawn() {
        Ok(mut child) => {
            let pid = child.id();
            tracing::info!("{signal}: started pid {pid} to take over ({} run --take-over)", binary.to_string_lossy());
            // Reaped here, so that one that fails is said and leaves no zombie.
            let reaping =
                std::thread::Builder::new().name("raceway-successor".into()).spawn(move || match child.wait() {
                    Ok(status) if !status.success() => {
                        tracing::warn!("the successor (pid {pid}) ended: {status}; this switch goes on")
                    }
                    _ => {}
                });
            if let Err(err) = reaping {
                tracing::warn!("cannot watch the successor: {err}");
            }
        }
        Err(err) => tracing::warn!("{signal}: cannot start a successor ({}): {err}", binary.to_string_lossy()),
    }
}

/// A successor's arguments: this process's (binary aside) with `--take-over` right after
/// `run` (before any `--` and the EAL's arguments), and without `--clean`.
fn successor_arguments(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut past_run = false;
    let mut eal = false;
    for arg in args {
        if !eal && (arg == "--take-over" || arg == "--clean") {
            continue;
        }
        eal |= past_run && arg == "--";
        let is_run = !past_run && arg == "run";
        out.push(arg);
        if is_run {
            past_run = true;
            out.push("--take-over".into());
        }
    }
    out
}

/// How long a reload waits for every worker to take the new config: they do at their next
/// loop, so only a stopping switch takes this long.
const RELOAD_WITHIN: Duration = Duration::from_secs(5);

/// The `reload` document: `reloaded` (whether the file's config is in force), `changed` (the
/// sections it changed) or `error` (the one line saying why not).
fn reload_answer(reloaded: Reloaded) -> serde_json::Value {
    match reloaded {
        Reloaded::Applied(changed) => serde_json::json!({ "reloaded": true, "changed": changed }),
        Reloaded::Refused(error) => serde_json::json!({ "reloaded": false, "error": error }),
        Reloaded::Unconfirmed(error) => serde_json::json!({ "reloaded": true, "changed": [], "error": error }),
    }
}

/// The FIB the workers forward by: the control plane's latest, or the config's own.
fn current_fib(config: &Config, control: Option<&ControlLink>) -> Arc<crate::pipeline::fib::Fib> {
    match control {
        Some(link) => link.fib.load(),
        None => Arc::new(crate::pipeline::fib::Fib::new(config, &crate::pipeline::fib::Learned::default(), 1)),
    }
}

/// The main lcore's duties between the workers' start and stop: decides when to stop
/// (SIGINT/SIGTERM or the end of `--duration`), prints the counter table, writes the FIB when
/// asked.
pub(super) struct Supervisor<'a> {
    shared: &'a Arc<Shared>,
    printer: RatePrinter,
    interval: Duration,
    deadline: Option<Instant>,
    fib_dump: Option<&'a FibDump>,
}

impl<'a> Supervisor<'a> {
    pub fn new(
        config: &Config,
        shared: &'a Arc<Shared>,
        interval: Duration,
        deadline: Option<Instant>,
        fib_dump: Option<&'a FibDump>,
    ) -> Self {
        Self { shared, printer: RatePrinter::new(config), interval, deadline, fib_dump }
    }

    /// One look: asks the workers to stop when it is time (and says so), else prints and
    /// dumps what is due.
    pub fn tick(&mut self) -> bool {
        let finished = dpdk::stop_requested()
            || self.shared.handing_over.load(std::sync::atomic::Ordering::Relaxed)
            || self.deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if finished {
            self.shared.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            return true;
        }
        self.printer.maybe_print(self.shared, self.interval);
        FibDump::if_asked(self.fib_dump);
        if let Some(signal) = dpdk::take_noted_signal().filter(|&signal| {
            let reloads = signal == "SIGHUP";
            if !reloads {
                start_successor(signal);
            }
            reloads
        }) {
            // SIGHUP: nothing to reopen (logs go to stderr; the stats JSON is written at exit): a
            // reload, on a thread of its own, since it waits for the workers and with one
            // lcore this is the worker's own loop.
            let shared = Arc::clone(self.shared);
            let reload = move || log_reload(signal, shared.reload(RELOAD_WITHIN));
            if let Err(err) = std::thread::Builder::new().name("raceway-reload".into()).spawn(reload) {
                tracing::warn!("{signal}: cannot start the reload: {err}");
            }
        }
        false
    }
}

/// Says in the log what a reload did.
fn log_reload(cause: &str, reloaded: Reloaded) {
    match reloaded {
        Reloaded::Applied(changed) if changed.is_empty() => tracing::info!("{cause}: reload: nothing changed"),
        Reloaded::Applied(changed) => tracing::info!("{cause}: reloaded: {}", changed.join(", ")),
        Reloaded::Refused(error) => tracing::warn!("{cause}: reload refused, the running config kept: {error}"),
        Reloaded::Unconfirmed(error) => tracing::warn!("{cause}: reload: {error}"),
    }
}

/// Prints the live counter table (`SwitchStats::rate_table`) every stats interval, with rates
/// over the time since its previous table.
struct RatePrinter {
    previous: SwitchStats,
    printed_at: Instant,
}

impl RatePrinter {
    fn new(config: &Config) -> Self {
        Self { previous: SwitchStats::new(config), printed_at: Instant::now() }
    }

    fn maybe_print(&mut self, shared: &Shared, interval: Duration) {
        let elapsed = self.printed_at.elapsed();
        if elapsed < interval {
            return;
        }
        let now = shared.counters.snapshot();
        tracing::info!(
            "counters over the last {:.1} s\n{}",
            elapsed.as_secs_f64(),
            now.rate_table(&self.previous, elapsed.as_secs_f64(), &shared.config.running())
        );
        self.previous = now;
        self.printed_at = Instant::now();
    }
}

/// `--fib-dump`: the FIB the workers forward by, written as text (`Fib::to_text`) on SIGUSR1
/// and at exit, by the main lcore, off the packet path.
pub(super) struct FibDump {
    link: Arc<ControlLink>,
    path: PathBuf,
    ports: Vec<String>,
}

impl FibDump {
    /// The dump asked for, when there is a control plane to publish a FIB.
    pub fn new(path: Option<&PathBuf>, control: Option<&Arc<ControlLink>>, config: &Config) -> Option<Self> {
        Some(Self {
            link: Arc::clone(control?),
            path: path?.clone(),
            ports: config.ports.iter().map(|port| port.name.clone()).collect(),
        })
    }

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
    pub fn write(&self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<std::ffi::OsString> {
        text.split(' ').map(Into::into).collect()
    }

    #[test]
    fn a_successor_runs_with_the_same_arguments_and_takes_over() {
        assert_eq!(
            successor_arguments(words("--log-level info run -c leaf.toml --clean --metrics 9464 -- --no-huge --clean")),
            words("--log-level info run --take-over -c leaf.toml --metrics 9464 -- --no-huge --clean"),
            "after run, not among the EAL's arguments; --clean dropped, an EAL word kept"
        );
        assert_eq!(
            successor_arguments(words("run --take-over -c leaf.toml")),
            words("run --take-over -c leaf.toml"),
            "a switch that took over passes it on once"
        );
    }
}
