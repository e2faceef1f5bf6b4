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
//! One hot port may be spread over several workers (`[[port]] rx_queues`): queue q of a port
//! is polled by the worker after its owner's, q places round (`rx_worker`). Each worker
//! polling a queue of the port keeps its own share of the port's groups, charged exactly
//! by its own frames and given back by credits addressed to it (a transfer and a queued frame
//! carry the worker that charged it); it publishes its shares once per loop. Admission and
//! XOFF/XON look at the group's aggregate: the worker's own share plus the others' as last
//! published. Only the port's owner sends its PFC frames: it decides XOFF and XON on the
//! aggregate when it charges a frame itself and, for the others' frames, once per loop. A
//! PFC or PAUSE frame received on another worker's queue of the port crosses to the owner
//! like a frame for its egress. The others' shares lag by at most one loop each, whose rx
//! bursts the port's auto headroom counts (`plan::HeadroomParts::shared_rx`); the pools'
//! overcommit bound covers the groups' too, since a frame admitted on a stale view is
//! charged to a pool or to a headroom, never both.
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

use crate::tm::frame::Frame;
use crate::units::TRAFFIC_CLASSES;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Frames in one hand-off between workers: one rx burst.
pub const BATCH: usize = 32;

/// Up to one burst of frames for one worker, each with its record (`tm::frame`): what crosses
/// a ring in one operation (per frame, the atomics of a hand-off cost more than the work
/// moved to another core).
pub struct Batch<P> {
    frames: [Option<Frame<P>>; BATCH],
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

    /// Adds a frame; a full batch gives it back.
    pub fn push(&mut self, frame: Frame<P>) -> Result<(), Frame<P>> {
        if self.is_full() {
            return Err(frame);
        }
        self.frames[self.len] = Some(frame);
        self.len += 1;
        Ok(())
    }

    /// The frames held, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Frame<P>> {
        self.frames[..self.len].iter().map_while(Option::as_ref)
    }

    /// The frames in order, emptying the batch.
    pub fn drain(&mut self) -> impl Iterator<Item = Frame<P>> + '_ {
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
    /// Per (worker that charged, port, priority): cumulative cell bytes of other workers'
    /// shares of groups this worker has given back (frames sent or dropped).
    released: Box<[AtomicU64]>,
    /// Per (port, priority) of a port spread over workers: this worker's share of the group,
    /// (lossless pool, headroom) cell bytes.
    shares: Box<[[AtomicU64; 2]]>,
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
    /// Per port, bit w set when worker w polls one of its rx queues.
    pollers: Vec<u64>,
    /// Per port, its rx queues.
    rx_queues: Vec<u16>,
    workers: usize,
    frames_per_loop: usize,
    published: Vec<CacheAligned<Published>>,
    gauges: Vec<CacheAligned<PortGauge>>,
}

impl ShardBoard {
    /// `owner[port]` is the worker owning the port, each port with one rx queue; each worker
    /// admits at most `frames_per_loop` frames between two publications (what its rx queues
    /// and incoming rings give it in one loop).
    pub fn new(owner: Vec<usize>, frames_per_loop: usize) -> Self {
        let ports = owner.len();
        Self::with_rx_queues(owner, vec![1; ports], frames_per_loop)
    }

