//! The forwarding information base: what the classifier looks up, as one immutable snapshot.
//!
//! A snapshot holds the routes (longest prefix match), the neighbour table (IP -> port and
//! MAC) and the groups a route may spread over. It is built whole from the config and, with a
//! control plane, what the kernel knows (its neighbours and routes), and never changes after:
//! a new generation replaces it, so a worker sees one consistent table for a whole burst.
//!
//! What a route leads to is resolved when the snapshot is built, so a lookup is one route
//! probe (and one neighbour probe for a connected subnet):
//! - `port = "p"` routes go to p's `peer_mac`; `[[group]]`s spread over their ports' peers;
//! - `via = "ip"` (or a list) goes to the neighbours of those next hops: one resolved next hop
//!   is an adjacency, several are a group in `[control] multipath_mode` (ecmp without
//!   `[control]`); when none is resolved the route gleans: its frames go to the control plane,
//!   whose kernel resolves the neighbour (and forwards those first frames itself);
//! - a port's address makes its subnet connected: the destination itself is the neighbour,
//!   looked up per frame, gleaned when unknown; the address itself is local (punted).
//!
//! Config routes and kernel routes coexist; on the same prefix the config's wins (it is the
//! operator's static intent, as a static route's lower distance wins in a router).
//!
//! Generations: the control plane publishes each new snapshot through a `FibHandle` (an
//! atomic pointer swap, then the generation number); a worker compares the generation once
//! per burst and takes the new snapshot only when it changed. No lock, no pause of forwarding;
//! a snapshot is freed when its last reader lets it go.
//!
//! Invariant: every adjacency in a snapshot names an existing port, every group has at least
//! one member, and a group index below `config.groups.len()` is that config group.

use crate::config::{Config, GroupMode, RouteTarget, DEFAULT_FLOWLET_GAP_US};
use crate::pipeline::route::{AddressMap, RouteTable};
use crate::wire::ethernet::MacAddress;
use crate::wire::parse::Destination;
use arc_swap::ArcSwap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a frame leaves: a port and the MAC of the neighbour it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adjacency {
    pub port: u16,
    pub mac: MacAddress,
}

/// What a route leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Adjacency(Adjacency),
    /// A group of adjacencies, one chosen per frame (or flow).
    Group(u32),
    /// The port's connected subnet: the destination is the neighbour.
    Connected(u16),
    /// One of the switch's own addresses.
    Local,
    /// A next hop without a resolved neighbour.
    Glean,
    /// A blackhole (or unreachable, prohibit) route: dropped as `no_route`.
    Discard,
}

/// A group of adjacencies and how to spread over them.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub mode: GroupMode,
    pub flowlet_gap_us: u32,
    pub members: Vec<Adjacency>,
}

/// A neighbour the kernel (or the config) knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbor {
    pub ip: IpAddr,
    pub mac: MacAddress,
    pub port: usize,
}

/// A route the kernel knows: a prefix and its next hops (an IP on a port, or none for a
/// connected route out of the port); no next hop at all is a discard route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    pub address: IpAddr,
    pub len: u8,
    pub next_hops: Vec<(Option<IpAddr>, usize)>,
}

/// What the control plane adds to the config: the kernel's neighbours and routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Learned {
    pub neighbors: Vec<Neighbor>,
    pub routes: Vec<KernelRoute>,
    /// Addresses on the host interfaces (the config's and those added with `ip addr`).
    pub addresses: Vec<IpAddr>,
}

/// One generation of the forwarding tables.
pub struct Fib {
    routes: RouteTable<Target>,
    neighbors_v4: AddressMap<u32, Adjacency>,
    neighbors_v6: AddressMap<u128, Adjacency>,
    pub groups: Vec<Group>,
    /// Counts up from 1 with each snapshot built by one control plane.
    pub generation: u64,
}

/// Where the current snapshot is published: the control plane stores, workers load.
///
/// A replaced snapshot is kept here until no worker holds it, and then freed by the control
/// plane (`reclaim`): a worker letting go of one only decrements a count. (Freeing a 10,000-route
/// snapshot on the worker cost forwarding 11% during route churn.)
pub struct FibHandle {
    current: ArcSwap<Fib>,
    generation: AtomicU64,
    /// Replaced snapshots some worker may still read; only the publisher touches it.
    retired: std::sync::Mutex<Vec<Arc<Fib>>>,
}

