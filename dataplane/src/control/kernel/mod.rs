//! What the kernel in the switch's namespace knows, kept in sync over rtnetlink: addresses,
//! neighbours, routes (multipath included) and nexthop objects, turned into FIB changes.
//!
//! The control thread opens a route netlink socket in the namespace, subscribes to address,
//! neighbour, route and nexthop changes, and dumps each table once (again after the kernel
//! reports that messages were lost). Each message is the full state of one object, so dumps
//! and live changes are applied alike; the one exception is the kernel's IPv6 deletion of a
//! multipath route's single next hop, which names only that next hop. Route, neighbour and
//! address messages are decoded by `netlink-packet-route`; nexthop objects (`RTM_NEWNEXTHOP`,
//! which FRR's zebra uses for its routes when the kernel has them) are not in that crate and
//! are decoded here.
//!
//! Keys are the kernel's: neighbours by (interface, address), routes by (table, prefix, tos,
//! metric) (`fib::RouteKey`), so that the kernel's choice is the FIB's and the next route takes
//! over when it goes. What is taken:
//! - the main table's routes of every kind: unicast (through its next hops, with their
//!   weights; a next hop on an interface that is no port sends the route's traffic to the
//!   kernel), blackhole (dropped), unreachable, prohibit and throw (the kernel answers), local,
//!   broadcast and anycast (the kernel's own);
//! - the local table's local, broadcast and anycast routes (the kernel's own, before the main
//!   table as its rule 0 says), and the default table's routes (to the kernel, where the main
//!   table has none for a prefix);
//! - what the FIB cannot represent (a `tos`, an IPv6 `from`) as a route to the kernel for its
//!   prefix, logged; routes of other tables are counted and logged, not mirrored;
//! - never IPv6 link-local prefixes (fe80::/10 and longer: the kernel keeps an fe80::/64 per
//!   interface, which one prefix-keyed FIB cannot hold; link-local packets are punted first);
//! - neighbours on host interfaces in a usable state (reachable, stale, delay, probe,
//!   permanent, noarp) with a MAC; every address except loopback ones (an address on `lo`,
//!   such as a router id, is the switch's too).
//!
//! The kernel also deletes without a message, and so does this module, as the kernel does:
//! when an interface goes administratively down, its nexthop objects go (and the groups they
//! leave empty), with every route over them; when it goes down or loses its last IPv4 address,
//! the IPv4 routes whose next hops are all on it go, and a multipath route's next hops on it
//! are dead until it is up again (or has an address). A nexthop object deleted takes its routes with it, so a
//! reused id never revives one.
//!
//! Links are read too (RTNLGRP_LINK and a dump): a port's host interface's administrative state
//! and MTU, which the caller takes with `Sync::take_link_changes` (they are not the FIB's).
//!
//! Invariant: `KernelTables` holds exactly the last state the kernel reported for each object
//! (and what it deleted silently, deleted); the writer's kernel routes are a pure function of
//! it and of the route messages.

mod decode;
pub mod peers;
mod sync;

pub use decode::{decode, Message};
pub use sync::Sync;

use crate::pipeline::fib::{masked, AliasAt, FibWriter, KernelHop, KernelHops, KernelReason, RouteKey, RouteRank, Via};
use crate::wire::ethernet::MacAddress;
use hashbrown::{HashMap, HashSet};
use std::net::IpAddr;

/// One next hop as the kernel gives it: gateway (none: connected), interface, weight (1-256),
/// and whether the kernel holds it dead (RTNH_F_DEAD: its interface went down or lost its
/// IPv4 addresses; only a dump says so, a message never changes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hop {
    pub gateway: Option<IpAddr>,
    pub interface: u32,
    pub weight: u16,
    pub dead: bool,
    /// RTNH_F_ONLINK: the gateway is taken as on the link whatever its subnet. It tells two
    /// routes of one key apart (the kernel keeps `via G dev P` and `via G dev P onlink` side
    /// by side) and changes nothing else here.
    pub onlink: bool,
}

impl Hop {
    /// A live next hop of weight 1.
    pub fn new(gateway: Option<IpAddr>, interface: u32) -> Self {
        Self { gateway, interface, weight: 1, dead: false, onlink: false }
    }
}

/// How a route's next hops are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextHops {
    /// One next hop, or RTA_MULTIPATH's list; empty for kinds that have none.
    Direct(Vec<Hop>),
    /// A nexthop object (RTA_NH_ID).
    Object(u32),
}

/// A route's type (`rtm_type`), as far as the FIB tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    Unicast,
    Blackhole,
    Unreachable,
    Prohibit,
    Throw,
    Local,
    Broadcast,
    Anycast,
    /// Multicast, NAT and the rest: not the FIB's (raceway does not route multicast).
    Other,
}

/// A kernel route, as one message gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub address: IpAddr,
    pub len: u8,
    pub table: u32,
    pub kind: RouteKind,
    /// RTA_PRIORITY: the lowest of a prefix's routes wins.
    pub metric: u32,
    pub tos: u8,
    /// An IPv6 source prefix (`from`), when the route has one.
    pub source: Option<(IpAddr, u8)>,
    pub next_hops: NextHops,
    /// `rtm_protocol`, `rtm_scope` and RTA_PREFSRC: with the kind and next hops, what tells
    /// the routes of one key apart (`alias_tag`).
    pub protocol: u8,
    pub scope: u8,
    pub preferred_source: Option<IpAddr>,
    /// An IPv6 route's time left (RTA_CACHEINFO's `rta_expires`), when it expires.
    pub expires: Option<std::time::Duration>,
    /// Where the kernel put it among its key's routes (its message's flags).
    pub placed: Placed,
}

/// Where the kernel put a route among the routes of its key (table, prefix, tos, metric), as
/// its message's netlink flags say (the kernel sets them on what it reports: `NLM_F_EXCL`
/// when the key had none, `NLM_F_REPLACE` when it replaced one, `NLM_F_APPEND` when it
/// appended; none of them when IPv4 prepended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Part of a dump: in the kernel's order.
    Dumped,
    /// The key's first route.
    New,
    /// In place of the key's route the kernel replaces (IPv4: the first; IPv6: the first of
    /// its kind, multipath or not).
    Replaced,
    Appended,
    /// Before the key's others (IPv4; IPv6 appends whatever it is asked).
    Prepended,
}

impl Placed {
    /// From a route message's netlink flags.
    pub fn from_flags(flags: u16) -> Self {
        const NLM_F_MULTI: u16 = 0x2;
        const NLM_F_REPLACE: u16 = 0x100;
        const NLM_F_EXCL: u16 = 0x200;
        const NLM_F_APPEND: u16 = 0x800;
        if flags & NLM_F_MULTI != 0 {
            Self::Dumped
        } else if flags & NLM_F_REPLACE != 0 {
            Self::Replaced
        } else if flags & NLM_F_EXCL != 0 {
            Self::New
        } else if flags & NLM_F_APPEND != 0 {
            Self::Appended
        } else {
            Self::Prepended
        }
    }
}

impl Route {
    /// A main-table unicast route at metric 0 that replaces its key's first (tests).
    pub fn unicast(address: IpAddr, len: u8, next_hops: NextHops) -> Self {
        Self {
            address,
            len,
            table: MAIN_TABLE,
            kind: RouteKind::Unicast,
            metric: 0,
            tos: 0,
            source: None,
            next_hops,
            protocol: 0,
            scope: 0,
            preferred_source: None,
            expires: None,
            placed: Placed::Replaced,
        }
    }

    /// Whether the kernel merges it with the other routes of its key that would be into one
    /// multipath route: IPv6 unicast routes whose next hops all have gateways, not over a
    /// nexthop object, not learned from router advertisements (`rt6_qualify_for_ecmp`).
    /// IPv4 never merges.
    fn merges(&self) -> bool {
        const RTPROT_RA: u8 = 9;
        self.address.is_ipv6()
            && self.kind == RouteKind::Unicast
            && self.protocol != RTPROT_RA
            && matches!(&self.next_hops, NextHops::Direct(hops) if !hops.is_empty() && hops.iter().all(|hop| hop.gateway.is_some()))
    }

    /// Which of its key's routes this is: the tag of the merged multipath route of an IPv6
    /// key (`MERGED`), or a digest of what the kernel tells aliases apart by (kind, protocol,
    /// scope, preferred source, next hops or object; never a next hop's dead flag, which
    /// changes without a message).
    fn alias_tag(&self) -> u32 {
        if self.merges() {
            return MERGED;
        }
        let mut digest = crate::digest::fnv1a64(&[self.kind as u8, self.protocol, self.scope]);
        let mut word = |word: u64| digest = crate::digest::fnv1a64_from(digest, &word.to_le_bytes());
        let address = |word: &mut dyn FnMut(u64), address: Option<IpAddr>| match address {
            None => word(0),
            Some(IpAddr::V4(v4)) => word(1 << 32 | u64::from(u32::from(v4))),
            Some(IpAddr::V6(v6)) => {
                let bits = u128::from(v6);
                word(2 << 32);
                word((bits >> 64) as u64);
                word(bits as u64);
            }
        };
        address(&mut word, self.preferred_source);
        match &self.next_hops {
            NextHops::Object(id) => word(3 << 32 | u64::from(*id)),
            NextHops::Direct(hops) => {
                for hop in hops {
                    address(&mut word, hop.gateway);
                    word(u64::from(hop.onlink) << 48 | u64::from(hop.interface) << 16 | u64::from(hop.weight));
                }
            }
        }
        // Tags 0 and MERGED are taken.
        ((digest ^ (digest >> 32)) as u32).max(MERGED + 1)
    }
}

/// One of an IPv6 key's routes in the kernel's chain of them: a member of the key's merged
/// route, at its own place (the kernel chains each member where it was added, and its lookup
/// takes the merged route at the first member it reaches that has not expired), or a route it
/// did not merge (its tag). A member whose next hop is not known (it had expired before the
/// chain was needed) has no gateway and interface 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Member { gateway: Option<IpAddr>, interface: u32, expired: bool },
    Alone(u32),
}

/// A member of an IPv6 merged route: its gateway and interface.
type Member = (Option<IpAddr>, u32);

/// An IPv6 key: prefix (masked), length, `RouteKey`.
type KeyId = (IpAddr, u8, RouteKey);

/// The tag of an IPv6 key's merged multipath route (`Route::alias_tag`); tag 0 is a key's
/// only route set by `FibWriter::set_kernel_route` (policy rules).
const MERGED: u32 = 1;

/// How long before an IPv6 route expires raceway stops forwarding by it: its time left is
/// read when its message is, a little after the kernel wrote it, and the control loop looks
/// every `HOUSEKEEPING` at most.
pub const EXPIRY_MARGIN: std::time::Duration = std::time::Duration::from_millis(250);

/// A policy rule: its family, priority, the destination prefix it selects (`to`), whether it
/// is one of the kernel's defaults (local, main, default tables, selecting everything), and
/// a digest of the whole rule that tells rules of one priority apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub v4: bool,
    pub priority: u32,
    pub destination: Option<(IpAddr, u8)>,
    pub default: bool,
    pub digest: u64,
}

/// The kernel's table numbers (`rt_class_t`).
const MAIN_TABLE: u32 = 254;
const LOCAL_TABLE: u32 = 255;
const DEFAULT_TABLE: u32 = 253;

/// A nexthop object: one next hop, or a group of other objects with their weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nexthop {
    Single {
        gateway: Option<IpAddr>,
        interface: u32,
    },
    Group(Vec<(u32, u16)>),
    /// Blackhole or something raceway does not forward through.
    Unusable,
}

/// One object's new state, or its removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Address {
        add: bool,
        interface: u32,
        ip: IpAddr,
    },
    Neighbor {
        interface: u32,
        ip: IpAddr,
        mac: Option<MacAddress>,
    },
    Route {
        add: bool,
        route: Route,
    },
    Nexthop {
        id: u32,
        nexthop: Option<Nexthop>,
    },
    /// A policy rule (`ip rule`) added or deleted.
    Rule {
        add: bool,
        rule: Rule,
    },
    /// An interface's administrative state (IFF_UP) and MTU: for a port's host interface,
    /// `ip link set PORT down/up` and `ip link set PORT mtu N`.
    Link {
        interface: u32,
        up: bool,
        mtu: Option<u32>,
    },
}

/// A port's host interface as the operator set it: administratively up or not, and its MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkChange {
    pub port: usize,
    pub up: bool,
    pub mtu: Option<u32>,
}

/// A kernel route as the FIB keys it: prefix (masked), length, `RouteKey`, tag.
pub type RouteId = (IpAddr, u8, RouteKey, u32);

/// The longest raceway waits before asking again for a neighbour the kernel cannot resolve.
const RESOLVE_AT_MOST: std::time::Duration = std::time::Duration::from_secs(60);
/// Resolution requests sent at most per poll.
const RESOLVE_PER_POLL: usize = 64;

/// Routes logged per reason before the log says only how many more there are.
const LOGGED_PER_REASON: u64 = 8;

