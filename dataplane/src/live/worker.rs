//! A forwarding worker: the switch on one lcore, with the tx bursts and shapers of the ports
//! it owns, and its run-to-completion loop (its halves `begin_loop` and `end_loop`, and the
//! shutdown's hold on the lossless senders, `StopHold`, then its `drain`).
//!
//! Invariant: every frame a worker takes is handed to its switch, which counts it (forwarded,
//! queued or dropped by reason); at exit every frame the worker still holds is either sent,
//! counted as dropped (`buffer_full`) or, never taken by a tx queue, freed and counted in
//! `unsent`.

use super::clock::{Clock, Ticker};
use super::ingress::{Ingress, LongFrames};
use super::setup::WorkerKit;
use super::shard_ring::Links;
use super::shared::Shared;
use super::DRAIN_FOR;
use crate::config::Config;
use crate::control::ControlLink;
use crate::dpdk::{self, Burst, Mbuf, Mempool, PortTx, RxQueue, BURST};
use crate::engine::port_tx;
use crate::link::Follower;
use crate::observe::capture::Tap;
use crate::packet::PacketBuf;
use crate::switch::{CutThrough, QueueAll, Switch};
use crate::tm::shard::BATCH;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// How far ahead of its wire time the shaper hands frames to a port's NIC: a tx burst of
/// maximum standard frames (what is handed over cannot be recalled by a pause, so the auto
/// headroom counts it; see the engine's notes).
pub fn shaper_window_ps(port: &crate::config::PortConfig) -> u64 {
    const _: () = assert!(crate::config::plan::LOOKAHEAD_FRAMES == BURST as u64, "the lookahead is one tx burst");
    crate::config::plan::lookahead_ps(port)
}

/// The per-lcore forwarding state: the switch, tx bursts and shapers for the ports it owns.
pub(super) struct Worker {
    pub switch: Switch<Mbuf>,
    clock: Clock,
    pub ticker: Ticker,
    /// The ports it transmits on.
    pub owned: Vec<usize>,
    /// Each owned port's transmitter, by port index (`None` for the others').
    tx: Vec<Option<PortTx>>,
    /// The rx queues it polls, with their ports.
    pub rx: Vec<(usize, RxQueue)>,
    /// How many frames the next rx burst of each of `rx` takes (`rx_burst_size`).
    rx_sizes: Vec<usize>,
    /// Per port: the loop time of its last rx burst with frames (from this worker's queues),
    /// for the ports a stop holds (`HOLD_SENDERS_WITHIN_PS`).
    last_rx_ps: Vec<u64>,
    /// Whether it takes the control plane's frames (one worker does).
    pub injects: bool,
    /// Each port's tx bursts and shaper window (only the owned ports' are used).
    egress: Vec<Egress>,
    /// The port states it has applied to its switch.
    followed: Follower,
    /// Its stats slot, and the last reload it applied (`Shared::take_reconfiguration`).
    slot: usize,
    reloads_seen: u64,
    /// For the PFC frames the switch sends.
    pool: std::sync::Arc<Mempool>,
    /// What the rx prologue does with frames longer than one mbuf.
    long_frames: LongFrames,
    /// Copies captured ports' frames for `--capture`.
    tap: Option<Tap>,
    /// The rings to and from the control thread, and the FIB it publishes (`[control]`).
    control: Option<std::sync::Arc<ControlLink>>,
}

/// How long a stopping worker goes on forwarding after the last frame in a lossless
/// priority arrived: its senders were sent XOFF, and one that honours PFC stops within its
/// response time; what it sent before is still in the rx rings, and is forwarded rather than
/// left there when the ports close. A host's response here is its poll loop, which a busy CPU
/// can stretch to milliseconds.
const HOLD_QUIET: std::time::Duration = std::time::Duration::from_millis(10);
/// The longest a stopping worker holds, whatever still arrives (a sender that ignores PFC).
const HOLD_AT_MOST: std::time::Duration = std::time::Duration::from_millis(100);
/// The ports a stop holds: those on which this worker received in the last 100 ms (ps). A
/// port whose peer has been quiet longer is left without PFC frames, and the stop without the
/// hold's wait when none is sending.
const HOLD_SENDERS_WITHIN_PS: u64 = 100_000_000_000;

