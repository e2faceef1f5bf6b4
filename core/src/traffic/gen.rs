//! Synthetic traces: `mixed` (what a host on a leaf sends: RoCEv2 to other hosts and across
//! the uplinks, CNPs, TCP, IPv6, VLAN-tagged frames, and a sprinkle of frames a switch must
//! drop), `flows` (a benchmark trace), and the AI-fabric patterns of `pattern`: N:1 incast,
//! ring all-reduce, all-to-all and a PFC storm, one trace per sending host.
//!
//! Invariant: a trace depends only on the options (seed included); each host's frames are
//! offered back to back at `rate_gbps`, never faster than its link can carry them.

use crate::error::InputError;
use crate::rng::Rng;
use crate::traffic::frames::{FrameSpec, Transport};
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

impl MixedOptions {
    pub fn validate(&self) -> Result<(), InputError> {
        check_size_and_rate(self.frame_len, self.rate_gbps)?;
        if self.bad_percent > 100 {
            return Err(InputError::flag("--bad-percent", format!("{} is over 100", self.bad_percent)));
        }
        Ok(())
    }
}

/// The frame size and rate every generator takes.
fn check_size_and_rate(frame_len: usize, rate_gbps: f64) -> Result<(), InputError> {
    if !(60..=9216).contains(&frame_len) {
        return Err(InputError::flag("--size", format!("{frame_len} is not 60-9216")));
    }
    if !(rate_gbps.is_finite() && rate_gbps > 0.0) {
        return Err(InputError::flag("--rate-gbps", format!("{rate_gbps} is not positive")));
    }
    Ok(())
}

/// Writes `(time ns, frame)` pairs as a pcap at `path` as they come (a generator need not
/// hold its trace), with a progress bar when `progress`; returns how many.
pub fn write_trace<B: AsRef<[u8]>>(
    path: &std::path::Path,
    frames: impl ExactSizeIterator<Item = (u64, B)>,
    progress: bool,
) -> Result<u64, InputError> {
    let mut writer = crate::traffic::pcap::CaptureWriter::create(path, 0)?;
    let total = frames.len() as u64;
    let mut bar = crate::progress::Progress::new(progress, total, "frames");
    for (index, (time_ns, bytes)) in frames.enumerate() {
        writer.write(time_ns * 1000, bytes.as_ref())?;
        bar.tick(|| (index as u64 + 1, format!("frames to {}", path.display())));
    }
    bar.finish(total, format!("frames to {}", path.display()));
    writer.finish()?;
    Ok(total)
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
                spec.transport = Transport::Roce {
                    source: 0xc000,
                    opcode: crate::wire::bth::OPCODE_CNP,
                    dest_qp: 0x200 + u32::from(flow),
                    psn: 0,
                };
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
        time_ps = push_paced(&mut frames, time_ps, bytes, options.rate_gbps);
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
    /// Destinations are 10.0.`to_subnet`.x (1 by default; sources stay 10.0.0.x).
    pub to_subnet: u8,
}

impl FlowsOptions {
    pub fn validate(&self) -> Result<(), InputError> {
        check_size_and_rate(self.frame_len, self.rate_gbps)?;
        if self.dscp > 63 {
            return Err(InputError::flag("--dscp", format!("{} is not 0-63", self.dscp)));
        }
        Ok(())
    }
}

/// `packets` RoCEv2 SEND frames of `flows` flows (distinct source ports and QPs, from
/// 10.0.0.x to 10.0.`to_subnet`.x), taking turns, offered back to back at `rate_gbps`.
pub fn flows(options: &FlowsOptions) -> impl ExactSizeIterator<Item = (u64, Vec<u8>)> + '_ {
    let mut time_ps: u64 = 0;
    let flows = options.flows.max(1);
    (0..options.packets).map(move |index| {
        let flow = index as u32 % flows;
        let mut spec = FrameSpec::rocev2(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + (flow % 200) as u8)),
            IpAddr::V4(Ipv4Addr::new(10, 0, options.to_subnet, 1 + (flow % 200) as u8)),
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
        let sent_ns = time_ps / 1000;
        time_ps = paced(time_ps, bytes.len(), options.rate_gbps);
        (sent_ns, bytes)
    })
}