    /// `new`, with `rx_queues[port]` rx queues on each port, dealt by `rx_worker`.
    pub fn with_rx_queues(owner: Vec<usize>, rx_queues: Vec<u16>, frames_per_loop: usize) -> Self {
        let workers = owner.iter().max().map_or(1, |&max| max + 1);
        assert!(workers <= 64, "a port's pollers are a 64-bit mask");
        let ports = owner.len();
        let pollers = (0..ports)
            .map(|port| {
                (0..rx_queues[port]).fold(0u64, |mask, queue| mask | 1 << rx_worker(&owner, workers, port, queue))
            })
            .collect();
        Self {
            workers,
            frames_per_loop,
            pollers,
            rx_queues,
            published: (0..workers)
                .map(|_| {
                    CacheAligned(Published {
                        lossless_used: AtomicU64::new(0),
                        lossy_used: AtomicU64::new(0),
                        released: (0..workers * ports * TRAFFIC_CLASSES).map(|_| AtomicU64::new(0)).collect(),
                        shares: (0..ports * TRAFFIC_CLASSES).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
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

    /// The worker polling rx queue `queue` of `port`.
    pub fn rx_worker(&self, port: usize, queue: u16) -> usize {
        rx_worker(&self.owner, self.workers, port, queue)
    }

    /// The (port, rx queue) pairs worker `me` polls: its own ports' first queues, then the
    /// others' queues it was dealt, in port order.
    pub fn polled_by(&self, me: usize) -> Vec<(usize, u16)> {
        let all = (0..self.owner.len()).flat_map(|port| (0..self.rx_queues[port]).map(move |queue| (port, queue)));
        let mine: Vec<(usize, u16)> = all.filter(|&(port, queue)| self.rx_worker(port, queue) == me).collect();
        let (own, others): (Vec<_>, Vec<_>) = mine.into_iter().partition(|&(port, _)| self.owner[port] == me);
        own.into_iter().chain(others).collect()
    }

    /// Whether worker `me` polls an rx queue of `port` (and so charges a share of its groups).
    pub fn polls(&self, me: usize, port: usize) -> bool {
        self.pollers[port] & (1 << me) != 0
    }

    /// Whether `port`'s rx queues are polled by more than one worker.
    pub fn spread(&self, port: usize) -> bool {
        self.pollers[port].count_ones() > 1
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

    /// What other workers have given back, in total, of `me`'s share of group (`port`,
    /// `priority`).
    pub fn released_to(&self, me: usize, port: usize, priority: usize) -> u64 {
        let index = self.released_index(me, port, priority);
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

    fn released_index(&self, charger: usize, port: usize, priority: usize) -> usize {
        (charger * self.owner.len() + port) * TRAFFIC_CLASSES + priority
    }

    /// What `me` has given back, in total, of `charger`'s share of group (`port`, `priority`).
    pub fn publish_released(&self, me: usize, charger: usize, port: usize, priority: usize, cells: u64) {
        let index = self.released_index(charger, port, priority);
        self.published[me].0.released[index].store(cells, Ordering::Relaxed);
    }

    /// `me`'s share of group (`port`, `priority`): (lossless pool, headroom) cell bytes.
    pub fn publish_share(&self, me: usize, port: usize, priority: usize, (shared, headroom): (u64, u64)) {
        let share = &self.published[me].0.shares[port * TRAFFIC_CLASSES + priority];
        share[0].store(shared, Ordering::Relaxed);
        share[1].store(headroom, Ordering::Relaxed);
    }

    /// The other pollers' shares of group (`port`, `priority`) as last published, summed:
    /// (lossless pool, headroom) cell bytes.
    pub fn others_share(&self, me: usize, port: usize, priority: usize) -> (u64, u64) {
        let mut sum = (0, 0);
        let mut others = self.pollers[port] & !(1 << me);
        while others != 0 {
            let worker = others.trailing_zeros() as usize;
            others &= others - 1;
            let share = &self.published[worker].0.shares[port * TRAFFIC_CLASSES + priority];
            sum.0 += share[0].load(Ordering::Relaxed);
            sum.1 += share[1].load(Ordering::Relaxed);
        }
        sum
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

/// The worker polling rx queue `queue` of `port`: queue 0 on the port's owner, the next on the
/// next worker, and so on round (`workers` of them).
fn rx_worker(owner: &[usize], workers: usize, port: usize, queue: u16) -> usize {
    (owner[port] + usize::from(queue)) % workers
}

/// The most rx queues any worker polls when `rx_queues` (per port) are dealt over `workers`
/// with ports in contiguous blocks (`ShardBoard::deal`, `rx_worker`).
pub fn most_rx_queues_per_worker(rx_queues: &[u16], workers: usize) -> usize {
    let owner = ShardBoard::deal(rx_queues.len(), workers);
    let workers = owner.iter().max().map_or(1, |&max| max + 1);
    let mut polled = vec![0; workers];
    for (port, &queues) in rx_queues.iter().enumerate() {
        for queue in 0..queues {
            polled[rx_worker(&owner, workers, port, queue)] += 1;
        }
    }
    polled.into_iter().max().unwrap_or(0)
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
        board.publish_released(1, 0, 0, 3, 512);
        board.publish_released(2, 0, 0, 3, 256);
        board.publish_released(0, 0, 0, 3, 9999);
        // Addressed to another worker's share: not worker 0's.
        board.publish_released(2, 1, 0, 3, 128);
        assert_eq!(board.released_to(0, 0, 3), 768);
        assert_eq!(board.released_to(1, 0, 3), 128);
        assert_eq!(board.released_to(0, 0, 4), 0);
        board.publish_gauge(2, 5_000, [0, 0, 0, 1000, 0, 0, 0, 0], 1 << 4);
        // 1000 bytes at 100 Gb/s = 80 ns, plus 4 us of link time left.
        assert_eq!(board.drain_cost(2, 3, 1_000, 100_000), 4_000 + 80_000);
        assert_eq!(board.drain_cost(2, 4, 1_000, 100_000), u64::MAX);
    }

    #[test]
    fn a_ports_rx_queues_go_round_the_workers_from_its_owner() {
        // p0, p1 on worker 0 and p2 on worker 1; p0 has 3 queues, p2 two.
        let board = ShardBoard::with_rx_queues(vec![0, 0, 1], vec![3, 1, 2], 64);
        assert_eq!((board.rx_worker(0, 0), board.rx_worker(0, 1), board.rx_worker(0, 2)), (0, 1, 0));
        assert_eq!((board.rx_worker(2, 0), board.rx_worker(2, 1)), (1, 0));
        assert_eq!(board.polled_by(0), vec![(0, 0), (0, 2), (1, 0), (2, 1)], "its own ports' queues first");
        assert_eq!(board.polled_by(1), vec![(2, 0), (0, 1)]);
        assert!(board.spread(0) && !board.spread(1) && board.spread(2));
        assert!(board.polls(1, 0) && !board.polls(1, 1) && board.polls(0, 2));
        assert_eq!(most_rx_queues_per_worker(&[3, 1, 2], 2), 4);
        assert_eq!(most_rx_queues_per_worker(&[1, 1, 1, 1], 2), 2);
        assert_eq!(most_rx_queues_per_worker(&[4, 1], 4), 3, "two workers at most, one per port");
    }

    #[test]
    fn a_spread_ports_share_is_summed_over_the_other_pollers_only() {
        let board = ShardBoard::with_rx_queues(vec![0, 1, 2], vec![3, 1, 1], 64);
        board.publish_share(0, 0, 3, (1000, 10));
        board.publish_share(1, 0, 3, (2000, 20));
        board.publish_share(2, 0, 3, (4000, 40));
        assert_eq!(board.others_share(0, 0, 3), (6000, 60));
        assert_eq!(board.others_share(1, 0, 3), (5000, 50));
        assert_eq!(board.others_share(0, 0, 4), (0, 0));
        // Port 1 is polled by worker 1 alone: nobody else's share counts.
        board.publish_share(0, 1, 3, (999, 9));
        assert_eq!(board.others_share(1, 1, 3), (0, 0));
        assert_eq!(board.others_share(1, 0, 3), (5000, 50), "port 0's shares untouched by port 1's");
        // A spread port other than the first keeps shares of its own.
        let board = ShardBoard::with_rx_queues(vec![0, 1, 2], vec![1, 2, 1], 64);
        board.publish_share(1, 1, 3, (10, 1));
        board.publish_share(2, 1, 3, (20, 2));
        board.publish_share(2, 0, 3, (99, 9));
        assert_eq!((board.others_share(1, 1, 3), board.others_share(2, 1, 3)), ((20, 2), (10, 1)));
    }

    #[test]
    fn a_batch_holds_one_burst_and_drains_in_order() {
        let mut batch = Batch::default();
        let ip = crate::wire::IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0 };
        let transfer = |n: u8| Frame::new(vec![n], 1, 0, 1, 0, ip, u64::from(n));
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
