//! Zero-copy views over packet bytes, one protocol per file, in the style of smoltcp's `wire`.
//!
//! The contract every view keeps: `new_checked(buffer)` is `new_unchecked(buffer)` followed by
//! `check_len()`, and once `check_len` has passed no getter panics, whatever the bytes say.
//! Setters only write bytes that `check_len` proved present. Field offsets live in a private
//! `mod field` per protocol so each accessor is one readable line. Errors say what was wrong
//! (the parser maps them all to the `malformed` drop reason; the detail is for logs and tests).

pub mod bth;
pub mod checksum;
pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
pub mod parse;
pub mod pfc;
pub mod scope;
pub mod tcp;
pub mod udp;
pub mod vlan;

/// A byte range of one header field.
pub(crate) type Field = core::ops::Range<usize>;

/// Why bytes are not a valid header of the protocol that was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ends before the header (or the length it declares) does.
    Truncated,
    /// The IP version nibble does not match the EtherType.
    BadVersion,
    /// A header length field is below the protocol's minimum.
    BadHeaderLength,
    /// A total/payload length field disagrees with the header or the buffer.
    BadLength,
    /// The IPv4 header checksum does not verify.
    BadChecksum,
    /// Too many stacked VLAN tags (more than two).
    TooManyTags,
}

pub type Result<T> = core::result::Result<T, WireError>;

/// An IP address as an integer, so lookups need no conversions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpAddress {
    V4(u32),
    V6(u128),
}

/// Where a forwarded frame's IP header is, and its ECN bits on arrival: what the classifier
/// finds, the rewrite writes behind, and traffic management marks (ECN) or cuts (trimming)
/// later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    pub l3_offset: u16,
    pub is_ipv6: bool,
    pub ecn: u8,
}

#[inline(always)]
pub(crate) fn read_u16(data: &[u8], field: Field) -> u16 {
    u16::from_be_bytes([data[field.start], data[field.start + 1]])
}

#[inline(always)]
pub(crate) fn write_u16(data: &mut [u8], field: Field, value: u16) {
    data[field].copy_from_slice(&value.to_be_bytes());
}

#[inline(always)]
pub(crate) fn read_u24(data: &[u8], field: Field) -> u32 {
    u32::from_be_bytes([0, data[field.start], data[field.start + 1], data[field.start + 2]])
}

#[inline(always)]
pub(crate) fn read_u32(data: &[u8], field: Field) -> u32 {
    u32::from_be_bytes([data[field.start], data[field.start + 1], data[field.start + 2], data[field.start + 3]])
}
