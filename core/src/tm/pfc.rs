//! Priority flow control on one port, both directions, as one type (`PfcPort`):
//! - sending: the XOFF/XON decisions of the port's ingress priority groups, the PFC frame that
//!   carries them (one frame for every pending priority, ahead of all data; a group's decision
//!   names the lossless priorities whose frames it holds, `PfcMap`), and the refresh of an
//!   outstanding XOFF at half its pause time;
//! - receiving: the pauses the peer sent (`Pauses`, kept per egress queue: a pause for
//!   priority p holds queue `pfc_to_queue[p]`);
//! - the watchdog over those pauses (SONiC's since 2022): a queue that has been paused
//!   continuously for `detection_ms`, holding frames or empty (SONiC's detection declares
//!   both), is in a storm; the action applies (drop: the
//!   switch flushes the queue and drops its arrivals; forward: received PFC is ignored; alert:
//!   counted and logged) until `restoration_ms` pass with no PFC frame (XOFF or XON) for that
//!   priority.
//!
//! How full a group is, and where XOFF and XON are, is the shared buffer's business
//! (`tm::buffer`, `config::plan`): this type is told the occupancy and the thresholds.
//!
//! Invariant: a group that decided XOFF either is refreshed while it stays above XON or sends
//! XON once at or below it; every deadline this type creates is reported to the caller, so no
//! timer is lost.

use crate::config::plan::{quanta_ps, XOFF_QUANTA};
use crate::config::WatchdogAction;
use crate::counters::PortStats;
use crate::wire::pfc::Repr;

/// "Never", for deadlines.
pub const NEVER: u64 = u64::MAX;

/// Pauses received per priority: when the current pause began and when it ends (ps). The
/// switch keeps one per port for what its peers send; the engines' NIC models keep one for
/// what the switch sends them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pauses {
    pub since: [u64; 8],
    pub until: [u64; 8],
}

impl Pauses {
    /// Applies a pause time for `priority` taking effect at `at`: 0 resumes (a pause already
    /// over stays over), anything else pauses for that many quanta at `speed_mbps`, from `at`
    /// or continuing the pause in force.
    #[inline]
    pub fn apply(&mut self, priority: usize, time: u16, at: u64, speed_mbps: u64) {
        self.apply_answered(priority, time, at, 0, speed_mbps);
    }

    /// `apply` for a peer that answers a PFC frame received at `at` within `response_ps`
    /// (802.3 31B.3.7): a peer that was sending stops only at `at + response_ps`; one already
    /// paused (or about to be) stays paused, its timer set anew. Either way the pause runs
    /// out `time` quanta after `at` (one shorter than the response holds nothing), and an
    /// XON resumes at `at`.
    #[inline]
    pub fn apply_answered(&mut self, priority: usize, time: u16, at: u64, response_ps: u64, speed_mbps: u64) {
        if time != 0 && self.until[priority] <= at {
            self.since[priority] = at + response_ps;
        }
        self.until[priority] = if time == 0 { self.until[priority].min(at) } else { at + quanta_ps(time, speed_mbps) };
    }

    /// Whether `priority` is held at `at`.
    #[inline]
    pub fn holds(&self, priority: usize, at: u64) -> bool {
        self.since[priority] <= at && at < self.until[priority]
    }
}

/// The watchdog's settings, the same for every port.
#[derive(Debug, Clone, Copy)]
pub struct Watchdog {
    pub detection_ps: u64,
    pub restoration_ps: u64,
    pub action: WatchdogAction,
}

/// What the watchdog decided for one queue at a timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchdogStep {
    /// When the watchdog needs to look again.
    pub next: u64,
    /// A storm was just detected and its action is drop: flush the queue.
    pub flush: bool,
}

/// How a port's PFC priorities relate to its groups and queues (`config::Qos`, derived once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcMap {
    /// Per ingress priority group: the lossless priorities its XOFF names.
    pub pg_priorities: [u8; 8],
    /// The egress queue a received pause for each priority holds.
    pub pfc_to_queue: [u8; 8],
    /// Bit n set: priority n is lossless; a pause for another is counted, not obeyed.
    pub lossless_priorities: u8,
}

