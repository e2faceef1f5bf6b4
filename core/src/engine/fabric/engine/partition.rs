//! A partition of the fabric: a switch and the hosts cabled to it, with their own events,
//! stepped in windows (`parallel`); frames to other partitions leave through its outbox.
//!
//! Invariant: a partition's state changes only by its own events, taken in (time, scheduling
//! partition, order of scheduling) order.

use super::events::{narrow, Kind, Plan};
use crate::engine::fabric::host::{self, DataFrame, Nic};
use crate::engine::fabric::parallel::{self, Mailbox};
use crate::engine::fabric::ranks::{Decoder, Encoder};
use crate::engine::fabric::transport::{self, InFlight};
use crate::engine::fabric::Endpoint;
use crate::engine::port_tx;
use crate::engine::sim::{self, Alarm, EventQueue, LinkTx, Reserved};
use crate::observe::report::{record_pfc, Intervals, Recorder};
use crate::packet::{HeapPacket, PacketBuf};
use crate::switch::Switch;
use std::collections::HashMap;

/// A switch with its ports' transmitters (their `TxDone` reserved: `LinkTx`), the alarm for
/// its next deadline and its recorder.
pub(super) struct SwitchState {
    pub(super) id: usize,
    pub(super) switch: Switch<HeapPacket>,
    pub(super) links: Vec<LinkTx>,
    pub(super) timer: Alarm,
    pub(super) recorder: Recorder,
    /// `Switch::control_decided` when its ports were last looked at for PFC frames.
    pub(super) control_seen: u64,
}

/// A frame on a link between partitions, at the place its sender reserved in the order.
pub(super) struct Crossing {
    pub(super) at: Reserved,
    pub(super) to: Endpoint,
    pub(super) frame: HeapPacket,
}

/// A switch and its hosts (or any set of switches and hosts): their state and their events.
pub(super) struct Partition<'a> {
    pub(super) plan: &'a Plan<'a>,
    pub(super) id: usize,
    pub(super) switches: Vec<SwitchState>,
    pub(super) nics: Vec<Nic>,
    pub(super) events: EventQueue<Kind>,
    pub(super) frames: Vec<Option<HeapPacket>>,
    pub(super) free_frames: Vec<usize>,
    /// PFC pauses each of its link ends' transmitters received, per priority.
    pub(super) paused: HashMap<Endpoint, [Intervals; 8]>,
    /// Frames sent to other partitions in this window, by partition.
    pub(super) outbox: Vec<Vec<Crossing>>,
    /// The partitions `outbox` has frames for.
    pub(super) mail_for: Vec<usize>,
    pub(super) inbox: Vec<Crossing>,
    /// When its last event was.
    pub(super) last_ps: u64,
    /// Frames of messages delivered so far (the progress bar's work done).
    pub(super) frames_delivered: u64,
    /// The ports of the event's switch whose queues the event may have changed (a frame
    /// queued or sent): the recorder looks at these only.
    pub(super) touched_ports: Vec<usize>,
    /// Events handled so far.
    pub(super) events_handled: u64,
}

