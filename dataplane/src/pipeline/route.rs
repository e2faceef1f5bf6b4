//! Longest-prefix-match routing for IPv4 and IPv6, and the exact-match maps beside it, all
//! updated copy-on-write so that a new FIB generation costs what changed, not the table.
//!
//! A table is one hash map per prefix length present, probed from the longest length down:
//! a leaf's table has few distinct lengths (/32 hosts, /24 racks, /0 default), so a lookup is a
//! handful of hash probes. This is VPP's IPv6 FIB (a hash table per length); a multibit trie
//! (VPP's IPv4 mtrie, DPDK's DIR-24-8) would bound the probes of a table with many lengths,
//! but the per-worker cache in front of it (`resolve.rs`) answers most frames without a probe.
//!
//! Each length's entries live behind `Arc`s: one map while small, `SHARDS` maps by hash once
//! large. A snapshot clones the table (a pointer per length); the writer's next change copies
//! only the map (or the one shard) it touches if a snapshot still shares it (`Arc::make_mut`),
//! and changes it in place otherwise. So a change to a million-route table copies one shard of
//! about a thousand entries, and readers of an older snapshot keep exactly what they had.
//!
//! Invariant: `lookup` returns the target of the longest prefix containing the address, or
//! `None`; keys are stored masked to their length, so host bits never affect a match; a clone
//! never sees a change made to the table it was cloned from, nor the other way round.

use crate::wire::parse::Destination;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

/// A multiply-rotate hasher for the integer keys of the route maps. The keys are addresses
/// the switch's operator configured, not attacker-chosen map contents, so no keyed hash is
/// needed; hashbrown's default (aHash) measured ~20 cycles of a 190-cycle frame in `perf`.
#[derive(Default, Clone, Copy)]
pub struct AddressHasher(u64);

impl Hasher for AddressHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(crate::rng::GOLDEN_GAMMA);
    }

    #[inline]
    fn write_u128(&mut self, value: u128) {
        self.write_u64(value as u64);
        self.write_u64((value >> 64) as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and a tag from the top 7: the multiply
        // leaves the best-mixed bits on top, so rotate some of them down.
        self.0.rotate_left(26)
    }
}

/// A hash map keyed by addresses (route prefixes, neighbour IPs), with the cheap hasher above.
pub type AddressMap<K, V> = hashbrown::HashMap<K, V, BuildHasherDefault<AddressHasher>>;

/// A map that holds more than this many entries is split into shards.
const FLAT_MAX: usize = 2048;
/// Shards of a large map: a change copies 1/1024 of it (1,000 entries at a million).
const SHARD_BITS: u32 = 10;
const SHARDS: usize = 1 << SHARD_BITS;

/// An exact-match map whose snapshots share everything a change did not touch.
#[derive(Clone)]
pub enum CowMap<K, V> {
    Flat(Arc<AddressMap<K, V>>),
    /// `SHARDS` maps, a key in the one its hash's top bits pick; `usize` counts the entries.
    Sharded(Arc<Vec<Arc<AddressMap<K, V>>>>, usize),
}

impl<K, V> Default for CowMap<K, V> {
    fn default() -> Self {
        Self::Flat(Arc::new(AddressMap::default()))
    }
}

#[inline(always)]
fn shard_of<K: Hash>(key: &K) -> usize {
    let hash = BuildHasherDefault::<AddressHasher>::default().hash_one(key);
    // `finish` rotated the best bits down by 26: take the ones just below them.
    ((hash >> 16) as usize) & (SHARDS - 1)
}

impl<K: Hash + Eq + Copy, V: Copy> CowMap<K, V> {
    #[inline(always)]
    pub fn get(&self, key: &K) -> Option<&V> {
        match self {
            Self::Flat(map) => map.get(key),
            Self::Sharded(shards, _) => shards[shard_of(key)].get(key),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Flat(map) => map.len(),
            Self::Sharded(_, len) => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds or replaces `key`; returns what it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let old = match self {
            Self::Flat(map) => Arc::make_mut(map).insert(key, value),
            Self::Sharded(shards, len) => {
                let shard = &mut Arc::make_mut(shards)[shard_of(&key)];
                let old = Arc::make_mut(shard).insert(key, value);
                *len += usize::from(old.is_none());
                old
            }
        };
        if let Self::Flat(map) = self {
            if map.len() > FLAT_MAX {
                // Once, at the threshold: from here a change copies one shard.
                let mut shards: Vec<AddressMap<K, V>> = (0..SHARDS).map(|_| AddressMap::default()).collect();
                for (key, value) in map.iter() {
                    shards[shard_of(key)].insert(*key, *value);
                }
                let len = map.len();
                *self = Self::Sharded(Arc::new(shards.into_iter().map(Arc::new).collect()), len);
            }
        }
        old
    }

    /// Removes `key`; returns its value. (A sharded map stays sharded: shrinking back would
    /// copy the whole map in one change.)
    pub fn remove(&mut self, key: &K) -> Option<V> {
        match self {
            Self::Flat(map) => {
                if !map.contains_key(key) {
                    return None;
                }
                Arc::make_mut(map).remove(key)
            }
            Self::Sharded(shards, len) => {
                if !shards[shard_of(key)].contains_key(key) {
                    return None;
                }
                let shard = &mut Arc::make_mut(shards)[shard_of(key)];
                let old = Arc::make_mut(shard).remove(key);
                *len -= usize::from(old.is_some());
                old
            }
        }
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&K, &V)> + '_> {
        match self {
            Self::Flat(map) => Box::new(map.iter()),
            Self::Sharded(shards, _) => Box::new(shards.iter().flat_map(|shard| shard.iter())),
        }
    }
}