impl FibHandle {
    pub fn new(fib: Fib) -> Self {
        let generation = AtomicU64::new(fib.generation);
        Self { current: ArcSwap::from_pointee(fib), generation, retired: std::sync::Mutex::new(Vec::new()) }
    }

    /// Makes `fib` the current snapshot; readers pick it up at their next burst.
    pub fn publish(&self, fib: Fib) {
        let generation = fib.generation;
        let old = self.current.swap(Arc::new(fib));
        // After the pointer: a reader that sees the new number loads the new snapshot.
        self.generation.store(generation, Ordering::Release);
        let mut retired = self.retired.lock().expect("retired snapshots");
        retired.push(old);
        retired.retain(|fib| Arc::strong_count(fib) > 1);
    }

    /// Frees replaced snapshots no reader holds any more; returns how many are still held.
    pub fn reclaim(&self) -> usize {
        let mut retired = self.retired.lock().expect("retired snapshots");
        retired.retain(|fib| Arc::strong_count(fib) > 1);
        retired.len()
    }

    /// The generation readers should have (one atomic load: the per-burst check).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn load(&self) -> Arc<Fib> {
        self.current.load_full()
    }
}

/// The host route length of an address: 32 or 128.
fn host_len(address: IpAddr) -> u8 {
    if address.is_ipv4() {
        32
    } else {
        128
    }
}

impl Fib {
    /// The snapshot of `config` plus what the kernel knows.
    pub fn new(config: &Config, learned: &Learned, generation: u64) -> Self {
        let mut fib = Self {
            routes: RouteTable::empty(),
            neighbors_v4: AddressMap::default(),
            neighbors_v6: AddressMap::default(),
            groups: config
                .groups
                .iter()
                .map(|group| Group {
                    mode: group.mode,
                    flowlet_gap_us: group.flowlet_gap_us,
                    // Config validation gives every member a peer_mac.
                    members: group
                        .members
                        .iter()
                        .filter_map(|&port| Some(Adjacency { port: port as u16, mac: config.ports[port].peer_mac? }))
                        .collect(),
                })
                .collect(),
            generation,
        };
        // Learned neighbours first: a static [[neighbor]] of the config replaces one the kernel
        // learned for the same address.
        let neighbors = learned.neighbors.iter().chain(&config.neighbors);
        for neighbor in neighbors.filter(|neighbor| neighbor.port < config.ports.len()) {
            let adjacency = Adjacency { port: neighbor.port as u16, mac: neighbor.mac };
            match neighbor.ip {
                IpAddr::V4(ip) => fib.neighbors_v4.insert(u32::from(ip), adjacency),
                IpAddr::V6(ip) => fib.neighbors_v6.insert(u128::from(ip), adjacency),
            };
        }
        let multipath_mode = config.control.as_ref().map_or(GroupMode::Ecmp, |control| control.multipath_mode);
        // Connected subnets, then kernel routes, then the config's: later inserts replace
        // earlier ones on the same prefix.
        for (port, config_port) in config.ports.iter().enumerate() {
            for address in &config_port.addresses {
                fib.routes.insert(address.address, address.len, Target::Connected(port as u16));
            }
        }
        for route in &learned.routes {
            let target = fib.resolve_kernel_route(route, multipath_mode, config.ports.len());
            fib.routes.insert(route.address, route.len, target);
        }
        for route in &config.routes {
            let target = match &route.target {
                // Config validation gives every port a route names a peer_mac.
                RouteTarget::Port(port) => match config.ports[*port].peer_mac {
                    Some(mac) => Target::Adjacency(Adjacency { port: *port as u16, mac }),
                    None => Target::Glean,
                },
                RouteTarget::Group(group) => Target::Group(*group as u32),
                RouteTarget::Via(next_hops) => fib.resolve_via(next_hops, multipath_mode),
            };
            fib.routes.insert(route.prefix.address, route.prefix.len, target);
        }
        // The switch's own addresses last: nothing routes them elsewhere.
        let configured = config.ports.iter().flat_map(|port| &port.addresses).map(|address| address.address);
        for address in configured.chain(learned.addresses.iter().copied()) {
            fib.routes.insert(address, host_len(address), Target::Local);
        }
        fib
    }

    /// The neighbour entry of `destination`, if resolved.
    #[inline]
    pub fn neighbor(&self, destination: Destination) -> Option<Adjacency> {
        match destination {
            Destination::V4(ip) => self.neighbors_v4.get(&ip).copied(),
            Destination::V6(ip) => self.neighbors_v6.get(&ip).copied(),
        }
    }

