//! ECN marking end to end, in replay: thresholds, the linear profile (per depth bucket, over
//! more than 10,000 packets), non-ECT handling, checksums, counters against the captures,
//! determinism, and dequeue marking.
//!
//! The queue depth each packet saw is reconstructed from the captures alone, independently of
//! the switch: with no PFC in play, a frame reaches the switch when its last bit arrives
//! (timestamp + wire time), and leaves the queue when its transmission starts (the output
//! timestamp). Depth at a frame's arrival = bytes arrived before it - bytes gone before it.

use crate::util::*;
use raceway_core::traffic::frames::{FrameSpec, Transport};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

const FRAME_LEN: usize = 1024;

/// (timestamp ns, frame) records of one trace.
type Trace = Vec<(u64, Vec<u8>)>;
const KMIN: u64 = 1_000_000;
const KMAX: u64 = 9_000_000;
const PMAX: f64 = 0.2;

/// Wire time at 100G in ps (24 bytes of preamble, IFG and FCS).
fn wire_ps(len: usize) -> u64 {
    ((len as u64 + 24) * 8000).div_ceil(100)
}

/// A frame of the test: its input timestamp, bytes, and ECN codepoint on input.
struct Sent {
    time_ns: u64,
    bytes: Vec<u8>,
}

/// Sender 1: IPv4 ECT(0) at line rate. Sender 2: IPv4 behind an 802.1Q tag, alternating
/// ECT(1) and CE, at line rate. Sender 3: IPv6 ECT(0), one frame per microsecond. All TC3.
fn senders(count: u32) -> Vec<(String, Vec<Sent>)> {
    let spec = |source: &str, destination: &str| {
        let mut spec = FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), 1);
        spec.frame_len = FRAME_LEN;
        spec
    };
    let mut one = spec("10.0.1.9", "10.0.0.2");
    let mut two = spec("10.0.2.9", "10.0.0.2");
    two.vlan = Some((3, 100));
    let mut three = spec("2001:db8:3::9", "2001:db8::2");
    let build = |spec: &mut FrameSpec, psn: u32, ecn: u8| {
        spec.ecn = ecn;
        spec.transport = Transport::Roce { source: 0xc000, opcode: 0x04, dest_qp: 1, psn };
        spec.build()
    };
    let mut inputs =
        vec![("h1".to_string(), Vec::new()), ("h2".to_string(), Vec::new()), ("h3".to_string(), Vec::new())];
    for psn in 0..count {
        let at = u64::from(psn) * 84;
        inputs[0].1.push(Sent { time_ns: at, bytes: build(&mut one, psn, 0b10) });
        inputs[1].1.push(Sent { time_ns: at + 1, bytes: build(&mut two, psn, if psn % 2 == 0 { 0b01 } else { 0b11 }) });
        if psn % 12 == 0 {
            inputs[2].1.push(Sent { time_ns: at + 2, bytes: build(&mut three, psn, 0b10) });
        }
    }
    inputs
}

fn config(mark_on: &str) -> String {
    leaf(
        4,
        "",
        &format!(
            "[qos.buffer]\nlossless_pool_bytes = 15000000\n[qos.pfc]\nxoff_bytes = 12000000\n[qos.ecn.3]\nkmin_bytes = {KMIN}\nkmax_bytes = {KMAX}\npmax = {PMAX}\nmark_on = \"{mark_on}\""
        ),
        "3",
    )
}

fn replay(name: &str, config: &str, inputs: &[(String, Vec<Sent>)], seed: u64) -> Replayed {
    let traces: Vec<(&str, Trace)> = inputs
        .iter()
        .map(|(port, frames)| (port.as_str(), frames.iter().map(|s| (s.time_ns, s.bytes.clone())).collect()))
        .collect();
    let refs: Vec<Input> = traces.iter().map(|(port, frames)| (*port, frames.as_slice())).collect();
    replay_fresh(name, config, &refs, &["--seed", &seed.to_string()])
}

