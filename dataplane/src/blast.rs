//! `raceway blast`: a paced traffic generator on one DPDK port, for load tests that need a
//! known offered rate (the zero-loss search in perf/zero-loss.sh) and as the hosts of live
//! demos and tests. Once its link is up and a settling second has passed, it replays a trace's
//! frames in a loop, copying each into a fresh mbuf, at `rate_gbps` counted on the wire
//! (padding, FCS, preamble and IFG included), paced by the TSC, for `duration`.
//!
//! It receives on its port too, and counts what arrives. With `pfc` set it behaves like a
//! RoCE NIC with a transmit queue per priority:
//! - a frame's priority is its VLAN PCP, or for untagged IP its DSCP / 8 (a NIC's default
//!   trust-DSCP map: DSCP 26 is priority 3, DSCP 48 priority 6), else 0;
//! - a received PFC frame stops the priorities it names for quanta x 512 bit times at the
//!   link speed given, and time 0 resumes at once; the other priorities keep their turns in
//!   trace order (frames of one priority never pass each other);
//! - a frame the tx queue does not take waits for room instead of being dropped, as a host
//!   waits on a full ring: lossless from end to end.
//!
//! Without `pfc`, received frames are only counted, and frames the tx queue refuses are freed
//! and counted (`refused`), so a zero-loss search sees overload.
//!
//! With `tx_queues` above one, bursts take turns on the port's tx queues (a burst the queue
//! does not take whole is finished on the same queue first): over net_memif each tx queue is
//! one of the peer's rx queues, as RSS would spread a host's flows over a switch port's.
//! PFC frames are read from its one rx queue.
//!
//! A net_memif client's link that goes down is retrained, as a NIC's is: the port is
//! restarted every `RETRAIN_EVERY` until it comes back (the driver connects only when the port
//! starts, so it would never reach a server that restarted). A memif server waits for its
//! client to come back by itself. (A host that reconnects while a switch's memif server is
//! being torn down can crash that switch's process in DPDK 22.11, `memif_listener_handler`
//! spinning on a closed socket; so the live tests that restart a switch put its memif ports
//! on the client side, the hosts serving.) With `sequence`, RoCEv2 frames carry consecutive PSNs per flow and the
//! frames received are counted by them (`sequence`). With `progress`, the report is written to
//! a file every `PROGRESS_EVERY`, for a test that reads the counts while blast runs. SIGINT
//! and SIGTERM end the run as its duration would.
//!
//! Invariant: every frame of the trace handed out is sent, refused and counted, or (with
//! `pfc`) still waiting at exit and counted as `unsent`; every mbuf is back in the pool at exit.

mod arp;
mod sequence;

use crate::dpdk::{self, Burst, DpdkError, Eal, Mempool, Port, TxQueues};
use crate::error::InputError;
use crate::packet::PacketBuf;
use crate::wire::parse::{parse, Payload};
pub use arp::ArpAnswerer;
use sequence::{SequenceCounter, SequenceReport, Stamper};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Time between the link coming up and the first frame.
pub const SETTLE: Duration = Duration::from_secs(1);
/// How often the link is checked, and a link found down twice in a row restarted.
const RETRAIN_EVERY: Duration = Duration::from_millis(25);
/// A host whose rx burst was not full and whose next frame is due in `IDLE_AT_LEAST` or more
/// sleeps until then, at most `IDLE_SLEEP`, instead of spinning: a NIC costs its host no CPU,
/// and the switch under test shares the machine's. (A sleep overshoots by the kernel's timer
/// slack, about 50 us; the pace catches up at the next wake, within its lag limit.)
const IDLE_SLEEP: Duration = Duration::from_micros(100);
const IDLE_AT_LEAST: Duration = Duration::from_micros(20);
/// How often `progress` is written.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct BlastOptions {
    pub device: String,
    pub rate_gbps: f64,
    pub duration: Duration,
    pub eal: Vec<String>,
    /// Honour PFC as a NIC would, with pause quanta at this link speed (Gb/s).
    pub pfc_link_gbps: Option<f64>,
    /// Tx queues the bursts take turns on.
    pub tx_queues: u16,
    /// Stamp RoCEv2 frames with consecutive PSNs per flow, and count received ones by them.
    pub sequence: bool,
    /// A file the report is written to while blast runs.
    pub progress: Option<PathBuf>,
    /// The hosts behind the port that answer ARP (`arp`).
    pub answer_arp: Option<ArpAnswerer>,
}