/// The kernel's small tables as last reported (addresses, neighbours, nexthop objects, links),
/// the interfaces that are ports, and the routes that go to the kernel. Other routes are not
/// kept here: each route message goes straight to the FIB writer, which holds the only copy of
/// a million of them.
#[derive(Debug, Default, Clone)]
pub struct KernelTables {
    /// The kernel's index of each port's host interface, by port.
    interfaces: Vec<u32>,
    addresses: HashMap<(u32, IpAddr), ()>,
    neighbors: HashMap<(u32, IpAddr), MacAddress>,
    nexthops: HashMap<u32, Nexthop>,
    /// Interfaces administratively down.
    down: HashSet<u32>,
    /// Routes that send their prefix to the kernel, with why and the interface all their next
    /// hops are on (the kernel's IPv4 flush of that interface takes them).
    to_kernel: HashMap<RouteId, (KernelReason, Option<u32>)>,
    /// Routes of tables the FIB does not mirror, by table.
    other_tables: HashMap<u32, HashSet<(IpAddr, u8, u32)>>,
    /// Routes logged (or counted past the log) per reason.
    logged: HashMap<&'static str, u64>,
    /// The kernel changed which next hops are dead without a message (an interface went
    /// down or up, or lost or regained its IPv4 addresses): only a fresh dump tells.
    resync_wanted: bool,
    /// Policy rules beyond the kernel's defaults, by (family, priority, digest): with the
    /// prefix they select, if they select by destination.
    rules: HashMap<(bool, u32, u64), Option<(IpAddr, u8)>>,
    /// IPv6 routes that expire, with when (`expire`): by route, and for a merged route by
    /// member (each member's message says its own time).
    expiring: HashMap<(RouteId, Option<Member>), std::time::Instant>,
    /// The chains of the IPv6 keys that hold a merged route beside routes the kernel did not
    /// merge (`Link`): only those, where the order of the members matters.
    chains: HashMap<KeyId, Vec<Link>>,
    /// The members of IPv6 merged routes that are past their time, by key: the kernel skips a
    /// merged route only once every member is.
    expired_members: HashMap<KeyId, Vec<Member>>,
    /// Gateways of next hops on ports whose neighbour the kernel has not resolved, by
    /// (interface, address): raceway asks the kernel to resolve them (`Sync::resolve_next_hops`)
    /// rather than wait for traffic to reach them, as SONiC's nbrmgrd does.
    unresolved: HashMap<(u32, IpAddr), Asked>,
}

/// When raceway last asked the kernel to resolve a next hop's neighbour, and how often.
#[derive(Debug, Clone, Copy, Default)]
struct Asked {
    at: Option<std::time::Instant>,
    times: u32,
}

impl KernelTables {
    /// Tables for a switch whose port `i` is the interface `interfaces[i]`.
    pub fn new(interfaces: Vec<u32>) -> Self {
        Self { interfaces, ..Self::default() }
    }

    /// Tables for the same ports, holding nothing yet.
    pub fn fresh(&self) -> Self {
        Self::new(self.interfaces.clone())
    }

    pub fn port_of(&self, interface: u32) -> Option<usize> {
        self.interfaces.iter().position(|&index| index == interface)
    }

    /// Routes whose traffic goes to the kernel, by reason (`KernelReason::ALL`'s order), then
    /// the routes of tables raceway does not mirror: the stats' `fib_kernel_routes`.
    pub fn kernel_route_counts(&self) -> Vec<u64> {
        let mut counts = vec![0u64; KernelReason::ALL.len() + 1];
        for (reason, _) in self.to_kernel.values() {
            if let Some(index) = KernelReason::ALL.iter().position(|known| known == reason) {
                counts[index] += 1;
            }
        }
        counts[KernelReason::ALL.len()] = self.other_tables.values().map(|routes| routes.len() as u64).sum();
        counts
    }

    /// Logs `what` for the first few routes of each `reason`, then every thousandth.
    fn log_once(&mut self, reason: &'static str, what: impl FnOnce() -> String) {
        let count = self.logged.entry(reason).or_default();
        *count += 1;
        if *count <= LOGGED_PER_REASON || count.is_multiple_of(1000) {
            tracing::info!("control: {} (routes of this kind so far: {count})", what());
        }
    }

    /// Applies one event to these tables and what it changes to `writer`.
    pub fn apply(&mut self, event: Event, writer: &mut FibWriter) {
        match event {
            Event::Link { interface, up, .. } => {
                if up && self.down.remove(&interface) {
                    writer.set_dead_interface(interface, None);
                    self.resync_wanted = true;
                } else if !up && self.down.insert(interface) {
                    self.resync_wanted = true;
                    self.interface_down(interface, writer);
                    self.flush_v4(interface, writer);
                    writer.set_dead_interface(interface, Some(false));
                }
            }
            Event::Address { add, interface, ip } => {
                let had_v4 = self.has_v4(interface);
                if add {
                    self.addresses.insert((interface, ip), ());
                } else {
                    self.addresses.remove(&(interface, ip));
                }
                // An address on `lo`, such as a router id, is the switch's too; loopback
                // addresses are not.
                let present = !ip.is_loopback() && self.addresses.keys().any(|&(_, address)| address == ip);
                writer.set_address(ip, present);
                if ip.is_ipv4() && had_v4 && !self.has_v4(interface) {
                    // The last IPv4 address gone: the kernel flushes the interface's IPv4 routes.
                    self.flush_v4(interface, writer);
                    writer.set_dead_interface(interface, Some(true));
                    self.resync_wanted = true;
                } else if ip.is_ipv4() && add && !had_v4 && !self.down.contains(&interface) {
                    writer.set_dead_interface(interface, None);
                    self.resync_wanted = true;
                }
            }
            Event::Neighbor { interface, ip, mac } => {
                match mac {
                    Some(mac) => {
                        self.unresolved.remove(&(interface, ip));
                        self.neighbors.insert((interface, ip), mac)
                    }
                    None => self.neighbors.remove(&(interface, ip)),
                };
                if let Some(port) = self.port_of(interface) {
                    writer.set_neighbor(port, ip, mac);
                }
            }
            Event::Route { add, route } => self.route(add, route, writer),
            Event::Rule { add, rule } => self.rule(add, rule, writer),
            Event::Nexthop { id, nexthop } => self.nexthop(id, nexthop, writer),
        }
    }

    /// Where `route` ranks among its prefix's routes and what it leads to; `None` for a route
    /// the FIB does not mirror (another table, another kind).
    fn rank(&mut self, route: &Route) -> Option<(RouteKey, Via)> {
        // Only for the messages below, each logged once: never formatted per route.
        let prefix = || format!("{}/{}", masked(route.address, route.len), route.len);
        let key = |rank: RouteRank, detail: u64| RouteKey { rank, metric: route.metric, detail };
        let kind_via = |kind: RouteKind| match kind {
            RouteKind::Blackhole => Some(Via::Blackhole),
            RouteKind::Unreachable => Some(Via::ToKernel(KernelReason::Unreachable)),
            RouteKind::Prohibit => Some(Via::ToKernel(KernelReason::Prohibit)),
            RouteKind::Throw => Some(Via::ToKernel(KernelReason::Throw)),
            RouteKind::Local => Some(Via::ToKernel(KernelReason::LocalRoute)),
            RouteKind::Broadcast => Some(Via::ToKernel(KernelReason::Broadcast)),
            RouteKind::Anycast => Some(Via::ToKernel(KernelReason::Anycast)),
            RouteKind::Unicast | RouteKind::Other => None,
        };
        match route.table {
            LOCAL_TABLE => {
                let via = kind_via(route.kind).filter(|via| matches!(via, Via::ToKernel(_)))?;
                Some((key(RouteRank::LocalTable, 0), via))
            }
            MAIN_TABLE if route.tos != 0 || route.source.is_some() => {
                let (reason, detail) = match route.source {
                    Some((address, len)) => (KernelReason::Source, source_detail(address, len)),
                    None => (KernelReason::Tos, u64::from(route.tos)),
                };
                self.log_once(reason.name(), || {
                    format!("{} has a route by {} (to the kernel, which picks by it)", prefix(), reason.name())
                });
                Some((key(RouteRank::Unrepresented, detail), Via::ToKernel(reason)))
            }
            MAIN_TABLE => match route.kind {
                RouteKind::Unicast => Some((key(RouteRank::Main, 0), self.unicast_via(&route.next_hops))),
                RouteKind::Other => {
                    self.log_once("kind", || {
                        format!("{}: a route of a kind raceway does not route (ignored)", prefix())
                    });
                    None
                }
                kind => Some((key(RouteRank::Main, 0), kind_via(kind)?)),
            },
            DEFAULT_TABLE if route.address.is_ipv4() => {
                self.log_once("default_table", || {
                    format!("{} in table default (to the kernel where the main table has no route)", prefix())
                });
                Some((key(RouteRank::DefaultTable, u64::from(route.tos)), Via::ToKernel(KernelReason::DefaultTable)))
            }
            table => {
                self.log_once("table", || format!("{} in table {table}: not mirrored (only rules reach it)", prefix()));
                let routes = self.other_tables.entry(table).or_default();
                routes.insert((masked(route.address, route.len), route.len, route.metric));
                None
            }
        }
    }

    /// What a unicast route's next hops lead to: the kernel's next hops on ports (a next hop
    /// on another interface, or on one whose IPv4 routes the kernel flushed, is not a port's),
    /// or a nexthop object.
    fn unicast_via(&self, next_hops: &NextHops) -> Via {
        match next_hops {
            NextHops::Object(id) => Via::Object(*id),
            NextHops::Direct(hops) => Via::Kernel(self.kernel_hops(hops.iter().copied())),
        }
    }

    fn kernel_hops(&self, hops: impl Iterator<Item = Hop>) -> KernelHops {
        // As the kernel lists them, a next hop twice included (its group's slots sum them).
        hops.map(|hop| {
            let port = self.port_of(hop.interface).map(|port| port as u16);
            KernelHop { gateway: hop.gateway, interface: hop.interface, port, weight: hop.weight, dead: hop.dead }
        })
        .collect()
    }

    /// A route added (its full state, placed among its key's routes as `route.placed` says)
    /// or deleted (the kernel names the one it deleted in full: IPv6 a merged route's next
    /// hop alone, which leaves the others).
    fn route(&mut self, add: bool, route: Route, writer: &mut FibWriter) {
        let Some((key, via)) = self.rank(&route) else {
            if !add {
                if let Some(routes) = self.other_tables.get_mut(&route.table) {
                    routes.remove(&(masked(route.address, route.len), route.len, route.metric));
                }
            }
            return;
        };
        let tag = route.alias_tag();
        let id: RouteId = (masked(route.address, route.len), route.len, key, tag);
        let held = writer.kernel_aliases(route.address, route.len, key);
        // A merged route of several next hops does not expire with one of them: the kernel's
        // lookup still picks among all of them, an expired one included, until its garbage
        // collection deletes that one (and names it); only its place moves (`Link`).
        let alone = tag != MERGED || matches!(&via, Via::Kernel(hops) if hops.len() == 1);
        let expires = route.expires;
        let all_expired = self.follow_expired_members(
            (masked(route.address, route.len), route.len, key),
            add,
            tag,
            &route.next_hops,
            expires.is_some_and(|left| left <= EXPIRY_MARGIN),
        );
        let via = if add && (all_expired || alone && expires.is_some_and(|left| left <= EXPIRY_MARGIN)) {
            // Past its time (a dump of a route the kernel has not deleted yet), or nearly.
            Some(Via::ToKernel(KernelReason::Expired))
        } else if add {
            Some(via)
        } else if tag == MERGED {
            // IPv6 deletes a merged route's next hops one at a time, naming them.
            match (&route.next_hops, held.iter().find(|(held, _)| *held == MERGED)) {
                (NextHops::Direct(gone), Some((_, Via::Kernel(hops)))) => {
                    let left: Vec<KernelHop> = hops
                        .iter()
                        .filter(|hop| !gone.iter().any(|g| (g.gateway, g.interface) == (hop.gateway, hop.interface)))
                        .copied()
                        .collect();
                    (!left.is_empty()).then(|| Via::Kernel(left.into()))
                }
                _ => None,
            }
        } else {
            None
        };
        // A route whose next hops are all dead is one the kernel is deleting (it does, in both
        // families; a dump taken while it did may still show it).
        let via =
            via.filter(|via| !matches!(via, Via::Kernel(hops) if !hops.is_empty() && hops.iter().all(|hop| hop.dead)));
        // The message is the full state of its route; of a merged route, of its first member
        // (a deletion, of every member it names; a merged route gone, of all).
        let first_member = match &route.next_hops {
            NextHops::Direct(hops) if tag == MERGED => hops.first().map(|hop| (hop.gateway, hop.interface)),
            _ => None,
        };
        match (&route.next_hops, tag == MERGED && !add) {
            (NextHops::Direct(gone), true) => {
                for hop in gone {
                    self.expiring.remove(&(id, Some((hop.gateway, hop.interface))));
                }
            }
            _ => {
                self.expiring.remove(&(id, first_member));
            }
        }
        match &via {
            Some(Via::ToKernel(reason)) => {
                // The interface all its next hops are on: the kernel flushes it with that one.
                let interface = match &route.next_hops {
                    NextHops::Direct(hops) => hops
                        .first()
                        .map(|hop| hop.interface)
                        .filter(|first| hops.iter().all(|hop| hop.interface == *first)),
                    NextHops::Object(_) => None,
                };
                self.to_kernel.insert(id, (*reason, interface));
            }
            _ => {
                self.to_kernel.remove(&id);
            }
        }
        let order = if route.address.is_ipv6() {
            let expired = expires.is_some_and(|left| left <= EXPIRY_MARGIN);
            self.follow_chain((id.0, id.1, key), &held, add, tag, route.placed, &route.next_hops, expired)
        } else {
            None
        };
        let Some(via) = via else {
            self.expiring.retain(|(expiring, _), _| *expiring != id);
            if tag == MERGED {
                self.expired_members.remove(&(id.0, id.1, key));
            }
            writer.remove_kernel_route(route.address, route.len, key, tag);
            if let Some(order) = order {
                writer.reorder_kernel_routes(route.address, route.len, key, &order);
            }
            return;
        };
        if let Via::Kernel(hops) = &via {
            if hops.iter().any(|hop| hop.port.is_none()) {
                let prefix = format!("{}/{}", id.0, id.1);
                self.log_once("not_a_port", || {
                    format!("{prefix} has a next hop on an interface that is no port (to the kernel)")
                });
            }
            self.want_resolved(hops);
        }
        if let Some(left) = expires.filter(|left| *left > EXPIRY_MARGIN) {
            self.expiring.insert((id, first_member), std::time::Instant::now() + left);
        }
        // Where the kernel put it among its key's routes. A route raceway holds already (its
        // tag) is the kernel's word on it again, in place: the kernel refuses a second one.
        let at = if held.iter().any(|(held, _)| *held == tag) {
            AliasAt::Instead(tag)
        } else {
            match (route.placed, route.address.is_ipv4()) {
                (Placed::New, _) => AliasAt::Only,
                (Placed::Dumped, _) | (Placed::Appended, _) | (Placed::Prepended, false) => AliasAt::Last,
                (Placed::Prepended, true) => AliasAt::First,
                // IPv4 replaces the key's first route; IPv6 the first that merges as this
                // one does (or not), else the first.
                (Placed::Replaced, v4) => {
                    let merges = tag == MERGED;
                    let first_of_kind = held.iter().find(|(held, _)| v4 || (*held == MERGED) == merges);
                    first_of_kind.or(held.first()).map_or(AliasAt::Last, |(held, _)| AliasAt::Instead(*held))
                }
            }
        };
        writer.add_kernel_route(route.address, route.len, key, tag, via, at);
        if let Some(order) = order {
            writer.reorder_kernel_routes(route.address, route.len, key, &order);
        }
    }

