//! The shared buffer: every queued frame, its queue, and the cells it holds in one pool
//! (`plan::BufferPlan` sizes the pools and thresholds).
//!
//! Every queued frame occupies cells (`plan::CELL_BYTES`) of one pool; its descriptor lives in
//! one arena of slots shared by all queues, sized so that a full buffer of minimum-size frames
//! fits. The arena's memory is reserved whole but used from the front (a slot is first written
//! when the buffer first holds that many frames), so a simulated fabric of many switches
//! holds in memory what its queues held at their deepest, not every switch's worst case. Lossy frames are charged to their egress queue in the lossy pool, up to the queue's
//! dynamic limit (lossy_alpha x the free lossy pool), or are tail-dropped (`buffer_full`).
//! Lossless frames are charged to their (ingress port, priority group) (`qos.tc_to_pg`): to the lossless pool
//! up to the group's XOFF point, then to the group's reserved headroom, and are dropped only
//! when that overflows (`headroom_overflow`). A group's occupancy is two counters, not a mark
//! on each frame: a leaving frame gives its cells back to the group's headroom first, then to
//! the pool, as ASICs account priority groups. (Marking frames kept headroom in use until the
//! very frames that took it left, behind a deep queue, and each XOFF/XON cycle meanwhile added
//! its in-flight frames: headroom overflowed live with hosts that honoured every pause.) Lossy
//! traffic never touches the lossless pool, so it cannot move an XOFF point.
//!
//! Sharded over workers (`tm::shard`), a buffer holds the queues of its worker's egress ports
//! and its worker's share of the groups of the ports it polls (all of a port's groups when it
//! alone polls the port). A lossless frame queued here that another worker charged gives its
//! cells back as credits to that worker (`released`) for it to apply (`release_group`); the
//! pool checks add the other workers' published occupancy, and the group checks the other
//! pollers' published shares of the group.
//!
//! Invariant: the pool, per-queue and per-group cell counts are exactly the charges of the
//! frames queued (sharded: plus the charges of this worker's shares whose frames other
//! workers hold, and less the credits not yet applied), and it never allocates after `new`.

use crate::config::plan::{self, BufferPlan};
use crate::config::Config;
use crate::drops::DropReason;
use crate::packet::PacketBuf;
use crate::tm::frame::Frame;
use crate::units::TRAFFIC_CLASSES;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Fifo {
    head: u32,
    tail: u32,
    len: u32,
    /// Frame bytes: what queue depth counters, watermarks and pacing look at.
    bytes: u64,
    /// Cell bytes of the frames queued, whichever pool or headroom paid for them: the
    /// occupancy ECN compares with kmin/kmax by default, as WRED on an ASIC's buffer does.
    cells: u64,
    /// Cell bytes this queue holds in the lossy pool (0 for a lossless class): what its
    /// dynamic limit applies to.
    lossy_cells: u64,
}

impl Default for Fifo {
    fn default() -> Self {
        Self { head: NIL, tail: NIL, len: 0, bytes: 0, cells: 0, lossy_cells: 0 }
    }
}

/// Cells a lossless (ingress port, priority group) holds.
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

/// The room a run of frames that leave at once has (`SharedBuffer::idle_room`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleRoom {
    /// The largest charge that passes.
    pub most: u64,
    /// A lossless class: its group before the charge.
    pub group: Option<GroupCharge>,
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
    /// Slots used so far, then reused through `free`; never more than `arena` (reserved at
    /// construction, so pushing one never reallocates). A queued frame's record lives in its
    /// slot whole, as it came (`tm::frame`).
    slots: Vec<Option<Frame<P>>>,
    /// Per slot: the next frame of its queue while it holds one, else the next free slot.
    /// Apart from the records, so that a record stays one cache line and a free slot needs
    /// no frame.
    links: Vec<u32>,
    free: u32,
    arena: usize,
    ports: Vec<PortQueues>,
    /// Per ingress port and priority group: this buffer's share.
    groups: Vec<[GroupCells; 8]>,
    /// Per ingress port and priority group: the other pollers' shares, as last published (zero
    /// where this worker alone polls the port).
    others_groups: Vec<[GroupCells; 8]>,
    /// Cell bytes in use in each pool (headroom apart).
    lossless_used: u64,
    lossy_used: u64,
    queued_packets: u64,
    /// The worker this buffer is (0 unsharded): what its charged frames carry.
    me: u8,
    /// Per ingress port: whether this buffer charges a share of its groups (all, unsharded).
    charges_group: Vec<bool>,
    /// Per (worker that charged, ingress port) and priority group, for the other workers' shares:
    /// cumulative cell bytes of their frames this buffer has sent or dropped (the credits to
    /// give back).
    released: Vec<[u64; 8]>,
    /// The pools' cell bytes charged by other workers, as last published.
    others_used: (u64, u64),
}

