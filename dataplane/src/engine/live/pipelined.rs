//! The pipelined model: RX workers poll their (port, rx queue) pairs, run the rx prologue
//! (`Ingress`: whole frame, capture, classify) and hand classified frames, a burst at a
//! time, over a bounded lock-free ring of their own to the scheduler worker, which owns the
//! switch (buffer, PFC, ECN, group choice, schedulers, shaping, tx).
//!
//! Invariant: nothing handed over is lost. An RX worker whose ring is full waits rather than
//! drop (the NIC's rx ring then fills, and its `missed` counter, logged at exit, shows it);
//! the scheduler keeps taking frames after the stop until every RX worker has stopped and
//! its ring is empty.

use super::ingress::{Ingress, LongFrames};
use super::setup::WorkerKit;
use super::shared::{Shared, Ticker};
use super::worker::Worker;
use crate::config::Config;
use crate::control::ControlLink;
use crate::dpdk::{self, Burst, Mbuf, Port, BURST};
use crate::link::Follower;
use crate::observe::capture::Tap;
use crate::observe::stats::SwitchStats;
use crate::pipeline::classify::{Classifier, Verdict};
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bursts an RX worker's ring holds (up to 32 frames each).
pub(super) const HANDOFF_RING: usize = 128;

/// A burst of classified frames on its way from an RX worker to the scheduler worker: one
/// queue operation per burst, not per frame (per frame, the atomics of the hand-off cost the
/// pipeline more than the classify work it moved to another core).
pub(super) struct Handoff {
    frames: [Option<(Mbuf, u16, Verdict)>; BURST],
}

/// Deals every (port, rx queue) pair to the RX workers in turn, port by port: a port with a
/// queue per worker gives each worker one of its queues, and single-queue ports go round the
/// workers. A flow stays on one queue (RSS, or one source per queue), hence on one worker and
/// one hand-off ring, so it stays in order.
pub(super) fn deal_rx_queues(rx_queues: &[u16], workers: usize) -> Vec<Vec<(usize, u16)>> {
    let workers = workers.max(1);
    let mut dealt = vec![Vec::new(); workers];
    let pairs = rx_queues.iter().enumerate().flat_map(|(port, &count)| (0..count).map(move |queue| (port, queue)));
    for (index, pair) in pairs.enumerate() {
        dealt[index % workers].push(pair);
    }
    dealt
}

impl Worker {
    /// The scheduler worker's loop: takes the RX workers' bursts, runs the switch, transmits
    /// on every port.
    pub(super) fn run_pipelined(
        mut self,
        ports: &[Port],
        shared: &Shared,
        rings: &[Arc<ArrayQueue<Handoff>>],
        mut watch: impl FnMut(),
    ) {
        self.ticker.start(&mut self.switch.stats);
        // Never pushed to: no frame cuts through here.
        let mut earlier = Vec::new();
        loop {
            if shared.stop.load(Ordering::Relaxed)
                && shared.rx_running.load(Ordering::Acquire) == 0
                && rings.iter().all(|ring| ring.is_empty())
            {
                break;
            }
            let now = self.begin_loop(shared);
            let mut received = 0;
            for ring in rings {
                let Some(mut handoff) = ring.pop() else { continue };
                for (mbuf, ingress, verdict) in handoff.frames.iter_mut().map_while(Option::take) {
                    received += 1;
                    self.switch.receive_classified(usize::from(ingress), mbuf, verdict, now);
                }
            }
            self.end_loop(ports, shared, now, received, 0, &mut earlier, &mut watch);
        }
        self.drain(ports, shared, |_, _| false);
    }
}

/// A pipelined RX worker: polls its ports, classifies, hands frames to the scheduler worker.
pub(super) struct RxWorker {
    classifier: Classifier,
    /// The (port, rx queue) pairs it polls.
    pub queues: Vec<(usize, u16)>,
    ring: Arc<ArrayQueue<Handoff>>,
    /// Its counters: classify drops (with their rx counts) and its core's cycles; frames it
    /// hands over are counted by the scheduler worker's switch.
    stats: SwitchStats,
    ticker: Ticker,
    /// Copies captured ports' received frames for `--capture`.
    tap: Option<Tap>,
    /// Where the control plane publishes the FIB (`[control]`).
    control: Option<Arc<ControlLink>>,
    /// What the rx prologue does with frames longer than one mbuf.
    long_frames: LongFrames,
}

impl RxWorker {
    pub fn new(
        config: &Config,
        kit: WorkerKit,
        queues: Vec<(usize, u16)>,
        ring: Arc<ArrayQueue<Handoff>>,
        slot: usize,
        tsc_hz: u64,
    ) -> Self {
        Self {
            classifier: Classifier::new(config),
            queues,
            ring,
            stats: SwitchStats::new(config),
            ticker: Ticker::new(slot, tsc_hz),
            tap: kit.tap,
            control: kit.control,
            long_frames: kit.long_frames,
        }
    }

    pub fn run(mut self, ports: &[Port], shared: &Shared) {
        self.ticker.start(&mut self.stats);
        let mut rx = Burst::default();
        let mut followed = Follower::new();
        while !shared.stop.load(Ordering::Relaxed) {
            if let Some(link) = &self.control {
                self.classifier.refresh(&link.fib);
            }
            let classifier = &mut self.classifier;
            followed.follow(&shared.port_states, |port, state| classifier.set_port_up(port, state.usable()));
            let mut received = 0;
            for &(index, queue) in &self.queues {
                if ports[index].rx_burst(queue, &mut rx) == 0 {
                    continue;
                }
                let mut handoff = Handoff { frames: std::array::from_fn(|_| None) };
                let mut count = 0;
                let tsc = if self.tap.is_some() { dpdk::rdtsc() } else { 0 };
                let ingress = Ingress::new(index, &self.long_frames, self.tap.as_ref(), tsc);
                for mbuf in rx.drain() {
                    received += 1;
                    let len = crate::packet::PacketBuf::len(&mbuf) as u64;
                    let (mbuf, verdict) = ingress.classify(mbuf, &mut self.classifier);
                    if let Verdict::Drop(reason) = verdict {
                        let port = &mut self.stats.ports[index];
                        port.rx_packets += 1;
                        port.rx_bytes += len;
                        port.count_drop(reason);
                        continue;
                    }
                    handoff.frames[count] = Some((mbuf, index as u16, verdict));
                    count += 1;
                }
                if count == 0 {
                    continue;
                }
                // A full ring means the scheduler is behind: wait for room, never drop.
                while let Err(back) = self.ring.push(handoff) {
                    handoff = back;
                    std::hint::spin_loop();
                }
            }
            if self.ticker.end_iteration(&mut self.stats.cores[0], received, received > 0) {
                self.ticker.publish(shared, &mut self.stats);
            }
        }
        self.ticker.publish_final(shared, &self.stats);
        shared.rx_running.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_queues_are_dealt_so_each_worker_gets_one_queue_of_a_multi_queue_port() {
        assert_eq!(deal_rx_queues(&[1, 1, 1], 2), vec![vec![(0, 0), (2, 0)], vec![(1, 0)]]);
        assert_eq!(deal_rx_queues(&[2, 2], 2), vec![vec![(0, 0), (1, 0)], vec![(0, 1), (1, 1)]]);
        assert_eq!(deal_rx_queues(&[2, 1, 1], 2), vec![vec![(0, 0), (1, 0)], vec![(0, 1), (2, 0)]]);
        assert_eq!(deal_rx_queues(&[1], 1), vec![vec![(0, 0)]]);
    }
}
