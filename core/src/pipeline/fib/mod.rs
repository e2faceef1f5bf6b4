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
//! The control plane publishes each snapshot through a `FibHandle` (`handle.rs`: an atomic
//! pointer swap, then the generation number); a worker compares the generation once per burst and takes the
//! new snapshot only when it changed. No lock, no pause of forwarding; what only a replaced
//! snapshot held is freed by the publisher once its last reader lets it go. What `show route`
//! and the differential tests read of a snapshot (`explain`, the dumps) is `view.rs`'s.
//!
//! Invariant: every adjacency in a snapshot names an existing port, every group has at least
//! two members, a group index below `config.groups.len()` is that config group, and every
//! next-hop index in the route table is a live next hop of the same snapshot; the writer's
//! tables after any sequence of changes equal those built at once from the resulting state.

mod handle;
mod next_hops;
mod view;
mod writer;

pub use crate::config::Neighbor;
use crate::config::{Config, GroupMode};
use crate::pipeline::route::{CowMap, RouteTable};
use crate::wire::ethernet::MacAddress;
use crate::wire::IpAddress;
pub use handle::FibHandle;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
pub use view::{Explained, ExplainedHop};
pub use writer::{weighted_slots, AliasAt, FibWriter, WEIGHT_SLOTS};

/// Where a frame leaves: a port and the MAC of the neighbour it goes to.
///
/// Aligned to 4 bytes, as `Next` already is (its group index): the adjacency then starts at a
/// word of `Next` and of the verdict that carries it, so that the copies the compiler makes
/// of a verdict load whole the words it stored. At 2 bytes, a verdict was stored as 8 + 2
/// bytes and read back as 2 + 4 + 4, a load across two stores that the CPU cannot forward
/// (perf/RESULTS.md, issue 47's third stop). `Next` and the route cache's slots keep their
/// sizes (12 and 32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(align(4))]
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
    /// A blackhole route: dropped as `blackhole`.
    Blackhole,
    /// The kernel answers for this destination (an ICMP error, local delivery, or forwarding
    /// what raceway does not represent): punted.
    Kernel(KernelReason),
}

/// Why the FIB sends a destination to the kernel instead of forwarding or dropping it itself:
/// `show route`'s reason, and the stats' count of routes per reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelReason {
    /// An `unreachable` route: the kernel answers host unreachable.
    Unreachable,
    /// A `prohibit` route: the kernel answers administratively prohibited.
    Prohibit,
    /// A `throw` route: the lookup goes on in the next rule's table, else net unreachable.
    Throw,
    /// A `local` route of the kernel's local table.
    LocalRoute,
    /// A `broadcast` route (a subnet's broadcast address).
    Broadcast,
    /// An `anycast` route (IPv6 subnet-router anycast).
    Anycast,
    /// A next hop on an interface that is no port (a dummy, `lo`, a tunnel).
    NotAPort,
    /// A route with a `tos`: the kernel picks by the packet's TOS, raceway does not.
    Tos,
    /// An IPv6 route with a source prefix (`from`).
    Source,
    /// A route of the `default` table, which the kernel tries where the main table has none.
    DefaultTable,
    /// An `ip rule` (beyond the kernel's defaults) that selects this prefix.
    Rule,
    /// An IPv6 route whose time is up, which the kernel skips until it deletes it.
    Expired,
}

impl KernelReason {
    /// Whether the kernel takes the packet as its own (a local, broadcast or anycast route)
    /// rather than answering it with an ICMP error or forwarding it.
    pub fn delivers_locally(self) -> bool {
        matches!(self, Self::LocalRoute | Self::Broadcast | Self::Anycast)
    }

    pub const ALL: [KernelReason; 12] = [
        Self::Unreachable,
        Self::Prohibit,
        Self::Throw,
        Self::LocalRoute,
        Self::Broadcast,
        Self::Anycast,
        Self::NotAPort,
        Self::Tos,
        Self::Source,
        Self::DefaultTable,
        Self::Rule,
        Self::Expired,
    ];

    /// The name in `show route`, stats and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unreachable => "unreachable",
            Self::Prohibit => "prohibit",
            Self::Throw => "throw",
            Self::LocalRoute => "local",
            Self::Broadcast => "broadcast",
            Self::Anycast => "anycast",
            Self::NotAPort => "not_a_port",
            Self::Tos => "tos",
            Self::Source => "source",
            Self::DefaultTable => "default_table",
            Self::Rule => "rule",
            Self::Expired => "expired",
        }
    }

    /// Whether raceway mirrors such a route but cannot represent it (the kernel forwards in its
    /// place, slowly but right): logged once and counted apart from the kernel's own answers.
    pub fn unrepresented(self) -> bool {
        matches!(self, Self::NotAPort | Self::Tos | Self::Source | Self::DefaultTable | Self::Rule | Self::Expired)
    }
}

