//! End-to-end replay tests: exact expected outputs per port (rewrites, timestamps), every
//! drop reason counted, determinism, tail drop under congestion, and the scheduler's shares.

use crate::util::*;
use raceway_core::traffic::frames::{FrameSpec, Transport};
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Port(usize),
    Uplink,
    Drop(&'static str),
    Pfc,
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A trace that exercises every path: IPv4/IPv6, RoCEv2/TCP/UDP, VLAN, CNP, the uplink group,
/// and every drop reason the pipeline can hit without congestion.
fn mixed_cases() -> Vec<(Vec<u8>, Expect)> {
    let mut cases = Vec::new();
    let base = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.1.5"), 0x42);
    cases.push((base.build(), Expect::Port(1)));

    let mut tcp = base.clone();
    tcp.destination = ip("10.0.0.9");
    tcp.dscp = 0;
    tcp.transport = Transport::Tcp { source: 40000, destination: 443 };
    tcp.frame_len = 1024;
    cases.push((tcp.build(), Expect::Port(0)));

    let mut v6 = base.clone();
    v6.source = ip("2001:db8::7");
    v6.destination = ip("2001:db8:1::7");
    v6.transport = Transport::Udp { source: 5000, destination: 6000 };
    v6.frame_len = 200;
    cases.push((v6.build(), Expect::Port(1)));

    let mut vlan = base.clone();
    vlan.vlan = Some((3, 100));
    vlan.destination = ip("10.0.1.6");
    cases.push((vlan.build(), Expect::Port(1)));

    let mut cnp = base.clone();
    cnp.dscp = 48;
    cnp.ecn = 0;
    cnp.transport = Transport::Roce { source: 0xc000, opcode: 0x81, dest_qp: 0x99, psn: 0 };
    cases.push((cnp.build(), Expect::Port(1)));

    for flow in 0..8u8 {
        let mut uplink = base.clone();
        uplink.destination = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, flow));
        uplink.transport =
            Transport::Roce { source: 0xc000 + u16::from(flow), opcode: 0x04, dest_qp: u32::from(flow), psn: 0 };
        cases.push((uplink.build(), Expect::Uplink));
        cases.push((uplink.build(), Expect::Uplink)); // the same flow again: same member
    }

    let mut ttl1 = base.clone();
    ttl1.ttl = 1;
    cases.push((ttl1.build(), Expect::Drop("ttl_expired")));

    let mut hop1 = v6.clone();
    hop1.ttl = 1;
    cases.push((hop1.build(), Expect::Drop("ttl_expired")));

    let mut no_route_v6 = v6.clone();
    no_route_v6.destination = ip("2001:db8:99::1");
    cases.push((no_route_v6.build(), Expect::Drop("no_route")));

    let mut truncated = base.build();
    truncated.truncate(30);
    cases.push((truncated, Expect::Drop("malformed")));

    let mut bad_checksum = base.build();
    bad_checksum[14 + 10] ^= 0xff;
    cases.push((bad_checksum, Expect::Drop("malformed")));

    // The front door: only frames sent to the switch's MAC are routed (RFC 1812 §5.3.4),
    // multicast is not routed, martians never.
    let mut other_station = base.clone();
    other_station.destination_mac = raceway_core::wire::ethernet::MacAddress([0x02, 0, 0, 0, 0x10, 0x09]);
    cases.push((other_station.build(), Expect::Drop("not_router_mac")));
    let mut broadcast = base.clone();
    broadcast.destination_mac = raceway_core::wire::ethernet::MacAddress([0xff; 6]);
    cases.push((broadcast.build(), Expect::Drop("not_router_mac")));
    for (source, destination, reason) in [
        ("10.0.0.7", "239.1.2.3", "multicast"),
        ("2001:db8::7", "ff0e::1", "multicast"),
        // Link-scope multicast is the control plane's, and there is none here.
        ("10.0.0.7", "224.0.0.5", "multicast"),
        ("127.0.0.1", "10.0.1.5", "martian"),
        ("10.0.0.7", "169.254.1.1", "martian"),
        ("fe80::7", "2001:db8:1::7", "martian"),
        ("10.0.0.7", "10.0.9.1", "blackhole"),
    ] {
        let mut spec = base.clone();
        (spec.source, spec.destination) = (ip(source), ip(destination));
        cases.push((spec.build(), Expect::Drop(reason)));
    }

    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0x10, 1, 0x08, 0x06]);
    arp.resize(60, 0);
    cases.push((arp, Expect::Drop("unsupported")));

    // XOFF for priorities 3 and 4 from the host: consumed, counted in pfc_rx.
    let mut pfc = vec![0x01, 0x80, 0xc2, 0, 0, 0x01, 2, 0, 0, 0, 0x10, 1, 0x88, 0x08, 0x01, 0x01, 0x00, 0x18];
    pfc.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0]);
    pfc.resize(60, 0);
    cases.push((pfc, Expect::Pfc));

    cases.push((base.build(), Expect::Port(1)));
    cases
}

