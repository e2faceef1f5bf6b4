//! `raceway blast`: a paced traffic generator on one DPDK port, for load tests that need a
//! known offered rate (the zero-loss search in perf/zero-loss.sh). Once its link is up and a
//! settling second has passed, it replays a trace's frames in a loop, copying each into a
//! fresh mbuf, at `rate_gbps` counted on the wire (24 bytes of preamble, IFG and FCS per
//! frame), paced by the TSC, for `duration`.
//!
//! Invariant: frames the port does not accept are counted (`refused`), never silently
//! dropped, and every mbuf is back in the pool at exit.

#![forbid(unsafe_code)]

use crate::buffer::PacketBuf;
use crate::dpdk::{self, Burst, DpdkError, Eal, Mempool, Port};
use std::time::{Duration, Instant};

/// Time between the link coming up and the first frame.
pub const SETTLE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct BlastOptions {
    pub device: String,
    pub rate_gbps: f64,
    pub duration: Duration,
    pub eal: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct BlastReport {
    pub sent: u64,
    pub sent_bytes: u64,
    /// Frames the tx queue did not take in time (freed, counted).
    pub refused: u64,
    pub elapsed: Duration,
    pub mbufs_in_pool: u32,
    pub mbufs_available_at_exit: u32,
}

pub fn run(frames: &[Vec<u8>], options: &BlastOptions) -> Result<BlastReport, DpdkError> {
    let mut args = options.eal.clone();
    args.push("--vdev".into());
    args.push(options.device.clone());
    let eal = Eal::init(&args)?;
    let report = run_with_eal(&eal, frames, options);
    drop(eal);
    report
}

fn run_with_eal(eal: &Eal, frames: &[Vec<u8>], options: &BlastOptions) -> Result<BlastReport, DpdkError> {
    let pool = Mempool::new("blast_mbufs", 8191, 256, dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16, -1)?;
    let name = crate::live::device_name(&options.device);
    let id = Port::find(name)?;
    let port = Port::start(id, "blast", &pool, 1)?;
    // Settle before the trial: the receiver may still be starting its other ports after our
    // link came up, and frames sent then would find its rx ring full.
    std::thread::sleep(SETTLE);
    let tsc_hz = eal.tsc_hz();
    // Ticks per wire byte at the rate, in 32.32 fixed point.
    let ticks_per_byte = ((tsc_hz as f64 * 8.0 / (options.rate_gbps * 1e9)) * 4_294_967_296.0) as u128;
    let start = dpdk::rdtsc();
    let end = start + (options.duration.as_secs_f64() * tsc_hz as f64) as u64;
    let mut report = BlastReport::default();
    let mut due_q32: u128 = u128::from(start) << 32;
    let mut next = 0usize;
    let mut burst = Burst::default();
    let started = Instant::now();
    loop {
        let now = dpdk::rdtsc();
        if now >= end {
            break;
        }
        // After a stall of this process, resume the pace from now instead of sending the
        // backlog back to back: a catch-up burst would overflow the receiver's ring and be
        // blamed on it. Frames skipped this way were never offered (the reported rate is what
        // was sent).
        let lag_limit = u128::from(now) << 32;
        let max_lag = 32 * 84 * ticks_per_byte;
        if due_q32 + max_lag < lag_limit {
            due_q32 = lag_limit;
        }
        // Queue every frame that is due, up to a burst.
        while !burst.is_full() && (due_q32 >> 32) as u64 <= now {
            let Some(mut mbuf) = pool.alloc() else { break };
            let frame = &frames[next];
            next = (next + 1) % frames.len();
            if !mbuf.append(frame) {
                continue; // longer than an mbuf: skipped (the trace is checked up front)
            }
            due_q32 += (frame.len() as u128 + 24) * ticks_per_byte;
            report.sent_bytes += frame.len() as u64;
            burst.push(mbuf);
        }
        if !burst.is_empty() {
            let queued = burst.len();
            let sent = port.tx_burst(&mut burst);
            report.sent += sent as u64;
            // A full tx queue: the frames still waiting would fall behind the pace.
            if sent < queued {
                report.refused += burst.len() as u64;
                report.sent_bytes -= burst.drain().map(|mbuf| mbuf.len() as u64).sum::<u64>();
            }
        }
    }
    report.elapsed = started.elapsed();
    drop(burst);
    // Let the receiver take what is still in the link's ring: closing a memif port resets its
    // rings, and frames still there would vanish although they were sent.
    std::thread::sleep(SETTLE);
    drop(port);
    report.mbufs_in_pool = pool.size();
    report.mbufs_available_at_exit = pool.available();
    Ok(report)
}
