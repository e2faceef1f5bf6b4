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

use crate::units::TRAFFIC_CLASSES;
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

/// The group member a group route chose for a frame, counted once the frame is queued: the
/// group's index and the member's slot in one word, or none (a frame routed to an adjacency,
/// or written by the control plane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member(u32);

impl Member {
    pub const NONE: Self = Self(u32::MAX);

    /// Slot `slot` of group `group`; a group past the 65,535th is not counted rather than
    /// counted on another group.
    #[inline(always)]
    pub fn new(group: usize, slot: u16) -> Self {
        match u16::try_from(group) {
            Ok(group) => Self(u32::from(group) << 16 | u32::from(slot)),
            Err(_) => Self::NONE,
        }
    }

    /// The group and the member's slot in it.
    #[inline(always)]
    pub fn get(self) -> Option<(usize, u16)> {
        (self != Self::NONE).then_some(((self.0 >> 16) as usize, self.0 as u16))
    }
}

/// A frame and what traffic management knows of it.
pub struct Frame<P> {
    pub packet: P,
    /// When the frame was received (ps), for the latency histogram.
    pub arrival_ps: u64,
    /// Frame bytes (see the invariant).
    pub len: u32,
    pub member: Member,
    pub ingress: u16,
    pub egress: u16,
    pub ip: IpHeader,
    /// The traffic class, and the egress queue it waits in (a trimmed frame's is the trim
    /// queue).
    pub tc: u8,
    /// The worker that charged the frame to its ingress group (`charged()`; 0 unsharded).
    pub charger: u8,
    flags: u8,
}

impl<P> Frame<P> {
    /// A data frame of `len` bytes from `ingress` for `egress`'s queue `tc`, received at
    /// `arrival_ps`, not yet charged.
    #[inline(always)]
    pub fn new(packet: P, len: usize, ingress: usize, egress: usize, tc: usize, ip: IpHeader, arrival_ps: u64) -> Self {
        Self {
            packet,
            arrival_ps,
            len: len as u32,
            member: Member::NONE,
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

    /// The same record, rebuilt field by field: what a caller hands to a function it does not
    /// inline, so that the compiler keeps the caller's own record in registers (a record whose
    /// place is passed to a call lives in memory on every path).
    #[inline(always)]
    pub fn relocated(self) -> Self {
        let Self { packet, arrival_ps, len, member, ingress, egress, ip, tc, charger, flags } = self;
        Self { packet, arrival_ps, len, member, ingress, egress, ip, tc, charger, flags }
    }

    #[inline(always)]
    pub fn ingress(&self) -> usize {
        usize::from(self.ingress)
    }

    #[inline(always)]
    pub fn egress(&self) -> usize {
        usize::from(self.egress)
    }

    /// The class: below `TRAFFIC_CLASSES` always (the config's maps hold no other), which
    /// the modulo tells the compiler, so the per-class arrays it indexes need no bounds check.
    #[inline(always)]
    pub fn tc(&self) -> usize {
        usize::from(self.tc) % TRAFFIC_CLASSES
    }

    #[inline(always)]
    pub fn size(&self) -> usize {
        self.len as usize
    }

    #[inline(always)]
    pub fn marked(&self) -> bool {
        self.flags & MARKED != 0
    }

    #[inline(always)]
    pub fn trimmed(&self) -> bool {
        self.flags & TRIMMED != 0
    }

    /// Either of the two: one test for the common frame, which is neither.
    #[inline(always)]
    pub fn marked_or_trimmed(&self) -> bool {
        self.flags & (MARKED | TRIMMED) != 0
    }

    #[inline(always)]
    pub fn charged(&self) -> bool {
        self.flags & CHARGED != 0
    }

    #[inline(always)]
    pub fn is_mac_control(&self) -> bool {
        self.flags & MAC_CONTROL != 0
    }

    /// Marks the frame CE (ECN decided it, at enqueue or dequeue): its IP header's ECN bits
    /// (the IPv4 checksum patched), its record's, and the flag `ecn_marked` counts.
    #[inline]
    pub fn mark_ce(&mut self)
    where
        P: crate::packet::PacketBuf,
    {
        crate::tm::ecn::set_ce(self.packet.data_mut(), usize::from(self.ip.l3_offset), self.ip.is_ipv6);
        self.ip.ecn = crate::tm::ecn::CE;
        self.flags |= MARKED;
    }

    /// Charged to its ingress group by worker `charger`.
    #[inline(always)]
    pub fn set_charged(&mut self, charger: u8) {
        self.charger = charger;
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
    fn marking_ce_writes_the_header_and_the_record() {
        let mut spec =
            crate::traffic::frames::FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.ecn = 0b10;
        let bytes = spec.build();
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0b10 };
        let mut frame = Frame::new(crate::packet::HeapPacket::new(bytes.clone()), bytes.len(), 0, 1, 3, ip, 0);
        frame.mark_ce();
        assert!(frame.marked() && frame.marked_or_trimmed() && !frame.trimmed());
        assert_eq!(frame.ip.ecn, crate::tm::ecn::CE);
        let written = &frame.packet.bytes;
        assert_eq!(written[15] & 3, 0b11);
        assert_eq!(written[15] >> 2, bytes[15] >> 2, "the DSCP kept");
        assert_eq!(crate::wire::checksum::ones_complement_sum(&written[14..34]), 0xffff);
        // Only the TOS byte and the checksum (bytes 24-25) changed.
        assert_eq!((&written[..15], &written[16..24], &written[26..]), (&bytes[..15], &bytes[16..24], &bytes[26..]));
    }

    #[test]
    fn the_member_and_the_flags_come_back_as_set() {
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 2 };
        let fresh = || Frame::new((), 1000, 1, 2, 3, ip, 5);
        let flags = |frame: &Frame<()>| {
            (frame.marked(), frame.trimmed(), frame.marked_or_trimmed(), frame.charged(), frame.is_mac_control())
        };
        let frame = fresh();
        assert_eq!(frame.member, Member::NONE);
        assert_eq!(flags(&frame), (false, false, false, false, false), "a new record says nothing");
        assert_eq!((frame.ingress(), frame.egress(), frame.tc(), frame.size(), frame.arrival_ps), (1, 2, 3, 1000, 5));
        for member in [(0, 0), (7, 3), (65_535, 65_534)] {
            assert_eq!(Member::new(member.0, member.1).get(), Some(member));
        }
        assert_eq!(Member::new(65_536, 1), Member::NONE, "not counted on group 0");
        assert_eq!(Member::NONE.get(), None);
        // Each flag alone, then together: each reads back as set, and no other.
        let mut marked = fresh();
        marked.flags |= MARKED;
        assert_eq!(flags(&marked), (true, false, true, false, false));
        let mut trimmed = fresh();
        trimmed.set_trimmed(128, 7);
        assert_eq!(flags(&trimmed), (false, true, true, false, false));
        assert_eq!((trimmed.size(), trimmed.tc()), (128, 7));
        let mut charged = fresh();
        charged.set_charged(2);
        assert_eq!(flags(&charged), (false, false, false, true, false));
        assert_eq!(charged.charger, 2);
        charged.flags |= MARKED;
        charged.set_trimmed(128, 7);
        assert_eq!(flags(&charged), (true, true, true, true, false));
        charged.clear_charged();
        assert_eq!(flags(&charged), (true, true, true, false, false));
        let control = Frame::mac_control((), 64, 4, 9);
        assert_eq!(flags(&control), (false, false, false, false, true));
        assert_eq!((control.ingress(), control.egress(), control.arrival_ps), (4, 4, 9));
    }
}
