//! The switch: classify → queue → schedule, for any `PacketBuf`, composed of the pipeline
//! (`pipeline::classify`, `pipeline::balance`, `pipeline::punt`, `pipeline::rewrite`) and
//! traffic management (`tm::buffer` for the shared buffer and its pools, `tm::pfc` for PFC
//! both ways and the watchdog, `tm::ecn`, `tm::schedule`). Every engine drives it with the
//! current time: the replay and fabric engines in virtual time, the DPDK workers in TSC time.
//! It never allocates after `new`.
//!
//! One frame's way, a file each: `forward.rs` (`receive` → classify → the switch's own
//! decisions → one rewrite → the frame's record), `queue.rs` (`enqueue`: ECN at enqueue, pool
//! admission, PFC's XOFF decision; ... `transmit`: the scheduler among the classes PFC does
//! not pause, ECN at dequeue, cells back, XON decision). A port sends its PFC frame
//! (`take_control`) before any data. Beside them, each an `impl Switch` block with its
//! tests: PFC frames in and out and the timers (`pfc.rs`), punting to the control plane and
//! injecting from it (`punt.rs`), sharding over workers (`shard.rs`), cut-through (`cut.rs`)
//! and its runs over a whole rx burst (`burst.rs`), the ACL tables (`acl.rs`) and a live
//! reload (`reload.rs`).
//!
//! Invariant: every frame handed to `receive` is queued, cut through, transferred, consumed
//! (PFC), punted or dropped and counted; every queued frame leaves through `transmit`, a
//! watchdog flush or `drain`, counted.

use crate::config::plan;
use crate::config::CoppClass;
use crate::config::{AclStage, Config, EcnMeasure, MarkOn};
use crate::counters::SwitchStats;
use crate::drops::DropReason;
use crate::link::PortState;
use crate::packet::PacketBuf;
use crate::pipeline::balance::{PortView, Selector};
use crate::pipeline::classify::{Classifier, Verdict};
use crate::pipeline::fib::FibHandle;
use crate::pipeline::fib::Next;
use crate::pipeline::punt::{Outbox, Policer, Punted};
use crate::pipeline::sample::{Sampler, NO_PORT};
use crate::rng::Rng;
use crate::tm::buffer::SharedBuffer;
use crate::tm::ecn::{self, EcnMarker};
use crate::tm::pfc::{PfcMap, PfcPort, Watchdog};
use crate::tm::schedule::Scheduler;
use crate::tm::shard::ShardBoard;
use crate::units::{wire_bytes, LinkRate, TRAFFIC_CLASSES};
use crate::wire::ethernet::MacAddress;
use crate::wire::parse;
use crate::wire::pfc::Repr;
use crate::wire::IpHeader;

pub use crate::tm::pfc::NEVER;
use acl::AclTables;
pub use cut::{CutThrough, QueueAll};
#[cfg(test)]
use forward::Ports;
pub use punt::PUNT_OUTBOX;
pub use reload::Reconfiguration;
pub use shard::discard_transfers;
use shard::Seat;

mod acl;
mod burst;
mod cut;
mod forward;
mod pfc;
mod punt;
mod queue;
mod reload;
mod shard;

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
    Punted(CoppClass),
    Dropped(DropReason),
    /// Admitted to its ingress group and waiting in `outgoing` for the worker owning `egress`.
    Transferred {
        egress: usize,
        tc: usize,
    },
}

/// A port's transmitter: its scheduler and its link.
struct EgressPort {
    scheduler: Scheduler,
    rate: LinkRate,
    /// When the frames already handed to the link will have left it (ps): the frame on the
    /// wire in replay, and in live also those the shaper has queued to the NIC ahead of their
    /// wire time. Load balancing counts it as queue; the live shaper paces by it.
    link_free_ps: u64,
    /// Enabled in the config, link up and not shut down (live): frames may leave.
    usable: bool,
    enabled: bool,
    /// The link (carrier), and not shut down by the operator (live; always in replay).
    carrier: bool,
    admin_up: bool,
    /// Largest IP packet the port sends (`[[port]] mtu`, live from its host interface).
    mtu: usize,
    /// 802.3x PAUSE received on the port stops its egress (`[[port]] pause`).
    honour_pause: bool,
    /// Its eligible queues trim what the buffer refuses (`[qos.trim]`, `[[port]] trim`).
    trims: bool,
}

impl EgressPort {
    /// Puts `len` bytes on the link from `now` (or when it is free).
    #[inline]
    fn occupy(&mut self, now: u64, len: usize) {
        self.link_free_ps = self.link_free_ps.max(now) + self.rate.wire_time_ps(len);
    }
}