/// A stopping worker's hold on its lossless senders (`Switch::hold_lossless_senders`): it
/// forwards on until `HOLD_QUIET` has passed with no frame in a lossless priority, or
/// `HOLD_AT_MOST` in all; then it drains. A port polled by another worker than its owner is
/// held only when its owner polled frames from it lately too.
struct StopHold {
    began: Instant,
    last_heard: Instant,
}

impl StopHold {
    fn new(now: Instant) -> Self {
        Self { began: now, last_heard: now }
    }

    fn heard(&mut self, now: Instant) {
        self.last_heard = now;
    }

    fn over(&self, now: Instant) -> bool {
        now.duration_since(self.last_heard) >= HOLD_QUIET || now.duration_since(self.began) >= HOLD_AT_MOST
    }
}

/// Per-port transmit state on the worker. When the port's virtual link is next free is the
/// switch's `link_free_ps`, which load balancing reads too.
struct Egress {
    pending: Burst,
    /// A PFC frame the tx queue has not taken yet (it goes before any pending data).
    control: Burst,
    /// How far ahead of now the shaper lets frames go, so tx bursts fill.
    window_ps: u64,
}

impl Worker {
    /// A worker publishing into stats slot `slot`, on the common `clock`.
    pub fn new(config: &Config, kit: WorkerKit, switch: Switch<Mbuf>, slot: usize, clock: Clock, tsc_hz: u64) -> Self {
        let egress = config
            .ports
            .iter()
            .map(|port| Egress {
                pending: Burst::default(),
                control: Burst::default(),
                window_ps: shaper_window_ps(port),
            })
            .collect();
        Self {
            switch,
            clock,
            ticker: Ticker::new(slot, tsc_hz),
            owned: Vec::new(),
            tx: config.ports.iter().map(|_| None).collect(),
            rx: Vec::new(),
            rx_sizes: Vec::new(),
            last_rx_ps: vec![0; config.ports.len()],
            injects: false,
            egress,
            followed: Follower::new(),
            slot,
            reloads_seen: 0,
            pool: kit.pool,
            long_frames: kit.long_frames,
            tap: kit.tap,
            control: kit.control,
        }
    }

    /// Makes `port` one it transmits on, with its transmitter.
    pub fn own(&mut self, port: usize, tx: PortTx) {
        self.owned.push(port);
        self.tx[port] = Some(tx);
    }