impl PfcMap {
    pub fn of(qos: &crate::config::Qos) -> Self {
        Self {
            pg_priorities: qos.pg_priorities,
            pfc_to_queue: qos.pfc_to_queue,
            lossless_priorities: qos.lossless_priorities,
        }
    }

    /// Priority n's frames in group n and its pauses on queue n, as when TC, priority and
    /// group are one number (tests).
    #[cfg(test)]
    pub fn identity(lossless_priorities: u8) -> Self {
        Self {
            pg_priorities: std::array::from_fn(|pg| lossless_priorities & (1 << pg)),
            pfc_to_queue: std::array::from_fn(|priority| priority as u8),
            lossless_priorities,
        }
    }
}

/// PFC state of one port (see the module notes).
#[derive(Debug, Clone)]
pub struct PfcPort {
    speed_mbps: u64,
    map: PfcMap,
    /// Half of an XOFF's pause time: the refresh period.
    refresh_ps: u64,
    /// Per ingress priority group: an XOFF was decided and no XON since.
    xoff_sent: [bool; 8],
    /// Per ingress priority group: when to refresh its XOFF (NEVER while none is outstanding
    /// or it is not yet sent).
    refresh_at: [u64; 8],
    /// PFC times to send on this port, per priority; bit n of `pending` says priority n has
    /// one (one compare per poll loop when nothing is pending).
    outbox: [u16; 8],
    pending: u8,
    /// Pauses the peer sent, per egress queue they hold.
    received: Pauses,
    /// The latest end of any received pause: at or after it nothing is paused, so eligibility
    /// is one compare in the common case.
    pause_horizon: u64,
    /// Per egress queue: the watchdog declared a storm.
    storm: [bool; 8],
    /// Per egress queue: when the last PFC frame naming its priority arrived (XOFF or XON):
    /// restoration waits for `restoration_ps` of silence.
    last_pfc_rx: [u64; 8],
    /// Time the peer's pauses held each queue, counted up to `counted_to` (`account`).
    paused_ps: [u64; 8],
    counted_to: [u64; 8],
    /// The switch is stopping (`hold`): every lossless group keeps its XOFF, refreshed, and
    /// never sends XON.
    held: bool,
}

impl PfcPort {
    pub fn new(speed_mbps: u64, map: PfcMap) -> Self {
        Self {
            speed_mbps,
            map,
            refresh_ps: quanta_ps(XOFF_QUANTA, speed_mbps) / 2,
            xoff_sent: [false; 8],
            refresh_at: [NEVER; 8],
            outbox: [0; 8],
            pending: 0,
            received: Pauses::default(),
            pause_horizon: 0,
            held: false,
            storm: [false; 8],
            last_pfc_rx: [0; 8],
            paused_ps: [0; 8],
            counted_to: [0; 8],
        }
    }

    /// Counts the time queue `queue` was held by the pause in force between the last count and
    /// `now`. Pauses change only when a PFC frame arrives, which counts first, so the sum is
    /// exact: an XON that ends a long XOFF early leaves only the time it really held.
    fn account(&mut self, queue: usize, now: u64) {
        let (since, until) = (self.received.since[queue], self.received.until[queue]);
        let from = since.max(self.counted_to[queue]);
        let to = until.min(now);
        if to > from {
            self.paused_ps[queue] += to - from;
        }
        self.counted_to[queue] = self.counted_to[queue].max(now);
    }

    /// Nanoseconds the peer's PFC has held each egress queue up to `now` (received pauses, whether
    /// or not the watchdog ignored them).
    pub fn paused_ns(&mut self, now: u64) -> [u64; 8] {
        for queue in 0..8 {
            self.account(queue, now);
        }
        self.paused_ps.map(|ps| ps / 1000)
    }

    /// Whether egress queue `queue` is held by a received pause at `now` (and the
    /// watchdog does not ignore it).
    #[inline]
    pub fn paused(&self, queue: usize, now: u64, action: WatchdogAction) -> bool {
        self.received.until[queue] > now && !(self.storm[queue] && action != WatchdogAction::Alert)
    }

