//! A RoCEv2 host NIC in the fabric: its queue pairs' send state (DCQCN rate, next message,
//! PSN), what it has received, the frames it builds (data as RC SEND first/middle/last/only,
//! CNPs), and what it reads from the frames it receives.
//!
//! Loss recovery (ACKs, NAKs, retransmission) follows the fabric's transport (`transport`).
//!
//! Invariant: a queue pair's PSNs number its frames consecutively over all its messages, and
//! every data frame carries its message's place at the receiver as its tag (a CNP or ACK its
//! queue pair's place at the sender), so a receiver counts a frame to its message whatever
//! order frames arrive in, once (its transport says whether a PSN is new), without reading
//! the sender's state or any table of the whole workload.

use super::dcqcn::RateControl;
use super::transport::{Reply, RxState, TxState};
use crate::packet::HeapPacket;
use crate::traffic::frames::{FrameSpec, Transport};
use crate::wire::bth::OPCODE_CNP;
use crate::wire::ethernet::MacAddress;
use crate::wire::parse::{parse_beyond, Payload};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

/// DSCP of data and of CNPs (what RoCE deployments use: lossless data, strict CNPs).
pub const DATA_DSCP: u8 = 26;
pub const CNP_DSCP: u8 = 48;

/// A queue pair's send side, held by its sender's NIC.
#[derive(Debug, Clone)]
pub struct QueuePair {
    /// Its number in the workload (the BTH's destination QP is this plus one).
    pub id: usize,
    pub receiver: usize,
    /// Released messages waiting to be sent, in order.
    pub queue: VecDeque<usize>,
    /// The message being sent.
    pub current: Option<Sending>,
    pub next_psn: u32,
    /// Earliest time the rate limiter lets the next frame go (ps).
    pub next_send_ps: u64,
    pub rate: RateControl,
    /// Loss recovery: what is acknowledged, what to send again.
    pub tx: TxState,
}

impl QueuePair {
    pub fn new(id: usize, receiver: usize, line_mbps: f64) -> Self {
        Self {
            id,
            receiver,
            queue: VecDeque::new(),
            current: None,
            next_psn: 0,
            next_send_ps: 0,
            rate: RateControl::new(line_mbps),
            tx: TxState::default(),
        }
    }

    /// Whether it has a frame to send, new or again.
    pub fn has_data(&self) -> bool {
        self.current.is_some() || !self.queue.is_empty() || !self.tx.resend.is_empty()
    }

    /// Whether it may send now with at most `window` frames unacknowledged (BDP-FC; frames
    /// sent again always may).
    pub fn sendable(&self, window: u32) -> bool {
        !self.tx.resend.is_empty() || ((self.current.is_some() || !self.queue.is_empty()) && self.open(window))
    }

    /// Whether a new frame fits in `window`.
    pub fn open(&self, window: u32) -> bool {
        self.next_psn - self.tx.acked < window
    }
}

/// The message a queue pair is sending: what its frames need, read from the workload once
/// per message rather than once per frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sending {
    pub message: usize,
    pub bytes: u64,
    pub frames: u64,
    /// Frames that have left.
    pub sent: u64,
    /// Its place in the receiver's `Nic::receiving`, and its queue pair's in the receiver's
    /// `Nic::senders` (its frames' tag).
    pub tag: u32,
    pub from: u32,
}

/// What a receiving NIC knows of one message sent to it: all that a data frame's arrival
/// reads and changes, in one 32-byte record found by the frame's tag (at 1,024 hosts,
/// reading the workload's tables instead cost a cache miss each, about a tenth of the event
/// loop). Numbers and counts are 32 bits: `engine::run` refuses a workload past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// The message's number in the workload.
    pub message: u32,
    /// Its queue pair (a frame whose BTH names another is not counted to it).
    pub qp: u32,
    /// Its queue pair's place in the receiver's `Nic::senders`.
    pub from: u32,
    pub frames: u32,
    /// Its frames received so far, in any order.
    pub delivered: u32,
    /// Its frames that arrived trimmed.
    pub trims: u32,
    /// When its last frame arrived (`NOT_YET` before).
    done_ps: u64,
}

/// A time that has not come.
const NOT_YET: u64 = u64::MAX;

impl Delivery {
    pub fn new(message: u32, qp: u32, from: u32, frames: u32) -> Self {
        Self { message, qp, from, frames, delivered: 0, trims: 0, done_ps: NOT_YET }
    }

