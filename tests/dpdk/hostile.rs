//! Hostile input, end to end: malformed and odd packets through a replay (each counted under
//! its reason, nothing forwarded that should not be, never a panic), broken pcap files and
//! configs (one error line naming file and field, exit 2), and a million-frame trace.
//! docs/ROBUSTNESS.md tabulates these cases and their outcomes.

use crate::bin::*;
use crate::util::*;
use raceway::traffic::frames::{FrameSpec, Transport};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn v4_frame(len: usize) -> Vec<u8> {
    let mut spec = FrameSpec::rocev2(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 9)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 1);
    spec.frame_len = len;
    spec.build()
}

fn v6_frame() -> Vec<u8> {
    let mut spec = FrameSpec::rocev2(
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 9)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
        1,
    );
    spec.transport = Transport::Udp { source: 1, destination: 2 };
    spec.frame_len = 200;
    spec.build()
}

/// Inserts IPv6 extension headers (`next header` values in order, 8 bytes each) before the
/// UDP header of `frame`, fixing payload length and next-header fields.
fn with_extensions(frame: &[u8], chain: &[u8]) -> Vec<u8> {
    let (l3, l4) = (14, 14 + 40);
    let mut out = frame[..l4].to_vec();
    let first_next = out[l3 + 6];
    out[l3 + 6] = chain.first().copied().unwrap_or(first_next);
    for (i, _) in chain.iter().enumerate() {
        let next = chain.get(i + 1).copied().unwrap_or(first_next);
        out.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 0]);
    }
    out.extend_from_slice(&frame[l4..]);
    let payload = (out.len() - l4) as u16;
    out[l3 + 4..l3 + 6].copy_from_slice(&payload.to_be_bytes());
    out
}

fn pfc(class_enable: u16, times: [u16; 8]) -> Vec<u8> {
    let mut frame = vec![0x01, 0x80, 0xc2, 0, 0, 0x01, 0x02, 0, 0, 0, 0x10, 0x01, 0x88, 0x08, 0x01, 0x01];
    frame.extend_from_slice(&class_enable.to_be_bytes());
    for time in times {
        frame.extend_from_slice(&time.to_be_bytes());
    }
    frame.resize(60, 0);
    frame
}

fn tagged(frame: &[u8], tags: usize) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    for _ in 0..tags {
        out.extend_from_slice(&[0x81, 0x00, 0x60, 0x64]);
    }
    out.extend_from_slice(&frame[12..]);
    out
}

/// Replays `frames` (from h1, 100 ns apart) through a 2-host leaf and returns the stats.
fn replay_frames(name: &str, frames: Vec<Vec<u8>>) -> serde_json::Value {
    let dir = temp_dir(name);
    let trace: Vec<(u64, Vec<u8>)> = frames.into_iter().enumerate().map(|(i, f)| (i as u64 * 100, f)).collect();
    let out = replay_in(&dir, &leaf(2, "mtu = 9000", "", "3"), &[("h1", &trace)], &[]);
    stats(&out)
}

