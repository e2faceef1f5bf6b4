//! Live runs on net_pcap: the same frames per port as replay (one and two workers, a port
//! over two workers, jumbo frames, on hugepages), a config without devices, signals, PFC frames ahead of
//! data, ECN on a slow port, a port whose link is down, a port that fails to start.

use super::*;
use crate::bin::*;
use crate::util::*;

#[test]
fn live_run_on_net_pcap_matches_replay_and_leaks_no_mbufs() {
    let _cpus = cpus_shared();
    live_matches_replay("live", LiveCase::default());
}

/// One port over two workers: host0's frames arrive on two rx queues of its net_pcap port (an
/// rx_pcap file each: the vdev has no RSS, `rx_queues = 2`), one polled by its owner (with
/// host1), the other by the worker of up0 and up1; each worker's frames for the other's ports
/// cross between them, and the ports send what replay sends.
#[test]
fn a_port_spread_over_two_workers_matches_replay_and_leaks_no_mbufs() {
    let _cpus = cpus_shared();
    live_matches_replay("live-spread", LiveCase { spread: true, ..LiveCase::default() });
}

/// Two run-to-completion workers: host0 and host1 belong to one, up0 and up1 to the other, so
/// every forwarded frame crosses between them (and every lossless one's cells come back as
/// credits), and the ports send what replay sends.
#[test]
fn two_run_to_completion_workers_match_replay_and_leak_no_mbufs() {
    let _cpus = cpus_shared();
    live_matches_replay("live-shards", LiveCase { two_shards: true, ..LiveCase::default() });
}

/// Jumbo frames, with `switch.mtu = 9000`: host1 sends 9,000-byte frames, which net_pcap
/// hands over as chains of mbufs that cross the switch as they are (no copy) and leave
/// byte for byte as replay sends them, and a few of 9,216 bytes, longer than the MTU allows
/// (dropped as `oversize`, live as in replay); host0's small frames are unaffected; no mbuf
/// is lost. Captured frames are cut at the capture's snap length.
#[test]
fn jumbo_frames_cross_live_as_in_replay_and_leak_no_mbufs() {
    let _cpus = cpus_shared();
    live_matches_replay("live-jumbo", LiveCase { jumbo: true, ..LiveCase::default() });
}

/// Jumbo frames between two workers: host1's chains cross to up0's and up1's worker as they
/// are, beside host0's port spread over both.
#[test]
fn jumbo_frames_cross_between_workers_as_in_replay() {
    let _cpus = cpus_shared();
    live_matches_replay("live-jumbo-spread", LiveCase { spread: true, jumbo: true, ..LiveCase::default() });
}

/// On hugepages, as production runs: no `--no-huge`, and no `--no-shconf`, so the EAL shares
/// its memory and pdump is on (the path every other live test, on `--no-huge`, leaves out).
/// Runs where the machine has the pages free and mounted (`make hugepages`, which `make deps`
/// calls as root; no other test takes them); elsewhere it says it was skipped, on stderr.
#[test]
fn live_run_on_hugepages_matches_replay_and_leaks_no_mbufs() {
    let _cpus = cpus_shared();
    let needed_mb = 512;
    match free_hugepages_mb() {
        Some(free) if free >= needed_mb => {
            live_matches_replay("live-hugepages", LiveCase { hugepages_mb: Some(needed_mb), ..LiveCase::default() });
        }
        free => eprintln!(
            "skipped: {needed_mb} MB of hugepages needed, {} free and mounted (make hugepages, as root)",
            free.unwrap_or(0)
        ),
    }
}

/// Free 2 MB hugepages in megabytes, if a hugetlbfs is mounted.
fn free_hugepages_mb() -> Option<u64> {
    let mounted =
        std::fs::read_to_string("/proc/mounts").ok()?.lines().any(|line| line.split(' ').nth(2) == Some("hugetlbfs"));
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        meminfo.lines().find_map(|line| line.strip_prefix(name)?.trim().split(' ').next()?.parse().ok())
    };
    let (free, size_kb) = (field("HugePages_Free:")?, field("Hugepagesize:")?);
    mounted.then_some(free * size_kb / 1024)
}

