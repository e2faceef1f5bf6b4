//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Invariant: `incremental_update` on a valid checksum gives exactly what a full recomputation
//! would give, including the ±0 corner that RFC 1624 fixed in RFC 1141's formula, so a router
//! never has to sum a whole header per packet.

/// One's-complement sum of 16-bit big-endian words, folded to 16 bits (not yet inverted).
#[inline]
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for word in &mut chunks {
        sum += u32::from(u16::from_be_bytes([word[0], word[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    fold(sum)
}

/// The checksum field value for `data` (with its own checksum field zeroed).
#[inline]
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), for one 16-bit word changing from `old` to `new`.
#[inline]
pub fn incremental_update(checksum: u16, old: u16, new: u16) -> u16 {
    let sum = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    !fold(sum)
}

#[inline(always)]
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    // An IPv4 header from a real capture (192.168.0.1 -> 192.168.0.199, UDP, TTL 64).
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];

    #[test]
    fn full_checksum_of_a_valid_header_verifies() {
        assert_eq!(ones_complement_sum(&HEADER), 0xffff);
        let mut zeroed = HEADER;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(internet_checksum(&zeroed), 0xb861);
    }

    #[test]
    fn incremental_update_matches_recomputation_for_every_ttl() {
        for ttl in 1..=255u8 {
            let mut header = HEADER;
            header[8] = ttl;
            header[10] = 0;
            header[11] = 0;
            let before = internet_checksum(&header);
            let old_word = u16::from_be_bytes([ttl, 0x11]);
            header[8] = ttl - 1;
            let expected = internet_checksum(&header);
            let new_word = u16::from_be_bytes([ttl - 1, 0x11]);
            assert_eq!(incremental_update(before, old_word, new_word), expected, "ttl {ttl}");
        }
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(ones_complement_sum(&[0x01]), 0x0100);
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x02]), 0x0002);
    }
}
