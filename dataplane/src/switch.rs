//! The switch: classify → queue (shared-buffer admission, PFC) → schedule, for any `PacketBuf`.
//! Both engines drive it with the current time: the replay engine in virtual time, the DPDK
//! workers in TSC time. It never allocates after `new`.
//!
//! Buffer (`pfc::BufferPlan`): every queued frame occupies cells (`pfc::CELL_BYTES`) of one
//! pool; its descriptor lives in one arena of slots shared by all queues, sized so that a full
//! buffer of minimum-size frames fits. Lossy frames are charged to their egress queue in the
//! lossy pool, up to the queue's dynamic limit (lossy_alpha x the free lossy pool), or are
//! tail-dropped (`buffer_full`). Lossless frames are charged to their (ingress port, priority)
//! group: to the lossless pool up to the group's XOFF point, then to the group's reserved
//! headroom, and are dropped only when that overflows (`headroom_overflow`). A group's
//! occupancy is two counters, not a mark on each frame: a leaving frame gives its cells back
//! to the group's headroom first, then to the pool, as ASICs account priority groups. (Marking
//! frames kept headroom in use until the very frames that took it left, behind a deep queue,
//! and each XOFF/XON cycle meanwhile added its in-flight frames: headroom overflowed live with
//! hosts that honoured every pause.) Lossy traffic never touches the lossless pool, so it
//! cannot move an XOFF point.
//!
//! PFC: a packet's priority is its traffic class. When a lossless group goes past XOFF, an
//! XOFF frame (pause 0xFFFF) is queued for its ingress port ahead of all data and refreshed at
//! half its duration while the group stays above XON; at or below XON, an XON frame (time 0)
//! follows. Received PFC frames pause the port's egress for the lossless priorities they
//! name, for quanta x 512 bit times; time 0 resumes.
//!
//! Watchdog, per (egress port, lossless priority), as SONiC's since 2022: a queue that holds
//! frames and has been paused continuously for `detection_ms` is in a storm; the action
//! applies (drop: flush the queue and drop its arrivals, while traffic the storming port
//! sends to healthy ports flows as before; forward: ignore received PFC; alert: count and
//! log) until `restoration_ms` pass with no PFC frame (XOFF or XON) for that priority.
//!
//! Punting (with `[control]`): a frame the classifier says is for the control plane passes its
//! ingress port's policer (`punt::Policer`, in the frame's arrival time) into a bounded outbox
//! the engine drains with `take_punted`; over the rate it is `punt_policed`, into a full
//! outbox `punt_queue_full`.
//!
//! Invariant: every frame handed to `receive` is queued, consumed (PFC), punted or dropped and
//! counted;
//! every queued frame leaves through `transmit`, a watchdog flush or `drain`, counted; the
//! pool, per-queue and per-group cell counts are exactly the charges of the frames queued.

#![forbid(unsafe_code)]

use crate::config::{wire_bytes, Config, EcnProfile, MarkOn, PortConfig, WatchdogAction, TRAFFIC_CLASSES};
use crate::drops::DropReason;
use crate::observe::stats::SwitchStats;
use crate::packet::PacketBuf;
use crate::pipeline::balance::{PortView, Selector};
use crate::pipeline::classify::{Classifier, IpHeader, Next, Verdict};
use crate::pipeline::fib::FibHandle;
use crate::pipeline::punt::{Outbox, Policer, PuntReason, Punted};
use crate::rng::Rng;
use crate::tm::ecn;
use crate::tm::pfc::{self, BufferPlan, XOFF_QUANTA};
use crate::tm::schedule::Scheduler;
use crate::wire::pfc::Repr;

/// What became of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Queued {
        egress: usize,
        tc: usize,
    },
    /// A PFC frame, consumed by the switch.
    FlowControl,
    /// For the control plane: waiting in the punt outbox (`take_punted`).
    Punted(PuntReason),
    Dropped(DropReason),
}

/// Punted frames the outbox holds between the engine's drains: two bursts.
pub const PUNT_OUTBOX: usize = 64;

const NIL: u32 = u32::MAX;
/// "Never", for deadlines.
pub const NEVER: u64 = u64::MAX;

struct Slot<P> {
    packet: Option<P>,
    next: u32,
    ingress: u16,
    /// Marked CE at enqueue; counted in `ecn_marked` only when it leaves, so the counter
    /// equals the CE frames sent, whatever is dropped or flushed after marking.
    marked: bool,
    /// Frame bytes, kept here so the scheduler and release never touch the packet's buffer
    /// (reading an mbuf's length at dequeue cost ~10% of transmit in `perf`). Its cell charge
    /// is `pfc::charge(len)`; a queued frame's length never changes.
    len: u32,
    ip: IpHeader,
    /// When the frame was received (ps), for the latency histogram.
    arrival_ps: u64,
}

/// A frame unlinked from its queue, with what its slot knew of it.
struct Popped<P> {
    packet: P,
    ingress: usize,
    marked: bool,
    ip: IpHeader,
    arrival_ps: u64,
    len: u64,
}

/// Frame descriptors of every queue, linked in per-queue FIFOs, with a free list.
struct Arena<P> {
    slots: Vec<Slot<P>>,
    free: u32,
}

impl<P> Arena<P> {
    fn new(capacity: usize) -> Self {
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
        Self { slots, free: if capacity > 0 { 0 } else { NIL } }
    }
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

#[derive(Debug, Clone, Copy)]
struct PriorityGroup {
    /// Cell bytes charged to the shared buffer.
    shared: u64,
    /// Cell bytes charged to the group's headroom.
    headroom: u64,
    /// An XOFF was decided and no XON since.
    xoff_sent: bool,
    /// When to refresh the XOFF (NEVER while none is outstanding or it is not yet sent).
    refresh_at: u64,
}

impl Default for PriorityGroup {
    fn default() -> Self {
        Self { shared: 0, headroom: 0, xoff_sent: false, refresh_at: NEVER }
    }
}

struct PortState {
    queues: [Fifo; TRAFFIC_CLASSES],
    /// Bit n set while queue n holds frames.
    backlog: u8,
    /// The latest `paused_until` of any priority: at or after it nothing is paused, so
    /// eligibility is one compare in the common case.
    pause_horizon: u64,
    scheduler: Scheduler,
    groups: [PriorityGroup; 8],
    /// Egress paused by received PFC until then (ps).
    paused_until: [u64; 8],
    /// Start of the current continuous pause.
    paused_since: [u64; 8],
    storm: [bool; 8],
    /// When the last PFC frame naming the priority arrived (XOFF or XON): restoration waits
    /// for `restoration_ms` of silence.
    last_pfc_rx: [u64; 8],
    /// PFC times to send on this port, per priority.
    outbox: [Option<u16>; 8],
    speed_mbps: u64,
    /// When the frames already handed to the link will have left it (ps): the frame on the
    /// wire in replay, and in live also those the shaper has queued to the NIC ahead of their
    /// wire time. Load balancing counts it as queue; the live shaper paces by it.
    link_free_ps: u64,
    /// Enabled in the config and link up (live).
    usable: bool,
    enabled: bool,
    headroom: u64,
    /// Half of an XOFF's pause time: the refresh period.
    refresh_ps: u64,
}

impl PortState {
    /// Whether class `priority` is held by a received pause at `now` (and the watchdog does
    /// not ignore it).
    #[inline]
    fn paused(&self, priority: usize, now: u64, action: WatchdogAction) -> bool {
        self.paused_until[priority] > now && !(self.storm[priority] && action != WatchdogAction::Alert)
    }
}

/// The group selector's view of the ports.
struct Ports<'a> {
    ports: &'a [PortState],
    now: u64,
    watchdog_action: WatchdogAction,
}

impl PortView for Ports<'_> {
    fn usable(&self, port: usize) -> bool {
        self.ports[port].usable
    }

    fn drain_cost(&self, port: usize, tc: usize) -> u64 {
        let state = &self.ports[port];
        if state.paused(tc, self.now, self.watchdog_action) {
            return u64::MAX;
        }
        // What is still to leave the link, then the queued frame bytes at the port's speed
        // (bytes x 8e6 / Mb/s ps): a busy link with an empty queue costs more than an idle one.
        state.link_free_ps.saturating_sub(self.now) + state.queues[tc].bytes * 8_000_000 / state.speed_mbps
    }
}

pub struct Switch<P: PacketBuf> {
    classifier: Classifier,
    selector: Selector,
    arena: Arena<P>,
    ports: Vec<PortState>,
    plan: BufferPlan,
    /// Cell bytes in use in each pool (headroom apart).
    lossless_used: u64,
    lossy_used: u64,
    queued_packets: u64,
    detection_ps: u64,
    restoration_ps: u64,
    watchdog_action: WatchdogAction,
    ecn: [Option<EcnProfile>; TRAFFIC_CLASSES],
    /// Every random choice (ECN marking) draws from this, seeded per replay or per worker.
    rng: Rng,
    /// Earliest time `advance` has work to do.
    deadline: u64,
    /// Per ingress port, with `[control]` (else empty: nothing is punted).
    punt_policers: Vec<Policer>,
    punted: Outbox<P>,
    /// The class frames from the control plane leave in.
    control_tc: u8,
    pub stats: SwitchStats,
}

