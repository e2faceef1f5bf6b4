//! The shared buffer: every queued frame, its queue, and the cells it holds in one pool
//! (`plan::BufferPlan` sizes the pools and thresholds).
//!
//! Every queued frame occupies cells (`plan::CELL_BYTES`) of one pool; its descriptor lives in
//! one arena of slots shared by all queues, sized so that a full buffer of minimum-size frames
//! fits. Lossy frames are charged to their egress queue in the lossy pool, up to the queue's
//! dynamic limit (lossy_alpha x the free lossy pool), or are tail-dropped (`buffer_full`).
//! Lossless frames are charged to their (ingress port, priority) group: to the lossless pool
//! up to the group's XOFF point, then to the group's reserved headroom, and are dropped only
//! when that overflows (`headroom_overflow`). A group's occupancy is two counters, not a mark
//! on each frame: a leaving frame gives its cells back to the group's headroom first, then to
//! the pool, as ASICs account priority groups. (Marking frames kept headroom in use until the
//! very frames that took it left, behind a deep queue, and each XOFF/XON cycle meanwhile added
//! its in-flight frames: headroom overflowed live with hosts that honoured every pause.) Lossy
//! traffic never touches the lossless pool, so it cannot move an XOFF point.
//!
//! Sharded over workers (`tm::shard`), a buffer holds the queues of its worker's egress ports
//! and the groups of its worker's ingress ports. A lossless frame queued here for another
//! worker's group gives its cells back as credits (`released`) for that worker to apply
//! (`release_group`); the pool checks add the other workers' published occupancy.
//!
//! Invariant: the pool, per-queue and per-group cell counts are exactly the charges of the
//! frames queued (sharded: plus the charges of this worker's groups whose frames other
//! workers hold, and less the credits not yet applied), and it never allocates after `new`.

use crate::config::{Config, TRAFFIC_CLASSES};
use crate::drops::DropReason;
use crate::packet::PacketBuf;
use crate::pipeline::classify::IpHeader;
use crate::tm::plan::{self, BufferPlan};

const NIL: u32 = u32::MAX;

/// A frame to queue, with what the scheduler and the counters need to know of it later.
pub struct Entry<P> {
    pub packet: P,
    pub ingress: usize,
    /// Marked CE at enqueue; counted in `ecn_marked` only when it leaves, so the counter
    /// equals the CE frames sent, whatever is dropped or flushed after marking.
    pub marked: bool,
    pub ip: IpHeader,
    /// When the frame was received (ps), for the latency histogram.
    pub arrival_ps: u64,
}

struct Slot<P> {
    packet: Option<P>,
    next: u32,
    ingress: u16,
    marked: bool,
    /// Frame bytes, kept here so the scheduler and release never touch the packet's buffer
    /// (reading an mbuf's length at dequeue cost ~10% of transmit in `perf`). Its cell charge
    /// is `plan::charge(len)`; a queued frame's length never changes.
    len: u32,
    ip: IpHeader,
    arrival_ps: u64,
}

/// A frame unlinked from its queue, with what its slot knew of it.
pub struct Popped<P> {
    pub packet: P,
    pub ingress: usize,
    pub marked: bool,
    pub ip: IpHeader,
    pub arrival_ps: u64,
    pub len: u64,
}

#[derive(Debug, Clone, Copy)]
struct Fifo {
    head: u32,
    tail: u32,
    len: u32,
    /// Frame bytes (not cells): what queue depths and ECN look at.
    bytes: u64,
    /// Cell bytes this queue holds in the lossy pool (0 for a lossless class): what its
    /// dynamic limit applies to.
    lossy_cells: u64,
}

impl Default for Fifo {
    fn default() -> Self {
        Self { head: NIL, tail: NIL, len: 0, bytes: 0, lossy_cells: 0 }
    }
}

/// Cells a lossless (ingress port, priority) group holds.
#[derive(Debug, Clone, Copy, Default)]
struct GroupCells {
    /// Charged to the lossless pool.
    shared: u64,
    /// Charged to the group's headroom.
    headroom: u64,
}

