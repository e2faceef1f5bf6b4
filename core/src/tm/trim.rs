//! Packet trimming's cut: a frame the buffer refused becomes a short frame that still
//! parses, so that its receiver learns of the loss at once (`config::trim` says when; the
//! switch queues the result).
//!
//! What a receiver sees: the frame cut to the trim size (never into its headers: Ethernet,
//! VLAN tags, IP, and UDP with the RoCEv2 BTH, or TCP, are kept whole, so a size below them
//! keeps exactly the headers); the IP DSCP set to the trim DSCP, ECN bits kept; the IPv4
//! total length and header checksum, the IPv6 payload length and the UDP length rewritten to
//! the cut. The UDP checksum is zeroed over IPv4 ("no checksum", legal there, and RoCEv2
//! senders send zero anyway); over IPv6, where zero is not allowed, it is left as it was,
//! so a receiver that checks it drops the frame. The RoCE ICRC is neither recomputed nor
//! kept (it was in the cut tail), as Spectrum and Tomahawk ASICs trim: a RoCE receiver
//! recognises a trimmed frame by its DSCP, never by its ICRC. A frame no longer than the
//! trim size keeps its length and is remarked only (SONiC: "the original full packet will be
//! transmitted").
//!
//! Not trimmed (dropped as before): IPv4 fragments (a fragment's tail has no L4 header to
//! keep), RoCE CNPs (as on Spectrum: a congestion notification is not a loss signal), and
//! frames whose headers do not all lie in their first segment.
//!
//! Invariant: the cut frame's IP and UDP lengths equal its new length less the bytes before
//! them, and its IPv4 header checksum verifies.

use crate::packet::PacketBuf;
use crate::wire::bth::{self, OPCODE_CNP};
use crate::wire::ipv4::{self, protocol};
use crate::wire::{ipv6, udp, IpHeader};