/// Prefixes to targets of type `T` (a next-hop index, or any `Copy` value in tests and benches).
#[derive(Clone)]
pub struct RouteTable<T> {
    /// (length, masked prefix -> target), longest length first; no empty lengths.
    v4: Vec<(u8, CowMap<u32, T>)>,
    v6: Vec<(u8, CowMap<u128, T>)>,
}

fn mask_v4(address: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        address & (u32::MAX << (32 - u32::from(len)))
    }
}

fn mask_v6(address: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        address & (u128::MAX << (128 - u32::from(len)))
    }
}

/// Adds a masked prefix to the map of its length, keeping lengths longest first.
fn insert<K: Hash + Eq + Copy, T: Copy>(
    lengths: &mut Vec<(u8, CowMap<K, T>)>,
    len: u8,
    key: K,
    target: T,
) -> Option<T> {
    let index = match lengths.iter().position(|(l, _)| *l == len) {
        Some(index) => index,
        None => {
            let index = lengths.iter().position(|(l, _)| *l < len).unwrap_or(lengths.len());
            lengths.insert(index, (len, CowMap::default()));
            index
        }
    };
    lengths[index].1.insert(key, target)
}

/// Removes a masked prefix; a length left empty is no longer probed.
fn remove<K: Hash + Eq + Copy, T: Copy>(lengths: &mut Vec<(u8, CowMap<K, T>)>, len: u8, key: K) -> Option<T> {
    let index = lengths.iter().position(|(l, _)| *l == len)?;
    let old = lengths[index].1.remove(&key);
    if lengths[index].1.is_empty() {
        lengths.remove(index);
    }
    old
}

fn exact<K: Hash + Eq + Copy, T: Copy>(lengths: &[(u8, CowMap<K, T>)], len: u8, key: K) -> Option<T> {
    lengths.iter().find(|(l, _)| *l == len).and_then(|(_, map)| map.get(&key).copied())
}

impl<T: Copy> RouteTable<T> {
    pub fn empty() -> Self {
        Self { v4: Vec::new(), v6: Vec::new() }
    }

    /// Adds (or replaces) the route for `address`/`len`; host bits are masked off. Returns the
    /// target it replaced.
    pub fn insert(&mut self, address: IpAddr, len: u8, target: T) -> Option<T> {
        match address {
            IpAddr::V4(address) => insert(&mut self.v4, len, mask_v4(u32::from(address), len), target),
            IpAddr::V6(address) => insert(&mut self.v6, len, mask_v6(u128::from(address), len), target),
        }
    }

    /// Removes the route for `address`/`len`; returns its target.
    pub fn remove(&mut self, address: IpAddr, len: u8) -> Option<T> {
        match address {
            IpAddr::V4(address) => remove(&mut self.v4, len, mask_v4(u32::from(address), len)),
            IpAddr::V6(address) => remove(&mut self.v6, len, mask_v6(u128::from(address), len)),
        }
    }

    /// The target of exactly `address`/`len`, if that prefix is in the table.
    pub fn get(&self, address: IpAddr, len: u8) -> Option<T> {
        match address {
            IpAddr::V4(address) => exact(&self.v4, len, mask_v4(u32::from(address), len)),
            IpAddr::V6(address) => exact(&self.v6, len, mask_v6(u128::from(address), len)),
        }
    }