    /// Which queues may send at `now`: not paused, or paused but ignored by the watchdog.
    #[inline]
    pub fn eligible(&self, now: u64, action: WatchdogAction) -> u8 {
        if now >= self.pause_horizon {
            return 0xff;
        }
        let mut mask = 0xffu8;
        for queue in 0..8 {
            if self.paused(queue, now, action) {
                mask &= !(1 << queue);
            }
        }
        mask
    }

    /// The end of the current received pause of `queue` (in the past when none).
    pub fn paused_until(&self, queue: usize) -> u64 {
        self.received.until[queue]
    }

    /// Whether the watchdog drops what `queue` receives (a storm, action drop).
    #[inline]
    pub fn storm_drops(&self, queue: usize, action: WatchdogAction) -> bool {
        self.storm[queue] && action == WatchdogAction::Drop
    }

    /// Priority group `pg` passed its XOFF point: XOFF for its priorities, unless one is
    /// outstanding.
    #[inline]
    pub fn decide_xoff(&mut self, pg: usize) {
        if !self.xoff_sent[pg] {
            self.xoff_sent[pg] = true;
            self.queue(self.map.pg_priorities[pg], XOFF_QUANTA);
        }
    }

    /// The switch is stopping: XOFF for every lossless group without one outstanding, and
    /// from now on no XON, and a refresh whatever the group holds (`held`).
    pub fn hold(&mut self) {
        self.held = true;
        for pg in 0..8 {
            if self.map.pg_priorities[pg] != 0 {
                self.decide_xoff(pg);
            }
        }
    }

    /// Whether `priority` is lossless here (a pause for it is obeyed, a hold stops it).
    #[inline]
    pub fn is_lossless(&self, priority: u8) -> bool {
        self.map.lossless_priorities & (1 << priority) != 0
    }

    /// Whether priority group `pg` has an XOFF outstanding.
    #[inline]
    pub fn xoff_outstanding(&self, pg: usize) -> bool {
        self.xoff_sent[pg]
    }

    /// XON for a group with an XOFF outstanding whose `occupancy` fell to `xon`: for its
    /// priorities that no other group still holds off.
    #[inline]
    pub fn decide_xon(&mut self, pg: usize, occupancy: u64, xon: u64) {
        if self.xoff_sent[pg] && occupancy <= xon && !self.held {
            self.xoff_sent[pg] = false;
            self.refresh_at[pg] = NEVER;
            let still_off = (0..8)
                .filter(|&other| self.xoff_sent[other])
                .fold(0u8, |mask, other| mask | self.map.pg_priorities[other]);
            self.queue(self.map.pg_priorities[pg] & !still_off, 0);
        }
    }

    /// Whether a PFC frame waits to be sent (it goes before any data).
    #[inline]
    pub fn has_frame(&self) -> bool {
        self.pending != 0
    }

    /// The PFC frame to send: every pending priority in one frame.
    pub fn frame(&self) -> Repr {
        let mut times = [0u16; 8];
        for priority in (0..8).filter(|priority| self.pending & (1 << priority) != 0) {
            times[priority] = self.outbox[priority];
        }
        Repr { class_enable: self.pending, times }
    }

    /// The frame from `frame` was sent at `now`: empties the outbox, counts each priority and
    /// arms the refresh of each group whose XOFF it carried. Returns the earliest refresh (or
    /// NEVER).
    pub fn frame_sent(&mut self, now: u64, stats: &mut PortStats) -> u64 {
        let mut xoff_sent = 0u8;
        for priority in 0..8 {
            if self.pending & (1 << priority) == 0 {
                continue;
            }
            if self.outbox[priority] > 0 {
                stats.pfc_xoff_tx[priority] += 1;
                xoff_sent |= 1 << priority;
            } else {
                stats.pfc_xon_tx[priority] += 1;
            }
        }
        self.pending = 0;
        let mut deadline = NEVER;
        for pg in 0..8 {
            if self.xoff_sent[pg] && self.map.pg_priorities[pg] & xoff_sent != 0 {
                self.refresh_at[pg] = now + self.refresh_ps;
                deadline = now + self.refresh_ps;
            }
        }
        deadline
    }

