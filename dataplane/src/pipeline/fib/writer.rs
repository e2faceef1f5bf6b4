//! The FIB's writer: the control plane's side, which applies each change (a config, a kernel
//! route, nexthop object, neighbour or address) to its working tables and derives the next
//! snapshot (see the module notes of `fib`).
//!
//! Invariant: a next hop or group lives while a route source uses it (`users`; the config's
//! are pinned), and its index is reused only once freed; the tables after any sequence of
//! changes equal those built at once from the resulting state.

use super::{host_len, masked, Adjacency, Fib, Group, KernelHops, Learned, NextHopId, Source, Target, Via, CHUNK};
use crate::config::{Config, GroupMode, RouteTarget, DEFAULT_FLOWLET_GAP_US};
use crate::pipeline::route::{CowMap, RouteTable};
use crate::wire::ethernet::MacAddress;
use crate::wire::parse::Destination;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// A next hop in use: what it leads to, how many route sources use it, what it resolves to.
struct NextHopEntry {
    via: Via,
    users: u32,
    target: Target,
}

/// The sources of one prefix: config and kernel routes (next-hop indices), the subnet of a
/// configured address (a port), and whether it is one of the switch's addresses.
#[derive(Debug, Clone, Copy, Default)]
struct Sources {
    config: Option<NextHopId>,
    kernel: Option<NextHopId>,
    connected: Option<u16>,
    config_local: bool,
    kernel_local: bool,
}

/// Users that never let go of a next hop or group (the config's, and the fixed ones).
const PINNED: u32 = u32::MAX;

/// Builds snapshots change by change: the control plane's side of the FIB.
pub struct FibWriter {
    fib: Fib,
    ports: usize,
    peer_macs: Vec<Option<MacAddress>>,
    multipath_mode: GroupMode,
    prefixes: HashMap<(IpAddr, u8), Sources>,
    entries: Vec<Option<NextHopEntry>>,
    ids: HashMap<Via, NextHopId>,
    free_ids: Vec<NextHopId>,
    /// Next hops whose resolution reads the neighbour of an address.
    by_gateway: HashMap<IpAddr, Vec<NextHopId>>,
    /// The kernel's nexthop objects: their (gateway, port) next hops, `None` for a blackhole.
    objects: HashMap<u32, Option<KernelHops>>,
    learned_neighbors: HashMap<IpAddr, Adjacency>,
    static_neighbors: HashMap<IpAddr, Adjacency>,
    group_ids: HashMap<(GroupMode, Vec<Adjacency>), u32>,
    group_users: Vec<u32>,
    free_groups: Vec<u32>,
    local_id: NextHopId,
    connected_ids: Vec<NextHopId>,
    /// Whether the tables changed since `take_changed` last said so.
    changed: bool,
}

