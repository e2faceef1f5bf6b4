//! One record per frame through traffic management: the buffer holding the frame's bytes, and
//! what every stage after forwarding needs of it (length, ingress port, class, egress port,
//! the worker that charged it, its IP header's place and ECN bits, whether it was marked,
//! trimmed or charged, the group member chosen for it, when it arrived). The switch makes it
//! once, when forwarding has decided the egress port and class, and moves it whole through
//! admission, a shard's ring, the queue and the scheduler; no stage rebuilds it in another
//! shape.
//!
//! Invariant: `len` is the frame's length in bytes whenever the record changes hands (a trim
//! sets both together), so the buffer and the scheduler never read the packet's buffer for
//! it; the record of an mbuf fits in one cache line (a test holds it to 40 bytes).

use crate::wire::IpHeader;

/// The frame was marked CE at enqueue; counted in `ecn_marked` only when it leaves, so the
/// counter equals the CE frames sent, whatever is dropped or flushed after marking.
const MARKED: u8 = 1;
/// The frame was cut by packet trimming (`tm::trim`): counted in `trim_tx` when it leaves.
const TRIMMED: u8 = 2;
/// A lossless frame whose cells `charger` charged to its ingress group: whoever sends or
/// drops it gives them back (as credits when another worker charged them).
const CHARGED: u8 = 4;
/// A PFC or PAUSE frame received on a queue of another worker's port, on its way to the
/// port's owner (`egress` is that port): not data, never queued.
const MAC_CONTROL: u8 = 8;

/// No group member: `Frame::member` of a frame routed to an adjacency, or written by the
/// control plane.
const NO_MEMBER: u32 = u32::MAX;

/// A frame and what traffic management knows of it.
pub struct Frame<P> {
    pub packet: P,
    /// When the frame was received (ps), for the latency histogram.
    pub arrival_ps: u64,
    /// Frame bytes (see the invariant).
    pub len: u32,
    /// The group and member slot chosen for it (`member()`), counted once it is queued.
    member: u32,
    pub ingress: u16,
    pub egress: u16,
    pub ip: IpHeader,
    /// The traffic class, and the egress queue it waits in (a trimmed frame's is the trim
    /// queue).
    pub tc: u8,
    /// The worker that received the frame (0 unsharded): the one that charged it, when
    /// `charged()`.
    pub charger: u8,
    flags: u8,
}

impl<P> Frame<P> {
    /// A data frame of `len` bytes from `ingress` for `egress`'s queue `tc`, received at
    /// `arrival_ps`, not yet charged (`charger` is worker 0's until the switch sets it).
    #[inline(always)]
    pub fn new(packet: P, len: usize, ingress: usize, egress: usize, tc: usize, ip: IpHeader, arrival_ps: u64) -> Self {
        Self {
            packet,
            arrival_ps,
            len: len as u32,
            member: NO_MEMBER,
            ingress: ingress as u16,
            egress: egress as u16,
            ip,
            tc: tc as u8,
            charger: 0,
            flags: 0,
        }
    }

    /// A PFC or PAUSE frame received on `port` at `arrival_ps`, for the port's owner to
    /// apply.
    pub fn mac_control(packet: P, len: usize, port: usize, arrival_ps: u64) -> Self {
        let ip = IpHeader { l3_offset: 0, is_ipv6: false, ecn: 0 };
        let mut frame = Self::new(packet, len, port, port, 0, ip, arrival_ps);
        frame.flags = MAC_CONTROL;
        frame
    }

    #[inline(always)]
    pub fn ingress(&self) -> usize {
        usize::from(self.ingress)
    }

    #[inline(always)]
    pub fn egress(&self) -> usize {
        usize::from(self.egress)
    }

    #[inline(always)]
    pub fn tc(&self) -> usize {
        usize::from(self.tc)
    }

    #[inline(always)]
    pub fn size(&self) -> usize {
        self.len as usize
    }

    /// The group and the member's slot in it that a group route chose.
    #[inline(always)]
    pub fn member(&self) -> Option<(usize, u16)> {
        (self.member != NO_MEMBER).then_some(((self.member >> 16) as usize, self.member as u16))
    }

    /// Records the member chosen; a group past the 65,535th is not counted rather than
    /// counted on another group.
    #[inline(always)]
    pub fn set_member(&mut self, member: Option<(usize, u16)>) {
        self.member = member
            .and_then(|(group, slot)| Some(u32::from(u16::try_from(group).ok()?) << 16 | u32::from(slot)))
            .unwrap_or(NO_MEMBER);
    }

    #[inline(always)]
    pub fn marked(&self) -> bool {
        self.flags & MARKED != 0
    }

    #[inline(always)]
    pub fn trimmed(&self) -> bool {
        self.flags & TRIMMED != 0
    }

    #[inline(always)]
    pub fn charged(&self) -> bool {
        self.flags & CHARGED != 0
    }

    #[inline(always)]
    pub fn is_mac_control(&self) -> bool {
        self.flags & MAC_CONTROL != 0
    }

    /// Marked CE (at enqueue or dequeue).
    #[inline(always)]
    pub fn mark(&mut self, ce: bool) {
        self.flags |= u8::from(ce) * MARKED;
    }

    /// Charged to its ingress group by `charger`.
    #[inline(always)]
    pub fn set_charged(&mut self) {
        self.flags |= CHARGED;
    }

    /// Its cells went back to the group: no longer anyone's to give back.
    #[inline(always)]
    pub fn clear_charged(&mut self) {
        self.flags &= !CHARGED;
    }

    /// Cut to `len` bytes by packet trimming, to wait in queue `queue`.
    pub fn set_trimmed(&mut self, len: usize, queue: usize) {
        self.len = len as u32;
        self.tc = queue as u8;
        self.flags |= TRIMMED;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pointer-sized packet (an mbuf) makes a record of 40 bytes: one cache line.
    #[test]
    fn an_mbuf_sized_record_fits_a_cache_line() {
        assert_eq!(std::mem::size_of::<Frame<std::ptr::NonNull<u8>>>(), 40);
        assert_eq!(std::mem::size_of::<Option<Frame<std::ptr::NonNull<u8>>>>(), 40, "a free slot costs nothing more");
    }

    #[test]
    fn the_member_and_the_flags_come_back_as_set() {
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 2 };
        let mut frame = Frame::new((), 1000, 1, 2, 3, ip, 5);
        assert_eq!(frame.member(), None);
        assert!(!frame.marked() && !frame.trimmed() && !frame.charged() && !frame.is_mac_control());
        for member in [(0, 0), (7, 3), (65_535, 65_534)] {
            frame.set_member(Some(member));
            assert_eq!(frame.member(), Some(member));
        }
        frame.set_member(Some((65_536, 1)));
        assert_eq!(frame.member(), None, "not counted on group 0");
        frame.set_member(None);
        assert_eq!(frame.member(), None);
        frame.mark(false);
        assert!(!frame.marked());
        frame.mark(true);
        frame.set_charged();
        assert!(frame.marked() && frame.charged());
        frame.clear_charged();
        assert!(frame.marked() && !frame.charged());
        frame.set_trimmed(128, 7);
        assert_eq!((frame.size(), frame.tc(), frame.trimmed()), (128, 7, true));
        assert!(Frame::mac_control((), 64, 4, 0).is_mac_control());
        assert_eq!((frame.ingress(), frame.egress(), frame.arrival_ps), (1, 2, 5));
    }
}
