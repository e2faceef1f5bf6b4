//! The Prometheus endpoint of a live switch (`run --metrics ADDR`): the counters of the stats
//! JSON in the text exposition format, served over plain HTTP from a thread of its own.
//!
//! Invariant: every value comes from one published snapshot (`SwitchStats`), the same numbers
//! the stats JSON is made of, so a scrape and the JSON agree; names follow Prometheus
//! conventions (`raceway_` prefix, base units, `_total` on counters, labels for port, class,
//! priority, reason, group and member). The server never touches the workers: it only reads
//! the snapshot, and a slow or broken client cannot stall anything but this thread.

use crate::config::Config;
use crate::counters::{
    ControlValue, Counter, PortStats, SwitchStats, CONTROL_COUNTERS, CORE_COUNTERS, GROUP_COUNTERS, PORT_COUNTERS,
    QUEUE_COUNTERS,
};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `PORT` or `HOST:PORT` (IPv6 hosts in brackets); a bare port binds 127.0.0.1, so the
/// endpoint is local unless an address is given.
pub fn parse_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse::<SocketAddr>().map_err(|_| format!("--metrics: '{text}' is not PORT or HOST:PORT"))
}

/// Writes one metric family: its HELP and TYPE lines, then one sample per (labels, value).
fn family<V: std::fmt::Display>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (String, V)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The samples of one schema row for an owner labelled `owner` (e.g. `port="p0",tc="3"`).
fn row_samples<S>(row: &Counter<S>, owner: &str, stats: &S) -> Vec<(String, u64)> {
    let values = (row.get)(stats);
    match row.labels.each() {
        None => vec![(owner.to_string(), values[0])],
        Some((name, labels)) => labels
            .iter()
            .zip(values)
            .map(|(value_label, &value)| (format!("{owner},{name}=\"{value_label}\""), value))
            .collect(),
    }
}

/// Bounds of the latency histogram's buckets: 2^k - 1 ns for k = 6..=30 (63 ns to ~1.07 s).
const LATENCY_BUCKET_BITS: std::ops::RangeInclusive<u32> = 6..=30;

