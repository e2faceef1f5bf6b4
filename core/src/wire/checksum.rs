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

/// Whether `data`, a header with its checksum field, sums to all ones: a header that checks
/// (RFC 1071). Sums 32-bit words in the machine's byte order into 64 bits: the one's
/// complement sum is the same in either byte order up to a swap of its two bytes (RFC 1071
/// §2(B)), which leaves all ones as it is, and word width does not change it (the carries wrap
/// around either way). An IPv4 header's five words take five adds, not the ten byte swaps and
/// adds of `ones_complement_sum`.
///
/// Nor does it fold: one's complement addition is addition modulo 0xffff (2^16 and 2^32 are
/// 1 there), with a nonzero multiple of 0xffff folding to 0xffff and only zero to 0. So the
/// header checks when its plain sum is a nonzero multiple of 0xffff: a multiply by the
/// divisor's reciprocal, where the folds were a chain of dependent adds and a loop.
#[inline(always)]
pub fn sums_to_all_ones(data: &[u8]) -> bool {
    let word = |bytes: &[u8]| u64::from(u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
    let mut sum: u64 = 0;
    if let Ok(header) = <&[u8; 20]>::try_from(data) {
        // The header without options, nearly every one: five adds, no loop.
        sum = word(&header[0..4]) + word(&header[4..8]) + word(&header[8..12]) + word(&header[12..16]);
        sum += word(&header[16..20]);
    } else {
        let mut words = data.chunks_exact(4);
        for bytes in &mut words {
            sum += word(bytes);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            // In the machine's order, as the words above: the odd bytes' partner is zero.
            let mut last = [0u8; 4];
            last[..rest.len()].copy_from_slice(rest);
            sum += word(&last);
        }
    }
    sum != 0 && sum.is_multiple_of(0xffff)
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
    fn a_header_sums_to_all_ones_in_either_byte_order() {
        assert!(sums_to_all_ones(&HEADER));
        let mut corrupted = HEADER;
        corrupted[11] ^= 1;
        assert!(!sums_to_all_ones(&corrupted));
        assert!(!sums_to_all_ones(&[0; 20]), "all zeros is one's complement's other zero");
        assert!(sums_to_all_ones(&[0xff; 20]));
        assert!(sums_to_all_ones(&[0xff, 0xff]), "a remainder of two");
        assert!(!sums_to_all_ones(&[0xff, 0xff, 0xff]), "an odd byte pads as ones_complement_sum's does");
    }

    proptest::proptest! {
        /// Every length and content, including sums that carry past 32 bits (60 bytes of
        /// 0xff) and the odd byte: the same answer as the byte-swapping sum.
        #[test]
        fn all_ones_agrees_with_the_sum(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), fix in proptest::prelude::any::<bool>()) {
            let mut data = data;
            if fix && data.len() >= 2 {
                // Make it check: the last word takes the sum's complement.
                let end = data.len() & !1;
                data[end - 2..end].copy_from_slice(&[0, 0]);
                let sum = internet_checksum(&data);
                data[end - 2..end].copy_from_slice(&sum.to_be_bytes());
            }
            proptest::prop_assert_eq!(sums_to_all_ones(&data), ones_complement_sum(&data) == 0xffff);
        }
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(ones_complement_sum(&[0x01]), 0x0100);
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x02]), 0x0002);
    }
}