type Trace = [(u64, Vec<u8>)];

fn replay(config_text: &str, inputs: &[(&str, &Trace)], name: &str, seed: u64) -> Replayed {
    let refs: Vec<Input> = inputs.iter().map(|(port, frames)| (*port, *frames)).collect();
    replay_fresh(name, config_text, &refs, &["--seed", &seed.to_string()])
}

#[test]
fn mixed_trace_reaches_the_right_ports_with_exact_rewrites_and_times() {
    let cases = mixed_cases();
    // One frame per microsecond: no queueing, so each output is predictable to the nanosecond.
    let input: Vec<(u64, Vec<u8>)> =
        cases.iter().enumerate().map(|(i, (frame, _))| (1_000 * i as u64 + 500, frame.clone())).collect();
    let config = four_port_config("", ["", "", "", ""], "") + "[[route]]\nprefix = \"10.0.9.0/24\"\nblackhole = true\n";
    let out = replay(&config, &[("host0", &input)], "mixed", 0);

    let outputs: Vec<Vec<(u64, Vec<u8>)>> =
        PORTS.iter().map(|port| read_pcap(&out.join(format!("{port}.pcap")))).collect();
    // Wire time at 100G with 24 bytes of preamble, IFG and FCS: (len + 24) * 8 / 100 ns.
    let arrival_ns = |start_ns: u64, len: usize| (start_ns * 1000 + ((len as u64 + 24) * 8000).div_ceil(100)) / 1000;
    let mut expected: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 4];
    let mut uplink_frames = Vec::new();
    for ((frame, expect), (start, _)) in cases.iter().zip(&input) {
        match expect {
            Expect::Port(port) => {
                expected[*port].push((arrival_ns(*start, frame.len()), routed(frame, SWITCH_MAC, PEER_MACS[*port])))
            }
            Expect::Uplink => uplink_frames.push((arrival_ns(*start, frame.len()), frame.clone())),
            _ => {}
        }
    }
    for port in 0..2 {
        assert_eq!(outputs[port].len(), expected[port].len(), "{} frame count", PORTS[port]);
        for (index, (got, want)) in outputs[port].iter().zip(&expected[port]).enumerate() {
            assert_eq!(got.0, want.0, "{} frame {index} timestamp", PORTS[port]);
            assert_eq!(got.1, want.1, "{} frame {index} bytes", PORTS[port]);
        }
    }
    // Uplink frames: each on exactly one member, rewritten for that member, flows kept whole.
    let mut uplink_outputs: Vec<(u64, Vec<u8>, usize)> = Vec::new();
    for member in [2, 3] {
        for (time, bytes) in &outputs[member] {
            uplink_outputs.push((*time, bytes.clone(), member));
        }
    }
    uplink_outputs.sort_by_key(|(time, _, _)| *time);
    assert_eq!(uplink_outputs.len(), uplink_frames.len());
    for ((time, bytes, member), (want_time, frame)) in uplink_outputs.iter().zip(&uplink_frames) {
        assert_eq!(time, want_time);
        assert_eq!(bytes, &routed(frame, SWITCH_MAC, PEER_MACS[*member]));
    }
    for pair in uplink_outputs.chunks(2) {
        assert_eq!(pair[0].2, pair[1].2, "one flow, one uplink");
    }
    // Every IPv4 checksum in the outputs verifies (checked by the test's own RFC 1071 code).
    for frames in &outputs {
        for (_, frame) in frames {
            let l3 = l3_offset(frame);
            if frame[l3] >> 4 == 4 {
                assert!(ipv4_header_checksum_ok(&frame[l3..]));
            }
        }
    }

    let stats = stats(&out);
    let host0 = &stats["ports"]["host0"];
    let drop_count =
        |reason: &str| cases.iter().filter(|(_, e)| *e == Expect::Drop(reason_static(reason))).count() as u64;
    for reason in DROP_REASONS {
        assert_eq!(host0["drops"][reason], drop_count(reason), "{reason}");
        assert!(drop_count(reason) > 0, "the trace has a frame dropped as {reason}");
    }
    assert_eq!(host0["drops"]["buffer_full"], 0);
    let data_frames = cases.iter().filter(|(_, e)| *e != Expect::Pfc).count() as u64;
    assert_eq!(host0["rx_packets"], data_frames);
    assert_eq!(host0["pfc_rx"], serde_json::json!([0, 0, 0, 1, 1, 0, 0, 0]));
    let forwarded: u64 = PORTS.iter().map(|p| stats["ports"][p]["tx_packets"].as_u64().unwrap()).sum();
    let dropped: u64 = DROP_REASONS.iter().map(|r| drop_count(r)).sum();
    assert_eq!(forwarded + dropped, data_frames, "conservation");
    let group = &stats["groups"]["uplinks"];
    assert_eq!(group["up0"].as_u64().unwrap() + group["up1"].as_u64().unwrap(), uplink_frames.len() as u64);
    assert_eq!(group["up0"], stats["ports"]["up0"]["tx_packets"]);
    // TC accounting on host1: RoCE (TC3) x3 incl. VLAN, IPv6 UDP DSCP 26 (TC3), CNP (TC6).
    let host1_queues = &stats["ports"]["host1"]["queues"];
    assert_eq!(host1_queues[3]["tx_packets"], 4);
    assert_eq!(host1_queues[6]["tx_packets"], 1);
    assert_eq!(stats["ports"]["host0"]["queues"][0]["tx_packets"], 1);
}