/// The exposition of `stats` (names from `config`), every family from the schema in `stats`.
pub fn render(stats: &SwitchStats, config: &Config) -> String {
    let mut out = String::new();
    let ports: Vec<(String, &PortStats)> =
        config.ports.iter().zip(&stats.ports).map(|(port, s)| (format!("port=\"{}\"", label(&port.name)), s)).collect();
    for row in &PORT_COUNTERS {
        let samples = ports.iter().flat_map(|(owner, s)| row_samples(row, owner, s));
        if row.json.ends_with("_ns") {
            // Prometheus's base unit is the second.
            let seconds = samples.map(|(labels, ns)| (labels, ns as f64 / 1e9));
            family(&mut out, row.metric, row.kind.prometheus(), row.help, seconds);
        } else {
            family(&mut out, row.metric, row.kind.prometheus(), row.help, samples);
        }
    }
    for row in &QUEUE_COUNTERS {
        let samples = ports.iter().flat_map(|(owner, s)| {
            s.queues
                .iter()
                .enumerate()
                .flat_map(move |(tc, queue)| row_samples(row, &format!("{owner},tc=\"{tc}\""), queue))
        });
        family(&mut out, row.metric, row.kind.prometheus(), row.help, samples);
    }
    let lossless: Vec<usize> = (0..8).filter(|&pg| config.qos.pg_lossless(pg)).collect();
    for row in &GROUP_COUNTERS {
        let samples = ports.iter().flat_map(|(owner, s)| {
            lossless
                .iter()
                .flat_map(move |&pg| row_samples(row, &format!("{owner},pg=\"{pg}\""), &s.priority_groups[pg]))
        });
        family(&mut out, row.metric, row.kind.prometheus(), row.help, samples);
    }
    family(
        &mut out,
        "raceway_group_member_packets_total",
        "counter",
        "Frames queued to each member of a group (the config's, or one of next hops).",
        stats.group_counts(config).into_iter().flat_map(|(group, counts)| {
            counts.into_iter().map(move |(member, count)| {
                (format!("group=\"{}\",member=\"{}\"", label(&group), label(&member)), count)
            })
        }),
    );
    for (metric, help, value) in [
        ("raceway_acl_rule_packets_total", "Frames each ACL rule matched, whatever its action.", 0),
        ("raceway_acl_rule_bytes_total", "Bytes of the frames each ACL rule matched.", 1),
    ] {
        family(
            &mut out,
            metric,
            "counter",
            help,
            config.acls.iter().zip(&stats.acl).flat_map(|(table, counts)| {
                table.rules.iter().zip(counts).map(move |(rule, counts)| {
                    let labels = format!("table=\"{}\",priority=\"{}\"", label(&table.name), rule.priority);
                    (labels, if value == 0 { counts.packets } else { counts.bytes })
                })
            }),
        );
    }
    family(
        &mut out,
        "raceway_flowlet_collisions_total",
        "counter",
        "Frames a flowlet group placed by a flowset another flow had opened.",
        std::iter::once((String::new(), stats.flowlet_collisions)),
    );
    if let Some(control) = &stats.control {
        for row in &CONTROL_COUNTERS {
            let samples: Vec<(String, f64)> = match row.value {
                ControlValue::PerPort(get) => {
                    ports.iter().zip(get(control)).map(|((owner, _), &value)| (owner.clone(), value as f64)).collect()
                }
                ControlValue::PerReason(get) => crate::counters::route_reasons()
                    .enumerate()
                    .map(|(index, reason)| {
                        (format!("reason=\"{reason}\""), get(control).get(index).copied().unwrap_or(0) as f64)
                    })
                    .collect(),
                ControlValue::One(get) => vec![(String::new(), get(control) as f64)],
                ControlValue::Nanoseconds(get) => vec![(String::new(), get(control) as f64 / 1e9)],
            };
            family(&mut out, row.metric, row.kind.prometheus(), row.help, samples);
        }
    }
    for row in &CORE_COUNTERS {
        let samples = stats.cores.iter().flat_map(|core| row_samples(row, &format!("lcore=\"{}\"", core.lcore), core));
        family(&mut out, row.metric, row.kind.prometheus(), row.help, samples);
    }
    // Latency as a Prometheus histogram in seconds: cumulative buckets at exact bucket
    // boundaries of the switch's own histogram, then +Inf, the sum and the count.
    let name = "raceway_latency_seconds";
    let _ = writeln!(out, "# HELP {name} Switch latency, from a frame's arrival to its hand-off to transmit.");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (bound_ns, count) in stats.latency.cumulative_below_powers_of_two(LATENCY_BUCKET_BITS) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {count}", bound_ns as f64 / 1e9);
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", stats.latency.samples);
    let _ = writeln!(out, "{name}_sum {}", stats.latency.sum_ns as f64 / 1e9);
    let _ = writeln!(out, "{name}_count {}", stats.latency.samples);
    out
}

/// Answers one HTTP request: `GET /metrics` gets the exposition, anything else a 404.
fn answer(mut stream: TcpStream, body: impl FnOnce() -> String) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut request = [0u8; 2048];
    let mut filled = 0;
    // Read until the end of the request line (the headers do not matter).
    while filled < request.len() {
        match stream.read(&mut request[filled..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => filled += n,
        }
        if request[..filled].windows(2).any(|w| w == b"\r\n") {
            break;
        }
    }
    let line = String::from_utf8_lossy(&request[..filled]);
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (status, content_type, body) =
        if line.starts_with("GET ") && (path == "/metrics" || path.starts_with("/metrics?")) {
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body())
        } else {
            ("404 Not Found", "text/plain; charset=utf-8", "raceway serves /metrics\n".to_string())
        };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Serves `/metrics` on `listener` until `stop` is set; `body` renders the current snapshot.
