//! Sharded (`Switch::sharded`, `tm::shard`): each worker's switch owns some ports. A frame for
//! another worker's port is admitted to its ingress group here, then waits in `outgoing` for
//! the engine to carry it over a ring to the owner's `accept`; `sync_shard`, once per loop,
//! applies the credits other workers gave back, publishes this worker's, and refreshes the
//! pools and the balance gauges.
//!
//! Invariant: a frame for another worker's port is charged to its ingress group here, exactly
//! once, and its cells come back as credits when the owner sends or drops it (`tm::shard`).

use super::*;
use crate::tm::frame::Frame;
use crate::tm::shard::Batch;

/// A worker's place in a sharded run.
pub(super) struct Seat<P> {
    pub(super) board: std::sync::Arc<ShardBoard>,
    pub(super) me: usize,
    /// Per worker, the batch being filled for it (this worker's own stays empty). Boxed, so
    /// that handing one over moves a pointer, not the batch.
    pub(super) outgoing: Vec<Box<Batch<P>>>,
    /// Per ingress port and priority: the other workers' credits to this worker's share
    /// already applied (polled ports only).
    pub(super) applied: Vec<[u64; TRAFFIC_CLASSES]>,
}

/// Drops a batch of frames between workers that will never be queued (shutdown), counting
/// each as `buffer_full` on its ingress port and its egress queue; returns how many. A MAC
/// control frame on its way to its port's owner is not data: freed, never counted as a drop.
pub fn discard_transfers<P>(stats: &mut SwitchStats, batch: &mut Batch<P>) -> u64 {
    let mut discarded = 0;
    for frame in batch.drain().filter(|frame| !frame.is_mac_control()) {
        stats.ports[frame.ingress()].count_drop(DropReason::BufferFull);
        stats.ports[frame.egress()].queues[frame.tc()].dropped += 1;
        discarded += 1;
    }
    discarded
}

impl<P: PacketBuf> Switch<P> {
    /// Worker `me`'s switch of a sharded run: it owns the ports `board` gives it.
    pub fn sharded(config: &Config, seed: u64, board: std::sync::Arc<ShardBoard>, me: usize) -> Self {
        let buffer =
            SharedBuffer::sharded(config, me, board.workers(), |port| board.polls(me, port), board.overcommit_frames());
        let seat = Seat {
            outgoing: (0..board.workers()).map(|_| Box::default()).collect(),
            applied: vec![[0; TRAFFIC_CLASSES]; config.ports.len()],
            board,
            me,
        };
        Self::build(config, seed, buffer, Some(seat))
    }

    /// The ingress half for a port of another worker: a lossless frame is charged to its
    /// group here (XOFF decided here, on the exact count), then the frame waits in the
    /// batch for the owner, which takes it with `accept`.
    #[inline(never)]
    pub(super) fn hand_off(&mut self, mut frame: Frame<P>, now: u64) -> Received {
        if let Err(reason) = self.charge_group(&mut frame) {
            return self.refuse(frame, reason, now);
        }
        let (egress, tc) = (frame.egress(), frame.tc());
        match self.push_outgoing(frame) {
            Ok(()) => Received::Transferred { egress, tc },
            // The engine takes the batches after each rx burst, so this is its bug; still
            // counted, never lost.
            Err(frame) => self.refuse(frame, DropReason::BufferFull, now),
        }
    }

    /// A PFC or PAUSE frame received on a queue of another worker's port: it crosses to the
    /// port's owner, which applies it (`accept`) as received at `now`.
    #[cold]
    pub(super) fn hand_off_control(&mut self, ingress: usize, packet: P, now: u64) -> Received {
        let len = packet.len();
        let frame = Frame::mac_control(packet, len, ingress, now);
        if self.push_outgoing(frame).is_err() {
            // As in `hand_off`: the engine's bug, counted.
            self.stats.ports[ingress].count_drop(DropReason::BufferFull);
            return Received::Dropped(DropReason::BufferFull);
        }
        Received::FlowControl
    }

