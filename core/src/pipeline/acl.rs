//! ACL matching by tuple space search (Srinivasan, Suri and Varghese, SIGCOMM 1999; the
//! structure of Open vSwitch's classifier). Every rule is a masked match on one 320-bit key
//! (source and destination address, and a word of protocol, ports, DSCP and TCP flags); rules
//! with the same mask share a hash table, a "tuple". A lookup masks the key once per tuple and
//! probes its table, visiting tuples best rule first and stopping as soon as no later tuple
//! can hold a better rule. Port ranges become the few prefixes that cover them.
//!
//! Why this and not a decision tree or DPDK's `rte_acl`: the pipeline knows nothing of DPDK,
//! so `rte_acl` would split the replay path from the live one; a decision tree (HiCuts,
//! EffiCuts) builds slowly and grows with overlapping ranges, while operators' tables have a
//! handful of distinct shapes (a prefix pair, a protocol and a port), so the tuples stay few
//! and a lookup is a few hash probes whatever the number of rules. Rebuilding is cheap, which
//! a live reload will want.
//!
//! A frame's flow is usually seen again: `lookup_cached` keeps the answer for each exact key
//! in a direct-mapped cache (Open vSwitch's exact-match cache), so a flow pays the tuple
//! probes once and then one probe and a compare per frame. A key that shares a slot with
//! another simply replaces it.
//!
//! Invariant: `lookup` returns exactly the highest-priority rule whose every field matches
//! the frame (the test checks it against a walk of the rules); a frame that matches none
//! gets `None`. A non-first fragment, or an L4 header the frame does not hold, matches no
//! rule on ports or TCP flags.

use crate::config::{AclAction, AclRule, AclTable};
use crate::wire::parse;
use crate::wire::{ipv4, ipv6, tcp, udp, IpHeader};
use hashbrown::HashMap;
use std::net::IpAddr;

/// The key's words: source address (high, low), destination address (high, low), and
/// `META` with the fields below. An IPv4 address is in the low word, the high word zero.
const WORDS: usize = 5;
const META: usize = 4;
const DST_PORT_SHIFT: u32 = 0;
const SRC_PORT_SHIFT: u32 = 16;
const TCP_FLAGS_SHIFT: u32 = 32;
const DSCP_SHIFT: u32 = 40;
const PROTOCOL_SHIFT: u32 = 48;
/// Set when the frame's L4 header was read (first fragment, header whole).
const L4_BIT: u64 = 1 << 56;
const V6_BIT: u64 = 1 << 57;

/// What a frame offers to be matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AclKey([u64; WORDS]);

