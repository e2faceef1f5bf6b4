//! Where a destination goes, resolved once per snapshot: the route lookup and, for a connected
//! subnet, the neighbour lookup folded into one `Resolved`, kept in a small per-classifier
//! cache so that a flow's frames after its first cost one compare instead of hash probes.
//!
//! Each worker owns its classifier, so the cache is private (no sharing, no atomics). It is
//! two-way set-associative: a destination has a set of two slots, one cache line; a miss
//! resolves through the snapshot into the set's first slot, and what was there moves to the
//! second (so of three destinations taking turns in one set, each misses, as with LRU). A leaf
//! carries few destinations at a time (the GPUs behind it and the uplinks' groups), so the
//! common case is a hit; traffic to many destinations costs a probe and a slot write more than
//! the lookup itself. With one slot per destination, two destinations of one slot evicted each
//! other on every frame: 24 of the benchmark's 200 did (perf/RESULTS.md, issue 47).
//!
//! Invariant: every filled slot holds exactly what the classifier's current snapshot resolves
//! for its destination. A new snapshot empties the cache (`forget`), so a frame never follows
//! a route, neighbour or port state of an older generation.
//!
//! The route lookup it saves was a call into hashbrown's probe through the snapshot's tables,
//! a large share of a 64-byte frame's samples (perf/RESULTS.md, "Figures once in code
//! comments"); a hit is a multiply, one cache line's load and a compare or two.

use crate::pipeline::fib::Next;
use crate::pipeline::fib::{Fib, KernelReason, Target};
use crate::wire::IpAddress;

/// What a destination resolves to in one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// Forward towards this next hop (an adjacency on an enabled port, or a group).
    Next(Next),
    /// The route's next hop has no neighbour yet.
    Glean,
    /// A destination on this port's connected subnet has no neighbour yet.
    GleanOn(u16),
    /// One of the switch's own addresses.
    Local,
    /// An adjacency on a disabled port.
    NoRoute,
    /// A blackhole route.
    Blackhole,
    /// The kernel answers for it (`KernelReason`).
    Kernel(KernelReason),
    /// No route at all (with `[control]`, the kernel answers with ICMP unreachable).
    Unrouted,
}

impl Resolved {
    /// Looks `destination` up in `fib` (the slow path): the route, then the neighbour of a
    /// connected destination.
    pub fn lookup(fib: &Fib, destination: IpAddress, port_enabled: &[bool]) -> Self {
        match fib.lookup(destination) {
            Some(Target::Adjacency(adjacency)) => Self::adjacency(adjacency, port_enabled),
            Some(Target::Group(group)) => Self::Next(Next::Group(group)),
            Some(Target::Connected(port)) => match fib.neighbor(port, destination) {
                Some(adjacency) => Self::adjacency(adjacency, port_enabled),
                None => Self::GleanOn(port),
            },
            Some(Target::Glean) => Self::Glean,
            Some(Target::Local) => Self::Local,
            Some(Target::Blackhole) => Self::Blackhole,
            Some(Target::Kernel(reason)) => Self::Kernel(reason),
            None => Self::Unrouted,
        }
    }

    fn adjacency(adjacency: crate::pipeline::fib::Adjacency, port_enabled: &[bool]) -> Self {
        if port_enabled.get(usize::from(adjacency.port)).copied().unwrap_or(false) {
            Self::Next(Next::Adjacency(adjacency))
        } else {
            Self::NoRoute
        }
    }
}

/// Slots in a cache: a power of two. 256 slots of 32 bytes are 8 KiB, a sixth of a 48 KiB L1.
pub const SLOTS: usize = 256;
/// Slots in a set, the slots a destination may take.
const WAYS: usize = 2;
const SETS: usize = SLOTS / WAYS;

// A set is one cache line, whatever changes in what a destination resolves to (an
// adjacency's alignment grew its slot once: perf/RESULTS.md, issue 47).
const _: () = assert!(std::mem::size_of::<Slot>() * WAYS == 64 && std::mem::size_of::<Set>() == 64);

/// One slot: a destination and what it resolves to. `family` 0 is an empty slot, 4 or 6 the
/// destination's address family (an IPv4 and an IPv6 address with equal bits differ).
#[derive(Debug, Clone, Copy)]
struct Slot {
    address: u128,
    family: u8,
    resolved: Resolved,
}

impl Slot {
    #[inline(always)]
    fn holds(&self, family: u8, address: u128) -> bool {
        self.family == family && self.address == address
    }
}

const EMPTY: Slot = Slot { address: 0, family: 0, resolved: Resolved::NoRoute };

/// The slots a destination may take, in one cache line: the most recently filled first.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Set([Slot; WAYS]);

/// The per-classifier cache of resolved destinations.
pub struct ResolveCache {
    sets: Box<[Set; SETS]>,
}

impl Default for ResolveCache {
    fn default() -> Self {
        Self { sets: Box::new([Set([EMPTY; WAYS]); SETS]) }
    }
}

