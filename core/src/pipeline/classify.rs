//! The classify stage: from a parsed frame to a decision (forward to a route target in a
//! traffic class, consume a PFC frame, punt to the control plane, or drop with a reason). It
//! only reads the frame: a forwarded frame's headers are written by `pipeline::rewrite` once
//! the switch has made its own decisions (ACLs, a group's member, the egress port's MTU).
//!
//! First the front door, as an ASIC's: a frame to another station's unicast MAC is dropped
//! (`not_router_mac`); martian addresses (`wire::scope`) are dropped; link-scope destinations go
//! to the control plane without a lookup; other multicast is dropped. A frame to a broadcast or
//! multicast MAC, and a packet from a link-local source, reach only the switch's own addresses,
//! never a route.
//!
//! With `[control]`, frames for the control plane are punted as received, each in its CoPP
//! class (`config::CoppClass`): ARP, slow protocols (LACP), LLDP and listed EtherTypes; IP to one
//! of the ports' addresses (a /32 or /128 route of its own, so the check costs no extra
//! lookup), or link-scope (IPv6 link-local, link-scope multicast, IPv4 broadcast or
//! link-local multicast), sorted by what it carries (BGP, BFD, ND, the rest); routed packets
//! whose TTL would expire, or whose next hop is unresolved (glean); unicast with no route at
//! all, for the kernel's ICMP unreachable. Without it, these are dropped (`unsupported`,
//! `multicast`, `ttl_expired`, `no_route`). The egress port's MTU is the switch's to check, once it has
//! chosen the port (`Switch::receive`).
//!
//! Invariant: the frame is borrowed immutably, so every frame leaves the stage byte for byte as
//! it came in; every outcome but `Forward` carries its reason.

use crate::config::CoppClass;
use crate::config::{Config, Trust};
use crate::drops::DropReason;
use crate::pipeline::fib::{Fib, FibHandle, KernelReason, Learned, Next};
use crate::pipeline::resolve::{ResolveCache, Resolved};
use crate::wire::ethernet::{self, MacAddress};
use crate::wire::parse::{self, Payload};
use crate::wire::scope::{self, DestinationScope, SourceScope};
use crate::wire::IpAddress;
use crate::wire::{ipv4, pfc, IpHeader};
use std::sync::Arc;

/// What to do with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Queue towards `next` (an adjacency, or a group whose member the switch picks, by the
    /// flow's hash: `parse::flow_hash`) in traffic class `tc`; `ip` says where the IP header is
    /// and its ECN bits, for marking.
    Forward {
        next: Next,
        tc: u8,
        ip: IpHeader,
    },
    /// A PFC frame for the receiving port's egress.
    FlowControl(pfc::Repr),
    /// An 802.3x PAUSE frame and its time in quanta, for the receiving port's egress (obeyed
    /// where the port honours PAUSE).
    LinkPause(u16),
    /// For the control plane, unchanged, in this CoPP class.
    Punt(CoppClass),
    Drop(DropReason),
}

/// What the classifier punts, with `[control]`.
struct Punting {
    ethertypes: Vec<u16>,
}

pub struct Classifier {
    fib: Arc<Fib>,
    /// What destinations resolved to in `fib` (emptied when `fib` is replaced).
    resolved: ResolveCache,
    punting: Option<Punting>,
    trust: Trust,
    dscp_to_tc: [u8; 64],
    pcp_to_tc: [u8; 8],
    /// With DSCP trust, the PFC priority a sender's NIC gives each DSCP (`priority`).
    dscp_to_priority: [u8; 64],
    switch_mac: MacAddress,
    port_enabled: Vec<bool>,
    /// Each port's link up and not shut (live: `set_port_up`); always in replay.
    port_up: Vec<bool>,
}

impl Classifier {
    pub fn new(config: &Config) -> Self {
        Self::with_fib(config, Arc::new(Fib::new(config, &Learned::default(), 1)))
    }

    /// A classifier that looks up `fib` (which `config` and the control plane built).
    pub fn with_fib(config: &Config, fib: Arc<Fib>) -> Self {
        Self {
            fib,
            resolved: ResolveCache::default(),
            punting: config.control.as_ref().map(|control| Punting { ethertypes: control.punt_ethertypes.clone() }),
            trust: config.qos.trust,
            dscp_to_tc: config.qos.dscp_to_tc,
            pcp_to_tc: config.qos.pcp_to_tc,
            dscp_to_priority: config.qos.dscp_to_priority,
            switch_mac: config.mac,
            port_enabled: config.ports.iter().map(|port| port.enabled).collect(),
            port_up: vec![true; config.ports.len()],
        }
    }

    /// Takes the QoS maps of a reloaded config (`switch::Reconfiguration`).
    pub fn set_qos_maps(&mut self, qos: &crate::config::Qos) {
        self.trust = qos.trust;
        self.dscp_to_tc = qos.dscp_to_tc;
        self.pcp_to_tc = qos.pcp_to_tc;
        self.dscp_to_priority = qos.dscp_to_priority;
    }

    /// Classifies `frame`.
    #[inline(always)]
    pub fn classify(&mut self, frame: &[u8]) -> Verdict {
        self.classify_beyond(frame, 0)
    }