    /// Follows which members of an IPv6 key's merged route are past their time through a
    /// route message (`expired`: the message's own route, its first member, is); returns
    /// whether every member of the merged route it adds is.
    fn follow_expired_members(&mut self, key: KeyId, add: bool, tag: u32, next_hops: &NextHops, expired: bool) -> bool {
        let NextHops::Direct(hops) = next_hops else { return false };
        if tag != MERGED || !key.0.is_ipv6() {
            return false;
        }
        let member = |hop: &Hop| (hop.gateway, hop.interface);
        let Some(list) = self.expired_members.get_mut(&key) else {
            if add && expired && hops.len() > 1 {
                self.expired_members.insert(key, hops.first().map(member).into_iter().collect());
            }
            return false;
        };
        if add {
            if let Some(first) = hops.first().map(member) {
                list.retain(|known| *known != first);
                if expired {
                    list.push(first);
                }
            }
            list.retain(|known| hops.iter().any(|hop| member(hop) == *known));
        } else {
            list.retain(|known| !hops.iter().any(|hop| member(hop) == *known));
        }
        let all = add && !hops.is_empty() && hops.iter().all(|hop| list.contains(&member(hop)));
        if list.is_empty() {
            self.expired_members.remove(&key);
        }
        all
    }

    /// Follows an IPv6 key's chain through a route message (`Link`): returns the order of
    /// the key's routes by tag when the key holds a merged route beside others, else `None`
    /// (and keeps no chain). `held` is what the writer holds of the key before the message;
    /// `expired`: the message's route is past its time.
    #[allow(clippy::too_many_arguments)]
    fn follow_chain(
        &mut self,
        key: KeyId,
        held: &[(u32, &Via)],
        add: bool,
        tag: u32,
        placed: Placed,
        next_hops: &NextHops,
        expired: bool,
    ) -> Option<Vec<u32>> {
        let unknown = Link::Member { gateway: None, interface: 0, expired: true };
        let mut chain = self.chains.remove(&key).unwrap_or_else(|| {
            held.iter()
                .flat_map(|(held, via)| match (*held, via) {
                    (MERGED, Via::Kernel(hops)) => hops
                        .iter()
                        .map(|hop| Link::Member { gateway: hop.gateway, interface: hop.interface, expired: false })
                        .collect(),
                    (MERGED, _) => vec![unknown],
                    (other, _) => vec![Link::Alone(other)],
                })
                .collect()
        });
        let members: Vec<(Option<IpAddr>, u32)> = match next_hops {
            NextHops::Direct(hops) if tag == MERGED => hops.iter().map(|hop| (hop.gateway, hop.interface)).collect(),
            _ => Vec::new(),
        };
        let is_member = |link: &Link, (gateway, interface): (Option<IpAddr>, u32)| matches!(link, Link::Member { gateway: g, interface: i, .. } if (*g, *i) == (gateway, interface));
        let new_links = |expired_first: bool| -> Vec<Link> {
            members
                .iter()
                .enumerate()
                .map(|(index, &(gateway, interface))| Link::Member {
                    gateway,
                    interface,
                    expired: index == 0 && expired_first,
                })
                .collect()
        };
        match (add, tag == MERGED, placed) {
            (true, _, Placed::New) => chain.clear(),
            // A replace takes the place of the first route of its kind (merged or not), else
            // of the first; a merged route replaced goes with all its members.
            (true, merges, Placed::Replaced) if !chain.contains(&Link::Alone(tag)) || merges => {
                let of_kind = chain.iter().position(|link| matches!(link, Link::Member { .. }) == merges);
                if let Some(at) = of_kind.or(if chain.is_empty() { None } else { Some(0) }) {
                    let replaced_members = matches!(chain[at], Link::Member { .. });
                    let mut at = at;
                    if replaced_members {
                        let before = chain[..at].iter().filter(|link| matches!(link, Link::Member { .. })).count();
                        chain.retain(|link| !matches!(link, Link::Member { .. }));
                        at -= before;
                    } else {
                        chain.remove(at);
                    }
                    let links = if merges { new_links(expired) } else { vec![Link::Alone(tag)] };
                    chain.splice(at..at, links);
                } else {
                    chain.extend(if merges { new_links(expired) } else { vec![Link::Alone(tag)] });
                }
            }
            (true, true, _) => {
                // The members the chain lacks are added after the others; the message's own
                // route is its first hop.
                for (index, &member) in members.iter().enumerate() {
                    match chain.iter_mut().find(|link| is_member(link, member)) {
                        Some(Link::Member { expired: was, .. }) if index == 0 => *was = expired,
                        Some(_) => {}
                        None => chain.push(Link::Member {
                            gateway: member.0,
                            interface: member.1,
                            expired: index == 0 && expired,
                        }),
                    }
                }
            }
            (true, false, _) => {
                if !chain.contains(&Link::Alone(tag)) {
                    chain.push(Link::Alone(tag));
                }
            }
            (false, true, _) => {
                let before = chain.len();
                chain.retain(|link| !members.iter().any(|&member| is_member(link, member)));
                if chain.len() == before {
                    // A member whose next hop the chain did not know.
                    if let Some(at) = chain.iter().position(|link| *link == unknown) {
                        chain.remove(at);
                    }
                }
            }
            (false, false, _) => chain.retain(|link| *link != Link::Alone(tag)),
        }
        let has_members = chain.iter().any(|link| matches!(link, Link::Member { .. }));
        let has_alone = chain.iter().any(|link| matches!(link, Link::Alone(_)));
        if !(has_members && has_alone) {
            return None;
        }
        let order = chain_order(&chain);
        self.chains.insert(key, chain);
        Some(order)
    }

    /// IPv6 routes whose time is up (or nearly: `EXPIRY_MARGIN`) at `now`: the kernel skips
    /// them from then on, until its garbage collection deletes them and says so, up to half a
    /// minute later. Each goes to the kernel (which answers by the route behind it) until that
    /// message. The kernel may also have been told to keep one longer, or for good (it was
    /// added again with another `expires`, or none, which the kernel applies without a
    /// message): a fresh dump is wanted, which tells (an expired route is dumped with its
    /// time past). Returns how many expired.
    pub fn expire(&mut self, now: std::time::Instant, writer: &mut FibWriter) -> usize {
        let due: Vec<(RouteId, Option<Member>)> =
            self.expiring.iter().filter(|(_, deadline)| now + EXPIRY_MARGIN >= **deadline).map(|(id, _)| *id).collect();
        for &((address, len, key, tag), member) in &due {
            self.expiring.remove(&((address, len, key, tag), member));
            if let (Some(member), Some(chain)) = (member, self.chains.get_mut(&(address, len, key))) {
                for link in chain.iter_mut() {
                    if let Link::Member { gateway, interface, expired } = link {
                        if (*gateway, *interface) == member {
                            *expired = true;
                        }
                    }
                }
                let order = chain_order(chain);
                writer.reorder_kernel_routes(address, len, key, &order);
            }
            if let Some(member) = member {
                let expired = self.expired_members.entry((address, len, key)).or_default();
                if !expired.contains(&member) {
                    expired.push(member);
                }
            }
            // A merged route of several members is skipped once all of them are past their time.
            let expired = self.expired_members.get(&(address, len, key));
            let live = writer.kernel_aliases(address, len, key).iter().any(|(held, via)| {
                *held == tag
                    && matches!(via, Via::Kernel(hops) if hops.len() > 1
                        && !hops.iter().all(|hop| expired.is_some_and(|expired| expired.contains(&(hop.gateway, hop.interface)))))
            });
            if live {
                continue;
            }
            let via = Via::ToKernel(KernelReason::Expired);
            self.to_kernel.insert((address, len, key, tag), (KernelReason::Expired, None));
            writer.add_kernel_route(address, len, key, tag, via, AliasAt::Instead(tag));
        }
        self.resync_wanted |= !due.is_empty();
        due.len()
    }

    /// A policy rule added or deleted. One that selects by destination (whatever else it
    /// selects by) sends its prefix to the kernel, covering every route inside: rules come
    /// before the main table. One that does not may change the lookup of any destination: the
    /// FIB is then partial (`partial`), which is logged.
    fn rule(&mut self, add: bool, rule: Rule, writer: &mut FibWriter) {
        if rule.default {
            return;
        }
        let id = (rule.v4, rule.priority, rule.digest);
        if add && rule.v4 {
            // The kernel unmerges IPv4's local and main tables at the first rule, for good.
            writer.set_ipv4_local_first();
        }
        let was_partial = self.partial();
        let known =
            if add { self.rules.insert(id, rule.destination).is_some() } else { self.rules.remove(&id).is_some() };
        if let Some((address, len)) = rule.destination {
            let key = RouteKey { rank: RouteRank::Unrepresented, metric: rule.priority, detail: rule.digest };
            // A rule is its key's only route (tag 0: `FibWriter::set_kernel_route`).
            let route = (masked(address, len), len, key, 0);
            if add {
                self.to_kernel.insert(route, (KernelReason::Rule, None));
                if !known {
                    self.log_once("rule", || {
                        format!("{}/{len}: selected by ip rule {} (to the kernel)", route.0, rule.priority)
                    });
                }
            } else {
                self.to_kernel.remove(&route);
            }
            writer.set_kernel_route(address, len, key, add.then_some(Via::ToKernel(KernelReason::Rule)));
        }
        match (was_partial, self.partial()) {
            (false, true) => tracing::warn!(
                "control: ip rule {} selects by more than the destination: raceway's FIB is partial (it forwards by \
                 the main table where the kernel may not); fib_partial in the stats",
                rule.priority
            ),
            (true, false) => {
                tracing::info!("control: no ip rule beyond the destination's left: the FIB is whole again")
            }
            _ => {}
        }
    }

    /// Whether a policy rule that does not select by destination is in force: the kernel may
    /// then look any destination up elsewhere than raceway does.
    pub fn partial(&self) -> bool {
        self.rules.values().any(Option::is_none)
    }

    /// A nexthop object defined, redefined or deleted; a deleted one takes its routes with it
    /// and leaves the groups it was in (a group left empty goes too).
    fn nexthop(&mut self, id: u32, nexthop: Option<Nexthop>, writer: &mut FibWriter) {
        let mut gone = Vec::new();
        match nexthop {
            Some(nexthop) => {
                self.nexthops.insert(id, nexthop);
            }
            None => {
                if self.nexthops.remove(&id).is_some() {
                    gone.push(id);
                }
            }
        }
        // The object itself, and the groups it is a member of.
        let mut touched = vec![id];
        touched.extend(self.nexthops.iter().filter_map(|(group, nexthop)| match nexthop {
            Nexthop::Group(members) if members.iter().any(|(member, _)| *member == id) => Some(*group),
            _ => None,
        }));
        while let Some(lost) = gone.pop() {
            for (group, nexthop) in self.nexthops.iter_mut() {
                if let Nexthop::Group(members) = nexthop {
                    if members.iter().any(|(member, _)| *member == lost) {
                        members.retain(|(member, _)| *member != lost);
                        touched.push(*group);
                        if members.is_empty() {
                            gone.push(*group);
                        }
                    }
                }
            }
            self.nexthops.retain(|group, nexthop| {
                !(gone.contains(group) && matches!(nexthop, Nexthop::Group(m) if m.is_empty()))
            });
            writer.set_object(lost, None);
            writer.remove_kernel_routes(false, |via| *via == Via::Object(lost));
        }
        for object in touched {
            let definition = self.nexthops.contains_key(&object).then(|| self.object(object));
            if let Some(Some(hops)) = &definition {
                self.want_resolved(hops);
            }
            writer.set_object(object, definition);
        }
    }

