//! Recording a run for its report: time series the replay and fabric engines record as they
//! run (per-port throughput, per-queue depth, the PFC thresholds, pause intervals), for
//! `report::render` to draw.
//!
//! Invariant: recording only reads the switch (it never changes what the run does), so a run
//! with `--report` writes the same captures and stats as one without. Every series has one
//! value per sample; a sample covers `interval_ps` and holds the interval's transmitted bytes
//! and its maximum queue depths (or the depth at its end, `Sampling::Instant`), so a short
//! burst is never averaged away.

use crate::config::plan;
use crate::packet::PacketBuf;
use crate::switch::Switch;
use crate::units::TRAFFIC_CLASSES;
use crate::wire::pfc::Repr;

/// Samples kept at most: past this, neighbours are merged and the interval doubles.
const MAX_SAMPLES: usize = 2000;
/// Samples aimed for over the span of the input traces.
const TARGET_SAMPLES: u64 = 500;

/// Pause intervals of one (port, priority), merged where they overlap.
#[derive(Debug, Clone, Default)]
pub(crate) struct Intervals {
    closed: Vec<(u64, u64)>,
    /// The open interval's start and its scheduled end (a pause's expiry).
    open: Option<(u64, u64)>,
}

impl Intervals {
    /// A pause from `from` until `until`; extends the open pause if it has not ended.
    pub(crate) fn pause(&mut self, from: u64, until: u64) {
        match self.open {
            Some((start, end)) if from <= end => self.open = Some((start, end.max(until))),
            Some(done) => {
                self.closed.push(done);
                self.open = Some((from, until));
            }
            None => self.open = Some((from, until)),
        }
    }

    /// A resume (pause time 0) at `at` ends the open pause there.
    pub(crate) fn resume(&mut self, at: u64) {
        if let Some((start, end)) = self.open.take() {
            self.closed.push((start, end.min(at)));
        }
    }

    pub(crate) fn finish(&mut self) -> &[(u64, u64)] {
        if let Some(open) = self.open.take() {
            self.closed.push(open);
        }
        &self.closed
    }
}

/// A frame on a link: its bytes go to the samples its wire time overlaps.
#[derive(Debug, Clone, Copy)]
struct OnWire {
    start_ps: u64,
    done_ps: u64,
    bytes: u64,
    /// Bytes already counted in closed samples.
    counted: u64,
}

impl OnWire {
    /// The bytes sent by `at`, in proportion to the wire time elapsed.
    fn sent_by(&self, at: u64) -> u64 {
        if at >= self.done_ps {
            return self.bytes;
        }
        let elapsed = at.saturating_sub(self.start_ps);
        (u128::from(self.bytes) * u128::from(elapsed) / u128::from(self.done_ps - self.start_ps).max(1)) as u64
    }
}

/// The sampling interval of a run whose inputs span `span_ps`: about `TARGET_SAMPLES`
/// samples, none shorter than 100 ns.
pub fn default_interval_ps(span_ps: u64) -> u64 {
    (span_ps / TARGET_SAMPLES).max(100_000)
}

crate::keyword::keywords! {
    /// What a queue-depth sample holds (`raceway fabric --sample`).
    pub enum Sampling {
        /// The deepest the queue was during the sample.
        Max => "max",
        /// The depth at the sample's end.
        Instant => "instant",
    }
}

/// What the replay records for the report.
pub struct Recorder {
    pub(super) interval_ps: u64,
    pub(super) sampling: Sampling,
    /// End of the sample being filled.
    sample_end_ps: u64,
    /// Per port: frame bytes sent in each sample, spread over each frame's time on the wire
    /// (counted where a transmission started, a 100G port read up to 108 Gb/s), and the
    /// transmissions not yet wholly counted.
    pub(super) tx_bytes: Vec<Vec<u64>>,
    on_wire: Vec<Vec<OnWire>>,
    /// Per port and class: maximum queue depth (bytes) in each sample, and in the open one.
    pub(super) depth: Vec<Vec<Vec<u64>>>,
    depth_now_max: Vec<[u64; TRAFFIC_CLASSES]>,
    /// Lowest XOFF and XON points in each sample (dynamic thresholds fall as the buffer fills).
    pub(super) xoff: Vec<u64>,
    pub(super) xon: Vec<u64>,
    thresholds_now: (u64, u64),
    /// The switch as last observed (its state until the next event): each new sample starts
    /// from it, so samples do not depend on events that change nothing.
    depth_last: Vec<[u64; TRAFFIC_CLASSES]>,
    thresholds_last: (u64, u64),
    observed: bool,
    /// Per port and priority: when the switch paused its peer (XOFF sent), and when the peer
    /// paused the port's egress (PFC received).
    pub(super) xoff_sent: Vec<[Intervals; 8]>,
    pub(super) paused_by_peer: Vec<[Intervals; 8]>,
}