/// The switch: a part for each stretch of a frame's way, each owning its state, so that
/// borrows of one part and another separate by construction.
pub struct Switch<P: PacketBuf> {
    /// From a received frame to its egress port and class (`forward.rs`).
    forwarding: Forwarding,
    /// From a frame's record to the wire: buffer, ports' transmitters, PFC, ECN (`queue.rs`).
    tm: TrafficManager<P>,
    /// Frames for the control plane (`punt.rs`).
    punting: Punting<P>,
    /// Sharded: this worker's seat; `None` when this switch owns every port.
    shard: Option<Seat<P>>,
    /// Every random choice (ECN marking, random spraying) draws from this, seeded per replay
    /// or per worker.
    rng: Rng,
    /// The switch's MAC: the source of routed frames and of the PFC frames it sends.
    mac: MacAddress,
    pub stats: SwitchStats,
}

/// What forwarding decides with: the classifier (and its FIB), the group selector, the ACL
/// tables, sFlow's sampler, and how group members are counted.
struct Forwarding {
    classifier: Classifier,
    selector: Selector,
    /// `[[acl]]` tables and the ports they are bound to.
    acls: AclTables,
    /// sFlow's sampling (`[sflow]`), `None` without it.
    sampler: Option<Sampler>,
    /// Per FIB group: its entry in `stats.next_hop_groups` (groups of next hops only), for
    /// the groups of the snapshot last taken (`groups_counted`).
    next_hop_slots: Vec<Option<u32>>,
    groups_counted: std::sync::Arc<Vec<crate::pipeline::fib::Group>>,
    /// The group layout `stats.groups` is laid out by (`Config::group_layout`), and whether the
    /// FIB in use has the same: between a reload that changes the groups and the control
    /// plane's FIB that has them, members' frames are not counted rather than miscounted.
    group_layout: u64,
    counts_members: bool,
}

/// Traffic management's state: the shared buffer and its queues, each port's transmitter and
/// PFC state, the watchdog, ECN and trimming.
struct TrafficManager<P> {
    buffer: SharedBuffer<P>,
    egress: Vec<EgressPort>,
    pfc: Vec<PfcPort>,
    watchdog: Watchdog,
    ecn: EcnMarker,
    /// Packet trimming (`[qos.trim]`).
    trim: Option<crate::config::TrimConfig>,
    /// Bit n set: a lossless priority's pause holds egress queue n (`qos.pfc_to_queue`).
    pausable_queues: u8,
    /// Earliest time `advance` has work to do.
    deadline: u64,
    /// Decisions after which a PFC frame waited on their port (`control_decided`).
    control_decided: u64,
}

/// Punting's state, with `[control]`: the policers, the outbox, the control ACL, the class
/// frames from the control plane leave in.
struct Punting<P> {
    /// Per ingress port and CoPP class, with `[control]` (else empty: nothing is punted).
    punt_policers: Vec<[Policer; CoppClass::COUNT]>,
    punted: Outbox<P>,
    /// With `[control.copp] scope = "switch"`: the buckets every port and worker share (the
    /// rates stay in `punt_policers`).
    switch_policers: Option<std::sync::Arc<crate::pipeline::punt::SwitchPolicers>>,
    /// The sources each CoPP class takes (`[control.acl]`), with `[control]`.
    control_acl: Option<std::sync::Arc<crate::config::ControlAcl>>,
    /// The class frames from the control plane leave in.
    control_tc: u8,
}

impl<P: PacketBuf> Switch<P> {
    /// Builds the switch; `seed` seeds its random choices. The config was validated
    /// (`Config::parse`), so the buffer plan exists.
    pub fn new(config: &Config, seed: u64) -> Self {
        Self::build(config, seed, SharedBuffer::new(config), None)
    }