/// How a live run that must match replay is set up.
#[derive(Debug, Default, Clone, Copy)]
struct LiveCase {
    /// Two workers, each owning two ports.
    two_shards: bool,
    /// `two_shards`, and host0's frames over two rx queues, one on each worker.
    spread: bool,
    /// host1 sends 9,000-byte frames and a few over the MTU, with `mtu = 9000`.
    jumbo: bool,
    /// The EAL on this many MB of hugepages, its memory shared (pdump on).
    hugepages_mb: Option<u64>,
}

fn live_matches_replay(name: &str, case: LiveCase) {
    let LiveCase { two_shards, spread, jumbo, hugepages_mb } = case;
    let two_shards = two_shards || spread;
    let dir = temp_dir(name);
    let host0 = raceway::traffic::gen::mixed(&raceway::traffic::gen::MixedOptions {
        packets: 600,
        seed: 11,
        rate_gbps: 20.0,
        ..Default::default()
    });
    let mut host1 = raceway::traffic::gen::mixed(&raceway::traffic::gen::MixedOptions {
        packets: 600,
        seed: 12,
        host: 1,
        frame_len: if jumbo { 9000 } else { 400 },
        rate_gbps: 20.0,
        ..Default::default()
    });
    if jumbo {
        let over_mtu = raceway::traffic::gen::mixed(&raceway::traffic::gen::MixedOptions {
            packets: 8,
            seed: 13,
            host: 1,
            frame_len: 9216,
            rate_gbps: 1.0,
            ..Default::default()
        });
        host1.extend(over_mtu);
        host1.sort_by_key(|(time, _)| *time);
    }
    write_pcap(&dir.join("in-host0.pcap"), &host0);
    write_pcap(&dir.join("in-host1.pcap"), &host1);
    // For two rx queues: host0's frames dealt alternately to two files.
    let halves: [Vec<(u64, Vec<u8>)>; 2] =
        [0, 1].map(|half| host0.iter().skip(half).step_by(2).cloned().collect::<Vec<_>>());
    write_pcap(&dir.join("in-host0-a.pcap"), &halves[0]);
    write_pcap(&dir.join("in-host0-b.pcap"), &halves[1]);
    let live_dir = dir.join("live");
    std::fs::create_dir_all(&live_dir).unwrap();
    let device = |index: usize, port: &str, input: bool| {
        let rx = match (input, spread && port == "host0") {
            (true, true) => format!("rx_pcap={0}/in-host0-a.pcap,rx_pcap={0}/in-host0-b.pcap,", dir.display()),
            (true, false) => format!("rx_pcap={}/in-{port}.pcap,", dir.display()),
            (false, _) => String::new(),
        };
        format!("net_pcap{index},{rx}tx_pcap={}/{port}.pcap", live_dir.display())
    };
    let devices =
        [device(0, "host0", true), device(1, "host1", true), device(2, "up0", false), device(3, "up1", false)];
    let eal = match hugepages_mb {
        // `--huge-unlink`: the pages go back however the run ends.
        Some(mb) => format!(r#""-m", "{mb}", "--huge-unlink", "--no-pci", "--log-level", "*:warning""#),
        None => r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#.to_string(),
    };
    let extra_switch = if jumbo { "mtu = 9000" } else { "" };
    let mut config_text = four_port_config(extra_switch, [&devices[0], &devices[1], &devices[2], &devices[3]], &eal);
    if two_shards {
        // Main lcore 0 and the first worker on CPU 0, the second worker on CPU 1.
        config_text = config_text.replace("lcores = \"0-1\"", "lcores = \"0@0,1@0,2@1\"");
    }
    if spread {
        config_text = config_text.replacen("name = \"host0\"\n", "name = \"host0\"\nrx_queues = 2\n", 1);
        assert!(config_text.contains("rx_queues = 2"), "host0 takes two rx queues");
    }
    let config = dir.join("leaf.toml");
    std::fs::write(&config, &config_text).unwrap();

    let stats_path = dir.join("live-stats.json");
    let prefix = format!("raceway-{name}-{}", std::process::id());
    let run = run_ok(
        raceway()
            .args(["--log-level", "info", "run", "-c"])
            .arg(&config)
            .args(["--duration", "2", "--stats-interval", "0.5", "--stats-json"])
            .arg(&stats_path)
            .arg("--capture")
            .arg(format!("host0={}", dir.join("capture.pcapng").display()))
            .arg("--capture")
            .arg(format!("up0={}", dir.join("capture.pcapng").display()))
            .args(["--", "--file-prefix", &prefix]),
    );
    let log = String::from_utf8_lossy(&run.stderr);
    assert_eq!(log.contains("pdump enabled"), hugepages_mb.is_some(), "pdump on with shared memory only: {log}");
    let live: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    assert_eq!(live["mbufs"]["available_at_exit"], live["mbufs"]["pool"], "mbufs leaked");
    assert_eq!(live["mbufs"]["unsent_at_exit"], 0);
    if jumbo {
        // Chains were carried, not copied: no jumbo pool was made (net_pcap sends chains).
        let parsed = raceway::config::Config::parse(&config_text, "leaf.toml").unwrap();
        let rx_queues = parsed.ports.iter().map(|port| u64::from(port.rx_queues)).sum();
        let plain = raceway::live::mempool_size(&parsed, rx_queues, if two_shards { 2 } else { 1 });
        assert_eq!(live["mbufs"]["pool"], plain, "only the plain mbuf pool");
    }

    let replay_dir = dir.join("replay");
    run_ok(
        raceway()
            .args(["replay", "-c"])
            .arg(&config)
            .arg("--in")
            .arg(format!("host0={}/in-host0.pcap", dir.display()))
            .arg("--in")
            .arg(format!("host1={}/in-host1.pcap", dir.display()))
            .arg("--out")
            .arg(&replay_dir),
    );
    let replayed = stats(&replay_dir);
    if jumbo {
        assert!(live["ports"]["host1"]["drops"]["oversize"].as_u64().unwrap() > 0, "{}", live["ports"]["host1"]);
        let longest = read_pcap(&live_dir.join("up0.pcap")).into_iter().chain(read_pcap(&live_dir.join("up1.pcap")));
        assert_eq!(longest.map(|(_, frame)| frame.len()).max(), Some(9000), "jumbo frames forwarded whole");
    }
    for port in PORTS {
        // Frames from different input ports may interleave differently live, so compare each
        // port's frames as a sorted multiset; frames from one input keep their order in both.
        let mut live_frames: Vec<Vec<u8>> =
            read_pcap(&live_dir.join(format!("{port}.pcap"))).into_iter().map(|(_, f)| f).collect();
        let mut replay_frames: Vec<Vec<u8>> =
            read_pcap(&replay_dir.join(format!("{port}.pcap"))).into_iter().map(|(_, f)| f).collect();
        assert!(!replay_frames.is_empty(), "{port} forwarded nothing");
        live_frames.sort();
        replay_frames.sort();
        assert_eq!(live_frames.len(), replay_frames.len(), "{port}: frame count");
        assert!(live_frames == replay_frames, "{port}: frames differ");
        for counter in ["rx_packets", "tx_packets", "tx_bytes", "drops"] {
            assert_eq!(live["ports"][port][counter], replayed["ports"][port][counter], "{port} {counter}");
        }
    }
    assert_eq!(live["groups"], replayed["groups"]);
    // The capture holds host0's frames as they came in and went out, and up0's output.
    let captured = read_pcapng(&dir.join("capture.pcapng"));
    let frames_of = |interface: &str, direction: u32| -> Vec<Vec<u8>> {
        captured.iter().filter(|c| c.0 == interface && c.1 == direction).map(|c| c.2.clone()).collect()
    };
    let snap = |frames: Vec<Vec<u8>>| -> Vec<Vec<u8>> {
        frames.into_iter().map(|frame| frame[..frame.len().min(raceway::observe::capture::SNAPLEN)].to_vec()).collect()
    };
    let mut inbound = frames_of("host0", 1);
    let mut offered: Vec<Vec<u8>> = snap(read_pcap(&dir.join("in-host0.pcap")).into_iter().map(|(_, f)| f).collect());
    if spread {
        // Two queues, two workers: each half stays in order, the halves interleave.
        inbound.sort();
        offered.sort();
    }
    assert!(inbound == offered, "host0 inbound: {} captured, {} offered", inbound.len(), offered.len());
    for port in ["host0", "up0"] {
        let sent: Vec<Vec<u8>> =
            snap(read_pcap(&live_dir.join(format!("{port}.pcap"))).into_iter().map(|(_, f)| f).collect());
        assert!(frames_of(port, 2) == sent, "{port} outbound differs from what the port sent");
    }
    assert_eq!(frames_of("up0", 1).len(), 0, "up0 received nothing");
    assert_eq!(live["capture"]["not_captured"], 0);
    if !jumbo {
        capture_replays_like_its_pcap(&dir, &config);
    }
    let workers = if two_shards { 2 } else { 1 };
    assert_eq!(live["cores"].as_array().unwrap().len(), workers, "one core entry per worker: {}", live["cores"]);
}

/// The live capture replays directly: host0's inbound frames, chosen in the two-interface
/// pcapng file with `:if=host0:dir=in`, give the same outputs as the same frames extracted to
/// a nanosecond pcap by tshark.
fn capture_replays_like_its_pcap(dir: &std::path::Path, config: &std::path::Path) {
    let capture = dir.join("capture.pcapng");
    let extracted = dir.join("host0-in.pcap");
    let output = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&capture)
        .args(["-Y", "frame.interface_name == \"host0\" && frame.packet_flags_direction == 1", "-F", "nsecpcap", "-w"])
        .arg(&extracted)
        .output()
        .expect("tshark is installed by make deps");
    assert!(output.status.success(), "tshark: {}", String::from_utf8_lossy(&output.stderr));
    let replay_with = |input: String, out: &str| {
        let out = dir.join(out);
        run_ok(raceway().args(["replay", "-c"]).arg(config).args(["--in", &input]).arg("--out").arg(&out));
        out
    };
    let from_capture = replay_with(format!("host0={}:if=host0:dir=in", capture.display()), "replay-capture");
    let from_pcap = replay_with(format!("host0={}", extracted.display()), "replay-extracted");
    for file in PORTS.iter().map(|port| format!("{port}.pcap")).chain(["stats.json".to_string()]) {
        let (a, b) = (std::fs::read(from_capture.join(&file)).unwrap(), std::fs::read(from_pcap.join(&file)).unwrap());
        assert!(a == b, "{file} differs");
    }
    assert!(stats(&from_capture)["ports"]["host0"]["rx_packets"].as_u64().unwrap() > 0);
}

