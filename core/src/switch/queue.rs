//! A frame's way from its record (`tm::frame`) to the wire: admission (ECN at enqueue, the
//! PFC watchdog, the pools, PFC's XOFF decision), trimming what the buffer refuses, the
//! queue, the scheduler among the classes PFC does not pause (ECN at dequeue, cells back, the
//! XON decision), and the counts of a sent frame. Frames received here and frames another
//! worker received and charged (`shard.rs`) take the same `enqueue`; transmit and both
//! cut-through paths (`cut.rs`) count a sent frame with the same `count_tx`.
//!
//! Invariant: a frame handed to `enqueue` is queued, cut through or refused and counted;
//! whoever refuses or sends a charged frame gives its cells back, once (`refuse`, `pop`,
//! `cut_through`); every queued frame leaves through `transmit`, `flush` or `drain`.

use super::*;
use crate::tm::frame::Frame;

impl<P: PacketBuf> Switch<P> {
    /// Admits a frame to its egress port's queue (ECN at enqueue, the pools, PFC's XOFF
    /// decision), charging drops to its ingress port; then queues it, or lets it cut through
    /// to `cut`. A frame another worker charged to its group (`Frame::charged`) is admitted
    /// to the queue only: its group and the pool already hold it.
    #[inline(always)]
    pub(super) fn enqueue(&mut self, mut frame: Frame<P>, now: u64, cut: &mut impl CutThrough<P>) -> Received {
        let (egress, tc) = (frame.egress(), frame.tc());
        if !self.tm.egress[egress].usable {
            return self.refuse(frame, DropReason::LinkDown, now);
        }
        // The common frame: an idle port, nothing for ECN or PFC to decide (cut.rs).
        if !frame.charged() && self.cut_allowed(egress, tc, now, cut) && self.tm.ecn.idle_at_empty(tc) {
            if let Some(group) = self.passes_idle(frame.ingress(), egress, tc, frame.size()) {
                return self.cut_through_idle(frame, group, now, cut);
            }
        }
        if let Err(reason) = self.mark_at_enqueue(&mut frame) {
            return self.refuse(frame, reason, now);
        }
        if self.tm.buffer.lossless(tc) {
            if self.tm.pfc[egress].storm_drops(tc, self.tm.watchdog.action) {
                return self.refuse(frame, DropReason::PfcWatchdog, now);
            }
            if !frame.charged() {
                match self.charge_group(&mut frame) {
                    // Past XOFF the frame queues, so that the pause leaves first.
                    Ok(true) => return self.link(frame),
                    Ok(false) => {}
                    Err(reason) => return self.refuse(frame, reason, now),
                }
            }
        } else if let Err(reason) = self.tm.buffer.admit_lossy(egress, tc, plan::charge(frame.size())) {
            return self.refused_lossy(frame.relocated(), reason);
        }
        if self.cut_allowed(egress, tc, now, cut) {
            return self.cut_through(frame, now, cut);
        }
        // Admission here found a slot; a frame charged on another worker's stale view of
        // the pools may not.
        if !self.tm.buffer.has_slot() {
            return self.refuse(frame, DropReason::HeadroomOverflow, now);
        }
        self.link(frame)
    }

    /// The ingress half of admission, on the worker that received the frame: a lossless
    /// frame is charged to its ingress priority group (XOFF decided past the point, on the
    /// exact count) and says so; `Ok(true)` when the group is past XOFF. A lossy frame is
    /// charged at its egress queue, by `enqueue`.
    #[inline(always)]
    pub(super) fn charge_group(&mut self, frame: &mut Frame<P>) -> Result<bool, DropReason> {
        let tc = frame.tc();
        if !self.tm.buffer.lossless(tc) {
            return Ok(false);
        }
        let (ingress, pg) = (frame.ingress(), self.tm.buffer.pg(tc));
        let group = self.tm.buffer.admit_lossless(ingress, pg, plan::charge(frame.size()))?;
        frame.set_charged(self.tm.buffer.me());
        self.group_charged(ingress, pg, group);
        Ok(group.past_xoff)
    }