    /// Puts a frame in the batch for the worker owning its egress port; a full batch gives
    /// it back.
    pub(super) fn push_outgoing(&mut self, frame: Frame<P>) -> Result<(), Frame<P>> {
        let seat = self.shard.as_mut().expect("only a sharded switch hands off");
        let worker = seat.board.owner(frame.egress());
        seat.outgoing[worker].push(frame)
    }

    /// Whether a batch for another worker holds frames (the engine polls no rx until it has
    /// handed them all over).
    pub fn outgoing_pending(&self) -> bool {
        self.shard.as_ref().is_some_and(|seat| seat.outgoing.iter().any(|batch| !batch.is_empty()))
    }

    /// The batch waiting for worker `to` (empty when there is none).
    pub fn outgoing(&mut self, to: usize) -> Option<&mut Box<Batch<P>>> {
        self.shard.as_mut().and_then(|seat| seat.outgoing.get_mut(to))
    }

    /// Drops the frames still waiting for other workers (at shutdown, when they could not
    /// be handed over in time), counted as `buffer_full`.
    pub fn discard_outgoing(&mut self) -> u64 {
        let Some(seat) = self.shard.as_mut() else { return 0 };
        seat.outgoing.iter_mut().map(|batch| discard_transfers(&mut self.stats, batch)).sum()
    }

    /// The egress half of frames another worker received for this worker's ports: each is
    /// queued (ECN, the watchdog, the lossy limit; lossless cells were charged by the
    /// sender) or dropped and counted, its credits given back. Returns how many it took.
    /// `now` is when this worker takes the batch (a frame's link time and cut-through start
    /// then; its arrival stamp stays the receiving worker's).
    pub fn accept(&mut self, batch: &mut Batch<P>, now: u64, cut: &mut impl CutThrough<P>) -> u64 {
        // The buffers' headers were last written on the receiving worker's core: their loads
        // start together now, before the tx burst frees them (two workers, one hot port, half
        // the frames crossing: 87% of `accept`'s samples waited on the first read).
        for frame in batch.iter() {
            frame.packet.prefetch_buffer();
        }
        let mut accepted = 0;
        for frame in batch.drain() {
            accepted += 1;
            if frame.is_mac_control() {
                self.receive_cutting(frame.ingress(), frame.packet, frame.arrival_ps, cut);
                continue;
            }
            let member = frame.member;
            if let Received::Queued { .. } = self.enqueue(frame, now, cut) {
                self.count_member(member);
            }
        }
        accepted
    }