impl<P: PacketBuf> Switch<P> {
    /// Builds the switch; `seed` seeds its random choices. The config was validated
    /// (`Config::parse`), so the PFC plan exists.
    pub fn new(config: &Config, seed: u64) -> Self {
        let plan = BufferPlan::new(config).expect("a validated config has a buffer plan");
        let ports = config
            .ports
            .iter()
            .zip(&plan.headroom)
            .map(|(port, &headroom)| PortState {
                queues: [Fifo::default(); TRAFFIC_CLASSES],
                backlog: 0,
                pause_horizon: 0,
                scheduler: Scheduler::new(&config.qos),
                groups: [PriorityGroup::default(); 8],
                paused_until: [0; 8],
                paused_since: [0; 8],
                storm: [false; 8],
                last_pfc_rx: [0; 8],
                outbox: [None; 8],
                speed_mbps: port.speed_mbps,
                link_free_ps: 0,
                usable: port.enabled,
                enabled: port.enabled,
                headroom,
                refresh_ps: pfc::quanta_ps(XOFF_QUANTA, port.speed_mbps) / 2,
            })
            .collect();
        let watchdog = &config.qos.watchdog;
        let classifier = Classifier::new(config);
        let selector = Selector::new(&classifier.fib().groups);
        Self {
            classifier,
            selector,
            arena: Arena::new(Self::arena_capacity(config)),
            ports,
            plan,
            lossless_used: 0,
            lossy_used: 0,
            queued_packets: 0,
            detection_ps: u64::from(watchdog.detection_ms) * 1_000_000_000,
            restoration_ps: u64::from(watchdog.restoration_ms) * 1_000_000_000,
            watchdog_action: watchdog.action,
            ecn: config.qos.ecn.clone(),
            rng: Rng::new(seed),
            deadline: NEVER,
            punt_policers: match &config.control {
                Some(control) => vec![Policer::new(control.punt_pps, control.punt_burst); config.ports.len()],
                None => Vec::new(),
            },
            punted: Outbox::new(if config.control.is_some() { PUNT_OUTBOX } else { 0 }),
            control_tc: config.control.as_ref().map_or(7, |control| control.control_tc),
            stats: SwitchStats::new(config),
        }
    }

    /// Frames the buffer can hold at most: one per cell.
    pub fn arena_capacity(config: &Config) -> usize {
        (config.buffer_bytes / pfc::CELL_BYTES) as usize + 1
    }

    fn lossless(&self, priority: usize) -> bool {
        self.plan.lossless_mask & (1 << priority) != 0
    }

    fn storm_drops(&self, port: usize, priority: usize) -> bool {
        self.ports[port].storm[priority] && self.watchdog_action == WatchdogAction::Drop
    }

    /// The priority a peer would give `frame` (its traffic class), or `None` for MAC control.
    pub fn priority_of(&self, frame: &[u8]) -> Option<u8> {
        self.classifier.priority(frame)
    }

    /// Takes one frame received on `ingress` at `now` (ps).
    #[inline]
    pub fn receive(&mut self, ingress: usize, mut packet: P, now: u64) -> Received {
        let verdict = self.classifier.classify(packet.data_mut());
        self.receive_classified(ingress, packet, verdict, now)
    }

    /// Takes a frame already classified (by an RX worker's own `Classifier` in the pipelined
    /// model): counts it, queues it or applies its PFC frame.
    #[inline(always)]
    pub fn receive_classified(&mut self, ingress: usize, mut packet: P, verdict: Verdict, now: u64) -> Received {
        let len = packet.len();
        let (target, tc, flow_hash, ip) = match verdict {
            Verdict::FlowControl(repr) => {
                self.pause_received(ingress, &repr, now);
                return Received::FlowControl;
            }
            Verdict::Drop(reason) => {
                let rx = &mut self.stats.ports[ingress];
                rx.rx_packets += 1;
                rx.rx_bytes += len as u64;
                rx.drops[reason.index()] += 1;
                return Received::Dropped(reason);
            }
            Verdict::Punt(reason) => return self.punt(ingress, packet, reason, now),
            Verdict::Forward { next, tc, flow_hash, ip } => (next, usize::from(tc), flow_hash, ip),
        };
        let rx = &mut self.stats.ports[ingress];
        rx.rx_packets += 1;
        rx.rx_bytes += len as u64;
        let (egress, next_hop, member) = match target {
            Next::Adjacency(adjacency) => (usize::from(adjacency.port), adjacency.mac, None),
            Next::Group(group) => {
                let group = group as usize;
                let view = Ports { ports: &self.ports, now, watchdog_action: self.watchdog_action };
                let chosen =
                    self.selector.select(group, flow_hash, tc, now, &mut self.rng, &view).and_then(|(slot, port)| {
                        // A frame classified under an older FIB generation (pipelined) may name a
                        // group that has changed since: no member, no route.
                        let member = self.classifier.fib().groups.get(group)?.members.get(usize::from(slot))?;
                        Some((usize::from(port), member.mac, Some((group, slot))))
                    });
                match chosen {
                    Some(chosen) => chosen,
                    None => {
                        self.stats.ports[ingress].drops[DropReason::NoRoute.index()] += 1;
                        return Received::Dropped(DropReason::NoRoute);
                    }
                }
            }
        };
        self.classifier.rewrite_macs(packet.data_mut(), next_hop);
        let received = self.enqueue(ingress, egress, tc, packet, ip, now);
        if let (Received::Queued { .. }, Some((group, slot))) = (received, member) {
            // Counted for the config's groups; groups of next hops come and go with routes.
            if let Some(counts) = self.stats.groups.get_mut(group) {
                counts[usize::from(slot)] += 1;
            }
        }
        received
    }

    /// Queues a frame the control plane sends out of `egress` (the kernel wrote it on the
    /// port's host interface) in the control class: as written (its MACs and TTL are the
    /// kernel's), through admission, ECN and the scheduler like any frame, so it never
    /// bypasses PFC or the shaper. Its drops are charged to `egress`, the port whose host
    /// interface it came from.
    pub fn inject(&mut self, egress: usize, packet: P, now: u64) -> Received {
        self.stats.ports[egress].injected += 1;
        let ip = match crate::wire::parse::parse(packet.data()).map(|parsed| parsed.payload) {
            Ok(crate::wire::parse::Payload::Ip(ip)) => IpHeader {
                l3_offset: ip.l3_offset as u16,
                is_ipv6: matches!(ip.destination, crate::wire::parse::Destination::V6(_)),
                ecn: ip.ecn,
            },
            // Not IP (ARP, ND's link layer is IP; LLDP): never marked.
            _ => IpHeader { l3_offset: 0, is_ipv6: false, ecn: ecn::NOT_ECT },
        };
        self.enqueue(egress, egress, usize::from(self.control_tc), packet, ip, now)
    }

    /// Admits a frame to `egress`'s queue `tc` (ECN at enqueue, the pools), charging drops to
    /// `ingress`.
    fn enqueue(
        &mut self,
        ingress: usize,
        egress: usize,
        tc: usize,
        mut packet: P,
        mut ip: IpHeader,
        now: u64,
    ) -> Received {
        let len = packet.len();
        let mut marked = false;
        if self.ecn[tc].as_ref().is_some_and(|profile| profile.mark_on == MarkOn::Enqueue) {
            let depth = self.ports[egress].queues[tc].bytes;
            match self.apply_ecn(tc, depth, &mut packet, &mut ip) {
                Ok(ce) => marked = ce,
                Err(reason) => {
                    self.stats.ports[ingress].drops[reason.index()] += 1;
                    self.stats.ports[egress].queues[tc].dropped += 1;
                    return Received::Dropped(reason);
                }
            }
        }
        let charge = pfc::charge(len);
        let admitted = if self.lossless(tc) {
            self.admit_lossless(ingress, egress, tc, charge)
        } else {
            self.admit_lossy(egress, tc, charge)
        };
        match admitted {
            Ok(()) => {}
            Err(reason) => {
                self.stats.ports[ingress].drops[reason.index()] += 1;
                self.stats.ports[egress].queues[tc].dropped += 1;
                return Received::Dropped(reason);
            }
        };
        let slot = self.arena.free;
        debug_assert_ne!(slot, NIL, "the arena holds one slot per cell");
        let entry = &mut self.arena.slots[slot as usize];
        self.arena.free = entry.next;
        *entry = Slot {
            packet: Some(packet),
            next: NIL,
            ingress: ingress as u16,
            marked,
            len: len as u32,
            ip,
            arrival_ps: now,
        };
        let state = &mut self.ports[egress];
        state.backlog |= 1 << tc;
        let queue = &mut state.queues[tc];
        if queue.tail == NIL {
            queue.head = slot;
        } else {
            self.arena.slots[queue.tail as usize].next = slot;
        }
        queue.tail = slot;
        queue.len += 1;
        queue.bytes += len as u64;
        self.queued_packets += 1;
        let depth = queue.bytes;
        let stats = &mut self.stats.ports[egress].queues[tc];
        stats.max_depth_bytes = stats.max_depth_bytes.max(depth);
        // Counted for the config's groups; groups of next hops come and go with routes.
        if self.lossless(tc) && self.ports[egress].paused_until[tc] > now && !self.ports[egress].storm[tc] {
            // A paused queue now holds frames: the watchdog's clock matters.
            self.deadline = self.deadline.min(self.ports[egress].paused_since[tc].saturating_add(self.detection_ps));
        }
        Received::Queued { egress, tc }
    }

    /// Takes the control plane's newest FIB snapshot, if there is one (once per burst).
    #[inline]
    pub fn refresh_fib(&mut self, handle: &FibHandle) {
        if self.classifier.refresh(handle) {
            self.selector.sync(&self.classifier.fib().groups);
        }
    }

