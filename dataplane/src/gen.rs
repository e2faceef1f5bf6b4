//! Synthetic traces. For now one kind, `mixed`: what a host on a leaf sends, RoCEv2 to other
//! hosts and across the uplinks, CNPs, TCP, IPv6, VLAN-tagged frames, and a sprinkle of frames
//! a switch must drop (TTL 1, truncated, ARP). Incast, all-to-all and PFC storms come with the
//! generator's own issue.
//!
//! Invariant: the trace depends only on the options (seed included); frames are offered
//! back to back at `rate_gbps`, never faster than the link can carry them.

use crate::frames::{FrameSpec, Transport};
use crate::rng::Rng;
use crate::wire::ethernet::MacAddress;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone)]
pub struct MixedOptions {
    pub packets: usize,
    pub seed: u64,
    /// Frame size without FCS for data frames (60-9216).
    pub frame_len: usize,
    /// Offered load of the host, Gb/s (spacing counts 24 bytes of preamble, IFG and FCS).
    pub rate_gbps: f64,
    /// Index of the sending host: sources are 10.0.<host>.x and 2001:db8:<host>::x.
    pub host: u8,
    /// Percent of frames that the switch must drop (TTL 1, truncated, ARP).
    pub bad_percent: u8,
}

impl Default for MixedOptions {
    fn default() -> Self {
        Self { packets: 1000, seed: 0, frame_len: 60, rate_gbps: 10.0, host: 0, bad_percent: 2 }
    }
}

/// Generates (timestamp in ns, frame) pairs.
pub fn mixed(options: &MixedOptions) -> Vec<(u64, Vec<u8>)> {
    let mut rng = Rng::new(options.seed);
    let mut frames = Vec::with_capacity(options.packets);
    let host = options.host;
    let mut time_ps: u64 = 0;
    for index in 0..options.packets {
        let flow = rng.below(64) as u8;
        let source_v4 = IpAddr::V4(Ipv4Addr::new(10, 0, host, 1 + flow % 8));
        let mut spec =
            FrameSpec::rocev2(source_v4, IpAddr::V4(Ipv4Addr::new(10, 0, host ^ 1, 1 + flow)), 0x100 + u32::from(flow));
        spec.source_mac = MacAddress([0x02, 0, 0, 0, 0x10 + host, 1 + flow % 8]);
        spec.frame_len = options.frame_len;
        spec.transport = Transport::Roce {
            source: 0xc000 | u16::from(flow),
            opcode: 0x04,
            dest_qp: 0x100 + u32::from(flow),
            psn: index as u32 & 0xff_ffff,
        };
        match rng.below(10) {
            // Across the uplinks (default route), RoCEv2.
            0 | 1 => spec.destination = IpAddr::V4(Ipv4Addr::new(192, 0, 2, flow)),
            // A CNP back to a sender, strict priority.
            2 => {
                spec.dscp = 48;
                spec.ecn = 0;
                spec.transport =
                    Transport::Roce { source: 0xc000, opcode: 0x81, dest_qp: 0x200 + u32::from(flow), psn: 0 };
            }
            // TCP, best effort, across the uplinks.
            3 => {
                spec.dscp = 0;
                spec.ecn = 0;
                spec.destination = IpAddr::V4(Ipv4Addr::new(198, 51, 100, flow));
                spec.transport = Transport::Tcp { source: 40000 + u16::from(flow), destination: 443 };
            }
            // IPv6 UDP to the other host.
            4 => {
                spec.source =
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, u16::from(host), 0, 0, 0, 0, 1 + u16::from(flow % 8)));
                spec.destination =
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, u16::from(host ^ 1), 0, 0, 0, 0, 1 + u16::from(flow)));
                spec.transport = Transport::Udp { source: 5000 + u16::from(flow), destination: 6000 };
                spec.dscp = 10;
            }
            // VLAN-tagged RoCEv2 with PCP 3.
            5 => spec.vlan = Some((3, 100)),
            _ => {}
        }
        let mut bytes = spec.build();
        if rng.below(100) < u64::from(options.bad_percent) {
            bytes = match rng.below(3) {
                0 => {
                    spec.ttl = 1;
                    spec.build()
                }
                1 => {
                    bytes.truncate(30);
                    bytes
                }
                _ => arp_request(spec.source_mac, host),
            };
        }
        frames.push((time_ps / 1000, bytes));
        let wire_bytes = (frames.last().expect("pushed").1.len() + 24) as f64;
        time_ps += (wire_bytes * 8.0 * 1000.0 / options.rate_gbps).ceil() as u64;
    }
    frames
}

fn arp_request(source: MacAddress, host: u8) -> Vec<u8> {
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&source.0);
    frame.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01]);
    frame.extend_from_slice(&source.0);
    frame.extend_from_slice(&[10, 0, host, 1, 0, 0, 0, 0, 0, 0, 10, 0, host, 254]);
    frame.resize(60, 0);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_paced() {
        let options = MixedOptions { packets: 200, seed: 3, ..MixedOptions::default() };
        let a = mixed(&options);
        assert_eq!(a, mixed(&options));
        assert_ne!(a, mixed(&MixedOptions { seed: 4, ..options.clone() }));
        // 84 wire bytes at 10 Gb/s: 67.2 ns apart.
        assert!(a.windows(2).all(|w| w[1].0 - w[0].0 >= 67));
    }
}

/// Options of `flows`: RoCEv2 flows taking turns, as a benchmark trace.
#[derive(Debug, Clone)]
pub struct FlowsOptions {
    pub flows: u32,
    pub packets: usize,
    pub frame_len: usize,
    pub rate_gbps: f64,
    pub dscp: u8,
}

/// `packets` RoCEv2 SEND frames of `flows` flows (distinct source ports and QPs, from
/// 10.0.0.x to 10.0.1.x), taking turns, offered back to back at `rate_gbps`.
pub fn flows(options: &FlowsOptions) -> Vec<(u64, Vec<u8>)> {
    let mut frames = Vec::with_capacity(options.packets);
    let mut time_ps: u64 = 0;
    let flows = options.flows.max(1);
    for index in 0..options.packets {
        let flow = index as u32 % flows;
        let mut spec = FrameSpec::rocev2(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + (flow % 200) as u8)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1 + (flow % 200) as u8)),
            0x100 + flow,
        );
        spec.frame_len = options.frame_len;
        spec.dscp = options.dscp;
        spec.transport = Transport::Roce {
            source: 0xc000 | (flow as u16 & 0x3fff),
            opcode: 0x04,
            dest_qp: 0x100 + flow,
            psn: (index as u32 / flows) & 0xff_ffff,
        };
        let bytes = spec.build();
        let wire_bytes = (bytes.len() + 24) as f64;
        frames.push((time_ps / 1000, bytes));
        time_ps += (wire_bytes * 8.0 * 1000.0 / options.rate_gbps).ceil() as u64;
    }
    frames
}
