//! `roce-gbn`: a RoCE NIC without out-of-order placement, as the InfiniBand Architecture
//! Specification's reliable connection (vol. 1, 9.7) and RoCEv2 NICs run it.
//!
//! - The receiver accepts only the PSN it expects. A later PSN (a gap: a loss, or spraying's
//!   reordering) is discarded and answered with one NAK (PSN sequence error) carrying the
//!   expected PSN, once per gap: no further NAK until the expected PSN arrives. An earlier
//!   PSN (a duplicate) is discarded and, if it asks, ACKed.
//! - The sender, on a NAK, goes back: everything from the expected PSN is sent again.
//! - A trimmed frame fails the receiver's ICRC check: it is discarded as if lost (a RoCE NIC
//!   knows nothing of trimming), and the gap it leaves is found by the next frame.
//!
//! Invariant: the receiver's `expected` moves one PSN at a time.

use super::{ack_if_asked, acknowledged, Accepted, Reply, RxState, TxState};

pub fn on_data(rx: &mut RxState, psn: u32, ack_req: bool, trimmed: bool) -> Accepted {
    if trimmed {
        return Accepted { new: false, reply: None };
    }
    if psn == rx.expected {
        rx.accept(psn);
        rx.nak_sent = false;
        return Accepted { new: true, reply: ack_if_asked(rx, ack_req) };
    }
    if psn < rx.expected {
        return Accepted { new: false, reply: ack_if_asked(rx, ack_req) };
    }
    let reply = (!rx.nak_sent).then_some(Reply::Nak { expected: rx.expected });
    rx.nak_sent = true;
    Accepted { new: false, reply }
}

pub fn on_reply(tx: &mut TxState, reply: Reply, next_psn: u32, now: u64) {
    acknowledged(tx, reply, now);
    if let Reply::Nak { expected } = reply {
        // Back to the expected PSN: what was being sent again restarts from there.
        tx.resend.clear();
        tx.queue_again(expected, next_psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_nakked_once_and_the_sender_goes_back_to_it() {
        let mut rx = RxState::default();
        assert_eq!(on_data(&mut rx, 0, false, false), Accepted { new: true, reply: None });
        let nak = on_data(&mut rx, 2, false, false);
        assert_eq!(nak, Accepted { new: false, reply: Some(Reply::Nak { expected: 1 }) });
        assert_eq!(on_data(&mut rx, 3, true, false), Accepted { new: false, reply: None }, "one NAK per gap");
        assert_eq!(on_data(&mut rx, 1, true, false), Accepted { new: true, reply: Some(Reply::Ack { expected: 2 }) });
        assert!(!on_data(&mut rx, 1, true, false).new, "a duplicate");
        assert!(!on_data(&mut rx, 2, false, true).new, "trimmed: as lost");
        let mut tx = TxState::default();
        on_reply(&mut tx, Reply::Nak { expected: 1 }, 4, 7);
        assert_eq!((tx.acked, tx.resend.front()), (1, Some(&(1, 4))));
    }
}
