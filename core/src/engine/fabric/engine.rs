//! The fabric's discrete-event engine: every switch of the fabric and every host NIC in one
//! virtual time (picoseconds), joined by links that serialise frames at their speed and
//! delay them by the cable's propagation time.
//!
//! - A switch port sends one frame at a time: PFC frames first, then what its scheduler
//!   picks; the frame arrives whole at the other end (store and forward) after its wire time
//!   plus the propagation delay.
//! - A host NIC sends one frame at a time: CNPs first, then data from its queue pairs in round
//!   robin, each queue pair held to its DCQCN rate; it stops a priority while the leaf's PFC
//!   pauses it. It answers CE-marked data with a CNP to the sender, at most one per queue pair
//!   per `cnp_interval_us`, and counts frames per message, in any order.
//! - A message is released when its dependency (if any) has been received; its flow
//!   completion time runs from release to its last frame's arrival.
//! - The fabric is split into partitions, one per switch with the hosts cabled to it, each
//!   with its own events, run in windows on `threads` threads (`parallel`): a frame between
//!   partitions is handed over between windows.
//!
//! Invariant: a partition's events are ordered by (time, partition that scheduled it, order
//! of scheduling there) only, a partition's state changes only by its own events, and every
//! random choice draws from seeded generators; so a fabric, a workload and a seed give the
//! same results every run and on any number of threads.

use super::host::{self, DataFrame, Nic, QueuePair};
use super::parallel::{self, Mailbox, Windows};
use super::workload::{self, Collective, Message};
use super::{Endpoint, Fabric};
use crate::engine::port_tx;
use crate::engine::sim::{self, Alarm, EventQueue, LinkTx, Reserved};
use crate::error::InputError;
use crate::observe::report::{record_pfc, Intervals, Recorder};
use crate::packet::{HeapPacket, PacketBuf};
use crate::switch::Switch;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What to run on a fabric.
#[derive(Debug, Clone)]
pub struct FabricOptions {
    pub collective: Collective,
    pub message_bytes: u64,
    pub messages: u32,
    /// RDMA payload per frame (the RoCE path MTU).
    pub roce_mtu: usize,
    pub seed: u64,
    /// Give up (and report what did not complete) at this virtual time.
    pub horizon_ms: f64,
    /// Show a progress bar on stderr: the workload's frames delivered (the caller checks that
    /// stderr is a terminal).
    pub progress: bool,
    /// Threads to run the partitions on; the results do not depend on it.
    pub threads: usize,
}

/// An event. Its numbers are 32 bits, so that an entry of the queue is 32 bytes (with
/// `Endpoint`s in it, 48). Switch, port and host numbers fit (each costs far more than 2^-32
/// of memory: `narrow`), as do frame slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ArriveAtSwitch { switch: u32, port: u32, frame: u32 },
    ArriveAtHost { host: u32, frame: u32 },
    SwitchTxDone { switch: u32, port: u32 },
    HostTxDone(u32),
    Timer(u32),
    HostWake(u32),
}

/// A number of a switch, port, host or frame slot as an event holds it, or of a message or
/// queue pair as a host's records do (`run` refuses workloads with more than 2^32).
fn narrow(number: usize) -> u32 {
    debug_assert!(u32::try_from(number).is_ok(), "{number} does not fit an event");
    number as u32
}

impl Kind {
    /// `frame` (in its slot) arrives whole at `to`.
    fn arrive(to: Endpoint, frame: usize) -> Self {
        match to {
            Endpoint::Switch { switch, port } => {
                Kind::ArriveAtSwitch { switch: narrow(switch), port: narrow(port), frame: narrow(frame) }
            }
            Endpoint::Host(host) => Kind::ArriveAtHost { host: narrow(host), frame: narrow(frame) },
        }
    }

    /// `from`'s transmitter is done with its frame.
    fn tx_done(from: Endpoint) -> Self {
        match from {
            Endpoint::Switch { switch, port } => Kind::SwitchTxDone { switch: narrow(switch), port: narrow(port) },
            Endpoint::Host(host) => Kind::HostTxDone(narrow(host)),
        }
    }

    /// The switch whose queues or PFC decisions the event may change.
    fn switch(self) -> Option<usize> {
        match self {
            Kind::ArriveAtSwitch { switch, .. } | Kind::SwitchTxDone { switch, .. } | Kind::Timer(switch) => {
                Some(switch as usize)
            }
            Kind::ArriveAtHost { .. } | Kind::HostTxDone(_) | Kind::HostWake(_) => None,
        }
    }
}

/// Where a link end sends to: the other end, the link's speed and its propagation delay.
#[derive(Debug, Clone, Copy)]
struct Wire {
    to: Endpoint,
    speed_mbps: u64,
    propagation_ps: u64,
}

/// A queue pair's places in its ends' NICs' tables.
#[derive(Debug, Clone, Copy)]
struct QpPlan {
    /// In the sender's `Nic::sending`.
    slot: usize,
    /// In the receiver's `Nic::senders`.
    inbound: usize,
}

/// A message as the workload made it, and its places in its NICs' tables.
#[derive(Debug, Clone)]
struct MessagePlan {
    spec: Message,
    frames: u64,
    /// Messages released when this one has been received: each is sent by this one's
    /// receiver, so the release happens where the arrival does.
    dependents: Vec<usize>,
    /// In the sender's `Nic::released`.
    outbound: usize,
    /// In the receiver's `Nic::receiving`.
    inbound: usize,
}

/// Where a switch or host runs: its partition and its index among the partition's own.
#[derive(Debug, Clone, Copy)]
struct Place {
    partition: usize,
    index: usize,
}

/// What every partition reads and none changes: the fabric, the workload and where each
/// switch and host runs.
struct Plan<'a> {
    fabric: &'a Fabric,
    options: &'a FabricOptions,
    /// Each switch port's link, by switch and port (`Fabric::parse` links every port).
    switch_wires: Vec<Vec<Wire>>,
    /// Each host's link.
    host_wires: Vec<Wire>,
    qps: Vec<QpPlan>,
    messages: Vec<MessagePlan>,
    switch_at: Vec<Place>,
    host_at: Vec<Place>,
    data_priority: usize,
}

