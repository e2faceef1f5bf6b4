//! The FIB's writer: the control plane's side, which applies each change (a config, a kernel
//! route, nexthop object, neighbour or address) to its working tables and derives the next
//! snapshot (see the module notes of `fib`).
//!
//! The kernel's routes are kept as the kernel keys them: a prefix may hold several (other
//! metrics, tables or kinds, `RouteKey`), and one key several (the kernel's aliases: IPv4's
//! `append` and `prepend`, IPv6's routes it does not merge), each told apart by a tag and
//! kept in the kernel's order (`AliasAt`); the first in order is in force, and when it goes
//! the next one takes over. Neighbours are keyed by (port, address), so next hops that share an
//! address on different ports (BGP unnumbered peers on fe80::1) each resolve on their own port.
//!
//! Invariant: a next hop (`next_hops::NextHopTable`) or group lives while a route source uses
//! it (the config's are pinned), and its index is reused only once freed; the tables after
//! any sequence of changes equal those built at once from the resulting state.

use super::next_hops::{NextHopTable, PINNED};

mod resolution;
use super::{
    host_len, masked, Adjacency, Fib, Group, KernelHop, KernelHops, KernelReason, Learned, NextHopId, RouteKey,
    RouteRank, Source, Target, Via, Waiting, CHUNK,
};
use crate::config::{Config, GroupMode, RouteTarget, DEFAULT_FLOWLET_GAP_US};
use crate::pipeline::route::{CowMap, RouteTable};
use crate::wire::ethernet::MacAddress;
use hashbrown::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// The sources of one prefix: the config's route, the kernel's route in force (the kernel's
/// others for the prefix wait in `FibWriter::alternatives`), the subnet of a configured
/// address (a port), and whether it is one of the switch's addresses.
#[derive(Debug, Clone, Copy, Default)]
struct Sources {
    config: Option<NextHopId>,
    kernel: Option<KernelAlias>,
    connected: Option<u16>,
    config_local: bool,
    kernel_local: bool,
}

/// Slots a weighted group spreads over at most: weights are reduced by their greatest common
/// divisor, and scaled down to this many slots past it (each member keeping one at least), so
/// a member's share is kept to within 1/`WEIGHT_SLOTS` of the group.
pub const WEIGHT_SLOTS: u32 = 128;

/// Groups are shared by every next hop over the same members in the same mode and weights.
type GroupKey = (GroupMode, Vec<Adjacency>, Vec<u16>);

/// Gives a map's memory back once it holds under a quarter of its most since it last did
/// (hash maps never shrink by themselves, and their `capacity` falls with tombstones, so the
/// most is counted here, in `peak`): after a million routes come and go, the writer holds
/// what is left, not what was. Called after a removal.
fn shrink_if_sparse<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, peak: &mut usize) {
    const SMALL: usize = 1024;
    *peak = (*peak).max(map.len() + 1);
    if *peak > SMALL && map.len() * 4 < *peak {
        map.shrink_to(map.len() * 2);
        *peak = map.len();
    }
}

/// One of the kernel's routes for a prefix: its key, which of the key's routes it is (`tag`,
/// a digest of what the kernel tells its aliases apart by: the caller's), and its next hop.
/// (24 bytes, as the key and next hop were alone: the tag fills their padding.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KernelAlias {
    key: RouteKey,
    tag: u32,
    next_hop: NextHopId,
}

/// Where a kernel route goes among the routes of its key, as the kernel put it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AliasAt {
    /// The key's only route: any other of the key goes (the kernel said it had none).
    Only,
    /// Before the key's others (IPv4's `prepend`).
    First,
    /// After the key's others (`append`; every new IPv6 route the kernel does not merge).
    Last,
    /// In place of the key's route with this tag (a replace; or the kernel's word again on a
    /// route raceway holds, as a dump gives it), else after the key's others.
    Instead(u32),
}

/// Builds snapshots change by change: the control plane's side of the FIB.
pub struct FibWriter {
    fib: Fib,
    ports: usize,
    peer_macs: Vec<Option<MacAddress>>,
    multipath_mode: GroupMode,
    prefixes: HashMap<(IpAddr, u8), Sources>,
    /// The most `prefixes` held since it last shrank (`shrink_if_sparse`).
    prefixes_peak: usize,
    /// The kernel's routes of a prefix that are not in force (another metric, table or kind),
    /// in key order; only prefixes that have some.
    alternatives: HashMap<(IpAddr, u8), Vec<KernelAlias>>,
    /// Prefixes whose kernel route covers every prefix inside (`covers`: a rule's, an IPv6
    /// AnyIP range of the local table or source route), with its next hop; few.
    local_covers: Vec<(IpAddr, u8, NextHopId)>,
    /// The next hops in use, counted by their users (`next_hops`).
    next_hop_table: NextHopTable,
    /// Interfaces whose next hops the kernel holds dead: in every family (it is down), or in
    /// IPv4 only (`true`: it lost its last IPv4 address).
    dead: HashMap<u32, bool>,
    learned_neighbors: HashMap<(u16, IpAddr), MacAddress>,
    static_neighbors: HashMap<(u16, IpAddr), MacAddress>,
    /// The kernel's BGP peers last set (`set_kernel_peers`), kept for a reload's neighbours.
    kernel_peers: Vec<(Option<u16>, IpAddr)>,
    group_ids: HashMap<GroupKey, u32>,
    group_users: Vec<u32>,
    free_groups: Vec<u32>,
    local_id: NextHopId,
    connected_ids: Vec<NextHopId>,
    /// Whether the tables changed since `take_changed` last said so.
    changed: bool,
    /// Whether the kernel's connected and local routes stand for the config's addresses
    /// (`mirroring`).
    mirror: bool,
    /// Whether IPv4's local table comes before its main table (`set_ipv4_local_first`).
    ipv4_local_first: bool,
}

/// What a config route leads to.
fn config_via(target: &RouteTarget) -> Via {
    match target {
        RouteTarget::Port(port) => Via::Peer(*port as u16),
        RouteTarget::Group(group) => Via::ConfigGroup(*group as u32),
        RouteTarget::Via(next_hops) => Via::Gateways(next_hops.clone().into_boxed_slice()),
        RouteTarget::Blackhole => Via::Blackhole,
    }
}

impl FibWriter {
    /// A writer holding `config`'s tables (its routes, groups, neighbours and addresses).
    pub fn new(config: &Config) -> Self {
        Self::build(config, false)
    }

    /// A writer for a switch whose kernel is its control plane: the ports' subnets and the
    /// switch's own addresses are the kernel's connected and local routes as it reports them
    /// (it takes them away when a port goes down, and so does the FIB), not the config's; the
    /// config's routes, groups and neighbours stay.
    pub fn mirroring(config: &Config) -> Self {
        Self::build(config, true)
    }