impl<P> SharedBuffer<P> {
    /// The buffer of a validated config (`Config::parse` checked that the plan exists).
    pub fn new(config: &Config) -> Self {
        Self::sharded(config, 0, 1, |_| true, 0)
    }

    /// The buffer of worker `me` of `workers` in a sharded run: it charges a share of the
    /// groups of the ingress ports `polls` says, and its arena has `overcommit` slots more
    /// than the buffer's cells (the frames other workers may admit on a stale view of the
    /// pools, `tm::shard`).
    pub fn sharded(
        config: &Config,
        me: usize,
        workers: usize,
        polls: impl Fn(usize) -> bool,
        overcommit: usize,
    ) -> Self {
        let plan = BufferPlan::new(config).expect("a validated config has a buffer plan");
        let arena = Self::capacity(config) + overcommit;
        Self {
            plan,
            slots: Vec::with_capacity(arena),
            links: Vec::with_capacity(arena),
            free: NIL,
            arena,
            ports: vec![PortQueues::default(); config.ports.len()],
            groups: vec![[GroupCells::default(); 8]; config.ports.len()],
            others_groups: vec![[GroupCells::default(); 8]; config.ports.len()],
            lossless_used: 0,
            lossy_used: 0,
            queued_packets: 0,
            me: me as u8,
            charges_group: (0..config.ports.len()).map(polls).collect(),
            released: vec![[0; 8]; workers * config.ports.len()],
            others_used: (0, 0),
        }
    }

    /// Takes the pools and thresholds of a reloaded config, leaving the old plan in `plan`.
    /// Which classes are lossless and the group each is charged to must not change (a
    /// reload that would change them is refused): queued frames give their cells back by
    /// them. A pool now smaller than what it holds admits nothing until it drains below.
    pub fn replan(&mut self, plan: &mut BufferPlan) {
        debug_assert_eq!(
            (plan.lossless_tcs, plan.lossless_pgs, plan.tc_to_pg),
            (self.plan.lossless_tcs, self.plan.lossless_pgs, self.plan.tc_to_pg),
            "a reload never changes how queued frames are charged"
        );
        std::mem::swap(&mut self.plan, plan);
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
        self.plan.lossless_tcs & (1 << tc) != 0
    }

    /// The ingress priority group class `tc` is charged to.
    #[inline]
    pub fn pg(&self, tc: usize) -> usize {
        // Below 8 always (config validation); the modulo lets per-group arrays skip the check.
        usize::from(self.plan.tc_to_pg[tc % TRAFFIC_CLASSES]) % TRAFFIC_CLASSES
    }

    /// Charges a lossy frame to its egress queue in the lossy pool, within the queue's
    /// dynamic limit (lossy_alpha x the free lossy pool).
    #[inline]
    pub fn admit_lossy(&mut self, egress: usize, tc: usize, charge: u64) -> Result<(), DropReason> {
        let free = self.plan.lossy_pool.saturating_sub(self.lossy_used + self.others_used.1);
        let has_slot = self.has_slot();
        let queue = &mut self.ports[egress].fifos[tc];
        if charge > free || queue.lossy_cells + charge > self.plan.lossy_limit(free) || !has_slot {
            return Err(DropReason::BufferFull);
        }
        queue.lossy_cells += charge;
        self.lossy_used += charge;
        Ok(())
    }

    /// Charges a lossless frame to its group (this buffer's share): the pool up to XOFF, then
    /// the group's headroom (the plan's for its port), both judged on the whole group.
    #[inline(always)]
    pub fn admit_lossless(&mut self, ingress: usize, pg: usize, charge: u64) -> Result<GroupCharge, DropReason> {
        if !self.has_slot() {
            return Err(DropReason::HeadroomOverflow);
        }
        let xoff = self.xoff();
        let others = self.others_groups[ingress][pg];
        let group = &mut self.groups[ingress][pg];
        let pool_room = self.lossless_used + self.others_used.0 + charge <= self.plan.lossless_pool;
        let in_headroom = if group.shared + others.shared + charge <= xoff && pool_room {
            group.shared += charge;
            self.lossless_used += charge;
            false
        } else if group.headroom + others.headroom + charge <= self.plan.headroom[ingress] {
            group.headroom += charge;
            true
        } else {
            return Err(DropReason::HeadroomOverflow);
        };
        let occupancy = group.shared + group.headroom + others.shared + others.headroom;
        let headroom = group.headroom + others.headroom;
        Ok(GroupCharge { occupancy, headroom, past_xoff: in_headroom || occupancy > xoff })
    }

