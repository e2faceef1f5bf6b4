//! The counter schema: every counter is one row of `PORT_COUNTERS`, `QUEUE_COUNTERS`,
//! `GROUP_COUNTERS`, `CORE_COUNTERS` or `CONTROL_COUNTERS`, giving its JSON key, its
//! Prometheus name and type, its DPDK telemetry name, its help line and where it lives.
//!
//! Invariant: the stats JSON, the Prometheus exposition, DPDK telemetry and the merging of
//! workers' counters read only these rows, so a counter in a row is in all four, and one
//! that is not in a row is in none.

use super::{ControlStats, CoreStats, GroupStats, PortStats, QueueStats};
use crate::config::CoppClass;
use crate::drops::DropReason;
use serde_json::{json, Map, Value};

/// How a counter merges across workers, and its Prometheus type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows: summed; Prometheus `counter` (its name ends in `_total`).
    Counter,
    /// A level now: summed over workers; Prometheus `gauge`.
    Gauge,
    /// A peak: the maximum over workers; Prometheus `gauge`.
    Peak,
}

impl Kind {
    pub fn prometheus(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge | Kind::Peak => "gauge",
        }
    }

    /// Merges another worker's `theirs` into `mine`.
    fn merge(self, mine: &mut [u64], theirs: &[u64]) {
        for (a, b) in mine.iter_mut().zip(theirs) {
            *a = match self {
                Kind::Counter | Kind::Gauge => *a + b,
                Kind::Peak => (*a).max(*b),
            };
        }
    }
}

impl Kind {
    /// Takes `baseline` off a counter (saturating: a counter that restarted, as an ACL rule's
    /// after a reload, reads from zero); gauges and peaks stay what they are.
    fn subtract(self, value: &mut [u64], baseline: &[u64]) {
        if self == Kind::Counter {
            for (a, b) in value.iter_mut().zip(baseline) {
                *a = a.saturating_sub(*b);
            }
        }
    }
}

/// What one value of a row stands for: the row's values are one (`One`), or one per
/// PFC priority, egress queue, drop reason or CoPP class, in index order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Labels {
    One,
    Priority,
    /// An egress queue (a TC) held by received pauses: `qos.pfc_to_queue` names it.
    Queue,
    DropReason,
    CoppClass,
}

impl Labels {
    /// The label name and values of each element (`One`: none).
    pub fn each(self) -> Option<(&'static str, Vec<String>)> {
        match self {
            Labels::One => None,
            Labels::Priority => Some(("priority", (0..8).map(|p| p.to_string()).collect())),
            Labels::Queue => Some(("queue", (0..8).map(|q| q.to_string()).collect())),
            Labels::DropReason => Some(("reason", DropReason::ALL.iter().map(|r| r.name().to_string()).collect())),
            Labels::CoppClass => Some(("class", CoppClass::ALL.iter().map(|c| c.name().to_string()).collect())),
        }
    }

    /// The DPDK telemetry name of element `index` of a row named `stem`.
    pub fn telemetry_name(self, stem: &str, index: usize) -> String {
        match self {
            Labels::One => stem.to_string(),
            Labels::Priority => format!("{stem}_p{index}"),
            Labels::Queue => format!("{stem}_q{index}"),
            Labels::DropReason => format!("{stem}_{}", DropReason::ALL[index].name()),
            Labels::CoppClass => format!("{stem}_{}", CoppClass::ALL[index].name()),
        }
    }
}

/// The DPDK telemetry command a row answers in (`telemetry::COMMANDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Ports,
    Queues,
    Pfc,
    Control,
}

