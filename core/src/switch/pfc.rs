//! PFC frames in and out of the switch, and its timers: the PFC frame a port sends ahead of
//! data (`send_control`), a PFC frame received (`pause_received`), and `advance`, which runs
//! what is due at a time: XOFF refreshes, the ends of received pauses, and the watchdog's
//! detection and restoration (with the flush of a stormed queue).
//!
//! Invariant: every deadline a PFC decision creates lowers `deadline`, so `advance` at or after
//! it runs; `advance` recomputes the earliest one of everything still pending.

use super::*;

impl<P: PacketBuf> Switch<P> {
    /// Sends `port`'s pending PFC frame at `now`, if it has one: `emit` gets the frame's
    /// bytes (from the switch's MAC) and says whether it took them. Only a frame taken
    /// counts (sent, refreshes armed, link time used); one refused stays pending. Returns the
    /// frame's meaning when taken.
    pub fn send_control(&mut self, port: usize, now: u64, emit: impl FnOnce(&[u8]) -> bool) -> Option<Repr> {
        if !self.tm.pfc[port].has_frame() {
            return None;
        }
        let repr = self.tm.pfc[port].frame();
        let mut frame = [0u8; crate::wire::pfc::FRAME_LEN];
        repr.emit(self.mac, &mut frame);
        if !emit(&frame) {
            return None;
        }
        let refresh = self.tm.pfc[port].frame_sent(now, &mut self.stats.ports[port]);
        self.tm.deadline = self.tm.deadline.min(refresh);
        self.tm.egress[port].occupy(now, crate::wire::pfc::FRAME_LEN);
        Some(repr)
    }

    /// The PFC frame `port` sends now, combining every pending priority; counts it.
    pub fn take_control(&mut self, port: usize, now: u64) -> Option<Repr> {
        self.send_control(port, now, |_| true)
    }

    /// The switch is stopping: every port it owns pauses its peer's lossless priorities
    /// (XOFF, refreshed while the switch runs, never XON), so that a sender honouring PFC
    /// holds what it has instead of sending it into rx rings nobody will read. The worker
    /// keeps forwarding until no frame of those priorities arrives (`in_held_priority`).
    /// Only the ports `sending` names are held (the worker's: those that received lately; a
    /// quiet port's peer has nothing in its ring, and is left a stop without PFC frames).
    /// Returns whether any port was held (none when no priority is lossless).
    pub fn hold_lossless_senders(&mut self, sending: impl Fn(usize) -> bool) -> bool {
        if self.tm.buffer.plan().lossless_pgs == 0 {
            return false;
        }
        let mut held = false;
        for port in 0..self.tm.pfc.len() {
            if self.owns(port) && sending(port) {
                self.tm.pfc[port].hold();
                self.note_control(port);
                held = true;
            }
        }
        held
    }

    /// Whether `frame`, received on `port`, travels in a priority a hold stops (a lossless
    /// one, as its sender's NIC queues it: `priority_of`).
    pub fn in_held_priority(&self, port: usize, frame: &[u8]) -> bool {
        self.priority_of(frame).is_some_and(|priority| self.tm.pfc[port].is_lossless(priority))
    }

    pub(super) fn pause_received(&mut self, port: usize, repr: &Repr, now: u64) {
        let deadline = self.tm.pfc[port].receive(repr, now, &self.tm.watchdog, &mut self.stats.ports[port]);
        self.tm.deadline = self.tm.deadline.min(deadline);
    }

    /// Earliest time at which `advance` has work (a pause ends, an XOFF needs refreshing, the
    /// watchdog detects or restores), or `NEVER`.
    pub fn next_deadline(&self) -> u64 {
        self.tm.deadline
    }