    fn build(config: &Config, mirror: bool) -> Self {
        let groups: Vec<Group> = config
            .groups
            .iter()
            .map(|group| {
                // Config validation gives every member a peer_mac.
                let members: Vec<Adjacency> = group
                    .members
                    .iter()
                    .filter_map(|&port| Some(Adjacency { port: port as u16, mac: config.ports[port].peer_mac? }))
                    .collect();
                Group {
                    mode: group.mode,
                    flowlet_gap_us: group.flowlet_gap_us,
                    weights: vec![1; members.len()],
                    members,
                    via: Vec::new(),
                }
            })
            .collect();
        let mut group_ids = HashMap::new();
        for (index, group) in groups.iter().enumerate() {
            group_ids.entry((group.mode, group.members.clone(), group.weights.clone())).or_insert(index as u32);
        }
        let mut writer = Self {
            fib: Fib {
                routes: RouteTable::empty(),
                next_hops: Vec::new(),
                neighbors_v4: CowMap::default(),
                neighbors_v6: CowMap::default(),
                groups: Arc::new(groups),
                definitions: Vec::new(),
                objects: Arc::new(std::collections::HashMap::new()),
                waiting_v4: CowMap::default(),
                waiting_v6: CowMap::default(),
                control_peers: Arc::new(Vec::new()),
                generation: 0,
                group_layout: config.group_layout(),
            },
            ports: config.ports.len(),
            peer_macs: config.ports.iter().map(|port| port.peer_mac).collect(),
            multipath_mode: config.control.as_ref().map_or(GroupMode::Ecmp, |control| control.multipath_mode),
            prefixes: HashMap::new(),
            prefixes_peak: 0,
            alternatives: HashMap::new(),
            local_covers: Vec::new(),
            next_hop_table: NextHopTable::default(),
            dead: HashMap::new(),
            learned_neighbors: HashMap::new(),
            static_neighbors: HashMap::new(),
            kernel_peers: Vec::new(),
            group_ids,
            group_users: vec![PINNED; config.groups.len()],
            free_groups: Vec::new(),
            local_id: 0,
            connected_ids: Vec::new(),
            changed: true,
            mirror,
            ipv4_local_first: false,
        };
        writer.local_id = writer.pin(Via::Local);
        writer.connected_ids = (0..config.ports.len()).map(|port| writer.pin(Via::Connected(port as u16))).collect();
        for neighbor in config.neighbors.iter().filter(|neighbor| neighbor.port < config.ports.len()) {
            let key = (neighbor.port as u16, neighbor.ip);
            writer.static_neighbors.insert(key, neighbor.mac);
            writer.update_neighbor(key);
        }
        writer.set_kernel_peers(Vec::new());
        for (port, config_port) in config.ports.iter().enumerate().filter(|_| !mirror) {
            for address in &config_port.addresses {
                let key = (masked(address.address, address.len), address.len);
                writer.prefixes.entry(key).or_default().connected = Some(port as u16);
                writer.update_prefix(key);
                let key = (address.address, host_len(address.address));
                writer.prefixes.entry(key).or_default().config_local = true;
                writer.update_prefix(key);
            }
        }
        for route in &config.routes {
            writer.set_route(Source::Config, route.prefix.address, route.prefix.len, Some(config_via(&route.target)));
        }
        writer
    }

    /// Applies everything in `learned` (as the kernel's, in the main table at metric 0).
    pub fn learn(&mut self, learned: &Learned) {
        // set_neighbor ignores a neighbour on a port that does not exist.
        for neighbor in &learned.neighbors {
            self.set_neighbor(neighbor.port, neighbor.ip, Some(neighbor.mac));
        }
        for route in &learned.routes {
            let via = if route.next_hops.is_empty() {
                Via::Blackhole
            } else {
                let hops = route.next_hops.iter().map(|&(gateway, port)| {
                    let port = (port < self.ports).then_some(port as u16);
                    KernelHop { gateway, interface: 0, port, weight: 1, dead: false }
                });
                Via::Kernel(hops.collect())
            };
            self.set_route(Source::Kernel, route.address, route.len, Some(via));
        }
        for &address in &learned.addresses {
            self.set_address(address, true);
        }
    }

    /// A snapshot of the tables as they are now, numbered `generation`.
    pub fn snapshot(&mut self, generation: u64) -> Fib {
        self.fib.generation = generation;
        self.fib.clone()
    }

    /// The kernel's BGP peers last set.
    pub fn kernel_peers(&self) -> &[(Option<u16>, IpAddr)] {
        &self.kernel_peers
    }

    /// The kernel's BGP peers, each on its port (a link-local peer) or any; with the config's
    /// neighbours, the control plane's peers a snapshot holds (`Fib::is_control_peer`).
    pub fn set_kernel_peers(&mut self, kernel: Vec<(Option<u16>, IpAddr)>) {
        let mut peers = kernel.clone();
        self.kernel_peers = kernel;
        let configured = self.static_neighbors.keys().map(|&(port, ip)| (Some(port), ip));
        peers.extend(configured);
        peers.sort_unstable();
        peers.dedup();
        if *self.fib.control_peers != peers {
            self.fib.control_peers = Arc::new(peers);
            self.changed = true;
        }
    }

    /// A reload's static routes and neighbours (`[[route]]`, `[[neighbor]]`; the ports and
    /// groups are the running ones, which `config::reload::live_changes` checks): a route or
    /// neighbour gone is removed, one new or changed is set, as the kernel's changes are.
    pub fn reconfigure(&mut self, old: &Config, new: &Config) {
        for route in old.routes.iter().filter(|route| !new.routes.iter().any(|kept| kept.prefix == route.prefix)) {
            self.set_route(Source::Config, route.prefix.address, route.prefix.len, None);
        }
        for route in new.routes.iter().filter(|route| !old.routes.contains(route)) {
            self.set_route(Source::Config, route.prefix.address, route.prefix.len, Some(config_via(&route.target)));
        }
        let key = |neighbor: &crate::config::Neighbor| (neighbor.port as u16, neighbor.ip);
        for neighbor in old.neighbors.iter().filter(|neighbor| !new.neighbors.contains(neighbor)) {
            self.static_neighbors.remove(&key(neighbor));
            self.update_neighbor(key(neighbor));
        }
        let ports = self.ports;
        for neighbor in new.neighbors.iter().filter(|neighbor| neighbor.port < ports) {
            if self.static_neighbors.insert(key(neighbor), neighbor.mac) != Some(neighbor.mac) {
                self.update_neighbor(key(neighbor));
            }
        }
        let kernel = std::mem::take(&mut self.kernel_peers);
        self.set_kernel_peers(kernel);
    }

    /// Prefixes in the route table.
    pub fn routes(&self) -> usize {
        self.fib.routes()
    }

