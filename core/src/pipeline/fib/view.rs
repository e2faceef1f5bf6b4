//! The FIB seen from outside the packet path: one destination explained as `ip route get`
//! would (`explain`), and the whole table as text or as a dump (`raceway show route`, the
//! differential tests against the kernel).
//!
//! Invariant: these only read a snapshot; none runs on a worker.

use super::*;

/// The FIB's answer for one destination (`Fib::explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    pub prefix: (IpAddr, u8),
    pub target: Target,
    pub hops: Vec<ExplainedHop>,
    /// The kernel's routes for the prefix waiting behind the one in force, if any.
    pub waiting: Option<Waiting>,
}

/// One next hop of a route: its port (none: an interface that is no port), gateway (none:
/// the destination itself), the MAC frames go to through it (none: not used now), weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainedHop {
    pub port: Option<u16>,
    pub gateway: Option<IpAddr>,
    pub mac: Option<MacAddress>,
    pub weight: u16,
}

impl Fib {
    /// The FIB's answer for `destination`, as `ip route get` gives the kernel's: the longest
    /// prefix matching it, what it resolves to, and the route's next hops (`show route`).
    pub fn explain(&self, destination: IpAddress) -> Option<Explained> {
        let (address, len, id) = self.routes.lookup_prefix(destination)?;
        let index = id as usize;
        let target = self.next_hop(id);
        let definition = self.definitions.get(index / CHUNK).and_then(|chunk| chunk[index % CHUNK].clone());
        // What frames for `destination` go to now; a next hop the route names is used when its
        // neighbour is among these (else: no neighbour yet, or its interface is dead).
        let forwarded: Vec<Adjacency> = match target {
            Target::Adjacency(adjacency) => vec![adjacency],
            Target::Group(group) => {
                self.groups.get(group as usize).map_or_else(Vec::new, |group| group.members.clone())
            }
            Target::Connected(port) => self.neighbor(port, destination).into_iter().collect(),
            _ => Vec::new(),
        };
        let hop = |gateway: Option<IpAddr>, port: Option<u16>, weight: u16| {
            let mac = port.and_then(|port| {
                let resolved = gateway
                    .map_or_else(|| self.neighbor(port, destination), |ip| self.neighbor(port, ip_destination(ip)));
                resolved.filter(|adjacency| forwarded.contains(adjacency)).map(|adjacency| adjacency.mac)
            });
            ExplainedHop { port, gateway, mac, weight }
        };
        let hops: Vec<ExplainedHop> = match definition.as_deref() {
            Some(Via::Kernel(hops)) => {
                hops.iter().map(|kernel| hop(kernel.gateway, kernel.port, kernel.weight)).collect()
            }
            Some(Via::Object(object)) => match self.objects.get(object) {
                Some(Some(hops)) => hops.iter().map(|kernel| hop(kernel.gateway, kernel.port, kernel.weight)).collect(),
                _ => Vec::new(),
            },
            Some(Via::Connected(port)) => vec![hop(None, Some(*port), 1)],
            // A config next hop's neighbour may be on any port: the one it was found on.
            Some(Via::Gateways(gateways)) => {
                let neighbors = self.dump_neighbors();
                gateways
                    .iter()
                    .map(|&gateway| {
                        let port = neighbors.iter().find(|(ip, _)| *ip == gateway).map(|(_, adjacency)| adjacency.port);
                        hop(Some(gateway), port, 1)
                    })
                    .collect()
            }
            Some(Via::Peer(_)) | Some(Via::ConfigGroup(_)) => forwarded
                .iter()
                .map(|member| ExplainedHop { port: Some(member.port), gateway: None, mac: Some(member.mac), weight: 1 })
                .collect(),
            _ => Vec::new(),
        };
        let waiting = self.waiting(address, len);
        Some(Explained { prefix: (address, len), target, hops, waiting })
    }

