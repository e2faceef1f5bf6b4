//! Traffic management sharded by port over several workers, without a lock.
//!
//! Each worker owns a set of ports, whole: their rx queues, their egress queues, scheduler
//! and shaper, and their ingress priority groups (occupancy, XOFF/XON, the PFC frames the
//! port sends). A frame received on a port of worker A for a port of worker B is classified,
//! balanced and admitted to its ingress group by A, then crosses to B in a `Batch` over a
//! single-producer single-consumer ring of the (A, B) pair (the engine's); B does the
//! egress half: ECN, the lossy dynamic limit, queueing, scheduling. When B sends (or drops)
//! a lossless frame of A's group, the cells go back to A as credits: B adds them to its own
//! cumulative counter for that group, publishes the counter once per loop, and A applies
//! what grew since it last looked (headroom first, then the pool, as a local frame would)
//! and decides XON. Pool occupancy is per worker (a worker charges the lossless pool for its
//! ingress groups and the lossy pool for its egress queues), published once per loop; every
//! worker's dynamic thresholds use its own exact count plus the others' last published ones.
//! For group load balancing each worker publishes its ports' queue depths, link time and
//! paused classes once per loop.
//!
//! The invariant that keeps PFC lossless with these stale views: a group's occupancy is
//! counted exactly by its one owner when cells are charged, and credits only lag, so the
//! owner sees at least the true occupancy; XOFF is never late, XON may be up to one loop of
//! the egress worker late, which costs throughput, not frames. Headroom, checked by the same
//! owner on the same exact count, needs no allowance for staleness. What the stale views can
//! do is overcommit a pool: while worker A has not yet seen B's last loop, both may admit
//! into the same free cells. B admits at most `frames_per_loop` frames between two
//! publications, so the pools together are never over by more than that many frames from
//! each other worker (`Plan::overcommit_frames`); the queue arena and the mbuf pool hold that
//! many frames more than the buffer, so admission never fails for want of a slot or an mbuf.

use crate::pipeline::classify::IpHeader;
use crate::units::TRAFFIC_CLASSES;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Frames in one hand-off between workers: one rx burst.
pub const BATCH: usize = 32;

/// A frame on its way from the worker that received it to the worker that owns its egress
/// port.
pub struct Transfer<P> {
    pub packet: P,
    pub ingress: u16,
    pub egress: u16,
    pub tc: u8,
    /// A lossless frame whose cells the ingress worker charged to its group: the egress
    /// worker returns them as credits when the frame leaves or is dropped.
    pub charged: bool,
    pub ip: IpHeader,
    pub arrival_ps: u64,
    /// The group and member slot chosen, counted when the egress worker queues the frame.
    pub member: Option<(u16, u16)>,
}

/// Up to one burst of transfers for one worker: what crosses a ring in one operation (per
/// frame, the atomics of a hand-off cost more than the work moved to another core).
pub struct Batch<P> {
    frames: [Option<Transfer<P>>; BATCH],
    len: usize,
}

impl<P> Default for Batch<P> {
    fn default() -> Self {
        Self { frames: std::array::from_fn(|_| None), len: 0 }
    }
}

impl<P> Batch<P> {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == BATCH
    }

    /// Adds a transfer; a full batch gives it back.
    pub fn push(&mut self, transfer: Transfer<P>) -> Result<(), Transfer<P>> {
        if self.is_full() {
            return Err(transfer);
        }
        self.frames[self.len] = Some(transfer);
        self.len += 1;
        Ok(())
    }

    /// The transfers in order, emptying the batch.
    pub fn drain(&mut self) -> impl Iterator<Item = Transfer<P>> + '_ {
        let len = std::mem::take(&mut self.len);
        self.frames[..len].iter_mut().map_while(Option::take)
    }
}

/// A value alone on its cache line(s), so that workers writing neighbouring values do not
/// invalidate each other's lines (false sharing).
#[repr(align(64))]
struct CacheAligned<T>(T);

