//! Rendering a run's report: the recorded series (`report::record`) and the final counters
//! into `series.json`, SVG charts and an `index.html` that shows them.
//!
//! Invariant: rendering reads the recording and the counters only; an error names the file
//! it could not write.

use super::record::Recorder;
use crate::config::Config;
use crate::counters::SwitchStats;
use crate::units::TRAFFIC_CLASSES;
use plotters::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

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
}
