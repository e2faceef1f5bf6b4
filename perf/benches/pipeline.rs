//! The whole pipeline on in-memory bursts, per core: 32 frames received (parse, route, TC,
//! TTL/MAC/checksum rewrite, admission, ECN check) then transmitted (scheduler, release),
//! for a port route and for each group mode; and a burst through an idle port and through a
//! congested one, its lossless queue held above ECN kmax (`idle`, `congested`: the in-memory
//! half of perf/congested.sh). Reports frames per second; allocations per frame are asserted to be
//! zero in core/tests/alloc.rs.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use raceway_core::engine::port_tx::{serve, TxQueue};
use raceway_core::packet::HeapPacket;
use raceway_core::switch::{CutThrough, QueueAll, Received, Switch};
use raceway_core::testing::{rocev2_burst, Leaf};
use std::net::{IpAddr, Ipv4Addr};

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(32));
    for (name, mode, octet) in [
        ("port_route", "ecmp", 9u8),
        ("group_ecmp", "ecmp", 1),
        ("group_spray", "spray", 1),
        ("group_adaptive", "adaptive", 1),
        ("group_flowlet", "flowlet", 1),
    ] {
        let config = Leaf::two_uplinks("bench", mode).config();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let templates = rocev2_burst(32, |flow, spec| spec.destination = IpAddr::V4(Ipv4Addr::new(10, 0, octet, flow)));
        let mut packets: Vec<HeapPacket> = templates.iter().cloned().map(HeapPacket::new).collect();
        let mut sent: Vec<HeapPacket> = Vec::with_capacity(32);
        let mut now = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                refill(&mut packets, &templates);
                for packet in packets.drain(..) {
                    black_box(switch.receive(0, packet, now));
                }
                now += 3_000;
                switch.advance(now);
                for port in 1..3 {
                    while let Some(packet) = switch.transmit(port, now) {
                        sent.push(packet);
                    }
                }
                std::mem::swap(&mut packets, &mut sent);
            })
        });
        assert_eq!(packets.len(), 32);
    }
    group.finish();
}

/// Writes each frame of a burst back to its template (the switch rewrote its headers).
fn refill(packets: &mut [HeapPacket], templates: &[Vec<u8>]) {
    for (packet, template) in packets.iter_mut().zip(templates) {
        packet.bytes.copy_from_slice(template);
    }
}

/// A transmitter that takes up to a burst of data frames a turn.
struct Burst(Vec<HeapPacket>);

impl TxQueue<HeapPacket> for Burst {
    fn pfc(&mut self, _: &[u8]) -> bool {
        true
    }
    fn data(&mut self, packet: HeapPacket) {
        self.0.push(packet);
    }
    fn has_room(&self) -> bool {
        self.0.len() < 32
    }
}

/// A cut-through transmitter that takes every frame (an idle port's tx burst).
struct TakeAll(Vec<HeapPacket>);

impl CutThrough<HeapPacket> for TakeAll {
    fn may_send(&self, _: usize, _: u64) -> bool {
        true
    }
    fn send(&mut self, _: usize, packet: HeapPacket, _: u64) {
        self.0.push(packet);
    }
}

/// A burst of 64-byte lossless RoCEv2 frames (TC 3) in and out, as perf/congested.sh's config
/// has them (kmin 100 KB, kmax 500 KB): through an idle port, where the burst's frames cut
/// through as one run (`idle`), and through a port whose TC 3 queue holds 12,000 frames
/// (3 MB of cells, above kmax: every frame is marked CE) with XOFF outstanding, where every
/// frame is admitted, marked, queued and picked by the scheduler (`congested`). In memory
/// and in cache, their ratio is the work a congested frame adds; perf/congested.sh's live
/// ratio adds the misses of a deep queue and the driver's.
fn congestion(c: &mut Criterion) {
    let config = Leaf::new("congested")
        .qos("dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n[qos.ecn.3]\nkmin_bytes = 100000\nkmax_bytes = 500000\npmax = 0.2")
        .port("host", 100.0, "")
        .port("u0", 100.0, "")
        .route("10.0.9.0/24", "u0")
        .config();
    let templates = rocev2_burst(32, |flow, spec| spec.destination = IpAddr::V4(Ipv4Addr::new(10, 0, 9, flow)));
    let mut packets: Vec<HeapPacket> = templates.iter().cloned().map(HeapPacket::new).collect();
    let mut now = 0u64;
    let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
    let mut cut = TakeAll(Vec::with_capacity(32));
    c.bench_function("pipeline/idle", |b| {
        b.iter(|| {
            refill(&mut packets, &templates);
            switch.receive_burst(0, packets.drain(..).map(Ok), now, &mut cut);
            now += 3_000;
            std::mem::swap(&mut packets, &mut cut.0);
        })
    });
    assert_eq!(packets.len(), 32, "the burst cut through");

    let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
    for template in templates.iter().cycle().take(12_000) {
        let received = switch.receive(0, HeapPacket::new(template.clone()), now);
        assert!(matches!(received, Received::Queued { .. }), "the queue takes 12,000 frames: {received:?}");
    }
    let mut sent = Burst(Vec::with_capacity(32));
    c.bench_function("pipeline/congested", |b| {
        b.iter(|| {
            refill(&mut packets, &templates);
            switch.receive_burst(0, packets.drain(..).map(Ok), now, &mut QueueAll);
            now += 3_000;
            black_box(serve(&mut switch, 1, now, u64::MAX, &mut sent));
            std::mem::swap(&mut packets, &mut sent.0);
        })
    });
    assert_eq!(packets.len(), 32, "a burst in, a burst out");
    assert!(switch.queue_bytes(1, 3) > 500_000, "the queue stayed above kmax");
}

criterion_group!(benches, pipeline, congestion);
criterion_main!(benches);
