//! What `raceway show` prints: the tables each view makes of the switch's documents, laid out
//! as SONiC lays them out or as JSON (`--json`), and the one error a failed write becomes.
//!
//! Invariant: every number in a table is one of the document's (or a difference of two over
//! the period); no table computes a counter the stats JSON does not have.

use crate::drops::DropReason;
use crate::units::TRAFFIC_CLASSES;
use serde_json::{json, Map, Value};
use std::fmt::Write;
use std::time::Duration;

/// A table: a title, column names, rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(title: &str, columns: &[&str]) -> Self {
        Self { title: title.to_string(), columns: columns.iter().map(|c| c.to_string()).collect(), rows: Vec::new() }
    }

    /// Right-aligned columns under a dashed rule, as SONiC prints them.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.columns.iter().map(String::len).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells.iter().zip(&widths).map(|(cell, &w)| format!("{cell:>w$}")).collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(out, "{}", self.title);
        }
        let _ = writeln!(out, "{}", line(&self.columns));
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        let _ = writeln!(out, "{}", rule.join("  "));
        for row in &self.rows {
            let _ = writeln!(out, "{}", line(row));
        }
        if self.rows.is_empty() {
            let _ = writeln!(out, "(none)");
        }
        out
    }

    /// The rows as JSON objects keyed by column name (lower case, `_` for spaces); numbers
    /// stay numbers.
    pub fn to_json(&self) -> Value {
        let keys: Vec<String> = self.columns.iter().map(|c| c.to_lowercase().replace([' ', '/'], "_")).collect();
        let rows = self.rows.iter().map(|row| {
            let object: Map<String, Value> =
                keys.iter().zip(row).map(|(key, cell)| (key.clone(), cell_value(cell))).collect();
            Value::Object(object)
        });
        Value::Array(rows.collect())
    }
}

/// A cell as JSON: counts stay integers, rates and shares become plain numbers in their base
/// unit (`1.50 Gb/s` is 1.5e9 b/s, `300/s` 300, `12.50%` 12.5), the rest stays text.
fn cell_value(cell: &str) -> Value {
    if let Ok(count) = cell.parse::<u64>() {
        return Value::from(count);
    }
    let scaled =
        [(" Tb/s", 1e12), (" Gb/s", 1e9), (" Mb/s", 1e6), (" Kb/s", 1e3), (" b/s", 1.0), ("/s", 1.0), ("%", 1.0)]
            .iter()
            .find_map(|(suffix, scale)| Some(cell.strip_suffix(suffix)?.parse::<f64>().ok()? * scale));
    match scaled.or_else(|| cell.parse::<f64>().ok()) {
        Some(value) => json!(value),
        None => Value::from(cell),
    }
}

fn number(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

fn sum(value: &Value) -> u64 {
    match value {
        Value::Array(values) => values.iter().map(number).sum(),
        Value::Object(values) => values.values().map(number).sum(),
        other => number(other),
    }
}

fn up(flag: bool) -> &'static str {
    if flag {
        "up"
    } else {
        "down"
    }
}

/// A speed in Mb/s as SONiC prints it: 100G, 25G, 1G, 100M.
fn speed(mbps: u64) -> String {
    if mbps >= 1000 && mbps / 1000 * 1000 == mbps {
        format!("{}G", mbps / 1000)
    } else {
        format!("{mbps}M")
    }
}

