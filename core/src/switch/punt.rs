//! Punting (with `[control]`): a frame the classifier says is for the control plane passes the
//! policer of its ingress port and CoPP class (`punt::Policer`, in the frame's arrival time)
//! into a bounded outbox the engine drains with `take_punted`; over the rate it is
//! `punt_policed` (and `policed` under its class), into a full outbox `punt_queue_full`.
//!
//! Invariant: a punted frame is counted once, as punted or under one drop reason; an
//! injected frame takes the same admission, ECN and scheduler as any other.

use super::*;

/// Punted frames the outbox holds between the engine's drains: two bursts.
pub const PUNT_OUTBOX: usize = 64;

impl<P: PacketBuf> Switch<P> {
    /// Queues a frame the control plane sends out of `egress` (the kernel wrote it on the
    /// port's host interface) in the control class: as written (its MACs and TTL are the
    /// kernel's), through admission, ECN and the scheduler like any frame, so it never
    /// bypasses PFC or the shaper. Its drops are charged to `egress`, the port whose host
    /// interface it came from.
    pub fn inject(&mut self, egress: usize, packet: P, now: u64) -> Received {
        self.stats.ports[egress].injected += 1;
        let ip = match crate::wire::parse::parse_beyond(packet.data(), packet.len() - packet.data().len())
            .map(|parsed| parsed.payload)
        {
            Ok(crate::wire::parse::Payload::Ip(ip)) => IpHeader {
                l3_offset: ip.l3_offset as u16,
                is_ipv6: matches!(ip.destination, crate::wire::IpAddress::V6(_)),
                ecn: ip.ecn,
            },
            // Not IP (ARP, ND's link layer is IP; LLDP): never marked.
            _ => IpHeader { l3_offset: 0, is_ipv6: false, ecn: ecn::NOT_ECT },
        };
        let tc = usize::from(self.punting.control_tc);
        let len = packet.len();
        let frame = crate::tm::frame::Frame::new(packet, len, egress, egress, tc, ip, now);
        if !self.owns(egress) {
            return match self.push_outgoing(frame) {
                Ok(()) => Received::Transferred { egress, tc },
                Err(frame) => self.refuse(frame, DropReason::BufferFull, now),
            };
        }
        self.enqueue(frame, now, &mut QueueAll)
    }

    /// Polices a frame for the control plane in its class and puts it in the outbox.
    pub(super) fn punt(&mut self, ingress: usize, packet: P, class: CoppClass, now: u64) -> Received {
        let rx = &mut self.stats.ports[ingress];
        rx.rx_packets += 1;
        rx.rx_bytes += packet.len() as u64;
        self.punt_received(ingress, packet, class, now)
    }

    /// `punt` for a frame already counted as received.
    pub(super) fn punt_received(&mut self, ingress: usize, packet: P, class: CoppClass, now: u64) -> Received {
        if let Some(sources) = self.punting.control_acl.as_deref().and_then(|acl| acl.limits(class)) {
            if !self.source_taken(ingress, &packet, sources) {
                let rx = &mut self.stats.ports[ingress];
                rx.count_drop(DropReason::ControlAcl);
                rx.refused[class.index()] += 1;
                self.notify_drop(ingress, NO_PORT, DropReason::ControlAcl, (&packet, now));
                return Received::Dropped(DropReason::ControlAcl);
            }
        }
        let rx = &mut self.stats.ports[ingress];
        let Some(policers) = self.punting.punt_policers.get_mut(ingress) else {
            // The classifier punts only with `[control]`, which gives every port its policers.
            rx.count_drop(DropReason::Unsupported);
            return Received::Dropped(DropReason::Unsupported);
        };
        let policer = &mut policers[class.index()];
        let admitted = match &self.punting.switch_policers {
            Some(shared) => policer.admit_shared(shared.bucket(class), now),
            None => policer.admit(now),
        };
        if !admitted {
            rx.count_drop(DropReason::PuntPoliced);
            rx.policed[class.index()] += 1;
            self.notify_drop(ingress, NO_PORT, DropReason::PuntPoliced, (&packet, now));
            return Received::Dropped(DropReason::PuntPoliced);
        }
        match self.punting.punted.push(Punted { port: ingress, class, packet }) {
            Ok(()) => {
                rx.punted[class.index()] += 1;
                Received::Punted(class)
            }
            Err(refused) => {
                rx.count_drop(DropReason::PuntQueueFull);
                self.notify_drop(ingress, NO_PORT, DropReason::PuntQueueFull, (&refused.packet, now));
                Received::Dropped(DropReason::PuntQueueFull)
            }
        }
    }

