//! The live switch on real DPDK ports (net_pcap virtual devices): the same trace gives the
//! same frames per port as replay, counters agree, and every mbuf is back in the pool at exit.

use crate::bin::*;
use crate::util::*;
use serde_json::json;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Live tests run busy-polling DPDK processes side by side. Most tolerate sharing the CPUs;
/// one whose outcome depends on how fast a host reacts to a pause (the PFC-honouring incast)
/// takes them alone.
static CPUS: RwLock<()> = RwLock::new(());

fn cpus_shared() -> RwLockReadGuard<'static, ()> {
    CPUS.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn cpus_alone() -> RwLockWriteGuard<'static, ()> {
    CPUS.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

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

/// How a live run that must match replay is set up.
#[derive(Debug, Default, Clone, Copy)]
struct LiveCase {
    /// Two workers, each owning two ports.
    two_shards: bool,
    /// `two_shards`, and host0's frames over two rx queues, one on each worker.
    spread: bool,
    /// host1 sends 9,000-byte frames and a few over the MTU, with `mtu = 9000`.
    jumbo: bool,
}

fn live_matches_replay(name: &str, case: LiveCase) {
    let LiveCase { two_shards, spread, jumbo } = case;
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
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let extra_switch = if jumbo { "mtu = 9000" } else { "" };
    let mut config_text = four_port_config(extra_switch, [&devices[0], &devices[1], &devices[2], &devices[3]], eal);
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
    run_ok(
        raceway()
            .args(["run", "-c"])
            .arg(&config)
            .args(["--duration", "2", "--stats-interval", "0.5", "--stats-json"])
            .arg(&stats_path)
            .arg("--capture")
            .arg(format!("host0={}", dir.join("capture.pcapng").display()))
            .arg("--capture")
            .arg(format!("up0={}", dir.join("capture.pcapng").display()))
            .args(["--", "--file-prefix", &prefix]),
    );
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
fn sighup_is_noted_and_sigterm_stops_cleanly_with_stats_written() {
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
    // What a `systemctl reload` or logrotate sends does not end it: SIGHUP and SIGUSR2 are
    // noted, and frames keep coming through.
    let through = |prefix: &str| {
        let output =
            raceway().args(["show", "--prefix", prefix, "--json", "counters", "--period", "0.05"]).output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()["counters"][0]["rx_ok"].as_u64().unwrap()
    };
    for name in ["HUP", "USR2"] {
        signal(child.0.id(), name);
        wait_for_log(&log, &format!("SIG{name}: noted; the switch goes on"));
    }
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

/// PFC on real DPDK ports: two senders flood a lossless class into a port shaped to 1 Gb/s.
/// The switch sends XOFF (built in mbufs, ahead of data) to both, then XON once drained, on
/// host1 over a tx queue of their own; a net_pcap peer ignores PFC, so its excess overflows
/// the headroom and is counted. A PFC frame received on the egress port is counted.
/// 2,000 lossless RoCEv2 frames of 1000 bytes from 10.0.1.<host> to 10.0.0.2.
fn flood_to_host0(host: u8) -> Vec<(u64, Vec<u8>)> {
    let mut spec = raceway::traffic::frames::FrameSpec::rocev2(
        std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, host)),
        "10.0.0.2".parse().unwrap(),
        u32::from(host),
    );
    spec.frame_len = 1000;
    (0..2000u64).map(|i| (i * 100, spec.build())).collect()
}