    #[inline]
    pub fn lookup(&self, destination: Destination) -> Option<Target> {
        self.routes.lookup(destination)
    }

    fn neighbor_of(&self, ip: IpAddr) -> Option<Adjacency> {
        self.neighbor(match ip {
            IpAddr::V4(ip) => Destination::V4(u32::from(ip)),
            IpAddr::V6(ip) => Destination::V6(u128::from(ip)),
        })
    }

    /// A route over next hops: their resolved neighbours, as one adjacency or a group.
    fn resolve_via(&mut self, next_hops: &[IpAddr], mode: GroupMode) -> Target {
        let mut members: Vec<Adjacency> = Vec::with_capacity(next_hops.len());
        for adjacency in next_hops.iter().filter_map(|&ip| self.neighbor_of(ip)) {
            if !members.contains(&adjacency) {
                members.push(adjacency);
            }
        }
        self.target_of(members, mode)
    }

    fn target_of(&mut self, members: Vec<Adjacency>, mode: GroupMode) -> Target {
        match members.len() {
            0 => Target::Glean,
            1 => Target::Adjacency(members[0]),
            _ => {
                // Routes over the same next hops share a group (and its flowlet table).
                let existing = self.groups.iter().position(|group| group.mode == mode && group.members == members);
                let index = existing.unwrap_or_else(|| {
                    self.groups.push(Group { mode, flowlet_gap_us: DEFAULT_FLOWLET_GAP_US, members });
                    self.groups.len() - 1
                });
                Target::Group(index as u32)
            }
        }
    }

