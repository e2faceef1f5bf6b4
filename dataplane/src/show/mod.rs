//! `raceway show`: what a running switch says about itself, asked over its DPDK telemetry
//! socket, printed as tables that read like SONiC's `show interfaces counters`, `show pfc
//! counters`, `show queue counters` and `show queue watermark` (or as JSON with `--json`).
//!
//! The switch answers `/raceway/show,TOKEN VIEW PAGE` with one string, `PAGES HEX`: page PAGE
//! of the view's JSON document, hex-encoded (DPDK 22.11 writes a string reply as it is, so it
//! must need no JSON escape; a page is at most `PAGE_BYTES` of the document, under DPDK's
//! 8 KiB string limit). The document is built once, on page 0, and kept under the client's
//! token while it reads the rest, so a FIB of a million routes arrives whole and consistent.
//! Views: `state` (every port's link, shutdown, MTU and addresses, and the stats JSON of
//! docs/STATS.md), `fib` (the FIB as `run --fib-dump` writes it), `clear` and
//! `clear-persistent` (watermarks; answered once every worker has cleared its own).
//!
//! The client (`run`) fetches what a view needs and formats it; rates (`counters`) come from
//! two `state` documents `--period` apart, as SONiC's `show interfaces counters -p`.
//!
//! Invariant: every number printed is one of the stats JSON's (or a difference of two of
//! them over the period), so `show` and the stats JSON never disagree.

pub mod output;
pub mod route_stream;
pub mod serve;

use crate::config::Config;
pub use output::READER_GONE;
use output::{acl, counters, interfaces, neighbors, pfc, print, queues, route_table, sflow, watermarks, write_error};
use serde_json::Value;
use serve::{ROUTE_REQUEST_BYTES, ROUTE_VIEW};
use std::time::Duration;

/// What `raceway show` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    Interfaces,
    Counters,
    Pfc,
    Queues,
    Watermarks {
        persistent: bool,
        clear: bool,
    },
    /// The FIB's routes, or with a prefix those inside it (it included).
    Routes(Option<crate::config::Prefix>),
    /// The FIB's answer for each address, as `ip route get` gives the kernel's.
    Route(Vec<std::net::IpAddr>),
    Neighbors,
    /// The ACL tables' rules and what each matched.
    Acl,
    /// The config in force and the file it came from.
    RunningConfig,
    /// sFlow's collector, agent, rates and what was sent.
    Sflow,
    ClearWatermarks {
        persistent: bool,
    },
    /// Every view's counters count from now (the switch's own are never reset).
    ClearCounters,
}

/// Where the switch's telemetry socket is: DPDK's runtime directory for the EAL file prefix
/// (/var/run/dpdk/PREFIX as root, else $XDG_RUNTIME_DIR or /tmp, then /dpdk/PREFIX).
pub fn socket_path(prefix: &str) -> std::path::PathBuf {
    runtime_base().join(prefix).join("dpdk_telemetry.v2")
}

/// DPDK's runtime base directory: /var/run/dpdk as root, else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk.
pub fn runtime_base() -> std::path::PathBuf {
    // The effective uid, from /proc (std has no geteuid).
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with("Uid:"))?.to_string();
            Some(line.split_whitespace().nth(2)? == "0")
        })
        .unwrap_or(false);
    let base = if root {
        std::path::PathBuf::from("/var/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| std::path::PathBuf::from("/tmp"), std::path::PathBuf::from)
    };
    base.join("dpdk")
}

/// The EAL file prefix of a config's `[dpdk] eal` arguments (DPDK's default, "rte", if none).
pub fn file_prefix(config: &Config) -> String {
    prefix_of(&config.eal)
}

/// The EAL file prefix of config text that may not validate: its `[dpdk] eal` strings read
/// from the TOML alone, so that `show` still finds the switch a broken file was meant for
/// (an operator's edit that `reload` refused). `None` when the text is not TOML or its
/// `[dpdk] eal` is not a list of strings.
pub fn file_prefix_of_text(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    let eal = match table.get("dpdk").and_then(|dpdk| dpdk.get("eal")) {
        None => Vec::new(),
        Some(eal) => eal.as_array()?.iter().map(|arg| arg.as_str().map(str::to_string)).collect::<Option<_>>()?,
    };
    Some(prefix_of(&eal))
}

/// The file prefix EAL arguments `args` set (the last one given; DPDK's default, "rte", if none).
pub fn prefix_of(args: &[String]) -> String {
    let mut found: Option<&str> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--file-prefix" {
            found = args.next().map(String::as_str).or(found);
        } else if let Some(prefix) = arg.strip_prefix("--file-prefix=") {
            found = Some(prefix);
        }
    }
    found.unwrap_or("rte").to_string()
}

