//! Resolving the FIB writer's next hops (`FibWriter`): a definition to what it leads to now,
//! through the neighbours (learned and static, keyed by port and address), the interfaces the
//! kernel holds dead, and the groups of several members (shared by every next hop over the
//! same members, mode and weights); and resolving again what reads a neighbour, object or
//! interface that changed.
//!
//! Invariant: a group lives while a next hop resolves to it (the config's are pinned), and its
//! index is reused only once freed; a next hop's target is what resolving its definition now
//! gives.

use super::*;

impl FibWriter {
    /// Sets (or with `None` forgets) the neighbour the kernel learned for `ip` on `port`; a
    /// static `[[neighbor]]` of the config for the same port and address stays in force.
    pub fn set_neighbor(&mut self, port: usize, ip: IpAddr, mac: Option<MacAddress>) {
        if port >= self.ports {
            return;
        }
        let key = (port as u16, ip);
        let changed = match mac {
            Some(mac) => self.learned_neighbors.insert(key, mac) != Some(mac),
            None => self.learned_neighbors.remove(&key).is_some(),
        };
        if changed {
            self.update_neighbor(key);
        }
    }

    /// Marks `interface`'s next hops dead (`Some(v4_only)`) or alive (`None`), as the kernel
    /// does when it goes down or up or loses its IPv4 addresses: multipath routes spread over
    /// their other next hops meanwhile.
    pub fn set_dead_interface(&mut self, interface: u32, dead: Option<bool>) {
        let changed = match dead {
            Some(v4_only) => self.dead.insert(interface, v4_only) != Some(v4_only),
            None => self.dead.remove(&interface).is_some(),
        };
        if !changed {
            return;
        }
        let on_it = |hops: &[KernelHop]| hops.iter().any(|hop| hop.interface == interface);
        let users = self.next_hop_table.matching(|via| matches!(via, Via::Kernel(hops) if on_it(hops)));
        for id in users {
            self.reresolve(id);
        }
    }

    /// Whether the kernel uses `hop` (its interface is not dead for its family).
    pub(super) fn alive(&self, hop: &KernelHop) -> bool {
        match self.dead.get(&hop.interface) {
            None => true,
            Some(false) => false,
            Some(true) => !hop.gateway.is_some_and(|gateway| gateway.is_ipv4()),
        }
    }

    /// Resolves next hop `id` again (a neighbour or object it reads changed).
    pub(super) fn reresolve(&mut self, id: NextHopId) {
        let Some(via) = self.next_hop_table.via(id).cloned() else { return };
        let target = self.resolve(&via);
        let old = self.next_hop_table.set_target(id, target);
        self.release_target(old);
        if old != target {
            self.write_next_hop(id, target);
        }
    }

    /// The neighbour in force for (port, ip) changed: the table and the next hops that read
    /// its address follow.
    pub(super) fn update_neighbor(&mut self, key: (u16, IpAddr)) {
        let (port, ip) = key;
        let mac = self.static_neighbors.get(&key).or(self.learned_neighbors.get(&key)).copied();
        let old = match (ip, mac) {
            (IpAddr::V4(v4), Some(mac)) => self.fib.neighbors_v4.insert((port, u32::from(v4)), mac),
            (IpAddr::V6(v6), Some(mac)) => self.fib.neighbors_v6.insert((port, u128::from(v6)), mac),
            (IpAddr::V4(v4), None) => self.fib.neighbors_v4.remove(&(port, u32::from(v4))),
            (IpAddr::V6(v6), None) => self.fib.neighbors_v6.remove(&(port, u128::from(v6))),
        };
        if old == mac {
            return;
        }
        self.changed = true;
        let mut users = self.next_hop_table.reading(ip);
        for (object, hops) in self.fib.objects.iter() {
            if hops.iter().flat_map(|hops| hops.iter()).any(|hop| hop.gateway == Some(ip)) {
                users.extend(self.next_hop_table.id(&Via::Object(*object)));
            }
        }
        for id in users {
            self.reresolve(id);
        }
    }

    /// The neighbour of `ip` on `port`, if resolved.
    pub(super) fn neighbor_on(&self, port: u16, ip: IpAddr) -> Option<Adjacency> {
        let mac = match ip {
            IpAddr::V4(ip) => self.fib.neighbors_v4.get(&(port, u32::from(ip))),
            IpAddr::V6(ip) => self.fib.neighbors_v6.get(&(port, u128::from(ip))),
        };
        mac.map(|&mac| Adjacency { port, mac })
    }