    /// Whether `packet`'s IP source is one `sources` takes: a peer of the control plane's
    /// (`Fib::is_control_peer`), or in one of the prefixes. A frame without an IP source is
    /// not. Parsed again here, for the few frames of a limited class only: the packet path
    /// keeps no source address.
    fn source_taken(&self, ingress: usize, packet: &P, sources: &crate::config::Sources) -> bool {
        let Some(source) = ip_source(packet.data(), packet.len() - packet.data().len()) else { return false };
        (sources.neighbors && self.forwarding.classifier.fib().is_control_peer(ingress as u16, source))
            || sources.prefixes.iter().any(|prefix| prefix.contains(source))
    }

    /// Recounts a frame `take_punted` gave out that the engine could not hand to the control
    /// plane (its queue was full): no longer punted, dropped as `punt_queue_full`.
    pub fn punt_refused(&mut self, port: usize, class: CoppClass) {
        let stats = &mut self.stats.ports[port];
        stats.punted[class.index()] -= 1;
        stats.count_drop(DropReason::PuntQueueFull);
    }

    /// The next frame for the control plane, oldest first.
    #[inline]
    pub fn take_punted(&mut self) -> Option<Punted<P>> {
        self.punting.punted.pop()
    }
}

/// The source address of the IP packet in `frame` (`beyond`: bytes in later segments).
fn ip_source(frame: &[u8], beyond: usize) -> Option<std::net::IpAddr> {
    let parsed = crate::wire::parse::parse_beyond(frame, beyond).ok()?;
    let crate::wire::parse::Payload::Ip(ip) = parsed.payload else { return None };
    let l3 = ip.l3_offset;
    match ip.destination {
        crate::wire::IpAddress::V4(_) => {
            let bytes: [u8; 4] = frame.get(l3 + 12..l3 + 16)?.try_into().ok()?;
            Some(std::net::IpAddr::from(bytes))
        }
        crate::wire::IpAddress::V6(_) => {
            let bytes: [u8; 16] = frame.get(l3 + 8..l3 + 24)?.try_into().ok()?;
            Some(std::net::IpAddr::from(bytes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::*;
    use crate::packet::HeapPacket;
    use crate::traffic::frames::FrameSpec;

    fn arp() -> HeapPacket {
        let mut frame = vec![0u8; 42];
        frame[0..6].copy_from_slice(&[0xff; 6]);
        frame[12..14].copy_from_slice(&[0x08, 0x06]);
        HeapPacket::new(frame)
    }

    /// A frame to 10.0.0.1 (an address of port 0's with `[control]`) carrying `transport`.
    fn to_switch(transport: crate::traffic::frames::Transport) -> HeapPacket {
        let mut spec = FrameSpec::rocev2("10.0.0.0".parse().unwrap(), "10.0.0.1".parse().unwrap(), 7);
        spec.transport = transport;
        HeapPacket::new(spec.build())
    }

    #[test]
    fn punted_frames_are_policed_per_port_and_class_then_wait_in_the_outbox() {
        // ARP at 1,000 pps, burst 3; BGP at its default, from 10.0.0.0, a neighbour on p0.
        let copp = "[control.copp.arp]\npps = 1000\nburst = 3\n\
                    [[neighbor]]\nip = \"10.0.0.0\"\nmac = \"02:00:00:00:10:00\"\nport = \"p0\"";
        let mut switch: Switch<HeapPacket> = Switch::new(&config_with_p0("", "addresses = [\"10.0.0.1/31\"]", copp), 1);
        let now = 1_000_000_000; // 1 ms
        let mut outcomes = Vec::new();
        for _ in 0..4 {
            outcomes.push(switch.receive(0, arp(), now));
        }
        let punted = Received::Punted(CoppClass::Arp);
        assert_eq!(outcomes, [punted, punted, punted, Received::Dropped(DropReason::PuntPoliced)]);
        // Another port has its own bucket, and so has another class on the same port: BGP
        // passes while ARP is over its rate.
        assert_eq!(switch.receive(1, arp(), now), punted);
        let bgp = crate::traffic::frames::Transport::Tcp { source: 40000, destination: 179 };
        assert_eq!(switch.receive(0, to_switch(bgp), now), Received::Punted(CoppClass::Bgp));
        assert_eq!(switch.receive(0, arp(), now), Received::Dropped(DropReason::PuntPoliced));
        // A TTL-expiring routed frame, a millisecond later when a token is back.
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.ttl = 1;
        let expiring = spec.build();
        assert_eq!(
            switch.receive(0, HeapPacket::new(expiring.clone()), now + 1_000_000_000),
            Received::Punted(CoppClass::Ttl)
        );
        let stats = &switch.stats.ports[0];
        let class = |counts: &[u64; CoppClass::COUNT], class: CoppClass| counts[class.index()];
        assert_eq!(
            (
                stats.rx_packets,
                class(&stats.punted, CoppClass::Arp),
                class(&stats.punted, CoppClass::Bgp),
                class(&stats.punted, CoppClass::Ttl)
            ),
            (7, 3, 1, 1)
        );
        assert_eq!(stats.drops_for(DropReason::PuntPoliced), 2);
        assert_eq!(class(&stats.policed, CoppClass::Arp), 2, "the breakdown of punt_policed");
        assert_eq!(stats.policed.iter().sum::<u64>(), 2);
        assert_eq!(switch.stats.ports[1].punted[CoppClass::Arp.index()], 1);
        // The engine takes them oldest first, as received (the TTL untouched).
        let taken: Vec<(usize, CoppClass)> =
            std::iter::from_fn(|| switch.take_punted()).map(|p| (p.port, p.class)).collect();
        use CoppClass::{Arp, Bgp, Ttl};
        assert_eq!(taken, [(0, Arp), (0, Arp), (0, Arp), (1, Arp), (0, Bgp), (0, Ttl)]);
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", copp), 1);
        switch.receive(0, HeapPacket::new(expiring.clone()), now);
        assert_eq!(switch.take_punted().unwrap().packet.data(), &expiring[..]);
    }

    /// `[control.acl]`: BGP and BFD from the ingress port's neighbours only, by default; a
    /// class limited to prefixes; what is refused is counted by class before its policer.
    #[test]
    fn the_control_acl_takes_each_class_from_its_sources_only() {
        let neighbor = "[[neighbor]]\nip = \"10.0.0.0\"\nmac = \"02:00:00:00:10:00\"\nport = \"p0\"\n";
        let v6_neighbor = "[[neighbor]]\nip = \"fd00::5\"\nmac = \"02:00:00:00:10:05\"\nport = \"p0\"\n";
        let extra = format!(
            "{neighbor}{v6_neighbor}[control.acl]\nip2me = [\"10.0.5.0/24\"]\n[control.copp.bgp]\npps = 1000\nburst = 1\n"
        );
        let addresses = "addresses = [\"10.0.0.1/31\", \"fd00::1/64\"]";
        let mut switch: Switch<HeapPacket> = Switch::new(&config_with_p0("", addresses, &extra), 1);
        let from = |source: &str, transport| {
            let mut spec = FrameSpec::rocev2(source.parse().unwrap(), "10.0.0.1".parse().unwrap(), 7);
            spec.transport = transport;
            HeapPacket::new(spec.build())
        };
        use crate::traffic::frames::Transport::{Tcp, Udp};
        let bgp = Tcp { source: 40000, destination: 179 };
        let bfd = Udp { source: 49152, destination: 3784 };
        let ping = Udp { source: 5000, destination: 7 };
        let refused = Received::Dropped(DropReason::ControlAcl);
        // A spoofed flood first: refused, it spends none of BGP's one-frame burst.
        for _ in 0..3 {
            assert_eq!(switch.receive(0, from("10.0.0.9", bgp), 0), refused, "not a neighbour");
        }
        assert_eq!(switch.receive(1, from("10.0.0.0", bgp), 0), refused, "p0's neighbour, on p1");
        assert_eq!(switch.receive(0, from("10.0.0.0", bgp), 0), Received::Punted(CoppClass::Bgp));
        assert_eq!(switch.receive(0, from("10.0.0.9", bfd), 0), refused);
        assert_eq!(switch.receive(0, from("10.0.0.0", bfd), 0), Received::Punted(CoppClass::Bfd));
        assert_eq!(switch.receive(0, from("10.0.5.7", ping), 0), Received::Punted(CoppClass::Ip2me), "in the list");
        // IPv6 alike: fd00::5 is a neighbour on p0, fd00::9 is not.
        let from_v6 = |source: &str, transport| {
            let mut spec = FrameSpec::rocev2(source.parse().unwrap(), "fd00::1".parse().unwrap(), 7);
            spec.transport = transport;
            HeapPacket::new(spec.build())
        };
        assert_eq!(switch.receive(0, from_v6("fd00::5", bfd), 0), Received::Punted(CoppClass::Bfd));
        assert_eq!(switch.receive(0, from_v6("fd00::9", bfd), 0), refused);
        assert_eq!(switch.receive(0, from("10.0.0.0", ping), 0), refused, "ip2me takes its list only");
        // ARP is never limited.
        assert_eq!(switch.receive(0, arp(), 0), Received::Punted(CoppClass::Arp));
        let stats = &switch.stats.ports[0];
        assert_eq!(stats.drops_for(DropReason::ControlAcl), 6);
        let refused_in = |class: CoppClass| stats.refused[class.index()];
        assert_eq!((refused_in(CoppClass::Bgp), refused_in(CoppClass::Bfd), refused_in(CoppClass::Ip2me)), (3, 2, 1));
        assert_eq!(stats.policed, [0; CoppClass::COUNT], "refused before the policers");
        assert_eq!(switch.stats.ports[1].refused[CoppClass::Bgp.index()], 1);
        // "any" lifts the limit, by a reload too.
        let running = config_with_p0("", "addresses = [\"10.0.0.1/31\"]", &format!("{neighbor}[control]\n"));
        let open =
            config_with_p0("", "addresses = [\"10.0.0.1/31\"]", &format!("{neighbor}[control.acl]\nbgp = \"any\"\n"));
        assert_eq!(crate::config::reload::live_changes(&running, &open), Ok(vec!["control.acl"]));
        let mut switch: Switch<HeapPacket> = Switch::new(&running, 1);
        assert_eq!(switch.receive(0, from("10.0.0.9", bgp), 0), refused);
        switch.reconfigure(super::super::reload::Reconfiguration::prepare(&running, std::sync::Arc::new(open)));
        assert_eq!(switch.receive(0, from("10.0.0.9", bgp), 1), Received::Punted(CoppClass::Bgp));
    }

    /// `[control.copp] scope = "switch"`: every port's frames of a class spend one bucket.
    #[test]
    fn a_switch_wide_policer_is_one_bucket_for_every_port() {
        let copp =
            |scope: &str| format!("[control.copp]\nscope = \"{scope}\"\n[control.copp.arp]\npps = 1000\nburst = 3\n");
        let outcomes = |scope: &str| {
            let mut switch: Switch<HeapPacket> = Switch::new(&config("", &copp(scope)), 1);
            let now = 1_000_000_000;
            let got: Vec<bool> = [0, 1, 0, 1, 1]
                .iter()
                .map(|&port| matches!(switch.receive(port, arp(), now), Received::Punted(_)))
                .collect();
            (got, switch.stats.ports[1].policed[CoppClass::Arp.index()])
        };
        assert_eq!(outcomes("port"), (vec![true; 5], 0), "three each");
        assert_eq!(outcomes("switch"), (vec![true, true, true, false, false], 2), "three in all");
    }

    #[test]
    fn a_full_punt_outbox_drops_and_counts() {
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", "[control.copp.arp]\nburst = 1000"), 1);
        for _ in 0..PUNT_OUTBOX {
            assert_eq!(switch.receive(0, arp(), 0), Received::Punted(CoppClass::Arp));
        }
        assert_eq!(switch.receive(0, arp(), 0), Received::Dropped(DropReason::PuntQueueFull));
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::PuntQueueFull), 1);
        assert_eq!(switch.stats.ports[0].policed, [0; CoppClass::COUNT], "not policed: queue full");
        assert!(switch.take_punted().is_some());
        assert_eq!(switch.receive(0, arp(), 0), Received::Punted(CoppClass::Arp), "room again");
        switch.punt_refused(0, CoppClass::Arp);
        let stats = &switch.stats.ports[0];
        assert_eq!(
            (stats.punted[CoppClass::Arp.index()], stats.drops_for(DropReason::PuntQueueFull)),
            (PUNT_OUTBOX as u64, 2)
        );
    }

    #[test]
    fn injected_frames_queue_in_the_control_class_unchanged_and_are_counted() {
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", "[control]\ncontrol_tc = 6"), 1);
        // What the kernel wrote: an ARP reply, and a TCP segment with TTL 64.
        let reply = arp().data().to_vec();
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 7);
        spec.transport = crate::traffic::frames::Transport::Tcp { source: 179, destination: 40000 };
        let segment = spec.build();
        assert_eq!(switch.inject(1, HeapPacket::new(reply.clone()), 0), Received::Queued { egress: 1, tc: 6 });
        assert_eq!(switch.inject(1, HeapPacket::new(segment.clone()), 0), Received::Queued { egress: 1, tc: 6 });
        assert_eq!(switch.stats.ports[1].injected, 2);
        assert_eq!(switch.stats.ports[1].rx_packets, 0, "not received from the wire");
        assert_eq!(switch.transmit(1, 0).unwrap().data(), &reply[..]);
        assert_eq!(switch.transmit(1, 0).unwrap().data(), &segment[..], "MACs and TTL as the kernel wrote them");
        assert_eq!(switch.stats.ports[1].queues[6].tx_packets, 2);
    }
}
