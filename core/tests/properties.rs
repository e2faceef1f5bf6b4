//! Property tests over random traces and configs (proptest, which shrinks a failure to a
//! minimal case):
//! - conservation: frames in = frames out + drops + still queued, after every step;
//! - buffer counters return to zero once idle (and never go below zero: the suite builds with
//!   overflow checks, so an underflow would panic);
//! - a lossless priority never drops under random incasts from PFC-compliant peers;
//! - DWRR gives each backlogged class its weight's share of bytes;
//! - strict priority: a backlogged strict class always goes first, the highest first;
//! - random small leaf-spine fabrics, workloads and modes are lossless and complete.

use crate::util::*;
use proptest::prelude::*;
use raceway_core::config::{Config, GroupMode};
use raceway_core::packet::HeapPacket;
use raceway_core::switch::{Received, Switch};
use raceway_core::tm::schedule::Scheduler;
use raceway_core::traffic::frames::{FrameSpec, Transport};
use std::net::{IpAddr, Ipv4Addr};

/// A random frame: mostly routable RoCEv2/UDP to one of the leaf's hosts in a random class,
/// sometimes garbage bytes.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u8..4, 0u8..64, 0u8..4, 60usize..1500, 1u8..=64).prop_map(|(host, dscp, ecn, len, ttl)| {
            let mut spec = FrameSpec::rocev2(
                IpAddr::V4(Ipv4Addr::new(10, 0, 9, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, host, 2)),
                0x100,
            );
            spec.dscp = dscp;
            spec.ecn = ecn;
            spec.frame_len = len;
            spec.ttl = ttl;
            spec.build()
        }),
        1 => proptest::collection::vec(any::<u8>(), 0..200),
    ]
}

/// A step: a frame arriving on a port after some nanoseconds, or a port transmitting.
#[derive(Debug, Clone)]
enum Step {
    Arrive { port: usize, after_ns: u64, frame: Vec<u8> },
    Transmit { port: usize, after_ns: u64 },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![
            3 => (0usize..4, 0u64..2000, frame()).prop_map(|(port, after_ns, frame)| Step::Arrive { port, after_ns, frame }),
            2 => (0usize..4, 0u64..2000).prop_map(|(port, after_ns)| Step::Transmit { port, after_ns }),
        ],
        1..300,
    )
}

/// A 4-host leaf with a small buffer, lossless TC3 and ECN on TC3 and TC0.
fn small_leaf() -> Config {
    let qos = "[qos.ecn.3]\nkmin_bytes = 5000\nkmax_bytes = 40000\npmax = 0.3\n\
               [qos.ecn.0]\nkmin_bytes = 2000\nkmax_bytes = 20000\npmax = 0.5\n";
    Config::parse(&leaf(4, "buffer_bytes = 1048576", qos, "3"), "leaf.toml").unwrap()
}

fn drops(switch: &Switch<HeapPacket>) -> u64 {
    switch.stats.ports.iter().map(|p| p.dropped()).sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn conservation_holds_at_every_step_and_the_buffer_empties(steps in steps(), seed in any::<u64>()) {
        let config = small_leaf();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, seed);
        let (mut now, mut received, mut sent) = (0u64, 0u64, 0u64);
        for step in steps {
            match step {
                Step::Arrive { port, after_ns, frame } => {
                    now += after_ns * 1000;
                    switch.advance(now);
                    if !matches!(switch.receive(port, HeapPacket::new(frame), now), Received::FlowControl) {
                        received += 1;
                    }
                }
                Step::Transmit { port, after_ns } => {
                    now += after_ns * 1000;
                    switch.advance(now);
                    while switch.take_control(port, now).is_some() {}
                    sent += u64::from(switch.transmit(port, now).is_some());
                }
            }
            prop_assert_eq!(switch.stats.rx_packets(), received);
            prop_assert_eq!(received, sent + drops(&switch) + switch.queued_packets());
        }
        // Idle: let pauses lapse and every queue drain.
        now += 1_000_000_000_000;
        switch.advance(now);
        for port in 0..4 {
            while switch.take_control(port, now).is_some() {}
            while switch.transmit(port, now).is_some() {
                sent += 1;
            }
        }
        prop_assert_eq!(switch.queued_packets(), 0);
        prop_assert_eq!(switch.shared_used(), 0);
        for port in 0..4 {
            for tc in 0..8 {
                prop_assert_eq!(switch.queue_bytes(port, tc), 0);
            }
        }
        prop_assert_eq!(received, sent + drops(&switch));
    }
}