    /// Polices a frame for the control plane and puts it in the outbox.
    fn punt(&mut self, ingress: usize, packet: P, reason: PuntReason, now: u64) -> Received {
        let rx = &mut self.stats.ports[ingress];
        rx.rx_packets += 1;
        rx.rx_bytes += packet.len() as u64;
        let Some(policer) = self.punt_policers.get_mut(ingress) else {
            // The classifier punts only with `[control]`, which gives every port a policer.
            rx.drops[DropReason::Unsupported.index()] += 1;
            return Received::Dropped(DropReason::Unsupported);
        };
        if !policer.admit(now) {
            rx.drops[DropReason::PuntPoliced.index()] += 1;
            return Received::Dropped(DropReason::PuntPoliced);
        }
        match self.punted.push(Punted { port: ingress, reason, packet }) {
            Ok(()) => {
                rx.punted[reason.index()] += 1;
                Received::Punted(reason)
            }
            Err(_) => {
                rx.drops[DropReason::PuntQueueFull.index()] += 1;
                Received::Dropped(DropReason::PuntQueueFull)
            }
        }
    }

    /// Recounts a frame `take_punted` gave out that the engine could not hand to the control
    /// plane (its queue was full): no longer punted, dropped as `punt_queue_full`.
    pub fn punt_refused(&mut self, port: usize, reason: PuntReason) {
        let stats = &mut self.stats.ports[port];
        stats.punted[reason.index()] -= 1;
        stats.drops[DropReason::PuntQueueFull.index()] += 1;
    }

    /// The next frame for the control plane, oldest first.
    #[inline]
    pub fn take_punted(&mut self) -> Option<Punted<P>> {
        self.punted.pop()
    }

    /// Applies the class's ECN profile at `depth`: marks ECT frames CE (returning true), says
    /// to drop a lossy non-ECT frame (`wred`), leaves everything else alone.
    fn apply_ecn(&mut self, tc: usize, depth: u64, packet: &mut P, ip: &mut IpHeader) -> Result<bool, DropReason> {
        let Some(profile) = &self.ecn[tc] else { return Ok(false) };
        if !ecn::should_mark(profile, depth, &mut self.rng) {
            return Ok(false);
        }
        match ip.ecn {
            ecn::CE => Ok(false),
            ecn::NOT_ECT if self.lossless(tc) => Ok(false),
            ecn::NOT_ECT => Err(DropReason::Wred),
            _ => {
                ecn::set_ce(packet.data_mut(), usize::from(ip.l3_offset), ip.is_ipv6);
                ip.ecn = ecn::CE;
                Ok(true)
            }
        }
    }

    /// Charges a lossy frame to its egress queue in the lossy pool, within the queue's dynamic
    /// limit (lossy_alpha x the free lossy pool).
    fn admit_lossy(&mut self, egress: usize, tc: usize, charge: u64) -> Result<(), DropReason> {
        let free = self.plan.lossy_pool - self.lossy_used;
        let queue = &mut self.ports[egress].queues[tc];
        if charge > free || queue.lossy_cells + charge > self.plan.lossy_limit(free) || self.arena.free == NIL {
            return Err(DropReason::BufferFull);
        }
        queue.lossy_cells += charge;
        self.lossy_used += charge;
        Ok(())
    }

    /// The XOFF point of every lossless group now (it moves with the free lossless pool).
    #[inline]
    fn lossless_xoff(&self) -> u64 {
        self.plan.xoff(self.plan.lossless_pool - self.lossless_used)
    }

    /// Charges a lossless frame to its group: shared up to XOFF, then headroom; decides XOFF
    /// when the group passes its XOFF point.
    fn admit_lossless(
        &mut self,
        ingress: usize,
        egress: usize,
        priority: usize,
        charge: u64,
    ) -> Result<(), DropReason> {
        if self.storm_drops(egress, priority) {
            return Err(DropReason::PfcWatchdog);
        }
        if self.arena.free == NIL {
            return Err(DropReason::HeadroomOverflow);
        }
        let xoff = self.lossless_xoff();
        let port = &mut self.ports[ingress];
        let group = &mut port.groups[priority];
        let in_headroom = if group.shared + charge <= xoff && self.lossless_used + charge <= self.plan.lossless_pool {
            group.shared += charge;
            self.lossless_used += charge;
            false
        } else if group.headroom + charge <= port.headroom {
            group.headroom += charge;
            true
        } else {
            return Err(DropReason::HeadroomOverflow);
        };
        let occupancy = group.shared + group.headroom;
        if (in_headroom || occupancy > xoff) && !group.xoff_sent {
            group.xoff_sent = true;
            port.outbox[priority] = Some(XOFF_QUANTA);
        }
        let pg_stats = &mut self.stats.ports[ingress].priority_groups[priority];
        pg_stats.max_bytes = pg_stats.max_bytes.max(occupancy);
        pg_stats.max_headroom_bytes = pg_stats.max_headroom_bytes.max(group.headroom);
        Ok(())
    }

    /// Unlinks the head of a queue and releases its buffer.
    fn pop(&mut self, port: usize, tc: usize) -> Option<Popped<P>> {
        let state = &mut self.ports[port];
        let queue = &mut state.queues[tc];
        let slot = queue.head;
        if slot == NIL {
            return None;
        }
        let entry = &mut self.arena.slots[slot as usize];
        let packet = entry.packet.take().expect("a linked slot holds a frame");
        let (ingress, marked, len, ip) = (usize::from(entry.ingress), entry.marked, u64::from(entry.len), entry.ip);
        let charge = pfc::charge(len as usize);
        let arrival_ps = entry.arrival_ps;
        queue.head = entry.next;
        if queue.head == NIL {
            queue.tail = NIL;
            state.backlog &= !(1 << tc);
        }
        entry.next = self.arena.free;
        self.arena.free = slot;
        queue.len -= 1;
        queue.bytes -= len;
        self.queued_packets -= 1;
        if self.lossless(tc) {
            // Headroom first, then the pool (see the module notes).
            let group = &mut self.ports[ingress].groups[tc];
            let from_headroom = charge.min(group.headroom);
            group.headroom -= from_headroom;
            group.shared -= charge - from_headroom;
            self.lossless_used -= charge - from_headroom;
        } else {
            self.ports[port].queues[tc].lossy_cells -= charge;
            self.lossy_used -= charge;
        }
        if self.lossless(tc) {
            self.maybe_xon(ingress, tc);
        }
        Some(Popped { packet, ingress, marked, ip, arrival_ps, len })
    }

    /// Sends XON for a group that dropped to its XON point.
    fn maybe_xon(&mut self, port: usize, priority: usize) {
        // Most groups never sent XOFF: check that before computing thresholds.
        if !self.ports[port].groups[priority].xoff_sent {
            return;
        }
        let xoff = self.lossless_xoff();
        let xon = self.plan.xon(xoff);
        let state = &mut self.ports[port];
        let group = &mut state.groups[priority];
        if group.xoff_sent && group.shared + group.headroom <= xon {
            group.xoff_sent = false;
            group.refresh_at = NEVER;
            state.outbox[priority] = Some(0);
        }
    }

    /// Which TCs of `port` may send at `now`: not paused, or paused but ignored by the watchdog.
    fn eligible(&self, port: usize, now: u64) -> u8 {
        let state = &self.ports[port];
        if now >= state.pause_horizon {
            return 0xff;
        }
        let mut mask = 0xffu8;
        for priority in 0..8 {
            if state.paused(priority, now, self.watchdog_action) {
                mask &= !(1 << priority);
            }
        }
        mask
    }

    /// Marks a port's link up or down (live); a disabled port stays unusable.
    pub fn set_link_up(&mut self, port: usize, up: bool) {
        let state = &mut self.ports[port];
        state.usable = state.enabled && up;
    }

    /// The next data frame `egress` should send at `now`, chosen by its scheduler among the
    /// classes not paused.
    #[inline]
    pub fn transmit(&mut self, egress: usize, now: u64) -> Option<P> {
        let eligible = self.eligible(egress, now);
        let (tc, packet, len, marked) = loop {
            let state = &mut self.ports[egress];
            let (queues, slots) = (&state.queues, &self.arena.slots);
            // DWRR shares link time: each frame costs what it takes on the wire, padding,
            // preamble and gap included (64-byte frames against 1500-byte ones at equal
            // weights shared 58.5/41.5 when counted in frame bytes).
            let head_cost = |tc: usize| wire_bytes(slots[queues[tc].head as usize].len as usize) as usize;
            let tc = state.scheduler.select(eligible, state.backlog, head_cost)?;
            let Popped { mut packet, ingress, mut marked, mut ip, arrival_ps, len } =
                self.pop(egress, tc).expect("the scheduler picked a non-empty queue");
            if self.ecn[tc].as_ref().is_some_and(|profile| profile.mark_on == MarkOn::Dequeue) {
                let depth = self.ports[egress].queues[tc].bytes;
                match self.apply_ecn(tc, depth, &mut packet, &mut ip) {
                    Ok(ce) => marked |= ce,
                    Err(reason) => {
                        self.stats.ports[ingress].drops[reason.index()] += 1;
                        self.stats.ports[egress].queues[tc].dropped += 1;
                        continue;
                    }
                }
            }
            self.stats.latency.record(now.saturating_sub(arrival_ps) / 1000);
            break (tc, packet, len, marked);
        };
        let state = &mut self.ports[egress];
        state.link_free_ps = state.link_free_ps.max(now) + PortConfig::wire_time_for(state.speed_mbps, len as usize);
        let stats = &mut self.stats.ports[egress];
        stats.tx_packets += 1;
        stats.tx_bytes += len;
        stats.queues[tc].tx_packets += 1;
        stats.queues[tc].tx_bytes += len;
        stats.queues[tc].ecn_marked += u64::from(marked);
        Some(packet)
    }