impl Partition<'_> {
    /// The frame in `slot`, which is free again.
    pub(super) fn take_frame(&mut self, slot: usize) -> HeapPacket {
        let bytes = self.frames[slot].take().expect("a frame in flight");
        self.free_frames.push(slot);
        bytes
    }

    pub(super) fn store(&mut self, bytes: HeapPacket) -> usize {
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
    pub(super) fn send(&mut self, from: Endpoint, bytes: HeapPacket, now: u64) {
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

    pub(super) fn switch_transmit(&mut self, switch: usize, port: usize, now: u64) {
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
    pub(super) fn note_pause(&mut self, at: Endpoint, repr: &crate::wire::pfc::Repr, now: u64) {
        let speed = self.plan.wire(at).speed_mbps;
        record_pfc(self.paused.entry(at).or_default(), repr, now, speed);
    }

    pub(super) fn arrive_at_switch(&mut self, switch: usize, port: usize, bytes: HeapPacket, now: u64) {
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

    pub(super) fn wake_host(&mut self, host: usize, at: u64) {
        if self.nics[self.plan.host_at[host].index].wake.set(at) {
            self.events.schedule(at, Kind::HostWake(narrow(host)));
        }
    }

    /// Releases a message (its sender is in this partition): its queue pair will send it.
    pub(super) fn release(&mut self, message: usize, now: u64) {
        let plan = self.plan;
        let spec = &plan.messages[message];
        let sender = spec.sender as usize;
        let slot = plan.qps[spec.qp as usize].slot as usize;
        let nic = &mut self.nics[plan.host_at[sender].index];
        nic.released[spec.outbound as usize] = Some(now);
        let qp = &mut nic.sending[slot];
        let was_sendable = qp.sendable(plan.window_frames);
        qp.queue.push_back(message);
        if !was_sendable && qp.sendable(plan.window_frames) {
            nic.order.put(slot, qp.next_send_ps, now);
        }
        if plan.options.qp_rates && !nic.sampling {
            nic.sampling = true;
            // On the samples' grid: the next multiple of the interval.
            let at = (now / plan.sample_ps + 1) * plan.sample_ps;
            self.events.schedule(at, Kind::RateSample(narrow(sender)));
        }
        self.host_transmit(sender, now);
    }

    pub(super) fn host_transmit(&mut self, host: usize, now: u64) {
        let plan = self.plan;
        let local = plan.host_at[host].index;
        let nic = &mut self.nics[local];
        if nic.transmitting {
            return;
        }
        // CNPs first (strict priority on the wire), then ACKs and NAKs in the same class;
        // they are not held by pauses of the data priority.
        let control = match nic.cnps.pop_front() {
            Some(cnp) => {
                nic.cnps_sent += 1;
                Some(host::cnp_frame(nic, cnp))
            }
            None => nic.answers.pop_front().map(|answer| {
                nic.answers_sent += 1;
                host::answer_frame(nic, answer)
            }),
        };
        if let Some(bytes) = control {
            nic.transmitting = true;
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
                // An ACK may have taken what it had to send again since it was put: it leaves
                // the turn until it has a frame again.
                Ok(slot) if !nic.sending[slot].sendable(plan.window_frames) => {}
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
                if !self.send_data(host, slot, now) {
                    // Nothing after all: the turn goes on to the next queue pair.
                    return self.host_transmit(host, now);
                }
                let nic = &mut self.nics[local];
                let qp = &nic.sending[slot];
                if qp.sendable(plan.window_frames) {
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

    /// Sends the next frame of the queue pair in `slot` of `host`'s NIC: one its transport
    /// sends again, else its next new one. False when it had none after all (what it was to
    /// send again was acknowledged, or selectively, meanwhile).
    pub(super) fn send_data(&mut self, host: usize, slot: usize, now: u64) -> bool {
        let plan = self.plan;
        let mtu = plan.options.roce_mtu as u64;
        let dcqcn = &plan.fabric.dcqcn;
        let nic = &mut self.nics[plan.host_at[host].index];
        let state = &mut nic.sending[slot];
        let again = state.tx.next_again().and_then(|psn| Some((psn, state.tx.message_of(psn)?)));
        let (message, index, psn) = match again {
            Some((psn, (in_flight, index))) => {
                nic.retransmits += 1;
                nic.resent[plan.messages[in_flight.message as usize].outbound as usize] += 1;
                (in_flight.message as usize, u64::from(index), psn)
            }
            None if state.current.is_none() && state.queue.is_empty() => return false,
            // BDP-FC: a window of frames unacknowledged; an ACK opens it again.
            None if !state.open(plan.window_frames) => return false,
            None => {
                let sending = match state.current {
                    Some(current) => current,
                    None => {
                        let message = state.queue.pop_front().expect("has_data");
                        let spec = &plan.messages[message];
                        let (tag, from) = (spec.inbound, plan.qps[spec.qp as usize].inbound);
                        host::Sending { message, bytes: spec.bytes, frames: spec.frames, sent: 0, tag, from }
                    }
                };
                let psn = state.next_psn;
                state.next_psn += 1;
                if sending.sent == 0 {
                    let frames = narrow(sending.frames as usize);
                    state.tx.in_flight.push_back(InFlight { message: narrow(sending.message), first_psn: psn, frames });
                }
                state.current =
                    (sending.sent + 1 < sending.frames).then_some(host::Sending { sent: sending.sent + 1, ..sending });
                (sending.message, sending.sent, psn)
            }
        };
        let spec = &plan.messages[message];
        let (frames, total_bytes) = (spec.frames, spec.bytes);
        let (tag, from) = (spec.inbound, plan.qps[spec.qp as usize].inbound);
        let payload = if index + 1 == frames { total_bytes - index * mtu } else { mtu } as usize;
        let (qp, receiver) = (state.id, state.receiver);
        let to = plan.fabric.hosts[receiver].address;
        let opcode = host::send_opcode(index, frames);
        let ack_every = plan.fabric.transport.ack_every();
        let bytes = host::data_frame(nic, to, DataFrame { qp, psn, opcode, payload, tag, from, ack_every });
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
        // The retransmission timer runs while frames are unacknowledged, from the later of
        // the last frame sent and the last acknowledgement: a queue pair waiting its turn
        // among a thousand others is not stalled.
        state.tx.progress_ps = now;
        if !state.tx.timer_armed {
            state.tx.timer_armed = true;
            nic.outstanding.push(narrow(slot));
        }
        if !nic.tick_armed {
            nic.tick_armed = true;
            let at = now + plan.fabric.transport.tick_ps();
            self.events.schedule(at, Kind::NicTimer(narrow(host)));
        }
        let nic = &mut self.nics[plan.host_at[host].index];
        nic.transmitting = true;
        nic.frames_sent += 1;
        self.send(Endpoint::Host(host), bytes, now);
        true
    }

    /// A NIC's retransmission tick (every half `rto_us` while any of its queue pairs has
    /// frames unacknowledged): a queue pair that neither sent nor was acknowledged for its
    /// timeout sends everything unacknowledged again, so a timeout fires between 1 and 1.5
    /// timeouts after the last progress. One tick per NIC, not a timer per queue pair: with
    /// a thousand queue pairs per host, those were a tenth of a run's events.
    pub(super) fn nic_tick(&mut self, host: usize, now: u64) {
        let plan = self.plan;
        let params = plan.fabric.transport;
        let nic = &mut self.nics[plan.host_at[host].index];
        nic.tick_armed = false;
        let mut outstanding = std::mem::take(&mut nic.outstanding);
        outstanding.retain(|&slot| {
            let slot = slot as usize;
            let state = &mut nic.sending[slot];
            if state.tx.acked >= state.next_psn {
                state.tx.timer_armed = false;
                return false;
            }
            let in_flight = state.next_psn - state.tx.acked;
            if now >= state.tx.progress_ps + params.timeout_ps(&state.tx, in_flight) {
                let had_data = state.sendable(plan.window_frames);
                transport::on_timeout(params.kind, &mut state.tx, state.next_psn, now);
                nic.timeouts += 1;
                if !had_data {
                    nic.order.put(slot, state.next_send_ps, now);
                }
            }
            true
        });
        if !outstanding.is_empty() {
            nic.tick_armed = true;
            self.events.schedule(now + params.tick_ps(), Kind::NicTimer(narrow(host)));
        }
        self.nics[plan.host_at[host].index].outstanding = outstanding;
        self.host_transmit(host, now);
    }

    /// `--qp-rates`: records the rate of each queue pair of `host` with frames to send or
    /// unacknowledged; samples again an interval later while one has.
    pub(super) fn rate_sample(&mut self, host: usize, now: u64) {
        let plan = self.plan;
        let nic = &mut self.nics[plan.host_at[host].index];
        let mut active = false;
        for qp in &nic.sending {
            if qp.has_data() || qp.tx.acked < qp.next_psn {
                active = true;
                nic.rates.push((now, narrow(qp.id), narrow(qp.receiver), qp.rate.rate_mbps()));
            }
        }
        nic.sampling = active;
        if active {
            self.events.schedule(now + plan.sample_ps, Kind::RateSample(narrow(host)));
        }
    }

    pub(super) fn arrive_at_host(&mut self, host: usize, bytes: &HeapPacket, now: u64) {
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
            host::Received::Answer { qp, tag, reply } => {
                let nic = &mut self.nics[local];
                // Only the queue pair's sender acts on it.
                let Some(state) = nic.sending.get_mut(tag).filter(|state| state.id == qp) else { return };
                let had_data = state.sendable(plan.window_frames);
                let reply = transport::unwrap_reply(reply, state.tx.acked);
                transport::on_reply(plan.fabric.transport.kind, &mut state.tx, reply, state.next_psn, now);
                for message in state.tx.acked_messages.drain(..) {
                    nic.acked[plan.messages[message as usize].outbound as usize] = Some(now);
                }
                if !had_data && state.sendable(plan.window_frames) {
                    nic.order.put(tag, state.next_send_ps, now);
                    self.host_transmit(host, now);
                }
            }
            host::Received::Data { qp, psn, congestion, tag, from, ack_req, trimmed } => {
                let nic = &mut self.nics[local];
                let ours = |d: &host::Delivery| d.qp as usize == qp && d.from as usize == from;
                if !nic.receiving.get(tag).is_some_and(ours) {
                    return;
                }
                nic.trims_received += u64::from(trimmed);
                nic.receiving[tag].trims += u32::from(trimmed);
                let sender = &mut nic.senders[from];
                let psn = transport::unwrap_psn(psn, sender.rx.expected);
                let accepted = transport::on_data(plan.fabric.transport.kind, &mut sender.rx, psn, ack_req, trimmed);
                if let Some(reply) = accepted.reply {
                    let answer = host::Answer { qp, to: sender.address, slot: sender.slot, reply };
                    nic.answers.push_back(answer);
                    self.host_transmit(host, now);
                }
                let nic = &mut self.nics[local];
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
                if !accepted.new {
                    return;
                }
                let delivery = &mut self.nics[local].receiving[tag];
                delivery.delivered += 1;
                self.frames_delivered += 1;
                if delivery.delivered == delivery.frames {
                    delivery.complete(now);
                    if let Some(dependent) = plan.messages[delivery.message as usize].dependent() {
                        self.release(dependent, now);
                    }
                }
            }
            host::Received::Other => {}
        }
    }

    /// Arms `switch`'s timer for its next deadline.
    pub(super) fn sync_timer(&mut self, switch: usize, now: u64) {
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
    pub(super) fn prefetch_next(&self) {
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

    pub(super) fn handle(&mut self, now: u64, kind: Kind) {
        let plan = self.plan;
        // A NIC's tick ends nothing: the run ends with its last frame or reply, not with a
        // timer that looked once more after it (a timeout's frames are events of their own).
        if !matches!(kind, Kind::NicTimer(_)) {
            self.last_ps = now;
        }
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
            Kind::NicTimer(host) => self.nic_tick(host as usize, now),
            Kind::RateSample(host) => self.rate_sample(host as usize, now),
            Kind::Release(message) => self.release(message as usize, now),
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

    fn post(&mut self, mailboxes: &[Mailbox<Crossing>]) -> u64 {
        let mut earliest = parallel::IDLE;
        for partition in self.mail_for.drain(..) {
            let outbox = &mut self.outbox[partition];
            earliest = outbox.iter().map(|crossing| crossing.at.time).fold(earliest, u64::min);
            mailboxes[partition].deliver(outbox);
        }
        earliest
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

    /// Its place in the order (time, sequence), where it arrives, and the frame: its bytes,
    /// the payload declared beyond them and its tag.
    fn encode(crossing: &Crossing, encoder: &mut Encoder) {
        encoder.u64(crossing.at.time);
        encoder.u64(crossing.at.sequence());
        match crossing.to {
            Endpoint::Switch { switch, port } => {
                encoder.u8(0);
                encoder.u32(narrow(switch));
                encoder.u32(narrow(port));
            }
            Endpoint::Host(host) => {
                encoder.u8(1);
                encoder.u32(narrow(host));
            }
        }
        encoder.u64(crossing.frame.beyond as u64);
        encoder.u64(crossing.frame.tag);
        encoder.bytes(&crossing.frame.bytes);
    }

    fn decode(decoder: &mut Decoder) -> Result<Crossing, String> {
        let at = Reserved::at(decoder.u64("a crossing's time")?, decoder.u64("a crossing's sequence")?);
        let to = match decoder.u8("a crossing's end")? {
            0 => Endpoint::Switch {
                switch: decoder.u32("a crossing's switch")? as usize,
                port: decoder.u32("a crossing's port")? as usize,
            },
            1 => Endpoint::Host(decoder.u32("a crossing's host")? as usize),
            other => return Err(format!("a crossing's end of kind {other}")),
        };
        let beyond = usize::try_from(decoder.u64("a crossing's declared payload")?)
            .map_err(|_| "a crossing's declared payload does not fit".to_string())?;
        let tag = decoder.u64("a crossing's tag")?;
        let bytes = decoder.bytes("a crossing's frame")?.to_vec();
        Ok(Crossing { at, to, frame: HeapPacket { bytes, beyond, tag } })
    }
}
