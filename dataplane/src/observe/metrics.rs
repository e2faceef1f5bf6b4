//! The Prometheus endpoint of a live switch (`run --metrics ADDR`): the counters of the stats
//! JSON in the text exposition format, served over plain HTTP from a thread of its own.
//!
//! Invariant: every value comes from one published snapshot (`SwitchStats`), the same numbers
//! the stats JSON is made of, so a scrape and the JSON agree; names follow Prometheus
//! conventions (`raceway_` prefix, base units, `_total` on counters, labels for port, class,
//! priority, reason, group and member). The server never touches the workers: it only reads
//! the snapshot, and a slow or broken client cannot stall anything but this thread.

#![forbid(unsafe_code)]

use crate::config::{Config, TRAFFIC_CLASSES};
use crate::drops::DropReason;
use crate::observe::stats::SwitchStats;
use crate::pipeline::punt::PuntReason;
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
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: impl IntoIterator<Item = (String, u64)>) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The exposition of `stats` (names from `config`).
pub fn render(stats: &SwitchStats, config: &Config) -> String {
    let mut out = String::new();
    let ports: Vec<(String, &crate::observe::stats::PortStats)> =
        config.ports.iter().zip(&stats.ports).map(|(port, s)| (format!("port=\"{}\"", label(&port.name)), s)).collect();
    let per_port = |get: fn(&crate::observe::stats::PortStats) -> u64| -> Vec<(String, u64)> {
        ports.iter().map(|(labels, s)| (labels.clone(), get(s))).collect()
    };
    family(&mut out, "raceway_port_rx_packets_total", "counter", "Data frames received.", per_port(|s| s.rx_packets));
    family(
        &mut out,
        "raceway_port_rx_bytes_total",
        "counter",
        "Bytes of data frames received.",
        per_port(|s| s.rx_bytes),
    );
    family(&mut out, "raceway_port_tx_packets_total", "counter", "Data frames sent.", per_port(|s| s.tx_packets));
    family(&mut out, "raceway_port_tx_bytes_total", "counter", "Bytes of data frames sent.", per_port(|s| s.tx_bytes));
    family(
        &mut out,
        "raceway_port_drops_total",
        "counter",
        "Frames dropped, charged to the port they came in on, by reason.",
        ports.iter().flat_map(|(labels, s)| {
            DropReason::ALL
                .iter()
                .map(move |reason| (format!("{labels},reason=\"{}\"", reason.name()), s.drops[reason.index()]))
        }),
    );
    family(
        &mut out,
        "raceway_port_punted_total",
        "counter",
        "Frames handed to the control plane, by the port they came in on and reason.",
        ports.iter().flat_map(|(labels, s)| {
            PuntReason::ALL
                .iter()
                .map(move |reason| (format!("{labels},reason=\"{}\"", reason.name()), s.punted[reason.index()]))
        }),
    );
    let per_priority = |get: fn(&crate::observe::stats::PortStats) -> &[u64; 8]| -> Vec<(String, u64)> {
        ports
            .iter()
            .flat_map(|(labels, s)| {
                get(s).iter().enumerate().map(move |(p, &v)| (format!("{labels},priority=\"{p}\""), v))
            })
            .collect()
    };
    family(
        &mut out,
        "raceway_pfc_xoff_sent_total",
        "counter",
        "PFC XOFF frames sent, per priority.",
        per_priority(|s| &s.pfc_xoff_tx),
    );
    family(
        &mut out,
        "raceway_pfc_xon_sent_total",
        "counter",
        "PFC XON frames sent, per priority.",
        per_priority(|s| &s.pfc_xon_tx),
    );
    family(
        &mut out,
        "raceway_pfc_received_total",
        "counter",
        "PFC frames received, once per enabled priority.",
        per_priority(|s| &s.pfc_rx),
    );
    family(
        &mut out,
        "raceway_pfc_watchdog_storms_total",
        "counter",
        "PFC storms the watchdog detected on the egress port, per priority.",
        per_priority(|s| &s.watchdog_storms),
    );
    family(
        &mut out,
        "raceway_pfc_watchdog_restorations_total",
        "counter",
        "PFC watchdog restorations, per priority.",
        per_priority(|s| &s.watchdog_restorations),
    );
    let lossless: Vec<usize> = (0..8).filter(|p| config.qos.lossless_mask & (1 << p) != 0).collect();
    let per_group = |get: fn(&crate::observe::stats::GroupStats) -> u64| -> Vec<(String, u64)> {
        ports
            .iter()
            .flat_map(|(labels, s)| {
                lossless.iter().map(move |&p| (format!("{labels},priority=\"{p}\""), get(&s.priority_groups[p])))
            })
            .collect()
    };
    family(
        &mut out,
        "raceway_priority_group_max_bytes",
        "gauge",
        "Peak occupancy of the (ingress port, lossless priority) group, in buffer cell bytes.",
        per_group(|g| g.max_bytes),
    );
    family(
        &mut out,
        "raceway_priority_group_max_headroom_bytes",
        "gauge",
        "Peak headroom use of the (ingress port, lossless priority) group, in buffer cell bytes.",
        per_group(|g| g.max_headroom_bytes),
    );
    let per_queue = |get: fn(&crate::observe::stats::QueueStats) -> u64| -> Vec<(String, u64)> {
        ports
            .iter()
            .flat_map(|(labels, s)| {
                (0..TRAFFIC_CLASSES).map(move |tc| (format!("{labels},tc=\"{tc}\""), get(&s.queues[tc])))
            })
            .collect()
    };
    family(
        &mut out,
        "raceway_queue_tx_packets_total",
        "counter",
        "Frames sent from the queue.",
        per_queue(|q| q.tx_packets),
    );
    family(
        &mut out,
        "raceway_queue_tx_bytes_total",
        "counter",
        "Bytes sent from the queue.",
        per_queue(|q| q.tx_bytes),
    );
    family(
        &mut out,
        "raceway_queue_dropped_total",
        "counter",
        "Frames the queue refused or lost.",
        per_queue(|q| q.dropped),
    );
    family(
        &mut out,
        "raceway_queue_ecn_marked_total",
        "counter",
        "Frames marked CE in the queue.",
        per_queue(|q| q.ecn_marked),
    );
    family(&mut out, "raceway_queue_depth_bytes", "gauge", "Frame bytes queued now.", per_queue(|q| q.depth_bytes));
    family(
        &mut out,
        "raceway_queue_max_depth_bytes",
        "gauge",
        "Peak frame bytes queued.",
        per_queue(|q| q.max_depth_bytes),
    );
    family(
        &mut out,
        "raceway_group_member_packets_total",
        "counter",
        "Frames queued to each member of a port group.",
        config.groups.iter().zip(&stats.groups).flat_map(|(group, counts)| {
            group.members.iter().zip(counts).map(move |(&member, &count)| {
                (format!("group=\"{}\",member=\"{}\"", label(&group.name), label(&config.ports[member].name)), count)
            })
        }),
    );
    family(
        &mut out,
        "raceway_port_injected_total",
        "counter",
        "Frames the control plane sent out of the port.",
        per_port(|s| s.injected),
    );
    if let Some(control) = &stats.control {
        let per_control_port = |values: &[u64]| -> Vec<(String, u64)> {
            config.ports.iter().zip(values).map(|(port, &v)| (format!("port=\"{}\"", label(&port.name)), v)).collect()
        };
        family(
            &mut out,
            "raceway_control_punt_tap_errors_total",
            "counter",
            "Punted frames the port's host interface refused.",
            per_control_port(&control.punt_tap_errors),
        );
        family(
            &mut out,
            "raceway_control_inject_dropped_total",
            "counter",
            "Frames from the kernel that could not be injected.",
            per_control_port(&control.inject_dropped),
        );
        let one = |value: u64| [(String::new(), value)];
        family(
            &mut out,
            "raceway_fib_generation",
            "gauge",
            "The FIB snapshot the workers read.",
            one(control.fib_generation),
        );
        family(
            &mut out,
            "raceway_fib_routes",
            "gauge",
            "Routes in the FIB (config and kernel).",
            one(control.fib_routes),
        );
        family(&mut out, "raceway_fib_neighbors", "gauge", "Neighbours in the FIB.", one(control.fib_neighbors));
        family(
            &mut out,
            "raceway_fib_last_update_ns",
            "gauge",
            "Time from reading the kernel's messages to publishing the last snapshot.",
            one(control.last_update_ns),
        );
    }
    let cores = |get: fn(&crate::observe::stats::CoreStats) -> u64| -> Vec<(String, u64)> {
        stats.cores.iter().map(|core| (format!("lcore=\"{}\"", core.lcore), get(core))).collect()
    };
    family(
        &mut out,
        "raceway_core_packets_total",
        "counter",
        "Frames the forwarding core received.",
        cores(|c| c.packets),
    );
    family(
        &mut out,
        "raceway_core_busy_cycles_total",
        "counter",
        "TSC cycles of loops that moved frames.",
        cores(|c| c.busy_cycles),
    );
    family(
        &mut out,
        "raceway_core_idle_cycles_total",
        "counter",
        "TSC cycles of empty polls.",
        cores(|c| c.idle_cycles),
    );
    family(
        &mut out,
        "raceway_latency_ns",
        "gauge",
        "Switch latency (rx to tx hand-off) quantiles since start, upper bounds of histogram buckets.",
        [("0.5", 0.5), ("0.99", 0.99), ("0.999", 0.999)]
            .into_iter()
            .map(|(name, q)| (format!("quantile=\"{name}\""), stats.latency.quantile(q))),
    );
    let _ = writeln!(out, "# HELP raceway_latency_samples_total Frames in the latency histogram.");
    let _ = writeln!(out, "# TYPE raceway_latency_samples_total counter");
    let _ = writeln!(out, "raceway_latency_samples_total {}", stats.latency.samples);
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

    const CONFIG: &str = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[qos]\nlossless = [3]\n\
        [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n\
        [[port]]\nname = \"p1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:03\"\n\
        [[group]]\nname = \"g\"\nports = [\"p0\", \"p1\"]\n";

    #[test]
    fn exposition_names_and_values() {
        let config = Config::parse(CONFIG, "t.toml").unwrap();
        let mut stats = SwitchStats::new(&config);
        stats.ports[1].rx_packets = 42;
        stats.ports[0].drops[DropReason::BufferFull.index()] = 3;
        stats.ports[0].pfc_xoff_tx[3] = 5;
        stats.ports[1].queues[3].depth_bytes = 1500;
        stats.groups[0][1] = 9;
        let text = render(&stats, &config);
        for line in [
            "raceway_port_rx_packets_total{port=\"p1\"} 42",
            "raceway_port_drops_total{port=\"p0\",reason=\"buffer_full\"} 3",
            "raceway_pfc_xoff_sent_total{port=\"p0\",priority=\"3\"} 5",
            "raceway_queue_depth_bytes{port=\"p1\",tc=\"3\"} 1500",
            "raceway_group_member_packets_total{group=\"g\",member=\"p1\"} 9",
            "raceway_priority_group_max_bytes{port=\"p0\",priority=\"3\"} 0",
            "# TYPE raceway_queue_depth_bytes gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing: {line}");
        }
        // Lossy priorities have no priority-group series.
        assert!(!text.contains("raceway_priority_group_max_bytes{port=\"p0\",priority=\"0\"}"));
        // Every sample line is `name{labels} value` with an integer value.
        for sample in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = sample.rsplit_once(' ').unwrap();
            assert!(value.parse::<u64>().is_ok(), "{sample}");
        }
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