/// The collective or fault a `pattern` trace reproduces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Every host but `target` sends its messages to `target`.
    Incast { target: u8 },
    /// Ring all-reduce: each host sends 2 x (hosts - 1) chunks of message / hosts bytes per
    /// message to the next host in the ring (reduce-scatter, then all-gather).
    AllReduce,
    /// Every host sends each message to every other host, taking turns frame by frame (a
    /// queue pair per destination).
    AllToAll,
    /// Host `storm` sends PFC XOFF frames for `priority` every `interval_us` (a broken NIC),
    /// while every other host sends its messages to it, so its egress queue stays paused.
    PfcStorm { storm: u8, priority: u8, interval_us: f64 },
}

/// Options of a `pattern` trace. Hosts are numbered from 0; host h is 10.0.h.1 behind the
/// leaf's port for 10.0.h.0/24, with MAC 02:00:00:00:1h:01.
#[derive(Debug, Clone)]
pub struct PatternOptions {
    pub pattern: Pattern,
    pub hosts: u8,
    /// Bytes of each message (RDMA payload, before headers).
    pub message_bytes: u64,
    /// Messages each sender sends (per destination for all-to-all).
    pub messages: u32,
    /// Frame size without FCS (60-9216): payload per frame is this minus 58 header bytes.
    pub frame_len: usize,
    /// Each host's sending rate, Gb/s on the wire.
    pub rate_gbps: f64,
    /// Queue pairs per (sender, destination): frames take turns over them.
    pub flows: u32,
    pub dscp: u8,
    /// ECN bits of data frames (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// Tag data frames with 802.1Q VLAN 100 and this PCP.
    pub pcp: Option<u8>,
    /// Stop every sender after this long (µs); also the length of a PFC storm.
    pub duration_us: Option<f64>,
    /// Seeds each sender's start offset (within 1 µs) and the order its queue pairs take turns.
    pub seed: u64,
}

impl Default for PatternOptions {
    fn default() -> Self {
        Self {
            pattern: Pattern::Incast { target: 0 },
            hosts: 4,
            message_bytes: 65536,
            messages: 4,
            frame_len: 1078,
            rate_gbps: 100.0,
            flows: 1,
            dscp: 26,
            ecn: 0b10,
            pcp: None,
            duration_us: None,
            seed: 0,
        }
    }
}

/// RC SEND opcodes, by position of the frame in its message.
const SEND_FIRST: u8 = 0x00;
const SEND_MIDDLE: u8 = 0x01;
const SEND_LAST: u8 = 0x02;
const SEND_ONLY: u8 = 0x04;

/// One queue pair's remaining message: where it goes and how many frames are left.
struct QueuePair {
    destination: u8,
    qp: u32,
    source_port: u16,
    psn: u32,
    frames_left: u64,
    frames_per_message: u64,
    messages_left: u64,
}

/// Per sending host, its trace (timestamp ns, frame), indexed by host; hosts that send
/// nothing have an empty trace.
impl PatternOptions {
    /// Checks the options as the flags of `raceway gen` name them.
    pub fn validate(&self) -> Result<(), InputError> {
        check_size_and_rate(self.frame_len, self.rate_gbps)?;
        let checks: [(bool, &str, String); 7] = [
            ((2..=250).contains(&self.hosts), "--hosts", format!("{} is not 2-250", self.hosts)),
            (self.dscp <= 63, "--dscp", format!("{} is not 0-63", self.dscp)),
            (self.ecn <= 3, "--ecn", format!("{} is not 0-3", self.ecn)),
            (self.pcp.is_none_or(|pcp| pcp <= 7), "--pcp", format!("{} is not 0-7", self.pcp.unwrap_or(0))),
            (
                self.flows >= 1 && self.messages >= 1 && self.message_bytes >= 1,
                "--flows, --messages and --message-bytes",
                "must be at least 1".into(),
            ),
            (
                self.duration_us.is_none_or(|us| us.is_finite() && us > 0.0),
                "--duration-us",
                format!("{} is not positive", self.duration_us.unwrap_or(0.0)),
            ),
            (
                match self.pattern {
                    Pattern::Incast { target } => target < self.hosts,
                    Pattern::PfcStorm { storm, priority, interval_us } => {
                        storm < self.hosts && priority <= 7 && interval_us.is_finite() && interval_us > 0.0
                    }
                    _ => true,
                },
                "--target/--storm",
                "must be a host below --hosts, --priority 0-7, --interval-us positive".into(),
            ),
        ];
        match checks.into_iter().find(|(ok, _, _)| !ok) {
            Some((_, flag, problem)) => Err(InputError::flag(flag, problem)),
            None => Ok(()),
        }
    }
}