    /// When its last frame arrived, if it has.
    pub fn done_ps(&self) -> Option<u64> {
        (self.done_ps != NOT_YET).then_some(self.done_ps)
    }

    /// Its last frame arrived at `now`.
    pub fn complete(&mut self, now: u64) {
        self.done_ps = now;
    }
}

/// A queue pair a NIC receives on: where its CNPs and ACKs go, when it last sent a CNP, and
/// the PSNs it has accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub address: Ipv4Addr,
    /// The queue pair's place in its sender's `Nic::sending` (its CNPs' and ACKs' tag).
    pub slot: u32,
    /// When it last sent a CNP for the queue pair (`NOT_YET`: never).
    last_cnp_ps: u64,
    pub rx: RxState,
}

impl Sender {
    pub fn new(address: Ipv4Addr, slot: u32) -> Self {
        Self { address, slot, last_cnp_ps: NOT_YET, rx: RxState::default() }
    }

    /// Whether a CNP may go at `now`, at most one per `interval_ps`; if so, it is counted as
    /// sent.
    pub fn cnp_due(&mut self, now: u64, interval_ps: u64) -> bool {
        let due = self.last_cnp_ps == NOT_YET || now >= self.last_cnp_ps.saturating_add(interval_ps);
        if due {
            self.last_cnp_ps = now;
        }
        due
    }
}

/// An ACK, NAK or NACK waiting to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub qp: usize,
    pub to: Ipv4Addr,
    /// The queue pair's place at its sender (the frame's tag).
    pub slot: u32,
    pub reply: Reply,
}

/// A CNP waiting to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cnp {
    pub qp: usize,
    pub to: Ipv4Addr,
    /// The queue pair's place at its sender (the frame's tag).
    pub slot: u32,
}

/// A host's NIC: everything of the host that changes in a run, both as sender and as
/// receiver, so that a host's state lives with the partition that runs it. Its tables are
/// indexed by places the workload gives (`sending` by a queue pair's slot at its sender,
/// `released` and `receiving` by a message's place at its sender and at its receiver,
/// `senders` by a queue pair's place at its receiver).
#[derive(Debug, Clone)]
pub struct Nic {
    /// Its host number.
    pub host: usize,
    pub address: Ipv4Addr,
    pub mac: MacAddress,
    /// The MAC of the switch its link goes to, which its frames are sent to.
    pub router_mac: MacAddress,
    pub speed_mbps: u64,
    /// The queue pairs it sends on.
    pub sending: Vec<QueuePair>,
    /// Which of them have data, and from when each may send.
    pub order: RoundRobin,
    /// When each message it sends was released.
    pub released: Vec<Option<u64>>,
    /// Frames of each message it sends that it sent again (indexed as `released`).
    pub resent: Vec<u32>,
    /// When each message it sends was wholly acknowledged (indexed as `released`).
    pub acked: Vec<Option<u64>>,
    /// Each message it receives.
    pub receiving: Vec<Delivery>,
    /// The queue pairs it receives on.
    pub senders: Vec<Sender>,
    /// CNPs to send.
    pub cnps: VecDeque<Cnp>,
    /// ACKs, NAKs and NACKs to send (with the CNPs, ahead of data).
    pub answers: VecDeque<Answer>,
    /// What the leaf's PFC holds back, per priority.
    pub pauses: crate::tm::pfc::Pauses,
    /// How long the NIC takes to stop a priority after an XOFF reaches it (802.3 31B.3.7,
    /// the leaf port's `peer_response_quanta`): frames it starts meanwhile still go.
    pub response_ps: u64,
    pub transmitting: bool,
    /// The pending wake-up event.
    pub wake: crate::engine::sim::Alarm,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub marked_received: u64,
    pub frames_sent: u64,
    /// Data frames sent again.
    pub retransmits: u64,
    /// Retransmission timeouts of its queue pairs.
    pub timeouts: u64,
    /// Data frames that arrived trimmed.
    pub trims_received: u64,
    /// ACKs, NAKs and NACKs sent.
    pub answers_sent: u64,
    /// The queue pairs (slots) with frames unacknowledged when last looked at, which its
    /// retransmission tick checks; and whether the tick is armed.
    pub outstanding: Vec<u32>,
    pub tick_armed: bool,
    /// `--qp-rates`: (time ps, queue pair, receiver, rate Mb/s) of its queue pairs with frames to send
    /// or unacknowledged, at every sample; and whether the next sample is armed.
    pub rates: Vec<(u64, u32, u32, f64)>,
    pub sampling: bool,
}

