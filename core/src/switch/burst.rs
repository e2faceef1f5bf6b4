//! A burst's way in (`receive_burst`), for an engine that cuts through: the frames of one rx
//! burst, each classified as `receive_cutting` classifies it, where consecutive frames routed
//! to one adjacency's port in one class take a run. What the idle path (`cut.rs`) judges per
//! frame is judged once when the run opens: the ingress port up, no sFlow, no ACL on either
//! port, the egress port this worker's, usable, idle (nothing queued, no PFC frame pending,
//! the class not paused, its ECN profile doing nothing at depth 0, no storm or XOFF to
//! decide), and the largest charge the buffer would take and give back at once
//! (`SharedBuffer::idle_room`). A frame that cuts through that way changes none of these, so
//! each frame of the run is judged on what is its own: its MTU, its charge against that room,
//! and the transmitter's room (`CutThrough::may_send`) at the run's link time. Its headers are
//! written, the link time moves, and it is sent; the counts, peaks and wire bytes it adds are
//! summed over the run and written when the run closes, the wire bytes charged to the
//! scheduler at once (`Scheduler::charge_alone` of a sum leaves the round where its parts,
//! one after another, would). A frame of the run that fails its own checks closes the run's
//! sums, and it and the rest of the run's frames go to the queue half (`enqueue`) directly
//! when the run opened plain (the ingress port up, no sFlow, no ACL on either port, the
//! egress port this worker's: what `route` decides before `enqueue` for such a frame, which
//! no frame changes), their receipt counted when the run closes; else, and for any other
//! frame, the run closes and the frame takes `receive_cutting`'s whole way.
//!
//! Invariant: a burst leaves the switch exactly as its frames handed to `receive_cutting`
//! one by one would (every counter, peak, link time, scheduler round, byte sent and draw from
//! the generator); the run is closed, its sums written, before any frame takes the whole way
//! and at the burst's end.

use super::*;
use crate::tm::buffer::GroupCharge;

/// The run of a burst: frames to `egress` in class `tc`, whether they cut through (`cuts`),
/// and the sums of those that did.
struct Run {
    egress: usize,
    tc: usize,
    /// Whether the run's frames cut through: its port and class passed `open`, and no frame
    /// of the run has failed its own checks since (one that did took the whole way and may
    /// have queued, so the rest of the burst's frames for the port go that way too).
    cuts: bool,
    /// Whether the run opened plain (module notes): a frame that does not cut through goes
    /// straight to `enqueue`.
    plain: bool,
    /// The egress port's MTU (IP bytes).
    mtu: usize,
    /// The largest charge a frame of the run may have (`IdleRoom::most`).
    most: u64,
    /// A lossless class: its ingress group before any frame's charge, and the group.
    group: Option<(GroupCharge, usize)>,
    rate: crate::units::LinkRate,
    /// The egress link's time, as the run's frames moved it.
    link_free_ps: u64,
    frames: u64,
    bytes: u64,
    /// The frames' bytes on the wire, for the scheduler's round.
    wire_bytes: u64,
    longest: usize,
    /// Frames (and their bytes) handed to `enqueue`: received, counted when the run closes.
    queued: u64,
    queued_bytes: u64,
}

impl Run {
    /// Before a burst's first frame: a port no frame has, cutting nothing.
    fn none() -> Self {
        Self {
            egress: usize::MAX,
            tc: 0,
            cuts: false,
            plain: false,
            mtu: 0,
            most: 0,
            group: None,
            rate: crate::units::LinkRate::new(1),
            link_free_ps: 0,
            frames: 0,
            bytes: 0,
            wire_bytes: 0,
            longest: 0,
            queued: 0,
            queued_bytes: 0,
        }
    }
}

