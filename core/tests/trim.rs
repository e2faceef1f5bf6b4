//! Packet trimming end to end, in replay: a lossy 2:1 incast (IPv4 and IPv6 RoCEv2) into a
//! small lossy pool. Every frame offered comes out exactly once, either as the router makes
//! it or trimmed, and a trimmed frame's bytes are what the test computes apart from the
//! switch (cut to the trim size, DSCP 48, IP and UDP lengths and the IPv4 checksum
//! rewritten). The counters match the capture, and trimmed frames leave from the strict
//! trim queue ahead of the data queued before them.

use crate::util::*;
use raceway_core::traffic::frames::{FrameSpec, Transport};
use std::collections::HashMap;

const FRAME_LEN: usize = 1024;
const TRIM_SIZE: usize = 128;
const TRIM_DSCP: u8 = 48;

/// The leaf of three hosts with a lossy pool of 64 KiB, trimming to 128 bytes in TC6
/// (DSCP 48's class, strict). `extra` goes in `[qos.trim]`.
fn config(extra: &str) -> String {
    leaf(
        3,
        "",
        &format!(
            "[qos.buffer]\nlossy_pool_bytes = 65536\n[qos.scheduler]\nstrict = [6]\n[qos.trim]\nsize = {TRIM_SIZE}\ndscp = {TRIM_DSCP}\n{extra}"
        ),
        "3",
    )
}

/// h1 sends IPv4 and h2 IPv6 RoCEv2 (TC0, ECT(0)) to h0, each at line rate: `count` each.
/// Each input port's name and its trace.
type Traces = Vec<(&'static str, Vec<(u64, Vec<u8>)>)>;

fn incast(count: u32) -> Traces {
    let build = |source: &str, destination: &str, psn: u32| {
        let mut spec = FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), 5);
        spec.frame_len = FRAME_LEN;
        spec.dscp = 0;
        spec.ecn = 0b10;
        spec.transport = Transport::Roce { source: 0xc000 | psn as u16, opcode: 0x01, dest_qp: 5, psn };
        spec.build()
    };
    let period = 84; // ns: a 1,024-byte frame's wire time at 100G, rounded up
    let h1 = (0..count).map(|psn| (u64::from(psn) * period, build("10.0.1.9", "10.0.0.2", psn))).collect();
    let h2 = (0..count).map(|psn| (u64::from(psn) * period + 1, build("2001:db8:2::9", "2001:db8::2", psn))).collect();
    vec![("h1", h1), ("h2", h2)]
}

/// `routed` cut to `size` bytes as the trimming design says, computed without the switch.
fn trimmed(routed: &[u8], size: usize, dscp: u8) -> Vec<u8> {
    let l3 = l3_offset(routed);
    let mut out = routed[..size].to_vec();
    let set_u16 =
        |out: &mut Vec<u8>, at: usize, value: usize| out[at..at + 2].copy_from_slice(&(value as u16).to_be_bytes());
    if out[l3] >> 4 == 4 {
        out[l3 + 1] = dscp << 2 | (out[l3 + 1] & 0x03);
        set_u16(&mut out, l3 + 2, size - l3);
        fix_ipv4_checksum(&mut out[l3..]);
        let udp = l3 + 20;
        set_u16(&mut out, udp + 4, size - udp);
        set_u16(&mut out, udp + 6, 0);
    } else {
        out[l3] = 0x60 | dscp >> 2;
        out[l3 + 1] = (dscp & 0x03) << 6 | (out[l3 + 1] & 0x3f);
        set_u16(&mut out, l3 + 4, size - l3 - 40);
        let udp = l3 + 40;
        set_u16(&mut out, udp + 4, size - udp);
    }
    out
}