    /// Prefixes in the table, both families.
    pub fn len(&self) -> usize {
        self.v4.iter().map(|(_, map)| map.len()).sum::<usize>()
            + self.v6.iter().map(|(_, map)| map.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    #[inline]
    pub fn lookup(&self, destination: Destination) -> Option<T> {
        match destination {
            Destination::V4(address) => self.v4.iter().find_map(|(len, map)| map.get(&mask_v4(address, *len)).copied()),
            Destination::V6(address) => self.v6.iter().find_map(|(len, map)| map.get(&mask_v6(address, *len)).copied()),
        }
    }

    /// Whether every map of `other` is the one this table holds (nothing was copied).
    #[cfg(test)]
    pub(crate) fn shares_all_maps_with(&self, other: &Self) -> bool {
        fn same<K, T>(a: &[(u8, CowMap<K, T>)], b: &[(u8, CowMap<K, T>)]) -> bool {
            a.len() == b.len()
                && a.iter().zip(b).all(|((la, a), (lb, b))| {
                    la == lb
                        && match (a, b) {
                            (CowMap::Flat(a), CowMap::Flat(b)) => Arc::ptr_eq(a, b),
                            (CowMap::Sharded(a, _), CowMap::Sharded(b, _)) => Arc::ptr_eq(a, b),
                            _ => false,
                        }
                })
        }
        same(&self.v4, &other.v4) && same(&self.v6, &other.v6)
    }

    /// Every (prefix, length, target), in no particular order.
    pub fn routes(&self) -> impl Iterator<Item = (IpAddr, u8, T)> + '_ {
        let v4 = self.v4.iter().flat_map(|(len, map)| {
            map.iter().map(move |(key, target)| (IpAddr::V4(std::net::Ipv4Addr::from(*key)), *len, *target))
        });
        let v6 = self.v6.iter().flat_map(|(len, map)| {
            map.iter().map(move |(key, target)| (IpAddr::V6(std::net::Ipv6Addr::from(*key)), *len, *target))
        });
        v4.chain(v6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Prefix;

    /// Targets are port numbers here: the table does not care what they are.
    fn table(routes: &[(&str, u8)]) -> RouteTable<u8> {
        let mut table = RouteTable::empty();
        for (text, target) in routes {
            let prefix = Prefix::parse(text).unwrap();
            table.insert(prefix.address, prefix.len, *target);
        }
        table
    }

    fn v4(text: &str) -> Destination {
        Destination::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn v6(text: &str) -> Destination {
        Destination::V6(u128::from(text.parse::<std::net::Ipv6Addr>().unwrap()))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn inserted_routes_are_masked_and_replace_their_prefix() {
        let mut routes: RouteTable<u8> = RouteTable::empty();
        assert_eq!(routes.insert(ip("10.0.1.7"), 24, 1), None);
        assert_eq!(routes.insert(ip("10.0.1.0"), 24, 2), Some(1));
        routes.insert(ip("10.0.1.7"), 32, 3);
        assert_eq!(routes.lookup(v4("10.0.1.9")), Some(2));
        assert_eq!(routes.lookup(v4("10.0.1.7")), Some(3));
        assert_eq!(routes.lookup(v4("10.0.2.7")), None);
        assert_eq!(routes.get(ip("10.0.1.99"), 24), Some(2), "host bits masked");
        assert_eq!(routes.get(ip("10.0.1.0"), 25), None);
        assert_eq!(routes.len(), 2);
    }

    #[test]
    fn longest_prefix_wins() {
        let routes = table(&[("0.0.0.0/0", 100), ("10.0.0.0/8", 1), ("10.0.1.0/24", 2), ("10.0.1.7/32", 3)]);
        assert_eq!(routes.lookup(v4("10.0.1.7")), Some(3));
        assert_eq!(routes.lookup(v4("10.0.1.8")), Some(2));
        assert_eq!(routes.lookup(v4("10.9.9.9")), Some(1));
        assert_eq!(routes.lookup(v4("192.0.2.1")), Some(100));
    }

    #[test]
    fn no_default_means_no_route() {
        let routes = table(&[("10.0.0.0/24", 0), ("2001:db8::/32", 1)]);
        assert_eq!(routes.lookup(v4("10.0.1.1")), None);
        assert_eq!(routes.lookup(v6("2001:db9::1")), None);
    }

    #[test]
    fn ipv6_longest_prefix_wins() {
        let routes = table(&[("::/0", 0), ("2001:db8::/32", 1), ("2001:db8:0:1::/64", 2), ("2001:db8:0:1::42/128", 3)]);
        assert_eq!(routes.lookup(v6("2001:db8:0:1::42")), Some(3));
        assert_eq!(routes.lookup(v6("2001:db8:0:1::43")), Some(2));
        assert_eq!(routes.lookup(v6("2001:db8:ffff::1")), Some(1));
        assert_eq!(routes.lookup(v6("fe80::1")), Some(0));
        // Families never match each other.
        assert_eq!(routes.lookup(v4("10.0.0.1")), None);
    }

    #[test]
    fn removing_a_prefix_uncovers_the_shorter_one_and_drops_an_empty_length() {
        let mut routes = table(&[("0.0.0.0/0", 100), ("10.0.0.0/8", 1), ("10.0.1.0/24", 2), ("::/0", 7)]);
        assert_eq!(routes.remove(ip("10.0.1.9"), 24), Some(2), "host bits masked");
        assert_eq!(routes.remove(ip("10.0.1.0"), 24), None, "already gone");
        assert_eq!(routes.lookup(v4("10.0.1.8")), Some(1));
        assert_eq!(routes.v4.len(), 2, "no /24 left to probe");
        assert_eq!(routes.remove(ip("10.0.0.0"), 8), Some(1));
        assert_eq!(routes.lookup(v4("10.0.1.8")), Some(100));
        assert_eq!(routes.remove(ip("::"), 0), Some(7));
        assert_eq!(routes.lookup(v6("fe80::1")), None);
        assert_eq!(routes.len(), 1);
        assert!(!routes.is_empty());
        assert_eq!(routes.routes().collect::<Vec<_>>(), vec![(ip("0.0.0.0"), 0, 100)]);
    }

    /// A clone is a snapshot: changes on either side, small maps and sharded ones, never show
    /// on the other, and unchanged shards stay shared.
    #[test]
    fn a_clone_keeps_what_it_had_while_the_original_changes() {
        let mut routes: RouteTable<u32> = RouteTable::empty();
        let count = (FLAT_MAX as u32) * 3;
        for i in 0..count {
            routes.insert(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8))), 24, i);
        }
        routes.insert(ip("10.0.0.0"), 8, u32::MAX);
        assert!(matches!(routes.v4[0].1, CowMap::Sharded(..)), "{count} /24s are sharded");
        assert!(matches!(routes.v4[1].1, CowMap::Flat(..)), "one /8 is not");
        let snapshot = routes.clone();
        routes.remove(ip("10.0.5.0"), 24);
        routes.insert(ip("10.0.6.0"), 24, 66);
        routes.insert(ip("10.0.0.0"), 8, 88);
        routes.insert(ip("192.168.0.0"), 16, 16);
        assert_eq!(snapshot.lookup(v4("10.0.5.1")), Some(5));
        assert_eq!(snapshot.lookup(v4("10.0.6.1")), Some(6));
        assert_eq!(snapshot.lookup(v4("10.255.255.1")), Some(u32::MAX));
        assert_eq!(snapshot.lookup(v4("192.168.0.1")), None);
        assert_eq!(snapshot.len(), count as usize + 1);
        assert_eq!(routes.lookup(v4("10.0.5.1")), Some(88), "the /8 under the removed /24");
        assert_eq!(routes.lookup(v4("10.0.6.1")), Some(66));
        assert_eq!(routes.lookup(v4("192.168.0.1")), Some(16));
        assert_eq!(routes.len(), count as usize + 1);
        // Only the shards the changes touched were copied.
        let (CowMap::Sharded(mine, _), CowMap::Sharded(theirs, _)) = (&routes.v4[0].1, &snapshot.v4[0].1) else {
            panic!("sharded")
        };
        let copied = mine.iter().zip(theirs.iter()).filter(|(a, b)| !Arc::ptr_eq(a, b)).count();
        assert!((1..=2).contains(&copied), "{copied} shards copied for two changes");
        // Every entry is still found after sharding, and each shard holds a share.
        assert_eq!(snapshot.routes().filter(|(_, len, _)| *len == 24).count(), count as usize);
        assert!(mine.iter().all(|shard| shard.len() < 3 * count as usize / SHARDS + 16), "shards are balanced");
    }

    #[test]
    fn a_sharded_map_removes_and_counts() {
        let mut map: CowMap<u128, u8> = CowMap::default();
        for key in 0..=FLAT_MAX as u128 {
            map.insert(key << 64, 1);
        }
        assert!(matches!(map, CowMap::Sharded(..)));
        assert_eq!(map.len(), FLAT_MAX + 1);
        assert_eq!(map.insert(0, 2), Some(1));
        assert_eq!(map.remove(&(7 << 64)), Some(1));
        assert_eq!(map.remove(&(7 << 64)), None);
        assert_eq!(map.remove(&12345), None);
        assert_eq!(map.len(), FLAT_MAX);
        assert_eq!(map.get(&0), Some(&2));
        assert_eq!(map.iter().count(), FLAT_MAX);
    }
}