    /// An interface went administratively down: the kernel deletes its nexthop objects (and
    /// with them their routes) without a message.
    fn interface_down(&mut self, interface: u32, writer: &mut FibWriter) {
        let on_it: Vec<u32> = self
            .nexthops
            .iter()
            .filter(|(_, nexthop)| matches!(nexthop, Nexthop::Single { interface: on, .. } if *on == interface))
            .map(|(id, _)| *id)
            .collect();
        for id in on_it {
            self.nexthop(id, None, writer);
        }
    }

    /// Notes the gateways of `hops` on ports whose neighbour the kernel has not resolved.
    fn want_resolved(&mut self, hops: &[KernelHop]) {
        for hop in hops.iter().filter(|hop| hop.port.is_some() && !hop.dead) {
            let Some(gateway) = hop.gateway else { continue };
            if !self.neighbors.contains_key(&(hop.interface, gateway)) {
                self.unresolved.entry((hop.interface, gateway)).or_default();
            }
        }
    }

    /// The next hops due to be asked for at `now` (first at once, then after 1, 2, 4 ... s, at
    /// most a minute apart while the kernel cannot resolve them), at most `limit`; each is
    /// counted as asked.
    fn due_for_resolution(&mut self, now: std::time::Instant, limit: usize) -> Vec<(u32, IpAddr)> {
        let mut due = Vec::new();
        for (key, asked) in self.unresolved.iter_mut() {
            if due.len() == limit {
                break;
            }
            let wait = std::time::Duration::from_secs(1 << asked.times.saturating_sub(1).min(6)).min(RESOLVE_AT_MOST);
            if asked.at.is_none_or(|at| now.duration_since(at) >= wait) {
                asked.at = Some(now);
                asked.times = asked.times.saturating_add(1);
                due.push(*key);
            }
        }
        due
    }

    fn has_v4(&self, interface: u32) -> bool {
        self.addresses.keys().any(|(on, ip)| *on == interface && ip.is_ipv4())
    }

    /// The kernel flushes `interface`'s IPv4 routes (it went down, or lost its last IPv4
    /// address): the routes whose next hops are all on it go (its subnets' broadcast routes
    /// too, not its addresses' local ones; its nexthop objects stay, alive);
    /// its next hops in other multipath routes are dead (`FibWriter::set_dead_interface`).
    fn flush_v4(&mut self, interface: u32, writer: &mut FibWriter) {
        writer.remove_kernel_routes(true, |via| match via {
            Via::Kernel(hops) => !hops.is_empty() && hops.iter().all(|hop| hop.interface == interface),
            _ => false,
        });
        // The addresses' own local routes stay (the kernel still delivers to them).
        let local: Vec<RouteId> = self
            .to_kernel
            .iter()
            .filter(|((address, _, _, _), (why, on))| {
                address.is_ipv4() && *on == Some(interface) && *why != KernelReason::LocalRoute
            })
            .map(|(id, _)| *id)
            .collect();
        for (address, len, key, tag) in local {
            self.to_kernel.remove(&(address, len, key, tag));
            writer.remove_kernel_route(address, len, key, tag);
        }
    }

    /// A nexthop object's definition for the FIB: its next hops (groups one level deep, as the
    /// kernel allows, with their weights), or `None` for a blackhole.
    fn object(&self, id: u32) -> Option<KernelHops> {
        let single = |(id, weight): &(u32, u16)| match self.nexthops.get(id) {
            Some(Nexthop::Single { gateway, interface }) => {
                Some(Hop { weight: *weight, ..Hop::new(*gateway, *interface) })
            }
            _ => None,
        };
        match self.nexthops.get(&id)? {
            Nexthop::Single { gateway, interface } => {
                Some(self.kernel_hops(std::iter::once(Hop::new(*gateway, *interface))))
            }
            Nexthop::Group(members) => Some(self.kernel_hops(members.iter().filter_map(single))),
            Nexthop::Unusable => None,
        }
    }

    /// What the tables hold now, to sweep what a fresh dump does not report again.
    fn contents(&self, writer: &FibWriter) -> Stale {
        Stale {
            routes: writer.kernel_routes().into_iter().collect(),
            merged_dumped: HashSet::new(),
            addresses: self.addresses.keys().copied().collect(),
            neighbors: self.neighbors.keys().copied().collect(),
            nexthops: self.nexthops.keys().copied().collect(),
            rules: self.rules.clone(),
        }
    }
}

/// An IPv6 key's routes by tag in the kernel's lookup order: each route it did not merge at
/// its place, the merged route at its first member that has not expired (after the others if
/// every member has).
fn chain_order(chain: &[Link]) -> Vec<u32> {
    let mut order = Vec::new();
    for link in chain {
        match link {
            Link::Alone(tag) => order.push(*tag),
            Link::Member { expired: false, .. } if !order.contains(&MERGED) => order.push(MERGED),
            Link::Member { .. } => {}
        }
    }
    if !order.contains(&MERGED) {
        order.push(MERGED);
    }
    order
}

/// A source prefix as a route key's detail.
fn source_detail(address: IpAddr, len: u8) -> u64 {
    let bits = match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    };
    ((bits >> 64) as u64 ^ bits as u64).rotate_left(8) ^ u64::from(len)
}

/// During a fresh dump, what the kernel has not reported again yet; what is left when the dump
/// ends is gone from the kernel. (Forgetting everything before the dump would leave the workers
/// without routes until it ended.)
#[derive(Debug, Default)]
struct Stale {
    routes: HashSet<RouteId>,
    /// IPv6 keys whose merged route of several members the dump reported: the kernel's dump
    /// leaves out the routes chained between a merged route's members (its lookup still uses
    /// them), so their other routes are kept, not swept.
    merged_dumped: HashSet<KeyId>,
    addresses: HashSet<(u32, IpAddr)>,
    neighbors: HashSet<(u32, IpAddr)>,
    nexthops: HashSet<u32>,
    rules: HashMap<(bool, u32, u64), Option<(IpAddr, u8)>>,
}

impl Stale {
    /// `event` was reported again: its object is not stale.
    fn refreshed(&mut self, event: &Event, tables: &mut KernelTables) {
        match event {
            Event::Address { interface, ip, .. } => self.addresses.remove(&(*interface, *ip)),
            Event::Neighbor { interface, ip, .. } => self.neighbors.remove(&(*interface, *ip)),
            // Ranking a route costs; a first dump (a start, a restart) has nothing stale.
            Event::Route { .. } if self.routes.is_empty() => false,
            Event::Route { route, .. } => match tables.rank(route) {
                Some((key, _)) => {
                    let tag = route.alias_tag();
                    let prefix = masked(route.address, route.len);
                    if tag == MERGED && matches!(&route.next_hops, NextHops::Direct(hops) if hops.len() > 1) {
                        self.merged_dumped.insert((prefix, route.len, key));
                    }
                    self.routes.remove(&(prefix, route.len, key, tag))
                }
                None => false,
            },
            Event::Nexthop { id, .. } => self.nexthops.remove(id),
            Event::Rule { rule, .. } => self.rules.remove(&(rule.v4, rule.priority, rule.digest)).is_some(),
            Event::Link { .. } => false,
        };
    }