#[test]
fn hostile_packets_are_counted_by_reason() {
    let good = v4_frame(100);
    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    // Every length from 0 to 64 bytes: too short for Ethernet and IPv4 until it is a frame.
    for len in 0..14 {
        cases.push(("shorter than an Ethernet header", good[..len].to_vec(), "malformed"));
    }
    for len in 14..34 {
        cases.push(("IPv4 header cut short", good[..len].to_vec(), "malformed"));
    }
    // 16 KiB and over the MTU.
    cases.push(("16 KiB frame, IP packet over the 9000-byte MTU", v4_frame(16 * 1024), "oversize"));
    cases.push(("IP packet one byte over the MTU", v4_frame(9000 + 14 + 1), "oversize"));
    let mut ihl4 = good.clone();
    ihl4[14] = 0x44;
    cases.push(("IPv4 IHL 4 (below 5)", ihl4, "malformed"));
    let mut ihl15 = v4_frame(60);
    ihl15[14] = 0x4f; // 60-byte header in a 46-byte packet
    cases.push(("IPv4 IHL 15, past the end of the frame", ihl15, "malformed"));
    let mut long_total = good.clone();
    long_total[16..18].copy_from_slice(&2000u16.to_be_bytes());
    fix_ipv4_checksum(&mut long_total[14..34]);
    cases.push(("IPv4 total length longer than the frame", long_total, "malformed"));
    let mut short_total = good.clone();
    short_total[16..18].copy_from_slice(&10u16.to_be_bytes());
    fix_ipv4_checksum(&mut short_total[14..34]);
    cases.push(("IPv4 total length shorter than its header", short_total, "malformed"));
    let mut bad_sum = good.clone();
    bad_sum[24] ^= 0xff;
    cases.push(("IPv4 header checksum wrong", bad_sum, "malformed"));
    let mut version6 = good.clone();
    version6[14] = 0x65;
    cases.push(("IPv4 EtherType with version 6", version6, "malformed"));
    // IPv6 extension chains.
    let v6 = v6_frame();
    cases.push(("IPv6 hop-by-hop, routing, destination options, then UDP", with_extensions(&v6, &[0, 43, 60]), ""));
    cases.push(("IPv6 chain of 12 extension headers", with_extensions(&v6, &[60; 12]), ""));
    let mut cut_chain = with_extensions(&v6, &[0, 43]);
    cut_chain.truncate(14 + 40 + 4);
    cut_chain[14 + 4..14 + 6].copy_from_slice(&4u16.to_be_bytes());
    cases.push(("IPv6 extension header cut short", cut_chain, "malformed"));
    let mut v6_long = v6.clone();
    v6_long[14 + 4..14 + 6].copy_from_slice(&5000u16.to_be_bytes());
    cases.push(("IPv6 payload length longer than the frame", v6_long, "malformed"));
    // VLAN stacks.
    cases.push(("802.1Q tag", tagged(&good, 1), ""));
    cases.push(("QinQ: two tags", tagged(&good, 2), ""));
    cases.push(("three stacked tags", tagged(&good, 3), "malformed"));
    cases.push(("eight stacked tags", tagged(&good, 8), "malformed"));
    // Frames to drop by policy.
    let mut ttl1 = good.clone();
    ttl1[22] = 1;
    fix_ipv4_checksum(&mut ttl1[14..34]);
    cases.push(("TTL 1", ttl1, "ttl_expired"));
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    cases.push(("ARP", arp, "unsupported"));
    let mut unknown_route = good.clone();
    unknown_route[30..34].copy_from_slice(&[192, 0, 2, 1]);
    fix_ipv4_checksum(&mut unknown_route[14..34]);
    cases.push(("no route", unknown_route, "no_route"));
    let mut other_control = pfc(0, [0; 8]);
    other_control[15] = 0x05; // MAC control opcode 5
    cases.push(("MAC control frame, not PAUSE/PFC", other_control, "unsupported"));

    for (index, (what, frame, reason)) in cases.iter().enumerate() {
        let stats = replay_frames(&format!("hostile-{index}"), vec![frame.clone()]);
        let drops = &stats["ports"]["h1"]["drops"];
        let total: u64 = drops.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        if reason.is_empty() {
            assert_eq!(total, 0, "{what}: dropped: {drops}");
            assert_eq!(stats["ports"]["h0"]["tx_packets"], 1, "{what}: not forwarded");
        } else {
            assert_eq!(total, 1, "{what}: {drops}");
            assert_eq!(drops[*reason], 1, "{what}: expected {reason}, got {drops}");
            assert_eq!(stats["ports"]["h0"]["tx_packets"], 0, "{what}: forwarded");
        }
        assert_eq!(stats["ports"]["h1"]["rx_packets"], 1, "{what}: received once");
    }
}

