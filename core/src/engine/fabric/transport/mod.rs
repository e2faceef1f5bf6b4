//! How fabric hosts recover lost frames (`[fabric] transport`, `--transport`): the state a
//! queue pair's sender keeps (`TxState`: what is acknowledged, what to send again, the
//! retransmission timer) and its receiver keeps (`RxState`: the next PSN expected, what
//! arrived beyond it), the replies between them (`Reply`: ACK, NAK, NACK), and the rules of
//! each transport, one file each (`gbn`, `sr`, `irn`, `uet`), which the engine calls through
//! `on_data`, `on_reply` and `on_timeout`, and each transport's timeouts and window
//! (`TransportParams`).
//!
//! Common to all three: PSNs number a queue pair's frames; a sender asks for an ACK (BTH
//! AckReq) on every message's last frame and every `ACK_EVERY`th PSN, and the receiver
//! answers with a cumulative ACK (the next PSN it expects); a queue pair with frames
//! unacknowledged that has neither sent nor been acknowledged for its retransmission timeout
//! (`rto_us`, doubled after each timeout without progress, up to 64 times: IBA's local ACK
//! timeout, restarted by each request sent; the NIC looks every half timeout) sends
//! everything unacknowledged again. The timeouts default to what the transport's senders
//! use: a RoCE NIC's local ACK timeout for roce-gbn and roce-sr (`ROCE_RTO_US`), IRN's
//! RTO_high and RTO_low for irn (`irn`), 1 ms for uet-like. Congestion
//! control is DCQCN's for all (`dcqcn.rs`); retransmissions go at the queue pair's rate like
//! any frame. A receiver counts a frame to its message once, the first time it accepts it.
//!
//! Invariant: `acked` never decreases and never passes the next new PSN; every range to send
//! again is non-empty and lies within [acked, next new PSN) (so a queue pair with a range has
//! a frame to send); a receiver's `expected` never decreases, and a
//! PSN below it has been accepted exactly once.

pub mod gbn;
pub mod irn;
pub mod sr;
pub mod uet;

use crate::keyword::keywords;
use std::collections::VecDeque;

keywords! {
    /// How hosts recover losses (`[fabric] transport`, `--transport`).
    pub enum TransportKind {
        /// RoCE's go-back-N: in-order placement only, NAK on a gap, a timeout.
        RoceGbn => "roce-gbn",
        /// Selective repeat: out-of-order placement, a NACK per out-of-order frame, each gap
        /// sent again once.
        RoceSr => "roce-sr",
        /// IRN as published: roce-sr's receiver, loss recovery by SACK with a recovery
        /// sequence, RTO_low for a small window and RTO_high otherwise, and BDP-FC.
        Irn => "irn",
        /// Selective repeat with out-of-order placement, no NACK on reordering, and a NACK
        /// for each trimmed frame: UET's loss signals, not a UET implementation.
        UetLike => "uet-like",
    }
}

/// roce-gbn's and roce-sr's retransmission timeout: a RoCE NIC's local ACK timeout, 4.096 us
/// x 2^14 (IBA's encoding; 14 is what perftest and most verbs applications set). Queueing
/// in a lossless fabric never outlasts it, so a lossless run takes no spurious timeout.
pub const ROCE_RTO_US: f64 = 4.096 * 16384.0;
/// uet-like's: 1 ms (Ultra Ethernet leaves it to the implementation).
pub const UET_RTO_US: f64 = 1000.0;

/// A sender asks for an ACK every this many PSNs (and on every message's last frame).
pub const ACK_EVERY: u32 = 64;

/// The longest a timeout doubles to: 2^6 times `rto_us`.
const MAX_BACKOFF: u8 = 6;

/// The transport and its timers: each kind's defaults, or the file's `rto_us` (irn's
/// RTO_high) and `rto_low_us` (irn's RTO_low).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransportParams {
    pub kind: TransportKind,
    pub rto_us: Option<f64>,
    pub rto_low_us: Option<f64>,
}

impl Default for TransportParams {
    /// roce-sr with its own timeout.
    fn default() -> Self {
        Self { kind: TransportKind::RoceSr, rto_us: None, rto_low_us: None }
    }
}

impl TransportParams {
    /// The retransmission timeout (irn's RTO_high), ps.
    pub fn rto_ps(&self) -> u64 {
        let default = match self.kind {
            TransportKind::RoceGbn | TransportKind::RoceSr => ROCE_RTO_US,
            TransportKind::Irn => irn::RTO_HIGH_US,
            TransportKind::UetLike => UET_RTO_US,
        };
        (self.rto_us.unwrap_or(default) * 1e6) as u64
    }