impl Recorder {
    /// A recorder for `ports` ports whose inputs span `span_ps` of trace time.
    pub fn new(ports: usize, span_ps: u64) -> Self {
        Self::sampled(ports, default_interval_ps(span_ps), Sampling::Max)
    }

    /// A recorder sampling every `interval_ps` (doubled each time a run reaches
    /// `MAX_SAMPLES` samples, so a report stays bounded: series.json's `interval_ns` says
    /// the interval the samples have), queue depths as `sampling` says.
    pub fn sampled(ports: usize, interval_ps: u64, sampling: Sampling) -> Self {
        let interval_ps = interval_ps.max(1);
        Self {
            interval_ps,
            sampling,
            sample_end_ps: interval_ps,
            tx_bytes: vec![Vec::new(); ports],
            on_wire: vec![Vec::new(); ports],
            depth: vec![vec![Vec::new(); TRAFFIC_CLASSES]; ports],
            depth_now_max: vec![[0; TRAFFIC_CLASSES]; ports],
            xoff: Vec::new(),
            xon: Vec::new(),
            thresholds_now: (u64::MAX, u64::MAX),
            depth_last: vec![[0; TRAFFIC_CLASSES]; ports],
            thresholds_last: (u64::MAX, u64::MAX),
            observed: false,
            xoff_sent: vec![Default::default(); ports],
            paused_by_peer: vec![Default::default(); ports],
        }
    }

    /// Looks at the switch after an event at `now`: closes the samples that ended before it
    /// (with the state the switch was in until now), then folds the current depths and
    /// thresholds into the open sample.
    pub fn observe<P: PacketBuf>(&mut self, now: u64, switch: &Switch<P>) {
        self.observe_ports(now, switch, 0..self.depth_last.len());
    }

    /// `observe` where the event changed the queues of `ports` only (the others are as last
    /// observed): the fabric's events each touch a port or two of a switch with dozens, and
    /// looking at every port and class of it per event was 13.5% of a 256-host run.
    pub fn observe_ports<P: PacketBuf>(
        &mut self,
        now: u64,
        switch: &Switch<P>,
        ports: impl IntoIterator<Item = usize>,
    ) {
        if !self.observed {
            // Before the first event the switch was as it is now, less one event's change:
            // the samples up to now hold that.
            self.observed = true;
            self.remember(switch);
            self.depth_now_max.clone_from(&self.depth_last);
            self.thresholds_now = self.thresholds_last;
        }
        while now >= self.sample_end_ps {
            self.close_sample();
        }
        // Remembered and folded into the open sample in one pass (two passes were 10% of a
        // fabric run).
        for port in ports {
            let (last, maxima) = (&mut self.depth_last[port], &mut self.depth_now_max[port]);
            for (tc, (last, max)) in last.iter_mut().zip(maxima).enumerate() {
                *last = switch.queue_bytes(port, tc);
                *max = (*max).max(*last);
            }
        }
        let (xoff, xon) = switch.pfc_thresholds();
        self.thresholds_last = (xoff, xon);
        self.thresholds_now = (self.thresholds_now.0.min(xoff), self.thresholds_now.1.min(xon));
    }

    fn remember<P: PacketBuf>(&mut self, switch: &Switch<P>) {
        for (port, last) in self.depth_last.iter_mut().enumerate() {
            for (tc, depth) in last.iter_mut().enumerate() {
                *depth = switch.queue_bytes(port, tc);
            }
        }
        self.thresholds_last = switch.pfc_thresholds();
    }

    /// A data frame of `bytes` went on `port`'s link from `start_ps` to `done_ps`.
    pub fn transmitted(&mut self, port: usize, start_ps: u64, done_ps: u64, bytes: u64) {
        self.on_wire[port].push(OnWire { start_ps, done_ps, bytes, counted: 0 });
    }

