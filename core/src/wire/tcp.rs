//! TCP header (RFC 9293): the ports and the header length, which is all a switch needs.
//!
//! Invariant: after `check_len`, the header (data offset x 4 bytes, at least 20) exists.

use super::{read_u16, Result, WireError};

mod field {
    use crate::wire::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
}

pub const MIN_HEADER_LEN: usize = 20;

pub struct Segment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Segment<T> {
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let segment = Self::new_unchecked(buffer);
        segment.check_len()?;
        Ok(segment)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.header_len() < MIN_HEADER_LEN {
            return Err(WireError::BadHeaderLength);
        }
        if self.header_len() > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A SYN from port 51234 to 443 with a 32-byte header (MSS, SACK-permitted, window scale).
    const SYN: [u8; 32] = [
        0xc8, 0x22, 0x01, 0xbb, 0x6b, 0x8b, 0x45, 0x67, 0x00, 0x00, 0x00, 0x00, 0x80, 0x02, 0xfa, 0xf0, 0x00, 0x00,
        0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x03, 0x03, 0x08, 0x01, 0x01, 0x04, 0x02,
    ];

    #[test]
    fn deconstruct() {
        let segment = Segment::new_checked(&SYN[..]).unwrap();
        assert_eq!(segment.src_port(), 51234);
        assert_eq!(segment.dst_port(), 443);
        assert_eq!(segment.header_len(), 32);
        assert_eq!(segment.flags(), 0x02);
    }

    #[test]
    fn header_length_is_checked() {
        assert_eq!(Segment::new_checked(&SYN[..24]).err(), Some(WireError::Truncated));
        let mut bad = SYN;
        bad[12] = 0x40;
        assert_eq!(Segment::new_checked(&bad[..]).err(), Some(WireError::BadHeaderLength));
    }
}