/// A host's round robin over the queue pairs (by slot) that have data: those whose rate
/// limiter lets them send (`ready`) and those it holds until a time (`held`). A pick is the
/// first ready slot from where the last pick left off, as a scan of every queue pair would
/// find: ready slots are bits, so a pick reads a word per 64 queue pairs at most, and a held
/// one costs a heap push and pop. With 1,023 queue pairs per host (an all-to-all of 1,024),
/// the scan was the fabric's largest cost, and a `BTreeSet` of ready slots cost more than
/// the scan (perf/RESULTS.md, "Figures once in code comments").
///
/// Invariant: a slot whose queue pair has data and has not been picked since it was put back
/// is in `ready` or `held`. (One may stay there after an ACK took the last frames it was to
/// send again; the engine skips it when it is picked.)
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    /// Bit `slot % 64` of word `slot / 64`.
    ready: Vec<u64>,
    held: BinaryHeap<Reverse<(u64, usize)>>,
    /// The slot after the last pick.
    cursor: usize,
}

impl RoundRobin {
    /// `slot` has data and may send from `from_ps` (at `now`).
    pub fn put(&mut self, slot: usize, from_ps: u64, now: u64) {
        if from_ps <= now {
            self.set_ready(slot);
        } else {
            self.held.push(Reverse((from_ps, slot)));
        }
    }

    /// The next slot that may send at `now`, taken out (put it back while it has data); or,
    /// when none may, the earliest time one may (`None`: none has data).
    pub fn pick(&mut self, now: u64) -> Result<usize, Option<u64>> {
        while let Some(&Reverse((from_ps, slot))) = self.held.peek() {
            if from_ps > now {
                break;
            }
            self.held.pop();
            self.set_ready(slot);
        }
        match self.ready_from(self.cursor).or_else(|| self.ready_from(0)) {
            Some(slot) => {
                self.ready[slot / 64] &= !(1 << (slot % 64));
                self.cursor = slot + 1;
                Ok(slot)
            }
            None => Err(self.held.peek().map(|held| held.0 .0)),
        }
    }

    /// The slot the next pick would take if nothing changes before it (a hint: held slots
    /// may come due first).
    pub fn next_ready(&self) -> Option<usize> {
        self.ready_from(self.cursor).or_else(|| self.ready_from(0))
    }

    fn set_ready(&mut self, slot: usize) {
        let word = slot / 64;
        if word >= self.ready.len() {
            self.ready.resize(word + 1, 0);
        }
        self.ready[word] |= 1 << (slot % 64);
    }

    /// The first ready slot at or after `from`.
    fn ready_from(&self, from: usize) -> Option<usize> {
        let first = from / 64;
        let mut word = *self.ready.get(first)? & (u64::MAX << (from % 64));
        let mut index = first;
        loop {
            if word != 0 {
                return Some(index * 64 + word.trailing_zeros() as usize);
            }
            index += 1;
            word = *self.ready.get(index)?;
        }
    }
}

impl Nic {
    pub fn new(host: usize, address: Ipv4Addr, mac: MacAddress, router_mac: MacAddress, speed_mbps: u64) -> Self {
        Self {
            host,
            address,
            mac,
            router_mac,
            speed_mbps,
            sending: Vec::new(),
            order: RoundRobin::default(),
            released: Vec::new(),
            acked: Vec::new(),
            resent: Vec::new(),
            receiving: Vec::new(),
            senders: Vec::new(),
            cnps: VecDeque::new(),
            answers: VecDeque::new(),
            pauses: crate::tm::pfc::Pauses::default(),
            response_ps: 0,
            transmitting: false,
            wake: crate::engine::sim::Alarm::default(),
            cnps_sent: 0,
            cnps_received: 0,
            marked_received: 0,
            frames_sent: 0,
            retransmits: 0,
            timeouts: 0,
            trims_received: 0,
            answers_sent: 0,
            outstanding: Vec::new(),
            tick_armed: false,
            rates: Vec::new(),
            sampling: false,
        }
    }
}

/// The RC SEND opcode of frame `index` of a message of `frames` frames.
pub fn send_opcode(index: u64, frames: u64) -> u8 {
    match (index == 0, index + 1 == frames) {
        (true, true) => 0x04,
        (true, false) => 0x00,
        (false, true) => 0x02,
        (false, false) => 0x01,
    }
}

