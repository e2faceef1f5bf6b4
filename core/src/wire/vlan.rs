//! IEEE 802.1Q VLAN tag (the 4 bytes after the outer EtherType 0x8100 / 0x88a8): PCP, DEI,
//! VLAN id, and the EtherType of what follows.
//!
//! Invariant: after `check_len`, the 4 tag bytes exist.

use super::ethernet::EtherType;
use super::{read_u16, Result, WireError};

mod field {
    use crate::wire::Field;
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: usize = 4;
}

pub const TAG_LEN: usize = field::PAYLOAD;

pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let tag = Self::new_unchecked(buffer);
        tag.check_len()?;
        Ok(tag)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < TAG_LEN {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Priority code point, 0-7.
    #[inline]
    pub fn pcp(&self) -> u8 {
        (read_u16(self.buffer.as_ref(), field::TCI) >> 13) as u8
    }

    #[inline]
    pub fn drop_eligible(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::TCI) & 0x1000 != 0
    }

    #[inline]
    pub fn vlan_id(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TCI) & 0x0fff
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct_priority_3_vlan_100_ipv4() {
        // TCI 0x6064: PCP 3, DEI 0, VID 100; inner EtherType IPv4.
        let tag = Tag::new_checked(&[0x60u8, 0x64, 0x08, 0x00][..]).unwrap();
        assert_eq!(tag.pcp(), 3);
        assert!(!tag.drop_eligible());
        assert_eq!(tag.vlan_id(), 100);
        assert_eq!(tag.ethertype(), EtherType::Ipv4);
    }

    #[test]
    fn deconstruct_dei_and_top_priority() {
        let tag = Tag::new_checked(&[0xff_u8, 0xff, 0x86, 0xdd][..]).unwrap();
        assert_eq!(tag.pcp(), 7);
        assert!(tag.drop_eligible());
        assert_eq!(tag.vlan_id(), 0xfff);
        assert_eq!(tag.ethertype(), EtherType::Ipv6);
    }

    #[test]
    fn short_tag_is_rejected() {
        assert_eq!(Tag::new_checked(&[0x60u8, 0x64, 0x08][..]).err(), Some(WireError::Truncated));
    }
}