/// A destination's set index and its (family, address) key.
#[inline(always)]
fn key(destination: IpAddress) -> (usize, u8, u128) {
    // Fibonacci hashing: the multiply carries every address bit into the top bits, which pick
    // the set (hosts of one subnet differ only in their low bits).
    let (family, address) = match destination {
        IpAddress::V4(address) => (4, u128::from(address)),
        IpAddress::V6(address) => (6, address),
    };
    let folded = (address as u64) ^ ((address >> 64) as u64);
    let index = (folded.wrapping_mul(crate::rng::GOLDEN_GAMMA) >> (64 - SETS.trailing_zeros())) as usize;
    (index, family, address)
}

impl ResolveCache {
    /// What `destination` resolves to in `fib`, from the cache when its set holds it.
    #[inline(always)]
    pub fn resolve(&mut self, fib: &Fib, destination: IpAddress, port_enabled: &[bool]) -> Resolved {
        let (index, family, address) = key(destination);
        let set = &mut self.sets[index];
        let way = if set.0[0].holds(family, address) {
            0
        } else if set.0[1].holds(family, address) {
            1
        } else {
            Self::fill(set, fib, destination, port_enabled);
            0
        };
        // Read from the slot on a hit and a miss alike: the paths then share no value the
        // compiler would join through a stack copy, which it stored in other pieces than the
        // classifier loads (a load across two stores, that the CPU cannot forward).
        set.0[way].resolved
    }

    /// A miss: `destination` resolved in `fib` into its set's first slot, the first's moved to
    /// the second.
    #[cold]
    #[inline(never)]
    fn fill(set: &mut Set, fib: &Fib, destination: IpAddress, port_enabled: &[bool]) {
        let (_, family, address) = key(destination);
        set.0[1] = set.0[0];
        set.0[0] = Slot { address, family, resolved: Resolved::lookup(fib, destination, port_enabled) };
    }

    /// Empties every slot: the snapshot they were resolved in is gone.
    pub fn forget(&mut self) {
        self.sets.fill(Set([EMPTY; WAYS]));
    }