/// (IP source bytes, PSN): what identifies a test frame before and after the switch.
fn key(frame: &[u8]) -> (Vec<u8>, u32) {
    let l3 = l3_offset(frame);
    let (source, l4) = if frame[l3] >> 4 == 4 {
        (frame[l3 + 12..l3 + 16].to_vec(), l3 + 20)
    } else {
        (frame[l3 + 8..l3 + 24].to_vec(), l3 + 40)
    };
    let psn = &frame[l4 + 8 + 9..l4 + 8 + 12];
    (source, u32::from_be_bytes([0, psn[0], psn[1], psn[2]]))
}

fn ecn_of(frame: &[u8]) -> u8 {
    let l3 = l3_offset(frame);
    if frame[l3] >> 4 == 4 {
        frame[l3 + 1] & 3
    } else {
        (frame[l3 + 1] >> 4) & 3
    }
}

/// One delivered frame: the depth it found on arrival, and its ECN in and out.
struct Observed {
    depth: u64,
    ecn_in: u8,
    ecn_out: u8,
}

fn observe(inputs: &[(String, Vec<Sent>)], out: &Path) -> Vec<Observed> {
    // (arrival ps, length, key, ECN on input)
    type Arrival = (u64, usize, (Vec<u8>, u32), u8);
    let mut arrivals: Vec<Arrival> = Vec::new();
    for (_, frames) in inputs {
        for sent in frames {
            arrivals.push((
                sent.time_ns * 1000 + wire_ps(sent.bytes.len()),
                sent.bytes.len(),
                key(&sent.bytes),
                ecn_of(&sent.bytes),
            ));
        }
    }
    arrivals.sort_by_key(|a| a.0);
    let outputs = read_pcap(&out.join("h0.pcap"));
    let ecn_out: HashMap<(Vec<u8>, u32), u8> = outputs.iter().map(|(_, f)| (key(f), ecn_of(f))).collect();
    assert_eq!(outputs.len(), arrivals.len(), "every frame delivered");
    // Departures in ps (the capture has ns, rounded down: a departure lies in [t, t + 1 ns)).
    let departures: Vec<(u64, usize)> = outputs.iter().map(|(t, f)| (t * 1000, f.len())).collect();
    let mut arrived_bytes = 0u64;
    let mut gone_bytes = 0u64;
    let mut gone = 0;
    let mut observed = Vec::new();
    for (at, len, key, ecn_in) in arrivals {
        // Count only departures certainly before the arrival (t + 1 ns <= arrival); one that
        // may be simultaneous is left in, overstating the depth by at most one frame.
        while gone < departures.len() && departures[gone].0 + 1000 <= at {
            gone_bytes += departures[gone].1 as u64;
            gone += 1;
        }
        let depth = arrived_bytes - gone_bytes;
        observed.push(Observed { depth, ecn_in, ecn_out: ecn_out[&key] });
        arrived_bytes += len as u64;
    }
    observed
}

const MARGIN: u64 = 2 * FRAME_LEN as u64 + 8;

