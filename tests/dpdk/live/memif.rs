//! Live runs over net_memif with `raceway blast` hosts: every frame accounted, peers that
//! vanish mid-traffic, a leaf-spine of switches spraying and propagating PFC, and lossless
//! incasts from PFC-honouring hosts that lose nothing.

use super::*;
use crate::bin::*;
use crate::util::*;

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

/// A live reload under a lossless incast (the first test's): TC3's ECN profile starts with
/// thresholds no queue reaches, and once frames flow `raceway reload` lowers them to nothing.
/// A file that does not validate and one that changes a port's speed are refused first, each
/// with its one line and exit status 2, the switch forwarding on. The good reload exits 0 naming
/// `qos.ecn`; nothing was marked before it, frames are marked after it, `show running-config`
/// shows the new profile, and the incast still loses nothing.
#[test]
fn a_reload_under_a_lossless_incast_loses_nothing_and_marks_from_then_on() {
    lossless_incast_with_pfc_honouring_hosts("live-pfc-reload", Incast::Reload);
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
    /// `TwoToOne` with a reload of TC3's ECN profile while the hosts send.
    Reload,
}

/// TC3's ECN profile from `kmin` bytes on, marking every frame past it.
fn tc3_ecn(kmin: u64) -> String {
    format!("[qos.ecn.3]\nkmin_bytes = {kmin}\nkmax_bytes = {kmin}\npmax = 1.0\n")
}

/// The `Reload` case's steps, while the hosts send into the switch with file prefix `prefix`
/// run from `config` (whose TC3 profile is `tc3_ecn(NEVER_MARKS)`); returns the frames TC3
/// of `sink` had sent, and marked, when the reload was asked for.
fn reload_while_sending(config: &std::path::Path, prefix: &str, sink: &str) -> (u64, u64) {
    const NEVER_MARKS: u64 = 16_000_000;
    let queue = || -> (u64, u64) {
        let output = raceway().args(["show", "--prefix", prefix, "--json", "queues"]).output().unwrap();
        assert!(output.status.success(), "show queues: {}", String::from_utf8_lossy(&output.stderr));
        let shown: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let row = shown["queues"].as_array().unwrap().iter().find(|row| row["port"] == sink && row["txq"] == "UC3");
        let row = row.expect("the sink's TC3 row");
        (row["counter_pkts"].as_u64().unwrap(), row["ecn_marked"].as_u64().unwrap())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while queue().0 == 0 {
        assert!(std::time::Instant::now() < deadline, "no frame ever left the sink's TC3");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let original = std::fs::read_to_string(config).unwrap();
    assert!(original.contains(&tc3_ecn(NEVER_MARKS)));
    let reload = || raceway().args(["reload", "--prefix", prefix, "-c"]).arg(config).output().unwrap();
    // Refused, the running config kept: a file that does not validate, then a restart key.
    std::fs::write(
        config,
        original.replace(&tc3_ecn(NEVER_MARKS), &tc3_ecn(NEVER_MARKS).replace("pmax = 1.0", "pmax = 2.0")),
    )
    .unwrap();
    let refused = reload();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("qos.ecn.3.pmax"), "{said}");
    std::fs::write(config, original.replacen("speed_gbps = 1\n", "speed_gbps = 2\n", 1)).unwrap();
    let refused = reload();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains(".speed_gbps: changed; this needs a restart"), "{said}");
    // The good one.
    std::fs::write(config, original.replace(&tc3_ecn(NEVER_MARKS), &tc3_ecn(0))).unwrap();
    let before = queue();
    let reloaded = reload();
    assert!(reloaded.status.success(), "{}", String::from_utf8_lossy(&reloaded.stderr));
    assert_eq!(String::from_utf8_lossy(&reloaded.stdout), "reloaded: qos.ecn\n");
    let running = raceway().args(["show", "--prefix", prefix, "running-config"]).output().unwrap();
    let running = String::from_utf8_lossy(&running.stdout);
    assert!(running.contains("ECN TC3: kmin 0 kmax 0"), "{running}");
    assert!(running.contains(&config.canonicalize().unwrap().display().to_string()), "{running}");
    before
}

