//! The replay report: time series the replay engine records as it runs (per-port throughput,
//! per-queue depth, the PFC thresholds, pause intervals) and their rendering into SVG charts,
//! `series.json` and an `index.html` that shows them with the final counters.
//!
//! Invariant: recording only reads the switch (it never changes what the replay does), so a
//! replay with `--report` writes the same captures and stats as one without. Every series has
//! one value per sample; a sample covers `interval_ps` and holds the interval's transmitted
//! bytes and its maximum queue depths, so a short burst is never averaged away.

use crate::config::plan;
use crate::config::Config;
use crate::counters::SwitchStats;
use crate::packet::PacketBuf;
use crate::switch::Switch;
use crate::units::TRAFFIC_CLASSES;
use crate::wire::pfc::Repr;
use plotters::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

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
    interval_ps: u64,
    sampling: Sampling,
    /// End of the sample being filled.
    sample_end_ps: u64,
    /// Per port: frame bytes sent in each sample, spread over each frame's time on the wire
    /// (counted where a transmission started, a 100G port read up to 108 Gb/s), and the
    /// transmissions not yet wholly counted.
    tx_bytes: Vec<Vec<u64>>,
    on_wire: Vec<Vec<OnWire>>,
    /// Per port and class: maximum queue depth (bytes) in each sample, and in the open one.
    depth: Vec<Vec<Vec<u64>>>,
    depth_now_max: Vec<[u64; TRAFFIC_CLASSES]>,
    /// Lowest XOFF and XON points in each sample (dynamic thresholds fall as the buffer fills).
    xoff: Vec<u64>,
    xon: Vec<u64>,
    thresholds_now: (u64, u64),
    /// The switch as last observed (its state until the next event): each new sample starts
    /// from it, so samples do not depend on events that change nothing.
    depth_last: Vec<[u64; TRAFFIC_CLASSES]>,
    thresholds_last: (u64, u64),
    observed: bool,
    /// Per port and priority: when the switch paused its peer (XOFF sent), and when the peer
    /// paused the port's egress (PFC received).
    xoff_sent: Vec<[Intervals; 8]>,
    paused_by_peer: Vec<[Intervals; 8]>,
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

/// A white 960 x 420 SVG to draw a chart on.
fn canvas(path: &Path) -> Result<DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, String> {
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    Ok(root)
}

/// A chart on `root` with the reports' margins, its y labels `y_labels` wide.
fn framed<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder.margin(12).x_label_area_size(40).y_label_area_size(y_labels);
    builder
}

fn draw_error<E: std::fmt::Display>(err: E) -> String {
    format!("cannot draw a chart: {err}")
}

/// Writes `dir/series.json`, the SVG charts and `dir/index.html`, whose title names the
/// command (`run`: "replay" or "fabric") and the switch. Errors name the file.
pub fn write(
    dir: &Path,
    run: &str,
    config: &Config,
    stats: &SwitchStats,
    mut recorder: Recorder,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|err| format!("{}: cannot create: {err}", dir.display()))?;
    let series = series_json(config, stats, &mut recorder);
    let series_path = dir.join("series.json");
    std::fs::write(&series_path, serde_json::to_string_pretty(&series).expect("json") + "\n")
        .map_err(|err| format!("{}: cannot write: {err}", series_path.display()))?;
    let interval_us = recorder.interval_ps as f64 / 1e6;
    let mut charts = vec![("throughput.svg".to_string(), "Throughput per port (transmitted, Gb/s)".to_string())];
    draw_throughput(&dir.join("throughput.svg"), config, &recorder, interval_us)?;
    for (port, spec) in config.ports.iter().enumerate() {
        if recorder.depth[port].iter().flatten().any(|&depth| depth > 0) {
            let file = format!("queues-{}.svg", spec.name);
            draw_queues(&dir.join(&file), config, port, &recorder, interval_us)?;
            charts.push((file, format!("Queue depth on {} (bytes), ECN and PFC thresholds", spec.name)));
        }
    }
    draw_pfc(&dir.join("pfc.svg"), config, &series, recorder.xoff.len() as f64 * interval_us)?;
    charts.push(("pfc.svg".to_string(), "PFC pauses: sent to peers (XOFF) and received from peers".to_string()));
    if !config.groups.is_empty() {
        draw_groups(&dir.join("groups.svg"), config, stats)?;
        charts.push(("groups.svg".to_string(), "Frames per group member".to_string()));
    }
    let index = index_html(run, config, stats, &charts);
    let index_path = dir.join("index.html");
    std::fs::write(&index_path, index).map_err(|err| format!("{}: cannot write: {err}", index_path.display()))
}