/// (timestamp ns, frame) records of one trace.
type Trace = Vec<(u64, Vec<u8>)>;

/// `count` lossless RoCEv2 frames of `len` bytes from sender host `sender` to host 0, from
/// `start_ns` on, back to back at 100G, PSN 0...
fn incast_flow(sender: u8, count: u32, len: usize, start_ns: u64) -> Trace {
    let gap_ns = ((len + 24) as u64 * 8).div_ceil(100);
    (0..count)
        .map(|psn| {
            let mut spec = FrameSpec::rocev2(
                IpAddr::V4(Ipv4Addr::new(10, 0, sender, 9)),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                0x100 + u32::from(sender),
            );
            spec.frame_len = len;
            spec.transport = Transport::Roce { source: 0xc000, opcode: 0x04, dest_qp: 0x100, psn };
            (start_ns + u64::from(psn) * gap_ns, spec.build())
        })
        .collect()
}

proptest! {
    // Each case is a replay of a few thousand frames: fewer cases.
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn lossless_incast_from_pfc_compliant_peers_never_drops(
        senders in 2u8..=6,
        count in 100u32..800,
        len in 64usize..1500,
        starts in proptest::collection::vec(0u64..20_000, 6),
        speed in prop_oneof![Just(10u32), Just(25), Just(100)],
        dynamic in any::<bool>(),
    ) {
        let dir = temp_dir(&format!("prop-incast-{}", std::process::id()));
        let pfc = if dynamic { "" } else { "[qos.pfc]\nxoff_bytes = 200000\n" };
        let config = leaf(usize::from(senders) + 1, "buffer_bytes = 4194304", pfc, "3")
            .replacen("speed_gbps = 100", &format!("speed_gbps = {speed}"), 1);
        let traces: Vec<(String, Trace)> = (1..=senders)
            .map(|s| (format!("h{s}"), incast_flow(s, count, len, starts[usize::from(s) - 1])))
            .collect();
        let inputs: Vec<Input> = traces.iter().map(|(port, frames)| (port.as_str(), frames.as_slice())).collect();
        let out = replay_in(&dir, &config, &inputs, &[]);
        let stats = stats(&out);
        let total = u64::from(senders) * u64::from(count);
        for port in (0..=senders).map(|p| format!("h{p}")) {
            let dropped: u64 = stats["ports"][&port]["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
            prop_assert_eq!(dropped, 0, "{} dropped", port);
        }
        prop_assert_eq!(stats["ports"]["h0"]["tx_packets"].as_u64().unwrap(), total);
        // In order per sender.
        let delivered = read_pcap(&out.join("h0.pcap"));
        for sender in 1..=senders {
            let psns: Vec<u32> = delivered
                .iter()
                .filter(|(_, f)| f[12..14] == [0x08, 0x00] && f[14 + 14] == sender)
                .map(|(_, f)| u32::from_be_bytes([0, f[14 + 20 + 8 + 9], f[14 + 20 + 8 + 10], f[14 + 20 + 8 + 11]]))
                .collect();
            prop_assert!(psns.iter().enumerate().all(|(i, &psn)| psn == i as u32), "h{} out of order", sender);
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

fn scheduler(qos: &str) -> Scheduler {
    let text = format!(
        "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n{qos}\n[[port]]\nname = \"p\"\nspeed_gbps = 1\npeer_mac = \"02:00:00:00:00:02\"\n"
    );
    Scheduler::new(&Config::parse(&text, "t.toml").unwrap().qos)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn dwrr_shares_follow_the_weights(
        weights in proptest::collection::vec(1u32..=100, 2..=4),
        sizes in proptest::collection::vec(64usize..=9000, 4),
    ) {
        // Classes 0.. with these weights, always backlogged, each with its own frame size.
        let dwrr: Vec<String> = weights.iter().enumerate().map(|(tc, w)| format!("{tc} = {w}")).collect();
        let mut scheduler = scheduler(&format!("[qos.scheduler]\nstrict = [7]\ndwrr = {{ {} }}", dwrr.join(", ")));
        let busy = (1u8 << weights.len()) - 1;
        let mut bytes = vec![0u64; weights.len()];
        // Enough rounds that the largest frame fits many times over: long-run shares.
        let total_weight: u32 = weights.iter().sum();
        let rounds = 200u64;
        let budget = rounds * u64::from(total_weight) * 1024;
        let mut sent = 0u64;
        while sent < budget {
            let tc = scheduler.select(0xff, busy, |tc| sizes[tc]).expect("backlogged");
            prop_assert!(tc < weights.len());
            bytes[tc] += sizes[tc] as u64;
            sent += sizes[tc] as u64;
        }
        let total: u64 = bytes.iter().sum();
        for (tc, &weight) in weights.iter().enumerate() {
            let expected = f64::from(weight) / f64::from(total_weight);
            let got = bytes[tc] as f64 / total as f64;
            // Within a 5% relative error, plus one max-size frame per round of slack.
            let slack = 9000.0 / (rounds as f64 * 1024.0 * f64::from(weight));
            prop_assert!((got - expected).abs() <= expected * 0.05 + expected * slack,
                "tc {} weight {}: {:.4} of bytes, expected {:.4}", tc, weight, got, expected);
        }
    }

    #[test]
    fn strict_classes_go_first_highest_first(
        strict in proptest::collection::btree_set(4usize..8, 1..=3),
        backlog in any::<u8>(),
        eligible in any::<u8>(),
    ) {
        let list: Vec<String> = strict.iter().map(|tc| tc.to_string()).collect();
        let mut scheduler = scheduler(&format!("[qos.scheduler]\nstrict = [{}]\ndwrr = {{ 0 = 10, 1 = 10 }}", list.join(", ")));
        let strict_mask = strict.iter().fold(0u8, |m, tc| m | 1 << tc);
        let chosen = scheduler.select(eligible, backlog, |_| 1000);
        let ready = eligible & backlog;
        if ready & strict_mask != 0 {
            let highest = 7 - (ready & strict_mask).leading_zeros() as usize;
            prop_assert_eq!(chosen, Some(highest));
        } else if let Some(tc) = chosen {
            // Otherwise a ready DWRR class, never a paused or empty one.
            prop_assert!(ready & (1 << tc) != 0 && strict_mask & (1 << tc) == 0);
        } else {
            prop_assert_eq!(ready & !strict_mask, 0, "a ready DWRR class was skipped");
        }
    }
}

proptest! {
    // Each case runs a small fabric to completion (milliseconds each).
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any small leaf-spine, workload and uplink mode, with or without DCQCN: lossless traffic
    /// from PFC-obeying hosts is never dropped and every message completes.
    #[test]
    fn fabrics_are_lossless_and_complete(
        leaves in 1u8..=3,
        spines in 1u8..=3,
        hosts_per_leaf in 1u8..=3,
        workload in 0usize..3,
        mode in proptest::sample::select(GroupMode::ALL),
        dcqcn in any::<bool>(),
        kib in 16u64..512,
        seed in any::<u64>(),
    ) {
        prop_assume!(usize::from(leaves) * usize::from(hosts_per_leaf) >= 2);
        let text = format!(
            "[fabric]\nname = \"prop\"\nleaves = {leaves}\nspines = {spines}\nhosts_per_leaf = {hosts_per_leaf}\n\
             [switch]\nbuffer_bytes = 4194304\n\
             [qos]\ndscp_to_tc = {{ 26 = 3, 48 = 6, default = 0 }}\nlossless = [3]\n\
             [qos.ecn.3]\nkmin_bytes = 50000\nkmax_bytes = 200000\npmax = 0.2\n\
             [dcqcn]\nenabled = {dcqcn}\n"
        );
        let fabric = raceway_core::engine::fabric::Fabric::parse(&text, "prop.toml", Some(mode)).unwrap();
        let collective = [
            raceway_core::engine::fabric::workload::Collective::Incast { target: 0 },
            raceway_core::engine::fabric::workload::Collective::AllToAll,
            raceway_core::engine::fabric::workload::Collective::AllReduce,
        ][workload];
        let options = raceway_core::engine::fabric::engine::FabricOptions {
            collective,
            message_bytes: kib * 1024,
            messages: 2,
            roce_mtu: 4096,
            seed,
            horizon_ms: 1000.0,
            progress: false,
            threads: 2,
            flows: Vec::new(),
            origin: Default::default(),
            jitter_ps: 0,
            sample: None,
            qp_rates: false,
        };
        let result = raceway_core::engine::fabric::engine::run(&fabric, &options, None).unwrap();
        prop_assert_eq!(result.drops, 0, "{:?}", result.drops_by_reason);
        prop_assert_eq!(result.incomplete_messages, 0);
        prop_assert!(!result.timed_out);
    }
}
