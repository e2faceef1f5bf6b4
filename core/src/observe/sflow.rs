//! sFlow v5 datagrams (sflow.org's "sFlow Version 5", XDR): flow samples with a raw packet
//! header record, counter samples with the generic interface counters record, and dropped
//! packet notifications (sflow.org's drop extension: the `discarded_packet` sample, format 5,
//! with its reason and the raw header) for dropped frames. The crates
//! that exist read sFlow; none writes it, so this is the encoder, small and checked against
//! tshark's dissector and pmacct's collector (tests/dpdk/live).
//!
//! A port's ifIndex is its index in the config plus 1 (0 means "unknown" in sFlow), its
//! source id `0:ifIndex`. Frame lengths count the FCS the NIC stripped (`stripped` = 4), as
//! hsflowd reports them.
//!
//! Invariant: every datagram `Encoder::finish` returns is whole and at most `MAX_DATAGRAM`
//! bytes unless one sample alone is longer; each source's sample sequence numbers and the
//! datagram sequence number count up by one, so a collector sees every loss.

use crate::drops::DropReason;
use crate::pipeline::sample::{FlowSample, NO_PORT};
use std::net::IpAddr;

/// Bytes of samples per datagram: under a 1,500-byte MTU with IP and UDP headers.
pub const MAX_DATAGRAM: usize = 1400;
/// FCS bytes the frame had on the wire and lost before it was sampled.
const FCS: u32 = 4;

/// One port's counters for a counter sample (the generic interface record's fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub port: usize,
    pub speed_bps: u64,
    pub admin_up: bool,
    pub oper_up: bool,
    pub in_octets: u64,
    pub in_packets: u64,
    pub in_discards: u64,
    pub out_octets: u64,
    pub out_packets: u64,
    pub out_discards: u64,
}

/// Builds datagrams from samples, numbering them.
pub struct Encoder {
    agent: IpAddr,
    datagrams: u32,
    /// Per port: flow samples and counter samples sent.
    flow_sequence: Vec<u32>,
    counter_sequence: Vec<u32>,
    /// Per port: dropped-packet notifications sent.
    discard_sequence: Vec<u32>,
    samples: Vec<u8>,
    count: u32,
}

impl Encoder {
    pub fn new(agent: IpAddr, ports: usize) -> Self {
        Self {
            agent,
            datagrams: 0,
            flow_sequence: vec![0; ports],
            counter_sequence: vec![0; ports],
            discard_sequence: vec![0; ports],
            samples: Vec::with_capacity(2 * MAX_DATAGRAM),
            count: 0,
        }
    }

    /// A new agent address (a reload), numbering on.
    pub fn set_agent(&mut self, agent: IpAddr) {
        self.agent = agent;
    }

    /// Adds a flow sample, or a dropped-packet notification for a sample of a dropped frame;
    /// `drops` is sFlow's count of samples (notifications) lost before this one.
    pub fn flow(&mut self, sample: &FlowSample, drops: u32) {
        let port = usize::from(sample.ingress);
        let sequences = if sample.discarded.is_some() { &mut self.discard_sequence } else { &mut self.flow_sequence };
        let Some(sequence) = sequences.get_mut(port) else { return };
        *sequence = sequence.wrapping_add(1);
        let header = &sample.header[..usize::from(sample.header_len)];
        let padded = header.len().div_ceil(4) * 4;
        let record_len = 16 + padded;
        let output = if sample.egress == NO_PORT { 0 } else { if_index(usize::from(sample.egress)) };
        let out = &mut self.samples;
        // The flow sample and the notification have bodies of one size: seven words, then the
        // record count and the record.
        match sample.discarded {
            None => {
                put(out, 1); // flow sample, enterprise 0
                put(out, (32 + 8 + record_len) as u32);
                put(out, *sequence);
                put(out, if_index(port));
                put(out, sample.rate);
                put(out, sample.pool);
                put(out, drops);
                put(out, if_index(port));
                put(out, output);
            }
            Some(reason) => {
                put(out, 5); // discarded packet, enterprise 0
                put(out, (32 + 8 + record_len) as u32);
                put(out, *sequence);
                put(out, 0); // source: ifIndex class
                put(out, if_index(port));
                put(out, drops);
                put(out, if_index(port));
                put(out, output);
                put(out, drop_code(reason));
            }
        }
        put(out, 1); // one record
        put(out, 1); // raw packet header
        put(out, record_len as u32);
        put(out, 1); // header protocol: Ethernet
        put(out, sample.frame_len + FCS);
        put(out, FCS);
        put(out, header.len() as u32);
        out.extend_from_slice(header);
        out.resize(out.len() + padded - header.len(), 0);
        self.count += 1;
    }