impl Plan<'_> {
    /// The link from `end` (a vector lookup: a hashed one was 3% of a run).
    fn wire(&self, end: Endpoint) -> Wire {
        match end {
            Endpoint::Switch { switch, port } => self.switch_wires[switch][port],
            Endpoint::Host(host) => self.host_wires[host],
        }
    }

    fn partition_of(&self, end: Endpoint) -> usize {
        match end {
            Endpoint::Switch { switch, .. } => self.switch_at[switch].partition,
            Endpoint::Host(host) => self.host_at[host].partition,
        }
    }

    /// The shortest time from sending on a link between two partitions to the frame's
    /// arrival: the smallest frame's wire time plus the cable's delay (`parallel::IDLE` when
    /// no link crosses).
    fn lookahead(&self) -> u64 {
        self.fabric
            .links
            .iter()
            .filter(|link| self.partition_of(link.a) != self.partition_of(link.b))
            .map(|link| {
                crate::config::PortConfig::wire_time_for(link.speed_mbps, 0)
                    + crate::config::plan::cable_delay_ps(link.cable_m)
            })
            .min()
            .unwrap_or(parallel::IDLE)
            .max(1)
    }
}

/// A switch with its ports' transmitters (their `TxDone` reserved: `LinkTx`), the alarm for
/// its next deadline and its recorder.
struct SwitchState {
    id: usize,
    switch: Switch<HeapPacket>,
    links: Vec<LinkTx>,
    timer: Alarm,
    recorder: Recorder,
    /// `Switch::control_decided` when its ports were last looked at for PFC frames.
    control_seen: u64,
}

/// A frame on a link between partitions, at the place its sender reserved in the order.
struct Crossing {
    at: Reserved,
    to: Endpoint,
    frame: HeapPacket,
}

/// A switch and its hosts (or any set of switches and hosts): their state and their events.
struct Partition<'a> {
    plan: &'a Plan<'a>,
    id: usize,
    switches: Vec<SwitchState>,
    nics: Vec<Nic>,
    events: EventQueue<Kind>,
    frames: Vec<Option<HeapPacket>>,
    free_frames: Vec<usize>,
    /// PFC pauses each of its link ends' transmitters received, per priority.
    paused: HashMap<Endpoint, [Intervals; 8]>,
    /// Frames sent to other partitions in this window, by partition.
    outbox: Vec<Vec<Crossing>>,
    /// The partitions `outbox` has frames for.
    mail_for: Vec<usize>,
    inbox: Vec<Crossing>,
    /// When its last event was.
    last_ps: u64,
    /// Frames of messages delivered so far (the progress bar's work done).
    frames_delivered: u64,
    /// The ports of the event's switch whose queues the event may have changed (a frame
    /// queued or sent): the recorder looks at these only.
    touched_ports: Vec<usize>,
    /// Events handled so far.
    events_handled: u64,
}