/// PFC frames with odd vectors: bits for classes no PAUSE names, all classes, zero classes,
/// and PFC for lossy priorities (counted, not obeyed), are consumed and counted, never
/// forwarded. A classic PAUSE on a PFC port is counted in `rx_pause` and never obeyed.
#[test]
fn odd_pfc_frames_are_consumed_and_counted() {
    let frames = vec![
        pfc(0xff00, [0xffff; 8]),              // only reserved bits set
        pfc(0x00ff, [0xffff; 8]),              // every priority
        pfc(0, [0xffff; 8]),                   // no class enabled
        pfc(0x0001, [0, 0, 0, 0, 0, 0, 0, 0]), // priority 0 (lossy) resumed
        {
            let mut pause = pfc(0, [0; 8]);
            pause[14..16].copy_from_slice(&[0x00, 0x01]); // classic PAUSE, time from the first field
            pause[16..18].copy_from_slice(&[0x00, 0x10]);
            pause
        },
    ];
    let stats = replay_frames("hostile-pfc", frames);
    let h1 = &stats["ports"]["h1"];
    assert_eq!(h1["rx_packets"], 0, "PFC and PAUSE frames are not data");
    let drops: u64 = h1["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!((drops, h1["rx_pause"].as_u64()), (0, Some(1)));
    // Counted once per enabled priority: 8 (all) + 1 (p0).
    let counted: Vec<u64> = h1["pfc_rx"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(counted, vec![2, 1, 1, 1, 1, 1, 1, 1], "{}", h1["pfc_rx"]);
    let sent: u64 = ["h0", "h1"].iter().map(|p| stats["ports"][p]["tx_packets"].as_u64().unwrap()).sum();
    assert_eq!(sent, 0, "nothing forwarded");
}

fn replay_file(name: &str, bytes: &[u8]) -> std::process::Output {
    let dir = temp_dir(name);
    let config = dir.join("leaf.toml");
    std::fs::write(&config, leaf(2, "", "", "3")).unwrap();
    let trace = dir.join("in.pcap");
    std::fs::write(&trace, bytes).unwrap();
    raceway()
        .args(["replay", "-c"])
        .arg(&config)
        .arg("--in")
        .arg(format!("h1={}", trace.display()))
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap()
}

fn one_error_line(output: &std::process::Output, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    for word in words {
        assert!(lines[0].contains(word), "'{}' lacks '{word}'", lines[0]);
    }
}

#[test]
fn hostile_pcap_files_are_one_clear_error() {
    let dir = temp_dir("hostile-files");
    let good = dir.join("good.pcap");
    write_pcap(&good, &[(0, v4_frame(100)), (100, v4_frame(100))]);
    let bytes = std::fs::read(&good).unwrap();
    one_error_line(&replay_file("hostile-file-cut", &bytes[..bytes.len() - 30]), &["in.pcap"]);
    one_error_line(&replay_file("hostile-file-cut-header", &bytes[..bytes.len() - 100 - 8]), &["in.pcap"]);
    let mut magic = bytes.clone();
    magic[..4].copy_from_slice(b"RIFF");
    one_error_line(&replay_file("hostile-file-magic", &magic), &["in.pcap"]);
    one_error_line(&replay_file("hostile-file-empty", &[]), &["in.pcap"]);
    one_error_line(&replay_file("hostile-file-header-only", &bytes[..10]), &["in.pcap"]);

    // The same frames as pcapng (one interface, microseconds), then broken.
    let mut pcapng = Vec::new();
    {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        let mut writer = pcap_file::pcapng::PcapNgWriter::new(&mut pcapng).unwrap();
        let interface =
            InterfaceDescriptionBlock { linktype: pcap_file::DataLink::ETHERNET, snaplen: 0, options: vec![] };
        writer.write_pcapng_block(interface).unwrap();
        for time in [0u64, 1] {
            let data = std::borrow::Cow::Owned(v4_frame(100));
            let packet = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_nanos(time),
                original_len: 100,
                data,
                options: vec![],
            };
            writer.write_pcapng_block(packet).unwrap();
        }
    }
    let out = replay_file("hostile-pcapng-good", &pcapng);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    one_error_line(&replay_file("hostile-pcapng-cut", &pcapng[..pcapng.len() - 30]), &["in.pcap", "block"]);
    let mut length = pcapng.clone();
    // The first packet block's length field (after a 28-byte section header and a 20-byte
    // interface description): far past the end.
    length[48 + 4..48 + 8].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    one_error_line(&replay_file("hostile-pcapng-length", &length), &["in.pcap", "block"]);
    one_error_line(&replay_file("hostile-pcapng-header-only", &pcapng[..12]), &["in.pcap"]);
}

/// A million frames replay in bounded time and memory, every one accounted for. The replay
/// runs with 64 MB of address space (`prlimit --as`), less than its 76 MB trace: it streams
/// the trace rather than load it (loaded whole, it needed over 300 MB).
#[test]
fn a_million_frame_trace_replays() {
    let dir = temp_dir("hostile-million");
    let frame = v4_frame(60);
    // 84 wire bytes at 100G: 6.72 ns apart; the peer sends them back to back.
    let trace: Vec<(u64, Vec<u8>)> = (0..1_000_000u64).map(|i| (i * 7, frame.clone())).collect();
    let input = dir.join("in-h1.pcap");
    write_pcap(&input, &trace);
    drop(trace);
    assert!(std::fs::metadata(&input).unwrap().len() > 64_000_000);
    let config = dir.join("leaf.toml");
    std::fs::write(&config, leaf(2, "", "", "3")).unwrap();
    let out = dir.join("out");
    run_ok(
        std::process::Command::new("prlimit")
            .arg("--as=64000000")
            .arg(env!("CARGO_BIN_EXE_raceway"))
            .args(["replay", "-c"])
            .arg(&config)
            .arg("--in")
            .arg(format!("h1={}", input.display()))
            .arg("--out")
            .arg(&out),
    );
    let stats = stats(&out);
    assert_eq!(stats["ports"]["h1"]["rx_packets"], 1_000_000);
    assert_eq!(stats["ports"]["h0"]["tx_packets"], 1_000_000);
    std::fs::remove_dir_all(&dir).ok();
}

fn check_config(name: &str, text: &str) -> std::process::Output {
    let dir = temp_dir(name);
    let config = dir.join("bad.toml");
    std::fs::write(&config, text).unwrap();
    raceway().args(["check", "-c"]).arg(&config).output().unwrap()
}

#[test]
fn hostile_configs_are_one_clear_error() {
    let base = leaf(2, "", "", "3");
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("duplicate port names", base.replace("name = \"h1\"", "name = \"h0\""), vec!["bad.toml", "h0"]),
        ("a route to an unknown port", base.replace("port = \"h1\"", "port = \"h9\""), vec!["bad.toml", "h9"]),
        (
            "kmin above kmax",
            base.replace(
                "lossless = [3]",
                "lossless = [3]\n[qos.ecn.3]\nkmin_bytes = 9000\nkmax_bytes = 10\npmax = 0.1",
            ),
            vec!["bad.toml", "kmin"],
        ),
        (
            "xon above xoff",
            base.replace("lossless = [3]", "lossless = [3]\n[qos.pfc]\nxoff_bytes = 100000\nxon_bytes = 200000"),
            vec!["bad.toml", "xon"],
        ),
        ("a speed of 0", base.replacen("speed_gbps = 100", "speed_gbps = 0", 1), vec!["bad.toml", "speed"]),
        ("a negative speed", base.replacen("speed_gbps = 100", "speed_gbps = -5", 1), vec!["bad.toml", "speed"]),
        ("a TOML syntax error", format!("{base}\n[[port]\n"), vec!["bad.toml"]),
        ("an unknown field", base.replacen("[switch]", "[switch]\nspeed = 1", 1), vec!["bad.toml", "speed"]),
        ("a prefix that is not one", base.replace("10.0.1.0/24", "10.0.1.0/33"), vec!["bad.toml", "prefix"]),
        ("a lossless priority above 7", base.replace("lossless = [3]", "lossless = [9]"), vec!["bad.toml", "lossless"]),
        ("a MAC that is not one", base.replace("02:00:00:00:00:01", "02:00:00:00:01"), vec!["bad.toml", "mac"]),
        (
            "an address without [control]",
            base.replacen("name = \"h0\"", "name = \"h0\"\naddresses = [\"10.0.0.1/24\"]", 1),
            vec!["bad.toml", "port[0].addresses", "[control]"],
        ),
        (
            "an address that is not one",
            format!(
                "{}\n[control]\n",
                base.replacen("name = \"h0\"", "name = \"h0\"\naddresses = [\"10.0.0.300/24\"]", 1)
            ),
            vec!["bad.toml", "port[0].addresses", "10.0.0.300"],
        ),
        (
            "one address on two ports",
            format!(
                "{}\n[control]\n",
                base.replacen("name = \"h0\"", "name = \"h0\"\naddresses = [\"10.0.0.1/24\"]", 1).replacen(
                    "name = \"h1\"",
                    "name = \"h1\"\naddresses = [\"10.0.0.1/31\"]",
                    1
                )
            ),
            vec!["bad.toml", "port[1].addresses", "two interfaces"],
        ),
        (
            "a next hop nothing resolves",
            base.replacen("port = \"h1\"", "via = \"10.255.0.1\"", 1),
            vec!["bad.toml", "route[", ".via", "10.255.0.1", "[[neighbor]]"],
        ),
        (
            "a route with a port and a next hop",
            base.replacen("port = \"h1\"", "port = \"h1\"\nvia = \"10.255.0.1\"", 1),
            vec!["bad.toml", "route[", "port, group, via or blackhole"],
        ),
        (
            "a blackhole route with a port",
            base.replacen("port = \"h1\"", "port = \"h1\"\nblackhole = true", 1),
            vec!["bad.toml", "route[", ".blackhole", "no port, group or via"],
        ),
        (
            "a route that is not a blackhole",
            base.replacen("port = \"h1\"", "port = \"h1\"\nblackhole = false", 1),
            vec!["bad.toml", "route[", ".blackhole", "leave it out"],
        ),
        (
            "a next hop that is not an address",
            format!("{}\n[control]\n", base.replacen("port = \"h1\"", "via = [\"10.255.0.1\", \"ten\"]", 1)),
            vec!["bad.toml", ".via", "'ten'"],
        ),
        (
            "an empty next-hop list",
            format!("{}\n[control]\n", base.replacen("port = \"h1\"", "via = []", 1)),
            vec!["bad.toml", ".via", "at least one"],
        ),
        (
            "a neighbour on an unknown port",
            format!("{base}\n[[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:00:09\"\nport = \"h7\"\n"),
            vec!["bad.toml", "neighbor[0].port", "h7"],
        ),
        (
            "a neighbour listed twice",
            format!(
                "{base}\n[[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:00:09\"\nport = \"h0\"\n\
                 [[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:00:0a\"\nport = \"h1\"\n"
            ),
            vec!["bad.toml", "neighbor[1].ip", "twice"],
        ),
        (
            "a neighbour with a bad MAC",
            format!("{base}\n[[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00\"\nport = \"h0\"\n"),
            vec!["bad.toml", "neighbor[0].mac"],
        ),
        (
            "a port route to a port without peer_mac",
            base.replacen("peer_mac = \"02:00:00:00:10:01\"\n", "", 1),
            vec!["bad.toml", "route[", ".port", "no peer_mac"],
        ),
        (
            "a port name too long for a Linux interface",
            format!(
                "{}\n[control]\n",
                base.replacen("name = \"h0\"", "name = \"a-very-long-port-name\"", 1)
                    .replace("port = \"h0\"", "port = \"a-very-long-port-name\"")
            ),
            vec!["bad.toml", "port[0].name", "15 bytes"],
        ),
        (
            "a CoPP rate of 0",
            format!("{base}\n[control.copp.bgp]\npps = 0\n"),
            vec!["bad.toml", "control.copp.bgp.pps", "not 1-10000000"],
        ),
        (
            "a CoPP class that does not exist",
            format!("{base}\n[control.copp.icmp]\npps = 10\n"),
            vec!["bad.toml", "control.copp.icmp", "not a CoPP class"],
        ),
        (
            "a control class of 8",
            format!("{base}\n[control]\ncontrol_tc = 8\n"),
            vec!["bad.toml", "control.control_tc"],
        ),
        (
            "an unknown multipath mode",
            format!("{base}\n[control]\nmultipath_mode = \"fastest\"\n"),
            vec!["bad.toml", "control.multipath_mode", "fastest"],
        ),
        (
            "punting IPv4 whole",
            format!("{base}\n[control]\npunt_ethertypes = [\"0x0800\"]\n"),
            vec!["bad.toml", "control.punt_ethertypes", "0x0800"],
        ),
        (
            "an EtherType that is a length",
            format!("{base}\n[control]\npunt_ethertypes = [\"0x05dc\"]\n"),
            vec!["bad.toml", "control.punt_ethertypes", "0x05dc"],
        ),
        ("a namespace path", format!("{base}\n[control]\nnetns = \"a/b\"\n"), vec!["bad.toml", "control.netns"]),
        (
            "interfaces kept for more than an hour",
            format!("{base}\n[control]\nkeep_interfaces_s = 3601\n"),
            vec!["bad.toml", "control.keep_interfaces_s", "not 0-3600 seconds"],
        ),
        (
            "interfaces kept for a negative time",
            format!("{base}\n[control]\nkeep_interfaces_s = -1\n"),
            vec!["bad.toml", "control.keep_interfaces_s", "-1"],
        ),
        (
            "more lossless headroom than the buffer",
            base.replacen("[switch]", "[switch]\nbuffer_bytes = 65536", 1),
            vec!["bad.toml", "headroom"],
        ),
    ];
    for (what, text, words) in cases {
        let output = check_config("hostile-config", &text);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{what}: {lines:?}");
        for word in words {
            assert!(lines[0].contains(word), "{what}: '{}' lacks '{word}'", lines[0]);
        }
    }
    // Overlapping routes are fine: the longest prefix wins.
    let overlapping = base.replace(
        "[[route]]\nprefix = \"10.0.1.0/24\"",
        "[[route]]\nprefix = \"10.0.0.0/8\"\nport = \"h0\"\n\n[[route]]\nprefix = \"10.0.1.0/24\"",
    );
    assert_eq!(check_config("hostile-config-overlap", &overlapping).status.code(), Some(0));
}

