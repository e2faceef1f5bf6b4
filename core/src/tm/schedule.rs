//! The egress scheduler of one port: strict priority over the strict TCs (higher TC first),
//! then deficit weighted round robin (DWRR) over the others, by byte. The caller says what a
//! frame costs: the switch charges the bytes it takes on the link (padding, FCS, preamble and
//! inter-frame gap included), so weights share link time, as they do on an ASIC's port.
//!
//! Invariant: `select` only ever returns a TC that is eligible (not paused) and has a packet,
//! and it has already charged that packet's bytes to the TC's deficit, so the caller must
//! dequeue exactly that packet. A DWRR TC that runs empty loses its deficit (classic DRR), so
//! an idle TC cannot save up credit.

use crate::config::Qos;
use crate::units::TRAFFIC_CLASSES;

/// Bytes of credit per unit of weight per round. A weight-1 TC with a 9216-byte frame at its
/// head needs 9 rounds; larger units make rounds coarser, smaller ones loop more.
pub const QUANTUM_BYTES_PER_WEIGHT: u32 = 1024;

#[derive(Debug, Clone)]
pub struct Scheduler {
    strict_mask: u8,
    quantum: [u32; TRAFFIC_CLASSES],
    /// DWRR TCs in round order.
    order: [u8; TRAFFIC_CLASSES],
    order_len: usize,
    deficit: [u32; TRAFFIC_CLASSES],
    cursor: usize,
    /// Whether the TC at `cursor` already received this round's quantum.
    credited: bool,
}

impl Scheduler {
    pub fn new(qos: &Qos) -> Self {
        let mut order = [0u8; TRAFFIC_CLASSES];
        let mut order_len = 0;
        let mut quantum = [0u32; TRAFFIC_CLASSES];
        for (tc, quantum) in quantum.iter_mut().enumerate() {
            if qos.strict_mask & (1 << tc) == 0 {
                order[order_len] = tc as u8;
                order_len += 1;
                *quantum = qos.dwrr_weights[tc] * QUANTUM_BYTES_PER_WEIGHT;
            }
        }
        Self {
            strict_mask: qos.strict_mask,
            quantum,
            order,
            order_len,
            deficit: [0; TRAFFIC_CLASSES],
            cursor: 0,
            credited: false,
        }
    }

    /// Picks the TC to send next. `eligible` has bit n set when TC n may send (not paused),
    /// `backlog` when TC n holds a frame; `head_len(tc)` is the cost in bytes of the frame at
    /// the head of a backlogged TC. Masks keep this to a few instructions when only some classes are
    /// busy (scanning every DWRR head instead cost the port-route pipeline bench a quarter
    /// more per frame: perf/RESULTS.md, "Figures once in code comments").
    #[inline]
    pub fn select(&mut self, eligible: u8, backlog: u8, head_len: impl Fn(usize) -> usize) -> Option<usize> {
        let ready = eligible & backlog;
        let strict = self.strict_mask & ready;
        if strict != 0 {
            return Some(7 - strict.leading_zeros() as usize);
        }
        // DWRR: if no eligible TC has a frame, stop; else rounds run until one's deficit covers
        // its head, which takes at most max_frame / quantum rounds.
        if ready & !self.strict_mask == 0 {
            return None;
        }
        loop {
            let tc = usize::from(self.order[self.cursor]);
            let bit = 1u8 << tc;
            if backlog & bit == 0 {
                self.deficit[tc] = 0;
                self.advance();
            } else if eligible & bit == 0 {
                self.advance();
            } else {
                if !self.credited {
                    self.deficit[tc] = self.deficit[tc].saturating_add(self.quantum[tc]);
                    self.credited = true;
                }
                let len = head_len(tc) as u32;
                if len <= self.deficit[tc] {
                    self.deficit[tc] -= len;
                    return Some(tc);
                }
                self.advance();
            }
        }
    }