    /// `classify` for a frame of which `frame` holds the first bytes and `beyond` more follow
    /// elsewhere (a chained mbuf's first segment: `parse::parse_beyond`). Only headers are
    /// read, and they are all in `frame`.
    #[inline(always)]
    pub fn classify_beyond(&mut self, frame: &[u8], beyond: usize) -> Verdict {
        match self.plain_routed(frame, beyond) {
            Some(verdict) => verdict,
            None => self.classify_parsed(frame, beyond),
        }
    }

    /// The common frame, routed: plain IPv4 (`parse::plain_ipv4`) to the switch's MAC, to a
    /// destination resolved to a next hop, with TTL to spare. The verdict `classify_parsed`
    /// gives it, for fewer instructions; `None` for every other frame, which
    /// `classify_parsed` judges (the test
    /// `the_plain_path_forwards_only_what_the_whole_path_forwards_and_says_the_same`).
    #[inline(always)]
    fn plain_routed(&mut self, frame: &[u8], beyond: usize) -> Option<Verdict> {
        let ip = parse::plain_ipv4(frame, beyond)?;
        // The group bit too: the config does not refuse a group address as the switch's MAC,
        // and the whole path never routes a frame sent to one.
        if frame.first_chunk::<6>() != Some(&self.switch_mac.0) || frame[0] & 1 != 0 || ip.ttl <= 1 {
            return None;
        }
        let Resolved::Next(next) = self.resolved.resolve(&self.fib, IpAddress::V4(ip.destination), &self.port_enabled)
        else {
            return None;
        };
        let tc = match self.trust {
            Trust::Dscp => self.dscp_to_tc[usize::from(ip.dscp)],
            // Untagged: PCP 0, as `classify_parsed` takes it.
            Trust::Pcp => self.pcp_to_tc[0],
        };
        let header = IpHeader { l3_offset: ethernet::HEADER_LEN as u16, is_ipv6: false, ecn: ip.ecn };
        Some(Verdict::Forward { next, tc, ip: header })
    }

    /// `classify_beyond` for any frame, through the whole parse.
    #[inline(never)]
    fn classify_parsed(&mut self, frame: &[u8], beyond: usize) -> Verdict {
        let parsed = match parse::parse_beyond(frame, beyond) {
            Ok(parsed) => parsed,
            Err(_) => return Verdict::Drop(DropReason::Malformed),
        };
        // A router takes only what is sent to it (RFC 1812 §5.3.4): frames to another
        // station's MAC are not its to route or to answer. The parse vouched for the header.
        let to_group_mac = frame[0] & 1 != 0;
        if !to_group_mac && frame[..6] != self.switch_mac.0 {
            return Verdict::Drop(DropReason::NotRouterMac);
        }
        let ip = match parsed.payload {
            Payload::Ip(ip) => ip,
            Payload::FlowControl(repr) => return Verdict::FlowControl(repr),
            Payload::LinkPause(quanta) => return Verdict::LinkPause(quanta),
            Payload::NotRoutable(ethertype) => return self.not_routable(ethertype),
        };
        if ip.source_scope == SourceScope::Martian {
            return Verdict::Drop(DropReason::Martian);
        }
        let destination_scope = scope::destination(ip.destination);
        match destination_scope {
            DestinationScope::Routable | DestinationScope::LinkLocalV4 => {}
            DestinationScope::OnLink => {
                return match self.punting {
                    Some(_) => Verdict::Punt(local_class(frame, &ip, beyond)),
                    // Only a control plane takes these; unicast is as unrouted as the
                    // switch's own addresses are without one.
                    None if is_multidestination(ip.destination) => Verdict::Drop(DropReason::Multicast),
                    None => Verdict::Drop(DropReason::NoRoute),
                };
            }
            DestinationScope::Multicast => return Verdict::Drop(DropReason::Multicast),
            DestinationScope::Martian => return Verdict::Drop(DropReason::Martian),
        }
        let resolved = self.resolved.resolve(&self.fib, ip.destination, &self.port_enabled);
        let for_switch = match resolved {
            Resolved::Local => true,
            Resolved::Kernel(reason) => reason.delivers_locally(),
            _ => false,
        };
        if for_switch {
            // Without a control plane nothing consumes frames to the switch's addresses
            // (config validation keeps addresses for `[control]`).
            return match self.punting {
                Some(_) => Verdict::Punt(local_class(frame, &ip, beyond)),
                None => Verdict::Drop(DropReason::NoRoute),
            };
        }
        // From here the packet would be routed, or answered with an ICMP error as one that
        // could have been: never when it came to a broadcast or multicast MAC (RFC 1812
        // §5.3.4), and never from or to a link-local address (RFC 3927 §2.7, RFC 4291 §2.5.6).
        if to_group_mac {
            return Verdict::Drop(DropReason::NotRouterMac);
        }
        if ip.source_scope == SourceScope::OnLink || destination_scope == DestinationScope::LinkLocalV4 {
            return Verdict::Drop(DropReason::Martian);
        }
        // `None`: the next hop is not resolved (glean).
        let next = match resolved {
            Resolved::Next(next) => Some(next),
            Resolved::Glean => None,
            // The kernel would hold these while it tries to resolve a neighbour behind a link
            // that is down (seconds of ARP retries), then send them late: dropped here instead.
            Resolved::GleanOn(port) if !self.port_up.get(usize::from(port)).copied().unwrap_or(true) => {
                return Verdict::Drop(DropReason::LinkDown)
            }
            Resolved::GleanOn(_) => None,
            // The kernel sends the ICMP unreachable. It does its own TTL check first, as a
            // router would.
            Resolved::Unrouted if self.punting.is_some() => return Verdict::Punt(CoppClass::Unreachable),
            Resolved::Blackhole => return Verdict::Drop(DropReason::Blackhole),
            // The kernel's answer: its ICMP error, or forwarding what the data plane does not
            // represent. It checks the TTL itself.
            Resolved::Kernel(reason) if self.punting.is_some() => {
                return Verdict::Punt(match reason {
                    KernelReason::Unreachable | KernelReason::Prohibit | KernelReason::Throw => CoppClass::Unreachable,
                    _ => CoppClass::Kernel,
                })
            }
            Resolved::Local | Resolved::NoRoute | Resolved::Unrouted | Resolved::Kernel(_) => {
                return Verdict::Drop(DropReason::NoRoute)
            }
        };
        if ip.ttl <= 1 {
            return match self.punting {
                Some(_) => Verdict::Punt(CoppClass::Ttl),
                None => Verdict::Drop(DropReason::TtlExpired),
            };
        }
        // The egress port's MTU is checked once the switch has chosen the port
        // (`Switch::receive`): a group's members may differ.
        let Some(next) = next else {
            // The kernel resolves the neighbour and forwards these first frames itself.
            return match self.punting {
                Some(_) => Verdict::Punt(CoppClass::Glean),
                None => Verdict::Drop(DropReason::NoRoute),
            };
        };
        let tc = match self.trust {
            Trust::Dscp => self.dscp_to_tc[usize::from(ip.dscp)],
            Trust::Pcp => self.pcp_to_tc[usize::from(parsed.pcp.unwrap_or(0))],
        };
        let header = IpHeader {
            l3_offset: ip.l3_offset as u16,
            is_ipv6: matches!(ip.destination, IpAddress::V6(_)),
            ecn: ip.ecn,
        };
        Verdict::Forward { next, tc, ip: header }
    }

