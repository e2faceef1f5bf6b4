//! `roce-sr`: selective repeat with out-of-order placement, as IRN (Mittal et al.,
//! "Revisiting Network Support for RDMA", SIGCOMM 2018) proposes for RoCE NICs.
//!
//! - The receiver places any PSN it has not yet accepted. An out-of-order PSN is answered with
//!   a NACK carrying the expected PSN (the cumulative ACK) and the PSN that arrived, as IRN's
//!   receiver NACKs every out-of-order packet; an in-order one is ACKed if it asks or fills a
//!   gap (the frame that asked may have come before it).
//! - The sender, on a NACK, enters recovery: the PSNs from the expected one up to the one
//!   that arrived, not already sent again in this recovery, are sent again, ahead of new
//!   frames. Spraying's reordering makes such NACKs too, and their retransmissions are
//!   spurious (IRN assumes in-order paths): the receiver discards the duplicates.
//! - A trimmed frame fails the ICRC check: discarded as if lost.
//!
//! The sender keeps IRN's SACK bitmap: a PSN a NACK said arrived is never sent again. Left
//! out of IRN: BDP-FC's cap on frames in flight (DCQCN paces instead).
//!
//! Invariant: a PSN is queued again at most once per recovery (`recovered_to`).

use super::{ack_if_asked, acknowledged, Accepted, Reply, RxState, TxState};

pub fn on_data(rx: &mut RxState, psn: u32, ack_req: bool, trimmed: bool) -> Accepted {
    if trimmed || rx.has(psn) {
        let reply = if trimmed { None } else { ack_if_asked(rx, ack_req) };
        return Accepted { new: false, reply };
    }
    let (in_order, before) = (psn == rx.expected, rx.expected);
    rx.accept(psn);
    let reply = if in_order {
        // A frame that fills a gap is ACKed whether it asks or not: the frame that asked may
        // have come before it.
        ack_if_asked(rx, ack_req || rx.expected > before + 1)
    } else {
        Some(Reply::Nack { expected: rx.expected, arrived: psn })
    };
    Accepted { new: true, reply }
}

pub fn on_reply(tx: &mut TxState, reply: Reply, _next_psn: u32, now: u64) {
    acknowledged(tx, reply, now);
    if let Reply::Nack { expected, arrived } = reply {
        tx.sack(arrived);
        let from = expected.max(tx.recovered_to);
        tx.queue_again(from, arrived);
        tx.recovered_to = tx.recovered_to.max(arrived + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_frames_are_placed_and_nacked_and_the_gap_is_sent_again_once() {
        let mut rx = RxState::default();
        on_data(&mut rx, 0, false, false);
        let first = on_data(&mut rx, 3, false, false);
        assert_eq!(first, Accepted { new: true, reply: Some(Reply::Nack { expected: 1, arrived: 3 }) });
        let second = on_data(&mut rx, 4, false, false);
        assert_eq!(second.reply, Some(Reply::Nack { expected: 1, arrived: 4 }));
        assert!(on_data(&mut rx, 1, false, false).new);
        assert!(on_data(&mut rx, 2, true, false) == Accepted { new: true, reply: Some(Reply::Ack { expected: 5 }) });
        let mut tx = TxState::default();
        on_reply(&mut tx, first.reply.unwrap(), 5, 1);
        on_reply(&mut tx, second.reply.unwrap(), 5, 2);
        let again: Vec<u32> = std::iter::from_fn(|| tx.next_again()).collect();
        assert_eq!(again, [1, 2], "3 arrived; 1 and 2 once each");
    }
}
