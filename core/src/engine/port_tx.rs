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
    if queue.has_room() {
        served.data = switch.transmit_burst(port, now, now.saturating_add(lookahead_ps), |packet| {
            queue.data(packet);
            queue.has_room()
        });
    }
    served
}

/// A virtual link's transmitter: one frame at a time.
#[derive(Debug, Default)]
pub struct OneFrame {
    pub frame: Option<HeapPacket>,
}

impl TxQueue<HeapPacket> for OneFrame {
    fn pfc(&mut self, frame: &[u8]) -> bool {
        self.frame = Some(HeapPacket::new(frame.to_vec()));
        true
    }

    fn data(&mut self, packet: HeapPacket) {
        self.frame = Some(packet);
    }

    fn has_room(&self) -> bool {
        self.frame.is_none()
    }
}

/// The next frame `port` sends on a virtual link at `now`, and the PFC frame's meaning when
/// it is one.
pub fn next_frame(switch: &mut Switch<HeapPacket>, port: usize, now: u64) -> Option<(HeapPacket, Option<Repr>)> {
    let mut link = OneFrame::default();
    let served = serve(switch, port, now, u64::MAX, &mut link);
    link.frame.map(|frame| (frame, served.pfc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rocev2_burst, Leaf};
    use crate::wire::pfc::FRAME_LEN;

    /// A tx queue that takes `room` data frames and, when `takes_pfc`, PFC frames.
    struct Queue {
        pfc: Vec<Vec<u8>>,
        data: Vec<HeapPacket>,
        room: usize,
        takes_pfc: bool,
    }

    impl TxQueue<HeapPacket> for Queue {
        fn pfc(&mut self, frame: &[u8]) -> bool {
            if self.takes_pfc {
                self.pfc.push(frame.to_vec());
            }
            self.takes_pfc
        }
        fn data(&mut self, packet: HeapPacket) {
            self.data.push(packet);
        }
        fn has_room(&self) -> bool {
            self.data.len() < self.room
        }
    }

    /// A switch with `frames` 1000-byte lossless frames queued for `up0` (port 1), 100 Gb/s:
    /// 80 ns of wire each.
    fn queued(frames: u8, xoff_after: Option<u64>) -> Switch<HeapPacket> {
        let qos = xoff_after.map(|bytes| {
            format!(
                "dscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n[qos.pfc]\nxoff_bytes = {bytes}\nxon_bytes = 0\nheadroom_bytes = 1000000"
            )
        });
        queued_with(frames, qos.as_deref())
    }

    /// `queued` with `qos` as the `[qos]` keys (the leaf's own when `None`).
    fn queued_with(frames: u8, qos: Option<&str>) -> Switch<HeapPacket> {
        let mut leaf = Leaf::two_uplinks("tx", "ecmp");
        if let Some(qos) = qos {
            leaf = leaf.qos(qos);
        }
        let mut switch = Switch::new(&leaf.config(), 1);
        for frame in rocev2_burst(frames, |flow, spec| {
            spec.destination = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 9, flow));
            spec.frame_len = 1000;
        }) {
            assert!(matches!(switch.receive(0, HeapPacket::new(frame), 0), crate::switch::Received::Queued { .. }));
        }
        switch
    }

    #[test]
    fn data_goes_while_the_queue_has_room_and_the_link_is_within_the_lookahead() {
        let mut switch = queued(10, None);
        let mut queue = Queue { pfc: Vec::new(), data: Vec::new(), room: 32, takes_pfc: true };
        // 1000 B + 24 B of preamble, gap and FCS at 100 Gb/s: 81.92 ns a frame. A lookahead
        // of 200 ns lets frames go while the link is free within 200 ns: 3 of them.
        let served = serve(&mut switch, 1, 0, 200_000, &mut queue);
        assert_eq!((served.data, queue.data.len(), served.pfc), (3, 3, None));
        assert_eq!(switch.link_free_ps(1), 3 * 81_920);
        // No shaping: the queue's room decides.
        queue.room = 5;
        assert_eq!(serve(&mut switch, 1, 0, u64::MAX, &mut queue).data, 2);
        assert_eq!(switch.stats.ports[1].tx_packets, 5);
    }

    /// A class whose round covers many frames (weight 50: 51,200 bytes, 50 of these frames)
    /// is picked again frame after frame (`Scheduler::picks_again`), and still stops where the
    /// queue's room or the lookahead says: what is left waits, counted nowhere yet.
    #[test]
    fn a_class_picked_again_stops_at_the_room_and_at_the_lookahead() {
        let qos = "dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n[qos.scheduler]\ndwrr = { 0 = 50, 3 = 50 }";
        let mut switch = queued_with(10, Some(qos));
        let mut queue = Queue { pfc: Vec::new(), data: Vec::new(), room: 2, takes_pfc: true };
        assert_eq!(serve(&mut switch, 1, 0, u64::MAX, &mut queue).data, 2);
        assert_eq!((queue.data.len(), switch.stats.ports[1].tx_packets), (2, 2));
        assert_eq!(switch.queue_bytes(1, 3), 8 * 1000, "eight frames wait");
        queue.room = 32;
        // 81.92 ns a frame from 2 x 81.92 ns: free within 300 ns for two more.
        assert_eq!(serve(&mut switch, 1, 0, 300_000, &mut queue).data, 2);
        assert_eq!((queue.data.len(), switch.stats.ports[1].tx_packets), (4, 4));
        assert_eq!(switch.stats.ports[1].queues[3].tx_packets, 4);
        assert_eq!(switch.queue_bytes(1, 3), 6 * 1000);
    }

    #[test]
    fn a_pfc_frame_goes_first_and_one_the_queue_refuses_holds_the_data_back() {
        // XOFF past 2 KB: the host port's group pauses its peer after the third frame.
        let mut switch = queued(4, Some(2048));
        assert!(switch.has_control(0));
        let mut refusing = Queue { pfc: Vec::new(), data: Vec::new(), room: 32, takes_pfc: false };
        // Port 0 has nothing queued, but its PFC frame is pending: refused, it stays pending.
        assert_eq!(serve(&mut switch, 0, 0, u64::MAX, &mut refusing), Served::default());
        assert!(switch.has_control(0));
        assert_eq!(switch.stats.ports[0].pfc_xoff_tx[3], 0, "a refused frame is not counted");
        let mut queue = Queue { pfc: Vec::new(), data: Vec::new(), room: 32, takes_pfc: true };
        let served = serve(&mut switch, 0, 0, u64::MAX, &mut queue);
        let repr = served.pfc.expect("the XOFF");
        assert_eq!((repr.class_enable, repr.times[3]), (1 << 3, 0xffff));
        assert_eq!(queue.pfc.len(), 1);
        assert_eq!(queue.pfc[0].len(), FRAME_LEN);
        assert_eq!(switch.stats.ports[0].pfc_xoff_tx[3], 1);
        assert!(!switch.has_control(0));
        // The PFC frame took its wire time on port 0's link.
        assert!(switch.link_free_ps(0) > 0);
    }

    #[test]
    fn a_virtual_link_sends_one_frame_at_a_time() {
        let mut switch = queued(3, None);
        let (frame, pfc) = next_frame(&mut switch, 1, 0).expect("a frame");
        assert_eq!((frame.len(), pfc), (1000, None));
        assert!(next_frame(&mut switch, 1, 0).is_some());
        assert!(next_frame(&mut switch, 1, 0).is_some());
        assert!(next_frame(&mut switch, 1, 0).is_none());
        let mut link = OneFrame::default();
        assert!(link.has_room() && link.pfc(&[1, 2]) && !link.has_room());
        assert_eq!(link.frame.map(|frame| frame.bytes), Some(vec![1u8, 2]));
    }
}
