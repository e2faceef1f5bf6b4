//! Parsing cost per frame: the parser on real frame shapes (RoCEv2/IPv4, VLAN, IPv6/TCP), and
//! the whole classify stage (parse + route + rewrites), in bursts of 32.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use raceway::config::Config;
use raceway::pipeline::classify::Classifier;
use raceway::traffic::frames::{FrameSpec, Transport};
use raceway::wire::parse::parse;

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

const CONFIG: &str = r#"
[switch]
name = "bench"
mac = "02:00:00:00:00:01"
[qos]
dscp_to_tc = { 26 = 3, default = 0 }
[[port]]
name = "p0"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "p1"
speed_gbps = 100
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "p1"
[[route]]
prefix = "2001:db8:1::/64"
port = "p1"
[[route]]
prefix = "0.0.0.0/0"
port = "p0"
"#;

fn classify_bench(c: &mut Criterion) {
    let classifier = Classifier::new(&Config::parse(CONFIG, "bench").unwrap());
    let mut group = c.benchmark_group("classify");
    group.throughput(Throughput::Elements(32));
    for (name, frame) in frames() {
        let mut burst: Vec<Vec<u8>> = (0..32).map(|_| frame.clone()).collect();
        let template = frame.clone();
        group.bench_function(name, |b| {
            b.iter(|| {
                for frame in burst.iter_mut() {
                    // Restore the pristine frame (a 60-byte copy, ~2 ns) so the TTL never runs out.
                    frame.copy_from_slice(&template);
                    black_box(classifier.classify(frame));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, parse_bench, classify_bench);
criterion_main!(benches);