#[test]
fn live_config_without_devices_is_a_clear_error() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-nodev");
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", ["", "", "", ""], "")).unwrap();
    let output = raceway().args(["run", "-c"]).arg(&config).args(["--duration", "1"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("port[0].device"), "{stderr}");
}

#[test]
fn sighup_reloads_and_sigterm_stops_cleanly_with_stats_written() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-sigterm");
    let frames = raceway::traffic::gen::mixed(&raceway::traffic::gen::MixedOptions {
        packets: 200,
        seed: 5,
        ..Default::default()
    });
    write_pcap(&dir.join("in.pcap"), &frames);
    // infinite_rx replays the trace forever: the switch is under load when the signal comes.
    let devices = with_null_sinks(format!("net_pcap10,rx_pcap={}/in.pcap,infinite_rx=1", dir.display()), 10);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let stats_path = dir.join("stats.json");
    let prefix = format!("raceway-sigterm-{}", std::process::id());
    let log = dir.join("raceway.log");
    let mut child = start_switch(&config, &stats_path, &log, &prefix);
    let runtime_dir = dpdk_runtime_dir(&prefix);
    assert!(runtime_dir.is_dir(), "no EAL runtime directory {}", runtime_dir.display());
    // Signal once it is forwarding under load: its counters (read as an operator would)
    // show thousands of frames through.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let output =
            raceway().args(["show", "--prefix", &prefix, "--json", "counters", "--period", "0.05"]).output().unwrap();
        let through = serde_json::from_slice::<serde_json::Value>(&output.stdout)
            .ok()
            .and_then(|counters| counters["counters"][0]["rx_ok"].as_u64())
            .unwrap_or(0);
        if through > 1000 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the switch never forwarded under load");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // What a `systemctl reload` or logrotate sends does not end it: SIGHUP reloads the
    // config (unchanged here), and frames keep coming through. (SIGUSR2 starts a successor
    // that takes the switch over: `take_over.rs`.)
    let through = |prefix: &str| {
        let output =
            raceway().args(["show", "--prefix", prefix, "--json", "counters", "--period", "0.05"]).output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()["counters"][0]["rx_ok"].as_u64().unwrap()
    };
    signal(child.0.id(), "HUP");
    wait_for_log(&log, "SIGHUP: reload: nothing changed");
    let before = through(&prefix);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while through(&prefix) <= before {
        assert!(std::time::Instant::now() < deadline, "nothing forwarded after SIGHUP");
    }
    signal(child.0.id(), "TERM");
    let status = child.wait_for_exit();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "exit {status:?}: {stderr}");
    // The EAL's runtime directory went with the process (the EAL itself leaves it).
    assert!(!runtime_dir.exists(), "{} left behind", runtime_dir.display());
    // And so did the ports lock a switch taking over would have waited on.
    let ports_lock = runtime_dir.with_file_name(format!("raceway-{prefix}.ports.lock"));
    assert!(!ports_lock.exists(), "{} left behind", ports_lock.display());
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"], "mbufs leaked: {stderr}");
    let rx = stats["ports"]["host0"]["rx_packets"].as_u64().unwrap();
    assert!(rx > 1000, "forwarded only {rx} frames under load");
    // net_null with no-rx=1 sends nothing, so all traffic is host0's.
    let rx_all: u64 = PORTS.iter().map(|p| stats["ports"][p]["rx_packets"].as_u64().unwrap()).sum();
    assert_eq!(rx_all, rx);
    let tx: u64 = PORTS.iter().map(|p| stats["ports"][p]["tx_packets"].as_u64().unwrap()).sum();
    let drops: u64 = PORTS
        .iter()
        .map(|p| stats["ports"][p]["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum::<u64>())
        .sum();
    assert_eq!(rx, tx + drops, "conservation after the drain");
    // The forwarding core reports its cycles per packet and busy share under load.
    let core = &stats["cores"][0];
    assert_eq!(core["lcore"], 1);
    assert!(core["packets"].as_u64().unwrap() >= rx - 64, "{core}");
    let busy = core["busy_percent"].as_f64().unwrap();
    assert!(busy > 10.0 && busy <= 100.0, "{core}");
    assert!(core["cycles_per_packet"].as_f64().unwrap() > 1.0, "{core}");
    assert_eq!(stats["latency_ns"]["samples"].as_u64().unwrap(), tx);
    let (p50, p99) = (stats["latency_ns"]["p50"].as_u64().unwrap(), stats["latency_ns"]["p99"].as_u64().unwrap());
    assert!(p50 > 0 && p50 <= p99, "live latency p50 {p50} p99 {p99}: rx and tx must be timed apart");
}

#[test]
fn live_pfc_frames_are_sent_ahead_of_data_and_counted() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-pfc");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    write_pcap(&dir.join("in-host1.pcap"), &flood_to_host0(1));
    write_pcap(&dir.join("in-up0.pcap"), &flood_to_host0(2));
    let mut xoff = vec![0x01, 0x80, 0xc2, 0, 0, 0x01, 2, 0, 0, 0, 0x10, 0, 0x88, 0x08, 0x01, 0x01, 0x00, 0x08];
    xoff.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0, 0]);
    xoff.resize(60, 0);
    write_pcap(&dir.join("in-host0.pcap"), &[(0, xoff)]);
    let device = |index: usize, port: &str| {
        format!("net_pcap{},rx_pcap={}/in-{port}.pcap,tx_pcap={}/{port}.pcap", 20 + index, dir.display(), out.display())
    };
    // host1 sends its PFC frames on a tx queue of their own: net_pcap writes each tx queue to
    // its own file, so the second file holds exactly what left on the PFC queue.
    let host1 = format!("{},tx_pcap={}/host1-pfc.pcap", device(1, "host1"), out.display());
    let devices = [device(0, "host0"), host1.clone(), device(2, "up0"), "net_null20,no-rx=1".to_string()];
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config_text = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)
        .replacen("speed_gbps = 100", "speed_gbps = 1", 1)
        .replace(&format!("device = \"{host1}\""), &format!("device = \"{host1}\"\npfc_tx_queue = true"))
        .replace("lossless = [3]", "lossless = [3]\n[qos.pfc]\nxoff_bytes = 100000\nheadroom_bytes = 200000");
    assert!(config_text.contains("pfc_tx_queue = true"));
    let config = dir.join("leaf.toml");
    std::fs::write(&config, &config_text).unwrap();
    let stats = run_live(&dir, &config, "pfc", &[]);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"], "mbufs leaked");
    assert_eq!(stats["ports"]["host0"]["pfc_rx"], serde_json::json!([0, 0, 0, 1, 0, 0, 0, 0]));
    let mut overflow = 0;
    for port in ["host1", "up0"] {
        let s = &stats["ports"][port];
        let xoff_tx = s["pfc_xoff_tx"][3].as_u64().unwrap();
        let xon_tx = s["pfc_xon_tx"][3].as_u64().unwrap();
        assert!(xoff_tx > 0 && xon_tx > 0, "{port}: xoff {xoff_tx} xon {xon_tx}");
        overflow += s["drops"]["headroom_overflow"].as_u64().unwrap();
        let frames = read_pcap(&out.join(format!("{port}.pcap")));
        let is_pfc = |f: &&Vec<u8>| f[12..14] == [0x88, 0x08];
        let mut pfc: Vec<&Vec<u8>> = frames.iter().map(|(_, f)| f).filter(is_pfc).collect();
        let pfc_queue = if port == "host1" { read_pcap(&out.join("host1-pfc.pcap")) } else { Vec::new() };
        if port == "host1" {
            assert!(pfc.is_empty(), "host1: PFC frames on the data queue");
            assert!(pfc_queue.iter().map(|(_, f)| f).all(|f| is_pfc(&f)), "host1: data on the PFC queue");
            pfc = pfc_queue.iter().map(|(_, f)| f).collect();
        }
        assert_eq!(pfc.len() as u64, xoff_tx + xon_tx, "{port}: PFC frames on the wire");
        assert_eq!(pfc[0][14 + 4 + 6..14 + 4 + 8], [0xff, 0xff], "{port}: XOFF first");
        assert_eq!(pfc[0].len(), 60);
    }
    assert!(overflow > 0, "pcap peers ignore PFC, so the headroom must overflow");
    let delivered = stats["ports"]["host0"]["tx_packets"].as_u64().unwrap();
    assert_eq!(delivered + overflow, 4000, "conservation");
}

