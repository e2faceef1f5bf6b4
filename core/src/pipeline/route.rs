//! Longest-prefix-match routing for IPv4 and IPv6, and the exact-match maps beside it, all
//! updated copy-on-write so that a new FIB generation costs what changed, not the table.
//!
//! A table is one hash map per prefix length present, probed from the longest length down:
//! a leaf's table has few distinct lengths (/32 hosts, /24 racks, /0 default), so a lookup is a
//! handful of hash probes. This is VPP's IPv6 FIB (a hash table per length); a multibit trie
//! (VPP's IPv4 mtrie, DPDK's DIR-24-8) would bound the probes of a table with many lengths,
//! but the per-worker cache in front of it (`resolve.rs`) answers most frames without a probe.
//!
//! Each length's entries live in a `CowMap`: a hash table cut into 64-slot pages behind `Arc`s.
//! A snapshot clones the table (a pointer per length); the writer's next change copies only
//! the page it touches (and the pointers above it) if a snapshot still shares it
//! (`Arc::make_mut`), and changes it in place otherwise. So a change to a million-route table
//! copies a page of 64 slots and 16 KB of pointers, and readers of an older snapshot keep
//! exactly what they had.
//!
//! Invariant: `lookup` returns the target of the longest prefix containing the address, or
//! `None`; keys are stored masked to their length, so host bits never affect a match; a clone
//! never sees a change made to the table it was cloned from, nor the other way round.

use crate::wire::IpAddress;
use std::net::IpAddr;
use std::sync::Arc;

/// A key of the route maps: an address or masked prefix as an integer (IPv4 `u32`, IPv6
/// `u128`), hashed by a multiply-rotate mix. The keys are addresses the switch's operator
/// configured, not attacker-chosen map contents, so no keyed hash is needed, and hashbrown's
/// default (aHash) was a tenth of a frame's cycles (perf/RESULTS.md, "Figures once in code
/// comments").
pub trait AddressKey: Copy + Eq + Default {
    fn address_hash(self) -> u64;
}

/// One word into the hash state: the multiply carries low bits up, so what varies between
/// keys (a prefix's low bits, a host's interface ID) must reach it in a word's low bits.
#[inline(always)]
fn mix(state: u64, word: u64) -> u64 {
    (state.rotate_left(5) ^ word).wrapping_mul(crate::rng::GOLDEN_GAMMA)
}

/// Slots are taken from the low bits: the multiply leaves the best-mixed bits on top, so
/// rotate some of them down.
#[inline(always)]
fn finish(state: u64) -> u64 {
    state.rotate_left(26)
}

impl AddressKey for u32 {
    #[inline(always)]
    fn address_hash(self) -> u64 {
        finish(mix(0, u64::from(self)))
    }
}

impl AddressKey for u128 {
    /// The interface-ID half first, then the prefix half.
    #[inline(always)]
    fn address_hash(self) -> u64 {
        finish(mix(mix(0, self as u64), (self >> 64) as u64))
    }
}

/// A neighbour's key: the port and the IPv4 address (next hops are keyed by interface and
/// address, as the kernel keys them: BGP unnumbered peers share fe80::1 on every uplink).
impl AddressKey for (u16, u32) {
    #[inline(always)]
    fn address_hash(self) -> u64 {
        finish(mix(mix(0, u64::from(self.1)), u64::from(self.0)))
    }
}

/// A neighbour's key: the port and the IPv6 address.
impl AddressKey for (u16, u128) {
    #[inline(always)]
    fn address_hash(self) -> u64 {
        finish(mix(mix(mix(0, self.1 as u64), (self.1 >> 64) as u64), u64::from(self.0)))
    }
}

/// Slots per page: a change copies one page (64 slots: 512 B of IPv4 routes, 2 KB of IPv6).
const PAGE_BITS: u32 = 6;
const PAGE: usize = 1 << PAGE_BITS;
/// Up to this many pages (32 K entries), one array of page pointers: a change also copies it.
const DIRECT_PAGES: usize = 1024;
/// Beyond, pages per chunk of a two-level directory: a change also copies the directory (a
/// pointer per chunk, 1,024 at a million routes) and one chunk (32 pointers), never a
/// pointer per page (32 K at a million: each copy would touch 32 K reference counts).
const CHUNK_BITS: u32 = 5;
const CHUNK: usize = 1 << CHUNK_BITS;