    /// Filled slots (for tests).
    #[cfg(test)]
    fn filled(&self) -> usize {
        self.sets.iter().flat_map(|set| &set.0).filter(|slot| slot.family != 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pipeline::fib::{Adjacency, Learned, Neighbor};
    use crate::wire::ethernet::MacAddress;

    /// p0 10.0.0.1/24 (connected), p1 with 10.1.0.0/16, p2 disabled with 10.2.0.0/16, and
    /// 2001:db8::/32 to p1.
    fn config() -> Config {
        crate::testing::Leaf::new("r")
            .port("p0", 100.0, "addresses = [\"10.0.0.1/24\"]")
            .port("p1", 100.0, "")
            .port("p2", 100.0, "enabled = false")
            .route("10.1.0.0/16", "p1")
            .route("10.2.0.0/16", "p2")
            .route("2001:db8::/32", "p1")
            .tables("[control]")
            .config()
    }

    fn v4(text: &str) -> IpAddress {
        IpAddress::V4(u32::from(text.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn v6(text: &str) -> IpAddress {
        IpAddress::V6(u128::from(text.parse::<std::net::Ipv6Addr>().unwrap()))
    }

    fn mac(last: u8) -> MacAddress {
        MacAddress([2, 0, 0, 0, 0, last])
    }

    #[test]
    fn lookup_folds_route_neighbour_and_port_state() {
        let config = config();
        let enabled: Vec<bool> = config.ports.iter().map(|port| port.enabled).collect();
        let learned = Learned {
            neighbors: vec![Neighbor { ip: "10.0.0.9".parse().unwrap(), mac: mac(9), port: 0 }],
            ..Learned::default()
        };
        let fib = Fib::new(&config, &learned, 1);
        let p1 = Next::Adjacency(Adjacency { port: 1, mac: config.ports[1].peer_mac.unwrap() });
        assert_eq!(Resolved::lookup(&fib, v4("10.1.2.3"), &enabled), Resolved::Next(p1));
        assert_eq!(Resolved::lookup(&fib, v6("2001:db8::7"), &enabled), Resolved::Next(p1));
        assert_eq!(
            Resolved::lookup(&fib, v4("10.0.0.9"), &enabled),
            Resolved::Next(Next::Adjacency(Adjacency { port: 0, mac: mac(9) }))
        );
        assert_eq!(Resolved::lookup(&fib, v4("10.0.0.8"), &enabled), Resolved::GleanOn(0));
        assert_eq!(Resolved::lookup(&fib, v4("10.0.0.1"), &enabled), Resolved::Local);
        assert_eq!(Resolved::lookup(&fib, v4("10.2.0.1"), &enabled), Resolved::NoRoute, "disabled port");
        assert_eq!(Resolved::lookup(&fib, v4("192.0.2.1"), &enabled), Resolved::Unrouted, "no route at all");
    }

    /// IPv6 hosts often differ only in their prefix (the same interface ID behind each rack's
    /// /64): the slot must depend on the upper half too.
    #[test]
    fn ipv6_destinations_that_differ_in_their_prefix_spread_over_slots() {
        let config = config();
        let enabled: Vec<bool> = config.ports.iter().map(|port| port.enabled).collect();
        let fib = Fib::new(&config, &Learned::default(), 1);
        let mut cache = ResolveCache::default();
        for rack in 0..64u128 {
            cache.resolve(&fib, IpAddress::V6(0x2001_0db8 << 96 | rack << 64 | 1), &enabled);
        }
        assert!(cache.filled() > 32, "{} slots for 64 prefixes", cache.filled());
    }

    /// Two destinations of one set both stay (with one slot each, they evicted each other on
    /// every frame); a third evicts the one filled first. Hits are told from misses by asking
    /// with a newer snapshot without `forget`: a hit answers from the older one.
    #[test]
    fn a_set_keeps_two_destinations_and_a_third_evicts_the_older() {
        let config = config();
        let enabled: Vec<bool> = config.ports.iter().map(|port| port.enabled).collect();
        let before = Fib::new(&config, &Learned::default(), 1);
        // Three hosts of p0's connected subnet that share a set.
        let hosts: Vec<u32> = (2..255u32).map(|host| 0x0a00_0000 | host).collect();
        let set_of = |host: u32| key(IpAddress::V4(host)).0;
        let [a, b, c] = hosts
            .iter()
            .find_map(|&a| {
                let same: Vec<u32> = hosts.iter().copied().filter(|&other| set_of(other) == set_of(a)).collect();
                (same.len() >= 3).then(|| [same[0], same[1], same[2]])
            })
            .expect("three hosts of 253 in one of 128 sets");
        let neighbors =
            [a, b, c].map(|host| Neighbor { ip: std::net::Ipv4Addr::from(host).into(), mac: mac(host as u8), port: 0 });
        let after = Fib::new(&config, &Learned { neighbors: neighbors.to_vec(), ..Learned::default() }, 2);
        let fresh = |host: u32| Resolved::Next(Next::Adjacency(Adjacency { port: 0, mac: mac(host as u8) }));

        let mut cache = ResolveCache::default();
        for host in [a, b] {
            assert_eq!(cache.resolve(&before, IpAddress::V4(host), &enabled), Resolved::GleanOn(0));
        }
        for host in [a, b] {
            assert_eq!(cache.resolve(&after, IpAddress::V4(host), &enabled), Resolved::GleanOn(0), "{host:#x} kept");
        }
        assert_eq!(cache.resolve(&after, IpAddress::V4(c), &enabled), fresh(c), "a miss");
        assert_eq!(cache.resolve(&after, IpAddress::V4(b), &enabled), Resolved::GleanOn(0), "b stays");
        assert_eq!(cache.resolve(&after, IpAddress::V4(a), &enabled), fresh(a), "a, filled first, was evicted");
        assert_eq!(cache.filled(), 2);
    }

    #[test]
    fn the_cache_answers_what_the_snapshot_does_and_forgets_an_old_one() {
        let config = config();
        let enabled: Vec<bool> = config.ports.iter().map(|port| port.enabled).collect();
        let before = Fib::new(&config, &Learned::default(), 1);
        let mut cache = ResolveCache::default();
        // Many destinations, so slots are shared and overwritten; each asked twice.
        let destinations: Vec<IpAddress> = (0..2048u32)
            .map(|i| match i % 4 {
                0 => IpAddress::V4(0x0a01_0000 | i),
                1 => IpAddress::V4(0x0a00_0000 | (i & 0xff)),
                2 => IpAddress::V6(0x2001_0db8 << 96 | u128::from(i)),
                _ => IpAddress::V4(i << 20),
            })
            .collect();
        for destination in destinations.iter().chain(&destinations) {
            assert_eq!(
                cache.resolve(&before, *destination, &enabled),
                Resolved::lookup(&before, *destination, &enabled)
            );
        }
        assert!(cache.filled() > SLOTS / 2, "{}", cache.filled());
        // An IPv4 and an IPv6 destination with the same bits have different keys.
        assert_eq!(
            cache.resolve(&before, IpAddress::V4(0x0a01_0203), &enabled),
            Resolved::lookup(&before, v4("10.1.2.3"), &enabled)
        );
        assert_eq!(cache.resolve(&before, IpAddress::V6(0x0a01_0203), &enabled), Resolved::Unrouted);

        // The neighbour becomes known in the next snapshot: without `forget` the cache would
        // still glean.
        let learned = Learned {
            neighbors: vec![Neighbor { ip: "10.0.0.8".parse().unwrap(), mac: mac(8), port: 0 }],
            ..Learned::default()
        };
        let after = Fib::new(&config, &learned, 2);
        assert_eq!(cache.resolve(&before, v4("10.0.0.8"), &enabled), Resolved::GleanOn(0));
        assert_eq!(cache.resolve(&after, v4("10.0.0.8"), &enabled), Resolved::GleanOn(0), "stale until forgotten");
        cache.forget();
        assert_eq!(cache.filled(), 0);
        assert_eq!(
            cache.resolve(&after, v4("10.0.0.8"), &enabled),
            Resolved::Next(Next::Adjacency(Adjacency { port: 0, mac: mac(8) }))
        );
    }
}