/// ECN on real DPDK ports: a slow (1 Gb/s) egress port builds a queue, and the live worker
/// marks ECT frames CE past kmin, counting exactly the frames the capture shows marked.
#[test]
fn live_path_marks_ecn_on_a_slow_egress_port() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-ecn");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    write_pcap(&dir.join("in-host1.pcap"), &flood_to_host0(1));
    write_pcap(&dir.join("in-up0.pcap"), &flood_to_host0(2));
    let device = |index: usize, port: &str, input: bool| {
        let rx = if input { format!("rx_pcap={}/in-{port}.pcap,", dir.display()) } else { String::new() };
        format!("net_pcap{},{rx}tx_pcap={}/{port}.pcap", 30 + index, out.display())
    };
    let devices =
        [device(0, "host0", false), device(1, "host1", true), device(2, "up0", true), "net_null30,no-rx=1".to_string()];
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config_text = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)
        .replacen("speed_gbps = 100", "speed_gbps = 1", 1)
        .replace("lossless = [3]", "lossless = [3]\n[qos.ecn.3]\nkmin_bytes = 20000\nkmax_bytes = 200000\npmax = 0.5");
    let config = dir.join("leaf.toml");
    std::fs::write(&config, &config_text).unwrap();
    let stats = run_live(&dir, &config, "ecn", &["--seed", "5"]);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"], "mbufs leaked");
    let frames = read_pcap(&out.join("host0.pcap"));
    assert_eq!(frames.len(), 4000, "every frame delivered");
    let ce = frames.iter().filter(|(_, f)| f[15] & 3 == 3).count() as u64;
    let marked = stats["ports"]["host0"]["queues"][3]["ecn_marked"].as_u64().unwrap();
    assert!(ce > 100, "only {ce} frames marked");
    assert_eq!(ce, marked, "ecn_marked must match the capture");
    assert!(frames.iter().all(|(_, f)| ipv4_header_checksum_ok(&f[14..])));
}

