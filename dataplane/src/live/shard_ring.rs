//! The rings between run-to-completion workers: a frame received on one worker's port for
//! another worker's port crosses over the single-producer single-consumer ring of that
//! (from, to) pair, a batch of up to one rx burst at a time.
//!
//! Invariant: `SHARD_RING` + 1 boxed batches go round each pair, allocated at start, so
//! neither of a ring's two queues is ever full when pushed to and a hand-over never
//! allocates; a batch that cannot be handed over stays with its sender, never dropped.

use crate::config::Config;
use crate::dpdk::Mbuf;
use crate::switch::Switch;
use crate::tm::shard::{Batch, BATCH};
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// Batches a ring between two run-to-completion workers holds.
pub(super) const SHARD_RING: usize = 16;

/// The batches crossing from one run-to-completion worker to another. They are boxed and go
/// round: the sender fills one, hands it over in `full` and takes an emptied one from
/// `empty`; the receiver drains it and gives it back. A hand-over moves a pointer (moving
/// the 1.3 KB batch through the ring by value was ~10% of the receiving worker's samples).
pub(super) struct ShardRing {
    full: ArrayQueue<Box<Batch<Mbuf>>>,
    empty: ArrayQueue<Box<Batch<Mbuf>>>,
}

impl ShardRing {
    pub fn new() -> Self {
        let empty = ArrayQueue::new(SHARD_RING);
        for _ in 0..SHARD_RING {
            let _ = empty.push(Box::default());
        }
        Self { full: ArrayQueue::new(SHARD_RING), empty }
    }

    /// Hands `batch` over and puts an empty one in its place; false (nothing moved) when
    /// the receiver holds every other box.
    fn hand_over(&self, batch: &mut Box<Batch<Mbuf>>) -> bool {
        let Some(fresh) = self.empty.pop() else { return false };
        let full = std::mem::replace(batch, fresh);
        if let Err(full) = self.full.push(full) {
            // Cannot happen with SHARD_RING + 1 boxes; undone rather than lost.
            let fresh = std::mem::replace(batch, full);
            let _ = self.empty.push(fresh);
            return false;
        }
        true
    }

    /// The oldest batch handed over.
    pub fn pop(&self) -> Option<Box<Batch<Mbuf>>> {
        self.full.pop()
    }

    /// Gives a drained batch back to the sender.
    pub fn recycle(&self, batch: Box<Batch<Mbuf>>) {
        debug_assert!(batch.is_empty());
        let _ = self.empty.push(batch);
    }

    pub fn is_empty(&self) -> bool {
        self.full.is_empty()
    }
}

/// Frames a run-to-completion worker may admit in one loop at most: an rx burst per rx queue
/// it polls (the most any worker polls), a batch from each other worker, a burst from the
/// control plane.
pub(super) fn frames_per_loop(config: &Config, workers: usize) -> usize {
    let rx_queues: Vec<u16> = config.ports.iter().map(|port| port.rx_queues).collect();
    let most_queues = crate::tm::shard::most_rx_queues_per_worker(&rx_queues, workers.max(1));
    (most_queues + workers + 1) * BATCH
}

/// A run-to-completion worker's rings to and from the others (none with one worker).
pub(super) struct Links {
    pub workers: usize,
    /// To each worker (`None` for itself).
    pub to: Vec<Option<Arc<ShardRing>>>,
    /// From each other worker.
    pub from: Vec<Arc<ShardRing>>,
}

impl Links {
    /// The rings of `workers` workers, `rings[from][to]`, one per ordered pair.
    pub fn rings(workers: usize) -> Vec<Vec<Option<Arc<ShardRing>>>> {
        (0..workers)
            .map(|from| (0..workers).map(|to| (from != to).then(|| Arc::new(ShardRing::new()))).collect())
            .collect()
    }

    /// Worker `me`'s links among `rings` (from `Links::rings`).
    pub fn of(rings: &[Vec<Option<Arc<ShardRing>>>], me: usize) -> Self {
        Self {
            workers: rings.len(),
            to: rings[me].clone(),
            from: rings.iter().filter_map(|to| to[me].clone()).collect(),
        }
    }

    /// Hands every batch the switch has waiting to its ring; false when a ring was full
    /// (the batch waits).
    #[inline]
    pub fn hand_over(&self, switch: &mut Switch<Mbuf>) -> bool {
        let mut all = true;
        for (worker, ring) in self.to.iter().enumerate() {
            let (Some(ring), Some(batch)) = (ring, switch.outgoing(worker)) else { continue };
            if !batch.is_empty() && !ring.hand_over(batch) {
                all = false;
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_sends_on_its_row_and_receives_on_its_column() {
        let rings = Links::rings(3);
        let links: Vec<Links> = (0..3).map(|me| Links::of(&rings, me)).collect();
        for (me, link) in links.iter().enumerate() {
            assert_eq!(link.workers, 3);
            assert!(link.to[me].is_none(), "no ring to itself");
            assert_eq!(link.from.len(), 2);
            for (to, ring) in link.to.iter().enumerate().filter(|&(to, _)| to != me) {
                let ring = ring.as_ref().unwrap();
                // The ring `me` sends on is the one `to` receives on from `me`.
                assert!(links[to].from.iter().any(|from| Arc::ptr_eq(from, ring)));
            }
        }
    }
}