#[test]
fn thresholds_linear_profile_counters_and_checksums() {
    let inputs = senders(10_000);
    let out = replay("ecn-enqueue", &config("enqueue"), &inputs, 7);
    let observed = observe(&inputs, &out);
    let ect = |o: &&Observed| o.ecn_in == 0b10 || o.ecn_in == 0b01;

    // Below kmin: nothing marked. Above kmax: every ECT frame marked.
    let below: Vec<&Observed> = observed.iter().filter(ect).filter(|o| o.depth + MARGIN < KMIN).collect();
    let above: Vec<&Observed> = observed.iter().filter(ect).filter(|o| o.depth > KMAX + MARGIN).collect();
    assert!(below.len() > 1000 && above.len() > 1000, "{} below kmin, {} above kmax", below.len(), above.len());
    assert!(below.iter().all(|o| o.ecn_out == o.ecn_in), "marked below kmin");
    assert!(above.iter().all(|o| o.ecn_out == 0b11), "unmarked above kmax");

    // Between: per depth bucket, marked counts follow pmax x (q - kmin) / (kmax - kmin).
    // Tolerance: 4 binomial standard deviations per bucket (a false alarm about 1 in 16,000
    // per bucket), plus one frame of depth uncertainty folded into the expectation.
    let between: Vec<&Observed> = observed.iter().filter(ect).filter(|o| o.depth >= KMIN && o.depth <= KMAX).collect();
    assert!(between.len() >= 10_000, "only {} ECT frames between the thresholds", between.len());
    let buckets = 10;
    for bucket in 0..buckets {
        let low = KMIN + (KMAX - KMIN) * bucket / buckets;
        let high = KMIN + (KMAX - KMIN) * (bucket + 1) / buckets;
        let in_bucket: Vec<&&Observed> = between.iter().filter(|o| o.depth >= low && o.depth < high).collect();
        let p = |o: &Observed| PMAX * (o.depth - KMIN) as f64 / (KMAX - KMIN) as f64;
        let expected: f64 = in_bucket.iter().map(|o| p(o)).sum();
        let variance: f64 = in_bucket.iter().map(|o| p(o) * (1.0 - p(o))).sum();
        let marked = in_bucket.iter().filter(|o| o.ecn_out == 0b11).count() as f64;
        let slack = 4.0 * variance.sqrt() + in_bucket.len() as f64 * PMAX * (FRAME_LEN as f64 / (KMAX - KMIN) as f64);
        assert!(
            (marked - expected).abs() <= slack,
            "bucket {bucket}: {marked} marked, {expected:.1} expected, slack {slack:.1}"
        );
    }

    // Counters match the captures: marked = arrived without CE and left with CE.
    let stats = stats(&out);
    let marked_in_pcap = observed.iter().filter(|o| o.ecn_in != 0b11 && o.ecn_out == 0b11).count() as u64;
    assert_eq!(stats["ports"]["h0"]["queues"][3]["ecn_marked"].as_u64().unwrap(), marked_in_pcap);
    assert!(observed.iter().filter(|o| o.ecn_in == 0b11).all(|o| o.ecn_out == 0b11), "CE stays CE");
    assert!(
        observed.iter().all(|o| o.ecn_in == 0 || o.ecn_out == o.ecn_in || o.ecn_out == 0b11),
        "only CE is ever written"
    );

    // Every IPv4 checksum verifies (the test's own RFC 1071 code), VLAN-tagged frames included.
    let frames = read_pcap(&out.join("h0.pcap"));
    let mut tagged_marked = 0;
    for (_, frame) in &frames {
        let l3 = l3_offset(frame);
        if frame[l3] >> 4 == 4 {
            assert!(ipv4_header_checksum_ok(&frame[l3..]));
            if l3 == 18 && ecn_of(frame) == 0b11 {
                tagged_marked += 1;
            }
        }
    }
    assert!(tagged_marked > 0);
    assert!(frames.iter().any(|(_, f)| f[l3_offset(f)] >> 4 == 6 && ecn_of(f) == 0b11), "IPv6 frames are marked too");
}

#[test]
fn same_seed_same_marks_other_seed_other_marks() {
    let inputs = senders(3000);
    let config = config("enqueue");
    let a = replay("ecn-seed-a", &config, &inputs, 11);
    let b = replay("ecn-seed-b", &config, &inputs, 11);
    let c = replay("ecn-seed-c", &config, &inputs, 12);
    let bytes = |dir: &Path| std::fs::read(dir.join("h0.pcap")).unwrap();
    assert!(bytes(&a) == bytes(&b), "same seed must give identical bytes");
    assert!(bytes(&a) != bytes(&c), "another seed must mark other frames");
    assert_eq!(std::fs::read(a.join("stats.json")).unwrap(), std::fs::read(b.join("stats.json")).unwrap());
}

#[test]
fn dequeue_marking_marks_and_counts() {
    let inputs = senders(8000);
    let out = replay("ecn-dequeue", &config("dequeue"), &inputs, 7);
    let observed = observe(&inputs, &out);
    let marked_in_pcap = observed.iter().filter(|o| o.ecn_in != 0b11 && o.ecn_out == 0b11).count() as u64;
    let stats = stats(&out);
    assert!(marked_in_pcap > 1000);
    assert_eq!(stats["ports"]["h0"]["queues"][3]["ecn_marked"].as_u64().unwrap(), marked_in_pcap);
    // The depth a frame leaves behind is below what it found on arrival in a growing queue
    // only by what left meanwhile; early frames (queue under kmin) are never marked.
    assert!(observed.iter().take(500).all(|o| o.ecn_out == o.ecn_in));
}