    /// Removes everything left.
    fn sweep(self, tables: &mut KernelTables, writer: &mut FibWriter) -> usize {
        let count =
            self.routes.len() + self.addresses.len() + self.neighbors.len() + self.nexthops.len() + self.rules.len();
        let merged_dumped = self.merged_dumped;
        let mut count = count;
        for (address, len, key, tag) in self.routes {
            if tag != MERGED && merged_dumped.contains(&(address, len, key)) {
                count -= 1;
                continue;
            }
            tables.to_kernel.remove(&(address, len, key, tag));
            tables.expiring.retain(|((a, l, k, t), _), _| (*a, *l, *k, *t) != (address, len, key, tag));
            // Its chain, if it had one, is rebuilt from what is left when next wanted.
            tables.chains.remove(&(address, len, key));
            writer.remove_kernel_route(address, len, key, tag);
        }
        let addresses = self.addresses.into_iter().map(|(interface, ip)| Event::Address { add: false, interface, ip });
        let neighbors = self.neighbors.into_iter().map(|(interface, ip)| Event::Neighbor { interface, ip, mac: None });
        let nexthops = self.nexthops.into_iter().map(|id| Event::Nexthop { id, nexthop: None });
        let rules = self.rules.into_iter().map(|((v4, priority, digest), destination)| Event::Rule {
            add: false,
            rule: Rule { v4, priority, destination, default: false, digest },
        });
        for event in addresses.chain(neighbors).chain(nexthops).chain(rules) {
            tables.apply(event, writer);
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::decode::*;
    use super::*;
    use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
    use netlink_packet_route::address::AddressAttribute;
    use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
    use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteType, RouteVia};
    use netlink_packet_route::RouteNetlinkMessage;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn mac(last: u8) -> MacAddress {
        MacAddress([0x02, 0, 0, 0, 0, last])
    }

    /// Ports 0 and 1 (host interfaces 10 and 11) of a switch with `[control]`; 1 is lo.
    fn writer() -> FibWriter {
        let config =
            crate::testing::Leaf::new("k").port("host0", 100.0, "").port("up0", 100.0, "").tables("[control]").config();
        FibWriter::mirroring(&config)
    }

    fn v4(text: &str) -> crate::wire::IpAddress {
        crate::wire::IpAddress::V4(u32::from(text.parse::<Ipv4Addr>().unwrap()))
    }

    fn add(route: Route) -> Event {
        Event::Route { add: true, route }
    }

    fn delete(route: Route) -> Event {
        Event::Route { add: false, route }
    }

    fn direct(hops: &[(Option<&str>, u32)]) -> NextHops {
        NextHops::Direct(hops.iter().map(|(gateway, interface)| Hop::new(gateway.map(ip), *interface)).collect())
    }

    fn route(prefix: &str, next_hops: NextHops) -> Route {
        let (address, len) = prefix.split_once('/').unwrap();
        Route::unicast(ip(address), len.parse().unwrap(), next_hops)
    }

    #[test]
    fn tables_follow_the_kernels_changes_into_the_fib() {
        use crate::pipeline::fib::{Adjacency, Target};
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        // Addresses: what makes them the switch's is the kernel's local route for each.
        let local = |prefix: &str, interface: u32| Route {
            kind: RouteKind::Local,
            table: LOCAL_TABLE,
            ..route(prefix, direct(&[(None, interface)]))
        };
        tables.apply(Event::Address { add: true, interface: 10, ip: ip("10.0.0.1") }, &mut writer);
        tables.apply(add(local("10.0.0.1/32", 10)), &mut writer);
        tables.apply(Event::Address { add: true, interface: 1, ip: ip("10.255.255.1") }, &mut writer);
        tables.apply(add(local("10.255.255.1/32", 1)), &mut writer);
        tables.apply(Event::Neighbor { interface: 10, ip: ip("10.0.0.2"), mac: Some(mac(2)) }, &mut writer);
        tables.apply(Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(3)) }, &mut writer);
        tables.apply(Event::Neighbor { interface: 11, ip: ip("10.255.0.3"), mac: Some(mac(4)) }, &mut writer);
        // A neighbour on an interface that is not a port is not the FIB's.
        tables.apply(Event::Neighbor { interface: 1, ip: ip("10.255.0.9"), mac: Some(mac(9)) }, &mut writer);
        // A multipath route, a connected one, one through a nexthop group, and one via lo only.
        let multipath = direct(&[(Some("10.255.0.1"), 11), (Some("10.255.0.3"), 11)]);
        tables.apply(add(route("0.0.0.0/0", multipath.clone())), &mut writer);
        tables.apply(add(route("10.0.0.0/24", direct(&[(None, 10)]))), &mut writer);
        let single = |gateway: &str| Some(Nexthop::Single { gateway: Some(ip(gateway)), interface: 11 });
        tables.apply(Event::Nexthop { id: 7, nexthop: single("10.255.0.1") }, &mut writer);
        tables.apply(Event::Nexthop { id: 8, nexthop: single("10.255.0.3") }, &mut writer);
        tables.apply(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![(7, 1), (8, 1)])) }, &mut writer);
        tables.apply(add(route("192.0.2.0/24", NextHops::Object(9))), &mut writer);
        tables.apply(add(route("198.51.100.0/24", direct(&[(None, 1)]))), &mut writer);
        let blackhole = Route { kind: RouteKind::Blackhole, ..route("203.0.113.0/24", direct(&[])) };
        tables.apply(add(blackhole), &mut writer);
        let fib = writer.snapshot(1);
        let local = Some(Target::Kernel(KernelReason::LocalRoute));
        assert_eq!(fib.lookup(v4("10.0.0.1")), local);
        assert_eq!(fib.lookup(v4("10.255.255.1")), local, "an address on lo is the switch's");
        assert_eq!(fib.neighbors(), 3);
        assert_eq!(fib.neighbor(0, v4("10.0.0.2")), Some(Adjacency { port: 0, mac: mac(2) }));
        assert_eq!(fib.neighbor(1, v4("10.0.0.2")), None, "a neighbour is its interface's");
        let both = vec![Adjacency { port: 1, mac: mac(3) }, Adjacency { port: 1, mac: mac(4) }];
        let Some(Target::Group(group)) = fib.lookup(v4("8.8.8.8")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, both);
        assert_eq!(fib.lookup(v4("10.0.0.7")), Some(Target::Connected(0)));
        assert_eq!(fib.lookup(v4("192.0.2.1")), Some(Target::Group(group)), "a nexthop group, expanded");
        assert_eq!(
            fib.lookup(v4("198.51.100.1")),
            Some(Target::Kernel(KernelReason::NotAPort)),
            "lo's route is the kernel's to forward"
        );
        assert_eq!(fib.lookup(v4("203.0.113.1")), Some(Target::Blackhole));
        // Withdrawals: one member of the group, the neighbour, the multipath route.
        tables.apply(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![(8, 1)])) }, &mut writer);
        tables.apply(Event::Neighbor { interface: 10, ip: ip("10.0.0.2"), mac: None }, &mut writer);
        tables.apply(delete(route("0.0.0.0/0", multipath)), &mut writer);
        // A member object redefined moves the group over it.
        tables.apply(Event::Nexthop { id: 8, nexthop: single("10.255.0.1") }, &mut writer);
        let fib = writer.snapshot(2);
        assert_eq!(fib.neighbors(), 2);
        assert_eq!(fib.lookup(v4("8.8.8.8")), None);
        assert_eq!(fib.lookup(v4("192.0.2.1")), Some(Target::Adjacency(both[0])));
        // The address leaves lo, and the kernel's local route with it: no longer local.
        tables.apply(Event::Address { add: false, interface: 1, ip: ip("10.255.255.1") }, &mut writer);
        let gone =
            Route { kind: RouteKind::Local, table: LOCAL_TABLE, ..route("10.255.255.1/32", direct(&[(None, 1)])) };
        tables.apply(delete(gone), &mut writer);
        assert_eq!(writer.snapshot(3).lookup(v4("10.255.255.1")), None);
    }

    /// The issue's cases, each as the kernel reports it: one address on two ports, one prefix
    /// at two metrics, an IPv6 multipath route losing one next hop, weights, route kinds,
    /// and what the FIB cannot represent.
    /// The four ways the kernel keeps several routes of one key, each followed: IPv4's
    /// `append` and `prepend` (each deleted by its own attributes, `proto` included); IPv6
    /// routes it does not merge (a `dev` route, then a gateway route); an IPv6 `prepend` onto a
    /// route over a nexthop object; and an IPv6 route that expires.
    #[test]
    fn a_keys_routes_are_the_kernels_aliases_in_its_order() {
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        let generation = std::cell::Cell::new(0);
        let gateways = |writer: &mut FibWriter, address: &str| -> Option<(String, Vec<Option<IpAddr>>)> {
            generation.set(generation.get() + 1);
            let fib = writer.snapshot(generation.get());
            let explained = fib.explain(crate::pipeline::fib::ip_destination(ip(address)))?;
            let target = format!("{:?}", explained.target);
            Some((
                target.split('(').next().unwrap().to_string(),
                explained.hops.iter().map(|hop| hop.gateway).collect(),
            ))
        };
        let via = |gateway: &str, interface: u32| direct(&[(Some(gateway), interface)]);
        let placed = |placed: Placed, route: Route| Route { placed, ..route };
        // 1. IPv4: add, then append; the first holds, and deleting it leaves the other.
        let first = placed(Placed::New, route("198.18.1.0/24", via("10.255.0.1", 10)));
        let appended = placed(Placed::Appended, route("198.18.1.0/24", via("10.255.0.3", 11)));
        tables.apply(add(first.clone()), &mut writer);
        tables.apply(add(appended.clone()), &mut writer);
        let answer = gateways(&mut writer, "198.18.1.9").unwrap();
        assert_eq!(answer.1, [Some(ip("10.255.0.1"))], "the first of the key: {answer:?}");
        assert_eq!(writer.snapshot(90).explain(v4("198.18.1.9")).unwrap().waiting.map(|w| w.aliases), Some(1));
        tables.apply(delete(first.clone()), &mut writer);
        assert_eq!(gateways(&mut writer, "198.18.1.9").unwrap().1, [Some(ip("10.255.0.3"))], "the appended one");
        // A prepend goes first; deleted, the one behind it is back.
        let prepended = placed(Placed::Prepended, route("198.18.1.0/24", via("10.255.0.5", 10)));
        tables.apply(add(prepended.clone()), &mut writer);
        assert_eq!(gateways(&mut writer, "198.18.1.9").unwrap().1, [Some(ip("10.255.0.5"))]);
        tables.apply(delete(prepended), &mut writer);
        assert_eq!(gateways(&mut writer, "198.18.1.9").unwrap().1, [Some(ip("10.255.0.3"))]);
        tables.apply(delete(appended), &mut writer);
        assert_eq!(gateways(&mut writer, "198.18.1.9"), None);
        // The same next hop twice, by protocol: deleting the static one leaves bgp's.
        let static_route = Route { protocol: 4, ..placed(Placed::New, route("198.18.2.0/24", via("10.255.0.1", 10))) };
        let bgp = Route { protocol: 186, placed: Placed::Appended, ..static_route.clone() };
        let bgp = Route { next_hops: via("10.255.0.3", 11), ..bgp };
        tables.apply(add(static_route.clone()), &mut writer);
        tables.apply(add(bgp.clone()), &mut writer);
        tables.apply(delete(static_route), &mut writer);
        assert_eq!(gateways(&mut writer, "198.18.2.9").unwrap().1, [Some(ip("10.255.0.3"))], "bgp's is left");
        // `change` (a replace) takes the first's place.
        let changed = Route { placed: Placed::Replaced, next_hops: via("10.255.0.7", 10), ..bgp.clone() };
        tables.apply(add(changed), &mut writer);
        assert_eq!(gateways(&mut writer, "198.18.2.9").unwrap().1, [Some(ip("10.255.0.7"))]);
        assert_eq!(writer.kernel_aliases(ip("198.18.2.0"), 24, RouteKey::default()).len(), 1);

        // 2. IPv6: a dev route, then a gateway route appended: the kernel keeps both, unmerged,
        // and uses the first; a second dev route waits too.
        let dev = placed(Placed::New, route("2001:db8:4::/48", direct(&[(None, 10)])));
        let gateway = placed(Placed::Appended, route("2001:db8:4::/48", via("fd00:255::3", 11)));
        tables.apply(add(dev.clone()), &mut writer);
        tables.apply(add(gateway.clone()), &mut writer);
        tables.apply(add(placed(Placed::Appended, route("2001:db8:4::/48", direct(&[(None, 11)])))), &mut writer);
        assert_eq!(gateways(&mut writer, "2001:db8:4::9").unwrap(), ("Connected".to_string(), vec![None]));
        tables.apply(delete(dev), &mut writer);
        assert_eq!(gateways(&mut writer, "2001:db8:4::9").unwrap().1, [Some(ip("fd00:255::3"))]);
        // A second gateway route merges with the first: the kernel reports them as one.
        let merged = placed(
            Placed::Appended,
            route("2001:db8:4::/48", direct(&[(Some("fd00:255::5"), 10), (Some("fd00:255::3"), 11)])),
        );
        tables.apply(add(merged), &mut writer);
        assert_eq!(gateways(&mut writer, "2001:db8:4::9").unwrap().1.len(), 2, "merged in place");
        assert_eq!(writer.kernel_aliases(ip("2001:db8:4::"), 48, RouteKey::default()).len(), 2);

        // 3. IPv6: a route prepended onto one over a nexthop object is put after it.
        let single = |gateway: &str, interface| Some(Nexthop::Single { gateway: Some(ip(gateway)), interface });
        tables.apply(Event::Nexthop { id: 1, nexthop: single("fd00:255::1", 10) }, &mut writer);
        tables.apply(Event::Nexthop { id: 2, nexthop: single("fd00:255::2", 10) }, &mut writer);
        tables.apply(Event::Nexthop { id: 3, nexthop: single("fd00:255::3", 11) }, &mut writer);
        tables
            .apply(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![(1, 1), (2, 1), (3, 1)])) }, &mut writer);
        tables.apply(add(placed(Placed::New, route("2001:db8:5::/48", NextHops::Object(9)))), &mut writer);
        tables.apply(add(placed(Placed::Prepended, route("2001:db8:5::/48", via("fd00:255::7", 10)))), &mut writer);
        assert_eq!(gateways(&mut writer, "2001:db8:5::9").unwrap().1.len(), 3, "the object's three hops");

        // 4. IPv6 expiry: forwarded by until its time is nearly up, then the kernel's to answer
        // until it deletes it; then the route behind it.
        let now = std::time::Instant::now();
        let lasting = placed(Placed::New, route("2001:db8:6::/48", via("fd00:255::1", 10)));
        let expiring = Route {
            expires: Some(std::time::Duration::from_secs(2)),
            ..placed(Placed::Appended, route("2001:db8:6::/48", direct(&[(None, 11)])))
        };
        let expiring = Route { metric: 0, ..expiring };
        tables.apply(add(placed(Placed::New, expiring.clone())), &mut writer);
        tables.apply(add(Route { metric: 10, ..lasting }), &mut writer);
        assert_eq!(gateways(&mut writer, "2001:db8:6::9").unwrap().0, "Connected");
        assert_eq!(tables.expire(now + std::time::Duration::from_millis(1500), &mut writer), 0);
        assert_eq!(gateways(&mut writer, "2001:db8:6::9").unwrap().0, "Connected");
        assert_eq!(tables.expire(now + std::time::Duration::from_millis(1800), &mut writer), 1, "within the margin");
        assert_eq!(gateways(&mut writer, "2001:db8:6::9").unwrap().0, "Kernel", "the kernel answers past its time");
        assert_eq!(
            tables.kernel_route_counts()[KernelReason::ALL.iter().position(|r| *r == KernelReason::Expired).unwrap()],
            1
        );
        tables.apply(delete(expiring), &mut writer);
        assert_eq!(gateways(&mut writer, "2001:db8:6::9").unwrap().1, [Some(ip("fd00:255::1"))], "the route behind it");
        assert_eq!(tables.expire(now + std::time::Duration::from_secs(60), &mut writer), 0, "nothing left to expire");
    }

    /// An IPv6 merged route whose first member expires moves behind a route the kernel did
    /// not merge that came between its members: the kernel's lookup skips the expired member
    /// and reaches that route first. So does deleting the first member.
    #[test]
    fn a_merged_routes_place_is_its_first_live_member() {
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        tables.apply(
            Event::Nexthop { id: 4, nexthop: Some(Nexthop::Single { gateway: Some(ip("fd00::4")), interface: 11 }) },
            &mut writer,
        );
        let now = std::time::Instant::now();
        let a = Route {
            expires: Some(std::time::Duration::from_secs(3)),
            placed: Placed::New,
            ..route("2001:db8:8::/48", direct(&[(Some("fd00::a"), 10)]))
        };
        tables.apply(add(a), &mut writer);
        tables.apply(
            add(Route { placed: Placed::Appended, ..route("2001:db8:8::/48", NextHops::Object(4)) }),
            &mut writer,
        );
        let both = direct(&[(Some("fd00::b"), 10), (Some("fd00::a"), 10)]);
        tables.apply(add(Route { placed: Placed::Prepended, ..route("2001:db8:8::/48", both) }), &mut writer);
        let hops = |writer: &mut FibWriter| {
            let fib = writer.snapshot(1);
            fib.explain(crate::pipeline::fib::ip_destination(ip("2001:db8:8::1")))
                .unwrap()
                .hops
                .iter()
                .map(|hop| hop.gateway)
                .collect::<Vec<_>>()
        };
        assert_eq!(hops(&mut writer).len(), 2, "the merged route first");
        assert_eq!(tables.expire(now + std::time::Duration::from_secs(3), &mut writer), 1);
        assert_eq!(hops(&mut writer), [Some(ip("fd00::4"))], "its first member expired: the object's route");

        // A merged route alone at its metric is skipped once every member has expired.
        let late = |gateways: &[&str], expires: u64| Route {
            metric: 20,
            expires: Some(std::time::Duration::from_secs(expires)),
            placed: Placed::Appended,
            ..route("2001:db8:9::/48", direct(&gateways.iter().map(|g| (Some(*g), 10)).collect::<Vec<_>>()))
        };
        tables.apply(
            add(Route { metric: 1024, ..route("2001:db8:9::/48", direct(&[(Some("fd00::9"), 11)])) }),
            &mut writer,
        );
        tables.apply(add(late(&["fd00::1"], 2)), &mut writer);
        tables.apply(add(late(&["fd00::2", "fd00::1"], 4)), &mut writer);
        let target = |writer: &mut FibWriter| {
            let fib = writer.snapshot(2);
            fib.explain(crate::pipeline::fib::ip_destination(ip("2001:db8:9::1"))).unwrap().hops.len()
        };
        assert_eq!(target(&mut writer), 2, "metric 20's two members");
        tables.expire(now + std::time::Duration::from_secs(2), &mut writer);
        assert_eq!(target(&mut writer), 2, "one member expired: the kernel still picks among both");
        tables.expire(now + std::time::Duration::from_secs(4), &mut writer);
        let fib = writer.snapshot(3);
        let explained = fib.explain(crate::pipeline::fib::ip_destination(ip("2001:db8:9::1"))).unwrap();
        assert_eq!(
            explained.target,
            crate::pipeline::fib::Target::Kernel(KernelReason::Expired),
            "both expired: the kernel's (it answers by metric 1024's)"
        );
    }

    #[test]
    fn placement_comes_from_the_messages_flags() {
        assert_eq!(Placed::from_flags(0x2 | 0x400), Placed::Dumped, "NLM_F_MULTI: a dump");
        assert_eq!(Placed::from_flags(0x400 | 0x200), Placed::New, "NLM_F_CREATE | NLM_F_EXCL");
        assert_eq!(Placed::from_flags(0x400 | 0x100), Placed::Replaced);
        assert_eq!(Placed::from_flags(0x400 | 0x800), Placed::Appended);
        assert_eq!(Placed::from_flags(0x400), Placed::Prepended, "NLM_F_CREATE alone");
    }

    #[test]
    fn routes_and_neighbours_are_keyed_as_the_kernel_keys_them() {
        use crate::pipeline::fib::{Adjacency, Target};
        let v6 = |text: &str| crate::wire::IpAddress::V6(u128::from(text.parse::<Ipv6Addr>().unwrap()));
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        for (interface, last) in [(10, 1), (11, 2)] {
            tables.apply(Event::Address { add: true, interface, ip: ip(&format!("10.0.{last}.1")) }, &mut writer);
            tables.apply(Event::Neighbor { interface, ip: ip("fe80::1"), mac: Some(mac(last)) }, &mut writer);
        }
        let host0 = Adjacency { port: 0, mac: mac(1) };
        let up0 = Adjacency { port: 1, mac: mac(2) };
        // BGP unnumbered: fe80::1 on each port is a neighbour of its own.
        tables.apply(add(route("fd10::/48", direct(&[(Some("fe80::1"), 10)]))), &mut writer);
        tables.apply(add(route("fd11::/48", direct(&[(Some("fe80::1"), 11)]))), &mut writer);
        let fib = writer.snapshot(1);
        assert_eq!(fib.lookup(v6("fd10::1")), Some(Target::Adjacency(host0)));
        assert_eq!(fib.lookup(v6("fd11::1")), Some(Target::Adjacency(up0)));
        tables.apply(Event::Neighbor { interface: 11, ip: ip("fe80::1"), mac: None }, &mut writer);
        let fib = writer.snapshot(2);
        assert_eq!(fib.lookup(v6("fd10::1")), Some(Target::Adjacency(host0)), "the other port's neighbour went");
        assert_eq!(fib.lookup(v6("fd11::1")), Some(Target::Glean));
        tables.apply(Event::Neighbor { interface: 11, ip: ip("fe80::1"), mac: Some(mac(2)) }, &mut writer);

        // One prefix at metrics 20 then 10: 10 wins whatever the order; when it goes, 20.
        let metric = |metric: u32, interface: u32| Route {
            metric,
            ..route("172.16.0.0/16", direct(&[(Some("fe80::1"), interface)]))
        };
        tables.apply(add(metric(10, 10)), &mut writer);
        tables.apply(add(metric(20, 11)), &mut writer);
        assert_eq!(writer.snapshot(3).lookup(v4("172.16.1.1")), Some(Target::Adjacency(host0)));
        tables.apply(delete(metric(20, 11)), &mut writer);
        assert_eq!(writer.snapshot(4).lookup(v4("172.16.1.1")), Some(Target::Adjacency(host0)));
        tables.apply(add(metric(20, 11)), &mut writer);
        tables.apply(delete(metric(10, 10)), &mut writer);
        assert_eq!(writer.snapshot(5).lookup(v4("172.16.1.1")), Some(Target::Adjacency(up0)), "the next takes over");
        tables.apply(delete(metric(20, 11)), &mut writer);
        assert_eq!(writer.snapshot(6).lookup(v4("172.16.1.1")), None);

        // IPv6 multipath: the kernel deletes one next hop, naming it; the other stays.
        let both = direct(&[(Some("fe80::1"), 10), (Some("fe80::1"), 11)]);
        tables.apply(add(route("fd20::/48", both)), &mut writer);
        let fib = writer.snapshot(7);
        let Some(Target::Group(group)) = fib.lookup(v6("fd20::1")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, vec![host0, up0]);
        tables.apply(delete(route("fd20::/48", direct(&[(Some("fe80::1"), 10)]))), &mut writer);
        assert_eq!(writer.snapshot(8).lookup(v6("fd20::1")), Some(Target::Adjacency(up0)));
        tables.apply(delete(route("fd20::/48", direct(&[(Some("fe80::1"), 11)]))), &mut writer);
        assert_eq!(writer.snapshot(9).lookup(v6("fd20::1")), None);

        // Weights: a route's, and a nexthop group's.
        let weighted = NextHops::Direct(vec![
            Hop::new(Some(ip("fe80::1")), 10),
            Hop { weight: 9, ..Hop::new(Some(ip("fe80::1")), 11) },
        ]);
        tables.apply(add(route("fd30::/48", weighted)), &mut writer);
        let on = |interface| Some(Nexthop::Single { gateway: Some(ip("fe80::1")), interface });
        tables.apply(Event::Nexthop { id: 1, nexthop: on(10) }, &mut writer);
        tables.apply(Event::Nexthop { id: 2, nexthop: on(11) }, &mut writer);
        tables.apply(Event::Nexthop { id: 3, nexthop: Some(Nexthop::Group(vec![(1, 3), (2, 1)])) }, &mut writer);
        tables.apply(add(route("fd31::/48", NextHops::Object(3))), &mut writer);
        let fib = writer.snapshot(10);
        let weights = |destination| match fib.lookup(destination) {
            Some(Target::Group(group)) => fib.groups[group as usize].weights.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!((weights(v6("fd30::1")), weights(v6("fd31::1"))), (vec![1, 9], vec![3, 1]));

        // Kinds: throw, unreachable and prohibit go to the kernel, which answers; a replace
        // of a unicast route by a throw takes the unicast route's place.
        tables.apply(add(route("10.9.0.0/16", direct(&[(Some("fe80::1"), 10)]))), &mut writer);
        let kind = |kind: RouteKind, prefix: &str| Route { kind, ..route(prefix, direct(&[])) };
        tables.apply(add(kind(RouteKind::Throw, "10.9.0.0/16")), &mut writer);
        tables.apply(add(kind(RouteKind::Unreachable, "10.10.0.0/16")), &mut writer);
        tables.apply(add(kind(RouteKind::Prohibit, "10.11.0.0/16")), &mut writer);
        // The local table: a broadcast address; IPv6 subnet-router anycast.
        let local = |kind: RouteKind, prefix: &str, interface: u32| Route {
            kind,
            table: LOCAL_TABLE,
            ..route(prefix, direct(&[(None, interface)]))
        };
        tables.apply(add(local(RouteKind::Broadcast, "10.0.1.255/32", 10)), &mut writer);
        tables.apply(add(local(RouteKind::Anycast, "fd00::/128", 10)), &mut writer);
        // What the FIB cannot represent: a tos route, a source route, the default table; and
        // another table, which only rules reach.
        tables.apply(add(Route { tos: 0x10, ..route("10.12.0.0/16", direct(&[(None, 10)])) }), &mut writer);
        let from = Route { source: Some((ip("fd99::"), 64)), ..route("fd40::/48", direct(&[(None, 10)])) };
        tables.apply(add(from), &mut writer);
        tables.apply(add(Route { table: DEFAULT_TABLE, ..route("10.13.0.0/16", direct(&[(None, 10)])) }), &mut writer);
        tables.apply(add(Route { table: 100, ..route("10.14.0.0/16", direct(&[(None, 10)])) }), &mut writer);
        let fib = writer.snapshot(11);
        for (destination, reason) in [
            (v4("10.9.1.1"), KernelReason::Throw),
            (v4("10.10.1.1"), KernelReason::Unreachable),
            (v4("10.11.1.1"), KernelReason::Prohibit),
            (v4("10.0.1.255"), KernelReason::Broadcast),
            (v6("fd00::"), KernelReason::Anycast),
            (v4("10.12.1.1"), KernelReason::Tos),
            (v6("fd40::1"), KernelReason::Source),
            (v4("10.13.1.1"), KernelReason::DefaultTable),
        ] {
            assert_eq!(fib.lookup(destination), Some(Target::Kernel(reason)), "{destination:?}");
        }
        assert_eq!(fib.lookup(v4("10.14.1.1")), None, "table 100 is not the main table");
        let counts = tables.kernel_route_counts();
        let count = |reason: KernelReason| counts[KernelReason::ALL.iter().position(|r| *r == reason).unwrap()];
        for reason in [KernelReason::Throw, KernelReason::Tos, KernelReason::Source, KernelReason::DefaultTable] {
            assert_eq!(count(reason), 1, "{reason:?} in {counts:?}");
        }
        assert_eq!(counts.iter().sum::<u64>(), 9, "eight to the kernel and one of table 100: {counts:?}");
        assert_eq!(counts[KernelReason::ALL.len()], 1);
        // The throw deleted: the unicast route it replaced is gone too (one key, one route).
        tables.apply(delete(kind(RouteKind::Throw, "10.9.0.0/16")), &mut writer);
        assert_eq!(writer.snapshot(12).lookup(v4("10.9.1.1")), None);
    }

    /// What the kernel deletes without a message: an object's routes when it goes (and a group
    /// it leaves empty, with its routes); on a port going down, its objects and the IPv4
    /// routes only through it, its next hops dead in a multipath route until it is up.
    #[test]
    fn the_kernels_silent_deletions_are_followed() {
        use crate::pipeline::fib::{Adjacency, Target};
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        for (interface, last) in [(10, 1), (11, 2)] {
            tables.apply(Event::Link { interface, up: true, mtu: None }, &mut writer);
            tables.apply(Event::Address { add: true, interface, ip: ip(&format!("10.0.{last}.1")) }, &mut writer);
            let gateway = ip(&format!("10.0.{last}.2"));
            tables.apply(Event::Neighbor { interface, ip: gateway, mac: Some(mac(last)) }, &mut writer);
        }
        let host0 = Adjacency { port: 0, mac: mac(1) };
        let up0 = Adjacency { port: 1, mac: mac(2) };
        let single = |gateway: &str, interface| Some(Nexthop::Single { gateway: Some(ip(gateway)), interface });
        tables.apply(Event::Nexthop { id: 7, nexthop: single("10.0.2.2", 11) }, &mut writer);
        tables.apply(Event::Nexthop { id: 8, nexthop: single("10.0.1.2", 10) }, &mut writer);
        tables.apply(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![(8, 1)])) }, &mut writer);
        tables.apply(add(route("172.16.0.0/16", NextHops::Object(7))), &mut writer);
        tables.apply(add(route("172.17.0.0/16", NextHops::Object(9))), &mut writer);
        tables.apply(add(route("172.18.0.0/16", direct(&[(Some("10.0.1.2"), 10)]))), &mut writer);
        let multipath = direct(&[(Some("10.0.1.2"), 10), (Some("10.0.2.2"), 11)]);
        tables.apply(add(route("172.19.0.0/16", multipath)), &mut writer);
        tables.apply(add(route("172.20.0.0/16", direct(&[(Some("10.0.2.2"), 11)]))), &mut writer);
        // The object goes: so does its route, and an object reusing the id revives nothing.
        tables.apply(Event::Nexthop { id: 7, nexthop: None }, &mut writer);
        tables.apply(Event::Nexthop { id: 7, nexthop: single("10.0.1.2", 10) }, &mut writer);
        assert_eq!(writer.snapshot(1).lookup(v4("172.16.1.1")), None);
        assert_eq!(writer.snapshot(1).lookup(v4("172.17.1.1")), Some(Target::Adjacency(host0)));
        // host0 goes down: object 8 goes, group 9 is left empty and goes, their route and the
        // route only through host0 go; the multipath route spreads over up0 alone.
        tables.apply(Event::Link { interface: 10, up: false, mtu: None }, &mut writer);
        let fib = writer.snapshot(2);
        assert_eq!(fib.lookup(v4("172.17.1.1")), None, "over a group left empty");
        assert_eq!(fib.lookup(v4("172.18.1.1")), None, "only through the port");
        assert_eq!(fib.lookup(v4("172.19.1.1")), Some(Target::Adjacency(up0)), "its other next hop");
        assert_eq!(fib.lookup(v4("172.20.1.1")), Some(Target::Adjacency(up0)));
        assert!(!tables.nexthops.contains_key(&8) && !tables.nexthops.contains_key(&9));
        tables.apply(Event::Link { interface: 10, up: true, mtu: None }, &mut writer);
        let Some(Target::Group(_)) = writer.snapshot(3).lookup(v4("172.19.1.1")) else { panic!("both again") };
        // up0 loses its last IPv4 address: its IPv4 routes go the same way.
        tables.apply(Event::Address { add: false, interface: 11, ip: ip("10.0.2.1") }, &mut writer);
        let fib = writer.snapshot(4);
        assert_eq!(fib.lookup(v4("172.20.1.1")), None);
        assert_eq!(fib.lookup(v4("172.19.1.1")), Some(Target::Adjacency(host0)));
        // A route whose every next hop the kernel holds dead (a dump taken while it deleted
        // it) is absent; one live next hop is enough.
        let dead = Hop { dead: true, ..Hop::new(Some(ip("10.0.1.2")), 10) };
        tables.apply(add(route("172.21.0.0/16", NextHops::Direct(vec![dead]))), &mut writer);
        assert_eq!(writer.snapshot(5).lookup(v4("172.21.1.1")), None);
        let live = Hop::new(Some(ip("10.0.1.2")), 10);
        tables.apply(add(route("172.21.0.0/16", NextHops::Direct(vec![dead, live]))), &mut writer);
        assert_eq!(writer.snapshot(6).lookup(v4("172.21.1.1")), Some(Target::Adjacency(host0)));
    }

    /// A member deleted leaves its group at once (the kernel says nothing of the group): the
    /// routes over the group, and what `show route` explains, follow.
    #[test]
    fn a_deleted_member_leaves_its_group() {
        use crate::pipeline::fib::{ip_destination, Adjacency, Target};
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        let single = |gateway: &str, interface| Some(Nexthop::Single { gateway: Some(ip(gateway)), interface });
        tables.apply(Event::Neighbor { interface: 11, ip: ip("10.0.1.12"), mac: Some(mac(12)) }, &mut writer);
        tables.apply(Event::Nexthop { id: 8, nexthop: single("10.0.1.12", 11) }, &mut writer);
        tables.apply(Event::Nexthop { id: 22, nexthop: single("10.0.1.12", 11) }, &mut writer);
        tables.apply(Event::Nexthop { id: 104, nexthop: Some(Nexthop::Group(vec![(22, 7), (8, 1)])) }, &mut writer);
        tables.apply(add(route("10.12.0.0/19", NextHops::Object(104))), &mut writer);
        let explained = writer.snapshot(1).explain(ip_destination(ip("10.12.0.1"))).unwrap();
        assert_eq!(explained.hops.len(), 2);
        tables.apply(Event::Nexthop { id: 22, nexthop: None }, &mut writer);
        // What the kernel then says of the group (not always: a new kernel may say nothing).
        tables.apply(Event::Nexthop { id: 104, nexthop: Some(Nexthop::Group(vec![(8, 1)])) }, &mut writer);
        tables.apply(Event::Nexthop { id: 22, nexthop: single("10.0.0.19", 10) }, &mut writer);
        assert!(writer.take_changed());
        let fib = writer.snapshot(2);
        let explained = fib.explain(ip_destination(ip("10.12.0.1"))).unwrap();
        assert_eq!(explained.hops.iter().map(|hop| hop.weight).collect::<Vec<_>>(), vec![1]);
        assert_eq!(explained.target, Target::Adjacency(Adjacency { port: 1, mac: mac(12) }));
        // The same with the neighbour unknown: the route gleans before and after, and the
        // snapshot still changes (it holds the objects `show route` explains by).
        tables.apply(Event::Neighbor { interface: 11, ip: ip("10.0.1.12"), mac: None }, &mut writer);
        tables.apply(Event::Nexthop { id: 23, nexthop: single("10.0.1.12", 11) }, &mut writer);
        tables.apply(Event::Nexthop { id: 104, nexthop: Some(Nexthop::Group(vec![(23, 7), (8, 1)])) }, &mut writer);
        assert_eq!(writer.snapshot(3).explain(ip_destination(ip("10.12.0.1"))).unwrap().hops.len(), 2);
        writer.take_changed();
        tables.apply(Event::Nexthop { id: 23, nexthop: None }, &mut writer);
        assert!(writer.take_changed());
        let explained = writer.snapshot(4).explain(ip_destination(ip("10.12.0.1"))).unwrap();
        assert_eq!((explained.target, explained.hops.len()), (Target::Glean, 1));
    }

    /// Policy rules: the kernel's defaults change nothing; one that selects by destination
    /// sends its prefix, and every route inside, to the kernel; one that does not makes the
    /// FIB partial until it goes. Decoded from the kernel's messages.
    #[test]
    fn policy_rules_send_their_prefix_to_the_kernel_or_make_the_fib_partial() {
        use crate::pipeline::fib::Target;
        use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
        let rule = |priority: u32, table: u32, destination: Option<(&str, u8)>, from: bool| {
            let mut message = RuleMessage::default();
            message.header.family = netlink_packet_route::AddressFamily::Inet;
            message.header.action = RuleAction::ToTable;
            message.attributes = vec![RuleAttribute::Priority(priority), RuleAttribute::Table(table)];
            if let Some((address, len)) = destination {
                message.header.dst_len = len;
                message.attributes.push(RuleAttribute::Destination(ip(address)));
            }
            if from {
                message.header.src_len = 16;
                message.attributes.push(RuleAttribute::Source(ip("10.8.0.0")));
            }
            message
        };
        let event = |add: bool, message: RuleMessage| {
            let datagram =
                emit(if add { RouteNetlinkMessage::NewRule(message) } else { RouteNetlinkMessage::DelRule(message) });
            match decode(&datagram).pop() {
                Some(Message::Event(event)) => event,
                other => panic!("{other:?}"),
            }
        };
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        tables.apply(add(route("10.9.1.0/24", direct(&[(None, 10)]))), &mut writer);
        for (priority, table) in [(0, 255), (32766, 254), (32767, 253)] {
            let default = event(true, rule(priority, table, None, false));
            assert!(matches!(&default, Event::Rule { rule, .. } if rule.default), "{default:?}");
            tables.apply(default, &mut writer);
        }
        assert!(!tables.partial());
        assert_eq!(writer.snapshot(1).lookup(v4("10.9.1.1")), Some(Target::Connected(0)));
        // `to 10.9.0.0/16`: the prefix and the /24 inside it go to the kernel; deleted, back.
        let to = rule(100, 100, Some(("10.9.0.0", 16)), false);
        tables.apply(event(true, to.clone()), &mut writer);
        let fib = writer.snapshot(2);
        let kernel = Some(Target::Kernel(KernelReason::Rule));
        assert_eq!((fib.lookup(v4("10.9.1.1")), fib.lookup(v4("10.9.200.1"))), (kernel, kernel));
        assert!(!tables.partial(), "a rule by destination is represented");
        tables.apply(event(false, to), &mut writer);
        assert_eq!(writer.snapshot(3).lookup(v4("10.9.1.1")), Some(Target::Connected(0)));
        assert_eq!(writer.snapshot(3).lookup(v4("10.9.200.1")), None);
        // `from 10.8.0.0/16`: any destination may be looked up elsewhere.
        let from = rule(200, 100, None, true);
        tables.apply(event(true, from.clone()), &mut writer);
        assert!(tables.partial());
        tables.apply(event(false, from), &mut writer);
        assert!(!tables.partial());
    }

    /// After lost messages, a fresh dump: what it reports again stays (with no gap), what it
    /// does not is removed when it ends.
    #[test]
    fn a_fresh_dump_sweeps_what_it_does_not_report_again() {
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        let connected = |prefix: &str| add(route(prefix, direct(&[(None, 11)])));
        for event in [
            connected("192.0.2.0/24"),
            connected("198.51.100.0/24"),
            add(Route { metric: 5, ..route("192.0.2.0/24", direct(&[(None, 10)])) }),
            Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(1)) },
            Event::Neighbor { interface: 11, ip: ip("10.255.0.3"), mac: Some(mac(3)) },
            Event::Address { add: true, interface: 10, ip: ip("10.0.0.1") },
            Event::Nexthop { id: 4, nexthop: Some(Nexthop::Unusable) },
        ] {
            tables.apply(event, &mut writer);
        }
        let mut stale = tables.contents(&writer);
        for event in
            [connected("192.0.2.0/24"), Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(1)) }]
        {
            stale.refreshed(&event, &mut tables);
            tables.apply(event, &mut writer);
        }
        assert_eq!(writer.snapshot(1).routes(), 2, "nothing is gone before the dump ends");
        stale.sweep(&mut tables, &mut writer);
        let fib = writer.snapshot(2);
        assert_eq!(
            fib.dump().iter().map(|(address, len, _)| (*address, *len)).collect::<Vec<_>>(),
            vec![(ip("192.0.2.0"), 24)]
        );
        assert_eq!(writer.kernel_routes().len(), 1, "the metric-5 route was not reported again");
        assert_eq!(fib.neighbors(), 1);
        assert!(tables.nexthops.is_empty() && tables.addresses.is_empty());
    }

    /// One message as the kernel would write it, serialised by netlink-packet-route.
    /// A message as the kernel sends one that replaced its key's route (NLM_F_REPLACE).
    fn emit(inner: RouteNetlinkMessage) -> Vec<u8> {
        emit_with_flags(inner, 0x100)
    }

    fn emit_with_flags(inner: RouteNetlinkMessage, flags: u16) -> Vec<u8> {
        use netlink_packet_core::NetlinkHeader;
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(inner));
        message.finalize();
        let mut bytes = vec![0u8; message.buffer_len()];
        message.serialize(&mut bytes);
        bytes
    }

    /// A datagram of netlink messages as the kernel writes them (native byte order).
    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let len = 16 + body.len();
        let mut bytes = vec![0u8; len.div_ceil(4) * 4];
        bytes[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        bytes[4..6].copy_from_slice(&kind.to_ne_bytes());
        bytes[16..len].copy_from_slice(body);
        bytes
    }

    fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut bytes = vec![0u8; len.div_ceil(4) * 4];
        bytes[0..2].copy_from_slice(&(len as u16).to_ne_bytes());
        bytes[2..4].copy_from_slice(&kind.to_ne_bytes());
        bytes[4..len].copy_from_slice(value);
        bytes
    }

    #[test]
    fn nexthop_objects_and_dump_ends_decode() {
        let mut single = vec![2u8, 0, 3, 0, 0, 0, 0, 0]; // nhmsg: AF_INET, scope, protocol
        single.extend(attribute(1, &7u32.to_ne_bytes()));
        single.extend(attribute(5, &11u32.to_ne_bytes()));
        single.extend(attribute(6, &[10, 255, 0, 1]));
        let mut group = vec![0u8; 8];
        group.extend(attribute(1, &9u32.to_ne_bytes()));
        let entries: Vec<u8> =
            [7u32, 8].iter().flat_map(|id| [id.to_ne_bytes().to_vec(), vec![1, 0, 0, 0]].concat()).collect();
        group.extend(attribute(2, &entries));
        let mut deleted = vec![0u8; 8];
        deleted.extend(attribute(1, &8u32.to_ne_bytes()));
        let mut blackhole = vec![0u8; 8];
        blackhole.extend(attribute(1, &3u32.to_ne_bytes()));
        blackhole.extend(attribute(4, &[]));
        let datagram = [
            message(RTM_NEWNEXTHOP, &single),
            message(RTM_NEWNEXTHOP, &group),
            message(RTM_DELNEXTHOP, &deleted),
            message(RTM_NEWNEXTHOP, &blackhole),
            message(NLMSG_DONE, &[0; 4]),
            // A failed dump request (errno, then the request's header) ends that dump too.
            message(NLMSG_ERROR, &[[0xa1, 0xff, 0xff, 0xff].as_slice(), &[0u8; 16]].concat()),
            message(NLMSG_OVERRUN, &[]),
        ]
        .concat();
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Nexthop {
                    id: 7,
                    nexthop: Some(Nexthop::Single { gateway: Some(ip("10.255.0.1")), interface: 11 })
                }),
                // The kernel writes a weight less one: 1 is weight 2.
                Message::Event(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![(7, 2), (8, 2)])) }),
                Message::Event(Event::Nexthop { id: 8, nexthop: None }),
                Message::Event(Event::Nexthop { id: 3, nexthop: Some(Nexthop::Unusable) }),
                Message::Done,
                Message::Done,
                Message::Lost,
            ]
        );
        // Truncated or lying lengths end the walk without a panic.
        assert_eq!(decode(&datagram[..10]), vec![]);
        let mut lying = message(RTM_NEWNEXTHOP, &single);
        lying[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(decode(&lying), vec![]);
    }

    #[test]
    fn route_neighbour_and_address_messages_decode() {
        use netlink_packet_route::route::{RouteMessage, RouteNextHop};
        // 0.0.0.0/0 over two next hops: one IPv4 gateway, one IPv6 link-local via (RFC 5549).
        let mut route = RouteMessage::default();
        route.header.address_family = netlink_packet_route::AddressFamily::Inet;
        route.header.table = netlink_packet_route::route::RouteHeader::RT_TABLE_MAIN;
        route.header.kind = RouteType::Unicast;
        let hop = |attribute: RouteAttribute, interface_index: u32, weight: u8| {
            let mut hop = RouteNextHop::default();
            hop.interface_index = interface_index;
            hop.hops = weight - 1;
            hop.attributes = vec![attribute];
            hop
        };
        route.attributes = vec![RouteAttribute::MultiPath(vec![
            hop(RouteAttribute::Gateway(RouteAddress::Inet("10.255.0.1".parse().unwrap())), 11, 1),
            hop(RouteAttribute::Via(RouteVia::Inet6("fe80::1".parse().unwrap())), 12, 3),
        ])];
        route.attributes.push(RouteAttribute::Priority(20));
        let mut local_table = route.clone();
        local_table.header.table = 255;
        let mut neighbour = netlink_packet_route::neighbour::NeighbourMessage::default();
        neighbour.header.family = netlink_packet_route::AddressFamily::Inet;
        neighbour.header.ifindex = 11;
        neighbour.header.state = NeighbourState::Stale;
        neighbour.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet("10.255.0.1".parse().unwrap())),
            NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 9]),
        ];
        let mut failed = neighbour.clone();
        failed.header.state = NeighbourState::Failed;
        let mut address = netlink_packet_route::address::AddressMessage::default();
        address.header.family = netlink_packet_route::AddressFamily::Inet;
        address.header.index = 10;
        address.attributes = vec![AddressAttribute::Address("10.0.0.1".parse().unwrap())];
        let datagram = [
            emit(RouteNetlinkMessage::NewRoute(route)),
            emit(RouteNetlinkMessage::NewRoute(local_table)),
            emit(RouteNetlinkMessage::NewNeighbour(neighbour)),
            emit(RouteNetlinkMessage::NewNeighbour(failed)),
            emit(RouteNetlinkMessage::NewAddress(address.clone())),
            emit(RouteNetlinkMessage::DelAddress(address)),
        ]
        .concat();
        let default_route = Route {
            metric: 20,
            ..Route::unicast(
                ip("0.0.0.0"),
                0,
                NextHops::Direct(vec![
                    Hop::new(Some(ip("10.255.0.1")), 11),
                    Hop { weight: 3, ..Hop::new(Some(ip("fe80::1")), 12) },
                ]),
            )
        };
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Route { add: true, route: default_route.clone() }),
                Message::Event(Event::Route { add: true, route: Route { table: 255, ..default_route } }),
                Message::Event(Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(9)) }),
                Message::Event(Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: None }),
                Message::Event(Event::Address { add: true, interface: 10, ip: ip("10.0.0.1") }),
                Message::Event(Event::Address { add: false, interface: 10, ip: ip("10.0.0.1") }),
            ]
        );
    }

    #[test]
    fn every_route_shape_the_kernel_sends_decodes() {
        use netlink_packet_route::route::RouteMessage;
        use netlink_packet_route::AddressFamily;
        let route = |family: AddressFamily, table: u8, len: u8, attributes: Vec<RouteAttribute>| {
            let mut route = RouteMessage::default();
            route.header.address_family = family;
            route.header.table = table;
            route.header.kind = RouteType::Unicast;
            route.header.destination_prefix_length = len;
            route.attributes = attributes;
            route
        };
        let v6 = |text: &str| RouteAddress::Inet6(text.parse().unwrap());
        // Table given by RTA_TABLE (header says unspec); a single gateway and interface.
        let single = route(
            AddressFamily::Inet,
            0,
            24,
            vec![
                RouteAttribute::Table(254),
                RouteAttribute::Destination(RouteAddress::Inet("192.0.2.0".parse().unwrap())),
                RouteAttribute::Gateway(RouteAddress::Inet("10.255.0.1".parse().unwrap())),
                RouteAttribute::Oif(11),
            ],
        );
        let other_table = route(AddressFamily::Inet, 0, 24, vec![RouteAttribute::Table(100)]);
        // The kernel's per-interface link-local route: never the FIB's.
        let link_local = route(
            AddressFamily::Inet6,
            254,
            64,
            vec![RouteAttribute::Destination(v6("fe80::")), RouteAttribute::Oif(12)],
        );
        // IPv6 default route (no destination) through a nexthop object, an Oif after it ignored.
        // The object's next hops as they are now come with it, and are not what counts.
        let mut hop = netlink_packet_route::route::RouteNextHop::default();
        hop.interface_index = 12;
        let object = route(
            AddressFamily::Inet6,
            254,
            0,
            vec![RouteAttribute::NhId(9), RouteAttribute::Oif(12), RouteAttribute::MultiPath(vec![hop])],
        );
        // An IPv6 prefix via an IPv4 next hop (RTA_VIA).
        let via_v4 = route(
            AddressFamily::Inet6,
            254,
            64,
            vec![
                RouteAttribute::Destination(v6("2001:db8::")),
                RouteAttribute::Via(RouteVia::Inet("10.255.0.3".parse().unwrap())),
                RouteAttribute::Oif(12),
            ],
        );
        let mut blackhole = route(
            AddressFamily::Inet,
            254,
            16,
            vec![RouteAttribute::Destination(RouteAddress::Inet("172.16.0.0".parse().unwrap()))],
        );
        blackhole.header.kind = RouteType::BlackHole;
        let mut neighbour = netlink_packet_route::neighbour::NeighbourMessage::default();
        neighbour.header.family = AddressFamily::Inet6;
        neighbour.header.ifindex = 12;
        neighbour.header.state = NeighbourState::Reachable;
        neighbour.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet6("fe80::1".parse().unwrap())),
            NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 7]),
        ];
        let mut address = netlink_packet_route::address::AddressMessage::default();
        address.header.family = AddressFamily::Inet;
        address.header.index = 11;
        // Point-to-point: IFA_LOCAL is ours, IFA_ADDRESS the peer's.
        address.attributes = vec![
            AddressAttribute::Address("10.255.0.1".parse().unwrap()),
            AddressAttribute::Local("10.255.0.0".parse().unwrap()),
        ];
        let datagram = [
            emit(RouteNetlinkMessage::NewRoute(single.clone())),
            emit(RouteNetlinkMessage::DelRoute(single)),
            emit(RouteNetlinkMessage::NewRoute(other_table)),
            emit(RouteNetlinkMessage::NewRoute(link_local)),
            emit(RouteNetlinkMessage::NewRoute(object)),
            emit(RouteNetlinkMessage::NewRoute(via_v4)),
            emit(RouteNetlinkMessage::NewRoute(blackhole)),
            emit(RouteNetlinkMessage::NewNeighbour(neighbour.clone())),
            emit(RouteNetlinkMessage::DelNeighbour(neighbour)),
            emit(RouteNetlinkMessage::NewAddress(address)),
        ]
        .concat();
        let gateway = Route::unicast(ip("192.0.2.0"), 24, NextHops::Direct(vec![Hop::new(Some(ip("10.255.0.1")), 11)]));
        let v6_via_v4 = NextHops::Direct(vec![Hop::new(Some(ip("10.255.0.3")), 12)]);
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Route { add: true, route: gateway.clone() }),
                Message::Event(Event::Route { add: false, route: gateway }),
                Message::Event(Event::Route {
                    add: true,
                    route: Route { table: 100, ..Route::unicast(ip("0.0.0.0"), 24, NextHops::Direct(Vec::new())) }
                }),
                Message::Other,
                Message::Event(Event::Route { add: true, route: Route::unicast(ip("::"), 0, NextHops::Object(9)) }),
                Message::Event(Event::Route { add: true, route: Route::unicast(ip("2001:db8::"), 64, v6_via_v4) }),
                Message::Event(Event::Route {
                    add: true,
                    route: Route {
                        kind: RouteKind::Blackhole,
                        ..Route::unicast(ip("172.16.0.0"), 16, NextHops::Direct(Vec::new()))
                    }
                }),
                Message::Event(Event::Neighbor { interface: 12, ip: ip("fe80::1"), mac: Some(mac(7)) }),
                Message::Event(Event::Neighbor { interface: 12, ip: ip("fe80::1"), mac: None }),
                Message::Event(Event::Address { add: true, interface: 11, ip: ip("10.255.0.0") }),
            ]
        );
    }

    #[test]
    fn nexthop_attributes_are_walked_by_their_lengths() {
        // Values whose last byte is not zero, an IPv6 gateway, and a blackhole flag after the
        // interface: each attribute is found where its length says.
        let mut single = vec![10u8, 0, 3, 0, 0, 0, 0, 0]; // AF_INET6
        single.extend(attribute(1, &0x0100_0007u32.to_ne_bytes()));
        single.extend(attribute(5, &0x0100_000bu32.to_ne_bytes()));
        single.extend(attribute(6, &"fe80::1".parse::<Ipv6Addr>().unwrap().octets()));
        let mut blackhole = vec![0u8; 8];
        blackhole.extend(attribute(1, &0x0100_0003u32.to_ne_bytes()));
        blackhole.extend(attribute(5, &11u32.to_ne_bytes()));
        blackhole.extend(attribute(4, &[]));
        // An attribute claiming 2 bytes ends the walk (what follows is not read).
        let mut short = vec![0u8; 8];
        short.extend(attribute(1, &5u32.to_ne_bytes()));
        short.extend([2u8, 0, 5, 0]);
        short.extend(attribute(5, &11u32.to_ne_bytes()));
        let datagram =
            [message(RTM_NEWNEXTHOP, &single), message(RTM_NEWNEXTHOP, &blackhole), message(RTM_NEWNEXTHOP, &short)]
                .concat();
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Nexthop {
                    id: 0x0100_0007,
                    nexthop: Some(Nexthop::Single { gateway: Some(ip("fe80::1")), interface: 0x0100_000b }),
                }),
                Message::Event(Event::Nexthop { id: 0x0100_0003, nexthop: Some(Nexthop::Unusable) }),
                Message::Event(Event::Nexthop { id: 5, nexthop: Some(Nexthop::Unusable) }),
            ]
        );
    }

    /// A next hop whose neighbour the kernel has not resolved is asked for at once, then after
    /// 1, 2, 4 s...; a neighbour learned ends it. The request is `ip neigh replace ... use`'s,
    /// and the kernel's error for one is not a dump's end.
    #[test]
    fn unresolved_next_hops_are_asked_for_with_a_backoff() {
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        tables.apply(Event::Neighbor { interface: 11, ip: ip("fe80::1"), mac: Some(mac(1)) }, &mut writer);
        let both = direct(&[(Some("fe80::1"), 11), (Some("fe80::2"), 11), (Some("fe80::3"), 1)]);
        tables.apply(add(route("fd10::/48", both)), &mut writer);
        let start = std::time::Instant::now();
        let at = |seconds: u64| start + std::time::Duration::from_secs(seconds);
        // Only the one on a port with no neighbour: not the resolved one, not the one on lo.
        assert_eq!(tables.due_for_resolution(at(0), 64), vec![(11, ip("fe80::2"))]);
        assert!(tables.due_for_resolution(at(0), 64).is_empty());
        assert_eq!(tables.due_for_resolution(at(1), 64).len(), 1, "a second later");
        assert!(tables.due_for_resolution(at(2), 64).is_empty(), "then two seconds apart");
        assert_eq!(tables.due_for_resolution(at(3), 64).len(), 1);
        tables.apply(Event::Neighbor { interface: 11, ip: ip("fe80::2"), mac: Some(mac(2)) }, &mut writer);
        assert!(tables.due_for_resolution(at(100), 64).is_empty(), "resolved");
        // An object's next hop too, and at most `limit` at a time.
        let on = |gateway: &str| Some(Nexthop::Single { gateway: Some(ip(gateway)), interface: 10 });
        tables.apply(Event::Nexthop { id: 1, nexthop: on("10.0.0.7") }, &mut writer);
        tables.apply(Event::Nexthop { id: 2, nexthop: on("10.0.0.8") }, &mut writer);
        assert_eq!(tables.due_for_resolution(at(100), 1).len(), 1);
        assert_eq!(tables.due_for_resolution(at(100), 1).len(), 1);
        assert!(tables.due_for_resolution(at(100), 1).is_empty());

        let request = resolve_request(11, ip("fe80::2"), 9);
        assert_eq!(request.len(), 16 + 12 + 4 + 16);
        assert_eq!(u32::from_ne_bytes(request[0..4].try_into().unwrap()) as usize, request.len());
        assert_eq!(u16::from_ne_bytes([request[4], request[5]]), RTM_NEWNEIGH);
        assert_eq!(u16::from_ne_bytes([request[6], request[7]]), 0x501, "request, create, replace; no ack");
        assert_eq!((request[16], u32::from_ne_bytes(request[20..24].try_into().unwrap())), (10, 11));
        assert_eq!(request[26], 0x01, "NTF_USE");
        assert_eq!(&request[32..], &"fe80::2".parse::<Ipv6Addr>().unwrap().octets());
        // The kernel's error for it names RTM_NEWNEIGH: passed over, not a dump's end.
        let mut error = [(-19i32).to_ne_bytes().as_slice(), &request[..16]].concat();
        assert_eq!(decode(&message(NLMSG_ERROR, &error)), vec![Message::Other]);
        error[8..10].copy_from_slice(&RTM_GETROUTE.to_ne_bytes());
        assert_eq!(decode(&message(NLMSG_ERROR, &error)), vec![Message::Done]);
    }

    #[test]
    fn dump_requests_are_well_formed() {
        let request = dump_request(RTM_GETROUTE, 12, 7);
        assert_eq!(request.len(), 28);
        assert_eq!(u32::from_ne_bytes(request[0..4].try_into().unwrap()), 28);
        assert_eq!(u16::from_ne_bytes([request[4], request[5]]), RTM_GETROUTE);
        assert_eq!(u16::from_ne_bytes([request[6], request[7]]), 0x301, "NLM_F_REQUEST | NLM_F_DUMP");
        assert_eq!(u32::from_ne_bytes(request[8..12].try_into().unwrap()), 7);
        assert!(request[12..].iter().all(|&byte| byte == 0), "pid 0 and a zeroed family header");
    }

    /// Against the real kernel (of the namespace the tests run in, read only): the four dumps
    /// go out one after the other and end.
    #[test]
    fn sync_dumps_the_kernels_tables_in_turn() {
        let mut sync = Sync::open(Vec::new()).expect("a route netlink socket");
        let mut writer = writer();
        assert!(sync.raw_fd() > 2, "a descriptor of its own");
        assert!(!sync.synced(), "the dumps have only begun");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut changed = false;
        while !sync.synced() {
            assert!(std::time::Instant::now() < deadline, "the dumps never ended");
            changed |= sync.poll(&mut writer, std::time::Instant::now()).expect("netlink") > 0;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(sync.next_dump, DUMPS.len());
        // Every namespace has at least its loopback interface's addresses or routes to report.
        assert!(changed, "the dumps filled the tables");
    }
}