    /// Whether `port` has a PFC frame to send (it goes before any data).
    #[inline]
    pub fn has_control(&self, port: usize) -> bool {
        self.ports[port].outbox.iter().any(Option::is_some)
    }

    /// When `port`'s link will have sent every frame handed to it (see `PortState`).
    #[inline]
    pub fn link_free_ps(&self, port: usize) -> u64 {
        self.ports[port].link_free_ps
    }

    /// The PFC frame `port` sends now, combining every pending priority; counts it.
    pub fn take_control(&mut self, port: usize, now: u64) -> Option<Repr> {
        let state = &mut self.ports[port];
        let mut repr = Repr::default();
        for priority in 0..8 {
            let Some(time) = state.outbox[priority].take() else { continue };
            repr.class_enable |= 1 << priority;
            repr.times[priority] = time;
            if time > 0 {
                self.stats.ports[port].pfc_xoff_tx[priority] += 1;
                state.groups[priority].refresh_at = now + state.refresh_ps;
                self.deadline = self.deadline.min(now + state.refresh_ps);
            } else {
                self.stats.ports[port].pfc_xon_tx[priority] += 1;
            }
        }
        if repr.class_enable != 0 {
            state.link_free_ps =
                state.link_free_ps.max(now) + PortConfig::wire_time_for(state.speed_mbps, crate::wire::pfc::FRAME_LEN);
        }
        (repr.class_enable != 0).then_some(repr)
    }

    fn pause_received(&mut self, port: usize, repr: &Repr, now: u64) {
        let lossless = self.plan.lossless_mask;
        let state = &mut self.ports[port];
        for priority in 0..8 {
            if repr.class_enable & (1 << priority) == 0 {
                continue;
            }
            self.stats.ports[port].pfc_rx[priority] += 1;
            if lossless & (1 << priority) == 0 {
                continue; // PFC is not enabled for this priority: counted, not obeyed
            }
            state.last_pfc_rx[priority] = now;
            let time = repr.times[priority];
            if time == 0 {
                state.paused_until[priority] = now;
                continue;
            }
            if state.paused_until[priority] <= now {
                state.paused_since[priority] = now;
            }
            state.paused_until[priority] = now + pfc::quanta_ps(time, state.speed_mbps);
            state.pause_horizon = state.pause_horizon.max(state.paused_until[priority]);
            self.deadline = self.deadline.min(state.paused_until[priority]);
            if state.queues[priority].len > 0 || state.storm[priority] {
                self.deadline = self.deadline.min(state.paused_since[priority].saturating_add(self.detection_ps));
            }
        }
    }

    /// Earliest time at which `advance` has work (a pause ends, an XOFF needs refreshing, the
    /// watchdog detects or restores), or `NEVER`.
    pub fn next_deadline(&self) -> u64 {
        self.deadline
    }

    /// Runs the timers due at `now`: XOFF refreshes, the watchdog, and the end of pauses (after
    /// which the engine should try to transmit). Cheap when nothing is due.
    #[inline]
    pub fn advance(&mut self, now: u64) {
        if now < self.deadline {
            return;
        }
        let mut next = NEVER;
        for port in 0..self.ports.len() {
            for priority in 0..8 {
                if !self.lossless(priority) {
                    continue;
                }
                next = next.min(self.advance_group(port, priority, now));
                next = next.min(self.advance_watchdog(port, priority, now));
                let paused_until = self.ports[port].paused_until[priority];
                if paused_until > now {
                    next = next.min(paused_until);
                }
            }
        }
        self.deadline = next;
    }

    /// Refreshes or withdraws an outstanding XOFF; returns the group's next deadline.
    fn advance_group(&mut self, port: usize, priority: usize, now: u64) -> u64 {
        let group = self.ports[port].groups[priority];
        if !group.xoff_sent {
            return NEVER;
        }
        if group.refresh_at > now {
            return group.refresh_at;
        }
        let xoff = self.lossless_xoff();
        if group.shared + group.headroom > self.plan.xon(xoff) {
            self.ports[port].outbox[priority] = Some(XOFF_QUANTA);
            self.ports[port].groups[priority].refresh_at = NEVER; // set again when sent
        } else {
            self.maybe_xon(port, priority);
        }
        NEVER
    }

    /// Detects and restores storms; returns the watchdog's next deadline for the queue.
    fn advance_watchdog(&mut self, port: usize, priority: usize, now: u64) -> u64 {
        let state = &self.ports[port];
        if state.storm[priority] {
            let restore_at = state.last_pfc_rx[priority].saturating_add(self.restoration_ps);
            if now < restore_at {
                return restore_at;
            }
            self.ports[port].storm[priority] = false;
            self.stats.ports[port].watchdog_restorations[priority] += 1;
            tracing::warn!("PFC watchdog: port {port} priority {priority} restored");
            return NEVER;
        }
        if state.paused_until[priority] <= now || state.queues[priority].len == 0 {
            return NEVER;
        }
        let detect_at = state.paused_since[priority].saturating_add(self.detection_ps);
        if now < detect_at {
            return detect_at;
        }
        let (paused_for, queued) = (now - state.paused_since[priority], state.queues[priority].len);
        self.ports[port].storm[priority] = true;
        self.stats.ports[port].watchdog_storms[priority] += 1;
        tracing::warn!(
            "PFC watchdog: port {port} priority {priority} paused for {:.3} ms with {queued} frames queued: storm, action {:?}",
            paused_for as f64 / 1e9,
            self.watchdog_action
        );
        if self.watchdog_action == WatchdogAction::Drop {
            // The stormed egress queue only: the port's ingress group (what its peer sends us)
            // keeps its PFC, since that traffic drains to other, healthy ports.
            while let Some(Popped { packet, ingress, .. }) = self.pop(port, priority) {
                drop(packet);
                self.stats.ports[ingress].drops[DropReason::PfcWatchdog.index()] += 1;
                self.stats.ports[port].queues[priority].dropped += 1;
            }
        }
        self.ports[port].last_pfc_rx[priority].saturating_add(self.restoration_ps)
    }

    /// Frames queued on all ports.
    pub fn queued_packets(&self) -> u64 {
        self.queued_packets
    }

    /// Cell bytes in use in both pools (headroom excluded).
    pub fn shared_used(&self) -> u64 {
        self.lossless_used + self.lossy_used
    }

    /// Cell bytes in use in the lossless and the lossy pool.
    pub fn pool_used(&self) -> (u64, u64) {
        (self.lossless_used, self.lossy_used)
    }

    /// Copies every queue's current depth into its `depth_bytes` gauge (before publishing).
    pub fn refresh_depth_gauges(&mut self) {
        for (state, stats) in self.ports.iter().zip(self.stats.ports.iter_mut()) {
            for (queue, gauge) in state.queues.iter().zip(stats.queues.iter_mut()) {
                gauge.depth_bytes = queue.bytes;
            }
        }
    }

    /// Frame bytes queued on `port` in class `tc` (what ECN compares with kmin/kmax).
    pub fn queue_bytes(&self, port: usize, tc: usize) -> u64 {
        self.ports[port].queues[tc].bytes
    }

    /// The XOFF and XON points of a lossless group right now, in cell bytes (with dynamic
    /// thresholds they move with the free lossless pool).
    pub fn pfc_thresholds(&self) -> (u64, u64) {
        let xoff = self.lossless_xoff();
        (xoff, self.plan.xon(xoff))
    }