/// What one worker publishes for the others.
struct Published {
    /// Cell bytes it has charged to the lossless pool (its ingress groups, pool part).
    lossless_used: AtomicU64,
    /// Cell bytes it has charged to the lossy pool (its egress queues).
    lossy_used: AtomicU64,
    /// Per (port, priority): cumulative cell bytes of other workers' groups this worker has
    /// given back (frames sent or dropped).
    released: Box<[AtomicU64]>,
}

/// What the owner of a port publishes of it for the others' group load balancing.
struct PortGauge {
    link_free_ps: AtomicU64,
    queue_bytes: [AtomicU64; TRAFFIC_CLASSES],
    /// Bit n set while class n is paused by PFC (or the watchdog drops it).
    paused: AtomicU8,
}

/// The plan of a sharded run: which worker owns each port, and the views workers share.
pub struct ShardBoard {
    owner: Vec<usize>,
    workers: usize,
    frames_per_loop: usize,
    published: Vec<CacheAligned<Published>>,
    gauges: Vec<CacheAligned<PortGauge>>,
}

impl ShardBoard {
    /// `owner[port]` is the worker owning the port; each worker admits at most
    /// `frames_per_loop` frames between two publications (what its rx queues and incoming
    /// rings give it in one loop).
    pub fn new(owner: Vec<usize>, frames_per_loop: usize) -> Self {
        let workers = owner.iter().max().map_or(1, |&max| max + 1);
        let ports = owner.len();
        Self {
            workers,
            frames_per_loop,
            published: (0..workers)
                .map(|_| {
                    CacheAligned(Published {
                        lossless_used: AtomicU64::new(0),
                        lossy_used: AtomicU64::new(0),
                        released: (0..ports * TRAFFIC_CLASSES).map(|_| AtomicU64::new(0)).collect(),
                    })
                })
                .collect(),
            gauges: (0..ports)
                .map(|_| {
                    CacheAligned(PortGauge {
                        link_free_ps: AtomicU64::new(0),
                        queue_bytes: std::array::from_fn(|_| AtomicU64::new(0)),
                        paused: AtomicU8::new(0),
                    })
                })
                .collect(),
            owner,
        }
    }