/// Where a lossless frame's charge put its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCharge {
    /// The group's cells, pool and headroom.
    pub occupancy: u64,
    /// Of which headroom.
    pub headroom: u64,
    /// The group is past its XOFF point (or into its headroom): PFC should pause the peer.
    pub past_xoff: bool,
}

/// The per-port queues of an egress port.
#[derive(Clone, Copy, Default)]
struct PortQueues {
    fifos: [Fifo; TRAFFIC_CLASSES],
    /// Bit n set while queue n holds frames.
    backlog: u8,
}

pub struct SharedBuffer<P> {
    plan: BufferPlan,
    slots: Vec<Slot<P>>,
    free: u32,
    ports: Vec<PortQueues>,
    /// Per ingress port and priority.
    groups: Vec<[GroupCells; 8]>,
    /// Cell bytes in use in each pool (headroom apart).
    lossless_used: u64,
    lossy_used: u64,
    queued_packets: u64,
    /// Per ingress port: whether this buffer owns its groups (all, unsharded).
    owns_group: Vec<bool>,
    /// Per ingress port and priority, for groups owned elsewhere: cumulative cell bytes of
    /// their frames this buffer has sent or dropped (the credits to give back).
    released: Vec<[u64; 8]>,
    /// The pools' cell bytes charged by other workers, as last published.
    others_used: (u64, u64),
}

impl<P> SharedBuffer<P> {
    /// The buffer of a validated config (`Config::parse` checked that the plan exists).
    pub fn new(config: &Config) -> Self {
        Self::sharded(config, |_| true, 0)
    }

    /// The buffer of one worker of a sharded run: it owns the groups of the ingress ports
    /// `owns` says, and its arena has `overcommit` slots more than the buffer's cells (the
    /// frames other workers may admit on a stale view of the pools, `tm::shard`).
    pub fn sharded(config: &Config, owns: impl Fn(usize) -> bool, overcommit: usize) -> Self {
        let plan = BufferPlan::new(config).expect("a validated config has a buffer plan");
        let capacity = Self::capacity(config) + overcommit;
        let slots = (0..capacity)
            .map(|i| Slot {
                packet: None,
                next: if i + 1 < capacity { i as u32 + 1 } else { NIL },
                ingress: 0,
                marked: false,
                len: 0,
                ip: IpHeader { l3_offset: 0, is_ipv6: false, ecn: 0 },
                arrival_ps: 0,
            })
            .collect();
        Self {
            plan,
            slots,
            free: if capacity > 0 { 0 } else { NIL },
            ports: vec![PortQueues::default(); config.ports.len()],
            groups: vec![[GroupCells::default(); 8]; config.ports.len()],
            lossless_used: 0,
            lossy_used: 0,
            queued_packets: 0,
            owns_group: (0..config.ports.len()).map(owns).collect(),
            released: vec![[0; 8]; config.ports.len()],
            others_used: (0, 0),
        }
    }

    /// Frames the buffer can hold at most: one per cell.
    pub fn capacity(config: &Config) -> usize {
        (config.buffer_bytes / plan::CELL_BYTES) as usize + 1
    }

    pub fn plan(&self) -> &BufferPlan {
        &self.plan
    }

    /// Whether class `tc` is lossless.
    #[inline]
    pub fn lossless(&self, tc: usize) -> bool {
        self.plan.lossless_mask & (1 << tc) != 0
    }

    /// Charges a lossy frame to its egress queue in the lossy pool, within the queue's
    /// dynamic limit (lossy_alpha x the free lossy pool).
    #[inline]
    pub fn admit_lossy(&mut self, egress: usize, tc: usize, charge: u64) -> Result<(), DropReason> {
        let free = self.plan.lossy_pool.saturating_sub(self.lossy_used + self.others_used.1);
        let queue = &mut self.ports[egress].fifos[tc];
        if charge > free || queue.lossy_cells + charge > self.plan.lossy_limit(free) || self.free == NIL {
            return Err(DropReason::BufferFull);
        }
        queue.lossy_cells += charge;
        self.lossy_used += charge;
        Ok(())
    }