/// 64 slots and which of them hold an entry.
#[derive(Clone)]
struct Page<K, V> {
    used: u64,
    slots: [(K, V); PAGE],
}

type Chunk<K, V> = Arc<[Arc<Page<K, V>>]>;

/// Where the pages are: the page itself while there is one (a leaf's lengths mostly: up to 32
/// entries), one level of pointers while few, two once many.
#[derive(Clone)]
enum Directory<K, V> {
    One(Arc<Page<K, V>>),
    Pages(Chunk<K, V>),
    Chunks(Arc<[Chunk<K, V>]>),
}

/// An exact-match map whose snapshots share everything a change did not touch: an
/// open-addressing hash table (linear probing, at most half full) cut into pages, reached
/// through an array of page pointers (a two-level directory past `DIRECT_PAGES`), each level
/// and page behind an `Arc`. A lookup hashes once and reads the slot's page pointer, then
/// probes on average 1.5 slots for a hit and 2.5 for a miss, in one cache line as a rule. A change
/// copies only the pages, chunk and directory a snapshot still shares (`Arc::make_mut`), and
/// writes in place otherwise. Growing (doubling, when half full) rebuilds the table, once per
/// power of two.
///
/// Measured in the route bench against one hashbrown map per length (the FIB before it was
/// incremental): a first copy-on-write design, 1,024 hashbrown maps behind a `Vec` with a
/// second hash for the shard, looked up much slower in the 5,000-route table; both designs'
/// figures are in perf/RESULTS.md.
#[derive(Clone)]
pub struct CowMap<K, V> {
    directory: Directory<K, V>,
    /// Slots - 1 (slots are a power of two, at least a page).
    mask: usize,
    len: usize,
}

#[inline(always)]
fn hash_of<K: AddressKey>(key: &K) -> u64 {
    key.address_hash()
}

impl<K: Copy + Default, V: Copy + Default> Page<K, V> {
    fn empty() -> Self {
        Self { used: 0, slots: [(K::default(), V::default()); PAGE] }
    }
}

impl<K: AddressKey, V: Copy + Default> Default for CowMap<K, V> {
    fn default() -> Self {
        Self::from_pages(vec![Page::empty()], 0)
    }
}

/// Puts `key` in the first free slot of its probe sequence in `pages` (a table being built).
fn place<K: AddressKey, V: Copy>(pages: &mut [Page<K, V>], key: K, value: V) {
    let mask = pages.len() * PAGE - 1;
    let mut slot = hash_of(&key) as usize & mask;
    loop {
        let page = &mut pages[slot >> PAGE_BITS];
        let bit = slot & (PAGE - 1);
        if page.used & (1 << bit) == 0 {
            page.used |= 1 << bit;
            page.slots[bit] = (key, value);
            return;
        }
        slot = (slot + 1) & mask;
    }
}

/// Linear probing from `slot` for `key`, pages found by `page_of` (a page number to its page).
#[inline(always)]
fn probe<'a, K: Eq + 'a, V: 'a>(
    mut slot: usize,
    mask: usize,
    key: &K,
    page_of: impl Fn(usize) -> &'a Arc<Page<K, V>>,
) -> Option<&'a V> {
    loop {
        let page = page_of(slot >> PAGE_BITS);
        let bit = slot & (PAGE - 1);
        let (k, value) = &page.slots[bit];
        let used = page.used & (1 << bit) != 0;
        if !used {
            return None;
        }
        if k == key {
            return Some(value);
        }
        slot = (slot + 1) & mask;
    }
}

impl<K: AddressKey, V: Copy + Default> CowMap<K, V> {
    fn from_pages(pages: Vec<Page<K, V>>, len: usize) -> Self {
        let mask = pages.len() * PAGE - 1;
        let pages: Vec<Arc<Page<K, V>>> = pages.into_iter().map(Arc::new).collect();
        let directory = if pages.len() == 1 {
            Directory::One(pages.into_iter().next().expect("one page"))
        } else if pages.len() <= DIRECT_PAGES {
            Directory::Pages(pages.into())
        } else {
            Directory::Chunks(pages.chunks(CHUNK).map(|chunk| chunk.iter().cloned().collect::<Chunk<K, V>>()).collect())
        };
        Self { directory, mask, len }
    }