/// A rate in bits per second: 1.23 Gb/s, 512.00 Mb/s, 8.00 Kb/s, 0.00 b/s.
fn bit_rate(bits_per_second: f64) -> String {
    for (unit, scale) in [("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("Kb/s", 1e3)] {
        if bits_per_second >= scale {
            return format!("{:.2} {unit}", bits_per_second / scale);
        }
    }
    format!("{bits_per_second:.2} b/s")
}

/// The ports of a `state` document: (name, its interface entry, its stats).
fn ports(state: &Value) -> Vec<(String, &Value, &Value)> {
    let interfaces = state["interfaces"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    interfaces
        .iter()
        .map(|interface| {
            let name = interface["name"].as_str().unwrap_or("?").to_string();
            let stats = &state["stats"]["ports"][name.as_str()];
            (name, interface, stats)
        })
        .collect()
}

fn oper(interface: &Value) -> &'static str {
    let usable = interface["carrier"].as_bool().unwrap_or(false)
        && interface["admin_up"].as_bool().unwrap_or(false)
        && interface["enabled"].as_bool().unwrap_or(false);
    up(usable)
}

/// `show interfaces`: status, speed, MTU, addresses, carrier.
pub fn interfaces(state: &Value) -> Vec<Table> {
    let mut table = Table::new("", &["Interface", "Admin", "Oper", "Carrier", "Speed", "MTU", "Addresses", "Device"]);
    for (name, interface, _) in ports(state) {
        let admin = if interface["enabled"].as_bool() == Some(false) {
            "disabled"
        } else {
            up(interface["admin_up"].as_bool().unwrap_or(false))
        };
        let addresses: Vec<&str> =
            interface["addresses"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        table.rows.push(vec![
            name,
            admin.to_string(),
            oper(interface).to_string(),
            up(interface["carrier"].as_bool().unwrap_or(false)).to_string(),
            speed(number(&interface["speed_mbps"])),
            number(&interface["mtu"]).to_string(),
            if addresses.is_empty() { "-".to_string() } else { addresses.join(",") },
            interface["device"].as_str().unwrap_or("").to_string(),
        ]);
    }
    vec![table]
}

/// `show counters`: totals, rates over `period` between `before` and `after`, drops; then the
/// drops by reason that are not zero.
pub fn counters(before: &Value, after: &Value, period: Duration) -> Vec<Table> {
    let seconds = period.as_secs_f64().max(1e-9);
    let mut table = Table::new(
        "",
        &[
            "IFACE", "STATE", "RX_OK", "RX_BPS", "RX_PPS", "RX_UTIL", "RX_DRP", "TX_OK", "TX_BPS", "TX_PPS", "TX_UTIL",
            "TX_DRP",
        ],
    );
    let mut reasons =
        Table::new("Drops by reason (charged to the port a frame came in on):", &["IFACE", "REASON", "DROPS"]);
    for ((name, interface, now), (_, _, then)) in ports(after).into_iter().zip(ports(before)) {
        let delta = |key: &str| number(&now[key]).saturating_sub(number(&then[key])) as f64 / seconds;
        let link_bps = number(&interface["speed_mbps"]) as f64 * 1e6;
        let util = |bits: f64| if link_bps > 0.0 { format!("{:.2}%", 100.0 * bits / link_bps) } else { "-".into() };
        let (rx_bps, tx_bps) = (8.0 * delta("rx_bytes"), 8.0 * delta("tx_bytes"));
        let tx_drops: u64 = now["queues"].as_array().into_iter().flatten().map(|queue| number(&queue["dropped"])).sum();
        table.rows.push(vec![
            name.clone(),
            if oper(interface) == "up" { "U".into() } else { "D".into() },
            number(&now["rx_packets"]).to_string(),
            bit_rate(rx_bps),
            format!("{:.0}/s", delta("rx_packets")),
            util(rx_bps),
            sum(&now["drops"]).to_string(),
            number(&now["tx_packets"]).to_string(),
            bit_rate(tx_bps),
            format!("{:.0}/s", delta("tx_packets")),
            util(tx_bps),
            tx_drops.to_string(),
        ]);
        for reason in DropReason::ALL {
            let count = number(&now["drops"][reason.name()]);
            if count > 0 {
                reasons.rows.push(vec![name.clone(), reason.name().to_string(), count.to_string()]);
            }
        }
    }
    vec![table, reasons]
}

/// `show pfc`: PFC frames received and sent per priority (as `show pfc counters`), the time
/// the peers' pauses held each egress queue, and the watchdog per queue a pause has held.
pub fn pfc(state: &Value) -> Vec<Table> {
    let priorities: Vec<String> = (0..8).map(|p| format!("PFC{p}")).collect();
    let columns =
        |first: &str| -> Vec<String> { std::iter::once(first.to_string()).chain(priorities.clone()).collect() };
    let mut rx = Table { title: String::new(), columns: columns("Port Rx"), rows: Vec::new() };
    let mut tx = Table { title: String::new(), columns: columns("Port Tx"), rows: Vec::new() };
    let queues: Vec<String> = std::iter::once("Port".to_string()).chain((0..8).map(|q| format!("UC{q}"))).collect();
    let mut paused = Table { title: "Paused by the peer, ms:".into(), columns: queues, rows: Vec::new() };
    let mut watchdog = Table::new("PFC watchdog:", &["Port", "Queue", "Status", "Storms", "Restorations"]);
    for (name, _, stats) in ports(state) {
        let per = |key: &str, index: usize| number(&stats[key][index]);
        rx.rows.push(std::iter::once(name.clone()).chain((0..8).map(|p| per("pfc_rx", p).to_string())).collect());
        tx.rows.push(
            std::iter::once(name.clone())
                .chain((0..8).map(|p| (per("pfc_xoff_tx", p) + per("pfc_xon_tx", p)).to_string()))
                .collect(),
        );
        paused.rows.push(
            std::iter::once(name.clone())
                .chain((0..8).map(|p| format!("{:.3}", per("pfc_rx_pause_ns", p) as f64 / 1e6)))
                .collect(),
        );
        for queue in state["pfc_queues"].as_array().into_iter().flatten().map(|queue| number(queue) as usize) {
            let storms = number(&stats["pfc_watchdog"]["storms"][queue]);
            let restorations = number(&stats["pfc_watchdog"]["restorations"][queue]);
            let status = if storms > restorations { "stormed" } else { "operational" };
            watchdog.rows.push(vec![
                name.clone(),
                format!("UC{queue}"),
                status.to_string(),
                storms.to_string(),
                restorations.to_string(),
            ]);
        }
    }
    vec![rx, tx, paused, watchdog]
}

/// `show queues`: per port and traffic class, as `show queue counters` (with SONiC's trim
/// columns: trimmed, trimmed then dropped, trimmed sent), with depth and watermark.
pub fn queues(state: &Value) -> Vec<Table> {
    let mut table = Table::new(
        "",
        &[
            "Port",
            "TxQ",
            "Counter/pkts",
            "Counter/bytes",
            "Drop/pkts",
            "ECN marked",
            "Trim/pkts",
            "TrimDrop/pkts",
            "TrimTx/pkts",
            "Depth/bytes",
            "Watermark/bytes",
        ],
    );
    for (name, _, stats) in ports(state) {
        for (tc, queue) in stats["queues"].as_array().into_iter().flatten().enumerate() {
            table.rows.push(vec![
                name.clone(),
                format!("UC{tc}"),
                number(&queue["tx_packets"]).to_string(),
                number(&queue["tx_bytes"]).to_string(),
                number(&queue["dropped"]).to_string(),
                number(&queue["ecn_marked"]).to_string(),
                number(&queue["trimmed"]).to_string(),
                number(&queue["trim_dropped"]).to_string(),
                number(&queue["trim_tx"]).to_string(),
                number(&queue["depth_bytes"]).to_string(),
                number(&queue["watermark_bytes"]).to_string(),
            ]);
        }
    }
    vec![table]
}

/// `show acl`: each table's rules best first, with what they matched (SONiC's `aclshow`:
/// table, rule, packets, bytes), from the stats JSON's `acl`.
pub fn acl(state: &Value) -> Vec<Table> {
    let mut table = Table::new("", &["Table", "Stage", "Priority", "Match", "Action", "Packets", "Bytes"]);
    for (name, body) in state["stats"]["acl"].as_object().into_iter().flatten() {
        for rule in body["rules"].as_array().into_iter().flatten() {
            table.rows.push(vec![
                name.clone(),
                body["stage"].as_str().unwrap_or("?").to_string(),
                number(&rule["priority"]).to_string(),
                rule["match"].as_str().unwrap_or("?").to_string(),
                rule["action"].as_str().unwrap_or("?").to_string(),
                number(&rule["packets"]).to_string(),
                number(&rule["bytes"]).to_string(),
            ]);
        }
    }
    vec![table]
}

/// `show sflow`: SONiC's `show sflow` and `show sflow interface`: the collector, the agent,
/// the polling interval and what the exporter sent; then each port's sampling rate.
pub fn sflow(state: &Value) -> Vec<Table> {
    let sflow = &state["sflow"];
    if sflow.is_null() {
        return vec![Table::new("sFlow is off (no [sflow] in the running config)", &["Collector"])];
    }
    let text = |value: &Value| value.as_str().map_or_else(|| number(value).to_string(), str::to_string);
    let mut global = Table::new(
        "",
        &["Collector", "Agent", "Polling/s", "Header/bytes", "Datagrams", "SendFailures", "SamplesLost"],
    );
    global.rows.push(
        ["collector", "agent", "polling_interval_s", "header_bytes", "datagrams_sent", "send_failures", "samples_lost"]
            .iter()
            .map(|key| text(&sflow[key]))
            .collect(),
    );
    let mut ports = Table::new("", &["Interface", "SampleRate"]);
    for (port, rate) in sflow["rates"].as_object().into_iter().flatten() {
        ports.rows.push(vec![port.clone(), number(rate).to_string()]);
    }
    vec![global, ports]
}

/// `show watermarks`: queue watermarks (SONiC's `show queue watermark unicast`), then the
/// priority groups' shared and headroom watermarks (`show priority-group watermark shared`,
/// `headroom`); since the last clear, or the persistent ones.
pub fn watermarks(state: &Value, persistent: bool) -> Vec<Table> {
    let kind = if persistent { "persistent" } else { "since the last clear" };
    let classes: Vec<String> =
        std::iter::once("Port".to_string()).chain((0..TRAFFIC_CLASSES).map(|tc| format!("UC{tc}"))).collect();
    let groups: Vec<String> = std::iter::once("Port".to_string()).chain((0..8).map(|p| format!("PG{p}"))).collect();
    let mut queue =
        Table { title: format!("Queue watermarks, frame bytes ({kind}):"), columns: classes.clone(), rows: Vec::new() };
    // What ECN compares by default and an ASIC's queue watermark counts.
    let mut queue_cells =
        Table { title: format!("Queue watermarks, cell bytes ({kind}):"), columns: classes, rows: Vec::new() };
    let mut shared = Table {
        title: format!("Priority-group shared pool watermarks, cell bytes ({kind}):"),
        columns: groups.clone(),
        rows: Vec::new(),
    };
    let mut headroom = Table {
        title: format!("Priority-group headroom watermarks, cell bytes ({kind}):"),
        columns: groups,
        rows: Vec::new(),
    };
    let (queue_key, queue_cells_key, shared_key, headroom_key) = if persistent {
        ("max_depth_bytes", "max_depth_cell_bytes", "max_shared_bytes", "max_headroom_bytes")
    } else {
        ("watermark_bytes", "watermark_cell_bytes", "watermark_shared_bytes", "watermark_headroom_bytes")
    };
    for (name, _, stats) in ports(state) {
        let queues = stats["queues"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let row = |key: &str| -> Vec<String> {
            std::iter::once(name.clone()).chain(queues.iter().map(|q| number(&q[key]).to_string())).collect()
        };
        queue.rows.push(row(queue_key));
        queue_cells.rows.push(row(queue_cells_key));
        let mut shared_row = vec![name.clone()];
        let mut headroom_row = vec![name.clone()];
        for pg in 0..8u64 {
            let group = stats["priority_groups"].as_array().into_iter().flatten().find(|g| number(&g["pg"]) == pg);
            // Lossy groups hold no lossless frames: nothing to watermark.
            let cell = |key: &str| group.map_or("-".to_string(), |g| number(&g[key]).to_string());
            shared_row.push(cell(shared_key));
            headroom_row.push(cell(headroom_key));
        }
        shared.rows.push(shared_row);
        headroom.rows.push(headroom_row);
    }
    vec![queue, queue_cells, shared, headroom]
}

/// What waits behind a route in force: "1 route of metric 0 (appended), 2 of other keys".
fn behind(behind: &Value) -> String {
    let count = |key: &str| behind[key].as_u64().unwrap_or(0);
    if behind.is_null() {
        return "-".to_string();
    }
    let plural = |n: u64| if n == 1 { "route" } else { "routes" };
    let mut parts = Vec::new();
    if count("aliases") > 0 {
        let aliases = count("aliases");
        parts.push(format!("{aliases} more {} of metric {}", plural(aliases), count("metric")));
    }
    if count("others") > 0 {
        let others = count("others");
        parts.push(format!("{others} {} of other metrics or tables", plural(others)));
    }
    parts.join(", ")
}

/// `show route ADDR...`: the answers as a table, one row per address.
pub fn route_table(answers: &[Value]) -> Table {
    let mut table = Table::new("", &["Address", "Prefix", "Action", "Reason", "Next hops", "Behind it"]);
    let text = |value: &Value| value.as_str().unwrap_or("-").to_string();
    for answer in answers {
        let hops: Vec<String> = answer["next_hops"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|hop| {
                let weight = hop["weight"].as_u64().unwrap_or(1);
                let weight = if weight == 1 { String::new() } else { format!(" weight {weight}") };
                format!("{} via {} {}{weight}", text(&hop["port"]), text(&hop["ip"]), text(&hop["mac"]))
            })
            .collect();
        table.rows.push(vec![
            text(&answer["address"]),
            text(&answer["prefix"]),
            text(&answer["action"]),
            text(&answer["reason"]),
            if hops.is_empty() { "-".to_string() } else { hops.join(", ") },
            behind(&answer["behind"]),
        ]);
    }
    table
}

/// `show neighbors`: the neighbours the FIB resolves next hops with.
pub fn neighbors(fib: &Value) -> Vec<Table> {
    let mut table = Table::new("", &["Address", "Port", "MAC"]);
    for line in fib["fib"].as_str().unwrap_or("").lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some("neighbor") {
            let cells: Vec<String> = words.map(str::to_string).collect();
            if cells.len() == 3 {
                table.rows.push(cells);
            }
        }
    }
    vec![table]
}

/// Prints `tables` as text, or as one JSON object (`--json`): a table's rows under its key
/// (`view` for the first, then its title's first word in lower case... see `json_key`).
pub fn print(view: &str, tables: &[Table], as_json: bool) -> String {
    if as_json {
        let mut object = Map::new();
        for (index, table) in tables.iter().enumerate() {
            object.insert(json_key(view, index), table.to_json());
        }
        return serde_json::to_string_pretty(&Value::Object(object)).expect("json") + "\n";
    }
    tables.iter().map(Table::render).collect::<Vec<_>>().join("\n")
}

/// The key of a view's `index`th table in `--json` output.
pub fn json_key(view: &str, index: usize) -> String {
    let names: &[&str] = match view {
        "counters" => &["counters", "drops"],
        "pfc" => &["rx", "tx", "paused_ms", "watchdog"],
        "watermarks" => &["queues", "queue_cells", "priority_groups_shared", "priority_groups_headroom"],
        _ => &[],
    };
    names.get(index).map_or_else(|| view.to_string(), |name| name.to_string())
}

/// `run`'s error when the reader of its output went away (`| head`): not a failure.
pub const READER_GONE: &str = "show: the reader of the output went away";

/// A failed write of `show`'s output as its error: `READER_GONE` for a closed pipe.
pub fn write_error(err: std::io::Error) -> String {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        READER_GONE.to_string()
    } else {
        format!("show: {err}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> Value {
        let port = |name: &str, carrier: bool| {
            json!({ "name": name, "device": "net_null0", "speed_mbps": 100000, "mtu": 1500, "enabled": true,
                    "admin_up": true, "carrier": carrier, "addresses": ["10.0.0.1/24"] })
        };
        let stats = |rx: u64, bytes: u64| {
            json!({ "rx_packets": rx, "rx_bytes": bytes, "tx_packets": 0, "tx_bytes": 0,
                    "drops": { "no_route": 2, "link_down": 0 },
                    "pfc_rx": [0, 0, 0, 5, 0, 0, 0, 0], "pfc_xoff_tx": [0, 0, 0, 1, 0, 0, 0, 0],
                    "pfc_xon_tx": [0, 0, 0, 1, 0, 0, 0, 0], "pfc_rx_pause_ns": [0, 0, 0, 2_500_000, 0, 0, 0, 0],
                    "pfc_watchdog": { "storms": [0, 0, 0, 1, 0, 0, 0, 0], "restorations": [0, 0, 0, 0, 0, 0, 0, 0] },
                    "queues": (0..8).map(|tc| json!({ "tc": tc, "tx_packets": tc, "tx_bytes": 0, "dropped": 1,
                        "ecn_marked": 0, "trimmed": 2 * tc, "trim_dropped": tc, "trim_tx": 0, "depth_bytes": 0, "max_depth_bytes": 900, "watermark_bytes": 300,
                        "max_depth_cell_bytes": 3840, "watermark_cell_bytes": 1280 })).collect::<Vec<_>>(),
                    "priority_groups": [{ "pg": 3, "max_bytes": 0, "max_headroom_bytes": 512,
                        "max_shared_bytes": 4096, "watermark_bytes": 0, "watermark_headroom_bytes": 256,
                        "watermark_shared_bytes": 1024 }] })
        };
        json!({ "switch": "t", "interfaces": [port("p0", true), port("p1", false)], "pfc_queues": [3],
                "stats": { "ports": { "p0": stats(1000, 1_000_000), "p1": stats(0, 0) },
                           "acl": { "edge": { "stage": "ingress", "rules": [
                               { "priority": 20, "match": "udp dport 4791", "action": "drop", "packets": 7, "bytes": 448 },
                               { "priority": 10, "match": "any", "action": "permit", "packets": 1, "bytes": 64 }] } } } })
    }

    #[test]
    fn tables_read_the_stats_as_they_are() {
        let state = state();
        let interfaces = &interfaces(&state)[0];
        assert_eq!(interfaces.rows[0][..6], ["p0", "up", "up", "up", "100G", "1500"]);
        assert_eq!(interfaces.rows[1][..4], ["p1", "up", "down", "down"], "no carrier: operationally down");
        let mut later = state.clone();
        later["stats"]["ports"]["p0"]["rx_packets"] = json!(3000);
        later["stats"]["ports"]["p0"]["rx_bytes"] = json!(1_250_000);
        let counters = counters(&state, &later, Duration::from_secs(2));
        assert_eq!(counters[0].rows[0][2], "3000");
        assert_eq!(counters[0].rows[0][3], "1.00 Mb/s", "250,000 bytes in 2 s");
        assert_eq!(counters[0].rows[0][4], "1000/s");
        assert_eq!(counters[0].rows[0][6], "2", "rx drops");
        assert_eq!(counters[0].rows[0][11], "8", "one refused by each of eight queues");
        assert_eq!(counters[1].rows[0], ["p0", "no_route", "2"], "non-zero reasons only");
        let pfc = pfc(&state);
        assert_eq!(pfc[0].rows[0][4], "5", "PFC3 received");
        assert_eq!(pfc[1].rows[0][4], "2", "XOFF and XON sent");
        assert_eq!(pfc[2].rows[0][4], "2.500", "2.5 ms paused");
        assert_eq!(pfc[3].rows[0], ["p0", "UC3", "stormed", "1", "0"]);
        let queue_table = &queues(&state)[0];
        assert_eq!(queue_table.rows[3][..3], ["p0", "UC3", "3"]);
        assert_eq!(queue_table.rows[3][6..11], ["6", "3", "0", "0", "300"]);
        let acl = &acl(&state)[0];
        assert_eq!(acl.rows[0], ["edge", "ingress", "20", "udp dport 4791", "drop", "7", "448"]);
        assert_eq!(acl.rows[1][2..], ["10", "any", "permit", "1", "64"]);
        let user = watermarks(&state, false);
        assert_eq!(user[0].rows[0][4], "300");
        assert_eq!(user[1].rows[0][4], "1280", "the same queue in cell bytes");
        assert_eq!(user[2].rows[0][4], "1024");
        assert_eq!(user[3].rows[0][4], "256");
        assert_eq!(user[2].rows[0][1], "-", "a lossy priority has no group");
        let persistent = watermarks(&state, true);
        let row = |table: usize| persistent[table].rows[0][4].as_str();
        assert_eq!((row(0), row(1), row(2), row(3)), ("900", "3840", "4096", "512"));
        // --json: numbers stay numbers, keys are the columns.
        let json = queues(&state)[0].to_json();
        assert_eq!(json[3]["counter_pkts"], 3);
        assert_eq!(json[3]["txq"], "UC3");
        assert_eq!(json[3]["trimdrop_pkts"], 3);
        let json = counters[0].to_json();
        assert_eq!(json[0]["rx_bps"], 1e6);
        assert_eq!(json[0]["rx_pps"], 1000.0);
        assert_eq!(json[0]["rx_util"], 0.0);
        assert_eq!(pfc[2].to_json()[0]["uc3"], 2.5);
        let text = Table::render(&interfaces.clone());
        assert!(text.lines().nth(1).unwrap().starts_with("---"), "{text}");
    }

    #[test]
    fn a_closed_pipe_is_the_reader_gone_and_other_write_errors_are_said() {
        assert_eq!(write_error(std::io::ErrorKind::BrokenPipe.into()), READER_GONE);
        let other = write_error(std::io::Error::other("disk full"));
        assert!(other.starts_with("show: ") && other.contains("disk full"), "{other}");
    }

    #[test]
    fn neighbours_come_from_the_fib_dump() {
        let fib = json!({ "fib": "# raceway FIB generation 3: 2 routes, 1 neighbours\n10.0.1.0/24 connected p1\n\
            10.200.0.0/24 group ecmp up0 02:00:00:00:20:01 up1 02:00:00:00:21:01\nneighbor 10.0.1.2 p1 02:00:00:00:11:00\n" });
        assert_eq!(neighbors(&fib)[0].rows, [["10.0.1.2", "p1", "02:00:00:00:11:00"]]);
    }
}
