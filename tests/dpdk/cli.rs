//! The command line's contract: bad input of every kind ends with one line on stderr that
//! names the file and field, and exit status 2; good input works.

use crate::bin::*;
use crate::util::*;

fn fails_with_one_line(command: &mut std::process::Command, expect: &[&str]) {
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{command:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{command:?} printed {lines:?}");
    for word in expect {
        assert!(lines[0].contains(word), "{command:?}: '{}' lacks '{word}'", lines[0]);
    }
    assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"));
}

#[test]
fn config_mistakes_name_file_and_field() {
    let dir = temp_dir("cli-config");
    let good = four_port_config("", ["", "", "", ""], "");
    let cases = [
        (good.replace("speed_gbps = 100", "speed_gbps = 0"), "port[0].speed_gbps"),
        (good.replace("port = \"host1\"", "port = \"nowhere\""), "route[1].port"),
        (good.replace("name = \"up1\"", "name = \"up0\""), "port[3].name"),
        (good.replace("26 = 3", "26 = 9"), "qos.dscp_to_tc.26"),
        (good.replace("speed_gbps = 100", "speed_gbps = \"fast\""), "speed_gbps"),
        (good.replace("[[group]]", "[[grup]]"), "grup"),
        (good.replace("dwrr = { 0 = 50", "dwrr = { 0 = 0"), "qos.scheduler.dwrr.0"),
    ];
    for (index, (text, field)) in cases.iter().enumerate() {
        let path = dir.join(format!("bad{index}.toml"));
        std::fs::write(&path, text).unwrap();
        fails_with_one_line(raceway().args(["check", "-c"]).arg(&path), &[&format!("bad{index}.toml"), field]);
    }
    fails_with_one_line(
        raceway().args(["check", "-c", "/nonexistent/leaf.toml"]),
        &["/nonexistent/leaf.toml", "cannot read"],
    );
}

#[test]
fn check_prints_derived_values() {
    let dir = temp_dir("cli-check");
    let path = dir.join("leaf.toml");
    std::fs::write(&path, four_port_config("", ["", "", "", ""], "")).unwrap();
    let output = run_ok(raceway().args(["check", "-c"]).arg(&path));
    let text = String::from_utf8_lossy(&output.stdout);
    for expect in [
        "host0",
        "10.0.1.0/24",
        "group uplinks",
        "64B frame 6.72 ns",
        "strict [6, 7]",
        "TC3 <- DSCP 26",
        "PFC host0      headroom ",
        " bytes per lossless group, xoff ",
        "tc_to_pg: [0, 1, 2, 3, 4, 5, 6, 7]",
        "lossless priority 3: frames in TC [3], charged to PG [3]; its pauses hold UC3",
        "xoff dynamic: 1 x free lossless pool",
        "xon xoff - 2 x mtu",
        // 16 MiB less 4 x 207,104 of headroom (0 m cables, raceway's 3.95 us response), split
        // evenly between the pools; a lone queue stops at 8/9 of its pool.
        "buffer: headroom 828416 bytes, lossless pool 7974400 bytes, lossy pool 7974400 bytes",
        "lossy queue limit: 8 x free lossy pool (7974400 bytes into an empty pool; one congested queue alone stops at 7088355)",
        "pause answered within 3.95 us (live tx lookahead), the peer's within 394 quanta (2.02 us)",
    ] {
        assert!(text.contains(expect), "check output lacks '{expect}':\n{text}");
    }
}

#[test]
fn check_prints_the_control_plane() {
    let dir = temp_dir("cli-check-control");
    let path = dir.join("leaf.toml");
    let text = four_port_config("", ["", "", "", ""], "").replacen(
        "name = \"host0\"",
        "name = \"host0\"\naddresses = [\"10.0.0.1/24\", \"fd00::1/64\"]",
        1,
    );
    std::fs::write(
        &path,
        format!("{text}\n[control]\npunt_ethertypes = [\"0x88b7\"]\n[control.copp.ip2me]\npps = 500\n"),
    )
    .unwrap();
    let output = run_ok(raceway().args(["check", "-c"]).arg(&path));
    let text = String::from_utf8_lossy(&output.stdout);
    // Every class in priority order at its default rate, but ip2me as the config sets it.
    use raceway::config::CoppClass;
    let rates: Vec<String> = CoppClass::ALL
        .iter()
        .map(|&class| {
            let pps = if class == CoppClass::Ip2me { 500 } else { class.default_pps() };
            format!("{} {pps}/{pps}", class.name())
        })
        .collect();
    let copp = format!("  CoPP per port, frames/s / burst, highest priority first: {}", rates.join(", "));
    for expect in [
        "addresses 10.0.0.1/24, fd00::1/64",
        "control: host interfaces in netns raceway-test-leaf; punt ARP, ND, LACP, LLDP, local and link-local IP, TTL <= 1, glean, EtherTypes 0x88b7; control frames leave in TC7; multipath routes ecmp",
        &copp,
    ] {
        assert!(text.contains(expect), "check output lacks '{expect}':\n{text}");
    }
    assert!(!text.contains("warning: control.control_tc"), "TC7 is strict in this config:\n{text}");
    let text = four_port_config("", ["", "", "", ""], "");
    // Another class is made strict too; one the operator weighted stays DWRR, with a warning.
    std::fs::write(&path, format!("{text}\n[control]\ncontrol_tc = 5\n")).unwrap();
    let output = String::from_utf8_lossy(&run_ok(raceway().args(["check", "-c"]).arg(&path)).stdout).into_owned();
    assert!(output.contains("strict [5, 6, 7]") && !output.contains("warning: control.control_tc"), "{output}");
    std::fs::write(&path, format!("{text}\n[control]\ncontrol_tc = 0\n")).unwrap();
    let output = run_ok(raceway().args(["check", "-c"]).arg(&path));
    assert!(String::from_utf8_lossy(&output.stdout).contains("warning: control.control_tc 0 is not strict"));
    std::fs::write(&path, four_port_config("", ["", "", "", ""], "")).unwrap();
    let output = run_ok(raceway().args(["check", "-c"]).arg(&path));
    assert!(String::from_utf8_lossy(&output.stdout).contains("control: none"));
}

#[test]
fn check_warns_when_ecn_would_act_after_pfc() {
    let dir = temp_dir("cli-check-ecn");
    let path = dir.join("leaf.toml");
    let text = four_port_config("", ["", "", "", ""], "").replace(
        "lossless = [3]",
        "lossless = [3]\n[qos.pfc]\nxoff_bytes = 100000\n[qos.ecn.3]\nkmin_bytes = 150000\nkmax_bytes = 1500000\npmax = 0.2",
    );
    std::fs::write(&path, text).unwrap();
    let output = run_ok(raceway().args(["check", "-c"]).arg(&path));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("warning: qos.ecn.3.kmin_bytes 150000 is above the XOFF point 100000"), "{text}");

    // Like with like: 30,000 bytes of cells is below XOFF; 30,000 frame bytes of 60-byte
    // frames hold 500 x 256 = 128,000 cell bytes, above it.
    let check = |measure: &str| {
        let text = four_port_config("", ["", "", "", ""], "").replace(
            "lossless = [3]",
            &format!("lossless = [3]\n[qos.pfc]\nxoff_bytes = 100000\n[qos.ecn.3]\nkmin_bytes = 30000\nkmax_bytes = 90000\npmax = 0.2\nmeasure = \"{measure}\""),
        );
        std::fs::write(&path, text).unwrap();
        String::from_utf8_lossy(&run_ok(raceway().args(["check", "-c"]).arg(&path)).stdout).into_owned()
    };
    let cells = check("cells");
    assert!(!cells.contains("warning: qos.ecn"), "{cells}");
    assert!(cells.contains("depth in buffer cells"), "{cells}");
    let frame_bytes = check("frame_bytes");
    assert!(
        frame_bytes.contains(
            "warning: qos.ecn.3.kmin_bytes 30000 frame bytes (128000 cell bytes of 60-byte frames) is above the XOFF point 100000"
        ),
        "{frame_bytes}"
    );
}