impl Partition<'_> {
    /// The frame in `slot`, which is free again.
    fn take_frame(&mut self, slot: usize) -> HeapPacket {
        let bytes = self.frames[slot].take().expect("a frame in flight");
        self.free_frames.push(slot);
        bytes
    }

    fn store(&mut self, bytes: HeapPacket) -> usize {
        match self.free_frames.pop() {
            Some(index) => {
                self.frames[index] = Some(bytes);
                index
            }
            None => {
                self.frames.push(Some(bytes));
                self.frames.len() - 1
            }
        }
    }

    /// Puts `bytes` on the wire from `from` at `now`: done sending after its wire time (of its
    /// whole length, declared payload included), whole at the other end one propagation delay
    /// later, in this partition or another.
    fn send(&mut self, from: Endpoint, bytes: HeapPacket, now: u64) {
        let plan = self.plan;
        let wire = plan.wire(from);
        let done = now + crate::config::PortConfig::wire_time_for(wire.speed_mbps, bytes.len());
        match from {
            Endpoint::Switch { switch, port } => {
                let state = &mut self.switches[plan.switch_at[switch].index];
                let more = state.switch.has_backlog(port);
                state.links[port].start(&mut self.events, done, more, Kind::tx_done(from));
            }
            Endpoint::Host(_) => self.events.schedule(done, Kind::tx_done(from)),
        }
        let at = done + wire.propagation_ps;
        let partition = plan.partition_of(wire.to);
        if partition == self.id {
            let frame = self.store(bytes);
            self.events.schedule(at, Kind::arrive(wire.to, frame));
        } else {
            if self.outbox[partition].is_empty() {
                self.mail_for.push(partition);
            }
            let at = self.events.reserve(at);
            self.outbox[partition].push(Crossing { at, to: wire.to, frame: bytes });
        }
    }

    fn switch_transmit(&mut self, switch: usize, port: usize, now: u64) {
        let plan = self.plan;
        let state = &mut self.switches[plan.switch_at[switch].index];
        let done = Kind::SwitchTxDone { switch: narrow(switch), port: narrow(port) };
        if !state.links[port].free(&mut self.events, || done) {
            return;
        }
        let Some((bytes, pfc)) = port_tx::next_frame(&mut state.switch, port, now) else { return };
        self.touched_ports.push(port);
        let speed_mbps = plan.fabric.switches[switch].ports[port].speed_mbps;
        match pfc {
            Some(repr) => state.recorder.pfc_sent(port, &repr, now, speed_mbps),
            None => {
                let done = now + crate::config::PortConfig::wire_time_for(speed_mbps, bytes.len());
                state.recorder.transmitted(port, now, done, bytes.len() as u64);
            }
        }
        self.send(Endpoint::Switch { switch, port }, bytes, now);
    }

    /// A PFC frame arrived at `at`: its transmitter pauses (or resumes) per priority.
    fn note_pause(&mut self, at: Endpoint, repr: &crate::wire::pfc::Repr, now: u64) {
        let speed = self.plan.wire(at).speed_mbps;
        record_pfc(self.paused.entry(at).or_default(), repr, now, speed);
    }

    fn arrive_at_switch(&mut self, switch: usize, port: usize, bytes: HeapPacket, now: u64) {
        let plan = self.plan;
        let speed = plan.fabric.switches[switch].ports[port].speed_mbps;
        let state = &mut self.switches[plan.switch_at[switch].index];
        let arrival = sim::arrive(&mut state.switch, Some(&mut state.recorder), port, bytes, now, speed);
        if let Some(repr) = &arrival.pfc {
            self.note_pause(Endpoint::Switch { switch, port }, repr, now);
        }
        if let Some(ready) = arrival.ready {
            // Queued there, whether or not its link is free to send now.
            self.touched_ports.push(ready);
            self.switch_transmit(switch, ready, now);
        }
    }

    fn wake_host(&mut self, host: usize, at: u64) {
        if self.nics[self.plan.host_at[host].index].wake.set(at) {
            self.events.schedule(at, Kind::HostWake(narrow(host)));
        }
    }

    /// Releases a message (its sender is in this partition): its queue pair will send it.
    fn release(&mut self, message: usize, now: u64) {
        let plan = self.plan;
        let spec = &plan.messages[message];
        let sender = spec.spec.sender;
        let slot = plan.qps[spec.spec.qp].slot;
        let nic = &mut self.nics[plan.host_at[sender].index];
        nic.released[spec.outbound] = Some(now);
        let qp = &mut nic.sending[slot];
        if !qp.has_data() {
            nic.order.put(slot, qp.next_send_ps, now);
        }
        qp.queue.push_back(message);
        self.host_transmit(sender, now);
    }

    fn host_transmit(&mut self, host: usize, now: u64) {
        let plan = self.plan;
        let local = plan.host_at[host].index;
        let nic = &mut self.nics[local];
        if nic.transmitting {
            return;
        }
        // CNPs first (strict priority on the wire); they are not held by pauses of the data
        // priority.
        if let Some(cnp) = nic.cnps.pop_front() {
            let bytes = host::cnp_frame(nic, cnp);
            nic.transmitting = true;
            nic.cnps_sent += 1;
            self.send(Endpoint::Host(host), bytes, now);
            return;
        }
        let paused_until = nic.pauses.until[plan.data_priority];
        if paused_until > now {
            self.wake_host(host, paused_until);
            return;
        }
        let picked = loop {
            match nic.order.pick(now) {
                // A cut since it was put pushed its next frame later: hold it until then.
                Ok(slot) if nic.sending[slot].next_send_ps > now => {
                    nic.order.put(slot, nic.sending[slot].next_send_ps, now);
                }
                picked => break picked,
            }
        };
        match picked {
            Ok(slot) => {
                // The DCQCN timers run for the queue pair that sends (its rate limiter's time
                // was set when its last frame left); running them for every queue pair a
                // scan passed over was 36% of a 1,024-host run.
                if plan.fabric.dcqcn.enabled {
                    nic.sending[slot].rate.advance(&plan.fabric.dcqcn, now);
                }
                self.send_data(host, slot, now);
                let nic = &mut self.nics[local];
                let qp = &nic.sending[slot];
                if qp.has_data() {
                    nic.order.put(slot, qp.next_send_ps, now);
                }
                // The queue pair picked next, a frame time from now, starts loading: with
                // 1,023 queue pairs a host's turn comes round to one every few hundred
                // microseconds, long after its lines have left the cache.
                if let Some(next) = nic.order.next_ready() {
                    let next = &nic.sending[next];
                    HeapPacket::prefetch(next);
                    HeapPacket::prefetch(&next.rate);
                }
            }
            Err(Some(at)) => self.wake_host(host, at),
            Err(None) => {}
        }
    }

    /// Sends the next frame of the queue pair in `slot` of `host`'s NIC.
    fn send_data(&mut self, host: usize, slot: usize, now: u64) {
        let plan = self.plan;
        let mtu = plan.options.roce_mtu as u64;
        let dcqcn = &plan.fabric.dcqcn;
        let nic = &mut self.nics[plan.host_at[host].index];
        let state = &mut nic.sending[slot];
        let sending = match state.current {
            Some(current) => current,
            None => {
                let message = state.queue.pop_front().expect("has_data");
                let spec = &plan.messages[message];
                let (tag, from) = (narrow(spec.inbound), narrow(plan.qps[spec.spec.qp].inbound));
                host::Sending { message, bytes: spec.spec.bytes, frames: spec.frames, sent: 0, tag, from }
            }
        };
        let host::Sending { bytes: total_bytes, frames, sent, tag, from, .. } = sending;
        let payload = if sent + 1 == frames { total_bytes - sent * mtu } else { mtu } as usize;
        let psn = state.next_psn;
        state.next_psn += 1;
        state.current = (sent + 1 < frames).then_some(host::Sending { sent: sent + 1, ..sending });
        let (qp, receiver) = (state.id, state.receiver);
        let to = plan.fabric.hosts[receiver].address;
        let opcode = host::send_opcode(sent, frames);
        let bytes = host::data_frame(nic, to, DataFrame { qp, psn, opcode, payload, tag, from });
        let wire_bits = crate::units::wire_bytes(bytes.len()) * 8;
        // The rate limiter: the next frame of this queue pair goes when this one would have
        // finished at the queue pair's rate (at line rate, when it finishes on the wire).
        let state = &mut nic.sending[slot];
        state.next_send_ps = if dcqcn.enabled {
            // The byte counter's stage these bytes complete counts for the gap after them.
            state.rate.on_bytes_sent(dcqcn, bytes.len() as u64, now);
            state.rate.send_time(dcqcn, wire_bits, now)
        } else {
            now + (wire_bits as f64 * 1e6 / nic.speed_mbps as f64).ceil() as u64
        };
        nic.transmitting = true;
        nic.frames_sent += 1;
        self.send(Endpoint::Host(host), bytes, now);
    }

    fn arrive_at_host(&mut self, host: usize, bytes: &HeapPacket, now: u64) {
        let plan = self.plan;
        let local = plan.host_at[host].index;
        let dcqcn = &plan.fabric.dcqcn;
        match host::read(bytes) {
            host::Received::Pfc(repr) => {
                self.note_pause(Endpoint::Host(host), &repr, now);
                let nic = &mut self.nics[local];
                for (priority, time) in repr.named() {
                    nic.pauses.apply_answered(priority, time, now, nic.response_ps, nic.speed_mbps);
                }
                self.host_transmit(host, now);
            }
            host::Received::Cnp { qp, tag } => {
                let nic = &mut self.nics[local];
                nic.cnps_received += 1;
                // Only the queue pair's sender has its rate (a CNP for another's is ignored).
                let ours = nic.sending.get_mut(tag).filter(|state| state.id == qp);
                if let (true, Some(state)) = (dcqcn.enabled, ours) {
                    state.rate.advance(dcqcn, now);
                    let before = state.rate.rate_mbps();
                    state.rate.on_cnp(dcqcn, now);
                    // A cut re-plans the frame the limiter is holding: what is left of its
                    // gap goes at the new rate (`host_transmit` puts it back if it comes due
                    // at the old time).
                    if state.rate.rate_mbps() < before && state.next_send_ps > now {
                        let bits_left = ((state.next_send_ps - now) as f64 * before / 1e6) as u64;
                        state.next_send_ps = state.rate.send_time(dcqcn, bits_left, now);
                    }
                }
            }
            host::Received::Data { qp, congestion, tag, from, .. } => {
                let nic = &mut self.nics[local];
                let ours = |d: &host::Delivery| d.qp as usize == qp && d.from as usize == from;
                if !nic.receiving.get(tag).is_some_and(ours) {
                    return;
                }
                if congestion {
                    nic.marked_received += 1;
                    let interval = (dcqcn.cnp_interval_us * 1e6) as u64;
                    let sender = &mut nic.senders[from];
                    if dcqcn.enabled && sender.cnp_due(now, interval) {
                        let cnp = host::Cnp { qp, to: sender.address, slot: sender.slot };
                        nic.cnps.push_back(cnp);
                        self.host_transmit(host, now);
                    }
                }
                let delivery = &mut self.nics[local].receiving[tag];
                delivery.delivered += 1;
                self.frames_delivered += 1;
                if delivery.delivered == delivery.frames {
                    delivery.complete(now);
                    let message = delivery.message as usize;
                    for &dependent in &plan.messages[message].dependents {
                        self.release(dependent, now);
                    }
                }
            }
            host::Received::Other => {}
        }
    }

    /// Arms `switch`'s timer for its next deadline.
    fn sync_timer(&mut self, switch: usize, now: u64) {
        let state = &mut self.switches[self.plan.switch_at[switch].index];
        if let Some(at) = state.timer.follow(&state.switch, now) {
            self.events.schedule(at, Kind::Timer(narrow(switch)));
        }
    }

    /// Starts loading what the next event reads first, while this one is handled: the
    /// arriving frame's bytes and, at a host, the record the frame's tag names (its message's
    /// delivery, or a CNP's queue pair). Each was a cache miss of its own, written by the
    /// frame's sender hundreds of events before (this hint: 7% of a 512-host run).
    #[inline]
    fn prefetch_next(&self) {
        // The slot of the event after the next one's frame: read below when that event is
        // next, its line should be on its way by then.
        if let Some(&(Kind::ArriveAtSwitch { frame, .. } | Kind::ArriveAtHost { frame, .. })) =
            self.events.peek_second()
        {
            if let Some(slot) = self.frames.get(frame as usize) {
                // Both ends: a 40-byte slot may straddle two lines.
                let start: *const u8 = (slot as *const Option<HeapPacket>).cast();
                crate::cpu::prefetch_line(start);
                crate::cpu::prefetch_line(start.wrapping_add(std::mem::size_of::<Option<HeapPacket>>() - 1));
            }
        }
        let (frame, host) = match self.events.peek() {
            Some(&Kind::ArriveAtSwitch { frame, .. }) => (frame, None),
            Some(&Kind::ArriveAtHost { host, frame }) => (frame, Some(host)),
            _ => return,
        };
        let Some(Some(packet)) = self.frames.get(frame as usize) else { return };
        packet.prefetch_buffer();
        if let Some(host) = host {
            let nic = &self.nics[self.plan.host_at[host as usize].index];
            let (tag, from) = host::data_places(packet.tag);
            if packet.beyond > 0 {
                // Only data frames have a declared payload.
                if let (Some(delivery), Some(sender)) = (nic.receiving.get(tag), nic.senders.get(from)) {
                    HeapPacket::prefetch(delivery);
                    HeapPacket::prefetch(sender);
                }
            } else if let Some(sending) = nic.sending.get(tag) {
                HeapPacket::prefetch(&sending.rate);
            }
        }
    }

    fn handle(&mut self, now: u64, kind: Kind) {
        let plan = self.plan;
        self.last_ps = now;
        self.events_handled += 1;
        self.touched_ports.clear();
        match kind {
            Kind::ArriveAtSwitch { switch, port, frame } => {
                let bytes = self.take_frame(frame as usize);
                self.arrive_at_switch(switch as usize, port as usize, bytes, now);
            }
            Kind::ArriveAtHost { host, frame } => {
                let bytes = self.take_frame(frame as usize);
                self.arrive_at_host(host as usize, &bytes, now);
            }
            Kind::SwitchTxDone { switch, port } => {
                let (switch, port) = (switch as usize, port as usize);
                self.switches[plan.switch_at[switch].index].links[port].done();
                self.switch_transmit(switch, port, now);
            }
            Kind::HostTxDone(host) => {
                let host = host as usize;
                self.nics[plan.host_at[host].index].transmitting = false;
                self.host_transmit(host, now);
            }
            Kind::Timer(switch) => {
                let switch = switch as usize;
                let state = &mut self.switches[plan.switch_at[switch].index];
                state.timer.fired(now);
                state.switch.advance(now);
                for port in 0..state.links.len() {
                    self.switch_transmit(switch, port, now);
                }
            }
            Kind::HostWake(host) => {
                let host = host as usize;
                self.nics[plan.host_at[host].index].wake.fired(now);
                self.host_transmit(host, now);
            }
        }
        // Only the switch this event acted on can have changed its queues or decided a PFC
        // frame: looking at just it keeps the cost per event constant however large the
        // fabric (scanning every port of every switch was 32% of a 44-switch run).
        let touched = kind.switch();
        let Some(switch) = touched else { return };
        let local = plan.switch_at[switch].index;
        // A dequeue on one port may decide an XON for another, idle, port: send it now
        // (a busy port sends it when its frame is done). Only after an event that decided a
        // PFC frame: looking at every port after every event was 5% of a 1,024-host run.
        let decided = self.switches[local].switch.control_decided();
        if decided != self.switches[local].control_seen {
            self.switches[local].control_seen = decided;
            for port in 0..self.switches[local].links.len() {
                if self.switches[local].switch.has_control(port) {
                    self.switch_transmit(switch, port, now);
                }
            }
        }
        // The others' deadlines did not move, and their timers stay armed for them.
        self.sync_timer(switch, now);
        let state = &mut self.switches[local];
        if let Kind::Timer(_) = kind {
            // Timers act on any port (a storm's queue dropped, pauses expired).
            state.recorder.observe(now, &state.switch);
        } else {
            state.recorder.observe_ports(now, &state.switch, self.touched_ports.iter().copied());
        }
    }
}