    /// Whether anything a snapshot holds changed since the last call (then: publish).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    pub fn neighbors(&self) -> usize {
        self.fib.neighbors()
    }

    /// Sets (or with `None` removes) `source`'s route for `address`/`len`: the config's, or the
    /// kernel's main-table route at metric 0.
    pub fn set_route(&mut self, source: Source, address: IpAddr, len: u8, via: Option<Via>) {
        match source {
            Source::Config => {
                let key = (masked(address, len), len);
                let id = via.map(|via| self.acquire(via));
                let old = std::mem::replace(&mut self.prefixes.entry(key).or_default().config, id);
                self.update_prefix(key);
                if let Some(old) = old {
                    self.release(old);
                }
            }
            Source::Kernel => self.set_kernel_route(address, len, RouteKey::default(), via),
        }
    }

    /// Sets (or with `None` removes) the kernel's route `key` for `address`/`len`, the key's
    /// only one (tag 0). Of a prefix's kernel routes the first in order is in force; the
    /// others wait.
    pub fn set_kernel_route(&mut self, address: IpAddr, len: u8, key: RouteKey, via: Option<Via>) {
        match via {
            Some(via) => self.add_kernel_route(address, len, key, 0, via, AliasAt::Only),
            None => self.change_kernel_routes(address, len, key, |routes| {
                let mut gone = Vec::new();
                routes.retain(|route| route.key != key || (gone.push(route.next_hop), false).1);
                gone
            }),
        }
    }

    /// Adds the kernel's route `key`, `tag` for `address`/`len` where `at` says among the
    /// routes of its key.
    pub fn add_kernel_route(&mut self, address: IpAddr, len: u8, key: RouteKey, tag: u32, via: Via, at: AliasAt) {
        let next_hop = self.acquire(via);
        let new = KernelAlias { key, tag, next_hop };
        let prefix = (masked(address, len), len);
        let sources = self.prefixes.entry(prefix).or_default();
        if !self.alternatives.contains_key(&prefix) {
            // The common case: the prefix's only kernel route, set or replaced.
            let replaces = match (sources.kernel, at) {
                (None, _) => true,
                (Some(current), AliasAt::Only) => current.key == key,
                (Some(current), AliasAt::Instead(tag)) => current.key == key && current.tag == tag,
                _ => false,
            };
            if replaces {
                let old = sources.kernel.replace(new).map(|old| old.next_hop);
                return self.kernel_routes_changed(address, prefix, key, old.into_iter().collect());
            }
        }
        self.change_kernel_routes(address, len, key, |routes| {
            let mut gone = Vec::new();
            let of_key = |route: &KernelAlias| route.key == key;
            match at {
                AliasAt::Only => {
                    routes.retain(|route| !of_key(route) || (gone.push(route.next_hop), false).1);
                    routes.push(new);
                }
                AliasAt::First => match routes.iter().position(of_key) {
                    Some(first) => routes.insert(first, new),
                    None => routes.push(new),
                },
                AliasAt::Last => routes.push(new),
                AliasAt::Instead(tag) => match routes.iter().position(|route| of_key(route) && route.tag == tag) {
                    Some(at) => gone.push(std::mem::replace(&mut routes[at], new).next_hop),
                    None => routes.push(new),
                },
            }
            gone
        });
    }

    /// Removes the kernel's route `key`, `tag` for `address`/`len` (the first with that tag);
    /// whether it held one.
    pub fn remove_kernel_route(&mut self, address: IpAddr, len: u8, key: RouteKey, tag: u32) -> bool {
        let mut found = false;
        self.change_kernel_routes(address, len, key, |routes| {
            match routes.iter().position(|route| route.key == key && route.tag == tag) {
                Some(at) => {
                    found = true;
                    vec![routes.remove(at).next_hop]
                }
                None => Vec::new(),
            }
        });
        found
    }

    /// Puts the kernel's routes of `key` for `address`/`len` in the order of their tags in
    /// `order` (a tag not in it goes last): the kernel's order when it moved them without
    /// a message saying where (IPv6's members of a merged route, `KernelTables`).
    pub fn reorder_kernel_routes(&mut self, address: IpAddr, len: u8, key: RouteKey, order: &[u32]) {
        let held: Vec<u32> = self.kernel_aliases(address, len, key).iter().map(|(tag, _)| *tag).collect();
        let mut wanted = held.clone();
        wanted.sort_by_key(|tag| order.iter().position(|placed| placed == tag).unwrap_or(usize::MAX));
        if wanted == held {
            return;
        }
        self.change_kernel_routes(address, len, key, |routes| {
            // The key's routes are contiguous: sort them in place.
            if let Some(first) = routes.iter().position(|route| route.key == key) {
                let count = routes.iter().filter(|route| route.key == key).count();
                routes[first..first + count]
                    .sort_by_key(|route| order.iter().position(|tag| *tag == route.tag).unwrap_or(usize::MAX));
            }
            Vec::new()
        });
    }

    /// Changes a prefix's kernel routes, all of them in order (`change` returns the next hops
    /// it took out), then puts the first in force and the others waiting: by key, each key's
    /// in the order `change` left them.
    fn change_kernel_routes(
        &mut self,
        address: IpAddr,
        len: u8,
        key: RouteKey,
        change: impl FnOnce(&mut Vec<KernelAlias>) -> Vec<NextHopId>,
    ) {
        let prefix = (masked(address, len), len);
        let Some(sources) = self.prefixes.get_mut(&prefix) else {
            let mut routes = Vec::new();
            let gone = change(&mut routes);
            debug_assert!(routes.is_empty() && gone.is_empty(), "only adding makes a prefix");
            return;
        };
        let mut routes: Vec<KernelAlias> =
            sources.kernel.take().into_iter().chain(self.alternatives.remove(&prefix).unwrap_or_default()).collect();
        let gone = change(&mut routes);
        // Stable: the routes of one key keep the order the kernel gave them.
        routes.sort_by_key(|route| route.key);
        let mut routes = routes.into_iter();
        sources.kernel = routes.next();
        let rest: Vec<KernelAlias> = routes.collect();
        if !rest.is_empty() {
            self.alternatives.insert(prefix, rest);
        }
        self.kernel_routes_changed(address, prefix, key, gone);
    }

    /// After a prefix's kernel routes changed: the route table, the covers, what waits behind
    /// the route in force (`show route`), and the next hops let go.
    fn kernel_routes_changed(&mut self, address: IpAddr, prefix: (IpAddr, u8), key: RouteKey, gone: Vec<NextHopId>) {
        self.note_waiting(prefix);
        self.update_prefix(prefix);
        let covering = address.is_ipv6()
            || key.rank == RouteRank::Unrepresented
            || (self.ipv4_local_first && key.rank == RouteRank::LocalTable);
        if prefix.1 < host_len(address) && covering {
            self.update_cover(prefix);
        }
        for old in gone {
            self.release(old);
        }
    }

    /// Records in the snapshot how many of the kernel's routes wait behind the one in force
    /// for `prefix` (only prefixes that have some: `Fib::waiting`).
    fn note_waiting(&mut self, prefix: (IpAddr, u8)) {
        let in_force = self.prefixes.get(&prefix).and_then(|sources| sources.kernel);
        let waiting = match (in_force, self.alternatives.get(&prefix)) {
            (Some(in_force), Some(rest)) => {
                let aliases = rest.iter().filter(|route| route.key == in_force.key).count();
                Some(Waiting {
                    metric: in_force.key.metric,
                    aliases: aliases.min(usize::from(u16::MAX)) as u16,
                    others: (rest.len() - aliases).min(usize::from(u16::MAX)) as u16,
                })
            }
            _ => None,
        };
        if self.fib.waiting(prefix.0, prefix.1) != waiting {
            self.fib.set_waiting(prefix.0, prefix.1, waiting);
            self.changed = true;
        }
    }

    /// The kernel's routes of `key` for `address`/`len` the writer holds, in order: each
    /// one's tag and what it leads to.
    pub fn kernel_aliases(&self, address: IpAddr, len: u8, key: RouteKey) -> Vec<(u32, &Via)> {
        let prefix = (masked(address, len), len);
        let in_force = self.prefixes.get(&prefix).and_then(|sources| sources.kernel);
        let waiting = self.alternatives.get(&prefix).into_iter().flatten().copied();
        in_force
            .into_iter()
            .chain(waiting)
            .filter(|route| route.key == key)
            .filter_map(|route| Some((route.tag, self.next_hop_table.via(route.next_hop)?)))
            .collect()
    }

    /// Removes every kernel route whose next hop `matches` (of the IPv4 family only, with
    /// `v4_only`): the kernel's deletions it sends no message for. Returns how many went.
    pub fn remove_kernel_routes(&mut self, v4_only: bool, matches: impl Fn(&Via) -> bool) -> usize {
        let doomed: std::collections::HashSet<NextHopId> = self.next_hop_table.matching(matches).into_iter().collect();
        if doomed.is_empty() {
            return 0;
        }
        let family = |address: &IpAddr| !v4_only || address.is_ipv4();
        let in_force = self.prefixes.iter().filter_map(|(prefix, sources)| Some((*prefix, sources.kernel?)));
        let waiting =
            self.alternatives.iter().flat_map(|(prefix, routes)| routes.iter().map(|route| (*prefix, *route)));
        let gone: Vec<((IpAddr, u8), KernelAlias)> = in_force
            .chain(waiting)
            .filter(|((address, _), route)| family(address) && doomed.contains(&route.next_hop))
            .collect();
        for &((address, len), route) in &gone {
            self.remove_kernel_route(address, len, route.key, route.tag);
        }
        gone.len()
    }

    /// Whether the kernel has `address` on a host interface (or `lo`): one of the switch's own.
    /// A mirroring writer takes the kernel's local routes instead, which come and go with the
    /// interface as the kernel's own lookups see them.
    pub fn set_address(&mut self, address: IpAddr, present: bool) {
        if self.mirror {
            return;
        }
        let key = (address, host_len(address));
        if !present && !self.prefixes.contains_key(&key) {
            return;
        }
        self.prefixes.entry(key).or_default().kernel_local = present;
        self.update_prefix(key);
    }

    /// Defines (or with `None` removes) kernel nexthop object `id`: its next hops, or
    /// `Some(None)` for a blackhole.
    pub fn set_object(&mut self, id: u32, object: Option<Option<KernelHops>>) {
        let changed = match object {
            Some(object) => {
                self.fib.objects.get(&id) != Some(&object) && {
                    Arc::make_mut(&mut self.fib.objects).insert(id, object);
                    true
                }
            }
            None => self.fib.objects.contains_key(&id) && Arc::make_mut(&mut self.fib.objects).remove(&id).is_some(),
        };
        // The snapshot holds the objects (`show route` reads them), whatever they resolve to.
        self.changed |= changed;
        if let Some(next_hop) = self.next_hop_table.id(&Via::Object(id)).filter(|_| changed) {
            self.reresolve(next_hop);
        }
    }

    /// Every prefix the kernel's routes cover, with the key and tag of each route there (for
    /// a full resynchronisation).
    pub fn kernel_routes(&self) -> Vec<(IpAddr, u8, RouteKey, u32)> {
        let in_force = self.prefixes.iter().filter_map(|(&(address, len), sources)| {
            let route = sources.kernel?;
            Some((address, len, route.key, route.tag))
        });
        let waiting = self
            .alternatives
            .iter()
            .flat_map(|(&(address, len), routes)| routes.iter().map(move |route| (address, len, route.key, route.tag)));
        in_force.chain(waiting).collect()
    }

    /// Every prefix the kernel's routes cover.
    pub fn kernel_prefixes(&self) -> Vec<(IpAddr, u8)> {
        self.prefixes.iter().filter(|(_, sources)| sources.kernel.is_some()).map(|(key, _)| *key).collect()
    }

    /// Installs what `key`'s sources say in the route table.
    fn update_prefix(&mut self, key: (IpAddr, u8)) {
        let Some(sources) = self.prefixes.get(&key).copied() else { return };
        // A prefix inside a covering route (`covers`) is that route's.
        let local_table =
            sources.kernel.filter(|route| route.key.rank == RouteRank::LocalTable).map(|route| route.next_hop);
        let effective = if sources.config_local || sources.kernel_local {
            Some(self.local_id)
        } else {
            sources
                .config
                .or(local_table)
                .or_else(|| self.covering_local(key))
                .or(sources.kernel.map(|route| route.next_hop))
                .or(sources.connected.map(|port| self.connected_ids[usize::from(port)]))
        };
        match effective {
            Some(id) => {
                if self.fib.routes.get(key.0, key.1) != Some(id) {
                    self.fib.routes.insert(key.0, key.1, id);
                    self.changed = true;
                }
            }
            None => {
                self.changed |= self.fib.routes.remove(key.0, key.1).is_some();
                self.prefixes.remove(&key);
                shrink_if_sparse(&mut self.prefixes, &mut self.prefixes_peak);
            }
        }
    }

    /// The next hop of the most specific covering route shorter than `key` that holds it.
    fn covering_local(&self, key: (IpAddr, u8)) -> Option<NextHopId> {
        self.local_covers
            .iter()
            .filter(|&&(address, len, _)| {
                len < key.1 && address.is_ipv4() == key.0.is_ipv4() && masked(key.0, len) == address
            })
            .max_by_key(|(_, len, _)| *len)
            .map(|(_, _, id)| *id)
    }

    /// The kernel looks in IPv4's local table before its main table from now on (it does once
    /// a policy rule was added, and never merges them again): its routes shorter than a host
    /// route cover what is inside them, as IPv6's do.
    pub fn set_ipv4_local_first(&mut self) {
        if std::mem::replace(&mut self.ipv4_local_first, true) {
            return;
        }
        let local: Vec<(IpAddr, u8)> = self
            .prefixes
            .iter()
            .filter(|((address, len), sources)| {
                address.is_ipv4()
                    && *len < 32
                    && sources.kernel.is_some_and(|route| route.key.rank == RouteRank::LocalTable)
            })
            .map(|(prefix, _)| *prefix)
            .collect();
        for prefix in local {
            self.update_cover(prefix);
        }
    }

    /// Whether the kernel's route `key` leading to `id` covers the prefixes inside it: a policy
    /// rule's prefix (rules come before the main table); for IPv6, its local table, which
    /// comes before its main table whatever the lengths, and its source routes (`from`), which
    /// send the lookup of whatever is below them into a subtree raceway does not model. (All
    /// go to the kernel.) IPv4's local and main tables are one trie until a rule is added
    /// (`set_ipv4_local_first`): longest prefix first, as here.
    fn covers(&self, key: RouteKey, id: NextHopId, v6: bool) -> bool {
        let via = self.next_hop_table.via(id);
        matches!(via, Some(Via::ToKernel(KernelReason::Rule)))
            || ((v6 || self.ipv4_local_first) && key.rank == RouteRank::LocalTable)
            || (v6 && matches!(via, Some(Via::ToKernel(KernelReason::Source))))
    }

    /// A prefix's kernel routes changed: if one of them covers what is inside (or no longer
    /// does), every prefix inside follows.
    fn update_cover(&mut self, prefix: (IpAddr, u8)) {
        let in_force = self.prefixes.get(&prefix).and_then(|sources| sources.kernel);
        let waiting = self.alternatives.get(&prefix).into_iter().flatten().copied();
        let v6 = prefix.0.is_ipv6();
        let cover = in_force
            .into_iter()
            .chain(waiting)
            .find(|route| self.covers(route.key, route.next_hop, v6))
            .map(|route| route.next_hop);
        let known = self.local_covers.iter().position(|&(address, len, _)| (address, len) == prefix);
        match (cover, known) {
            (Some(id), Some(index)) if self.local_covers[index].2 == id => return,
            (Some(id), Some(index)) => self.local_covers[index].2 = id,
            (Some(id), None) => self.local_covers.push((prefix.0, prefix.1, id)),
            (None, Some(index)) => {
                self.local_covers.swap_remove(index);
            }
            (None, None) => return,
        }
        let inside: Vec<(IpAddr, u8)> = self
            .prefixes
            .keys()
            .filter(|(address, len)| {
                *len > prefix.1 && address.is_ipv4() == prefix.0.is_ipv4() && masked(*address, prefix.1) == prefix.0
            })
            .copied()
            .collect();
        for key in inside {
            self.update_prefix(key);
        }
    }

    /// The index of the next hop for `via`, one more user of it.
    fn acquire(&mut self, via: Via) -> NextHopId {
        if let Some(id) = self.next_hop_table.use_existing(&via) {
            return id;
        }
        let target = self.resolve(&via);
        let definition = Arc::new(via.clone());
        let id = self.next_hop_table.insert(via, target);
        self.write_definition(id, Some(definition));
        self.write_next_hop(id, target);
        id
    }

    fn pin(&mut self, via: Via) -> NextHopId {
        let id = self.acquire(via);
        self.next_hop_table.pin(id);
        id
    }

    /// One user fewer of next hop `id`; the last one frees it (and its group).
    fn release(&mut self, id: NextHopId) {
        if let Some(target) = self.next_hop_table.release(id) {
            self.release_target(target);
            self.write_definition(id, None);
        }
    }

    fn write_definition(&mut self, id: NextHopId, via: Option<Arc<Via>>) {
        let id = id as usize;
        while self.fib.definitions.len() <= id / CHUNK {
            self.fib.definitions.push(Arc::new(std::array::from_fn(|_| None)));
        }
        Arc::make_mut(&mut self.fib.definitions[id / CHUNK])[id % CHUNK] = via;
    }

    fn write_next_hop(&mut self, id: NextHopId, target: Target) {
        let id = id as usize;
        while self.fib.next_hops.len() <= id / CHUNK {
            self.fib.next_hops.push(Arc::new([Target::Blackhole; CHUNK]));
        }
        Arc::make_mut(&mut self.fib.next_hops[id / CHUNK])[id % CHUNK] = target;
        self.changed = true;
    }
}

