//! Cut-through (`receive_cutting`): when a frame's egress port has nothing queued and no PFC
//! frame pending, its class is not paused, and the engine says the port's transmitter has
//! room now, the frame is admitted and leaves in the same instant, without touching the
//! queue arena, as on a switch ASIC: every count, the ECN decisions (at depth 0), the group's
//! charge and release (XON), the scheduler's round and the link time are as if it had been
//! queued and sent at once. A lossless frame whose charge crosses its group's XOFF point is
//! queued instead, so that the pause goes out before it. Replay does not cut through.
//!
//! Invariant: a frame cuts through only where it could not have waited behind anything (an
//! empty port, no PFC frame pending, its class not paused), and a lossless frame crossing
//! XOFF never does.

use super::*;

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
        self.buffer.backlog(egress) == 0
            && !self.pfc[egress].has_frame()
            && cut.may_send(egress, self.egress[egress].link_free_ps)
            && self.pfc[egress].eligible(now, self.watchdog.action) & (1 << tc) != 0
    }

    /// The frame just admitted to `egress`'s empty queue `tc` leaves at once: what `link`
    /// then `transmit` would do, without the arena. A lossless frame's cells go back to the
    /// share of its group that `charger` (a worker) charged: this worker's, or as credits.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn cut_through(
        &mut self,
        ingress: usize,
        charger: u8,
        egress: usize,
        tc: usize,
        (mut packet, len): (P, usize),
        mut ip: IpHeader,
        mut marked: bool,
        arrival_ps: u64,
        now: u64,
        cut: &mut impl CutThrough<P>,
    ) -> Received {
        let charge = plan::charge(len);
        self.stats.ports[egress].queues[tc].peak(len as u64, charge);
        // The cells go back as the frame leaves.
        if self.buffer.lossless(tc) {
            let pg = self.buffer.pg(tc);
            self.buffer.give_back(charger, ingress, pg, charge);
            self.group_released(ingress, pg);
        } else {
            self.buffer.release_lossy(egress, tc, charge);
        }
        // The scheduler's round moves as if it had picked this frame.
        let eligible = self.pfc[egress].eligible(now, self.watchdog.action);
        self.egress[egress].scheduler.select(eligible, 1 << tc, |_| wire_bytes(len) as usize);
        if self.ecn.marks_on(tc, MarkOn::Dequeue) {
            match self.ecn.apply(tc, 0, &mut packet, &mut ip, &mut self.rng) {
                Ok(ce) => marked |= ce,
                Err(reason) => return self.refuse(ingress, egress, tc, reason, (&packet, now)),
            }
        }
        self.egress[egress].occupy(now, len);
        let stats = &mut self.stats.ports[egress];
        stats.tx_packets += 1;
        stats.tx_bytes += len as u64;
        stats.queues[tc].tx_packets += 1;
        stats.queues[tc].tx_bytes += len as u64;
        stats.queues[tc].ecn_marked += u64::from(marked);
        cut.send(egress, packet, arrival_ps);
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
        assert_eq!(cutting.buffer.group_cells(0, 3), (0, 0));
        // The scheduler's round moved as if the cut frames had been queued and picked: the
        // same deficits, cursor and credit.
        let scheduler = |switch: &Switch<HeapPacket>| format!("{:?}", switch.egress[1].scheduler);
        assert_eq!(scheduler(&cutting), scheduler(&queueing));
        assert_eq!(
            cutting.egress[1].scheduler.select(0xff, 0b1001, |_| 100),
            queueing.egress[1].scheduler.select(0xff, 0b1001, |_| 100)
        );
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
