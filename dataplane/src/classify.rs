//! The classify stage: from a parsed frame to a decision (forward to a route target in a
//! traffic class, consume a PFC frame, or drop with a reason), and the routing rewrites of a
//! forwarded frame: TTL/hop limit with the IPv4 checksum (RFC 1624 incremental) here, the MACs
//! in `rewrite_macs` once the switch has chosen the egress port (a group's member).
//!
//! Invariant: a frame is rewritten only when the verdict is `Forward`, so a dropped frame
//! leaves the stage byte-for-byte as it came in; every other outcome carries its reason.

#![forbid(unsafe_code)]

use crate::config::{Config, RouteTarget, Trust};
use crate::drops::DropReason;
use crate::route::RouteTable;
use crate::wire::ethernet::{self, MacAddress};
use crate::wire::parse::{self, Destination, Payload};
use crate::wire::{ipv4, ipv6, pfc};

/// What to do with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Queue towards `target` (a port, or a group whose member the switch picks) in traffic
    /// class `tc`; `flow_hash` identifies the flow (5-tuple plus RoCEv2 destination QP); `ip`
    /// says where the IP header is and its ECN bits, for marking.
    Forward {
        target: RouteTarget,
        tc: u8,
        flow_hash: u32,
        ip: IpHeader,
    },
    /// A PFC frame for the receiving port's egress.
    FlowControl(pfc::Repr),
    Drop(DropReason),
}

/// Where a forwarded frame's IP header is, and its ECN bits on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    pub l3_offset: u16,
    pub is_ipv6: bool,
    pub ecn: u8,
}

pub struct Classifier {
    routes: RouteTable,
    trust: Trust,
    dscp_to_tc: [u8; 64],
    pcp_to_tc: [u8; 8],
    switch_mac: MacAddress,
    peer_macs: Vec<MacAddress>,
    port_enabled: Vec<bool>,
    /// Largest IP packet forwarded (`switch.mtu`); longer ones are `oversize`.
    mtu: usize,
}

impl Classifier {
    pub fn new(config: &Config) -> Self {
        Self {
            routes: RouteTable::new(&config.routes),
            trust: config.qos.trust,
            dscp_to_tc: config.qos.dscp_to_tc,
            pcp_to_tc: config.qos.pcp_to_tc,
            switch_mac: config.mac,
            peer_macs: config.ports.iter().map(|port| port.peer_mac).collect(),
            port_enabled: config.ports.iter().map(|port| port.enabled).collect(),
            mtu: config.mtu as usize,
        }
    }

    /// Classifies `frame` and, when it is forwarded, decrements its TTL / hop limit.
    #[inline(always)]
    pub fn classify(&self, frame: &mut [u8]) -> Verdict {
        let parsed = match parse::parse(frame) {
            Ok(parsed) => parsed,
            Err(_) => return Verdict::Drop(DropReason::Malformed),
        };
        let ip = match parsed.payload {
            Payload::Ip(ip) => ip,
            Payload::FlowControl(repr) => return Verdict::FlowControl(repr),
            Payload::LinkPause(_) => return Verdict::Drop(DropReason::PauseIgnored),
            Payload::NotRoutable(_) => return Verdict::Drop(DropReason::Unsupported),
        };
        let target = match self.routes.lookup(ip.destination) {
            Some(RouteTarget::Port(port)) if !self.port_enabled[port] => return Verdict::Drop(DropReason::NoRoute),
            Some(target) => target,
            None => return Verdict::Drop(DropReason::NoRoute),
        };
        if ip.ttl <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        // The IP packet with any Ethernet padding: padding only follows packets far below
        // any MTU (frames under 60 bytes), so this never misjudges a legal packet.
        if frame.len() - ip.l3_offset > self.mtu {
            return Verdict::Drop(DropReason::Oversize);
        }
        let tc = match self.trust {
            Trust::Dscp => self.dscp_to_tc[usize::from(ip.dscp)],
            Trust::Pcp => self.pcp_to_tc[usize::from(parsed.pcp.unwrap_or(0))],
        };
        let l3 = &mut frame[ip.l3_offset..];
        match ip.destination {
            Destination::V4(_) => ipv4::Packet::new_unchecked(l3).decrement_ttl(),
            Destination::V6(_) => ipv6::Packet::new_unchecked(l3).decrement_hop_limit(),
        }
        let header = IpHeader {
            l3_offset: ip.l3_offset as u16,
            is_ipv6: matches!(ip.destination, Destination::V6(_)),
            ecn: ip.ecn,
        };
        Verdict::Forward { target, tc, flow_hash: ip.flow_hash, ip: header }
    }

    /// Sets the MACs of a frame routed out of `egress`: its peer's as destination, the
    /// switch's as source.
    #[inline]
    pub fn rewrite_macs(&self, frame: &mut [u8], egress: usize) {
        let mut ethernet = ethernet::Frame::new_unchecked(frame);
        ethernet.set_destination(self.peer_macs[egress]);
        ethernet.set_source(self.switch_mac);
    }

