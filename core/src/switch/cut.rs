//! Cut-through (`receive_cutting`): when a frame's egress port has nothing queued and no PFC
//! frame pending, its class is not paused, and the engine says the port's transmitter has
//! room now, the frame is admitted and leaves in the same instant, without touching the
//! queue arena, as on a switch ASIC: every count, the ECN decisions (at depth 0), the group's
//! charge and release (XON), the scheduler's round and the link time are as if it had been
//! queued and sent at once. A lossless frame whose charge crosses its group's XOFF point is
//! queued instead, so that the pause goes out before it. Replay does not cut through.
//!
//! The common frame takes the idle path (`passes_idle`, `cut_through_idle`): when its class's
//! ECN profile does nothing at depth 0 and its admission, made and given back at once, would
//! change nothing but the peaks (a lossy pool with room; a lossless group below XOFF with no
//! headroom in use and no XOFF outstanding; no PFC storm dropping the class), the charge is
//! judged, not made. What it skips could not act: an ECN decision at an empty queue, the
//! pool's charge and its give-back, the XOFF and XON decisions. Everything else (the peaks,
//! the scheduler's round, the link time, the counters) moves as on the whole path;
//! `the_idle_path_ends_where_the_whole_path_does` holds the two to the same end.
//!
//! Invariant: a frame cuts through only where it could not have waited behind anything (an
//! empty port, no PFC frame pending, its class not paused), and a lossless frame crossing
//! XOFF never does; the idle path leaves the buffer, PFC and the generator exactly as the
//! whole path would.

use super::*;
use crate::tm::frame::Frame;

/// Where a frame may leave at once (`Switch::receive_cutting`): the engine's transmitter.
pub trait CutThrough<P> {
    /// Whether `port`'s transmitter takes a frame now, its link being busy until
    /// `link_free_ps`.
    fn may_send(&self, port: usize, link_free_ps: u64) -> bool;
    /// Takes a data frame for `port`, received at `arrival_ps` (counted as sent by the switch;
    /// its latency is the engine's to record when it hands the frame to the port).
    fn send(&mut self, port: usize, packet: P, arrival_ps: u64);
}

/// Never cuts through: every frame is queued (replay, fabric, unit tests).
pub struct QueueAll;

impl<P> CutThrough<P> for QueueAll {
    #[inline(always)]
    fn may_send(&self, _: usize, _: u64) -> bool {
        false
    }

    fn send(&mut self, _: usize, _: P, _: u64) {
        unreachable!("may_send is always false")
    }
}

impl<P: PacketBuf> Switch<P> {
    /// Whether a frame of class `tc` may cut through `egress` now: nothing queued on the
    /// port, no PFC frame pending, the class not paused, the transmitter has room.
    #[inline(always)]
    pub(super) fn cut_allowed(&self, egress: usize, tc: usize, now: u64, cut: &impl CutThrough<P>) -> bool {
        self.port_idle(egress, tc, now) && cut.may_send(egress, self.tm.egress[egress].link_free_ps)
    }

    /// Whether nothing holds a frame of class `tc` on `egress` at `now`: nothing queued on the
    /// port, no PFC frame pending, the class not paused (`cut_allowed` without the
    /// transmitter; a run over a burst asks it once, `burst.rs`).
    #[inline(always)]
    pub(super) fn port_idle(&self, egress: usize, tc: usize, now: u64) -> bool {
        self.tm.buffer.backlog(egress) == 0
            && !self.tm.pfc[egress].has_frame()
            && !self.tm.pfc[egress].paused(tc, now, self.tm.watchdog.action)
    }

    /// Whether PFC has nothing to decide for a frame of class `tc` from `ingress` to `egress`
    /// that leaves at once: a lossy class, or a lossless one the watchdog does not drop on
    /// `egress` whose ingress group has no XOFF outstanding (its XON may be due at the
    /// give-back).
    #[inline(always)]
    pub(super) fn no_pfc_decision(&self, ingress: usize, egress: usize, tc: usize) -> bool {
        !self.tm.buffer.lossless(tc)
            || !(self.tm.pfc[egress].storm_drops(tc, self.tm.watchdog.action)
                || self.tm.pfc[ingress].xoff_outstanding(self.tm.buffer.pg(tc)))
    }