impl BlastOptions {
    pub fn validate(&self) -> Result<(), InputError> {
        if !(self.rate_gbps.is_finite() && self.rate_gbps > 0.0) {
            return Err(InputError::flag("--rate-gbps", format!("{} is not positive", self.rate_gbps)));
        }
        if let Some(link) = self.pfc_link_gbps.filter(|link| !(link.is_finite() && *link > 0.0)) {
            return Err(InputError::flag("--pfc", format!("{link} is not a positive link speed in Gb/s")));
        }
        if !(1..=crate::config::MAX_RX_QUEUES).contains(&self.tx_queues) {
            let most = crate::config::MAX_RX_QUEUES;
            return Err(InputError::flag("--tx-queues", format!("{} is not between 1 and {most}", self.tx_queues)));
        }
        Ok(())
    }
}

/// The frames of `trace` to send in a loop: at least one, each fitting an mbuf.
pub fn load_frames(trace: &std::path::Path) -> Result<Vec<Vec<u8>>, InputError> {
    let frames: Vec<Vec<u8>> = crate::traffic::pcap::read_trace(&crate::traffic::pcap::TraceSpec::file(trace))?
        .into_iter()
        .map(|frame| frame.bytes)
        .collect();
    if frames.is_empty() {
        return Err(InputError::new(trace.display(), "", "no frames to send"));
    }
    if let Some(index) = frames.iter().position(|frame| frame.len() > 2048) {
        return Err(InputError::new(trace.display(), format!("record {index}"), "longer than an mbuf (2048 bytes)"));
    }
    Ok(frames)
}