/// On a switch with no lossless priority (PFC off), received PFC frames are counted and not
/// obeyed: traffic out of the port that got them keeps flowing.
#[test]
fn pfc_without_lossless_priorities_is_counted_not_obeyed() {
    let dir = temp_dir("hostile-pfc-off");
    let xoff = vec![(0u64, pfc(0x00ff, [0xffff; 8]))];
    let data: Vec<(u64, Vec<u8>)> = (0..10u64)
        .map(|i| {
            let mut spec =
                FrameSpec::rocev2(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2)), 1);
            spec.frame_len = 500;
            (1000 + i * 100, spec.build())
        })
        .collect();
    let out = replay_in(&dir, &leaf(2, "", "", ""), &[("h1", &xoff), ("h0", &data)], &[]);
    let stats = stats(&out);
    assert_eq!(stats["ports"]["h1"]["pfc_rx"], serde_json::json!([1, 1, 1, 1, 1, 1, 1, 1]));
    assert_eq!(stats["ports"]["h1"]["tx_packets"], 10);
    // Sent as they came, not 335 us later when a 0xFFFF pause would have ended.
    let sent = read_pcap(&out.join("h1.pcap"));
    assert!(sent.last().unwrap().0 < 5_000, "h1's egress was paused: last frame at {} ns", sent.last().unwrap().0);
}