    /// A lossy frame the buffer refused: trimmed where its queue and port trim (`tm::trim`)
    /// and queued in the trim queue, or dropped (also when the trim queue refuses it).
    #[cold]
    #[inline(never)]
    fn refused_lossy(&mut self, mut frame: Frame<P>, reason: DropReason) -> Received {
        let (egress, tc, at) = (frame.egress(), frame.tc(), frame.arrival_ps);
        let Some(trim) = self.tm.trim.as_ref().filter(|trim| trim.trims(tc) && self.tm.egress[egress].trims) else {
            return self.refuse(frame, reason, at);
        };
        let (size, dscp, queue) = (usize::from(trim.size), trim.dscp[tc], usize::from(trim.queue[tc]));
        let Some(len) = crate::tm::trim::trim(&mut frame.packet, frame.ip, size, dscp) else {
            return self.refuse(frame, reason, at);
        };
        self.stats.ports[egress].queues[tc].trimmed += 1;
        if self.tm.buffer.admit_lossy(egress, queue, plan::charge(len)).is_err() {
            self.stats.ports[egress].queues[tc].trim_dropped += 1;
            return self.refuse(frame, reason, at);
        }
        frame.set_trimmed(len, queue);
        self.link(frame)
    }

    /// ECN where the class marks at enqueue: marks the frame CE against the queue's depth,
    /// or says why it is refused (not ECN-capable above the threshold, lossy).
    #[inline(always)]
    fn mark_at_enqueue(&mut self, frame: &mut Frame<P>) -> Result<(), DropReason> {
        let tc = frame.tc();
        if !self.tm.ecn.marks_on(tc, MarkOn::Enqueue) {
            return Ok(());
        }
        let depth = self.ecn_depth(frame.egress(), tc);
        if self.tm.ecn.decide(tc, depth, frame.ip.ecn, &mut self.rng)? {
            frame.mark_ce();
        }
        Ok(())
    }

    /// ECN where the class marks at dequeue: as `mark_at_enqueue`, against the depth the
    /// frame leaves behind (0 for a frame that cuts through).
    #[inline(always)]
    pub(super) fn mark_at_dequeue(&mut self, frame: &mut Frame<P>, cut_through: bool) -> Result<(), DropReason> {
        let tc = frame.tc();
        if !self.tm.ecn.marks_on(tc, MarkOn::Dequeue) {
            return Ok(());
        }
        let depth = if cut_through { 0 } else { self.ecn_depth(frame.egress(), tc) };
        if self.tm.ecn.decide(tc, depth, frame.ip.ecn, &mut self.rng)? {
            frame.mark_ce();
        }
        Ok(())
    }

    /// The depth class `tc`'s ECN profile compares with kmin/kmax: the queue's cells, or its
    /// frame bytes.
    #[inline(always)]
    fn ecn_depth(&self, egress: usize, tc: usize) -> u64 {
        match self.tm.ecn.measure(tc) {
            EcnMeasure::Cells => self.tm.buffer.queue_cells(egress, tc),
            EcnMeasure::FrameBytes => self.tm.buffer.queue_bytes(egress, tc),
        }
    }

    /// Links an admitted frame at the tail of its queue and keeps the queue's peak. (The
    /// watchdog's clock runs from the pause, queue empty or not: `pause_received` armed it.)
    #[inline(always)]
    fn link(&mut self, frame: Frame<P>) -> Received {
        let (egress, tc) = (frame.egress(), frame.tc());
        let depth = self.tm.buffer.push(frame);
        self.stats.ports[egress].queues[tc].peak(depth, self.tm.buffer.queue_cells(egress, tc));
        Received::Queued { egress, tc }
    }

    /// Where a lossless frame's charge put its ingress priority group `pg`: XOFF past the
    /// point, and the group's peaks.
    #[inline(always)]
    fn group_charged(&mut self, ingress: usize, pg: usize, group: crate::tm::buffer::GroupCharge) {
        // The port's owner sends its PFC frames: another worker polling one of its queues
        // leaves the decision to the owner's next loop (`sync_shard`).
        if group.past_xoff && self.owns(ingress) {
            self.tm.pfc[ingress].decide_xoff(pg);
            self.note_control(ingress);
        }
        self.stats.ports[ingress].priority_groups[pg].peak(group.occupancy, group.headroom);
    }

    /// Refuses a frame on its way into its queue: a charged frame's cells go back, it is
    /// counted (`count_refused`) and notified as dropped at `at` (`notify_drop`). Inlined, so
    /// that no record on the way to a queue is taken out of registers for the refusal.
    #[inline(always)]
    pub(super) fn refuse(&mut self, mut frame: Frame<P>, reason: DropReason, at: u64) -> Received {
        self.give_back(&mut frame);
        self.count_refused(&frame, reason);
        self.notify_drop(frame.ingress(), frame.egress, reason, (&frame.packet, at));
        Received::Dropped(reason)
    }