/// Runs raceway live for 2 s on `config` (with its own file prefix) and returns its stats.
fn run_live(dir: &std::path::Path, config: &std::path::Path, name: &str, extra: &[&str]) -> serde_json::Value {
    let stats_path = dir.join("stats.json");
    let prefix = format!("raceway-live-{name}-{}", std::process::id());
    run_ok(
        raceway()
            .args(["run", "-c"])
            .arg(config)
            .args(["--duration", "2"])
            .args(extra)
            .arg("--stats-json")
            .arg(&stats_path)
            .args(["--", "--file-prefix", &prefix]),
    );
    serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap()
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

/// Four port devices: `input`, then three net_null sinks (no rx) named from `first_null`
/// (vdev names are per process, so tests may share them).
fn with_null_sinks(input: String, first_null: u32) -> [String; 4] {
    let sink = |offset: u32| format!("net_null{},no-rx=1", first_null + offset);
    [input, sink(0), sink(1), sink(2)]
}

/// A child process killed if the test fails before it is waited for.
struct KillOnDrop(std::process::Child);

impl KillOnDrop {
    /// Waits (up to 60 s: a bound on hangs, never reached by a working run) for the process
    /// to exit.
    fn wait_for_exit(&mut self) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "raceway did not exit");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Starts `raceway run` on `config` (stats JSON at exit, log to `log`) and returns once its
/// worker runs: memif sockets may be abstract, so there is no file to watch.
fn start_switch(config: &std::path::Path, stats: &std::path::Path, log: &std::path::Path, prefix: &str) -> KillOnDrop {
    start_switch_by(raceway(), config, stats, log, prefix)
}

/// `start_switch` with `command` running raceway (raceway itself, or a wrapper such as
/// taskset given raceway's path).
fn start_switch_by(
    mut command: std::process::Command,
    config: &std::path::Path,
    stats: &std::path::Path,
    log: &std::path::Path,
    prefix: &str,
) -> KillOnDrop {
    let switch = KillOnDrop(
        command
            .args(["run", "-c"])
            .arg(config)
            .arg("--stats-json")
            .arg(stats)
            .args(["--", "--file-prefix", prefix])
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_log(log, "worker on lcore");
    switch
}

/// Waits until `log` contains `text`, for up to 90 s: a bound on hangs. On a loaded machine a
/// switch took 21 s from the EAL's start to its worker (CI: four DPDK processes creating their
/// pools at once on two CPUs).
fn wait_for_log(log: &std::path::Path, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while !std::fs::read_to_string(log).unwrap_or_default().contains(text) {
        assert!(std::time::Instant::now() < deadline, "raceway never logged '{text}'");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `raceway blast` paces a trace into raceway over net_memif: raceway receives exactly the
/// frames blast reports sent (refusals are counted apart, never as sent), both return every
/// mbuf, and the achieved rate is close to the one asked for.
#[test]
fn blast_feeds_raceway_over_memif_and_every_frame_is_accounted() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-blast");
    let socket = dir.join("memif.sock");
    let trace = dir.join("flows.pcap");
    run_ok(raceway().args(["gen", "flows", "--packets", "100", "--out"]).arg(&trace));
    let devices = with_null_sinks(format!("net_memif40,role=server,socket={}", socket.display()), 40);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:error""#;
    // The flows go to 10.0.1.x: host1 (a net_null).
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let stats_path = dir.join("stats.json");
    let prefix = format!("raceway-blast-rw-{}", std::process::id());
    let mut switch = start_switch(&config, &stats_path, &dir.join("raceway.log"), &prefix);
    let blast = run_ok(
        raceway()
            .args(["--log-level", "error", "blast", "--trace"])
            .arg(&trace)
            .arg("--device")
            .arg(format!("net_memif0,role=client,socket={}", socket.display()))
            .args(["--rate-gbps", "1", "--duration", "1", "--", "-l", "0", "--no-huge", "-m", "256"])
            .args(["--no-pci", "--no-shconf", "--log-level", "*:error", "--file-prefix"])
            .arg(format!("raceway-blast-gen-{}", std::process::id())),
    );
    // Blast has closed its link after letting raceway drain it: stop raceway.
    let killed = std::process::Command::new("kill").args(["-TERM", &switch.0.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = switch.0.wait().unwrap();
    let log = std::fs::read_to_string(dir.join("raceway.log")).unwrap_or_default();
    assert!(status.success(), "raceway failed: {log}");
    let report: serde_json::Value = serde_json::from_slice(&blast.stdout).unwrap();
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    let sent = report["sent"].as_u64().unwrap();
    // How much blast manages depends on the machine's load; what must hold is that every frame
    // it sent is accounted for and that it never exceeds the rate asked for.
    assert!(sent > 10_000, "blast sent only {sent} at 1 Gb/s: {report}");
    let received = stats["ports"]["host0"]["rx_packets"].as_u64().unwrap();
    assert_eq!(received, sent, "raceway received {received}; blast: {report}");
    assert_eq!(stats["ports"]["host1"]["tx_packets"].as_u64().unwrap(), sent);
    assert_eq!(report["mbufs"]["available_at_exit"], report["mbufs"]["pool"]);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"]);
    let gbps = report["gbps_on_wire"].as_f64().unwrap();
    assert!(gbps > 0.0 && gbps < 1.05, "{gbps} Gb/s: the pacer went past the rate");
}

/// A memif peer that vanishes mid-traffic does not take the switch down. net_memif unmaps a
/// connection's memory on the EAL interrupt thread while a worker may be inside a burst on the
/// port (ffi/src/shim.c, "Bursts against a driver's teardown"). Here the switch's worker, main
/// lcore and interrupt thread share one CPU, so the interrupt thread handles the disconnect
/// exactly when it has taken the CPU from the worker, often in the middle of a burst: without
/// the guard the switch died of SIGSEGV within a few of these. A `raceway blast` host is
/// killed (SIGKILL: the kernel closes its socket, no goodbye) while sending, several times;
/// the switch keeps forwarding for each new one, exits cleanly and returns every mbuf.
#[test]
fn switch_survives_memif_peers_vanishing_mid_traffic() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-memif-vanish");
    let socket = dir.join("memif.sock");
    let trace = dir.join("flows.pcap");
    run_ok(raceway().args(["gen", "flows", "--packets", "100", "--size", "1500", "--out"]).arg(&trace));
    let devices = with_null_sinks(format!("net_memif50,role=server,socket={}", socket.display()), 50);
    let eal = r#""--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--log-level", "*:error""#;
    // The first CPU this test may use: the process, its lcores and so its interrupt thread
    // (DPDK puts control threads on the CPUs the lcores leave, else on the main lcore's) on it.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).unwrap().trim();
    let cpu: u32 = allowed.split([',', '-']).next().unwrap().parse().unwrap();
    let config = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)
        .replace("lcores = \"0-1\"", &format!("lcores = \"0@{cpu},1@{cpu}\""));
    assert!(config.contains(&format!("1@{cpu}")), "{config}");
    let config_path = dir.join("leaf.toml");
    std::fs::write(&config_path, config).unwrap();
    let stats_path = dir.join("stats.json");
    let log = dir.join("raceway.log");
    let prefix = format!("raceway-vanish-{}", std::process::id());
    let mut taskset = std::process::Command::new("taskset");
    taskset.args(["-c", &cpu.to_string()]).arg(env!("CARGO_BIN_EXE_raceway"));
    let mut switch = start_switch_by(taskset, &config_path, &stats_path, &log, &prefix);
    const PEERS: usize = 6;
    for peer in 0..PEERS {
        let blast_log = dir.join(format!("blast{peer}.log"));
        let blast_prefix = format!("raceway-vanish-blast-{}-{peer}", std::process::id());
        let blast = KillOnDrop(
            raceway()
                .args(["blast", "--trace"])
                .arg(&trace)
                .arg("--device")
                .arg(format!("net_memif0,role=client,socket={},rsize=14", socket.display()))
                .args(["--rate-gbps", "400", "--duration", "60", "--", "-l", "0", "--no-huge", "-m", "256"])
                .args(["--no-pci", "--no-shconf", "--no-telemetry", "--log-level", "*:error", "--file-prefix"])
                .arg(&blast_prefix)
                .stderr(std::fs::File::create(&blast_log).unwrap())
                .spawn()
                .unwrap(),
        );
        // Until this peer sends, the switch must live on (it took the last peer's end).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !read(&blast_log).contains("sending at 400 Gb/s") {
            if let Some(status) = switch.0.try_wait().unwrap() {
                panic!("raceway ({status}) died before peer {peer} sent: {}", read(&log));
            }
            assert!(std::time::Instant::now() < deadline, "blast {peer} never sent: {}", read(&blast_log));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Freeze the switch and let the peer fill the link's ring (16 k slots: about 10 ms of
        // blast's sending; a shorter wait only leaves less to copy), then kill the peer. On
        // waking, the switch's worker spends the next milliseconds copying frames out of that
        // ring, while its interrupt thread, on the same CPU, handles the socket's end: it runs
        // when the worker loses the CPU, most often mid-burst.
        signal(switch.0.id(), "STOP");
        wait_until_stopped(switch.0.id());
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(blast);
        signal(switch.0.id(), "CONT");
        // The runtime directory of the killed process (ours: its unique prefix).
        let _ = std::fs::remove_dir_all(dpdk_runtime_dir(&blast_prefix));
    }
    signal(switch.0.id(), "TERM");
    let status = switch.wait_for_exit();
    assert!(status.success(), "raceway ({status}): {}", read(&log));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    let received = stats["ports"]["host0"]["rx_packets"].as_u64().unwrap();
    assert!(received > 0, "no traffic reached the switch: {stats}");
    assert_eq!(stats["ports"]["host1"]["tx_packets"].as_u64().unwrap(), received);
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"]);
}

/// DPDK's runtime directory for a file prefix, by the EAL's rule: under /var/run/dpdk as
/// root, else under $XDG_RUNTIME_DIR (or /tmp) /dpdk.
fn dpdk_runtime_dir(prefix: &str) -> std::path::PathBuf {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find_map(|line| line.strip_prefix("Uid:")).unwrap().split_whitespace().next().unwrap();
    let base = if uid == "0" {
        "/var/run".to_string()
    } else {
        std::env::var("XDG_RUNTIME_DIR").unwrap_or_else(|_| "/tmp".to_string())
    };
    std::path::Path::new(&base).join("dpdk").join(prefix)
}

/// The whole records of a pcap file that may still be growing (0 until its header is there).
fn whole_pcap_records(path: &std::path::Path) -> u64 {
    let bytes = std::fs::read(path).unwrap_or_default();
    let (mut at, mut records) = (24, 0);
    while at + 16 <= bytes.len() {
        let captured = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + captured > bytes.len() {
            break;
        }
        at += 16 + captured;
        records += 1;
    }
    records
}

fn signal(pid: u32, name: &str) {
    let sent = std::process::Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}

/// Waits until every thread of `pid` is stopped (state T in /proc).
fn wait_until_stopped(pid: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().all(|task| {
            let stat = std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
            // "pid (comm) S ...": the state follows the command's closing parenthesis.
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
        })
    };
    while !stopped() {
        assert!(std::time::Instant::now() < deadline, "process {pid} did not stop");
        std::thread::yield_now();
    }
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// (interface name, direction flags, bytes) of every packet of a pcapng file.
fn read_pcapng(path: &std::path::Path) -> Vec<(String, u32, Vec<u8>)> {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut reader = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut names = Vec::new();
    let mut packets = Vec::new();
    while let Some(block) = reader.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(idb) => names.push(
                idb.options
                    .iter()
                    .find_map(|o| match o {
                        InterfaceDescriptionOption::IfName(name) => Some(name.to_string()),
                        _ => None,
                    })
                    .unwrap_or_default(),
            ),
            Block::EnhancedPacket(epb) => {
                let flags = epb
                    .options
                    .iter()
                    .find_map(|o| match o {
                        EnhancedPacketOption::Flags(flags) => Some(*flags),
                        _ => None,
                    })
                    .unwrap_or(0);
                packets.push((names[epb.interface_id as usize].clone(), flags, epb.data.to_vec()));
            }
            _ => {}
        }
    }
    packets
}

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
        let ours: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
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
}