    /// Run-to-completion: polls its ports' rx queues and the rings from the other workers,
    /// runs every stage, and transmits on its ports.
    pub fn run_to_completion(mut self, shared: &Shared, links: &Links, mut watch: impl FnMut()) {
        let mut rx = Burst::default();
        // Arrival stamps of frames from other workers that cut through this loop (at most a
        // batch from each; the capacity is never exceeded, so it never allocates).
        let mut earlier: Vec<u64> = Vec::with_capacity(links.from.len() * BATCH);
        self.ticker.start(&mut self.switch.stats);
        self.rx_sizes = vec![BURST; self.rx.len()];
        // Once asked to stop: the hold on the lossless senders (`StopHold`).
        let mut hold: Option<StopHold> = None;
        loop {
            if hold.is_none() && shared.stop.load(Ordering::Relaxed) {
                let (now, last_rx) = (self.clock.now_ps(), &self.last_rx_ps);
                if !self.switch.hold_lossless_senders(|port| now.saturating_sub(last_rx[port]) < HOLD_SENDERS_WITHIN_PS)
                {
                    break;
                }
                hold = Some(StopHold::new(Instant::now()));
            }
            if hold.as_ref().is_some_and(|hold| hold.over(Instant::now())) {
                break;
            }
            let now = self.begin_loop(shared);
            let mut received = 0;
            // Frames that cut through to a tx burst this loop: their latency is recorded at
            // the end of the loop, on the transmit half's clock, as a queued frame's is.
            let mut cut_through = 0;
            // No rx while a batch for another worker waits: the NIC's rx ring holds what
            // arrives meanwhile, and the batch never overflows.
            let mut handed = links.hand_over(&mut self.switch);
            for ((index, rx_queue), rx_size) in self.rx.iter_mut().zip(&mut self.rx_sizes) {
                if !handed {
                    break;
                }
                let index = *index;
                let frames = rx_queue.burst_upto(&mut rx, *rx_size);
                if frames == 0 {
                    continue;
                }
                self.last_rx_ps[index] = now;
                if let Some(hold) = hold.as_mut() {
                    if rx.any_frame(|frame| self.switch.in_held_priority(index, frame)) {
                        hold.heard(Instant::now());
                    }
                }
                // One stamp per burst for the frames captured on their way in and out.
                let tsc = if self.tap.is_some() { dpdk::rdtsc() } else { 0 };
                let ingress = Ingress::new(index, &self.long_frames, self.tap.as_ref(), tsc);
                let mut cut = CutToTx::new(&mut self.egress, self.tap.as_ref(), now, tsc, &mut earlier);
                let mut bytes = 0;
                let taken = rx.drain().map(|mbuf| {
                    bytes += PacketBuf::len(&mbuf) as u64;
                    ingress.take(mbuf)
                });
                self.switch.receive_burst(index, taken, now, &mut cut);
                received += frames as u64;
                *rx_size = rx_burst_size(frames, bytes);
                cut_through += cut.sent;
                handed = links.hand_over(&mut self.switch);
            }
            let tsc = if self.tap.is_some() { dpdk::rdtsc() } else { 0 };
            let mut cut = CutToTx::new(&mut self.egress, self.tap.as_ref(), now, tsc, &mut earlier);
            for ring in &links.from {
                if let Some(mut batch) = ring.pop() {
                    received += self.switch.accept(&mut batch, now, &mut cut);
                    ring.recycle(batch);
                }
            }
            cut_through += cut.sent;
            self.end_loop(shared, now, received, cut_through, &mut earlier, &mut watch);
        }
        // Hand over what waits for other workers and take what they hand over, until every
        // worker has handed over all it had and the rings are empty.
        let mut quiet = false;
        self.drain(shared, |switch, clock| {
            let handed = links.hand_over(switch);
            if handed && !quiet {
                quiet = true;
                shared.quiet.fetch_add(1, Ordering::AcqRel);
            }
            for ring in &links.from {
                while let Some(mut batch) = ring.pop() {
                    switch.accept(&mut batch, clock.now_ps(), &mut QueueAll);
                    ring.recycle(batch);
                }
            }
            !handed
                || shared.quiet.load(Ordering::Acquire) < links.workers
                || links.from.iter().any(|ring| !ring.is_empty())
        });
    }

    /// The start of a loop, either model: the FIB the control plane published, the ports'
    /// states, and the credits, pools and gauges to and from the other workers (nothing with
    /// one). Returns the loop's receive time: the TSC the last loop ended at.
    #[inline(always)]
    pub fn begin_loop(&mut self, shared: &Shared) -> u64 {
        let now = self.clock.ps_at(self.ticker.next_loop_tsc());
        if let Some(link) = &self.control {
            // One atomic load unless the control plane published a new FIB.
            self.switch.refresh_fib(&link.fib);
        }
        // One atomic load unless a link, a shutdown or an MTU changed: then a port that went
        // down drops what it queued, groups skip it, and frames for it are dropped.
        let switch = &mut self.switch;
        self.followed.follow(&shared.port_states, |port, state| {
            switch.set_port_state(port, state, now);
        });
        // One atomic load unless a reload was published: then its prepared state moves in.
        if let Some(reconfiguration) = shared.config.take_reconfiguration(self.slot, &mut self.reloads_seen) {
            let replaced = reconfiguration.map(|reconfiguration| self.switch.reconfigure(reconfiguration));
            shared.config.reconfigured(self.slot, self.reloads_seen, replaced);
        }
        self.switch.sync_shard(now);
        now
    }