fn series_json(config: &Config, stats: &SwitchStats, recorder: &mut Recorder) -> Value {
    let interval_ns = recorder.interval_ps as f64 / 1000.0;
    let mut ports = serde_json::Map::new();
    for (port, spec) in config.ports.iter().enumerate() {
        let gbps: Vec<f64> = recorder.tx_bytes[port].iter().map(|&bytes| bytes as f64 * 8.0 / interval_ns).collect();
        let mut queues = serde_json::Map::new();
        for tc in 0..TRAFFIC_CLASSES {
            if recorder.depth[port][tc].iter().any(|&d| d > 0) {
                queues.insert(tc.to_string(), json!(recorder.depth[port][tc]));
            }
        }
        let mut pfc = serde_json::Map::new();
        for priority in 0..8 {
            let sent = recorder.xoff_sent[port][priority].finish().to_vec();
            let received = recorder.paused_by_peer[port][priority].finish().to_vec();
            if !sent.is_empty() || !received.is_empty() {
                let ns = |v: Vec<(u64, u64)>| v.iter().map(|(a, b)| json!([a / 1000, b / 1000])).collect::<Vec<_>>();
                pfc.insert(
                    priority.to_string(),
                    json!({ "xoff_sent_ns": ns(sent), "paused_by_peer_ns": ns(received) }),
                );
            }
        }
        ports.insert(
            spec.name.clone(),
            json!({
                "tx_bytes": recorder.tx_bytes[port],
                "tx_gbps": gbps,
                "queue_depth_bytes": queues,
                "pfc": pfc,
            }),
        );
    }
    let groups: serde_json::Map<String, Value> = config
        .groups
        .iter()
        .zip(&stats.groups)
        .map(|(group, counts)| {
            let members: serde_json::Map<String, Value> = group
                .members
                .iter()
                .zip(counts)
                .map(|(&member, &count)| (config.ports[member].name.clone(), json!(count)))
                .collect();
            (group.name.clone(), Value::Object(members))
        })
        .collect();
    json!({
        "interval_ns": interval_ns,
        "sampling": recorder.sampling.name(),
        "samples": recorder.xoff.len(),
        "xoff_bytes": recorder.xoff,
        "xon_bytes": recorder.xon,
        "ports": ports,
        "groups": groups,
    })
}

fn color(index: usize) -> RGBColor {
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    palette[index % palette.len()]
}