pub fn pattern(options: &PatternOptions) -> Vec<Vec<(u64, Vec<u8>)>> {
    let hosts = options.hosts.max(2);
    let mut rng = Rng::new(options.seed);
    let payload = options
        .frame_len
        .saturating_sub(crate::traffic::frames::ROCE_OVERHEAD + if options.pcp.is_some() { 4 } else { 0 })
        .max(1) as u64;
    let frames_for = |bytes: u64| bytes.div_ceil(payload).max(1);
    let deadline_ps = options.duration_us.map(|us| (us * 1e6) as u64);
    let mut traces = Vec::with_capacity(usize::from(hosts));
    for host in 0..hosts {
        // (destination, bytes per message, messages) for this host.
        let sends: Vec<(u8, u64, u64)> = match options.pattern {
            Pattern::Incast { target } | Pattern::PfcStorm { storm: target, .. } if host == target => Vec::new(),
            Pattern::Incast { target } | Pattern::PfcStorm { storm: target, .. } => {
                vec![(target, options.message_bytes, u64::from(options.messages))]
            }
            Pattern::AllReduce => {
                let chunk = options.message_bytes.div_ceil(u64::from(hosts));
                let steps = 2 * u64::from(hosts - 1);
                vec![((host + 1) % hosts, chunk, steps * u64::from(options.messages))]
            }
            Pattern::AllToAll => (0..hosts)
                .filter(|&other| other != host)
                .map(|other| (other, options.message_bytes, u64::from(options.messages)))
                .collect(),
        };
        let mut pairs: Vec<QueuePair> = Vec::new();
        for (destination, bytes, messages) in sends {
            for flow in 0..options.flows.max(1) {
                let qp = 0x1000 * (u32::from(host) + 1) + 0x10 * u32::from(destination) + flow;
                pairs.push(QueuePair {
                    destination,
                    qp,
                    source_port: 0xc000 | (qp as u16 & 0x3fff),
                    psn: 0,
                    frames_left: frames_for(bytes),
                    frames_per_message: frames_for(bytes),
                    // A destination's messages are dealt over its queue pairs.
                    messages_left: messages / u64::from(options.flows.max(1))
                        + u64::from(u64::from(flow) < messages % u64::from(options.flows.max(1))),
                });
            }
        }
        pairs.retain(|pair| pair.messages_left > 0);
        let mut time_ps = rng.below(1_000_000);
        let mut frames = Vec::new();
        let mut turn = rng.below(pairs.len().max(1) as u64) as usize;
        while !pairs.is_empty() && deadline_ps.is_none_or(|deadline| time_ps < deadline) {
            turn %= pairs.len();
            let pair = &mut pairs[turn];
            let position = pair.frames_per_message - pair.frames_left;
            let opcode = match (position == 0, pair.frames_left == 1) {
                (true, true) => SEND_ONLY,
                (true, false) => SEND_FIRST,
                (false, true) => SEND_LAST,
                (false, false) => SEND_MIDDLE,
            };
            let mut spec = FrameSpec::rocev2(
                IpAddr::V4(Ipv4Addr::new(10, 0, host, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, pair.destination, 1)),
                pair.qp,
            );
            spec.source_mac = host_mac(host);
            spec.frame_len = options.frame_len;
            spec.dscp = options.dscp;
            spec.ecn = options.ecn & 3;
            spec.vlan = options.pcp.map(|pcp| (pcp, 100));
            spec.transport =
                Transport::Roce { source: pair.source_port, opcode, dest_qp: pair.qp, psn: pair.psn & 0xff_ffff };
            let bytes = spec.build();
            time_ps = push_paced(&mut frames, time_ps, bytes, options.rate_gbps);
            pair.psn += 1;
            pair.frames_left -= 1;
            if pair.frames_left == 0 {
                pair.messages_left -= 1;
                pair.frames_left = pair.frames_per_message;
                if pair.messages_left == 0 {
                    pairs.remove(turn);
                    continue;
                }
            }
            turn += 1;
        }
        traces.push(frames);
    }
    if let Pattern::PfcStorm { storm, priority, interval_us } = options.pattern {
        traces[usize::from(storm.min(hosts - 1))] = pfc_storm(storm, priority, interval_us, options.duration_us);
    }
    traces
}