    /// The charge `admit_lossless` would make for a frame that leaves at once (cut through),
    /// judged without making it, when making it and giving it back would change nothing but
    /// the group's peaks: the charge fits the pool below XOFF and stays there, and this
    /// buffer's share of the group holds nothing in headroom (`release_group` gives back
    /// from headroom first, which would move cells from headroom to the pool). `None` when
    /// the frame must take the whole path.
    #[inline(always)]
    pub fn lossless_passes(&self, ingress: usize, pg: usize, charge: u64) -> Option<GroupCharge> {
        let group = &self.groups[ingress][pg];
        let others = &self.others_groups[ingress][pg];
        let xoff = self.xoff();
        let shared = group.shared + others.shared + charge;
        let headroom = others.headroom;
        let passes = self.has_slot()
            && group.headroom == 0
            && shared + headroom <= xoff
            && self.lossless_used + self.others_used.0 + charge <= self.plan.lossless_pool;
        passes.then_some(GroupCharge { occupancy: shared + headroom, headroom, past_xoff: false })
    }

    /// Whether `admit_lossy` would take a frame that leaves at once (cut through), judged
    /// without charging it: charging and giving back at once changes nothing.
    #[inline(always)]
    pub fn lossy_passes(&self, egress: usize, tc: usize, charge: u64) -> bool {
        let free = self.plan.lossy_pool.saturating_sub(self.lossy_used + self.others_used.1);
        let queue = &self.ports[egress].fifos[tc];
        charge <= free && queue.lossy_cells + charge <= self.plan.lossy_limit(free) && self.has_slot()
    }

    /// What `lossless_passes` (class `tc` lossless, charged to `ingress`'s group) or
    /// `lossy_passes` (lossy, at `egress`'s queue) says for every charge at once: the
    /// largest charge that passes, with a lossless group's occupancy and headroom before the
    /// charge (its peaks are the occupancy plus the charge). A frame that passes leaves at
    /// once and changes none of what is judged here, so the answer holds for a run of such
    /// frames (`Switch::receive_burst`). `None` when no charge passes.
    #[inline]
    pub fn idle_room(&self, ingress: usize, egress: usize, tc: usize) -> Option<IdleRoom> {
        if !self.has_slot() {
            return None;
        }
        if !self.lossless(tc) {
            let free = self.plan.lossy_pool.saturating_sub(self.lossy_used + self.others_used.1);
            let below_limit = self.plan.lossy_limit(free).checked_sub(self.ports[egress].fifos[tc].lossy_cells)?;
            return Some(IdleRoom { most: free.min(below_limit), group: None });
        }
        let pg = self.pg(tc);
        let (group, others) = (&self.groups[ingress][pg], &self.others_groups[ingress][pg]);
        if group.headroom != 0 {
            return None;
        }
        let occupancy = group.shared + others.shared + others.headroom;
        let below_xoff = self.xoff().checked_sub(occupancy)?;
        let pool_free = self.plan.lossless_pool.checked_sub(self.lossless_used + self.others_used.0)?;
        let group = GroupCharge { occupancy, headroom: others.headroom, past_xoff: false };
        Some(IdleRoom { most: below_xoff.min(pool_free), group: Some(group) })
    }

    /// Whether the arena has a slot for one more frame.
    #[inline]
    pub fn has_slot(&self) -> bool {
        // Every slot not holding a frame is free or not yet used: one compare, as when the
        // free list held them all.
        self.queued_packets < self.arena as u64
    }

