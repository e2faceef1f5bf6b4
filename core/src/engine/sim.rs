//! The discrete-event core that replay and fabric share: the event queue, the alarms that
//! keep one pending event per timer (a switch's next deadline, a NIC's wake-up), and what
//! happens when a frame arrives whole at a switch port.
//!
//! Invariant: events leave the queue in (time, order of scheduling) order and nothing else
//! decides their order (no hash, no wall clock), so a run is the same every time.

use crate::observe::report::Recorder;
use crate::packet::HeapPacket;
use crate::switch::{Received, Switch, NEVER};
use crate::wire::parse::flow_control;
use crate::wire::pfc::Repr;

/// An event at `time`, `sequence`-th scheduled (its queue's origin in the top bits), as one
/// key: events order by it only.
struct Scheduled<K> {
    key: u128,
    kind: K,
}

fn key(time: u64, sequence: u64) -> u128 {
    (u128::from(time) << 64) | u128::from(sequence)
}

/// A min-heap of events with four children per node: half the levels of a binary heap, and a
/// node's children share a cache line or two. (A fabric partition holds a hundred or so
/// pending events and pops each once; `std`'s binary heap's pops were 11% of a 512-host run.)
///
/// Invariant: no entry's key is below its parent's (the parent of `i` is `(i - 1) / 4`).
struct QuadHeap<K> {
    entries: Vec<Scheduled<K>>,
}

impl<K> QuadHeap<K> {
    fn push(&mut self, entry: Scheduled<K>) {
        let mut at = self.entries.len();
        let key = entry.key;
        self.entries.push(entry);
        while at > 0 {
            let parent = (at - 1) / 4;
            if self.entries[parent].key <= key {
                break;
            }
            self.entries.swap(at, parent);
            at = parent;
        }
    }

    fn peek(&self) -> Option<&Scheduled<K>> {
        self.entries.first()
    }

    fn pop(&mut self) -> Option<Scheduled<K>> {
        let last = self.entries.pop()?;
        if self.entries.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.entries[0], last);
        let len = self.entries.len();
        let mut at = 0;
        loop {
            let first = 4 * at + 1;
            if first >= len {
                break;
            }
            let mut least = first;
            for child in first + 1..(first + 4).min(len) {
                if self.entries[child].key < self.entries[least].key {
                    least = child;
                }
            }
            if self.entries[at].key <= self.entries[least].key {
                break;
            }
            self.entries.swap(at, least);
            at = least;
        }
        Some(top)
    }
}

/// Events in virtual time (ps): earliest first, and among equal times the first scheduled.
///
/// An event may also be *reserved*: its place in that order is fixed when it is reserved
/// (`reserve`), and it joins the queue only if it turns out to be needed
/// (`schedule_reserved`), which must happen before the queue has gone past its place. An
/// engine reserves the events that usually do nothing (a link done with its frame and nothing
/// more to send) and so does not pay for them, without changing the order of anything.
///
/// A queue has an *origin* (a fabric partition's number), the top bits of every sequence it
/// gives: events that partitions schedule for each other (`reserve` in one, `schedule_reserved`
/// in the other) keep one order, (time, origin, sequence there), whichever joins a queue first.
pub struct EventQueue<K> {
    heap: QuadHeap<K>,
    sequence: u64,
    /// The key of the event popped last: the queue's place.
    place: u128,
}

/// Bits of a sequence that count events; the origin is above them (2^40 events per queue,
/// 2^24 origins).
const ORIGIN_SHIFT: u32 = 40;

impl<K> Default for EventQueue<K> {
    fn default() -> Self {
        Self::with_origin(0)
    }
}

/// A reserved place in an `EventQueue`'s order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    pub time: u64,
    sequence: u64,
}

impl Reserved {
    /// Its place in the order, after its time (what a rank sends another: `ranks`).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The place another queue reserved, as `time` and `sequence` say.
    pub fn at(time: u64, sequence: u64) -> Self {
        Self { time, sequence }
    }
}