    /// Gives a charged frame's cells back to its group (to the share of the worker that
    /// charged them), deciding XON; the frame is no longer charged.
    #[inline(always)]
    pub(super) fn give_back(&mut self, frame: &mut Frame<P>) {
        if frame.charged() {
            let (ingress, pg) = (frame.ingress(), self.tm.buffer.pg(frame.tc()));
            self.tm.buffer.give_back(frame.charger, ingress, pg, plan::charge(frame.size()));
            frame.clear_charged();
            self.group_released(ingress, pg);
        }
    }

    /// Counts a frame that will not be sent: under `reason` on the port it came in on, and in
    /// its queue's `dropped`.
    #[inline(always)]
    fn count_refused(&mut self, frame: &Frame<P>, reason: DropReason) {
        self.stats.ports[frame.ingress()].count_drop(reason);
        self.stats.ports[frame.egress()].queues[frame.tc()].dropped += 1;
    }

    /// A frame dropped for `reason` on its way in from `ingress` (to `egress`, `NO_PORT`
    /// before one is chosen) at the time given: a dropped-packet notification for sFlow, while
    /// its limit allows (`Sampler::discard`).
    #[inline]
    pub(super) fn notify_drop(&mut self, ingress: usize, egress: u16, reason: DropReason, (packet, now): (&P, u64)) {
        if let Some(sampler) = &mut self.forwarding.sampler {
            sampler.discard(ingress, egress, reason, packet.data(), packet.len(), now);
        }
    }

    /// Unlinks the head of a queue, giving back its cells; a lossless group that falls to
    /// XON withdraws its XOFF.
    #[inline]
    fn pop(&mut self, port: usize, tc: usize) -> Option<Frame<P>> {
        let frame = self.tm.buffer.pop(port, tc)?;
        if self.tm.buffer.lossless(tc) {
            self.group_released(frame.ingress(), self.tm.buffer.pg(tc));
        }
        Some(frame)
    }

    /// After cells of group (`ingress`, `pg`) were given back: XON if the group has fallen to
    /// it. Most groups never sent XOFF: that is checked before computing thresholds. Only the
    /// port's owner decides; a share of another worker's group, or of one this worker shares,
    /// is decided when the credit or the share reaches the owner (`sync_shard`).
    #[inline(always)]
    pub(super) fn group_released(&mut self, ingress: usize, pg: usize) {
        if self.tm.pfc[ingress].xoff_outstanding(pg) && self.owns(ingress) {
            let occupancy = self.tm.buffer.group_occupancy(ingress, pg);
            self.tm.pfc[ingress].decide_xon(pg, occupancy, self.tm.buffer.xon());
            self.note_control(ingress);
        }
    }

    /// Counts a decision that left a PFC frame waiting on `port`.
    #[inline(always)]
    pub(super) fn note_control(&mut self, port: usize) {
        self.tm.control_decided += u64::from(self.tm.pfc[port].has_frame());
    }

    /// Drops every frame of queue `tc` of `port`, each counted under `reason` on the port it
    /// came in on and in the queue's `dropped`, its cells given back; returns how many. With
    /// `notify_at`, each is also a dropped-packet notification (sFlow) at that time; none at
    /// shutdown, when nothing exports them any more.
    pub(super) fn flush(&mut self, port: usize, tc: usize, reason: DropReason, notify_at: Option<u64>) -> u64 {
        let mut flushed = 0;
        while let Some(frame) = self.pop(port, tc) {
            match notify_at {
                Some(now) => {
                    self.refuse(frame, reason, now);
                }
                None => self.count_refused(&frame, reason),
            }
            flushed += 1;
        }
        flushed
    }

    /// The next data frame `egress` should send at `now`, chosen by its scheduler among the
    /// classes not paused.
    #[inline]
    pub fn transmit(&mut self, egress: usize, now: u64) -> Option<P> {
        let mut sent = None;
        self.transmit_burst(egress, now, u64::MAX, |packet| {
            sent = Some(packet);
            false
        });
        sent
    }

