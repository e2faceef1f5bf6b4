//! Route lookup cost: longest-prefix match over a leaf-sized table (hosts /32, racks /24,
//! a default) and a larger one (4,096 /24s plus 1,024 /32s), IPv4 and IPv6.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use raceway_core::config::Prefix;
use raceway_core::pipeline::route::RouteTable;
use raceway_core::wire::IpAddress;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A route's target: a port number (the table does not care what targets are).
fn table(racks: u32, hosts: u32) -> RouteTable<u32> {
    let mut table = RouteTable::empty();
    let mut add = |text: &str, target: u32| {
        let prefix = Prefix::parse(text).unwrap();
        table.insert(prefix.address, prefix.len, target);
    };
    add("0.0.0.0/0", 100);
    add("::/0", 100);
    for rack in 0..racks {
        let prefix = format!("10.{}.{}.0/24", rack >> 8, rack & 0xff);
        add(&prefix, rack % 8);
        let prefix = format!("2001:db8:{rack:x}::/64");
        add(&prefix, rack % 8);
    }
    for host in 0..hosts {
        let prefix = format!("10.200.{}.{}/32", host >> 8, host & 0xff);
        add(&prefix, host % 8);
    }
    table
}

fn lookups(c: &mut Criterion) {
    let mut group = c.benchmark_group("route");
    group.throughput(Throughput::Elements(1024));
    for (name, racks, hosts) in [("leaf_16_racks", 16, 32), ("large_4096_racks", 4096, 1024)] {
        let routes = table(racks, hosts);
        let v4: Vec<IpAddress> = (0..1024u32)
            .map(|i| {
                IpAddress::V4(u32::from(Ipv4Addr::new(
                    10,
                    (((i * 7) % racks) >> 8) as u8,
                    ((i * 7) % racks) as u8,
                    (i % 250) as u8 + 1,
                )))
            })
            .collect();
        let v6: Vec<IpAddress> = (0..1024u32)
            .map(|i| {
                IpAddress::V6(u128::from(Ipv6Addr::new(
                    0x2001,
                    0xdb8,
                    ((i * 7) % racks) as u16,
                    0,
                    0,
                    0,
                    0,
                    i as u16 + 1,
                )))
            })
            .collect();
        group.bench_function(format!("{name}/ipv4"), |b| {
            b.iter(|| {
                for destination in &v4 {
                    black_box(routes.lookup(*destination));
                }
            })
        });
        group.bench_function(format!("{name}/ipv6"), |b| {
            b.iter(|| {
                for destination in &v6 {
                    black_box(routes.lookup(*destination));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