    /// Every route as (prefix, length, target), sorted: what `raceway` forwards by.
    pub fn dump(&self) -> Vec<(IpAddr, u8, Target)> {
        let mut routes: Vec<(IpAddr, u8, Target)> =
            self.routes.routes().map(|(address, len, id)| (address, len, self.next_hop(id))).collect();
        routes.sort_by_key(|(address, len, _)| (*address, *len));
        routes
    }

    /// The whole snapshot as text, one line per route and then per neighbour, sorted, ports by
    /// name (`raceway run --fib-dump`): what the workers forward by, to compare with the
    /// kernel's `ip route` and `ip neigh`.
    ///
    /// ```text
    /// # raceway FIB generation 7: 4 routes, 1 neighbours
    /// 10.0.0.0/24 connected host0
    /// 10.0.0.1/32 local
    /// 10.64.0.0/16 via up0 02:00:00:00:20:01
    /// 10.200.0.0/24 group ecmp up0 02:00:00:00:20:01 up1 02:00:00:00:21:01
    /// neighbor 10.255.0.1 up0 02:00:00:00:20:01
    /// ```
    ///
    /// Other targets: `glean` (a next hop not resolved yet), `blackhole`, `kernel REASON` (the
    /// kernel answers: `KernelReason`).
    pub fn to_text(&self, port_names: &[&str]) -> String {
        use std::fmt::Write;
        let port = |index: u16| port_names.get(usize::from(index)).copied().unwrap_or("?");
        let mut text = String::with_capacity(48 * (self.routes() + self.neighbors() + 1));
        let _ = writeln!(
            text,
            "# raceway FIB generation {}: {} routes, {} neighbours",
            self.generation,
            self.routes(),
            self.neighbors()
        );
        for (address, len, target) in self.dump() {
            self.write_route(&mut text, address, len, target, port_names);
        }
        for (ip, adjacency) in self.dump_neighbors() {
            let _ = writeln!(text, "neighbor {ip} {} {}", port(adjacency.port), adjacency.mac);
        }
        text
    }

    /// One route's line of `to_text`, newline included.
    pub fn write_route(&self, text: &mut String, address: IpAddr, len: u8, target: Target, port_names: &[&str]) {
        use std::fmt::Write;
        let port = |index: u16| port_names.get(usize::from(index)).copied().unwrap_or("?");
        let _ = write!(text, "{address}/{len} ");
        let _ = match target {
            Target::Adjacency(adjacency) => writeln!(text, "via {} {}", port(adjacency.port), adjacency.mac),
            Target::Group(index) => match self.groups.get(index as usize) {
                Some(group) => {
                    let _ = write!(text, "group {}", group.mode.name());
                    for member in group.members.iter() {
                        let _ = write!(text, " {} {}", port(member.port), member.mac);
                    }
                    writeln!(text)
                }
                None => writeln!(text, "group ?"),
            },
            Target::Connected(index) => writeln!(text, "connected {}", port(index)),
            Target::Local => writeln!(text, "local"),
            Target::Glean => writeln!(text, "glean"),
            Target::Blackhole => writeln!(text, "blackhole"),
            Target::Kernel(reason) => writeln!(text, "kernel {}", reason.name()),
        };
    }

    /// Every neighbour as (IP, adjacency), sorted.
    pub fn dump_neighbors(&self) -> Vec<(IpAddr, Adjacency)> {
        let v4 = self.neighbors_v4.iter().map(|(&(port, ip), &mac)| (IpAddr::V4(ip.into()), Adjacency { port, mac }));
        let v6 = self.neighbors_v6.iter().map(|(&(port, ip), &mac)| (IpAddr::V6(ip.into()), Adjacency { port, mac }));
        let mut neighbors: Vec<(IpAddr, Adjacency)> = v4.chain(v6).collect();
        neighbors.sort_by_key(|(ip, adjacency)| (*ip, adjacency.port));
        neighbors
    }
}