fn host_mac(host: u8) -> MacAddress {
    MacAddress([0x02, 0, 0, 0, 0x10 + host, 0x01])
}

/// Appends `bytes` at `time_ps` and returns when the link is free for the next frame.
fn push_paced(frames: &mut Vec<(u64, Vec<u8>)>, time_ps: u64, bytes: Vec<u8>, rate_gbps: f64) -> u64 {
    let next = paced(time_ps, bytes.len(), rate_gbps);
    frames.push((time_ps / 1000, bytes));
    next
}

/// When the frame after one of `len` bytes sent at `time_ps` may start, at `rate_gbps`.
fn paced(time_ps: u64, len: usize, rate_gbps: f64) -> u64 {
    let wire_bytes = crate::units::wire_bytes(len) as f64;
    time_ps + (wire_bytes * 8.0 * 1000.0 / rate_gbps).ceil() as u64
}

/// XOFF (0xFFFF quanta) frames for `priority` from `host`, every `interval_us`, for
/// `duration_us` (default 1 ms).
fn pfc_storm(host: u8, priority: u8, interval_us: f64, duration_us: Option<f64>) -> Vec<(u64, Vec<u8>)> {
    let interval_ps = ((interval_us.max(0.01)) * 1e6) as u64;
    let end_ps = (duration_us.unwrap_or(1000.0) * 1e6) as u64;
    let mut times = [0u16; 8];
    times[usize::from(priority & 7)] = 0xffff;
    let repr = crate::wire::pfc::Repr { class_enable: 1 << (priority & 7), times };
    let mut frames = Vec::new();
    let mut time_ps = 0;
    while time_ps < end_ps {
        let mut frame = vec![0u8; crate::wire::pfc::FRAME_LEN];
        repr.emit(host_mac(host), &mut frame);
        frames.push((time_ps / 1000, frame));
        time_ps += interval_ps;
    }
    frames
}

#[cfg(test)]
mod pattern_tests {
    use super::*;
    use crate::wire::parse::{parse, Payload};
    use crate::wire::IpAddress;

    fn destinations(trace: &[(u64, Vec<u8>)]) -> Vec<u32> {
        trace
            .iter()
            .filter_map(|(_, bytes)| match parse(bytes).unwrap().payload {
                Payload::Ip(ip) => match ip.destination {
                    IpAddress::V4(address) => Some(address),
                    IpAddress::V6(_) => None,
                },
                _ => None,
            })
            .collect()
    }