    /// A frame that is not IP, PFC or PAUSE: punted when the control plane takes it.
    fn not_routable(&self, ethertype: ethernet::EtherType) -> Verdict {
        let Some(punting) = &self.punting else { return Verdict::Drop(DropReason::Unsupported) };
        match u16::from(ethertype) {
            ETHERTYPE_ARP => Verdict::Punt(CoppClass::Arp),
            ETHERTYPE_SLOW_PROTOCOLS => Verdict::Punt(CoppClass::Lacp),
            ETHERTYPE_LLDP => Verdict::Punt(CoppClass::Lldp),
            value if value != ETHERTYPE_MAC_CONTROL && punting.ethertypes.contains(&value) => {
                Verdict::Punt(CoppClass::Other)
            }
            _ => Verdict::Drop(DropReason::Unsupported),
        }
    }

    /// Records whether a port's link is up and not shut (live): destinations on its subnet
    /// with no neighbour are then dropped as `link_down` rather than gleaned.
    pub fn set_port_up(&mut self, port: usize, up: bool) {
        if let Some(slot) = self.port_up.get_mut(port) {
            *slot = up;
        }
    }

    /// Takes the handle's snapshot if it is newer (one atomic load when it is not); true when
    /// it changed.
    #[inline]
    pub fn refresh(&mut self, handle: &FibHandle) -> bool {
        if handle.generation() == self.fib.generation {
            return false;
        }
        self.fib = handle.load();
        self.resolved.forget();
        true
    }

    /// Forwards by `fib` from the next frame on (a reload without a control plane); returns
    /// the tables it replaced, for the caller to free off the packet path.
    pub fn replace_fib(&mut self, fib: Arc<Fib>) -> Arc<Fib> {
        self.resolved.forget();
        std::mem::replace(&mut self.fib, fib)
    }

    /// The forwarding tables this classifier reads.
    #[inline]
    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    /// The PFC priority a frame travels in, as its sender's NIC would queue it (and as a
    /// pause for that priority holds it): its PCP with PCP trust, `dscp_to_pfc_priority` of
    /// its DSCP with DSCP trust; `None` for PAUSE/PFC frames, which no pause holds back.
    /// Frames that do not parse as IP travel in priority 0.
    pub fn priority(&self, frame: &[u8]) -> Option<u8> {
        match parse::parse(frame) {
            Ok(parsed) => match parsed.payload {
                Payload::FlowControl(_) | Payload::LinkPause(_) => None,
                Payload::Ip(ip) => Some(match self.trust {
                    Trust::Dscp => self.dscp_to_priority[usize::from(ip.dscp)],
                    Trust::Pcp => parsed.pcp.unwrap_or(0),
                }),
                Payload::NotRoutable(_) => Some(0),
            },
            Err(_) => Some(0),
        }
    }
}

const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_LLDP: u16 = 0x88cc;
/// IEEE 802.3 Annex 57A: LACP, marker, OAM.
const ETHERTYPE_SLOW_PROTOCOLS: u16 = 0x8809;
/// BGP (RFC 4271).
const BGP_PORT: u16 = 179;
/// BFD control packets, single hop (RFC 5881) and multihop (RFC 5883).
const BFD_PORTS: [u16; 2] = [3784, 4784];
const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// ICMPv6 router solicitation .. redirect (RFC 4861).
const ND_TYPES: std::ops::RangeInclusive<u8> = 133..=137;

