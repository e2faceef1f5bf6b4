//! The whole pipeline on arbitrary frames at arbitrary times: frames arrive on any port, time
//! moves by arbitrary steps, ports transmit when the fuzzer says. Checked after every step:
//! every frame received or injected is queued, consumed, punted or dropped (counted), and at
//! the end, after the queues drain, every buffer cell and group charge is returned. The switch
//! has a control plane: it punts (policed) and takes frames from the kernel.
//!
//! Input: records of [op: u8][port: u8][step_ns: u16 LE][len: u16 LE][len bytes]; op's low two
//! bits pick receive (0 or 2), transmit (1) or inject the bytes as the kernel's (3).
#![no_main]

use libfuzzer_sys::fuzz_target;
use raceway_core::packet::HeapPacket;
use raceway_core::config::Config;
use raceway_core::switch::{Received, Switch};
use raceway_core::testing::Leaf;

/// Every feature at once: two pools, ECN at enqueue and dequeue, a fast watchdog, a port
/// route per host (one 25G), groups in adaptive and flowlet mode, next hops by neighbour, and
/// a control plane that punts.
fn config() -> Config {
    Leaf::new("fuzz")
        .switch("buffer_bytes = 1048576")
        .qos(
            "dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }\npcp_to_tc = { 3 = 3, default = 0 }\nlossless = [3]\n\
             [qos.ecn.3]\nkmin_bytes = 20000\nkmax_bytes = 80000\npmax = 0.5\n\
             [qos.ecn.0]\nkmin_bytes = 10000\nkmax_bytes = 40000\npmax = 0.5\nmark_on = \"dequeue\"\n\
             [qos.pfc_watchdog]\ndetection_ms = 1\nrestoration_ms = 2",
        )
        .port("h0", 100.0, "")
        .port("h1", 25.0, "")
        .port("u0", 100.0, "")
        .port("u1", 100.0, "")
        .route("10.0.0.0/24", "h0")
        .route("10.0.1.0/24", "h1")
        .route("2001:db8:1::/64", "h1")
        .group_route("10.9.0.0/16", "spray")
        .group_route("0.0.0.0/0", "up")
        .group("up", &["u0", "u1"], "adaptive")
        .group("spray", &["u0", "u1", "h1"], "flowlet")
        .tables("[[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:20:01\"\nport = \"u0\"")
        .tables("[[route]]\nprefix = \"198.51.100.0/24\"\nvia = [\"10.255.0.1\", \"10.255.0.3\"]")
        .tables("[control.copp.arp]\npps = 100000\nburst = 100\n[control.copp.ip2me]\npps = 100000\nburst = 100")
        .config()
}

fuzz_target!(|data: &[u8]| {
    let config = config();
    let ports = config.ports.len();
    let mut switch: Switch<HeapPacket> = Switch::new(&config, 7);
    let (mut now, mut received, mut sent, mut consumed, mut injected) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut rest = data;
    while rest.len() >= 6 {
        let (op, port) = (rest[0], usize::from(rest[1]) % ports);
        now += u64::from(u16::from_le_bytes([rest[2], rest[3]])) * 1000;
        let len = usize::from(u16::from_le_bytes([rest[4], rest[5]])).min(rest.len() - 6);
        let frame = rest[6..6 + len].to_vec();
        rest = &rest[6 + len..];
        switch.advance(now);
        if op & 3 == 3 {
            injected += 1;
            let _ = switch.inject(port, HeapPacket::new(frame), now);
        } else if op & 1 == 0 {
            match switch.receive(port, HeapPacket::new(frame), now) {
                Received::FlowControl => consumed += 1,
                Received::Queued { .. } | Received::Dropped(_) | Received::Punted(_) => received += 1,
                Received::Transferred { .. } => panic!("a switch that owns every port handed a frame on"),
            }
            // The engine hands punted frames on after every burst.
            while switch.take_punted().is_some() {}
        } else {
            while switch.take_control(port, now).is_some() {}
            if switch.transmit(port, now).is_some() {
                sent += 1;
            }
        }
        let stats = &switch.stats;
        let dropped: u64 = stats.ports.iter().map(|p| p.dropped()).sum();
        let punted: u64 = stats.ports.iter().flat_map(|p| p.punted).sum();
        assert_eq!(stats.rx_packets(), received, "rx counts data frames");
        assert_eq!(stats.ports.iter().map(|p| p.injected).sum::<u64>(), injected);
        assert_eq!(received + injected, sent + dropped + punted + switch.queued_packets(), "conservation");
    }
    let _ = consumed;
    // Let every pause lapse and send everything still queued.
    now += 10_000_000_000;
    switch.advance(now);
    for port in 0..ports {
        while switch.take_control(port, now).is_some() {}
        while switch.transmit(port, now).is_some() {
            sent += 1;
        }
    }
    let leftover = switch.drain();
    let dropped: u64 = switch.stats.ports.iter().map(|p| p.dropped()).sum();
    let punted: u64 = switch.stats.ports.iter().flat_map(|p| p.punted).sum();
    assert_eq!(
        received + injected,
        sent + dropped + punted,
        "everything left, was punted or dropped ({leftover} drained)"
    );
    assert_eq!(switch.queued_packets(), 0);
    assert_eq!(switch.shared_used(), 0, "buffer cells leaked");
});