    /// The end of a loop, either model: frames to and from the control plane, latency, the
    /// transmit half, the loop's cycles and, when due, the published counters.
    /// `received_at` is the loop's receive time; `cut_through` frames received then, and
    /// those received earlier at `earlier`, went straight to a tx burst.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn end_loop(
        &mut self,
        shared: &Shared,
        received_at: u64,
        mut received: u64,
        cut_through: u64,
        earlier: &mut Vec<u64>,
        watch: &mut impl FnMut(),
    ) {
        if let Some(link) = &self.control {
            // Injected frames for another worker's port join its batch: only into an empty
            // one, so that it never overflows.
            let injects = self.injects && !self.switch.outgoing_pending();
            received += exchange_with_control(&mut self.switch, link, received_at, injects);
        }
        // A fresh clock for the transmit half, so that latency (rx to tx hand-off) counts the
        // time the burst spent in classify and queue, not zero.
        let now = self.clock.now_ps();
        self.switch.stats.latency.record_many((now - received_at) / 1000, cut_through);
        for arrival in earlier.drain(..) {
            self.switch.stats.latency.record(now.saturating_sub(arrival) / 1000);
        }
        self.switch.advance(now);
        shared.samples.hand_over(self.slot, &mut self.switch);
        let sent = self.transmit_all(now);
        if self.ticker.end_iteration(&mut self.switch.stats.cores[0], received, received + sent > 0) {
            self.switch.refresh_gauges(now);
            self.ticker.publish(shared, &mut self.switch.stats);
            watch();
            self.ticker.resume();
        }
    }

    /// Shutdown: no more rx; `between_workers` moves what crosses between workers and says
    /// whether any is still in flight. Queued frames leave at line rate for at most
    /// `DRAIN_FOR`; what is still queued then is dropped and counted (`buffer_full`), and
    /// what a tx queue never took is freed and counted in `unsent`.
    pub fn drain(mut self, shared: &Shared, mut between_workers: impl FnMut(&mut Switch<Mbuf>, &Clock) -> bool) {
        let deadline = Instant::now() + DRAIN_FOR;
        loop {
            let in_flight = between_workers(&mut self.switch, &self.clock);
            let now = self.clock.now_ps();
            self.switch.sync_shard(now);
            self.switch.advance(now);
            self.transmit_all(now);
            let queued = self.switch.queued_packets() > 0
                || self.egress.iter().any(|e| !e.pending.is_empty() || !e.control.is_empty());
            if !(queued || in_flight) || Instant::now() >= deadline {
                break;
            }
        }
        let leftover = self.switch.drain() + self.switch.discard_outgoing();
        if leftover > 0 {
            tracing::warn!("{leftover} queued frames could not be sent before shutdown; counted as buffer_full");
        }
        let unsent: u64 = self.egress.iter().map(|e| (e.pending.len() + e.control.len()) as u64).sum();
        if unsent > 0 {
            tracing::warn!("{unsent} frames were never accepted by a tx queue; freed");
        }
        self.egress.clear();
        *shared.counters.unsent.lock().expect("unsent lock") += unsent;
        self.ticker.publish_final(shared, &self.switch.stats);
    }

    /// Hands every port's due frames to its tx queue; returns how many the queues took.
    #[inline]
    fn transmit_all(&mut self, now: u64) -> u64 {
        let mut sent = 0;
        for &index in &self.owned {
            let Some(port) = self.tx[index].as_mut() else { continue };
            let state = &mut self.egress[index];
            // What an earlier turn left: the PFC frame first, never behind data.
            if !state.control.is_empty() {
                sent += port.control_burst(&mut state.control) as u64;
                if !state.control.is_empty() {
                    continue; // the tx queue is full: data waits behind the PFC frame
                }
            }
            if !state.pending.is_empty() {
                sent += port.burst(&mut state.pending) as u64;
            }
            let tap = self.tap.as_ref().filter(|tap| tap.wants(index));
            let window_ps = state.window_ps;
            // A backlogged port takes up to TX_BURSTS_PER_LOOP bursts a loop while its window
            // lets frames out and its tx queue takes them whole: with one burst a loop, a
            // port whose loop also receives a full burst sends no faster than the loop turns.
            for _ in 0..TX_BURSTS_PER_LOOP {
                let tsc = if tap.is_some() { dpdk::rdtsc() } else { 0 };
                let mut bursts = TxBursts { egress: state, pool: &self.pool, tap, port: index, tsc };
                let served = port_tx::serve(&mut self.switch, index, now, window_ps, &mut bursts);
                if !state.control.is_empty() {
                    sent += port.control_burst(&mut state.control) as u64;
                    if !state.control.is_empty() {
                        break;
                    }
                }
                if !state.pending.is_empty() {
                    sent += port.burst(&mut state.pending) as u64;
                }
                if (served.data as usize) < BURST || !state.pending.is_empty() {
                    break;
                }
            }
        }
        sent
    }
}