impl AclKey {
    /// Reads the key of the IP packet `ip` locates in a frame the parser accepted; `frame` is
    /// its first segment and `beyond` the bytes after it. The common packet (IPv4, or IPv6
    /// straight to TCP or UDP) is read at fixed offsets, since the parser vouched for its IP
    /// header; IPv6 extension headers are walked as the parser walks them. The L4 fields are
    /// read only where the packet's declared length and the first segment both hold the whole
    /// UDP or TCP header. `None` if the IP header is not whole in `frame` (never, once parsed).
    #[inline]
    pub fn read(frame: &[u8], ip: IpHeader, beyond: usize) -> Option<Self> {
        let l3_offset = usize::from(ip.l3_offset);
        let l3 = frame.get(l3_offset..)?;
        let word = |at: usize| u64::from_be_bytes(l3[at..at + 8].try_into().unwrap_or([0; 8]));
        let mut key = [0u64; WORDS];
        let (dscp, protocol, l4, end) = if ip.is_ipv6 {
            if l3.len() < ipv6::HEADER_LEN {
                return None;
            }
            (key[0], key[1], key[2], key[3]) = (word(8), word(16), word(24), word(32));
            key[META] |= V6_BIT;
            let dscp = (u16::from_be_bytes([l3[0], l3[1]]) >> 6) as u8 & 0x3f;
            let end = ipv6::HEADER_LEN + usize::from(u16::from_be_bytes([l3[4], l3[5]]));
            match l3[6] {
                next @ (ipv4::protocol::TCP | ipv4::protocol::UDP) => (dscp, next, Some(ipv6::HEADER_LEN), end),
                _ => {
                    // Extension headers: the parser's walk, ports and flags as it finds them.
                    let (protocol, transport) = parse::transport(frame, l3_offset, true, beyond)?;
                    key[META] |= u64::from(dscp) << DSCP_SHIFT | u64::from(protocol) << PROTOCOL_SHIFT;
                    if let Some(parse::Transport { ports: Some((source, destination)), tcp_flags }) = transport {
                        key[META] |= l4_bits(source, destination, tcp_flags.unwrap_or(0));
                    }
                    return Some(Self(key));
                }
            }
        } else {
            if l3.len() < ipv4::MIN_HEADER_LEN {
                return None;
            }
            key[1] = u64::from(u32::from_be_bytes([l3[12], l3[13], l3[14], l3[15]]));
            key[3] = u64::from(u32::from_be_bytes([l3[16], l3[17], l3[18], l3[19]]));
            let first_fragment = u16::from_be_bytes([l3[6], l3[7]]) & 0x1fff == 0;
            let header_len = usize::from(l3[0] & 0x0f) * 4;
            let end = usize::from(u16::from_be_bytes([l3[2], l3[3]]));
            (l3[1] >> 2, l3[9], first_fragment.then_some(header_len), end)
        };
        key[META] |= u64::from(dscp) << DSCP_SHIFT | u64::from(protocol) << PROTOCOL_SHIFT;
        let held = end.min(l3.len());
        let whole = |len: usize| l4.filter(|&l4| l4 + len <= held);
        let l4 = match protocol {
            ipv4::protocol::UDP => whole(udp::HEADER_LEN).map(|l4| (l4, 0)),
            ipv4::protocol::TCP => whole(tcp::MIN_HEADER_LEN).map(|l4| (l4, l3[l4 + 13])),
            _ => None,
        };
        if let Some((l4, flags)) = l4 {
            let port = |at: usize| u16::from_be_bytes([l3[at], l3[at + 1]]);
            key[META] |= l4_bits(port(l4), port(l4 + 2), flags);
        }
        Some(Self(key))
    }

    /// The key of the same frame with its DSCP set to `dscp`: what a later table matches
    /// after an earlier one's `set`, before the rewrite writes it (`pipeline::rewrite`).
    #[inline]
    pub fn with_dscp(mut self, dscp: u8) -> Self {
        self.0[META] = (self.0[META] & !(0x3f << DSCP_SHIFT)) | u64::from(dscp & 0x3f) << DSCP_SHIFT;
        self
    }

    fn masked(&self, mask: &[u64; WORDS]) -> [u64; WORDS] {
        std::array::from_fn(|word| self.0[word] & mask[word])
    }
}

/// The key's L4 bits: ports, TCP flags (0 for UDP), and the mark that they were read.
#[inline]
fn l4_bits(source: u16, destination: u16, tcp_flags: u8) -> u64 {
    L4_BIT
        | u64::from(source) << SRC_PORT_SHIFT
        | u64::from(destination) << DST_PORT_SHIFT
        | u64::from(tcp_flags) << TCP_FLAGS_SHIFT
}

/// The rule a frame matched: its index in the table's rules (best first) and its action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclMatch {
    pub rule: u16,
    pub action: AclAction,
}

/// The rules of one mask.
struct Tuple {
    mask: [u64; WORDS],
    /// The best (lowest) rule index in `entries`: a lookup that has found a rule at least as
    /// good skips the tuple.
    best_rule: u16,
    /// Masked value → the best rule with it.
    entries: HashMap<[u64; WORDS], u16>,
}

/// Slots of the exact-match cache (a power of two): a worker's active flows, many times over.
const CACHE_SLOTS: usize = 4096;
/// A cache slot's answer for "no rule matched".
const NO_RULE: u16 = u16::MAX;

/// One exact key and the rule it matched (`NO_RULE` for none); `valid` false when empty.
#[derive(Clone, Copy)]
struct CacheSlot {
    key: [u64; WORDS],
    rule: u16,
    valid: bool,
}

/// One table's rules, ready to match.
pub struct AclMatcher {
    tuples: Vec<Tuple>,
    actions: Vec<AclAction>,
    /// The exact-match cache: allocated once, with the matcher.
    cache: Box<[CacheSlot]>,
}