/// Whether `destination` is IPv4 multicast or limited broadcast, or IPv6 multicast.
fn is_multidestination(destination: IpAddress) -> bool {
    match destination {
        IpAddress::V4(address) => address >> 28 == 0xe || address == u32::MAX,
        IpAddress::V6(address) => address >> 120 == 0xff,
    }
}

/// The CoPP class of an IP packet for the switch: `arp` for neighbour discovery (ICMPv6
/// straight after the IPv6 header, types 133-137), `bgp` for TCP from or to port 179, `bfd`
/// for UDP to 3784/4784, else `ip2me`. Only punted frames pay for reading the ports.
fn local_class(frame: &[u8], ip: &parse::IpPacket, beyond: usize) -> CoppClass {
    let is_nd = matches!(ip.destination, IpAddress::V6(_))
        && frame.get(ip.l3_offset + 6) == Some(&58)
        && frame.get(ip.l3_offset + 40).is_some_and(|kind| ND_TYPES.contains(kind));
    if is_nd {
        return CoppClass::Arp;
    }
    match parse::transport_ports(frame, ip, beyond) {
        Some((ipv4::protocol::TCP, source, destination)) if source == BGP_PORT || destination == BGP_PORT => {
            CoppClass::Bgp
        }
        Some((ipv4::protocol::UDP, _, destination)) if BFD_PORTS.contains(&destination) => CoppClass::Bfd,
        _ => CoppClass::Ip2me,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::fib::Adjacency;
    use crate::traffic::frames::Transport;

    /// p0, p1 (10.0.1.0/24) and p2 at 100G; group g over p1 and p2 for 10.0.2.0/24; DSCP 26
    /// in TC3, 48 in TC6, PCP 3 in TC4.
    static CONFIG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::testing::Leaf::new("t")
            .qos("dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }\npcp_to_tc = { 3 = 4, default = 1 }")
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .port("p2", 100.0, "")
            .route("10.0.1.0/24", "p1")
            .group_route("10.0.2.0/24", "g")
            .group("g", &["p1", "p2"], "ecmp")
            .toml()
    });

    fn classifier(text: &str) -> Classifier {
        Classifier::new(&Config::parse(text, "t.toml").unwrap())
    }

    #[test]
    fn forward_names_the_next_hop_class_and_header_and_writes_nothing() {
        let mut classifier = classifier(&CONFIG);
        let frame = crate::wire::parse::tests::rocev2_frame(false);
        let verdict = classifier.classify(&frame);
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0b10 };
        let Verdict::Forward { next, tc, ip: header, .. } = verdict else { panic!("{verdict:?}") };
        let peer = MacAddress([0x02, 0, 0, 0, 0x11, 0x00]);
        assert_eq!((next, tc, header), (Next::Adjacency(Adjacency { port: 1, mac: peer }), 3, ip));
    }

    #[test]
    fn pcp_trust_uses_the_vlan_tag() {
        let mut classifier = classifier(&CONFIG.replace("[qos]", "[qos]\ntrust = \"pcp\""));
        let tagged = crate::wire::parse::tests::rocev2_frame(true);
        assert!(matches!(classifier.classify(&tagged), Verdict::Forward { tc: 4, .. }));
        let untagged = crate::wire::parse::tests::rocev2_frame(false);
        assert!(matches!(classifier.classify(&untagged), Verdict::Forward { tc: 1, .. }));
    }

    #[test]
    fn drops_carry_their_reasons() {
        let mut classifier = classifier(&CONFIG);
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        frame[14 + 8] = 1; // TTL 1
        crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        assert_eq!(classifier.classify(&frame), Verdict::Drop(DropReason::TtlExpired));

        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        frame[14 + 18] = 9; // 10.0.9.2: no route
        crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        assert_eq!(classifier.classify(&frame), Verdict::Drop(DropReason::NoRoute));

        let mut truncated = crate::wire::parse::tests::rocev2_frame(false);
        truncated.truncate(30);
        assert_eq!(classifier.classify(&truncated), Verdict::Drop(DropReason::Malformed));
    }

    #[test]
    fn groups_are_targets_and_one_flow_hashes_alike() {
        let mut classifier = classifier(&CONFIG);
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        frame[14 + 18] = 2; // 10.0.2.2: the group
        crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        let first = classifier.classify(&frame);
        assert_eq!(first, classifier.classify(&frame), "one flow, one hash");
        assert!(matches!(first, Verdict::Forward { next: Next::Group(0), .. }), "{first:?}");
    }

    #[test]
    fn a_route_to_a_disabled_port_is_no_route() {
        let text = CONFIG.replace("name = \"p1\"\n", "name = \"p1\"\nenabled = false\n");
        let mut classifier = classifier(&text);
        let frame = crate::wire::parse::tests::rocev2_frame(false);
        assert_eq!(classifier.classify(&frame), Verdict::Drop(DropReason::NoRoute));
    }

    const CONTROL: &str = "[control]\npunt_ethertypes = [\"0x88b7\"]\n";

    /// CONFIG with `[control]` and addresses on p0 (10.0.0.1/31, fd00::1/127).
    fn with_control() -> Classifier {
        classifier(&with_control_text())
    }

    fn with_control_text() -> String {
        let text = CONFIG.replace("name = \"p0\"\n", "name = \"p0\"\naddresses = [\"10.0.0.1/31\", \"fd00::1/127\"]\n");
        format!("{text}{CONTROL}")
    }

    fn ethernet(ethertype: u16, len: usize) -> Vec<u8> {
        let mut frame = vec![0u8; len];
        frame[0..6].copy_from_slice(&[0xff; 6]);
        frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x10, 0x01]);
        frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
        frame
    }

    fn ip_frame(source: &str, destination: &str, ttl: u8) -> Vec<u8> {
        carrying(source, destination, ttl, Transport::Udp { source: 1000, destination: 2000 })
    }

    fn carrying(source: &str, destination: &str, ttl: u8, transport: Transport) -> Vec<u8> {
        let mut spec =
            crate::traffic::frames::FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), 1);
        spec.transport = transport;
        spec.ttl = ttl;
        spec.build()
    }

    /// An IPv6 frame whose next header is ICMPv6 of `kind` (the UDP bytes stand in for it).
    fn icmpv6(destination: &str, kind: u8) -> Vec<u8> {
        let mut frame = ip_frame("fd00::2", destination, 255);
        frame[14 + 6] = 58;
        frame[14 + 40] = kind;
        frame
    }

    fn verdict(classifier: &mut Classifier, frame: Vec<u8>) -> Verdict {
        classifier.classify(&frame)
    }

    #[test]
    fn with_control_the_control_plane_gets_its_frames_unchanged() {
        let mut classifier = with_control();
        let punt = |class| Verdict::Punt(class);
        assert_eq!(verdict(&mut classifier, ethernet(0x0806, 42)), punt(CoppClass::Arp));
        assert_eq!(verdict(&mut classifier, ethernet(0x88cc, 60)), punt(CoppClass::Lldp));
        assert_eq!(verdict(&mut classifier, ethernet(0x8809, 60)), punt(CoppClass::Lacp), "slow protocols");
        assert_eq!(verdict(&mut classifier, ethernet(0x88b7, 60)), punt(CoppClass::Other), "listed");
        assert_eq!(verdict(&mut classifier, ethernet(0x88b5, 60)), Verdict::Drop(DropReason::Unsupported));
        // To our addresses, whatever routes cover them.
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.0.1", 64)), punt(CoppClass::Ip2me));
        assert_eq!(verdict(&mut classifier, icmpv6("fd00::1", 128)), punt(CoppClass::Ip2me), "ping");
        assert_eq!(verdict(&mut classifier, icmpv6("fd00::1", 135)), punt(CoppClass::Arp), "unicast NS");
        // Neighbour discovery to solicited-node and all-routers multicast, and link-local.
        assert_eq!(verdict(&mut classifier, icmpv6("ff02::1:ff00:1", 135)), punt(CoppClass::Arp));
        assert_eq!(verdict(&mut classifier, icmpv6("ff02::2", 133)), punt(CoppClass::Arp));
        assert_eq!(verdict(&mut classifier, icmpv6("fe80::1", 136)), punt(CoppClass::Arp));
        assert_eq!(verdict(&mut classifier, icmpv6("ff02::16", 143)), punt(CoppClass::Ip2me), "MLD");
        assert_eq!(verdict(&mut classifier, ip_frame("fe80::2", "ff02::1:2", 1)), punt(CoppClass::Ip2me));
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "224.0.0.5", 1)), punt(CoppClass::Ip2me));
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "255.255.255.255", 1)), punt(CoppClass::Ip2me));
        // A routed packet that would expire: the kernel sends time-exceeded.
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.1.2", 1)), punt(CoppClass::Ttl));
        // No route: the kernel sends net unreachable, v4 and v6; multicast beyond the link
        // is not routed at all (no ICMP error answers multicast either).
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.9.2", 64)), punt(CoppClass::Unreachable));
        assert_eq!(verdict(&mut classifier, ip_frame("fd00::2", "fd09::2", 64)), punt(CoppClass::Unreachable));
        let multicast = Verdict::Drop(DropReason::Multicast);
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "224.0.1.5", 64)), multicast);
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "239.1.1.1", 64)), multicast);
        assert_eq!(verdict(&mut classifier, ip_frame("fd00::2", "ff0e::1", 64)), multicast);
        // The route lookup comes first, as in Linux (ip_forward's TTL check needs a route).
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.9.2", 1)), punt(CoppClass::Unreachable));
        // The rest is forwarded as before.
        assert!(matches!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.1.2", 64)), Verdict::Forward { .. }));
        // The peer's end of the /31 is on the connected subnet, not ours: with no neighbour
        // entry yet, the kernel resolves it (glean).
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.1.2", "10.0.0.0", 64)), punt(CoppClass::Glean));
        // PFC and PAUSE are still the data plane's.
        let mut pause = ethernet(0x8808, 60);
        pause[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x01]);
        pause[14..18].copy_from_slice(&[0x00, 0x01, 0x00, 0x64]);
        assert_eq!(verdict(&mut classifier, pause.clone()), Verdict::LinkPause(0x64));
        // PAUSE to the switch's own MAC is obeyed too (802.3 Annex 31B); to another station's,
        // it is not the switch's.
        let mut unicast_pause = pause.clone();
        unicast_pause[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        assert_eq!(verdict(&mut classifier, unicast_pause.clone()), Verdict::LinkPause(0x64));
        unicast_pause[5] = 0x09;
        assert_eq!(verdict(&mut classifier, unicast_pause), Verdict::Drop(DropReason::NotRouterMac));
        // Other MAC control stays unsupported: the control plane never sees it.
        pause[15] = 0x02;
        assert_eq!(verdict(&mut classifier, pause), Verdict::Drop(DropReason::Unsupported));
    }

    #[test]
    fn sessions_to_the_switch_are_sorted_into_their_own_classes() {
        let mut classifier = with_control();
        let mut class = |source: &str, destination: &str, ttl: u8, transport: Transport| match verdict(
            &mut classifier,
            carrying(source, destination, ttl, transport),
        ) {
            Verdict::Punt(class) => class,
            other => panic!("{other:?}"),
        };
        let tcp = |source, destination| Transport::Tcp { source, destination };
        let udp = |source, destination| Transport::Udp { source, destination };
        // BGP both ways: the peer's connection to us, and ours to it (its replies).
        assert_eq!(class("10.0.0.0", "10.0.0.1", 1, tcp(40000, 179)), CoppClass::Bgp);
        assert_eq!(class("10.0.0.0", "10.0.0.1", 64, tcp(179, 40000)), CoppClass::Bgp);
        assert_eq!(class("fd00::", "fd00::1", 255, tcp(40000, 179)), CoppClass::Bgp);
        assert_eq!(class("fe80::2", "fe80::1", 255, tcp(179, 40001)), CoppClass::Bgp, "unnumbered");
        // BFD control, single hop and multihop; its echo port and other UDP are not BFD.
        assert_eq!(class("10.0.0.0", "10.0.0.1", 255, udp(49152, 3784)), CoppClass::Bfd);
        assert_eq!(class("fd00::", "fd00::1", 255, udp(49152, 4784)), CoppClass::Bfd);
        assert_eq!(class("10.0.0.0", "10.0.0.1", 255, udp(3784, 3785)), CoppClass::Ip2me);
        assert_eq!(class("10.0.0.0", "10.0.0.1", 64, udp(49152, 22)), CoppClass::Ip2me);
        assert_eq!(class("10.0.0.0", "10.0.0.1", 64, tcp(40000, 22)), CoppClass::Ip2me, "SSH");
        // Through the switch, port 179 is just traffic: forwarded, or TTL expiry when it ends.
        assert_eq!(class("10.0.0.0", "10.0.1.2", 1, tcp(40000, 179)), CoppClass::Ttl);
    }

    #[test]
    fn without_control_nothing_is_punted() {
        let mut classifier = classifier(&CONFIG);
        assert_eq!(verdict(&mut classifier, ethernet(0x0806, 42)), Verdict::Drop(DropReason::Unsupported));
        assert_eq!(verdict(&mut classifier, ethernet(0x88cc, 60)), Verdict::Drop(DropReason::Unsupported));
        // What only a control plane takes is never looked up in the FIB, whose default
        // route would otherwise carry it away.
        let text = CONFIG.replace("prefix = \"10.0.1.0/24\"", "prefix = \"0.0.0.0/0\"");
        let mut classifier = super::tests::classifier(&format!("{text}[[route]]\nprefix = \"::/0\"\nport = \"p1\"\n"));
        assert!(matches!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.9.2", 64)), Verdict::Forward { .. }));
        let multicast = Verdict::Drop(DropReason::Multicast);
        assert_eq!(verdict(&mut classifier, icmpv6("ff02::2", 133)), multicast);
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "224.0.0.5", 1)), multicast);
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.0.0", "255.255.255.255", 1)), multicast);
        assert_eq!(verdict(&mut classifier, ip_frame("fd00::2", "fe80::1", 64)), Verdict::Drop(DropReason::NoRoute));
        assert_eq!(
            verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.1.2", 1)),
            Verdict::Drop(DropReason::TtlExpired)
        );
    }

    #[test]
    fn connected_subnets_forward_to_known_neighbours_and_glean_the_rest() {
        let text = CONFIG.replace("name = \"p0\"\n", "name = \"p0\"\naddresses = [\"10.0.0.1/24\", \"fd00::1/64\"]\n");
        let neighbor = "[[neighbor]]\nip = \"10.0.0.7\"\nmac = \"02:00:00:00:10:07\"\nport = \"p0\"\n\
                        [[neighbor]]\nip = \"fd00::7\"\nmac = \"02:00:00:00:10:17\"\nport = \"p0\"\n";
        let mut classifier = classifier(&format!("{text}{neighbor}{CONTROL}"));
        let mut to = |destination: &str| verdict(&mut classifier, ip_frame("10.0.1.2", destination, 64));
        let adjacency = |last: u8| Next::Adjacency(Adjacency { port: 0, mac: MacAddress([0x02, 0, 0, 0, 0x10, last]) });
        assert!(matches!(to("10.0.0.7"), Verdict::Forward { next, .. } if next == adjacency(0x07)));
        assert_eq!(to("10.0.0.8"), Verdict::Punt(CoppClass::Glean));
        let v6 = verdict(&mut classifier, ip_frame("fd00:1::2", "fd00::7", 64));
        assert!(matches!(v6, Verdict::Forward { next, .. } if next == adjacency(0x17)), "{v6:?}");
        // An expiring packet to an unresolved neighbour is a TTL punt (the kernel answers it).
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.1.2", "10.0.0.8", 1)), Verdict::Punt(CoppClass::Ttl));
        // With p0's link down, an unresolved neighbour behind it is dropped at once (the
        // kernel would hold the frame through seconds of ARP retries); a resolved one still
        // forwards (the switch drops it at the port, counted there).
        classifier.set_port_up(0, false);
        let mut to = |destination: &str| verdict(&mut classifier, ip_frame("10.0.1.2", destination, 64));
        assert_eq!(to("10.0.0.8"), Verdict::Drop(DropReason::LinkDown));
        assert!(matches!(to("10.0.0.7"), Verdict::Forward { next, .. } if next == adjacency(0x07)));
        classifier.set_port_up(0, true);
        assert_eq!(verdict(&mut classifier, ip_frame("10.0.1.2", "10.0.0.8", 64)), Verdict::Punt(CoppClass::Glean));
    }

    #[test]
    fn via_routes_forward_to_their_neighbours_mac() {
        let text = CONFIG.replace(
            "[[route]]\nprefix = \"10.0.1.0/24\"\nport = \"p1\"",
            "[[route]]\nprefix = \"10.0.1.0/24\"\nvia = \"10.255.0.1\"\n\
             [[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:12:01\"\nport = \"p2\"",
        );
        let mut classifier = classifier(&text);
        let frame = crate::wire::parse::tests::rocev2_frame(false);
        let Verdict::Forward { next, .. } = classifier.classify(&frame) else { panic!() };
        let mac = MacAddress([0x02, 0, 0, 0, 0x12, 0x01]);
        assert_eq!(next, Next::Adjacency(Adjacency { port: 2, mac }));
        // A neighbour on a disabled port is no route.
        let mut classifier =
            super::tests::classifier(&text.replace("name = \"p2\"\n", "name = \"p2\"\nenabled = false\n"));
        let frame = crate::wire::parse::tests::rocev2_frame(false);
        assert_eq!(classifier.classify(&frame), Verdict::Drop(DropReason::NoRoute));
    }

    /// `frame` sent to `mac` instead of the switch's.
    fn to_mac(mut frame: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
        frame[0..6].copy_from_slice(&mac);
        frame
    }

    #[test]
    fn only_frames_to_the_router_mac_are_routed() {
        let mut classifier = with_control();
        let not_router_mac = Verdict::Drop(DropReason::NotRouterMac);
        let other_station = [0x02, 0, 0, 0, 0x10, 0x09];
        // Another station's unicast MAC: nothing of it is the switch's, not even ARP.
        assert_eq!(
            verdict(&mut classifier, to_mac(ip_frame("10.0.0.0", "10.0.1.2", 64), other_station)),
            not_router_mac
        );
        assert_eq!(
            verdict(&mut classifier, to_mac(ip_frame("10.0.0.0", "10.0.0.1", 64), other_station)),
            not_router_mac
        );
        assert_eq!(verdict(&mut classifier, to_mac(ethernet(0x0806, 42), other_station)), not_router_mac);
        // Broadcast and multicast MACs: delivered to the switch when it is the destination,
        // never routed, nor answered as routed (RFC 1812 §5.3.4).
        for group in [[0xff; 6], [0x01, 0x00, 0x5e, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 1]] {
            assert_eq!(verdict(&mut classifier, to_mac(ip_frame("10.0.0.0", "10.0.1.2", 64), group)), not_router_mac);
            assert_eq!(verdict(&mut classifier, to_mac(ip_frame("10.0.0.0", "10.0.9.2", 64), group)), not_router_mac);
            assert_eq!(verdict(&mut classifier, to_mac(ip_frame("fd00::2", "fd09::2", 64), group)), not_router_mac);
            assert_eq!(
                verdict(&mut classifier, to_mac(ip_frame("10.0.0.0", "10.0.0.1", 64), group)),
                Verdict::Punt(CoppClass::Ip2me)
            );
        }
        // To the switch's MAC, as before.
        assert!(matches!(verdict(&mut classifier, ip_frame("10.0.0.0", "10.0.1.2", 64)), Verdict::Forward { .. }));
    }

    #[test]
    fn martians_are_dropped_and_link_local_reaches_only_the_switch() {
        for text in [with_control_text(), CONFIG.clone()] {
            let control = text.contains("[control]");
            let mut classifier = classifier(&text);
            let martian = Verdict::Drop(DropReason::Martian);
            for (source, destination) in [
                ("127.0.0.1", "10.0.1.2"),
                ("0.1.2.3", "10.0.1.2"),
                ("224.1.1.1", "10.0.1.2"),
                ("240.0.0.1", "10.0.1.2"),
                ("255.255.255.255", "10.0.1.2"),
                ("10.0.0.0", "127.0.0.1"),
                ("10.0.0.0", "0.0.0.5"),
                ("10.0.0.0", "240.0.0.1"),
                // Link-local, which no router forwards (RFC 3927 §2.7, RFC 4291 §2.5.6).
                ("169.254.1.1", "10.0.1.2"),
                ("10.0.0.0", "169.254.1.1"),
                ("0.0.0.0", "10.0.1.2"),
                ("::1", "fd00:1::2"),
                ("ff02::1", "fd00:1::2"),
                ("::ffff:10.0.0.1", "fd00:1::2"),
                ("fd00::2", "::1"),
                ("fd00::2", "::"),
                ("fd00::2", "::ffff:10.0.1.2"),
                ("fd00::2", "ff01::1"),
                ("fe80::2", "fd09::2"),
                ("::", "fd09::2"),
            ] {
                assert_eq!(
                    verdict(&mut classifier, ip_frame(source, destination, 64)),
                    martian,
                    "{source} -> {destination}"
                );
            }
            // A martian source is dropped even when the switch is the destination; a
            // link-local one is its to take.
            assert_eq!(verdict(&mut classifier, ip_frame("127.0.0.1", "10.0.0.1", 64)), martian);
            if control {
                for (source, destination) in [
                    ("169.254.1.1", "10.0.0.1"),
                    ("0.0.0.0", "255.255.255.255"),
                    ("fe80::2", "fd00::1"),
                    ("::", "ff02::1:ff00:1"),
                ] {
                    assert!(
                        matches!(verdict(&mut classifier, ip_frame(source, destination, 64)), Verdict::Punt(_)),
                        "{source} -> {destination}"
                    );
                }
            }
        }
    }

    /// The plain path (`plain_routed`) takes the common frame: the benchmark's and the
    /// fabric's, so its figures are of this path.
    #[test]
    fn the_plain_path_takes_a_routed_frame_and_leaves_the_rest() {
        let mut classifier = classifier(&CONFIG);
        let frame = crate::wire::parse::tests::rocev2_frame(false);
        assert_eq!(classifier.plain_routed(&frame, 0), Some(classifier.classify_parsed(&frame, 0)));
        let to_group = carrying("10.0.0.9", "10.0.2.7", 64, Transport::Tcp { source: 1, destination: 2 });
        assert!(matches!(classifier.plain_routed(&to_group, 0), Some(Verdict::Forward { next: Next::Group(_), .. })));
        let expiring = carrying("10.0.0.9", "10.0.1.2", 1, Transport::Udp { source: 1, destination: 2 });
        assert_eq!(classifier.plain_routed(&expiring, 0), None);
        let unrouted = carrying("10.0.0.9", "10.0.9.2", 64, Transport::Udp { source: 1, destination: 2 });
        assert_eq!(classifier.plain_routed(&unrouted, 0), None);
        let tagged = crate::wire::parse::tests::rocev2_frame(true);
        assert_eq!(classifier.plain_routed(&tagged, 0), None);
    }

    proptest::proptest! {
        /// Whatever the plain path decides, the whole path decides the same: frames to
        /// every kind of destination (a port, a group, with a control plane the switch and a
        /// connected host with no neighbour, a blackhole, a disabled port, no route, martian
        /// and multicast), from routable and other sources, at every TTL and DSCP, to the
        /// switch's MAC or others, with bytes changed (the checksum made good again or not),
        /// with and without a control plane, trusting DSCP or PCP.
        #[test]
        fn the_plain_path_forwards_only_what_the_whole_path_forwards_and_says_the_same(
            destination in proptest::sample::select(vec![
                "10.0.1.2", "10.0.2.7", "10.0.0.1", "10.0.0.9", "10.0.3.1", "10.0.4.1", "10.9.9.9",
                "127.0.0.1", "224.0.0.5", "239.1.1.1", "169.254.0.1", "255.255.255.255",
            ]),
            source in proptest::sample::select(vec!["10.0.0.9", "0.0.0.0", "169.254.3.3", "127.0.0.2", "10.0.1.2"]),
            ttl in proptest::sample::select(vec![0u8, 1, 2, 64, 255]),
            tos in proptest::prelude::any::<u8>(),
            transport in 0usize..3,
            mac in 0usize..3,
            changes in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 0..3),
            fix in proptest::prelude::any::<bool>(),
            control in proptest::prelude::any::<bool>(),
            pcp in proptest::prelude::any::<bool>(),
        ) {
            let mut text = CONFIG
                .replace("[[port]]\nname = \"p2\"", "[[port]]\nname = \"p3\"\nenabled = false\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:13:00\"\n[[port]]\nname = \"p2\"");
            text.push_str("[[route]]\nprefix = \"10.0.3.0/24\"\nblackhole = true\n");
            text.push_str("[[route]]\nprefix = \"10.0.4.0/24\"\nport = \"p3\"\n");
            if control {
                // The switch's own 10.0.0.1, and 10.0.0.0/24 connected, with no neighbours.
                text = text.replace("name = \"p0\"\n", "name = \"p0\"\naddresses = [\"10.0.0.1/24\"]\n");
                text.push_str(CONTROL);
            }
            if pcp {
                text = text.replace("[qos]", "[qos]\ntrust = \"pcp\"");
            }
            let mut classifier = classifier(&text);
            let transport = match transport {
                0 => Transport::Udp { source: 1000, destination: 2000 },
                1 => Transport::Tcp { source: 1000, destination: 80 },
                _ => Transport::Roce { source: 1000, opcode: 4, dest_qp: 0x11, psn: 5 },
            };
            let mut frame = carrying(source, destination, ttl, transport);
            frame[15] = tos;
            crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
            match mac {
                0 => {}
                1 => frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0x77, 0x01]),
                _ => frame[..6].copy_from_slice(&[0xff; 6]),
            }
            for (at, value) in changes {
                if let Some(byte) = frame.get_mut(at) {
                    *byte = value;
                }
            }
            if fix {
                frame = crate::wire::parse::tests::with_checksum(frame);
            }
            if let Some(plain) = classifier.plain_routed(&frame, 0) {
                proptest::prop_assert_eq!(plain, classifier.classify_parsed(&frame, 0));
            }
        }
    }
}