/// Trimming on real DPDK ports: two senders flood a lossy class (TC0) into a 1 Gb/s port
/// behind a 64 KiB lossy pool. What the buffer refuses is cut in its mbuf to 128 bytes,
/// remarked DSCP 48 and sent from the strict TC6 queue; every frame leaves whole or trimmed
/// or is counted, the counters match the capture, every IPv4 header still sums, and every
/// mbuf (the cut ones included) is back in the pool at exit.
#[test]
fn live_path_trims_what_a_full_lossy_buffer_refuses() {
    const TRIM_SIZE: usize = 128;
    let _cpus = cpus_shared();
    let dir = temp_dir("live-trim");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let lossy = |host: u8| -> Vec<(u64, Vec<u8>)> {
        flood_to_host0(host)
            .into_iter()
            .map(|(time, mut frame)| {
                frame[15] = 0x02; // DSCP 0 (TC0, lossy), ECT(0)
                fix_ipv4_checksum(&mut frame[14..34]);
                (time, frame)
            })
            .collect()
    };
    write_pcap(&dir.join("in-host1.pcap"), &lossy(1));
    write_pcap(&dir.join("in-up0.pcap"), &lossy(2));
    let device = |index: usize, port: &str, input: bool| {
        let rx = if input { format!("rx_pcap={}/in-{port}.pcap,", dir.display()) } else { String::new() };
        format!("net_pcap{},{rx}tx_pcap={}/{port}.pcap", 60 + index, out.display())
    };
    let devices =
        [device(0, "host0", false), device(1, "host1", true), device(2, "up0", true), "net_null60,no-rx=1".to_string()];
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let trimming = format!("\n[qos.buffer]\nlossy_pool_bytes = 65536\n[qos.trim]\nsize = {TRIM_SIZE}\ndscp = 48\n");
    let config_text = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal).replacen(
        "speed_gbps = 100",
        "speed_gbps = 1",
        1,
    ) + &trimming;
    let config = dir.join("leaf.toml");
    std::fs::write(&config, &config_text).unwrap();
    let stats = run_live(&dir, &config, "trim", &[]);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"], "mbufs leaked");
    let frames = read_pcap(&out.join("host0.pcap"));
    let cut: Vec<&Vec<u8>> = frames.iter().map(|(_, frame)| frame).filter(|frame| frame.len() == TRIM_SIZE).collect();
    let whole = frames.iter().filter(|(_, frame)| frame.len() == 1000).count();
    assert_eq!(cut.len() + whole, frames.len(), "a frame left neither whole nor trimmed");
    let queues = &stats["ports"]["host0"]["queues"];
    let counter = |queue: usize, name: &str| queues[queue][name].as_u64().unwrap();
    assert!(cut.len() > 100, "only {} frames trimmed", cut.len());
    assert_eq!(counter(6, "trim_tx"), cut.len() as u64, "trim_tx must match the capture");
    assert_eq!(counter(0, "trimmed"), cut.len() as u64 + counter(0, "trim_dropped"));
    // A frame refused whole and then as trimmed counts as dropped in its queue (and at its
    // ingress port), and in trim_dropped.
    let ingress_drops: u64 = ["host1", "up0"]
        .iter()
        .flat_map(|port| stats["ports"][port]["drops"].as_object().unwrap().values())
        .map(|count| count.as_u64().unwrap())
        .sum();
    assert_eq!(counter(0, "dropped"), ingress_drops);
    assert_eq!(whole as u64 + cut.len() as u64 + counter(0, "dropped"), 4000, "conservation");
    for frame in &cut {
        assert_eq!(frame[15] >> 2, 48, "trimmed frames carry the trim DSCP");
        assert_eq!(usize::from(u16::from_be_bytes([frame[16], frame[17]])), TRIM_SIZE - 14, "IPv4 total length");
        assert_eq!(usize::from(u16::from_be_bytes([frame[38], frame[39]])), TRIM_SIZE - 34, "UDP length");
        assert!(ipv4_header_checksum_ok(&frame[14..34]));
    }
    assert!(frames.iter().all(|(_, frame)| ipv4_header_checksum_ok(&frame[14..34])));
}