#[test]
fn replay_input_mistakes() {
    let dir = temp_dir("cli-replay");
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", ["", "", "", ""], "")).unwrap();
    let replay = |args: &[&str]| {
        let mut command = raceway();
        command.args(["replay", "-c"]).arg(&config).arg("--out").arg(dir.join("out")).args(args);
        command
    };
    let junk = dir.join("junk.pcap");
    std::fs::write(&junk, b"this is not a capture").unwrap();
    fails_with_one_line(&mut replay(&["--in", &format!("host0={}", junk.display())]), &["junk.pcap", "header"]);

    let truncated = dir.join("truncated.pcap");
    let frames =
        raceway::traffic::gen::mixed(&raceway::traffic::gen::MixedOptions { packets: 3, ..Default::default() });
    write_pcap(&truncated, &frames);
    let bytes = std::fs::read(&truncated).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 7]).unwrap();
    fails_with_one_line(
        &mut replay(&["--in", &format!("host0={}", truncated.display())]),
        &["truncated.pcap", "record 2"],
    );

    fails_with_one_line(&mut replay(&["--in", "spine9=x.pcap"]), &["--in", "spine9"]);
    fails_with_one_line(&mut replay(&["--in", "host0"]), &["--in", "PORT=FILE"]);
    let twice = format!("host0={}", junk.display());
    fails_with_one_line(&mut replay(&["--in", &twice, "--in", &twice]), &["--in", "host0", "given twice"]);
    fails_with_one_line(&mut replay(&["--in", "host0=/nonexistent.pcap"]), &["/nonexistent.pcap", "cannot open"]);
    fails_with_one_line(&mut replay(&[]), &["--in"]);
    let input = format!("host0={}", truncated.display());
    fails_with_one_line(
        &mut replay(&["--in", &input, "--peer-ignores-pfc", "nowhere"]),
        &["--peer-ignores-pfc", "nowhere"],
    );
}

