//! A content digest for inputs a result depends on (a flow file, and later a fabric's whole
//! input): 64-bit FNV-1a over the bytes, written as 16 hex digits. It names what ran, so two
//! results can be told to come from the same input; it is not a defence against anyone.
//!
//! Invariant: the digest is a pure function of the bytes, the same on every machine and Rust
//! version (unlike `std`'s `DefaultHasher`, whose algorithm may change).

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_from(OFFSET_BASIS, bytes)
}

/// FNV-1a of what `hash` was the digest of, followed by `bytes`: a digest taken in pieces.
pub fn fnv1a64_from(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
}

/// `fnv1a64` as 16 lowercase hex digits.
pub fn hex(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a64(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_gives_the_published_test_vectors() {
        // From the FNV reference's test suite.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
        assert_eq!(hex(b"a"), "af63dc4c8601ec8c");
        assert_eq!(fnv1a64_from(fnv1a64(b"foo"), b"bar"), fnv1a64(b"foobar"), "in pieces");
    }
}