    /// irn's RTO_low, ps (the other transports have one timeout).
    pub fn rto_low_ps(&self) -> u64 {
        match self.kind {
            TransportKind::Irn => ((self.rto_low_us.unwrap_or(irn::RTO_LOW_US) * 1e6) as u64).min(self.rto_ps()),
            _ => self.rto_ps(),
        }
    }

    /// How often a NIC looks for timeouts: every half of the shortest.
    pub fn tick_ps(&self) -> u64 {
        (self.rto_low_ps() / 2).max(1)
    }

    /// The timeout of a queue pair with `in_flight` frames unacknowledged: irn's RTO_low up
    /// to `irn::LOW_WINDOW` of them, else the timeout; doubled by its backoff.
    pub fn timeout_ps(&self, tx: &TxState, in_flight: u32) -> u64 {
        let base = if self.kind == TransportKind::Irn && in_flight <= irn::LOW_WINDOW {
            self.rto_low_ps()
        } else {
            self.rto_ps()
        };
        base << tx.backoff
    }

    /// A sender asks for an ACK every this many PSNs (and on a message's last frame): irn on
    /// every frame, as BDP-FC's window needs to move.
    pub fn ack_every(&self) -> u32 {
        match self.kind {
            TransportKind::Irn => 1,
            _ => ACK_EVERY,
        }
    }
}

/// A message whose frames have been sent, not all acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    pub message: u32,
    pub first_psn: u32,
    pub frames: u32,
}

/// A queue pair's sender side of loss recovery.
#[derive(Debug, Clone, Default)]
pub struct TxState {
    /// Every PSN below this is acknowledged.
    pub acked: u32,
    /// PSN ranges [start, end) to send again, in order, before new frames.
    pub resend: VecDeque<(u32, u32)>,
    /// Selective repeat: PSNs below this were queued again in the current recovery.
    pub recovered_to: u32,
    /// Messages sent, not all acknowledged, in PSN order.
    pub in_flight: VecDeque<InFlight>,
    /// When `acked` last moved, a frame was last sent, or the timer last fired.
    pub progress_ps: u64,
    /// Timeouts since the last progress: the timeout is `rto << backoff`.
    pub backoff: u8,
    /// In its NIC's list of queue pairs its retransmission tick checks.
    pub timer_armed: bool,
    /// Selective repeat: PSNs the receiver said arrived (a NACK names one), never sent again.
    sacked: RxState,
    /// Messages wholly acknowledged since the engine last took them: their last ACK has come
    /// (where HPCC's flow completion time ends).
    pub acked_messages: Vec<u32>,
    /// irn: in loss recovery, until everything below `recovery_end` is acknowledged.
    pub recovery: bool,
    pub recovery_end: u32,
}

impl TxState {
    /// An acknowledgement up to `psn` (exclusive) at `now`.
    pub fn acknowledge(&mut self, psn: u32, now: u64) {
        if psn <= self.acked {
            return;
        }
        self.acked = psn;
        self.sacked.forget_below(psn);
        self.progress_ps = now;
        self.backoff = 0;
        while let Some(message) = self.in_flight.front().filter(|message| message.first_psn + message.frames <= psn) {
            self.acked_messages.push(message.message);
            self.in_flight.pop_front();
        }
        // Ranges need not be in order (a trimmed frame's NACK names any PSN): each is cut.
        self.resend.retain_mut(|range| {
            range.0 = range.0.max(psn);
            range.0 < range.1
        });
    }

    /// Queues [start, end) to send again (the part not acknowledged).
    pub fn queue_again(&mut self, start: u32, end: u32) {
        let start = start.max(self.acked);
        if start < end {
            self.resend.push_back((start, end));
        }
    }

    /// The next PSN to send again, taken from the queue.
    pub fn next_again(&mut self) -> Option<u32> {
        loop {
            let range = self.resend.front_mut()?;
            let psn = range.0;
            range.0 += 1;
            if range.0 >= range.1 {
                self.resend.pop_front();
            }
            if psn >= self.acked && !self.sacked.has(psn) {
                return Some(psn);
            }
        }
    }

    /// The receiver said `psn` arrived (selective acknowledgement).
    pub fn sack(&mut self, psn: u32) {
        if psn >= self.acked && !self.sacked.has(psn) {
            self.sacked.mark(psn);
        }
    }

    /// The message PSN `psn` belongs to, and its frame's index in it.
    pub fn message_of(&self, psn: u32) -> Option<(InFlight, u32)> {
        let message = *self.in_flight.iter().find(|m| m.first_psn <= psn && psn < m.first_psn + m.frames)?;
        Some((message, psn - message.first_psn))
    }
}

