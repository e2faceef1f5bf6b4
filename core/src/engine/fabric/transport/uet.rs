//! `uet-like`: selective repeat with out-of-order placement and Ultra Ethernet's fast loss
//! signal, packet trimming. It follows the loss-recovery rules Ultra Ethernet 1.0 gives its
//! reliable unordered delivery (a NACK for a trimmed packet, retransmission of exactly that
//! packet, a timeout for the rest); it is not a UET implementation: no packet delivery
//! contexts, no SACK bitmaps on the wire, no NSCC (DCQCN paces instead).
//!
//! - The receiver places any PSN it has not yet accepted and does not NACK reordering
//!   (spraying reorders; UET leaves loss to trimming and timeouts), ACKing frames that ask
//!   and frames that fill a gap.
//! - A trimmed frame (its DSCP is no longer the data's) is answered at once with a NACK for
//!   its PSN; the sender sends exactly that PSN again, ahead of new frames.
//! - A frame dropped outright (a trim queue full, a port down) is recovered by the timeout.
//!
//! Invariant: only a trimmed frame causes a retransmission before a timeout.

use super::{ack_if_asked, acknowledged, Accepted, Reply, RxState, TxState};

pub fn on_data(rx: &mut RxState, psn: u32, ack_req: bool, trimmed: bool) -> Accepted {
    if trimmed {
        if rx.has(psn) {
            return Accepted { new: false, reply: None };
        }
        return Accepted { new: false, reply: Some(Reply::Trimmed { expected: rx.expected, psn }) };
    }
    if rx.has(psn) {
        return Accepted { new: false, reply: ack_if_asked(rx, ack_req) };
    }
    let before = rx.expected;
    rx.accept(psn);
    // A frame that fills a gap is ACKed whether it asks or not: the frame that asked may
    // have come before it.
    Accepted { new: true, reply: ack_if_asked(rx, ack_req || rx.expected > before + 1) }
}

pub fn on_reply(tx: &mut TxState, reply: Reply, _next_psn: u32, now: u64) {
    acknowledged(tx, reply, now);
    if let Reply::Trimmed { psn, .. } = reply {
        tx.queue_again(psn, psn + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordering_is_silent_and_a_trimmed_frame_is_sent_again_alone() {
        let mut rx = RxState::default();
        assert_eq!(on_data(&mut rx, 2, false, false), Accepted { new: true, reply: None });
        let trimmed = on_data(&mut rx, 0, false, true);
        assert_eq!(trimmed, Accepted { new: false, reply: Some(Reply::Trimmed { expected: 0, psn: 0 }) });
        assert!(on_data(&mut rx, 1, false, false).new);
        let mut tx = TxState::default();
        on_reply(&mut tx, trimmed.reply.unwrap(), 3, 5);
        assert_eq!((tx.next_again(), tx.next_again()), (Some(0), None));
        assert_eq!(on_data(&mut rx, 0, true, false), Accepted { new: true, reply: Some(Reply::Ack { expected: 3 }) });
    }
}