    /// Empties every queue at shutdown when ports can no longer send; the frames are counted
    /// as `buffer_full` drops (on the port they came in on, and the queue) and released.
    pub fn drain(&mut self) -> u64 {
        let mut drained = 0;
        for port in 0..self.ports.len() {
            for tc in 0..TRAFFIC_CLASSES {
                while let Some(Popped { packet, ingress, .. }) = self.pop(port, tc) {
                    drop(packet);
                    self.stats.ports[ingress].drops[DropReason::BufferFull.index()] += 1;
                    self.stats.ports[port].queues[tc].dropped += 1;
                    drained += 1;
                }
            }
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapPacket;
    use crate::traffic::frames::FrameSpec;

    fn config(extra_switch: &str, extra_qos: &str) -> Config {
        let text = format!(
            r#"
[switch]
name = "t"
mac = "02:00:00:00:00:aa"
{extra_switch}
[qos]
dscp_to_tc = {{ 26 = 3, default = 0 }}
lossless = [3]
{extra_qos}
[[port]]
name = "p0"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "p1"
speed_gbps = 100
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "p1"
[[route]]
prefix = "10.0.0.0/24"
port = "p0"
"#
        );
        Config::parse(&text, "t.toml").unwrap()
    }

    fn arp() -> HeapPacket {
        let mut frame = vec![0u8; 42];
        frame[0..6].copy_from_slice(&[0xff; 6]);
        frame[12..14].copy_from_slice(&[0x08, 0x06]);
        HeapPacket::new(frame)
    }

    #[test]
    fn punted_frames_are_policed_per_port_then_wait_in_the_outbox() {
        // 1,000 pps, burst 3.
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", "[control]\npunt_pps = 1000\npunt_burst = 3"), 1);
        let now = 1_000_000_000; // 1 ms
        let mut outcomes = Vec::new();
        for _ in 0..4 {
            outcomes.push(switch.receive(0, arp(), now));
        }
        let punted = Received::Punted(PuntReason::Arp);
        assert_eq!(outcomes, [punted, punted, punted, Received::Dropped(DropReason::PuntPoliced)]);
        // Another port has its own bucket.
        assert_eq!(switch.receive(1, arp(), now), punted);
        // A TTL-expiring routed frame, a millisecond later when a token is back.
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.ttl = 1;
        let expiring = spec.build();
        assert_eq!(
            switch.receive(0, HeapPacket::new(expiring.clone()), now + 1_000_000_000),
            Received::Punted(PuntReason::Ttl)
        );
        let stats = &switch.stats.ports[0];
        assert_eq!(
            (stats.rx_packets, stats.punted[PuntReason::Arp.index()], stats.punted[PuntReason::Ttl.index()]),
            (5, 3, 1)
        );
        assert_eq!(stats.drops[DropReason::PuntPoliced.index()], 1);
        assert_eq!(switch.stats.ports[1].punted[PuntReason::Arp.index()], 1);
        // The engine takes them oldest first, as received (the TTL untouched).
        let ports: Vec<usize> = std::iter::from_fn(|| switch.take_punted()).map(|p| p.port).collect();
        assert_eq!(ports, [0, 0, 0, 1, 0]);
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", "[control]\npunt_pps = 1000\npunt_burst = 3"), 1);
        switch.receive(0, HeapPacket::new(expiring.clone()), now);
        assert_eq!(switch.take_punted().unwrap().packet.data(), &expiring[..]);
    }

    #[test]
    fn a_full_punt_outbox_drops_and_counts() {
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", "[control]\npunt_burst = 1000"), 1);
        for _ in 0..PUNT_OUTBOX {
            assert_eq!(switch.receive(0, arp(), 0), Received::Punted(PuntReason::Arp));
        }
        assert_eq!(switch.receive(0, arp(), 0), Received::Dropped(DropReason::PuntQueueFull));
        assert_eq!(switch.stats.ports[0].drops[DropReason::PuntQueueFull.index()], 1);
        assert!(switch.take_punted().is_some());
        assert_eq!(switch.receive(0, arp(), 0), Received::Punted(PuntReason::Arp), "room again");
    }

    #[test]
    fn a_new_fib_generation_takes_effect_at_the_next_refresh() {
        let text = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:aa\"\n\
                    [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:10:00\"\n\
                    [[port]]\nname = \"p1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:11:00\"\n\
                    [[port]]\nname = \"p2\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:12:00\"\n\
                    [control]\n";
        let config = Config::parse(text, "t.toml").unwrap();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let handle = crate::pipeline::fib::FibHandle::new(crate::pipeline::fib::Fib::new(
            &config,
            &crate::pipeline::fib::Learned::default(),
            1,
        ));
        let to = |switch: &mut Switch<HeapPacket>| switch.receive(0, frame(0, 60), 0);
        switch.refresh_fib(&handle);
        assert_eq!(to(&mut switch), Received::Dropped(DropReason::NoRoute), "no route to 10.0.1.2 yet");
        // The kernel learns a multipath route to 10.0.1.0/24 and both next hops.
        let ip = |text: &str| text.parse::<std::net::IpAddr>().unwrap();
        let mac = |last: u8| crate::wire::ethernet::MacAddress([0x02, 0, 0, 0, 0x20, last]);
        let learned = crate::pipeline::fib::Learned {
            neighbors: vec![
                crate::pipeline::fib::Neighbor { ip: ip("10.255.0.1"), mac: mac(1), port: 1 },
                crate::pipeline::fib::Neighbor { ip: ip("10.255.0.3"), mac: mac(3), port: 2 },
            ],
            routes: vec![crate::pipeline::fib::KernelRoute {
                address: ip("10.0.1.0"),
                len: 24,
                next_hops: vec![(Some(ip("10.255.0.1")), 1), (Some(ip("10.255.0.3")), 2)],
            }],
            addresses: Vec::new(),
        };
        handle.publish(crate::pipeline::fib::Fib::new(&config, &learned, 2));
        assert_eq!(to(&mut switch), Received::Dropped(DropReason::NoRoute), "until the next refresh");
        switch.refresh_fib(&handle);
        let Received::Queued { egress, .. } = to(&mut switch) else { panic!() };
        let sent = switch.transmit(egress, 0).unwrap();
        assert_eq!(sent.data()[0..6], mac(egress as u8 * 2 - 1).0, "the chosen next hop's MAC");
        // A frame classified under generation 2 (an RX worker's) reaches a switch on generation
        // 3, where that group is gone: no route, no panic.
        let verdict = Classifier::with_fib(&config, handle.load()).classify(frame(0, 60).data_mut());
        handle.publish(crate::pipeline::fib::Fib::new(&config, &crate::pipeline::fib::Learned::default(), 3));
        switch.refresh_fib(&handle);
        assert!(matches!(verdict, Verdict::Forward { next: Next::Group(0), .. }));
        assert_eq!(switch.receive_classified(0, frame(0, 60), verdict, 0), Received::Dropped(DropReason::NoRoute));
    }

    #[test]
    fn injected_frames_queue_in_the_control_class_unchanged_and_are_counted() {
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", "[control]\ncontrol_tc = 6"), 1);
        // What the kernel wrote: an ARP reply, and a TCP segment with TTL 64.
        let reply = arp().data().to_vec();
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 7);
        spec.transport = crate::traffic::frames::Transport::Tcp { source: 179, destination: 40000 };
        let segment = spec.build();
        assert_eq!(switch.inject(1, HeapPacket::new(reply.clone()), 0), Received::Queued { egress: 1, tc: 6 });
        assert_eq!(switch.inject(1, HeapPacket::new(segment.clone()), 0), Received::Queued { egress: 1, tc: 6 });
        assert_eq!(switch.stats.ports[1].injected, 2);
        assert_eq!(switch.stats.ports[1].rx_packets, 0, "not received from the wire");
        assert_eq!(switch.transmit(1, 0).unwrap().data(), &reply[..]);
        assert_eq!(switch.transmit(1, 0).unwrap().data(), &segment[..], "MACs and TTL as the kernel wrote them");
        assert_eq!(switch.stats.ports[1].queues[6].tx_packets, 2);
    }

    fn frame(dscp: u8, len: usize) -> HeapPacket {
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.dscp = dscp;
        spec.frame_len = len;
        HeapPacket::new(spec.build())
    }

    fn conserved<P: PacketBuf>(switch: &Switch<P>) -> bool {
        switch.stats.rx_packets() == switch.stats.tx_packets() + switch.stats.dropped() + switch.queued_packets()
    }

    #[test]
    fn queue_then_transmit_releases_every_cell() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..10 {
            assert_eq!(switch.receive(0, frame(0, 60), 0), Received::Queued { egress: 1, tc: 0 });
        }
        assert_eq!(switch.shared_used(), 10 * 256);
        switch.refresh_depth_gauges();
        assert_eq!(switch.stats.ports[1].queues[0].depth_bytes, 600);
        assert_eq!((switch.stats.ports[0].rx_packets, switch.stats.ports[0].rx_bytes), (10, 600));
        let mut sent = 0;
        while let Some(packet) = switch.transmit(1, 0) {
            assert_eq!(packet.bytes[14 + 8], 63);
            sent += 1;
        }
        assert_eq!(sent, 10);
        assert_eq!(switch.shared_used(), 0);
        assert_eq!(switch.queue_bytes(1, 0), 0);
        assert_eq!((switch.stats.ports[1].queues[0].tx_packets, switch.stats.ports[1].queues[0].tx_bytes), (10, 600));
        assert_eq!((switch.stats.ports[1].tx_packets, switch.stats.ports[1].tx_bytes), (10, 600));
        assert_eq!(switch.stats.ports[1].queues[0].max_depth_bytes, 600);
        switch.refresh_depth_gauges();
        assert_eq!(switch.stats.ports[1].queues[0].depth_bytes, 0);
        assert!(conserved(&switch));
    }

    #[test]
    fn the_lossy_pool_gives_back_each_frames_cells_as_it_leaves() {
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", ""), 0);
        for _ in 0..3 {
            switch.receive(0, frame(0, 1000), 0);
        }
        assert_eq!(switch.pool_used(), (0, 3 * 1024));
        for left in (0..3).rev() {
            assert!(switch.transmit(1, 0).is_some());
            assert_eq!(switch.pool_used(), (0, left * 1024));
        }
    }