/// The drop reasons the mixed trace hits, each at least once.
const DROP_REASONS: [&str; 8] =
    ["ttl_expired", "no_route", "malformed", "unsupported", "not_router_mac", "multicast", "martian", "blackhole"];

fn reason_static(reason: &str) -> &'static str {
    DROP_REASONS.into_iter().find(|r| *r == reason).unwrap()
}

#[test]
#[ignore = "needs tshark (make deps installs it); make test runs it"]
fn tshark_agrees_that_every_ipv4_checksum_is_valid() {
    let frames = raceway_core::traffic::gen::mixed(&raceway_core::traffic::gen::MixedOptions {
        packets: 400,
        seed: 9,
        ..Default::default()
    });
    let out = replay(&four_port_config("", ["", "", "", ""], ""), &[("host0", &frames)], "tshark", 0);
    let mut checked = 0;
    for port in PORTS {
        let output = std::process::Command::new("tshark")
            .args(["-r"])
            .arg(out.join(format!("{port}.pcap")))
            .args(["-o", "ip.check_checksum:TRUE", "-Y", "ip", "-T", "fields", "-e", "ip.checksum.status"])
            .output()
            .expect("tshark is installed by make deps");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            assert_eq!(line.trim(), "1", "tshark: checksum status {line} on {port}");
            checked += 1;
        }
    }
    assert!(checked > 200, "only {checked} IPv4 frames checked");
}