/// What a receiver knows of a queue pair's PSNs: the next it expects, and which beyond it
/// have arrived (selective repeat).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RxState {
    pub expected: u32,
    /// Go-back-N: a NAK went for the current gap (one per gap, as RoCE NICs send).
    pub nak_sent: bool,
    /// Bit `psn % 64` of word `psn / 64 - base_word`: arrived beyond `expected`.
    beyond: VecDeque<u64>,
    base_word: u32,
}

impl RxState {
    /// Whether `psn` has been accepted.
    pub fn has(&self, psn: u32) -> bool {
        if psn < self.expected {
            return true;
        }
        let word = (psn / 64).wrapping_sub(self.base_word) as usize;
        self.beyond.get(word).is_some_and(|bits| bits & (1 << (psn % 64)) != 0)
    }

    /// Marks `psn` (at or above `expected`) as arrived, leaving `expected` where it is.
    fn mark(&mut self, psn: u32) {
        if self.beyond.is_empty() {
            self.base_word = psn / 64;
        }
        if psn / 64 < self.base_word {
            return;
        }
        let word = (psn / 64 - self.base_word) as usize;
        if word >= self.beyond.len() {
            self.beyond.resize(word + 1, 0);
        }
        self.beyond[word] |= 1 << (psn % 64);
    }

    /// Drops what it knows below `psn` (the sender's acknowledged point).
    fn forget_below(&mut self, psn: u32) {
        while self.base_word < psn / 64 && !self.beyond.is_empty() {
            self.beyond.pop_front();
            self.base_word += 1;
        }
    }

    /// Accepts `psn` (not yet accepted): moves `expected` past every PSN now in order.
    pub fn accept(&mut self, psn: u32) {
        if psn == self.expected {
            self.expected += 1;
            while self.has(self.expected) {
                self.expected += 1;
            }
            // Words wholly below `expected` are done with.
            while self.base_word < self.expected / 64 && !self.beyond.is_empty() {
                self.beyond.pop_front();
                self.base_word += 1;
            }
            if self.beyond.is_empty() {
                self.base_word = self.expected / 64;
            }
            return;
        }
        if self.beyond.is_empty() {
            self.base_word = self.expected / 64;
        }
        let word = (psn / 64 - self.base_word) as usize;
        if word >= self.beyond.len() {
            self.beyond.resize(word + 1, 0);
        }
        self.beyond[word] |= 1 << (psn % 64);
    }
}

/// A receiver's answer to a data frame, sent to the queue pair's sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Everything below `expected` arrived.
    Ack { expected: u32 },
    /// Go-back-N: a gap; send again from `expected`.
    Nak { expected: u32 },
    /// Selective repeat: `arrived` came out of order; everything below `expected` arrived.
    Nack { expected: u32, arrived: u32 },
    /// `psn` arrived trimmed: send it again (everything below `expected` arrived).
    Trimmed { expected: u32, psn: u32 },
}

/// What became of a data frame at its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// First arrival of its PSN, whole: counts to its message.
    pub new: bool,
    pub reply: Option<Reply>,
}

/// A data frame with `psn` (asking for an ACK, or trimmed on the way) reaches the receiver
/// whose state for its queue pair is `rx`.
pub fn on_data(kind: TransportKind, rx: &mut RxState, psn: u32, ack_req: bool, trimmed: bool) -> Accepted {
    match kind {
        TransportKind::RoceGbn => gbn::on_data(rx, psn, ack_req, trimmed),
        TransportKind::RoceSr | TransportKind::Irn => sr::on_data(rx, psn, ack_req, trimmed),
        TransportKind::UetLike => uet::on_data(rx, psn, ack_req, trimmed),
    }
}

/// A reply reaches the sender, whose next new PSN is `next_psn`.
pub fn on_reply(kind: TransportKind, tx: &mut TxState, reply: Reply, next_psn: u32, now: u64) {
    match kind {
        TransportKind::RoceGbn => gbn::on_reply(tx, reply, next_psn, now),
        TransportKind::RoceSr => sr::on_reply(tx, reply, next_psn, now),
        TransportKind::Irn => irn::on_reply(tx, reply, next_psn, now),
        TransportKind::UetLike => uet::on_reply(tx, reply, next_psn, now),
    }
}

/// The retransmission timer fired with frames unacknowledged for the timeout: every
/// transport sends everything unacknowledged again (the selective ones skip what a NACK
/// said arrived); irn enters loss recovery.
pub fn on_timeout(kind: TransportKind, tx: &mut TxState, next_psn: u32, now: u64) {
    tx.resend.clear();
    tx.queue_again(tx.acked, next_psn);
    tx.recovered_to = next_psn;
    tx.progress_ps = now;
    tx.backoff = (tx.backoff + 1).min(MAX_BACKOFF);
    if kind == TransportKind::Irn {
        irn::enter_recovery(tx, next_psn);
    }
}