/// Which frame of which message a data frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFrame {
    pub qp: usize,
    pub psn: u32,
    pub opcode: u8,
    pub payload: usize,
    /// Its message's place at the receiver, which the receiver counts it by, and its queue
    /// pair's: the frame's tag.
    pub tag: u32,
    pub from: u32,
    /// The transport asks for an ACK every this many PSNs (`TransportParams::ack_every`).
    pub ack_every: u32,
}

impl DataFrame {
    /// Whether it asks for an ACK: its message's last frame, and every `ack_every`th PSN.
    pub fn asks_ack(&self) -> bool {
        matches!(self.opcode, 0x02 | 0x04) || self.psn % self.ack_every == self.ack_every - 1
    }
}

/// A data frame: `payload` bytes of queue pair `qp` with `psn`, tagged with its message.
pub fn data_frame(from: &Nic, to: Ipv4Addr, frame: DataFrame) -> HeapPacket {
    let DataFrame { qp, psn, opcode, payload, tag, from: sender, .. } = frame;
    let mut spec = FrameSpec::rocev2(IpAddr::V4(from.address), IpAddr::V4(to), qp as u32 + 1);
    (spec.source_mac, spec.destination_mac) = (from.mac, from.router_mac);
    spec.dscp = DATA_DSCP;
    spec.ecn = 0b10;
    spec.frame_len = payload + crate::traffic::frames::ROCE_OVERHEAD;
    spec.transport =
        Transport::Roce { source: 0xc000 | (qp as u16 & 0x3fff), opcode, dest_qp: qp as u32 + 1, psn: psn & 0xff_ffff };
    // Only the headers travel (a switch or host reads nothing past the BTH); the rest is
    // declared. A 4,150-byte frame held whole made the queued frames most of a large
    // fabric's memory.
    let (mut bytes, beyond) = spec.build_headers();
    debug_assert_eq!(bytes.len(), DATA_HEADERS);
    // Built frames ask for an ACK; a host's data asks on some only.
    if !frame.asks_ack() {
        bytes[BTH + 8] &= !ACK_REQ;
    }
    let mut packet = HeapPacket::headers(bytes, beyond);
    packet.tag = data_tag(tag, sender);
    packet
}

/// A data frame's tag: its message's place at the receiver (low half) and its queue pair's
/// (high half).
fn data_tag(message: u32, queue_pair: u32) -> u64 {
    u64::from(queue_pair) << 32 | u64::from(message)
}

/// The places a data frame's tag names: (message, queue pair), as `data_tag` packed them.
pub fn data_places(tag: u64) -> (usize, usize) {
    ((tag & u64::from(u32::MAX)) as usize, (tag >> 32) as usize)
}

/// A data frame's headers: Ethernet, IPv4, UDP and the BTH.
const DATA_HEADERS: usize = 14 + 20 + 8 + crate::wire::bth::HEADER_LEN;
/// Where the BTH of a host's (untagged IPv4) frame starts.
const BTH: usize = 14 + 20 + 8;
/// The BTH's AckReq bit (byte 8's top bit).
const ACK_REQ: u8 = 0x80;
/// The RC Acknowledge opcode: an ACK or NAK with an AETH after the BTH.
const OPCODE_ACK: u8 = 0x11;
/// AETH syndromes: ACK, and NAK with PSN sequence error (IBA 9.7.5.2). raceway's hosts
/// also send two NAK kinds of their own: selective repeat's NACK and a trimmed frame's.
const SYNDROME_ACK: u8 = 0x00;
const SYNDROME_NAK_SEQUENCE: u8 = 0x60;
const SYNDROME_NACK_SELECTIVE: u8 = 0x61;
const SYNDROME_NACK_TRIMMED: u8 = 0x62;