impl AclMatcher {
    pub fn new(table: &AclTable) -> Self {
        let mut tuples: Vec<Tuple> = Vec::new();
        for (index, rule) in table.rules.iter().enumerate() {
            // The table has at most a u16 of rules in any config a switch can hold; a larger
            // one would have been refused at validation were it possible to write.
            let index = u16::try_from(index).unwrap_or(u16::MAX);
            for (mask, value) in expand(rule) {
                let at = match tuples.iter().position(|tuple| tuple.mask == mask) {
                    Some(at) => at,
                    None => {
                        tuples.push(Tuple { mask, best_rule: index, entries: HashMap::new() });
                        tuples.len() - 1
                    }
                };
                // Rules come best first: the first to claim a value keeps it.
                tuples[at].entries.entry(value).or_insert(index);
            }
        }
        tuples.sort_by_key(|tuple| tuple.best_rule);
        let empty = CacheSlot { key: [0; WORDS], rule: NO_RULE, valid: false };
        Self {
            tuples,
            actions: table.rules.iter().map(|rule| rule.action).collect(),
            cache: vec![empty; CACHE_SLOTS].into_boxed_slice(),
        }
    }

    /// `lookup` through the exact-match cache.
    #[inline]
    pub fn lookup_cached(&mut self, key: &AclKey) -> Option<AclMatch> {
        let slot = cache_slot(key);
        let cached = &self.cache[slot];
        // Word by word: an array `==` here compiles to a call to memcmp.
        let same = cached.key.iter().zip(&key.0).fold(0, |differ, (a, b)| differ | (a ^ b)) == 0;
        let rule = if cached.valid && same {
            cached.rule
        } else {
            let rule = self.lookup(key).map_or(NO_RULE, |found| found.rule);
            self.cache[slot] = CacheSlot { key: key.0, rule, valid: true };
            rule
        };
        (rule != NO_RULE).then(|| AclMatch { rule, action: self.actions[usize::from(rule)] })
    }

    /// The best rule `key` matches.
    #[inline]
    pub fn lookup(&self, key: &AclKey) -> Option<AclMatch> {
        let mut best: Option<u16> = None;
        for tuple in &self.tuples {
            if best.is_some_and(|best| best <= tuple.best_rule) {
                break;
            }
            if let Some(&rule) = tuple.entries.get(&key.masked(&tuple.mask)) {
                best = Some(best.map_or(rule, |best| best.min(rule)));
            }
        }
        best.map(|rule| AclMatch { rule, action: self.actions[usize::from(rule)] })
    }

    /// How many masks the rules have (each a hash probe for a frame no rule matches).
    pub fn tuples(&self) -> usize {
        self.tuples.len()
    }
}

/// The cache slot of `key`: its words folded (source and destination rotated apart, so that
/// a flow and its reverse differ) and mixed by one multiplication, the top bits.
#[inline]
fn cache_slot(key: &AclKey) -> usize {
    const MIX: u64 = 0x517c_c1b7_2722_0a95;
    let [source_high, source_low, destination_high, destination_low, meta] = key.0;
    let folded = source_high ^ source_low.rotate_left(21) ^ destination_high ^ destination_low.rotate_left(42) ^ meta;
    let hash = folded.wrapping_mul(MIX);
    (hash >> (64 - CACHE_SLOTS.trailing_zeros())) as usize
}

