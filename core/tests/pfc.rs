//! Lossless classes end to end, in replay: N:1 incast with PFC (nothing lost, XOFF and XON
//! on every sender, occupancy within XOFF + headroom), the same incast lossy (drops, no PFC),
//! tshark decoding the switch's PFC frames, received PFC pausing exactly the named priority,
//! the watchdog's three actions, and a peer that ignores PFC overflowing its headroom.

use crate::util::*;
use raceway_core::traffic::frames::{FrameSpec, Transport};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

const FRAME_LEN: usize = 1024;

/// (timestamp ns, frame) records of one trace.
type Trace = Vec<(u64, Vec<u8>)>;
/// Traces by input port name.
type Inputs = Vec<(String, Trace)>;
/// Wire time of a 1024-byte frame at 100G, rounded up to whole ns: back to back is line rate.
const LINE_RATE_GAP_NS: u64 = 84;

/// `count` RoCEv2 frames from host `sender` to 10.0.0.2 at line rate, PSN 0.., DSCP `dscp`.
fn flow(sender: u8, dscp: u8, count: u32, start_ns: u64) -> Vec<(u64, Vec<u8>)> {
    flow_of(sender, count, start_ns, |spec| spec.dscp = dscp)
}

/// `flow`'s frames, with `mark` setting their DSCP or VLAN tag.
fn flow_of(sender: u8, count: u32, start_ns: u64, mark: impl FnOnce(&mut FrameSpec)) -> Vec<(u64, Vec<u8>)> {
    let mut spec = FrameSpec::rocev2(IpAddr::V4(Ipv4Addr::new(10, 0, sender, 9)), "10.0.0.2".parse().unwrap(), 0x100);
    mark(&mut spec);
    spec.frame_len = FRAME_LEN;
    (0..count)
        .map(|psn| {
            spec.transport = Transport::Roce {
                source: 0xc000 + u16::from(sender),
                opcode: 0x04,
                dest_qp: 0x100 + u32::from(sender),
                psn,
            };
            (start_ns + u64::from(psn) * LINE_RATE_GAP_NS, spec.build())
        })
        .collect()
}

fn run_replay(dir: &Path, config: &str, inputs: &[(String, Trace)], extra: &[&str]) -> PathBuf {
    let refs: Vec<Input> = inputs.iter().map(|(port, frames)| (port.as_str(), frames.as_slice())).collect();
    replay_in(dir, config, &refs, extra)
}

fn is_pfc(frame: &[u8]) -> bool {
    frame.len() >= 16 && frame[12..14] == [0x88, 0x08] && frame[14..16] == [0x01, 0x01]
}

fn u64_at(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("{value} is not a count"))
}

fn total_drops(stats: &serde_json::Value, port: &str) -> u64 {
    stats["ports"][port]["drops"].as_object().unwrap().values().map(u64_at).sum()
}

const STATIC_PFC: &str = "[qos.pfc]\nxoff_bytes = 200000\nheadroom_bytes = \"auto\"";

