//! `raceway blast --sequence`: loss counted by sequence, as an RDMA receiver counts it. The
//! sender writes consecutive PSNs into each RoCEv2 flow's frames (a flow is a source address,
//! destination address and destination QP); the receiver follows each flow's PSNs and counts
//! the frames a gap says never came. That is how a test tells a lossless class's losses apart
//! from frames still in flight or never sent: the switch's counters cannot say what it never
//! received, and the hosts' totals cannot say which frames are missing.
//!
//! The PSN is BTH's 24-bit field and wraps, as a NIC's does. The stamp leaves the ICRC as the
//! trace had it: switches do not check it, and neither does this receiver.
//!
//! Invariant: every RoCEv2 frame received is counted once, as in order (its PSN the one
//! expected, or ahead of it, the frames between counted lost) or as late (behind: a frame
//! counted lost that came after all, reordered or duplicated); `lost - late` never exceeds
//! what the sender skipped or the path lost. A flow's first frame is expected to carry PSN 0.

use crate::wire::parse::{parse, Payload};
use hashbrown::HashMap;

/// PSNs are 24 bits.
const PSN_MODULUS: u32 = 1 << 24;
/// A PSN less than half the space ahead of the expected one is ahead (frames were lost);
/// otherwise behind (a late frame).
const AHEAD_AT_MOST: u32 = PSN_MODULUS / 2;

/// Who a RoCEv2 frame belongs to: source and destination addresses (IPv4 in the first four
/// bytes) and destination QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    source: [u8; 16],
    destination: [u8; 16],
    dest_qp: u32,
}

/// Where a RoCEv2 frame's PSN is, and its flow; `None` for any other frame, and for an IPv6
/// frame whose UDP header is behind extension headers.
fn locate(frame: &[u8]) -> Option<(usize, FlowKey)> {
    let Ok(parsed) = parse(frame) else { return None };
    let Payload::Ip(ip) = parsed.payload else { return None };
    let roce = ip.roce?;
    let l3 = ip.l3_offset;
    let mut key = FlowKey { source: [0; 16], destination: [0; 16], dest_qp: roce.dest_qp };
    let l4 = match frame.get(l3)? >> 4 {
        4 => {
            key.source[..4].copy_from_slice(frame.get(l3 + 12..l3 + 16)?);
            key.destination[..4].copy_from_slice(frame.get(l3 + 16..l3 + 20)?);
            l3 + usize::from(frame[l3] & 0x0f) * 4
        }
        6 if *frame.get(l3 + 6)? == crate::wire::ipv4::protocol::UDP => {
            key.source.copy_from_slice(frame.get(l3 + 8..l3 + 24)?);
            key.destination.copy_from_slice(frame.get(l3 + 24..l3 + 40)?);
            l3 + 40
        }
        _ => return None,
    };
    // UDP's 8 bytes, then BTH's PSN at bytes 9 to 11.
    let psn = l4 + 8 + 9;
    (frame.len() >= psn + 3).then_some((psn, key))
}

/// The sender's side: each frame of the trace it loops over, with where its PSN goes and the
/// flow whose next PSN it takes. Worked out once, before the first frame is sent.
pub struct Stamper {
    /// Per trace frame: (PSN offset, flow index), for RoCEv2 frames.
    frames: Vec<Option<(usize, usize)>>,
    /// Per flow: the PSN its next frame carries.
    next: Vec<u32>,
}

impl Stamper {
    pub fn new(trace: &[Vec<u8>]) -> Self {
        let mut flows: HashMap<FlowKey, usize> = HashMap::new();
        let frames = trace
            .iter()
            .map(|frame| {
                locate(frame).map(|(offset, key)| {
                    let count = flows.len();
                    (offset, *flows.entry(key).or_insert(count))
                })
            })
            .collect();
        Self { frames, next: vec![0; flows.len()] }
    }

    /// Writes the next PSN of trace frame `index`'s flow into `frame` (that frame's copy).
    pub fn stamp(&mut self, index: usize, frame: &mut [u8]) {
        let Some(Some((offset, flow))) = self.frames.get(index).copied() else { return };
        let psn = self.next[flow];
        self.next[flow] = (psn + 1) % PSN_MODULUS;
        if let Some(field) = frame.get_mut(offset..offset + 3) {
            field.copy_from_slice(&psn.to_be_bytes()[1..]);
        }
    }
}