    fn build(config: &Config, seed: u64, buffer: SharedBuffer<P>, shard: Option<Seat<P>>) -> Self {
        let egress = config
            .ports
            .iter()
            .map(|port| EgressPort {
                scheduler: Scheduler::new(&config.qos),
                rate: LinkRate::new(port.speed_mbps),
                link_free_ps: 0,
                usable: port.enabled,
                enabled: port.enabled,
                carrier: true,
                admin_up: true,
                mtu: port.mtu as usize,
                honour_pause: port.honour_pause,
                trims: port.trim && config.qos.trim.is_some(),
            })
            .collect();
        let watchdog = &config.qos.watchdog;
        let classifier = Classifier::new(config);
        let selector = Selector::new(&classifier.fib().groups);
        let groups_counted = std::sync::Arc::clone(&classifier.fib().groups);
        let tm = TrafficManager {
            ecn: EcnMarker::new(config.qos.ecn.clone(), buffer.plan().lossless_tcs),
            buffer,
            egress,
            pfc: config.ports.iter().map(|port| PfcPort::new(port.speed_mbps, PfcMap::of(&config.qos))).collect(),
            watchdog: Watchdog {
                detection_ps: u64::from(watchdog.detection_ms) * 1_000_000_000,
                restoration_ps: u64::from(watchdog.restoration_ms) * 1_000_000_000,
                action: watchdog.action,
            },
            trim: config.qos.trim.clone(),
            pausable_queues: config.qos.pausable_queues(),
            deadline: NEVER,
            control_decided: 0,
        };
        let punting = Punting {
            punt_policers: match &config.control {
                Some(control) => {
                    vec![control.copp.map(|rate| Policer::new(rate.pps, rate.burst)); config.ports.len()]
                }
                None => Vec::new(),
            },
            punted: Outbox::new(if config.control.is_some() { PUNT_OUTBOX } else { 0 }),
            control_acl: config.control.as_ref().map(|control| std::sync::Arc::clone(&control.acl)),
            switch_policers: config
                .control
                .as_ref()
                .filter(|control| control.copp_scope == crate::config::CoppScope::Switch)
                .map(|_| std::sync::Arc::default()),
            control_tc: config.control.as_ref().map_or(7, |control| control.control_tc),
        };
        let forwarding = Forwarding {
            classifier,
            selector,
            acls: AclTables::new(config),
            sampler: Sampler::new(config, seed),
            next_hop_slots: Vec::new(),
            groups_counted,
            group_layout: config.group_layout(),
            counts_members: true,
        };
        let mut switch = Self {
            forwarding,
            tm,
            punting,
            shard,
            rng: Rng::new(seed),
            mac: config.mac,
            stats: SwitchStats::new(config),
        };
        switch.count_next_hop_groups();
        switch
    }

    /// Whether this switch owns `port` (always, unsharded).
    #[inline]
    pub fn owns(&self, port: usize) -> bool {
        self.shard.as_ref().is_none_or(|seat| seat.board.owner(port) == seat.me)
    }

    /// Frames the buffer can hold at most: one per cell.
    pub fn arena_capacity(config: &Config) -> usize {
        SharedBuffer::<P>::capacity(config)
    }

    /// The PFC priority a peer's NIC would give `frame` (`Classifier::priority`), or `None`
    /// for MAC control.
    pub fn priority_of(&self, frame: &[u8]) -> Option<u8> {
        self.forwarding.classifier.priority(frame)
    }

    /// Makes this switch spend the buckets other workers' switches spend, with `[control.copp]
    /// scope = "switch"` (a live run with several workers shares one set among them).
    pub fn share_switch_policers(&mut self, shared: &std::sync::Arc<crate::pipeline::punt::SwitchPolicers>) {
        if self.punting.switch_policers.is_some() {
            self.punting.switch_policers = Some(std::sync::Arc::clone(shared));
        }
    }

    /// How many decisions (XOFF, XON, an XOFF's refresh) have left a PFC frame waiting on
    /// their port so far: an engine that reads the same count after an event as before knows
    /// no port gained one, and need not look at each (`has_control`).
    #[inline]
    pub fn control_decided(&self) -> u64 {
        self.tm.control_decided
    }

    /// Marks a port's link up or down (live) at `now`; a disabled port stays unusable.
    pub fn set_link_up(&mut self, port: usize, up: bool, now: u64) {
        let state = &self.tm.egress[port];
        let (admin_up, mtu) = (state.admin_up, state.mtu as u32);
        self.set_port_state(port, PortState { carrier: up, admin_up, mtu }, now);
    }

    /// Applies a port's link, administrative state and MTU (live, `link::PortStates`). When
    /// the port stops being usable, the frames queued on it (if this switch owns it) are
    /// dropped as `link_down` rather than held for a link that may not come back: returns how
    /// many (each also a dropped-packet notification at `now`, with `[sflow]`). From then on
    /// frames for it are dropped as they come and groups skip it.
    pub fn set_port_state(&mut self, port: usize, state: PortState, now: u64) -> u64 {
        let egress = &mut self.tm.egress[port];
        let was_usable = egress.usable;
        egress.carrier = state.carrier;
        egress.admin_up = state.admin_up;
        egress.mtu = state.mtu as usize;
        egress.usable = egress.enabled && state.usable();
        self.forwarding.classifier.set_port_up(port, state.usable());
        if !was_usable || egress.usable || !self.owns(port) {
            return 0;
        }
        (0..TRAFFIC_CLASSES).map(|tc| self.flush(port, tc, DropReason::LinkDown, Some(now))).sum()
    }