impl parallel::Partition for Partition<'_> {
    type Mail = Crossing;

    fn next_time(&self) -> u64 {
        self.events.next_time().unwrap_or(parallel::IDLE)
    }

    fn run_until(&mut self, end: u64) {
        while self.events.next_time().is_some_and(|time| time < end) {
            let (now, kind) = self.events.pop().expect("an event is due");
            self.prefetch_next();
            self.handle(now, kind);
        }
    }

    fn post(&mut self, mailboxes: &[Mailbox<Crossing>]) {
        for partition in self.mail_for.drain(..) {
            mailboxes[partition].deliver(&mut self.outbox[partition]);
        }
    }

    fn collect(&mut self, mailbox: &Mailbox<Crossing>) {
        let mut inbox = std::mem::take(&mut self.inbox);
        mailbox.take(&mut inbox);
        for Crossing { at, to, frame } in inbox.drain(..) {
            let frame = self.store(frame);
            self.events.schedule_reserved(at, Kind::arrive(to, frame));
        }
        self.inbox = inbox;
    }

    fn work_done(&self) -> u64 {
        self.frames_delivered
    }
}

/// What a fabric run measured (`results.json`; docs/STATS.md's fabric section).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FabricResults {
    pub fabric: String,
    pub workload: String,
    /// The leaves' uplink group mode.
    pub mode: String,
    pub dcqcn: bool,
    pub hosts: usize,
    pub message_bytes: u64,
    pub messages: usize,
    pub incomplete_messages: usize,
    /// The horizon passed before every message completed.
    pub timed_out: bool,
    /// When the last message completed (none when some did not).
    pub completion_us: Option<f64>,
    /// Flow completion times of the messages that completed; they say how many they cover
    /// and how many incomplete messages they leave out.
    pub fct_us: Percentiles,
    /// Peak queue depth per `switch:port`.
    pub max_queue_bytes: BTreeMap<String, u64>,
    /// Time each link direction's transmitter was paused by PFC (any priority), `a -> b`.
    pub pfc_pause_us: BTreeMap<String, f64>,
    pub pfc_pause_total_us: f64,
    pub cnps_sent: u64,
    pub ecn_marked: u64,
    /// Events the engine handled (frames arriving, transmissions done, switch timers, host
    /// wake-ups): the simulation's work, for events per second.
    pub events: u64,
    pub drops: u64,
    pub drops_by_reason: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Messages the percentiles are over (those that completed).
    pub messages: usize,
    /// Messages that never completed, which the percentiles leave out: with any, p99 and max
    /// are of the survivors, not of the workload.
    pub left_out: usize,
}