impl FibWriter {
    /// A writer holding `config`'s tables (its routes, groups, neighbours and addresses).
    pub fn new(config: &Config) -> Self {
        let groups: Vec<Group> = config
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
                via: Vec::new(),
            })
            .collect();
        let mut group_ids = HashMap::new();
        for (index, group) in groups.iter().enumerate() {
            group_ids.entry((group.mode, group.members.clone())).or_insert(index as u32);
        }
        let mut writer = Self {
            fib: Fib {
                routes: RouteTable::empty(),
                next_hops: Vec::new(),
                neighbors_v4: CowMap::default(),
                neighbors_v6: CowMap::default(),
                groups: Arc::new(groups),
                generation: 0,
            },
            ports: config.ports.len(),
            peer_macs: config.ports.iter().map(|port| port.peer_mac).collect(),
            multipath_mode: config.control.as_ref().map_or(GroupMode::Ecmp, |control| control.multipath_mode),
            prefixes: HashMap::new(),
            entries: Vec::new(),
            ids: HashMap::new(),
            free_ids: Vec::new(),
            by_gateway: HashMap::new(),
            objects: HashMap::new(),
            learned_neighbors: HashMap::new(),
            static_neighbors: HashMap::new(),
            group_ids,
            group_users: vec![PINNED; config.groups.len()],
            free_groups: Vec::new(),
            local_id: 0,
            connected_ids: Vec::new(),
            changed: true,
        };
        writer.local_id = writer.pin(Via::Local);
        writer.connected_ids = (0..config.ports.len()).map(|port| writer.pin(Via::Connected(port as u16))).collect();
        for neighbor in config.neighbors.iter().filter(|neighbor| neighbor.port < config.ports.len()) {
            let adjacency = Adjacency { port: neighbor.port as u16, mac: neighbor.mac };
            writer.static_neighbors.insert(neighbor.ip, adjacency);
            writer.update_neighbor(neighbor.ip);
        }
        for (port, config_port) in config.ports.iter().enumerate() {
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
            let via = match &route.target {
                RouteTarget::Port(port) => Via::Peer(*port as u16),
                RouteTarget::Group(group) => Via::ConfigGroup(*group as u32),
                RouteTarget::Via(next_hops) => Via::Gateways(next_hops.clone().into_boxed_slice()),
            };
            writer.set_route(Source::Config, route.prefix.address, route.prefix.len, Some(via));
        }
        writer
    }

    /// Applies everything in `learned` (as the kernel's).
    pub fn learn(&mut self, learned: &Learned) {
        // set_neighbor ignores a neighbour on a port that does not exist.
        for neighbor in &learned.neighbors {
            self.set_neighbor(neighbor.ip, Some((neighbor.port, neighbor.mac)));
        }
        for route in &learned.routes {
            let hops: Vec<(Option<IpAddr>, u16)> = route
                .next_hops
                .iter()
                .filter(|(_, port)| *port < self.ports)
                .map(|&(gateway, port)| (gateway, port as u16))
                .collect();
            let via = match (route.next_hops.is_empty(), hops.is_empty()) {
                // A blackhole, unreachable or prohibit route.
                (true, _) => Via::Kernel(Box::new([])),
                // Next hops on no host interface: the kernel forwards (through glean).
                (false, true) => Via::Gateways(Box::new([])),
                (false, false) => Via::Kernel(hops.into()),
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

    /// Sets (or with `None` removes) `source`'s route for `address`/`len`.
    pub fn set_route(&mut self, source: Source, address: IpAddr, len: u8, via: Option<Via>) {
        let key = (masked(address, len), len);
        let id = via.map(|via| self.acquire(via));
        let sources = self.prefixes.entry(key).or_default();
        let old = match source {
            Source::Config => std::mem::replace(&mut sources.config, id),
            Source::Kernel => std::mem::replace(&mut sources.kernel, id),
        };
        self.update_prefix(key);
        if let Some(old) = old {
            self.release(old);
        }
    }

    /// Whether the kernel has `address` on a host interface (or `lo`): one of the switch's own.
    pub fn set_address(&mut self, address: IpAddr, present: bool) {
        let key = (address, host_len(address));
        if !present && !self.prefixes.contains_key(&key) {
            return;
        }
        self.prefixes.entry(key).or_default().kernel_local = present;
        self.update_prefix(key);
    }

    /// Sets (or with `None` forgets) the neighbour the kernel learned for `ip`; a static
    /// `[[neighbor]]` of the config for the same address stays in force.
    pub fn set_neighbor(&mut self, ip: IpAddr, neighbor: Option<(usize, MacAddress)>) {
        let neighbor = neighbor.filter(|(port, _)| *port < self.ports);
        let changed = match neighbor {
            Some((port, mac)) => {
                let adjacency = Adjacency { port: port as u16, mac };
                self.learned_neighbors.insert(ip, adjacency) != Some(adjacency)
            }
            None => self.learned_neighbors.remove(&ip).is_some(),
        };
        if changed {
            self.update_neighbor(ip);
        }
    }

    /// Defines (or with `None` removes) kernel nexthop object `id`: its (gateway, port) next
    /// hops, or `Some(None)` for a blackhole.
    pub fn set_object(&mut self, id: u32, object: Option<Option<KernelHops>>) {
        let changed = match object {
            Some(object) => self.objects.insert(id, object.clone()) != Some(object),
            None => self.objects.remove(&id).is_some(),
        };
        if let Some(&next_hop) = self.ids.get(&Via::Object(id)).filter(|_| changed) {
            self.reresolve(next_hop);
        }
    }

    /// Every prefix the kernel's routes cover (for a full resynchronisation).
    pub fn kernel_prefixes(&self) -> Vec<(IpAddr, u8)> {
        self.prefixes.iter().filter(|(_, sources)| sources.kernel.is_some()).map(|(key, _)| *key).collect()
    }

    /// Installs what `key`'s sources say in the route table.
    fn update_prefix(&mut self, key: (IpAddr, u8)) {
        let Some(sources) = self.prefixes.get(&key).copied() else { return };
        let effective = if sources.config_local || sources.kernel_local {
            Some(self.local_id)
        } else {
            sources.config.or(sources.kernel).or(sources.connected.map(|port| self.connected_ids[usize::from(port)]))
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
            }
        }
    }

    /// The index of the next hop for `via`, one more user of it.
    fn acquire(&mut self, via: Via) -> NextHopId {
        if let Some(&id) = self.ids.get(&via) {
            let entry = self.entries[id as usize].as_mut().expect("an indexed next hop is in use");
            entry.users = entry.users.saturating_add(1);
            return id;
        }
        let id = self.free_ids.pop().unwrap_or(self.entries.len() as NextHopId);
        for gateway in gateways(&via) {
            self.by_gateway.entry(gateway).or_default().push(id);
        }
        let target = self.resolve(&via);
        self.ids.insert(via.clone(), id);
        let entry = Some(NextHopEntry { via, users: 1, target });
        if id as usize == self.entries.len() {
            self.entries.push(entry);
        } else {
            self.entries[id as usize] = entry;
        }
        self.write_next_hop(id, target);
        id
    }

    fn pin(&mut self, via: Via) -> NextHopId {
        let id = self.acquire(via);
        self.entries[id as usize].as_mut().expect("just acquired").users = PINNED;
        id
    }

    /// One user fewer of next hop `id`; the last one frees it (and its group).
    fn release(&mut self, id: NextHopId) {
        let entry = self.entries[id as usize].as_mut().expect("a released next hop is in use");
        if entry.users == PINNED {
            return;
        }
        entry.users -= 1;
        if entry.users > 0 {
            return;
        }
        let entry = self.entries[id as usize].take().expect("in use");
        self.ids.remove(&entry.via);
        for gateway in gateways(&entry.via) {
            if let Some(users) = self.by_gateway.get_mut(&gateway) {
                users.retain(|&user| user != id);
                if users.is_empty() {
                    self.by_gateway.remove(&gateway);
                }
            }
        }
        self.release_target(entry.target);
        self.free_ids.push(id);
    }

    fn write_next_hop(&mut self, id: NextHopId, target: Target) {
        let id = id as usize;
        while self.fib.next_hops.len() <= id / CHUNK {
            self.fib.next_hops.push(Arc::new([Target::Discard; CHUNK]));
        }
        Arc::make_mut(&mut self.fib.next_hops[id / CHUNK])[id % CHUNK] = target;
        self.changed = true;
    }

    /// Resolves next hop `id` again (a neighbour or object it reads changed).
    fn reresolve(&mut self, id: NextHopId) {
        let Some(entry) = self.entries[id as usize].as_ref() else { return };
        let via = entry.via.clone();
        let target = self.resolve(&via);
        let entry = self.entries[id as usize].as_mut().expect("in use");
        let old = std::mem::replace(&mut entry.target, target);
        self.release_target(old);
        if old != target {
            self.write_next_hop(id, target);
        }
    }

    /// The neighbour in force for `ip` changed: the table and the next hops that read it follow.
    fn update_neighbor(&mut self, ip: IpAddr) {
        let adjacency = self.static_neighbors.get(&ip).or(self.learned_neighbors.get(&ip)).copied();
        let old = match (ip, adjacency) {
            (IpAddr::V4(v4), Some(adjacency)) => self.fib.neighbors_v4.insert(u32::from(v4), adjacency),
            (IpAddr::V6(v6), Some(adjacency)) => self.fib.neighbors_v6.insert(u128::from(v6), adjacency),
            (IpAddr::V4(v4), None) => self.fib.neighbors_v4.remove(&u32::from(v4)),
            (IpAddr::V6(v6), None) => self.fib.neighbors_v6.remove(&u128::from(v6)),
        };
        if old == adjacency {
            return;
        }
        self.changed = true;
        let mut users = self.by_gateway.get(&ip).cloned().unwrap_or_default();
        for (object, hops) in &self.objects {
            if hops.iter().flat_map(|hops| hops.iter()).any(|(gateway, _)| *gateway == Some(ip)) {
                users.extend(self.ids.get(&Via::Object(*object)));
            }
        }
        for id in users {
            self.reresolve(id);
        }
    }

    fn neighbor_of(&self, ip: IpAddr) -> Option<Adjacency> {
        self.fib.neighbor(match ip {
            IpAddr::V4(ip) => Destination::V4(u32::from(ip)),
            IpAddr::V6(ip) => Destination::V6(u128::from(ip)),
        })
    }

    /// What `via` leads to now; a group target counts one more user of its group.
    fn resolve(&mut self, via: &Via) -> Target {
        match via {
            Via::Discard => Target::Discard,
            Via::Local => Target::Local,
            Via::Connected(port) => Target::Connected(*port),
            Via::Peer(port) => match self.peer_macs[usize::from(*port)] {
                Some(mac) => Target::Adjacency(Adjacency { port: *port, mac }),
                None => Target::Glean,
            },
            Via::ConfigGroup(group) => Target::Group(*group),
            Via::Gateways(next_hops) => {
                let (members, via) = self.members(next_hops.iter().map(|&ip| Some(ip)));
                self.target_of(members, via)
            }
            Via::Kernel(hops) => self.resolve_kernel(hops),
            Via::Object(id) => match self.objects.get(id).cloned() {
                Some(Some(hops)) if !hops.is_empty() => self.resolve_kernel(&hops),
                // Nothing on a host interface: the kernel forwards (through glean).
                Some(Some(_)) | None => Target::Glean,
                Some(None) => Target::Discard,
            },
        }
    }

    fn resolve_kernel(&mut self, hops: &[(Option<IpAddr>, u16)]) -> Target {
        match hops {
            [] => Target::Discard,
            // A connected route: out of the port, to the destination itself.
            [(None, port)] => Target::Connected(*port),
            _ => {
                let (members, via) = self.members(hops.iter().map(|(gateway, _)| *gateway));
                self.target_of(members, via)
            }
        }
    }

    /// The distinct resolved neighbours of `gateways`, in order, and the address each was
    /// first reached by.
    fn members(&self, gateways: impl Iterator<Item = Option<IpAddr>>) -> (Vec<Adjacency>, Vec<IpAddr>) {
        let (mut members, mut via): (Vec<Adjacency>, Vec<IpAddr>) = (Vec::new(), Vec::new());
        for (ip, adjacency) in gateways.flatten().filter_map(|ip| Some((ip, self.neighbor_of(ip)?))) {
            if !members.contains(&adjacency) {
                members.push(adjacency);
                via.push(ip);
            }
        }
        (members, via)
    }

    fn target_of(&mut self, members: Vec<Adjacency>, via: Vec<IpAddr>) -> Target {
        match members.len() {
            0 => Target::Glean,
            1 => Target::Adjacency(members[0]),
            _ => Target::Group(self.acquire_group(members, via)),
        }
    }

    /// The group of `members` in the multipath mode (shared by every next hop over the same
    /// members, and its flowlet table with it), one more user of it.
    fn acquire_group(&mut self, members: Vec<Adjacency>, via: Vec<IpAddr>) -> u32 {
        let key = (self.multipath_mode, members);
        if let Some(&index) = self.group_ids.get(&key) {
            let users = &mut self.group_users[index as usize];
            *users = users.saturating_add(1);
            return index;
        }
        let group = Group { mode: key.0, flowlet_gap_us: DEFAULT_FLOWLET_GAP_US, members: key.1.clone(), via };
        self.changed = true;
        let groups = Arc::make_mut(&mut self.fib.groups);
        let index = match self.free_groups.pop() {
            Some(index) => {
                groups[index as usize] = group;
                self.group_users[index as usize] = 1;
                index
            }
            None => {
                groups.push(group);
                self.group_users.push(1);
                (groups.len() - 1) as u32
            }
        };
        self.group_ids.insert(key, index);
        index
    }

    /// A next hop stopped leading to `target`: a group it led to has one user fewer.
    fn release_target(&mut self, target: Target) {
        let Target::Group(index) = target else { return };
        let users = &mut self.group_users[index as usize];
        if *users == PINNED {
            return;
        }
        *users -= 1;
        if *users == 0 {
            // The slot stays as it was until reused: no route leads to it.
            let group = &self.fib.groups[index as usize];
            self.group_ids.remove(&(group.mode, group.members.clone()));
            self.free_groups.push(index);
        }
    }
}

/// The addresses whose neighbours `via` reads.
fn gateways(via: &Via) -> Vec<IpAddr> {
    match via {
        Via::Gateways(ips) => ips.to_vec(),
        Via::Kernel(hops) => hops.iter().filter_map(|(gateway, _)| *gateway).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ip, mac, v4, CONFIG};
    use super::super::{KernelRoute, Neighbor};
    use super::*;

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
                    state.neighbors.retain(|neighbor| neighbor.ip != ip);
                    if pick(&mut rng, 3) > 0 {
                        let neighbor =
                            Neighbor { ip, mac: mac(pick(&mut rng, 4) as u8, 0x30), port: pick(&mut rng, 3) };
                        state.neighbors.push(neighbor);
                        writer.set_neighbor(ip, Some((neighbor.port, neighbor.mac)));
                    } else {
                        writer.set_neighbor(ip, None);
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
            writer.set_route(Source::Kernel, address, 24, Some(Via::Kernel(Box::new([(Some(gateway), 1)]))));
        }
        let before = writer.snapshot(1);
        assert_eq!(before.lookup(v4("172.16.9.1")), Some(Target::Glean));
        writer.set_neighbor(gateway, Some((1, mac(0x77, 0x20))));
        let after = writer.snapshot(2);
        let adjacency = Adjacency { port: 1, mac: mac(0x77, 0x20) };
        assert_eq!(after.lookup(v4("172.16.9.1")), Some(Target::Adjacency(adjacency)));
        assert_eq!(after.lookup(v4("172.35.135.1")), Some(Target::Adjacency(adjacency)), "the last route");
        assert!(after.routes.shares_all_maps_with(&before.routes), "the routes were not touched");
        assert_eq!(before.lookup(v4("172.16.9.1")), Some(Target::Glean), "the old snapshot is as it was");
        // Removing the routes gives their next hop back; its index is used again.
        for i in 0..5_000u32 {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0xac10_0000 + (i << 8)));
            writer.set_route(Source::Kernel, address, 24, None);
        }
        assert_eq!(writer.snapshot(3).lookup(v4("172.16.9.1")), Some(Target::Group(0)), "the default route");
        let freed = writer.free_ids.len();
        assert!(freed >= 1 && !writer.ids.contains_key(&Via::Kernel(Box::new([(Some(gateway), 1)]))));
        writer.set_route(Source::Kernel, ip("172.16.0.0"), 16, Some(Via::Kernel(Box::new([(None, 2)]))));
        assert_eq!(writer.free_ids.len(), freed - 1, "a freed index is reused");
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
            writer.set_route(Source::Kernel, prefix, 24, Some(Via::Kernel(Box::new([(Some(gateway), 1)]))));
        }
        let used = writer.entries.len();
        assert!(used > 2 * CHUNK, "{used} next hops");
        assert_eq!(writer.snapshot(1).next_hops.len(), used.div_ceil(CHUNK));
    }
}