    /// Adds a counter sample of one port.
    pub fn counters(&mut self, counters: &InterfaceCounters) {
        let Some(sequence) = self.counter_sequence.get_mut(counters.port) else { return };
        *sequence = sequence.wrapping_add(1);
        let out = &mut self.samples;
        put(out, 2); // counter sample, enterprise 0
        put(out, 12 + 8 + 88);
        put(out, *sequence);
        put(out, if_index(counters.port));
        put(out, 1); // one record
        put(out, 1); // generic interface counters
        put(out, 88);
        put(out, if_index(counters.port));
        put(out, 6); // ethernetCsmacd
        put64(out, counters.speed_bps);
        put(out, 1); // full duplex
        put(out, u32::from(counters.admin_up) | u32::from(counters.oper_up) << 1);
        put64(out, counters.in_octets);
        put(out, counters.in_packets as u32); // ifInUcastPkts (32 bits, wrapping, as the MIB's)
        put(out, 0); // multicast
        put(out, 0); // broadcast
        put(out, counters.in_discards as u32);
        put(out, 0); // errors: a frame that reaches raceway parsed far enough to be counted
        put(out, 0); // unknown protocols
        put64(out, counters.out_octets);
        put(out, counters.out_packets as u32);
        put(out, 0);
        put(out, 0);
        put(out, counters.out_discards as u32);
        put(out, 0);
        put(out, 0); // not promiscuous
        self.count += 1;
    }

    /// Whether the samples added fill a datagram.
    pub fn full(&self) -> bool {
        self.samples.len() >= MAX_DATAGRAM
    }

    /// The datagram of the samples added since the last one (`None` if there are none).
    pub fn finish(&mut self, uptime_ms: u32) -> Option<Vec<u8>> {
        if self.count == 0 {
            return None;
        }
        self.datagrams = self.datagrams.wrapping_add(1);
        let mut datagram = Vec::with_capacity(40 + self.samples.len());
        put(&mut datagram, 5);
        match self.agent {
            IpAddr::V4(address) => {
                put(&mut datagram, 1);
                datagram.extend_from_slice(&address.octets());
            }
            IpAddr::V6(address) => {
                put(&mut datagram, 2);
                datagram.extend_from_slice(&address.octets());
            }
        }
        put(&mut datagram, 0); // sub-agent
        put(&mut datagram, self.datagrams);
        put(&mut datagram, uptime_ms);
        put(&mut datagram, self.count);
        datagram.extend_from_slice(&self.samples);
        self.samples.clear();
        self.count = 0;
        Some(datagram)
    }
}

/// sFlow's code for a drop reason (the drop extension's `drop_reason`, as hsflowd's
/// `sflow_drop.h` lists them), the nearest where there is no exact one.
pub fn drop_code(reason: DropReason) -> u32 {
    match reason {
        DropReason::Malformed => 275,        // ip_header_corrupted
        DropReason::Unsupported => 270,      // non_ip
        DropReason::NoRoute => 6,            // dst_net_unknown
        DropReason::NotRouterMac => 305,     // dmac_filter
        DropReason::Multicast => 281,        // non_routable_packet
        DropReason::Martian => 285,          // unknown_l3
        DropReason::Blackhole => 269,        // blackhole_route
        DropReason::TtlExpired => 257,       // ttl_exceeded
        DropReason::BufferFull => 259,       // no_buffer_space
        DropReason::HeadroomOverflow => 259, // no_buffer_space
        DropReason::PfcWatchdog => 287,      // unknown_buffer
        DropReason::Wred => 260,             // red
        DropReason::Oversize => 262,         // pkt_too_big
        DropReason::PuntPoliced => 261,      // traffic_shaping
        DropReason::PuntQueueFull => 259,    // no_buffer_space
        DropReason::ControlAcl => 258,       // acl
        DropReason::LinkDown => 256,         // unknown
        DropReason::Acl => 258,              // acl
    }
}

/// sFlow's ifIndex of port `port`.
fn if_index(port: usize) -> u32 {
    port as u32 + 1
}