/// An ACK, NAK or NACK to the sender at `answer.to`, tagged with the queue pair's place
/// there: the BTH's PSN is the receiver's expected PSN; the AETH's syndrome says which reply,
/// and its 24-bit MSN field carries the PSN a NACK names (the one that arrived out of order,
/// or trimmed), which IRN and UET carry in headers of their own.
pub fn answer_frame(from: &Nic, answer: Answer) -> HeapPacket {
    let Answer { qp, to, slot, reply } = answer;
    let (expected, syndrome, named) = match reply {
        Reply::Ack { expected } => (expected, SYNDROME_ACK, 0),
        Reply::Nak { expected } => (expected, SYNDROME_NAK_SEQUENCE, 0),
        Reply::Nack { expected, arrived } => (expected, SYNDROME_NACK_SELECTIVE, arrived),
        Reply::Trimmed { expected, psn } => (expected, SYNDROME_NACK_TRIMMED, psn),
    };
    let mut spec = FrameSpec::rocev2(IpAddr::V4(from.address), IpAddr::V4(to), qp as u32 + 1);
    (spec.source_mac, spec.destination_mac) = (from.mac, from.router_mac);
    spec.dscp = CNP_DSCP;
    spec.ecn = 0;
    spec.frame_len = crate::traffic::frames::ROCE_OVERHEAD + 4;
    spec.transport =
        Transport::Roce { source: 0xc000, opcode: OPCODE_ACK, dest_qp: qp as u32 + 1, psn: expected & 0xff_ffff };
    let mut bytes = spec.build();
    let aeth = BTH + crate::wire::bth::HEADER_LEN;
    bytes[aeth] = syndrome;
    bytes[aeth + 1..aeth + 4].copy_from_slice(&named.to_be_bytes()[1..]);
    let mut packet = HeapPacket::new(bytes);
    packet.tag = u64::from(slot);
    packet
}

/// A CNP to the sender at `cnp.to`, tagged with the queue pair's place there.
pub fn cnp_frame(from: &Nic, cnp: Cnp) -> HeapPacket {
    let Cnp { qp, to, slot } = cnp;
    let mut spec = FrameSpec::rocev2(IpAddr::V4(from.address), IpAddr::V4(to), qp as u32 + 1);
    (spec.source_mac, spec.destination_mac) = (from.mac, from.router_mac);
    spec.dscp = CNP_DSCP;
    spec.ecn = 0;
    spec.transport = Transport::Roce { source: 0xc000, opcode: OPCODE_CNP, dest_qp: qp as u32 + 1, psn: 0 };
    let mut packet = HeapPacket::new(spec.build());
    packet.tag = u64::from(slot);
    packet
}

/// What a host reads from a frame it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// `tag`: the message's place at the receiver; `from`: its queue pair's.
    Data {
        qp: usize,
        psn: u32,
        congestion: bool,
        tag: usize,
        from: usize,
        ack_req: bool,
        /// Its DSCP is not the data's: a switch trimmed it.
        trimmed: bool,
    },
    /// `tag`: the queue pair's place at the sender.
    Answer {
        qp: usize,
        tag: usize,
        reply: Reply,
    },
    /// `tag`: the queue pair's place at the sender.
    Cnp {
        qp: usize,
        tag: usize,
    },
    Pfc(crate::wire::pfc::Repr),
    Other,
}