    fn close_sample(&mut self) {
        let end = self.sample_end_ps;
        for (series, on_wire) in self.tx_bytes.iter_mut().zip(&mut self.on_wire) {
            let mut sent = 0;
            for frame in on_wire.iter_mut() {
                let by_end = frame.sent_by(end);
                sent += by_end - frame.counted;
                frame.counted = by_end;
            }
            on_wire.retain(|frame| frame.counted < frame.bytes);
            series.push(sent);
        }
        for (port, maxima) in self.depth_now_max.iter_mut().enumerate() {
            for (tc, max) in maxima.iter_mut().enumerate() {
                self.depth[port][tc].push(match self.sampling {
                    Sampling::Max => *max,
                    Sampling::Instant => self.depth_last[port][tc],
                });
                // The next sample starts from the depth queued at its start.
                *max = self.depth_last[port][tc];
            }
        }
        self.xoff.push(self.thresholds_now.0);
        self.xon.push(self.thresholds_now.1);
        self.thresholds_now = self.thresholds_last;
        self.sample_end_ps += self.interval_ps;
        if self.xoff.len() >= MAX_SAMPLES {
            self.halve();
        }
    }

    /// Merges neighbouring samples (sums for bytes, maxima for depths, minima for thresholds)
    /// and doubles the interval, so a long replay keeps a bounded report.
    fn halve(&mut self) {
        fn merge(series: &mut Vec<u64>, combine: fn(u64, u64) -> u64) {
            *series = series.chunks(2).map(|pair| pair.iter().copied().reduce(combine).unwrap_or(0)).collect();
        }
        for series in &mut self.tx_bytes {
            merge(series, |a, b| a + b);
        }
        // Instantaneous depths keep every other sample: the depth at each doubled
        // interval's end.
        let depths: fn(u64, u64) -> u64 = match self.sampling {
            Sampling::Max => u64::max,
            Sampling::Instant => |_, later| later,
        };
        for series in self.depth.iter_mut().flatten() {
            merge(series, depths);
        }
        merge(&mut self.xoff, u64::min);
        merge(&mut self.xon, u64::min);
        // Called at an even count (MAX_SAMPLES), so every merged sample covers two intervals.
        let samples = self.xoff.len() as u64;
        self.interval_ps *= 2;
        self.sample_end_ps = (samples + 1) * self.interval_ps;
    }

    /// The switch sent `repr` on `port` at `now` (its peer's pause starts then, as drawn).
    pub fn pfc_sent(&mut self, port: usize, repr: &Repr, now: u64, speed_mbps: u64) {
        record_pfc(&mut self.xoff_sent[port], repr, now, speed_mbps);
    }

    /// A PFC frame arrived on `port` at `now`: its egress pauses for the priorities it names.
    pub fn pfc_received(&mut self, port: usize, repr: &Repr, now: u64, speed_mbps: u64) {
        record_pfc(&mut self.paused_by_peer[port], repr, now, speed_mbps);
    }

    /// Closes the last sample at `end_ps` (the replay's last event).
    pub fn finish<P: PacketBuf>(&mut self, end_ps: u64, switch: &Switch<P>) {
        self.observe(end_ps, switch);
        self.close_sample();
    }
}