    /// `select` for a port whose only frame is one of `len` bytes in class `tc`, which may
    /// send: the round moves as if `select` had picked it (a frame that cuts through). The
    /// common case, the class's turn with its deficit covering the frame, is one compare;
    /// anything else runs `select` itself.
    ///
    /// Frames of one class sent alone one after another may be charged as one frame of
    /// their summed length: the deficit then ends at the one value the parts' charges can
    /// leave (the start plus a whole number of quanta minus the sum, at least 0, and below a
    /// quantum when any quantum was added), the round at the class, credited
    /// (`a_run_charged_at_once_moves_the_round_as_its_frames_do`).
    #[inline(always)]
    pub fn charge_alone(&mut self, tc: usize, len: u32) {
        let bit = 1u8 << tc;
        if self.strict_mask & bit != 0 {
            return;
        }
        if self.credited && usize::from(self.order[self.cursor]) == tc && len <= self.deficit[tc] {
            self.deficit[tc] -= len;
            return;
        }
        // The other classes have no frame and the frame's class may send, so the other
        // classes' eligibility changes nothing.
        self.select(bit, bit, |_| len as usize);
    }

    /// Whether `select` would pick class `tc` again, asked right after it picked `tc` with
    /// nothing queued and no eligibility changed since (only `tc`'s head left), and if so
    /// charged as `select` charges it: `tc` still backlogged, and a strict class (still the
    /// highest ready one) or a DWRR class whose deficit covers its new head (`head_len`, asked
    /// only then). When false, `select` decides, from the state `select` itself would have.
    /// One test a frame for the frames a port sends in a row from one class
    /// (`Switch::transmit_burst`).
    #[inline(always)]
    pub fn picks_again(&mut self, tc: usize, backlog: u8, head_len: impl FnOnce() -> usize) -> bool {
        let bit = 1u8 << tc;
        if backlog & bit == 0 {
            return false;
        }
        if self.strict_mask & bit != 0 {
            return true;
        }
        // `select` returned `tc` with the cursor on it and its quantum credited: its next
        // call looks at `tc` first and picks it when its deficit covers the head.
        let len = head_len() as u32;
        if len <= self.deficit[tc] {
            self.deficit[tc] -= len;
            return true;
        }
        false
    }

    fn advance(&mut self) {
        // A compare, not `%`: the order's length is not a constant, so `%` is a division.
        self.cursor += 1;
        if self.cursor == self.order_len {
            self.cursor = 0;
        }
        self.credited = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn scheduler(qos_section: &str) -> Scheduler {
        let text = format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n{qos_section}\n[[port]]\nname = \"p\"\nspeed_gbps = 1\npeer_mac = \"02:00:00:00:00:02\"\n"
        );
        Scheduler::new(&Config::parse(&text, "t.toml").unwrap().qos)
    }

    fn backlog(sizes: &[Option<usize>; 8]) -> u8 {
        sizes.iter().enumerate().filter(|(_, size)| size.is_some()).fold(0, |mask, (tc, _)| mask | 1 << tc)
    }

    /// Sends `rounds` packets from always-backlogged TCs with the given frame sizes.
    fn shares(scheduler: &mut Scheduler, sizes: [Option<usize>; 8], eligible: u8, packets: usize) -> [u64; 8] {
        let mut bytes = [0u64; 8];
        for _ in 0..packets {
            let tc = scheduler.select(eligible, backlog(&sizes), |tc| sizes[tc].unwrap()).unwrap();
            bytes[tc] += sizes[tc].unwrap() as u64;
        }
        bytes
    }

    /// A frame alone on its port, in classes taking turns and at sizes that cross the
    /// deficits: `charge_alone` leaves the round where `select` of that one frame does.
    #[test]
    fn a_frame_alone_moves_the_round_as_select_does() {
        let mut alone = scheduler("[qos.scheduler]\nstrict = [6]\ndwrr = { 0 = 10, 3 = 30 }");
        let mut selecting = alone.clone();
        let frames = [(0, 60), (3, 1500), (3, 9000), (0, 9000), (3, 60), (6, 1500), (0, 60), (0, 60), (3, 4000)];
        for (step, &(tc, len)) in frames.iter().cycle().take(200).enumerate() {
            alone.charge_alone(tc, len);
            let bit = 1u8 << tc;
            assert_eq!(selecting.select(bit, bit, |_| len as usize), Some(tc));
            assert_eq!(format!("{alone:?}"), format!("{selecting:?}"), "step {step}: class {tc}, {len} bytes");
        }
    }