/// Cuts `packet`, whose IP header `ip` locates, to `size` bytes (or its headers, if longer)
/// and remarks it to `dscp`; returns its new length, or `None` when it may not be trimmed
/// (it is left as it was).
pub fn trim<P: PacketBuf>(packet: &mut P, ip: IpHeader, size: usize, dscp: u8) -> Option<usize> {
    let len = packet.len();
    let l3 = usize::from(ip.l3_offset);
    let head = packet.data_mut();
    let (l4, l4_protocol) = if ip.is_ipv6 {
        let header = head.get(l3..l3 + ipv6::HEADER_LEN)?;
        (l3 + ipv6::HEADER_LEN, ipv6::Packet::new_unchecked(header).next_header())
    } else {
        let header = head.get(l3..l3 + ipv4::MIN_HEADER_LEN)?;
        let packet = ipv4::Packet::new_unchecked(header);
        if packet.is_fragment() {
            return None;
        }
        (l3 + packet.header_len(), packet.protocol())
    };
    let headers_end = match l4_protocol {
        protocol::UDP => {
            let datagram = udp::Datagram::new_unchecked(head.get(l4..l4 + udp::HEADER_LEN)?);
            if datagram.dst_port() == udp::ROCEV2_PORT {
                let opcode = *head.get(l4 + udp::HEADER_LEN)?;
                if opcode == OPCODE_CNP {
                    return None;
                }
                l4 + udp::HEADER_LEN + bth::HEADER_LEN
            } else {
                l4 + udp::HEADER_LEN
            }
        }
        // The data offset, in 32-bit words, is the high nibble of byte 12.
        protocol::TCP => l4 + usize::from(*head.get(l4 + 12)? >> 4) * 4,
        _ => l4,
    };
    if headers_end > head.len() {
        return None;
    }
    let cut = size.max(headers_end).min(len);
    let cut_lengths = cut < len;
    if ip.is_ipv6 {
        let mut header = ipv6::Packet::new_unchecked(&mut head[l3..]);
        header.set_dscp(dscp);
        if cut_lengths {
            header.set_payload_len((cut - l4) as u16);
        }
    } else {
        let mut header = ipv4::Packet::new_unchecked(&mut head[l3..]);
        header.set_dscp(dscp);
        if cut_lengths {
            header.set_total_len((cut - l3) as u16);
        }
    }
    if cut_lengths && l4_protocol == protocol::UDP {
        let mut datagram = udp::Datagram::new_unchecked(&mut head[l4..]);
        datagram.set_len((cut - l4) as u16);
        if !ip.is_ipv6 {
            datagram.set_checksum(0);
        }
    }
    if cut_lengths {
        packet.truncate(cut);
    }
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapPacket;
    use crate::traffic::frames::{FrameSpec, Transport};
    use crate::wire::parse::{parse, Payload};

    fn roce(source: &str, destination: &str, len: usize, opcode: u8) -> FrameSpec {
        let mut spec = FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), 7);
        spec.frame_len = len;
        spec.dscp = 10;
        spec.ecn = 0b10;
        spec.transport = Transport::Roce { source: 0xc123, opcode, dest_qp: 7, psn: 0x1234 };
        spec
    }

    fn ip_of(frame: &[u8]) -> IpHeader {
        match parse(frame).unwrap().payload {
            Payload::Ip(ip) => IpHeader {
                l3_offset: ip.l3_offset as u16,
                is_ipv6: matches!(ip.destination, crate::wire::IpAddress::V6(_)),
                ecn: ip.ecn,
            },
            other => panic!("not IP: {other:?}"),
        }
    }

    #[test]
    fn an_ipv4_roce_frame_is_cut_to_size_with_valid_lengths_and_checksum() {
        let original = roce("10.0.1.9", "10.0.0.2", 4150, 0x01).build();
        let mut packet = HeapPacket::new(original.clone());
        assert_eq!(trim(&mut packet, ip_of(&original), 128, 48), Some(128));
        let bytes = &packet.bytes;
        assert_eq!(bytes.len(), 128);
        assert_eq!(&bytes[..14], &original[..14], "Ethernet untouched");
        let header = ipv4::Packet::new_checked(&bytes[14..]).unwrap();
        assert_eq!((header.dscp(), header.ecn(), header.total_len()), (48, 0b10, 114));
        assert!(header.verify_checksum());
        let datagram = udp::Datagram::new_checked(&bytes[34..]).unwrap();
        assert_eq!(
            (datagram.src_port(), datagram.dst_port(), datagram.len(), datagram.checksum()),
            (0xc123, 4791, 94, 0)
        );
        assert_eq!(&bytes[42..54], &original[42..54], "the BTH kept");
        assert_eq!(&bytes[54..], &original[54..128], "payload up to the cut");
        // The whole frame still parses, to the same flow.
        assert_eq!(ip_of(bytes).l3_offset, 14);
    }

    #[test]
    fn an_ipv6_frame_behind_a_vlan_tag_keeps_its_headers_below_a_small_size() {
        let mut spec = roce("2001:db8:3::9", "2001:db8::2", 1024, 0x04);
        spec.vlan = Some((3, 100));
        let original = spec.build();
        let mut packet = HeapPacket::new(original.clone());
        let headers = 18 + 40 + 8 + 12;
        assert_eq!(trim(&mut packet, ip_of(&original), 64, 46), Some(headers), "never into the BTH");
        let header = ipv6::Packet::new_checked(&packet.bytes[18..]).unwrap();
        assert_eq!((header.dscp(), header.ecn(), header.payload_len()), (46, 0b10, 20));
        assert_eq!(header.flow_label(), ipv6::Packet::new_unchecked(&original[18..]).flow_label());
        let datagram = udp::Datagram::new_checked(&packet.bytes[58..]).unwrap();
        assert_eq!(datagram.len(), 20);
        assert_eq!(datagram.checksum(), udp::Datagram::new_unchecked(&original[58..]).checksum(), "left over IPv6");
    }

    #[test]
    fn a_short_frame_is_remarked_only_and_cnps_and_fragments_are_not_trimmed() {
        let original = roce("10.0.1.9", "10.0.0.2", 100, 0x04).build();
        let mut packet = HeapPacket::new(original.clone());
        assert_eq!(trim(&mut packet, ip_of(&original), 128, 48), Some(100));
        let header = ipv4::Packet::new_checked(&packet.bytes[14..]).unwrap();
        assert_eq!((header.dscp(), header.total_len()), (48, 86));
        assert!(header.verify_checksum());
        assert_eq!(&packet.bytes[34..], &original[34..], "UDP untouched");

        let cnp = roce("10.0.1.9", "10.0.0.2", 300, OPCODE_CNP).build();
        let mut packet = HeapPacket::new(cnp.clone());
        assert_eq!(trim(&mut packet, ip_of(&cnp), 128, 48), None);
        assert_eq!(packet.bytes, cnp, "left as it was");

        let mut fragment = roce("10.0.1.9", "10.0.0.2", 1000, 0x04).build();
        let ip = ip_of(&fragment);
        fragment[14 + 6] = 0x20; // more fragments
        let mut packet = HeapPacket::new(fragment.clone());
        assert_eq!(trim(&mut packet, ip, 128, 48), None);
    }

    #[test]
    fn a_frame_held_as_headers_is_cut_within_its_declared_bytes() {
        let (headers, beyond) = roce("10.0.1.9", "10.0.0.2", 4150, 0x01).build_headers();
        let ip = ip_of(&roce("10.0.1.9", "10.0.0.2", 4150, 0x01).build());
        let mut packet = HeapPacket::headers(headers.clone(), beyond);
        assert_eq!(trim(&mut packet, ip, 256, 48), Some(256));
        assert_eq!((packet.bytes.len(), packet.beyond, packet.len()), (headers.len(), 256 - headers.len(), 256));
    }

    #[test]
    fn a_tcp_segment_keeps_its_options() {
        let mut spec = FrameSpec::rocev2("10.0.1.9".parse().unwrap(), "10.0.0.2".parse().unwrap(), 1);
        spec.frame_len = 1500;
        spec.transport = Transport::Tcp { source: 40000, destination: 5201 };
        let original = spec.build();
        let mut packet = HeapPacket::new(original.clone());
        assert_eq!(trim(&mut packet, ip_of(&original), 64, 8), Some(64));
        let header = ipv4::Packet::new_checked(&packet.bytes[14..]).unwrap();
        assert_eq!((header.dscp(), header.total_len()), (8, 50));
        assert!(header.verify_checksum());
    }
}