/// One row of the schema, over the counters of `S` (a port's, a queue's, ...).
pub struct Counter<S> {
    /// Key in the stats JSON object of `S` (a dot nests: `pfc_watchdog.storms`).
    pub json: &'static str,
    /// Prometheus family name.
    pub metric: &'static str,
    pub kind: Kind,
    pub labels: Labels,
    /// DPDK telemetry command and name stem.
    pub telemetry: (Section, &'static str),
    pub help: &'static str,
    pub get: fn(&S) -> &[u64],
    pub get_mut: fn(&mut S) -> &mut [u64],
}

/// A row: `row!(Type, field, "json", "metric", Kind, Labels, Section, "telemetry", "help")`.
macro_rules! row {
    ($type:ty, $field:ident, $json:literal, $metric:literal, $kind:ident, $labels:ident, $section:ident, $telemetry:literal, $help:literal) => {
        Counter::<$type> {
            json: $json,
            metric: $metric,
            kind: Kind::$kind,
            labels: Labels::$labels,
            telemetry: (Section::$section, $telemetry),
            help: $help,
            get: |s| std::slice::from_ref(&s.$field).values(),
            get_mut: |s| std::slice::from_mut(&mut s.$field).values_mut(),
        }
    };
}

/// A field as a slice of its values: a `u64` is one, an array its elements.
trait Values {
    fn values(&self) -> &[u64];
    fn values_mut(&mut self) -> &mut [u64];
}

impl Values for [u64] {
    fn values(&self) -> &[u64] {
        self
    }
    fn values_mut(&mut self) -> &mut [u64] {
        self
    }
}

impl<const N: usize> Values for [[u64; N]] {
    fn values(&self) -> &[u64] {
        self.as_flattened()
    }
    fn values_mut(&mut self) -> &mut [u64] {
        self.as_flattened_mut()
    }
}

#[rustfmt::skip]
pub static PORT_COUNTERS: [Counter<PortStats>; 16] = [
    row!(PortStats, rx_packets, "rx_packets", "raceway_port_rx_packets_total", Counter, One, Ports, "rx_packets", "Data frames received."),
    row!(PortStats, rx_bytes, "rx_bytes", "raceway_port_rx_bytes_total", Counter, One, Ports, "rx_bytes", "Bytes of data frames received."),
    row!(PortStats, tx_packets, "tx_packets", "raceway_port_tx_packets_total", Counter, One, Ports, "tx_packets", "Data frames sent."),
    row!(PortStats, tx_bytes, "tx_bytes", "raceway_port_tx_bytes_total", Counter, One, Ports, "tx_bytes", "Bytes of data frames sent."),
    row!(PortStats, drops, "drops", "raceway_port_drops_total", Counter, DropReason, Ports, "drops", "Frames dropped, charged to the port they came in on, by reason."),
    row!(PortStats, punted, "punted", "raceway_port_punted_total", Counter, CoppClass, Ports, "punted", "Frames handed to the control plane, by the port they came in on and CoPP class."),
    row!(PortStats, policed, "policed", "raceway_port_policed_total", Counter, CoppClass, Ports, "policed", "Frames for the control plane over their port and CoPP class's rate, dropped (punt_policed)."),
    row!(PortStats, refused, "refused", "raceway_port_control_acl_refused_total", Counter, CoppClass, Ports, "refused", "Frames for the control plane from a source their CoPP class does not take ([control.acl]), dropped (control_acl)."),
    row!(PortStats, injected, "injected", "raceway_port_injected_total", Counter, One, Control, "injected", "Frames the control plane sent out of the port."),
    row!(PortStats, pfc_xoff_tx, "pfc_xoff_tx", "raceway_pfc_xoff_sent_total", Counter, Priority, Pfc, "xoff_sent", "PFC XOFF frames sent, per priority."),
    row!(PortStats, pfc_xon_tx, "pfc_xon_tx", "raceway_pfc_xon_sent_total", Counter, Priority, Pfc, "xon_sent", "PFC XON frames sent, per priority."),
    row!(PortStats, pfc_rx, "pfc_rx", "raceway_pfc_received_total", Counter, Priority, Pfc, "received", "PFC frames received, once per enabled priority."),
    row!(PortStats, rx_pause, "rx_pause", "raceway_port_rx_pause_total", Counter, One, Pfc, "rx_pause", "802.3x PAUSE frames received (MAC control, not data), obeyed or not."),
    row!(PortStats, pfc_rx_pause_ns, "pfc_rx_pause_ns", "raceway_pfc_rx_pause_seconds_total", Counter, Queue, Pfc, "rx_pause_ns", "Time the peer's PFC held each egress queue."),
    row!(PortStats, watchdog_storms, "pfc_watchdog.storms", "raceway_pfc_watchdog_storms_total", Counter, Queue, Pfc, "watchdog_storms", "PFC storms the watchdog detected, per egress queue."),
    row!(PortStats, watchdog_restorations, "pfc_watchdog.restorations", "raceway_pfc_watchdog_restorations_total", Counter, Queue, Pfc, "watchdog_restorations", "PFC watchdog restorations, per egress queue."),
];
#[rustfmt::skip]
pub static QUEUE_COUNTERS: [Counter<QueueStats>; 13] = [
    row!(QueueStats, tx_packets, "tx_packets", "raceway_queue_tx_packets_total", Counter, One, Queues, "tx_packets", "Frames sent from the queue."),
    row!(QueueStats, tx_bytes, "tx_bytes", "raceway_queue_tx_bytes_total", Counter, One, Queues, "tx_bytes", "Bytes sent from the queue."),
    row!(QueueStats, ecn_marked, "ecn_marked", "raceway_queue_ecn_marked_total", Counter, One, Queues, "ecn_marked", "Frames that left the queue with CE set by the switch."),
    row!(QueueStats, dropped, "dropped", "raceway_queue_dropped_total", Counter, One, Queues, "dropped", "Frames the queue refused or lost."),
    row!(QueueStats, trimmed, "trimmed", "raceway_queue_trimmed_total", Counter, One, Queues, "trimmed", "Frames the queue refused that were trimmed instead of dropped."),
    row!(QueueStats, trim_dropped, "trim_dropped", "raceway_queue_trim_dropped_total", Counter, One, Queues, "trim_dropped", "Frames the queue trimmed that the trim queue refused too, dropped."),
    row!(QueueStats, trim_tx, "trim_tx", "raceway_queue_trim_tx_total", Counter, One, Queues, "trim_tx", "Trimmed frames sent from the queue (the trim queue)."),
    row!(QueueStats, max_depth_bytes, "max_depth_bytes", "raceway_queue_max_depth_bytes", Peak, One, Queues, "max_depth_bytes", "Peak frame bytes queued."),
    row!(QueueStats, depth_bytes, "depth_bytes", "raceway_queue_depth_bytes", Gauge, One, Queues, "depth_bytes", "Frame bytes queued when the counters were published."),
    row!(QueueStats, watermark_bytes, "watermark_bytes", "raceway_queue_watermark_bytes", Peak, One, Queues, "watermark_bytes", "Peak frame bytes queued since the watermarks were last cleared."),
    row!(QueueStats, max_depth_cell_bytes, "max_depth_cell_bytes", "raceway_queue_max_depth_cell_bytes", Peak, One, Queues, "max_depth_cell_bytes", "Peak buffer cell bytes the queued frames held."),
    row!(QueueStats, depth_cell_bytes, "depth_cell_bytes", "raceway_queue_depth_cell_bytes", Gauge, One, Queues, "depth_cell_bytes", "Buffer cell bytes the queued frames held when the counters were published."),
    row!(QueueStats, watermark_cell_bytes, "watermark_cell_bytes", "raceway_queue_watermark_cell_bytes", Peak, One, Queues, "watermark_cell_bytes", "Peak buffer cell bytes the queued frames held since the watermarks were last cleared."),
];

/// Rows of each lossless (ingress port, priority) group (telemetry: `<stem>_p<priority>`).
#[rustfmt::skip]
pub static GROUP_COUNTERS: [Counter<GroupStats>; 6] = [
    row!(GroupStats, max_bytes, "max_bytes", "raceway_priority_group_max_bytes", Peak, One, Pfc, "group_max_bytes", "Peak occupancy of the (ingress port, lossless priority) group, in buffer cell bytes."),
    row!(GroupStats, max_headroom_bytes, "max_headroom_bytes", "raceway_priority_group_max_headroom_bytes", Peak, One, Pfc, "group_max_headroom_bytes", "Peak headroom use of the (ingress port, lossless priority) group, in buffer cell bytes."),
    row!(GroupStats, max_shared_bytes, "max_shared_bytes", "raceway_priority_group_max_shared_bytes", Peak, One, Pfc, "group_max_shared_bytes", "Peak shared (lossless pool) use of the group, in buffer cell bytes."),
    row!(GroupStats, watermark_bytes, "watermark_bytes", "raceway_priority_group_watermark_bytes", Peak, One, Pfc, "group_watermark_bytes", "Peak occupancy of the group since the watermarks were last cleared, in buffer cell bytes."),
    row!(GroupStats, watermark_headroom_bytes, "watermark_headroom_bytes", "raceway_priority_group_watermark_headroom_bytes", Peak, One, Pfc, "group_watermark_headroom_bytes", "Peak headroom use of the group since the watermarks were last cleared, in buffer cell bytes."),
    row!(GroupStats, watermark_shared_bytes, "watermark_shared_bytes", "raceway_priority_group_watermark_shared_bytes", Peak, One, Pfc, "group_watermark_shared_bytes", "Peak shared (lossless pool) use of the group since the watermarks were last cleared, in buffer cell bytes."),
];

/// Rows of each forwarding core (not in telemetry: the section is unused).
#[rustfmt::skip]
pub static CORE_COUNTERS: [Counter<CoreStats>; 3] = [
    row!(CoreStats, packets, "packets", "raceway_core_packets_total", Counter, One, Ports, "-", "Frames the forwarding core received."),
    row!(CoreStats, busy_cycles, "busy_cycles", "raceway_core_busy_cycles_total", Counter, One, Ports, "-", "TSC cycles of loops that moved frames."),
    row!(CoreStats, idle_cycles, "idle_cycles", "raceway_core_idle_cycles_total", Counter, One, Ports, "-", "TSC cycles of empty polls."),
];

/// The control plane's values: per port (JSON: an object by port name) or one.
pub struct ControlCounter {
    pub json: &'static str,
    pub metric: &'static str,
    pub kind: Kind,
    /// DPDK telemetry name (per port in the port's section, else in `fib`).
    pub telemetry: &'static str,
    pub help: &'static str,
    pub value: ControlValue,
}

pub enum ControlValue {
    PerPort(fn(&ControlStats) -> &[u64]),
    /// One value per name of `ROUTE_REASONS`.
    PerReason(fn(&ControlStats) -> &[u64]),
    One(fn(&ControlStats) -> u64),
    /// Nanoseconds: Prometheus gets seconds.
    Nanoseconds(fn(&ControlStats) -> u64),
}

#[rustfmt::skip]
pub static CONTROL_COUNTERS: [ControlCounter; 16] = [
    ControlCounter { json: "punt_tap_errors", metric: "raceway_control_punt_tap_errors_total", kind: Kind::Counter, telemetry: "punt_tap_errors", help: "Punted frames the port's host interface refused.", value: ControlValue::PerPort(|c| &c.punt_tap_errors) },
    ControlCounter { json: "inject_dropped", metric: "raceway_control_inject_dropped_total", kind: Kind::Counter, telemetry: "inject_dropped", help: "Frames from the kernel that could not be injected.", value: ControlValue::PerPort(|c| &c.inject_dropped) },
    ControlCounter { json: "fib_generation", metric: "raceway_fib_generation", kind: Kind::Gauge, telemetry: "generation", help: "The FIB snapshot the workers read.", value: ControlValue::One(|c| c.fib_generation) },
    ControlCounter { json: "fib_routes", metric: "raceway_fib_routes", kind: Kind::Gauge, telemetry: "routes", help: "Routes in the FIB (config and kernel).", value: ControlValue::One(|c| c.fib_routes) },
    ControlCounter { json: "fib_neighbors", metric: "raceway_fib_neighbors", kind: Kind::Gauge, telemetry: "neighbors", help: "Neighbours in the FIB.", value: ControlValue::One(|c| c.fib_neighbors) },
    ControlCounter { json: "last_update_ns", metric: "raceway_fib_last_update_seconds", kind: Kind::Gauge, telemetry: "last_update_ns", help: "Time from reading the kernel's messages to publishing the last snapshot.", value: ControlValue::Nanoseconds(|c| c.last_update_ns) },
    ControlCounter { json: "fib_kernel_routes", metric: "raceway_fib_kernel_routes", kind: Kind::Gauge, telemetry: "kernel_routes", help: "The kernel's routes whose traffic goes to the kernel, by reason (other_table: routes of tables not mirrored).", value: ControlValue::PerReason(|c| &c.fib_kernel_routes) },
    ControlCounter { json: "fib_partial", metric: "raceway_fib_partial", kind: Kind::Gauge, telemetry: "partial", help: "1 while an ip rule that does not select by destination is in force: the kernel may look a destination up elsewhere than the FIB does.", value: ControlValue::One(|c| c.fib_partial) },
    ControlCounter { json: "fib_resyncs", metric: "raceway_fib_resyncs_total", kind: Kind::Counter, telemetry: "resyncs", help: "Times netlink messages were lost and the kernel's tables dumped again.", value: ControlValue::One(|c| c.fib_resyncs) },
    ControlCounter { json: "fib_dumps", metric: "raceway_fib_dumps_total", kind: Kind::Counter, telemetry: "dumps", help: "Dumps of the kernel's tables after the first: after lost messages, or to learn which next hops the kernel holds dead after an interface went down or up or lost its addresses.", value: ControlValue::One(|c| c.fib_dumps) },
    ControlCounter { json: "publish_p50_ns", metric: "raceway_fib_publish_p50_seconds", kind: Kind::Gauge, telemetry: "publish_p50_ns", help: "Median time from reading a netlink message to publishing the snapshot with it.", value: ControlValue::Nanoseconds(|c| c.publish_latency.quantile(0.5)) },
    ControlCounter { json: "publish_p99_ns", metric: "raceway_fib_publish_p99_seconds", kind: Kind::Gauge, telemetry: "publish_p99_ns", help: "99th percentile of the same.", value: ControlValue::Nanoseconds(|c| c.publish_latency.quantile(0.99)) },
    ControlCounter { json: "punt_p50_ns", metric: "raceway_control_punt_p50_seconds", kind: Kind::Gauge, telemetry: "punt_p50_ns", help: "Median time from a worker punting a frame to its write on the host interface.", value: ControlValue::Nanoseconds(|c| c.punt_latency.quantile(0.5)) },
    ControlCounter { json: "punt_p99_ns", metric: "raceway_control_punt_p99_seconds", kind: Kind::Gauge, telemetry: "punt_p99_ns", help: "99th percentile of the same.", value: ControlValue::Nanoseconds(|c| c.punt_latency.quantile(0.99)) },
    ControlCounter { json: "inject_p50_ns", metric: "raceway_control_inject_p50_seconds", kind: Kind::Gauge, telemetry: "inject_p50_ns", help: "Median time from reading a frame off a host interface to a worker injecting it.", value: ControlValue::Nanoseconds(|c| c.inject_latency.quantile(0.5)) },
    ControlCounter { json: "inject_p99_ns", metric: "raceway_control_inject_p99_seconds", kind: Kind::Gauge, telemetry: "inject_p99_ns", help: "99th percentile of the same.", value: ControlValue::Nanoseconds(|c| c.inject_latency.quantile(0.99)) },
];

/// The reasons `fib_kernel_routes` counts routes by: those of `KernelReason`, then the routes
/// of tables the FIB does not mirror.
pub fn route_reasons() -> impl Iterator<Item = &'static str> {
    crate::pipeline::fib::KernelReason::ALL.iter().map(|reason| reason.name()).chain(["other_table"])
}

