//! One port's transmitter, the same in every engine: the port's pending PFC frame first, then
//! the data frames its scheduler picks among the classes not paused, as long as the link has
//! room. Live, "room" is the shaper's lookahead (frames go to the NIC up to one tx burst ahead
//! of their wire time); in virtual time the engine's link model sends one frame at a time.
//!
//! Invariant: a PFC frame the queue cannot take stays pending in the switch and no data passes
//! it; every frame handed out is counted by the switch as sent.

use crate::packet::{HeapPacket, PacketBuf};
use crate::switch::Switch;
use crate::wire::pfc::Repr;

/// Where a port's frames go: a tx burst live, the wire of a virtual link in replay and fabric.
pub trait TxQueue<P> {
    /// Takes a PFC frame (its bytes, from the switch's MAC); false when it cannot now.
    fn pfc(&mut self, frame: &[u8]) -> bool;
    /// Takes a data frame.
    fn data(&mut self, packet: P);
    /// Whether it takes another data frame now.
    fn has_room(&self) -> bool;
}

/// What `serve` handed out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// The PFC frame sent, if any.
    pub pfc: Option<Repr>,
    /// Data frames handed to the queue.
    pub data: u32,
}

/// Serves `port` at `now` into `queue`: its pending PFC frame, then data while the queue has
/// room and the link is free before `now + lookahead_ps` (`u64::MAX`: no shaping, the queue's
/// room alone decides).
#[inline(always)]
pub fn serve<P: PacketBuf>(
    switch: &mut Switch<P>,
    port: usize,
    now: u64,
    lookahead_ps: u64,
    queue: &mut impl TxQueue<P>,
) -> Served {
    let mut served = Served::default();
    if switch.has_control(port) {
        match switch.send_control(port, now, |frame| queue.pfc(frame)) {
            Some(repr) => served.pfc = Some(repr),
            None => return served, // data waits behind the PFC frame
        }
    }
    while queue.has_room() && switch.link_free_ps(port) <= now.saturating_add(lookahead_ps) {
        let Some(packet) = switch.transmit(port, now) else { break };
        queue.data(packet);
        served.data += 1;
    }
    served
}

/// A virtual link's transmitter: one frame at a time.
#[derive(Debug, Default)]
pub struct OneFrame {
    pub frame: Option<Vec<u8>>,
}

impl TxQueue<HeapPacket> for OneFrame {
    fn pfc(&mut self, frame: &[u8]) -> bool {
        self.frame = Some(frame.to_vec());
        true
    }

    fn data(&mut self, packet: HeapPacket) {
        self.frame = Some(packet.bytes);
    }

    fn has_room(&self) -> bool {
        self.frame.is_none()
    }
}

/// The next frame `port` sends on a virtual link at `now`, and the PFC frame's meaning when
/// it is one.
pub fn next_frame(switch: &mut Switch<HeapPacket>, port: usize, now: u64) -> Option<(Vec<u8>, Option<Repr>)> {
    let mut link = OneFrame::default();
    let served = serve(switch, port, now, u64::MAX, &mut link);
    link.frame.map(|frame| (frame, served.pfc))
}