    /// Once per loop of a sharded worker: applies the credits other workers gave back to
    /// this worker's shares of groups (deciding XON), publishes the credits it owes them, its
    /// shares of spread ports' groups, its pool charges and its ports' gauges, and reads the
    /// others' pool charges and shares. The owner of a spread port decides its XOFF and XON
    /// here on the whole group, the other pollers' frames included.
    pub fn sync_shard(&mut self, now: u64) {
        let Some(seat) = self.shard.as_mut() else { return };
        let (board, me) = (&*seat.board, seat.me);
        let lossless_pgs = self.tm.buffer.plan().lossless_pgs;
        for port in 0..self.tm.egress.len() {
            let owned = board.owner(port) == me;
            let polled = board.polls(me, port);
            let spread = board.spread(port);
            for pg in (0..TRAFFIC_CLASSES).filter(|&pg| lossless_pgs & (1 << pg) != 0) {
                if polled {
                    let total = board.released_to(me, port, pg);
                    let credit = total - seat.applied[port][pg];
                    if credit > 0 {
                        seat.applied[port][pg] = total;
                        self.tm.buffer.release_group(port, pg, credit);
                    }
                }
                for charger in (0..board.workers()).filter(|&worker| worker != me && board.polls(worker, port)) {
                    board.publish_released(me, charger, port, pg, self.tm.buffer.released(charger, port, pg));
                }
                if spread && polled {
                    board.publish_share(me, port, pg, self.tm.buffer.group_cells(port, pg));
                    self.tm.buffer.set_others_share(port, pg, board.others_share(me, port, pg));
                }
                if owned {
                    let occupancy = self.tm.buffer.group_occupancy(port, pg);
                    let past_xoff = || occupancy > self.tm.buffer.xoff() || self.tm.buffer.group_headroom(port, pg) > 0;
                    if spread && past_xoff() {
                        self.tm.pfc[port].decide_xoff(pg);
                    } else if self.tm.pfc[port].xoff_outstanding(pg) {
                        self.tm.pfc[port].decide_xon(pg, occupancy, self.tm.buffer.xon());
                    }
                    self.tm.control_decided += u64::from(self.tm.pfc[port].has_frame());
                }
            }
            if owned {
                let queue_bytes = std::array::from_fn(|tc| self.tm.buffer.queue_bytes(port, tc));
                let paused = !self.tm.pfc[port].eligible(now, self.tm.watchdog.action);
                board.publish_gauge(port, self.tm.egress[port].link_free_ps, queue_bytes, paused);
            }
        }
        let (lossless, lossy) = self.tm.buffer.pool_used();
        board.publish_pools(me, lossless, lossy);
        self.tm.buffer.set_others_used(board.others_pool_used(me));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::*;
    use crate::packet::HeapPacket;
    use crate::testing::Leaf;
    use crate::traffic::frames::FrameSpec;

    /// Four 100G ports p0..p3 (10.0.N.0/24), dealt to two workers: p0, p1 to worker 0 and
    /// p2, p3 to worker 1.
    fn sharded_pair(extra_qos: &str) -> (Config, Switch<HeapPacket>, Switch<HeapPacket>) {
        let mut leaf =
            Leaf::new("t").qos(&format!("dscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n{extra_qos}"));
        for port in 0..4 {
            leaf = leaf.port(&format!("p{port}"), 100.0, "").route(&format!("10.0.{port}.0/24"), &format!("p{port}"));
        }
        let config = leaf.config();
        let board = std::sync::Arc::new(ShardBoard::new(ShardBoard::deal(4, 2), BURST_FOR_TESTS));
        let first = Switch::sharded(&config, 0, std::sync::Arc::clone(&board), 0);
        let second = Switch::sharded(&config, 1, board, 1);
        (config, first, second)
    }

    const BURST_FOR_TESTS: usize = 32;

    /// `sharded_pair` with p0's two rx queues spread over both workers: worker 0 owns p0 and
    /// polls its queue 0, worker 1 polls queue 1.
    fn spread_pair(extra_qos: &str) -> (Switch<HeapPacket>, Switch<HeapPacket>) {
        let (config, _, _) = sharded_pair(extra_qos);
        let board = ShardBoard::with_rx_queues(ShardBoard::deal(4, 2), vec![2, 1, 1, 1], BURST_FOR_TESTS);
        let board = std::sync::Arc::new(board);
        assert!(board.spread(0) && board.polls(1, 0) && !board.spread(2));
        let first = Switch::sharded(&config, 0, std::sync::Arc::clone(&board), 0);
        let second = Switch::sharded(&config, 1, board, 1);
        (first, second)
    }

    /// One loop's end on both workers: each publishes, then each reads the other.
    fn sync_both(first: &mut Switch<HeapPacket>, second: &mut Switch<HeapPacket>, now: u64) {
        first.sync_shard(now);
        second.sync_shard(now);
        first.sync_shard(now);
    }

    fn to_port(port: u8, dscp: u8, len: usize) -> HeapPacket {
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), format!("10.0.{port}.2").parse().unwrap(), 7);
        spec.dscp = dscp;
        spec.frame_len = len;
        HeapPacket::new(spec.build())
    }

    /// What an engine does between two workers: the sender's batch into the receiver.
    fn carry(from: &mut Switch<HeapPacket>, to: &mut Switch<HeapPacket>, worker: usize) -> u64 {
        let batch = from.outgoing(worker).expect("a batch per worker");
        let mut taken = std::mem::take(batch);
        to.accept(&mut taken, 0, &mut QueueAll)
    }

    #[test]
    fn sharded_a_lossless_group_pauses_on_its_exact_count_and_resumes_on_credits() {
        // As `lossless_group_sends_xoff_uses_headroom_then_xon`, but the frames come in on p0
        // (worker 0) for p3 (worker 1).
        let (_, mut ingress, mut egress) =
            sharded_pair("[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        assert!(ingress.owns(0) && ingress.owns(1) && !ingress.owns(2) && egress.owns(3));
        for _ in 0..10 {
            assert_eq!(ingress.receive(0, to_port(3, 26, 1000), 0), Received::Transferred { egress: 3, tc: 3 });
        }
        assert!(!ingress.has_control(0));
        ingress.receive(0, to_port(3, 26, 1000), 0);
        assert!(ingress.has_control(0), "XOFF from the ingress worker, at once");
        assert_eq!(ingress.take_control(0, 1_000).unwrap().times[3], 0xffff);
        for _ in 0..3 {
            ingress.receive(0, to_port(3, 26, 1000), 0);
        }
        assert_eq!(ingress.receive(0, to_port(3, 26, 1000), 0), Received::Dropped(DropReason::HeadroomOverflow));
        assert!(ingress.outgoing_pending());
        assert_eq!(ingress.queued_packets(), 0, "nothing queues on the ingress worker");
        assert_eq!(carry(&mut ingress, &mut egress, 1), 14);
        assert!(!ingress.outgoing_pending());
        assert_eq!(egress.queue_bytes(3, 3), 14 * 1000);
        assert_eq!(egress.pool_used(), (0, 0), "the egress worker charges no lossless pool");
        assert_eq!(ingress.pool_used(), (10 * 1024, 0));
        // Nine leave worker 1; worker 0 has not seen the credits yet: no XON.
        for _ in 0..9 {
            egress.transmit(3, 0).unwrap();
        }
        assert!(!egress.has_control(0) && !ingress.has_control(0));
        ingress.sync_shard(0);
        assert!(!ingress.has_control(0), "credits published once per loop, not yet");
        egress.sync_shard(0);
        ingress.sync_shard(0);
        let xon = ingress.take_control(0, 300_000_000).unwrap();
        assert_eq!((xon.class_enable, xon.times[3]), (0x08, 0));
        // Headroom gave back first, as a local frame would.
        assert_eq!(ingress.tm.buffer.group_cells(0, 3), (5 * 1024, 0));
        while egress.transmit(3, 0).is_some() {}
        egress.sync_shard(0);
        ingress.sync_shard(0);
        assert_eq!(ingress.tm.buffer.group_cells(0, 3), (0, 0));
        assert_eq!((ingress.pool_used(), egress.pool_used()), ((0, 0), (0, 0)));
        // Every frame counted once across the two workers.
        let mut total = ingress.stats.clone();
        total.add(&egress.stats);
        assert_eq!((total.rx_packets(), total.tx_packets(), total.dropped()), (15, 14, 1));
        assert_eq!(total.ports[3].queues[3].tx_packets, 14);
        assert_eq!(total.ports[0].drops_for(DropReason::HeadroomOverflow), 1);
    }

    #[test]
    fn a_spread_port_pauses_on_its_whole_group_from_its_owner_and_resumes_on_both_workers_credits() {
        // p0's peer sends on both queues: worker 0 takes frames for p1 (its own port), worker 1
        // frames for p3 (its own). XOFF 10 frames of 1,000 bytes (1,024 cell bytes each).
        let (mut owner, mut other) =
            spread_pair("[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 8192");
        for _ in 0..5 {
            assert!(matches!(owner.receive(0, to_port(1, 26, 1000), 0), Received::Queued { egress: 1, .. }));
            assert!(matches!(other.receive(0, to_port(3, 26, 1000), 0), Received::Queued { egress: 3, .. }));
        }
        assert_eq!((owner.tm.buffer.group_cells(0, 3), other.tm.buffer.group_cells(0, 3)), ((5120, 0), (5120, 0)));
        assert!(!owner.has_control(0), "each share alone is half the XOFF point");
        // Worker 1's sixth frame takes the group past XOFF: only the owner may send the XOFF,
        // and it decides at its next loop, once worker 1 has published.
        sync_both(&mut owner, &mut other, 0);
        assert_eq!(owner.tm.buffer.group_occupancy(0, 3), 10_240);
        other.receive(0, to_port(3, 26, 1000), 0);
        assert!(!other.has_control(0), "worker 1 never sends p0's PFC frames");
        assert!(!owner.has_control(0));
        sync_both(&mut owner, &mut other, 0);
        assert_eq!(owner.take_control(0, 1_000).unwrap().times[3], 0xffff, "XOFF from the owner");
        // Past XOFF both workers charge headroom, judged on the whole group: 8 cells of it.
        assert_eq!(owner.receive(0, to_port(1, 26, 1000), 0), Received::Queued { egress: 1, tc: 3 });
        assert_eq!(other.tm.buffer.group_headroom(0, 3), 1024, "its own frame");
        sync_both(&mut owner, &mut other, 0);
        assert_eq!(other.tm.buffer.group_headroom(0, 3), 2048, "and the owner's");
        // Worker 1 may take the 6 frames left of the headroom: the next is refused.
        for _ in 0..6 {
            assert_eq!(other.receive(0, to_port(3, 26, 1000), 0), Received::Queued { egress: 3, tc: 3 });
        }
        assert_eq!(other.receive(0, to_port(3, 26, 1000), 0), Received::Dropped(DropReason::HeadroomOverflow));
        // Both ports drain: each worker's frames go back to its own share (no credits cross),
        // and the owner decides XON from both once it reads worker 1's share.
        while owner.transmit(1, 0).is_some() {}
        assert!(!owner.has_control(0), "worker 1's share still holds the group above XON");
        while other.transmit(3, 0).is_some() {}
        sync_both(&mut owner, &mut other, 0);
        let xon = owner.take_control(0, 300_000_000).unwrap();
        assert_eq!((xon.class_enable, xon.times[3]), (0x08, 0));
        assert_eq!((owner.tm.buffer.group_occupancy(0, 3), other.tm.buffer.group_occupancy(0, 3)), (0, 0));
        let mut total = owner.stats.clone();
        total.add(&other.stats);
        assert_eq!((total.ports[0].rx_packets, total.tx_packets(), total.dropped()), (19, 18, 1));
        assert_eq!(total.ports[0].pfc_xoff_tx[3], 1, "one XOFF, sent by the owner");
    }

    #[test]
    fn a_spread_group_in_its_headroom_pauses_below_its_xoff_point_when_the_pool_is_full() {
        // The lossless pool holds 8 frames; XOFF (static) is far above. The owner's own port p1
        // fills the pool, so worker 1's frame on p0 goes to p0's headroom: the owner pauses p0
        // at its next loop although the group is far below its XOFF point, as a group in its
        // headroom always pauses.
        let (mut owner, mut other) = spread_pair(
            "[qos.buffer]\nlossless_pool_bytes = 8192\n\
             [qos.pfc]\nxoff_bytes = 1000000\nxon_bytes = 500000\nheadroom_bytes = 16384",
        );
        for _ in 0..8 {
            assert!(matches!(owner.receive(1, to_port(1, 26, 1000), 0), Received::Queued { .. }));
        }
        assert_eq!(owner.pool_used().0, 8192, "the pool is full");
        sync_both(&mut owner, &mut other, 0);
        assert_eq!(other.receive(0, to_port(3, 26, 1000), 0), Received::Queued { egress: 3, tc: 3 });
        assert_eq!(other.tm.buffer.group_cells(0, 3), (0, 1024), "in p0's headroom");
        assert!(!owner.has_control(0));
        sync_both(&mut owner, &mut other, 0);
        assert!(owner.tm.buffer.group_occupancy(0, 3) < owner.tm.buffer.xoff());
        assert_eq!(owner.take_control(0, 1_000).unwrap().times[3], 0xffff, "XOFF for the headroom in use");
        assert!(!owner.has_control(1), "p1's group holds the pool, not yet its headroom");
    }

    #[test]
    fn a_spread_ports_frame_queued_on_another_worker_gives_its_cells_back_to_the_share_that_charged_it() {
        let (mut owner, mut other) = spread_pair("");
        // Worker 1 takes a frame on p0 for p1 (the owner's port): charged to worker 1's share.
        assert_eq!(other.receive(0, to_port(1, 26, 1000), 0), Received::Transferred { egress: 1, tc: 3 });
        assert_eq!(other.tm.buffer.group_cells(0, 3), (1024, 0));
        carry(&mut other, &mut owner, 0);
        assert_eq!(owner.tm.buffer.group_cells(0, 3), (0, 0), "not the owner's share");
        owner.transmit(1, 0).unwrap();
        assert_eq!((owner.tm.buffer.released(1, 0, 3), owner.tm.buffer.released(0, 0, 3)), (1024, 0));
        sync_both(&mut owner, &mut other, 0);
        other.sync_shard(0);
        assert_eq!(other.tm.buffer.group_cells(0, 3), (0, 0), "worker 1's credit");
        assert_eq!((owner.pool_used(), other.pool_used()), ((0, 0), (0, 0)));
    }

    #[test]
    fn a_pfc_frame_on_another_workers_queue_of_a_spread_port_pauses_the_owners_egress() {
        let (mut owner, mut other) = spread_pair("");
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        assert_eq!(other.receive(0, pfc_frame(0x08, times), 5_000), Received::FlowControl);
        assert_eq!(other.stats.ports[0].pfc_rx[3], 0, "not applied on worker 1");
        assert!(other.outgoing_pending());
        // At shutdown such a frame would be freed, not counted as a drop.
        let mut left = std::mem::take(other.outgoing(0).unwrap());
        let mut stats = other.stats.clone();
        assert_eq!(discard_transfers(&mut stats, &mut left), 0);
        assert_eq!(stats.dropped(), 0);
        other.receive(0, pfc_frame(0x08, times), 5_000);
        carry(&mut other, &mut owner, 0);
        assert_eq!(owner.stats.ports[0].pfc_rx[3], 1, "applied by the owner");
        // p0's TC3 is paused from the time worker 1 received the frame.
        owner.receive(1, to_port(0, 26, 1000), 6_000);
        assert!(owner.transmit(0, 6_000).is_none(), "paused");
        assert!(owner.receive(1, to_port(0, 0, 1000), 6_000) != Received::Dropped(DropReason::BufferFull));
        assert!(owner.transmit(0, 6_000).is_some(), "TC0 is not paused");
    }

    #[test]
    fn a_paused_class_is_published_for_the_other_workers_balancing() {
        let (_, _, mut second) = sharded_pair("");
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        assert_eq!(second.receive(3, pfc_frame(0x08, times), 0), Received::FlowControl);
        second.sync_shard(1_000);
        let board = &second.shard.as_ref().expect("sharded").board;
        assert_eq!(board.drain_cost(3, 3, 1_000, 100_000), u64::MAX, "p3's TC3 is paused");
        assert_eq!(board.drain_cost(3, 0, 1_000, 100_000), 0, "TC0 is not, and p3 is idle");
    }

    #[test]
    fn sharded_a_lossless_frame_that_cuts_through_gives_its_cells_back_as_credits() {
        // p0 (worker 0) charges its group; the frame cuts through p3 on worker 1, which does
        // not own the group: the cells go back as credits, never to worker 1's own counts.
        let (_, mut ingress, mut egress) = sharded_pair("");
        assert_eq!(ingress.receive(0, to_port(3, 26, 1000), 0), Received::Transferred { egress: 3, tc: 3 });
        assert_eq!(ingress.tm.buffer.group_cells(0, 3), (1024, 0));
        let mut link = Collect { open: true, sent: Vec::new() };
        let mut batch = std::mem::take(ingress.outgoing(1).expect("a batch for worker 1"));
        assert_eq!(egress.accept(&mut batch, 0, &mut link), 1);
        assert_eq!(link.sent.len(), 1, "cut through");
        assert_eq!(egress.tm.buffer.released(0, 0, 3), 1024, "a credit for worker 0");
        assert_eq!(egress.tm.buffer.group_cells(0, 3), (0, 0));
        egress.sync_shard(0);
        ingress.sync_shard(0);
        assert_eq!(ingress.tm.buffer.group_cells(0, 3), (0, 0), "the credit applied by the owner");
    }

    #[test]
    fn sharded_pools_add_the_other_workers_published_charges() {
        // Dynamic XOFF: alpha x the free lossless pool, whoever holds the cells.
        let (config, mut first, mut second) = sharded_pair("");
        let mut whole: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..20 {
            first.receive(0, to_port(3, 26, 1000), 0);
            whole.receive(0, to_port(3, 26, 1000), 0);
        }
        assert_eq!(second.pfc_thresholds(), Switch::<HeapPacket>::new(&config, 0).pfc_thresholds());
        first.sync_shard(0);
        second.sync_shard(0);
        assert_eq!(second.pfc_thresholds(), whole.pfc_thresholds(), "worker 1 sees worker 0's cells");
        assert_ne!(whole.pfc_thresholds(), Switch::<HeapPacket>::new(&config, 0).pfc_thresholds());
        // Lossy frames are charged by the egress worker, in its lossy pool.
        for _ in 0..5 {
            assert_eq!(first.receive(1, to_port(2, 0, 500), 0), Received::Transferred { egress: 2, tc: 0 });
        }
        assert_eq!(first.pool_used().1, 0);
        carry(&mut first, &mut second, 1);
        assert_eq!(second.pool_used(), (0, 5 * 512));
        // A frame between two ports of one worker never leaves it.
        assert!(matches!(second.receive(2, to_port(3, 0, 500), 0), Received::Queued { egress: 3, .. }));
        assert!(!second.outgoing_pending());
    }

    #[test]
    fn sharded_a_stormed_queue_drops_transferred_frames_and_gives_their_cells_back() {
        let (_, mut ingress, mut egress) =
            sharded_pair("[qos.pfc_watchdog]\ndetection_ms = 1\nrestoration_ms = 2\naction = \"drop\"");
        ingress.receive(0, to_port(3, 26, 1000), 0);
        carry(&mut ingress, &mut egress, 1);
        // p3's peer sends XOFF every 100 us for 1.5 ms: continuously paused, a storm.
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        let mut now = 0;
        while now <= 1_500_000_000 {
            assert_eq!(egress.receive(3, pfc_frame(0x08, times), now), Received::FlowControl);
            egress.advance(now);
            now += 100_000_000;
        }
        assert_eq!((egress.stats.ports[3].watchdog_storms[3], egress.queued_packets()), (1, 0));
        ingress.receive(0, to_port(3, 26, 1000), now);
        carry(&mut ingress, &mut egress, 1);
        assert_eq!(egress.stats.ports[3].queues[3].dropped, 2, "flushed, then dropped on arrival");
        egress.sync_shard(now);
        ingress.sync_shard(now);
        assert_eq!(ingress.tm.buffer.group_cells(0, 3), (0, 0), "both frames' cells came back");
    }
}