/// Records a PFC frame taking effect at `now` in per-priority pause intervals.
pub(crate) fn record_pfc(intervals: &mut [Intervals; 8], repr: &Repr, now: u64, speed_mbps: u64) {
    for (priority, time) in repr.named() {
        match time {
            0 => intervals[priority].resume(now),
            quanta => intervals[priority].pause(now, now + plan::quanta_ps(quanta, speed_mbps)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Port 1's queue depth per sample (all classes), with `quiet` observations in between
    /// (events that change nothing) when asked: a frame for port 1 queued at 250 ns, samples of
    /// 100 ns, the run ending at 400 ns.
    fn depths_with_a_frame_at_250_ns(quiet: &[u64]) -> (Vec<u64>, u64) {
        use crate::packet::HeapPacket;
        use crate::testing::{rocev2_burst, Leaf};
        let config = Leaf::two_uplinks("report", "ecmp").config();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let mut recorder = Recorder::new(config.ports.len(), 0);
        assert_eq!(recorder.interval_ps, 100_000);
        recorder.observe(0, &switch);
        for &at in quiet.iter().filter(|&&at| at < 250_000) {
            recorder.observe(at, &switch);
        }
        let frame = rocev2_burst(1, |_, spec| spec.destination = "10.0.9.1".parse().unwrap()).remove(0);
        let len = frame.len() as u64;
        switch.receive(0, HeapPacket::new(frame), 250_000);
        recorder.observe(250_000, &switch);
        for &at in quiet.iter().filter(|&&at| at > 250_000) {
            recorder.observe(at, &switch);
        }
        recorder.finish(400_000, &switch);
        let depths =
            (0..recorder.depth[1][0].len()).map(|sample| recorder.depth[1].iter().map(|tc| tc[sample]).sum()).collect();
        (depths, len)
    }

    #[test]
    fn samples_show_the_depth_of_their_own_time_whatever_the_events() {
        let (depths, len) = depths_with_a_frame_at_250_ns(&[]);
        // The samples before 200 ns ended before the frame came: empty, though the first event
        // after them is its arrival.
        assert_eq!(depths, [0, 0, len, len, len]);
        // Events that change nothing, in samples of their own or not, change no sample.
        assert_eq!(depths_with_a_frame_at_250_ns(&[50_000, 150_000, 200_000, 260_000, 310_000]).0, depths);
    }

    #[test]
    fn observing_the_ports_an_event_changed_is_observing_every_port() {
        use crate::packet::HeapPacket;
        use crate::testing::{rocev2_burst, Leaf};
        let config = Leaf::two_uplinks("report-ports", "ecmp").config();
        let mut switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let recorder = || Recorder::new(config.ports.len(), 0);
        let (mut every, mut changed, mut elsewhere) = (recorder(), recorder(), recorder());
        for at in [0, 150_000, 250_000] {
            if at > 0 {
                // Queued on port 1 (10.0.9.0/24's uplink), nothing else changes.
                let frame = rocev2_burst(1, |_, spec| spec.destination = "10.0.9.1".parse().unwrap()).remove(0);
                switch.receive(0, HeapPacket::new(frame), at);
            }
            every.observe(at, &switch);
            changed.observe_ports(at, &switch, [1]);
            elsewhere.observe_ports(at, &switch, [0]);
        }
        for recorder in [&mut every, &mut changed, &mut elsewhere] {
            recorder.finish(400_000, &switch);
        }
        assert!(every.depth[1].iter().flatten().any(|&depth| depth > 0));
        assert_eq!(changed.depth, every.depth);
        assert_ne!(elsewhere.depth, every.depth, "port 1's frames unseen");
    }

    #[test]
    fn a_frame_s_bytes_spread_over_the_samples_its_wire_time_overlaps() {
        use crate::packet::HeapPacket;
        use crate::testing::Leaf;
        let config = Leaf::two_uplinks("report-spread", "ecmp").config();
        let switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let mut recorder = Recorder::new(config.ports.len(), 0);
        // 1,000 bytes on the wire from 50 to 250 ns, samples of 100 ns: 250, 500, 250; then
        // 300 bytes within the fourth sample.
        recorder.transmitted(1, 50_000, 250_000, 1000);
        recorder.observe(60_000, &switch);
        recorder.transmitted(1, 310_000, 340_000, 300);
        recorder.observe(320_000, &switch);
        recorder.finish(400_000, &switch);
        assert_eq!(recorder.tx_bytes[1], [250, 500, 250, 300, 0]);
        assert!(recorder.tx_bytes[0].iter().all(|&bytes| bytes == 0));
        assert!(recorder.on_wire[1].is_empty(), "frames wholly counted are let go");
    }

    #[test]
    fn samples_before_the_first_event_hold_the_idle_switch() {
        use crate::packet::HeapPacket;
        use crate::testing::Leaf;
        let config = Leaf::two_uplinks("report-idle", "ecmp").config();
        let switch: Switch<HeapPacket> = Switch::new(&config, 1);
        let mut recorder = Recorder::new(config.ports.len(), 0);
        // The first event comes three samples in (a trace that starts late).
        recorder.observe(350_000, &switch);
        recorder.finish(400_000, &switch);
        let (xoff, xon) = switch.pfc_thresholds();
        assert_eq!(recorder.xoff, [xoff; 5]);
        assert_eq!(recorder.xon, [xon; 5]);
        assert!(recorder.depth[1].iter().flatten().all(|&depth| depth == 0));
    }

    #[test]
    fn pauses_merge_and_resumes_cut_them_short() {
        let mut intervals = Intervals::default();
        intervals.pause(0, 100);
        intervals.pause(50, 150); // a refresh extends
        intervals.resume(120); // XON ends it early
        intervals.pause(200, 300);
        assert_eq!(intervals.finish(), &[(0, 120), (200, 300)]);
        let mut lapsed = Intervals::default();
        lapsed.pause(0, 10);
        lapsed.pause(20, 30); // the first expired before the second began
        assert_eq!(lapsed.finish(), &[(0, 10), (20, 30)]);
    }
}
