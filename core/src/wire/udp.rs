//! UDP header (RFC 768).
//!
//! Invariant: after `check_len`, the 8 header bytes exist and the length field lies between 8
//! and the buffer's length.

use super::{read_u16, write_u16, Result, WireError};

mod field {
    use crate::wire::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

pub const HEADER_LEN: usize = 8;
/// The IANA port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;

pub struct Datagram<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Datagram<T> {
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let datagram = Self::new_unchecked(buffer);
        datagram.check_len()?;
        Ok(datagram)
    }

    /// `new_checked` for a datagram whose first bytes `buffer` holds, with `beyond` more bytes
    /// of the frame past its end (a chained mbuf's first segment).
    #[inline]
    pub fn new_checked_beyond(buffer: T, beyond: usize) -> Result<Self> {
        let datagram = Self::new_unchecked(buffer);
        datagram.check_len_beyond(beyond)?;
        Ok(datagram)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_len_beyond(0)
    }

    /// `check_len` with `beyond` bytes of the datagram past the buffer's end.
    #[inline]
    pub fn check_len_beyond(&self, beyond: usize) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let declared = usize::from(self.len());
        if declared < HEADER_LEN {
            return Err(WireError::BadLength);
        }
        if declared > len + beyond {
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

    /// The length field: header plus payload, in bytes.
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    #[inline]
    /// The payload, or as much of it as the buffer holds (a view made `new_checked_beyond`).
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        &data[HEADER_LEN..usize::from(self.len()).min(data.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Datagram<T> {
    /// Sets the length field (a trimmed datagram's).
    #[inline]
    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    #[inline]
    pub fn set_checksum(&mut self, checksum: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RoCEv2: source port 0xc000 (the NIC's entropy), destination 4791, length 8 + 12 + 4.
    const BYTES: [u8; 24] = [
        0xc0, 0x00, 0x12, 0xb7, 0x00, 0x18, 0x00, 0x00, 0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00,
        0x00, 0x05, 0xaa, 0xbb, 0xcc, 0xdd,
    ];

    #[test]
    fn deconstruct() {
        let datagram = Datagram::new_checked(&BYTES[..]).unwrap();
        assert_eq!(datagram.src_port(), 0xc000);
        assert_eq!(datagram.dst_port(), ROCEV2_PORT);
        assert_eq!(datagram.len(), 24);
        assert_eq!(datagram.checksum(), 0);
        assert_eq!(datagram.payload().len(), 16);
    }

    #[test]
    fn lengths_are_checked() {
        assert_eq!(Datagram::new_checked(&BYTES[..7]).err(), Some(WireError::Truncated));
        assert_eq!(Datagram::new_checked(&BYTES[..20]).err(), Some(WireError::Truncated));
        let mut bad = BYTES;
        bad[5] = 4;
        assert_eq!(Datagram::new_checked(&bad[..]).err(), Some(WireError::BadLength));
    }
}