    /// Whether `port` has a PFC frame to send (it goes before any data).
    #[inline]
    pub fn has_control(&self, port: usize) -> bool {
        self.tm.pfc[port].has_frame()
    }

    /// Whether `port` has anything to send, now or once unpaused: queued frames or a PFC frame.
    #[inline]
    pub fn has_backlog(&self, port: usize) -> bool {
        self.tm.buffer.backlog(port) != 0 || self.tm.pfc[port].has_frame()
    }

    /// When `port`'s link will have sent every frame handed to it (see `EgressPort`).
    #[inline]
    pub fn link_free_ps(&self, port: usize) -> u64 {
        self.tm.egress[port].link_free_ps
    }

    /// Frames queued on all ports.
    pub fn queued_packets(&self) -> u64 {
        self.tm.buffer.queued_packets()
    }

    /// Cell bytes in use in both pools (headroom excluded).
    pub fn shared_used(&self) -> u64 {
        let (lossless, lossy) = self.tm.buffer.pool_used();
        lossless + lossy
    }

    /// Cell bytes in use in the lossless and the lossy pool.
    pub fn pool_used(&self) -> (u64, u64) {
        self.tm.buffer.pool_used()
    }

    /// Brings the counters that are read rather than counted up to `now` (before publishing,
    /// and at the end of a run): every queue's current depth (`depth_bytes`, `depth_cell_bytes`), the time the
    /// peers' pauses held each owned port (`pfc_rx_pause_ns`), and the flowlet groups'
    /// collisions so far.
    pub fn refresh_gauges(&mut self, now: u64) {
        self.stats.flowlet_collisions = self.forwarding.selector.flowlet_collisions();
        for (port, stats) in self.stats.ports.iter_mut().enumerate() {
            for (tc, gauge) in stats.queues.iter_mut().enumerate() {
                gauge.depth_bytes = self.tm.buffer.queue_bytes(port, tc);
                gauge.depth_cell_bytes = self.tm.buffer.queue_cells(port, tc);
            }
            let owned = self.shard.as_ref().is_none_or(|seat| seat.board.owner(port) == seat.me);
            if owned {
                stats.pfc_rx_pause_ns = self.tm.pfc[port].paused_ns(now);
            }
        }
    }

    /// Frame bytes queued on `port` in class `tc` (what ECN compares with kmin/kmax).
    pub fn queue_bytes(&self, port: usize, tc: usize) -> u64 {
        self.tm.buffer.queue_bytes(port, tc)
    }

    /// The XOFF and XON points of a lossless group right now, in cell bytes (with dynamic
    /// thresholds they move with the free lossless pool).
    pub fn pfc_thresholds(&self) -> (u64, u64) {
        (self.tm.buffer.xoff(), self.tm.buffer.xon())
    }
}