fn lossless_incast(senders: u8, pfc: &str) {
    let frames = 3000;
    let dir = temp_dir(&format!("incast-{senders}-{}", if pfc.is_empty() { "auto" } else { "static" }));
    let config = leaf(usize::from(senders) + 1, "", pfc, "3");
    let inputs: Inputs = (1..=senders).map(|s| (format!("h{s}"), flow(s, 26, frames, u64::from(s)))).collect();
    let out = run_replay(&dir, &config, &inputs, &[]);
    let stats = stats(&out);
    let delivered = read_pcap(&out.join("h0.pcap"));
    assert_eq!(delivered.len() as u64, u64::from(senders) * u64::from(frames), "every frame delivered");
    assert_eq!(u64_at(&stats["ports"]["h0"]["tx_packets"]), u64::from(senders) * u64::from(frames));
    // PFC keeps the congested port busy: an XON leaves as soon as its group drains, so the
    // incast ends within 2% of what line rate needs (XONs that waited for the next XOFF
    // refresh once left h0 idle for most of each 168 us refresh period).
    let busy_ns = delivered.last().unwrap().0 - delivered[0].0;
    let line_rate_ns = (u64::from(senders) * u64::from(frames) - 1) * 1048 * 8 / 100;
    assert!(busy_ns <= line_rate_ns * 102 / 100, "h0 sent for {busy_ns} ns; line rate needs {line_rate_ns}");
    // Per sender, frames arrive in PSN order: lossless and in order.
    for sender in 1..=senders {
        let psns: Vec<u32> = delivered
            .iter()
            .filter(|(_, f)| f[14 + 14] == sender) // third octet of the source: 10.0.<sender>.9
            .map(|(_, f)| u32::from_be_bytes([0, f[14 + 20 + 8 + 9], f[14 + 20 + 8 + 10], f[14 + 20 + 8 + 11]]))
            .collect();
        let in_order = psns.len() == frames as usize && psns.iter().enumerate().all(|(i, psn)| *psn == i as u32);
        assert!(
            in_order,
            "h{sender}: {} frames, first out of order at {:?}",
            psns.len(),
            psns.iter().enumerate().find(|(i, p)| **p != *i as u32)
        );
    }
    let plan_headroom = {
        let text = check(&dir.join("leaf.toml"));
        let line = text.lines().find(|l| l.contains("PFC h1 ")).expect("check prints PFC per port").to_string();
        let after = line.split("headroom ").nth(1).unwrap();
        after.split(' ').next().unwrap().parse::<u64>().unwrap()
    };
    for sender in 1..=senders {
        let port = format!("h{sender}");
        let s = &stats["ports"][&port];
        assert_eq!(total_drops(&stats, &port), 0, "{port} dropped");
        let xoff = u64_at(&s["pfc_xoff_tx"][3]);
        let xon = u64_at(&s["pfc_xon_tx"][3]);
        assert!(xoff > 0, "{port}: no XOFF");
        assert!(xon > 0, "{port}: no XON");
        // The sender's capture holds exactly those PFC frames, XOFF first, and XON last.
        let pfc: Vec<(u64, Vec<u8>)> =
            read_pcap(&out.join(format!("{port}.pcap"))).into_iter().filter(|(_, f)| is_pfc(f)).collect();
        assert_eq!(pfc.len() as u64, xoff + xon, "{port}");
        let time_of = |f: &Vec<u8>| u16::from_be_bytes([f[14 + 4 + 6], f[14 + 4 + 7]]);
        assert_eq!(time_of(&pfc[0].1), 0xffff, "{port}: first is XOFF");
        assert_eq!(time_of(&pfc.last().unwrap().1), 0, "{port}: last is XON");
        let group = &s["priority_groups"][0];
        assert_eq!(u64_at(&group["pg"]), 3);
        let max = u64_at(&group["max_bytes"]);
        if !pfc.is_empty() && pfc_static(&config) {
            assert!(max <= 200_000 + plan_headroom, "{port}: occupancy {max} above XOFF + headroom");
        }
        assert!(u64_at(&group["max_headroom_bytes"]) <= plan_headroom);
    }
    assert_eq!(total_drops(&stats, "h0"), 0);
}

fn pfc_static(config: &str) -> bool {
    config.contains("xoff_bytes = 200000")
}

#[test]
fn lossless_incast_2_to_1_loses_nothing() {
    lossless_incast(2, STATIC_PFC);
}

#[test]
fn lossless_incast_4_to_1_loses_nothing() {
    lossless_incast(4, STATIC_PFC);
}

#[test]
fn lossless_incast_8_to_1_loses_nothing() {
    lossless_incast(8, STATIC_PFC);
}

#[test]
fn lossless_incast_with_dynamic_thresholds_loses_nothing() {
    lossless_incast(4, "[qos.pfc]\nalpha = 0.0625");
}