#[test]
fn same_inputs_give_the_same_bytes() {
    let host0 = raceway_core::traffic::gen::mixed(&raceway_core::traffic::gen::MixedOptions {
        packets: 500,
        seed: 1,
        rate_gbps: 90.0,
        ..Default::default()
    });
    let host1 = raceway_core::traffic::gen::mixed(&raceway_core::traffic::gen::MixedOptions {
        packets: 500,
        seed: 2,
        host: 1,
        rate_gbps: 90.0,
        frame_len: 700,
        ..Default::default()
    });
    let config = four_port_config("", ["", "", "", ""], "");
    let a = replay(&config, &[("host0", &host0), ("host1", &host1)], "determinism-a", 5);
    let b = replay(&config, &[("host0", &host0), ("host1", &host1)], "determinism-b", 5);
    for file in ["host0.pcap", "host1.pcap", "up0.pcap", "up1.pcap", "stats.json"] {
        assert_eq!(std::fs::read(a.join(file)).unwrap(), std::fs::read(b.join(file)).unwrap(), "{file}");
    }
}

/// A trace converted to pcapng by Wireshark's editcap (both byte orders are the writer's
/// choice; editcap writes the machine's) replays to the same bytes as the pcap it came from.
#[test]
#[ignore = "needs editcap (with tshark, which make deps installs); make test runs it"]
fn a_pcapng_conversion_replays_like_its_pcap() {
    let host0 = raceway_core::traffic::gen::mixed(&raceway_core::traffic::gen::MixedOptions {
        packets: 400,
        seed: 3,
        rate_gbps: 90.0,
        ..Default::default()
    });
    let config = four_port_config("", ["", "", "", ""], "");
    let from_pcap = replay(&config, &[("host0", &host0)], "pcapng-from-pcap", 7);
    let dir = temp_dir("pcapng-converted");
    let pcap = from_pcap.parent().unwrap().join("in-host0.pcap");
    let pcapng = dir.join("in-host0.pcapng");
    let output = std::process::Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&pcap)
        .arg(&pcapng)
        .output()
        .expect("editcap comes with tshark, which make deps installs");
    assert!(output.status.success(), "editcap: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(&std::fs::read(&pcapng).unwrap()[..4], &[0x0a, 0x0d, 0x0d, 0x0a], "editcap wrote pcapng");
    std::fs::write(dir.join("leaf.toml"), &config).unwrap();
    replay_files(&dir.join("leaf.toml"), &[("host0", &pcapng)], &dir.join("out"), &["--seed", "7"]);
    for file in ["host0.pcap", "host1.pcap", "up0.pcap", "up1.pcap", "stats.json"] {
        let (a, b) = (std::fs::read(from_pcap.join(file)).unwrap(), std::fs::read(dir.join("out").join(file)).unwrap());
        assert!(a == b, "{file} differs");
    }
    assert!(stats(&dir.join("out"))["ports"]["host0"]["rx_packets"].as_u64().unwrap() == 400);
}