#[test]
fn non_ect_is_never_marked_dropped_on_lossy_kept_on_lossless() {
    // h1 sends non-ECT on TC0 (lossy), h2 non-ECT on TC3 (lossless), both profiled.
    let config = leaf(
        3,
        "",
        "[qos.pfc]\nxoff_bytes = 12000000\n[qos.ecn.0]\nkmin_bytes = 100000\nkmax_bytes = 300000\npmax = 0.5\n\
         [qos.ecn.3]\nkmin_bytes = 100000\nkmax_bytes = 300000\npmax = 0.5",
        "3",
    );
    let stream = |sender: u8, dscp: u8| -> Vec<Sent> {
        let mut spec =
            FrameSpec::rocev2(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, sender, 9)), "10.0.0.2".parse().unwrap(), 1);
        spec.frame_len = FRAME_LEN;
        spec.dscp = dscp;
        spec.ecn = 0;
        (0..4000u32)
            .map(|psn| {
                spec.transport = Transport::Roce { source: 0xc000, opcode: 4, dest_qp: 1, psn };
                Sent { time_ns: u64::from(psn) * 84, bytes: spec.build() }
            })
            .collect()
    };
    let inputs = vec![("h1".to_string(), stream(1, 0)), ("h2".to_string(), stream(2, 26))];
    let out = replay("ecn-not-ect", &config, &inputs, 3);
    let stats = stats(&out);
    let wred = stats["ports"]["h1"]["drops"]["wred"].as_u64().unwrap();
    assert!(wred > 100, "only {wred} wred drops");
    assert_eq!(stats["ports"]["h0"]["queues"][0]["dropped"].as_u64().unwrap(), wred);
    assert_eq!(
        stats["ports"]["h2"]["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        0
    );
    let frames = read_pcap(&out.join("h0.pcap"));
    assert!(frames.iter().all(|(_, f)| ecn_of(f) == 0), "a non-ECT frame was marked");
    assert_eq!(frames.len() as u64 + wred, 8000);
    for queue in [0, 3] {
        assert_eq!(stats["ports"]["h0"]["queues"][queue]["ecn_marked"], 0);
    }
}

/// What a 2:1 incast of 60-byte ECT frames on the lossless class did, seen from the captures.
struct SmallFrameIncast {
    /// ECT frames that arrived, before the first XOFF left, to a queue already holding more
    /// than kmax of cells; and how many of them left marked.
    past_kmax: usize,
    past_kmax_marked: usize,
    /// When the first CE frame and the first PFC frame left the switch (ns).
    first_mark_ns: Option<u64>,
    first_xoff_ns: Option<u64>,
}

const SMALL_FRAME: usize = 60;
const SMALL_KMIN: u64 = 50_000;
const SMALL_KMAX: u64 = 200_000;
/// Per (ingress port, priority) group: two senders pause when the queue holds about twice it.
const SMALL_XOFF: u64 = 300_000;