    /// Runs the timers due at `now`: XOFF refreshes, the watchdog, and the end of pauses (after
    /// which the engine should try to transmit). Cheap when nothing is due.
    #[inline]
    pub fn advance(&mut self, now: u64) {
        if now < self.tm.deadline {
            return;
        }
        let mut next = NEVER;
        for port in 0..self.tm.pfc.len() {
            if !self.owns(port) {
                continue;
            }
            let (lossless_pgs, pausable) = (self.tm.buffer.plan().lossless_pgs, self.tm.pausable_queues);
            for pg in (0..8).filter(|pg| lossless_pgs & (1 << pg) != 0) {
                let occupancy = self.tm.buffer.group_occupancy(port, pg);
                next = next.min(self.tm.pfc[port].refresh(pg, now, occupancy, self.tm.buffer.xon()));
                self.note_control(port);
            }
            for queue in (0..8).filter(|queue| pausable & (1 << queue) != 0) {
                let queued = self.tm.buffer.queue_len(port, queue);
                let step =
                    self.tm.pfc[port].watch(port, queue, now, queued, &self.tm.watchdog, &mut self.stats.ports[port]);
                if step.flush {
                    // The stormed egress queue only: the port's ingress group (what its peer
                    // sends us) keeps its PFC, since that traffic drains to other, healthy ports.
                    self.flush(port, queue, DropReason::PfcWatchdog, Some(now));
                }
                next = next.min(step.next);
                let paused_until = self.tm.pfc[port].paused_until(queue);
                if paused_until > now {
                    next = next.min(paused_until);
                }
            }
        }
        self.tm.deadline = next;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::*;
    use crate::packet::HeapPacket;

    #[test]
    fn timers_follow_pauses_and_queued_frames() {
        // A pause of 100 quanta at 100G (512 ns) on an empty queue: its end is the deadline,
        // and stays so when the timers run before it.
        let config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\naction = \"alert\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut times = [0u16; 8];
        times[3] = 100;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 512_000);
        switch.advance(512_000);
        assert_eq!(switch.next_deadline(), NEVER);
        // A pause of 0xffff quanta at 1G (33.5 ms) received with frames queued: the watchdog
        // must look at 1 ms, and after timers run early the pause's end is still due.
        let mut config = config;
        config.ports[1].speed_mbps = 1_000;
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        switch.receive(0, frame(26, 100), 0);
        times[3] = 0xffff;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 1_000_000_000);
        switch.advance(1_000_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1);
        assert_eq!(switch.next_deadline(), 33_553_920_000);
    }

    #[test]
    fn a_stopping_switch_holds_lossless_senders_with_refreshed_xoffs_and_no_xon() {
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        // Port 0 above XOFF before the hold: its XOFF is already out, and stays the one.
        for _ in 0..11 {
            switch.receive(0, frame(26, 1000), 0);
        }
        assert_eq!(switch.take_control(0, 0).map(|r| r.times[3]), Some(0xffff));
        assert!(!switch.hold_lossless_senders(|_| false), "no port sending: nothing held");
        assert_eq!((1..config.ports.len()).find_map(|port| switch.take_control(port, 1)), None);
        assert!(switch.hold_lossless_senders(|_| true));
        assert_eq!(switch.take_control(0, 1), None, "port 0's XOFF is outstanding already");
        for port in 1..config.ports.len() {
            let repr = switch.take_control(port, 1).unwrap();
            assert_eq!((repr.class_enable, repr.times[3]), (1 << 3, 0xffff), "port {port}: XOFF for priority 3 alone");
        }
        // Port 0's group empties: no XON while held.
        while switch.transmit(1, 10_000_000).is_some() {}
        assert_eq!(switch.queued_packets(), 0);
        assert_eq!(switch.take_control(0, 10_000_000), None, "no XON while held");
        // Each refresh is an XOFF, although nothing is queued.
        for round in 0..3 {
            let refresh = switch.next_deadline();
            assert!(refresh > 10_000_000 && refresh < NEVER, "round {round}: a refresh is due");
            // Port 0's XOFF went 1 ps before the others'.
            let refresh = refresh + 1;
            switch.advance(refresh);
            for port in 0..config.ports.len() {
                assert_eq!(
                    switch.take_control(port, refresh).map(|r| r.times[3]),
                    Some(0xffff),
                    "round {round}, port {port}"
                );
            }
        }
        // What the hold stops: RoCEv2 in DSCP 26 (priority 3), not DSCP 0; never PFC itself.
        assert!(switch.in_held_priority(0, &frame(26, 100).bytes));
        assert!(!switch.in_held_priority(0, &frame(0, 100).bytes));
        assert!(!switch.in_held_priority(0, &pfc_frame(0x08, [0xffff; 8]).bytes));
    }

    #[test]
    fn a_refresh_keeps_pausing_while_the_group_holds_more_than_xon() {
        // XON at XOFF (10 frames), headroom for 4: 13 frames, 3 in headroom. At the refresh the
        // group holds 13 > 10: XOFF again.
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 10240\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..13 {
            switch.receive(0, frame(26, 1000), 0);
        }
        switch.take_control(0, 0).unwrap();
        switch.advance(switch.next_deadline());
        assert_eq!(switch.take_control(0, 1).map(|r| r.times[3]), Some(0xffff));
    }

    #[test]
    fn a_refresh_looks_at_the_pool_too_when_the_headroom_is_empty() {
        // XOFF 10 frames, XON 5: 11 frames (one in headroom), then one leaves and gives the
        // headroom back. At the refresh the group holds 10 frames, all in the pool: above XON,
        // so XOFF again, not XON.
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..11 {
            switch.receive(0, frame(26, 1000), 0);
        }
        switch.take_control(0, 0).unwrap();
        switch.transmit(1, 0).unwrap();
        assert_eq!(switch.tm.buffer.group_cells(0, 3), (10 * 1024, 0));
        switch.advance(switch.next_deadline());
        assert_eq!(switch.take_control(0, 1).map(|r| r.times[3]), Some(0xffff));
    }

    #[test]
    fn another_timer_does_not_refresh_an_xoff_early() {
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..11 {
            switch.receive(0, frame(26, 1000), 0);
        }
        switch.take_control(0, 0).unwrap();
        // p1 is paused for 100 quanta (512 ns): its end is a deadline long before the refresh.
        let mut times = [0u16; 8];
        times[3] = 100;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 512_000);
        switch.advance(512_000);
        assert!(!switch.has_control(0), "the XOFF is refreshed at half its pause, not before");
        switch.advance(switch.next_deadline());
        assert!(switch.has_control(0));
    }

    #[test]
    fn a_queue_that_was_paused_once_is_not_a_storm() {
        let config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\naction = \"alert\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut times = [0u16; 8];
        times[3] = 100;
        switch.receive(1, pfc_frame(0x08, times), 0);
        switch.receive(0, frame(26, 100), 1_000);
        // Long after the 512 ns pause ended, the frame still queued: not paused, no storm.
        switch.advance(2_000_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 0);
        assert_eq!(switch.queued_packets(), 1);
    }

    #[test]
    fn a_queue_paused_without_a_break_storms_even_when_empty() {
        // SONiC's detection declares a storm on a queue paused for the whole detection time,
        // frames queued or not. p1 at 1 Gb/s: an XOFF of 0xffff quanta lasts 33.5 ms, past the
        // 1 ms detection time.
        let mut config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\nrestoration_ms = 2\naction = \"drop\"");
        config.ports[1].speed_mbps = 1_000;
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        // The pause starts 5 us in, on an empty queue: the watchdog looks 1 ms later.
        switch.receive(1, pfc_frame(0x08, times), 5_000_000);
        assert_eq!(switch.next_deadline(), 1_005_000_000);
        switch.advance(1_004_999_999);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 0, "not yet");
        switch.advance(1_005_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1, "empty and paused throughout: a storm");
        // During the storm (action drop) a lossless frame for the queue is dropped at once;
        // a lossy one passes.
        assert_eq!(switch.receive(0, frame(26, 100), 1_500_000_000), Received::Dropped(DropReason::PfcWatchdog));
        assert!(matches!(switch.receive(0, frame(0, 100), 1_500_000_000), Received::Queued { .. }));
        // Restored 2 ms after the last PFC frame (the XOFF at 5 us).
        assert_eq!(switch.next_deadline(), 2_005_000_000);
        switch.advance(2_005_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_restorations[3], 1);
        // A lossless frame into a queue nobody paused arms nothing.
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        switch.receive(0, frame(26, 100), 0);
        assert_eq!(switch.next_deadline(), NEVER);
    }
}
