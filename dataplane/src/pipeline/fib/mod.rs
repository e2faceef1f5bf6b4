//! The forwarding information base: what the classifier looks up, as immutable snapshots that
//! a writer derives from one another change by change.
//!
//! A snapshot (`Fib`) holds the routes (longest prefix match to a next-hop index), the next
//! hops (an index to what it resolves to: an adjacency, a group, connected, local, glean or
//! discard), the neighbour table (IP -> port and MAC) and the groups a route may spread over.
//! Routes lead to next hops by index, as SAI's routes lead to next-hop objects and VPP's to
//! load-balance objects: a neighbour that resolves or moves rewrites the few next hops that use
//! it, never the routes (a million routes over two BGP next hops change in two writes).
//!
//! What a route leads to (`Via`) is resolved in the writer, so a lookup is one route probe
//! and one next-hop read (and one neighbour probe for a connected subnet):
//! - `port = "p"` routes go to p's `peer_mac`; `[[group]]`s spread over their ports' peers;
//! - `via = "ip"` (or a list) goes to the neighbours of those next hops: one resolved next hop
//!   is an adjacency, several are a group in `[control] multipath_mode` (ecmp without
//!   `[control]`); when none is resolved the route gleans: its frames go to the control plane,
//!   whose kernel resolves the neighbour (and forwards those first frames itself);
//! - a port's address makes its subnet connected: the destination itself is the neighbour,
//!   looked up per frame, gleaned when unknown; the address itself is local (punted).
//!
//! On one prefix the switch's own address wins, then the config's route (the operator's
//! static intent, as a static route's lower distance wins in a router), then the kernel's,
//! then the subnet of a configured address.
//!
//! Generations: `FibWriter` applies each change to its working tables in place where no
//! snapshot shares them and copies only the map, shard or chunk it touches where one does
//! (`route::CowMap`); `snapshot` then costs a pointer per prefix length and per next-hop chunk.
//! The control plane publishes each snapshot through a `FibHandle` (an atomic pointer swap,
//! then the generation number); a worker compares the generation once per burst and takes the
//! new snapshot only when it changed. No lock, no pause of forwarding; what only a replaced
//! snapshot held is freed by the publisher once its last reader lets it go.
//!
//! Invariant: every adjacency in a snapshot names an existing port, every group has at least
//! two members, a group index below `config.groups.len()` is that config group, and every
//! next-hop index in the route table is a live next hop of the same snapshot; the writer's
//! tables after any sequence of changes equal those built at once from the resulting state.

mod writer;

pub use crate::config::Neighbor;
use crate::config::{Config, GroupMode};
use crate::pipeline::route::{CowMap, RouteTable};
use crate::wire::ethernet::MacAddress;
use crate::wire::parse::Destination;
use arc_swap::ArcSwap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
pub use writer::FibWriter;

/// Where a frame leaves: a port and the MAC of the neighbour it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Adjacency {
    pub port: u16,
    pub mac: MacAddress,
}

/// Where a forwarded frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Adjacency(Adjacency),
    /// A group of the FIB (`Fib::groups`): the switch picks the member.
    Group(u32),
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
    /// Each member's next-hop address, for a group of next hops (a multipath route of the
    /// kernel's or a `via` list); empty for a config `[[group]]`. Counters name it by these.
    pub via: Vec<IpAddr>,
}

/// A route the kernel knows: a prefix and its next hops (an IP on a port, or none for a
/// connected route out of the port); no next hop at all is a discard route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    pub address: IpAddr,
    pub len: u8,
    pub next_hops: Vec<(Option<IpAddr>, usize)>,
}

/// What the control plane adds to the config, all at once (tests, and `Fib::new`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Learned {
    pub neighbors: Vec<Neighbor>,
    pub routes: Vec<KernelRoute>,
    /// Addresses on the host interfaces (the config's and those added with `ip addr`).
    pub addresses: Vec<IpAddr>,
}

/// The kernel's next hops of a route or nexthop object: (gateway, port).
pub type KernelHops = Box<[(Option<IpAddr>, u16)]>;

/// What a route leads to before its next hops are resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Via {
    Discard,
    Local,
    Connected(u16),
    /// A config route out of a port: its `peer_mac` (glean without one).
    Peer(u16),
    ConfigGroup(u32),
    /// Next hops by address (a config route's `via`): their neighbours, on any port.
    Gateways(Box<[IpAddr]>),
    /// The kernel's next hops: (gateway, port); a lone gatewayless one is a connected route,
    /// none at all a discard route.
    Kernel(KernelHops),
    /// A kernel nexthop object (`RTA_NH_ID`), defined by `FibWriter::set_object`.
    Object(u32),
}