#[cfg(test)]
impl<P: PacketBuf> Switch<P> {
    /// The group selector's view of the ports at `now`.
    fn view(&self, now: u64) -> Ports<'_, P> {
        Ports { tm: &self.tm, now, shard: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapPacket;
    use crate::testing::Leaf;
    use crate::traffic::frames::FrameSpec;

    /// Two 100G ports, p0 (10.0.0.0/24) and p1 (10.0.1.0/24); DSCP 26 in lossless TC3.
    pub(super) fn config(extra_switch: &str, extra_qos: &str) -> Config {
        config_with_p0(extra_switch, "", extra_qos)
    }

    pub(super) fn config_with_p0(extra_switch: &str, p0: &str, extra_qos: &str) -> Config {
        Leaf::new("t")
            .switch(extra_switch)
            .qos(&format!("dscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n{extra_qos}"))
            .port("p0", 100.0, p0)
            .port("p1", 100.0, "")
            .route("10.0.1.0/24", "p1")
            .route("10.0.0.0/24", "p0")
            .config()
    }

    #[test]
    fn a_new_fib_generation_takes_effect_at_the_next_refresh() {
        let text = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n\
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
        assert_eq!(to(&mut switch), Received::Punted(CoppClass::Unreachable), "no route to 10.0.1.2 yet");
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
        assert_eq!(to(&mut switch), Received::Punted(CoppClass::Unreachable), "until the next refresh");
        switch.refresh_fib(&handle);
        let Received::Queued { egress, .. } = to(&mut switch) else { panic!() };
        let sent = switch.transmit(egress, 0).unwrap();
        assert_eq!(sent.data()[0..6], mac(egress as u8 * 2 - 1).0, "the chosen next hop's MAC");
        // The kernel's multipath group is counted per member, named by its next hops.
        let counted = &switch.stats.next_hop_groups;
        assert_eq!(counted.len(), 1);
        assert_eq!(counted[0].members, [(1, ip("10.255.0.1")), (2, ip("10.255.0.3"))]);
        assert_eq!(counted[0].sent[egress - 1], 1);
        assert_eq!(counted[0].sent.iter().sum::<u64>(), 1);
        let named = switch.stats.group_counts(&config);
        assert_eq!(named[0].0, "via 10.255.0.1 10.255.0.3");
        assert_eq!(named[0].1[egress - 1], (format!("p{egress} 10.255.0.{}", egress * 2 - 1), 1));
        // Generation 3: the route and its group are gone; the group's counters stay.
        handle.publish(crate::pipeline::fib::Fib::new(&config, &crate::pipeline::fib::Learned::default(), 3));
        switch.refresh_fib(&handle);
        assert_eq!(to(&mut switch), Received::Punted(CoppClass::Unreachable));
        assert_eq!(switch.stats.next_hop_groups[0].sent.iter().sum::<u64>(), 1, "kept when the group went");
    }

    /// A transmitter that takes every frame it is offered while `open`.
    pub(super) struct Collect {
        pub(super) open: bool,
        pub(super) sent: Vec<(usize, Vec<u8>)>,
    }

    impl CutThrough<HeapPacket> for Collect {
        fn may_send(&self, _: usize, _: u64) -> bool {
            self.open
        }
        fn send(&mut self, port: usize, packet: HeapPacket, _: u64) {
            self.sent.push((port, packet.bytes));
        }
    }

    /// With `[sflow]`, a dropped frame is a dropped-packet notification with its reason,
    /// ports and header; a forwarded one stays a flow sample.
    #[test]
    fn drops_become_sflow_notifications_beside_the_flow_samples() {
        let sflow = "[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\nsampling_rate = 1\n";
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", sflow), 1);
        let mut unrouted = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.77.0.1".parse().unwrap(), 7);
        unrouted.ttl = 9;
        let unrouted = unrouted.build();
        assert_eq!(switch.receive(0, HeapPacket::new(unrouted.clone()), 0), Received::Dropped(DropReason::NoRoute));
        assert_eq!(switch.receive(0, frame(0, 200), 1), Received::Queued { egress: 1, tc: 0 });
        let mut taken = Vec::new();
        switch.sampler_mut().unwrap().drain(|sample| {
            taken.push((sample.discarded, sample.ingress, sample.egress, sample.header[..14].to_vec()))
        });
        // The dropped frame is also a flow sample (1 in 1): sFlow samples what a port receives.
        let forwarded = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7).build();
        assert_eq!(
            taken,
            [
                (Some(DropReason::NoRoute), 0, NO_PORT, unrouted[..14].to_vec()),
                (None, 0, NO_PORT, unrouted[..14].to_vec()),
                (None, 0, 1, forwarded[..14].to_vec()),
            ]
        );
    }

    /// Frames a port going down drops from its queues are notified too, each with the port it
    /// came in on and the one it was queued for; what is left at shutdown (`drain`) is not.
    #[test]
    fn frames_flushed_by_a_link_going_down_become_notifications_but_not_those_drained_at_exit() {
        let sflow = "[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\nsampling_rate = 1000000\n";
        let mut switch: Switch<HeapPacket> = Switch::new(&config("", sflow), 1);
        for dscp in [0, 26] {
            assert!(matches!(switch.receive(0, frame(dscp, 100), 0), Received::Queued { egress: 1, .. }));
        }
        let up = PortState { carrier: true, admin_up: true, mtu: 1500 };
        assert_eq!(switch.set_port_state(1, PortState { carrier: false, ..up }, 5), 2);
        let mut taken = Vec::new();
        switch.sampler_mut().unwrap().drain(|sample| taken.push((sample.discarded, sample.ingress, sample.egress)));
        let flushed = (Some(DropReason::LinkDown), 0, 1);
        assert_eq!(taken, [flushed, flushed]);
        switch.set_port_state(1, up, 6);
        assert!(matches!(switch.receive(0, frame(0, 100), 7), Received::Queued { egress: 1, .. }));
        assert_eq!(switch.drain(), 1);
        taken.clear();
        switch.sampler_mut().unwrap().drain(|sample| taken.push((sample.discarded, sample.ingress, sample.egress)));
        assert!(taken.iter().all(|sample| sample.0.is_none()), "no notification at shutdown: {taken:?}");
    }