/// A 24-bit PSN off the wire (the BTH's) as the 32-bit PSN nearest `near` (the receiver's
/// expected PSN, the sender's acknowledged one): PSNs wrap on the wire, never here.
pub fn unwrap_psn(raw: u32, near: u32) -> u32 {
    let delta = raw.wrapping_sub(near) & 0xff_ffff;
    if delta < 1 << 23 {
        near.wrapping_add(delta)
    } else {
        near.saturating_sub((1 << 24) - delta)
    }
}

/// `reply` with its PSNs unwrapped near `near`.
pub fn unwrap_reply(reply: Reply, near: u32) -> Reply {
    let psn = |raw| unwrap_psn(raw, near);
    match reply {
        Reply::Ack { expected } => Reply::Ack { expected: psn(expected) },
        Reply::Nak { expected } => Reply::Nak { expected: psn(expected) },
        Reply::Nack { expected, arrived } => Reply::Nack { expected: psn(expected), arrived: psn(arrived) },
        Reply::Trimmed { expected, psn: named } => Reply::Trimmed { expected: psn(expected), psn: psn(named) },
    }
}

/// The common receipt of an ACK: `expected` acknowledges everything below it.
fn acknowledged(tx: &mut TxState, reply: Reply, now: u64) {
    let (Reply::Ack { expected }
    | Reply::Nak { expected }
    | Reply::Nack { expected, .. }
    | Reply::Trimmed { expected, .. }) = reply;
    tx.acknowledge(expected, now);
}

/// The ACK a frame that asked for one gets: the next PSN expected.
fn ack_if_asked(rx: &RxState, ack_req: bool) -> Option<Reply> {
    ack_req.then_some(Reply::Ack { expected: rx.expected })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_psns_unwrap_near_the_expected_one() {
        assert_eq!(unwrap_psn(5, 3), 5);
        assert_eq!(unwrap_psn(2, 3), 2);
        assert_eq!(unwrap_psn(0x00_0001, 0x00ff_fffe), 0x0100_0001, "past the wrap");
        assert_eq!(unwrap_psn(0xff_fffe, 0x0100_0001), 0x00ff_fffe, "just before it");
        assert_eq!(unwrap_psn(0xff_ffff, 0), 0, "never below zero");
    }

    #[test]
    fn the_receive_window_accepts_in_any_order_and_moves_past_what_is_in_order() {
        let mut rx = RxState::default();
        for psn in [1, 2, 130, 64] {
            assert!(!rx.has(psn));
            rx.accept(psn);
            assert!(rx.has(psn));
        }
        assert_eq!(rx.expected, 0);
        rx.accept(0);
        assert_eq!(rx.expected, 3, "0, 1, 2 in order");
        for psn in 3..64 {
            rx.accept(psn);
        }
        assert_eq!(rx.expected, 65, "64 had come");
        assert!(rx.has(130) && !rx.has(129) && !rx.has(65));
        for psn in 65..130 {
            rx.accept(psn);
        }
        assert_eq!(rx.expected, 131);
        assert!(rx.beyond.is_empty() || rx.beyond.iter().all(|&w| w == 0 || rx.base_word * 64 + 63 >= 130));
    }

    #[test]
    fn acknowledging_drops_what_is_acked_from_the_resend_queue_and_the_messages() {
        let mut tx = TxState::default();
        tx.in_flight.extend([
            InFlight { message: 0, first_psn: 0, frames: 4 },
            InFlight { message: 1, first_psn: 4, frames: 4 },
        ]);
        tx.queue_again(2, 6);
        tx.acknowledge(5, 10);
        assert_eq!((tx.acked, tx.progress_ps), (5, 10));
        assert_eq!(tx.in_flight.len(), 1);
        assert_eq!(tx.message_of(6), Some((InFlight { message: 1, first_psn: 4, frames: 4 }, 2)));
        assert_eq!((tx.next_again(), tx.next_again()), (Some(5), None));
        tx.acknowledge(3, 20);
        assert_eq!(tx.acked, 5, "never back");
        on_timeout(TransportKind::RoceSr, &mut tx, 8, 30);
        assert_eq!((tx.resend.front(), tx.backoff), (Some(&(5, 8)), 1));
        let params = TransportParams { rto_us: Some(100.0), ..TransportParams::default() };
        assert_eq!(params.timeout_ps(&tx, 8), 200_000_000);
    }
}
