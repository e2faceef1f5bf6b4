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
//!   per `cnp_interval_us`, and counts frames per message by PSN, in any order.
//! - A message is released when its dependency (if any) has been received; its flow
//!   completion time runs from release to its last frame's arrival.
//!
//! Invariant: events are ordered by (time, sequence) only and every random choice draws from
//! seeded generators, so a fabric, a workload and a seed give the same results every run.

use super::host::{self, Nic, QueuePair};
use super::workload::{self, Collective, Message};
use super::{Endpoint, Fabric};
use crate::engine::port_tx;
use crate::engine::sim::{self, Alarm, EventQueue, LinkTx};
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Arrive { to: Endpoint, frame: usize },
    TxDone(Endpoint),
    Timer(usize),
    HostWake(usize),
}

/// Where a link end sends to: the other end, the link's speed and its propagation delay.
#[derive(Debug, Clone, Copy)]
struct Wire {
    to: Endpoint,
    speed_mbps: u64,
    propagation_ps: u64,
}

/// Per message: when it was released, how many frames it has and has delivered, when done.
#[derive(Debug, Clone)]
struct MessageState {
    spec: Message,
    frames: u64,
    released_ps: Option<u64>,
    delivered: u64,
    done_ps: Option<u64>,
    dependents: Vec<usize>,
}

struct Engine<'a> {
    fabric: &'a Fabric,
    options: &'a FabricOptions,
    switches: Vec<Switch<HeapPacket>>,
    /// Each switch port's transmitter (its `TxDone` is reserved: `LinkTx`).
    switch_links: Vec<Vec<LinkTx>>,
    timers: Vec<Alarm>,
    recorders: Vec<Recorder>,
    nics: Vec<Nic>,
    qps: Vec<QueuePair>,
    messages: Vec<MessageState>,
    wires: HashMap<Endpoint, Wire>,
    events: EventQueue<Kind>,
    frames: Vec<Option<HeapPacket>>,
    free_frames: Vec<usize>,
    /// PFC pauses each link end's transmitter received, per priority.
    paused: HashMap<Endpoint, [Intervals; 8]>,
    data_priority: usize,
    now: u64,
    /// Frames of messages delivered so far (the progress bar's work done).
    frames_delivered: u64,
    /// The ports of the event's switch whose queues the event may have changed (a frame
    /// queued or sent): the recorder looks at these only.
    touched_ports: Vec<usize>,
    /// Events handled so far.
    events_handled: u64,
}