/// A switch config of the live fabric. PFC goes early (static XOFF at 100 KB) and the headroom
/// is large (4 MiB per priority group): these processes share two CPUs, so a switch reacts
/// to a pause in scheduler time slices (milliseconds), not the microseconds the automatic
/// headroom allows for. `ports` are (name, device, speed Gb/s),
/// `routes` (prefix, port or group), and an uplink group `spines` over `group` when given.
fn live_switch(
    name: &str,
    mac: &str,
    ports: &[(&str, String, &str)],
    routes: &[(&str, &str)],
    group: &[&str],
) -> String {
    let mut text = format!(
        "[switch]\nname = \"{name}\"\nmac = \"{mac}\"\nbuffer_bytes = 16777216\n\
         [dpdk]\neal = [\"--no-huge\", \"-m\", \"512\", \"--no-pci\", \"--no-shconf\", \"--log-level\", \"*:warning\"]\n\
         lcores = \"0@0,1@1\"\n\
         [qos]\ndscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n\
         [qos.pfc]\nxoff_bytes = 100000\nxon_bytes = 50000\nheadroom_bytes = 4194304\n\
         [qos.pfc_watchdog]\ndetection_ms = 10000\nrestoration_ms = 20000\n"
    );
    for (port, device, peer_mac) in ports {
        text.push_str(&format!(
            "[[port]]\nname = \"{port}\"\ndevice = \"{device}\"\nspeed_gbps = 1\ncable_m = 10\npeer_mac = \"{peer_mac}\"\n"
        ));
    }
    for (prefix, target) in routes {
        let kind = if *target == "spines" { "group" } else { "port" };
        text.push_str(&format!("[[route]]\nprefix = \"{prefix}\"\n{kind} = \"{target}\"\n"));
    }
    if !group.is_empty() {
        let members: Vec<String> = group.iter().map(|m| format!("\"{m}\"")).collect();
        text.push_str(&format!("[[group]]\nname = \"spines\"\nports = [{}]\nmode = \"spray\"\n", members.join(", ")));
    }
    text
}