impl BlastReport {
    /// The JSON line `raceway blast` prints.
    pub fn to_json(&self, honours_pfc: bool) -> serde_json::Value {
        let seconds = self.elapsed.as_secs_f64();
        serde_json::json!({
            "sent": self.sent,
            "sent_bytes": self.sent_bytes,
            "refused": self.refused,
            "unsent": self.unsent,
            "received": self.received,
            "pfc_rx": self.pfc_rx,
            "paused_us": self.paused_ns.map(|ns| ns as f64 / 1000.0),
            "elapsed_s": seconds,
            "mpps": self.sent as f64 / seconds / 1e6,
            "gbps_on_wire": (self.sent_bytes + 24 * self.sent) as f64 * 8.0 / seconds / 1e9,
            "honours_pfc": honours_pfc,
            "link_retrains": self.link_retrains,
            "arp_answered": self.arp_answered,
            "sequence": self.sequence,
            "mbufs": { "pool": self.mbufs_in_pool, "available_at_exit": self.mbufs_available_at_exit },
        })
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct BlastReport {
    pub sent: u64,
    pub sent_bytes: u64,
    /// Frames the tx queue did not take in time (freed, counted). Always 0 with PFC.
    pub refused: u64,
    /// With PFC: frames that were waiting for the tx queue at exit (freed, counted).
    pub unsent: u64,
    /// Frames received that were not PFC.
    pub received: u64,
    /// PFC frames received, per priority they name.
    pub pfc_rx: [u64; 8],
    /// Time each priority spent paused, ns.
    pub paused_ns: [u64; 8],
    pub elapsed: Duration,
    /// Restarts of a port whose link was down.
    pub link_retrains: u64,
    /// ARP requests answered (`answer_arp`); a reply the tx queue did not take is not
    /// counted, and the asker asks again.
    pub arp_answered: u64,
    /// With `sequence`: the received RoCEv2 frames counted by PSN.
    pub sequence: Option<SequenceReport>,
    pub mbufs_in_pool: u32,
    pub mbufs_available_at_exit: u32,
}

/// Watches the link every `RETRAIN_EVERY` and says when to restart the port: when it was down
/// at two checks in a row (a link coming up after a start gets one period).
struct LinkKeeper {
    every: u64,
    next_check: u64,
    down_before: bool,
}

impl LinkKeeper {
    fn new(tsc_hz: u64, now: u64) -> Self {
        let every = ticks(tsc_hz, RETRAIN_EVERY);
        Self { every, next_check: now + every, down_before: false }
    }

    fn due(&mut self, port: &Port, now: u64) -> bool {
        if now < self.next_check {
            return false;
        }
        self.next_check = now + self.every;
        let down = !port.link_up();
        let retrain = down && self.down_before;
        if down != self.down_before {
            if down {
                tracing::warn!("link down: retraining every {} ms until it is back", RETRAIN_EVERY.as_millis());
            } else {
                tracing::info!("link up again");
            }
        }
        self.down_before = down;
        retrain
    }
}

/// Whether `device` is a net_memif client (`role=client`; DPDK's default role is server).
fn is_memif_client(device: &str) -> bool {
    crate::config::device_name(device).starts_with("net_memif") && device.split(',').any(|pair| pair == "role=client")
}

/// `duration` in TSC ticks.
fn ticks(tsc_hz: u64, duration: Duration) -> u64 {
    (duration.as_secs_f64() * tsc_hz as f64) as u64
}

/// Writes the report so far to `path` (through a file beside it, renamed, so a reader never
/// sees half of it). A failure is logged once and the run goes on: the file is an observer.
fn write_progress(path: &std::path::Path, report: &BlastReport, honours_pfc: bool) {
    static FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let partial = path.with_extension("partial");
    let written = std::fs::write(&partial, report.to_json(honours_pfc).to_string())
        .and_then(|()| std::fs::rename(&partial, path));
    if let Err(error) = written {
        if !FAILED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::error!("--progress: cannot write '{}': {error}", path.display());
        }
    }
}

/// The priority a NIC gives `frame`: its VLAN PCP, else DSCP / 8 for IP, else 0.
pub fn nic_priority(frame: &[u8]) -> usize {
    match parse(frame) {
        Ok(parsed) => match (parsed.pcp, parsed.payload) {
            (Some(pcp), _) => usize::from(pcp & 7),
            (None, Payload::Ip(ip)) => usize::from(ip.dscp >> 3),
            _ => 0,
        },
        Err(_) => 0,
    }
}

/// Per-priority transmit queues over one trace: each priority walks its own frames in trace
/// order, and the next frame sent is the earliest in trace order among priorities not paused.
struct PriorityQueues {
    /// Trace indices of each priority's frames.
    frames: [Vec<usize>; 8],
    /// Next position in `frames[p]`, and how many times it went round.
    cursor: [usize; 8],
    lap: [u64; 8],
    trace_len: u64,
}

impl PriorityQueues {
    fn new(trace: &[Vec<u8>]) -> Self {
        let mut frames: [Vec<usize>; 8] = Default::default();
        for (index, frame) in trace.iter().enumerate() {
            frames[nic_priority(frame)].push(index);
        }
        Self { frames, cursor: [0; 8], lap: [0; 8], trace_len: trace.len() as u64 }
    }

    /// The trace index of the next frame to send, among priorities whose bit in `ready` is
    /// set; advances that priority.
    fn next(&mut self, ready: u8) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for priority in 0..8 {
            if ready & (1 << priority) == 0 || self.frames[priority].is_empty() {
                continue;
            }
            let index = self.frames[priority][self.cursor[priority]];
            let position = self.lap[priority] * self.trace_len + index as u64;
            if best.is_none_or(|(best_position, _)| position < best_position) {
                best = Some((position, priority));
            }
        }
        let (_, priority) = best?;
        let index = self.frames[priority][self.cursor[priority]];
        self.cursor[priority] += 1;
        if self.cursor[priority] == self.frames[priority].len() {
            self.cursor[priority] = 0;
            self.lap[priority] += 1;
        }
        Some(index)
    }
}

/// Received pauses per priority, in TSC ticks, with the time spent paused.
struct Pauses {
    /// Ticks per pause quantum (512 bit times at the link speed), 32.32 fixed point.
    ticks_per_quantum_q32: u128,
    until: [u64; 8],
    since: [Option<u64>; 8],
    paused_ticks: [u64; 8],
}

impl Pauses {
    fn new(tsc_hz: u64, link_gbps: f64) -> Self {
        let quantum_s = 512.0 / (link_gbps * 1e9);
        Self {
            ticks_per_quantum_q32: (quantum_s * tsc_hz as f64 * 4_294_967_296.0) as u128,
            until: [0; 8],
            since: [None; 8],
            paused_ticks: [0; 8],
        }
    }

