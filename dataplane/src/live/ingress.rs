//! The rx prologue a worker runs on every received frame before the switch takes it: a frame
//! longer than one mbuf (a chain) kept as it is or copied whole (`LongFrames`), and a copy
//! for `--capture`. The switch's own `receive_burst` classifies and forwards it.
//!
//! Invariant: every frame comes out taken, or with the reason it cannot be, so the switch
//! counts it either way (`receive_burst` takes both).

use crate::dpdk::{Mbuf, Mempool};
use crate::drops::DropReason;
use crate::observe::capture::Tap;
use crate::packet::PacketBuf;
use std::sync::Arc;

/// What the rx prologue does with a frame longer than one mbuf, which the driver chains.
///
/// Carried (`copy_into` is `None`): the chain goes through the switch as it arrived; the
/// pipeline reads and rewrites headers only, all in the first segment, and the egress driver
/// sends the chain. No byte of the payload is touched (a RoCE frame of 4 KB at 100G is
/// 12 GB/s that is not copied). A run carries chains when every port's device sends them.
///
/// Copied (`copy_into` is a jumbo pool): the frame is copied into one jumbo mbuf and the
/// chain freed, for runs with a port whose device cannot send a chain.
#[derive(Clone)]
pub struct LongFrames {
    /// The longest frame taken: `switch.mtu` plus Ethernet and two VLAN tags; a longer chain
    /// is dropped as `oversize`.
    pub max_len: usize,
    pub copy_into: Option<Arc<Mempool>>,
}

/// The prologue for one rx burst of one port.
pub(super) struct Ingress<'a> {
    port: usize,
    long_frames: &'a LongFrames,
    /// The capture tap, when this port is captured.
    tap: Option<&'a Tap>,
    /// The burst's capture timestamp.
    tsc: u64,
}

impl<'a> Ingress<'a> {
    #[inline(always)]
    pub fn new(port: usize, long_frames: &'a LongFrames, tap: Option<&'a Tap>, tsc: u64) -> Self {
        Self { port, long_frames, tap: tap.filter(|tap| tap.wants(port)), tsc }
    }

    /// The frame as the switch takes it (captured on its way in), or why it cannot be.
    #[inline(always)]
    pub fn take(&self, mbuf: Mbuf) -> Result<Mbuf, (Mbuf, DropReason)> {
        let mbuf = self.long_frames.take(mbuf)?;
        if let Some(tap) = self.tap {
            tap.copy_head(self.port, false, self.tsc, PacketBuf::data(&mbuf), PacketBuf::len(&mbuf));
        }
        Ok(mbuf)
    }
}

impl LongFrames {
    /// A received frame as the pipeline takes it: in one segment, or a chain when chains are
    /// carried. When it cannot be taken, the frame comes back with why it is dropped: longer
    /// than `max_len` (`oversize`, as the classifier would say), or no jumbo mbuf free to copy
    /// it into (`buffer_full`; the jumbo pool is sized so that it never runs dry).
    #[inline(always)]
    fn take(&self, mbuf: Mbuf) -> Result<Mbuf, (Mbuf, DropReason)> {
        if !mbuf.is_chained() {
            return Ok(mbuf);
        }
        self.take_chain(mbuf)
    }

    #[inline(never)]
    fn take_chain(&self, mbuf: Mbuf) -> Result<Mbuf, (Mbuf, DropReason)> {
        if PacketBuf::len(&mbuf) > self.max_len {
            return Err((mbuf, DropReason::Oversize));
        }
        let Some(pool) = &self.copy_into else { return Ok(mbuf) };
        match mbuf.linearize(pool) {
            Some(single) => Ok(single),
            None => Err((mbuf, DropReason::BufferFull)),
        }
    }
}