fn put(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SFLOW_MAX_HEADER_BYTES;

    fn word(bytes: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn a_dropped_frame_is_a_discarded_packet_sample_with_its_reason() {
        let mut encoder = Encoder::new("10.9.0.1".parse().unwrap(), 4);
        let mut header = [0u8; SFLOW_MAX_HEADER_BYTES as usize];
        header[..5].copy_from_slice(&[2, 0, 0, 0, 0x10]);
        let dropped = FlowSample {
            ingress: 2,
            egress: NO_PORT,
            frame_len: 60,
            rate: 0,
            pool: 0,
            header_len: 5,
            header,
            discarded: Some(DropReason::NoRoute),
        };
        encoder.flow(&dropped, 9);
        encoder.flow(&FlowSample { egress: 1, discarded: Some(DropReason::BufferFull), ..dropped }, 9);
        let datagram = encoder.finish(1).unwrap();
        assert_eq!(word(&datagram, 24), 2, "two samples");
        // Format 5; its length; sequence, source class and index, drops, in, out, reason,
        // records; then the raw header record as a flow sample's.
        let discard = &datagram[28..];
        assert_eq!(word(discard, 0), 5);
        let len = word(discard, 4) as usize;
        assert_eq!(len, 32 + 8 + 16 + 8);
        assert_eq!((8..40).step_by(4).map(|at| word(discard, at)).collect::<Vec<_>>(), [1, 0, 3, 9, 3, 0, 6, 1]);
        assert_eq!([word(discard, 40), word(discard, 48), word(discard, 52), word(discard, 60)], [1, 1, 64, 5]);
        let second = &discard[8 + len..];
        assert_eq!([word(second, 8), word(second, 28), word(second, 32)], [2, 2, 259], "its own sequence; to port 1");
        // Every reason has a code of the drop extension's list.
        for reason in DropReason::ALL {
            assert!(matches!(drop_code(reason), 0..=15 | 256..=372), "{reason:?}");
        }
    }

    #[test]
    fn a_flow_sample_and_a_counter_sample_in_one_datagram() {
        let mut encoder = Encoder::new("10.9.0.1".parse().unwrap(), 4);
        assert!(encoder.finish(0).is_none(), "no samples, no datagram");
        let mut header = [0u8; SFLOW_MAX_HEADER_BYTES as usize];
        header[..6].copy_from_slice(&[2, 0, 0, 0, 0x10, 1]);
        let sample = FlowSample {
            ingress: 1,
            egress: 0,
            frame_len: 1000,
            rate: 100,
            pool: 4242,
            header_len: 6,
            header,
            discarded: None,
        };
        encoder.flow(&sample, 3);
        encoder.counters(&InterfaceCounters {
            port: 2,
            speed_bps: 100_000_000_000,
            admin_up: true,
            oper_up: true,
            in_octets: 1 << 40,
            in_packets: 7,
            ..Default::default()
        });
        let datagram = encoder.finish(1234).unwrap();
        // Header: version, IPv4 agent, sub-agent, sequence, uptime, samples.
        assert_eq!([word(&datagram, 0), word(&datagram, 4)], [5, 1]);
        assert_eq!(datagram[8..12], [10, 9, 0, 1]);
        assert_eq!([word(&datagram, 16), word(&datagram, 20), word(&datagram, 24)], [1, 1234, 2]);
        // The flow sample: format, length, sequence, source, rate, pool, drops, in, out, records.
        let flow = &datagram[28..];
        assert_eq!(word(flow, 0), 1);
        let flow_len = word(flow, 4) as usize;
        assert_eq!(flow_len, 32 + 8 + 16 + 8, "6 header bytes padded to 8");
        assert_eq!(
            (4..40).step_by(4).map(|at| word(flow, at + 4)).collect::<Vec<_>>()[..8],
            [1, 2, 100, 4242, 3, 2, 1, 1]
        );
        // Its raw header record: protocol, frame length with FCS, stripped, header bytes.
        assert_eq!(
            [word(flow, 40), word(flow, 44), word(flow, 48), word(flow, 52), word(flow, 56), word(flow, 60)],
            [1, 24, 1, 1004, 4, 6]
        );
        assert_eq!(flow[64..72], [2, 0, 0, 0, 0x10, 1, 0, 0]);
        // The counter sample after it.
        let counters = &flow[8 + flow_len..];
        assert_eq!([word(counters, 0), word(counters, 4), word(counters, 8), word(counters, 12)], [2, 108, 1, 3]);
        assert_eq!([word(counters, 20), word(counters, 24), word(counters, 28), word(counters, 32)], [1, 88, 3, 6]);
        assert_eq!(u64::from_be_bytes(counters[36..44].try_into().unwrap()), 100_000_000_000);
        assert_eq!([word(counters, 44), word(counters, 48)], [1, 3], "full duplex, admin and oper up");
        assert_eq!(u64::from_be_bytes(counters[52..60].try_into().unwrap()), 1 << 40);
        assert_eq!(word(counters, 60), 7);
        assert_eq!(counters.len(), 8 + 108);
        // The next datagram counts on.
        encoder.flow(&sample, 3);
        let next = encoder.finish(1300).unwrap();
        assert_eq!(word(&next, 16), 2);
        assert_eq!(word(&next[28..], 8), 2, "the port's flow sample sequence");
    }
}