/// The live fabric: four `raceway run` processes (two leaves, two spines) joined by net_memif
/// links, all shaped to 1 Gb/s (a pause of 65535 quanta then lasts 33 ms, longer than the
/// time slices of processes sharing two CPUs; at 100G it would lapse after 335 us while the
/// pausing switch waits for a CPU). Leaf0's host sends 30,000 lossless 1000-byte frames to
/// leaf1's host, a 2:1 bottleneck: frames cross three switches and spray over both spines, and PFC crosses
/// two hops back (leaf1 pauses both spines; their queues grow and pause leaf0). 30 MB cannot
/// all fit in leaf1's headroom, so the spines must queue and pass the pause on. The hops PFC
/// protects lose nothing; only leaf0's host, a pcap file that cannot pause, overflows its
/// headroom at leaf0 (counted). Every frame leaf0 forwards reaches leaf1's host, routed three
/// times.
#[test]
fn live_memif_leaf_spine_forwards_sprays_and_propagates_pfc() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-fabric");
    let id = std::process::id();
    // File sockets in the test's directory (unique per run, cleaned with it).
    let socket = |a: &str, b: &str| format!("{}/{a}-{b}.sock,socket-abstract=no", dir.display());
    // Each port's peer_mac is its neighbour's: a switch routes only frames sent to its MAC.
    const SPINE0: &str = "02:00:00:30:00:00";
    const SPINE1: &str = "02:00:00:30:01:00";
    const LEAF0: &str = "02:00:00:20:00:00";
    const LEAF1: &str = "02:00:00:20:01:00";
    const HOST: &str = "02:00:00:00:99:99";
    let mut spec =
        raceway::traffic::frames::FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.1.0.1".parse().unwrap(), 7);
    spec.frame_len = 1000;
    spec.destination_mac = raceway::wire::ethernet::MacAddress::parse(LEAF0).unwrap();
    let frames: Vec<(u64, Vec<u8>)> = (0..30_000u32)
        .map(|psn| {
            spec.transport = raceway::traffic::frames::Transport::Roce { source: 0xc000, opcode: 4, dest_qp: 7, psn };
            (u64::from(psn) * 100, spec.build())
        })
        .collect();
    write_pcap(&dir.join("host0.pcap"), &frames);
    let memif =
        |role: &str, a: &str, b: &str, id_no: u32| format!("net_memif{id_no},role={role},socket={}", socket(a, b));
    let configs = [
        (
            "spine0",
            live_switch(
                "spine0",
                SPINE0,
                &[("l0", memif("server", "l0", "s0", 70), LEAF0), ("l1", memif("server", "l1", "s0", 71), LEAF1)],
                &[("10.0.0.0/16", "l0"), ("10.1.0.0/16", "l1")],
                &[],
            ),
        ),
        (
            "spine1",
            live_switch(
                "spine1",
                SPINE1,
                &[("l0", memif("server", "l0", "s1", 72), LEAF0), ("l1", memif("server", "l1", "s1", 73), LEAF1)],
                &[("10.0.0.0/16", "l0"), ("10.1.0.0/16", "l1")],
                &[],
            ),
        ),
        (
            "leaf1",
            live_switch(
                "leaf1",
                LEAF1,
                &[
                    ("h0", format!("net_pcap71,tx_pcap={}/leaf1-h0.pcap", dir.display()), HOST),
                    ("s0", memif("client", "l1", "s0", 74), SPINE0),
                    ("s1", memif("client", "l1", "s1", 75), SPINE1),
                ],
                &[("10.1.0.1/32", "h0"), ("0.0.0.0/0", "spines")],
                &["s0", "s1"],
            ),
        ),
        (
            "leaf0",
            live_switch(
                "leaf0",
                LEAF0,
                &[
                    ("h0", format!("net_pcap70,rx_pcap={}/host0.pcap", dir.display()), HOST),
                    ("s0", memif("client", "l0", "s0", 76), SPINE0),
                    ("s1", memif("client", "l0", "s1", 77), SPINE1),
                ],
                &[("10.0.0.1/32", "h0"), ("0.0.0.0/0", "spines")],
                &["s0", "s1"],
            ),
        ),
    ];
    // Spines (memif servers) first, together; then leaf1, then leaf0, whose host starts
    // sending as soon as its worker runs: its links are up by then (a port waits for its link
    // at start). Only leaf0 runs for a set time (its trace takes well under a second); the
    // others run until the frames leaf0 forwarded are at leaf1's host, then are stopped, so a
    // slow start (a switch took 21 s in CI) cannot cut the run short.
    let start = |name: &str, text: &str, duration: Option<u32>| {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        let log = dir.join(format!("{name}.log"));
        let mut command = raceway();
        command.args(["run", "-c"]).arg(&config);
        if let Some(seconds) = duration {
            command.args(["--duration", &seconds.to_string()]);
        }
        let child = command
            .arg("--stats-json")
            .arg(dir.join(format!("{name}.json")))
            .args(["--", "--file-prefix", &format!("raceway-{id}-{name}")])
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (name.to_string(), log, KillOnDrop(child))
    };
    let mut children: Vec<_> = configs[..2].iter().map(|(name, text)| start(name, text, None)).collect();
    for (_, log, _) in &children {
        wait_for_log(log, "worker on lcore");
    }
    for (name, text) in &configs[2..] {
        children.push(start(name, text, (*name == "leaf0").then_some(6)));
        wait_for_log(&children.last().unwrap().1, "worker on lcore");
    }
    let stats = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap()).unwrap()
    };
    let exited = |(name, log, child): &mut (String, std::path::PathBuf, KillOnDrop)| {
        let status = child.wait_for_exit();
        assert!(status.success(), "{name} ({status}): {}", read(log));
    };
    exited(children.last_mut().unwrap());
    let leaf0 = stats("leaf0");
    let forwarded =
        leaf0["ports"]["s0"]["tx_packets"].as_u64().unwrap() + leaf0["ports"]["s1"]["tx_packets"].as_u64().unwrap();
    // net_pcap flushes its file after every burst: whole records there were delivered.
    let delivered_path = dir.join("leaf1-h0.pcap");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while whole_pcap_records(&delivered_path) < forwarded {
        if std::time::Instant::now() >= deadline {
            // What each switch still running says: where the frames are, or why they went.
            let said: Vec<String> = ["spine0", "spine1", "leaf1"]
                .iter()
                .map(|name| {
                    let prefix = format!("raceway-{id}-{name}");
                    let output = raceway().args(["show", "--prefix", &prefix, "queues"]).output().unwrap();
                    let counters = raceway().args(["show", "--prefix", &prefix, "counters"]).output().unwrap();
                    format!(
                        "{name}:\n{}{}",
                        String::from_utf8_lossy(&counters.stdout),
                        String::from_utf8_lossy(&output.stdout)
                    )
                })
                .collect();
            panic!(
                "leaf1's host has {} of the {forwarded} frames leaf0 forwarded\n{}",
                whole_pcap_records(&delivered_path),
                said.join("\n")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for child in children.iter_mut().rev().skip(1) {
        signal(child.2 .0.id(), "TERM");
        exited(child);
    }
    let (leaf1, spine0, spine1) = (stats("leaf1"), stats("spine0"), stats("spine1"));
    for (name, s) in [("leaf0", &leaf0), ("leaf1", &leaf1), ("spine0", &spine0), ("spine1", &spine1)] {
        assert_eq!(s["mbufs"]["available_at_exit"], s["mbufs"]["pool"], "{name} leaked mbufs");
        for (port, counters) in s["ports"].as_object().unwrap() {
            let drops = counters["drops"].as_object().unwrap();
            let dropped: u64 = drops.values().map(|v| v.as_u64().unwrap()).sum();
            if (name, port.as_str()) == ("leaf0", "h0") {
                assert_eq!(dropped, counters["drops"]["headroom_overflow"].as_u64().unwrap(), "leaf0:h0 {drops:?}");
            } else {
                assert_eq!(dropped, 0, "{name}:{port} dropped: {drops:?}");
            }
        }
    }
    // Every frame leaf0 forwarded crossed three switches to leaf1's host, TTL 64 - 3.
    let delivered = read_pcap(&delivered_path);
    assert_eq!(delivered.len() as u64, forwarded, "frames at leaf1's host");
    assert!(forwarded > 2_000, "leaf0 forwarded only {forwarded}");
    assert!(delivered.iter().all(|(_, f)| f[14 + 8] == 61 && ipv4_header_checksum_ok(&f[14..34])));
    // Sprayed over both spines.
    let via = |s: &serde_json::Value| s["ports"]["l1"]["tx_packets"].as_u64().unwrap();
    assert_eq!(via(&spine0) + via(&spine1), forwarded);
    assert!(via(&spine0) * 3 > forwarded && via(&spine1) * 3 > forwarded, "spray: {} / {}", via(&spine0), via(&spine1));
    // PFC across two hops: leaf1 paused the spines, and the spines paused leaf0.
    let xoff = |s: &serde_json::Value, port: &str| s["ports"][port]["pfc_xoff_tx"][3].as_u64().unwrap();
    let heard = |s: &serde_json::Value, port: &str| s["ports"][port]["pfc_rx"][3].as_u64().unwrap();
    assert!(xoff(&leaf1, "s0") > 0 && xoff(&leaf1, "s1") > 0, "leaf1 never paused the spines");
    assert!(heard(&spine0, "l1") > 0 && heard(&spine1, "l1") > 0, "the spines never heard leaf1's PFC");
    // Which spine's queue passes XOFF first depends on how the four processes share the two
    // CPUs; at least one must pass the pause on.
    assert!(xoff(&spine0, "l0") + xoff(&spine1, "l0") > 0, "no spine paused leaf0: PFC stopped after one hop");
    assert!(heard(&leaf0, "s0") + heard(&leaf0, "s1") > 0, "leaf0 never heard the spines' PFC");
}

/// A lossless incast live, with hosts that honour PFC: two `raceway blast --pfc` NICs on 10G
/// net_memif links each offer TC3 at 2 Gb/s into raceway, towards one 1 Gb/s port. raceway
/// pauses both; they stop their priority 3 for the pause and resume on XON; nothing is lost
/// anywhere. What a host sends after raceway decides XOFF is its memif ring (64 frames with
/// rsize=6) plus what it sends before it reads the pause, which on two shared CPUs can take
/// milliseconds; 1 MB of headroom covers 4 ms at 2 Gb/s, as it would cover a long cable. Static
/// XOFF/XON points 250 KB apart keep the pause cycles long (see perf/RESULTS.md for what
/// dynamic thresholds do here).
#[test]
fn a_live_lossless_incast_with_pfc_honouring_hosts_loses_nothing() {
    lossless_incast_with_pfc_honouring_hosts("live-pfc-hosts", Incast::TwoToOne);
}

/// The same incast with two run-to-completion workers: host0 and host1 on one, up0 and up1 on
/// the other. up0's frames cross to host1's worker; their cells come back to up0's group as
/// credits, from which up0's worker decides XON: the slightly stale views still lose nothing.
/// Both workers share the second CPU, leaving the first to the hosts (two spinning workers
/// starve them, and they never fill a queue): each worker is then descheduled for whole
/// time slices, which makes the views staler than on cores of their own. So that a host still
/// offers more than its share of host1 while its worker sleeps, its memif ring holds 1,024
/// frames (rsize=10), and the headroom covers that ring too (2 MB). And the links run at
/// 1 Gb/s, hosts sending at line rate: a pause of 0xffff quanta then lasts 33.6 ms, which a
/// worker refreshes in time across time slices (at 10 Gb/s it lasts 3.4 ms, less than a time
/// slice of the other worker, and the hosts resumed before the refresh came).
#[test]
fn a_lossless_incast_across_two_workers_loses_nothing() {
    lossless_incast_with_pfc_honouring_hosts("live-pfc-shards", Incast::TwoToOneOverTwoWorkers);
}

/// Four hosts into one port, over two run-to-completion workers: s0, s1 and s2 on one worker,
/// s3 and the sink on the other, so three quarters of the incast crosses between workers and
/// the first worker's groups decide XON from credits. Set up as the two-worker incast above (1 Gb/s
/// links, 1,024-frame memif rings, 2 MB of headroom per group); the four hosts share the
/// first CPU.
#[test]
fn a_four_to_one_lossless_incast_across_two_workers_loses_nothing() {
    lossless_incast_with_pfc_honouring_hosts("live-pfc-4to1", Incast::FourToOne);
}

/// One sender's port spread over two run-to-completion workers: s0's host sends on two memif
/// queues, which are s0's two rx queues (`rx_queues = 2`, as RSS would spread its flows),
/// polled by worker 0 (s0's owner, with s1) and worker 1 (with the sink). Worker 0's frames
/// from s0 cross to the sink; worker 1's stay. Each charges its own share of s0's group;
/// worker 0 decides XOFF and XON on the whole group and sends them, and the host, honouring
/// them, loses nothing. Set up as the other two-worker incasts (1 Gb/s links, 1,024-frame
/// memif rings, 2 MB of headroom).
#[test]
fn a_lossless_incast_from_a_port_spread_over_two_workers_loses_nothing() {
    lossless_incast_with_pfc_honouring_hosts("live-pfc-spread", Incast::SpreadPort);
}

/// The incast of the first test with the automatic headroom: net_memif ports have one tx
/// queue, so the plan counts the shaper's lookahead twice (ahead of raceway's PFC frame and
/// at the peer), 358,656 bytes per group at MTU 9216. A blast host that honours PFC sends at
/// most its 64-frame memif ring (about 82 KB of cells) after the XOFF was written, so a switch
/// descheduled by the shared CPU still loses nothing.
#[test]
fn a_live_lossless_incast_with_the_automatic_headroom_loses_nothing() {
    lossless_incast_with_pfc_honouring_hosts("live-pfc-auto", Incast::AutoHeadroom);
}

/// Which incast `lossless_incast_with_pfc_honouring_hosts` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Incast {
    /// host0 and up0 into host1 (1 Gb/s), one worker, 10 Gb/s links, a static headroom.
    TwoToOne,
    /// The same over two run-to-completion workers, 1 Gb/s links.
    TwoToOneOverTwoWorkers,
    /// Four senders into one 1 Gb/s port, two workers.
    FourToOne,
    /// Two senders into one 1 Gb/s port, two workers; the first sender's port has two rx
    /// queues, one on each worker.
    SpreadPort,
    /// `TwoToOne` with the automatic headroom.
    AutoHeadroom,
}

fn lossless_incast_with_pfc_honouring_hosts(name: &str, case: Incast) {
    let auto = case == Incast::AutoHeadroom;
    let spread = case == Incast::SpreadPort;
    let four = case == Incast::FourToOne || spread;
    let two_workers = matches!(case, Incast::TwoToOneOverTwoWorkers | Incast::FourToOne | Incast::SpreadPort);
    let senders_count = if spread { 2 } else { 4 };
    let lcores = if two_workers { "lcores = \"0@0,1@1,2@1\"" } else { "" };
    let (ring_log2, headroom, link_gbps, rate_gbps) =
        if two_workers { (10, 2_097_152, 1, 1) } else { (6, 1_048_576, 10, 2) };
    let _cpus = cpus_alone();
    let dir = temp_dir(name);
    let trace = dir.join("flows.pcap");
    run_ok(raceway().args(["gen", "flows", "--packets", "200", "--size", "1078", "--dscp", "26", "--out"]).arg(&trace));
    let socket = |name: &str| format!("{}/{name}.sock,socket-abstract=no,rsize={ring_log2}", dir.display());
    let headroom = if auto { "\"auto\"".to_string() } else { headroom.to_string() };
    let pfc = format!("[qos.pfc]\nheadroom_bytes = {headroom}\nxoff_bytes = 500000\nxon_bytes = 250000");
    // The sending ports, and the port all their traffic (to 10.0.1.0/24) leaves by.
    let (senders, sink): (Vec<String>, &str) = if four {
        ((0..senders_count).map(|index| format!("s{index}")).collect(), "sink")
    } else {
        (vec!["host0".into(), "up0".into()], "host1")
    };
    let text = if four {
        let eal = r#""--no-huge", "-m", "1536", "--no-pci", "--no-shconf", "--log-level", "*:error""#;
        let mut leaf = raceway::testing::Leaf::new("four-to-one").qos(&format!(
            "dscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n[qos.scheduler]\nstrict = [6, 7]\n\
             dwrr = {{ 0 = 50, 3 = 50 }}\n{pfc}"
        ));
        for (index, sender) in senders.iter().enumerate() {
            let mut device = format!("device = \"net_memif{},role=server,socket={}\"", 60 + index, socket(sender));
            if spread && index == 0 {
                device.push_str("\nrx_queues = 2");
            }
            leaf = leaf.port_to(sender, f64::from(link_gbps), &format!("02:00:00:00:10:{index:02x}"), &device);
        }
        leaf.port_to(sink, 1.0, "02:00:00:00:11:00", "device = \"net_null60,no-rx=1\"")
            .route("10.0.1.0/24", sink)
            .tables(&format!("[dpdk]\neal = [{eal}]\n{lcores}"))
            .toml()
    } else {
        let devices = [
            format!("net_memif60,role=server,socket={}", socket("host0")),
            "net_null60,no-rx=1".to_string(),
            format!("net_memif61,role=server,socket={}", socket("up0")),
            "net_null61,no-rx=1".to_string(),
        ];
        let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:error""#;
        let text = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)
            .replace("speed_gbps = 100", &format!("speed_gbps = {link_gbps}"))
            .replacen(
                &format!("name = \"host1\"\ndevice = \"net_null60,no-rx=1\"\nspeed_gbps = {link_gbps}"),
                "name = \"host1\"\ndevice = \"net_null60,no-rx=1\"\nspeed_gbps = 1",
                1,
            )
            .replace("lossless = [3]", &format!("lossless = [3]\n{pfc}"));
        assert!(text.contains("net_null60,no-rx=1\"\nspeed_gbps = 1\n"), "host1 runs at 1 Gb/s");
        if two_workers {
            text.replace("lcores = \"0-1\"", lcores)
        } else {
            text
        }
    };
    let config = dir.join("leaf.toml");
    std::fs::write(&config, text).unwrap();
    let stats_path = dir.join("stats.json");
    let id = std::process::id();
    let mut switch = start_switch(&config, &stats_path, &dir.join("raceway.log"), &format!("raceway-{name}-{id}"));
    let hosts: Vec<KillOnDrop> = senders
        .iter()
        .enumerate()
        .map(|(index, port)| {
            KillOnDrop(
                raceway()
                    .args(["--log-level", "error", "blast", "--trace"])
                    .arg(&trace)
                    .arg("--device")
                    .arg(format!("net_memif{index},role=client,socket={}", socket(port)))
                    .args(["--rate-gbps", &rate_gbps.to_string(), "--pfc", &link_gbps.to_string(), "--duration", "2"])
                    .args(["--tx-queues", if spread && index == 0 { "2" } else { "1" }])
                    .args(["--", "-l", "0", "--no-huge"])
                    .args(["-m", "256", "--no-pci", "--no-shconf", "--log-level", "*:error", "--file-prefix"])
                    .arg(format!("raceway-{name}-host{index}-{id}"))
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let reports: Vec<serde_json::Value> = hosts
        .into_iter()
        .map(|mut host| {
            let status = host.wait_for_exit();
            let mut out = String::new();
            std::io::Read::read_to_string(host.0.stdout.as_mut().unwrap(), &mut out).unwrap();
            assert!(status.success(), "blast failed: {out}");
            serde_json::from_str(&out).unwrap()
        })
        .collect();
    let killed = std::process::Command::new("kill").args(["-TERM", &switch.0.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = switch.wait_for_exit();
    let log = std::fs::read_to_string(dir.join("raceway.log")).unwrap_or_default();
    assert!(status.success(), "raceway failed: {log}");
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap();
    let mut sent = 0;
    for (report, port) in reports.iter().zip(&senders) {
        let port = port.as_str();
        let drops: u64 = stats["ports"][port]["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(drops, 0, "{port} dropped: {}", stats["ports"][port]["drops"]);
        assert_eq!(stats["ports"][port]["rx_packets"], report["sent"], "{port}: raceway received all blast sent");
        assert!(stats["ports"][port]["pfc_xoff_tx"][3].as_u64().unwrap() > 0, "{port}: no XOFF sent");
        assert!(report["pfc_rx"][3].as_u64().unwrap() > 0, "{port}'s host saw no PFC: {report}");
        assert!(report["paused_us"][3].as_f64().unwrap() > 0.0, "{port}'s host never paused: {report}");
        // A host whose ring is full when its time is up stops with its last burst waiting
        // (never sent, so never lost): the switch, polling less often, shares its CPU.
        assert_eq!(report["refused"].as_u64(), Some(0), "{report}");
        assert!(report["unsent"].as_u64().unwrap() <= 32, "{report}");
        assert_eq!(report["mbufs"]["available_at_exit"], report["mbufs"]["pool"]);
        sent += report["sent"].as_u64().unwrap();
    }
    assert!(sent > 1000, "the hosts sent only {sent} frames");
    let xoff: Vec<&serde_json::Value> = senders.iter().map(|port| &stats["ports"][port]["pfc_xoff_tx"][3]).collect();
    eprintln!("{name}: {sent} frames sent and delivered; XOFF per sender {xoff:?}");
    assert_eq!(stats["ports"][sink]["tx_packets"].as_u64().unwrap(), sent, "every frame delivered");
    assert_eq!(stats["mbufs"]["available_at_exit"], stats["mbufs"]["pool"]);
    let workers = if lcores.is_empty() { 1 } else { 2 };
    assert_eq!(stats["cores"].as_array().unwrap().len(), workers, "{}", stats["cores"]);
    if spread {
        assert!(
            log.contains("for ports sink, polling port/queue sink/0 s0/1"),
            "worker 1 polls s0's second queue: {log}"
        );
        // Worker 1 takes what worker 0 received (all of it crosses to the sink) and what s0's
        // second queue brought it: more than worker 0, by that queue's share.
        let cores = stats["cores"].as_array().unwrap();
        let packets = |core: usize| cores[core]["packets"].as_u64().unwrap();
        assert!(packets(1) > packets(0) + 100, "{}", stats["cores"]);
    }
}
