//! IEEE 802.1Qbb priority flow control frames (MAC control, EtherType 0x8808, opcode 0x0101).
//! The view also reads the time of a classic 802.3x PAUSE (opcode 0x0001), which the parser
//! reports apart: raceway's ports run PFC and do not obey PAUSE (see `wire::parse`).
//!
//! Invariant: after `check_len`, the opcode, the class-enable vector and all eight pause
//! times exist. `Repr::emit` writes a complete minimum-size frame (60 bytes before the FCS that
//! the NIC appends: 64 on the wire).

use super::ethernet::{self, EtherType, MacAddress};
use super::{read_u16, write_u16, Result, WireError};

mod field {
    use crate::wire::Field;
    pub const OPCODE: Field = 0..2;
    pub const CLASS_ENABLE: Field = 2..4;
    pub const TIMES: usize = 4;
    pub const END: usize = 20;
}

pub const OPCODE_PFC: u16 = 0x0101;
pub const OPCODE_PAUSE: u16 = 0x0001;
/// The MAC control multicast address every PAUSE/PFC frame goes to.
pub const DESTINATION: MacAddress = MacAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
/// Frame length without FCS: 64 bytes on the wire.
pub const FRAME_LEN: usize = 60;
/// One pause quantum is 512 bit times.
pub const QUANTUM_BITS: u64 = 512;

/// A view of the MAC control payload (after the EtherType).
pub struct Payload<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Payload<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let payload = Self::new_unchecked(buffer);
        payload.check_len()?;
        Ok(payload)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < field::END {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    pub fn opcode(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::OPCODE)
    }

    /// Bit n set: the time for priority n applies. Only the low 8 bits are defined.
    pub fn class_enable(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CLASS_ENABLE)
    }

    /// Pause time of `priority` (0-7) in quanta.
    pub fn time(&self, priority: usize) -> u16 {
        let start = field::TIMES + 2 * (priority & 7);
        read_u16(self.buffer.as_ref(), start..start + 2)
    }

    /// The single pause time of an 802.3x PAUSE frame, right after its opcode.
    pub fn pause_time(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CLASS_ENABLE)
    }
}

/// A PFC frame's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Bit n set: `times[n]` applies to priority n.
    pub class_enable: u8,
    /// Pause time per priority in quanta; 0 resumes.
    pub times: [u16; 8],
}

impl Repr {
    /// Reads a MAC control payload; `None` unless its opcode is PFC's.
    pub fn parse<T: AsRef<[u8]>>(payload: &Payload<T>) -> Option<Self> {
        if payload.opcode() != OPCODE_PFC {
            return None;
        }
        let mut times = [0u16; 8];
        for (priority, time) in times.iter_mut().enumerate() {
            *time = payload.time(priority);
        }
        Some(Self { class_enable: payload.class_enable() as u8, times })
    }

    /// The priorities the frame names, each with its pause time (0 resumes), lowest first.
    pub fn named(&self) -> impl Iterator<Item = (usize, u16)> + '_ {
        (0..8)
            .filter(|priority| self.class_enable & (1 << priority) != 0)
            .map(|priority| (priority, self.times[priority]))
    }

    /// Writes a complete 60-byte frame from `source` into `frame[..FRAME_LEN]`.
    pub fn emit(&self, source: MacAddress, frame: &mut [u8]) {
        let frame = &mut frame[..FRAME_LEN];
        frame.fill(0);
        let mut ethernet = ethernet::Frame::new_unchecked(&mut *frame);
        ethernet.set_destination(DESTINATION);
        ethernet.set_source(source);
        ethernet.set_ethertype(EtherType::MacControl);
        let payload = &mut frame[ethernet::HEADER_LEN..];
        write_u16(payload, field::OPCODE, OPCODE_PFC);
        write_u16(payload, field::CLASS_ENABLE, u16::from(self.class_enable));
        for (priority, time) in self.times.iter().enumerate() {
            let start = field::TIMES + 2 * priority;
            write_u16(payload, start..start + 2, *time);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_lists_only_the_enabled_priorities_with_their_times() {
        let repr = Repr { class_enable: 0b1000_1001, times: [5, 1, 1, 0, 1, 1, 1, 0xffff] };
        assert_eq!(repr.named().collect::<Vec<_>>(), [(0, 5), (3, 0), (7, 0xffff)]);
        assert_eq!(Repr::default().named().count(), 0);
    }

    // XOFF for priority 3 (time 0xffff) from 02:00:00:00:00:01, as a switch sends it.
    fn xoff_priority_3() -> Vec<u8> {
        let mut bytes = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x08];
        bytes.extend_from_slice(&[0x01, 0x01, 0x00, 0x08]);
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
        bytes.resize(FRAME_LEN, 0);
        bytes
    }

    #[test]
    fn deconstruct_and_parse() {
        let bytes = xoff_priority_3();
        let payload = Payload::new_checked(&bytes[14..]).unwrap();
        assert_eq!(payload.opcode(), OPCODE_PFC);
        assert_eq!(payload.class_enable(), 0x0008);
        assert_eq!(payload.time(3), 0xffff);
        assert_eq!(payload.time(4), 0);
        let repr = Repr::parse(&payload).unwrap();
        assert_eq!(repr.class_enable, 0x08);
        assert_eq!(repr.times[3], 0xffff);
    }

    #[test]
    fn emit_matches_the_wire_bytes() {
        let mut frame = [0xa5u8; 64];
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        Repr { class_enable: 0x08, times }.emit(MacAddress([2, 0, 0, 0, 0, 1]), &mut frame);
        assert_eq!(&frame[..FRAME_LEN], &xoff_priority_3()[..]);
        assert_eq!(&frame[FRAME_LEN..], &[0xa5; 4]);
    }

    #[test]
    fn classic_pause_is_not_pfc_and_has_one_time() {
        let mut payload = [0u8; 42];
        payload[..4].copy_from_slice(&[0x00, 0x01, 0x01, 0x00]);
        let view = Payload::new_checked(&payload[..]).unwrap();
        assert_eq!(Repr::parse(&view), None);
        assert_eq!((view.opcode(), view.pause_time()), (OPCODE_PAUSE, 0x0100));
    }

    #[test]
    fn other_opcodes_and_short_payloads() {
        let mut payload = [0u8; 20];
        payload[1] = 0x02; // GATE (EPON), not flow control
        assert_eq!(Repr::parse(&Payload::new_checked(&payload[..]).unwrap()), None);
        assert_eq!(Payload::new_checked(&payload[..19]).err(), Some(WireError::Truncated));
    }
}