/// A group of adjacencies and how to spread over them.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub mode: GroupMode,
    pub flowlet_gap_us: u32,
    pub members: Vec<Adjacency>,
    /// Each member's weight (1 to 256, the kernel's range; 1 each for a config `[[group]]`).
    pub weights: Vec<u16>,
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

/// One next hop of a kernel route or nexthop object: its gateway (none for a connected
/// route), the kernel's interface, that interface's port (none: an interface that is no
/// port), its weight, and whether the kernel holds it dead (not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelHop {
    pub gateway: Option<IpAddr>,
    pub interface: u32,
    pub port: Option<u16>,
    pub weight: u16,
    pub dead: bool,
}

impl KernelHop {
    /// A live next hop on a port, weight 1 (the interface is not known: tests and `Learned`).
    pub fn on_port(gateway: Option<IpAddr>, port: u16) -> Self {
        Self { gateway, interface: 0, port: Some(port), weight: 1, dead: false }
    }
}

/// The kernel's next hops of a route or nexthop object.
pub type KernelHops = Box<[KernelHop]>;

/// What a route leads to before its next hops are resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Via {
    Blackhole,
    Local,
    Connected(u16),
    /// A config route out of a port: its `peer_mac` (glean without one).
    Peer(u16),
    ConfigGroup(u32),
    /// Next hops by address (a config route's `via`): their neighbours, on any port.
    Gateways(Box<[IpAddr]>),
    /// The kernel's next hops; a lone gatewayless one is a connected route.
    Kernel(KernelHops),
    /// A kernel nexthop object (`RTA_NH_ID`), defined by `FibWriter::set_object`.
    Object(u32),
    /// The kernel answers (see `KernelReason`).
    ToKernel(KernelReason),
}

/// Where a kernel route ranks among the kernel's routes for the same prefix, as the kernel's
/// lookup takes them: the local table first, then what the main table holds but raceway cannot
/// represent (it goes to the kernel), then the main table's routes by metric, then the default
/// table's (which the kernel tries only where the main table has no route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum RouteRank {
    LocalTable,
    Unrepresented,
    #[default]
    Main,
    DefaultTable,
}

/// One kernel route of a prefix, as the kernel keys them (table, tos, metric, source): the
/// first key in order is the route in force, and when it goes the next one takes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RouteKey {
    pub rank: RouteRank,
    /// The route's priority (`metric`): the lowest wins.
    pub metric: u32,
    /// What else tells routes of one rank and metric apart (the table, the tos, the source
    /// prefix), so that each is added and removed on its own.
    pub detail: u64,
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
    /// Neighbours by (port, address), as the kernel keys them.
    neighbors_v4: CowMap<(u16, u32), MacAddress>,
    neighbors_v6: CowMap<(u16, u128), MacAddress>,
    pub groups: Arc<Vec<Group>>,
    /// What each next hop was defined as (`show route` explains a target by it), in chunks
    /// as the next hops; not read when forwarding.
    definitions: Vec<Arc<[Option<Arc<Via>>; CHUNK]>>,
    /// The kernel's nexthop objects, for `show route`.
    objects: Arc<HashMap<u32, Option<KernelHops>>>,
    /// The kernel's routes waiting behind the one in force, for the prefixes that have some
    /// (by length and address), for `show route`; not read when forwarding.
    waiting_v4: CowMap<(u16, u32), Waiting>,
    waiting_v6: CowMap<(u16, u128), Waiting>,
    /// The control plane's peers (`[control.acl]`'s `neighbors`): the config's neighbours on
    /// their ports, and the kernel's BGP peers (on any port; a link-local one on its own).
    control_peers: Arc<Vec<(Option<u16>, IpAddr)>>,
    /// Counts up from 1 with each snapshot published by one writer.
    pub generation: u64,
    /// Which config's groups lead `groups` (`Config::group_layout`): the switch counts their
    /// members' frames only into counters laid out for the same.
    pub group_layout: u64,
}

/// What waits behind a prefix's kernel route in force: its metric, how many routes of the
/// same key (the kernel's aliases) and how many of other keys (metrics, tables, kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Waiting {
    pub metric: u32,
    pub aliases: u16,
    pub others: u16,
}