    /// Closes the pause interval of `priority` as of `now`.
    fn settle(&mut self, priority: usize, now: u64) {
        if let Some(since) = self.since[priority].take() {
            self.paused_ticks[priority] += self.until[priority].min(now).saturating_sub(since);
        }
    }

    /// Applies a pause of `quanta` (0 resumes) for `priority` received at `now`.
    fn apply(&mut self, priority: usize, quanta: u16, now: u64) {
        self.settle(priority, now);
        if quanta == 0 {
            self.until[priority] = now;
        } else {
            self.until[priority] = now + ((u128::from(quanta) * self.ticks_per_quantum_q32) >> 32) as u64;
            self.since[priority] = Some(now);
        }
    }

    /// Bit n set when priority n may send at `now`.
    fn ready(&self, now: u64) -> u8 {
        (0..8).filter(|&p| self.until[p] <= now).fold(0, |mask, p| mask | 1 << p)
    }
}

pub fn run(frames: &[Vec<u8>], options: &BlastOptions) -> Result<BlastReport, DpdkError> {
    let mut args = options.eal.clone();
    args.push("--vdev".into());
    args.push(options.device.clone());
    run_with_eal(&Eal::init(&args)?, frames, options)
}

fn run_with_eal(eal: &Eal, frames: &[Vec<u8>], options: &BlastOptions) -> Result<BlastReport, DpdkError> {
    let pool = std::sync::Arc::new(Mempool::new(
        eal,
        "blast_mbufs",
        8191,
        256,
        dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
        -1,
    )?);
    let name = crate::config::device_name(&options.device);
    let id = Port::find(name)?;
    // MTU 0: the driver's default; blast's frames fit one mbuf.
    let port = std::sync::Arc::new(Port::start(id, "blast", &pool, 1, 0, TxQueues::Data(options.tx_queues))?);
    let claimed = |what: &str| DpdkError {
        context: format!("blast: {}", options.device),
        problem: format!("{what} already claimed"),
    };
    let mut receiver = port.rx_queue(0).ok_or_else(|| claimed("rx queue 0"))?;
    let mut transmitter = port.transmitter().ok_or_else(|| claimed("the tx queues"))?;
    dpdk::install_stop_signals();
    // Settle before the trial: the receiver may still be starting its other ports after our
    // link came up, and frames sent then would find its rx ring full.
    std::thread::sleep(SETTLE);
    tracing::info!(
        "sending at {} Gb/s for {:.1} s on {}",
        options.rate_gbps,
        options.duration.as_secs_f64(),
        options.device
    );
    let tsc_hz = eal.tsc_hz();
    // Ticks per wire byte at the rate, in 32.32 fixed point.
    let ticks_per_byte = ((tsc_hz as f64 * 8.0 / (options.rate_gbps * 1e9)) * 4_294_967_296.0) as u128;
    let start = dpdk::rdtsc();
    let end = start + ticks(tsc_hz, options.duration);
    let mut report = BlastReport::default();
    let mut stamper = options.sequence.then(|| Stamper::new(frames));
    let mut counter = options.sequence.then(SequenceCounter::default);
    let mut queues = PriorityQueues::new(frames);
    let mut pauses = options.pfc_link_gbps.map(|gbps| Pauses::new(tsc_hz, gbps));
    let mut due_q32: u128 = u128::from(start) << 32;
    let mut burst = Burst::default();
    // The tx queue whose turn it is: it keeps the turn until it has taken the whole burst.
    let mut tx_queue = 0;
    let mut rx = Burst::default();
    let mut replies = Burst::default();
    let started = Instant::now();
    let mut link = LinkKeeper::new(tsc_hz, start);
    let retrains = is_memif_client(&options.device);
    // Whether a retrain left the port stopped.
    let mut stopped = false;
    let progress_every = ticks(tsc_hz, PROGRESS_EVERY);
    let idle_at_least = ticks(tsc_hz, IDLE_AT_LEAST);
    let mut next_progress = start;
    loop {
        let now = dpdk::rdtsc();
        if now >= end || dpdk::stop_requested() {
            break;
        }
        let got = if stopped { 0 } else { receiver.burst(&mut rx) };
        for mbuf in rx.drain() {
            match parse(mbuf.data()).map(|parsed| parsed.payload) {
                Ok(Payload::FlowControl(repr)) => {
                    for (priority, time) in repr.named() {
                        report.pfc_rx[priority] += 1;
                        if let Some(pauses) = pauses.as_mut() {
                            pauses.apply(priority, time, now);
                        }
                    }
                }
                _ => {
                    report.received += 1;
                    if let Some(counter) = counter.as_mut() {
                        counter.count(mbuf.data());
                    }
                    if let Some(reply) = options.answer_arp.as_ref().and_then(|hosts| hosts.reply(mbuf.data())) {
                        if let Some(mut answer) = pool.alloc() {
                            if answer.append(&reply) {
                                replies.push(answer);
                            }
                        }
                    }
                }
            }
        }
        if !replies.is_empty() && !stopped {
            // Replies go ahead of the paced frames, on the first tx queue; one the queue
            // does not take is dropped, as a host's would be.
            report.arp_answered += transmitter.burst_on(0, &mut replies) as u64;
            replies.drain().for_each(drop);
        }
        if retrains && link.due(&port, now) {
            report.link_retrains += 1;
            // A start that fails (a memif server not listening) leaves the port stopped, not
            // to be polled until a later retrain starts it.
            stopped = match transmitter.restart_port(&mut receiver) {
                Ok(()) => false,
                Err(error) => {
                    tracing::debug!("{error}");
                    true
                }
            };
        }
        if let Some(path) = options.progress.as_ref().filter(|_| now >= next_progress) {
            next_progress = now + progress_every;
            report.elapsed = started.elapsed();
            report.sequence = counter.as_ref().map(|counter| counter.report);
            write_progress(path, &report, pauses.is_some());
        }
        // After a stall of this process or a pause, resume the pace from now instead of
        // sending the backlog back to back: a catch-up burst would overflow the receiver's
        // ring and be blamed on it. Frames skipped this way were never offered (the reported
        // rate is what was sent).
        let lag_limit = u128::from(now) << 32;
        let max_lag = 32 * 84 * ticks_per_byte;
        if due_q32 + max_lag < lag_limit {
            due_q32 = lag_limit;
        }
        let ready = pauses.as_ref().map_or(0xff, |pauses| pauses.ready(now));
        // Queue every frame that is due, up to a burst.
        while !burst.is_full() && (due_q32 >> 32) as u64 <= now {
            let Some(index) = queues.next(ready) else { break };
            let Some(mut mbuf) = pool.alloc() else { break };
            let frame = &frames[index];
            if !mbuf.append(frame) {
                continue; // longer than an mbuf: skipped (the trace is checked up front)
            }
            if let Some(stamper) = stamper.as_mut() {
                stamper.stamp(index, mbuf.data_mut());
            }
            due_q32 += u128::from(crate::units::wire_bytes(frame.len())) * ticks_per_byte;
            report.sent_bytes += frame.len() as u64;
            burst.push(mbuf);
        }
        if !burst.is_empty() && !stopped {
            let queued = burst.len();
            let sent = transmitter.burst_on(tx_queue, &mut burst);
            report.sent += sent as u64;
            if sent == queued || pauses.is_none() {
                tx_queue = (tx_queue + 1) % port.tx_queues;
            }
            // A full tx queue: a NIC honouring PFC waits for room; a load generator frees what
            // would fall behind the pace.
            if sent < queued && pauses.is_none() {
                report.refused += burst.len() as u64;
                report.sent_bytes -= burst.drain().map(|mbuf| mbuf.len() as u64).sum::<u64>();
            }
        }
        let due = (due_q32 >> 32) as u64;
        if got < dpdk::BURST && burst.is_empty() && due >= now + idle_at_least {
            let until_due = Duration::from_secs_f64((due - now) as f64 / tsc_hz as f64);
            std::thread::sleep(until_due.min(IDLE_SLEEP));
        }
    }
    report.elapsed = started.elapsed();
    report.unsent = burst.len() as u64;
    report.sent_bytes -= burst.drain().map(|mbuf| mbuf.len() as u64).sum::<u64>();
    if let Some(pauses) = pauses.as_mut() {
        let now = dpdk::rdtsc();
        for priority in 0..8 {
            pauses.settle(priority, now);
            report.paused_ns[priority] =
                (u128::from(pauses.paused_ticks[priority]) * 1_000_000_000 / u128::from(tsc_hz.max(1))) as u64;
        }
    }
    // Let the receiver take what is still in the link's ring: closing a memif port resets its
    // rings, and frames still there would vanish although they were sent. Keep receiving
    // meanwhile, so the peer's frames do not pile up in ours.
    let settle_end = Instant::now() + SETTLE;
    while Instant::now() < settle_end && !stopped {
        receiver.burst(&mut rx);
        for mbuf in rx.drain() {
            if matches!(parse(mbuf.data()), Ok(parsed) if matches!(parsed.payload, Payload::FlowControl(_))) {
                continue;
            }
            report.received += 1;
            if let Some(counter) = counter.as_mut() {
                counter.count(mbuf.data());
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(rx);
    report.sequence = counter.map(|counter| counter.report);
    // The handles hold the port; dropping all three closes it before the pool is counted.
    drop((receiver, transmitter, port));
    report.mbufs_in_pool = pool.size();
    report.mbufs_available_at_exit = pool.available();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::frames::FrameSpec;

    fn frame(dscp: u8, vlan_pcp: Option<u8>) -> Vec<u8> {
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.1".parse().unwrap(), 1);
        spec.dscp = dscp;
        spec.vlan = vlan_pcp.map(|pcp| (pcp, 100));
        spec.build()
    }

    #[test]
    fn only_a_memif_client_retrains() {
        assert!(is_memif_client("net_memif0,role=client,socket=/a.sock"));
        assert!(!is_memif_client("net_memif0,role=server,socket=/a.sock"));
        assert!(!is_memif_client("net_memif0,socket=/a.sock"), "a server by default");
        assert!(!is_memif_client("net_af_packet0,iface=role=client"));
    }

    #[test]
    fn a_nic_takes_the_priority_from_pcp_or_dscp_over_8() {
        assert_eq!(nic_priority(&frame(26, None)), 3);
        assert_eq!(nic_priority(&frame(48, None)), 6);
        assert_eq!(nic_priority(&frame(0, None)), 0);
        assert_eq!(nic_priority(&frame(0, Some(5))), 5, "PCP wins over DSCP");
        assert_eq!(nic_priority(&[0u8; 10]), 0);
    }

    #[test]
    fn priority_queues_keep_trace_order_and_let_others_pass_a_paused_priority() {
        // Trace: p3, p0, p3, p0.
        let trace = vec![frame(26, None), frame(0, None), frame(26, None), frame(0, None)];
        let mut queues = PriorityQueues::new(&trace);
        let all: Vec<usize> = (0..6).map(|_| queues.next(0xff).unwrap()).collect();
        assert_eq!(all, [0, 1, 2, 3, 0, 1], "trace order, round and round");
        // Priority 3 paused: only priority 0's frames go, in their order.
        let mut queues = PriorityQueues::new(&trace);
        let paused: Vec<usize> = (0..3).map(|_| queues.next(!0x08).unwrap()).collect();
        assert_eq!(paused, [1, 3, 1]);
        // Resumed: priority 3 goes on from where it was, first in trace order.
        assert_eq!(queues.next(0xff), Some(0));
        assert_eq!(queues.next(0x00), None, "everything paused");
    }

    #[test]
    fn pauses_last_their_quanta_and_xon_resumes() {
        // A 1 GHz TSC and a 1 Gb/s link: a quantum is 512 ns = 512 ticks.
        let mut pauses = Pauses::new(1_000_000_000, 1.0);
        pauses.apply(3, 100, 1_000);
        assert_eq!(pauses.ready(1_000 + 51_199), !0x08);
        assert_eq!(pauses.ready(1_000 + 51_200), 0xff);
        // XOFF at 100_000 for 0xffff quanta, XON 10_000 ticks later.
        pauses.apply(3, 0xffff, 100_000);
        assert_eq!(pauses.ready(105_000), !0x08);
        pauses.apply(3, 0, 110_000);
        assert_eq!(pauses.ready(110_000), 0xff);
        pauses.settle(3, 200_000);
        assert_eq!(pauses.paused_ticks[3], 51_200 + 10_000);
    }
}