/// `--out-format pcapng` writes the frames and times the pcap outputs hold, one interface per
/// file named after its port, every frame outbound.
#[test]
fn pcapng_outputs_hold_what_the_pcap_outputs_do() {
    use raceway_core::traffic::pcap::{TraceReader, TraceSpec};
    let host0 = raceway_core::traffic::gen::mixed(&raceway_core::traffic::gen::MixedOptions {
        packets: 300,
        seed: 4,
        rate_gbps: 90.0,
        ..Default::default()
    });
    let config = four_port_config("", ["", "", "", ""], "");
    let as_pcap = replay(&config, &[("host0", &host0)], "out-format-pcap", 3);
    let dir = temp_dir("out-format-pcapng");
    let as_pcapng = replay_in(&dir, &config, &[("host0", &host0)], &["--seed", "3", "--out-format", "pcapng"]);
    let read = |spec: TraceSpec| -> Vec<(u128, Vec<u8>)> {
        TraceReader::open(&spec).unwrap().map(|frame| frame.map(|f| (f.time_ps, f.bytes)).unwrap()).collect()
    };
    for port in PORTS {
        let pcap = read(TraceSpec::file(as_pcap.join(format!("{port}.pcap"))));
        let pcapng = read(
            TraceSpec::parse("--in", &format!("{}/{port}.pcapng:if={port}:dir=out", as_pcapng.display())).unwrap(),
        );
        assert_eq!(pcap, pcapng, "{port}");
        assert!(!as_pcapng.join(format!("{port}.pcap")).exists());
    }
    let output = std::process::Command::new("tshark")
        .arg("-r")
        .arg(as_pcapng.join("up0.pcapng"))
        .args(["-T", "fields", "-e", "frame.interface_name", "-e", "frame.packet_flags_direction"])
        .output()
        .expect("tshark is installed by make deps");
    let text = String::from_utf8_lossy(&output.stdout);
    // The direction prints as 2 or 0x00000002, depending on tshark's version.
    let outbound = |flags: &str| match flags.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16) == Ok(2),
        None => flags == "2",
    };
    let lines: Vec<(&str, &str)> = text.lines().filter_map(|line| line.split_once('\t')).collect();
    assert!(lines.len() > 10 && lines.iter().all(|(name, flags)| *name == "up0" && outbound(flags)), "{text}");
    assert_eq!(
        std::fs::read(as_pcap.join("stats.json")).unwrap(),
        std::fs::read(as_pcapng.join("stats.json")).unwrap()
    );
}

/// Two hosts at 100G into one host at 10G through a small buffer: the egress is paced at
/// 10G exactly, the excess is tail-dropped as buffer_full, and packets are conserved.
#[test]
fn congestion_tail_drops_at_the_buffer_limit() {
    // A lossy-only switch: tail drop is the subject here.
    let config = four_port_config("buffer_bytes = 64000", ["", "", "", ""], "")
        .replacen("speed_gbps = 100", "speed_gbps = 10", 1)
        .replace("lossless = [3]", "lossless = []");
    let flood = |host: u8, seed: u64| -> Vec<(u64, Vec<u8>)> {
        let mut frames = Vec::new();
        let mut spec = FrameSpec::rocev2(
            IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, host)),
            ip("10.0.0.2"),
            0x10 + u32::from(host),
        );
        spec.frame_len = 1000;
        spec.dscp = 0;
        for i in 0..400u64 {
            frames.push((i * 82 + seed, spec.build())); // 1024 wire bytes at 100G = 81.92 ns
        }
        frames
    };
    let out = replay(&config, &[("host1", &flood(1, 0)), ("up0", &flood(2, 3))], "congestion", 0);
    let stats = stats(&out);
    let rx: u64 = ["host1", "up0"].iter().map(|p| stats["ports"][p]["rx_packets"].as_u64().unwrap()).sum();
    let drops: u64 = ["host1", "up0"].iter().map(|p| stats["ports"][p]["drops"]["buffer_full"].as_u64().unwrap()).sum();
    let tx = stats["ports"]["host0"]["tx_packets"].as_u64().unwrap();
    assert_eq!(rx, 800);
    assert!(drops > 300, "expected heavy tail drop, got {drops}");
    assert_eq!(tx + drops, rx, "conservation");
    assert_eq!(stats["ports"]["host0"]["queues"][0]["dropped"].as_u64().unwrap(), drops);
    assert!(stats["ports"]["host0"]["queues"][0]["max_depth_bytes"].as_u64().unwrap() <= 64000);
    let frames = read_pcap(&out.join("host0.pcap"));
    assert_eq!(frames.len() as u64, tx);
    // Every frame sent has a latency; a 64 KB buffer drains in 64000 x 8 / 10 Gb/s = 51.2 us,
    // which bounds the wait (the frame's own wire time aside), and a full queue reaches it.
    let latency = &stats["latency_ns"];
    assert_eq!(latency["samples"].as_u64().unwrap(), tx);
    let max = latency["max"].as_u64().unwrap();
    assert!(max <= 51_200 && max > 40_000, "max latency {max} ns");
    assert!(latency["p50"].as_u64().unwrap() <= latency["p99"].as_u64().unwrap());
    // Back to back at 10G: 1024 wire bytes = 819.2 ns apart (ns rounding: 819 or 820).
    for pair in frames.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!((819..=820).contains(&gap), "gap {gap} ns");
    }
}