impl FabricResults {
    /// The one line `raceway fabric` prints.
    pub fn summary_line(&self) -> String {
        format!(
            "{} {} mode {} dcqcn {}: completion {} us, FCT p50 {:.1} us p99 {:.1} us{}, PFC pause {:.1} us, CNPs {}, drops {}, incomplete {}",
            self.fabric,
            self.workload,
            self.mode,
            self.dcqcn,
            self.completion_us.map_or("-".to_string(), |c| format!("{c:.1}")),
            self.fct_us.p50,
            self.fct_us.p99,
            if self.fct_us.left_out > 0 {
                format!(" (of the {} completed; {} incomplete left out)", self.fct_us.messages, self.fct_us.left_out)
            } else {
                String::new()
            },
            self.pfc_pause_total_us,
            self.cnps_sent,
            self.drops,
            self.incomplete_messages,
        )
    }

    /// results.json: keys sorted, as every raceway JSON document.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("results serialise")
    }
}

impl FabricOptions {
    /// Checks the options against `fabric`; the error names the flag.
    pub fn validate(&self, fabric: &Fabric) -> Result<(), InputError> {
        if let Collective::Incast { target } = self.collective {
            if target >= fabric.hosts.len() {
                return Err(InputError::flag(
                    "--target",
                    format!("{target} is not a host (the fabric has {})", fabric.hosts.len()),
                ));
            }
        }
        if self.message_bytes == 0 || self.messages == 0 {
            return Err(InputError::flag("--message-bytes and --messages", "must be at least 1"));
        }
        if !(64..=9000).contains(&self.roce_mtu)
            || self.roce_mtu + crate::traffic::frames::ROCE_OVERHEAD > fabric.mtu() as usize + 14
        {
            return Err(InputError::flag(
                "--roce-mtu",
                format!("{} is not 64-9000 or does not fit the switches' mtu {}", self.roce_mtu, fabric.mtu()),
            ));
        }
        if self.threads == 0 {
            return Err(InputError::flag("--threads", "must be at least 1"));
        }
        // Hosts count a message's frames, and number messages and queue pairs (no more than
        // messages), in 32 bits (`host::Delivery`).
        if self.message_bytes.div_ceil(self.roce_mtu as u64) > u64::from(u32::MAX) {
            return Err(InputError::flag(
                "--message-bytes",
                format!("{} is more than 2^32 frames of --roce-mtu {}", self.message_bytes, self.roce_mtu),
            ));
        }
        let messages = workload::count(self.collective, fabric.hosts.len(), self.messages);
        if messages > u64::from(u32::MAX) {
            return Err(InputError::flag(
                "--messages",
                format!("{} on {} hosts makes {messages} messages, more than 2^32", self.messages, fabric.hosts.len()),
            ));
        }
        if !(self.horizon_ms.is_finite() && self.horizon_ms > 0.0) {
            return Err(InputError::flag("--horizon-ms", format!("{} is not positive", self.horizon_ms)));
        }
        Ok(())
    }
}