    /// What `via` leads to now; a group target counts one more user of its group.
    pub(super) fn resolve(&mut self, via: &Via) -> Target {
        match via {
            Via::Blackhole => Target::Blackhole,
            Via::Local => Target::Local,
            Via::Connected(port) => Target::Connected(*port),
            Via::Peer(port) => match self.peer_macs[usize::from(*port)] {
                Some(mac) => Target::Adjacency(Adjacency { port: *port, mac }),
                None => Target::Glean,
            },
            Via::ConfigGroup(group) => Target::Group(*group),
            Via::Gateways(next_hops) => {
                // A config next hop's neighbour may be on any port: a static `[[neighbor]]` of
                // the config first, then the first port that has one.
                let members = next_hops.iter().filter_map(|&ip| {
                    let ports = 0..self.ports as u16;
                    let configured = ports.clone().find(|&port| self.static_neighbors.contains_key(&(port, ip)));
                    let adjacency = match configured {
                        Some(port) => self.neighbor_on(port, ip),
                        None => ports.into_iter().find_map(|port| self.neighbor_on(port, ip)),
                    }?;
                    Some((adjacency, ip, 1))
                });
                let members: Vec<(Adjacency, IpAddr, u16)> = members.collect();
                self.target_of(members)
            }
            Via::Kernel(hops) => self.resolve_kernel(hops, true),
            // The kernel deletes an object rather than hold it dead.
            Via::Object(id) => match self.fib.objects.get(id).cloned() {
                Some(Some(hops)) => self.resolve_kernel(&hops, false),
                // Not (or no longer) known: the kernel forwards (through glean).
                None => Target::Glean,
                Some(None) => Target::Blackhole,
            },
            Via::ToKernel(reason) => Target::Kernel(*reason),
        }
    }

    /// What the kernel's next hops `hops` lead to (those on dead interfaces left out when
    /// `dead_apply`).
    pub(super) fn resolve_kernel(&mut self, hops: &[KernelHop], dead_apply: bool) -> Target {
        let alive: Vec<KernelHop>;
        let hops = if (self.dead.is_empty() || !dead_apply) && !hops.iter().any(|hop| hop.dead) {
            hops
        } else {
            alive = hops.iter().filter(|hop| !hop.dead && (!dead_apply || self.alive(hop))).copied().collect();
            &alive
        };
        if hops.iter().any(|hop| hop.port.is_none()) {
            // The kernel spreads over an interface the data plane cannot reach: it forwards
            // all of the route's traffic, so that each flow goes where the kernel sends it.
            return Target::Kernel(KernelReason::NotAPort);
        }
        match hops {
            // A group none of whose members the writer knows: the kernel forwards.
            [] => Target::Glean,
            // A connected route: out of the port, to the destination itself.
            [KernelHop { gateway: None, port: Some(port), .. }] => Target::Connected(*port),
            _ => {
                // A gatewayless member of a multipath route has no one neighbour: not a member.
                let members = hops.iter().filter_map(|hop| {
                    let (gateway, port) = (hop.gateway?, hop.port?);
                    Some((self.neighbor_on(port, gateway)?, gateway, hop.weight))
                });
                let members: Vec<(Adjacency, IpAddr, u16)> = members.collect();
                self.target_of(members)
            }
        }
    }

    /// The target of the resolved `members` (adjacency, the address it was reached by,
    /// weight): none is glean, one an adjacency, more a group, each distinct adjacency once
    /// with the weights of its next hops summed.
    pub(super) fn target_of(&mut self, resolved: Vec<(Adjacency, IpAddr, u16)>) -> Target {
        let (mut members, mut via, mut weights): (Vec<Adjacency>, Vec<IpAddr>, Vec<u16>) =
            (Vec::new(), Vec::new(), Vec::new());
        for (adjacency, ip, weight) in resolved {
            match members.iter().position(|member| *member == adjacency) {
                Some(index) => weights[index] = weights[index].saturating_add(weight),
                None => {
                    members.push(adjacency);
                    via.push(ip);
                    weights.push(weight);
                }
            }
        }
        match members.len() {
            0 => Target::Glean,
            1 => Target::Adjacency(members[0]),
            _ => Target::Group(self.acquire_group(members, via, weights)),
        }
    }

    /// The group of `members` with `weights` in the multipath mode (shared by every next hop
    /// over the same members, and its flowlet table with it), one more user of it.
    pub(super) fn acquire_group(&mut self, members: Vec<Adjacency>, via: Vec<IpAddr>, weights: Vec<u16>) -> u32 {
        let key = (self.multipath_mode, members, weights);
        if let Some(&index) = self.group_ids.get(&key) {
            let users = &mut self.group_users[index as usize];
            *users = users.saturating_add(1);
            return index;
        }
        let group = Group {
            mode: key.0,
            flowlet_gap_us: DEFAULT_FLOWLET_GAP_US,
            members: key.1.clone(),
            weights: key.2.clone(),
            via,
        };
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
    pub(super) fn release_target(&mut self, target: Target) {
        let Target::Group(index) = target else { return };
        let users = &mut self.group_users[index as usize];
        if *users == PINNED {
            return;
        }
        *users -= 1;
        if *users == 0 {
            // The slot stays as it was until reused: no route leads to it.
            let group = &self.fib.groups[index as usize];
            self.group_ids.remove(&(group.mode, group.members.clone(), group.weights.clone()));
            self.free_groups.push(index);
        }
    }
}