/// A 10G egress fed TC0 and TC3 (DWRR 75:25 here) and TC6 (strict): TC6 always goes first,
/// and while TC0 and TC3 are both backlogged their bytes split by weight.
#[test]
fn strict_priority_first_then_dwrr_by_weight() {
    let config = four_port_config("", ["", "", "", ""], "")
        .replacen("speed_gbps = 100", "speed_gbps = 10", 1)
        .replace("dwrr = { 0 = 50, 3 = 50 }", "dwrr = { 0 = 75, 3 = 25 }");
    let stream = |dscp: u8, host: u8, count: u64, offset: u64| -> Vec<(u64, Vec<u8>)> {
        let mut spec = FrameSpec::rocev2(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, host)), ip("10.0.0.2"), 1);
        spec.dscp = dscp;
        spec.frame_len = 1000;
        (0..count).map(|i| (i * 82 + offset, spec.build())).collect()
    };
    let out = replay(
        &config,
        &[("host1", &stream(0, 1, 3000, 0)), ("up0", &stream(26, 2, 3000, 1)), ("up1", &stream(48, 3, 50, 2))],
        "dwrr",
        0,
    );
    let frames = read_pcap(&out.join("host0.pcap"));
    assert_eq!(frames.len(), 6050, "nothing dropped");
    let dscp = |frame: &Vec<u8>| frame[15] >> 2;
    // TC6 frames arrive within the first ~4 µs; strict priority sends each as soon as the link
    // frees, so all 50 are among the first 60 frames out.
    let strict_early = frames[..60].iter().filter(|(_, f)| dscp(f) == 48).count();
    assert_eq!(strict_early, 50);
    // While both DWRR classes are backlogged (the first 2000 frames after the strict ones).
    let window = &frames[60..2060];
    let tc0 = window.iter().filter(|(_, f)| dscp(f) == 0).count() as f64;
    let tc3 = window.iter().filter(|(_, f)| dscp(f) == 26).count() as f64;
    let share = tc0 / (tc0 + tc3);
    assert!((share - 0.75).abs() < 0.02, "TC0 share {share}");
}

