//! The deterministic replay engine: the switch pipeline driven by a discrete-event loop in
//! virtual time (picoseconds), with input traces as what each host offers, a model of each
//! host's NIC (it obeys PFC), and one output capture per port.
//!
//! Timing model (docs/OPERATING.md, "Replay timing"):
//! - Each link serialises at its port's speed, counting preamble, IFG and FCS
//!   (`PortConfig::wire_time_ps`). A peer offers each frame of its trace from its timestamp
//!   on; it sends one frame at a time, the earliest offered among the priorities it may send.
//! - Store-and-forward: the switch classifies and queues a frame when its last bit arrives.
//! - The peer obeys PFC like a NIC with a queue per priority, taking the response time its
//!   port gives it (`peer_response_quanta`, 802.3 31B.3.7's allowance for the speed unless
//!   given): a pause the switch sends at time t holds back the peer's frames of that priority
//!   that would start arriving from t + the PFC frame's wire time + 2 x the cable's
//!   propagation delay (the XOFF travels out, the data already sent travels back) + the
//!   response (unless the priority is paused already), until its quanta, counted from its
//!   reception, run out, or until an XON takes effect (at once). Other priorities keep flowing; PAUSE/PFC frames in a trace are never held.
//!   A peer named in `ignore_pfc` sends as if no PFC existed.
//! - Each egress port sends one frame at a time: PFC frames first, then data chosen by the
//!   scheduler among the classes not paused. Output captures timestamp a frame at the start
//!   of its transmission, in nanoseconds.
//!
//! - With `[control]`, frames for the control plane are policed and counted (`punted`) as live;
//!   there is no kernel in a replay, so they go no further.
//!
//! Inputs stream: each peer takes frames from its trace only as they are offered and needed
//! (`peer_ready`), so memory follows what the peers and the switch hold, not the traces.
//!
//! Invariant: events are ordered by (time, sequence number) and nothing else (no wall clock,
//! no hash order, no thread) feeds the outputs, so the same inputs and seed give the same
//! bytes. At the end every queue is empty, so rx = tx + drops + punted.

use crate::config::plan;
use crate::config::Config;
use crate::counters::SwitchStats;
use crate::engine::port_tx;
use crate::engine::sim::{self, Alarm, EventQueue, LinkTx};
use crate::error::InputError;
use crate::observe::report::Recorder;
use crate::packet::HeapPacket;
use crate::switch::{Switch, NEVER};
use crate::tm::pfc::Pauses;
use crate::traffic::pcap::{open_traces, CaptureWriter, OutputFormat, TraceFrame, TraceSource, TraceSpec};
use crate::wire::pfc::Repr;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// Options of a replay beyond the config and traces.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Seed of every random choice (ECN and random spraying will draw from it).
    pub seed: u64,
    /// Ports whose peer ignores PFC (to exercise headroom overflow and the watchdog).
    pub ignore_pfc: Vec<usize>,
    /// Write the report (charts, series.json, index.html) into this directory.
    pub report: Option<PathBuf>,
    /// The output captures' format.
    pub out_format: OutputFormat,
    /// Show a progress bar on stderr (the caller checks it is a terminal).
    pub progress: bool,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    /// The last bit of the frame the peer on the port is sending has arrived.
    FrameArrived(usize),
    /// The port's transmitter finished a frame.
    TransmitDone(usize),
    /// The port's peer may be able to send (a frame is offered, or a pause ends).
    PeerReady(usize),
    /// The switch has a timer due (pause end, XOFF refresh, watchdog).
    Timer,
}

/// A frame the peer offers: when, in what order, and to which of its queues it belongs.
struct Offered {
    time_ps: u64,
    order: u64,
    bytes: Vec<u8>,
}

/// Queue index for MAC control frames, which pauses never hold back.
const CONTROL_QUEUE: usize = 8;

/// The host NIC on a port: a FIFO per priority, and the pauses the switch asked for.
struct Peer {
    queues: [VecDeque<Offered>; 9],
    /// The rest of its trace, read as frames are offered (`peer_ready`).
    source: Option<TraceSource>,
    /// Frames taken from the source so far (the next one's order).
    taken: u64,
    /// The pauses the switch sent, from when each takes effect at the peer.
    pauses: Pauses,
    ignores_pfc: bool,
    /// A frame is on the wire towards the switch.
    sending: Option<Vec<u8>>,
    /// The pending PeerReady event.
    wake: Alarm,
}

impl Peer {
    fn may_send(&self, queue: usize, at: u64) -> bool {
        queue == CONTROL_QUEUE || self.ignores_pfc || !self.pauses.holds(queue, at)
    }