    #[inline(always)]
    fn page(&self, slot: usize) -> &Page<K, V> {
        let page = slot >> PAGE_BITS;
        match &self.directory {
            Directory::One(only) => only,
            Directory::Pages(pages) => &pages[page],
            Directory::Chunks(chunks) => &chunks[page >> CHUNK_BITS][page & (CHUNK - 1)],
        }
    }

    /// The page of `slot`, copied first (with what points to it) if a snapshot shares it.
    fn page_mut(&mut self, slot: usize) -> &mut Page<K, V> {
        let page = slot >> PAGE_BITS;
        let pointer = match &mut self.directory {
            Directory::One(only) => only,
            Directory::Pages(pages) => &mut Arc::make_mut(pages)[page],
            Directory::Chunks(chunks) => {
                let chunk = &mut Arc::make_mut(chunks)[page >> CHUNK_BITS];
                &mut Arc::make_mut(chunk)[page & (CHUNK - 1)]
            }
        };
        Arc::make_mut(pointer)
    }

    /// Every page, in slot order.
    fn pages(&self) -> Box<dyn Iterator<Item = &Arc<Page<K, V>>> + '_> {
        match &self.directory {
            Directory::One(only) => Box::new(std::iter::once(only)),
            Directory::Pages(pages) => Box::new(pages.iter()),
            Directory::Chunks(chunks) => Box::new(chunks.iter().flat_map(|chunk| chunk.iter())),
        }
    }

    #[inline(always)]
    fn occupied(&self, slot: usize) -> Option<&(K, V)> {
        let page = self.page(slot);
        let bit = slot & (PAGE - 1);
        (page.used & (1 << bit) != 0).then(|| &page.slots[bit])
    }

    /// The slot holding `key`. At most half the slots are used, so a probe always ends.
    #[inline(always)]
    fn find(&self, key: &K) -> Option<usize> {
        let mut slot = hash_of(key) as usize & self.mask;
        loop {
            let (k, _) = self.occupied(slot)?;
            if k == key {
                return Some(slot);
            }
            slot = (slot + 1) & self.mask;
        }
    }

    /// The value of `key`. The directory is matched once, not per probed slot; a slot's key
    /// is compared before its page's occupancy bit is consulted, both loads issued at once.
    #[inline(always)]
    pub fn get(&self, key: &K) -> Option<&V> {
        let slot = hash_of(key) as usize & self.mask;
        match &self.directory {
            Directory::One(only) => probe(slot, self.mask, key, |_| only),
            Directory::Pages(pages) => probe(slot, self.mask, key, |page| &pages[page]),
            Directory::Chunks(chunks) => {
                probe(slot, self.mask, key, |page| &chunks[page >> CHUNK_BITS][page & (CHUNK - 1)])
            }
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds or replaces `key`; returns what it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(slot) = self.find(&key) {
            let entry = &mut self.page_mut(slot).slots[slot & (PAGE - 1)];
            return Some(std::mem::replace(&mut entry.1, value));
        }
        if (self.len + 1) * 2 > self.mask + 1 {
            self.grow();
        }
        let mut slot = hash_of(&key) as usize & self.mask;
        while self.occupied(slot).is_some() {
            slot = (slot + 1) & self.mask;
        }
        let page = self.page_mut(slot);
        page.used |= 1 << (slot & (PAGE - 1));
        page.slots[slot & (PAGE - 1)] = (key, value);
        self.len += 1;
        None
    }

    /// Twice the slots, every entry placed again: a new table, sharing nothing.
    fn grow(&mut self) {
        self.rebuild((self.mask + 1) * 2);
    }

    /// `slots` slots (a power of two, a page at least), every entry placed again: a new
    /// table, sharing nothing.
    fn rebuild(&mut self, slots: usize) {
        let mut pages = vec![Page::empty(); slots / PAGE];
        for (key, value) in self.iter() {
            place(&mut pages, *key, *value);
        }
        *self = Self::from_pages(pages, self.len);
    }

    /// Removes `key`; returns its value. The entries after it in its probe run move back over
    /// the hole (backward-shift deletion), so no tombstones slow later probes. A table left
    /// an eighth full shrinks to a quarter full, so a million routes that come and go leave
    /// no million slots behind (and a table that hovers costs no rebuild per change).
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let value = self.remove_in_place(key)?;
        let slots = self.mask + 1;
        if slots > PAGE && self.len * 8 < slots {
            self.rebuild((self.len * 4).next_power_of_two().max(PAGE));
        }
        Some(value)
    }

    fn remove_in_place(&mut self, key: &K) -> Option<V> {
        let mut hole = self.find(key)?;
        let (_, value) = *self.occupied(hole).expect("found");
        let mut next = (hole + 1) & self.mask;
        while let Some(&(moved, moved_value)) = self.occupied(next) {
            // The entry at `next` may fill the hole if the hole lies on its probe path, from
            // its home slot up to `next`.
            let home = hash_of(&moved) as usize & self.mask;
            if next.wrapping_sub(hole) & self.mask <= next.wrapping_sub(home) & self.mask {
                self.page_mut(hole).slots[hole & (PAGE - 1)] = (moved, moved_value);
                hole = next;
            }
            next = (next + 1) & self.mask;
        }
        self.page_mut(hole).used &= !(1 << (hole & (PAGE - 1)));
        self.len -= 1;
        Some(value)
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.pages().flat_map(|page| {
            (0..PAGE).filter(|bit| page.used & (1 << bit) != 0).map(|bit| (&page.slots[bit].0, &page.slots[bit].1))
        })
    }

    /// (pages shared with `other`, pages not): how much a change copied.
    #[cfg(test)]
    fn pages_shared_with(&self, other: &Self) -> (usize, usize) {
        let pages = |map: &Self| map.pages().cloned().collect::<Vec<_>>();
        let (mine, theirs) = (pages(self), pages(other));
        let shared = mine.iter().zip(&theirs).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        (shared, mine.len() - shared)
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
fn insert<K: AddressKey, T: Copy + Default>(
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
fn remove<K: AddressKey, T: Copy + Default>(lengths: &mut Vec<(u8, CowMap<K, T>)>, len: u8, key: K) -> Option<T> {
    let index = lengths.iter().position(|(l, _)| *l == len)?;
    let old = lengths[index].1.remove(&key);
    if lengths[index].1.is_empty() {
        lengths.remove(index);
    }
    old
}

fn exact<K: AddressKey, T: Copy + Default>(lengths: &[(u8, CowMap<K, T>)], len: u8, key: K) -> Option<T> {
    lengths.iter().find(|(l, _)| *l == len).and_then(|(_, map)| map.get(&key).copied())
}

impl<T: Copy + Default> RouteTable<T> {
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
    pub fn lookup(&self, destination: IpAddress) -> Option<T> {
        match destination {
            IpAddress::V4(address) => self.v4.iter().find_map(|(len, map)| map.get(&mask_v4(address, *len)).copied()),
            IpAddress::V6(address) => self.v6.iter().find_map(|(len, map)| map.get(&mask_v6(address, *len)).copied()),
        }
    }

    /// The longest prefix containing `destination` (address masked, length) and its target:
    /// `lookup` with the prefix it matched, for `show route`.
    pub fn lookup_prefix(&self, destination: IpAddress) -> Option<(IpAddr, u8, T)> {
        match destination {
            IpAddress::V4(address) => self.v4.iter().find_map(|(len, map)| {
                let key = mask_v4(address, *len);
                map.get(&key).map(|target| (IpAddr::V4(key.into()), *len, *target))
            }),
            IpAddress::V6(address) => self.v6.iter().find_map(|(len, map)| {
                let key = mask_v6(address, *len);
                map.get(&key).map(|target| (IpAddr::V6(key.into()), *len, *target))
            }),
        }
    }

    /// Whether every map of `other` is the one this table holds (nothing was copied).
    #[cfg(test)]
    pub(crate) fn shares_all_maps_with(&self, other: &Self) -> bool {
        fn same<K, T>(a: &[(u8, CowMap<K, T>)], b: &[(u8, CowMap<K, T>)]) -> bool {
            a.len() == b.len()
                && a.iter().zip(b).all(|((la, a), (lb, b))| {
                    la == lb
                        && match (&a.directory, &b.directory) {
                            (Directory::One(a), Directory::One(b)) => Arc::ptr_eq(a, b),
                            (Directory::Pages(a), Directory::Pages(b)) => Arc::ptr_eq(a, b),
                            (Directory::Chunks(a), Directory::Chunks(b)) => Arc::ptr_eq(a, b),
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

    fn v4(text: &str) -> IpAddress {
        IpAddress::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn v6(text: &str) -> IpAddress {
        IpAddress::V6(u128::from(text.parse::<std::net::Ipv6Addr>().unwrap()))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// How many of a 4,096-slot table's slots `keys` fall in: a uniform hash fills about
    /// 63% (1 - 1/e); keys piled in a few slots would make each probe a scan.
    fn slots<K: AddressKey>(keys: impl Iterator<Item = K>) -> usize {
        keys.map(|key| hash_of(&key) & 4095).collect::<std::collections::HashSet<_>>().len()
    }

    /// The hash spreads each key shape a leaf holds: IPv4 /24 racks, IPv6 /64 subnets (which
    /// differ only in their upper half), and IPv6 hosts (which differ only in their lower
    /// half, whatever bits their prefix has set).
    #[test]
    fn the_address_hash_spreads_every_key_shape_over_the_slots() {
        let racks = slots((0..4096u32).map(|n| 0x0a00_0000 | n << 8));
        let subnets = slots((0..4096u128).map(|n| 0xfd00_0000_0000_0000u128 << 64 | n << 64));
        let hosts = slots((0..4096u128).map(|n| 0xfdff_ffff_ffff_ffffu128 << 64 | n));
        for (shape, filled) in [("racks", racks), ("subnets", subnets), ("hosts", hosts)] {
            assert!(filled > 2_000, "{shape}: {filled} of 4096 slots");
        }
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
        assert_eq!(routes.remove(ip("0.0.0.0"), 0), Some(100));
        assert!(routes.is_empty() && routes.v4.is_empty(), "the last route gone, no length left");
    }

    /// A clone is a snapshot: changes on either side never show on the other, and the pages
    /// no change touched stay shared.
    #[test]
    fn a_clone_keeps_what_it_had_while_the_original_changes() {
        let mut routes: RouteTable<u32> = RouteTable::empty();
        let count = 6_000u32;
        for i in 0..count {
            routes.insert(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8))), 24, i);
        }
        routes.insert(ip("10.0.0.0"), 8, u32::MAX);
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
        // Only the pages the two /24 changes touched were copied (a removal may shift an entry
        // from the next page back).
        let (shared, copied) = routes.v4[0].1.pages_shared_with(&snapshot.v4[0].1);
        assert!((1..=3).contains(&copied), "{copied} pages copied for two changes, {shared} shared");
        assert!(shared > 200, "{shared}");
        assert_eq!(snapshot.routes().filter(|(_, len, _)| *len == 24).count(), count as usize);
    }

    #[test]
    fn a_big_map_takes_a_two_level_directory_and_still_copies_one_page_per_change() {
        let mut map: CowMap<u32, u32> = CowMap::default();
        let count = (DIRECT_PAGES * PAGE) as u32; // past DIRECT_PAGES pages once half full
        for key in 0..count {
            map.insert(key.wrapping_mul(2_654_435_761), key);
        }
        assert!(matches!(map.directory, Directory::Chunks(..)), "{} slots", map.mask + 1);
        let snapshot = map.clone();
        assert_eq!(map.insert(7u32.wrapping_mul(2_654_435_761), 70), Some(7));
        let (shared, copied) = map.pages_shared_with(&snapshot);
        assert_eq!(copied, 1, "{shared} shared");
        assert_eq!(snapshot.get(&7u32.wrapping_mul(2_654_435_761)), Some(&7));
        assert_eq!(map.get(&7u32.wrapping_mul(2_654_435_761)), Some(&70));
        assert!((0..count).all(|key| map.get(&key.wrapping_mul(2_654_435_761)).is_some()));
    }

    /// A map grows when an insert would make it more than half full: never fuller (probe runs
    /// stay short), never sooner (a million routes take 2 M slots, not 4 M).
    #[test]
    fn a_map_grows_exactly_when_an_insert_would_pass_half_full() {
        let mut map: CowMap<u32, u32> = CowMap::default();
        for round in 0..3 {
            let slots = map.mask + 1;
            while map.len() < slots / 2 {
                map.insert(map.len() as u32, 0);
            }
            assert_eq!(map.mask + 1, slots, "round {round}: {} entries, half full", map.len());
            map.insert(u32::MAX - round, 0);
            assert_eq!(map.mask + 1, 2 * slots, "round {round}: one more");
        }
    }

    /// A map shrinks when a remove leaves it less than an eighth full, to a quarter full, and
    /// never below a page; a snapshot taken before keeps every entry.
    #[test]
    fn a_map_shrinks_when_an_eighth_full_and_its_snapshots_keep_theirs() {
        let mut map: CowMap<u32, u32> = CowMap::default();
        for key in 0..20_000u32 {
            map.insert(key.wrapping_mul(2_654_435_761), key);
        }
        let snapshot = map.clone();
        let full = map.mask + 1;
        let mut key = 0u32;
        while map.len() * 8 >= full {
            assert_eq!(map.mask + 1, full, "{} entries", map.len());
            assert_eq!(map.remove(&key.wrapping_mul(2_654_435_761)), Some(key));
            key += 1;
        }
        assert_eq!(map.mask + 1, (map.len() * 4).next_power_of_two(), "{} entries", map.len());
        assert!((key..20_000).all(|key| map.get(&key.wrapping_mul(2_654_435_761)) == Some(&key)));
        assert!((0..key).all(|key| map.get(&key.wrapping_mul(2_654_435_761)).is_none()));
        assert_eq!(snapshot.len(), 20_000);
        assert!((0..20_000u32).all(|key| snapshot.get(&key.wrapping_mul(2_654_435_761)) == Some(&key)));
        while key < 20_000 {
            map.remove(&key.wrapping_mul(2_654_435_761));
            key += 1;
        }
        assert_eq!((map.len(), map.mask + 1), (0, PAGE));
    }

    #[test]
    fn a_map_grows_removes_and_counts() {
        let mut map: CowMap<u128, u8> = CowMap::default();
        for key in 0..5_000u128 {
            assert_eq!(map.insert(key << 64, 1), None);
        }
        assert_eq!(map.len(), 5_000);
        assert!(map.mask + 1 >= 10_000, "at most half full");
        assert_eq!(map.insert(0, 2), Some(1));
        assert_eq!(map.remove(&(7 << 64)), Some(1));
        assert_eq!(map.remove(&(7 << 64)), None);
        assert_eq!(map.remove(&12345), None);
        assert_eq!(map.len(), 4_999);
        assert_eq!(map.get(&0), Some(&2));
        assert_eq!(map.iter().count(), 4_999);
    }

    /// Random inserts and removes, with snapshots taken along the way, against a std
    /// `HashMap`: every key is found where it should be and nowhere else, in the map and in
    /// every snapshot, through growth and backward shifts (few slots' worth of keys, so probe
    /// runs are long and collide).
    #[test]
    fn a_map_and_its_snapshots_agree_with_a_plain_map_under_random_changes() {
        let mut rng = crate::rng::Rng::new(24);
        let mut map: CowMap<u32, u32> = CowMap::default();
        let mut model = std::collections::HashMap::new();
        let mut snapshots: Vec<(CowMap<u32, u32>, std::collections::HashMap<u32, u32>)> = Vec::new();
        for step in 0..40_000u32 {
            let key = rng.below(3_000) as u32;
            if rng.below(3) == 0 {
                assert_eq!(map.remove(&key), model.remove(&key), "remove {key} at {step}");
            } else {
                assert_eq!(map.insert(key, step), model.insert(key, step), "insert {key} at {step}");
            }
            if step % 4_000 == 0 {
                snapshots.push((map.clone(), model.clone()));
            }
        }
        snapshots.push((map, model));
        for (map, model) in &snapshots {
            assert_eq!(map.len(), model.len());
            for key in 0..3_100u32 {
                assert_eq!(map.get(&key), model.get(&key), "key {key}");
            }
            let mut entries: Vec<(u32, u32)> = map.iter().map(|(k, v)| (*k, *v)).collect();
            entries.sort_unstable();
            let mut expected: Vec<(u32, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
            expected.sort_unstable();
            assert_eq!(entries, expected);
        }
    }
}