    fn resolve_kernel_route(&mut self, route: &KernelRoute, mode: GroupMode, ports: usize) -> Target {
        let next_hops: Vec<&(Option<IpAddr>, usize)> =
            route.next_hops.iter().filter(|(_, port)| *port < ports).collect();
        if route.next_hops.is_empty() {
            return Target::Discard;
        }
        match next_hops.as_slice() {
            // A connected route: out of the port, to the destination itself.
            [(None, port)] => Target::Connected(*port as u16),
            _ => {
                let mut members: Vec<Adjacency> = Vec::with_capacity(next_hops.len());
                for &&(ip, _) in &next_hops {
                    if let Some(adjacency) = ip.and_then(|ip| self.neighbor_of(ip)) {
                        if !members.contains(&adjacency) {
                            members.push(adjacency);
                        }
                    }
                }
                self.target_of(members, mode)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// host0 (10.0.0.1/24, fd00::1/64) and uplinks up0, up1 with a neighbour each; routes
    /// by next hop, to a missing neighbour, and to a port; `[control]` sprays multipath.
    static CONFIG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::testing::Leaf::new("t")
            .mac("02:00:00:00:00:aa")
            .qos("")
            .port_to("host0", 100.0, "02:00:00:00:10:00", "addresses = [\"10.0.0.1/24\", \"fd00::1/64\"]")
            .port_to("up0", 100.0, "02:00:00:00:20:00", "")
            .port_to("up1", 100.0, "02:00:00:00:21:00", "")
            .tables("[[neighbor]]\nip = \"10.255.0.0\"\nmac = \"02:00:00:00:20:01\"\nport = \"up0\"")
            .tables("[[neighbor]]\nip = \"10.255.0.2\"\nmac = \"02:00:00:00:21:01\"\nport = \"up1\"")
            .tables("[[route]]\nprefix = \"0.0.0.0/0\"\nvia = [\"10.255.0.0\", \"10.255.0.2\"]")
            .tables("[[route]]\nprefix = \"192.0.2.0/24\"\nvia = \"10.255.0.2\"")
            .tables("[[route]]\nprefix = \"198.51.100.0/24\"\nvia = [\"10.255.0.0\", \"10.255.0.9\"]")
            .tables("[[route]]\nprefix = \"203.0.113.0/24\"\nvia = \"10.255.0.9\"")
            .route("10.9.0.0/16", "up1")
            .tables("[control]\nmultipath_mode = \"spray\"")
            .toml()
    });

    fn v4(text: &str) -> Destination {
        Destination::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn mac(last: u8, port: u8) -> MacAddress {
        MacAddress([0x02, 0, 0, 0, port, last])
    }

    #[test]
    fn routes_resolve_to_adjacencies_groups_connected_local_or_glean() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let fib = Fib::new(&config, &Learned::default(), 1);
        let up0 = Adjacency { port: 1, mac: mac(0x01, 0x20) };
        let up1 = Adjacency { port: 2, mac: mac(0x01, 0x21) };
        // Two resolved next hops: a group in the control's multipath mode.
        let Some(Target::Group(group)) = fib.lookup(v4("8.8.8.8")) else { panic!() };
        assert_eq!(
            fib.groups[group as usize],
            Group { mode: GroupMode::Spray, flowlet_gap_us: 100, members: vec![up0, up1] }
        );
        assert_eq!(fib.lookup(v4("192.0.2.7")), Some(Target::Adjacency(up1)));
        // One of two resolved: that one alone; none resolved: glean.
        assert_eq!(fib.lookup(v4("198.51.100.7")), Some(Target::Adjacency(up0)));
        assert_eq!(fib.lookup(v4("203.0.113.7")), Some(Target::Glean));
        // A port route: its peer.
        assert_eq!(fib.lookup(v4("10.9.1.1")), Some(Target::Adjacency(Adjacency { port: 2, mac: mac(0, 0x21) })));
        // The port's subnet is connected; its own address is local, in both families.
        assert_eq!(fib.lookup(v4("10.0.0.7")), Some(Target::Connected(0)));
        assert_eq!(fib.lookup(v4("10.0.0.1")), Some(Target::Local));
        let v6 = |text: &str| Destination::V6(u128::from(text.parse::<std::net::Ipv6Addr>().unwrap()));
        assert_eq!(fib.lookup(v6("fd00::1")), Some(Target::Local));
        assert_eq!(fib.lookup(v6("fd00::7")), Some(Target::Connected(0)));
        assert_eq!(fib.neighbor(v4("10.255.0.2")), Some(up1));
        assert_eq!(fib.neighbor(v4("10.0.0.7")), None);
    }

    #[test]
    fn learned_state_fills_in_and_the_config_wins_on_the_same_prefix() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let learned = Learned {
            neighbors: vec![
                Neighbor { ip: ip("10.0.0.7"), mac: mac(0x07, 0x10), port: 0 },
                Neighbor { ip: ip("10.255.0.9"), mac: mac(0x09, 0x20), port: 1 },
                // A static neighbour of the config replaces a learned one.
                Neighbor { ip: ip("10.255.0.2"), mac: mac(0xee, 0xee), port: 1 },
                // An unknown port is ignored.
                Neighbor { ip: ip("10.255.0.99"), mac: mac(0x99, 0x99), port: 9 },
            ],
            routes: vec![
                KernelRoute { address: ip("172.16.0.0"), len: 12, next_hops: vec![(Some(ip("10.255.0.9")), 1)] },
                KernelRoute { address: ip("172.17.0.0"), len: 16, next_hops: vec![(None, 2)] },
                KernelRoute {
                    address: ip("172.18.0.0"),
                    len: 16,
                    next_hops: vec![(Some(ip("10.255.0.9")), 1), (Some(ip("10.255.0.2")), 2)],
                },
                // The config routes 192.0.2.0/24 via 10.255.0.2: the kernel's route loses.
                KernelRoute { address: ip("192.0.2.0"), len: 24, next_hops: vec![(Some(ip("10.255.0.9")), 1)] },
            ],
            addresses: Vec::new(),
        };
        let fib = Fib::new(&config, &learned, 7);
        assert_eq!(fib.generation, 7);
        let learned_up0 = Adjacency { port: 1, mac: mac(0x09, 0x20) };
        let static_up1 = Adjacency { port: 2, mac: mac(0x01, 0x21) };
        assert_eq!(fib.neighbor(v4("10.0.0.7")), Some(Adjacency { port: 0, mac: mac(0x07, 0x10) }));
        assert_eq!(fib.neighbor(v4("10.255.0.2")), Some(static_up1));
        assert_eq!(fib.neighbor(v4("10.255.0.99")), None);
        assert_eq!(fib.lookup(v4("172.16.1.1")), Some(Target::Adjacency(learned_up0)));
        assert_eq!(fib.lookup(v4("172.17.1.1")), Some(Target::Connected(2)));
        let Some(Target::Group(group)) = fib.lookup(v4("172.18.1.1")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, vec![learned_up0, static_up1]);
        assert_eq!(fib.lookup(v4("192.0.2.1")), Some(Target::Adjacency(static_up1)));
        // A next hop resolved now turns the config's glean route into an adjacency.
        assert_eq!(fib.lookup(v4("203.0.113.7")), Some(Target::Adjacency(learned_up0)));
    }