/// Tx bursts a backlogged port may take in one loop (`transmit_all`).
const TX_BURSTS_PER_LOOP: usize = 4;

/// How many frames the next rx burst of a queue takes, from the last one's (`frames` of
/// `bytes` in all, their wire bytes taken as `bytes` plus each frame's overhead: a runt's
/// padding is left out, which only ever lets a burst of short frames be a burst): as many as
/// one shaper window (`LOOKAHEAD_WIRE_BYTES`) holds, up to a burst. A loop serves each
/// port's tx once, handing over at most a window; were it to admit more per port than that,
/// a port fed faster than the loop serves it would idle between loops while its queue grew
/// (and dropped). 64 B and 1,024 B frames keep bursts of 32;
/// 4,160-byte RoCE frames take 11, 9,000-byte frames 5 (perf/jumbo.sh, perf/RESULTS.md).
#[inline(always)]
fn rx_burst_size(frames: usize, bytes: u64) -> usize {
    const LEAST: usize = 4;
    let wire_bytes = bytes + frames as u64 * crate::units::WIRE_OVERHEAD_BYTES;
    let fits = crate::config::plan::LOOKAHEAD_WIRE_BYTES * frames as u64 / wire_bytes.max(1);
    (fits as usize).clamp(LEAST, BURST)
}

/// The tx bursts as the cut-through path fills them (`Switch::receive_burst`): a frame
/// may join a port's pending burst when it has room, no PFC frame waits, and the port's link
/// is free within the shaper's window.
struct CutToTx<'a> {
    egress: &'a mut [Egress],
    tap: Option<&'a Tap>,
    now: u64,
    tsc: u64,
    /// Frames taken that were received this loop (at `now`).
    sent: u64,
    /// Arrival stamps of frames taken that were received earlier (on another worker).
    earlier: &'a mut Vec<u64>,
}

impl<'a> CutToTx<'a> {
    /// The tx bursts of a loop at `now`; `tsc` stamps captured frames.
    fn new(egress: &'a mut [Egress], tap: Option<&'a Tap>, now: u64, tsc: u64, earlier: &'a mut Vec<u64>) -> Self {
        Self { egress, tap, now, tsc, sent: 0, earlier }
    }
}

impl CutThrough<Mbuf> for CutToTx<'_> {
    #[inline(always)]
    fn may_send(&self, port: usize, link_free_ps: u64) -> bool {
        let egress = &self.egress[port];
        egress.control.is_empty() && !egress.pending.is_full() && link_free_ps <= self.now + egress.window_ps
    }

    #[inline(always)]
    fn send(&mut self, port: usize, mbuf: Mbuf, arrival_ps: u64) {
        if let Some(tap) = self.tap.filter(|tap| tap.wants(port)) {
            tap.copy_head(port, true, self.tsc, PacketBuf::data(&mbuf), PacketBuf::len(&mbuf));
        }
        self.egress[port].pending.push(mbuf);
        if arrival_ps == self.now {
            self.sent += 1;
        } else {
            self.earlier.push(arrival_ps);
        }
    }
}

/// A port's tx bursts as `port_tx` fills them: a PFC frame in a burst of its own (one at a
/// time, in an mbuf from the pool), data in the pending burst. Captured frames are those
/// handed to the tx queue (as a NIC's tx capture sees them).
struct TxBursts<'a> {
    egress: &'a mut Egress,
    pool: &'a Mempool,
    tap: Option<&'a Tap>,
    port: usize,
    tsc: u64,
}