/// A rule as (mask, value) pairs over the key: one per combination of the prefixes its
/// port ranges become.
fn expand(rule: &AclRule) -> Vec<([u64; WORDS], [u64; WORDS])> {
    let mut mask = [0u64; WORDS];
    let mut value = [0u64; WORDS];
    let address = |prefix: crate::config::Prefix, mask: &mut [u64], value: &mut [u64]| match prefix.address {
        IpAddr::V4(address) => {
            let bits = if prefix.len == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix.len)) };
            mask[1] = u64::from(bits);
            value[1] = u64::from(u32::from(address) & bits);
        }
        IpAddr::V6(address) => {
            let bits = if prefix.len == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix.len)) };
            let address = u128::from(address) & bits;
            (mask[0], mask[1]) = ((bits >> 64) as u64, bits as u64);
            (value[0], value[1]) = ((address >> 64) as u64, address as u64);
        }
    };
    if let Some(src) = rule.src {
        address(src, &mut mask[0..2], &mut value[0..2]);
    }
    if let Some(dst) = rule.dst {
        address(dst, &mut mask[2..4], &mut value[2..4]);
    }
    if let Some(v6) = rule.family_v6() {
        mask[META] |= V6_BIT;
        value[META] |= if v6 { V6_BIT } else { 0 };
    }
    let mut field = |bits: u64, shift: u32, wanted: u64| {
        mask[META] |= bits << shift;
        value[META] |= (wanted & bits) << shift;
    };
    if let Some(protocol) = rule.protocol {
        field(0xff, PROTOCOL_SHIFT, u64::from(protocol));
    }
    if let Some(dscp) = rule.dscp {
        field(0x3f, DSCP_SHIFT, u64::from(dscp));
    }
    if let Some((flags, flags_mask)) = rule.tcp_flags {
        field(u64::from(flags_mask), TCP_FLAGS_SHIFT, u64::from(flags));
    }
    let needs_l4 = rule.src_port.is_some() || rule.dst_port.is_some() || rule.tcp_flags.is_some();
    if needs_l4 {
        mask[META] |= L4_BIT;
        value[META] |= L4_BIT;
    }
    let all_ports = [(0u16, 0u16)];
    let sources = rule.src_port.map_or_else(|| all_ports.to_vec(), |(low, high)| range_prefixes(low, high));
    let destinations = rule.dst_port.map_or_else(|| all_ports.to_vec(), |(low, high)| range_prefixes(low, high));
    let mut pairs = Vec::with_capacity(sources.len() * destinations.len());
    for &(source, source_mask) in &sources {
        for &(destination, destination_mask) in &destinations {
            let (mut mask, mut value) = (mask, value);
            mask[META] |= u64::from(source_mask) << SRC_PORT_SHIFT | u64::from(destination_mask) << DST_PORT_SHIFT;
            value[META] |= u64::from(source) << SRC_PORT_SHIFT | u64::from(destination) << DST_PORT_SHIFT;
            pairs.push((mask, value));
        }
    }
    pairs
}

