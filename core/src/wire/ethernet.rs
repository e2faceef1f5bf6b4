//! Ethernet II frame header: destination, source, EtherType.
//!
//! Invariant: after `check_len`, the 14 header bytes exist; the payload may be empty.

use super::{read_u16, write_u16, Result, WireError};

mod field {
    use crate::wire::Field;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: usize = 14;
}

pub const HEADER_LEN: usize = field::PAYLOAD;

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddress(pub [u8; 6]);

impl MacAddress {
    /// Parses `aa:bb:cc:dd:ee:ff` (also accepts `-` separators).
    #[inline]
    pub fn parse(text: &str) -> Option<Self> {
        let mut bytes = [0u8; 6];
        let mut parts = text.split([':', '-']);
        for byte in &mut bytes {
            let part = parts.next()?;
            if part.len() != 2 {
                return None;
            }
            *byte = u8::from_str_radix(part, 16).ok()?;
        }
        parts.next().is_none().then_some(Self(bytes))
    }
}

impl core::fmt::Display for MacAddress {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

/// EtherType values the switch acts on; anything else is kept as `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtherType {
    Ipv4,
    Ipv6,
    /// 802.1Q customer VLAN tag.
    Vlan,
    /// 802.1ad service VLAN tag (outer tag of a QinQ stack).
    ServiceVlan,
    /// MAC control (PAUSE and PFC).
    MacControl,
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => Self::Ipv4,
            0x86dd => Self::Ipv6,
            0x8100 => Self::Vlan,
            0x88a8 => Self::ServiceVlan,
            0x8808 => Self::MacControl,
            other => Self::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::ServiceVlan => 0x88a8,
            EtherType::MacControl => 0x8808,
            EtherType::Unknown(other) => other,
        }
    }
}

/// A view of an Ethernet II frame.
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn destination(&self) -> MacAddress {
        MacAddress(self.buffer.as_ref()[field::DESTINATION].try_into().expect("6 bytes"))
    }

    #[inline]
    pub fn source(&self) -> MacAddress {
        MacAddress(self.buffer.as_ref()[field::SOURCE].try_into().expect("6 bytes"))
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        self.ethertype_number().into()
    }

    /// The EtherType as the number on the wire, for a comparison that needs no name.
    #[inline]
    pub fn ethertype_number(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    #[inline]
    pub fn set_destination(&mut self, mac: MacAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&mac.0);
    }

    #[inline]
    pub fn set_source(&mut self, mac: MacAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&mac.0);
    }

    #[inline]
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, ethertype.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The first 16 bytes of a real IPv4 frame: broadcast destination, Intel OUI source.
    const BYTES: [u8; 16] =
        [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x1b, 0x21, 0x3a, 0x4c, 0x5d, 0x08, 0x00, 0x45, 0x00];

    #[test]
    fn deconstruct() {
        let frame = Frame::new_checked(&BYTES[..]).unwrap();
        assert_eq!(frame.destination(), MacAddress([0xff; 6]));
        assert_eq!(frame.source(), MacAddress([0x00, 0x1b, 0x21, 0x3a, 0x4c, 0x5d]));
        assert_eq!(frame.ethertype(), EtherType::Ipv4);
        assert_eq!(frame.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 16];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        frame.set_destination(MacAddress([0xff; 6]));
        frame.set_source(MacAddress([0x00, 0x1b, 0x21, 0x3a, 0x4c, 0x5d]));
        frame.set_ethertype(EtherType::Ipv4);
        assert_eq!(&bytes[..14], &BYTES[..14]);
    }

    #[test]
    fn short_frames_are_rejected() {
        for len in 0..HEADER_LEN {
            assert_eq!(Frame::new_checked(&BYTES[..len]).err(), Some(WireError::Truncated));
        }
    }

    #[test]
    fn mac_text_round_trips() {
        let mac = MacAddress::parse("02:00:00:00:10:0a").unwrap();
        assert_eq!(mac.to_string(), "02:00:00:00:10:0a");
        assert!(MacAddress::parse("02:00:00:00:10").is_none());
        assert!(MacAddress::parse("02:00:00:00:10:0a:01").is_none());
        assert!(MacAddress::parse("zz:00:00:00:10:0a").is_none());
    }

    #[test]
    fn unknown_ethertypes_are_kept() {
        assert_eq!(EtherType::from(0x88cc), EtherType::Unknown(0x88cc));
        assert_eq!(u16::from(EtherType::Unknown(0x88cc)), 0x88cc);
    }
}