    /// The frame just admitted to its port's empty queue leaves at once: what `link` then
    /// `transmit` would do, without the arena. A lossless frame's cells go back to the share
    /// of its group that its charger (a worker) charged: this worker's, or as credits.
    #[inline(always)]
    pub(super) fn cut_through(&mut self, mut frame: Frame<P>, now: u64, cut: &mut impl CutThrough<P>) -> Received {
        let (egress, tc, len) = (frame.egress(), frame.tc(), frame.size());
        let charge = plan::charge(len);
        self.stats.ports[egress].queues[tc].peak(len as u64, charge);
        // The cells go back as the frame leaves.
        if frame.charged() {
            self.give_back(&mut frame);
        } else {
            self.tm.buffer.release_lossy(egress, tc, charge);
        }
        // The scheduler's round moves as if it had picked this frame.
        self.tm.egress[egress].scheduler.charge_alone(tc, wire_bytes(len) as u32);
        if let Err(reason) = self.mark_at_dequeue(&mut frame, true) {
            return self.refuse(frame, reason, now);
        }
        self.count_tx(&frame, now);
        cut.send(egress, frame.packet, frame.arrival_ps);
        Received::Queued { egress, tc }
    }

    /// Whether a frame of `len` bytes in class `tc` that may cut through `egress` (its queue
    /// empty, `ecn.idle_at_empty`) takes the idle path: its admission, made and given back at
    /// once, would change nothing but the peaks. `Some(Some(charge))`: a lossless frame's
    /// group charge, for the group's peaks; `Some(None)`: a lossy frame the pool takes;
    /// `None`: the whole path (a lossy frame refused, a lossless frame that would reach XOFF
    /// or whose group is in headroom or has an XOFF outstanding, a class the PFC watchdog
    /// drops).
    #[inline(always)]
    pub(super) fn passes_idle(
        &self,
        ingress: usize,
        egress: usize,
        tc: usize,
        len: usize,
    ) -> Option<Option<crate::tm::buffer::GroupCharge>> {
        let charge = plan::charge(len);
        if !self.no_pfc_decision(ingress, egress, tc) {
            return None;
        }
        if !self.tm.buffer.lossless(tc) {
            return self.tm.buffer.lossy_passes(egress, tc, charge).then_some(None);
        }
        self.tm.buffer.lossless_passes(ingress, self.tm.buffer.pg(tc), charge).map(Some)
    }