impl Engine<'_> {
    fn schedule(&mut self, time: u64, kind: Kind) {
        self.events.schedule(time, kind);
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
    /// later.
    fn send(&mut self, from: Endpoint, bytes: HeapPacket, now: u64) {
        let wire = self.wires[&from];
        let done = now + crate::config::PortConfig::wire_time_for(wire.speed_mbps, bytes.len());
        let frame = self.store(bytes);
        match from {
            Endpoint::Switch { switch, port } => {
                let more = self.switches[switch].has_backlog(port);
                self.switch_links[switch][port].start(&mut self.events, done, more, Kind::TxDone(from));
            }
            Endpoint::Host(_) => self.schedule(done, Kind::TxDone(from)),
        }
        self.schedule(done + wire.propagation_ps, Kind::Arrive { to: wire.to, frame });
    }

    fn switch_transmit(&mut self, switch: usize, port: usize, now: u64) {
        let done = Kind::TxDone(Endpoint::Switch { switch, port });
        if !self.switch_links[switch][port].free(&mut self.events, || done) {
            return;
        }
        let Some((bytes, pfc)) = port_tx::next_frame(&mut self.switches[switch], port, now) else { return };
        self.touched_ports.push(port);
        let speed_mbps = self.fabric.switches[switch].ports[port].speed_mbps;
        match pfc {
            Some(repr) => self.recorders[switch].pfc_sent(port, &repr, now, speed_mbps),
            None => {
                let done = now + crate::config::PortConfig::wire_time_for(speed_mbps, bytes.len());
                self.recorders[switch].transmitted(port, now, done, bytes.len() as u64);
            }
        }
        self.send(Endpoint::Switch { switch, port }, bytes, now);
    }

    /// A PFC frame arrived at `at`: its transmitter pauses (or resumes) per priority.
    fn note_pause(&mut self, at: Endpoint, repr: &crate::wire::pfc::Repr, now: u64) {
        let speed = self.wires[&at].speed_mbps;
        record_pfc(self.paused.entry(at).or_default(), repr, now, speed);
    }

    fn arrive_at_switch(&mut self, switch: usize, port: usize, bytes: HeapPacket, now: u64) {
        let speed = self.fabric.switches[switch].ports[port].speed_mbps;
        let recorder = Some(&mut self.recorders[switch]);
        let arrival = sim::arrive(&mut self.switches[switch], recorder, port, bytes, now, speed);
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
        if self.nics[host].wake.set(at) {
            self.schedule(at, Kind::HostWake(host));
        }
    }

    /// Releases a message: its queue pair will send it.
    fn release(&mut self, message: usize, now: u64) {
        self.messages[message].released_ps = Some(now);
        let qp = self.messages[message].spec.qp;
        let state = &mut self.qps[qp];
        if !state.has_data() {
            self.nics[state.sender].order.put(state.slot, state.next_send_ps, now);
        }
        state.queue.push_back(message);
        let sender = state.sender;
        self.host_transmit(sender, now);
    }

    fn host_transmit(&mut self, host: usize, now: u64) {
        if self.nics[host].transmitting {
            return;
        }
        let nic_end = Endpoint::Host(host);
        // CNPs first (strict priority on the wire); they are not held by pauses of the data
        // priority.
        if let Some((qp, to)) = self.nics[host].cnps.pop_front() {
            let bytes = host::cnp_frame(&self.nics[host], to, qp);
            self.nics[host].transmitting = true;
            self.nics[host].cnps_sent += 1;
            self.send(nic_end, bytes, now);
            return;
        }
        let paused_until = self.nics[host].pauses.until[self.data_priority];
        if paused_until > now {
            self.wake_host(host, paused_until);
            return;
        }
        match self.nics[host].order.pick(now) {
            Ok(slot) => {
                let qp = self.nics[host].qps[slot];
                // The DCQCN timers run for the queue pair that sends (its rate limiter's time
                // was set when its last frame left); running them for every queue pair a
                // scan passed over was 36% of a 1,024-host run.
                if self.fabric.dcqcn.enabled {
                    let params = &self.fabric.dcqcn;
                    self.qps[qp].rate.advance(params, now);
                }
                self.send_data(host, qp, now);
                let state = &self.qps[qp];
                if state.has_data() {
                    self.nics[host].order.put(slot, state.next_send_ps, now);
                }
            }
            Err(Some(at)) => self.wake_host(host, at),
            Err(None) => {}
        }
    }

    fn send_data(&mut self, host: usize, qp: usize, now: u64) {
        let mtu = self.options.roce_mtu as u64;
        let state = &mut self.qps[qp];
        let (message, sent) = match state.current {
            Some(current) => current,
            None => {
                let message = state.queue.pop_front().expect("has_data");
                state.psn_starts.push((state.next_psn, message));
                (message, 0)
            }
        };
        let total_bytes = self.messages[message].spec.bytes;
        let frames = self.messages[message].frames;
        let payload = if sent + 1 == frames { total_bytes - sent * mtu } else { mtu } as usize;
        let psn = state.next_psn;
        state.next_psn += 1;
        state.current = if sent + 1 == frames { None } else { Some((message, sent + 1)) };
        let receiver = state.receiver;
        let to = self.nics[receiver].address;
        let bytes = host::data_frame(&self.nics[host], to, qp, psn, host::send_opcode(sent, frames), payload);
        let wire_bits = crate::units::wire_bytes(bytes.len()) * 8;
        // The rate limiter: the next frame of this queue pair goes when this one would have
        // finished at the queue pair's rate (at line rate, when it finishes on the wire).
        let state = &mut self.qps[qp];
        let rate_mbps =
            if self.fabric.dcqcn.enabled { state.rate.rate_mbps() } else { self.nics[host].speed_mbps as f64 };
        state.next_send_ps = now + (wire_bits as f64 * 1e6 / rate_mbps).ceil() as u64;
        if self.fabric.dcqcn.enabled {
            state.rate.on_bytes_sent(&self.fabric.dcqcn, bytes.len() as u64, now);
        }
        self.nics[host].transmitting = true;
        self.nics[host].frames_sent += 1;
        self.send(Endpoint::Host(host), bytes, now);
    }

    fn arrive_at_host(&mut self, host: usize, bytes: &HeapPacket, now: u64) {
        match host::read(bytes) {
            host::Received::Pfc(repr) => {
                self.note_pause(Endpoint::Host(host), &repr, now);
                let nic = &mut self.nics[host];
                for (priority, time) in repr.named() {
                    nic.pauses.apply(priority, time, now, nic.speed_mbps);
                }
                self.host_transmit(host, now);
            }
            host::Received::Cnp { qp } => {
                self.nics[host].cnps_received += 1;
                if self.fabric.dcqcn.enabled && qp < self.qps.len() {
                    let params = &self.fabric.dcqcn;
                    self.qps[qp].rate.on_cnp(params, now);
                }
            }
            host::Received::Data { qp, psn, congestion } => {
                if qp >= self.qps.len() {
                    return;
                }
                if congestion {
                    self.nics[host].marked_received += 1;
                    let interval = (self.fabric.dcqcn.cnp_interval_us * 1e6) as u64;
                    let due = self.qps[qp].last_cnp_ps.is_none_or(|last| now >= last + interval);
                    if self.fabric.dcqcn.enabled && due {
                        self.qps[qp].last_cnp_ps = Some(now);
                        let to = self.nics[self.qps[qp].sender].address;
                        self.nics[host].cnps.push_back((qp, to));
                        self.host_transmit(host, now);
                    }
                }
                let Some(message) = self.qps[qp].message_of(psn) else { return };
                let state = &mut self.messages[message];
                state.delivered += 1;
                self.frames_delivered += 1;
                if state.delivered == state.frames {
                    state.done_ps = Some(now);
                    for dependent in std::mem::take(&mut state.dependents) {
                        self.release(dependent, now);
                    }
                }
            }
            host::Received::Other => {}
        }
    }

    /// Arms `switch`'s timer for its next deadline.
    fn sync_timer(&mut self, switch: usize, now: u64) {
        if let Some(at) = self.timers[switch].follow(&self.switches[switch], now) {
            self.schedule(at, Kind::Timer(switch));
        }
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
    /// Flow completion times of the messages that completed.
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
}

impl FabricResults {
    /// The one line `raceway fabric` prints.
    pub fn summary_line(&self) -> String {
        format!(
            "{} {} mode {} dcqcn {}: completion {} us, FCT p50 {:.1} us p99 {:.1} us, PFC pause {:.1} us, CNPs {}, drops {}, incomplete {}",
            self.fabric,
            self.workload,
            self.mode,
            self.dcqcn,
            self.completion_us.map_or("-".to_string(), |c| format!("{c:.1}")),
            self.fct_us.p50,
            self.fct_us.p99,
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
    let leaf_of = |host: usize| usize::from(fabric.hosts[host].leaf);
    let (qp_specs, message_specs) =
        workload::build(options.collective, fabric.hosts.len(), &leaf_of, options.message_bytes, options.messages);
    let host_speed =
        |host: usize| fabric.links.iter().find(|l| l.a == Endpoint::Host(host)).map_or(100_000, |l| l.speed_mbps);
    let mut nics: Vec<Nic> =
        fabric.hosts.iter().enumerate().map(|(i, h)| Nic::new(h.address, h.mac, host_speed(i))).collect();
    let mut qps: Vec<QueuePair> =
        qp_specs.iter().map(|q| QueuePair::new(q.sender, q.receiver, host_speed(q.sender) as f64)).collect();
    for (index, qp) in qps.iter_mut().enumerate() {
        qp.slot = nics[qp.sender].qps.len();
        nics[qp.sender].qps.push(index);
    }
    let mtu = options.roce_mtu.max(1) as u64;
    let mut messages: Vec<MessageState> = message_specs
        .into_iter()
        .map(|spec| MessageState {
            frames: spec.bytes.div_ceil(mtu).max(1),
            spec,
            released_ps: None,
            delivered: 0,
            done_ps: None,
            dependents: Vec::new(),
        })
        .collect();
    for index in 0..messages.len() {
        if let Some(parent) = messages[index].spec.after {
            messages[parent].dependents.push(index);
        }
    }
    let mut wires = HashMap::new();
    for link in &fabric.links {
        let propagation_ps = crate::config::plan::cable_delay_ps(link.cable_m);
        wires.insert(link.a, Wire { to: link.b, speed_mbps: link.speed_mbps, propagation_ps });
        wires.insert(link.b, Wire { to: link.a, speed_mbps: link.speed_mbps, propagation_ps });
    }
    let total_bytes: u64 = messages.iter().map(|m| m.spec.bytes).sum();
    let span_ps = total_bytes * 8 * 1_000_000 / host_speed(0).max(1) / fabric.hosts.len().max(1) as u64;
    let switches: Vec<Switch<HeapPacket>> = fabric
        .switches
        .iter()
        .enumerate()
        .map(|(i, config)| Switch::new(config, crate::rng::stream_seed(options.seed, i as u64)))
        .collect();
    let data_priority = usize::from(fabric.switches[0].qos.dscp_to_tc[usize::from(host::DATA_DSCP)]);
    let mut engine = Engine {
        fabric,
        options,
        switch_links: fabric.switches.iter().map(|c| vec![LinkTx::default(); c.ports.len()]).collect(),
        timers: vec![Alarm::default(); switches.len()],
        recorders: fabric.switches.iter().map(|c| Recorder::new(c.ports.len(), span_ps)).collect(),
        switches,
        nics,
        qps,
        messages,
        wires,
        events: EventQueue::default(),
        frames: Vec::new(),
        free_frames: Vec::new(),
        paused: HashMap::new(),
        data_priority,
        now: 0,
        frames_delivered: 0,
        touched_ports: Vec::new(),
        events_handled: 0,
    };
    for message in 0..engine.messages.len() {
        if engine.messages[message].spec.after.is_none() {
            engine.release(message, 0);
        }
    }
    let horizon = (options.horizon_ms * 1e9) as u64;
    let mut timed_out = false;
    // The work is the workload's frames, delivered; the horizon only bounds the run.
    let workload_frames = engine.messages.iter().map(|message| message.frames).sum();
    let mut progress = crate::observe::progress::Progress::new(options.progress, workload_frames, "frames");
    let mut last_ps = 0;
    while let Some((now, kind)) = engine.events.pop() {
        if now > horizon {
            timed_out = true;
            break;
        }
        last_ps = now;
        progress.tick(|| (engine.frames_delivered, format!("delivered, {}", crate::observe::progress::simulated(now))));
        engine.now = now;
        engine.events_handled += 1;
        engine.touched_ports.clear();
        match kind {
            Kind::Arrive { to, frame } => {
                let bytes = engine.frames[frame].take().expect("a frame in flight");
                engine.free_frames.push(frame);
                match to {
                    Endpoint::Switch { switch, port } => engine.arrive_at_switch(switch, port, bytes, now),
                    Endpoint::Host(host) => engine.arrive_at_host(host, &bytes, now),
                }
            }
            Kind::TxDone(Endpoint::Switch { switch, port }) => {
                engine.switch_links[switch][port].done();
                engine.switch_transmit(switch, port, now);
            }
            Kind::TxDone(Endpoint::Host(host)) => {
                engine.nics[host].transmitting = false;
                engine.host_transmit(host, now);
            }
            Kind::Timer(switch) => {
                engine.timers[switch].fired(now);
                engine.switches[switch].advance(now);
                for port in 0..engine.switch_links[switch].len() {
                    engine.switch_transmit(switch, port, now);
                }
            }
            Kind::HostWake(host) => {
                engine.nics[host].wake.fired(now);
                engine.host_transmit(host, now);
            }
        }
        // Only the switch this event acted on can have changed its queues or decided a PFC
        // frame: looking at just it keeps the cost per event constant however large the
        // fabric (scanning every port of every switch was 32% of a 44-switch run).
        let touched = match kind {
            Kind::Arrive { to: Endpoint::Switch { switch, .. }, .. }
            | Kind::TxDone(Endpoint::Switch { switch, .. }) => Some(switch),
            Kind::Timer(switch) => Some(switch),
            _ => None,
        };
        if let Some(switch) = touched {
            // A dequeue on one port may decide an XON for another, idle, port: send it now
            // (a busy port sends it when its frame is done).
            for port in 0..engine.switch_links[switch].len() {
                if engine.switches[switch].has_control(port) {
                    engine.switch_transmit(switch, port, now);
                }
            }
        }
        if let Some(switch) = touched {
            // The others' deadlines did not move, and their timers stay armed for them.
            engine.sync_timer(switch, now);
            let (recorder, observed) = (&mut engine.recorders[switch], &engine.switches[switch]);
            if let Kind::Timer(_) = kind {
                // Timers act on any port (a storm's queue dropped, pauses expired).
                recorder.observe(now, observed);
            } else {
                recorder.observe_ports(now, observed, engine.touched_ports.iter().copied());
            }
        }
    }
    // The run ends when the last frame within the horizon is off the wire (its `TxDone`,
    // scheduled or not).
    let last_done = engine.switch_links.iter().flatten().filter_map(LinkTx::done_at).filter(|&at| at <= horizon).max();
    engine.now = engine.now.max(last_done.unwrap_or(0));
    last_ps = last_ps.max(engine.now);
    let delivered = format!("delivered, {}", crate::observe::progress::simulated(last_ps));
    progress.finish(engine.frames_delivered, delivered);
    results(engine, options, out, timed_out)
}

/// Summarises a finished run; writes the per-switch outputs and results.json under `out`.
fn results(
    mut engine: Engine<'_>,
    options: &FabricOptions,
    out: Option<&Path>,
    timed_out: bool,
) -> Result<FabricResults, InputError> {
    let fabric = engine.fabric;
    let end = engine.now;
    let mut fcts: Vec<f64> = Vec::new();
    let mut incomplete = 0;
    let mut completion: u64 = 0;
    for message in &engine.messages {
        match (message.released_ps, message.done_ps) {
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
    for (index, config) in fabric.switches.iter().enumerate() {
        let stats = &engine.switches[index].stats;
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
    let mut ends: Vec<Endpoint> = engine.paused.keys().copied().collect();
    ends.sort();
    for at in ends {
        let slots = engine.paused.get_mut(&at).expect("key");
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
            let to = engine.wires[&at].to;
            pauses.insert(format!("{} -> {}", fabric.endpoint_name(at), fabric.endpoint_name(to)), paused as f64 / 1e6);
        }
    }
    let cnps: u64 = engine.nics.iter().map(|n| n.cnps_sent).sum();
    let result = FabricResults {
        fabric: fabric.name.clone(),
        workload: options.collective.name().to_string(),
        mode: format!("{:?}", fabric.mode()).to_lowercase(),
        dcqcn: fabric.dcqcn.enabled,
        hosts: fabric.hosts.len(),
        message_bytes: options.message_bytes,
        messages: engine.messages.len(),
        incomplete_messages: incomplete,
        timed_out,
        completion_us: (incomplete == 0).then_some(completion as f64 / 1e6),
        fct_us: Percentiles {
            p50: percentile(&fcts, 0.5),
            p99: percentile(&fcts, 0.99),
            max: fcts.last().copied().unwrap_or(0.0),
        },
        max_queue_bytes: max_queue,
        pfc_pause_us: pauses,
        pfc_pause_total_us: total_pause_ps as f64 / 1e6,
        cnps_sent: cnps,
        ecn_marked: marked,
        events: engine.events_handled,
        drops: total_drops,
        drops_by_reason: drops,
    };
    for switch in &mut engine.switches {
        switch.refresh_gauges(end);
    }
    if let Some(out) = out {
        std::fs::create_dir_all(out)
            .map_err(|err| InputError::new(out.display(), "", format!("cannot create: {err}")))?;
        let recorders = std::mem::take(&mut engine.recorders);
        for (index, mut recorder) in recorders.into_iter().enumerate() {
            let config = &fabric.switches[index];
            let dir = out.join(&config.name);
            let switch = &engine.switches[index];
            recorder.finish(end, switch);
            crate::observe::report::write(&dir, "fabric", config, &switch.stats, recorder)
                .map_err(|problem| InputError::new(dir.display(), "", problem))?;
            let stats = serde_json::to_string_pretty(&switch.stats.to_json(config)).expect("json") + "\n";
            std::fs::write(dir.join("stats.json"), stats)
                .map_err(|err| InputError::new(dir.display(), "stats.json", format!("cannot write: {err}")))?;
        }
        let text = serde_json::to_string_pretty(&result.to_json()).expect("json") + "\n";
        let path = out.join("results.json");
        std::fs::write(&path, text)
            .map_err(|err| InputError::new(path.display(), "", format!("cannot write: {err}")))?;
    }
    Ok(result)
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
