//! Longest-prefix-match routing for IPv4 and IPv6.
//!
//! One hash map per prefix length present, probed from the longest length down: a leaf's
//! table has few distinct lengths (/32 hosts, /24 racks, /0 default), so a lookup is a handful
//! of hash probes and the table is as small as its routes.
//!
//! Invariant: `lookup` returns the target of the longest prefix containing the address, or
//! `None`; keys are stored masked to their length, so host bits never affect a match.

use crate::wire::parse::Destination;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

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
type HashMap<K, V> = AddressMap<K, V>;

/// Prefixes to targets of type `T` (a config route's target, or the classifier's own).
pub struct RouteTable<T> {
    /// (length, masked prefix -> target), longest length first.
    v4: Vec<(u8, HashMap<u32, T>)>,
    v6: Vec<(u8, HashMap<u128, T>)>,
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

/// Adds a masked prefix to the table of its length, keeping tables longest first.
fn insert<K: std::hash::Hash + Eq, T>(tables: &mut Vec<(u8, HashMap<K, T>)>, len: u8, key: K, target: T) {
    let index = match tables.iter().position(|(l, _)| *l == len) {
        Some(index) => index,
        None => {
            let index = tables.iter().position(|(l, _)| *l < len).unwrap_or(tables.len());
            tables.insert(index, (len, HashMap::default()));
            index
        }
    };
    tables[index].1.insert(key, target);
}

impl<T: Copy> RouteTable<T> {
    pub fn empty() -> Self {
        Self { v4: Vec::new(), v6: Vec::new() }
    }

    /// Adds (or replaces) the route for `address`/`len`; host bits are masked off.
    pub fn insert(&mut self, address: IpAddr, len: u8, target: T) {
        match address {
            IpAddr::V4(address) => insert(&mut self.v4, len, mask_v4(u32::from(address), len), target),
            IpAddr::V6(address) => insert(&mut self.v6, len, mask_v6(u128::from(address), len), target),
        }
    }

    #[inline]
    pub fn lookup(&self, destination: Destination) -> Option<T> {
        match destination {
            Destination::V4(address) => {
                self.v4.iter().find_map(|(len, table)| table.get(&mask_v4(address, *len)).copied())
            }
            Destination::V6(address) => {
                self.v6.iter().find_map(|(len, table)| table.get(&mask_v6(address, *len)).copied())
            }
        }
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

    #[test]
    fn inserted_routes_are_masked_and_replace_their_prefix() {
        let mut routes: RouteTable<u8> = RouteTable::empty();
        routes.insert("10.0.1.7".parse().unwrap(), 24, 1);
        routes.insert("10.0.1.0".parse().unwrap(), 24, 2);
        routes.insert("10.0.1.7".parse().unwrap(), 32, 3);
        assert_eq!(routes.lookup(v4("10.0.1.9")), Some(2));
        assert_eq!(routes.lookup(v4("10.0.1.7")), Some(3));
        assert_eq!(routes.lookup(v4("10.0.2.7")), None);
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
}