    pub(super) fn frame(dscp: u8, len: usize) -> HeapPacket {
        let mut spec = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
        spec.dscp = dscp;
        spec.frame_len = len;
        HeapPacket::new(spec.build())
    }

    pub(super) fn conserved<P: PacketBuf>(switch: &Switch<P>) -> bool {
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
        switch.refresh_gauges(0);
        let queue = switch.stats.ports[1].queues[0];
        assert_eq!((queue.depth_bytes, queue.depth_cell_bytes), (600, 10 * 256));
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
        let queue = switch.stats.ports[1].queues[0];
        assert_eq!((queue.max_depth_bytes, queue.max_depth_cell_bytes), (600, 10 * 256));
        switch.refresh_gauges(0);
        let queue = switch.stats.ports[1].queues[0];
        assert_eq!((queue.depth_bytes, queue.depth_cell_bytes), (0, 0));
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
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::Wred), 2);
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
        assert_eq!(switch.tm.buffer.lossy_cells(1, 0), 70 * 1024);
        let admitted =
            (0..20).filter(|_| matches!(switch.receive(0, frame(0, 1000), 0), Received::Queued { .. })).count();
        assert_eq!(admitted, 10);
    }

    /// The lossy pool of `a_lossy_queue_stops_at_its_dynamic_limit...` (80 frames of 1000
    /// bytes fit in TC0), trimming to 128 bytes, DSCP 48, in queue 6; p1 as `p1` says.
    fn trimming(p1: &str) -> Config {
        Leaf::new("t")
            .qos("dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n[qos.buffer]\nlossy_pool_bytes = 92160\n[qos.trim]\ndscp = 48\nqueue = 6")
            .port("p0", 100.0, "")
            .port("p1", 100.0, p1)
            .route("10.0.1.0/24", "p1")
            .config()
    }

    #[test]
    fn a_refused_lossy_frame_is_trimmed_into_the_trim_queue_and_counted_out() {
        let mut switch: Switch<HeapPacket> = Switch::new(&trimming(""), 0);
        let received: Vec<Received> = (0..85).map(|_| switch.receive(0, frame(0, 1000), 0)).collect();
        assert_eq!(received[84], Received::Queued { egress: 1, tc: 6 });
        assert_eq!((switch.tm.buffer.queue_len(1, 0), switch.tm.buffer.queue_len(1, 6)), (80, 5));
        assert_eq!(switch.queue_bytes(1, 6), 5 * 128);
        assert_eq!(switch.pool_used(), (0, 80 * 1024 + 5 * 256), "a trimmed frame holds one cell");
        let queue = switch.stats.ports[1].queues[0];
        assert_eq!((queue.trimmed, queue.trim_dropped, queue.dropped), (5, 0, 0));
        assert_eq!(switch.stats.dropped(), 0, "trimmed, not dropped");
        let mut lengths = Vec::new();
        while let Some(packet) = switch.transmit(1, 0) {
            lengths.push(packet.len());
        }
        assert_eq!(lengths.iter().filter(|&&len| len == 128).count(), 5);
        let queues = &switch.stats.ports[1].queues;
        assert_eq!((queues[6].trim_tx, queues[6].tx_packets, queues[6].tx_bytes), (5, 5, 640));
        assert_eq!((queues[0].trim_tx, queues[0].tx_packets), (0, 80));
        assert!(conserved(&switch));
        assert_eq!(switch.pool_used(), (0, 0));
    }

    #[test]
    fn a_trimmed_frame_the_trim_queue_refuses_is_dropped_and_a_port_may_opt_out() {
        let mut switch: Switch<HeapPacket> = Switch::new(&trimming(""), 0);
        for _ in 0..400 {
            switch.receive(0, frame(0, 1000), 0);
        }
        let queue = switch.stats.ports[1].queues[0];
        assert!(queue.trim_dropped > 0, "the pool ran out for trimmed frames too");
        assert_eq!(queue.trimmed, 320);
        assert_eq!(queue.trimmed, queue.trim_dropped + u64::from(switch.tm.buffer.queue_len(1, 6)));
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::BufferFull), queue.trim_dropped);
        assert_eq!(queue.dropped, queue.trim_dropped);
        assert!(conserved(&switch));

        let mut switch: Switch<HeapPacket> = Switch::new(&trimming("trim = false"), 0);
        for _ in 0..85 {
            switch.receive(0, frame(0, 1000), 0);
        }
        let queue = switch.stats.ports[1].queues[0];
        assert_eq!((queue.trimmed, queue.dropped, switch.tm.buffer.queue_len(1, 6)), (0, 5, 0));
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
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::BufferFull), 5);
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
            let (shared, headroom) = switch.tm.buffer.group_cells(0, 3);
            assert_eq!(headroom, 4096u64.saturating_sub(sent * 1024), "after {sent}");
            assert_eq!(shared, (14 - sent).min(10) * 1024, "after {sent}");
            assert_eq!(switch.pool_used().0, shared);
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
        let offered = 2 * switch.tm.buffer.plan().lossy_pool / 1024;
        for _ in 0..offered {
            switch.receive(0, ect(1000), 0);
        }
        let dropped = switch.stats.ports[0].drops_for(DropReason::BufferFull);
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
        let view = |switch: &Switch<HeapPacket>, now| switch.view(now).drain_cost(1, 0);
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
        assert_eq!(paused.view(0).drain_cost(1, 3), 0);
        let mut times = [0u16; 8];
        times[3] = 100;
        paused.receive(1, pfc_frame(0x08, times), 0);
        assert_eq!(paused.view(1).drain_cost(1, 3), u64::MAX);
        // A port whose link is down is not usable.
        assert!(paused.view(0).usable(1));
        paused.set_link_up(1, false, 0);
        assert!(!paused.view(0).usable(1));
    }

    #[test]
    fn dropped_frames_count_as_received_and_peers_see_each_frame_s_priority() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        let mut unrouted = FrameSpec::rocev2("10.0.0.1".parse().unwrap(), "10.9.9.9".parse().unwrap(), 7);
        unrouted.frame_len = 300;
        assert_eq!(switch.receive(0, HeapPacket::new(unrouted.build()), 0), Received::Dropped(DropReason::NoRoute));
        assert_eq!((switch.stats.ports[0].rx_packets, switch.stats.ports[0].rx_bytes), (1, 300));
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::NoRoute), 1);
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
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::Wred), 2);
        assert_eq!(switch.stats.ports[1].queues[0].dropped, 2);
        assert!(conserved(&switch));
    }

    #[test]
    fn a_group_with_every_member_down_drops_as_link_down() {
        let text = "[switch]\nname = \"g\"\nmac = \"02:00:00:00:00:01\"\n\
                    [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:10:00\"\n\
                    [[port]]\nname = \"u1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:11:00\"\n\
                    [[port]]\nname = \"u2\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:12:00\"\n\
                    [[port]]\nname = \"u3\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:13:00\"\nenabled = false\n\
                    [[route]]\nprefix = \"0.0.0.0/0\"\ngroup = \"up\"\n\
                    [[group]]\nname = \"up\"\nports = [\"u1\", \"u2\", \"u3\"]\nmode = \"spray\"\n";
        let mut switch: Switch<HeapPacket> = Switch::new(&Config::parse(text, "g.toml").unwrap(), 0);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 1, tc: 0 });
        switch.set_link_up(1, false, 0);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 2, tc: 0 });
        switch.set_link_up(2, false, 0);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Dropped(DropReason::LinkDown));
        // The one that found no member, and the one queued on each member when it went down.
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::LinkDown), 3);
        assert_eq!(switch.stats.groups[0], [1, 1, 0]);
        switch.set_link_up(2, true, 0);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 2, tc: 0 });
        // A member disabled in the config stays out when its link comes up.
        switch.set_link_up(3, true, 0);
        for _ in 0..4 {
            assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 2, tc: 0 });
        }
        assert!(conserved(&switch));
    }

    #[test]
    fn a_packet_over_its_egress_ports_mtu_is_oversize_or_goes_to_the_kernel_as_it_came() {
        // p1 sends at most 1400-byte packets; p0 takes switch.mtu (1500).
        let leaf = |p0: &str| {
            Leaf::new("t")
                .switch("mtu = 1500")
                .port("p0", 100.0, p0)
                .port("p1", 100.0, "mtu = 1400")
                .route("10.0.1.0/24", "p1")
        };
        let packet = |ip_len: usize, ttl: u8| {
            let mut spec = FrameSpec::rocev2("10.0.0.2".parse().unwrap(), "10.0.1.2".parse().unwrap(), 7);
            spec.frame_len = 14 + ip_len;
            spec.ttl = ttl;
            spec.build()
        };
        let mut plain: Switch<HeapPacket> = Switch::new(&leaf("").config(), 0);
        assert_eq!(plain.receive(0, HeapPacket::new(packet(1400, 64)), 0), Received::Queued { egress: 1, tc: 3 });
        assert_eq!(plain.receive(0, HeapPacket::new(packet(1401, 64)), 0), Received::Dropped(DropReason::Oversize));
        assert_eq!(plain.stats.ports[0].drops_for(DropReason::Oversize), 1);
        assert_eq!(plain.stats.ports[0].rx_packets, 2, "counted as received once each");
        // The port's MTU changes live (from its host interface).
        plain.set_port_state(1, PortState { carrier: true, admin_up: true, mtu: 1500 }, 0);
        assert_eq!(plain.receive(0, HeapPacket::new(packet(1500, 64)), 0), Received::Queued { egress: 1, tc: 3 });
        assert!(conserved(&plain));

        let with_control = leaf("addresses = [\"10.0.0.1/24\"]").tables("[control]").config();
        let mut switch: Switch<HeapPacket> = Switch::new(&with_control, 0);
        let over = packet(1401, 2);
        assert_eq!(switch.receive(0, HeapPacket::new(over.clone()), 0), Received::Punted(CoppClass::Mtu));
        let punted = switch.take_punted().unwrap();
        // TTL (and checksum) as it came in: the kernel would otherwise see TTL 1 and send
        // time exceeded instead of fragmentation needed.
        assert_eq!(punted.packet.data(), &over[..], "unchanged");
        assert_eq!(punted.class, CoppClass::Mtu);
        assert_eq!(switch.stats.ports[0].punted[CoppClass::Mtu.index()], 1);
        assert_eq!(switch.stats.ports[0].rx_packets, 1);
    }

    #[test]
    fn a_port_going_down_drops_what_it_queued_and_what_comes_for_it() {
        let config = config("", "");
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 0);
        for dscp in [0, 26, 26] {
            assert!(matches!(switch.receive(0, frame(dscp, 100), 0), Received::Queued { egress: 1, .. }));
        }
        let up = PortState { carrier: true, admin_up: true, mtu: 1500 };
        assert_eq!(switch.set_port_state(1, PortState { carrier: false, ..up }, 0), 3, "flushed, not held");
        assert_eq!(switch.queued_packets(), 0);
        assert_eq!(switch.shared_used(), 0, "their cells are back");
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::LinkDown), 3);
        assert_eq!((switch.stats.ports[1].queues[0].dropped, switch.stats.ports[1].queues[3].dropped), (1, 2));
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Dropped(DropReason::LinkDown));
        assert_eq!(switch.set_port_state(1, PortState { carrier: false, ..up }, 0), 0, "already down");
        assert_eq!(switch.set_port_state(1, up, 0), 0);
        assert_eq!(switch.receive(0, frame(0, 100), 0), Received::Queued { egress: 1, tc: 0 });
        // Shut down by the operator: nothing leaves through it, and what it receives is
        // counted and dropped.
        assert_eq!(switch.set_port_state(1, PortState { admin_up: false, ..up }, 0), 1);
        let back = FrameSpec::rocev2("10.0.1.2".parse().unwrap(), "10.0.0.2".parse().unwrap(), 7).build();
        assert_eq!(switch.receive(1, HeapPacket::new(back.clone()), 0), Received::Dropped(DropReason::LinkDown));
        assert_eq!(switch.stats.ports[1].drops_for(DropReason::LinkDown), 1);
        assert_eq!(switch.stats.ports[1].rx_packets, 1);
        switch.set_port_state(1, up, 0);
        assert_eq!(switch.receive(1, HeapPacket::new(back), 0), Received::Queued { egress: 0, tc: 3 });
        assert!(conserved(&switch));
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
        let pool = switch.tm.buffer.plan().lossless_pool;
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
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::BufferFull), 3);
        assert_eq!((switch.stats.ports[1].queues[0].dropped, switch.stats.ports[1].queues[3].dropped), (2, 1));
        assert_eq!(switch.shared_used(), 0);
        assert!(conserved(&switch));
    }

    pub(super) fn pfc_frame(class_enable: u8, times: [u16; 8]) -> HeapPacket {
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
        assert_eq!(switch.stats.ports[0].drops_for(DropReason::PfcWatchdog), 5);
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
