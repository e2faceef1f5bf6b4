//! The rewrite stage: the header changes forwarding decided for a routed frame, written in
//! one step once every decision that may drop, punt or sample the frame is made, as DPDK's
//! graph keeps `ip4_rewrite` apart from the lookup: the TTL or hop limit less one (the IPv4
//! checksum patched as RFC 1624 says), the DSCP an ACL set, the next hop's MAC as destination
//! and the switch's as source. Classification and the switch's decisions only read the frame,
//! so a frame punted, dropped or sampled on the way is the frame as it came in.
//!
//! What traffic management decides later it writes when it decides it, once each: a CE mark
//! (`tm::ecn`, at enqueue or dequeue, against the queue's depth then) and a trim's cut and
//! remark (`tm::trim`, when the buffer refuses the whole frame).
//!
//! Invariant: only a frame on its way to a queue (or to the worker owning its egress) is
//! written here, once; nothing is written and then undone.

use crate::wire::ethernet::{self, MacAddress};
use crate::wire::{ipv4, ipv6, IpHeader};

/// What forwarding decided to change in a routed frame's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewrite {
    /// The chosen next hop's MAC: the frame's destination.
    pub next_hop: MacAddress,
    /// The DSCP an ACL's `set` gave the frame, if any.
    pub dscp: Option<u8>,
}

impl Rewrite {
    /// Writes the routed frame's headers: `ip` says where its IP header is, `source` is the
    /// switch's MAC. The classifier checked the TTL / hop limit is above 1 and that both
    /// headers are in `frame`.
    ///
    /// Each header is taken as one fixed-size chunk, so its length is checked once and every
    /// field within it is known to be there; a frame too short for one (which classification
    /// rules out) keeps that header as it came.
    #[inline(always)]
    pub fn apply(self, frame: &mut [u8], ip: IpHeader, source: MacAddress) {
        let l3 = usize::from(ip.l3_offset);
        if ip.is_ipv6 {
            if let Some(header) = frame.get_mut(l3..).and_then(<[u8]>::first_chunk_mut::<{ ipv6::HEADER_LEN }>) {
                let mut packet = ipv6::Packet::new_unchecked(header);
                packet.decrement_hop_limit();
                if let Some(dscp) = self.dscp {
                    packet.set_dscp(dscp);
                }
            }
        } else if let Some(header) = frame.get_mut(l3..).and_then(<[u8]>::first_chunk_mut::<{ ipv4::MIN_HEADER_LEN }>) {
            let mut packet = ipv4::Packet::new_unchecked(header);
            packet.decrement_ttl();
            if let Some(dscp) = self.dscp {
                packet.set_dscp(dscp);
            }
        }
        if let Some(header) = frame.first_chunk_mut::<{ ethernet::HEADER_LEN }>() {
            let mut ethernet = ethernet::Frame::new_unchecked(header);
            ethernet.set_destination(self.next_hop);
            ethernet.set_source(source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checksum::ones_complement_sum;

    const SWITCH: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x01]);
    const PEER: MacAddress = MacAddress([0x02, 0, 0, 0, 0x11, 0x00]);

    #[test]
    fn a_routed_ipv4_frame_gets_its_ttl_macs_and_checksum_and_nothing_else() {
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        let original = frame.clone();
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0b10 };
        Rewrite { next_hop: PEER, dscp: None }.apply(&mut frame, ip, SWITCH);
        assert_eq!(&frame[0..6], &PEER.0);
        assert_eq!(&frame[6..12], &SWITCH.0);
        assert_eq!(frame[14 + 8], original[14 + 8] - 1);
        assert_eq!(frame[14 + 1], original[14 + 1], "the TOS byte as it came");
        assert_eq!(ones_complement_sum(&frame[14..34]), 0xffff);
        // Everything past the IP header is untouched (the RoCE ICRC stays valid).
        assert_eq!(&frame[34..], &original[34..]);
        assert_eq!(&frame[12..22], &original[12..22]);
    }

    #[test]
    fn an_acl_dscp_is_written_with_the_ttl_and_keeps_the_ecn_bits() {
        let mut frame = crate::wire::parse::tests::rocev2_frame(false);
        let original = frame.clone();
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: original[15] & 3 };
        Rewrite { next_hop: PEER, dscp: Some(46) }.apply(&mut frame, ip, SWITCH);
        assert_eq!(frame[15], 46 << 2 | (original[15] & 3));
        assert_eq!(frame[14 + 8], original[14 + 8] - 1);
        assert_eq!(ones_complement_sum(&frame[14..34]), 0xffff, "one checksum for both changes");
    }

    #[test]
    fn a_frame_too_short_for_a_header_keeps_that_header_as_it_came() {
        let frame = crate::wire::parse::tests::rocev2_frame(false);
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0 };
        // The IPv4 header cut at its checksum: the MACs are written, the IP bytes are not.
        let mut short = frame[..14 + 12].to_vec();
        Rewrite { next_hop: PEER, dscp: Some(46) }.apply(&mut short, ip, SWITCH);
        assert_eq!((&short[0..6], &short[6..12]), (&PEER.0[..], &SWITCH.0[..]));
        assert_eq!(&short[12..], &frame[12..14 + 12]);
        // Shorter than an Ethernet header: nothing at all.
        let mut stub = frame[..13].to_vec();
        Rewrite { next_hop: PEER, dscp: None }.apply(&mut stub, ip, SWITCH);
        assert_eq!(stub, &frame[..13]);
        let mut stub6 = frame[..13].to_vec();
        Rewrite { next_hop: PEER, dscp: None }.apply(&mut stub6, IpHeader { is_ipv6: true, ..ip }, SWITCH);
        assert_eq!(stub6, &frame[..13]);
    }

    #[test]
    fn a_routed_ipv6_frame_gets_its_hop_limit_and_dscp() {
        let spec = crate::traffic::frames::FrameSpec::rocev2(
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
            7,
        );
        let mut frame = spec.build();
        let original = frame.clone();
        let ip = IpHeader { l3_offset: 14, is_ipv6: true, ecn: 0 };
        Rewrite { next_hop: PEER, dscp: Some(10) }.apply(&mut frame, ip, SWITCH);
        assert_eq!((&frame[0..6], &frame[6..12]), (&PEER.0[..], &SWITCH.0[..]));
        assert_eq!(frame[14 + 7], original[14 + 7] - 1);
        let traffic_class = (u16::from_be_bytes([frame[14], frame[15]]) >> 4) as u8;
        assert_eq!(traffic_class >> 2, 10);
        assert_eq!(traffic_class & 3, {
            let before = (u16::from_be_bytes([original[14], original[15]]) >> 4) as u8;
            before & 3
        });
        assert_eq!(&frame[14 + 8..], &original[14 + 8..], "addresses and payload as they came");
    }
}