    /// Puts `time` for each priority of `priorities` in the next PFC frame (replacing one not
    /// yet sent).
    #[inline]
    fn queue(&mut self, priorities: u8, time: u16) {
        for priority in (0..8).filter(|priority| priorities & (1 << priority) != 0) {
            self.outbox[priority] = time;
        }
        self.pending |= priorities;
    }

    /// A PFC frame from the peer at `now`: pauses or resumes the queues of the lossless
    /// priorities it names (others are counted, not obeyed). Returns the earliest deadline it
    /// creates (a pause's end, the watchdog's detection), or NEVER.
    pub fn receive(&mut self, repr: &Repr, now: u64, watchdog: &Watchdog, stats: &mut PortStats) -> u64 {
        let mut deadline = NEVER;
        for (priority, time) in repr.named() {
            stats.pfc_rx[priority] += 1;
            if self.map.lossless_priorities & (1 << priority) == 0 {
                continue; // PFC is not enabled for this priority: counted, not obeyed
            }
            let queue = usize::from(self.map.pfc_to_queue[priority]);
            self.last_pfc_rx[queue] = now;
            self.account(queue, now);
            self.received.apply(queue, time, now, self.speed_mbps);
            if time == 0 {
                continue;
            }
            self.pause_horizon = self.pause_horizon.max(self.received.until[queue]);
            deadline = deadline.min(self.received.until[queue]);
            deadline = deadline.min(self.received.since[queue].saturating_add(watchdog.detection_ps));
        }
        deadline
    }

    /// An 802.3x PAUSE from the peer at `now` on a port that honours it: every class of this
    /// port's egress stops for `time` quanta (0 resumes them). Returns when it ends, or NEVER.
    pub fn receive_link_pause(&mut self, time: u16, now: u64) -> u64 {
        for queue in 0..8 {
            self.account(queue, now);
            self.received.apply(queue, time, now, self.speed_mbps);
        }
        if time == 0 {
            return NEVER;
        }
        let until = self.received.until[0];
        self.pause_horizon = self.pause_horizon.max(until);
        until
    }

    /// At a timer: refreshes an outstanding XOFF of group `pg` that is due while the group
    /// (at `occupancy`) holds more than `xon`, or withdraws it. Returns the group's next
    /// deadline.
    pub fn refresh(&mut self, pg: usize, now: u64, occupancy: u64, xon: u64) -> u64 {
        if !self.xoff_sent[pg] {
            return NEVER;
        }
        if self.refresh_at[pg] > now {
            return self.refresh_at[pg];
        }
        if occupancy > xon || self.held {
            self.queue(self.map.pg_priorities[pg], XOFF_QUANTA);
            self.refresh_at[pg] = NEVER; // set again when sent
        } else {
            self.decide_xon(pg, occupancy, xon);
        }
        NEVER
    }