    /// The priority (traffic class) a frame travels in, as its sender's NIC would queue it;
    /// `None` for PAUSE/PFC frames, which no pause holds back. Frames that do not parse as IP
    /// travel in priority 0.
    pub fn priority(&self, frame: &[u8]) -> Option<u8> {
        match parse::parse(frame) {
            Ok(parsed) => match parsed.payload {
                Payload::FlowControl(_) | Payload::LinkPause(_) => None,
                Payload::Ip(ip) => Some(match self.trust {
                    Trust::Dscp => self.dscp_to_tc[usize::from(ip.dscp)],
                    Trust::Pcp => self.pcp_to_tc[usize::from(parsed.pcp.unwrap_or(0))],
                }),
                Payload::NotRoutable(_) => Some(0),
            },
            Err(_) => Some(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checksum::ones_complement_sum;

    const CONFIG: &str = r#"
[switch]
name = "t"
mac = "02:00:00:00:00:aa"
[qos]
dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }
pcp_to_tc = { 3 = 4, default = 1 }
[[port]]
name = "p0"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "p1"
speed_gbps = 100
peer_mac = "02:00:00:00:11:00"
[[port]]
name = "p2"
speed_gbps = 100
peer_mac = "02:00:00:00:12:00"
[[route]]
prefix = "10.0.1.0/24"
port = "p1"
[[route]]
prefix = "10.0.2.0/24"
group = "g"
[[group]]
name = "g"
ports = ["p1", "p2"]
"#;

    fn classifier(text: &str) -> Classifier {
        Classifier::new(&Config::parse(text, "t.toml").unwrap())
    }

    #[test]
    fn forward_rewrites_ttl_macs_and_checksum() {
        let classifier = classifier(CONFIG);
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        let original = frame.clone();
        let verdict = classifier.classify(&mut frame);
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0b10 };
        let Verdict::Forward { target, tc, ip: header, .. } = verdict else { panic!("{verdict:?}") };
        assert_eq!((target, tc, header), (RouteTarget::Port(1), 3, ip));
        classifier.rewrite_macs(&mut frame, 1);
        assert_eq!(&frame[0..6], &[0x02, 0, 0, 0, 0x11, 0x00]);
        assert_eq!(&frame[6..12], &[0x02, 0, 0, 0, 0, 0xaa]);
        assert_eq!(frame[14 + 8], 63);
        assert_eq!(ones_complement_sum(&frame[14..34]), 0xffff);
        // Everything past the IP header is untouched (the RoCE ICRC stays valid).
        assert_eq!(&frame[34..], &original[34..]);
    }

    #[test]
    fn pcp_trust_uses_the_vlan_tag() {
        let classifier = classifier(&CONFIG.replace("[qos]", "[qos]\ntrust = \"pcp\""));
        let mut tagged = crate::wire::parse::tests::rocev2_frame(true);
        assert!(matches!(classifier.classify(&mut tagged), Verdict::Forward { tc: 4, .. }));
        let mut untagged = crate::wire::parse::tests::rocev2_frame(false);
        assert!(matches!(classifier.classify(&mut untagged), Verdict::Forward { tc: 1, .. }));
    }

    #[test]
    fn drops_leave_the_frame_untouched() {
        let classifier = classifier(CONFIG);
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        frame[14 + 8] = 1; // TTL 1
        crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        let before = frame.clone();
        assert_eq!(classifier.classify(&mut frame), Verdict::Drop(DropReason::TtlExpired));
        assert_eq!(frame, before);

        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        frame[14 + 18] = 9; // 10.0.9.2: no route
        crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        assert_eq!(classifier.classify(&mut frame), Verdict::Drop(DropReason::NoRoute));

        let mut truncated = crate::wire::parse::tests::rocev2_frame(false);
        truncated.truncate(30);
        assert_eq!(classifier.classify(&mut truncated), Verdict::Drop(DropReason::Malformed));
    }

    #[test]
    fn groups_are_targets_and_one_flow_hashes_alike() {
        let classifier = classifier(CONFIG);
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        frame[14 + 18] = 2; // 10.0.2.2: the group
        crate::wire::ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
        let first = classifier.classify(&mut frame.clone());
        assert_eq!(first, classifier.classify(&mut frame.clone()), "one flow, one hash");
        assert!(matches!(first, Verdict::Forward { target: RouteTarget::Group(0), .. }), "{first:?}");
    }

    #[test]
    fn packets_over_the_mtu_are_oversize_and_at_the_mtu_forwarded() {
        let classifier =
            classifier(&CONFIG.replace("mac = \"02:00:00:00:00:aa\"", "mac = \"02:00:00:00:00:aa\"\nmtu = 1500"));
        let build = |ip_len: usize| {
            let mut spec =
                crate::frames::FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 1);
            spec.frame_len = 14 + ip_len;
            spec.build()
        };
        assert!(matches!(classifier.classify(&mut build(1500)), Verdict::Forward { .. }));
        let mut over = build(1501);
        let before = over.clone();
        assert_eq!(classifier.classify(&mut over), Verdict::Drop(DropReason::Oversize));
        assert_eq!(over, before, "a dropped frame is untouched");
    }

    #[test]
    fn a_route_to_a_disabled_port_is_no_route() {
        let text = CONFIG.replace("name = \"p1\"\n", "name = \"p1\"\nenabled = false\n");
        let classifier = classifier(&text);
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        assert_eq!(classifier.classify(&mut frame), Verdict::Drop(DropReason::NoRoute));
    }
}