/// An address as the lookups take it.
pub fn ip_destination(ip: IpAddr) -> IpAddress {
    match ip {
        IpAddr::V4(ip) => IpAddress::V4(u32::from(ip)),
        IpAddr::V6(ip) => IpAddress::V6(u128::from(ip)),
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
    /// What waits behind `address`/`len`'s kernel route in force, if anything does.
    pub fn waiting(&self, address: IpAddr, len: u8) -> Option<Waiting> {
        match address {
            IpAddr::V4(v4) => self.waiting_v4.get(&(u16::from(len), u32::from(v4))).copied(),
            IpAddr::V6(v6) => self.waiting_v6.get(&(u16::from(len), u128::from(v6))).copied(),
        }
    }

    fn set_waiting(&mut self, address: IpAddr, len: u8, waiting: Option<Waiting>) {
        match (address, waiting) {
            (IpAddr::V4(v4), Some(waiting)) => {
                self.waiting_v4.insert((u16::from(len), u32::from(v4)), waiting);
            }
            (IpAddr::V4(v4), None) => {
                self.waiting_v4.remove(&(u16::from(len), u32::from(v4)));
            }
            (IpAddr::V6(v6), Some(waiting)) => {
                self.waiting_v6.insert((u16::from(len), u128::from(v6)), waiting);
            }
            (IpAddr::V6(v6), None) => {
                self.waiting_v6.remove(&(u16::from(len), u128::from(v6)));
            }
        }
    }

    /// The snapshot of `config` plus what the kernel knows, built at once.
    pub fn new(config: &Config, learned: &Learned, generation: u64) -> Self {
        let mut writer = FibWriter::new(config);
        writer.learn(learned);
        writer.snapshot(generation)
    }

    /// The neighbour entry of `destination` on `port`, if resolved.
    #[inline]
    pub fn neighbor(&self, port: u16, destination: IpAddress) -> Option<Adjacency> {
        let mac = match destination {
            IpAddress::V4(ip) => self.neighbors_v4.get(&(port, ip)),
            IpAddress::V6(ip) => self.neighbors_v6.get(&(port, ip)),
        };
        mac.map(|&mac| Adjacency { port, mac })
    }

    /// Whether `source`, arriving on `port`, is one of the control plane's peers: a link-local
    /// or configured peer on its own port, any other where this FIB routes it back (strict
    /// reverse-path: a host port cannot speak for a peer behind an uplink). A few entries,
    /// read for the frames of a class `[control.acl]` limits only.
    pub fn is_control_peer(&self, port: u16, source: IpAddr) -> bool {
        self.control_peers.iter().any(|&(on, peer)| {
            peer == source
                && match on {
                    Some(on) => on == port,
                    None => self.routes_back_through(ip_destination(source), port),
                }
        })
    }

    /// Whether frames to `destination` leave through `port` (one of a group's members), or may
    /// (a next hop not resolved yet: the port is not known).
    fn routes_back_through(&self, destination: IpAddress, port: u16) -> bool {
        let Some((_, _, id)) = self.routes.lookup_prefix(destination) else { return false };
        match self.next_hop(id) {
            Target::Adjacency(adjacency) => adjacency.port == port,
            Target::Connected(on) => on == port,
            Target::Group(group) => {
                self.groups.get(group as usize).is_some_and(|group| group.members.iter().any(|m| m.port == port))
            }
            Target::Glean => true,
            Target::Local | Target::Blackhole | Target::Kernel(_) => false,
        }
    }

    #[inline]
    pub fn lookup(&self, destination: IpAddress) -> Option<Target> {
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

    pub(super) fn v4(text: &str) -> IpAddress {
        IpAddress::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    pub(super) fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    pub(super) fn mac(last: u8, port: u8) -> MacAddress {
        MacAddress([0x02, 0, 0, 0, port, last])
    }

    /// A peer behind the FIB's routes is taken only on a port its route leaves by (strict
    /// reverse path): a port route's, a connected subnet's, any member of a group's; anywhere
    /// while its next hop is unresolved (the port is not known yet); a configured neighbour
    /// only on its own port.
    #[test]
    fn a_control_peer_is_taken_where_the_fib_routes_it_back() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let peers = ["10.9.1.1", "10.0.0.7", "8.8.8.8", "203.0.113.5"];
        writer.set_kernel_peers(peers.iter().map(|peer| (None, ip(peer))).collect());
        let fib = writer.snapshot(1);
        let taken = |peer: &str| (0..3u16).filter(|&port| fib.is_control_peer(port, ip(peer))).collect::<Vec<_>>();
        assert_eq!(taken("10.9.1.1"), [2], "a route to up1");
        assert_eq!(taken("10.0.0.7"), [0], "host0's subnet");
        assert_eq!(taken("8.8.8.8"), [1, 2], "the default route's group over up0 and up1");
        assert_eq!(taken("203.0.113.5"), [0, 1, 2], "its next hop unresolved");
        assert_eq!(taken("10.255.0.0"), [1], "a configured neighbour on its port");
        assert_eq!(taken("10.9.9.9"), Vec::<u16>::new(), "no peer");
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
                weights: vec![1, 1],
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
        let v6 = |text: &str| IpAddress::V6(u128::from(text.parse::<std::net::Ipv6Addr>().unwrap()));
        assert_eq!(fib.lookup(v6("fd00::1")), Some(Target::Local));
        assert_eq!(fib.lookup(v6("fd00::7")), Some(Target::Connected(0)));
        assert_eq!(fib.neighbor(2, v4("10.255.0.2")), Some(up1));
        assert_eq!(fib.neighbor(0, v4("10.0.0.7")), None);
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
        assert_eq!(fib.neighbor(0, v4("10.0.0.7")), Some(Adjacency { port: 0, mac: mac(0x07, 0x10) }));
        assert_eq!(fib.neighbor(2, v4("10.255.0.2")), Some(static_up1));
        assert_eq!(fib.neighbor(9, v4("10.255.0.99")), None);
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
        assert_eq!(fib.lookup(v4("172.22.1.1")), Some(Target::Blackhole));
        // A next hop on a port that does not exist is no port's: the kernel forwards, never an
        // index past the ports.
        let stray = Learned {
            routes: vec![KernelRoute { address: ip("172.21.0.0"), len: 16, next_hops: vec![(None, 3)] }],
            ..Learned::default()
        };
        let fib = Fib::new(&Config::parse(&text, "t.toml").unwrap(), &stray, 3);
        assert_eq!(fib.lookup(v4("172.21.1.1")), Some(Target::Kernel(KernelReason::NotAPort)));
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
        writer.set_object(9, Some(Some(Box::new([KernelHop::on_port(Some(ip("10.255.0.0")), 1)]))));
        assert_eq!(writer.snapshot(2).lookup(v4("172.16.5.1")), Some(Target::Adjacency(up0)));
        writer.set_neighbor(1, ip("10.255.0.9"), Some(mac(0x09, 0x20)));
        writer.set_object(
            9,
            Some(Some(Box::new([
                KernelHop::on_port(Some(ip("10.255.0.9")), 1),
                KernelHop::on_port(Some(ip("10.255.0.2")), 2),
            ]))),
        );
        let fib = writer.snapshot(3);
        let Some(Target::Group(group)) = fib.lookup(v4("172.16.99.1")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, vec![Adjacency { port: 1, mac: mac(0x09, 0x20) }, up1]);
        // A neighbour of the object's next hop moving re-resolves it.
        writer.set_neighbor(1, ip("10.255.0.9"), Some(mac(0x99, 0x20)));
        let fib = writer.snapshot(4);
        let Some(Target::Group(group)) = fib.lookup(v4("172.16.99.1")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, vec![Adjacency { port: 1, mac: mac(0x99, 0x20) }, up1]);
        // The same for an object whose only next hop is that neighbour.
        writer.set_object(9, Some(Some(Box::new([KernelHop::on_port(Some(ip("10.255.0.9")), 1)]))));
        assert_eq!(
            writer.snapshot(5).lookup(v4("172.16.5.1")),
            Some(Target::Adjacency(Adjacency { port: 1, mac: mac(0x99, 0x20) }))
        );
        writer.set_neighbor(1, ip("10.255.0.9"), Some(mac(0x77, 0x20)));
        assert_eq!(
            writer.snapshot(6).lookup(v4("172.16.5.1")),
            Some(Target::Adjacency(Adjacency { port: 1, mac: mac(0x77, 0x20) }))
        );
        writer.set_object(9, Some(None));
        assert_eq!(writer.snapshot(7).lookup(v4("172.16.5.1")), Some(Target::Blackhole));
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
        writer.set_route(
            Source::Kernel,
            ip("192.0.2.0"),
            24,
            Some(Via::Kernel(Box::new([KernelHop::on_port(None, 1)]))),
        );
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
        writer.set_route(
            Source::Kernel,
            ip("10.0.0.0"),
            24,
            Some(Via::Kernel(Box::new([KernelHop::on_port(None, 2)]))),
        );
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
        let via = || Some(Via::Kernel(Box::new([KernelHop::on_port(None, 1)])));
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
        writer.set_neighbor(0, ip("10.0.0.9"), Some(mac(0x09, 0x10)));
        assert!(writer.take_changed());
        assert_eq!(writer.neighbors(), 3);
        writer.set_neighbor(config.ports.len(), ip("10.0.0.10"), Some(mac(0x0a, 0x10)));
        assert!(!writer.take_changed(), "a neighbour past the ports");
        assert_eq!((writer.neighbors(), writer.snapshot(1).neighbors()), (3, 3));
        writer.set_neighbor(0, ip("10.0.0.9"), None);
        assert!(writer.take_changed());
        assert_eq!(writer.neighbors(), 2);
    }
}