    /// Links an admitted frame at the tail of its egress port's queue `frame.tc`; returns the
    /// queue's depth in bytes.
    #[inline(always)]
    pub fn push(&mut self, frame: Frame<P>) -> u64
    where
        P: PacketBuf,
    {
        let (egress, tc, len) = (frame.egress(), frame.tc(), frame.size());
        let slot = if self.free != NIL {
            let slot = self.free;
            self.free = self.links[slot as usize];
            // A free slot holds no frame (`pop` took it): nothing to drop, so the write skips
            // the drop glue an assignment would run on what it overwrites.
            let empty = self.slots[slot as usize].replace(frame);
            debug_assert!(empty.is_none(), "a free slot holds no frame");
            std::mem::forget(empty);
            self.links[slot as usize] = NIL;
            // The next frame queued takes the next free slot, whose record it writes: freed
            // when its frame left, it is usually cold by then (that write's read was 6% of
            // the samples in a simulated 512-host fabric's arrivals).
            if self.free != NIL {
                P::prefetch(&self.slots[self.free as usize]);
            }
            slot
        } else {
            debug_assert!(self.slots.len() < self.arena, "the arena holds one slot per cell");
            // Within the reserved capacity: no allocation.
            self.slots.push(Some(frame));
            self.links.push(NIL);
            (self.slots.len() - 1) as u32
        };
        let port = &mut self.ports[egress];
        port.backlog |= 1 << tc;
        let queue = &mut port.fifos[tc];
        if queue.tail == NIL {
            queue.head = slot;
        } else {
            self.links[queue.tail as usize] = slot;
        }
        queue.tail = slot;
        queue.len += 1;
        queue.bytes += len as u64;
        queue.cells += plan::charge(len);
        self.queued_packets += 1;
        queue.bytes
    }