/// Percentile `q` (0-1) of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs `options` on `fabric`; writes per-switch stats and charts under `out` when given.
/// Returns the results document (also written as `out/results.json`).
pub fn run(fabric: &Fabric, options: &FabricOptions, out: Option<&Path>) -> Result<FabricResults, InputError> {
    let leaf_of = |host: usize| fabric.hosts[host].leaf;
    let (qp_specs, message_specs) =
        workload::build(options.collective, fabric.hosts.len(), &leaf_of, options.message_bytes, options.messages);
    // Each host runs with the switch its link goes to, at that link's speed, and answers PFC
    // within the response its switch port gives its peer.
    let mut host_link = vec![(0, 100_000); fabric.hosts.len()];
    let mut host_response_ps = vec![0; fabric.hosts.len()];
    for link in &fabric.links {
        if let (Endpoint::Host(host), Endpoint::Switch { switch, port })
        | (Endpoint::Switch { switch, port }, Endpoint::Host(host)) = (link.a, link.b)
        {
            host_link[host] = (switch, link.speed_mbps);
            host_response_ps[host] = fabric.switches[switch].ports[port].peer_response_ps();
        }
    }
    let switch_at: Vec<Place> =
        (0..fabric.switches.len()).map(|switch| Place { partition: switch, index: 0 }).collect();
    let mut hosts_of = vec![0; fabric.switches.len()];
    let host_at: Vec<Place> = host_link
        .iter()
        .map(|&(switch, _)| {
            hosts_of[switch] += 1;
            Place { partition: switch, index: hosts_of[switch] - 1 }
        })
        .collect();
    let mut nics: Vec<Nic> = fabric
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let (switch, speed_mbps) = host_link[i];
            let mut nic = Nic::new(i, h.address, h.mac, fabric.switches[switch].mac, speed_mbps);
            nic.response_ps = host_response_ps[i];
            nic
        })
        .collect();
    let mut qps = Vec::with_capacity(qp_specs.len());
    for (id, spec) in qp_specs.iter().enumerate() {
        let slot = nics[spec.sender].sending.len();
        nics[spec.sender].sending.push(QueuePair::new(id, spec.receiver, host_link[spec.sender].1 as f64));
        let inbound = nics[spec.receiver].senders.len();
        let address = fabric.hosts[spec.sender].address;
        nics[spec.receiver].senders.push(host::Sender::new(address, narrow(slot)));
        qps.push(QpPlan { slot, inbound });
    }
    let mtu = options.roce_mtu.max(1) as u64;
    let mut messages: Vec<MessagePlan> = Vec::with_capacity(message_specs.len());
    let mut roots: Vec<Vec<usize>> = vec![Vec::new(); fabric.switches.len()];
    for spec in message_specs {
        let outbound = nics[spec.sender].released.len();
        nics[spec.sender].released.push(None);
        let frames = spec.bytes.div_ceil(mtu).max(1);
        let inbound = nics[spec.receiver].receiving.len();
        let (message, qp, from) = (narrow(messages.len()), narrow(spec.qp), narrow(qps[spec.qp].inbound));
        let delivery = host::Delivery::new(message, qp, from, u32::try_from(frames).unwrap_or(u32::MAX));
        nics[spec.receiver].receiving.push(delivery);
        match spec.after {
            Some(parent) => {
                // Released where the parent arrives: its receiver must send it.
                assert_eq!(messages[parent].spec.receiver, spec.sender, "a message waits for one its sender receives");
                let index = messages.len();
                messages[parent].dependents.push(index);
            }
            None => roots[host_at[spec.sender].partition].push(messages.len()),
        }
        messages.push(MessagePlan { spec, frames, dependents: Vec::new(), outbound, inbound });
    }
    let mut switch_wires: Vec<Vec<Option<Wire>>> = fabric.switches.iter().map(|c| vec![None; c.ports.len()]).collect();
    let mut host_wires: Vec<Option<Wire>> = vec![None; fabric.hosts.len()];
    for link in &fabric.links {
        let propagation_ps = crate::config::plan::cable_delay_ps(link.cable_m);
        for (from, to) in [(link.a, link.b), (link.b, link.a)] {
            let wire = Some(Wire { to, speed_mbps: link.speed_mbps, propagation_ps });
            match from {
                Endpoint::Switch { switch, port } => switch_wires[switch][port] = wire,
                Endpoint::Host(host) => host_wires[host] = wire,
            }
        }
    }
    let linked = "Fabric::parse links every port and host";
    let switch_wires =
        switch_wires.into_iter().map(|ports| ports.into_iter().map(|w| w.expect(linked)).collect()).collect();
    let host_wires = host_wires.into_iter().map(|w| w.expect(linked)).collect();
    let total_bytes: u64 = messages.iter().map(|m| m.spec.bytes).sum();
    let line_mbps = host_link.first().map_or(100_000, |&(_, speed)| speed).max(1);
    let span_ps = total_bytes * 8 * 1_000_000 / line_mbps / fabric.hosts.len().max(1) as u64;
    // The PFC priority the hosts' untagged data carries, as their leaf reads it.
    let qos = &fabric.switches[0].qos;
    let data_priority = match qos.trust {
        crate::config::Trust::Dscp => usize::from(qos.dscp_to_priority[usize::from(host::DATA_DSCP)]),
        crate::config::Trust::Pcp => 0,
    };
    let plan = Plan { fabric, options, switch_wires, host_wires, qps, messages, switch_at, host_at, data_priority };

    let count = fabric.switches.len();
    let mut partitions: Vec<Partition> = (0..count)
        .map(|id| Partition {
            plan: &plan,
            id,
            switches: Vec::new(),
            nics: Vec::new(),
            events: EventQueue::with_origin(u32::try_from(id).expect("fewer switches than 2^24")),
            frames: Vec::new(),
            free_frames: Vec::new(),
            paused: HashMap::new(),
            outbox: (0..count).map(|_| Vec::new()).collect(),
            mail_for: Vec::new(),
            inbox: Vec::new(),
            last_ps: 0,
            frames_delivered: 0,
            touched_ports: Vec::new(),
            events_handled: 0,
        })
        .collect();
    for (id, config) in fabric.switches.iter().enumerate() {
        partitions[plan.switch_at[id].partition].switches.push(SwitchState {
            id,
            switch: Switch::new(config, crate::rng::stream_seed(options.seed, id as u64)),
            links: vec![LinkTx::default(); config.ports.len()],
            timer: Alarm::default(),
            recorder: Recorder::new(config.ports.len(), span_ps),
            control_seen: 0,
        });
    }
    for nic in nics {
        partitions[plan.host_at[nic.host].partition].nics.push(nic);
    }
    for (partition, roots) in partitions.iter_mut().zip(&roots) {
        for &message in roots {
            partition.release(message, 0);
        }
    }
    let horizon = (options.horizon_ms * 1e9) as u64;
    let windows = Windows { lookahead: plan.lookahead(), horizon, threads: options.threads };
    // A thread's share: the ports it switches and the hosts it runs.
    let weights: Vec<u64> = partitions
        .iter()
        .map(|p| (p.nics.len() + p.switches.iter().map(|s| s.links.len()).sum::<usize>()) as u64)
        .collect();
    // The work is the workload's frames, delivered; the horizon only bounds the run.
    let workload_frames = plan.messages.iter().map(|message| message.frames).sum();
    let mut progress = crate::progress::Progress::new(options.progress, workload_frames, "frames");
    let mut shown = 0;
    let (partitions, finish) = parallel::run(partitions, &weights, windows, &mut |done, start| {
        progress.tick_by(done - shown, || (done, format!("delivered, {}", crate::progress::simulated(start))));
        shown = done;
    });
    let mut finished = Finished::gather(partitions, fabric.hosts.len());
    // The run ends when the last frame within the horizon is off the wire (its `TxDone`,
    // scheduled or not).
    let last_done = finished
        .switches
        .iter()
        .flat_map(|s| s.links.iter().filter_map(LinkTx::done_at))
        .filter(|&at| at <= horizon)
        .max();
    finished.end = finished.end.max(last_done.unwrap_or(0));
    let delivered = format!("delivered, {}", crate::progress::simulated(finished.end));
    progress.finish(finished.frames_delivered, delivered);
    results(finished, &plan, out, finish.timed_out)
}