impl<K> EventQueue<K> {
    /// A queue whose sequences carry `origin`.
    pub fn with_origin(origin: u32) -> Self {
        assert!(origin < 1 << (64 - ORIGIN_SHIFT), "origin {origin} out of range");
        Self { heap: QuadHeap { entries: Vec::new() }, sequence: u64::from(origin) << ORIGIN_SHIFT, place: 0 }
    }

    fn next_sequence(&mut self) -> u64 {
        self.sequence += 1;
        debug_assert!(self.sequence & ((1 << ORIGIN_SHIFT) - 1) != 0, "sequence overflowed into the origin");
        self.sequence
    }

    pub fn schedule(&mut self, time: u64, kind: K) {
        let sequence = self.next_sequence();
        self.heap.push(Scheduled { key: key(time, sequence), kind });
    }

    /// Takes the place an event scheduled now at `time` would have.
    pub fn reserve(&mut self, time: u64) -> Reserved {
        Reserved { time, sequence: self.next_sequence() }
    }

    /// The next event.
    pub fn peek(&self) -> Option<&K> {
        self.heap.peek().map(|event| &event.kind)
    }

    /// The event after the next (the least of the top's children, in a heap).
    pub fn peek_second(&self) -> Option<&K> {
        let children = self.heap.entries.get(1..self.heap.entries.len().min(5))?;
        children.iter().min_by_key(|event| event.key).map(|event| &event.kind)
    }

    /// When the next event is due.
    pub fn next_time(&self) -> Option<u64> {
        self.heap.peek().map(|event| (event.key >> 64) as u64)
    }

    /// Whether the queue has not yet reached the reserved place (the event, if scheduled now,
    /// comes after the one being handled).
    pub fn ahead(&self, reserved: Reserved) -> bool {
        key(reserved.time, reserved.sequence) > self.place
    }

    /// Schedules an event at its reserved place, which must still be `ahead`.
    pub fn schedule_reserved(&mut self, reserved: Reserved, kind: K) {
        debug_assert!(self.ahead(reserved), "the queue is past the reserved place");
        self.heap.push(Scheduled { key: key(reserved.time, reserved.sequence), kind });
    }

    /// The next event and its time.
    pub fn pop(&mut self) -> Option<(u64, K)> {
        self.heap.pop().map(|event| {
            self.place = event.key;
            ((event.key >> 64) as u64, event.kind)
        })
    }
}

/// A link's transmitter whose "frame done" event is reserved, not scheduled: the event joins
/// the queue only when something waits for the link (more frames queued when the frame left,
/// or a wish to send while it is on the wire); otherwise the link falls idle at the reserved
/// place without an event. Outputs are the same as with every event scheduled, since a
/// reserved event keeps its place in the order. (Replay of 64 B frames spent about a tenth
/// of its time on done events that found nothing to send.)
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkTx {
    on_wire: Option<OnWire>,
}

#[derive(Debug, Clone, Copy)]
struct OnWire {
    done: Reserved,
    /// The done event is in the queue.
    scheduled: bool,
}

impl LinkTx {
    /// Whether the link may start a frame at the event being handled. A busy link whose done
    /// event is only reserved gets it scheduled now (`done`), since someone waits for it.
    pub fn free<K>(&mut self, events: &mut EventQueue<K>, done: impl FnOnce() -> K) -> bool {
        if let Some(on_wire) = &mut self.on_wire {
            if on_wire.scheduled {
                return false;
            }
            if events.ahead(on_wire.done) {
                on_wire.scheduled = true;
                events.schedule_reserved(on_wire.done, done());
                return false;
            }
            // Done before the event being handled, with nothing waiting: idle since.
            self.on_wire = None;
        }
        true
    }

    /// A frame went on the wire until `done_ps`: its done event is reserved, and scheduled
    /// at once when `more` waits behind it.
    pub fn start<K>(&mut self, events: &mut EventQueue<K>, done_ps: u64, more: bool, done: K) {
        let reserved = events.reserve(done_ps);
        if more {
            events.schedule_reserved(reserved, done);
        }
        self.on_wire = Some(OnWire { done: reserved, scheduled: more });
    }