/// With `[control]`, frames for the control plane are punted as received, policed per port in
/// virtual time, and counted by reason; a flood of them costs the data plane nothing.
#[test]
fn with_control_punts_are_policed_and_counted_and_forwarding_goes_on() {
    let dir = temp_dir("replay-punt");
    let config = leaf(2, "", "", "3")
        .replacen("name = \"h0\"", "name = \"h0\"\naddresses = [\"10.0.0.1/24\"]", 1)
        .replacen("name = \"h1\"", "name = \"h1\"\nmtu = 1024", 1)
        + "[control.copp.arp]\npps = 1000\nburst = 10\n\
           [[neighbor]]\nip = \"10.0.0.7\"\nmac = \"02:00:00:00:10:07\"\nport = \"h0\"\n";
    let mut arp = vec![0u8; 42];
    arp[0..6].copy_from_slice(&[0xff; 6]);
    arp[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x10, 0]);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let data = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.1.5"), 0x42).build();
    let mut trace: Vec<(u64, Vec<u8>)> = Vec::new();
    // 100 ARP frames and 100 data frames, alternating every 1 us: 200 us of flood, within which
    // a 1,000 pps bucket of 10 passes its burst alone.
    for i in 0..100u64 {
        trace.push((i * 2_000, arp.clone()));
        trace.push((i * 2_000 + 1_000, data.clone()));
    }
    // Amid the ARP flood, a BGP keepalive to the switch from 10.0.0.7, a neighbour on h0,
    // passes: its class has its own bucket. The same from 10.0.0.8, no neighbour, is refused
    // (`[control.acl]`'s default for BGP).
    let mut keepalive = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.0.1"), 0);
    keepalive.transport = Transport::Tcp { source: 179, destination: 40000 };
    trace.push((150_500, keepalive.build()));
    let mut spoofed = FrameSpec::rocev2(ip("10.0.0.8"), ip("10.0.0.1"), 0);
    spoofed.transport = Transport::Tcp { source: 179, destination: 40000 };
    trace.push((150_700, spoofed.build()));
    trace.sort_by_key(|(time, _)| *time);
    // At 5 ms: a ping to the switch, and a packet whose TTL expires.
    let mut ping = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.0.1"), 0);
    ping.transport = Transport::Udp { source: 1, destination: 7 };
    trace.push((5_000_000, ping.build()));
    let mut expiring = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.1.5"), 0x42);
    expiring.ttl = 1;
    trace.push((5_001_000, expiring.build()));
    // No route (the kernel sends net unreachable), multicast (not routed, nothing answers it:
    // dropped), and a packet over h1's MTU (the kernel sends fragmentation needed).
    trace.push((5_002_000, FrameSpec::rocev2(ip("10.0.0.7"), ip("10.99.0.5"), 0x42).build()));
    trace.push((5_003_000, FrameSpec::rocev2(ip("10.0.0.7"), ip("239.0.0.5"), 0x42).build()));
    let mut big = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.1.5"), 0x42);
    big.frame_len = 14 + 1025;
    trace.push((5_004_000, big.build()));
    let out = replay_in(&dir, &config, &[("h0", &trace)], &[]);
    let sent = read_pcap(&out.join("h1.pcap"));
    assert_eq!(sent.len(), 100, "every data frame forwarded");
    let expected = routed(&data, SWITCH_MAC, [0x02, 0, 0, 0, 0x10, 0x01]);
    assert!(sent.iter().all(|(_, frame)| *frame == expected));
    let stats = stats(&out);
    let h0 = &stats["ports"]["h0"];
    assert_eq!(h0["rx_packets"], 207);
    let classes = |arp, bgp, ip2me, ttl, errors| {
        serde_json::json!({"bgp": bgp, "bfd": 0, "lacp": 0, "arp": arp, "lldp": 0, "ip2me": ip2me, "glean": 0,
                           "kernel": 0, "ttl": ttl, "unreachable": errors, "mtu": errors, "other": 0})
    };
    assert_eq!(h0["punted"], classes(10, 1, 1, 1, 1));
    assert_eq!(h0["policed"], classes(90, 0, 0, 0, 0));
    assert_eq!(h0["refused"], classes(0, 1, 0, 0, 0), "the spoofed keepalive, by class");
    assert_eq!(h0["drops"]["control_acl"], 1);
    assert_eq!(h0["drops"]["punt_policed"], 90);
    assert_eq!(h0["drops"]["punt_queue_full"], 0);
    assert_eq!(h0["drops"]["multicast"], 1, "the multicast packet");
    let dropped: u64 = h0["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(dropped, 92, "nothing else dropped");
    assert_eq!(stats["ports"]["h1"]["tx_packets"], 100);
}

