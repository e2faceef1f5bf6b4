//! The rx prologue both worker models run on every received frame: the whole frame in one
//! segment (`whole_frame`), a copy for `--capture`, and its classification.
//!
//! Invariant: every frame comes out with a verdict, and a frame the prologue cannot take
//! comes out as `Verdict::Drop` with its reason, so the one place that counts verdicts (the
//! switch's `receive_verdict`, or the pipelined RX worker's drop count) counts it too.

use crate::dpdk::{Mbuf, Mempool};
use crate::drops::DropReason;
use crate::observe::capture::Tap;
use crate::packet::PacketBuf;
use crate::pipeline::classify::{Classifier, Verdict};

/// The prologue for one rx burst of one port.
pub(super) struct Ingress<'a> {
    port: usize,
    jumbo: Option<&'a Mempool>,
    /// The capture tap, when this port is captured.
    tap: Option<&'a Tap>,
    /// The burst's capture timestamp.
    tsc: u64,
}

impl<'a> Ingress<'a> {
    #[inline(always)]
    pub fn new(port: usize, jumbo: Option<&'a Mempool>, tap: Option<&'a Tap>, tsc: u64) -> Self {
        Self { port, jumbo, tap: tap.filter(|tap| tap.wants(port)), tsc }
    }

    /// The frame, whole, with its verdict.
    #[inline(always)]
    pub fn classify(&self, mbuf: Mbuf, classifier: &mut Classifier) -> (Mbuf, Verdict) {
        match whole_frame(mbuf, self.jumbo) {
            Ok(mut mbuf) => {
                if let Some(tap) = self.tap {
                    tap.copy(self.port, false, self.tsc, PacketBuf::data(&mbuf));
                }
                let verdict = classifier.classify(PacketBuf::data_mut(&mut mbuf));
                (mbuf, verdict)
            }
            Err((mbuf, reason)) => (mbuf, Verdict::Drop(reason)),
        }
    }
}

/// A received frame as the pipeline takes it: in one segment. A driver chains a frame longer
/// than an mbuf's room; it is copied into a jumbo mbuf (the chain is freed). When it cannot
/// be, the frame comes back with why it is dropped: longer than the jumbo room, which holds
/// `switch.mtu` plus Ethernet and two VLAN tags (`oversize`, as the classifier would say),
/// or no jumbo mbuf free (`buffer_full`; the jumbo pool is sized so that it never runs dry).
#[inline(always)]
fn whole_frame(mbuf: Mbuf, jumbo: Option<&Mempool>) -> Result<Mbuf, (Mbuf, DropReason)> {
    if !mbuf.is_chained() {
        return Ok(mbuf);
    }
    linearized(mbuf, jumbo)
}

#[inline(never)]
fn linearized(mbuf: Mbuf, jumbo: Option<&Mempool>) -> Result<Mbuf, (Mbuf, DropReason)> {
    let Some(pool) = jumbo.filter(|pool| PacketBuf::len(&mbuf) <= pool.frame_room()) else {
        return Err((mbuf, DropReason::Oversize));
    };
    match mbuf.linearize(pool) {
        Some(single) => Ok(single),
        None => Err((mbuf, DropReason::BufferFull)),
    }
}