/// A port whose link is down (a net_memif server nobody connects to: net_memif reports its
/// connection as the link) holds nothing: lossy and lossless frames for it are dropped and
/// counted as `link_down` as they come, nothing is queued for it (so no XOFF goes upstream and
/// no headroom fills), nothing is handed to its tx queue, and every mbuf is back at exit.
#[test]
fn a_port_whose_link_is_down_holds_nothing_and_counts_every_frame() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-link-down");
    let lossless = flood_to_host0(1);
    let lossy: Vec<(u64, Vec<u8>)> = lossless
        .iter()
        .map(|(t, f)| {
            let mut frame = f.clone();
            frame[15] = 0x02; // DSCP 0 (TC 0), ECT(0)
            fix_ipv4_checksum(&mut frame[14..34]);
            (*t + 50, frame)
        })
        .collect();
    let mut mixed: Vec<(u64, Vec<u8>)> = lossless.into_iter().chain(lossy).collect();
    mixed.sort_by_key(|(t, _)| *t);
    write_pcap(&dir.join("in-host1.pcap"), &mixed);
    let socket = format!("raceway-down-{}", std::process::id());
    let devices = [
        format!("net_memif50,role=server,socket={socket}"),
        format!("net_pcap50,rx_pcap={}/in-host1.pcap", dir.display()),
        "net_null50,no-rx=1".to_string(),
        "net_null51,no-rx=1".to_string(),
    ];
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    std::fs::write(
        &config,
        four_port_config("buffer_bytes = 2097152", [&devices[0], &devices[1], &devices[2], &devices[3]], eal),
    )
    .unwrap();
    let stats = run_live(&dir, &config, "down", &[]);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"], "mbufs leaked");
    let host1 = &stats["ports"]["host1"];
    assert_eq!(host1["rx_packets"], 4000);
    let drops = &host1["drops"];
    assert_eq!(drops["link_down"], 4000, "{drops}");
    assert_eq!(host1["pfc_xoff_tx"][3], 0, "nothing queued, so nothing to pause");
    assert_eq!(stats["ports"]["host0"]["tx_packets"], 0);
    assert_eq!(stats["mbufs"]["unsent_at_exit"], 0);
    let dropped: u64 = drops.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(dropped, 4000, "every frame accounted for, once");
}