/// `run --capture` mistakes end before the EAL starts, with one line naming the flag.
#[test]
fn capture_mistakes_exit_2_before_dpdk_starts() {
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/demo.toml");
    let run = |capture: &str| {
        let mut command = raceway();
        command.args(["run", "-c"]).arg(&demo).args(["--capture", capture]);
        command
    };
    fails_with_one_line(&mut run("nowhere=/tmp/x.pcapng"), &["--capture", "'nowhere' is not a port"]);
    fails_with_one_line(&mut run("host0"), &["--capture", "'host0' is not PORT=FILE"]);
    fails_with_one_line(
        &mut run("host0=/nonexistent/dir/x.pcapng"),
        &["--capture", "/nonexistent/dir/x.pcapng", "cannot create"],
    );
}

#[test]
fn flag_mistakes_exit_2() {
    // What clap refuses is one line too, with its context (the possible values, a usage).
    fails_with_one_line(raceway().args(["replay", "--bogus"]), &["--bogus"]);
    fails_with_one_line(raceway().args(["run"]), &["--config", "Usage: raceway run"]);
    fails_with_one_line(
        raceway().args(["fabric", "-c", "f.toml", "--mode", "teleport"]),
        &[
            "'teleport'",
            "--mode",
            &raceway::config::GroupMode::ALL.iter().map(|mode| mode.name()).collect::<Vec<_>>().join(", "),
        ],
    );
    let output = raceway().args(["gen", "mixed", "--out", "/tmp/x.pcap", "--size", "10"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    fails_with_one_line(
        raceway().args(["blast", "--trace", "/nonexistent.pcap", "--device", "net_null0", "--rate-gbps", "1"]),
        &["/nonexistent.pcap", "cannot open"],
    );
    fails_with_one_line(
        raceway().args(["blast", "--trace", "x.pcap", "--device", "net_null0", "--rate-gbps", "0"]),
        &["--rate-gbps"],
    );
    let output = raceway().arg("--help").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    for command in ["run", "replay", "check", "gen", "blast"] {
        let output = raceway().args([command, "--help"]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{command} --help");
    }
}

#[test]
fn gen_writes_a_readable_trace() {
    let dir = temp_dir("cli-gen");
    let path = dir.join("mixed.pcap");
    run_ok(raceway().args(["gen", "mixed", "--packets", "50", "--seed", "4", "--out"]).arg(&path));
    let frames = read_pcap(&path);
    assert_eq!(frames.len(), 50);
    assert!(frames.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn shipped_configs_are_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for config in
        ["config/demo.toml", "config/leaf.toml", "perf/pktgen/raceway-2port.toml", "perf/pktgen/raceway-memif.toml"]
    {
        run_ok(raceway().args(["check", "-c"]).arg(root.join(config)));
    }
}

/// The bundled demo traces are exactly what `raceway gen` makes with the options below, so
/// they can be regenerated rather than trusted; and the demo replays with every frame
/// accounted for.
/// The demo's traffic, written by config/demo-traces.sh with `raceway gen`, replays through
/// the demo config: reproducibly, and with what the demo is there to show (PFC and ECN on the
/// incast into host1).
#[test]
fn demo_traces_are_reproducible_and_replay_cleanly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = temp_dir("cli-traces");
    let binary = env!("CARGO_BIN_EXE_raceway");
    let write_traces = |out: &std::path::Path| {
        run_ok(std::process::Command::new("sh").arg(root.join("config/demo-traces.sh")).arg(binary).arg(out));
    };
    write_traces(&dir.join("traces"));
    write_traces(&dir.join("again"));
    for name in ["host0.pcap", "host1.pcap", "incast/host2.pcap", "incast/host3.pcap"] {
        let first = std::fs::read(dir.join("traces").join(name)).unwrap();
        assert!(first == std::fs::read(dir.join("again").join(name)).unwrap(), "{name} is not reproducible");
    }
    let out = dir.join("out");
    let traces = dir.join("traces");
    run_ok(
        raceway()
            .args(["replay", "-c"])
            .arg(root.join("config/demo.toml"))
            .arg("--in")
            .arg(format!("host0={}", traces.join("host0.pcap").display()))
            .arg("--in")
            .arg(format!("host1={}", traces.join("host1.pcap").display()))
            .arg("--in")
            .arg(format!("up0={}", traces.join("incast/host2.pcap").display()))
            .arg("--in")
            .arg(format!("up1={}", traces.join("incast/host3.pcap").display()))
            .arg("--out")
            .arg(&out),
    );
    let stats = stats(&out);
    let ports = stats["ports"].as_object().unwrap();
    let sum = |f: &dyn Fn(&serde_json::Value) -> u64| ports.values().map(f).sum::<u64>();
    let rx = sum(&|p| p["rx_packets"].as_u64().unwrap());
    let tx = sum(&|p| p["tx_packets"].as_u64().unwrap());
    let drops = sum(&|p| p["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum());
    // 2 x 2,000 mixed frames, and 2 x 48 messages of 65 frames.
    assert_eq!(rx, 4000 + 2 * 48 * 65);
    assert_eq!(tx + drops, rx);
    assert!(drops > 0 && drops < 200, "the mixed traces carry ~2% bad frames, got {drops}");
    let host1 = &stats["ports"]["host1"];
    assert_eq!(host1["drops"]["headroom_overflow"], 0, "lossless: the incast loses nothing");
    for uplink in ["up0", "up1"] {
        assert!(stats["ports"][uplink]["pfc_xoff_tx"][3].as_u64().unwrap() > 0, "{uplink} was never paused");
    }
    assert!(host1["queues"][3]["ecn_marked"].as_u64().unwrap() > 0, "no ECN marks on host1's lossless queue");
    for port in ["host0", "host1", "up0", "up1"] {
        // Captures hold the data frames and the PFC frames (one priority, 3, here).
        let counters = &stats["ports"][port];
        let pfc_sent: u64 = ["pfc_xoff_tx", "pfc_xon_tx"]
            .iter()
            .flat_map(|name| counters[*name].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()))
            .sum();
        assert_eq!(
            read_pcap(&out.join(format!("{port}.pcap"))).len() as u64,
            counters["tx_packets"].as_u64().unwrap() + pfc_sent,
            "{port}"
        );
    }
}

fn u64_of(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("not a count: {value}"))
}

/// Runs `raceway gen <kind> --out DIR <args>` and replays every trace it wrote, on the port
/// of the same host, through a leaf of `hosts` ports; returns the replay's stats.
fn gen_and_replay(name: &str, kind: &str, hosts: usize, args: &[&str]) -> serde_json::Value {
    let dir = temp_dir(name);
    let traces = dir.join("traces");
    run_ok(raceway().args(["gen", kind, "--out"]).arg(&traces).args(["--hosts", &hosts.to_string()]).args(args));
    let config = dir.join("leaf.toml");
    std::fs::write(&config, leaf(hosts, "buffer_bytes = 1048576", "", "3")).unwrap();
    let mut command = raceway();
    command.args(["replay", "-c"]).arg(&config).arg("--out").arg(dir.join("out"));
    for host in 0..hosts {
        let trace = traces.join(format!("host{host}.pcap"));
        if trace.exists() {
            command.arg("--in").arg(format!("h{host}={}", trace.display()));
        }
    }
    run_ok(&mut command);
    stats(&dir.join("out"))
}

/// `gen`'s AI-fabric patterns replay as described: every frame of incast and all-to-all
/// arrives where it was sent, losslessly, and a PFC storm pauses its host's port.
#[test]
fn gen_patterns_replay() {
    // 20,400-byte messages are 20 frames of 1,020 payload bytes.
    let incast =
        gen_and_replay("gen-incast", "incast", 4, &["--target", "0", "--messages", "8", "--message-bytes", "20400"]);
    assert_eq!(u64_of(&incast["ports"]["h0"]["tx_packets"]), 3 * 8 * 20);
    for host in ["h0", "h1", "h2", "h3"] {
        assert!(incast["ports"][host]["drops"].as_object().unwrap().values().all(|v| v == 0), "{host} dropped");
    }
    assert!(u64_of(&incast["ports"]["h1"]["pfc_xoff_tx"][3]) > 0, "a 3:1 incast at line rate pauses the senders");

    let all_to_all = gen_and_replay("gen-alltoall", "alltoall", 3, &["--messages", "1", "--message-bytes", "10200"]);
    for host in ["h0", "h1", "h2"] {
        assert_eq!(u64_of(&all_to_all["ports"][host]["tx_packets"]), 2 * 10, "{host}");
    }

    let ring = gen_and_replay("gen-allreduce", "allreduce", 4, &["--messages", "1", "--message-bytes", "4080"]);
    for host in ["h0", "h1", "h2", "h3"] {
        // 2 x 3 steps of one 1,020-byte chunk.
        assert_eq!(u64_of(&ring["ports"][host]["tx_packets"]), 6, "{host}");
    }

    let storm = gen_and_replay(
        "gen-storm",
        "pfc-storm",
        3,
        &["--storm", "0", "--priority", "3", "--interval-us", "20", "--duration-us", "200", "--messages", "1000"],
    );
    assert_eq!(storm["ports"]["h0"]["pfc_rx"], serde_json::json!([0, 0, 0, 10, 0, 0, 0, 0]));
    let sent: u64 = ["h1", "h2"].iter().map(|h| u64_of(&storm["ports"][h]["rx_packets"])).sum();
    assert!(sent > 0);
    assert_eq!(u64_of(&storm["ports"]["h0"]["tx_packets"]), sent, "paused frames leave once the storm ends");
}

#[test]
fn gen_pattern_flag_mistakes_exit_2() {
    fails_with_one_line(
        raceway().args(["gen", "incast", "--out", "/tmp/x", "--hosts", "4", "--target", "4"]),
        &["--target"],
    );
    fails_with_one_line(raceway().args(["gen", "alltoall", "--out", "/tmp/x", "--ecn", "4"]), &["--ecn"]);
    fails_with_one_line(raceway().args(["gen", "allreduce", "--out", "/tmp/x", "--hosts", "1"]), &["--hosts"]);
    fails_with_one_line(raceway().args(["gen", "pfc-storm", "--out", "/tmp/x", "--priority", "9"]), &["--priority"]);
}

/// `replay --report`: the series agree with the stats and captures, and every chart is there.
#[test]
fn replay_report_holds_the_series_behind_its_charts() {
    let dir = temp_dir("report");
    let traces = dir.join("traces");
    run_ok(raceway().args(["gen", "incast", "--hosts", "4", "--target", "0", "--messages", "8", "--out"]).arg(&traces));
    let config = dir.join("leaf.toml");
    let qos = "[qos.ecn.3]\nkmin_bytes = 50000\nkmax_bytes = 200000\npmax = 0.2\n";
    std::fs::write(&config, leaf(4, "buffer_bytes = 1048576", qos, "3")).unwrap();
    let (out, report) = (dir.join("out"), dir.join("report"));
    let mut command = raceway();
    command.args(["replay", "-c"]).arg(&config).arg("--out").arg(&out).arg("--report").arg(&report);
    for host in 1..4 {
        command.arg("--in").arg(format!("h{host}={}", traces.join(format!("host{host}.pcap")).display()));
    }
    run_ok(&mut command);
    let incast_stats = stats(&out);
    let series: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("series.json")).unwrap()).unwrap();
    let samples = u64_of(&series["samples"]) as usize;
    assert!(samples > 100, "{samples} samples");
    for port in ["h0", "h1", "h2", "h3"] {
        let sent = series["ports"][port]["tx_bytes"].as_array().unwrap();
        assert_eq!(sent.len(), samples);
        assert_eq!(sent.iter().map(u64_of).sum::<u64>(), u64_of(&incast_stats["ports"][port]["tx_bytes"]), "{port}");
        // Bytes are spread over each frame's wire time, so no sample is above line rate
        // (counted where transmissions started, the 100G port read up to 108 Gb/s).
        let fastest = series["ports"][port]["tx_gbps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_f64().unwrap())
            .fold(0.0, f64::max);
        assert!(fastest <= 100.0, "{port} at {fastest} Gb/s");
    }
    let fastest =
        series["ports"]["h0"]["tx_gbps"].as_array().unwrap().iter().map(|g| g.as_f64().unwrap()).fold(0.0, f64::max);
    assert!(fastest > 90.0, "the incast's target runs near line rate: {fastest} Gb/s");
    let depth = series["ports"]["h0"]["queue_depth_bytes"]["3"].as_array().unwrap();
    assert_eq!(
        depth.iter().map(u64_of).max(),
        Some(u64_of(&incast_stats["ports"]["h0"]["queues"][3]["max_depth_bytes"]))
    );
    assert_eq!(series["xoff_bytes"].as_array().unwrap().len(), samples);
    // Each sender's pause intervals start at XOFF frames of its capture and end at or before
    // the XON that follows.
    for port in ["h1", "h2", "h3"] {
        let intervals = series["ports"][port]["pfc"]["3"]["xoff_sent_ns"].as_array().unwrap();
        assert!(!intervals.is_empty(), "{port} paused nobody");
        let pfc_times: Vec<(u64, u16)> = read_pcap(&out.join(format!("{port}.pcap")))
            .into_iter()
            .filter(|(_, f)| f[12..14] == [0x88, 0x08])
            .map(|(t, f)| (t, u16::from_be_bytes([f[14 + 4 + 6], f[14 + 4 + 7]])))
            .collect();
        for interval in intervals {
            let (start, end) = (u64_of(&interval[0]), u64_of(&interval[1]));
            assert!(pfc_times.contains(&(start, 0xffff)), "{port}: {start} is not an XOFF");
            assert!(pfc_times.iter().any(|&(t, time)| time == 0 && t == end), "{port}: {end} is not an XON");
        }
        assert!(intervals.len() as u64 <= u64_of(&incast_stats["ports"][port]["pfc_xoff_tx"][3]));
    }
    let index = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(index.contains("<h1>raceway replay: "), "{index}");
    for chart in ["throughput.svg", "queues-h0.svg", "pfc.svg"] {
        assert!(index.contains(chart), "index.html lacks {chart}");
        let svg = std::fs::read_to_string(report.join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && (svg.contains("<polyline") || svg.contains("<rect")), "{chart}");
    }
    assert!(std::fs::read_to_string(report.join("queues-h0.svg")).unwrap().contains("ECN kmin"));

    // Groups: the spray chart's numbers are the stats' member counters.
    let group_dir = temp_dir("report-groups");
    let mixed = group_dir.join("mixed.pcap");
    run_ok(raceway().args(["gen", "mixed", "--packets", "400", "--out"]).arg(&mixed));
    let group_config = group_dir.join("leaf.toml");
    std::fs::write(&group_config, four_port_config("", ["", "", "", ""], "")).unwrap();
    let (group_out, group_report) = (group_dir.join("out"), group_dir.join("report"));
    run_ok(
        raceway()
            .args(["replay", "-c"])
            .arg(&group_config)
            .arg("--in")
            .arg(format!("host0={}", mixed.display()))
            .arg("--out")
            .arg(&group_out)
            .arg("--report")
            .arg(&group_report),
    );
    let group_series: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(group_report.join("series.json")).unwrap()).unwrap();
    let group_stats = stats(&group_out);
    let counts = &group_stats["groups"]["uplinks"];
    assert_eq!(group_series["groups"]["uplinks"]["up0"], counts["up0"]);
    assert_eq!(group_series["groups"]["uplinks"]["up1"], counts["up1"]);
    assert!(u64_of(&counts["up0"]) + u64_of(&counts["up1"]) > 0);
    assert!(group_report.join("groups.svg").exists());
}

#[test]
fn live_flag_mistakes_exit_2() {
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/demo.toml");
    fails_with_one_line(raceway().args(["run", "-c"]).arg(&demo).args(["--metrics", "localhost"]), &["--metrics"]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    fails_with_one_line(
        raceway().args(["run", "-c"]).arg(&demo).args(["--metrics", &port]),
        &["--metrics", "cannot listen"],
    );
}

/// The progress bar: on a terminal (script(1) gives the command a pseudo-terminal) it shows
/// frames, simulated time and an ETA; with --quiet, or on pipes as in CI, nothing.
#[test]
fn the_progress_bar_shows_on_a_terminal_only() {
    let dir = temp_dir("progress");
    let trace = dir.join("flows.pcap");
    run_ok(raceway().args(["--quiet", "gen", "flows", "--packets", "2000", "--out"]).arg(&trace));
    let config = dir.join("leaf.toml");
    std::fs::write(&config, leaf(2, "", "", "3")).unwrap();
    let replay = |out: &str, quiet: &str| {
        format!(
            "{} replay -c {} --in h0={} --out {} {quiet}",
            env!("CARGO_BIN_EXE_raceway"),
            config.display(),
            trace.display(),
            dir.join(out).display()
        )
    };
    let on_terminal = |command: String| {
        let output = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .output()
            .expect("script(1) is part of util-linux");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let shown = on_terminal(replay("tty", ""));
    assert!(shown.contains("ETA") && shown.contains("2000 frames") && shown.contains("simulated"), "{shown}");
    let quiet = on_terminal(replay("tty-quiet", "--quiet"));
    assert!(!quiet.contains("ETA"), "{quiet}");
    let piped = run_ok(
        raceway()
            .args(["replay", "-c"])
            .arg(&config)
            .arg("--in")
            .arg(format!("h0={}", trace.display()))
            .arg("--out")
            .arg(dir.join("piped")),
    );
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("ETA"));
    assert!(!String::from_utf8_lossy(&piped.stdout).contains("ETA"));
    // The fabric's bar counts the workload's frames delivered: 7 senders x 2 messages of
    // 8 KiB in 4 KiB frames, all of them at the end.
    let fabric = on_terminal(format!(
        "{} fabric -c {} --workload incast --messages 2 --message-bytes 8192 --out {}",
        env!("CARGO_BIN_EXE_raceway"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../config/fabric/leaf-spine.toml"),
        dir.join("fabric").display()
    ));
    assert!(fabric.contains("28/28 delivered") && fabric.contains("ETA"), "{fabric}");
}

/// `check` prints the automatic headroom part by part, as docs/CONFIG.md works it by hand for
/// 100 Gb/s, 3 m, MTU 9216: 814 cells with a PFC tx queue (a PCI NIC), 1,401 with one (memif).
#[test]
fn check_prints_each_part_of_the_auto_headroom() {
    let dir = temp_dir("cli-check-headroom");
    let path = dir.join("leaf.toml");
    let text = raceway::testing::Leaf::new("h")
        .qos("lossless = [3]")
        .port_to("nic", 100.0, "02:00:00:00:10:00", "cable_m = 3\ndevice = \"0000:3b:00.0\"")
        .port_to("memif", 100.0, "02:00:00:00:10:01", "cable_m = 3\ndevice = \"net_memif0\"")
        .toml();
    std::fs::write(&path, text).unwrap();
    let output = run_ok(raceway().args(["check", "-c"]).arg(&path));
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let parts = |port: &str| {
        let at = lines.iter().position(|l| l.contains(&format!("PFC {port} "))).unwrap_or_else(|| panic!("{text}"));
        (lines[at], lines[at + 1])
    };
    let (nic, nic_parts) = parts("nic");
    assert!(nic.contains("headroom 208384 bytes"), "{nic}");
    assert!(
        nic_parts.contains(
            "frame in progress 9258 + data ahead in the tx queue 0 (PFC has a tx queue of its own) + PFC frame 84 \
             + cable there and back 375 + peer's response 49344 + peer's frame in progress 9258 = 68319"
        ) && nic_parts.ends_with(": 814 cells"),
        "{nic_parts}"
    );
    let (memif, memif_parts) = parts("memif");
    assert!(memif.contains("headroom 358656 bytes"), "{memif}");
    assert!(
        memif_parts.contains("data ahead in the tx queue 49344 (one tx queue: the shaper's lookahead)")
            && memif_parts.contains("= 117663;")
            && memif_parts.ends_with(": 1401 cells"),
        "{memif_parts}"
    );
}
