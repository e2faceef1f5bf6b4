//! What a running switch says of itself: Prometheus metrics and DPDK telemetry against the
//! stats JSON it writes, figure for figure.

use super::*;
use crate::bin::*;
use crate::util::*;
use serde_json::json;

/// Runs the stock `dpdk-telemetry.py` client against the process with EAL file prefix
/// `prefix`, one command per line, and merges its JSON replies into one object.
fn telemetry_query(prefix: &str, commands: &[&str]) -> serde_json::Value {
    use std::io::Write;
    let mut client = std::process::Command::new("dpdk-telemetry.py")
        .args(["-f", prefix])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dpdk-telemetry.py (package dpdk) runs");
    client.stdin.take().unwrap().write_all((commands.join("\n") + "\n").as_bytes()).unwrap();
    let output = client.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut merged = serde_json::Map::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let reply: serde_json::Value = serde_json::from_str(line).unwrap();
        merged.extend(reply.as_object().unwrap().clone());
    }
    for command in commands {
        assert!(
            merged.contains_key(*command),
            "no reply to {command}: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::Value::Object(merged)
}

/// `GET /metrics` on `address`: the body, after checking the status line.
fn scrape(address: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: raceway\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The value of one sample line `name{labels}` in an exposition.
fn sample(body: &str, series: &str) -> u64 {
    let line = body.lines().find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '));
    let line = line.unwrap_or_else(|| panic!("no sample {series}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

/// The Prometheus endpoint and DPDK telemetry of a live switch: once the traffic is through,
/// a scrape and the stock `dpdk-telemetry.py` client give the same numbers as the stats JSON
/// written at exit.
#[test]
fn metrics_and_telemetry_match_the_stats_json() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-metrics");
    let frames = raceway::traffic::gen::mixed(&raceway::traffic::gen::MixedOptions {
        packets: 500,
        seed: 8,
        ..Default::default()
    });
    write_pcap(&dir.join("in.pcap"), &frames);
    let devices = with_null_sinks(format!("net_pcap40,rx_pcap={}/in.pcap", dir.display()), 40);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (stats_path, log) = (dir.join("stats.json"), dir.join("raceway.log"));
    let prefix = format!("raceway-metrics-{}", std::process::id());
    let mut child = KillOnDrop(
        raceway()
            .args(["run", "-c"])
            .arg(&config)
            .args(["--duration", "4", "--metrics", &port.to_string(), "--stats-json"])
            .arg(&stats_path)
            .args(["--", "--file-prefix", &prefix])
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_log(&log, &format!("metrics on http://127.0.0.1:{port}/metrics"));
    let address = format!("127.0.0.1:{port}");
    // The 500 frames take microseconds; counters publish every 100 ms.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        if sample(&scrape(&address), "raceway_port_rx_packets_total{port=\"host0\"}") == 500 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the scrape never saw all 500 frames");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Every frame was received; wait until each is sent or dropped in the published counters
    // (the transmit side publishes on its own period), then scrape what will be compared
    // (idle cycles keep counting; the data counters do not).
    let family_sum = |body: &str, family: &str| -> u64 {
        body.lines()
            .filter(|line| line.starts_with(family) && line[family.len()..].starts_with('{'))
            .map(|line| line.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let body = loop {
        let body = scrape(&address);
        let accounted =
            family_sum(&body, "raceway_port_tx_packets_total") + family_sum(&body, "raceway_port_drops_total");
        if accounted == 500 {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "only {accounted} of 500 frames ever sent or dropped");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    raceway::testing::promtool_check(&body).unwrap_or_else(|said| panic!("promtool check metrics: {said}"));
    let telemetry = telemetry_query(&prefix, &["/raceway/ports", "/raceway/queues", "/raceway/pfc", "/raceway/groups"]);
    let show = |args: &[&str]| -> serde_json::Value {
        let output = raceway().args(["show", "--prefix", &prefix, "--json"]).args(args).output().unwrap();
        assert!(output.status.success(), "show {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("show {args:?}: {err}"))
    };
    let shown = [
        show(&["interfaces"]),
        show(&["counters", "--period", "0.1"]),
        show(&["queues"]),
        show(&["pfc"]),
        show(&["watermarks", "--persistent"]),
        show(&["routes"]),
    ];
    // Clearing the watermarks zeroes those since the last clear, not the persistent ones.
    let text = raceway().args(["show", "--prefix", &prefix, "clear", "watermarks"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&text.stdout), "cleared watermarks\n");
    let cleared = show(&["watermarks"]);
    // Clearing the counters offsets what `show` prints, never what Prometheus reads.
    let text = raceway().args(["show", "--prefix", &prefix, "clear", "counters"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&text.stdout), "cleared counters\n");
    let queues_after_clear = show(&["queues"]);
    let rows = queues_after_clear["queues"].as_array().unwrap();
    assert_eq!(rows.len(), 32);
    assert!(rows.iter().all(|row| row["counter_pkts"] == 0 && row["drop_pkts"] == 0), "{queues_after_clear}");
    assert_eq!(sample(&scrape(&address), "raceway_port_rx_packets_total{port=\"host0\"}"), 500);
    assert!(child.wait_for_exit().success(), "{}", std::fs::read_to_string(&log).unwrap());
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    let mut compared = 0;
    for port in PORTS {
        let json = &stats["ports"][port];
        for (metric, key) in [
            ("raceway_port_rx_packets_total", "rx_packets"),
            ("raceway_port_rx_bytes_total", "rx_bytes"),
            ("raceway_port_tx_packets_total", "tx_packets"),
            ("raceway_port_tx_bytes_total", "tx_bytes"),
        ] {
            assert_eq!(
                sample(&body, &format!("{metric}{{port=\"{port}\"}}")),
                json[key].as_u64().unwrap(),
                "{metric} {port}"
            );
            compared += 1;
        }
        for (reason, count) in json["drops"].as_object().unwrap() {
            let series = format!("raceway_port_drops_total{{port=\"{port}\",reason=\"{reason}\"}}");
            assert_eq!(sample(&body, &series), count.as_u64().unwrap(), "{series}");
            compared += 1;
        }
        for tc in 0..8 {
            let queue = &json["queues"][tc];
            for (metric, key) in [
                ("raceway_queue_tx_packets_total", "tx_packets"),
                ("raceway_queue_tx_bytes_total", "tx_bytes"),
                ("raceway_queue_dropped_total", "dropped"),
                ("raceway_queue_ecn_marked_total", "ecn_marked"),
                ("raceway_queue_max_depth_bytes", "max_depth_bytes"),
                ("raceway_queue_depth_bytes", "depth_bytes"),
                ("raceway_queue_max_depth_cell_bytes", "max_depth_cell_bytes"),
                ("raceway_queue_depth_cell_bytes", "depth_cell_bytes"),
            ] {
                let series = format!("{metric}{{port=\"{port}\",tc=\"{tc}\"}}");
                assert_eq!(sample(&body, &series), queue[key].as_u64().unwrap(), "{series}");
                compared += 1;
            }
            for (metric, value) in [
                ("raceway_pfc_xoff_sent_total", &json["pfc_xoff_tx"][tc]),
                ("raceway_pfc_xon_sent_total", &json["pfc_xon_tx"][tc]),
                ("raceway_pfc_received_total", &json["pfc_rx"][tc]),
            ] {
                let series = format!("{metric}{{port=\"{port}\",priority=\"{tc}\"}}");
                assert_eq!(sample(&body, &series), value.as_u64().unwrap(), "{series}");
                compared += 1;
            }
            for (metric, value) in [
                ("raceway_pfc_watchdog_storms_total", &json["pfc_watchdog"]["storms"][tc]),
                ("raceway_pfc_watchdog_restorations_total", &json["pfc_watchdog"]["restorations"][tc]),
            ] {
                let series = format!("{metric}{{port=\"{port}\",queue=\"{tc}\"}}");
                assert_eq!(sample(&body, &series), value.as_u64().unwrap(), "{series}");
                compared += 1;
            }
        }
        // Lossless groups only (3 here): each ingress group's peaks.
        for group in json["priority_groups"].as_array().unwrap() {
            let pg = group["pg"].as_u64().unwrap();
            for (metric, key) in [
                ("raceway_priority_group_max_bytes", "max_bytes"),
                ("raceway_priority_group_max_headroom_bytes", "max_headroom_bytes"),
            ] {
                let series = format!("{metric}{{port=\"{port}\",pg=\"{pg}\"}}");
                assert_eq!(sample(&body, &series), group[key].as_u64().unwrap(), "{series}");
                compared += 1;
            }
        }
    }
    // `raceway show --json` read the same numbers while the switch ran.
    let [interfaces, counters, queues, pfc, persistent, routes] = &shown;
    for (index, port) in PORTS.iter().enumerate() {
        let json = &stats["ports"][port];
        let interface = &interfaces["interfaces"][index];
        assert_eq!(
            (&interface["interface"], &interface["oper"], &interface["mtu"]),
            (&json!(port), &json!("up"), &json!(9216))
        );
        let row = &counters["counters"][index];
        assert_eq!(row["iface"], json!(port));
        assert_eq!(row["rx_ok"], json["rx_packets"], "show counters {port}");
        assert_eq!(row["tx_ok"], json["tx_packets"], "show counters {port}");
        let drops: u64 = json["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(row["rx_drp"], drops, "show counters {port}");
        for tc in 0..8 {
            let queue = &json["queues"][tc];
            let row = &queues["queues"][index * 8 + tc];
            assert_eq!((&row["port"], &row["txq"]), (&json!(port), &json!(format!("UC{tc}"))));
            assert_eq!(row["counter_pkts"], queue["tx_packets"]);
            assert_eq!(row["counter_bytes"], queue["tx_bytes"]);
            assert_eq!(row["drop_pkts"], queue["dropped"]);
            assert_eq!(row["ecn_marked"], queue["ecn_marked"]);
            // Before the clear the two watermarks were one.
            assert_eq!(row["watermark_bytes"], queue["max_depth_bytes"], "show queues {port} tc{tc}");
            assert_eq!(persistent["queues"][index][format!("uc{tc}")], queue["max_depth_bytes"]);
            assert_eq!(persistent["queue_cells"][index][format!("uc{tc}")], queue["max_depth_cell_bytes"]);
            assert!(
                queue["max_depth_cell_bytes"].as_u64() >= queue["max_depth_bytes"].as_u64(),
                "a frame's cells hold it"
            );
            assert_eq!(cleared["queues"][index][format!("uc{tc}")], 0, "cleared {port} tc{tc}");
            assert_eq!(cleared["queue_cells"][index][format!("uc{tc}")], 0, "cleared {port} tc{tc}");
            assert_eq!(
                (&queue["watermark_bytes"], &queue["watermark_cell_bytes"]),
                (&json!(0), &json!(0)),
                "the clear reached the stats JSON"
            );
            assert_eq!(pfc["rx"][index][format!("pfc{tc}")], json["pfc_rx"][tc]);
            let sent = json["pfc_xoff_tx"][tc].as_u64().unwrap() + json["pfc_xon_tx"][tc].as_u64().unwrap();
            assert_eq!(pfc["tx"][index][format!("pfc{tc}")], sent);
        }
    }
    assert_eq!(routes["routes"].as_array().unwrap().len(), 4, "{routes}");
    for member in ["up0", "up1"] {
        let series = format!("raceway_group_member_packets_total{{group=\"uplinks\",member=\"{member}\"}}");
        assert_eq!(sample(&body, &series), stats["groups"]["uplinks"][member].as_u64().unwrap(), "{series}");
    }
    assert!(compared > 100);
    for port in PORTS {
        let json = &stats["ports"][port];
        let ports = &telemetry["/raceway/ports"][port];
        for key in ["rx_packets", "rx_bytes", "tx_packets", "tx_bytes"] {
            assert_eq!(ports[key], json[key], "telemetry {port} {key}");
        }
        for (reason, count) in json["drops"].as_object().unwrap() {
            assert_eq!(&ports[format!("drops_{reason}")], count, "telemetry {port} drops {reason}");
        }
        let pfc = &telemetry["/raceway/pfc"][port];
        for tc in 0..8 {
            let queues = &telemetry["/raceway/queues"][port];
            for key in ["tx_packets", "tx_bytes", "dropped", "ecn_marked", "max_depth_bytes", "max_depth_cell_bytes"] {
                assert_eq!(queues[format!("tc{tc}_{key}")], json["queues"][tc][key], "telemetry {port} tc{tc} {key}");
            }
            assert_eq!(pfc[format!("xoff_sent_p{tc}")], json["pfc_xoff_tx"][tc]);
            assert_eq!(pfc[format!("xon_sent_p{tc}")], json["pfc_xon_tx"][tc]);
            assert_eq!(pfc[format!("received_p{tc}")], json["pfc_rx"][tc]);
            assert_eq!(pfc[format!("watchdog_storms_q{tc}")], json["pfc_watchdog"]["storms"][tc]);
            assert_eq!(pfc[format!("watchdog_restorations_q{tc}")], json["pfc_watchdog"]["restorations"][tc]);
        }
        for group in json["priority_groups"].as_array().unwrap() {
            let pg = &group["pg"];
            assert_eq!(pfc[format!("group_max_bytes_pg{pg}")], group["max_bytes"]);
            assert_eq!(pfc[format!("group_max_headroom_bytes_pg{pg}")], group["max_headroom_bytes"]);
        }
    }
    assert_eq!(telemetry["/raceway/groups"]["uplinks"], stats["groups"]["uplinks"]);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"], "mbufs leaked");
    assert!(sample(&body, "raceway_port_tx_packets_total{port=\"host1\"}") > 0, "nothing forwarded");
}
