//! The sFlow samples' way from the workers to the exporter (`live::sflow`): a lock-free queue
//! per worker, filled between bursts with what its switch sampled, and the counts of what did
//! not fit. Beside `shard_ring.rs`, the other rings between threads.
//!
//! Invariant: a worker never blocks or allocates here; a sample that finds its queue full is
//! counted (`lost`, `discards_lost`), never dropped silently.

use crate::pipeline::sample::{FlowSample, OUTBOX};
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// What the workers and the exporter share.
pub(super) struct SampleQueues {
    /// Per worker (stats slot).
    queues: Vec<ArrayQueue<FlowSample>>,
    /// Samples lost: the switches' outboxes were full, or a queue was (sFlow's `drops`).
    lost: AtomicU32,
    /// Dropped-packet notifications not sent: over `drop_limit`, or no room (their `drops`).
    discards_lost: AtomicU32,
    /// Datagrams sent, and sends that failed.
    pub sent: AtomicU64,
    pub failed: AtomicU64,
}

impl SampleQueues {
    pub fn new(workers: usize) -> Self {
        Self {
            queues: (0..workers).map(|_| ArrayQueue::new(2 * OUTBOX)).collect(),
            lost: AtomicU32::new(0),
            discards_lost: AtomicU32::new(0),
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// On worker `slot`, between bursts: moves its switch's samples to its queue.
    #[inline]
    pub fn hand_over(&self, slot: usize, switch: &mut crate::switch::Switch<crate::dpdk::Mbuf>) {
        let Some(sampler) = switch.sampler_mut() else { return };
        if !sampler.has_samples() && sampler.dropped == 0 && sampler.discards_lost == 0 {
            return;
        }
        let mut lost = std::mem::take(&mut sampler.dropped);
        let mut discards_lost = std::mem::take(&mut sampler.discards_lost);
        let queue = &self.queues[slot];
        sampler.drain(|sample| {
            if queue.push(*sample).is_err() {
                match sample.discarded {
                    None => lost = lost.wrapping_add(1),
                    Some(_) => discards_lost = discards_lost.wrapping_add(1),
                }
            }
        });
        if lost > 0 {
            self.lost.fetch_add(lost, Ordering::Relaxed);
        }
        if discards_lost > 0 {
            self.discards_lost.fetch_add(discards_lost, Ordering::Relaxed);
        }
    }

    /// Samples lost so far.
    pub fn lost(&self) -> u32 {
        self.lost.load(Ordering::Relaxed)
    }

    /// On the exporter, with sFlow off (or turned off by a reload): what the workers sampled
    /// before goes.
    pub fn discard_all(&self) {
        for queue in &self.queues {
            while queue.pop().is_some() {}
        }
    }

    /// On the exporter: every sample waiting, worker by worker, oldest first, with how many
    /// of its kind (flow samples, or dropped-packet notifications) were lost so far.
    pub fn take(&self, mut each: impl FnMut(&FlowSample, u32)) {
        for queue in &self.queues {
            while let Some(sample) = queue.pop() {
                let lost = if sample.discarded.is_some() { &self.discards_lost } else { &self.lost };
                each(&sample, lost.load(Ordering::Relaxed));
            }
        }
    }
}