/// A group's slots: member indices, each member as often as its weight asks (reduced by the
/// weights' greatest common divisor, scaled to `WEIGHT_SLOTS` past it, one slot at least),
/// interleaved as smooth weighted round robin deals them (weights 3 and 1: 0 0 1 0), so a
/// round robin over the slots keeps the shares at every step.
pub fn weighted_slots(weights: &[u16]) -> Vec<u16> {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let weights: Vec<u32> = weights.iter().map(|&weight| u32::from(weight.max(1))).collect();
    let divisor = weights.iter().copied().fold(0, gcd).max(1);
    let mut shares: Vec<u32> = weights.iter().map(|weight| weight / divisor).collect();
    let total: u32 = shares.iter().sum();
    if total > WEIGHT_SLOTS {
        let sum: u32 = weights.iter().sum();
        shares = weights.iter().map(|weight| (weight * WEIGHT_SLOTS / sum).max(1)).collect();
    }
    let total: i64 = shares.iter().map(|&share| i64::from(share)).sum();
    let mut current = vec![0i64; shares.len()];
    let mut slots = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (index, share) in shares.iter().enumerate() {
            current[index] += i64::from(*share);
        }
        let best = (0..shares.len()).max_by_key(|&index| (current[index], std::cmp::Reverse(index))).expect("members");
        current[best] -= total;
        slots.push(best as u16);
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ip, mac, v4, CONFIG};
    use super::super::{KernelRoute, Neighbor};
    use super::*;

    #[test]
    fn a_map_under_a_quarter_of_its_peak_gives_its_memory_back_and_a_small_one_is_left_alone() {
        let mut map: HashMap<u32, u32> = (0..100_000).map(|key| (key, key)).collect();
        let mut peak = 0;
        let full = map.capacity();
        map.remove(&99_999);
        shrink_if_sparse(&mut map, &mut peak);
        assert_eq!(peak, 100_000);
        for key in (24_999..99_999).rev() {
            map.remove(&key);
            shrink_if_sparse(&mut map, &mut peak);
            if map.len() >= 25_000 {
                assert_eq!(peak, 100_000, "{key}: not yet under a quarter");
            }
        }
        assert_eq!(map.len(), 24_999);
        assert_eq!(peak, 24_999);
        assert!(map.capacity() <= full / 2 && map.capacity() >= 2 * 24_999, "{} of {full}", map.capacity());
        assert!((0..24_999).all(|key| map.get(&key) == Some(&key)));
        let mut small: HashMap<u32, u32> = (0..900).map(|key| (key, key)).collect();
        let (capacity, mut peak) = (small.capacity(), 0);
        small.clear();
        shrink_if_sparse(&mut small, &mut peak);
        assert_eq!(small.capacity(), capacity);
    }

    /// A key's routes (the kernel's aliases) keep the kernel's order: the first is in force,
    /// `First` goes before, `Last` after, `Instead` in place, a removal takes only the tag it
    /// names, and the snapshot says what waits behind the route in force.
    #[test]
    fn a_keys_routes_keep_the_kernels_order_and_each_goes_by_its_tag() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let prefix = ip("198.18.1.0");
        let key = RouteKey::default();
        let later = RouteKey { metric: 5, ..key };
        let in_force = |writer: &mut FibWriter| {
            let fib = writer.snapshot(1);
            let explained = fib.explain(v4("198.18.1.9")).unwrap();
            (explained.target, explained.waiting)
        };
        let kernel = |reason| Target::Kernel(reason);
        let waiting = |aliases, others| Some(Waiting { metric: 0, aliases, others });
        writer.add_kernel_route(prefix, 24, key, 1, Via::ToKernel(KernelReason::Unreachable), AliasAt::Only);
        writer.add_kernel_route(prefix, 24, key, 2, Via::ToKernel(KernelReason::Prohibit), AliasAt::Last);
        assert_eq!(
            in_force(&mut writer),
            (kernel(KernelReason::Unreachable), waiting(1, 0)),
            "appended: the first holds"
        );
        writer.add_kernel_route(prefix, 24, key, 3, Via::ToKernel(KernelReason::Throw), AliasAt::First);
        assert_eq!(in_force(&mut writer), (kernel(KernelReason::Throw), waiting(2, 0)), "prepended: in force");
        assert_eq!(writer.kernel_aliases(prefix, 24, key).iter().map(|(tag, _)| *tag).collect::<Vec<_>>(), [3, 1, 2]);
        assert!(writer.remove_kernel_route(prefix, 24, key, 1), "the middle one, by its tag");
        assert_eq!(in_force(&mut writer), (kernel(KernelReason::Throw), waiting(1, 0)));
        assert!(!writer.remove_kernel_route(prefix, 24, key, 9), "no such tag: nothing goes");
        assert!(writer.remove_kernel_route(prefix, 24, key, 3));
        assert_eq!(in_force(&mut writer), (kernel(KernelReason::Prohibit), None), "the one left, alone");
        writer.add_kernel_route(prefix, 24, later, 4, Via::Blackhole, AliasAt::Last);
        assert_eq!(in_force(&mut writer), (kernel(KernelReason::Prohibit), waiting(0, 1)), "another metric waits");
        writer.add_kernel_route(prefix, 24, key, 5, Via::ToKernel(KernelReason::Anycast), AliasAt::Instead(2));
        assert_eq!(in_force(&mut writer).0, kernel(KernelReason::Anycast), "replaced in place");
        assert_eq!(writer.kernel_aliases(prefix, 24, key).len(), 1);
        writer.add_kernel_route(prefix, 24, key, 6, Via::ToKernel(KernelReason::Throw), AliasAt::Instead(7));
        assert_eq!(writer.kernel_aliases(prefix, 24, key).iter().map(|(tag, _)| *tag).collect::<Vec<_>>(), [5, 6]);
        // `Only` clears its own key, not another's.
        writer.add_kernel_route(prefix, 24, key, 9, Via::ToKernel(KernelReason::Throw), AliasAt::Only);
        assert_eq!(writer.kernel_aliases(prefix, 24, key).iter().map(|(tag, _)| *tag).collect::<Vec<_>>(), [9]);
        assert_eq!(writer.kernel_aliases(prefix, 24, later).len(), 1, "the other metric's route stays");
        writer.set_kernel_route(prefix, 24, key, None);
        assert_eq!(in_force(&mut writer), (Target::Blackhole, None), "every route of the key went");
        writer.add_kernel_route(prefix, 24, later, 8, Via::ToKernel(KernelReason::Prohibit), AliasAt::Only);
        assert_eq!(in_force(&mut writer), (kernel(KernelReason::Prohibit), None), "the key's only route");
        assert!(writer.remove_kernel_route(prefix, 24, later, 8));
        assert!(writer.snapshot(2).explain(v4("198.18.1.9")).is_none_or(|e| e.prefix.1 != 24), "no route left");
        assert_eq!(
            writer.next_hop_table.matching(|via| matches!(via, Via::ToKernel(_) | Via::Blackhole)).len(),
            0,
            "every next hop let go"
        );
    }

    /// A prefix with one kernel route takes a shortcut when a route replaces that one: it
    /// must replace only its own key's and tag's, never another key's route of the same tag.
    #[test]
    fn a_prefixs_only_route_is_replaced_only_by_its_own_key() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let prefix = ip("198.18.9.0");
        let (key, later) = (RouteKey::default(), RouteKey { metric: 5, ..RouteKey::default() });
        let tags = |writer: &FibWriter, key| {
            writer.kernel_aliases(prefix, 24, key).iter().map(|(tag, _)| *tag).collect::<Vec<u32>>()
        };
        writer.add_kernel_route(prefix, 24, key, 1, Via::Blackhole, AliasAt::Only);
        writer.add_kernel_route(prefix, 24, later, 1, Via::ToKernel(KernelReason::Throw), AliasAt::Instead(1));
        assert_eq!((tags(&writer, key), tags(&writer, later)), (vec![1], vec![1]), "Instead: its own key's tag");
        writer.set_kernel_route(prefix, 24, later, None);
        writer.add_kernel_route(prefix, 24, later, 2, Via::ToKernel(KernelReason::Throw), AliasAt::Only);
        assert_eq!((tags(&writer, key), tags(&writer, later)), (vec![1], vec![2]), "Only: its own key");
        writer.set_kernel_route(prefix, 24, later, None);
        writer.add_kernel_route(prefix, 24, key, 3, Via::ToKernel(KernelReason::Throw), AliasAt::Instead(1));
        assert_eq!(tags(&writer, key), [3], "the only route, replaced in place");
        writer.add_kernel_route(prefix, 24, key, 4, Via::ToKernel(KernelReason::Prohibit), AliasAt::Instead(5));
        assert_eq!(tags(&writer, key), [3, 4], "no route of tag 5: after the others");
        assert!(writer.remove_kernel_route(prefix, 24, key, 4));
        assert_eq!(writer.snapshot(1).explain(v4("198.18.9.1")).unwrap().target, Target::Kernel(KernelReason::Throw));
    }

    /// A key's routes put in the order of their tags (IPv6's merged routes move behind a
    /// route the kernel reaches first): the first by that order is in force; a tag not in it
    /// goes last; another key's routes stay where they are.
    #[test]
    fn a_keys_routes_follow_an_order_of_tags() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let prefix = ip("2001:db8:8::");
        let (key, later) = (RouteKey::default(), RouteKey { metric: 9, ..RouteKey::default() });
        let lookup = |writer: &mut FibWriter| {
            writer.snapshot(1).explain(crate::pipeline::fib::ip_destination(ip("2001:db8:8::1"))).unwrap().target
        };
        writer.add_kernel_route(prefix, 48, key, 1, Via::ToKernel(KernelReason::Unreachable), AliasAt::Last);
        writer.add_kernel_route(prefix, 48, key, 5, Via::ToKernel(KernelReason::Prohibit), AliasAt::Last);
        writer.add_kernel_route(prefix, 48, key, 7, Via::ToKernel(KernelReason::Throw), AliasAt::Last);
        writer.add_kernel_route(prefix, 48, later, 2, Via::Blackhole, AliasAt::Last);
        writer.reorder_kernel_routes(prefix, 48, key, &[5, 1]);
        let tags =
            |writer: &FibWriter| writer.kernel_aliases(prefix, 48, key).iter().map(|(tag, _)| *tag).collect::<Vec<_>>();
        assert_eq!(tags(&writer), [5, 1, 7], "7 is not in the order: last");
        assert_eq!(lookup(&mut writer), Target::Kernel(KernelReason::Prohibit));
        assert_eq!(writer.kernel_aliases(prefix, 48, later).len(), 1, "the other key's route stays");
        writer.reorder_kernel_routes(prefix, 48, key, &[7, 5, 1]);
        assert_eq!(tags(&writer), [7, 5, 1]);
        assert_eq!(lookup(&mut writer), Target::Kernel(KernelReason::Throw));
    }

    /// A target with its group spelled out: group indices depend on the order groups were
    /// made, the groups do not.
    #[derive(Debug, PartialEq)]
    enum Resolved {
        Target(Target),
        Group(GroupMode, Vec<Adjacency>),
    }

    fn resolved(fib: &Fib, target: Target) -> Resolved {
        match target {
            Target::Group(index) => {
                let group = &fib.groups[index as usize];
                Resolved::Group(group.mode, group.members.clone())
            }
            other => Resolved::Target(other),
        }
    }

    fn table(fib: &Fib) -> Vec<(IpAddr, u8, Resolved)> {
        fib.dump().into_iter().map(|(address, len, target)| (address, len, resolved(fib, target))).collect()
    }

    /// Random changes (neighbours come and go and move, kernel routes over one or two next
    /// hops or none, blackholes, addresses) applied one at a time give, after every step, the
    /// tables built at once from the state they lead to.
    #[test]
    fn changes_applied_one_at_a_time_give_the_tables_built_at_once() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let mut state = Learned::default();
        let mut rng = crate::rng::Rng::new(7);
        let gateways: Vec<IpAddr> = (0..6).map(|i| IpAddr::from([10, 255, 0, i])).collect();
        for step in 0..3_000 {
            let pick = |rng: &mut crate::rng::Rng, n: usize| (rng.next_u64() % n as u64) as usize;
            match pick(&mut rng, 4) {
                0 => {
                    let ip = gateways[pick(&mut rng, gateways.len())];
                    let old_port = state.neighbors.iter().find(|neighbor| neighbor.ip == ip).map(|n| n.port);
                    state.neighbors.retain(|neighbor| neighbor.ip != ip);
                    if let Some(port) = old_port {
                        writer.set_neighbor(port, ip, None);
                    }
                    if pick(&mut rng, 3) > 0 {
                        let neighbor =
                            Neighbor { ip, mac: mac(pick(&mut rng, 4) as u8, 0x30), port: pick(&mut rng, 3) };
                        state.neighbors.push(neighbor);
                        writer.set_neighbor(neighbor.port, ip, Some(neighbor.mac));
                    }
                }
                1 | 2 => {
                    let address = IpAddr::from([172, 16, pick(&mut rng, 8) as u8, 0]);
                    let len = [16, 24][pick(&mut rng, 2)];
                    let address = masked(address, len);
                    state.routes.retain(|route| (route.address, route.len) != (address, len));
                    if pick(&mut rng, 4) == 0 {
                        writer.set_route(Source::Kernel, address, len, None);
                    } else {
                        let next_hops: Vec<(Option<IpAddr>, usize)> = match pick(&mut rng, 5) {
                            0 => Vec::new(),
                            1 => vec![(None, pick(&mut rng, 3))],
                            _ => (0..1 + pick(&mut rng, 3))
                                .map(|_| (Some(gateways[pick(&mut rng, gateways.len())]), 1 + pick(&mut rng, 2)))
                                .collect(),
                        };
                        let route = KernelRoute { address, len, next_hops };
                        writer.learn(&Learned { routes: vec![route.clone()], ..Learned::default() });
                        state.routes.push(route);
                    }
                }
                _ => {
                    let address = IpAddr::from([172, 16, pick(&mut rng, 8) as u8, 1]);
                    let present = pick(&mut rng, 2) == 0;
                    state.addresses.retain(|a| *a != address);
                    if present {
                        state.addresses.push(address);
                    }
                    writer.set_address(address, present);
                }
            }
            let incremental = writer.snapshot(step);
            let rebuilt = Fib::new(&config, &state, step);
            assert_eq!(table(&incremental), table(&rebuilt), "step {step}");
            assert_eq!(incremental.dump_neighbors(), rebuilt.dump_neighbors(), "step {step}");
            assert_eq!(incremental.routes(), rebuilt.routes());
        }
        // Groups no route leads to any more were given back: at most one per member set in use.
        let in_use: std::collections::HashSet<u32> = writer
            .snapshot(0)
            .dump()
            .iter()
            .filter_map(|(_, _, target)| if let Target::Group(g) = target { Some(*g) } else { None })
            .collect();
        let live = writer.group_users.iter().filter(|users| **users > 0).count();
        assert_eq!(live, in_use.len(), "every group with users is one a route leads to");
    }

    /// A neighbour resolving rewrites the next hop its routes share: 5,000 routes move from
    /// glean to an adjacency while the route table stays as it was, shared with the snapshot
    /// before; and that snapshot still gleans.
    #[test]
    fn a_neighbour_moves_thousands_of_routes_without_touching_them() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        let gateway = ip("10.255.0.77");
        for i in 0..5_000u32 {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0xac10_0000 + (i << 8)));
            writer.set_route(
                Source::Kernel,
                address,
                24,
                Some(Via::Kernel(Box::new([KernelHop::on_port(Some(gateway), 1)]))),
            );
        }
        let before = writer.snapshot(1);
        assert_eq!(before.lookup(v4("172.16.9.1")), Some(Target::Glean));
        writer.set_neighbor(1, gateway, Some(mac(0x77, 0x20)));
        let after = writer.snapshot(2);
        let adjacency = Adjacency { port: 1, mac: mac(0x77, 0x20) };
        assert_eq!(after.lookup(v4("172.16.9.1")), Some(Target::Adjacency(adjacency)));
        assert_eq!(after.lookup(v4("172.35.135.1")), Some(Target::Adjacency(adjacency)), "the last route");
        assert!(after.routes.shares_all_maps_with(&before.routes), "the routes were not touched");
        assert_eq!(before.lookup(v4("172.16.9.1")), Some(Target::Glean), "the old snapshot is as it was");
        // Removing the routes gives their next hop back; its index is used again.
        let over_gateway = Via::Kernel(Box::new([KernelHop::on_port(Some(gateway), 1)]));
        let index = writer.next_hop_table.id(&over_gateway).expect("in use");
        for i in 0..5_000u32 {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0xac10_0000 + (i << 8)));
            writer.set_route(Source::Kernel, address, 24, None);
        }
        assert_eq!(writer.snapshot(3).lookup(v4("172.16.9.1")), Some(Target::Group(0)), "the default route");
        assert_eq!(writer.next_hop_table.id(&over_gateway), None, "freed");
        let on_port = Via::Kernel(Box::new([KernelHop::on_port(None, 2)]));
        writer.set_route(Source::Kernel, ip("172.16.0.0"), 16, Some(on_port.clone()));
        assert_eq!(writer.next_hop_table.id(&on_port), Some(index), "a freed index is reused");
    }

    /// A reload's routes and neighbours, applied to a running writer, give the tables a
    /// writer built from the new config gives: a route gone, one added, a neighbour learned
    /// (a route over it resolves), one moved to a new MAC.
    #[test]
    fn a_reload_of_static_routes_and_neighbours_gives_the_tables_built_at_once() {
        let old = Config::parse(&CONFIG, "t.toml").unwrap();
        let edited = CONFIG
            .replace("[[route]]\nprefix = \"192.0.2.0/24\"\nvia = \"10.255.0.2\"\n", "")
            .replace("mac = \"02:00:00:00:20:01\"", "mac = \"02:00:00:00:20:99\"")
            .replace("[[neighbor]]\nip = \"10.255.0.2\"\nmac = \"02:00:00:00:21:01\"\nport = \"up1\"\n", "")
            + "[[route]]\nprefix = \"10.99.0.0/16\"\nport = \"up0\"\n\
               [[neighbor]]\nip = \"10.255.0.9\"\nmac = \"02:00:00:00:21:09\"\nport = \"up1\"\n";
        let new = Config::parse(&edited, "t.toml").unwrap();
        assert_ne!(old.routes, new.routes);
        let mut writer = FibWriter::new(&old);
        writer.set_kernel_peers(vec![(None, ip("10.250.0.1"))]);
        assert_eq!(writer.snapshot(1).lookup(v4("203.0.113.5")), Some(Target::Glean), "10.255.0.9 not known yet");
        writer.reconfigure(&old, &new);
        let reloaded = writer.snapshot(2);
        let built = FibWriter::new(&new).snapshot(2);
        for address in ["192.0.2.7", "203.0.113.5", "10.99.1.1", "10.9.0.1", "198.51.100.1", "8.8.8.8", "10.0.0.5"] {
            assert_eq!(reloaded.lookup(v4(address)), built.lookup(v4(address)), "{address}");
        }
        assert_eq!(
            reloaded.lookup(v4("203.0.113.5")),
            Some(Target::Adjacency(Adjacency { port: 2, mac: mac(0x09, 0x21) })),
            "the new neighbour resolves the route over it"
        );
        assert_eq!(reloaded.lookup(v4("192.0.2.7")), reloaded.lookup(v4("8.8.8.8")), "gone: the default route");
        assert_eq!(reloaded.neighbor(1, v4("10.255.0.0")).map(|a| a.mac), Some(mac(0x99, 0x20)), "moved");
        assert!(reloaded.is_control_peer(2, ip("10.255.0.9")), "a new neighbour is a peer");
        assert!(!reloaded.is_control_peer(2, ip("10.255.0.2")), "a neighbour gone is no peer");
        assert!(reloaded.control_peers.iter().any(|&(_, peer)| peer == ip("10.250.0.1")), "the kernel's peers stay");
    }

    #[test]
    fn weights_become_slots_in_proportion_interleaved() {
        assert_eq!(weighted_slots(&[3, 1]), vec![0, 0, 1, 0]);
        let count = |slots: &[u16], member: u16| slots.iter().filter(|&&slot| slot == member).count();
        // Reduced by the greatest common divisor.
        assert_eq!(weighted_slots(&[2, 2]), vec![0, 1]);
        let slots = weighted_slots(&[1, 9]);
        assert_eq!((slots.len(), count(&slots, 0), count(&slots, 1)), (10, 1, 9));
        // Past WEIGHT_SLOTS, scaled down with every member keeping a slot.
        let slots = weighted_slots(&[256, 255, 1]);
        assert!(slots.len() as u32 <= WEIGHT_SLOTS + 2, "{}", slots.len());
        assert_eq!((count(&slots, 0), count(&slots, 1), count(&slots, 2)), (64, 63, 1));
        // A weight of zero (not the kernel's) counts as one.
        assert_eq!(weighted_slots(&[0, 1]), vec![0, 1]);
    }

    /// Next hops live in chunks of CHUNK shared between snapshots: as many chunks as the
    /// indices need, no more.
    #[test]
    fn next_hops_take_as_many_chunks_as_their_indices_need() {
        let config = Config::parse(&CONFIG, "t.toml").unwrap();
        let mut writer = FibWriter::new(&config);
        for i in 0..2 * CHUNK as u32 + 5 {
            let prefix = IpAddr::V4(std::net::Ipv4Addr::from(0xac10_0000 + (i << 8)));
            let gateway = IpAddr::V4(std::net::Ipv4Addr::from(0x0aff_1000 + i));
            writer.set_route(
                Source::Kernel,
                prefix,
                24,
                Some(Via::Kernel(Box::new([KernelHop::on_port(Some(gateway), 1)]))),
            );
        }
        let used = writer.next_hop_table.indices();
        assert!(used > 2 * CHUNK, "{used} next hops");
        assert_eq!(writer.snapshot(1).next_hops.len(), used.div_ceil(CHUNK));
    }
}