/// What a receiver counted (module notes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SequenceReport {
    /// RoCEv2 flows seen.
    pub flows: u64,
    /// Frames whose PSN was the one expected, or ahead of it.
    pub in_order: u64,
    /// Frames a gap in PSNs says never came.
    pub lost: u64,
    /// Frames whose PSN was behind the one expected.
    pub late: u64,
}

/// The receiver's side: each flow's next expected PSN.
#[derive(Default)]
pub struct SequenceCounter {
    expected: HashMap<FlowKey, u32>,
    pub report: SequenceReport,
}

impl SequenceCounter {
    /// Counts `frame` if it is RoCEv2.
    pub fn count(&mut self, frame: &[u8]) {
        let Some((offset, key)) = locate(frame) else { return };
        let psn = u32::from_be_bytes([0, frame[offset], frame[offset + 1], frame[offset + 2]]);
        let expected = self.expected.entry(key).or_insert_with(|| {
            self.report.flows += 1;
            0
        });
        let ahead = psn.wrapping_sub(*expected) % PSN_MODULUS;
        if ahead < AHEAD_AT_MOST {
            self.report.in_order += 1;
            self.report.lost += u64::from(ahead);
            *expected = (psn + 1) % PSN_MODULUS;
        } else {
            self.report.late += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::frames::{FrameSpec, Transport};

    fn roce(source: &str, destination: &str, dest_qp: u32) -> Vec<u8> {
        let mut spec = FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), dest_qp);
        spec.frame_len = 128;
        spec.build()
    }

    fn psn_of(frame: &[u8]) -> u32 {
        let (offset, _) = locate(frame).unwrap();
        u32::from_be_bytes([0, frame[offset], frame[offset + 1], frame[offset + 2]])
    }