    #[test]
    fn dequeue_marking_drops_a_non_ect_lossy_frame_and_charges_its_ingress_and_queue() {
        let config = config("", "[qos.ecn.0]\nkmin_bytes = 0\nkmax_bytes = 0\npmax = 1.0\nmark_on = \"dequeue\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.dscp = 0;
        spec.ecn = 0;
        let not_ect = spec.build();
        spec.ecn = 0b10;
        let ect = spec.build();
        for frame in [&ect, &not_ect, &not_ect, &ect] {
            assert!(matches!(switch.receive(0, HeapPacket::new(frame.clone()), 0), Received::Queued { .. }));
        }
        // Marking looks at the depth behind a leaving frame: the first ECT frame leaves CE,
        // both non-ECT frames are dropped, the last frame leaves an empty queue unmarked.
        let sent = switch.transmit(1, 0).expect("the first ECT frame");
        assert_eq!(sent.data()[15] & 0b11, 0b11);
        let sent = switch.transmit(1, 0).expect("the last frame");
        assert_eq!(sent.data()[15] & 0b11, 0b10);
        assert!(switch.transmit(1, 0).is_none());
        assert_eq!(switch.stats.ports[0].drops[DropReason::Wred.index()], 2);
        assert_eq!(switch.stats.ports[1].queues[0].dropped, 2);
        assert_eq!(switch.stats.ports[1].queues[0].ecn_marked, 1);
        assert_eq!(switch.pool_used(), (0, 0));
    }

    #[test]
    fn a_lossy_queue_at_its_limit_takes_as_many_frames_as_have_left() {
        // The pool of 90 cells-worth of 1024 as below: one queue stops at 80. Ten leave; ten
        // more fit, and no more.
        let config = config("", "[qos.buffer]\nlossy_pool_bytes = 92160");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..85 {
            switch.receive(0, frame(0, 1000), 0);
        }
        assert_eq!(switch.queued_packets(), 80);
        for _ in 0..10 {
            switch.transmit(1, 0).unwrap();
        }
        assert_eq!(switch.ports[1].queues[0].lossy_cells, 70 * 1024);
        let admitted =
            (0..20).filter(|_| matches!(switch.receive(0, frame(0, 1000), 0), Received::Queued { .. })).count();
        assert_eq!(admitted, 10);
    }

    #[test]
    fn a_lossy_queue_stops_at_its_dynamic_limit_and_leaves_room_for_others() {
        // A lossy pool of 90 frames of 1000 bytes (1024 in cells), alpha 8: one queue alone
        // takes frames while its cells stay within 8 x what is free, so 80 (8/9 of the pool).
        let config = config("", "[qos.buffer]\nlossy_pool_bytes = 92160");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..85 {
            switch.receive(0, frame(0, 1000), 0);
        }
        assert_eq!(switch.queued_packets(), 80);
        assert_eq!(switch.pool_used(), (0, 80 * 1024));
        assert_eq!(switch.stats.ports[0].drops[DropReason::BufferFull.index()], 5);
        assert_eq!(switch.stats.ports[1].queues[0].dropped, 5);
        // Another lossy queue (TC 1 of p1, DSCP 8) still finds room: 9 of the 10 frames left.
        let mut tc1 = config.clone();
        tc1.qos.dscp_to_tc[8] = 1;
        let mut switch2: Switch<HeapPacket> = Switch::new(&tc1, 0);
        for _ in 0..80 {
            switch2.receive(0, frame(0, 1000), 0);
        }
        for _ in 0..12 {
            switch2.receive(0, frame(8, 1000), 0);
        }
        assert_eq!(switch2.queue_bytes(1, 1), 9 * 1000);
        // Lossy traffic never moves the lossless XOFF point.
        assert_eq!(switch.pfc_thresholds(), Switch::<HeapPacket>::new(&config, 0).pfc_thresholds());
        switch.transmit(1, 0).unwrap();
        assert_eq!(switch.pool_used(), (0, 79 * 1024));
        while switch.transmit(1, 0).is_some() {}
        assert_eq!(switch.pool_used(), (0, 0));
        // Emptied, the queue takes as much again.
        for _ in 0..85 {
            switch.receive(0, frame(0, 1000), 0);
        }
        assert_eq!(switch.queued_packets(), 80);
        assert!(conserved(&switch));
    }

    #[test]
    fn lossless_group_sends_xoff_uses_headroom_then_xon() {
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        // 1000-byte frames charge 1024: ten fit under XOFF, the eleventh goes to headroom.
        for _ in 0..10 {
            switch.receive(0, frame(26, 1000), 0);
        }
        assert!(!switch.has_control(0));
        switch.receive(0, frame(26, 1000), 0);
        assert!(switch.has_control(0));
        assert_eq!(switch.take_control(1, 1_000), None, "p1 has nothing to send");
        assert_eq!(switch.link_free_ps(1), 0);
        let xoff = switch.take_control(0, 1_000).unwrap();
        assert_eq!((xoff.class_enable, xoff.times[3]), (0x08, 0xffff));
        assert_eq!(switch.link_free_ps(0), 1_000 + 6_720, "the PFC frame takes the link");
        assert_eq!(switch.stats.ports[0].pfc_xoff_tx[3], 1);
        // Headroom holds four cells-worth of 1024: three more frames, then overflow.
        for _ in 0..3 {
            assert!(matches!(switch.receive(0, frame(26, 1000), 0), Received::Queued { .. }));
        }
        assert_eq!(switch.receive(0, frame(26, 1000), 0), Received::Dropped(DropReason::HeadroomOverflow));
        assert_eq!(switch.stats.ports[0].priority_groups[3].max_headroom_bytes, 4096);
        assert_eq!(switch.stats.ports[0].priority_groups[3].max_bytes, 14 * 1024, "pool and headroom");
        // Refresh at half of 0xffff quanta at 100G.
        assert_eq!(switch.next_deadline(), 1_000 + 335_539_200 / 2);
        switch.advance(switch.next_deadline() - 1);
        assert!(!switch.has_control(0), "not refreshed early");
        switch.advance(switch.next_deadline());
        assert_eq!(switch.take_control(0, 200_000_000).unwrap().times[3], 0xffff);
        // 14 frames queued; XON when 5120 bytes (5 frames) are left, after the ninth. The
        // first frames to leave took the pool, but give their cells back to the headroom
        // first: after four, the headroom is empty again and the group holds ten in the pool.
        for sent in 1..=8u64 {
            switch.transmit(1, 0).unwrap();
            assert!(!switch.has_control(0));
            let group = switch.ports[0].groups[3];
            assert_eq!(group.headroom, 4096u64.saturating_sub(sent * 1024), "after {sent}");
            assert_eq!(group.shared, (14 - sent).min(10) * 1024, "after {sent}");
            assert_eq!(switch.pool_used().0, group.shared);
        }
        switch.transmit(1, 0).unwrap();
        let xon = switch.take_control(0, 300_000_000).unwrap();
        assert_eq!((xon.class_enable, xon.times[3]), (0x08, 0));
        assert_eq!(switch.stats.ports[0].pfc_xon_tx[3], 1);
        assert!(conserved(&switch));
    }

    #[test]
    fn ecn_marked_counts_only_marked_frames_that_leave() {
        // TC 0 lossy, always marking (depth above kmax 0 after the first frame), a buffer
        // that holds a few frames: marked frames are tail-dropped and the rest watchdog-free.
        let config = config("buffer_bytes = 1048576", "[qos.ecn.0]\nkmin_bytes = 0\nkmax_bytes = 0\npmax = 1.0");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let ect = |len| {
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
            spec.ecn = 0b10;
            spec.dscp = 0;
            spec.frame_len = len;
            HeapPacket::new(spec.build())
        };
        let offered = 2 * switch.plan.lossy_pool / 1024;
        for _ in 0..offered {
            switch.receive(0, ect(1000), 0);
        }
        let dropped = switch.stats.ports[0].drops[DropReason::BufferFull.index()];
        assert!(dropped > 0, "the buffer overflowed: {:?} {}", switch.stats.ports[0].drops, switch.queued_packets());
        let mut ce_sent = 0;
        while let Some(packet) = switch.transmit(1, 0) {
            ce_sent += u64::from(packet.bytes[15] & 0b11 == ecn::CE);
        }
        assert_eq!(ce_sent, offered - dropped - 1, "every frame behind the first is marked");
        assert_eq!(switch.stats.ports[1].queues[0].ecn_marked, ce_sent);
        assert!(conserved(&switch));
    }

    #[test]
    fn dwrr_shares_link_time_not_frame_bytes() {
        // TC 0 and TC 3 at equal weight, always backlogged, 64-byte against 1500-byte frames.
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut wire = [0u64; 2];
        for _ in 0..4_000 {
            while switch.queue_bytes(1, 0) < 20_000 {
                switch.receive(0, frame(0, 64), 0);
            }
            while switch.queue_bytes(1, 3) < 20_000 {
                switch.receive(0, frame(26, 1500), 0);
            }
            let packet = switch.transmit(1, 0).unwrap();
            wire[usize::from(packet.bytes[15] >> 2 == 26)] += wire_bytes(packet.bytes.len());
        }
        let share = wire[0] as f64 / (wire[0] + wire[1]) as f64;
        assert!((share - 0.5).abs() < 0.01, "TC 0 had {share} of the link time");
    }

    #[test]
    fn group_members_cost_what_is_on_the_wire_and_queued_and_down_ones_are_unusable() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..5 {
            switch.receive(0, frame(0, 1000), 0);
        }
        let view = |switch: &Switch<HeapPacket>, now| {
            Ports { ports: &switch.ports, now, watchdog_action: WatchdogAction::Drop }.drain_cost(1, 0)
        };
        // 5,000 frame bytes queued at 100G: 400 ns.
        assert_eq!(view(&switch, 0), 400_000);
        // One leaves: 1,024 wire bytes on the wire (81.92 ns) and 4,000 bytes queued (320 ns).
        switch.transmit(1, 0).unwrap();
        assert_eq!(switch.link_free_ps(1), 81_920);
        assert_eq!(view(&switch, 0), 81_920 + 320_000);
        assert_eq!(view(&switch, 40_000), 41_920 + 320_000, "the frame on the wire is partly sent");
        assert_eq!(view(&switch, 100_000), 320_000, "and then gone");
        // A class paused by PFC costs everything.
        let mut paused = Switch::<HeapPacket>::new(&config, 0);
        assert_eq!(Ports { ports: &paused.ports, now: 0, watchdog_action: WatchdogAction::Drop }.drain_cost(1, 3), 0);
        let mut times = [0u16; 8];
        times[3] = 100;
        paused.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(
            Ports { ports: &paused.ports, now: 1, watchdog_action: WatchdogAction::Drop }.drain_cost(1, 3),
            u64::MAX
        );
        // A port whose link is down is not usable.
        assert!(Ports { ports: &paused.ports, now: 0, watchdog_action: WatchdogAction::Drop }.usable(1));
        paused.set_link_up(1, false);
        assert!(!Ports { ports: &paused.ports, now: 0, watchdog_action: WatchdogAction::Drop }.usable(1));
    }