    /// Its done event fired.
    pub fn done(&mut self) {
        self.on_wire = None;
    }

    /// When the last frame started is done, if one is still counted as on the wire (a run's
    /// end is the last of these, whether their events were scheduled or not).
    pub fn done_at(&self) -> Option<u64> {
        self.on_wire.map(|on_wire| on_wire.done.time)
    }
}

/// One pending event for something that may be asked to wake at many times: only an earlier
/// time schedules another event, and an event that fires at the armed time disarms it.
#[derive(Debug, Clone, Copy)]
pub struct Alarm {
    at: u64,
}

impl Default for Alarm {
    fn default() -> Self {
        Self { at: NEVER }
    }
}

impl Alarm {
    /// Arms the alarm for `at`; true when that is earlier than what is armed (the caller then
    /// schedules an event at `at`).
    pub fn set(&mut self, at: u64) -> bool {
        if at < self.at {
            self.at = at;
            true
        } else {
            false
        }
    }

    /// An event of this alarm fired at `now`.
    pub fn fired(&mut self, now: u64) {
        if self.at == now {
            self.at = NEVER;
        }
    }

    /// Arms for `switch`'s next deadline (not before `now`); the time to schedule, if any.
    pub fn follow(&mut self, switch: &Switch<HeapPacket>, now: u64) -> Option<u64> {
        let deadline = switch.next_deadline();
        let at = deadline.max(now);
        (deadline != NEVER && self.set(at)).then_some(at)
    }
}

/// What a frame's arrival at a switch port did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The port whose transmitter may now have something to send: the egress of a queued
    /// frame, or the arrival port itself after a pause or resume.
    pub ready: Option<usize>,
    /// The frame was PFC: what it said.
    pub pfc: Option<Repr>,
}