pub fn serve(listener: &TcpListener, stop: &AtomicBool, body: impl Fn() -> String) {
    if listener.set_nonblocking(true).is_err() {
        tracing::warn!("metrics endpoint: cannot poll its socket; not serving");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                answer(stream, &body);
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(err) => {
                tracing::debug!("metrics endpoint: accept failed: {err}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{ControlStats, CoreStats};
    use crate::drops::DropReason;

    const CONFIG: &str = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[qos]\nlossless = [3]\n\
        [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n\
        [[port]]\nname = \"p1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:03\"\n\
        [[group]]\nname = \"g\"\nports = [\"p0\", \"p1\"]\n\
        [[acl]]\nname = \"edge\"\nports = [\"p0\"]\n[[acl.rule]]\npriority = 7\nprotocol = \"udp\"\naction = \"drop\"\n";

    #[test]
    fn exposition_names_and_values() {
        let config = Config::parse(CONFIG, "t.toml").unwrap();
        let mut stats = SwitchStats::new(&config);
        stats.ports[1].rx_packets = 42;
        stats.ports[0].drops[DropReason::BufferFull.index()] = 3;
        stats.ports[0].pfc_xoff_tx[3] = 5;
        stats.ports[1].queues[3].depth_bytes = 1500;
        stats.groups[0][1] = 9;
        stats.acl[0][0] = crate::counters::AclRuleStats { packets: 4, bytes: 256 };
        let text = render(&stats, &config);
        for line in [
            "raceway_port_rx_packets_total{port=\"p1\"} 42",
            "raceway_port_drops_total{port=\"p0\",reason=\"buffer_full\"} 3",
            "raceway_pfc_xoff_sent_total{port=\"p0\",priority=\"3\"} 5",
            "raceway_queue_depth_bytes{port=\"p1\",tc=\"3\"} 1500",
            "raceway_group_member_packets_total{group=\"g\",member=\"p1\"} 9",
            "raceway_acl_rule_packets_total{table=\"edge\",priority=\"7\"} 4",
            "raceway_acl_rule_bytes_total{table=\"edge\",priority=\"7\"} 256",
            "raceway_priority_group_max_bytes{port=\"p0\",pg=\"3\"} 0",
            "# TYPE raceway_queue_depth_bytes gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing: {line}");
        }
        // Lossy priorities have no priority-group series.
        assert!(!text.contains("raceway_priority_group_max_bytes{port=\"p0\",pg=\"0\"}"));
        // Every sample line is `name{labels} value` with a number.
        for sample in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = sample.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{sample}");
        }
    }

    /// Every counter, the control plane's and the cores' included, with latency samples:
    /// Prometheus's own linter accepts the exposition (base units, a real histogram, `_total`
    /// on counters only).
    #[test]
    fn promtool_accepts_the_whole_exposition() {
        let config = Config::parse(CONFIG, "t.toml").unwrap();
        let mut stats = SwitchStats::new(&config);
        stats.cores.push(CoreStats { lcore: 1, packets: 10, busy_cycles: 2_000, idle_cycles: 50 });
        stats.control = Some(ControlStats {
            punt_tap_errors: vec![0, 1],
            inject_dropped: vec![2, 0],
            fib_generation: 3,
            fib_routes: 4,
            fib_neighbors: 5,
            last_update_ns: 30_000,
            fib_resyncs: 1,
            ..ControlStats::default()
        });
        for ns in [70, 900, 1_500, 40_000] {
            stats.latency.record(ns);
        }
        let text = render(&stats, &config);
        for line in [
            "raceway_latency_seconds_bucket{le=\"0.000001023\"} 2",
            "raceway_latency_seconds_bucket{le=\"+Inf\"} 4",
            "raceway_latency_seconds_count 4",
            "raceway_fib_last_update_seconds 0.00003",
            "raceway_control_inject_dropped_total{port=\"p0\"} 2",
            "raceway_core_busy_cycles_total{lcore=\"1\"} 2000",
        ] {
            assert!(text.lines().any(|l| l == line), "missing: {line}\n{text}");
        }
        crate::testing::promtool_check(&text).unwrap_or_else(|said| panic!("promtool check metrics: {said}"));
    }

    #[test]
    fn addresses_default_to_localhost() {
        assert_eq!(parse_address("9464").unwrap(), "127.0.0.1:9464".parse().unwrap());
        assert_eq!(parse_address("0.0.0.0:9000").unwrap(), "0.0.0.0:9000".parse().unwrap());
        assert_eq!(parse_address("[::1]:9000").unwrap(), "[::1]:9000".parse().unwrap());
        assert!(parse_address("localhost").unwrap_err().contains("--metrics"));
    }

    #[test]
    fn serves_metrics_and_404s_other_paths() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| serve(&listener, &stop, || "raceway_up 1\n".to_string()));
            let get = |path: &str| {
                let mut stream = TcpStream::connect(address).unwrap();
                write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut response = String::new();
                stream.read_to_string(&mut response).unwrap();
                response
            };
            let ok = get("/metrics");
            assert!(ok.starts_with("HTTP/1.1 200 OK") && ok.ends_with("\r\n\r\nraceway_up 1\n"), "{ok}");
            assert!(get("/").starts_with("HTTP/1.1 404"));
            stop.store(true, Ordering::Relaxed);
        });
    }
}