/// Puts `value` at `path` (dots nest objects) in `object`.
fn insert_at(object: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            object.insert(path.to_string(), value);
        }
        Some((head, rest)) => {
            let inner = object.entry(head).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(inner) = inner {
                insert_at(inner, rest, value);
            }
        }
    }
}

/// The JSON object of one `S` from its rows: a value, an array per priority, or an object
/// by reason name.
pub(super) fn rows_json<S>(rows: &[Counter<S>], stats: &S) -> Map<String, Value> {
    let mut object = Map::new();
    for row in rows {
        let values = (row.get)(stats);
        let value = match row.labels {
            Labels::One => json!(values[0]),
            Labels::Priority | Labels::Queue => json!(values),
            Labels::DropReason | Labels::CoppClass => {
                let (_, names) = row.labels.each().expect("labelled");
                Value::Object(names.into_iter().zip(values).map(|(name, value)| (name, json!(value))).collect())
            }
        };
        insert_at(&mut object, row.json, value);
    }
    object
}

/// Merges `theirs` into `mine`, row by row.
pub(super) fn merge_rows<S>(rows: &[Counter<S>], mine: &mut S, theirs: &S) {
    for row in rows {
        row.kind.merge((row.get_mut)(mine), (row.get)(theirs));
    }
}

/// Takes `baseline`'s counters off `value`'s, row by row (`Kind::subtract`).
pub(super) fn subtract_rows<S>(rows: &[Counter<S>], value: &mut S, baseline: &S) {
    for row in rows {
        row.kind.subtract((row.get_mut)(value), (row.get)(baseline));
    }
}