    proptest::proptest! {
        /// After any history of frames alone in any class, a run of frames in one class
        /// charged as their sum, or as the sum in parts, leaves the scheduler where charging
        /// them one by one does.
        #[test]
        fn a_run_charged_at_once_moves_the_round_as_its_frames_do(
            history in proptest::collection::vec((0usize..8, 60u32..9300), 0..12),
            tc in 0usize..8,
            run in proptest::collection::vec(60u32..9300, 1..40),
            part in 1u32..20_000,
        ) {
            let mut one_by_one = scheduler("[qos.scheduler]\nstrict = [6]\ndwrr = { 0 = 1, 3 = 3, 5 = 9 }");
            for &(tc, len) in &history {
                one_by_one.charge_alone(tc, len);
            }
            let mut at_once = one_by_one.clone();
            let mut in_parts = one_by_one.clone();
            for &len in &run {
                one_by_one.charge_alone(tc, len);
            }
            let sum: u32 = run.iter().sum();
            at_once.charge_alone(tc, sum);
            proptest::prop_assert_eq!(format!("{at_once:?}"), format!("{one_by_one:?}"));
            // And the sum in equal parts that split frames (`Switch::receive_burst` charges a
            // run past `u32::MAX` so).
            let mut left = sum;
            while left > 0 {
                in_parts.charge_alone(tc, part.min(left));
                left -= part.min(left);
            }
            proptest::prop_assert_eq!(format!("{in_parts:?}"), format!("{one_by_one:?}"));
        }
    }

    proptest::proptest! {
        /// Frames of random sizes queued in random classes, some paused: a port that asks
        /// `picks_again` after each pick and `select` only when it says no sends the frames
        /// in the order, and leaves the scheduler where, `select` for every frame does.
        #[test]
        fn picking_again_sends_what_selecting_each_frame_sends(
            queues in proptest::collection::vec(proptest::collection::vec(60usize..9300, 0..12), 8),
            eligible in 0u8..=255,
        ) {
            let config = "[qos.scheduler]\nstrict = [6]\ndwrr = { 0 = 1, 3 = 3, 5 = 9 }";
            let mut selecting = scheduler(config);
            let mut picking = selecting.clone();
            let send = |scheduler: &mut Scheduler, again: bool| {
                let mut queues: Vec<std::collections::VecDeque<usize>> =
                    queues.iter().map(|queue| queue.iter().copied().collect()).collect();
                let backlog = |queues: &[std::collections::VecDeque<usize>]| {
                    queues.iter().enumerate().filter(|(_, queue)| !queue.is_empty()).fold(0u8, |mask, (tc, _)| mask | 1 << tc)
                };
                let mut sent = Vec::new();
                let mut last = None;
                loop {
                    let tc = match last {
                        Some(tc) if again && scheduler.picks_again(tc, backlog(&queues), || queues[tc][0]) => tc,
                        _ => match scheduler.select(eligible, backlog(&queues), |tc| queues[tc][0]) {
                            Some(tc) => tc,
                            None => break,
                        },
                    };
                    sent.push((tc, queues[tc].pop_front().unwrap()));
                    last = Some(tc);
                }
                sent
            };
            let by_select = send(&mut selecting, false);
            let by_picking = send(&mut picking, true);
            proptest::prop_assert_eq!(by_picking, by_select);
            proptest::prop_assert_eq!(format!("{picking:?}"), format!("{selecting:?}"));
        }
    }

