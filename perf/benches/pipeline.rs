//! The whole pipeline on in-memory bursts, per core: 32 frames received (parse, route, TC,
//! TTL/MAC/checksum rewrite, admission, ECN check) then transmitted (scheduler, release),
//! for a port route and for each group mode. Reports frames per second; allocations per
//! frame are asserted to be zero in tests/alloc.rs.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use raceway::config::Config;
use raceway::packet::HeapPacket;
use raceway::switch::Switch;
use raceway::traffic::frames::{FrameSpec, Transport};
use std::net::{IpAddr, Ipv4Addr};

const CONFIG: &str = r#"
[switch]
name = "bench"
mac = "02:00:00:00:00:01"
[qos]
dscp_to_tc = { 26 = 3, default = 0 }
lossless = [3]
[qos.ecn.3]
kmin_bytes = 150000
kmax_bytes = 1500000
pmax = 0.2
[[port]]
name = "host"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "u0"
speed_gbps = 100
peer_mac = "02:00:00:00:20:00"
[[port]]
name = "u1"
speed_gbps = 100
peer_mac = "02:00:00:00:21:00"
[[route]]
prefix = "10.0.9.0/24"
port = "u0"
[[route]]
prefix = "0.0.0.0/0"
group = "up"
[[group]]
name = "up"
ports = ["u0", "u1"]
mode = "MODE"
"#;

fn burst(destination_octet: u8) -> Vec<Vec<u8>> {
    (0..32u8)
        .map(|flow| {
            let mut spec = FrameSpec::rocev2(
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                IpAddr::V4(Ipv4Addr::new(10, 0, destination_octet, flow)),
                1,
            );
            spec.transport =
                Transport::Roce { source: 0xc000 + u16::from(flow), opcode: 4, dest_qp: u32::from(flow), psn: 0 };
            spec.build()
        })
        .collect()
}

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
        let config = Config::parse(&CONFIG.replace("MODE", mode), "bench").unwrap();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let templates = burst(octet);
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
