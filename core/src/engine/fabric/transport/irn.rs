//! `irn`: IRN as Mittal et al. publish it ("Revisiting Network Support for RDMA", SIGCOMM
//! 2018, §3), for RoCE without PFC. The paper's parameters are named here; the engine applies
//! the timeouts and the window (`TransportParams`, `Plan::window_frames`).
//!
//! - Receiver: roce-sr's (`sr::on_data`): out-of-order frames are placed, and each is
//!   answered with a NACK carrying the cumulative ACK and its own PSN (IRN's simplified SACK).
//!   It ACKs every frame that asks, and an irn sender asks on every frame.
//! - Loss recovery: a NACK or a timeout puts the sender in recovery, whose recovery sequence
//!   is the first PSN not yet sent then (`recovery_end`). In recovery the sender sends lost
//!   frames before new ones: the one at the cumulative ACK first, then any PSN below one a
//!   NACK selectively acknowledged that was not itself acknowledged, each once per recovery.
//!   A partial ACK, a cumulative ACK that moves but stays short of the recovery sequence,
//!   says its PSN is lost too: it was sent before the recovery began, and the frames sent
//!   again since have arrived ahead of it on a path that keeps order. It is sent again at
//!   once, which recovers a lost tail without waiting for a timeout when an earlier loss
//!   started the recovery. A cumulative ACK at or beyond the recovery sequence ends it; a
//!   later loss starts another.
//! - Timeouts: RTO_low (`RTO_LOW_US`) while at most N (`LOW_WINDOW`) frames are
//!   unacknowledged, which recovers a lost tail that no later frame will NACK; RTO_high
//!   (`RTO_HIGH_US`) otherwise. A timeout sends what is unacknowledged again, less what was
//!   selectively acknowledged, and enters recovery.
//! - BDP-FC: at most a bandwidth-delay product of frames unacknowledged: the host link's
//!   rate times the longest path's base RTT, in the workload's frames (`Plan::window_frames`).
//!
//! The paper's values are for its 40 Gb/s fabric (RTO_high an estimate of the largest RTT
//! with its buffers); they are kept as published, and `[fabric] rto_us` and `rto_low_us`
//! change them. Left out: IRN's changes to RDMA's verbs (out-of-order placement of reads and
//! atomics); raceway's messages are writes.
//!
//! Invariant: in one recovery a PSN is queued again at most once (`recovered_to`), and
//! recovery ends exactly when the cumulative ACK reaches `recovery_end`.

use super::{acknowledged, Reply, TxState};

/// RTO_high (us): the timeout with more than `LOW_WINDOW` frames in flight.
pub const RTO_HIGH_US: f64 = 320.0;
/// RTO_low (us): the timeout with `LOW_WINDOW` or fewer frames in flight.
pub const RTO_LOW_US: f64 = 100.0;
/// N: the frames in flight up to which RTO_low applies.
pub const LOW_WINDOW: u32 = 3;

/// Enters loss recovery after a timeout, which queued everything unacknowledged again: its
/// recovery sequence is `next_psn`, the first PSN not yet sent (a recovery under way is
/// stretched to it).
pub fn enter_recovery(tx: &mut TxState, next_psn: u32) {
    tx.recovery_end = if tx.recovery { tx.recovery_end.max(next_psn) } else { next_psn };
    tx.recovery = true;
}