    /// Charges a lossless frame to its group: the pool up to XOFF, then the group's headroom
    /// (the plan's for its port).
    #[inline(always)]
    pub fn admit_lossless(&mut self, ingress: usize, priority: usize, charge: u64) -> Result<GroupCharge, DropReason> {
        if self.free == NIL {
            return Err(DropReason::HeadroomOverflow);
        }
        let xoff = self.xoff();
        let group = &mut self.groups[ingress][priority];
        let pool_room = self.lossless_used + self.others_used.0 + charge <= self.plan.lossless_pool;
        let in_headroom = if group.shared + charge <= xoff && pool_room {
            group.shared += charge;
            self.lossless_used += charge;
            false
        } else if group.headroom + charge <= self.plan.headroom[ingress] {
            group.headroom += charge;
            true
        } else {
            return Err(DropReason::HeadroomOverflow);
        };
        let occupancy = group.shared + group.headroom;
        Ok(GroupCharge { occupancy, headroom: group.headroom, past_xoff: in_headroom || occupancy > xoff })
    }

    /// Whether the arena has a slot for one more frame.
    #[inline]
    pub fn has_slot(&self) -> bool {
        self.free != NIL
    }

    /// Links an admitted frame of `len` bytes at the tail of `egress`'s queue `tc`; returns
    /// the queue's depth in bytes.
    #[inline(always)]
    pub fn push(&mut self, egress: usize, tc: usize, len: usize, entry: Entry<P>) -> u64 {
        let slot = self.free;
        debug_assert_ne!(slot, NIL, "the arena holds one slot per cell");
        let free = &mut self.slots[slot as usize];
        self.free = free.next;
        *free = Slot {
            packet: Some(entry.packet),
            next: NIL,
            ingress: entry.ingress as u16,
            marked: entry.marked,
            len: len as u32,
            ip: entry.ip,
            arrival_ps: entry.arrival_ps,
        };
        let port = &mut self.ports[egress];
        port.backlog |= 1 << tc;
        let queue = &mut port.fifos[tc];
        if queue.tail == NIL {
            queue.head = slot;
        } else {
            self.slots[queue.tail as usize].next = slot;
        }
        queue.tail = slot;
        queue.len += 1;
        queue.bytes += len as u64;
        self.queued_packets += 1;
        queue.bytes
    }

    /// Unlinks the head of a queue and gives back its cells (a lossless frame's to its group:
    /// headroom first, then the pool).
    #[inline]
    pub fn pop(&mut self, port: usize, tc: usize) -> Option<Popped<P>>
    where
        P: PacketBuf,
    {
        let lossless = self.lossless(tc);
        let queues = &mut self.ports[port];
        let queue = &mut queues.fifos[tc];
        let slot = queue.head;
        if slot == NIL {
            return None;
        }
        // The next frame of this queue is usually the next one sent: its slot, written when
        // it was queued (thousands of frames ago in a deep queue), starts loading now
        // (congested port, one worker: ~6% fewer cycles per frame).
        let next = self.slots[slot as usize].next;
        if next != NIL {
            P::prefetch(&self.slots[next as usize]);
        }
        let entry = &mut self.slots[slot as usize];
        let packet = entry.packet.take().expect("a linked slot holds a frame");
        let (ingress, marked, len, ip) = (usize::from(entry.ingress), entry.marked, u64::from(entry.len), entry.ip);
        let charge = plan::charge(len as usize);
        let arrival_ps = entry.arrival_ps;
        queue.head = entry.next;
        if queue.head == NIL {
            queue.tail = NIL;
            queues.backlog &= !(1 << tc);
        }
        entry.next = self.free;
        self.free = slot;
        queue.len -= 1;
        queue.bytes -= len;
        self.queued_packets -= 1;
        if !lossless {
            queue.lossy_cells -= charge;
            self.lossy_used -= charge;
        } else if self.owns_group[ingress] {
            self.release_group(ingress, tc, charge);
        } else {
            self.released[ingress][tc] += charge;
        }
        Some(Popped { packet, ingress, marked, ip, arrival_ps, len })
    }