/// The partitions' state after a run, by switch and host number again.
struct Finished {
    switches: Vec<SwitchState>,
    nics: Vec<Nic>,
    paused: HashMap<Endpoint, [Intervals; 8]>,
    /// The last event's time.
    end: u64,
    frames_delivered: u64,
    events_handled: u64,
}

impl Finished {
    fn gather(partitions: Vec<Partition>, hosts: usize) -> Self {
        let mut switches: Vec<SwitchState> = Vec::new();
        let mut nics: Vec<Nic> = Vec::with_capacity(hosts);
        let mut finished = Finished {
            switches: Vec::new(),
            nics: Vec::new(),
            paused: HashMap::new(),
            end: 0,
            frames_delivered: 0,
            events_handled: 0,
        };
        for partition in partitions {
            switches.extend(partition.switches);
            nics.extend(partition.nics);
            finished.paused.extend(partition.paused);
            finished.end = finished.end.max(partition.last_ps);
            finished.frames_delivered += partition.frames_delivered;
            finished.events_handled += partition.events_handled;
        }
        switches.sort_by_key(|s| s.id);
        nics.sort_by_key(|n| n.host);
        finished.switches = switches;
        finished.nics = nics;
        finished
    }
}

/// Summarises a finished run; writes the per-switch outputs and results.json under `out`.
fn results(
    mut finished: Finished,
    plan: &Plan<'_>,
    out: Option<&Path>,
    timed_out: bool,
) -> Result<FabricResults, InputError> {
    let (fabric, options) = (plan.fabric, plan.options);
    let end = finished.end;
    let mut fcts: Vec<f64> = Vec::new();
    let mut incomplete = 0;
    let mut completion: u64 = 0;
    for message in &plan.messages {
        let released = finished.nics[message.spec.sender].released[message.outbound];
        let done = finished.nics[message.spec.receiver].receiving[message.inbound].done_ps();
        match (released, done) {
            (Some(start), Some(done)) => {
                fcts.push((done - start) as f64 / 1e6);
                completion = completion.max(done);
            }
            _ => incomplete += 1,
        }
    }
    fcts.sort_by(f64::total_cmp);
    let mut drops = BTreeMap::new();
    let mut total_drops = 0u64;
    let mut max_queue = BTreeMap::new();
    let mut marked = 0u64;
    for (state, config) in finished.switches.iter().zip(&fabric.switches) {
        let stats = &state.switch.stats;
        for (port, counters) in config.ports.iter().zip(&stats.ports) {
            total_drops += counters.dropped();
            let depth = counters.queues.iter().map(|q| q.max_depth_bytes).max().unwrap_or(0);
            max_queue.insert(format!("{}:{}", config.name, port.name), depth);
            marked += counters.queues.iter().map(|q| q.ecn_marked).sum::<u64>();
            for reason in crate::drops::DropReason::ALL {
                let count = counters.drops_for(reason);
                if count > 0 {
                    *drops.entry(reason.name().to_string()).or_insert(0) += count;
                }
            }
        }
    }
    // PFC pause time per link direction: the time each transmitter was held (any priority).
    let mut pauses = BTreeMap::new();
    let mut total_pause_ps = 0u64;
    let mut ends: Vec<Endpoint> = finished.paused.keys().copied().collect();
    ends.sort();
    for at in ends {
        let slots = finished.paused.get_mut(&at).expect("key");
        let mut merged = Intervals::default();
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for slot in slots.iter_mut() {
            spans.extend(slot.finish().iter().map(|&(a, b)| (a, b.min(end.max(a)))));
        }
        spans.sort();
        for (a, b) in spans {
            merged.pause(a, b);
        }
        let paused: u64 = merged.finish().iter().map(|(a, b)| b - a).sum();
        if paused > 0 {
            total_pause_ps += paused;
            let to = plan.wire(at).to;
            pauses.insert(format!("{} -> {}", fabric.endpoint_name(at), fabric.endpoint_name(to)), paused as f64 / 1e6);
        }
    }
    let cnps: u64 = finished.nics.iter().map(|n| n.cnps_sent).sum();
    let result = FabricResults {
        fabric: fabric.name.clone(),
        workload: options.collective.name().to_string(),
        mode: format!("{:?}", fabric.mode()).to_lowercase(),
        dcqcn: fabric.dcqcn.enabled,
        hosts: fabric.hosts.len(),
        message_bytes: options.message_bytes,
        messages: plan.messages.len(),
        incomplete_messages: incomplete,
        timed_out,
        completion_us: (incomplete == 0).then_some(completion as f64 / 1e6),
        fct_us: Percentiles {
            p50: percentile(&fcts, 0.5),
            p99: percentile(&fcts, 0.99),
            max: fcts.last().copied().unwrap_or(0.0),
            messages: fcts.len(),
            left_out: incomplete,
        },
        max_queue_bytes: max_queue,
        pfc_pause_us: pauses,
        pfc_pause_total_us: total_pause_ps as f64 / 1e6,
        cnps_sent: cnps,
        ecn_marked: marked,
        events: finished.events_handled,
        drops: total_drops,
        drops_by_reason: drops,
    };
    for state in &mut finished.switches {
        state.switch.refresh_gauges(end);
    }
    if let Some(out) = out {
        std::fs::create_dir_all(out)
            .map_err(|err| InputError::new(out.display(), "", format!("cannot create: {err}")))?;
        // Each switch's charts and series on the run's threads: drawing them took longer than
        // simulating a 256-host fabric on two threads (2.8 s of 5).
        let threads = options.threads.clamp(1, finished.switches.len().max(1));
        let mut shares: Vec<Vec<(SwitchState, &crate::config::Config)>> = (0..threads).map(|_| Vec::new()).collect();
        for (index, job) in finished.switches.into_iter().zip(&fabric.switches).enumerate() {
            shares[index % threads].push(job);
        }
        let written: Vec<Result<(), InputError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|share| {
                    scope.spawn(move || {
                        share.into_iter().try_for_each(|(state, config)| write_switch(out, config, state, end))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
        });
        written.into_iter().collect::<Result<(), InputError>>()?;
        let text = serde_json::to_string_pretty(&result.to_json()).expect("json") + "\n";
        let path = out.join("results.json");
        std::fs::write(&path, text)
            .map_err(|err| InputError::new(path.display(), "", format!("cannot write: {err}")))?;
    }
    Ok(result)
}

/// Writes a switch's report (charts, series) and stats.json under `out/<switch>`.
fn write_switch(out: &Path, config: &crate::config::Config, state: SwitchState, end: u64) -> Result<(), InputError> {
    let SwitchState { switch, mut recorder, .. } = state;
    let dir = out.join(&config.name);
    recorder.finish(end, &switch);
    crate::observe::report::write(&dir, "fabric", config, &switch.stats, recorder)
        .map_err(|problem| InputError::new(dir.display(), "", problem))?;
    let stats = serde_json::to_string_pretty(&switch.stats.to_json(config)).expect("json") + "\n";
    std::fs::write(dir.join("stats.json"), stats)
        .map_err(|err| InputError::new(dir.display(), "stats.json", format!("cannot write: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(extra: &str) -> Fabric {
        let text = format!("{}{extra}", super::super::tests::small());
        Fabric::parse(&text, "small.toml", None).unwrap()
    }

    fn options(collective: Collective) -> FabricOptions {
        FabricOptions {
            collective,
            message_bytes: 256 * 1024,
            messages: 2,
            roce_mtu: 4096,
            seed: 1,
            horizon_ms: 100.0,
            progress: false,
            threads: 1,
        }
    }

    #[test]
    fn every_message_completes_and_the_results_are_deterministic() {
        let fabric = small("");
        for collective in [Collective::Incast { target: 0 }, Collective::AllToAll, Collective::AllReduce] {
            let first = run(&fabric, &options(collective), None).unwrap();
            assert_eq!(first.incomplete_messages, 0, "{collective:?}: {first:?}");
            assert_eq!(first.drops, 0, "{collective:?}: {first:?}");
            assert!(first.completion_us.unwrap() > 0.0);
            assert_eq!(first, run(&fabric, &options(collective), None).unwrap(), "{collective:?} not deterministic");
            // Four partitions (two leaves with their hosts, two spines) on three threads.
            let threaded = run(&fabric, &FabricOptions { threads: 3, ..options(collective) }, None).unwrap();
            assert_eq!(first, threaded, "{collective:?} differs on three threads");
        }
    }

    #[test]
    fn an_uncongested_message_runs_at_line_rate() {
        // One host sends 256 KiB twice to a host on the other leaf: 64 frames each of 4154 B
        // at 100G (~340 ns each), plus three hops of store and forward.
        let fabric = small("");
        let result =
            run(&fabric, &FabricOptions { messages: 1, ..options(Collective::Incast { target: 0 }) }, None).unwrap();
        // Three senders into one host: about 3 x 64 frames at line rate into h0.
        let completion = result.completion_us.unwrap();
        let line_rate_us = 3.0 * 64.0 * (4154.0 + 24.0) * 8.0 / 100_000.0;
        assert!(completion >= line_rate_us && completion < line_rate_us * 1.25, "{completion} vs {line_rate_us}");
    }
}