impl<P: PacketBuf> Switch<P> {
    /// Takes a burst of frames received on `ingress` at `now`, each as `receive_cutting` (or,
    /// for a frame the engine's rx prologue refused, `receive_dropped`) would take it, in
    /// order (module notes).
    #[inline(always)]
    pub fn receive_burst(
        &mut self,
        ingress: usize,
        frames: impl Iterator<Item = Result<P, (P, DropReason)>>,
        now: u64,
        cut: &mut impl CutThrough<P>,
    ) {
        let mut run = Run::none();
        for frame in frames {
            let mut packet = match frame {
                Ok(packet) => packet,
                Err((packet, reason)) => {
                    self.close(&mut run, ingress);
                    self.receive_dropped(ingress, packet, reason, now);
                    continue;
                }
            };
            let len = packet.len();
            let head = packet.data();
            let verdict = self.forwarding.classifier.classify_beyond(head, len - head.len());
            if let Verdict::Forward { next: Next::Adjacency(adjacency), tc, ip } = verdict {
                let (egress, tc) = (usize::from(adjacency.port), usize::from(tc) % TRAFFIC_CLASSES);
                if run.egress != egress || run.tc != tc {
                    self.close(&mut run, ingress);
                    run = self.open(ingress, egress, tc, now);
                }
                if run.cuts
                    && len - usize::from(ip.l3_offset) <= run.mtu
                    && plan::charge(len) <= run.most
                    && cut.may_send(egress, run.link_free_ps)
                {
                    self.write_routed(&mut packet, adjacency.mac, ip);
                    let wire = wire_bytes(len);
                    run.wire_bytes += wire;
                    run.link_free_ps = run.link_free_ps.max(now) + run.rate.time_of_wire_bytes_ps(wire);
                    run.frames += 1;
                    run.bytes += len as u64;
                    run.longest = run.longest.max(len);
                    cut.send(egress, packet, now);
                    continue;
                }
                // Not through the idle path, for this frame and for the rest of the run's.
                if run.cuts {
                    self.close(&mut run, ingress);
                    run.cuts = false;
                }
                if run.plain && len - usize::from(ip.l3_offset) <= run.mtu {
                    // What `route` does for a plain run's frame within its MTU.
                    self.write_routed(&mut packet, adjacency.mac, ip);
                    run.queued += 1;
                    run.queued_bytes += len as u64;
                    let frame = crate::tm::frame::Frame::new(packet, len, ingress, egress, tc, ip, now);
                    self.enqueue(frame, now, cut);
                    continue;
                }
                self.close(&mut run, ingress);
            } else {
                // Any other frame may change what the run opened on (a group's member may
                // queue on its port): the next frame opens a run afresh.
                self.close(&mut run, ingress);
                run = Run::none();
            }
            self.forward(ingress, (packet, len), verdict, now, cut);
        }
        self.close(&mut run, ingress);
    }

    /// Writes a routed frame's headers for `next_hop`, as `route` does when no ACL sets a
    /// DSCP (a run's frames pass no ACL).
    #[inline(always)]
    fn write_routed(&self, packet: &mut P, next_hop: MacAddress, ip: IpHeader) {
        crate::pipeline::rewrite::Rewrite { next_hop, dscp: None }.apply(packet.data_mut(), ip, self.mac);
    }

    /// The run of frames from `ingress` to `egress` in class `tc` at `now`: cutting through
    /// if they may, as the idle path does (module notes), else going the whole way.
    #[inline(always)]
    fn open(&self, ingress: usize, egress: usize, tc: usize, now: u64) -> Run {
        let Some(port) = self.tm.egress.get(egress) else { return Run { egress, tc, ..Run::none() } };
        // What `forward` and `route` check before `enqueue`.
        let plain = self.forwarding.sampler.is_none()
            && self.tm.egress[ingress].admin_up
            && self.forwarding.acls.bound(ingress, AclStage::Ingress).is_none()
            && self.forwarding.acls.bound(egress, AclStage::Egress).is_none()
            && self.owns(egress);
        let run = Run { egress, tc, plain, mtu: port.mtu, ..Run::none() };
        // Then what `enqueue` checks before the idle path, and the idle path's own.
        let idle = plain
            && port.usable
            && self.port_idle(egress, tc, now)
            && self.tm.ecn.idle_at_empty(tc)
            && self.no_pfc_decision(ingress, egress, tc);
        if !idle {
            return run;
        }
        let Some(room) = self.tm.buffer.idle_room(ingress, egress, tc) else { return run };
        let pg = self.tm.buffer.pg(tc);
        Run {
            cuts: true,
            most: room.most,
            group: room.group.map(|group| (group, pg)),
            rate: port.rate,
            link_free_ps: port.link_free_ps,
            ..run
        }
    }

