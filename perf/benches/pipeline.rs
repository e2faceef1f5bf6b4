//! The whole pipeline on in-memory bursts, per core: 32 frames received (parse, route, TC,
//! TTL/MAC/checksum rewrite, admission, ECN check) then transmitted (scheduler, release),
//! for a port route and for each group mode. Reports frames per second; allocations per
//! frame are asserted to be zero in core/tests/alloc.rs.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use raceway_core::packet::HeapPacket;
use raceway_core::switch::Switch;
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
                for (packet, template) in packets.iter_mut().zip(&templates) {
                    packet.bytes.copy_from_slice(template);
                }
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

criterion_group!(benches, pipeline);
criterion_main!(benches);