/// Reads a frame arriving at a host.
pub fn read(packet: &HeapPacket) -> Received {
    let frame = &packet.bytes[..];
    let Ok(parsed) = parse_beyond(frame, packet.beyond) else { return Received::Other };
    match parsed.payload {
        Payload::FlowControl(repr) => Received::Pfc(repr),
        Payload::Ip(ip) => match ip.roce {
            Some(roce) if roce.dest_qp > 0 => {
                let qp = roce.dest_qp as usize - 1;
                if roce.opcode == OPCODE_CNP {
                    return Received::Cnp { qp, tag: packet.tag as usize };
                }
                // The PSN: the BTH's last three bytes, after UDP.
                let bth = ip.l3_offset + 20 + 8;
                let psn = frame.get(bth + 9..bth + 12).map_or(0, |b| u32::from_be_bytes([0, b[0], b[1], b[2]]));
                if roce.opcode == OPCODE_ACK {
                    let Some(aeth) = frame.get(bth + 12..bth + 16) else { return Received::Other };
                    let named = u32::from_be_bytes([0, aeth[1], aeth[2], aeth[3]]);
                    let reply = match aeth[0] {
                        SYNDROME_ACK => Reply::Ack { expected: psn },
                        SYNDROME_NAK_SEQUENCE => Reply::Nak { expected: psn },
                        SYNDROME_NACK_SELECTIVE => Reply::Nack { expected: psn, arrived: named },
                        SYNDROME_NACK_TRIMMED => Reply::Trimmed { expected: psn, psn: named },
                        _ => return Received::Other,
                    };
                    return Received::Answer { qp, tag: packet.tag as usize, reply };
                }
                let ack_req = frame.get(bth + 8).is_some_and(|byte| byte & ACK_REQ != 0);
                let (tag, from) = data_places(packet.tag);
                let trimmed = ip.dscp != DATA_DSCP;
                Received::Data { qp, psn, congestion: ip.ecn == 0b11, tag, from, ack_req, trimmed }
            }
            _ => Received::Other,
        },
        Payload::LinkPause(_) | Payload::NotRoutable(_) => Received::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_round_robin_picks_ready_slots_in_turn_and_says_when_a_held_one_may_go() {
        let mut order = RoundRobin::default();
        assert_eq!(order.pick(0), Err(None), "no data");
        order.put(2, 0, 10);
        order.put(0, 5, 10);
        order.put(1, 30, 10);
        assert_eq!(order.pick(10), Ok(0));
        order.put(0, 10, 10);
        // After slot 0 comes slot 2 (1 is held), then round to 0 again.
        assert_eq!(order.pick(10), Ok(2));
        assert_eq!(order.pick(10), Ok(0));
        assert_eq!(order.pick(10), Err(Some(30)), "slot 1 may go at 30");
        assert_eq!(order.pick(30), Ok(1));
        order.put(3, 40, 30);
        order.put(0, 40, 30);
        // Both free at 40: the turn resumes after slot 1.
        assert_eq!((order.pick(40), order.pick(40), order.pick(40)), (Ok(3), Ok(0), Err(None)));
        // Slots in words beyond the first, and a wrap from the last word to the first.
        for slot in [63, 64, 130, 5] {
            order.put(slot, 40, 40);
        }
        let picks: Vec<_> = (0..5).map(|_| order.pick(40)).collect();
        assert_eq!(picks, [Ok(5), Ok(63), Ok(64), Ok(130), Err(None)]);
        order.put(130, 50, 50);
        order.put(2, 50, 50);
        assert_eq!((order.pick(50), order.pick(50)), (Ok(2), Ok(130)), "from slot 131: round to 2");
    }

    #[test]
    fn frames_read_back() {
        let nic = Nic::new(
            0,
            Ipv4Addr::new(10, 0, 0, 1),
            MacAddress([2, 0, 0, 0x10, 0, 0]),
            MacAddress([2, 0, 0, 0, 0, 1]),
            100_000,
        );
        let frame = DataFrame {
            qp: 6,
            psn: 0x12345,
            opcode: 0x02,
            payload: 4096,
            tag: 77,
            from: 5,
            ack_every: crate::engine::fabric::transport::ACK_EVERY,
        };
        let data = data_frame(&nic, Ipv4Addr::new(10, 1, 0, 1), frame);
        use crate::packet::PacketBuf;
        // The headers held, the payload (and ICRC) declared: the frame's whole length.
        assert_eq!(data.len(), 4096 + crate::traffic::frames::ROCE_OVERHEAD);
        assert_eq!((data.bytes.len(), data.beyond), (DATA_HEADERS, 4096 + 4));
        let expected =
            Received::Data { qp: 6, psn: 0x12345, congestion: false, tag: 77, from: 5, ack_req: true, trimmed: false };
        assert_eq!(read(&data), expected, "a message's last frame asks for an ACK");
        let middle = data_frame(&nic, Ipv4Addr::new(10, 1, 0, 1), DataFrame { opcode: 0x01, psn: 3, ..frame });
        assert!(matches!(read(&middle), Received::Data { ack_req: false, .. }));
        for reply in [
            Reply::Ack { expected: 9 },
            Reply::Nak { expected: 0xabcdef },
            Reply::Nack { expected: 2, arrived: 7 },
            Reply::Trimmed { expected: 2, psn: 5 },
        ] {
            let answer = Answer { qp: 6, to: Ipv4Addr::new(10, 1, 0, 1), slot: 4, reply };
            assert_eq!(read(&answer_frame(&nic, answer)), Received::Answer { qp: 6, tag: 4, reply });
        }
        let mut marked = data.clone();
        crate::tm::ecn::set_ce(&mut marked.bytes, 14, false);
        assert!(matches!(read(&marked), Received::Data { congestion: true, .. }));
        let cnp = Cnp { qp: 6, to: Ipv4Addr::new(10, 1, 0, 1), slot: 9 };
        assert_eq!(read(&cnp_frame(&nic, cnp)), Received::Cnp { qp: 6, tag: 9 });
        assert_eq!((send_opcode(0, 1), send_opcode(0, 3), send_opcode(1, 3), send_opcode(2, 3)), (4, 0, 1, 2));
    }
}