    /// At a timer: detects and restores storms on egress queue `queue`, which holds
    /// `queued` frames (empty or not, a queue paused without a break for the detection time is
    /// in a storm). `port` names the port in log lines.
    pub fn watch(
        &mut self,
        port: usize,
        queue: usize,
        now: u64,
        queued: u32,
        watchdog: &Watchdog,
        stats: &mut PortStats,
    ) -> WatchdogStep {
        if self.storm[queue] {
            let restore_at = self.last_pfc_rx[queue].saturating_add(watchdog.restoration_ps);
            if now < restore_at {
                return WatchdogStep { next: restore_at, flush: false };
            }
            self.storm[queue] = false;
            stats.watchdog_restorations[queue] += 1;
            tracing::warn!("PFC watchdog: port {port} queue {queue} restored");
            return WatchdogStep { next: NEVER, flush: false };
        }
        if self.received.until[queue] <= now {
            return WatchdogStep { next: NEVER, flush: false };
        }
        let detect_at = self.received.since[queue].saturating_add(watchdog.detection_ps);
        if now < detect_at {
            return WatchdogStep { next: detect_at, flush: false };
        }
        let paused_for = now - self.received.since[queue];
        self.storm[queue] = true;
        stats.watchdog_storms[queue] += 1;
        tracing::warn!(
            "PFC watchdog: port {port} queue {queue} paused for {:.3} ms with {queued} frames queued: storm, action {:?}",
            paused_for as f64 / 1e9,
            watchdog.action
        );
        WatchdogStep {
            next: self.last_pfc_rx[queue].saturating_add(watchdog.restoration_ps),
            flush: watchdog.action == WatchdogAction::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_holds_from_its_start_and_xon_ends_it_only_from_when_it_takes_effect() {
        let mut pauses = Pauses::default();
        // 100 quanta at 100 Gb/s: 512 ns.
        pauses.apply(3, 100, 1_000, 100_000);
        assert!(!pauses.holds(3, 999) && pauses.holds(3, 1_000) && pauses.holds(3, 512_999));
        assert!(!pauses.holds(3, 513_000) && !pauses.holds(2, 1_000));
        // A refresh while paused extends it without moving the start.
        pauses.apply(3, 100, 2_000, 100_000);
        assert_eq!((pauses.since[3], pauses.until[3]), (1_000, 514_000));
        // XON at 3,000 ends it there; an XON after the end changes nothing.
        pauses.apply(3, 0, 3_000, 100_000);
        assert_eq!(pauses.until[3], 3_000);
        pauses.apply(3, 0, 9_000, 100_000);
        assert_eq!(pauses.until[3], 3_000);
    }

    #[test]
    fn a_peer_that_answers_late_stops_after_its_response_and_a_paused_one_at_once() {
        let mut pauses = Pauses::default();
        // Sending when the XOFF (100 quanta at 100G: 512 ns) arrives at 1 us: it stops 200 ns
        // later, and the pause still runs out 512 ns after it arrived.
        pauses.apply_answered(3, 100, 1_000_000, 200_000, 100_000);
        assert_eq!((pauses.since[3], pauses.until[3]), (1_200_000, 1_512_000));
        assert!(!pauses.holds(3, 1_199_999) && pauses.holds(3, 1_200_000) && !pauses.holds(3, 1_512_000));
        // Already paused (or about to be) when a refresh arrives: the timer is set anew from
        // it, the stop stays where it was.
        pauses.apply_answered(3, 100, 1_100_000, 200_000, 100_000);
        assert_eq!((pauses.since[3], pauses.until[3]), (1_200_000, 1_612_000));
        // An XON resumes at once.
        pauses.apply_answered(3, 0, 1_300_000, 200_000, 100_000);
        assert!(!pauses.holds(3, 1_300_000));
        // A pause shorter than the response holds nothing.
        pauses.apply_answered(4, 10, 5_000_000, 200_000, 100_000);
        assert!((5_000_000..5_300_000).all(|at| !pauses.holds(4, at)));
    }

    #[test]
    fn a_frame_arms_the_refresh_of_only_the_groups_whose_xoff_it_carried() {
        let mut port = PfcPort::new(100_000, PfcMap::identity(1 << 3 | 1 << 4));
        let mut stats = PortStats::default();
        port.decide_xoff(3);
        let due = port.frame_sent(0, &mut stats);
        // Group 4's XOFF 10 ps later must not push group 3's refresh back.
        port.decide_xoff(4);
        assert_eq!(port.frame_sent(10, &mut stats), 10 + due);
        assert_eq!(port.refresh(3, due, 2_000, 1_000), NEVER, "group 3 refreshed on its own time");
        assert_eq!(port.frame(), Repr { class_enable: 1 << 3, times: [0, 0, 0, XOFF_QUANTA, 0, 0, 0, 0] });
    }

    #[test]
    fn one_frame_carries_every_pending_priority_and_counts_each() {
        let mut port = PfcPort::new(100_000, PfcMap::identity(1 << 3 | 1 << 4 | 1 << 5));
        let mut stats = PortStats::default();
        port.decide_xoff(3);
        port.decide_xoff(4);
        port.decide_xoff(3); // outstanding already
        assert!(port.has_frame());
        let repr = port.frame();
        assert_eq!((repr.class_enable, repr.times[3], repr.times[4]), (0b1_1000, XOFF_QUANTA, XOFF_QUANTA));
        let refresh = port.frame_sent(10, &mut stats);
        assert_eq!(refresh, 10 + quanta_ps(XOFF_QUANTA, 100_000) / 2);
        assert!(!port.has_frame());
        assert_eq!((stats.pfc_xoff_tx[3], stats.pfc_xoff_tx[4]), (1, 1));
        // Above XON nothing; at XON the withdrawal.
        port.decide_xon(3, 1_000, 999);
        assert!(!port.has_frame());
        port.decide_xon(3, 999, 999);
        assert_eq!(port.frame().times[3], 0);
        port.frame_sent(20, &mut stats);
        assert_eq!(stats.pfc_xon_tx[3], 1);
        assert!(!port.xoff_outstanding(3) && port.xoff_outstanding(4));
        // Only what was pending is counted, and a frame names only what is pending: the XON
        // of priority 3 sent before leaves no time behind in the next frame.
        assert_eq!(stats.pfc_xoff_tx, [0, 0, 0, 1, 1, 0, 0, 0]);
        assert_eq!(stats.pfc_xon_tx, [0, 0, 0, 1, 0, 0, 0, 0]);
        port.decide_xon(4, 0, 999);
        assert_eq!(port.frame(), Repr { class_enable: 1 << 4, times: [0; 8] });
        port.frame_sent(30, &mut stats);
        assert_eq!(stats.pfc_xon_tx, [0, 0, 0, 1, 1, 0, 0, 0]);
        assert_eq!(stats.pfc_xoff_tx, [0, 0, 0, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn a_frame_carries_no_time_for_a_priority_it_does_not_name() {
        let mut port = PfcPort::new(100_000, PfcMap::identity(1 << 3 | 1 << 4 | 1 << 5));
        let mut stats = PortStats::default();
        port.decide_xoff(3);
        port.frame_sent(0, &mut stats);
        // Priority 3's XOFF is outstanding (not pending); priority 5 pauses now.
        port.decide_xoff(5);
        let mut times = [0u16; 8];
        times[5] = XOFF_QUANTA;
        assert_eq!(port.frame(), Repr { class_enable: 1 << 5, times });
        port.frame_sent(1, &mut stats);
        assert_eq!(stats.pfc_xoff_tx, [0, 0, 0, 1, 0, 1, 0, 0], "priority 3 counted once");
    }

    #[test]
    fn a_group_pauses_the_priorities_mapped_to_it_and_a_received_pause_holds_their_queue() {
        // PCP 3 lands in TC 4 (group 4); PCP 5 in TC 6 (group 6); priority 3's pauses hold
        // queue 4.
        let mut map = PfcMap::identity(1 << 3 | 1 << 5);
        map.pg_priorities = [0, 0, 0, 0, 1 << 3, 0, 1 << 5 | 1 << 3, 0];
        map.pfc_to_queue[3] = 4;
        let mut port = PfcPort::new(100_000, map);
        let mut stats = PortStats::default();
        port.decide_xoff(4);
        assert_eq!(port.frame().class_enable, 1 << 3, "group 4's XOFF names priority 3");
        port.frame_sent(0, &mut stats);
        port.decide_xoff(6);
        assert_eq!(port.frame().class_enable, 1 << 3 | 1 << 5);
        port.frame_sent(1, &mut stats);
        // Group 4 falls to XON while group 6 still holds priority 3 off: XON for nothing.
        port.decide_xon(4, 0, 10);
        assert!(!port.has_frame(), "priority 3 stays off while group 6 holds it");
        port.decide_xon(6, 0, 10);
        assert_eq!(port.frame(), Repr { class_enable: 1 << 3 | 1 << 5, times: [0; 8] });
        assert_eq!((stats.pfc_xoff_tx[3], stats.pfc_xoff_tx[5]), (2, 1));
        // Received: priority 3 holds queue 4, not queue 3.
        let watchdog = Watchdog { detection_ps: NEVER, restoration_ps: NEVER, action: WatchdogAction::Drop };
        let mut times = [0u16; 8];
        times[3] = 100;
        port.receive(&Repr { class_enable: 1 << 3, times }, 0, &watchdog, &mut stats);
        assert_eq!(port.eligible(1, WatchdogAction::Drop), !(1 << 4));
        assert_eq!(stats.pfc_rx[3], 1);
        // Three groups name priority 3: while any two hold it, the third's XON sends none.
        let mut map = PfcMap::identity(1 << 3);
        map.pg_priorities = [0, 1 << 3, 1 << 3, 1 << 3, 0, 0, 0, 0];
        let mut port = PfcPort::new(100_000, map);
        for pg in 1..=3 {
            port.decide_xoff(pg);
        }
        port.frame_sent(0, &mut stats);
        port.decide_xon(1, 0, 10);
        assert!(!port.has_frame(), "groups 2 and 3 still hold priority 3 off");
        port.decide_xon(2, 0, 10);
        assert!(!port.has_frame(), "group 3 still holds priority 3 off");
        port.decide_xon(3, 0, 10);
        assert_eq!(port.frame().class_enable, 1 << 3);
    }

    #[test]
    fn paused_time_counts_what_each_pause_really_held() {
        let mut port = PfcPort::new(100_000, PfcMap::identity(1 << 3 | 1 << 4 | 1 << 5));
        let mut stats = PortStats::default();
        let watchdog = Watchdog { detection_ps: NEVER, restoration_ps: NEVER, action: WatchdogAction::Drop };
        let pause = |time: u16| {
            let mut times = [0u16; 8];
            times[3] = time;
            Repr { class_enable: 1 << 3, times }
        };
        // 100 quanta at 100G: 512 ns from 1 µs, half of it by 1,256 ns.
        port.receive(&pause(100), 1_000_000, &watchdog, &mut stats);
        assert_eq!(port.paused_ns(1_256_000)[3], 256, "in force: counted up to now");
        assert_eq!(port.paused_ns(9_000_000)[3], 512, "expired: all of it");
        // An XOFF of 65,535 quanta (335 µs) ended after 10 µs by an XON holds 10 µs.
        port.receive(&pause(65_535), 10_000_000, &watchdog, &mut stats);
        port.receive(&pause(0), 20_000_000, &watchdog, &mut stats);
        assert_eq!(port.paused_ns(900_000_000)[3], 512 + 10_000);
        // A refresh before the end extends the same pause; nothing is counted twice.
        port.receive(&pause(100), 1_000_000_000, &watchdog, &mut stats);
        port.receive(&pause(100), 1_000_256_000, &watchdog, &mut stats);
        assert_eq!(port.paused_ns(2_000_000_000)[3], 512 + 10_000 + 256 + 512);
        // A priority PFC is not enabled for is counted as received, never as paused.
        let mut times = [0u16; 8];
        times[1] = 100;
        port.receive(&Repr { class_enable: 1 << 1, times }, 3_000_000_000, &watchdog, &mut stats);
        assert_eq!(port.paused_ns(4_000_000_000)[1], 0);
    }

    #[test]
    fn a_pause_frame_holds_every_class_for_its_quanta_and_zero_resumes_them() {
        let mut port = PfcPort::new(100_000, PfcMap::identity(1 << 3 | 1 << 4 | 1 << 5));
        // 100 quanta at 100G: 512 ns from 1 µs; the caller's timer is its end.
        assert_eq!(port.receive_link_pause(100, 1_000_000), 1_512_000);
        assert_eq!(port.eligible(1_000_000, WatchdogAction::Drop), 0, "every class held");
        assert_eq!(port.eligible(1_511_999, WatchdogAction::Drop), 0);
        assert_eq!(port.eligible(1_512_000, WatchdogAction::Drop), 0xff);
        // A second PAUSE ended 100 ns later by a PAUSE of zero quanta: no timer to set.
        assert_eq!(port.receive_link_pause(100, 2_000_000), 2_512_000);
        assert_eq!(port.receive_link_pause(0, 2_100_000), NEVER);
        assert_eq!(port.eligible(2_100_000, WatchdogAction::Drop), 0xff);
        assert_eq!(port.paused_ns(3_000_000), [512 + 100; 8], "each class counts what held it");
    }

    #[test]
    fn an_outstanding_xoff_is_refreshed_at_its_deadline_while_the_group_is_above_xon() {
        let mut port = PfcPort::new(100_000, PfcMap::identity(1 << 3 | 1 << 4 | 1 << 5));
        let mut stats = PortStats::default();
        port.decide_xoff(3);
        let due = port.frame_sent(0, &mut stats);
        assert_eq!(port.refresh(3, due - 1, 2_000, 1_000), due, "not due yet: the same deadline");
        assert!(!port.has_frame());
        assert_eq!(port.refresh(3, due, 2_000, 1_000), NEVER, "due: refreshed, armed again when sent");
        assert_eq!(port.frame().times[3], XOFF_QUANTA);
        let next = port.frame_sent(due, &mut stats);
        assert_eq!((next, stats.pfc_xoff_tx[3]), (2 * due, 2));
        // At XON by the next deadline: withdrawn instead; then nothing is outstanding.
        assert_eq!(port.refresh(3, next, 1_000, 1_000), NEVER);
        assert_eq!(port.frame().times[3], 0);
        assert!(!port.xoff_outstanding(3));
        port.frame_sent(next, &mut stats);
        assert_eq!(port.refresh(3, next + 1, 5_000, 1_000), NEVER);
        assert!(!port.has_frame());
    }

    /// Collects what a tracing subscriber prints, for tests of log lines.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_watchdog_declares_a_storm_after_detection_and_restores_after_silence() {
        let watchdog =
            Watchdog { detection_ps: 200_000_000_000, restoration_ps: 400_000_000_000, action: WatchdogAction::Drop };
        // At 10 Mb/s an XOFF holds for 3.36 s, longer than the test: no refresh is needed.
        let mut port = PfcPort::new(10, PfcMap::identity(1 << 3));
        let mut stats = PortStats::default();
        let xoff = Repr { class_enable: 1 << 3, times: [0, 0, 0, XOFF_QUANTA, 0, 0, 0, 0] };
        let ms = 1_000_000_000u64;
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, || {
            // Paused from 1 ms (and refreshed at 101 ms): the clock runs, queue empty or not.
            port.receive(&xoff, ms, &watchdog, &mut stats);
            let idle = port.watch(7, 3, 2 * ms, 0, &watchdog, &mut stats);
            assert_eq!(idle, WatchdogStep { next: 201 * ms, flush: false }, "an empty paused queue is watched too");
            assert_eq!(port.watch(7, 3, 2 * ms, 5, &watchdog, &mut stats).next, 201 * ms);
            port.receive(&xoff, 101 * ms, &watchdog, &mut stats);
            let storm = port.watch(7, 3, 201 * ms, 5, &watchdog, &mut stats);
            assert_eq!(
                storm,
                WatchdogStep { next: 501 * ms, flush: true },
                "restoration 400 ms after the last PFC frame"
            );
            assert_eq!(stats.watchdog_storms[3], 1);
            assert!(port.storm_drops(3, WatchdogAction::Drop) && !port.paused(3, 201 * ms, WatchdogAction::Drop));
            assert_eq!(port.watch(7, 3, 500 * ms, 5, &watchdog, &mut stats).next, 501 * ms);
            let restored = port.watch(7, 3, 501 * ms, 5, &watchdog, &mut stats);
            assert_eq!(restored, WatchdogStep { next: NEVER, flush: false });
            assert_eq!(stats.watchdog_restorations[3], 1);
            assert!(!port.storm_drops(3, WatchdogAction::Drop));
        });
        let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("port 7 queue 3 paused for 200.000 ms with 5 frames queued: storm, action Drop"), "{log}");
        assert!(log.contains("port 7 queue 3 restored"), "{log}");
    }
}