/// Which of the writer's sources a route comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Config,
    Kernel,
}

/// Index of a next hop in a snapshot.
pub type NextHopId = u32;

/// Next hops per chunk: a change copies one chunk (768 bytes) that a snapshot shares.
const CHUNK: usize = 64;

/// One generation of the forwarding tables.
#[derive(Clone)]
pub struct Fib {
    routes: RouteTable<NextHopId>,
    next_hops: Vec<Arc<[Target; CHUNK]>>,
    neighbors_v4: CowMap<u32, Adjacency>,
    neighbors_v6: CowMap<u128, Adjacency>,
    pub groups: Arc<Vec<Group>>,
    /// Counts up from 1 with each snapshot published by one writer.
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

/// `address` with the bits past `len` cleared (how the FIB keys a prefix).
pub fn masked(address: IpAddr, len: u8) -> IpAddr {
    match address {
        IpAddr::V4(v4) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

impl Fib {
    /// The snapshot of `config` plus what the kernel knows, built at once.
    pub fn new(config: &Config, learned: &Learned, generation: u64) -> Self {
        let mut writer = FibWriter::new(config);
        writer.learn(learned);
        writer.snapshot(generation)
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
        self.routes.lookup(destination).map(|id| self.next_hop(id))
    }

    #[inline]
    fn next_hop(&self, id: NextHopId) -> Target {
        let id = id as usize;
        self.next_hops[id / CHUNK][id % CHUNK]
    }

    /// Prefixes in the route table (connected subnets and the switch's addresses included).
    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    pub fn neighbors(&self) -> usize {
        self.neighbors_v4.len() + self.neighbors_v6.len()
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
    /// Other targets: `glean` (a next hop not resolved yet), `discard` (blackhole, unreachable).
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
            let _ = write!(text, "{address}/{len} ");
            let _ = match target {
                Target::Adjacency(adjacency) => writeln!(text, "via {} {}", port(adjacency.port), adjacency.mac),
                Target::Group(index) => match self.groups.get(index as usize) {
                    Some(group) => {
                        let members: Vec<String> = group
                            .members
                            .iter()
                            .map(|member| format!("{} {}", port(member.port), member.mac))
                            .collect();
                        writeln!(text, "group {} {}", group.mode.name(), members.join(" "))
                    }
                    None => writeln!(text, "group ?"),
                },
                Target::Connected(index) => writeln!(text, "connected {}", port(index)),
                Target::Local => writeln!(text, "local"),
                Target::Glean => writeln!(text, "glean"),
                Target::Discard => writeln!(text, "discard"),
            };
        }
        for (ip, adjacency) in self.dump_neighbors() {
            let _ = writeln!(text, "neighbor {ip} {} {}", port(adjacency.port), adjacency.mac);
        }
        text
    }

    /// Every neighbour as (IP, adjacency), sorted.
    pub fn dump_neighbors(&self) -> Vec<(IpAddr, Adjacency)> {
        let v4 = self.neighbors_v4.iter().map(|(ip, adjacency)| (IpAddr::V4((*ip).into()), *adjacency));
        let v6 = self.neighbors_v6.iter().map(|(ip, adjacency)| (IpAddr::V6((*ip).into()), *adjacency));
        let mut neighbors: Vec<(IpAddr, Adjacency)> = v4.chain(v6).collect();
        neighbors.sort_by_key(|(ip, _)| *ip);
        neighbors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// host0 (10.0.0.1/24, fd00::1/64) and uplinks up0, up1 with a neighbour each; routes
    /// by next hop, to a missing neighbour, and to a port; `[control]` sprays multipath.
    pub(super) static CONFIG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
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

    pub(super) fn v4(text: &str) -> Destination {
        Destination::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    pub(super) fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    pub(super) fn mac(last: u8, port: u8) -> MacAddress {
        MacAddress([0x02, 0, 0, 0, port, last])
    }

    #[test]
    fn masked_clears_exactly_the_bits_past_the_length() {
        let cases = [
            ("10.1.2.3", 0, "0.0.0.0"),
            ("10.1.2.3", 8, "10.0.0.0"),
            ("10.1.2.255", 23, "10.1.2.0"),
            ("10.1.2.3", 31, "10.1.2.2"),
            ("10.1.2.3", 32, "10.1.2.3"),
            ("fd00:1:2:3:4:5:6:7", 0, "::"),
            ("fd00:1:2:3:4:5:6:7", 1, "8000::"),
            ("fd00:1:2:3:4:5:6:7", 48, "fd00:1:2::"),
            ("fd00:1:2:3:4:5:6:7", 64, "fd00:1:2:3::"),
            ("fd00:1:2:3:4:5:6:7", 127, "fd00:1:2:3:4:5:6:6"),
            ("fd00:1:2:3:4:5:6:7", 128, "fd00:1:2:3:4:5:6:7"),
        ];
        for (address, len, expected) in cases {
            let expected: IpAddr = expected.parse().unwrap();
            assert_eq!(masked(address.parse().unwrap(), len), expected, "{address}/{len}");
        }
    }

    #[test]
    fn the_text_dump_has_a_line_per_route_and_neighbour_with_port_names() {
        let v6 = "[[neighbor]]\nip = \"fd00::7\"\nmac = \"02:00:00:00:10:07\"\nport = \"host0\"\n";
        let config = Config::parse(&format!("{}{v6}", *CONFIG), "t.toml").unwrap();
        let fib = Fib::new(&config, &Learned::default(), 3);
        let text = fib.to_text(&["host0", "up0", "up1"]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("# raceway FIB generation 3: {} routes, 3 neighbours", fib.routes()));
        assert_eq!(lines.len(), 1 + fib.routes() + 3);
        for line in [
            "0.0.0.0/0 group spray up0 02:00:00:00:20:01 up1 02:00:00:00:21:01",
            "10.0.0.0/24 connected host0",
            "10.0.0.1/32 local",
            "10.9.0.0/16 via up1 02:00:00:00:21:00",
            "192.0.2.0/24 via up1 02:00:00:00:21:01",
            "203.0.113.0/24 glean",
            "fd00::/64 connected host0",
            "fd00::1/128 local",
            "neighbor 10.255.0.0 up0 02:00:00:00:20:01",
            "neighbor 10.255.0.2 up1 02:00:00:00:21:01",
            "neighbor fd00::7 host0 02:00:00:00:10:07",
        ] {
            assert!(lines.contains(&line), "no '{line}' in\n{text}");
        }
        // Sorted as `dump` is: IPv4 before IPv6, routes before neighbours.
        assert!(
            lines.iter().position(|l| l.starts_with("fd00::/64"))
                > lines.iter().position(|l| l.starts_with("203.0.113.0"))
        );
        assert!(lines[1..=fib.routes()].iter().all(|line| !line.starts_with("neighbor")));
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
            Group {
                mode: GroupMode::Spray,
                flowlet_gap_us: 100,
                members: vec![up0, up1],
                via: vec!["10.255.0.0".parse().unwrap(), "10.255.0.2".parse().unwrap()],
            }
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

    /// A kernel nexthop object defines the routes over it: redefining it moves them all; a
    /// blackhole object discards; routes over an object not (yet) known glean.
    #[test]
    fn routes_over_a_nexthop_object_follow_the_object() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        for i in 0..100u32 {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0xac10_0000 + (i << 8)));
            writer.set_route(Source::Kernel, address, 24, Some(Via::Object(9)));
        }
        assert_eq!(writer.snapshot(1).lookup(v4("172.16.5.1")), Some(Target::Glean));
        let up0 = Adjacency { port: 1, mac: mac(0x01, 0x20) };
        let up1 = Adjacency { port: 2, mac: mac(0x01, 0x21) };
        writer.set_object(9, Some(Some(Box::new([(Some(ip("10.255.0.0")), 1)]))));
        assert_eq!(writer.snapshot(2).lookup(v4("172.16.5.1")), Some(Target::Adjacency(up0)));
        writer.set_neighbor(ip("10.255.0.9"), Some((1, mac(0x09, 0x20))));
        writer.set_object(9, Some(Some(Box::new([(Some(ip("10.255.0.9")), 1), (Some(ip("10.255.0.2")), 2)]))));
        let fib = writer.snapshot(3);
        let Some(Target::Group(group)) = fib.lookup(v4("172.16.99.1")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, vec![Adjacency { port: 1, mac: mac(0x09, 0x20) }, up1]);
        // A neighbour of the object's next hop moving re-resolves it.
        writer.set_neighbor(ip("10.255.0.9"), Some((1, mac(0x99, 0x20))));
        let fib = writer.snapshot(4);
        let Some(Target::Group(group)) = fib.lookup(v4("172.16.99.1")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, vec![Adjacency { port: 1, mac: mac(0x99, 0x20) }, up1]);
        // The same for an object whose only next hop is that neighbour.
        writer.set_object(9, Some(Some(Box::new([(Some(ip("10.255.0.9")), 1)]))));
        assert_eq!(
            writer.snapshot(5).lookup(v4("172.16.5.1")),
            Some(Target::Adjacency(Adjacency { port: 1, mac: mac(0x99, 0x20) }))
        );
        writer.set_neighbor(ip("10.255.0.9"), Some((1, mac(0x77, 0x20))));
        assert_eq!(
            writer.snapshot(6).lookup(v4("172.16.5.1")),
            Some(Target::Adjacency(Adjacency { port: 1, mac: mac(0x77, 0x20) }))
        );
        writer.set_object(9, Some(None));
        assert_eq!(writer.snapshot(7).lookup(v4("172.16.5.1")), Some(Target::Discard));
        // Next hops on none of the switch's interfaces: the kernel forwards (glean), as for
        // an object not (or no longer) known.
        writer.set_object(9, Some(Some(Box::new([]))));
        assert_eq!(writer.snapshot(8).lookup(v4("172.16.5.1")), Some(Target::Glean));
        writer.set_object(9, None);
        assert_eq!(writer.snapshot(9).lookup(v4("172.16.5.1")), Some(Target::Glean));
    }

    /// The switch's own address beats the config's route, which beats the kernel's, which
    /// beats a configured subnet; taking one away uncovers the next.
    #[test]
    fn sources_of_one_prefix_take_precedence_in_order() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let up1 = Adjacency { port: 2, mac: mac(0x01, 0x21) };
        // 192.0.2.0/24 is the config's, via 10.255.0.2 (up1): the kernel's loses.
        writer.set_route(Source::Kernel, ip("192.0.2.0"), 24, Some(Via::Kernel(Box::new([(None, 1)]))));
        assert_eq!(writer.snapshot(1).lookup(v4("192.0.2.9")), Some(Target::Adjacency(up1)));
        writer.set_route(Source::Config, ip("192.0.2.0"), 24, None);
        assert_eq!(writer.snapshot(2).lookup(v4("192.0.2.9")), Some(Target::Connected(1)));
        // An address: local over everything; a kernel address the config also has stays local.
        writer.set_address(ip("192.0.2.9"), true);
        assert_eq!(writer.snapshot(3).lookup(v4("192.0.2.9")), Some(Target::Local));
        writer.set_address(ip("192.0.2.9"), false);
        assert_eq!(writer.snapshot(4).lookup(v4("192.0.2.9")), Some(Target::Connected(1)));
        writer.set_address(ip("10.0.0.1"), false);
        assert_eq!(writer.snapshot(5).lookup(v4("10.0.0.1")), Some(Target::Local), "configured");
        // The connected subnet under a kernel route: the kernel's wins, then the subnet again.
        writer.set_route(Source::Kernel, ip("10.0.0.0"), 24, Some(Via::Kernel(Box::new([(None, 2)]))));
        assert_eq!(writer.snapshot(6).lookup(v4("10.0.0.7")), Some(Target::Connected(2)));
        writer.set_route(Source::Kernel, ip("10.0.0.0"), 24, None);
        assert_eq!(writer.snapshot(7).lookup(v4("10.0.0.7")), Some(Target::Connected(0)));
        assert_eq!(writer.routes(), writer.snapshot(8).routes());
        assert_eq!(writer.kernel_prefixes(), vec![(ip("192.0.2.0"), 24)]);
    }

    /// The control thread publishes a snapshot only when `take_changed` says so: every change
    /// a worker would see says so once, a change to what is already there never does.
    #[test]
    fn the_writer_says_once_when_a_snapshot_would_differ() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        assert!(writer.take_changed(), "the first snapshot is news");
        assert!(!writer.take_changed(), "and only once");
        let via = || Some(Via::Kernel(Box::new([(None, 1)])));
        writer.set_route(Source::Kernel, ip("172.16.0.0"), 16, via());
        assert!(writer.take_changed(), "a new route");
        writer.set_route(Source::Kernel, ip("172.16.0.0"), 16, via());
        assert!(!writer.take_changed(), "the same route again");
        writer.set_route(Source::Kernel, ip("172.16.0.0"), 16, None);
        assert!(writer.take_changed(), "a route gone");
        writer.set_route(Source::Kernel, ip("172.16.0.0"), 16, None);
        assert!(!writer.take_changed(), "gone already");
        // Neighbours: the config's two; one learned; one on a port the switch does not have
        // (index 3 of ports 0-2) is ignored.
        assert_eq!(writer.neighbors(), 2);
        writer.set_neighbor(ip("10.0.0.9"), Some((0, mac(0x09, 0x10))));
        assert!(writer.take_changed());
        assert_eq!(writer.neighbors(), 3);
        writer.set_neighbor(ip("10.0.0.10"), Some((config.ports.len(), mac(0x0a, 0x10))));
        assert!(!writer.take_changed(), "a neighbour past the ports");
        assert_eq!((writer.neighbors(), writer.snapshot(1).neighbors()), (3, 3));
        writer.set_neighbor(ip("10.0.0.9"), None);
        assert!(writer.take_changed());
        assert_eq!(writer.neighbors(), 2);
    }
}