    /// Nothing waits in the queues and no pause holds at `at`: the trace's next frame, once
    /// offered, is what `peer_ready` would choose, whatever its priority.
    fn idle_and_unpaused(&self, at: u64) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
            && (self.ignores_pfc || (0..8).all(|queue| !self.pauses.holds(queue, at)))
    }
}

struct PortState {
    peer: Peer,
    /// The port's transmitter (its `TransmitDone` is reserved: `LinkTx`).
    link: LinkTx,
    capture: CaptureWriter,
}

struct Engine<'a> {
    config: &'a Config,
    switch: Switch<HeapPacket>,
    ports: Vec<PortState>,
    events: EventQueue<Event>,
    timer: Alarm,
    /// Time series for `--report`; it only reads the switch.
    recorder: Option<Recorder>,
}

/// Replays `inputs` (port index, trace) through the switch; writes `out_dir/<port>.pcap` (or
/// `.pcapng`, `options.out_format`) for every port and `out_dir/stats.json`.
pub fn run(
    config: &Config,
    inputs: &[(usize, TraceSpec)],
    out_dir: &Path,
    options: &ReplayOptions,
) -> Result<SwitchStats, InputError> {
    let specs: Vec<&TraceSpec> = inputs.iter().map(|(_, spec)| spec).collect();
    let (origin_ps, opened) = open_traces(&specs)?;
    let origin_ns = (origin_ps / 1000) as u64;
    let mut sources: Vec<Option<TraceSource>> = (0..config.ports.len()).map(|_| None).collect();
    for ((port, _), source) in inputs.iter().zip(opened) {
        sources[*port] = Some(source);
    }
    std::fs::create_dir_all(out_dir).map_err(|err| {
        InputError::whole_file(out_dir.display(), format!("cannot create the output directory: {err}"))
    })?;
    let switch = Switch::new(config, options.seed);
    let recorder = match &options.report {
        // The report's sample interval needs the traces' span: a first pass reads their times.
        Some(_) => Some(Recorder::new(config.ports.len(), last_frame_time(&specs)?)),
        None => None,
    };
    let mut ports = Vec::with_capacity(config.ports.len());
    for (index, (port, source)) in config.ports.iter().zip(sources).enumerate() {
        let peer = Peer {
            queues: Default::default(),
            source,
            taken: 0,
            pauses: Pauses::default(),
            ignores_pfc: options.ignore_pfc.contains(&index),
            sending: None,
            wake: Alarm::default(),
        };
        ports.push(PortState {
            peer,
            link: LinkTx::default(),
            capture: CaptureWriter::create_as(
                &out_dir.join(format!("{}.{}", port.name, options.out_format.extension())),
                origin_ns,
                options.out_format,
                &port.name,
            )?,
        });
    }
    let mut engine = Engine { config, switch, ports, events: EventQueue::default(), timer: Alarm::default(), recorder };
    let input_bytes: u64 = specs.iter().filter_map(|spec| std::fs::metadata(&spec.path).ok()).map(|m| m.len()).sum();
    let mut progress = crate::progress::Progress::new(options.progress, input_bytes, "B");
    let mut last_event_ps = 0;
    for port in 0..engine.ports.len() {
        engine.peer_ready(port, 0)?;
    }
    while let Some((now, event)) = engine.events.pop() {
        match event {
            Event::FrameArrived(port) => engine.frame_arrived(port, now)?,
            Event::TransmitDone(port) => {
                engine.ports[port].link.done();
                engine.start_transmit(port, now)?;
            }
            Event::PeerReady(port) => {
                engine.ports[port].peer.wake.fired(now);
                engine.peer_ready(port, now)?;
            }
            Event::Timer => {
                engine.timer.fired(now);
                engine.switch.advance(now);
                for port in 0..engine.ports.len() {
                    engine.start_transmit(port, now)?;
                }
            }
        }
        // A dequeue on one port can decide an XON for another (the ingress port of the frames
        // it sent); that port's transmitter may be idle, so start it now rather than at the
        // next timer (which delayed XONs to the XOFF refresh, half a pause later). A busy
        // port sends it when its frame is done.
        for port in 0..engine.ports.len() {
            if engine.switch.has_control(port) {
                engine.start_transmit(port, now)?;
            }
        }
        if let Some(at) = engine.timer.follow(&engine.switch, now) {
            engine.events.schedule(at, Event::Timer);
        }
        if let Some(recorder) = &mut engine.recorder {
            recorder.observe(now, &engine.switch);
        }
        last_event_ps = now;
        progress.tick(|| engine.progress(now));
    }
    // The run ends when the last frame is off the wire (its `TransmitDone`, scheduled or not).
    last_event_ps = engine.ports.iter().filter_map(|port| port.link.done_at()).fold(last_event_ps, u64::max);
    let (read, message) = engine.progress(last_event_ps);
    progress.finish(read, message);
    let leftover = engine.switch.drain();
    if leftover > 0 {
        tracing::warn!("{leftover} frames were still queued when the replay ran out of events; counted as buffer_full");
    }
    engine.switch.refresh_gauges(last_event_ps);
    let stats = engine.switch.stats.clone();
    if let (Some(mut recorder), Some(dir)) = (engine.recorder.take(), &options.report) {
        recorder.finish(last_event_ps, &engine.switch);
        crate::observe::report::write(dir, "replay", config, &stats, recorder).map_err(|problem| InputError {
            file: dir.display().to_string(),
            field: "--report".into(),
            problem,
        })?;
    }
    for port in engine.ports {
        port.capture.finish()?;
    }
    let stats_path = out_dir.join("stats.json");
    let json = serde_json::to_string_pretty(&stats.to_json(config)).expect("stats serialise");
    std::fs::write(&stats_path, json + "\n")
        .map_err(|err| InputError::whole_file(stats_path.display(), format!("cannot write: {err}")))?;
    Ok(stats)
}

