//! Parsing cost per frame: the parser on real frame shapes (RoCEv2/IPv4, VLAN, IPv6/TCP), and
//! the whole classify stage (parse + route; it writes nothing), in bursts of 32.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use raceway_core::pipeline::classify::Classifier;
use raceway_core::testing::Leaf;
use raceway_core::traffic::frames::{FrameSpec, Transport};
use raceway_core::wire::parse::parse;

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let rocev2 = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 0x11);
    let mut vlan = rocev2.clone();
    vlan.vlan = Some((3, 100));
    let mut ipv6_tcp = rocev2.clone();
    ipv6_tcp.source = "2001:db8::1".parse().unwrap();
    ipv6_tcp.destination = "2001:db8:1::2".parse().unwrap();
    ipv6_tcp.transport = Transport::Tcp { source: 40000, destination: 443 };
    vec![("rocev2_ipv4", rocev2.build()), ("rocev2_vlan", vlan.build()), ("ipv6_tcp", ipv6_tcp.build())]
}

fn parse_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(32));
    for (name, frame) in frames() {
        let burst: Vec<Vec<u8>> = (0..32).map(|_| frame.clone()).collect();
        group.bench_function(name, |b| {
            b.iter(|| {
                for frame in &burst {
                    black_box(parse(black_box(frame)).ok());
                }
            })
        });
    }
    group.finish();
}

fn classify_bench(c: &mut Criterion) {
    let leaf = Leaf::new("bench")
        .qos("dscp_to_tc = { 26 = 3, default = 0 }")
        .port("p0", 100.0, "")
        .port("p1", 100.0, "")
        .route("10.0.1.0/24", "p1")
        .route("2001:db8:1::/64", "p1")
        .route("0.0.0.0/0", "p0");
    let mut classifier = Classifier::new(&leaf.config());
    let mut group = c.benchmark_group("classify");
    group.throughput(Throughput::Elements(32));
    for (name, frame) in frames() {
        let burst: Vec<Vec<u8>> = (0..32).map(|_| frame.clone()).collect();
        group.bench_function(name, |b| {
            b.iter(|| {
                for frame in &burst {
                    black_box(classifier.classify(black_box(frame)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, parse_bench, classify_bench);
criterion_main!(benches);