    #[test]
    fn incast_sends_every_message_from_every_other_host_to_the_target() {
        let options = PatternOptions {
            pattern: Pattern::Incast { target: 2 },
            hosts: 4,
            message_bytes: 10_000,
            messages: 3,
            frame_len: 1078, // 1020 payload bytes: 10 frames per message
            ..PatternOptions::default()
        };
        let traces = pattern(&options);
        assert!(traces[2].is_empty());
        for host in [0, 1, 3] {
            let trace = &traces[host];
            assert_eq!(trace.len(), 30);
            assert!(destinations(trace).iter().all(|&d| d == u32::from(Ipv4Addr::new(10, 0, 2, 1))));
            // Paced: 1102 wire bytes at 100 Gb/s are 88.16 ns apart.
            assert!(trace.windows(2).all(|w| w[1].0 - w[0].0 >= 88));
            // First frame of a message is SEND_FIRST, the tenth SEND_LAST.
            assert_eq!(trace[0].1[14 + 20 + 8], SEND_FIRST);
            assert_eq!(trace[9].1[14 + 20 + 8], SEND_LAST);
        }
        assert_eq!(pattern(&options), traces, "deterministic");
        assert_ne!(pattern(&PatternOptions { seed: 1, ..options }), traces, "the seed moves start offsets");
    }

    #[test]
    fn all_reduce_sends_to_the_next_host_two_chunks_per_step() {
        let options = PatternOptions {
            pattern: Pattern::AllReduce,
            hosts: 4,
            message_bytes: 4 * 1020,
            messages: 1,
            frame_len: 1078,
            ..PatternOptions::default()
        };
        let traces = pattern(&options);
        for (host, trace) in traces.iter().enumerate() {
            // 2 x 3 steps of one 1020-byte chunk each.
            assert_eq!(trace.len(), 6);
            let next = Ipv4Addr::new(10, 0, ((host + 1) % 4) as u8, 1);
            assert!(destinations(trace).iter().all(|&d| d == u32::from(next)));
        }
    }

    #[test]
    fn all_to_all_takes_turns_over_destinations() {
        let options = PatternOptions {
            pattern: Pattern::AllToAll,
            hosts: 3,
            message_bytes: 2040,
            messages: 1,
            frame_len: 1078,
            ..PatternOptions::default()
        };
        let traces = pattern(&options);
        for (host, trace) in traces.iter().enumerate() {
            let got = destinations(trace);
            assert_eq!(got.len(), 4);
            for other in (0..3).filter(|&o| o != host) {
                let address = u32::from(Ipv4Addr::new(10, 0, other as u8, 1));
                assert_eq!(got.iter().filter(|&&d| d == address).count(), 2);
            }
            assert_ne!(got[0], got[1], "destinations alternate");
        }
    }

    #[test]
    fn pfc_storm_host_sends_xoff_frames_and_the_others_send_to_it() {
        let options = PatternOptions {
            pattern: Pattern::PfcStorm { storm: 1, priority: 3, interval_us: 10.0 },
            hosts: 3,
            duration_us: Some(100.0),
            messages: 1000,
            ..PatternOptions::default()
        };
        let traces = pattern(&options);
        assert_eq!(traces[1].len(), 10);
        for (_, frame) in &traces[1] {
            let Payload::FlowControl(repr) = parse(frame).unwrap().payload else { panic!("not PFC") };
            assert_eq!((repr.class_enable, repr.times[3]), (0b1000, 0xffff));
        }
        // The others send to host 1 and stop at the duration.
        for host in [0, 2] {
            assert!(destinations(&traces[host]).iter().all(|&d| d == u32::from(Ipv4Addr::new(10, 0, 1, 1))));
            assert!(traces[host].last().unwrap().0 < 100_000);
        }
    }

    #[test]
    fn vlan_pcp_and_ecn_bits_are_set_as_asked() {
        let options = PatternOptions { pcp: Some(5), ecn: 1, dscp: 10, messages: 1, ..PatternOptions::default() };
        let frame = &pattern(&options)[1][0].1;
        let parsed = parse(frame).unwrap();
        assert_eq!(parsed.pcp, Some(5));
        let Payload::Ip(ip) = parsed.payload else { panic!() };
        assert_eq!((ip.dscp, ip.ecn), (10, 1));
        assert_eq!(frame.len(), 1078);
    }
}