/// The two file prefixes a switch with `prefix` runs on: its own, and the one a take-over
/// (`raceway run --take-over`) starts on while the switch before still runs on the first.
/// Switches taking over from each other alternate between them.
pub fn prefix_slots(prefix: &str) -> [String; 2] {
    [prefix.to_string(), format!("{prefix}-2")]
}

/// The telemetry socket of the switch running with `prefix`: the first slot's, unless only the
/// second slot's answers (a switch that took over from another).
pub fn running_socket(prefix: &str) -> std::path::PathBuf {
    let [first, second] = prefix_slots(prefix).map(|slot| socket_path(&slot));
    if crate::linux::SeqPacket::connect(&first, Duration::from_secs(1)).is_err()
        && crate::linux::SeqPacket::connect(&second, Duration::from_secs(1)).is_ok()
    {
        return second;
    }
    first
}

/// A connection to a running switch.
pub struct Client {
    socket: crate::linux::SeqPacket,
    buffer: Vec<u8>,
    token: String,
    /// The switch's process, from DPDK's greeting.
    pid: Option<u32>,
}

impl Client {
    /// Connects to the telemetry socket at `path`.
    pub fn connect(path: &std::path::Path) -> Result<Self, String> {
        let socket = crate::linux::SeqPacket::connect(path, Duration::from_secs(10)).map_err(|err| {
            format!("{}: {err} (is a raceway with this config's EAL file prefix running?)", path.display())
        })?;
        let mut client = Self { socket, buffer: vec![0; 64 << 10], token: String::new(), pid: None };
        // DPDK greets with its version, its process and its output limit.
        let greeting = client.receive()?;
        client.pid = greeting["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok());
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        client.token = format!("{}-{nanos}", std::process::id());
        Ok(client)
    }

    /// A connection when a switch answers on `path`, at once; `None` otherwise.
    pub fn try_connect(path: &std::path::Path) -> Option<Self> {
        Self::connect(path).ok()
    }

    /// The switch's process, as its greeting said.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn receive(&mut self) -> Result<Value, String> {
        let len = self.socket.recv(&mut self.buffer).map_err(|err| format!("telemetry: {err}"))?;
        if len == 0 {
            return Err("telemetry: the switch closed the connection".into());
        }
        serde_json::from_slice(&self.buffer[..len]).map_err(|err| format!("telemetry: a reply that is not JSON: {err}"))
    }

    /// The switch's string reply to `command` (a `/raceway/show` request).
    pub fn request(&mut self, command: &str) -> Result<String, String> {
        self.socket.send(command.as_bytes()).map_err(|err| format!("telemetry: {err}"))?;
        let mut reply = self.receive()?;
        match reply.get_mut("/raceway/show").map(Value::take) {
            Some(Value::String(text)) => Ok(text),
            _ => Err(format!("telemetry: the switch does not answer /raceway/show ({reply})")),
        }
    }

    /// The document of `view`, page by page.
    pub fn fetch(&mut self, view: &str) -> Result<Value, String> {
        let mut document = Vec::new();
        let mut page = 0;
        loop {
            let text = self.request(&format!("/raceway/show,{} {view} {page}", self.token))?;
            let (pages, hex) = text.split_once(' ').ok_or("telemetry: a malformed page")?;
            let pages: usize = pages.parse().map_err(|_| "telemetry: a malformed page count")?;
            if hex.len() % 2 != 0 {
                return Err("telemetry: a page of odd length".into());
            }
            for pair in hex.as_bytes().chunks(2) {
                let digits = std::str::from_utf8(pair).map_err(|_| "telemetry: a page that is not hex")?;
                document.push(u8::from_str_radix(digits, 16).map_err(|_| "telemetry: a page that is not hex")?);
            }
            page += 1;
            if page >= pages {
                break;
            }
        }
        serde_json::from_slice(&document).map_err(|err| format!("telemetry: a document that is not JSON: {err}"))
    }
}

/// The `route:` views that ask about `addresses`, each within one telemetry request.
pub fn route_views(addresses: &[std::net::IpAddr]) -> Vec<String> {
    let mut views = Vec::new();
    let mut view = String::from(ROUTE_VIEW);
    for address in addresses {
        let text = address.to_string();
        if view.len() + text.len() + 1 > ROUTE_REQUEST_BYTES {
            views.push(std::mem::replace(&mut view, String::from(ROUTE_VIEW)));
        }
        if view.len() > ROUTE_VIEW.len() {
            view.push(',');
        }
        view.push_str(&text);
    }
    if view.len() > ROUTE_VIEW.len() {
        views.push(view);
    }
    views
}

/// Asks the switch behind `socket` for `view` and writes what it says to `out` (`period`:
/// between the two samples of `counters`). Routes are written as they arrive.
pub fn run(
    socket: &std::path::Path,
    view: View,
    period: Duration,
    as_json: bool,
    out: &mut impl std::io::Write,
) -> Result<(), String> {
    let mut client = Client::connect(socket)?;
    let text = view_text(&mut client, view, period, as_json, out)?;
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(write_error)
}