    /// Hands `send` the data frames `egress` sends at `now`, as its scheduler picks them among
    /// the classes not paused, while its link is free by `until_ps` and `send` says it takes
    /// another; returns how many it handed. Each frame leaves as `transmit` would send it:
    /// ECN at dequeue, its cells back, its latency, its link time. What stays the same over
    /// the call is judged once: which classes PFC pauses (nothing received meanwhile), and,
    /// while the scheduler picks one class again (`Scheduler::picks_again`), whether that
    /// class marks at dequeue; its tx counters are added once for such a run of frames.
    #[inline]
    pub fn transmit_burst(&mut self, egress: usize, now: u64, until_ps: u64, mut send: impl FnMut(P) -> bool) -> u32 {
        let eligible = self.tm.pfc[egress].eligible(now, self.tm.watchdog.action);
        let mut handed = 0;
        while self.tm.egress[egress].link_free_ps <= until_ps {
            let tc = {
                let head_len = self.tm.buffer.head_lens(egress);
                // DWRR shares link time: each frame costs what it takes on the wire, padding,
                // preamble and gap included (64-byte frames against 1500-byte ones at equal
                // weights shared 58.5/41.5 when counted in frame bytes).
                let head_cost = |tc: usize| wire_bytes(head_len(tc)) as usize;
                let Some(tc) =
                    self.tm.egress[egress].scheduler.select(eligible, self.tm.buffer.backlog(egress), head_cost)
                else {
                    break;
                };
                tc
            };
            let marks = self.tm.ecn.marks_on(tc, MarkOn::Dequeue);
            let mut run = SentRun::default();
            let more = loop {
                let mut frame = self.pop(egress, tc).expect("the scheduler picked a non-empty queue");
                let marked = if marks { self.mark_at_dequeue(&mut frame, false) } else { Ok(()) };
                let more = match marked {
                    Err(reason) => {
                        self.refuse(frame, reason, now);
                        true
                    }
                    Ok(()) => {
                        self.stats.latency.record(now.saturating_sub(frame.arrival_ps) / 1000);
                        self.tm.egress[egress].occupy(now, frame.size());
                        run.add(&frame);
                        handed += 1;
                        send(frame.packet) && self.tm.egress[egress].link_free_ps <= until_ps
                    }
                };
                let backlog = self.tm.buffer.backlog(egress);
                let head_len = self.tm.buffer.head_lens(egress);
                let again = |scheduler: &mut Scheduler| {
                    scheduler.picks_again(tc, backlog, || wire_bytes(head_len(tc)) as usize)
                };
                if !more || !again(&mut self.tm.egress[egress].scheduler) {
                    break more;
                }
            };
            self.count_sent_run(egress, tc, &run);
            if !more {
                break;
            }
        }
        handed
    }

    /// Counts a frame leaving its egress port at `now` (from its queue or cut through): its
    /// time on the link, the port's and the queue's tx counters, its CE mark and its trim.
    #[inline(always)]
    pub(super) fn count_tx(&mut self, frame: &Frame<P>, now: u64) {
        let egress = frame.egress();
        self.tm.egress[egress].occupy(now, frame.size());
        let mut alone = SentRun::default();
        alone.add(frame);
        self.count_sent_run(egress, frame.tc(), &alone);
    }

    /// Adds what a run of frames of queue `tc` that left `egress` sums to its tx counters.
    #[inline(always)]
    fn count_sent_run(&mut self, egress: usize, tc: usize, run: &SentRun) {
        let stats = &mut self.stats.ports[egress];
        stats.tx_packets += run.packets;
        stats.tx_bytes += run.bytes;
        let queue = &mut stats.queues[tc];
        queue.tx_packets += run.packets;
        queue.tx_bytes += run.bytes;
        // One test for the common run, with neither.
        if run.marked | run.trimmed != 0 {
            queue.ecn_marked += run.marked;
            queue.trim_tx += run.trimmed;
        }
    }

    /// Empties every queue at shutdown when ports can no longer send; the frames are counted
    /// as `buffer_full` drops (on the port they came in on, and the queue) and released.
    pub fn drain(&mut self) -> u64 {
        let mut drained = 0;
        for port in 0..self.tm.egress.len() {
            for tc in 0..TRAFFIC_CLASSES {
                drained += self.flush(port, tc, DropReason::BufferFull, None);
            }
        }
        drained
    }
}

/// What a run of frames that left one queue one after another adds to its tx counters.
#[derive(Default)]
struct SentRun {
    packets: u64,
    bytes: u64,
    marked: u64,
    trimmed: u64,
}

impl SentRun {
    #[inline(always)]
    fn add<P>(&mut self, frame: &Frame<P>) {
        self.packets += 1;
        self.bytes += u64::from(frame.len);
        if frame.marked_or_trimmed() {
            self.marked += u64::from(frame.marked());
            self.trimmed += u64::from(frame.trimmed());
        }
    }
}