/// The fewest (value, mask) prefixes whose union is `low..=high` (at most 30 for 16 bits).
fn range_prefixes(low: u16, high: u16) -> Vec<(u16, u16)> {
    let mut prefixes = Vec::new();
    let (mut low, high) = (u32::from(low), u32::from(high));
    while low <= high {
        // The largest aligned block starting at `low` that stays within the range.
        let mut size = if low == 0 { 1 << 16 } else { 1u32 << low.trailing_zeros() };
        while low + size - 1 > high {
            size >>= 1;
        }
        prefixes.push((low as u16, (!(size - 1) & 0xffff) as u16));
        low += size;
    }
    prefixes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::traffic::frames::{FrameSpec, Transport};
    use crate::wire::parse::{parse, Payload};
    use proptest::prelude::*;

    fn table(rules: &str) -> AclTable {
        let text = format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[[port]]\nname = \"p0\"\nspeed_gbps = 100\n\
             peer_mac = \"02:00:00:00:10:00\"\n[[acl]]\nname = \"a\"\nports = [\"p0\"]\n{rules}"
        );
        Config::parse(&text, "t.toml").unwrap().acls.remove(0)
    }

    fn key_of(frame: &[u8]) -> AclKey {
        let Payload::Ip(ip) = parse(frame).unwrap().payload else { panic!("not IP") };
        let header = IpHeader {
            l3_offset: ip.l3_offset as u16,
            is_ipv6: matches!(ip.destination, crate::wire::IpAddress::V6(_)),
            ecn: ip.ecn,
        };
        AclKey::read(frame, header, 0).unwrap()
    }

    fn udp(source: &str, destination: &str, dscp: u8, sport: u16, dport: u16) -> Vec<u8> {
        let (source, destination) = (source.parse().unwrap(), destination.parse().unwrap());
        FrameSpec {
            dscp,
            transport: Transport::Udp { source: sport, destination: dport },
            ..FrameSpec::rocev2(source, destination, 1)
        }
        .build()
    }

    #[test]
    fn the_best_rule_that_matches_wins_and_no_match_is_none() {
        let matcher = AclMatcher::new(&table(
            "[[acl.rule]]\npriority = 10\nsrc = \"10.0.0.0/24\"\nprotocol = \"udp\"\ndst_port = \"4791-4800\"\naction = \"drop\"\n\
             [[acl.rule]]\npriority = 20\nsrc = \"10.0.0.7/32\"\naction = \"permit\"\n\
             [[acl.rule]]\npriority = 5\ndscp = 26\naction = { tc = 1 }\n\
             [[acl.rule]]\npriority = 1\ndst = \"fd00::/16\"\naction = { dscp = 0 }\n",
        ));
        let rule = |frame: Vec<u8>| matcher.lookup(&key_of(&frame)).map(|found| found.rule);
        // Rules best first: 20 (index 0), 10, 5, 1.
        assert_eq!(rule(udp("10.0.0.1", "10.1.0.1", 0, 1000, 4791)), Some(1));
        assert_eq!(rule(udp("10.0.0.1", "10.1.0.1", 0, 1000, 4800)), Some(1));
        assert_eq!(rule(udp("10.0.0.1", "10.1.0.1", 0, 1000, 4801)), None);
        assert_eq!(rule(udp("10.0.0.7", "10.1.0.1", 0, 1000, 4791)), Some(0), "the /32 permit outranks the drop");
        assert_eq!(rule(udp("10.0.0.1", "10.1.0.1", 26, 1000, 4791)), Some(1), "the drop outranks the DSCP rule");
        assert_eq!(rule(udp("10.0.1.1", "10.1.0.1", 26, 1000, 4791)), Some(2));
        assert_eq!(rule(udp("fd01::1", "fd00::2", 0, 1, 2)), Some(3));
        assert_eq!(rule(udp("fd01::1", "fd01::2", 0, 1, 2)), None);
        // An IPv4 frame whose low address bits equal an IPv6 rule's never matches it.
        assert_eq!(matcher.lookup(&key_of(&udp("10.0.1.1", "10.1.0.1", 0, 1, 2))), None);
        // 4791-4800 is 4791, 4792-4799 and 4800: two masks; one each for the other rules.
        assert_eq!(matcher.tuples(), 2 + 3);
    }

    #[test]
    fn tcp_flags_match_under_their_mask_and_fragments_skip_port_rules() {
        let matcher = AclMatcher::new(&table(
            "[[acl.rule]]\npriority = 2\nprotocol = \"tcp\"\ndst_port = 179\ntcp_flags = \"0x02/0x12\"\naction = \"drop\"\n\
             [[acl.rule]]\npriority = 1\nprotocol = \"udp\"\naction = \"permit\"\n",
        ));
        let tcp = |flags: u8| {
            let mut frame = FrameSpec {
                transport: Transport::Tcp { source: 40000, destination: 179 },
                ..FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 1)
            }
            .build();
            frame[14 + 20 + 13] = flags;
            frame
        };
        assert_eq!(matcher.lookup(&key_of(&tcp(0x02))).map(|found| found.rule), Some(0), "SYN");
        assert_eq!(matcher.lookup(&key_of(&tcp(0x12))), None, "SYN-ACK");
        assert_eq!(matcher.lookup(&key_of(&tcp(0x10))), None, "ACK");
        // A non-first UDP fragment: the protocol rule matches, a port rule could not.
        let mut fragment = udp("10.0.0.1", "10.0.0.2", 0, 1, 179);
        fragment[14 + 6..14 + 8].copy_from_slice(&0x0010u16.to_be_bytes());
        crate::wire::ipv4::Packet::new_unchecked(&mut fragment[14..]).fill_checksum();
        let key = key_of(&fragment);
        assert_eq!(key.0[META] & L4_BIT, 0);
        assert_eq!(matcher.lookup(&key).map(|found| found.rule), Some(1));
    }

    #[test]
    fn a_key_with_another_dscp_is_the_key_of_the_remarked_frame() {
        let frame = udp("10.0.0.1", "10.0.0.2", 26, 1, 2);
        let remarked = udp("10.0.0.1", "10.0.0.2", 46, 1, 2);
        assert_eq!(key_of(&frame).with_dscp(46), key_of(&remarked));
        assert_eq!(key_of(&frame).with_dscp(26), key_of(&frame));
        assert_ne!(key_of(&frame).with_dscp(0), key_of(&frame));
    }

    #[test]
    fn keys_sharing_a_cache_slot_each_get_their_own_answer() {
        let mut matcher = AclMatcher::new(&table(
            "[[acl.rule]]\npriority = 1\nprotocol = \"udp\"\ndst_port = 7\naction = \"drop\"\n",
        ));
        let hit = key_of(&udp("10.0.0.1", "10.0.0.2", 0, 1, 7));
        let slot = cache_slot(&hit);
        // Another key in the same slot that no rule matches: found by walking source ports.
        let miss = (2..u16::MAX)
            .map(|port| key_of(&udp("10.0.0.1", "10.0.0.2", 0, port, 8)))
            .find(|key| cache_slot(key) == slot)
            .expect("4,096 slots: some source port lands in this one");
        for _ in 0..2 {
            assert_eq!(matcher.lookup_cached(&hit).map(|found| found.rule), Some(0));
            assert_eq!(matcher.lookup_cached(&miss), None);
        }
    }

    /// The key as the parser's walk reads it: the reference for the fixed-offset read.
    fn key_by_walk(frame: &[u8]) -> AclKey {
        let Payload::Ip(ip) = parse(frame).unwrap().payload else { panic!("not IP") };
        let mut key = key_of(frame).0;
        key[META] &= !(0xff << PROTOCOL_SHIFT | L4_BIT | 0xff_ffff_ffff);
        let is_ipv6 = matches!(ip.destination, crate::wire::IpAddress::V6(_));
        let (protocol, transport) = parse::transport(frame, ip.l3_offset, is_ipv6, 0).unwrap();
        key[META] |= u64::from(protocol) << PROTOCOL_SHIFT;
        if let Some(parse::Transport { ports: Some((source, destination)), tcp_flags }) = transport {
            key[META] |= l4_bits(source, destination, tcp_flags.unwrap_or(0));
        }
        AclKey(key)
    }

    #[test]
    fn the_fixed_offset_read_finds_what_the_parser_walks_to() {
        let v6 = |next: u8, extension: &[u8], l4: &[u8]| {
            let mut frame = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0x10, 0x01, 0x86, 0xdd];
            let payload_len = (extension.len() + l4.len()) as u16;
            frame.extend_from_slice(&[0x6b, 0x80, 0x00, 0x00]);
            frame.extend_from_slice(&payload_len.to_be_bytes());
            frame.extend_from_slice(&[next, 0x40]);
            frame.extend_from_slice(&[0xfd; 32]);
            frame.extend_from_slice(extension);
            frame.extend_from_slice(l4);
            frame
        };
        let tcp_syn = [0x30, 0x39, 0x00, 0xb3, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0];
        let udp_4792 = [0xc0, 0x00, 0x12, 0xb8, 0x00, 0x0c, 0, 0, 1, 2, 3, 4];
        let hop_by_hop = |next: u8| [next, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00];
        let mut later_fragment = udp("10.0.0.1", "10.0.0.2", 26, 49152, 53);
        later_fragment[14 + 6..14 + 8].copy_from_slice(&0x0001u16.to_be_bytes());
        later_fragment[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
        let sum = crate::wire::checksum::internet_checksum(&later_fragment[14..14 + 20]);
        later_fragment[14 + 10..14 + 12].copy_from_slice(&sum.to_be_bytes());
        let frames = [
            udp("10.0.0.1", "10.0.0.2", 26, 49152, 4791),
            udp("fd00::1", "fd00:1::2", 46, 1000, 53),
            v6(6, &[], &tcp_syn),
            v6(17, &[], &udp_4792),
            v6(0, &hop_by_hop(6), &tcp_syn),
            v6(0, &hop_by_hop(17), &udp_4792),
            v6(0, &hop_by_hop(58), &[128, 0, 0, 0, 0, 1, 0, 1]),
            v6(58, &[], &[128, 0, 0, 0, 0, 1, 0, 1]),
            // A later IPv4 fragment: its bytes where the ports would be are not ports.
            later_fragment,
        ];
        for frame in &frames {
            assert_eq!(key_of(frame), key_by_walk(frame), "{frame:02x?}");
        }
        // The TCP flags and the ports landed in the key (not just agreed on as absent).
        assert_eq!(key_of(&frames[4]).0[META] & (L4_BIT | 0xff << TCP_FLAGS_SHIFT), L4_BIT | 0x02 << TCP_FLAGS_SHIFT);
        assert_eq!(key_of(&frames[5]).0[META] & 0xffff, 4792);
        assert_eq!(key_of(&frames[8]).0[META] & L4_BIT, 0);
    }

    #[test]
    fn a_range_becomes_the_fewest_prefixes_that_cover_it() {
        assert_eq!(range_prefixes(0, 65535), [(0, 0)]);
        assert_eq!(range_prefixes(4791, 4791), [(4791, 0xffff)]);
        assert_eq!(range_prefixes(1024, 2047), [(1024, 0xfc00)]);
        assert_eq!(range_prefixes(65535, 65535), [(65535, 0xffff)]);
        assert_eq!(range_prefixes(1, 65534).len(), 30);
    }

    /// A rule matches a frame's fields, read the plain way.
    fn walk(table: &AclTable, frame: &[u8]) -> Option<u16> {
        let Payload::Ip(ip) = parse(frame).unwrap().payload else { return None };
        let l3 = &frame[ip.l3_offset..];
        let source = IpAddr::V4(ipv4::Packet::new_unchecked(l3).source());
        let destination = IpAddr::V4(ipv4::Packet::new_unchecked(l3).destination());
        let ports = parse::transport_ports(frame, &ip, 0);
        let within = |range: Option<(u16, u16)>, port: Option<u16>| {
            range.is_none_or(|(low, high)| port.is_some_and(|port| (low..=high).contains(&port)))
        };
        table
            .rules
            .iter()
            .position(|rule| {
                rule.src.is_none_or(|prefix| prefix.contains(source))
                    && rule.dst.is_none_or(|prefix| prefix.contains(destination))
                    && rule.protocol.is_none_or(|protocol| protocol == ip.protocol)
                    && rule.dscp.is_none_or(|dscp| dscp == ip.dscp)
                    && within(rule.src_port, ports.map(|ports| ports.1))
                    && within(rule.dst_port, ports.map(|ports| ports.2))
            })
            .map(|index| index as u16)
    }

    proptest! {
        #[test]
        fn lookup_finds_what_a_walk_of_the_rules_finds(
            rules in proptest::collection::vec(
                (0u8..4, 0u8..33, 0u8..4, 0u8..33, prop::option::of(0u8..3), prop::option::of((0u16..40, 0u16..40)), prop::option::of(0u8..3)),
                1..12,
            ),
            frames in proptest::collection::vec((0u8..4, 0u8..4, 0u16..40, 0u16..40, 0u8..3, any::<bool>()), 1..20),
        ) {
            let mut text = String::new();
            for (index, (src, src_len, dst, dst_len, dscp, ports, protocol)) in rules.iter().enumerate() {
                let prefix = |octet: u8, len: u8| {
                    let address = u32::from_be_bytes([10, octet, 0, 0]);
                    let bits = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
                    format!("{}/{len}", std::net::Ipv4Addr::from(address & bits))
                };
                text += &format!("[[acl.rule]]\npriority = {}\nsrc = \"{}\"\ndst = \"{}\"\n", 100 - index, prefix(*src, *src_len), prefix(*dst, *dst_len));
                if let Some(dscp) = dscp {
                    text += &format!("dscp = {dscp}\n");
                }
                let protocol = protocol.map(|protocol| [6, 17, 1][usize::from(protocol)]);
                if let Some(protocol) = protocol {
                    text += &format!("protocol = {protocol}\n");
                    if let (Some((low, high)), 6 | 17) = (ports, protocol) {
                        text += &format!("dst_port = \"{}-{}\"\n", low.min(high) + 1000, low.max(high) + 1000);
                    }
                }
                text += "action = \"drop\"\n";
            }
            let table = table(&text);
            let mut matcher = AclMatcher::new(&table);
            for (src, dst, sport, dport, dscp, is_tcp) in frames {
                let frame = FrameSpec {
                    dscp,
                    transport: if is_tcp {
                        Transport::Tcp { source: sport + 1000, destination: dport + 1000 }
                    } else {
                        Transport::Udp { source: sport + 1000, destination: dport + 1000 }
                    },
                    ..FrameSpec::rocev2(IpAddr::V4([10, src, 0, 1].into()), IpAddr::V4([10, dst, 0, 2].into()), 1)
                }
                .build();
                let key = key_of(&frame);
                prop_assert_eq!(matcher.lookup(&key).map(|found| found.rule), walk(&table, &frame));
                // Cached, twice: the miss that fills the slot and the hit.
                prop_assert_eq!(matcher.lookup_cached(&key), matcher.lookup(&key));
                prop_assert_eq!(matcher.lookup_cached(&key), matcher.lookup(&key));
            }
        }
    }
}