pub fn on_reply(tx: &mut TxState, reply: Reply, next_psn: u32, now: u64) {
    acknowledged(tx, reply, now);
    if let Reply::Ack { expected } = reply {
        // A partial ACK (module notes): the PSN it expects is lost, once per recovery. In
        // recovery the cumulative ACK stays below `recovered_to` until an ACK moves it, so an
        // ACK that does not move never passes this.
        if tx.recovery && expected < tx.recovery_end && expected >= tx.recovered_to {
            tx.queue_again(expected, expected + 1);
            tx.recovered_to = expected + 1;
        }
    }
    if let Reply::Nack { expected, arrived } = reply {
        tx.sack(arrived);
        if !tx.recovery {
            tx.recovery = true;
            tx.recovery_end = next_psn;
            tx.recovered_to = expected;
        }
        // The cumulative ACK's PSN and every PSN up to the one selectively acknowledged are
        // lost (the SACKed ones are skipped when sent): each once in this recovery.
        let from = expected.max(tx.recovered_to);
        tx.queue_again(from, arrived);
        tx.recovered_to = tx.recovered_to.max(arrived + 1);
    }
    if tx.recovery && tx.acked >= tx.recovery_end {
        tx.recovery = false;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{on_data, on_timeout, RxState, TransportKind, TransportParams};
    use super::*;

    fn sent_again(tx: &mut TxState) -> Vec<u32> {
        std::iter::from_fn(|| tx.next_again()).collect()
    }

    #[test]
    fn a_nack_starts_recovery_and_the_holes_below_it_are_sent_again_once() {
        let mut tx = TxState::default();
        // 0-9 sent; 2 and 5 lost: NACKs for 3 (expected 2), 4, 6 (expected 2 still).
        on_reply(&mut tx, Reply::Ack { expected: 2 }, 10, 1);
        on_reply(&mut tx, Reply::Nack { expected: 2, arrived: 3 }, 10, 2);
        assert!(tx.recovery && tx.recovery_end == 10);
        on_reply(&mut tx, Reply::Nack { expected: 2, arrived: 4 }, 10, 3);
        on_reply(&mut tx, Reply::Nack { expected: 2, arrived: 6 }, 10, 4);
        assert_eq!(sent_again(&mut tx), [2, 5], "the cumulative ACK's PSN, then the hole below 6; 3, 4 and 6 arrived");
        // The resent 2 arrives: the cumulative ACK moves to 5, still in recovery.
        on_reply(&mut tx, Reply::Nack { expected: 5, arrived: 7 }, 10, 5);
        assert!(sent_again(&mut tx).is_empty(), "5 was sent again already in this recovery");
        assert!(tx.recovery);
        on_reply(&mut tx, Reply::Ack { expected: 10 }, 10, 6);
        assert!(!tx.recovery, "the cumulative ACK reached the recovery sequence");
        // A later loss is a new recovery: a PSN may be sent again again.
        on_reply(&mut tx, Reply::Nack { expected: 10, arrived: 12 }, 14, 7);
        assert!(tx.recovery && tx.recovery_end == 14);
        assert_eq!(sent_again(&mut tx), [10, 11]);
    }

    /// Frames 0-9 sent, 2 and 9 (the tail) lost: the NACKs of 3-8 send 2 again; its arrival
    /// moves the cumulative ACK to 9, short of the recovery sequence (10), so 9 is lost too
    /// and goes again at once, not after a timeout.
    #[test]
    fn a_partial_ack_sends_a_lost_tail_again_without_a_timeout() {
        let mut tx = TxState::default();
        on_reply(&mut tx, Reply::Ack { expected: 2 }, 10, 1);
        for arrived in 3..9 {
            on_reply(&mut tx, Reply::Nack { expected: 2, arrived }, 10, 2);
        }
        assert_eq!(sent_again(&mut tx), [2]);
        on_reply(&mut tx, Reply::Ack { expected: 9 }, 10, 3);
        assert_eq!(sent_again(&mut tx), [9], "the partial ACK's PSN");
        on_reply(&mut tx, Reply::Ack { expected: 9 }, 10, 4);
        assert!(sent_again(&mut tx).is_empty(), "an ACK that does not move says nothing new");
        on_reply(&mut tx, Reply::Ack { expected: 10 }, 10, 5);
        assert!(!tx.recovery && sent_again(&mut tx).is_empty());
        // Outside a recovery an ACK sends nothing again.
        on_reply(&mut tx, Reply::Ack { expected: 12 }, 14, 6);
        assert!(sent_again(&mut tx).is_empty());
    }

    #[test]
    fn recovery_ends_only_at_the_recovery_sequence() {
        let mut tx = TxState::default();
        on_reply(&mut tx, Reply::Nack { expected: 0, arrived: 1 }, 4, 1);
        on_reply(&mut tx, Reply::Ack { expected: 3 }, 6, 2);
        assert!(tx.recovery, "3 is short of 4");
        on_reply(&mut tx, Reply::Ack { expected: 4 }, 6, 3);
        assert!(!tx.recovery);
    }

    #[test]
    fn a_timeout_sends_what_was_not_selectively_acknowledged_and_enters_recovery() {
        let mut tx = TxState::default();
        on_reply(&mut tx, Reply::Nack { expected: 0, arrived: 2 }, 5, 1);
        let _ = sent_again(&mut tx);
        on_timeout(TransportKind::Irn, &mut tx, 5, 100);
        assert_eq!(sent_again(&mut tx), [0, 1, 3, 4], "2 arrived");
        assert!(tx.recovery);
        let mut fresh = TxState::default();
        on_timeout(TransportKind::Irn, &mut fresh, 3, 100);
        assert!(fresh.recovery && fresh.recovery_end == 3, "a lost tail: recovery from the timeout");
    }

    #[test]
    fn rto_low_for_a_small_window_rto_high_otherwise_and_an_ack_on_every_frame() {
        let irn = TransportParams { kind: TransportKind::Irn, ..TransportParams::default() };
        let tx = TxState::default();
        assert_eq!(irn.timeout_ps(&tx, LOW_WINDOW), 100_000_000);
        assert_eq!(irn.timeout_ps(&tx, LOW_WINDOW + 1), 320_000_000);
        assert_eq!(irn.tick_ps(), 50_000_000);
        assert_eq!(irn.ack_every(), 1);
        let set = TransportParams { rto_us: Some(500.0), rto_low_us: Some(50.0), ..irn };
        assert_eq!((set.timeout_ps(&tx, 1), set.timeout_ps(&tx, 9)), (50_000_000, 500_000_000));
        let roce = TransportParams::default();
        assert_eq!(roce.kind, TransportKind::RoceSr);
        assert_eq!(roce.timeout_ps(&tx, 1), roce.timeout_ps(&tx, 100), "one timeout");
        assert_eq!(roce.rto_ps(), 67_108_864_000, "IBA's 4.096 us x 2^14");
        assert_ne!(roce.ack_every(), 1);
    }

    #[test]
    fn the_receiver_is_roce_srs() {
        let mut rx = RxState::default();
        assert!(on_data(TransportKind::Irn, &mut rx, 0, true, false).reply == Some(Reply::Ack { expected: 1 }));
        let out_of_order = on_data(TransportKind::Irn, &mut rx, 2, false, false);
        assert_eq!(out_of_order.reply, Some(Reply::Nack { expected: 1, arrived: 2 }));
        assert!(!on_data(TransportKind::Irn, &mut rx, 1, false, true).new, "a trimmed frame fails its ICRC");
    }
}
