//! InfiniBand Base Transport Header, as carried by RoCEv2 after UDP port 4791.
//!
//! Invariant: after `check_len`, the 12 BTH bytes exist. RoCEv2 also ends in a 4-byte ICRC,
//! which the parser requires after the BTH; the ICRC masks TOS/TTL, so routing rewrites keep it.

use super::{read_u16, read_u24, Result, WireError};

mod field {
    use crate::wire::Field;
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    pub const FECN_BECN: usize = 4;
    pub const DEST_QP: Field = 5..8;
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;
}

pub const HEADER_LEN: usize = 12;
pub const ICRC_LEN: usize = 4;
/// RoCEv2 congestion notification packet.
pub const OPCODE_CNP: u8 = 0x81;

pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn opcode(&self) -> u8 {
        self.buffer.as_ref()[field::OPCODE]
    }

    #[inline]
    pub fn solicited_event(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }

    #[inline]
    pub fn partition_key(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PKEY)
    }

    #[inline]
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x80 != 0
    }

    #[inline]
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x40 != 0
    }

    /// Destination queue pair, 24 bits.
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::DEST_QP)
    }

    #[inline]
    pub fn ack_request(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }

    /// Packet sequence number, 24 bits.
    #[inline]
    pub fn psn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::PSN)
    }

    #[inline]
    pub fn is_cnp(&self) -> bool {
        self.opcode() == OPCODE_CNP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RC SEND-only (opcode 0x04), default P_Key, DestQP 0x000011, AckReq, PSN 5.
    const SEND_ONLY: [u8; 12] = [0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05];
    // CNP (opcode 0x81) to QP 0xabcdef with BECN set.
    const CNP: [u8; 12] = [0x81, 0x00, 0xff, 0xff, 0x40, 0xab, 0xcd, 0xef, 0x00, 0x00, 0x00, 0x00];

    #[test]
    fn deconstruct_send_only() {
        let bth = Header::new_checked(&SEND_ONLY[..]).unwrap();
        assert_eq!(bth.opcode(), 0x04);
        assert!(!bth.solicited_event());
        assert_eq!(bth.partition_key(), 0xffff);
        assert!(!bth.fecn() && !bth.becn());
        assert_eq!(bth.dest_qp(), 0x11);
        assert!(bth.ack_request());
        assert_eq!(bth.psn(), 5);
        assert!(!bth.is_cnp());
    }

    #[test]
    fn deconstruct_cnp() {
        let bth = Header::new_checked(&CNP[..]).unwrap();
        assert!(bth.is_cnp());
        assert!(bth.becn());
        assert_eq!(bth.dest_qp(), 0xabcdef);
    }

    #[test]
    fn short_bth_is_rejected() {
        assert_eq!(Header::new_checked(&CNP[..11]).err(), Some(WireError::Truncated));
    }
}