/// A number with up to three significant digits, without a trailing ".0".
fn short(value: f64) -> String {
    let text = if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// An axis label for bytes, in B, KB, MB or GB (powers of 1,000, as the config's thresholds
/// are written).
fn bytes_label(bytes: &f64) -> String {
    match bytes.abs() {
        b if b < 1e3 => format!("{} B", short(*bytes)),
        b if b < 1e6 => format!("{} KB", short(bytes / 1e3)),
        b if b < 1e9 => format!("{} MB", short(bytes / 1e6)),
        _ => format!("{} GB", short(bytes / 1e9)),
    }
}

/// An axis label for a count of frames: whole numbers only (a tick between two counts gets
/// none), in thousands (k) or millions (M) when large.
fn count_label(count: &f64) -> String {
    if count.fract().abs() > 1e-9 {
        return String::new();
    }
    match count.abs() {
        c if c < 1e4 => format!("{count:.0}"),
        c if c < 1e6 => format!("{} k", short(count / 1e3)),
        _ => format!("{} M", short(count / 1e6)),
    }
}

/// An axis label for a time in microseconds, in ns, µs, ms or s.
fn time_label(us: &f64) -> String {
    match us.abs() {
        0.0 => "0".to_string(),
        t if t < 1.0 => format!("{} ns", short(us * 1e3)),
        t if t < 1e3 => format!("{} µs", short(*us)),
        t if t < 1e6 => format!("{} ms", short(us / 1e3)),
        _ => format!("{} s", short(us / 1e6)),
    }
}

fn draw_throughput(path: &Path, config: &Config, recorder: &Recorder, interval_us: f64) -> Result<(), String> {
    let samples = recorder.xoff.len();
    let gbps = |bytes: u64| bytes as f64 * 8.0 / (interval_us * 1000.0);
    let top = recorder.tx_bytes.iter().flatten().map(|&b| gbps(b)).fold(1.0f64, f64::max) * 1.1;
    let root = canvas(path)?;
    let mut chart = framed(&root, 60)
        .build_cartesian_2d(0f64..(samples as f64 * interval_us).max(interval_us), 0f64..top)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("time")
        .x_label_formatter(&time_label)
        .y_label_formatter(&|gbps: &f64| short(*gbps))
        .y_desc("Gb/s")
        .draw()
        .map_err(draw_error)?;
    for (port, spec) in config.ports.iter().enumerate() {
        let points =
            recorder.tx_bytes[port].iter().enumerate().map(|(i, &b)| ((i as f64 + 0.5) * interval_us, gbps(b)));
        let style = color(port).stroke_width(2);
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(draw_error)?
            .label(spec.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color(port).stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(draw_error)?;
    root.present().map_err(draw_error)
}

/// The CDF of each series of FCT slowdowns (FCT over the flow's ideal), on a log scale from
/// 1: `raceway fabric`'s `fct_slowdown.svg`, a line per flow-size range.
pub fn draw_slowdown_cdf(path: &Path, series: &[(String, Vec<f64>)]) -> Result<(), String> {
    let top = series.iter().flat_map(|(_, values)| values.iter().copied()).fold(2.0f64, f64::max) * 1.2;
    let root = canvas(path)?;
    let mut chart = framed(&root, 60).build_cartesian_2d((1f64..top).log_scale(), 0f64..1.0).map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("FCT slowdown (FCT / ideal)")
        .x_label_formatter(&|x: &f64| short(*x))
        .y_desc("fraction of flows")
        .draw()
        .map_err(draw_error)?;
    for (index, (label, values)) in series.iter().enumerate().filter(|(_, (_, values))| !values.is_empty()) {
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let points = sorted.iter().enumerate().map(|(i, &x)| (x.max(1.0), (i + 1) as f64 / n));
        chart
            .draw_series(LineSeries::new(points, color(index).stroke_width(2)))
            .map_err(draw_error)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color(index).stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(draw_error)?;
    root.present().map_err(draw_error)
}

fn draw_queues(path: &Path, config: &Config, port: usize, recorder: &Recorder, interval_us: f64) -> Result<(), String> {
    let depths = &recorder.depth[port];
    let busy: Vec<usize> = (0..TRAFFIC_CLASSES).filter(|&tc| depths[tc].iter().any(|&d| d > 0)).collect();
    let peak = busy.iter().flat_map(|&tc| depths[tc].iter().copied()).max().unwrap_or(1);
    // Reference lines: ECN kmin/kmax of the busy classes, and XOFF/XON when a busy class is
    // lossless (drawn only where they fit the chart's scale, 3x the peak depth).
    let ceiling = (peak as f64 * 1.15).max(1.0);
    let lossless = busy.iter().any(|&tc| config.qos.tc_lossless(tc));
    let mut top = ceiling;
    for &tc in &busy {
        if let Some(profile) = &config.qos.ecn[tc] {
            for level in [profile.kmin_bytes, profile.kmax_bytes] {
                if (level as f64) < 3.0 * ceiling {
                    top = top.max(level as f64 * 1.05);
                }
            }
        }
    }
    let samples = depths[0].len();
    let x_end = (samples as f64 * interval_us).max(interval_us);
    let root = canvas(path)?;
    let mut chart = framed(&root, 80).build_cartesian_2d(0f64..x_end, 0f64..top).map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("time")
        .x_label_formatter(&time_label)
        .y_desc("queue depth")
        .y_label_formatter(&bytes_label)
        .draw()
        .map_err(draw_error)?;
    for &tc in &busy {
        let points = depths[tc].iter().enumerate().map(|(i, &d)| ((i as f64 + 0.5) * interval_us, d as f64));
        chart
            .draw_series(LineSeries::new(points, color(tc).stroke_width(2)))
            .map_err(draw_error)?
            .label(format!("TC {tc}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color(tc).stroke_width(2)));
        if let Some(profile) = &config.qos.ecn[tc] {
            for (name, level) in [("kmin", profile.kmin_bytes), ("kmax", profile.kmax_bytes)] {
                if (level as f64) <= top {
                    let line = vec![(0.0, level as f64), (x_end, level as f64)];
                    chart
                        .draw_series(DashedLineSeries::new(line, 6, 4, color(tc).stroke_width(1)))
                        .map_err(draw_error)?
                        .label(format!("TC {tc} ECN {name}"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color(tc)));
                }
            }
        }
    }
    if lossless {
        for (name, series, shade) in [("XOFF", &recorder.xoff, BLACK), ("XON", &recorder.xon, RGBColor(0, 150, 0))] {
            let points: Vec<(f64, f64)> = series
                .iter()
                .enumerate()
                .filter(|(_, &v)| (v as f64) <= top)
                .map(|(i, &v)| ((i as f64 + 0.5) * interval_us, v as f64))
                .collect();
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(DashedLineSeries::new(points, 3, 3, shade.stroke_width(1)))
                .map_err(draw_error)?
                .label(format!("{name} (per ingress priority group)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], shade));
        }
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(draw_error)?;
    root.present().map_err(draw_error)
}

/// A PFC chart row: its name, then the XOFF-sent and paused-by-peer intervals (us).
type PauseRow = (String, Vec<(f64, f64)>, Vec<(f64, f64)>);

fn draw_pfc(path: &Path, config: &Config, series: &Value, span_us: f64) -> Result<(), String> {
    // One row per (port, priority) with any pause; XOFF sent in red, paused by peer in blue.
    let mut rows: Vec<PauseRow> = Vec::new();
    let intervals = |value: &Value| -> Vec<(f64, f64)> {
        value
            .as_array()
            .map(|list| {
                list.iter().filter_map(|pair| Some((pair[0].as_f64()? / 1000.0, pair[1].as_f64()? / 1000.0))).collect()
            })
            .unwrap_or_default()
    };
    for spec in &config.ports {
        if let Some(priorities) = series["ports"][&spec.name]["pfc"].as_object() {
            for (priority, pauses) in priorities {
                rows.push((
                    format!("{} p{priority}", spec.name),
                    intervals(&pauses["xoff_sent_ns"]),
                    intervals(&pauses["paused_by_peer_ns"]),
                ));
            }
        }
    }
    let end = rows.iter().flat_map(|(_, a, b)| a.iter().chain(b).map(|&(_, e)| e)).fold(span_us, f64::max).max(1.0);
    let height = 120 + 30 * rows.len().max(1) as u32;
    let root = SVGBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let names: Vec<String> = rows.iter().map(|(name, _, _)| name.clone()).collect();
    let label = move |y: &f64| {
        let row = y.floor();
        if (y - row - 0.5).abs() < 1e-6 {
            names.get(row as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(110)
        .build_cartesian_2d(0f64..end, 0f64..rows.len().max(1) as f64)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(2 * rows.len().max(1) + 1)
        .y_label_formatter(&label)
        .x_desc("time")
        .x_label_formatter(&time_label)
        .draw()
        .map_err(draw_error)?;
    let sent_style = RGBColor(214, 39, 40).mix(0.75).filled();
    let received_style = RGBColor(31, 119, 180).mix(0.75).filled();
    for (row, (_, sent, received)) in rows.iter().enumerate() {
        let y = row as f64;
        chart
            .draw_series(
                sent.iter()
                    .map(|&(a, b)| Rectangle::new([(a, y + 0.5), (b.max(a + end / 2000.0), y + 0.9)], sent_style)),
            )
            .map_err(draw_error)?;
        chart
            .draw_series(
                received
                    .iter()
                    .map(|&(a, b)| Rectangle::new([(a, y + 0.1), (b.max(a + end / 2000.0), y + 0.5)], received_style)),
            )
            .map_err(draw_error)?;
    }
    chart
        .draw_series(std::iter::once(Rectangle::new([(0.0, 0.0), (0.0, 0.0)], sent_style)))
        .map_err(draw_error)?
        .label("XOFF sent to the peer (upper half)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], sent_style));
    chart
        .draw_series(std::iter::once(Rectangle::new([(0.0, 0.0), (0.0, 0.0)], received_style)))
        .map_err(draw_error)?
        .label("paused by the peer's PFC (lower half)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], received_style));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    root.present().map_err(draw_error)
}

fn draw_groups(path: &Path, config: &Config, stats: &SwitchStats) -> Result<(), String> {
    let bars: Vec<(String, u64, usize)> =
        config
            .groups
            .iter()
            .zip(&stats.groups)
            .enumerate()
            .flat_map(|(index, (group, counts))| {
                group.members.iter().zip(counts).map(move |(&member, &count)| {
                    (format!("{}:{}", group.name, config.ports[member].name), count, index)
                })
            })
            .collect();
    let top = bars.iter().map(|(_, count, _)| *count).max().unwrap_or(1).max(1) as f64 * 1.15;
    let root = canvas(path)?;
    let names: Vec<String> = bars.iter().map(|(name, _, _)| name.clone()).collect();
    let label = move |x: &f64| {
        let bar = x.floor();
        if (x - bar - 0.5).abs() < 1e-6 {
            names.get(bar as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..bars.len().max(1) as f64, 0f64..top)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * bars.len().max(1) + 1)
        .x_label_formatter(&label)
        .y_label_formatter(&count_label)
        .y_desc("frames queued to the member")
        .draw()
        .map_err(draw_error)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, count, group))| {
            Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.85, *count as f64)], color(*group).filled())
        }))
        .map_err(draw_error)?;
    root.present().map_err(draw_error)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn index_html(run: &str, config: &Config, stats: &SwitchStats, charts: &[(String, String)]) -> String {
    let mut rows = String::new();
    for (port, spec) in config.ports.iter().enumerate() {
        let counters = &stats.ports[port];
        let drops: u64 = counters.drops.iter().sum();
        let marked: u64 = counters.queues.iter().map(|q| q.ecn_marked).sum();
        let trim = |count: fn(&crate::counters::QueueStats) -> u64| counters.queues.iter().map(count).sum::<u64>();
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&spec.name),
            counters.rx_packets,
            counters.tx_packets,
            drops,
            counters.pfc_xoff_tx.iter().sum::<u64>(),
            counters.pfc_rx.iter().sum::<u64>(),
            marked,
            trim(|q| q.trimmed),
            trim(|q| q.trim_dropped),
            trim(|q| q.trim_tx),
        ));
    }
    let figures: String = charts
        .iter()
        .map(|(file, title)| format!("<h2>{}</h2>\n<img src=\"{file}\" alt=\"{}\">\n", escape(title), escape(title)))
        .collect();
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>raceway {run}: {name}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #999;padding:4px 10px;text-align:right}}img{{max-width:100%}}</style></head>\n\
         <body><h1>raceway {run}: {name}</h1>\n\
         <table><tr><th>port</th><th>rx</th><th>tx</th><th>drops</th><th>XOFF sent</th><th>PFC received</th>\
         <th>ECN marked</th><th>trimmed</th><th>trimmed, dropped</th><th>trimmed, sent</th></tr>\n{rows}</table>\n{figures}\
         <p>Data: <a href=\"series.json\">series.json</a> (one value per sample of interval_ns).</p>\n\
         </body></html>\n",
        name = escape(&config.name),
        run = escape(run),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_read_in_human_units() {
        assert_eq!(bytes_label(&0.0), "0 B");
        assert_eq!(bytes_label(&512.0), "512 B");
        assert_eq!(bytes_label(&150_000.0), "150 KB");
        assert_eq!(bytes_label(&2_000_000.0), "2 MB");
        assert_eq!(bytes_label(&1_250_000.0), "1.25 MB");
        assert_eq!(time_label(&0.0), "0");
        assert_eq!(time_label(&0.25), "250 ns");
        assert_eq!(time_label(&12.5), "12.5 µs");
        assert_eq!(time_label(&2_500.0), "2.5 ms");
        assert_eq!(time_label(&3_000_000.0), "3 s");
        assert_eq!(count_label(&0.0), "0");
        assert_eq!(count_label(&700.0), "700");
        assert_eq!(count_label(&0.5), "");
        assert_eq!(count_label(&9_999.0), "9999");
        assert_eq!(count_label(&10_000.0), "10 k");
        assert_eq!(count_label(&25_000.0), "25 k");
        assert_eq!(count_label(&1_000_000.0), "1 M");
        assert_eq!(count_label(&1_500_000.0), "1.5 M");
    }

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