/// A lossy incast must not spread PFC. h1 and h2 send lossy TC0 to h0 at line rate (2:1), while
/// h3 sends lossless TC3 at 50G to h4, a 25G port. h3's group holds what waits for h4, and its
/// XOFF point is alpha x the free lossless pool, which lossy frames never touch: h3 gets no XOFF,
/// as without the incast. The incast stops at h0's queue limit, 8 x the free lossy pool.
#[test]
fn a_lossy_incast_never_pauses_an_unrelated_lossless_sender() {
    let dir = temp_dir("incast-lossy-isolation");
    let config = leaf(5, "", "", "3").replacen(
        "name = \"h4\"\ncable_m = 3\nspeed_gbps = 100",
        "name = \"h4\"\ncable_m = 3\nspeed_gbps = 25",
        1,
    );
    assert!(config.contains("speed_gbps = 25"));
    let mut lossless = FrameSpec::rocev2("10.0.3.9".parse().unwrap(), "10.0.4.2".parse().unwrap(), 0x300);
    lossless.dscp = 26;
    lossless.frame_len = FRAME_LEN;
    let to_h4: Trace = (0..5000u32)
        .map(|psn| {
            lossless.transport = Transport::Roce { source: 0xc003, opcode: 0x04, dest_qp: 0x300, psn };
            (u64::from(psn) * 2 * LINE_RATE_GAP_NS, lossless.build())
        })
        .collect();
    let incast: Inputs = (1..=2).map(|s| (format!("h{s}"), flow(s, 0, 12_000, u64::from(s)))).collect();
    let (alone_dir, both_dir) = (dir.join("alone"), dir.join("both"));
    std::fs::create_dir_all(&alone_dir).unwrap();
    std::fs::create_dir_all(&both_dir).unwrap();
    let alone = run_replay(&alone_dir, &config, &[("h3".into(), to_h4.clone())], &[]);
    let mut inputs = incast;
    inputs.push(("h3".into(), to_h4));
    let both = run_replay(&both_dir, &config, &inputs, &[]);
    let (alone, both) = (stats(&alone), stats(&both));
    for stats in [&alone, &both] {
        assert_eq!(u64_at(&stats["ports"]["h3"]["pfc_xoff_tx"][3]), 0, "h3 was paused");
        assert_eq!(u64_at(&stats["ports"]["h4"]["tx_packets"]), 5000);
    }
    // The group's peak is what waits for h4, with or without the incast.
    let peak = |stats: &serde_json::Value| u64_at(&stats["ports"]["h3"]["priority_groups"][0]["max_bytes"]);
    assert_eq!(peak(&alone), peak(&both));
    assert!(peak(&both) > 1_000_000, "h4's queue grows at 25G: {}", peak(&both));
    // The incast is tail-dropped at h0's dynamic limit: a frame joins a lone queue q while
    // q + frame <= 8 x (pool - q), so the queue peaks within a frame of 8/9 of the pool.
    let plan = raceway_core::config::plan::BufferPlan::new(
        &raceway_core::config::Config::parse(&config, "leaf.toml").unwrap(),
    )
    .unwrap();
    let frame = FRAME_LEN as u64; // one frame takes exactly four cells
    let depth = u64_at(&both["ports"]["h0"]["queues"][0]["max_depth_bytes"]);
    let (lowest, highest) = (plan.lossy_pool * 8 / 9 - frame, (plan.lossy_pool + frame) * 8 / 9);
    assert!((lowest..=highest).contains(&depth), "h0 peaked at {depth}, not at its limit {lowest}..{highest}");
    let dropped =
        u64_at(&both["ports"]["h1"]["drops"]["buffer_full"]) + u64_at(&both["ports"]["h2"]["drops"]["buffer_full"]);
    assert!(dropped > 1000, "{dropped} dropped");
    assert_eq!(u64_at(&both["ports"]["h0"]["queues"][0]["dropped"]), dropped);
}

/// The worst case the headroom formula is written for: minimum-size frames (one 256-byte cell
/// each for 60 bytes) at line rate over a long cable. Four hosts send 60-byte lossless frames
/// back to back into one port over 100 m: what arrives after each XOFF is the cable's round
/// trip at 100G (1 us, 149 frames, 149 cells), less what the congested port sends of that
/// sender's frames meanwhile (a quarter: their cells go back to the headroom first), about 112
/// cells, and it must fit the headroom. The automatic headroom holds it with nothing lost; a
/// headroom of 100 cells overflows.
#[test]
fn minimum_size_frames_at_line_rate_fill_the_headroom_as_computed() {
    let incast = |headroom: &str| {
        let dir = temp_dir("pfc-min-frames");
        let config = leaf(5, "", headroom, "3").replace("cable_m = 3", "cable_m = 100");
        let inputs: Inputs = (1..=4u8)
            .map(|sender| {
                let mut spec = FrameSpec::rocev2(
                    IpAddr::V4(Ipv4Addr::new(10, 0, sender, 9)),
                    "10.0.0.2".parse().unwrap(),
                    0x100 + u32::from(sender),
                );
                spec.dscp = 26;
                spec.frame_len = 60;
                // Offered all at once: each link serialises them back to back at 100G.
                (format!("h{sender}"), (0..20_000).map(|_| (0, spec.build())).collect())
            })
            .collect();
        let out = run_replay(&dir, &config, &inputs, &[]);
        stats(&out)
    };
    let stats = incast("");
    let headroom = 672 * 256; // auto: 100G, 100 m, MTU 9216 (pfc.rs)
    for sender in 1..=4 {
        let port = format!("h{sender}");
        assert_eq!(total_drops(&stats, &port), 0, "{port}");
        let used = u64_at(&stats["ports"][&port]["priority_groups"][0]["max_headroom_bytes"]);
        // About the round trip of one-cell frames arrived after XOFF, and it fit.
        assert!((105 * 256..=headroom).contains(&used), "{port}: {used} bytes of headroom used");
    }
    assert_eq!(u64_at(&stats["ports"]["h0"]["tx_packets"]), 80_000);
    // 100 cells of headroom (25,600 bytes) cannot hold it.
    let stats = incast("[qos.pfc]\nheadroom_bytes = 25600");
    let overflow: u64 = (1..=4).map(|s| u64_at(&stats["ports"][format!("h{s}")]["drops"]["headroom_overflow"])).sum();
    assert!(overflow > 0, "a headroom below the cable's round trip must overflow");
}