    /// Ports dealt in contiguous blocks, as even as they go: the first `ports % workers`
    /// workers get one more. (A port pair in, out, listed together, stays on one worker.)
    pub fn deal(ports: usize, workers: usize) -> Vec<usize> {
        let workers = workers.clamp(1, ports.max(1));
        let (base, extra) = (ports / workers, ports % workers);
        (0..workers).flat_map(|worker| std::iter::repeat_n(worker, base + usize::from(worker < extra))).collect()
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn owner(&self, port: usize) -> usize {
        self.owner[port]
    }

    /// Frames the pools may be overcommitted by: one loop of every other worker.
    pub fn overcommit_frames(&self) -> usize {
        (self.workers - 1) * self.frames_per_loop
    }

    /// The others' pool charges, as last published: (lossless, lossy).
    pub fn others_pool_used(&self, me: usize) -> (u64, u64) {
        let mut used = (0, 0);
        for (worker, published) in self.published.iter().enumerate() {
            if worker != me {
                used.0 += published.0.lossless_used.load(Ordering::Relaxed);
                used.1 += published.0.lossy_used.load(Ordering::Relaxed);
            }
        }
        used
    }

    /// What other workers have given back, in total, of group (`port`, `priority`).
    pub fn released_to(&self, me: usize, port: usize, priority: usize) -> u64 {
        let index = port * TRAFFIC_CLASSES + priority;
        self.published
            .iter()
            .enumerate()
            .filter(|&(worker, _)| worker != me)
            .map(|(_, published)| published.0.released[index].load(Ordering::Relaxed))
            .sum()
    }

    pub fn publish_pools(&self, me: usize, lossless_used: u64, lossy_used: u64) {
        let published = &self.published[me].0;
        published.lossless_used.store(lossless_used, Ordering::Relaxed);
        published.lossy_used.store(lossy_used, Ordering::Relaxed);
    }

    pub fn publish_released(&self, me: usize, port: usize, priority: usize, cells: u64) {
        self.published[me].0.released[port * TRAFFIC_CLASSES + priority].store(cells, Ordering::Relaxed);
    }

    pub fn publish_gauge(&self, port: usize, link_free_ps: u64, queue_bytes: [u64; TRAFFIC_CLASSES], paused: u8) {
        let gauge = &self.gauges[port].0;
        gauge.link_free_ps.store(link_free_ps, Ordering::Relaxed);
        for (published, bytes) in gauge.queue_bytes.iter().zip(queue_bytes) {
            published.store(bytes, Ordering::Relaxed);
        }
        gauge.paused.store(paused, Ordering::Relaxed);
    }

    /// A port's drain cost as its owner last published it (see `balance::PortView`).
    pub fn drain_cost(&self, port: usize, tc: usize, now: u64, speed_mbps: u64) -> u64 {
        let gauge = &self.gauges[port].0;
        if gauge.paused.load(Ordering::Relaxed) & (1 << tc) != 0 {
            return u64::MAX;
        }
        gauge.link_free_ps.load(Ordering::Relaxed).saturating_sub(now)
            + gauge.queue_bytes[tc].load(Ordering::Relaxed) * 8_000_000 / speed_mbps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_dealt_in_contiguous_blocks() {
        assert_eq!(ShardBoard::deal(4, 2), vec![0, 0, 1, 1]);
        assert_eq!(ShardBoard::deal(5, 2), vec![0, 0, 0, 1, 1]);
        assert_eq!(ShardBoard::deal(3, 1), vec![0, 0, 0]);
        // More workers than ports: a port each, the rest idle.
        assert_eq!(ShardBoard::deal(2, 4), vec![0, 1]);
    }

    #[test]
    fn a_worker_sees_the_others_publications_not_its_own() {
        let board = ShardBoard::new(vec![0, 1, 2], 64);
        assert_eq!((board.workers(), board.overcommit_frames()), (3, 128));
        board.publish_pools(0, 100, 10);
        board.publish_pools(1, 200, 20);
        board.publish_pools(2, 400, 40);
        assert_eq!(board.others_pool_used(0), (600, 60));
        assert_eq!(board.others_pool_used(2), (300, 30));
        board.publish_released(1, 0, 3, 512);
        board.publish_released(2, 0, 3, 256);
        board.publish_released(0, 0, 3, 9999);
        assert_eq!(board.released_to(0, 0, 3), 768);
        assert_eq!(board.released_to(0, 0, 4), 0);
        board.publish_gauge(2, 5_000, [0, 0, 0, 1000, 0, 0, 0, 0], 1 << 4);
        // 1000 bytes at 100 Gb/s = 80 ns, plus 4 us of link time left.
        assert_eq!(board.drain_cost(2, 3, 1_000, 100_000), 4_000 + 80_000);
        assert_eq!(board.drain_cost(2, 4, 1_000, 100_000), u64::MAX);
    }

    #[test]
    fn a_batch_holds_one_burst_and_drains_in_order() {
        let mut batch = Batch::default();
        let transfer = |n: u8| Transfer {
            packet: vec![n],
            ingress: 0,
            egress: 1,
            tc: 0,
            charged: false,
            ip: IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0 },
            arrival_ps: u64::from(n),
            member: None,
        };
        for n in 0..BATCH as u8 {
            assert!(batch.push(transfer(n)).is_ok());
        }
        assert!(batch.is_full());
        assert!(batch.push(transfer(99)).is_err());
        let order: Vec<u8> = batch.drain().map(|t| t.packet[0]).collect();
        assert_eq!(order, (0..BATCH as u8).collect::<Vec<_>>());
        assert!(batch.is_empty());
        assert_eq!(batch.drain().count(), 0);
    }
}