/// What `run` prints for `view`, but routes, which `route_stream` writes to `out` itself.
fn view_text(
    client: &mut Client,
    view: View,
    period: Duration,
    as_json: bool,
    out: &mut impl std::io::Write,
) -> Result<String, String> {
    let (name, tables) = match view {
        View::Interfaces => ("interfaces", interfaces(&client.fetch("state")?)),
        View::Counters => {
            let before = client.fetch("state")?;
            std::thread::sleep(period);
            ("counters", counters(&before, &client.fetch("state")?, period))
        }
        View::Pfc => ("pfc", pfc(&client.fetch("state")?)),
        View::Queues => ("queues", queues(&client.fetch("state")?)),
        View::Watermarks { persistent, clear } => {
            let tables = watermarks(&client.fetch("state")?, persistent);
            if clear {
                clear_watermarks(client, persistent)?;
            }
            ("watermarks", tables)
        }
        View::Routes(within) => {
            let token = client.token.clone();
            route_stream::stream(&token, within, as_json, |command| client.request(command), out)?;
            return Ok(String::new());
        }
        View::Route(addresses) => {
            let mut answers = Vec::with_capacity(addresses.len());
            for view in route_views(&addresses) {
                match client.fetch(&view)? {
                    Value::Array(part) => answers.extend(part),
                    other => return Err(format!("telemetry: a route answer that is not a list: {other}")),
                }
            }
            if as_json {
                return Ok(serde_json::to_string_pretty(&Value::Array(answers)).expect("json") + "\n");
            }
            ("route", vec![route_table(&answers)])
        }
        View::Neighbors => ("neighbors", neighbors(&client.fetch("fib")?)),
        View::Acl => ("acl", acl(&client.fetch("state")?)),
        View::Sflow => ("sflow", sflow(&client.fetch("state")?)),
        View::RunningConfig => {
            let document = client.fetch("running-config")?;
            if as_json {
                return Ok(serde_json::to_string_pretty(&document).expect("json") + "\n");
            }
            let file = document["file"].as_str().unwrap_or("(no file)");
            let text = document["config"].as_str().ok_or("telemetry: a running-config without its config")?;
            return Ok(format!("# running config, read from {file}\n{text}"));
        }
        View::ClearCounters => {
            if client.fetch("clear-counters")?["cleared"] != Value::Bool(true) {
                return Err("the switch did not clear its counters' view".into());
            }
            return Ok(if as_json { "{\"cleared\": \"counters\"}\n".into() } else { "cleared counters\n".into() });
        }
        View::ClearWatermarks { persistent } => {
            clear_watermarks(client, persistent)?;
            let what = if persistent { "persistent and user watermarks" } else { "watermarks" };
            return Ok(if as_json { format!("{{\"cleared\": \"{what}\"}}\n") } else { format!("cleared {what}\n") });
        }
    };
    Ok(print(name, &tables, as_json))
}

/// Asks the switch behind `socket` to re-read its config file: what it changed, as a line to
/// print; or the switch's one line saying why nothing changed.
pub fn reload(socket: &std::path::Path) -> Result<String, String> {
    let answer = Client::connect(socket)?.fetch("reload")?;
    let error = answer["error"].as_str();
    match (answer["reloaded"].as_bool(), error) {
        (Some(false), Some(error)) => Err(error.to_string()),
        (Some(true), Some(error)) => Err(error.to_string()),
        (Some(true), None) => {
            let changed: Vec<&str> =
                answer["changed"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            Ok(if changed.is_empty() {
                "reloaded: nothing changed".into()
            } else {
                format!("reloaded: {}", changed.join(", "))
            })
        }
        _ => Err(format!("telemetry: a reload answer that says neither: {answer}")),
    }
}

fn clear_watermarks(client: &mut Client, persistent: bool) -> Result<(), String> {
    let answer = client.fetch(if persistent { "clear-persistent" } else { "clear" })?;
    if answer["cleared"] != Value::Bool(true) {
        return Err("the switch's workers did not clear their watermarks in time (is it stopping?)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_prefix_comes_from_the_eal_arguments() {
        let mut config = crate::testing::Leaf::new("t").port("p0", 1.0, "").config();
        assert_eq!(file_prefix(&config), "rte");
        config.eal = vec!["--no-huge".into(), "--file-prefix".into(), "leaf1".into()];
        assert_eq!(file_prefix(&config), "leaf1");
        config.eal = vec!["--file-prefix=leaf2".into()];
        assert_eq!(file_prefix(&config), "leaf2");
        let args = |text: &str| text.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(prefix_of(&args("--file-prefix leaf1 -l 0-1 --file-prefix=leaf3")), "leaf3", "the last, as the EAL");
        assert!(socket_path("leaf2").ends_with("dpdk/leaf2/dpdk_telemetry.v2"));
    }
}