/// The time of the last frame of the latest-ending input (the report's span), read in a pass
/// of its own so that the replay itself can stream.
fn last_frame_time(specs: &[&TraceSpec]) -> Result<u64, InputError> {
    let (_, sources) = open_traces(specs)?;
    let mut span = 0;
    for source in sources {
        let mut last = None;
        for frame in source {
            last = Some(frame?.time_ps);
        }
        span = span.max(last.unwrap_or(0));
    }
    Ok(span)
}

impl Engine<'_> {
    /// The input bytes read and the bar's message: frames received and simulated time.
    fn progress(&self, now: u64) -> (u64, String) {
        let read = self.ports.iter().filter_map(|port| port.peer.source.as_ref()).map(TraceSource::bytes_read).sum();
        let frames: u64 = self.switch.stats.ports.iter().map(|port| port.rx_packets).sum();
        (read, format!("{frames} frames, {}", crate::progress::simulated(now)))
    }

    fn wake_peer(&mut self, port: usize, at: u64) {
        if self.ports[port].peer.wake.set(at) {
            self.events.schedule(at, Event::PeerReady(port));
        }
    }

    /// The peer starts its next frame if one is offered and not paused, or sleeps until one is.
    ///
    /// Frames are taken from the trace only as they are needed: while the trace's next frame
    /// is offered (its time has come) and no queued frame that may be sent is offered before
    /// it, since a later frame of a time-ordered trace cannot go first. So the peer holds
    /// only what it is offered and cannot send yet (its paused priorities, or more than its
    /// link carries), not its whole trace.
    fn peer_ready(&mut self, port: usize, now: u64) -> Result<(), InputError> {
        // The common case, decided without classifying the frame for a queue: the peer's
        // queues are empty, nothing is paused and the trace's next frame is offered. (Half
        // the cost of a frame's offer, measured on a 64 B trace.)
        let peer = &mut self.ports[port].peer;
        if peer.sending.is_none()
            && peer.source.as_ref().and_then(TraceSource::peek_time).is_some_and(|time_ps| time_ps <= now)
            && peer.idle_and_unpaused(now)
        {
            let source = peer.source.as_mut().expect("peeked");
            let frame = source.take()?.expect("peeked");
            let stepped_back = source.peek_time().is_some_and(|next| next <= now && next < frame.time_ps);
            if !stepped_back {
                peer.taken += 1;
                self.send_to_switch(port, frame.bytes, now);
                return Ok(());
            }
            // The trace steps back and the earlier frame is due too: the general path below
            // chooses between them.
            self.offer(port, frame);
        }
        loop {
            let peer = &mut self.ports[port].peer;
            if peer.sending.is_some() {
                return Ok(());
            }
            let mut best: Option<usize> = None;
            let mut next_try = NEVER;
            for queue in 0..peer.queues.len() {
                let Some(head) = peer.queues[queue].front() else { continue };
                let at = head.time_ps.max(now);
                if at > now {
                    next_try = next_try.min(at);
                } else if peer.may_send(queue, now) {
                    let better = best.is_none_or(|b| {
                        let other = peer.queues[b].front().expect("non-empty");
                        (head.time_ps, head.order) < (other.time_ps, other.order)
                    });
                    if better {
                        best = Some(queue);
                    }
                } else {
                    next_try = next_try.min(peer.pauses.until[queue]);
                }
            }
            let unread = peer.source.as_ref().and_then(TraceSource::peek_time);
            if let Some(time_ps) = unread {
                let best_first = best.is_some_and(|b| peer.queues[b].front().expect("non-empty").time_ps <= time_ps);
                if time_ps <= now && !best_first {
                    let frame = peer.source.as_mut().expect("peeked").take()?.expect("peeked");
                    self.offer(port, frame);
                    continue;
                }
                if time_ps > now {
                    next_try = next_try.min(time_ps);
                }
            }
            let peer = &mut self.ports[port].peer;
            match best {
                Some(queue) => {
                    let frame = peer.queues[queue].pop_front().expect("chosen queue has a frame");
                    self.send_to_switch(port, frame.bytes, now);
                }
                None if next_try != NEVER => self.wake_peer(port, next_try),
                None => {}
            }
            return Ok(());
        }
    }

    /// A frame taken from the trace joins the peer's queue for its priority.
    fn offer(&mut self, port: usize, frame: TraceFrame) {
        let queue = self.switch.priority_of(&frame.bytes).map_or(CONTROL_QUEUE, usize::from);
        let peer = &mut self.ports[port].peer;
        let order = peer.taken;
        peer.taken += 1;
        peer.queues[queue].push_back(Offered { time_ps: frame.time_ps, order, bytes: frame.bytes });
    }

    /// The peer starts sending `bytes` at `now`; they arrive whole after their wire time.
    fn send_to_switch(&mut self, port: usize, bytes: Vec<u8>, now: u64) {
        let arrived = now + self.config.ports[port].wire_time_ps(bytes.len());
        self.ports[port].peer.sending = Some(bytes);
        self.events.schedule(arrived, Event::FrameArrived(port));
    }

    fn frame_arrived(&mut self, port: usize, now: u64) -> Result<(), InputError> {
        let bytes = self.ports[port].peer.sending.take().expect("an arrival event has a frame");
        let speed = self.config.ports[port].speed_mbps;
        if let Some(ready) =
            sim::arrive(&mut self.switch, self.recorder.as_mut(), port, HeapPacket::new(bytes), now, speed).ready
        {
            self.start_transmit(ready, now)?;
        }
        // An XOFF decided on this frame leaves as soon as the link is free.
        if self.switch.has_control(port) {
            self.start_transmit(port, now)?;
        }
        self.peer_ready(port, now)
    }

    /// Sends `port`'s next frame if its link is free; if the link is busy, makes sure it looks
    /// again when its frame is done.
    fn start_transmit(&mut self, port: usize, now: u64) -> Result<(), InputError> {
        if !self.ports[port].link.free(&mut self.events, || Event::TransmitDone(port)) {
            return Ok(());
        }
        let port_config = &self.config.ports[port];
        // Replay's frames are whole (`beyond` is 0).
        let Some((HeapPacket { bytes, .. }, repr)) = port_tx::next_frame(&mut self.switch, port, now) else {
            return Ok(());
        };
        let done = now + port_config.wire_time_ps(bytes.len());
        self.ports[port].capture.write(now, &bytes)?;
        if let (Some(recorder), None) = (&mut self.recorder, &repr) {
            recorder.transmitted(port, now, done, bytes.len() as u64);
        }
        let more = self.switch.has_backlog(port);
        self.ports[port].link.start(&mut self.events, done, more, Event::TransmitDone(port));
        if let Some(repr) = repr {
            if let Some(recorder) = &mut self.recorder {
                recorder.pfc_sent(port, &repr, now, port_config.speed_mbps);
            }
            // In the switch's frame of arrivals: the peer's answer, shifted by the cable back.
            let reaches_peer = done + 2 * plan::propagation_ps(port_config);
            self.pause_peer(port, &repr, reaches_peer);
        }
        Ok(())
    }

    /// Applies a PFC frame the switch sent to the peer's pause state: received at `at`, in
    /// the switch's frame of arrivals, and answered within the port's peer response.
    fn pause_peer(&mut self, port: usize, repr: &Repr, at: u64) {
        let (speed, response) = (self.config.ports[port].speed_mbps, self.config.ports[port].peer_response_ps());
        let peer = &mut self.ports[port].peer;
        if peer.ignores_pfc {
            return;
        }
        for (priority, time) in repr.named() {
            peer.pauses.apply_answered(priority, time, at, response, speed);
        }
        // Re-evaluate when the change takes effect (an XON may release a waiting frame).
        self.wake_peer(port, at);
    }
}