    /// The common frame's way, the idle path (module notes): a frame to an idle port whose
    /// admission `passes_idle` judged, in a class whose ECN profile does nothing at depth 0.
    /// It does what `enqueue` then `cut_through` would, less what would be undone at once
    /// or could not act: no ECN decision (none at depth 0), no charge to the pool and back
    /// (the group's peaks are kept), no PFC decision (no XOFF below the point, no XON without
    /// one outstanding). The scheduler's round, the link time and every counter move as on
    /// the whole path.
    #[inline(always)]
    pub(super) fn cut_through_idle(
        &mut self,
        frame: Frame<P>,
        group: Option<crate::tm::buffer::GroupCharge>,
        now: u64,
        cut: &mut impl CutThrough<P>,
    ) -> Received {
        let (egress, tc, len) = (frame.egress(), frame.tc(), frame.size());
        if let Some(group) = group {
            let pg = self.tm.buffer.pg(tc);
            self.stats.ports[frame.ingress()].priority_groups[pg].peak(group.occupancy, group.headroom);
        }
        self.stats.ports[egress].queues[tc].peak(len as u64, plan::charge(len));
        self.tm.egress[egress].scheduler.charge_alone(tc, wire_bytes(len) as u32);
        self.count_tx(&frame, now);
        cut.send(egress, frame.packet, frame.arrival_ps);
        Received::Queued { egress, tc }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::*;
    use crate::packet::HeapPacket;
    use crate::traffic::frames::FrameSpec;

    #[test]
    fn a_frame_that_cuts_through_counts_as_one_queued_and_sent_at_once() {
        // ECN with kmin 0 decides at enqueue (TC0) and at dequeue (TC3) at every depth,
        // drawing from the generator each time (at depth 0 it never marks): the draws must
        // match. TC0 is lossy, TC3 lossless; DWRR between them.
        let qos = "[qos.ecn.0]\nkmin_bytes = 0\nkmax_bytes = 100000\npmax = 1.0\n\
                   [qos.ecn.3]\nkmin_bytes = 0\nkmax_bytes = 100000\npmax = 1.0\nmark_on = \"dequeue\"\n\
                   [qos.scheduler]\ndwrr = { 0 = 1, 3 = 3 }";
        let config = config("", qos);
        let mut cutting: Switch<HeapPacket> = Switch::new(&config, 7);
        let mut queueing: Switch<HeapPacket> = Switch::new(&config, 7);
        let mut link = Collect { open: true, sent: Vec::new() };
        let mut sent = Vec::new();
        let mut now = 0;
        for index in 0..40u64 {
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
            spec.dscp = if index % 3 == 0 { 0 } else { 26 };
            spec.ecn = if index % 5 == 0 { 0 } else { 0b10 };
            spec.frame_len = 64 + (index as usize * 37) % 1400;
            let frame = spec.build();
            // The port is idle at each arrival: queued, the frame would leave at once.
            now = now.max(queueing.link_free_ps(1)) + 1_000;
            let cut = cutting.receive_cutting(0, HeapPacket::new(frame.clone()), now, &mut link);
            let queued = queueing.receive(0, HeapPacket::new(frame), now);
            assert_eq!(cut, queued, "frame {index}");
            if let Some(packet) = queueing.transmit(1, now) {
                sent.push((1, packet.bytes));
            }
            assert_eq!(cutting.link_free_ps(1), queueing.link_free_ps(1), "frame {index}");
        }
        assert!(link.sent.len() > 20 && cutting.queued_packets() == 0, "{} cut through", link.sent.len());
        assert_eq!(link.sent, sent, "the same bytes, CE marks included");
        // Every counter but latency (the engine records a cut frame's) is the same.
        let mut queued_stats = queueing.stats.clone();
        queued_stats.latency = cutting.stats.latency.clone();
        assert_eq!(cutting.stats, queued_stats);
        let (mut a, mut b) = (cutting.rng.clone(), queueing.rng.clone());
        assert_eq!(a.unit(), b.unit(), "as many draws");
        assert_eq!(cutting.pool_used(), (0, 0));
        assert_eq!(cutting.tm.buffer.group_cells(0, 3), (0, 0));
        // The scheduler's round moved as if the cut frames had been queued and picked: the
        // same deficits, cursor and credit.
        let scheduler = |switch: &Switch<HeapPacket>| format!("{:?}", switch.tm.egress[1].scheduler);
        assert_eq!(scheduler(&cutting), scheduler(&queueing));
        assert_eq!(
            cutting.tm.egress[1].scheduler.select(0xff, 0b1001, |_| 100),
            queueing.tm.egress[1].scheduler.select(0xff, 0b1001, |_| 100)
        );
    }

    /// The idle path against the whole one: p0's lossless group fills with frames for p2,
    /// whose peer pauses them, while frames for idle p1 cut through (lossless and lossy, ECN
    /// on both classes from kmin above 0, so the profile does nothing at depth 0). The group
    /// goes from empty through its pool to XOFF and into headroom, and back when p2 drains:
    /// the cutting switch takes the idle path where its admission changes nothing, the whole
    /// path elsewhere, and ends where a switch that queues every frame ends.
    #[test]
    fn the_idle_path_ends_where_the_whole_path_does() {
        let config = crate::testing::Leaf::new("t")
            .qos(
                "dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n\
                 [qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 8192\n\
                 [qos.ecn.0]\nkmin_bytes = 2000\nkmax_bytes = 4000\npmax = 0.5\n\
                 [qos.ecn.3]\nkmin_bytes = 2000\nkmax_bytes = 4000\npmax = 0.5\n\
                 [qos.scheduler]\ndwrr = { 0 = 1, 3 = 3 }",
            )
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .port("p2", 100.0, "")
            .route("10.0.1.0/24", "p1")
            .route("10.0.2.0/24", "p2")
            .config();
        let mut cutting: Switch<HeapPacket> = Switch::new(&config, 3);
        let mut queueing: Switch<HeapPacket> = Switch::new(&config, 3);
        let mut link = Collect { open: true, sent: Vec::new() };
        let mut sent = Vec::new();
        let to = |subnet: u8, dscp: u8, len: usize| {
            let destination = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, subnet, 2));
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), destination, 7);
            spec.dscp = dscp;
            spec.frame_len = len;
            spec.build()
        };
        let mut paused = [0u16; 8];
        paused[3] = 0xffff;
        let mut now = 1_000;
        for (switch, at) in [(&mut cutting, now), (&mut queueing, now)] {
            switch.receive(2, pfc_frame(0x08, paused), at);
        }
        type Pair<'a> = (&'a mut Switch<HeapPacket>, &'a mut Switch<HeapPacket>);
        let both = |(cutting, queueing): Pair, frame: Vec<u8>, now: u64, link: &mut Collect, sent: &mut Vec<_>| {
            let cut = cutting.receive_cutting(0, HeapPacket::new(frame.clone()), now, link);
            let queued = queueing.receive(0, HeapPacket::new(frame), now);
            assert_eq!(cut, queued);
            if let Some(packet) = queueing.transmit(1, now) {
                sent.push((1, packet.bytes));
            }
            // A lossless frame past XOFF queues on the cutting switch too (the pause goes
            // first): its engine sends it from the queue.
            if let Some(packet) = cutting.transmit(1, now) {
                link.sent.push((1, packet.bytes));
            }
            assert_eq!(cutting.link_free_ps(1), queueing.link_free_ps(1));
            assert_eq!(cutting.has_control(0), queueing.has_control(0), "the same PFC decisions");
            cutting.tm.buffer.group_cells(0, 3)
        };
        let mut seen_headroom = false;
        for index in 0..60usize {
            now = now.max(queueing.link_free_ps(1)) + 1_000;
            // Two frames for the paused port, then one for the idle one, lossless or lossy.
            for _ in 0..2 {
                let (_, headroom) = both((&mut cutting, &mut queueing), to(2, 26, 600), now, &mut link, &mut sent);
                seen_headroom |= headroom > 0;
            }
            let dscp = if index % 3 == 0 { 0 } else { 26 };
            both((&mut cutting, &mut queueing), to(1, dscp, 64 + (index * 53) % 900), now, &mut link, &mut sent);
            // p2's peer lets go now and then: its queue drains, and the group with it.
            if index % 20 == 19 {
                now += 1_000;
                for switch in [&mut cutting, &mut queueing] {
                    switch.receive(2, pfc_frame(0x08, [0; 8]), now);
                    while switch.transmit(2, now).is_some() {}
                    while switch.take_control(0, now).is_some() {}
                    switch.receive(2, pfc_frame(0x08, paused), now);
                }
            }
        }
        assert!(seen_headroom, "the group reached its headroom");
        assert!(link.sent.len() >= 40, "{} cut through", link.sent.len());
        assert_eq!(link.sent, sent, "the same bytes");
        let mut queued_stats = queueing.stats.clone();
        queued_stats.latency = cutting.stats.latency.clone();
        assert_eq!(cutting.stats, queued_stats);
        assert_eq!(cutting.rng.clone().unit(), queueing.rng.clone().unit(), "as many draws");
        assert_eq!(cutting.pool_used(), queueing.pool_used());
        assert_eq!(cutting.tm.buffer.group_cells(0, 3), queueing.tm.buffer.group_cells(0, 3));
        let scheduler = |switch: &Switch<HeapPacket>| format!("{:?}", switch.tm.egress[1].scheduler);
        assert_eq!(scheduler(&cutting), scheduler(&queueing));
    }

    /// Which frames take the idle path: an empty group's and a lossy pool's, never a group in
    /// headroom, with an XOFF outstanding (its XON may be due at the give-back), or a class
    /// the PFC watchdog drops in.
    #[test]
    fn the_idle_path_is_taken_only_where_admission_would_change_nothing() {
        let qos = "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 8192\n\
                   [qos.pfc_watchdog]\ndetection_ms = 1\nrestoration_ms = 1000\naction = \"drop\"";
        let config = crate::testing::Leaf::new("t")
            .qos(&format!("dscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n{qos}"))
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .port("p2", 100.0, "")
            .route("10.0.1.0/24", "p1")
            .route("10.0.2.0/24", "p2")
            .config();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let (lossless, lossy) = (3, 0);
        let charge = plan::charge(600);
        // Empty: a lossless frame's charge is judged, with the group's peaks from it.
        let judged = switch.passes_idle(0, 1, lossless, 600).expect("an empty group takes the idle path");
        assert_eq!(judged.map(|group| (group.occupancy, group.headroom, group.past_xoff)), Some((charge, 0, false)));
        assert_eq!(switch.passes_idle(0, 1, lossy, 600), Some(None), "the lossy pool takes it");
        // p2's peer pauses TC3: p0's group fills with frames for p2, past XOFF into headroom.
        let mut paused = [0u16; 8];
        paused[3] = 0xffff;
        switch.receive(2, pfc_frame(0x08, paused), 0);
        // A RoCEv2 frame for p2 in the given DSCP (26: lossless TC3; 0: lossy TC0).
        let to_p2 = |dscp: u8, frame_len: usize| {
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.2.2".parse().unwrap(), 7);
            spec.dscp = dscp;
            spec.frame_len = frame_len;
            HeapPacket::new(spec.build())
        };
        // Just below XOFF, none outstanding: a frame whose own charge would cross it takes the
        // whole path, which decides the XOFF.
        while switch.tm.buffer.group_occupancy(0, 3) + plan::charge(60) <= 10240 {
            switch.receive(0, to_p2(26, 60), 10);
        }
        assert!(!switch.tm.pfc[0].xoff_outstanding(3) && switch.tm.buffer.group_occupancy(0, 3) + charge > 10240);
        assert_eq!(switch.passes_idle(0, 1, lossless, 600), None, "its charge would cross XOFF");
        while switch.tm.buffer.group_cells(0, 3).1 == 0 {
            switch.receive(0, to_p2(26, 600), 10);
        }
        assert!(switch.tm.pfc[0].xoff_outstanding(3));
        assert_eq!(switch.passes_idle(0, 1, lossless, 600), None, "in headroom");
        assert_eq!(switch.passes_idle(0, 1, lossy, 600), Some(None), "lossy frames are not held by the group");
        // p2 sends until the group is out of headroom and below XOFF, but above XON: the XOFF
        // is still outstanding, so the give-back's XON decision must run.
        switch.receive(2, pfc_frame(0x08, [0; 8]), 20);
        while switch.tm.buffer.group_occupancy(0, 3) + charge > 10240 || switch.tm.buffer.group_cells(0, 3).1 > 0 {
            assert!(switch.transmit(2, 20).is_some());
        }
        assert!(switch.tm.buffer.group_occupancy(0, 3) > 5120 && switch.tm.pfc[0].xoff_outstanding(3));
        assert_eq!(switch.passes_idle(0, 1, lossless, 600), None, "an XOFF outstanding");
        while switch.transmit(2, 20).is_some() {}
        while switch.take_control(0, 20).is_some() {}
        assert!(!switch.tm.pfc[0].xoff_outstanding(3));
        assert!(switch.passes_idle(0, 1, lossless, 600).is_some(), "empty again");
        // A PFC storm on p1's TC3 (a frame held by pauses past the watchdog's detection):
        // frames are dropped there, by the whole path.
        switch.receive(0, frame(26, 100), 30);
        let mut now = 30;
        while !switch.tm.pfc[1].storm_drops(3, crate::config::WatchdogAction::Drop) && now < 3_000_000_000 {
            switch.receive(1, pfc_frame(0x08, paused), now);
            switch.advance(now);
            now += 100_000_000;
        }
        while switch.transmit(1, now).is_some() {}
        assert!(switch.tm.pfc[1].storm_drops(3, crate::config::WatchdogAction::Drop), "the watchdog saw the storm");
        assert_eq!(switch.passes_idle(0, 1, lossless, 600), None, "a storm on the class");
        assert_eq!(switch.passes_idle(0, 1, lossy, 600), Some(None));
        // A lossless pool that p1's group fills: p0's group is empty and below XOFF, but
        // its charge would go to headroom.
        let small_pool = crate::testing::Leaf::new("t")
            .qos(&format!("dscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n{qos}\n[qos.buffer]\nlossless_pool_bytes = 10496\nlossy_pool_bytes = 7680\nlossy_alpha = 64.0"))
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .port("p2", 100.0, "")
            .route("10.0.1.0/24", "p1")
            .route("10.0.2.0/24", "p2")
            .config();
        let mut switch: Switch<HeapPacket> = Switch::new(&small_pool, 0);
        switch.receive(2, pfc_frame(0x08, paused), 0);
        while switch.tm.buffer.group_cells(1, 3).1 == 0 {
            switch.receive(1, to_p2(26, 600), 10);
        }
        assert_eq!(switch.tm.buffer.group_occupancy(0, 3), 0);
        assert!(!switch.tm.pfc[0].xoff_outstanding(3));
        assert_eq!(switch.passes_idle(0, 1, lossless, 600), None, "no room in the pool");
        // A lossy pool full of frames queued for p2: the whole path refuses (or trims) there.
        assert_eq!(switch.passes_idle(0, 1, lossy, 600), Some(None));
        let mut refused = false;
        for _ in 0..1_000_000 {
            if switch.receive(0, to_p2(0, 600), 20) == Received::Dropped(DropReason::BufferFull) {
                refused = true;
                break;
            }
        }
        assert!(refused, "the lossy pool filled");
        assert_eq!(switch.passes_idle(0, 1, lossy, 600), None, "no room in the lossy pool");
    }

    #[test]
    fn frames_queue_behind_a_backlog_a_pause_or_a_busy_link() {
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut link = Collect { open: false, sent: Vec::new() };
        // The transmitter has no room: queued.
        switch.receive_cutting(0, frame(26, 1000), 0, &mut link);
        assert_eq!(switch.queued_packets(), 1);
        // Room again, but a frame waits: this one queues behind it, in order.
        link.open = true;
        switch.receive_cutting(0, frame(26, 1000), 0, &mut link);
        assert_eq!((switch.queued_packets(), link.sent.len()), (2, 0));
        while switch.transmit(1, 0).is_some() {}
        // p1's peer pauses TC3: nothing cuts through a paused class; TC0 still does.
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        switch.receive(1, pfc_frame(0x08, times), 0);
        switch.receive_cutting(0, frame(26, 1000), 10, &mut link);
        assert_eq!((switch.queued_packets(), link.sent.len()), (1, 0));
        switch.receive(1, pfc_frame(0x08, [0; 8]), 20);
        while switch.transmit(1, 20).is_some() {}
        // A lossless frame whose charge crosses XOFF queues, so that the pause goes first.
        for _ in 0..10 {
            switch.receive_cutting(0, frame(26, 1000), 30, &mut link);
        }
        assert_eq!((switch.queued_packets(), link.sent.len()), (0, 10), "ten cut through");
        let mut held = Vec::new();
        link.open = false;
        for _ in 0..11 {
            switch.receive_cutting(0, frame(26, 1000), 40, &mut link);
            held.push(());
        }
        assert!(switch.has_control(0), "XOFF");
        link.open = true;
        assert!(matches!(switch.receive_cutting(0, frame(0, 100), 50, &mut link), Received::Queued { .. }));
        assert_eq!(link.sent.len(), 10, "behind the backlog, even in another class");
        assert!(conserved(&switch));
    }
}