impl port_tx::TxQueue<Mbuf> for TxBursts<'_> {
    #[inline]
    fn pfc(&mut self, frame: &[u8]) -> bool {
        if !self.egress.control.is_empty() {
            return false;
        }
        // Without an mbuf the frame stays pending and goes on a later turn.
        let Some(mut mbuf) = self.pool.alloc() else { return false };
        if !mbuf.append(frame) {
            return false;
        }
        if let Some(tap) = self.tap {
            tap.copy(self.port, true, dpdk::rdtsc(), frame);
        }
        self.egress.control.push(mbuf);
        true
    }

    #[inline(always)]
    fn data(&mut self, mbuf: Mbuf) {
        if let Some(tap) = self.tap {
            tap.copy_head(self.port, true, self.tsc, PacketBuf::data(&mbuf), PacketBuf::len(&mbuf));
        }
        mbuf.prefetch_header();
        self.egress.pending.push(mbuf);
    }

    #[inline(always)]
    fn has_room(&self) -> bool {
        !self.egress.pending.is_full()
    }
}

/// Hands what the switch punted to the control thread and injects up to a burst of what the
/// kernel sent; returns how many frames were injected.
fn exchange_with_control(switch: &mut Switch<Mbuf>, link: &ControlLink, now: u64, injects: bool) -> u64 {
    let mut punted_any = false;
    while let Some(punted) = switch.take_punted() {
        punted_any = true;
        if link.punt(punted.class, (punted.port as u16, punted.packet, std::time::Instant::now())).is_err() {
            // The control thread is behind on this class: the frame is freed (dropping it) and
            // counted.
            switch.punt_refused(punted.port, punted.class);
        }
    }
    if punted_any {
        link.punted();
    }
    let mut injected = 0;
    while injects && injected < BURST as u64 {
        let Some((port, mbuf, since)) = link.inject.pop() else { break };
        link.took_injected(since);
        switch.inject(usize::from(port), mbuf, now);
        injected += 1;
    }
    injected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rx_burst_takes_what_one_shaper_window_lets_out() {
        let burst_of = |frame_len: usize| rx_burst_size(32, 32 * frame_len as u64);
        assert_eq!(burst_of(60), 32);
        assert_eq!(burst_of(1020), 32);
        assert_eq!(burst_of(1518), 32, "the window is a burst of standard frames");
        // 49,344 / 4,184 and / 9,024 wire bytes.
        assert_eq!(burst_of(4160), 11);
        assert_eq!(burst_of(9000), 5);
        // A frame's 24 bytes of overhead count: 49,344 / 9,868 wire bytes is 5, / 9,869 less.
        assert_eq!(rx_burst_size(1, 9_844), 5);
        assert_eq!(rx_burst_size(1, 9_845), 4);
        assert_eq!(burst_of(16_000), 4, "never fewer than a few");
        assert_eq!(rx_burst_size(0, 0), 4);
    }

    #[test]
    fn the_shaper_commits_one_tx_burst_of_maximum_frames_as_the_headroom_assumes() {
        let text = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n\
                    [[port]]\nname = \"a\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n\
                    [[port]]\nname = \"b\"\nspeed_gbps = 1\npeer_mac = \"02:00:00:00:00:03\"\n\
                    [[port]]\nname = \"c\"\nspeed_gbps = 800\npeer_mac = \"02:00:00:00:00:04\"\n";
        let config = Config::parse(text, "t.toml").unwrap();
        // 32 x 1542 wire bytes: 3.95 us at 100G, 394.8 us at 1G, 493 ns at 800G.
        assert_eq!(shaper_window_ps(&config.ports[0]), 3_947_520);
        assert_eq!(shaper_window_ps(&config.ports[1]), 394_752_000);
        assert_eq!(shaper_window_ps(&config.ports[2]), 493_440);
        // Within the response the auto headroom allows for, at every speed: exactly it where
        // raceway's lookahead is longer than a NIC's allowance (100G, 1G), less at 800G.
        for port in &config.ports {
            let allowed = crate::config::plan::peer_response_wire_bytes(port) * 8_000_000 / port.speed_mbps;
            assert_eq!(
                shaper_window_ps(port),
                crate::config::plan::LOOKAHEAD_WIRE_BYTES * 8_000_000 / port.speed_mbps,
                "{}",
                port.name
            );
            assert!(shaper_window_ps(port) <= allowed, "{}", port.name);
        }
    }
}
