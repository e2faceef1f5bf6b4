//! The FIB writer's next hops: one entry per definition (`Via`) in use, each with its index
//! in the snapshots' tables, the route sources that use it counted, what it resolves to, and
//! the addresses whose neighbours its resolution reads.
//!
//! Invariant: a definition has one index while it is in use, and an index one definition;
//! an index is reused only once its last user let go (the config's are pinned and never do);
//! `by_gateway` lists exactly the next hops in use whose definitions name that gateway.

use super::{NextHopId, Target, Via};
use hashbrown::HashMap;
use std::net::IpAddr;

/// Users that never let go of a next hop (the config's, and the fixed ones).
pub(super) const PINNED: u32 = u32::MAX;

/// A next hop in use: what it leads to, how many route sources use it, what it resolves to.
struct Entry {
    via: Via,
    users: u32,
    target: Target,
}

#[derive(Default)]
pub(super) struct NextHopTable {
    entries: Vec<Option<Entry>>,
    ids: HashMap<Via, NextHopId>,
    free: Vec<NextHopId>,
    /// Next hops whose resolution reads the neighbour of an address (on any port).
    by_gateway: HashMap<IpAddr, Vec<NextHopId>>,
}

impl NextHopTable {
    /// The index of `via`'s next hop if it is in use.
    pub(super) fn id(&self, via: &Via) -> Option<NextHopId> {
        self.ids.get(via).copied()
    }

    /// How many indices have been handed out, freed ones included: the snapshots' tables of
    /// next hops hold at least this many.
    #[cfg(test)]
    pub(super) fn indices(&self) -> usize {
        self.entries.len()
    }

    /// What next hop `id` is, if it is in use.
    pub(super) fn via(&self, id: NextHopId) -> Option<&Via> {
        self.entries[id as usize].as_ref().map(|entry| &entry.via)
    }

    /// One more user of `via`'s next hop, if it is in use: its index.
    pub(super) fn use_existing(&mut self, via: &Via) -> Option<NextHopId> {
        let &id = self.ids.get(via)?;
        let entry = self.entries[id as usize].as_mut().expect("an indexed next hop is in use");
        entry.users = entry.users.saturating_add(1);
        Some(id)
    }

    /// Adds `via`, not in use, resolved to `target`, with one user; returns its index (the
    /// last one freed, or a new one).
    pub(super) fn insert(&mut self, via: Via, target: Target) -> NextHopId {
        debug_assert!(!self.ids.contains_key(&via), "a definition has one index");
        let id = self.free.pop().unwrap_or(self.entries.len() as NextHopId);
        for gateway in gateways(&via) {
            self.by_gateway.entry(gateway).or_default().push(id);
        }
        self.ids.insert(via.clone(), id);
        let entry = Some(Entry { via, users: 1, target });
        if id as usize == self.entries.len() {
            self.entries.push(entry);
        } else {
            self.entries[id as usize] = entry;
        }
        id
    }

    /// Next hop `id` is never let go.
    pub(super) fn pin(&mut self, id: NextHopId) {
        self.entries[id as usize].as_mut().expect("a pinned next hop is in use").users = PINNED;
    }

    /// One user fewer of next hop `id`: when that was the last, it is freed and what it
    /// resolved to is returned (for the writer to release).
    pub(super) fn release(&mut self, id: NextHopId) -> Option<Target> {
        let entry = self.entries[id as usize].as_mut().expect("a released next hop is in use");
        if entry.users == PINNED {
            return None;
        }
        entry.users -= 1;
        if entry.users > 0 {
            return None;
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
        self.free.push(id);
        Some(entry.target)
    }

    /// Next hop `id` now resolves to `target`; returns what it resolved to before.
    pub(super) fn set_target(&mut self, id: NextHopId, target: Target) -> Target {
        let entry = self.entries[id as usize].as_mut().expect("a resolved next hop is in use");
        std::mem::replace(&mut entry.target, target)
    }

    /// The next hops in use whose definitions `matches`, in index order.
    pub(super) fn matching(&self, matches: impl Fn(&Via) -> bool) -> Vec<NextHopId> {
        let used = self.entries.iter().enumerate().filter_map(|(id, entry)| Some((id, &entry.as_ref()?.via)));
        used.filter(|(_, via)| matches(via)).map(|(id, _)| id as NextHopId).collect()
    }

    /// The next hops whose resolution reads `ip`'s neighbour.
    pub(super) fn reading(&self, ip: IpAddr) -> Vec<NextHopId> {
        self.by_gateway.get(&ip).cloned().unwrap_or_default()
    }
}

/// The addresses whose neighbours `via` reads.
fn gateways(via: &Via) -> Vec<IpAddr> {
    match via {
        Via::Gateways(ips) => ips.to_vec(),
        Via::Kernel(hops) => hops.iter().filter_map(|hop| hop.gateway).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::fib::Adjacency;
    use crate::wire::ethernet::MacAddress;

    fn gateway(last: u8) -> Via {
        Via::Gateways(vec![IpAddr::from([10, 255, 0, last])].into_boxed_slice())
    }

    fn adjacency() -> Target {
        Target::Adjacency(Adjacency { port: 1, mac: MacAddress([2, 0, 0, 0, 0, 1]) })
    }

    /// Acquires `via` as the writer does: resolved to `target` when it is new.
    fn acquire(table: &mut NextHopTable, via: Via, target: Target) -> NextHopId {
        table.use_existing(&via).unwrap_or_else(|| table.insert(via, target))
    }

    #[test]
    fn a_definition_has_one_index_while_used_and_its_index_is_reused_once_freed() {
        let mut table = NextHopTable::default();
        let first = acquire(&mut table, gateway(1), adjacency());
        let second = acquire(&mut table, gateway(3), Target::Blackhole);
        assert_ne!(first, second);
        assert_eq!(acquire(&mut table, gateway(1), Target::Blackhole), first, "the same definition, one index");
        assert_eq!(table.reading(IpAddr::from([10, 255, 0, 1])), [first]);
        assert_eq!(table.release(first), None, "a user is left");
        assert_eq!(table.release(first), Some(adjacency()), "the last user frees it");
        assert_eq!((table.via(first), table.id(&gateway(1))), (None, None));
        assert!(table.reading(IpAddr::from([10, 255, 0, 1])).is_empty());
        // Freed, its index is the next definition's.
        assert_eq!(acquire(&mut table, gateway(5), Target::Blackhole), first);
        assert_eq!(table.via(first), Some(&gateway(5)));
        assert_eq!(acquire(&mut table, gateway(7), Target::Blackhole), 2);
        assert_eq!(table.indices(), 3);
        let gateways_above_4 = |via: &Via| matches!(via, Via::Gateways(ips) if ips[0] > IpAddr::from([10, 255, 0, 4]));
        assert_eq!(table.matching(gateways_above_4), [first, 2]);
    }

    #[test]
    fn a_pinned_next_hop_is_never_freed_and_a_target_is_replaced_in_place() {
        let mut table = NextHopTable::default();
        let id = acquire(&mut table, gateway(1), Target::Blackhole);
        table.pin(id);
        for _ in 0..3 {
            assert_eq!(table.release(id), None);
        }
        assert_eq!(table.set_target(id, adjacency()), Target::Blackhole);
        assert_eq!(table.set_target(id, Target::Blackhole), adjacency());
        assert_eq!(table.via(id), Some(&gateway(1)));
    }
}