/// A peer takes 802.3 31B.3.7's response time for its speed before it stops (394 quanta at
/// 100G, 905 at 400G), and the auto headroom holds what arrives meanwhile. h0's NIC holds
/// TC3 with one long XOFF, so nothing drains; h1 sends minimum frames back to back. After
/// XOFF the group's headroom takes one frame per 84 wire bytes of: the PFC frame, the cable
/// twice, the peer's response, and the frames in progress at either end. The headroom `check`
/// reserves holds it; a peer that answered at once (`peer_response_quanta = 0`) would have
/// sent the response's worth less.
#[test]
fn a_peer_takes_its_response_time_and_the_auto_headroom_holds_it() {
    for (gbps, quanta) in [(100u64, 394u64), (400, 905)] {
        let used = |response: &str| {
            let dir = temp_dir(&format!("pfc-response-{gbps}"));
            let config = leaf(2, "", "[qos.pfc]\nxoff_bytes = 100000", "3")
                .replace("speed_gbps = 100\n", &format!("speed_gbps = {gbps}\n"))
                .replacen("name = \"h1\"\n", &format!("name = \"h1\"\n{response}"), 1);
            let mut spec =
                FrameSpec::rocev2(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 9)), "10.0.0.2".parse().unwrap(), 0x101);
            spec.dscp = 26;
            spec.frame_len = 60;
            // Offered at once from 1 us: the link serialises them back to back.
            let frames = (0..3000).map(|_| (1_000, spec.build())).collect();
            let hold = vec![(0, pfc_frame(&[(3, 0xffff)]))];
            let out = run_replay(&dir, &config, &[("h1".into(), frames), ("h0".into(), hold)], &[]);
            let stats = stats(&out);
            assert_eq!(total_drops(&stats, "h1"), 0, "{gbps}G: the auto headroom held it");
            assert_eq!(u64_at(&stats["ports"]["h0"]["tx_packets"]), 3000, "{gbps}G");
            let text = check(&dir.join("leaf.toml"));
            let line = text.lines().find(|l| l.contains("PFC h1 ")).expect("check prints PFC per port").to_string();
            let reserved: u64 = line.split("headroom ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            let used = u64_at(&stats["ports"]["h1"]["priority_groups"][0]["max_headroom_bytes"]);
            assert!(used <= reserved, "{gbps}G: {used} bytes of headroom used, {reserved} reserved");
            used / 256
        };
        // 84 (PFC) + 2 x 15 ns of cable + the response, in 84-byte frames, and the two frames
        // in progress (the one that crossed XOFF, the one the peer finishes).
        let in_flight = 84 + 30 * gbps / 8 + quanta * 64;
        let expected = in_flight.div_ceil(84) + 2;
        let nic = used("");
        assert!((expected - 2..=expected + 2).contains(&nic), "{gbps}G: {nic} cells, expected about {expected}");
        let instant = used("peer_response_quanta = 0\n");
        assert!(nic - instant >= quanta * 64 / 84 - 2, "{gbps}G: the response added only {} cells", nic - instant);
    }
}

