//! The deterministic replay engine: the switch pipeline driven by a discrete-event loop in
//! virtual time (picoseconds), with input traces as what each host offers and one output
//! capture per port.
//!
//! Timing model (INTERFACE.md, "Replay semantics"):
//! - Each input link serialises at its port's speed, counting preamble, IFG and FCS
//!   (`PortConfig::wire_time_ps`): a frame starts arriving at its timestamp or when the
//!   previous one has fully arrived, whichever is later.
//! - Store-and-forward: the switch classifies and queues a frame when its last bit arrives.
//! - Each egress port sends one frame at a time at its speed; the output capture timestamps
//!   a frame at the start of its transmission, in nanoseconds.
//!
//! Invariant: events are ordered by (time, sequence number), and nothing else (no wall clock,
//! no hash order, no thread) feeds the outputs, so the same inputs and seed give the same
//! bytes. At the end every queue is empty, so rx = tx + drops.

pub mod pcap;

use crate::buffer::HeapPacket;
use crate::config::Config;
use crate::stats::SwitchStats;
use crate::switch::{Received, Switch};
use pcap::{read_trace, CaptureWriter, TraceError, TraceFrame};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// The last bit of the next input frame of the port has arrived.
    FrameArrived,
    /// The port's transmitter finished a frame.
    TransmitDone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time_ps: u64,
    sequence: u64,
    kind: EventKind,
    port: usize,
}

struct PortState {
    input: std::vec::IntoIter<TraceFrame>,
    /// The frame on its way in, and when its last bit arrives.
    arriving: Option<Vec<u8>>,
    input_free_ps: u64,
    transmitting: bool,
    capture: CaptureWriter,
}

struct Engine<'a> {
    config: &'a Config,
    switch: Switch<HeapPacket>,
    ports: Vec<PortState>,
    events: BinaryHeap<Reverse<Event>>,
    sequence: u64,
}

/// Replays `inputs` (port index, trace) through the switch; writes `out_dir/<port>.pcap` for
/// every port and `out_dir/stats.json`. `seed` feeds every random choice (none yet in this
/// pipeline; ECN and random spraying will draw from it).
pub fn run(config: &Config, inputs: &[(usize, PathBuf)], out_dir: &Path, seed: u64) -> Result<SwitchStats, TraceError> {
    let _ = seed;
    let mut traces: Vec<Vec<TraceFrame>> = (0..config.ports.len()).map(|_| Vec::new()).collect();
    for (port, path) in inputs {
        traces[*port] = read_trace(path)?;
    }
    std::fs::create_dir_all(out_dir).map_err(|err| TraceError {
        file: out_dir.to_path_buf(),
        field: "-".into(),
        problem: format!("cannot create the output directory: {err}"),
    })?;
    let mut ports = Vec::with_capacity(config.ports.len());
    for (port, trace) in config.ports.iter().zip(traces) {
        ports.push(PortState {
            input: trace.into_iter(),
            arriving: None,
            input_free_ps: 0,
            transmitting: false,
            capture: CaptureWriter::create(&out_dir.join(format!("{}.pcap", port.name)))?,
        });
    }
    let mut engine = Engine { config, switch: Switch::new(config), ports, events: BinaryHeap::new(), sequence: 0 };
    for port in 0..engine.ports.len() {
        engine.offer_next(port);
    }
    while let Some(Reverse(event)) = engine.events.pop() {
        match event.kind {
            EventKind::FrameArrived => engine.frame_arrived(event.port, event.time_ps)?,
            EventKind::TransmitDone => {
                engine.ports[event.port].transmitting = false;
                engine.start_transmit(event.port, event.time_ps)?;
            }
        }
    }
    debug_assert_eq!(engine.switch.queued_packets(), 0, "idle links leave nothing queued");
    let stats = engine.switch.stats.clone();
    for port in engine.ports {
        port.capture.finish()?;
    }
    let stats_path = out_dir.join("stats.json");
    let json = serde_json::to_string_pretty(&stats.to_json(config)).expect("stats serialise");
    std::fs::write(&stats_path, json + "\n").map_err(|err| TraceError {
        file: stats_path,
        field: "-".into(),
        problem: format!("cannot write: {err}"),
    })?;
    Ok(stats)
}

impl Engine<'_> {
    fn schedule(&mut self, time_ps: u64, kind: EventKind, port: usize) {
        self.sequence += 1;
        self.events.push(Reverse(Event { time_ps, sequence: self.sequence, kind, port }));
    }

    /// Starts the port's next input frame on the wire: at its timestamp, or once the previous
    /// frame has fully arrived.
    fn offer_next(&mut self, port: usize) {
        let state = &mut self.ports[port];
        if let Some(frame) = state.input.next() {
            let start = frame.time_ps.max(state.input_free_ps);
            let arrived = start + self.config.ports[port].wire_time_ps(frame.bytes.len());
            state.input_free_ps = arrived;
            state.arriving = Some(frame.bytes);
            self.schedule(arrived, EventKind::FrameArrived, port);
        }
    }

    fn frame_arrived(&mut self, port: usize, now: u64) -> Result<(), TraceError> {
        let bytes = self.ports[port].arriving.take().expect("an arrival event has a frame");
        if let Received::Queued { egress, .. } = self.switch.receive(port, HeapPacket::new(bytes)) {
            self.start_transmit(egress, now)?;
        }
        self.offer_next(port);
        Ok(())
    }

    fn start_transmit(&mut self, port: usize, now: u64) -> Result<(), TraceError> {
        if self.ports[port].transmitting {
            return Ok(());
        }
        if let Some(packet) = self.switch.transmit(port) {
            self.ports[port].capture.write(now, &packet.bytes)?;
            self.ports[port].transmitting = true;
            let done = now + self.config.ports[port].wire_time_ps(packet.bytes.len());
            self.schedule(done, EventKind::TransmitDone, port);
        }
        Ok(())
    }
}