fn lossless_incast_with_pfc_honouring_hosts(name: &str, case: Incast) {
    let auto = case == Incast::AutoHeadroom;
    let reloads = case == Incast::Reload;
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
        let text = if reloads { text + &tc3_ecn(16_000_000) } else { text };
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
    let prefix = format!("raceway-{name}-{id}");
    let mut switch = start_switch(&config, &stats_path, &dir.join("raceway.log"), &prefix);
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
                    .args(["--rate-gbps", &rate_gbps.to_string(), "--pfc", &link_gbps.to_string()])
                    // The reload's steps (three reloads, two shows) happen while they send.
                    .args(["--duration", if reloads { "6" } else { "2" }])
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
    let at_reload = reloads.then(|| reload_while_sending(&config, &prefix, sink));
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
    if let Some((sent_before, marked_before)) = at_reload {
        assert_eq!(marked_before, 0, "marked before the reload ({sent_before} frames sent)");
        let marked = stats["ports"][sink]["queues"][3]["ecn_marked"].as_u64().unwrap();
        let after = sent - sent_before;
        eprintln!("{name}: {marked} marked of the {after} frames sent after the reload");
        assert!(marked > 0 && marked <= after, "{marked} marked of the {after} frames sent after the reload");
    }
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

/// A switch stopped and started again under a lossless flow, as perf/faults.sh's hosts see
/// it: two `raceway blast --pfc --sequence` hosts serve the memif links the switch's ports
/// connect to (the switch on the client side, which a restart needs: docs/FAULTS.md). On
/// SIGTERM the switch holds the sending host (XOFF for its lossless priority, counted, and
/// obeyed by the host), drains and stops; the hosts keep their frames while their links are
/// down; a new switch connects to the same hosts, and the flow goes on from where it was, its
/// PSNs in order, none late. The frames lost are printed, not judged: a host descheduled just
/// as its link goes loses what its ring held, which a busy machine can make happen.
#[test]
fn a_switch_stopped_under_a_lossless_flow_holds_its_sender_and_a_new_one_carries_it_on() {
    let _cpus = cpus_alone();
    let dir = temp_dir("live-stop-hold");
    let id = std::process::id();
    let socket = |port: &str| format!("/raceway-hold-{id}-{port}.sock");
    let traces = [("s0", "1", "26", "0.2"), ("s1", "0", "0", "0.0001")].map(|(port, subnet, dscp, rate)| {
        let trace = dir.join(format!("{port}.pcap"));
        let flows = ["gen", "flows", "--flows", "4", "--packets", "64", "--size", "1078"];
        run_ok(raceway().args(flows).args(["--to-subnet", subnet, "--dscp", dscp, "--out"]).arg(&trace));
        (port, trace, rate)
    });
    let device = |port: &str, index: u32| format!("device = \"net_memif{index},role=client,socket={}\"", socket(port));
    let config = dir.join("leaf.toml");
    let eal = r#"eal = ["--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:error"]"#;
    let text = raceway::testing::Leaf::new("stop-hold")
        .port_to("s0", 1.0, "02:00:00:00:10:00", &device("s0", 70))
        .port_to("s1", 1.0, "02:00:00:00:11:00", &device("s1", 71))
        .route("10.0.1.0/24", "s1")
        .route("10.0.0.0/24", "s0")
        .tables(&format!("[dpdk]\n{eal}"))
        .toml();
    std::fs::write(&config, text).unwrap();
    let progress = |port: &str| -> serde_json::Value {
        serde_json::from_str(&read(&dir.join(format!("{port}.json")))).unwrap_or(serde_json::Value::Null)
    };
    let in_order = || progress("s1")["sequence"]["in_order"].as_u64().unwrap_or(0);
    let mut hosts: Vec<KillOnDrop> = traces
        .iter()
        .map(|(port, trace, rate)| {
            KillOnDrop(
                raceway()
                    .args(["--log-level", "error", "blast", "--trace"])
                    .arg(trace)
                    .arg("--device")
                    .arg(format!("net_memif0,role=server,socket={}", socket(port)))
                    .args(["--rate-gbps", rate, "--pfc", "1", "--sequence", "--duration", "120", "--progress"])
                    .arg(dir.join(format!("{port}.json")))
                    .args(["--", "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-shconf"])
                    .args(["--log-level", "*:error", "--file-prefix"])
                    .arg(format!("raceway-hold-{id}-{port}"))
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let prefix = format!("raceway-hold-{id}");
    for run in 0..2 {
        let stats_path = dir.join(format!("stats-{run}.json"));
        let mut switch = start_switch(&config, &stats_path, &dir.join(format!("raceway-{run}.log")), &prefix);
        let flowing = in_order();
        wait_until("the lossless flow never went on", std::time::Duration::from_secs(60), || {
            in_order() > flowing + 2000
        });
        assert!(kill(switch.0.id(), "TERM"));
        assert!(switch.wait_for_exit().success(), "{}", read(&dir.join(format!("raceway-{run}.log"))));
        let stats: serde_json::Value = serde_json::from_str(&read(&stats_path)).unwrap();
        let s0 = &stats["ports"]["s0"];
        assert!(s0["pfc_xoff_tx"][3].as_u64().unwrap() > 0, "run {run}: the stop held no sender: {s0}");
        assert!(s0["drops"].as_object().unwrap().values().all(|count| count == 0), "run {run}: {s0}");
    }
    let reports: Vec<serde_json::Value> = hosts
        .iter_mut()
        .map(|host| {
            assert!(kill(host.0.id(), "TERM"));
            assert!(host.wait_for_exit().success());
            let mut out = String::new();
            std::io::Read::read_to_string(host.0.stdout.as_mut().unwrap(), &mut out).unwrap();
            serde_json::from_str(&out).unwrap()
        })
        .collect();
    let (sender, receiver) = (&reports[0], &reports[1]);
    assert!(sender["pfc_rx"][3].as_u64().unwrap() >= 2, "the sender obeyed each stop's hold: {sender}");
    assert_eq!(receiver["sequence"]["flows"], 4, "{receiver}");
    assert_eq!(receiver["sequence"]["late"], 0, "{receiver}");
    assert_eq!(receiver["link_retrains"], 0, "a memif server waits for its client: {receiver}");
    for report in &reports {
        assert_eq!(report["mbufs"]["available_at_exit"], report["mbufs"]["pool"], "{report}");
    }
    eprintln!("lossless frames lost over two stops: {}", receiver["sequence"]["lost"]);
}