    #[test]
    fn dropped_frames_count_as_received_and_peers_see_each_frame_s_priority() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut unrouted = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.9.9.9".parse().unwrap(), 7);
        unrouted.frame_len = 300;
        assert_eq!(switch.receive(0, HeapPacket::new(unrouted.build()), 0), Received::Dropped(DropReason::NoRoute));
        assert_eq!((switch.stats.ports[0].rx_packets, switch.stats.ports[0].rx_bytes), (1, 300));
        assert_eq!(switch.stats.ports[0].drops[DropReason::NoRoute.index()], 1);
        assert_eq!(switch.priority_of(&frame(26, 100).bytes), Some(3));
        assert_eq!(switch.priority_of(&frame(0, 100).bytes), Some(0));
        assert_eq!(switch.priority_of(&pfc_frame(0x08, [0; 8]).bytes), None, "PFC is never held back");
    }

    #[test]
    fn a_lossy_non_ect_frame_the_profile_would_mark_is_a_wred_drop() {
        let config = config("", "[qos.ecn.0]\nkmin_bytes = 0\nkmax_bytes = 0\npmax = 1.0");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        // The first frame finds an empty queue (depth 0, not above kmax 0); the next ones do not.
        let mut not_ect = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        (not_ect.dscp, not_ect.ecn, not_ect.frame_len) = (0, 0, 100);
        for _ in 0..3 {
            switch.receive(0, HeapPacket::new(not_ect.build()), 0);
        }
        assert_eq!(switch.queued_packets(), 1);
        assert_eq!(switch.stats.ports[0].drops[DropReason::Wred.index()], 2);
        assert_eq!(switch.stats.ports[1].queues[0].dropped, 2);
        assert!(conserved(&switch));
    }

    #[test]
    fn a_group_with_every_member_down_drops_as_no_route() {
        let text = "[switch]\nname = \"g\"\nmac = \"02:00:00:00:00:aa\"\n\
                    [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:10:00\"\n\
                    [[port]]\nname = \"u1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:11:00\"\n\
                    [[port]]\nname = \"u2\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:12:00\"\n\
                    [[port]]\nname = \"u3\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:13:00\"\nenabled = false\n\
                    [[route]]\nprefix = \"0.0.0.0/0\"\ngroup = \"up\"\n\
                    [[group]]\nname = \"up\"\nports = [\"u1\", \"u2\", \"u3\"]\nmode = \"spray\"\n";
        let mut switch: Switch<HeapPacket> = Switch::new(&Config::parse(text, "g.toml").unwrap(), 0);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 1, tc: 0 });
        switch.set_link_up(1, false);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 2, tc: 0 });
        switch.set_link_up(2, false);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Dropped(DropReason::NoRoute));
        assert_eq!(switch.stats.ports[0].drops[DropReason::NoRoute.index()], 1);
        assert_eq!(switch.stats.groups[0], [1, 1, 0]);
        switch.set_link_up(2, true);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 2, tc: 0 });
        // A member disabled in the config stays out when its link comes up.
        switch.set_link_up(3, true);
        for _ in 0..4 {
            assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 2, tc: 0 });
        }
        assert!(conserved(&switch));
    }

    #[test]
    fn timers_follow_pauses_and_queued_frames() {
        // A pause of 100 quanta at 100G (512 ns) on an empty queue: its end is the deadline,
        // and stays so when the timers run before it.
        let config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\naction = \"alert\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut times = [0u16; 8];
        times[3] = 100;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 512_000);
        switch.advance(512_000);
        assert_eq!(switch.next_deadline(), NEVER);
        // A pause of 0xffff quanta at 1G (33.5 ms) received with frames queued: the watchdog
        // must look at 1 ms, and after timers run early the pause's end is still due.
        let mut config = config;
        config.ports[1].speed_mbps = 1_000;
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        switch.receive(0, frame(26, 100), 0);
        times[3] = 0xffff;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 1_000_000_000);
        switch.advance(1_000_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1);
        assert_eq!(switch.next_deadline(), 33_553_920_000);
    }

    #[test]
    fn a_refresh_keeps_pausing_while_the_group_holds_more_than_xon() {
        // XON at XOFF (10 frames), headroom for 4: 13 frames, 3 in headroom. At the refresh the
        // group holds 13 > 10: XOFF again.
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 10240\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..13 {
            switch.receive(0, frame(26, 1000), 0);
        }
        switch.take_control(0, 0).unwrap();
        switch.advance(switch.next_deadline());
        assert_eq!(switch.take_control(0, 1).map(|r| r.times[3]), Some(0xffff));
    }

    #[test]
    fn a_refresh_looks_at_the_pool_too_when_the_headroom_is_empty() {
        // XOFF 10 frames, XON 5: 11 frames (one in headroom), then one leaves and gives the
        // headroom back. At the refresh the group holds 10 frames, all in the pool: above XON,
        // so XOFF again, not XON.
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..11 {
            switch.receive(0, frame(26, 1000), 0);
        }
        switch.take_control(0, 0).unwrap();
        switch.transmit(1, 0).unwrap();
        assert_eq!((switch.ports[0].groups[3].headroom, switch.ports[0].groups[3].shared), (0, 10 * 1024));
        switch.advance(switch.next_deadline());
        assert_eq!(switch.take_control(0, 1).map(|r| r.times[3]), Some(0xffff));
    }

    #[test]
    fn another_timer_does_not_refresh_an_xoff_early() {
        let config = config("", "[qos.pfc]\nxoff_bytes = 10240\nxon_bytes = 5120\nheadroom_bytes = 4096");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..11 {
            switch.receive(0, frame(26, 1000), 0);
        }
        switch.take_control(0, 0).unwrap();
        // p1 is paused for 100 quanta (512 ns): its end is a deadline long before the refresh.
        let mut times = [0u16; 8];
        times[3] = 100;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 512_000);
        switch.advance(512_000);
        assert!(!switch.has_control(0), "the XOFF is refreshed at half its pause, not before");
        switch.advance(switch.next_deadline());
        assert!(switch.has_control(0));
    }

    #[test]
    fn a_queue_that_was_paused_once_is_not_a_storm() {
        let config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\naction = \"alert\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut times = [0u16; 8];
        times[3] = 100;
        switch.receive(1, pfc_frame(0x08, times), 0);
        switch.receive(0, frame(26, 100), 1_000);
        // Long after the 512 ns pause ended, the frame still queued: not paused, no storm.
        switch.advance(2_000_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 0);
        assert_eq!(switch.queued_packets(), 1);
    }

    #[test]
    fn a_frame_into_a_paused_queue_arms_the_watchdog() {
        // p1 at 1 Gb/s: an XOFF of 0xffff quanta lasts 33.5 ms, past the 1 ms detection time.
        let mut config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\naction = \"alert\"");
        config.ports[1].speed_mbps = 1_000;
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        // Into a queue nobody paused: nothing to watch.
        switch.receive(0, frame(26, 100), 0);
        assert_eq!(switch.next_deadline(), NEVER);
        switch.transmit(1, 0).unwrap();
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        switch.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(switch.next_deadline(), 33_553_920_000, "the pause ends; the queue is empty");
        // Lossy frames into the unpaused TC 0 arm nothing.
        switch.receive(0, frame(0, 100), 50_000_000);
        assert_eq!(switch.next_deadline(), 33_553_920_000);
        // A lossless frame into the paused queue: the watchdog must look at 1 ms.
        switch.receive(0, frame(26, 100), 100_000_000);
        assert_eq!(switch.next_deadline(), 1_000_000_000);
        switch.advance(1_000_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1);
    }

    #[test]
    fn lossy_admission_takes_a_frame_that_fits_exactly() {
        // Alpha 1, a 3,072-byte pool: the second 1,024-byte frame brings the queue to exactly
        // what is then free (2,048): admitted. The third is not.
        let config = config("", "[qos.buffer]\nlossy_pool_bytes = 3072\nlossy_alpha = 1");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..3 {
            switch.receive(0, frame(0, 1000), 0);
        }
        assert_eq!(switch.queued_packets(), 2);
        // Alpha 64, a 2,048-byte pool: the second frame takes exactly the free rest.
        let config = super::tests::config("", "[qos.buffer]\nlossy_pool_bytes = 2048\nlossy_alpha = 64");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..3 {
            switch.receive(0, frame(0, 1000), 0);
        }
        assert_eq!(switch.queued_packets(), 2);
        assert_eq!(switch.pool_used(), (0, 2048));
    }

    #[test]
    fn ce_frames_stay_ce_uncounted_and_lossless_non_ect_frames_pass_unmarked() {
        let config = config("", "[qos.ecn.3]\nkmin_bytes = 0\nkmax_bytes = 0\npmax = 1.0");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let with_ecn = |ecn: u8| {
            let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
            spec.ecn = ecn;
            spec.frame_len = 100;
            HeapPacket::new(spec.build())
        };
        // Behind a first frame, every one is above kmax 0: marking is due for all of them.
        switch.receive(0, with_ecn(0b10), 0);
        for ecn in [0b11, 0b00, 0b11, 0b00] {
            assert!(matches!(switch.receive(0, with_ecn(ecn), 0), Received::Queued { .. }));
        }
        let ecn_out: Vec<u8> = std::iter::from_fn(|| switch.transmit(1, 0)).map(|p| p.bytes[15] & 0b11).collect();
        assert_eq!(ecn_out, [0b10, 0b11, 0b00, 0b11, 0b00], "CE stays CE; non-ECT lossless frames pass as they are");
        assert_eq!(switch.stats.ports[1].queues[3].ecn_marked, 0, "nothing was marked by the switch");
        assert_eq!(switch.stats.ports[0].drops.iter().sum::<u64>(), 0);
    }

    #[test]
    fn the_dynamic_xoff_point_is_alpha_times_the_free_lossless_pool() {
        let config = config("", "[qos.pfc]\nalpha = 0.5");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let pool = switch.plan.lossless_pool;
        assert_eq!(switch.pfc_thresholds(), (pool / 2, pool / 2 - 2 * 9216));
        for _ in 0..10 {
            switch.receive(0, frame(26, 1000), 0);
        }
        assert_eq!(switch.pool_used(), (10 * 1024, 0));
        assert_eq!(switch.pfc_thresholds().0, (pool - 10 * 1024) / 2);
    }

    #[test]
    fn a_big_headroom_drains_first_without_an_early_xon() {
        // XOFF at 5 frames, XON at 2, headroom for 8: 5 in the pool, 8 in headroom. The first
        // frames to leave give back headroom; XON waits until the group is down to 2.
        let config = config("", "[qos.pfc]\nxoff_bytes = 5120\nxon_bytes = 2048\nheadroom_bytes = 8192");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for _ in 0..13 {
            assert!(matches!(switch.receive(0, frame(26, 1000), 0), Received::Queued { .. }));
        }
        switch.take_control(0, 0).unwrap();
        for sent in 1..=11 {
            switch.transmit(1, 0).unwrap();
            assert_eq!(switch.has_control(0), sent == 11, "after {sent}");
        }
    }

    #[test]
    fn dequeue_marking_counts_what_it_marks_and_latency_is_recorded_in_ns() {
        let config = config("", "[qos.ecn.0]\nkmin_bytes = 0\nkmax_bytes = 0\npmax = 1.0\nmark_on = \"dequeue\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.dscp = 0;
        spec.ecn = 0b01;
        for _ in 0..3 {
            switch.receive(0, HeapPacket::new(spec.build()), 0);
        }
        // What each leaves behind: 2 frames, 1 frame (both above kmax 0: marked), then none.
        let ecn: Vec<u8> = (0..3).map(|_| switch.transmit(1, 5_000_000).unwrap().bytes[15] & 0b11).collect();
        assert_eq!(ecn, [0b11, 0b11, 0b01]);
        assert_eq!(switch.stats.ports[1].queues[0].ecn_marked, 2);
        assert_eq!((switch.stats.latency.samples, switch.stats.latency.max_ns), (3, 5_000));
    }

    #[test]
    fn drain_counts_what_was_still_queued_as_buffer_full() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for dscp in [0, 0, 26] {
            switch.receive(0, frame(dscp, 100), 0);
        }
        assert_eq!(switch.drain(), 3);
        assert_eq!(switch.queued_packets(), 0);
        assert_eq!(switch.stats.ports[0].drops[DropReason::BufferFull.index()], 3);
        assert_eq!((switch.stats.ports[1].queues[0].dropped, switch.stats.ports[1].queues[3].dropped), (2, 1));
        assert_eq!(switch.shared_used(), 0);
        assert!(conserved(&switch));
    }

    fn pfc_frame(class_enable: u8, times: [u16; 8]) -> HeapPacket {
        let mut bytes = vec![0; 60];
        Repr { class_enable, times }.emit(crate::wire::ethernet::MacAddress([2, 0, 0, 0, 0x11, 0]), &mut bytes);
        HeapPacket::new(bytes)
    }

    #[test]
    fn received_pfc_pauses_only_lossless_named_priorities() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        switch.receive(0, frame(26, 100), 0);
        switch.receive(0, frame(0, 100), 0);
        // XOFF for 3 (lossless) and 0 (lossy: counted, not obeyed) for 100 quanta = 512 ns.
        let mut times = [0u16; 8];
        times[0] = 100;
        times[3] = 100;
        assert_eq!(switch.receive(1, pfc_frame(0x09, times), 1_000), Received::FlowControl);
        assert_eq!(switch.stats.ports[1].pfc_rx, [1, 0, 0, 1, 0, 0, 0, 0]);
        let first = switch.transmit(1, 1_000).unwrap();
        assert_eq!(first.bytes[15] >> 2, 0, "TC0 still flows");
        assert!(switch.transmit(1, 1_000).is_none(), "TC3 is paused");
        assert_eq!(switch.next_deadline(), 1_000 + 512_000);
        assert!(switch.transmit(1, 512_999).is_none());
        assert!(switch.transmit(1, 513_000).is_some(), "the pause expired");
        // XON resumes at once.
        switch.receive(0, frame(26, 100), 600_000);
        switch.receive(1, pfc_frame(0x08, times), 600_000);
        assert!(switch.transmit(1, 600_001).is_none());
        switch.receive(1, pfc_frame(0x08, [0; 8]), 700_000);
        assert!(switch.transmit(1, 700_000).is_some());
        assert!(conserved(&switch));
    }

    fn storm(action: &str) -> (Switch<HeapPacket>, u64) {
        let config =
            config("", &format!("[qos.pfc_watchdog]\ndetection_ms = 1\nrestoration_ms = 2\naction = \"{action}\""));
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut times = [0u16; 8];
        times[3] = 0xffff; // 335 us at 100G
        let mut now = 0;
        for _ in 0..5 {
            switch.receive(0, frame(26, 100), now);
        }
        // XOFF every 100 us for 1.5 ms: continuously paused.
        while now <= 1_500_000_000 {
            switch.receive(1, pfc_frame(0x08, times), now);
            switch.advance(now);
            now += 100_000_000;
        }
        (switch, now)
    }

    #[test]
    fn watchdog_drop_flushes_and_drops_arrivals_until_restored() {
        let (mut switch, now) = storm("drop");
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1);
        assert_eq!(switch.queued_packets(), 0, "flushed");
        assert_eq!(switch.stats.ports[0].drops[DropReason::PfcWatchdog.index()], 5);
        assert_eq!(switch.stats.ports[1].queues[3].dropped, 5);
        // Last XOFF at 1.5 ms: restored at 3.5 ms.
        // Arrivals for the stormed queue, from any port, are dropped.
        assert_eq!(switch.receive(1, frame(26, 100), now), Received::Dropped(DropReason::PfcWatchdog));
        assert_eq!(switch.receive(0, frame(26, 100), now), Received::Dropped(DropReason::PfcWatchdog));
        switch.advance(3_499_999_999);
        assert_eq!(switch.stats.ports[1].watchdog_restorations[3], 0);
        switch.advance(3_500_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_restorations[3], 1);
        assert!(matches!(switch.receive(0, frame(26, 100), 3_500_000_000), Received::Queued { .. }));
        assert!(conserved(&switch));
    }

    #[test]
    fn watchdog_drop_spares_what_the_storming_port_sends_to_healthy_ports() {
        let (mut switch, now) = storm("drop");
        let mut to_p0 = FrameSpec::rocev2("10.0.1.2".parse().unwrap(), "10.0.0.1".parse().unwrap(), 7);
        to_p0.dscp = 26;
        to_p0.frame_len = 100;
        assert_eq!(switch.receive(1, HeapPacket::new(to_p0.build()), now), Received::Queued { egress: 0, tc: 3 });
        assert!(!switch.has_control(1), "p1's ingress group sent no XON or XOFF on detection");
        assert!(switch.transmit(0, now).is_some());
        assert!(conserved(&switch));
    }

    #[test]
    fn watchdog_restoration_waits_for_silence_from_xon_too() {
        let (mut switch, _) = storm("drop");
        // The last XOFF came at 1.5 ms; XONs follow at 2 and 3 ms: restoration is due 2 ms after
        // the last PFC frame of any kind, at 5 ms.
        for at in [2_000_000_000, 3_000_000_000] {
            switch.receive(1, pfc_frame(0x08, [0; 8]), at);
            switch.advance(at);
        }
        switch.advance(4_999_999_999);
        assert_eq!(switch.stats.ports[1].watchdog_restorations[3], 0);
        switch.advance(5_000_000_000);
        assert_eq!(switch.stats.ports[1].watchdog_restorations[3], 1);
    }

    #[test]
    fn watchdog_defaults_are_sonic_s_200_ms_each() {
        let watchdog = config("", "").qos.watchdog;
        assert_eq!((watchdog.detection_ms, watchdog.restoration_ms), (200, 200));
    }

    #[test]
    fn watchdog_detects_within_detection_time() {
        let config = config("", "[qos.pfc_watchdog]\ndetection_ms = 1\naction = \"forward\"");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        switch.receive(0, frame(26, 100), 0);
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        switch.receive(1, pfc_frame(0x08, times), 10);
        assert_eq!(switch.next_deadline(), 10 + 335_539_200);
        // Keep refreshing the pause; the detection deadline is 1 ms after the pause began.
        let mut now = 10;
        while now < 1_000_000_010 {
            now += 300_000_000;
            switch.receive(1, pfc_frame(0x08, times), now.min(1_000_000_000));
        }
        switch.advance(1_000_000_009);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 0);
        switch.advance(1_000_000_010);
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1);
        assert!(switch.transmit(1, 1_000_000_010).is_some(), "forward ignores the pause");
    }

    #[test]
    fn watchdog_alert_only_counts() {
        let (mut switch, now) = storm("alert");
        assert_eq!(switch.stats.ports[1].watchdog_storms[3], 1);
        assert_eq!(switch.queued_packets(), 5);
        assert!(switch.transmit(1, now).is_none(), "still paused");
    }
}