    /// Gives `cells` back to group (`ingress`, `priority`): its headroom first, then the pool.
    #[inline]
    pub fn release_group(&mut self, ingress: usize, priority: usize, cells: u64) {
        let group = &mut self.groups[ingress][priority];
        let from_headroom = cells.min(group.headroom);
        group.headroom -= from_headroom;
        group.shared -= cells - from_headroom;
        self.lossless_used -= cells - from_headroom;
    }

    /// Gives back a lossy frame's cells to its queue and the lossy pool (a frame that cut
    /// through: admitted, never linked).
    #[inline]
    pub fn release_lossy(&mut self, egress: usize, tc: usize, cells: u64) {
        self.ports[egress].fifos[tc].lossy_cells -= cells;
        self.lossy_used -= cells;
    }

    /// Whether this buffer owns the groups of ingress port `port`.
    #[inline]
    pub fn owns_group(&self, port: usize) -> bool {
        self.owns_group[port]
    }

    /// Credits the cells of a frame of another worker's group that this worker drops
    /// before queueing it.
    pub fn give_back(&mut self, ingress: usize, priority: usize, cells: u64) {
        self.released[ingress][priority] += cells;
    }

    /// Cumulative cell bytes given back to group (`port`, `priority`) of another worker.
    #[inline]
    pub fn released(&self, port: usize, priority: usize) -> u64 {
        self.released[port][priority]
    }

    /// The other workers' pool charges, (lossless, lossy), as last published.
    #[inline]
    pub fn set_others_used(&mut self, used: (u64, u64)) {
        self.others_used = used;
    }

    /// Bytes of the frame at the head of each of `port`'s queues (asked only of queues that
    /// hold frames), for the scheduler: the port's queues are looked up once, not per class.
    #[inline]
    pub fn head_lens(&self, port: usize) -> impl Fn(usize) -> usize + '_ {
        let (fifos, slots) = (&self.ports[port].fifos, &self.slots);
        move |tc| slots[fifos[tc].head as usize].len as usize
    }

    /// Bit n set while `port`'s queue n holds frames.
    #[inline]
    pub fn backlog(&self, port: usize) -> u8 {
        self.ports[port].backlog
    }

    /// Frame bytes queued on `port` in class `tc` (what ECN compares with kmin/kmax).
    #[inline]
    pub fn queue_bytes(&self, port: usize, tc: usize) -> u64 {
        self.ports[port].fifos[tc].bytes
    }

    /// Frames queued on `port` in class `tc`.
    #[inline]
    pub fn queue_len(&self, port: usize, tc: usize) -> u32 {
        self.ports[port].fifos[tc].len
    }

    /// Cell bytes group (`port`, `priority`) holds, pool and headroom.
    #[inline]
    pub fn group_occupancy(&self, port: usize, priority: usize) -> u64 {
        let group = &self.groups[port][priority];
        group.shared + group.headroom
    }

    /// Cell bytes group (`port`, `priority`) holds in the lossless pool and in its headroom.
    pub fn group_cells(&self, port: usize, priority: usize) -> (u64, u64) {
        let group = &self.groups[port][priority];
        (group.shared, group.headroom)
    }

    /// Cell bytes `port`'s lossy queue `tc` holds in the lossy pool.
    pub fn lossy_cells(&self, port: usize, tc: usize) -> u64 {
        self.ports[port].fifos[tc].lossy_cells
    }

    /// The XOFF point of every lossless group now (it moves with the free lossless pool).
    #[inline]
    pub fn xoff(&self) -> u64 {
        self.plan.xoff(self.plan.lossless_pool.saturating_sub(self.lossless_used + self.others_used.0))
    }

    /// The XON point now.
    #[inline]
    pub fn xon(&self) -> u64 {
        self.plan.xon(self.xoff())
    }

    /// Cell bytes in use in the lossless and the lossy pool.
    pub fn pool_used(&self) -> (u64, u64) {
        (self.lossless_used, self.lossy_used)
    }

    /// Frames queued on all ports.
    pub fn queued_packets(&self) -> u64 {
        self.queued_packets
    }
}