/// A device that fails to start (its capture file is missing) ends the run with one error
/// line naming the port, after DPDK's own messages, and exit status 2.
#[test]
fn a_port_that_fails_to_start_is_a_clear_error() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-badstart");
    let devices = with_null_sinks("net_pcap60,rx_pcap=/nonexistent/raceway.pcap".to_string(), 60);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let prefix = format!("raceway-badstart-{}", std::process::id());
    // `raceway run` exits 2 with one error line, no panic; the line.
    let the_error = |prefix: &str| -> String {
        let output = raceway()
            .args(["run", "-c"])
            .arg(&config)
            .args(["--duration", "1", "--", "--file-prefix", prefix])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let ours: Vec<&str> = error_lines(&stderr);
        assert_eq!(ours.len(), 1, "{stderr}");
        assert!(!stderr.contains("panicked"));
        ours[0].to_string()
    };
    let error = the_error(&prefix);
    assert!(error.contains("port 'host0'") && error.contains("net_pcap60"), "{error}");

    // A PFC tx queue asked of a device with one tx queue (net_pcap: one per tx_pcap file).
    let input = dir.join("in.pcap");
    write_pcap(&input, &[]);
    let device = format!("net_pcap61,rx_pcap={},tx_pcap={}/out.pcap", input.display(), dir.display());
    let devices = with_null_sinks(device.clone(), 61);
    let text = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)
        .replace(&format!("device = \"{device}\""), &format!("device = \"{device}\"\npfc_tx_queue = true"));
    assert!(text.contains("pfc_tx_queue = true"));
    std::fs::write(&config, text).unwrap();
    let error = the_error(&format!("{prefix}-pfcq"));
    assert!(error.contains("port 'host0'") && error.contains("set pfc_tx_queue = false"), "{error}");
    // A run that failed to start leaves no take-over lock behind.
    for prefix in [prefix.clone(), format!("{prefix}-pfcq")] {
        let lock = dpdk_runtime_dir(&prefix).with_file_name(format!("raceway-{prefix}.ports.lock"));
        assert!(!lock.exists(), "{} left behind", lock.display());
    }
}