/// h1 and h2 each send 6,000 60-byte RoCEv2 ECT(0) frames to h0 on TC3 (lossless, default
/// PFC at a static XOFF of 300,000 cell bytes per group), one every 7 ns (96% of 100G each);
/// ECN on TC3 at kmin 50,000 / kmax 200,000 in `measure`. The queue's cells are reconstructed from the captures: before the first XOFF
/// nothing is paused, so each frame reaches the switch at its timestamp plus its wire time.
fn small_frame_incast(measure: &str) -> SmallFrameIncast {
    let config = leaf(
        3,
        "",
        &format!(
            "[qos.pfc]\nxoff_bytes = {SMALL_XOFF}\n[qos.ecn.3]\nkmin_bytes = {SMALL_KMIN}\nkmax_bytes = {SMALL_KMAX}\npmax = 0.2\nmeasure = \"{measure}\""
        ),
        "3",
    );
    let stream = |sender: u8| -> Vec<Sent> {
        let mut spec =
            FrameSpec::rocev2(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, sender, 9)), "10.0.0.2".parse().unwrap(), 1);
        spec.frame_len = SMALL_FRAME;
        spec.ecn = 0b10;
        (0..6000u32)
            .map(|psn| {
                spec.transport = Transport::Roce { source: 0xc000, opcode: 4, dest_qp: 1, psn };
                Sent { time_ns: u64::from(psn) * 7 + u64::from(sender), bytes: spec.build() }
            })
            .collect()
    };
    let inputs = vec![("h1".to_string(), stream(1)), ("h2".to_string(), stream(2))];
    let out = replay(&format!("ecn-small-incast-{measure}"), &config, &inputs, 5);
    let is_pfc = |frame: &[u8]| frame.len() >= 14 && frame[12..14] == [0x88, 0x08];
    let first_xoff_ns = ["h1", "h2"]
        .iter()
        .filter_map(|port| read_pcap(&out.join(format!("{port}.pcap"))).into_iter().find(|(_, f)| is_pfc(f)))
        .map(|(t, _)| t)
        .min();
    let outputs = read_pcap(&out.join("h0.pcap"));
    assert_eq!(outputs.len(), 12_000, "lossless: every frame delivered");
    let first_mark_ns = outputs.iter().find(|(_, f)| ecn_of(f) == 0b11).map(|(t, _)| *t);
    let ecn_out: HashMap<(Vec<u8>, u32), u8> = outputs.iter().map(|(_, f)| (key(f), ecn_of(f))).collect();
    let mut arrivals: Vec<(u64, (Vec<u8>, u32))> = inputs
        .iter()
        .flat_map(|(_, frames)| frames.iter().map(|s| (s.time_ns * 1000 + wire_ps(s.bytes.len()), key(&s.bytes))))
        .collect();
    arrivals.sort();
    let cell = raceway_core::config::plan::charge(SMALL_FRAME);
    let xoff_ps = first_xoff_ns.map_or(u64::MAX, |t| t * 1000);
    let (mut gone, mut past_kmax, mut past_kmax_marked) = (0, 0, 0);
    for (arrived, (at, key)) in arrivals.iter().enumerate() {
        if *at >= xoff_ps {
            break;
        }
        // Departures certainly before the arrival (the capture rounds down to the ns); one
        // that may be simultaneous stays counted, overstating the depth by one frame.
        while gone < outputs.len() && outputs[gone].0 * 1000 + 1000 <= *at {
            gone += 1;
        }
        let depth_cells = (arrived - gone) as u64 * cell;
        if depth_cells > SMALL_KMAX + cell {
            past_kmax += 1;
            past_kmax_marked += usize::from(ecn_out[key] == 0b11);
        }
    }
    SmallFrameIncast { past_kmax, past_kmax_marked, first_mark_ns, first_xoff_ns }
}

#[test]
fn small_frames_are_marked_on_their_cells_before_pfc_pauses() {
    // In cells (the default), as an ASIC's WRED: the queue passes kmax long before a group
    // reaches XOFF, and every frame that arrives past kmax leaves CE, before the first XOFF.
    let cells = small_frame_incast("cells");
    assert!(cells.past_kmax >= 1000, "only {} frames arrived past kmax before XOFF", cells.past_kmax);
    assert!(
        cells.past_kmax_marked * 10 >= cells.past_kmax * 9,
        "{} of {} frames past kmax marked",
        cells.past_kmax_marked,
        cells.past_kmax
    );
    let first_mark = cells.first_mark_ns.expect("frames were marked");
    let first_xoff = cells.first_xoff_ns.expect("the incast reaches XOFF");
    assert!(first_mark < first_xoff, "PFC paused at {first_xoff} ns, before ECN marked at {first_mark} ns");
    // In frame bytes, 60-byte frames count 60 of the 256 bytes each holds: the same queue is
    // a quarter as deep to ECN, which sees kmax only after PFC paused: most frames past kmax
    // (in cells) leave unmarked, as the review found (4.7% marked, 35 XOFF per sender).
    let frame_bytes = small_frame_incast("frame_bytes");
    assert!(frame_bytes.first_xoff_ns.is_some() && frame_bytes.past_kmax >= 1000);
    assert!(
        frame_bytes.past_kmax_marked * 2 < frame_bytes.past_kmax,
        "{} of {} marked in frame bytes",
        frame_bytes.past_kmax_marked,
        frame_bytes.past_kmax
    );
}