/// Routes over next-hop addresses: resolved by `[[neighbor]]` to a port and MAC; several next
/// hops make an ECMP group whose frames carry the chosen neighbour's MAC.
#[test]
fn next_hop_routes_leave_with_their_neighbours_macs() {
    let dir = temp_dir("replay-via");
    let mut config = leaf(1, "", "", "3");
    for (index, name) in ["u0", "u1"].iter().enumerate() {
        config.push_str(&format!(
            "[[port]]\nname = \"{name}\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:2{index}:00\"\n\n\
             [[neighbor]]\nip = \"10.255.{index}.1\"\nmac = \"02:00:00:00:2{index}:01\"\nport = \"{name}\"\n\n"
        ));
    }
    config.push_str("[[route]]\nprefix = \"192.0.2.0/24\"\nvia = [\"10.255.0.1\", \"10.255.1.1\"]\n\n");
    config.push_str("[[route]]\nprefix = \"198.51.100.0/24\"\nvia = \"10.255.1.1\"\n");
    let mut trace: Vec<(u64, Vec<u8>)> = Vec::new();
    for flow in 0..32u64 {
        let destination = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, flow as u8));
        let frame = FrameSpec::rocev2(ip("10.0.0.7"), destination, flow as u32).build();
        trace.push((flow * 1_000, frame.clone()));
        trace.push((flow * 1_000 + 500, frame));
    }
    let single = FrameSpec::rocev2(ip("10.0.0.7"), ip("198.51.100.9"), 1).build();
    trace.push((40_000, single.clone()));
    let out = replay_in(&dir, &config, &[("h0", &trace)], &[]);
    let u0 = read_pcap(&out.join("u0.pcap"));
    let u1 = read_pcap(&out.join("u1.pcap"));
    assert_eq!(u0.len() + u1.len(), 65);
    assert!(u0.len() >= 16 && u1.len() >= 16, "ECMP uses both next hops: {} / {}", u0.len(), u1.len());
    for (frames, index) in [(&u0, 0u8), (&u1, 1u8)] {
        for (_, frame) in frames.iter() {
            assert_eq!(
                frame[0..6],
                [0x02, 0, 0, 0, 0x20 + index, 0x01],
                "the neighbour's MAC, not the port's peer_mac"
            );
            assert_eq!(frame[6..12], SWITCH_MAC);
        }
    }
    // One flow, one next hop: both copies of each flow left by the same port.
    for (_, frame) in &u0 {
        assert!(!u1.iter().any(|(_, other)| other[14..] == frame[14..]), "a flow split over next hops");
    }
    assert_eq!(u1.last().unwrap().1, routed(&single, SWITCH_MAC, [0x02, 0, 0, 0, 0x21, 0x01]));
}

/// A trace whose timestamps step back (as merged captures can): a host's frames of one
/// priority leave in file order, the due frame stamped earliest among its priorities' heads
/// goes first, and a frame not yet due holds back the frames after it in the file (docs/OPERATING.md,
/// "Replay timing").
#[test]
fn a_trace_stepping_back_keeps_file_order_per_priority_and_time_order_across() {
    let frame = |qp: u32, dscp: u8| {
        let mut spec = FrameSpec::rocev2(ip("10.0.0.7"), ip("10.0.1.5"), qp);
        spec.dscp = dscp;
        spec.build()
    };
    // File order: A (1 us, DSCP 26), B (0.5 us, DSCP 0), C (5 us, DSCP 26), D (2 us, DSCP 26).
    let (a, b, c, d) = (frame(0xa, 26), frame(0xb, 0), frame(0xc, 26), frame(0xd, 26));
    let input: Vec<(u64, Vec<u8>)> = vec![(1_000, a.clone()), (500, b.clone()), (5_000, c.clone()), (2_000, d.clone())];
    let out = replay(&four_port_config("", ["", "", "", ""], ""), &[("host0", &input)], "stepping-back", 0);
    let sent = read_pcap(&out.join("host1.pcap"));
    let order: Vec<Vec<u8>> = sent.iter().map(|(_, bytes)| bytes.clone()).collect();
    // At 1 us A and B are due, in two priorities: B, stamped earlier, first. C is not due until
    // 5 us and D waits behind it in the file; in C's priority, D stays behind C.
    let expected: Vec<Vec<u8>> = [b, a, c, d].iter().map(|f| routed(f, SWITCH_MAC, PEER_MACS[1])).collect();
    assert_eq!(order, expected);
    assert!(sent[0].0 >= 1_000 && sent[3].0 >= 5_000, "{:?}", sent.iter().map(|(ns, _)| ns).collect::<Vec<_>>());
}