    #[test]
    fn the_psn_is_found_where_the_frame_builder_put_it() {
        for (source, destination) in [("10.0.0.1", "10.0.1.1"), ("2001:db8::1", "2001:db8:1::1")] {
            let mut spec = FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), 7);
            spec.transport = Transport::Roce { source: 0xc000, opcode: 0x04, dest_qp: 7, psn: 0xabcdef };
            assert_eq!(psn_of(&spec.build()), 0xabcdef, "{destination}");
        }
        let mut tcp = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.1".parse().unwrap(), 7);
        tcp.transport = Transport::Tcp { source: 1, destination: 2 };
        assert_eq!(locate(&tcp.build()), None, "not RoCEv2");
        assert_eq!(locate(&[0u8; 20]), None);
    }

    #[test]
    fn each_flow_counts_its_own_psns_round_the_trace() {
        // Two flows (different QPs), one TCP frame: the TCP frame is left alone.
        let mut tcp = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.1".parse().unwrap(), 1);
        tcp.transport = Transport::Tcp { source: 1, destination: 2 };
        let trace = vec![roce("10.0.0.1", "10.0.1.1", 1), roce("10.0.0.1", "10.0.1.1", 2), tcp.build()];
        let mut stamper = Stamper::new(&trace);
        assert_eq!(stamper.next.len(), 2, "two flows");
        let mut sent = Vec::new();
        for round in 0..3 {
            for (index, frame) in trace.iter().enumerate() {
                let mut copy = frame.clone();
                stamper.stamp(index, &mut copy);
                if index == 2 {
                    assert_eq!(copy, *frame, "round {round}: TCP unchanged");
                } else {
                    assert_eq!(psn_of(&copy), round, "round {round}, frame {index}");
                }
                sent.push(copy);
            }
        }
        let mut counter = SequenceCounter::default();
        for frame in &sent {
            counter.count(frame);
        }
        assert_eq!(counter.report, SequenceReport { flows: 2, in_order: 6, lost: 0, late: 0 });
    }

    #[test]
    fn flows_differing_in_one_address_alone_are_counted_apart() {
        for (one, other, to) in [("10.0.0.1", "10.0.0.2", "10.0.1.1"), ("2001:db8::1", "2001:db8::2", "2001:db8:1::1")]
        {
            // By source, then by destination: each pair is two flows, PSN 0 each.
            for trace in [vec![roce(one, to, 1), roce(other, to, 1)], vec![roce(to, one, 1), roce(to, other, 1)]] {
                let mut stamper = Stamper::new(&trace);
                assert_eq!(stamper.next.len(), 2, "{one} and {other}");
                let mut counter = SequenceCounter::default();
                for (index, frame) in trace.iter().enumerate() {
                    let mut copy = frame.clone();
                    stamper.stamp(index, &mut copy);
                    assert_eq!(psn_of(&copy), 0, "{one} and {other}: frame {index}");
                    counter.count(&copy);
                }
                assert_eq!(
                    counter.report,
                    SequenceReport { flows: 2, in_order: 2, lost: 0, late: 0 },
                    "{one}, {other}"
                );
            }
        }
    }

    #[test]
    fn gaps_count_as_lost_and_frames_behind_as_late_across_the_wrap() {
        let trace = vec![roce("10.0.0.1", "10.0.1.1", 1)];
        let mut stamper = Stamper::new(&trace);
        stamper.next[0] = PSN_MODULUS - 2;
        let frames: Vec<Vec<u8>> = (0..6)
            .map(|_| {
                let mut copy = trace[0].clone();
                stamper.stamp(0, &mut copy);
                copy
            })
            .collect();
        assert_eq!(
            frames.iter().map(|frame| psn_of(frame)).collect::<Vec<_>>(),
            [PSN_MODULUS - 2, PSN_MODULUS - 1, 0, 1, 2, 3]
        );
        assert_eq!(stamper.next[0], 4, "the next PSN stays within 24 bits");
        // A flow seen first at PSN 3: the three before it count lost.
        let mut first = trace[0].clone();
        let psn = locate(&first).unwrap().0;
        first[psn + 2] = 3;
        let mut counter = SequenceCounter::default();
        counter.count(&first);
        assert_eq!(counter.report, SequenceReport { flows: 1, in_order: 1, lost: 3, late: 0 });
        // A flow at 2^24 - 2, in order, then across the wrap: PSNs 2^24 - 1 and 1 lost, then 1
        // late (after 2), then 3 in order.
        let mut counter = SequenceCounter::default();
        counter.expected.insert(locate(&trace[0]).unwrap().1, PSN_MODULUS - 2);
        for index in [0, 2, 4, 3, 5] {
            counter.count(&frames[index]);
        }
        assert_eq!(counter.report, SequenceReport { flows: 0, in_order: 4, lost: 2, late: 1 });
    }

    /// `frame` (a RoCEv2 frame of `roce`) with PSN `psn`.
    fn with_psn(frame: &[u8], psn: u32) -> Vec<u8> {
        let mut copy = frame.to_vec();
        let (offset, _) = locate(&copy).unwrap();
        copy[offset..offset + 3].copy_from_slice(&psn.to_be_bytes()[1..]);
        copy
    }

    #[test]
    fn every_byte_of_the_psn_counts_and_half_the_space_ahead_is_behind() {
        let frame = roce("10.0.0.1", "10.0.1.1", 1);
        let mut counter = SequenceCounter::default();
        // First at 0x010203: that many before it lost, each of its three bytes read.
        counter.count(&with_psn(&frame, 0x01_02_03));
        assert_eq!(counter.report, SequenceReport { flows: 1, in_order: 1, lost: 0x01_02_03, late: 0 });
        // Exactly half the PSN space ahead is behind (late), not a gap of 2^23.
        let mut counter = SequenceCounter::default();
        counter.count(&with_psn(&frame, AHEAD_AT_MOST));
        assert_eq!(counter.report, SequenceReport { flows: 1, in_order: 0, lost: 0, late: 1 });
        // One short of half is ahead.
        let mut counter = SequenceCounter::default();
        counter.count(&with_psn(&frame, AHEAD_AT_MOST - 1));
        assert_eq!(counter.report.lost, u64::from(AHEAD_AT_MOST - 1));
    }

    #[test]
    fn an_ipv6_frame_whose_udp_is_behind_an_extension_header_is_left_alone() {
        let plain = FrameSpec::rocev2("2001:db8::1".parse().unwrap(), "2001:db8:1::1".parse().unwrap(), 7).build();
        assert!(locate(&plain).is_some());
        // A hop-by-hop header (next header UDP, PadN to 8 bytes) between IPv6 and UDP.
        let mut behind = plain[..14 + 40].to_vec();
        behind.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        behind.extend_from_slice(&plain[14 + 40..]);
        behind[14 + 6] = 0; // next header: hop-by-hop
        let payload_len = u16::from_be_bytes([behind[14 + 4], behind[14 + 5]]) + 8;
        behind[14 + 4..14 + 6].copy_from_slice(&payload_len.to_be_bytes());
        assert!(
            matches!(parse(&behind), Ok(parsed) if matches!(parsed.payload, Payload::Ip(ip) if ip.roce.is_some())),
            "the parser walks to the BTH"
        );
        assert_eq!(locate(&behind), None, "its PSN is not where a plain frame's is");
    }
}