#[test]
fn lossy_incast_drops_and_sends_no_pfc() {
    let dir = temp_dir("incast-lossy");
    let config = leaf(5, "buffer_bytes = 4194304", "", "3");
    let inputs: Inputs = (1..=4).map(|s| (format!("h{s}"), flow(s, 0, 3000, u64::from(s)))).collect();
    let out = run_replay(&dir, &config, &inputs, &[]);
    let stats = stats(&out);
    let dropped: u64 = (1..=4).map(|s| u64_at(&stats["ports"][format!("h{s}")]["drops"]["buffer_full"])).sum();
    assert!(dropped > 1000, "only {dropped} dropped");
    assert_eq!(u64_at(&stats["ports"]["h0"]["tx_packets"]) + dropped, 12_000);
    for host in 0..5 {
        let port = format!("h{host}");
        assert_eq!(stats["ports"][&port]["pfc_xoff_tx"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(stats["ports"][&port]["pfc_xon_tx"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
        assert!(!read_pcap(&out.join(format!("{port}.pcap"))).iter().any(|(_, f)| is_pfc(f)), "{port} sent PFC");
    }
}

#[test]
#[ignore = "needs tshark (make deps installs it); make test runs it"]
fn tshark_decodes_the_pfc_frames_as_class_based_flow_control() {
    let dir = temp_dir("pfc-tshark");
    let config = leaf(3, "", STATIC_PFC, "3");
    let inputs: Inputs = (1..=2).map(|s| (format!("h{s}"), flow(s, 26, 2000, 0))).collect();
    let out = run_replay(&dir, &config, &inputs, &[]);
    let stats = stats(&out);
    let expected = u64_at(&stats["ports"]["h1"]["pfc_xoff_tx"][3]) + u64_at(&stats["ports"]["h1"]["pfc_xon_tx"][3]);
    assert!(expected >= 2);
    let output = std::process::Command::new("tshark")
        .arg("-r")
        .arg(out.join("h1.pcap"))
        .args(["-Y", "macc.cbfc.enbv", "-T", "fields", "-E", "separator=,"])
        .args(["-e", "eth.dst", "-e", "macc.opcode", "-e", "macc.cbfc.enbv", "-e", "macc.cbfc.enbv.c3"])
        .args(["-e", "macc.cbfc.pause_time.c3", "-e", "macc.cbfc.pause_time.c0", "-e", "frame.len"])
        .output()
        .expect("tshark is installed by make deps");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, expected, "tshark saw {lines:?}");
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields[0], "01:80:c2:00:00:01", "{line}");
        assert_eq!(fields[1], "0x0101", "{line}");
        assert_eq!(fields[2], "0x0008", "{line}");
        assert!(fields[3] == "True" || fields[3] == "1", "{line}");
        assert!(fields[4] == "65535" || fields[4] == "0", "{line}");
        assert_eq!(fields[5], "0", "{line}");
        assert_eq!(fields[6], "60", "{line}");
    }
}

fn pfc_frame(priority_times: &[(usize, u16)]) -> Vec<u8> {
    let mut frame = vec![0x01, 0x80, 0xc2, 0, 0, 0x01, 0x02, 0, 0, 0, 0x10, 0, 0x88, 0x08, 0x01, 0x01];
    let mut enable = 0u16;
    let mut times = [0u16; 8];
    for &(priority, time) in priority_times {
        enable |= 1 << priority;
        times[priority] = time;
    }
    frame.extend_from_slice(&enable.to_be_bytes());
    for time in times {
        frame.extend_from_slice(&time.to_be_bytes());
    }
    frame.resize(60, 0);
    frame
}

/// Wire time of a 60-byte frame at 100G in ns (84 bytes x 8 / 100).
const PFC_WIRE_PS: u64 = 6_720;

#[test]
fn received_pfc_pauses_exactly_the_named_priority_for_the_computed_time() {
    let dir = temp_dir("pfc-received");
    let config = leaf(2, "", "", "3");
    // h1 sends TC3 and TC0 frames alternately to h0 at half rate, for 100 us.
    let mut frames = Vec::new();
    for i in 0..600u32 {
        let dscp = if i % 2 == 0 { 26 } else { 0 };
        let mut f = flow(1, dscp, 1, 0).remove(0);
        f.0 = u64::from(i) * 168;
        frames.push(f);
    }
    // h0's NIC: XOFF priority 3 for 1000 quanta (5.12 us) at 20 us; XOFF 0xffff at 50 us,
    // XON at 60 us. Priority 0 is never paused.
    let h0 =
        vec![(20_000, pfc_frame(&[(3, 1000)])), (50_000, pfc_frame(&[(3, 0xffff)])), (60_000, pfc_frame(&[(3, 0)]))];
    let out = run_replay(&dir, &config, &[("h1".into(), frames), ("h0".into(), h0)], &[]);
    let stats = stats(&out);
    assert_eq!(stats["ports"]["h0"]["pfc_rx"], serde_json::json!([0, 0, 0, 3, 0, 0, 0, 0]));
    assert_eq!(u64_at(&stats["ports"]["h0"]["tx_packets"]), 600, "nothing lost");
    let sent = read_pcap(&out.join("h0.pcap"));
    let starts = |dscp: u8, from_ps: u64, to_ps: u64| -> Vec<u64> {
        sent.iter()
            .filter(|(t, f)| f[15] >> 2 == dscp && t * 1000 >= from_ps && t * 1000 < to_ps)
            .map(|(t, _)| *t)
            .collect()
    };
    // Each pause takes effect once the PFC frame has fully arrived.
    let first = (20_000_000 + PFC_WIRE_PS, 20_000_000 + PFC_WIRE_PS + 1000 * 5_120);
    let during = starts(26, first.0 + 1000, first.1 - 1000);
    assert!(during.is_empty(), "TC3 sent while paused: {during:?}");
    assert!(starts(0, first.0, first.1).len() >= 10, "TC0 must keep flowing");
    // TC3 resumes when the pause ends, or once the TC0 frame then on the wire is done (84 ns).
    let resumed = starts(26, first.1, first.1 + 1_000_000);
    assert!(resumed.first().is_some_and(|t| t * 1000 <= first.1 + 84_000), "TC3 resumes late: {:?}", resumed.first());
    let second = (50_000_000 + PFC_WIRE_PS, 60_000_000 + PFC_WIRE_PS);
    let during = starts(26, second.0 + 1000, second.1 - 1000);
    assert!(during.is_empty(), "TC3 sent while paused by 0xffff: {during:?}");
    assert!(starts(0, second.0, second.1).len() >= 20, "TC0 must keep flowing");
    let resumed = starts(26, second.1, second.1 + 1_000_000);
    // The pause lifts at once; the frame on the wire finishes and DWRR may serve TC0 once.
    assert!(
        resumed.first().is_some_and(|t| t * 1000 <= second.1 + 3 * 84_000),
        "XON resumes late: {:?}",
        resumed.first()
    );
}

/// 802.3x PAUSE and MAC control frames that are not PFC: h0's NIC sends, during h1's traffic
/// to it, a PAUSE (opcode 1, all traffic), a PFC XOFF for priority 3 behind a VLAN tag, and
/// one to a unicast address. None of them may hold anything back on a port where PFC runs
/// (PAUSE ignored there by default); each is counted, the PAUSE as MAC control (`rx_pause`).
#[test]
fn pause_and_frames_that_are_not_pfc_are_counted_and_never_obeyed() {
    let dir = temp_dir("pfc-not-pfc");
    let config = leaf(2, "", "", "3");
    let frames = back_to_back(400);
    let pause = link_pause(0xffff);
    let xoff = pfc_frame(&[(3, 0xffff)]);
    let mut tagged = xoff[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x00]);
    tagged.extend_from_slice(&xoff[12..]);
    let mut unicast = xoff.clone();
    unicast[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    let h0 = vec![(10_000, pause), (20_000, tagged), (30_000, unicast)];
    let out = run_replay(&dir, &config, &[("h1".into(), frames), ("h0".into(), h0)], &[]);
    let stats = stats(&out);
    assert_eq!(stats["ports"]["h0"]["rx_pause"], 1);
    assert_eq!(stats["ports"]["h0"]["rx_packets"], 2, "the PAUSE is not data");
    assert_eq!(stats["ports"]["h0"]["drops"]["unsupported"], 2);
    assert_eq!(stats["ports"]["h0"]["pfc_rx"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
    // Nothing paused: h1's frames leave as they came, 168 ns apart, the whole time.
    let sent: Vec<u64> = read_pcap(&out.join("h0.pcap")).into_iter().map(|(t, _)| t).collect();
    assert_eq!(sent.len(), 400);
    let largest_gap = sent.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(largest_gap <= 169, "a gap of {largest_gap} ns: something was paused");
}

/// A storm: h0's NIC sends XOFF for priority 3 every 100 us from 1 ms to 8 ms, while h1 sends
/// a TC3 frame to h0 every 10 us for 20 ms. Watchdog: detection 2 ms, restoration 4 ms.
fn storm(action: &str) -> (serde_json::Value, Vec<u64>) {
    let dir = temp_dir(&format!("pfc-storm-{action}"));
    let config =
        leaf(2, "", &format!("[qos.pfc_watchdog]\ndetection_ms = 2\nrestoration_ms = 4\naction = \"{action}\""), "3");
    let data: Vec<(u64, Vec<u8>)> = (0..2000u64)
        .map(|i| {
            let mut f = flow(1, 26, 1, 0).remove(0);
            f.0 = i * 10_000;
            f
        })
        .collect();
    let xoffs: Vec<(u64, Vec<u8>)> =
        (0..=70u64).map(|i| (1_000_000 + i * 100_000, pfc_frame(&[(3, 0xffff)]))).collect();
    let out = run_replay(&dir, &config, &[("h1".into(), data), ("h0".into(), xoffs)], &[]);
    let times = read_pcap(&out.join("h0.pcap")).into_iter().filter(|(_, f)| f[15] >> 2 == 26).map(|(t, _)| t).collect();
    (stats(&out), times)
}

// Times as the output capture shows them: nanoseconds, rounded down.
const PAUSE_START_NS: u64 = 1_000_006; // 1 ms + the XOFF's 6.72 ns on the wire
const DETECTED_NS: u64 = PAUSE_START_NS + 2_000_000;
const LAST_XOFF_NS: u64 = 8_000_006;
const PAUSE_END_NS: u64 = 8_335_545; // 8 ms + 6.72 ns + 0xffff quanta (335,539.2 ns) at 100G
const RESTORED_NS: u64 = LAST_XOFF_NS + 4_000_000;

fn assert_storm_counted(stats: &serde_json::Value) {
    assert_eq!(stats["ports"]["h0"]["pfc_watchdog"]["storms"], serde_json::json!([0, 0, 0, 1, 0, 0, 0, 0]));
    assert_eq!(stats["ports"]["h0"]["pfc_watchdog"]["restorations"], serde_json::json!([0, 0, 0, 1, 0, 0, 0, 0]));
}

#[test]
fn watchdog_forward_ignores_the_storm_from_detection_on() {
    let (stats, times) = storm("forward");
    assert_storm_counted(&stats);
    let during: Vec<u64> = times.iter().copied().filter(|t| *t > PAUSE_START_NS + 100 && *t < DETECTED_NS).collect();
    assert!(during.is_empty(), "sent while paused before detection: {during:?}");
    let first_after = times.iter().copied().find(|t| *t >= DETECTED_NS).unwrap();
    assert!(first_after <= DETECTED_NS + 1, "forwarding resumed at {first_after}, detection due at {DETECTED_NS}");
    assert_eq!(times.len(), 2000, "forward loses nothing");
}

#[test]
fn watchdog_drop_discards_until_restoration() {
    let (stats, times) = storm("drop");
    assert_storm_counted(&stats);
    let during: Vec<u64> = times.iter().copied().filter(|t| *t > PAUSE_START_NS + 100 && *t < RESTORED_NS).collect();
    assert!(during.is_empty(), "sent between the pause and restoration: {during:?}");
    let first_after = times.iter().copied().find(|t| *t >= RESTORED_NS).unwrap();
    assert!(first_after < RESTORED_NS + 10_100, "traffic resumed at {first_after}, restoration at {RESTORED_NS}");
    // Dropped: what queued during detection (about 200 frames) and what arrived until
    // restoration (about 900).
    let dropped = u64_at(&stats["ports"]["h1"]["drops"]["pfc_watchdog"]);
    assert!((1050..=1150).contains(&dropped), "{dropped} dropped");
    assert_eq!(times.len() as u64 + dropped, 2000);
    assert_eq!(u64_at(&stats["ports"]["h0"]["queues"][3]["dropped"]), dropped);
}

#[test]
fn watchdog_alert_only_counts() {
    let (stats, times) = storm("alert");
    assert_storm_counted(&stats);
    let during: Vec<u64> = times.iter().copied().filter(|t| *t > PAUSE_START_NS + 100 && *t < PAUSE_END_NS).collect();
    assert!(during.is_empty(), "alert must keep honouring the pause: {during:?}");
    assert_eq!(times.len(), 2000, "alert loses nothing");
    assert_eq!(total_drops(&stats, "h1"), 0);
}

#[test]
fn a_peer_that_ignores_pfc_overflows_its_headroom_and_only_it_loses() {
    let dir = temp_dir("pfc-ignore");
    let config = leaf(5, "", STATIC_PFC, "3");
    let inputs: Inputs = (1..=4).map(|s| (format!("h{s}"), flow(s, 26, 3000, 0))).collect();
    let out = run_replay(&dir, &config, &inputs, &["--peer-ignores-pfc", "h1"]);
    let stats = stats(&out);
    assert!(u64_at(&stats["ports"]["h1"]["drops"]["headroom_overflow"]) > 0);
    for sender in 2..=4 {
        assert_eq!(total_drops(&stats, &format!("h{sender}")), 0, "h{sender} obeyed PFC and must lose nothing");
    }
    let delivered = u64_at(&stats["ports"]["h0"]["tx_packets"]);
    assert_eq!(delivered + u64_at(&stats["ports"]["h1"]["drops"]["headroom_overflow"]), 12_000);
}

/// 802.1Qbb pauses priorities, not traffic classes. PCP 3 queued in TC 4 (charged to PG 4):
/// the XOFF names priority 3, the priority the senders' NICs queue the frames in, so peers
/// that pause only what their frames carry lose nothing; a pause for priority 3 received
/// holds queue 4 (`pfc_to_queue`). `check` warns when the pause would hold the wrong queue.
#[test]
fn xoff_names_the_priority_the_frames_carry_not_their_traffic_class() {
    let dir = temp_dir("pfc-pcp-to-tc");
    let maps = "trust = \"pcp\"\npcp_to_tc = { 3 = 4, default = 0 }\npfc_to_queue = { 3 = 4 }";
    let config = leaf(4, "", &format!("{maps}\n{STATIC_PFC}"), "3");
    let pcp3 = |spec: &mut FrameSpec| spec.vlan = Some((3, 100));
    let inputs: Inputs = (1..=3).map(|s| (format!("h{s}"), flow_of(s, 2000, u64::from(s), pcp3))).collect();
    let out = run_replay(&dir, &config, &inputs, &[]);
    let stats = stats(&out);
    for sender in 1..=3 {
        let port = format!("h{sender}");
        let s = &stats["ports"][&port];
        assert_eq!(total_drops(&stats, &port), 0, "{port}: its NIC paused priority 3 and lost nothing");
        assert!(u64_at(&s["pfc_xoff_tx"][3]) > 0, "{port}: XOFF for priority 3");
        assert_eq!(u64_at(&s["pfc_xoff_tx"][4]), 0, "{port}: no XOFF for TC 4's number");
        let pfc: Vec<Vec<u8>> =
            read_pcap(&out.join(format!("{port}.pcap"))).into_iter().map(|(_, f)| f).filter(|f| is_pfc(f)).collect();
        assert!(pfc.iter().all(|f| f[17] == 1 << 3), "{port}: every PFC frame names priority 3 alone");
        assert_eq!(u64_at(&s["priority_groups"][0]["pg"]), 4, "{port}: charged to TC 4's group");
    }
    assert_eq!(u64_at(&stats["ports"]["h0"]["tx_packets"]), 6000);
    // The other direction: h0's NIC pauses priority 3; the frames queued in TC 4 wait.
    let paused_dir = temp_dir("pfc-pcp-to-tc-rx");
    let paused = run_replay(
        &paused_dir,
        &config,
        &[("h1".into(), flow_of(1, 100, 1_000, pcp3)), ("h0".into(), vec![(0, pfc_frame(&[(3, 0xffff)]))])],
        &[],
    );
    assert!(read_pcap(&paused.join("h0.pcap")).iter().all(|(t, _)| *t > 335_000), "a frame left queue 4 while paused");
    // Without pfc_to_queue the pause for 3 would hold queue 3, where nothing of priority 3 is.
    let plain = dir.join("no-queue-map.toml");
    std::fs::write(&plain, config.replace("pfc_to_queue = { 3 = 4 }", "")).unwrap();
    let text = check(&plain);
    assert!(
        text.contains("warning: lossless priority 3's frames queue in TC 4, but a pause for priority 3 holds queue 3"),
        "{text}"
    );
    let text = check(&dir.join("leaf.toml"));
    assert!(!text.contains("warning"), "{text}");
    assert!(text.contains("lossless priority 3: frames in TC [4], charged to PG [4]; its pauses hold UC4"), "{text}");
}

/// 802.3x PAUSE per port: honoured by default where no priority is lossless (it stops every
/// class for its quanta: 0xffff at 100G is 335.5 us), and on a PFC port that says `pause =
/// "honour"`; `pause = "ignore"` ignores it. Counted in `rx_pause` either way, never as data.
#[test]
fn pause_stops_every_class_on_a_port_that_honours_it() {
    let run = |name: &str, lossless: &str, h0_pause: &str| -> (serde_json::Value, Vec<u64>) {
        let dir = temp_dir(name);
        let mut config = leaf(2, "", "", lossless);
        if !h0_pause.is_empty() {
            config = config.replacen("name = \"h0\"\n", &format!("name = \"h0\"\npause = \"{h0_pause}\"\n"), 1);
        }
        // h1 sends lossy and (when PFC runs) lossless frames to h0 back to back for 500 us.
        let frames = back_to_back(3000);
        let pause = link_pause(0xffff);
        let out = run_replay(&dir, &config, &[("h1".into(), frames), ("h0".into(), vec![(10_000, pause)])], &[]);
        let sent: Vec<u64> = read_pcap(&out.join("h0.pcap")).into_iter().map(|(t, _)| t).collect();
        (stats(&out), sent)
    };
    let gap = |sent: &[u64]| sent.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    // No lossless priority: honoured. Nothing leaves h0 for the pause; then the backlog.
    let (stats, sent) = run("pause-honoured", "", "");
    assert_eq!(stats["ports"]["h0"]["rx_pause"], 1);
    assert_eq!(stats["ports"]["h0"]["rx_packets"], 0, "MAC control is not data");
    assert_eq!(sent.len(), 3000, "lossless or not, held, never dropped here");
    let largest = gap(&sent);
    assert!((335_000..336_500).contains(&largest), "a pause of {largest} ns, not 335.5 us");
    assert!(sent.iter().all(|&t| !(10_200..345_000).contains(&t)), "a frame left during the pause");
    // PFC runs (TC3 lossless): ignored by default, honoured when the port says so.
    let (stats, sent) = run("pause-ignored", "3", "");
    assert_eq!(stats["ports"]["h0"]["rx_pause"], 1);
    assert!(gap(&sent) <= 169, "ignored: nothing waits");
    let (_, sent) = run("pause-honour-on-pfc", "3", "honour");
    assert!(gap(&sent) > 300_000, "honoured on a PFC port that asks for it");
    let (_, sent) = run("pause-ignore-without-pfc", "", "ignore");
    assert!(gap(&sent) <= 169, "ignored where the port says so");
}

/// An 802.3x PAUSE frame (opcode 1) of `quanta`.
fn link_pause(quanta: u16) -> Vec<u8> {
    let mut pause = pfc_frame(&[]);
    pause[14..16].copy_from_slice(&[0x00, 0x01]);
    pause[16..18].copy_from_slice(&quanta.to_be_bytes());
    pause
}

/// `count` frames from h1 to h0, 168 ns apart (back to back at 100G), alternating TC3 (DSCP
/// 26) and TC0.
fn back_to_back(count: u64) -> Vec<(u64, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let mut f = flow(1, if i % 2 == 0 { 26 } else { 0 }, 1, 0).remove(0);
            f.0 = i * 168;
            f
        })
        .collect()
}