    #[test]
    fn strict_priority_wins_and_higher_strict_first() {
        let mut s = scheduler("[qos.scheduler]\nstrict = [6, 7]\ndwrr = { 0 = 50, 3 = 50 }");
        let sizes = [Some(1000), None, None, Some(1000), None, None, Some(64), Some(64)];
        assert_eq!(s.select(0xff, backlog(&sizes), |tc| sizes[tc].unwrap()), Some(7));
        assert_eq!(s.select(0x7f, backlog(&sizes), |tc| sizes[tc].unwrap()), Some(6), "TC 7 paused");
        assert_eq!(s.select(0x00, backlog(&sizes), |tc| sizes[tc].unwrap()), None, "all paused");
    }

    #[test]
    fn dwrr_shares_bytes_by_weight() {
        let mut s = scheduler("[qos.scheduler]\ndwrr = { 0 = 75, 3 = 25 }");
        let sizes = [Some(1500), None, None, Some(300), None, None, None, None];
        let bytes = shares(&mut s, sizes, 0xff, 20_000);
        let share = bytes[0] as f64 / (bytes[0] + bytes[3]) as f64;
        assert!((share - 0.75).abs() < 0.01, "share {share}");
    }

    #[test]
    fn unnamed_tcs_get_weight_one_and_paused_tcs_yield() {
        let mut s = scheduler("[qos.scheduler]\ndwrr = { 0 = 3 }");
        let sizes = [Some(1000), Some(1000), None, None, None, None, None, None];
        let bytes = shares(&mut s, sizes, 0xff, 4000);
        let share = bytes[0] as f64 / (bytes[0] + bytes[1]) as f64;
        assert!((share - 0.75).abs() < 0.01, "share {share}");
        let bytes = shares(&mut s, sizes, 0b10, 100);
        assert_eq!(bytes[0], 0, "TC 0 paused");
    }

    #[test]
    fn all_strict_leaves_no_dwrr_round() {
        let mut s = scheduler("[qos.scheduler]\nstrict = [0, 1, 2, 3, 4, 5, 6, 7]");
        let sizes = [Some(64), None, None, Some(64), None, None, None, None];
        assert_eq!(s.select(0xff, backlog(&sizes), |tc| sizes[tc].unwrap()), Some(3));
        assert_eq!(s.select(0x01, backlog(&sizes), |tc| sizes[tc].unwrap()), Some(0));
        assert_eq!(s.select(0x00, backlog(&sizes), |tc| sizes[tc].unwrap()), None);
    }

    #[test]
    fn a_dwrr_class_that_runs_empty_loses_its_deficit() {
        // TC 0 and TC 1 at weight 1 (1,024 bytes a round). TC 0 sends one 100-byte frame and
        // runs empty with 924 bytes of credit left; classic DRR forgets it. When 20 frames of
        // 100 bytes arrive later, TC 0's next round covers 10 of them, not 19.
        let mut s = scheduler("[qos.scheduler]\ndwrr = { 0 = 1, 1 = 1 }");
        let len = |tc: usize| if tc == 0 { 100 } else { 1000 };
        assert_eq!(s.select(0xff, 0b11, len), Some(0));
        assert_eq!(s.select(0xff, 0b10, len), Some(1), "TC 0 is empty: TC 1's turn");
        let mut tc0_in_a_row = 0;
        let mut queued = 20;
        loop {
            let backlog = if queued > 0 { 0b11 } else { 0b10 };
            match s.select(0xff, backlog, len) {
                Some(0) => {
                    tc0_in_a_row += 1;
                    queued -= 1;
                }
                Some(1) if tc0_in_a_row == 0 => {}
                _ => break,
            }
        }
        assert_eq!(tc0_in_a_row, 10, "the deficit saved while empty was spent");
    }

    #[test]
    fn jumbo_frames_at_weight_one_still_go() {
        let mut s = scheduler("");
        let sizes = [Some(9216), None, None, None, None, None, None, None];
        assert_eq!(s.select(0xff, backlog(&sizes), |tc| sizes[tc].unwrap()), Some(0));
    }
}
