//! IPv6 fixed header (RFC 8200).
//!
//! Invariant: after `check_len`, the 40-byte header and the payload length it declares lie
//! inside the buffer. Extension headers are not walked here; the parser does that.

use super::{read_u16, write_u16, Result, WireError};
use std::net::Ipv6Addr;

mod field {
    use crate::wire::Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const PAYLOAD_LEN: Field = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SOURCE: Field = 8..24;
    pub const DESTINATION: Field = 24..40;
}

pub const HEADER_LEN: usize = 40;

pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `new_checked` for a packet whose first bytes `buffer` holds, with `beyond` more bytes of
    /// the frame past its end (a chained mbuf's first segment).
    #[inline]
    pub fn new_checked_beyond(buffer: T, beyond: usize) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len_beyond(beyond)?;
        Ok(packet)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_len_beyond(0)
    }

    /// `check_len` with `beyond` bytes of the packet past the buffer's end.
    #[inline]
    pub fn check_len_beyond(&self, beyond: usize) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 6 {
            return Err(WireError::BadVersion);
        }
        if data.len() + beyond < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    #[inline]
    pub fn traffic_class(&self) -> u8 {
        let data = self.buffer.as_ref();
        (data[0] << 4) | (data[1] >> 4)
    }

    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    #[inline]
    pub fn flow_label(&self) -> u32 {
        super::read_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    #[inline]
    pub fn source(&self) -> Ipv6Addr {
        let bytes: [u8; 16] = self.buffer.as_ref()[field::SOURCE].try_into().expect("16 bytes");
        Ipv6Addr::from(bytes)
    }

    #[inline]
    pub fn destination(&self) -> Ipv6Addr {
        let bytes: [u8; 16] = self.buffer.as_ref()[field::DESTINATION].try_into().expect("16 bytes");
        Ipv6Addr::from(bytes)
    }

    #[inline]
    /// The payload, or as much of it as the buffer holds (a view made `new_checked_beyond`).
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        &data[HEADER_LEN..(HEADER_LEN + usize::from(self.payload_len())).min(data.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// IPv6 has no header checksum, so a hop-limit decrement is a plain write.
    /// The caller has checked that the hop limit is above 1.
    #[inline]
    pub fn decrement_hop_limit(&mut self) {
        self.buffer.as_mut()[field::HOP_LIMIT] -= 1;
    }

    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let data = self.buffer.as_mut();
        // The traffic class straddles bytes 0 and 1; ECN is its low two bits, i.e. bits 4-5 of byte 1.
        data[1] = (data[1] & !0x30) | ((ecn & 0x03) << 4);
    }

    /// Sets the DSCP, the traffic class's high six bits (keeping its ECN bits).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let data = self.buffer.as_mut();
        // Version (4 bits), then DSCP (6), ECN (2): the DSCP's high four bits are byte 0's
        // low nibble, its low two bits byte 1's top two.
        data[0] = (data[0] & 0xf0) | (dscp >> 2);
        data[1] = (data[1] & 0x3f) | ((dscp & 0x03) << 6);
    }

    /// Sets the payload length (a trimmed packet's).
    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An IPv6 UDP datagram: TC 0x68 (DSCP 26, ECT(0)), flow 0x12345, payload 8, hop limit 64,
    // 2001:db8::1 -> 2001:db8:1::2.
    fn real_packet() -> Vec<u8> {
        let mut bytes = vec![0x66, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0x40];
        bytes.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        bytes.extend_from_slice(&"2001:db8:1::2".parse::<Ipv6Addr>().unwrap().octets());
        bytes.extend_from_slice(&[0x30, 0x39, 0x12, 0xb7, 0x00, 0x08, 0x00, 0x00]);
        bytes
    }

    #[test]
    fn deconstruct() {
        let bytes = real_packet();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0x68);
        assert_eq!(packet.dscp(), 26);
        assert_eq!(packet.ecn(), 0b00);
        assert_eq!(packet.flow_label(), 0x12345);
        assert_eq!(packet.payload_len(), 8);
        assert_eq!(packet.next_header(), 17);
        assert_eq!(packet.hop_limit(), 64);
        assert_eq!(packet.source(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(packet.destination(), "2001:db8:1::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(packet.payload().len(), 8);
    }

    #[test]
    fn rewrites() {
        let mut bytes = real_packet();
        let mut packet = Packet::new_checked(&mut bytes[..]).unwrap();
        packet.decrement_hop_limit();
        packet.set_ecn(0b11);
        assert_eq!(packet.hop_limit(), 63);
        assert_eq!(packet.ecn(), 0b11);
        assert_eq!(packet.dscp(), 26);
        assert_eq!(packet.flow_label(), 0x12345);
    }

    #[test]
    fn short_or_lying_packets_are_rejected() {
        let good = real_packet();
        assert_eq!(Packet::new_checked(&good[..47]).err(), Some(WireError::Truncated));
        let mut bad = good.clone();
        bad[0] = 0x46;
        assert_eq!(Packet::new_checked(&bad[..]).err(), Some(WireError::BadVersion));
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&good[..len]).err(), Some(WireError::Truncated));
        }
    }

    /// The edges: a header with no payload, a payload followed by padding, and (for a chain's
    /// first segment) payload bytes past the buffer counted by `beyond`.
    #[test]
    fn a_packet_may_end_where_its_header_or_its_buffer_does() {
        let good = real_packet();
        let mut header_only = good[..HEADER_LEN].to_vec();
        header_only[4..6].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(Packet::new_checked(&header_only[..]).unwrap().payload(), &[] as &[u8]);
        let mut padded = good.clone();
        padded[4..6].copy_from_slice(&3u16.to_be_bytes());
        padded.resize(good.len().max(HEADER_LEN + 20), 0);
        assert_eq!(Packet::new_checked(&padded[..]).unwrap().payload(), &good[HEADER_LEN..HEADER_LEN + 3]);
        let declared = usize::from(Packet::new_checked(&good[..]).unwrap().payload_len());
        let head = &good[..HEADER_LEN + 1];
        assert_eq!(
            Packet::new_checked_beyond(head, declared - 1).unwrap().payload(),
            &good[HEADER_LEN..HEADER_LEN + 1]
        );
        assert_eq!(Packet::new_checked_beyond(head, declared - 2).err(), Some(WireError::Truncated));
    }
}