/// A frame arrived whole on `port` of `switch` at `now`: the recorder notes a PFC frame,
/// the switch takes the frame.
pub fn arrive(
    switch: &mut Switch<HeapPacket>,
    recorder: Option<&mut Recorder>,
    port: usize,
    packet: HeapPacket,
    now: u64,
    speed_mbps: u64,
) -> Arrival {
    let pfc = flow_control(&packet.bytes);
    if let (Some(recorder), Some(repr)) = (recorder, &pfc) {
        recorder.pfc_received(port, repr, now, speed_mbps);
    }
    let ready = match switch.receive(port, packet, now) {
        Received::Queued { egress, .. } | Received::Transferred { egress, .. } => Some(egress),
        Received::FlowControl => Some(port),
        // No kernel in virtual time: a punted frame ends here, counted and policed as live.
        Received::Punted(_) => {
            drop(switch.take_punted());
            None
        }
        Received::Dropped(_) => None,
    };
    Arrival { ready, pfc }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{rocev2_burst, Leaf};

    #[test]
    fn events_leave_by_time_then_by_order_of_scheduling() {
        let mut queue = EventQueue::default();
        queue.schedule(20, 'a');
        queue.schedule(10, 'b');
        queue.schedule(20, 'c');
        queue.schedule(10, 'd');
        let order: Vec<(u64, char)> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(order, [(10, 'b'), (10, 'd'), (20, 'a'), (20, 'c')]);
        // Many at one time leave in the order they were scheduled, whatever the heap's shape.
        let mut many = EventQueue::default();
        for index in 0..64u32 {
            many.schedule(7, index);
        }
        let order: Vec<u32> = std::iter::from_fn(|| many.pop()).map(|(_, index)| index).collect();
        assert_eq!(order, (0..64).collect::<Vec<u32>>());
    }

    #[test]
    fn the_queue_pops_as_a_sorted_model_does_and_names_the_next_two() {
        // Pushes at random times from the current one on, popped in bursts: every pop, and
        // the next two events after it, match a sorted set's.
        let mut queue = EventQueue::default();
        let mut model = std::collections::BTreeSet::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = move |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let (mut now, mut scheduled) = (0u64, 0u32);
        for _ in 0..20_000 {
            if random(5) < 3 || model.is_empty() {
                let time = now + random(64);
                queue.schedule(time, scheduled);
                model.insert((time, scheduled));
                scheduled += 1;
            } else {
                let expected = model.pop_first().unwrap();
                assert_eq!(queue.pop(), Some(expected));
                now = expected.0;
                let entries = &queue.heap.entries;
                let heap = (1..entries.len()).all(|i| entries[(i - 1) / 4].key <= entries[i].key);
                assert!(heap, "a node above one of its children");
                let mut next = model.iter().map(|&(_, kind)| kind);
                assert_eq!((queue.peek().copied(), queue.peek_second().copied()), (next.next(), next.next()));
                assert_eq!(queue.next_time(), model.first().map(|&(time, _)| time));
            }
        }
        assert!(scheduled > 10_000 && !model.is_empty(), "both pushes and pops ran");
    }

    #[test]
    fn events_from_other_queues_keep_their_origin_order_however_they_arrive() {
        // Queue 2 reserves two places at time 5 and hands them to queue 1, which has its own
        // events at 5: origin 1's events go first, then origin 2's in their order, whether
        // they joined before or after.
        let mut other = EventQueue::<char>::with_origin(2);
        let (early, late) = (other.reserve(5), other.reserve(5));
        assert_eq!(other.next_time(), None, "a reservation is not an event");
        let mut queue = EventQueue::with_origin(1);
        queue.schedule_reserved(late, 'y');
        queue.schedule(5, 'a');
        queue.schedule_reserved(early, 'x');
        queue.schedule(5, 'b');
        queue.schedule(4, 'c');
        assert_eq!(queue.next_time(), Some(4));
        let order: String = std::iter::from_fn(|| queue.pop()).map(|(_, kind)| kind).collect();
        assert_eq!(order, "cabxy");
    }

    #[test]
    fn a_reserved_event_keeps_its_place_when_scheduled_later() {
        // Reserved between 'a' and 'c' at time 20: scheduled after both, it still leaves
        // between them, and ahead of a later event at its time.
        let mut queue = EventQueue::default();
        queue.schedule(20, 'a');
        let reserved = queue.reserve(20);
        queue.schedule(20, 'c');
        queue.schedule(10, 'b');
        assert!(queue.ahead(reserved));
        assert_eq!(queue.pop(), Some((10, 'b')));
        assert_eq!(queue.pop(), Some((20, 'a')));
        assert!(queue.ahead(reserved), "'c' has not gone yet");
        queue.schedule_reserved(reserved, 'r');
        queue.schedule(20, 'd');
        assert_eq!(queue.pop(), Some((20, 'r')));
        assert!(!queue.ahead(reserved), "the queue is at the reserved place itself");
        let order: Vec<char> = std::iter::from_fn(|| queue.pop()).map(|(_, kind)| kind).collect();
        assert_eq!(order, ['c', 'd']);
        // Once the queue has handled an event after the place, it is behind it.
        let mut queue = EventQueue::default();
        let reserved = queue.reserve(5);
        queue.schedule(5, 'x');
        assert!(queue.ahead(reserved));
        queue.pop();
        assert!(!queue.ahead(reserved));
    }

    #[test]
    fn a_link_schedules_its_done_event_only_for_someone_waiting() {
        let mut queue = EventQueue::default();
        let mut link = LinkTx::default();
        assert!(link.free(&mut queue, || 'x'));
        // A frame until 100 with nothing behind it: no event.
        link.start(&mut queue, 100, false, 'd');
        assert_eq!(link.done_at(), Some(100));
        queue.schedule(50, 'a');
        assert_eq!(queue.pop(), Some((50, 'a')));
        // At 50 someone wants the link: busy, and its done event is now in the queue.
        assert!(!link.free(&mut queue, || 'd'));
        assert!(!link.free(&mut queue, || panic!("scheduled once")));
        assert_eq!(queue.pop(), Some((100, 'd')));
        link.done();
        assert_eq!(link.done_at(), None);
        // With more behind it, the done event is scheduled at once.
        link.start(&mut queue, 200, true, 'e');
        assert_eq!(queue.pop(), Some((200, 'e')));
        link.done();
        // A frame done before the event being handled leaves the link free, without an event.
        link.start(&mut queue, 300, false, 'f');
        queue.schedule(400, 'b');
        assert_eq!(queue.pop(), Some((400, 'b')));
        assert!(link.free(&mut queue, || panic!("nothing to schedule")));
        assert_eq!(link.done_at(), None);
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn an_alarm_schedules_only_earlier_times_and_disarms_when_it_fires() {
        let mut alarm = Alarm::default();
        assert!(alarm.set(50));
        assert!(!alarm.set(60) && !alarm.set(50));
        assert!(alarm.set(40));
        alarm.fired(50); // a stale event: still armed for 40
        assert!(!alarm.set(45));
        alarm.fired(40);
        assert!(alarm.set(45));
    }

    #[test]
    fn an_arrival_says_which_transmitter_to_wake_and_what_pfc_it_carried() {
        let config = Leaf::two_uplinks("sim", "ecmp").config();
        let mut switch = Switch::new(&config, 1);
        let mut recorder = Recorder::new(config.ports.len(), 1_000_000);
        // Data for 10.0.9.0/24 wakes its egress, u0 (port 1).
        let data = rocev2_burst(1, |_, spec| spec.destination = "10.0.9.1".parse().unwrap()).remove(0);
        let arrival = arrive(&mut switch, Some(&mut recorder), 0, HeapPacket::new(data), 0, 100_000);
        assert_eq!(arrival, Arrival { ready: Some(1), pfc: None });
        // A PFC frame pauses the port it came in on: that port's transmitter re-decides.
        let repr = Repr { class_enable: 1 << 3, times: [0, 0, 0, 100, 0, 0, 0, 0] };
        let mut frame = vec![0u8; crate::wire::pfc::FRAME_LEN];
        repr.emit(crate::wire::ethernet::MacAddress([2, 0, 0, 0, 0x20, 0]), &mut frame);
        let arrival = arrive(&mut switch, Some(&mut recorder), 2, HeapPacket::new(frame), 10, 100_000);
        assert_eq!(arrival, Arrival { ready: Some(2), pfc: Some(repr) });
        assert_eq!(switch.stats.ports[2].pfc_rx[3], 1);
        // A frame the switch drops wakes nobody.
        let arrival = arrive(&mut switch, None, 0, HeapPacket::new(vec![0u8; 10]), 20, 100_000);
        assert_eq!(arrival, Arrival { ready: None, pfc: None });
    }

    #[test]
    fn an_alarm_follows_the_switch_deadline_not_before_now() {
        let config = Leaf::two_uplinks("sim", "ecmp").config();
        let mut switch = Switch::new(&config, 1);
        let mut alarm = Alarm::default();
        assert_eq!(alarm.follow(&switch, 0), None, "no deadline, no event");
        // A pause of 100 quanta on u1 sets a deadline when it ends.
        let repr = Repr { class_enable: 1 << 3, times: [0, 0, 0, 100, 0, 0, 0, 0] };
        let mut frame = vec![0u8; crate::wire::pfc::FRAME_LEN];
        repr.emit(crate::wire::ethernet::MacAddress([2, 0, 0, 0, 0x21, 0]), &mut frame);
        arrive(&mut switch, None, 2, HeapPacket::new(frame), 1_000, 100_000);
        let end = switch.next_deadline();
        assert!(end > 1_000 && end != NEVER);
        assert_eq!(alarm.follow(&switch, 0), Some(end));
        assert_eq!(alarm.follow(&switch, 0), None, "already armed for it");
        alarm.fired(end);
        assert_eq!(alarm.follow(&switch, end + 5), Some(end + 5), "late: at once");
    }
}