#[test]
fn a_lossy_incast_is_trimmed_and_every_frame_leaves_whole_or_trimmed() {
    let dir = temp_dir("trim-incast");
    let inputs = incast(300);
    let records: Vec<(&str, &Records)> = inputs.iter().map(|(port, frames)| (*port, frames.as_slice())).collect();
    let out = replay_in(&dir, &config(""), &records, &[]);
    // What each frame offered may come out as, and its order of arrival.
    let mut expected: HashMap<Vec<u8>, (usize, bool)> = HashMap::new();
    let mut arrivals: Vec<(u64, usize)> = Vec::new();
    for (port, frames) in &inputs {
        for (time, frame) in frames {
            let index = arrivals.len();
            arrivals.push((*time, index));
            let whole = routed(frame, SWITCH_MAC, PEER_MACS[0]);
            expected.insert(trimmed(&whole, TRIM_SIZE, TRIM_DSCP), (index, true));
            assert!(expected.insert(whole, (index, false)).is_none(), "{port}: frames are distinct");
        }
    }
    arrivals.sort();
    let rank: HashMap<usize, usize> = arrivals.iter().enumerate().map(|(rank, &(_, index))| (index, rank)).collect();
    let outputs = read_pcap(&out.join("h0.pcap"));
    let mut seen = vec![false; arrivals.len()];
    let mut trimmed_out = 0u64;
    // (trimmed, rank of arrival) in the order of departure.
    let mut departures: Vec<(bool, usize)> = Vec::new();
    for (_, frame) in &outputs {
        let &(index, is_trimmed) = expected.get(frame).unwrap_or_else(|| panic!("an unexpected frame: {frame:02x?}"));
        assert!(!seen[index], "frame {index} came out twice");
        seen[index] = true;
        if is_trimmed {
            trimmed_out += 1;
            assert_eq!(frame.len(), TRIM_SIZE);
            assert!(ipv4_or_v6_lengths_agree(frame));
        }
        departures.push((is_trimmed, rank[&index]));
    }
    // A trimmed frame overtook older data when a whole frame that arrived before it left
    // after it.
    let mut oldest_whole_after = usize::MAX;
    let mut overtook = false;
    for &(is_trimmed, rank) in departures.iter().rev() {
        if is_trimmed {
            overtook |= oldest_whole_after < rank;
        } else {
            oldest_whole_after = oldest_whole_after.min(rank);
        }
    }
    assert_eq!(outputs.len(), arrivals.len(), "every frame left, whole or trimmed");
    assert!(trimmed_out > 0, "the incast overflowed the pool");
    assert!(trimmed_out < arrivals.len() as u64 / 2, "most frames went whole");
    let stats = stats(&out);
    let h0 = &stats["ports"]["h0"];
    let queue = |tc: usize, key: &str| h0["queues"][tc][key].as_u64().unwrap();
    assert_eq!(queue(0, "trimmed"), trimmed_out);
    assert_eq!((queue(0, "trim_dropped"), queue(0, "dropped")), (0, 0));
    assert_eq!((queue(6, "trim_tx"), queue(6, "tx_packets")), (trimmed_out, trimmed_out), "out of the trim queue");
    assert_eq!(queue(6, "tx_bytes"), trimmed_out * TRIM_SIZE as u64);
    assert_eq!(queue(0, "tx_packets") + trimmed_out, arrivals.len() as u64);
    assert!(overtook, "the strict trim queue let a trimmed frame out ahead of older data");
}

/// The IP and UDP lengths of a frame add up to its length.
fn ipv4_or_v6_lengths_agree(frame: &[u8]) -> bool {
    let l3 = l3_offset(frame);
    let read = |at: usize| usize::from(u16::from_be_bytes([frame[at], frame[at + 1]]));
    if frame[l3] >> 4 == 4 {
        ipv4_header_checksum_ok(&frame[l3..])
            && read(l3 + 2) == frame.len() - l3
            && read(l3 + 24) == frame.len() - l3 - 20
    } else {
        read(l3 + 4) == frame.len() - l3 - 40 && read(l3 + 44) == frame.len() - l3 - 40
    }
}

#[test]
fn without_trimming_the_same_incast_drops_what_was_trimmed_and_a_full_trim_queue_drops_too() {
    let inputs = incast(300);
    let records: Vec<(&str, &Records)> = inputs.iter().map(|(port, frames)| (*port, frames.as_slice())).collect();
    let trimmed_run = replay_fresh("trim-on", &config(""), &records, &[]);
    let plain = replay_fresh("trim-off", &leaf(3, "", "[qos.buffer]\nlossy_pool_bytes = 65536", "3"), &records, &[]);
    let count =
        |dir: &std::path::Path, tc: usize, key: &str| stats(dir)["ports"]["h0"]["queues"][tc][key].as_u64().unwrap();
    // Without trimming the refused frames are lost; with it, none is, though trimmed frames
    // hold cells of the pool too, so the queue refuses at least as many.
    let dropped = count(&plain, 0, "dropped");
    assert!(dropped > 0);
    assert_eq!(read_pcap(&plain.join("h0.pcap")).len() as u64 + dropped, 600);
    assert!(count(&trimmed_run, 0, "trimmed") >= dropped);
    assert_eq!(count(&trimmed_run, 0, "dropped"), 0);
    assert_eq!(read_pcap(&trimmed_run.join("h0.pcap")).len(), 600);
    // The trim queue itself at its limit (weighted 1 against the data's 100, it fills):
    // trimmed frames are dropped and counted.
    let tight = leaf(
        3,
        "",
        &format!("[qos.buffer]\nlossy_pool_bytes = 65536\n[qos.scheduler]\ndwrr = {{ 0 = 100, 6 = 1 }}\n[qos.trim]\ndscp = {TRIM_DSCP}"),
        "3",
    );
    let out = replay_fresh("trim-tight", &tight, &records, &[]);
    let (trimmed_count, trim_dropped, trim_tx) =
        (count(&out, 0, "trimmed"), count(&out, 0, "trim_dropped"), count(&out, 6, "trim_tx"));
    assert!(trim_dropped > 0, "trimmed {trimmed_count}, sent {trim_tx}");
    assert_eq!(trimmed_count, trim_dropped + trim_tx);
    assert_eq!(count(&out, 0, "dropped"), trim_dropped);
    assert_eq!(
        stats(&out)["ports"]["h1"]["drops"]["buffer_full"].as_u64().unwrap()
            + stats(&out)["ports"]["h2"]["drops"]["buffer_full"].as_u64().unwrap(),
        trim_dropped
    );
}
