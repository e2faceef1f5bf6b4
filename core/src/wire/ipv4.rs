//! IPv4 header (RFC 791), options included, with the in-place rewrites a router makes.
//!
//! Invariant: after `check_len`, the header (IHL x 4 bytes, at least 20) and the whole datagram
//! the total-length field declares lie inside the buffer, so every getter and the TTL/TOS
//! setters are in bounds. Setters keep the header checksum valid by RFC 1624 incremental update.

use super::checksum;
use super::{read_u16, write_u16, Result, WireError};
use std::net::Ipv4Addr;

mod field {
    use crate::wire::Field;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Field = 2..4;
    pub const FLAGS_FRAGMENT: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SOURCE: Field = 12..16;
    pub const DESTINATION: Field = 16..20;
}

pub const MIN_HEADER_LEN: usize = 20;

pub mod protocol {
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
}

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
    /// the frame past its end (a chained mbuf's first segment): the header must be in
    /// `buffer`, the total length within `buffer.len() + beyond`.
    #[inline]
    pub fn new_checked_beyond(buffer: T, beyond: usize) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len_beyond(beyond)?;
        Ok(packet)
    }

    /// Checks version, IHL and total length against each other and the buffer. Trailing bytes
    /// past the total length (Ethernet padding) are allowed.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_len_beyond(0)
    }

    /// `check_len` with `beyond` bytes of the packet past the buffer's end.
    #[inline]
    pub fn check_len_beyond(&self, beyond: usize) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 4 {
            return Err(WireError::BadVersion);
        }
        let header_len = self.header_len();
        if header_len < MIN_HEADER_LEN {
            return Err(WireError::BadHeaderLength);
        }
        if data.len() < header_len {
            return Err(WireError::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(WireError::BadLength);
        }
        if data.len() + beyond < total_len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL x 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP, the upper 6 bits of the TOS byte.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] >> 2
    }

    /// ECN, the lower 2 bits of the TOS byte.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] & 0x03
    }

    #[inline]
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    /// True for any fragment but a whole datagram: more-fragments set or a non-zero offset.
    /// Only the first fragment carries the L4 header, so flows hash on addresses alone.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAGMENT) & 0x3fff != 0
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    #[inline]
    pub fn source(&self) -> Ipv4Addr {
        Ipv4Addr::from(super::read_u32(self.buffer.as_ref(), field::SOURCE))
    }

    #[inline]
    pub fn destination(&self) -> Ipv4Addr {
        Ipv4Addr::from(super::read_u32(self.buffer.as_ref(), field::DESTINATION))
    }

    /// True when the header (options included) sums to 0xffff.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::sums_to_all_ones(&self.buffer.as_ref()[..self.header_len()])
    }

    /// The datagram's payload, up to the total length (Ethernet padding excluded).
    #[inline]
    /// The payload, or as much of it as the buffer holds (a view made `new_checked_beyond`).
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        &data[self.header_len()..usize::from(self.total_len()).min(data.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Decrements the TTL by one and patches the checksum incrementally. The caller has
    /// checked that the TTL is above 1.
    ///
    /// The TTL is the high byte of its 16-bit word, so the word falls by 0x0100 and the
    /// checksum rises by 0x0100 in one's complement: one add and its end-around carry, with
    /// 0xffff becoming 0 as RFC 1624's eqn. 3 makes it (Linux's `ip_decrease_ttl`). The test
    /// `decrementing_the_ttl_patches_as_rfc_1624_for_every_checksum` holds it to eqn. 3.
    #[inline(always)]
    pub fn decrement_ttl(&mut self) {
        let data = self.buffer.as_mut();
        data[field::TTL] -= 1;
        let sum = u32::from(read_u16(data, field::CHECKSUM)) + 0x0100;
        write_u16(data, field::CHECKSUM, (sum + u32::from(sum >= 0xffff)) as u16);
    }

    /// Sets the ECN bits and patches the checksum incrementally (RFC 1624).
    #[inline(always)]
    pub fn set_ecn(&mut self, ecn: u8) {
        self.patch_word(0, |header| header[field::TOS] = (header[field::TOS] & !0x03) | (ecn & 0x03));
    }

    /// Sets the DSCP (keeping the ECN bits) and patches the checksum incrementally (RFC 1624).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        self.patch_word(0, |header| header[field::TOS] = (dscp << 2) | (header[field::TOS] & 0x03));
    }

    /// Sets the total length (a trimmed datagram's) and patches the checksum incrementally.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        self.patch_word(field::TOTAL_LEN.start, |header| header[field::TOTAL_LEN].copy_from_slice(&len.to_be_bytes()));
    }

    /// Changes the 16-bit word at `at` (even, before the checksum) with `change`, and patches
    /// the checksum by RFC 1624's eqn. 3. The header's first 12 bytes are taken once, so
    /// the reads and writes inside need no bounds checks of their own (a CE mark is on every
    /// frame of a congested queue).
    #[inline(always)]
    fn patch_word(&mut self, at: usize, change: impl FnOnce(&mut [u8; 12])) {
        let header = self.buffer.as_mut().first_chunk_mut::<12>().expect("check_len keeps the header in the buffer");
        let word = |header: &[u8; 12]| u16::from_be_bytes([header[at], header[at + 1]]);
        let old = word(header);
        change(header);
        let new = word(header);
        let checksum = u16::from_be_bytes([header[10], header[11]]);
        let sum = checksum::incremental_update(checksum, old, new);
        header[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
    }

    /// Recomputes the header checksum from scratch (for building packets, not per packet).
    #[inline]
    pub fn fill_checksum(&mut self) {
        let header_len = self.header_len();
        let data = self.buffer.as_mut();
        write_u16(data, field::CHECKSUM, 0);
        let sum = checksum::internet_checksum(&data[..header_len]);
        write_u16(data, field::CHECKSUM, sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, TTL 64, total length 0x73: header of a real capture,
    // followed by the payload the total length covers.
    fn real_datagram() -> Vec<u8> {
        let mut bytes = vec![
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        bytes.resize(0x73, 0x5a);
        bytes
    }

    #[test]
    fn deconstruct() {
        let bytes = real_datagram();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.dscp(), 0);
        assert_eq!(packet.ecn(), 0);
        assert_eq!(packet.total_len(), 0x73);
        assert_eq!(packet.ttl(), 64);
        assert_eq!(packet.protocol(), protocol::UDP);
        assert_eq!(packet.checksum(), 0xb861);
        assert_eq!(packet.source(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(packet.destination(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(packet.verify_checksum());
        assert_eq!(packet.payload().len(), 0x73 - 20);
    }

    #[test]
    fn ttl_decrement_keeps_the_checksum_valid() {
        let mut bytes = real_datagram();
        let mut packet = Packet::new_checked(&mut bytes[..]).unwrap();
        packet.decrement_ttl();
        assert_eq!(packet.ttl(), 63);
        assert!(packet.verify_checksum());
        let incremental = packet.checksum();
        packet.fill_checksum();
        assert_eq!(packet.checksum(), incremental);
    }

    /// Every checksum a header may carry (valid or not: the decrement only patches it), at
    /// the TTLs' edges and in between: the one-add form gives what RFC 1624's eqn. 3 gives,
    /// 0 where a fold would leave 0xffff included (a checksum of 0xfeff).
    #[test]
    fn decrementing_the_ttl_patches_as_rfc_1624_for_every_checksum() {
        for ttl in [2u8, 3, 64, 128, 255] {
            for checksum in 0..=u16::MAX {
                let mut bytes = real_datagram();
                bytes[8] = ttl;
                bytes[10..12].copy_from_slice(&checksum.to_be_bytes());
                let mut packet = Packet::new_unchecked(&mut bytes[..]);
                packet.decrement_ttl();
                let expected = checksum::incremental_update(
                    checksum,
                    u16::from_be_bytes([ttl, protocol::UDP]),
                    u16::from_be_bytes([ttl - 1, protocol::UDP]),
                );
                assert_eq!(
                    (packet.ttl(), packet.checksum()),
                    (ttl - 1, expected),
                    "TTL {ttl}, checksum {checksum:#06x}"
                );
            }
        }
    }

    #[test]
    fn ecn_rewrite_keeps_the_checksum_valid() {
        let mut bytes = real_datagram();
        bytes[1] = (26 << 2) | 0b10; // DSCP 26, ECT(0)
        Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        let mut packet = Packet::new_checked(&mut bytes[..]).unwrap();
        packet.set_ecn(0b11);
        assert_eq!(packet.dscp(), 26);
        assert_eq!(packet.ecn(), 0b11);
        assert!(packet.verify_checksum());
    }

    #[test]
    fn options_are_part_of_the_header() {
        // IHL 6: one 4-byte option (NOP NOP NOP EOL), total length 24 + 4 payload bytes.
        let mut bytes = vec![
            0x46, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x00, 0x00, 0x40, 0x06, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00,
            0x01, 0x02, 0x01, 0x01, 0x01, 0x00, 0xde, 0xad, 0xbe, 0xef,
        ];
        Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.header_len(), 24);
        assert_eq!(packet.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert!(packet.verify_checksum());
    }

    #[test]
    fn lies_are_rejected() {
        let good = real_datagram();
        let mut bad = good.clone();
        bad[0] = 0x44; // IHL 4
        assert_eq!(Packet::new_checked(&bad[..]).err(), Some(WireError::BadHeaderLength));
        let mut bad = good.clone();
        bad[0] = 0x4f; // IHL 15: a 60-byte header still inside the 0x73-byte datagram
        assert!(Packet::new_checked(&bad[..]).is_ok());
        let mut bad = good.clone();
        bad[0] = 0x65;
        assert_eq!(Packet::new_checked(&bad[..]).err(), Some(WireError::BadVersion));
        let mut bad = good.clone();
        bad[2..4].copy_from_slice(&0x0200u16.to_be_bytes()); // total length past the end
        assert_eq!(Packet::new_checked(&bad[..]).err(), Some(WireError::Truncated));
        let mut bad = good.clone();
        bad[2..4].copy_from_slice(&0x0010u16.to_be_bytes()); // total length below the header
        assert_eq!(Packet::new_checked(&bad[..]).err(), Some(WireError::BadLength));
        for len in 0..20 {
            assert_eq!(Packet::new_checked(&good[..len]).err(), Some(WireError::Truncated));
        }
    }

    /// The edges: a header with no payload, a buffer that ends with the header or the
    /// datagram, and (for a chain's first segment) bytes past the buffer counted by `beyond`.
    #[test]
    fn a_datagram_may_end_exactly_where_its_header_or_its_buffer_does() {
        let mut header_only = real_datagram()[..20].to_vec();
        header_only[2..4].copy_from_slice(&20u16.to_be_bytes());
        let packet = Packet::new_checked(&header_only[..]).unwrap();
        assert_eq!(packet.payload(), &[] as &[u8]);
        let mut options_only = [0u8; 24];
        options_only[..20].copy_from_slice(&header_only);
        options_only[0] = 0x46;
        options_only[2..4].copy_from_slice(&24u16.to_be_bytes());
        assert!(Packet::new_checked(&options_only[..]).is_ok(), "IHL 6 in a 24-byte buffer");
        assert_eq!(Packet::new_checked(&options_only[..23]).err(), Some(WireError::Truncated));
        let good = real_datagram();
        assert!(Packet::new_checked(&good[..]).is_ok(), "the buffer ends with the datagram");
        assert_eq!(Packet::new_checked(&good[..0x72]).err(), Some(WireError::Truncated));
        // The first 40 bytes of the datagram, with the rest beyond: whole, or one byte short.
        assert_eq!(Packet::new_checked_beyond(&good[..40], 0x73 - 40).unwrap().payload(), &good[20..40]);
        assert_eq!(Packet::new_checked_beyond(&good[..40], 0x72 - 40).err(), Some(WireError::Truncated));
        // The header itself must be in the buffer, whatever lies beyond.
        assert_eq!(Packet::new_checked_beyond(&options_only[..22], 100).err(), Some(WireError::Truncated));
    }
}