    #[test]
    fn a_published_snapshot_is_what_readers_load_next() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let handle = FibHandle::new(Fib::new(&config, &Learned::default(), 1));
        let reader = handle.load();
        assert_eq!(handle.generation(), 1);
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let learned = Learned {
            routes: vec![KernelRoute { address: ip("172.16.0.0"), len: 12, next_hops: vec![(None, 1)] }],
            addresses: vec![ip("10.255.0.1")],
            ..Learned::default()
        };
        handle.publish(Fib::new(&config, &learned, 2));
        assert_eq!(handle.generation(), 2);
        let next = handle.load();
        assert_eq!(next.lookup(v4("172.16.0.1")), Some(Target::Connected(1)));
        assert_eq!(next.lookup(v4("10.255.0.1")), Some(Target::Local), "an address added with ip addr");
        // A snapshot nobody holds is freed as soon as it is replaced.
        drop(next);
        let unheld = Arc::downgrade(&handle.load());
        handle.publish(Fib::new(&config, &learned, 3));
        assert!(unheld.upgrade().is_none(), "generation 2, held by no reader, is freed at once");
        // The old snapshot stays whole for whoever still reads it: the default route's group.
        assert_eq!(reader.generation, 1);
        assert!(matches!(reader.lookup(v4("172.16.0.1")), Some(Target::Group(_))));
        // It is freed by the publisher once its last reader lets go, not by that reader.
        assert_eq!(handle.reclaim(), 1);
        let weak = Arc::downgrade(&reader);
        drop(reader);
        assert!(weak.upgrade().is_some(), "still retired, not freed by the reader's drop");
        assert_eq!(handle.reclaim(), 0);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn routes_over_the_same_next_hops_share_a_group() {
        let text = CONFIG.replace(
            "[[route]]\nprefix = \"10.9.0.0/16\"\nport = \"up1\"",
            "[[route]]\nprefix = \"10.9.0.0/16\"\nvia = [\"10.255.0.0\", \"10.255.0.2\"]",
        );
        let fib = Fib::new(&Config::parse(&text, "t.toml").unwrap(), &Learned::default(), 1);
        assert_eq!(fib.lookup(v4("10.9.1.1")), fib.lookup(v4("8.8.8.8")));
        assert_eq!(fib.groups.len(), 1);
        // Other next hops in the same mode: a group of their own.
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let learned = Learned {
            neighbors: vec![Neighbor { ip: ip("10.255.0.5"), mac: mac(0x05, 0x21), port: 2 }],
            routes: vec![KernelRoute {
                address: ip("172.20.0.0"),
                len: 16,
                next_hops: vec![(Some(ip("10.255.0.0")), 1), (Some(ip("10.255.0.5")), 2)],
            }],
            addresses: Vec::new(),
        };
        let fib = Fib::new(&Config::parse(&text, "t.toml").unwrap(), &learned, 2);
        let (Some(Target::Group(one)), Some(Target::Group(other))) =
            (fib.lookup(v4("8.8.8.8")), fib.lookup(v4("172.20.1.1")))
        else {
            panic!()
        };
        assert_ne!(one, other);
        assert_eq!(fib.groups[other as usize].members[1], Adjacency { port: 2, mac: mac(0x05, 0x21) });
        // A discard route (blackhole) drops what it matches.
        let blackhole = Learned {
            routes: vec![KernelRoute { address: ip("172.22.0.0"), len: 16, next_hops: Vec::new() }],
            ..Learned::default()
        };
        let fib = Fib::new(&Config::parse(&text, "t.toml").unwrap(), &blackhole, 3);
        assert_eq!(fib.lookup(v4("172.22.1.1")), Some(Target::Discard));
        // A next hop on a port that does not exist is ignored (glean), never an index past the ports.
        let stray = Learned {
            routes: vec![KernelRoute { address: ip("172.21.0.0"), len: 16, next_hops: vec![(None, 3)] }],
            ..Learned::default()
        };
        let fib = Fib::new(&Config::parse(&text, "t.toml").unwrap(), &stray, 3);
        assert_eq!(fib.lookup(v4("172.21.1.1")), Some(Target::Glean));
    }
}