    /// Unlinks the head of a queue and gives back its cells (a lossless frame's to its group:
    /// headroom first, then the pool); the frame's record no longer says it is charged.
    #[inline]
    pub fn pop(&mut self, port: usize, tc: usize) -> Option<Frame<P>>
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
        // The next frame of this queue is usually the next one sent: its record, written when
        // it was queued (thousands of frames ago in a deep queue), starts loading now
        // (congested port, one worker: ~6% fewer cycles per frame).
        let next = self.links[slot as usize];
        if next != NIL {
            P::prefetch(&self.slots[next as usize]);
        }
        let mut frame = self.slots[slot as usize].take().expect("a linked slot holds a frame");
        let len = frame.len as u64;
        let charge = plan::charge(frame.size());
        queue.head = next;
        if queue.head == NIL {
            queue.tail = NIL;
            queues.backlog &= !(1 << tc);
        }
        self.links[slot as usize] = self.free;
        self.free = slot;
        queue.len -= 1;
        queue.bytes -= len;
        queue.cells -= charge;
        self.queued_packets -= 1;
        if !lossless {
            queue.lossy_cells -= charge;
            self.lossy_used -= charge;
        } else {
            self.give_back(frame.charger, frame.ingress(), self.pg(tc), charge);
            frame.clear_charged();
        }
        Some(frame)
    }

    /// Gives `cells` back to group (`ingress`, `pg`): its headroom first, then the pool.
    #[inline]
    pub fn release_group(&mut self, ingress: usize, pg: usize, cells: u64) {
        let group = &mut self.groups[ingress][pg];
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

    /// Whether this buffer charges a share of the groups of ingress port `port`.
    #[inline]
    pub fn charges_group(&self, port: usize) -> bool {
        self.charges_group[port]
    }

    /// The worker this buffer is.
    #[inline]
    pub fn me(&self) -> u8 {
        self.me
    }

    /// Gives back the cells of a lossless frame leaving (or dropped) here: to this buffer's
    /// share of the group if it charged them, else as a credit for the worker that did.
    #[inline]
    pub fn give_back(&mut self, charger: u8, ingress: usize, pg: usize, cells: u64) {
        if charger == self.me {
            self.release_group(ingress, pg, cells);
        } else {
            self.released[usize::from(charger) * self.groups.len() + ingress][pg] += cells;
        }
    }

    /// Cumulative cell bytes given back to `charger`'s share of group (`port`, `pg`).
    #[inline]
    pub fn released(&self, charger: usize, port: usize, pg: usize) -> u64 {
        self.released[charger * self.groups.len() + port][pg]
    }

    /// The other pollers' shares of group (`port`, `pg`), (lossless pool, headroom) cell
    /// bytes, as last published.
    #[inline]
    pub fn set_others_share(&mut self, port: usize, pg: usize, (shared, headroom): (u64, u64)) {
        self.others_groups[port][pg] = GroupCells { shared, headroom };
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
        move |tc| slots[fifos[tc].head as usize].as_ref().map_or(0, Frame::size)
    }

    /// Bit n set while `port`'s queue n holds frames.
    #[inline]
    pub fn backlog(&self, port: usize) -> u8 {
        self.ports[port].backlog
    }

    /// Frame bytes queued on `port` in class `tc` (ECN's depth with `measure = "frame_bytes"`).
    #[inline]
    pub fn queue_bytes(&self, port: usize, tc: usize) -> u64 {
        self.ports[port].fifos[tc].bytes
    }

    /// Cell bytes the frames queued on `port` in class `tc` hold (ECN's depth by default).
    #[inline]
    pub fn queue_cells(&self, port: usize, tc: usize) -> u64 {
        self.ports[port].fifos[tc].cells
    }

    /// Frames queued on `port` in class `tc`.
    #[inline]
    pub fn queue_len(&self, port: usize, tc: usize) -> u32 {
        self.ports[port].fifos[tc].len
    }

    /// Cell bytes group (`port`, `pg`) holds, pool and headroom: this buffer's share
    /// and the other pollers' as last published.
    #[inline]
    pub fn group_occupancy(&self, port: usize, pg: usize) -> u64 {
        let (group, others) = (&self.groups[port][pg], &self.others_groups[port][pg]);
        group.shared + group.headroom + others.shared + others.headroom
    }

    /// Cell bytes group (`port`, `pg`) holds in its headroom: this buffer's share and
    /// the other pollers' as last published.
    #[inline]
    pub fn group_headroom(&self, port: usize, pg: usize) -> u64 {
        self.groups[port][pg].headroom + self.others_groups[port][pg].headroom
    }

    /// Cell bytes this buffer's share of group (`port`, `pg`) holds in the lossless pool
    /// and in its headroom.
    pub fn group_cells(&self, port: usize, pg: usize) -> (u64, u64) {
        let group = &self.groups[port][pg];
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::CELL_BYTES;
    use crate::packet::HeapPacket;
    use crate::testing::Leaf;
    use crate::wire::IpHeader;

    /// Two 100G ports, TC3 lossless with a static XOFF far above the pool (so the pool's room
    /// decides), 64 KiB of headroom per port, a 1 MiB buffer; TC0 lossy.
    fn config() -> Config {
        Leaf::new("b")
            .switch("buffer_bytes = 1048576")
            .qos(
                "dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n\
                 [qos.pfc]\nxoff_bytes = 900000\nxon_bytes = 100000\nheadroom_bytes = 65536",
            )
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .config()
    }

    /// `idle_room` is the largest charge `lossless_passes` and `lossy_passes` take, with the
    /// group's occupancy and headroom before it, whatever this buffer and the other workers
    /// (their group shares and pool charges as published) hold.
    #[test]
    fn the_idle_room_is_the_largest_charge_that_passes() {
        let cell = CELL_BYTES;
        let mut buffer = SharedBuffer::<HeapPacket>::new(&config());
        let mut compared = 0;
        for step in 0..60u64 {
            // This buffer's charges grow; the others' shares and pool charges vary.
            let _ = buffer.admit_lossless(0, 3, (step % 7) * 40 * cell);
            let _ = buffer.admit_lossy(1, 0, (step % 5) * 20 * cell);
            buffer.set_others_share(0, 3, ((step % 4) * 300 * cell, (step % 3) * 10 * cell));
            buffer.set_others_used(((step % 6) * 500 * cell, (step % 4) * 400 * cell));
            for tc in [0, 3] {
                let room = buffer.idle_room(0, 1, tc);
                for charge in (0..4000).map(|cells| cells * cell) {
                    let (passes, group) = if tc == 3 {
                        let group = buffer.lossless_passes(0, 3, charge);
                        (group.is_some(), group)
                    } else {
                        (buffer.lossy_passes(1, 0, charge), None)
                    };
                    assert_eq!(
                        room.is_some_and(|room| charge <= room.most),
                        passes,
                        "step {step}, TC{tc}, {charge} B: {room:?}"
                    );
                    if let (Some(group), Some(room)) = (group, room) {
                        let before = room.group.expect("a lossless room has its group");
                        assert_eq!(
                            (before.occupancy + charge, before.headroom, false),
                            (group.occupancy, group.headroom, group.past_xoff)
                        );
                    }
                    compared += usize::from(passes);
                }
            }
        }
        assert!(compared > 10_000, "{compared} charges passed");
    }

    /// A frame of `len` bytes from `ingress` for `egress`'s queue `tc`.
    fn frame(ingress: usize, egress: usize, tc: usize, len: usize) -> Frame<HeapPacket> {
        let ip = IpHeader { l3_offset: 14, is_ipv6: false, ecn: 0 };
        Frame::new(HeapPacket::new(vec![0; len]), len, ingress, egress, tc, ip, 0)
    }

    #[test]
    fn a_lossless_frame_the_pool_cannot_hold_goes_to_headroom_counting_other_workers() {
        let config = config();
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::sharded(&config, 0, 2, |port| port == 0, 0);
        let pool = buffer.plan().lossless_pool;
        let cell = CELL_BYTES;
        // The other workers hold all of the pool but two cells: a three-cell frame does not fit.
        buffer.set_others_used((pool - 2 * cell, 0));
        let charged = buffer.admit_lossless(0, 3, 3 * cell).unwrap();
        assert_eq!((charged.headroom, charged.occupancy), (3 * cell, 3 * cell), "into headroom");
        assert!(charged.past_xoff, "headroom in use: pause");
        assert_eq!(buffer.pool_used().0, 0, "nothing taken from the pool");
        // Two cells still fit the pool.
        let charged = buffer.admit_lossless(1, 3, 2 * cell).unwrap();
        assert_eq!(charged.headroom, 0);
        assert_eq!(buffer.pool_used().0, 2 * cell);
        // The headroom holds 64 KiB: past it the frame is refused.
        let headroom = buffer.plan().headroom[0];
        assert_eq!(buffer.admit_lossless(0, 3, headroom - 3 * cell + cell), Err(DropReason::HeadroomOverflow));
        assert!(buffer.admit_lossless(0, 3, headroom - 3 * cell).is_ok(), "exactly full");
        // What the pool part gives back lowers the others' view of it too.
        buffer.release_group(1, 3, 2 * cell);
        assert_eq!(buffer.pool_used().0, 0);
    }

    #[test]
    fn a_share_of_a_spread_group_is_judged_with_the_other_pollers_shares() {
        // Worker 1 of 2 polls a queue of port 0 (static XOFF 900,000, headroom 64 KiB).
        let config = config();
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::sharded(&config, 1, 2, |port| port == 0, 0);
        let cell = CELL_BYTES;
        let xoff = buffer.xoff();
        // The other poller holds all of XOFF but one cell: a two-cell frame goes to headroom.
        buffer.set_others_share(0, 3, (xoff - cell, 0));
        assert_eq!(buffer.group_occupancy(0, 3), xoff - cell);
        let charged = buffer.admit_lossless(0, 3, 2 * cell).unwrap();
        assert_eq!(charged, GroupCharge { occupancy: xoff + cell, headroom: 2 * cell, past_xoff: true });
        assert_eq!(buffer.group_cells(0, 3), (0, 2 * cell), "its own share");
        // One cell still fits under XOFF, in the pool, but the group is past it.
        let charged = buffer.admit_lossless(0, 3, cell).unwrap();
        assert!(charged.past_xoff && charged.headroom == 2 * cell);
        assert_eq!(buffer.group_cells(0, 3), (cell, 2 * cell));
        // The other's headroom counts against the one headroom of the port.
        let headroom = buffer.plan().headroom[0];
        buffer.set_others_share(0, 3, (xoff - cell, headroom - 3 * cell));
        assert_eq!(buffer.group_headroom(0, 3), headroom - cell);
        assert_eq!(buffer.admit_lossless(0, 3, 2 * cell), Err(DropReason::HeadroomOverflow));
        assert!(buffer.admit_lossless(0, 3, cell).is_ok(), "exactly full");
        // Another port's group is untouched by port 0's shares.
        assert_eq!(buffer.admit_lossless(1, 3, cell).unwrap().occupancy, cell);
        // What it gives back of a frame it charged returns to its own share; a frame worker 0
        // charged becomes worker 0's credit.
        buffer.give_back(1, 0, 3, cell);
        assert_eq!(buffer.group_cells(0, 3), (cell, 2 * cell), "headroom first");
        buffer.give_back(0, 0, 3, cell);
        assert_eq!((buffer.group_cells(0, 3), buffer.released(0, 0, 3)), ((cell, 2 * cell), cell));
        // Each (worker, port) keeps its own count.
        buffer.give_back(0, 1, 3, 2 * cell);
        assert_eq!((buffer.released(0, 1, 3), buffer.released(0, 0, 3), buffer.released(1, 1, 3)), (2 * cell, cell, 0));
    }

    #[test]
    fn the_lossy_pool_and_a_queues_dynamic_limit_refuse_at_their_edges() {
        let config = config();
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::new(&config);
        let (pool, cell) = (buffer.plan().lossy_pool, CELL_BYTES);
        // The others hold all of the lossy pool but one cell.
        buffer.set_others_used((0, pool - cell));
        assert_eq!(buffer.admit_lossy(1, 0, 2 * cell), Err(DropReason::BufferFull), "over the pool");
        assert!(buffer.admit_lossy(1, 0, cell).is_ok(), "the last cell");
        assert_eq!(buffer.admit_lossy(1, 1, cell), Err(DropReason::BufferFull), "nothing free");
        // Alone: one queue stops at alpha x the free pool, leaving room for the others.
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::new(&config);
        let mut taken = 0;
        while buffer.admit_lossy(1, 0, cell).is_ok() {
            taken += cell;
        }
        assert!(taken < pool, "{taken} of {pool}: the dynamic limit, not the pool, stopped it");
        assert_eq!(buffer.lossy_cells(1, 0), taken);
        assert!(buffer.admit_lossy(1, 1, cell).is_ok(), "another queue still gets in");
        buffer.release_lossy(1, 1, cell);
        buffer.release_lossy(1, 0, cell);
        assert_eq!((buffer.lossy_cells(1, 0), buffer.lossy_cells(1, 1)), (taken - cell, 0), "the queue's own cells");
        assert!(buffer.admit_lossy(1, 0, cell).is_ok(), "a cell back, a cell in");
        assert!(buffer.admit_lossy(1, 0, cell).is_err(), "and at the limit again");
    }

    /// The idle path's judgements against the charges they stand for, over states around
    /// their edges, with other pollers' shares and other workers' pool charges: a lossless
    /// frame passes exactly when `admit_lossless` would charge it to the pool, below XOFF
    /// after it, with no headroom in this share, and says the same charge; a lossy frame
    /// passes exactly when `admit_lossy` takes it.
    #[test]
    fn the_idle_judgements_agree_with_the_charges_at_every_edge() {
        let config = Leaf::new("b")
            .switch("buffer_bytes = 1048576")
            .qos(
                "dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n\
                 [qos.pfc]\nxoff_bytes = 90000\nxon_bytes = 10000\nheadroom_bytes = 65536\n\
                 [qos.buffer]\nlossy_alpha = 0.5",
            )
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .config();
        let cell = CELL_BYTES;
        let fresh = || SharedBuffer::<HeapPacket>::sharded(&config, 1, 2, |port| port == 0, 0);
        let (xoff, pool, lossy_pool) = (fresh().xoff(), fresh().plan().lossless_pool, fresh().plan().lossy_pool);
        let (mut passed, mut refused) = (0, 0);
        for others_shared in [0, xoff / 2, xoff - 3 * cell, xoff - cell] {
            for others_headroom in [0, cell, 2 * cell] {
                for others_pool in [0, pool - 4 * cell, pool - cell] {
                    for own in [(0, 0), (cell, 0), (0, cell)] {
                        for charge in [cell, 2 * cell, 3 * cell] {
                            let mut buffer = fresh();
                            buffer.set_others_share(0, 3, (others_shared, others_headroom));
                            buffer.set_others_used((others_pool, 0));
                            buffer.groups[0][3] = GroupCells { shared: own.0, headroom: own.1 };
                            buffer.lossless_used = own.0;
                            let judged = buffer.lossless_passes(0, 3, charge);
                            let before = buffer.groups[0][3];
                            let charged = buffer.admit_lossless(0, 3, charge);
                            let would = match charged {
                                Ok(group)
                                    if !group.past_xoff
                                        && before.headroom == 0
                                        && group.headroom == others_headroom =>
                                {
                                    Some(group)
                                }
                                _ => None,
                            };
                            let state = (others_shared, others_headroom, others_pool, own, charge);
                            assert_eq!(judged, would, "{state:?}: {charged:?}");
                            if judged.is_some() {
                                passed += 1;
                            } else {
                                refused += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(passed > 20 && refused > 20, "{passed} passed, {refused} refused: both sides of every edge");
        let (mut passed, mut refused) = (0, 0);
        for others_lossy in [0, lossy_pool / 2, lossy_pool - 8 * cell, lossy_pool - cell] {
            for queued in [0, 2, 40] {
                for charge in [cell, 2 * cell, 4 * cell] {
                    let mut buffer = fresh();
                    buffer.set_others_used((0, others_lossy));
                    for _ in 0..queued {
                        let _ = buffer.admit_lossy(1, 0, cell);
                    }
                    let judged = buffer.lossy_passes(1, 0, charge);
                    let state = (others_lossy, queued, charge);
                    assert_eq!(judged, buffer.admit_lossy(1, 0, charge).is_ok(), "{state:?}");
                    if judged {
                        passed += 1;
                    } else {
                        refused += 1;
                    }
                }
            }
        }
        assert!(passed > 5 && refused > 5, "{passed} passed, {refused} refused");
    }

    #[test]
    fn a_full_arena_refuses_every_frame_and_takes_them_again_once_one_leaves() {
        let config = config();
        // Lossless frames from port 0, whose group worker 0 owns (it charged them): worker 1's
        // arena fills with no pool standing in the way.
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::sharded(&config, 1, 2, |port| port == 1, 0);
        let slots = SharedBuffer::<HeapPacket>::capacity(&config);
        for _ in 0..slots {
            assert!(buffer.has_slot());
            buffer.push(frame(0, 1, 3, 60));
        }
        assert!(!buffer.has_slot());
        assert_eq!(buffer.queued_packets(), slots as u64);
        assert_eq!(buffer.admit_lossy(1, 1, CELL_BYTES), Err(DropReason::BufferFull));
        assert_eq!(buffer.admit_lossless(0, 3, CELL_BYTES), Err(DropReason::HeadroomOverflow));
        assert!(buffer.pop(1, 3).is_some());
        assert!(buffer.has_slot(), "a slot back");
        assert_eq!(buffer.released(0, 0, 3), CELL_BYTES, "the owner's credit");
        assert_eq!(buffer.released(1, 0, 3), 0, "none for itself");
        assert!(buffer.admit_lossless(1, 3, CELL_BYTES).is_ok());
        assert_eq!(buffer.queue_len(1, 3), slots as u32 - 1);
    }

    #[test]
    fn the_arena_is_used_from_the_front_and_reused_before_it_grows() {
        let config = config();
        // As above: frames whose cells another worker charged, so that no pool is involved.
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::sharded(&config, 1, 2, |port| port == 1, 0);
        assert!(buffer.slots.is_empty() && buffer.slots.capacity() >= SharedBuffer::<HeapPacket>::capacity(&config));
        for _ in 0..3 {
            buffer.push(frame(0, 1, 3, 60));
        }
        assert_eq!(buffer.slots.len(), 3, "a slot written per frame held");
        assert!(buffer.pop(1, 3).is_some() && buffer.pop(1, 3).is_some());
        buffer.push(frame(0, 1, 0, 60));
        buffer.push(frame(0, 1, 3, 60));
        assert_eq!(buffer.slots.len(), 3, "freed slots taken first");
        buffer.push(frame(0, 1, 3, 60));
        assert_eq!((buffer.slots.len(), buffer.queued_packets()), (4, 4));
        assert_eq!((buffer.queue_len(1, 0), buffer.queue_len(1, 3)), (1, 3));
    }

    #[test]
    fn a_sharded_arena_has_room_for_what_other_workers_may_overcommit() {
        let config = config();
        let slots = SharedBuffer::<HeapPacket>::capacity(&config);
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::sharded(&config, 1, 2, |port| port == 1, 3);
        for _ in 0..slots + 3 {
            assert!(buffer.has_slot(), "one slot per cell and three more");
            buffer.push(frame(0, 1, 3, 60));
        }
        assert!(!buffer.has_slot());
    }

    #[test]
    fn a_queue_counts_its_frames_in_bytes_and_in_the_cells_they_hold() {
        let config = config();
        let mut buffer: SharedBuffer<HeapPacket> = SharedBuffer::new(&config);
        for len in [60, 257, 512] {
            buffer.admit_lossless(0, 3, plan::charge(len)).unwrap();
            buffer.push(frame(0, 1, 3, len));
        }
        assert_eq!(buffer.queue_bytes(1, 3), 60 + 257 + 512);
        assert_eq!(buffer.queue_cells(1, 3), (1 + 2 + 2) * CELL_BYTES, "a started cell is a whole cell");
        assert_eq!(buffer.queue_cells(1, 0), 0, "per class");
        buffer.pop(1, 3);
        assert_eq!((buffer.queue_bytes(1, 3), buffer.queue_cells(1, 3)), (257 + 512, 4 * CELL_BYTES));
        buffer.pop(1, 3);
        buffer.pop(1, 3);
        assert_eq!((buffer.queue_bytes(1, 3), buffer.queue_cells(1, 3)), (0, 0));
    }
}