    /// Writes what the run's frames added (as `cut_through_idle` and `count_tx` would have,
    /// frame by frame) and empties its sums.
    #[inline(always)]
    fn close(&mut self, run: &mut Run, ingress: usize) {
        if run.queued != 0 {
            let rx = &mut self.stats.ports[ingress];
            rx.rx_packets += run.queued;
            rx.rx_bytes += run.queued_bytes;
            (run.queued, run.queued_bytes) = (0, 0);
        }
        if run.frames == 0 {
            return;
        }
        let (egress, tc) = (run.egress, run.tc);
        let port = &mut self.tm.egress[egress];
        port.link_free_ps = run.link_free_ps;
        // In parts below `u32::MAX` (one, but for a run of some 65,000 jumbo frames): parts
        // charged one after another move the round as their sum does, whatever the parts.
        let mut wire = run.wire_bytes;
        while wire > 0 {
            let part = wire.min(u64::from(u32::MAX));
            port.scheduler.charge_alone(tc, part as u32);
            wire -= part;
        }
        let longest = plan::charge(run.longest);
        let rx = &mut self.stats.ports[ingress];
        rx.rx_packets += run.frames;
        rx.rx_bytes += run.bytes;
        if let Some((group, pg)) = run.group {
            rx.priority_groups[pg].peak(group.occupancy + longest, group.headroom);
        }
        let tx = &mut self.stats.ports[egress];
        tx.tx_packets += run.frames;
        tx.tx_bytes += run.bytes;
        let queue = &mut tx.queues[tc];
        queue.peak(run.longest as u64, longest);
        queue.tx_packets += run.frames;
        queue.tx_bytes += run.bytes;
        (run.frames, run.bytes, run.wire_bytes, run.longest) = (0, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pfc_frame;
    use super::*;
    use crate::packet::HeapPacket;
    use crate::traffic::frames::FrameSpec;

    /// A transmitter that takes `room` frames a burst, while the link is free within
    /// `window_ps` of `now`: what the live engine's pending tx bursts and shaper say.
    #[derive(Default)]
    struct Window {
        room: usize,
        taken: usize,
        window_ps: u64,
        now: u64,
        sent: Vec<(usize, Vec<u8>, u64)>,
    }

    impl CutThrough<HeapPacket> for Window {
        fn may_send(&self, _: usize, link_free_ps: u64) -> bool {
            self.taken < self.room && link_free_ps <= self.now + self.window_ps
        }
        fn send(&mut self, port: usize, packet: HeapPacket, arrival_ps: u64) {
            self.taken += 1;
            self.sent.push((port, packet.bytes, arrival_ps));
        }
    }

    /// p0, p1 (MTU 1000), p2 at 100 Gb/s and a group of p1 and p2; TC3 lossless with ECN
    /// from kmin above 0 (nothing at depth 0), TC0 lossy, TC1 (DSCP 10) marking at every
    /// depth; with `extra`, an ACL or sFlow.
    fn leaf(extra: &str) -> Config {
        crate::testing::Leaf::new("burst")
            .qos(
                "dscp_to_tc = { 26 = 3, 10 = 1, default = 0 }\nlossless = [3]\n\
                 [qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 8192\n\
                 [qos.buffer]\nlossy_pool_bytes = 30720\nlossy_alpha = 1.0\n\
                 [qos.ecn.1]\nkmin_bytes = 0\nkmax_bytes = 4000\npmax = 0.5\n\
                 [qos.ecn.3]\nkmin_bytes = 2000\nkmax_bytes = 4000\npmax = 0.5\n\
                 [qos.scheduler]\ndwrr = { 0 = 1, 1 = 2, 3 = 3 }",
            )
            .port("p0", 100.0, "")
            .port("p1", 100.0, "mtu = 1000")
            .port("p2", 100.0, "")
            .route("10.0.1.0/24", "p1")
            .route("10.0.2.0/24", "p2")
            .group_route("10.0.3.0/24", "both")
            .group("both", &["p1", "p2"], "ecmp")
            .tables(extra)
            .config()
    }

    /// One received frame of the test's bursts: to p1, p2, the group or nowhere, a PFC frame
    /// pausing or releasing TC3, one the rx prologue refused, or one cut short; in DSCP 0, 10
    /// or 26.
    fn received(kind: u8, dscp: u8, len: usize, port: u8) -> Result<HeapPacket, (HeapPacket, DropReason)> {
        let to = |subnet: u8| {
            let destination = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, subnet, 2 + port));
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), destination, 7 + u32::from(port));
            spec.dscp = [0, 10, 26][usize::from(dscp % 3)];
            spec.frame_len = len;
            HeapPacket::new(spec.build())
        };
        let mut times = [0u16; 8];
        times[3] = if len.is_multiple_of(2) { 0xffff } else { 0 };
        match kind {
            0..=3 => Ok(to(1)),
            4 | 5 => Ok(to(2)),
            6 => Ok(to(3)),
            7 => Ok(to(77)),
            8 => Ok(pfc_frame(0x08, times)),
            9 => Err((to(1), DropReason::Oversize)),
            // Its IP header says more than the frame holds, by a byte or by 20.
            _ => Ok(HeapPacket::new(to(1).bytes[..len - [1, 20][len % 2]].to_vec())),
        }
    }

    /// Frames sent from the queues: port and bytes.
    type Sent = Vec<(usize, Vec<u8>)>;

    /// Two switches of one config: one takes whole bursts, the other their frames one by one.
    struct Pair {
        whole: Switch<HeapPacket>,
        one_by_one: Switch<HeapPacket>,
        links: (Window, Window),
        sent: (Sent, Sent),
    }

    impl Pair {
        fn new(config: &Config) -> Self {
            Self {
                whole: Switch::new(config, 5),
                one_by_one: Switch::new(config, 5),
                links: (Window::default(), Window::default()),
                sent: (Vec::new(), Vec::new()),
            }
        }

        /// The burst `frames` on `ingress` at `now`, the transmitter taking `room` frames within
        /// `window_ps`.
        fn burst(&mut self, ingress: usize, frames: &[Arrival], now: u64, (room, window_ps): (usize, u64)) {
            for link in [&mut self.links.0, &mut self.links.1] {
                (link.room, link.taken, link.now, link.window_ps) = (room, 0, now, window_ps);
            }
            let burst = frames.iter().map(Arrival::packet);
            self.whole.receive_burst(ingress, burst, now, &mut self.links.0);
            for frame in frames {
                match frame.packet() {
                    Ok(packet) => self.one_by_one.receive_cutting(ingress, packet, now, &mut self.links.1),
                    Err((packet, reason)) => self.one_by_one.receive_dropped(ingress, packet, reason, now),
                };
            }
        }

        /// Both take the same frame one by one (to set a scene).
        fn receive(&mut self, ingress: usize, frame: &Arrival, now: u64) {
            for switch in [&mut self.whole, &mut self.one_by_one] {
                if let Ok(packet) = frame.packet() {
                    switch.receive(ingress, packet, now);
                }
            }
        }

        /// Both send up to `most` queued frames of each port, and their PFC frames, at `now`.
        fn drain(&mut self, most: usize, now: u64) {
            for (switch, sent) in [(&mut self.whole, &mut self.sent.0), (&mut self.one_by_one, &mut self.sent.1)] {
                for port in 0..3 {
                    for _ in 0..most {
                        if let Some(packet) = switch.transmit(port, now) {
                            sent.push((port, packet.bytes));
                        }
                    }
                    while switch.take_control(port, now).is_some() {}
                }
                switch.advance(now);
            }
        }

        /// Whether the two ended in the same place: the same frames cut through and sent, and
        /// every counter, pool, group, link time, scheduler round, PFC frame and draw.
        fn same(&self) -> Result<(), proptest::test_runner::TestCaseError> {
            let (whole, one_by_one) = (&self.whole, &self.one_by_one);
            proptest::prop_assert_eq!(&self.links.0.sent, &self.links.1.sent);
            proptest::prop_assert_eq!(&self.sent.0, &self.sent.1);
            proptest::prop_assert_eq!(&whole.stats, &one_by_one.stats);
            proptest::prop_assert_eq!(whole.pool_used(), one_by_one.pool_used());
            proptest::prop_assert_eq!(whole.queued_packets(), one_by_one.queued_packets());
            for port in 0..3 {
                proptest::prop_assert_eq!(whole.link_free_ps(port), one_by_one.link_free_ps(port));
                proptest::prop_assert_eq!(
                    whole.tm.buffer.group_cells(port, 3),
                    one_by_one.tm.buffer.group_cells(port, 3)
                );
                let scheduler = |switch: &Switch<HeapPacket>| format!("{:?}", switch.tm.egress[port].scheduler);
                proptest::prop_assert_eq!(scheduler(whole), scheduler(one_by_one));
                proptest::prop_assert_eq!(whole.has_control(port), one_by_one.has_control(port));
            }
            proptest::prop_assert_eq!(whole.rng.clone().next_u64(), one_by_one.rng.clone().next_u64());
            Ok(())
        }
    }

    /// A frame of the tests' bursts: kind, DSCP, length and destination (`received`).
    #[derive(Clone, Copy)]
    struct Arrival(u8, u8, usize, u8);

    impl Arrival {
        fn packet(&self) -> Result<HeapPacket, (HeapPacket, DropReason)> {
            received(self.0, self.1, self.2, self.3)
        }
    }

    fn acl(port: &str, stage: &str) -> String {
        format!("[[acl]]\nname = \"t\"\nstage = \"{stage}\"\nports = [\"{port}\"]\n[[acl.rule]]\npriority = 1\ndscp = 0\naction = {{ tc = 1 }}\n")
    }

    const SFLOW: &str = "[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\nsampling_rate = 3\n";

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// A burst taken whole (`receive_burst`) ends where its frames taken one by one
        /// (`receive_cutting`, `receive_dropped`) end, after every burst (`Pair::same`).
        /// Bursts on each port of frames to idle, busy and paused ports, groups, nowhere,
        /// over the MTU, truncated, in lossless, lossy and always-marking classes, PFC frames
        /// among them; transmitters with room for some or none; the queues drained a little
        /// between bursts; with an ingress or egress ACL or sFlow, where no run cuts through.
        #[test]
        fn a_burst_ends_where_its_frames_one_by_one_end(
            extra in 0usize..4,
            bursts in proptest::collection::vec(
                (
                    0usize..3,
                    proptest::collection::vec((0u8..11, 0u8..3, 60usize..1600, 0u8..4), 0..24),
                    0usize..40,
                    0usize..3,
                    0usize..6,
                ),
                1..12,
            ),
        ) {
            let extra = match extra {
                0 => String::new(),
                1 => acl("p0", "ingress"),
                2 => acl("p2", "egress"),
                _ => SFLOW.to_string(),
            };
            let mut pair = Pair::new(&leaf(&extra));
            let mut now = 1_000_000;
            for (ingress, frames, room, window, drained) in bursts {
                let frames: Vec<Arrival> = frames.into_iter().map(|(kind, dscp, len, port)| Arrival(kind, dscp, len, port)).collect();
                pair.burst(ingress, &frames, now, (room, [0, 20_000, 10_000_000][window]));
                now += 50_000;
                pair.drain(drained, now);
                pair.same()?;
            }
        }
    }

    /// Where a run's own checks decide: frames around p1's MTU, and lossless frames for idle
    /// p1 while p0's group, filled by frames for paused p2, has less room than some of them
    /// charge (they queue, the rest cut through), burst for burst the same as one by one.
    #[test]
    fn a_run_takes_a_frame_only_within_its_mtu_and_its_room() {
        let mut pair = Pair::new(&leaf(""));
        // Frames of 1014 bytes carry 1000 IP bytes: p1's MTU exactly.
        let around_mtu: Vec<Arrival> = (1010..1020).map(|len| Arrival(0, 0, len, 0)).collect();
        pair.burst(0, &around_mtu, 1_000, (64, 10_000_000));
        pair.same().unwrap();
        assert_eq!(pair.links.0.sent.len(), 5, "1010 to 1014 bytes cut through");
        assert_eq!(pair.whole.stats.ports[0].drops_for(DropReason::Oversize), 5);
        // p2's peer pauses TC3; p0's group fills towards XOFF (10,240 bytes) with frames for p2.
        pair.receive(2, &Arrival(8, 0, 60, 0), 2_000);
        for _ in 0..7 {
            pair.receive(0, &Arrival(4, 2, 1100, 0), 2_000);
        }
        pair.receive(0, &Arrival(4, 2, 400, 0), 2_000);
        let room = pair.whole.tm.buffer.idle_room(0, 1, 3).expect("room below XOFF").most;
        assert!(room < plan::charge(1000) && room >= plan::charge(200), "room {room}");
        // Over the room first, then within it after.
        let sent_before = pair.links.0.sent.len();
        pair.burst(0, &[Arrival(0, 2, 1000, 0)], 3_000, (64, 10_000_000));
        pair.same().unwrap();
        assert_eq!((pair.links.0.sent.len(), pair.whole.queued_packets()), (sent_before, 9), "over the room: queued");
        pair.drain(1, 3_500);
        let sizes: Vec<Arrival> = [60, 200, 1000, 61, 900, 100].iter().map(|&len| Arrival(0, 2, len, 0)).collect();
        pair.burst(0, &sizes, 4_000, (64, 10_000_000));
        pair.same().unwrap();
        assert!(pair.links.0.sent.len() > sent_before, "some cut through");
        assert!(pair.whole.tm.buffer.queue_bytes(1, 3) > 0, "some queued");
        pair.drain(100, 4_000);
        pair.same().unwrap();
    }

    /// A run cuts through only where the idle path would: an idle port (nothing queued, no
    /// PFC frame pending, the class not paused), its class's ECN idle at depth 0, no sFlow or
    /// ACL, both ports up, no storm or XOFF outstanding for a lossless class; with the port's
    /// MTU, room and link time.
    #[test]
    fn a_run_opens_only_where_the_idle_path_would_be_taken() {
        let opens = |switch: &Switch<HeapPacket>, egress: usize, tc: usize| switch.open(0, egress, tc, 100).cuts;
        let mut switch: Switch<HeapPacket> = Switch::new(&leaf(""), 0);
        let run = switch.open(0, 1, 3, 100);
        assert!(run.cuts && run.mtu == 1000 && run.link_free_ps == 0 && (run.egress, run.tc) == (1, 3));
        assert_eq!(Some(run.most), switch.tm.buffer.idle_room(0, 1, 3).map(|room| room.most));
        assert_eq!(run.group.map(|(_, pg)| pg), Some(switch.tm.buffer.pg(3)));
        assert!(opens(&switch, 1, 0) && switch.open(0, 1, 0, 100).group.is_none(), "lossy");
        assert!(!opens(&switch, 1, 1), "ECN marks at depth 0 in TC1");
        assert!(!opens(&switch, 7, 0), "no such port");
        for extra in [acl("p0", "ingress"), acl("p1", "egress"), SFLOW.to_string()] {
            let switch: Switch<HeapPacket> = Switch::new(&leaf(&extra), 0);
            assert!(!opens(&switch, 1, 3) && !opens(&switch, 1, 0), "{extra}");
        }
        // A frame queued on p1 (its transmitter refused it).
        switch.receive(0, received(0, 0, 100, 0).unwrap(), 50);
        assert!(!opens(&switch, 1, 0) && !opens(&switch, 1, 3), "a backlog");
        while switch.transmit(1, 60).is_some() {}
        assert!(opens(&switch, 1, 0));
        // p1's peer pauses TC3: TC0 still opens.
        let mut paused = [0u16; 8];
        paused[3] = 0xffff;
        switch.receive(1, pfc_frame(0x08, paused), 70);
        assert!(!opens(&switch, 1, 3) && opens(&switch, 1, 0), "paused");
        switch.receive(1, pfc_frame(0x08, [0; 8]), 80);
        assert!(opens(&switch, 1, 3));
        // p0's group past XOFF (frames for paused p2): an XOFF outstanding, a PFC frame pending.
        switch.receive(2, pfc_frame(0x08, paused), 90);
        while !switch.has_control(0) {
            switch.receive(0, received(4, 2, 1500, 0).unwrap(), 90);
        }
        assert!(!opens(&switch, 1, 3) && opens(&switch, 1, 0), "an XOFF outstanding");
        assert!(!switch.open(1, 0, 0, 100).cuts, "a PFC frame pending on p0");
        while switch.take_control(0, 100).is_some() {}
        // p2 sends until the group is below XOFF with no headroom: the room is there, but the
        // XOFF is still outstanding (its XON is the whole path's to decide).
        switch.receive(2, pfc_frame(0x08, [0; 8]), 100);
        while switch.tm.buffer.group_cells(0, 3).1 > 0 || switch.tm.buffer.idle_room(0, 1, 3).is_none() {
            assert!(switch.transmit(2, 100).is_some());
        }
        assert!(switch.tm.pfc[0].xoff_outstanding(switch.tm.buffer.pg(3)));
        assert!(!opens(&switch, 1, 3) && opens(&switch, 1, 0), "an XOFF outstanding, below XOFF");
        for port in 1..3 {
            switch.set_link_up(port, false, 100);
        }
        assert!(!opens(&switch, 1, 0), "p1 down");
        let mut switch: Switch<HeapPacket> = Switch::new(&leaf(""), 0);
        switch.set_port_state(0, crate::link::PortState { carrier: true, admin_up: false, mtu: 1500 }, 0);
        assert!(!opens(&switch, 1, 0), "p0 shut");
    }

    /// The run's room is the idle path's: a charge passes `idle_room` exactly when
    /// `passes_idle` takes it, lossless and lossy, from an empty buffer through a group past
    /// XOFF into headroom and a lossy queue at its limit.
    #[test]
    fn a_runs_room_is_what_the_idle_path_takes() {
        let config = leaf("");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut paused = [0u16; 8];
        paused[3] = 0xffff;
        paused[0] = 0xffff;
        switch.receive(2, pfc_frame(0x09, paused), 0);
        let check = |switch: &Switch<HeapPacket>, cut_somewhere: &mut usize| {
            for tc in [0, 3] {
                let room = switch.tm.buffer.idle_room(0, 2, tc);
                for len in (60..3000).step_by(61) {
                    let passes = switch.passes_idle(0, 2, tc, len).is_some();
                    let storm_or_xoff = switch.tm.buffer.lossless(tc) && switch.tm.pfc[0].xoff_outstanding(3);
                    let in_room = room.is_some_and(|room| plan::charge(len) <= room.most) && !storm_or_xoff;
                    assert_eq!(in_room, passes, "class {tc}, {len} bytes, room {room:?}");
                    *cut_somewhere += usize::from(passes);
                    if let (true, Some(group)) = (passes, room.and_then(|room| room.group)) {
                        let judged = switch.passes_idle(0, 2, tc, len).flatten().unwrap();
                        assert_eq!(judged.occupancy, group.occupancy + plan::charge(len));
                        assert_eq!(judged.headroom, group.headroom);
                    }
                }
            }
        };
        let mut cut_somewhere = 0;
        let (mut lossless_full, mut lossy_full) = (false, false);
        for step in 0..200usize {
            check(&switch, &mut cut_somewhere);
            let dscp = if step % 2 == 0 { 26 } else { 0 };
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.2.2".parse().unwrap(), 7);
            spec.dscp = dscp;
            spec.frame_len = 600;
            match switch.receive(0, HeapPacket::new(spec.build()), 10) {
                Received::Dropped(DropReason::BufferFull) => lossy_full = true,
                Received::Dropped(DropReason::HeadroomOverflow) => lossless_full = true,
                _ => {}
            }
        }
        assert!(lossless_full && lossy_full, "both classes filled");
        let room = |tc| switch.tm.buffer.idle_room(0, 2, tc).map(|room| room.most);
        assert!(
            room(3).is_none() && room(0).is_none_or(|most| most < plan::charge(600)),
            "full: {:?}",
            (room(3), room(0))
        );
        assert!(cut_somewhere > 100);
    }
}
