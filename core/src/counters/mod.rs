//! Counters, kept by the switch, the workers and the control thread, and the stats JSON
//! (docs/STATS.md is its contract). Below `tm` and `switch`, which count into them; the views
//! made of them (Prometheus, telemetry, the report) are `observe`'s.
//!
//! Invariant: rx/tx counters count data frames only; PFC frames are counted in
//! `pfc_rx` (once per enabled priority) and `pfc_xoff_tx`/`pfc_xon_tx`, 802.3x PAUSE frames
//! (obeyed or not) in `rx_pause`, never as drops. So, summed over ports,
//! rx_packets + injected = tx_packets + drops + punted + packets still queued. Port `drops` are charged to the
//! port the packet came in on; a queue's `dropped` to the egress queue that refused it.
//! A trimmed frame is counted in its refusing queue's `trimmed`, then in the trim queue's
//! `trim_tx` (and `tx_packets`) or the refusing queue's `trim_dropped` (and `dropped`): per
//! port, trimmed = trim_tx + trim_dropped + trimmed frames still queued.
//! `priority_groups` (lossless priorities only) give each ingress group's peak occupancy and
//! peak headroom use, in buffer cell bytes; `pfc_watchdog` counts storms and restorations per
//! queue of the egress port.
//! Workers own their counters; the main core sums them with `add`.
//!
//! The schema (`schema.rs`): every counter is one row of `PORT_COUNTERS`, `QUEUE_COUNTERS`,
//! `GROUP_COUNTERS`, `CORE_COUNTERS` or `CONTROL_COUNTERS` (its JSON key, its Prometheus name
//! and type, its DPDK telemetry name, its help line and where it lives). The stats JSON,
//! the Prometheus exposition (`observe::metrics`), DPDK telemetry (`observe::telemetry`) and the merging of
//! workers' counters (`add`) are all generated from these rows: a new counter is its field
//! and one row.

pub mod latency;
mod schema;

use crate::config::Config;
use crate::config::CoppClass;
use crate::drops::DropReason;
use crate::units::TRAFFIC_CLASSES;
use latency::LatencyHistogram;
use schema::{merge_rows, rows_json, subtract_rows};
pub use schema::{
    route_reasons, ControlCounter, ControlValue, Counter, Kind, Labels, Section, CONTROL_COUNTERS, CORE_COUNTERS,
    GROUP_COUNTERS, PORT_COUNTERS, QUEUE_COUNTERS,
};
use serde_json::{json, Map, Value};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub ecn_marked: u64,
    /// Trimmed frames sent from this queue (the trim queue): also in `tx_packets`. Next to
    /// the other counters a frame sent touches, in the queue's first 32 bytes.
    pub trim_tx: u64,
    pub dropped: u64,
    /// Frames this queue refused that were trimmed (`[qos.trim]`) instead of dropped: they
    /// wait in the trim queue, where `trim_tx` counts them out.
    pub trimmed: u64,
    /// Of `trimmed`, those the trim queue refused too: dropped (also in `dropped` here and
    /// in the ingress port's `buffer_full`).
    pub trim_dropped: u64,
    /// Peak frame bytes queued: the persistent watermark (since start, or since the
    /// persistent watermarks were last cleared).
    pub max_depth_bytes: u64,
    /// Frame bytes queued when the counters were published (a gauge; live workers refresh it
    /// every publish period, replay at the end, when it is 0).
    pub depth_bytes: u64,
    /// Peak frame bytes queued since the watermarks were last cleared (SONiC's user
    /// watermark); never above `max_depth_bytes`.
    pub watermark_bytes: u64,
    /// The same three in buffer cell bytes, the cells the queued frames hold: what ECN
    /// compares with kmin and kmax by default, and what an ASIC's queue watermark counts.
    pub max_depth_cell_bytes: u64,
    pub depth_cell_bytes: u64,
    pub watermark_cell_bytes: u64,
}

/// Peaks of one (ingress port, priority) group, in buffer cell bytes: persistent (`max_*`,
/// since start or the last persistent clear) and since the last clear (`watermark_*`, never
/// above the persistent ones). Occupancy is the shared part (the lossless pool, up to XOFF)
/// plus the headroom part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub max_bytes: u64,
    pub max_headroom_bytes: u64,
    pub max_shared_bytes: u64,
    pub watermark_bytes: u64,
    pub watermark_headroom_bytes: u64,
    pub watermark_shared_bytes: u64,
}

impl QueueStats {
    /// Takes a queue depth (`depth` frame bytes, holding `cells` cell bytes) into the
    /// watermarks. The persistent ones are at least the others, so the common case is one
    /// compare per unit.
    #[inline(always)]
    pub fn peak(&mut self, depth: u64, cells: u64) {
        if depth > self.watermark_bytes {
            self.watermark_bytes = depth;
            if depth > self.max_depth_bytes {
                self.max_depth_bytes = depth;
            }
        }
        if cells > self.watermark_cell_bytes {
            self.watermark_cell_bytes = cells;
            if cells > self.max_depth_cell_bytes {
                self.max_depth_cell_bytes = cells;
            }
        }
    }
}

impl GroupStats {
    /// Takes a group's occupancy (`headroom` of it in headroom) into its watermarks.
    #[inline(always)]
    pub fn peak(&mut self, occupancy: u64, headroom: u64) {
        // Peaks change rarely: a test and no store on the common path (written as `max`, the
        // updates were vectorised into an SSE2 emulation of 64-bit compares, 8% of a frame's
        // samples).
        if occupancy > self.watermark_bytes {
            self.watermark_bytes = occupancy;
            if occupancy > self.max_bytes {
                self.max_bytes = occupancy;
            }
        }
        // Each part keeps its own peak: a later all-shared burst may fill more of the pool
        // than the record total did, with less in headroom.
        let shared = occupancy - headroom;
        if shared > self.watermark_shared_bytes {
            self.watermark_shared_bytes = shared;
            if shared > self.max_shared_bytes {
                self.max_shared_bytes = shared;
            }
        }
        if headroom > self.watermark_headroom_bytes {
            self.watermark_headroom_bytes = headroom;
            if headroom > self.max_headroom_bytes {
                self.max_headroom_bytes = headroom;
            }
        }
    }
}

/// Which watermarks a clear resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatermarkClear {
    /// The ones since the last clear (`watermark_*`).
    User,
    /// Both: the persistent ones cannot be below the others.
    Persistent,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub pfc_xoff_tx: [u64; 8],
    pub pfc_xon_tx: [u64; 8],
    pub pfc_rx: [u64; 8],
    /// Nanoseconds the peer's PFC held each egress class (refreshed when counters are
    /// published, and at the end of a replay or fabric run).
    pub pfc_rx_pause_ns: [u64; 8],
    /// 802.3x PAUSE frames received (MAC control, not in `rx_packets`), obeyed or not.
    pub rx_pause: u64,
    pub drops: [u64; DropReason::COUNT],
    /// Frames handed to the control plane, per `CoppClass`.
    pub punted: [u64; CoppClass::COUNT],
    /// Frames for the control plane its policers refused, per `CoppClass` (the breakdown of the
    /// `punt_policed` drops).
    pub policed: [u64; CoppClass::COUNT],
    /// Frames for the control plane from a source their class does not take
    /// (`[control.acl]`), per `CoppClass` (the breakdown of the `control_acl` drops).
    pub refused: [u64; CoppClass::COUNT],
    /// Frames the control plane sent out of this port (its host interface).
    pub injected: u64,
    pub queues: [QueueStats; TRAFFIC_CLASSES],
    pub priority_groups: [GroupStats; 8],
    pub watchdog_storms: [u64; 8],
    pub watchdog_restorations: [u64; 8],
}

impl PortStats {
    /// Counts one frame dropped for `reason`: the one place a drop is counted.
    #[inline]
    pub fn count_drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    /// Frames dropped for `reason`.
    pub fn drops_for(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchStats {
    pub ports: Vec<PortStats>,
    /// Packets queued to each member, per group, in config order.
    pub groups: Vec<Vec<u64>>,
    /// Packets queued to each member of each group of next hops the FIB made (a multipath
    /// route of the kernel's, a `via` list), in the order they first appeared; kept when the
    /// group goes, so that its counters never fall.
    pub next_hop_groups: Vec<NextHopGroupStats>,
    /// Frames a flowlet group placed by a flowset that another flow had opened (every flowlet
    /// group): more flows active than the flowsets tell apart (`pipeline::balance`).
    pub flowlet_collisions: u64,
    /// Time frames spend in the switch, from being received to being handed to transmit
    /// (virtual time in replay, TSC time live).
    pub latency: LatencyHistogram,
    /// Per forwarding core (live only).
    pub cores: Vec<CoreStats>,
    /// The control plane's (live, with `[control]`).
    pub control: Option<ControlStats>,
    /// Per `[[acl]]` table in config order, per rule best first: what the rule matched.
    pub acl: Vec<Vec<AclRuleStats>>,
}

/// What one ACL rule matched (whatever its action).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AclRuleStats {
    pub packets: u64,
    pub bytes: u64,
}

/// A group of next hops: its members (port, next-hop address) and the frames queued to each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHopGroupStats {
    pub members: Vec<(u16, std::net::IpAddr)>,
    pub sent: Vec<u64>,
}

impl NextHopGroupStats {
    /// Its name in the stats: its next hops, as `ip route` lists them ("via 10.255.0.1
    /// 10.255.0.3"). One group serves every prefix over the same next hops (a million routes
    /// over two spines share one), so it is named by them rather than by a prefix.
    pub fn name(&self) -> String {
        let mut name = String::from("via");
        for (_, ip) in &self.members {
            name.push(' ');
            name.push_str(&ip.to_string());
        }
        name
    }
}

/// The control thread's counters (live, with `[control]`), published every housekeeping
/// period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlStats {
    /// Per port: punted frames the TAP refused (the kernel's queue was full).
    pub punt_tap_errors: Vec<u64>,
    /// Per port: frames the kernel sent that could not be injected (no mbuf, too long for one,
    /// or the ring to the worker full).
    pub inject_dropped: Vec<u64>,
    /// The FIB generation published last, and its routes and neighbours.
    pub fib_generation: u64,
    pub fib_routes: u64,
    pub fib_neighbors: u64,
    /// Time from the kernel's netlink message to the snapshot being published, last update.
    pub last_update_ns: u64,
    /// The same for every snapshot published.
    pub publish_latency: LatencyHistogram,
    /// From a worker punting a frame to its write on the TAP.
    pub punt_latency: LatencyHistogram,
    /// From reading a frame off a TAP to a worker injecting it.
    pub inject_latency: LatencyHistogram,
    /// Times netlink messages were lost and the kernel's tables dumped again.
    pub fib_resyncs: u64,
    /// Dumps of the kernel's tables after the first (the resyncs among them).
    pub fib_dumps: u64,
    /// 1 while a policy rule that does not select by destination is in force.
    pub fib_partial: u64,
    /// The kernel's routes whose traffic goes to the kernel, by `schema::route_reasons`.
    pub fib_kernel_routes: Vec<u64>,
}

/// How a forwarding core spends its cycles: iterations of its loop that moved frames count as
/// busy, the others as idle (as testpmd's --record-core-cycles and OVS's pmd-stats-show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreStats {
    pub lcore: u32,
    pub packets: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
}

impl CoreStats {
    /// Charges one loop iteration of `cycles`: busy when it moved frames (`received` of them
    /// received), else idle.
    #[inline]
    pub fn charge_iteration(&mut self, cycles: u64, received: u64, moved: bool) {
        if moved {
            self.busy_cycles += cycles;
            self.packets += received;
        } else {
            self.idle_cycles += cycles;
        }
    }

    pub fn cycles_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.busy_cycles as f64 / self.packets as f64
        }
    }

    pub fn busy_percent(&self) -> f64 {
        let total = self.busy_cycles + self.idle_cycles;
        if total == 0 {
            0.0
        } else {
            100.0 * self.busy_cycles as f64 / total as f64
        }
    }
}

impl SwitchStats {
    pub fn new(config: &Config) -> Self {
        Self {
            ports: vec![PortStats::default(); config.ports.len()],
            groups: config.groups.iter().map(|group| vec![0; group.members.len()]).collect(),
            next_hop_groups: Vec::new(),
            flowlet_collisions: 0,
            latency: LatencyHistogram::default(),
            cores: Vec::new(),
            control: None,
            acl: config.acls.iter().map(|table| vec![AclRuleStats::default(); table.rules.len()]).collect(),
        }
    }

    /// Adds another worker's counters (each row by its kind: counters and gauges sum, peaks
    /// take the maximum).
    pub fn add(&mut self, other: &SwitchStats) {
        for (mine, theirs) in self.ports.iter_mut().zip(&other.ports) {
            merge_rows(&PORT_COUNTERS, mine, theirs);
            for (a, b) in mine.queues.iter_mut().zip(&theirs.queues) {
                merge_rows(&QUEUE_COUNTERS, a, b);
            }
            for (a, b) in mine.priority_groups.iter_mut().zip(&theirs.priority_groups) {
                merge_rows(&GROUP_COUNTERS, a, b);
            }
        }
        self.latency.add(&other.latency);
        self.flowlet_collisions += other.flowlet_collisions;
        self.cores.extend(other.cores.iter().copied());
        if other.control.is_some() {
            // One control thread: its counters are whoever carries them.
            self.control.clone_from(&other.control);
        }
        for (mine, theirs) in self.groups.iter_mut().zip(&other.groups) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        for (mine, theirs) in self.acl.iter_mut().zip(&other.acl) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                a.packets += b.packets;
                a.bytes += b.bytes;
            }
        }
        // Workers meet groups in their own order: matched by members (on the main core).
        for theirs in &other.next_hop_groups {
            match self.next_hop_groups.iter_mut().find(|mine| mine.members == theirs.members) {
                Some(mine) => {
                    for (a, b) in mine.sent.iter_mut().zip(&theirs.sent) {
                        *a += b;
                    }
                }
                None => self.next_hop_groups.push(theirs.clone()),
            }
        }
    }

    /// These counters less those of `baseline` (an earlier snapshot of the same switch):
    /// what `raceway show` prints after `show clear counters`, as SONiC's `sonic-clear
    /// counters` offsets its views. Counters count from the baseline; gauges, peaks (the
    /// watermarks have their own clear), the latency histogram, the cores' cycles and the
    /// control plane's figures are as they are. A counter below its baseline (one that
    /// restarted, which a reload's remapping of the baseline prevents) reads zero.
    pub fn since(&self, baseline: &SwitchStats) -> SwitchStats {
        let mut view = self.clone();
        for (port, base) in view.ports.iter_mut().zip(&baseline.ports) {
            subtract_rows(&PORT_COUNTERS, port, base);
            for (queue, base) in port.queues.iter_mut().zip(&base.queues) {
                subtract_rows(&QUEUE_COUNTERS, queue, base);
            }
            for (group, base) in port.priority_groups.iter_mut().zip(&base.priority_groups) {
                subtract_rows(&GROUP_COUNTERS, group, base);
            }
        }
        view.flowlet_collisions = view.flowlet_collisions.saturating_sub(baseline.flowlet_collisions);
        for (group, base) in view.groups.iter_mut().zip(&baseline.groups) {
            for (sent, base) in group.iter_mut().zip(base) {
                *sent = sent.saturating_sub(*base);
            }
        }
        for (table, base) in view.acl.iter_mut().zip(&baseline.acl) {
            for (rule, base) in table.iter_mut().zip(base) {
                rule.packets = rule.packets.saturating_sub(base.packets);
                rule.bytes = rule.bytes.saturating_sub(base.bytes);
            }
        }
        for group in &mut view.next_hop_groups {
            if let Some(base) = baseline.next_hop_groups.iter().find(|base| base.members == group.members) {
                for (sent, base) in group.sent.iter_mut().zip(&base.sent) {
                    *sent = sent.saturating_sub(*base);
                }
            }
        }
        view
    }

    /// Resets watermarks (the worker's own; the main core's sum follows at the next publish).
    pub fn clear_watermarks(&mut self, which: WatermarkClear) {
        for port in &mut self.ports {
            for queue in &mut port.queues {
                queue.watermark_bytes = 0;
                queue.watermark_cell_bytes = 0;
                if which == WatermarkClear::Persistent {
                    queue.max_depth_bytes = 0;
                    queue.max_depth_cell_bytes = 0;
                }
            }
            for group in &mut port.priority_groups {
                group.watermark_bytes = 0;
                group.watermark_headroom_bytes = 0;
                group.watermark_shared_bytes = 0;
                if which == WatermarkClear::Persistent {
                    group.max_bytes = 0;
                    group.max_headroom_bytes = 0;
                    group.max_shared_bytes = 0;
                }
            }
        }
    }

    /// Every group's name and its members' names and counts: the config's `[[group]]`s, then
    /// the groups of next hops (members named "port address").
    pub fn group_counts(&self, config: &Config) -> Vec<(String, Vec<(String, u64)>)> {
        let configured = config.groups.iter().zip(&self.groups).map(|(group, counts)| {
            let members =
                group.members.iter().zip(counts).map(|(&port, &count)| (config.ports[port].name.clone(), count));
            (group.name.clone(), members.collect())
        });
        let next_hops = self.next_hop_groups.iter().map(|group| {
            let members = group.members.iter().zip(&group.sent).map(|((port, ip), &count)| {
                let port = config.ports.get(usize::from(*port)).map_or("?", |port| port.name.as_str());
                (format!("{port} {ip}"), count)
            });
            (group.name(), members.collect())
        });
        configured.chain(next_hops).collect()
    }

    pub fn rx_packets(&self) -> u64 {
        self.ports.iter().map(|port| port.rx_packets).sum()
    }

    pub fn tx_packets(&self) -> u64 {
        self.ports.iter().map(|port| port.tx_packets).sum()
    }

    pub fn dropped(&self) -> u64 {
        self.ports.iter().map(PortStats::dropped).sum()
    }

    /// The stats JSON document (docs/STATS.md), keyed by the config's port and group names.
    pub fn to_json(&self, config: &Config) -> Value {
        let mut ports = Map::new();
        for (port, stats) in config.ports.iter().zip(&self.ports) {
            let mut object = rows_json(&PORT_COUNTERS, stats);
            let queues: Vec<Value> = stats
                .queues
                .iter()
                .enumerate()
                .map(|(tc, queue)| {
                    let mut queue = rows_json(&QUEUE_COUNTERS, queue);
                    queue.insert("tc".into(), json!(tc));
                    Value::Object(queue)
                })
                .collect();
            object.insert("queues".into(), Value::Array(queues));
            let groups: Vec<Value> = stats
                .priority_groups
                .iter()
                .enumerate()
                .filter(|&(pg, _)| config.qos.pg_lossless(pg))
                .map(|(pg, group)| {
                    let mut group = rows_json(&GROUP_COUNTERS, group);
                    group.insert("pg".into(), json!(pg));
                    Value::Object(group)
                })
                .collect();
            object.insert("priority_groups".into(), Value::Array(groups));
            ports.insert(port.name.clone(), Value::Object(object));
        }
        let mut groups = Map::new();
        for (group, counts) in self.group_counts(config) {
            let members: Map<String, Value> =
                counts.into_iter().map(|(member, count)| (member, json!(count))).collect();
            groups.insert(group, Value::Object(members));
        }
        let mut acl = Map::new();
        for (table, counts) in config.acls.iter().zip(&self.acl) {
            let rules: Vec<Value> = table
                .rules
                .iter()
                .zip(counts)
                .map(|(rule, counts)| {
                    json!({
                        "priority": rule.priority,
                        "match": rule.describe(),
                        "action": rule.action.to_string(),
                        "packets": counts.packets,
                        "bytes": counts.bytes,
                    })
                })
                .collect();
            acl.insert(table.name.clone(), json!({ "stage": table.stage.name(), "rules": rules }));
        }
        let latency = &self.latency;
        let cores: Vec<Value> = self
            .cores
            .iter()
            .map(|core| {
                let mut object = rows_json(&CORE_COUNTERS, core);
                object.insert("lcore".into(), json!(core.lcore));
                object.insert("cycles_per_packet".into(), json!((core.cycles_per_packet() * 10.0).round() / 10.0));
                object.insert("busy_percent".into(), json!((core.busy_percent() * 10.0).round() / 10.0));
                Value::Object(object)
            })
            .collect();
        let mut document = json!({
            "ports": ports,
            "groups": groups,
            "acl": acl,
            "flowlet_collisions": self.flowlet_collisions,
            "latency_ns": {
                "samples": latency.samples,
                "p50": latency.quantile(0.5),
                "p99": latency.quantile(0.99),
                "p999": latency.quantile(0.999),
                "max": latency.max_ns,
            },
            "cores": cores,
        });
        if let Some(control) = &self.control {
            let mut object = Map::new();
            for row in &CONTROL_COUNTERS {
                let value = match row.value {
                    ControlValue::PerPort(get) => Value::Object(
                        config
                            .ports
                            .iter()
                            .zip(get(control))
                            .map(|(port, value)| (port.name.clone(), json!(value)))
                            .collect(),
                    ),
                    ControlValue::PerReason(get) => Value::Object(
                        schema::route_reasons()
                            .enumerate()
                            .map(|(index, reason)| {
                                (reason.to_string(), json!(get(control).get(index).copied().unwrap_or(0)))
                            })
                            .collect(),
                    ),
                    ControlValue::One(get) | ControlValue::Nanoseconds(get) => json!(get(control)),
                };
                object.insert(row.json.into(), value);
            }
            document["control"] = Value::Object(object);
        }
        document
    }

    /// The live counter table, like testpmd's `--stats-period`: per port, packet and bit rates
    /// and the drops, PFC frames and ECN marks since `previous`, `seconds` ago; then per core
    /// cycles per packet and busy share, and the latency percentiles so far. Bit rates count
    /// frame bytes without FCS, preamble or gap.
    pub fn rate_table(&self, previous: &SwitchStats, seconds: f64, config: &Config) -> String {
        let seconds = seconds.max(1e-9);
        let mut table = format!(
            "{:<12} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>10}",
            "port", "rx Mpps", "rx Gb/s", "tx Mpps", "tx Gb/s", "drops", "XOFF tx", "PFC rx", "ECN marks"
        );
        let empty = PortStats::default();
        for (index, port) in config.ports.iter().enumerate() {
            let now = &self.ports[index];
            let before = previous.ports.get(index).unwrap_or(&empty);
            let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / seconds;
            let marks = |stats: &PortStats| stats.queues.iter().map(|q| q.ecn_marked).sum::<u64>();
            table.push_str(&format!(
                "\n{:<12} {:>9.3} {:>9.2} {:>9.3} {:>9.2} {:>10} {:>9} {:>9} {:>10}",
                port.name,
                rate(now.rx_packets, before.rx_packets) / 1e6,
                rate(now.rx_bytes, before.rx_bytes) * 8.0 / 1e9,
                rate(now.tx_packets, before.tx_packets) / 1e6,
                rate(now.tx_bytes, before.tx_bytes) * 8.0 / 1e9,
                now.dropped().saturating_sub(before.dropped()),
                now.pfc_xoff_tx.iter().sum::<u64>().saturating_sub(before.pfc_xoff_tx.iter().sum()),
                now.pfc_rx.iter().sum::<u64>().saturating_sub(before.pfc_rx.iter().sum()),
                marks(now).saturating_sub(marks(before)),
            ));
        }
        for core in &self.cores {
            table.push_str(&format!(
                "\nlcore {}: {:.0} cycles/pkt, busy {:.0}%",
                core.lcore,
                core.cycles_per_packet(),
                core.busy_percent()
            ));
        }
        if self.latency.samples > 0 {
            table.push_str(&format!(
                "\nlatency p50 {} ns, p99 {} ns, p99.9 {} ns",
                self.latency.quantile(0.5),
                self.latency.quantile(0.99),
                self.latency.quantile(0.999)
            ));
        }
        table
    }

    /// One line of totals for periodic logs.
    pub fn summary_line(&self, config: &Config) -> String {
        let mut line = format!("rx {} tx {} drop {}", self.rx_packets(), self.tx_packets(), self.dropped());
        for core in &self.cores {
            line.push_str(&format!(
                " | lcore {} {:.0} cycles/pkt busy {:.0}%",
                core.lcore,
                core.cycles_per_packet(),
                core.busy_percent()
            ));
        }
        if self.latency.samples > 0 {
            line.push_str(&format!(
                " | latency p50 {} p99 {} ns",
                self.latency.quantile(0.5),
                self.latency.quantile(0.99)
            ));
        }
        for (port, stats) in config.ports.iter().zip(&self.ports) {
            line.push_str(&format!(
                " | {} rx {} tx {} drop {}",
                port.name,
                stats.rx_packets,
                stats.tx_packets,
                stats.dropped()
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_since_the_last_clear_stay_under_the_persistent_ones() {
        let mut queue = QueueStats::default();
        // Ten 60-byte frames hold ten cells; then five.
        queue.peak(600, 2_560);
        queue.peak(300, 1_280);
        assert_eq!((queue.watermark_bytes, queue.max_depth_bytes), (600, 600));
        assert_eq!((queue.watermark_cell_bytes, queue.max_depth_cell_bytes), (2_560, 2_560));
        let mut group = GroupStats::default();
        group.peak(10_240, 2_048);
        group.peak(4_096, 0);
        assert_eq!((group.max_bytes, group.max_shared_bytes, group.max_headroom_bytes), (10_240, 8_192, 2_048));
        // A later burst all in the pool, below the record total but above its shared part:
        // the shared peak is its own (67,840 bytes after 49,920 shared of a larger total).
        let mut parts = GroupStats::default();
        parts.peak(70_000, 20_080);
        parts.peak(67_840, 0);
        assert_eq!((parts.max_bytes, parts.max_shared_bytes, parts.max_headroom_bytes), (70_000, 67_840, 20_080));
        assert_eq!((parts.watermark_bytes, parts.watermark_shared_bytes), (70_000, 67_840));
        let mut stats = SwitchStats { ports: vec![PortStats::default()], ..SwitchStats::default() };
        stats.ports[0].queues[3] = queue;
        stats.ports[0].priority_groups[3] = group;
        stats.clear_watermarks(WatermarkClear::User);
        let port = &mut stats.ports[0];
        let (queue, group) = (&mut port.queues[3], &mut port.priority_groups[3]);
        assert_eq!((queue.watermark_bytes, queue.max_depth_bytes), (0, 600), "the persistent one stays");
        assert_eq!((queue.watermark_cell_bytes, queue.max_depth_cell_bytes), (0, 2_560), "in cells too");
        // One 200-byte frame: one cell. The units peak apart (a 1,000-byte frame's four cells
        // are below the ten 60-byte frames').
        queue.peak(200, 256);
        assert_eq!((queue.watermark_bytes, queue.max_depth_bytes), (200, 600));
        assert_eq!((queue.watermark_cell_bytes, queue.max_depth_cell_bytes), (256, 2_560));
        queue.peak(1_000, 1_024);
        assert_eq!((queue.watermark_bytes, queue.max_depth_bytes), (1_000, 1_000));
        assert_eq!((queue.watermark_cell_bytes, queue.max_depth_cell_bytes), (1_024, 2_560));
        group.peak(3_072, 1_024);
        assert_eq!(
            (group.watermark_bytes, group.watermark_shared_bytes, group.watermark_headroom_bytes),
            (3_072, 2_048, 1_024)
        );
        assert_eq!((group.max_bytes, group.max_headroom_bytes), (10_240, 2_048));
        stats.clear_watermarks(WatermarkClear::Persistent);
        assert_eq!(stats.ports[0].queues[3], QueueStats::default());
        assert_eq!(stats.ports[0].priority_groups[3], GroupStats::default());
        // Workers' peaks merge by the maximum.
        let mut other = stats.clone();
        other.ports[0].queues[3].peak(900, 1_024);
        stats.ports[0].queues[3].peak(100, 2_048);
        stats.add(&other);
        assert_eq!(stats.ports[0].queues[3].watermark_bytes, 900);
        assert_eq!(stats.ports[0].queues[3].watermark_cell_bytes, 2_048);
    }

    #[test]
    fn counters_since_a_clear_count_from_it_and_gauges_and_peaks_stay() {
        let mut baseline = SwitchStats {
            ports: vec![PortStats::default()],
            acl: vec![vec![AclRuleStats::default()]],
            ..SwitchStats::default()
        };
        let port = &mut baseline.ports[0];
        (port.rx_packets, port.tx_bytes, port.pfc_xoff_tx[3]) = (100, 64_000, 7);
        port.count_drop(DropReason::BufferFull);
        (port.queues[3].tx_packets, port.queues[3].ecn_marked, port.queues[3].depth_bytes) = (90, 5, 1_000);
        port.queues[3].peak(3_000, 4_096);
        baseline.acl[0][0] = AclRuleStats { packets: 10, bytes: 640 };
        baseline
            .next_hop_groups
            .push(NextHopGroupStats { members: vec![(0, "10.0.0.1".parse().unwrap())], sent: vec![40] });
        let mut now = baseline.clone();
        let port = &mut now.ports[0];
        (port.rx_packets, port.tx_bytes, port.pfc_xoff_tx[3]) = (150, 96_000, 9);
        (port.queues[3].tx_packets, port.queues[3].ecn_marked, port.queues[3].depth_bytes) = (130, 5, 2_000);
        now.acl[0][0] = AclRuleStats { packets: 4, bytes: 256 }; // restarted
        now.next_hop_groups[0].sent[0] = 45;
        let view = now.since(&baseline);
        let port = &view.ports[0];
        assert_eq!((port.rx_packets, port.tx_bytes, port.pfc_xoff_tx[3], port.dropped()), (50, 32_000, 2, 0));
        assert_eq!((port.queues[3].tx_packets, port.queues[3].ecn_marked), (40, 0));
        assert_eq!(port.queues[3].depth_bytes, 2_000, "a gauge is what it is");
        assert_eq!(port.queues[3].max_depth_bytes, 3_000, "a peak too");
        assert_eq!(view.acl[0][0], AclRuleStats::default(), "never below zero");
        assert_eq!(view.next_hop_groups[0].sent, [5]);
        assert_eq!(now.ports[0].rx_packets, 150, "the counters themselves are untouched");
    }

    /// docs/STATS.md is the contract: it names every row's JSON field, metric and telemetry
    /// name, so a new counter cannot go undocumented.
    #[test]
    fn the_contract_page_names_every_counter() {
        let page = include_str!("../../../docs/STATS.md");
        let mut names: Vec<String> = Vec::new();
        let mut add = |json: &str, metric: &str, stem: &str, labels: Labels| {
            names.push(format!("`{metric}`"));
            let leaf = json.rsplit('.').next().unwrap();
            names.push(format!("{leaf}`"));
            if stem != "-" {
                names.push(match labels {
                    Labels::One => format!("{stem}`"),
                    Labels::Priority => format!("`{stem}_p<N>`"),
                    Labels::Queue => format!("`{stem}_q<N>`"),
                    Labels::DropReason => format!("`{stem}_<reason>`"),
                    Labels::CoppClass => format!("`{stem}_<class>`"),
                });
            }
        };
        for row in &PORT_COUNTERS {
            add(row.json, row.metric, row.telemetry.1, row.labels);
        }
        for row in &QUEUE_COUNTERS {
            add(row.json, row.metric, &format!("tc<N>_{}", row.telemetry.1), row.labels);
        }
        for row in &GROUP_COUNTERS {
            add(row.json, row.metric, &format!("{}_pg<N>", row.telemetry.1), Labels::One);
        }
        for row in &CORE_COUNTERS {
            add(row.json, row.metric, "-", row.labels);
        }
        for row in &CONTROL_COUNTERS {
            add(row.json, row.metric, row.telemetry, Labels::One);
        }
        for name in names {
            assert!(page.contains(&name), "docs/STATS.md does not name {name}");
        }
    }

    #[test]
    fn rate_table_gives_rates_and_counts_since_the_previous_snapshot() {
        let text = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n";
        let config = Config::parse(text, "t.toml").unwrap();
        let before = SwitchStats::new(&config);
        let mut now = before.clone();
        let port = &mut now.ports[0];
        port.rx_packets = 3_000_000;
        port.rx_bytes = 3_000_000 * 125; // 3 Gb over 2 s
        port.tx_packets = 1_000_000;
        port.tx_bytes = 1_000_000 * 250;
        port.drops[0] = 7;
        port.pfc_xoff_tx[3] = 4;
        port.queues[3].ecn_marked = 9;
        let table = now.rate_table(&before, 2.0, &config);
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row, ["p0", "1.500", "1.50", "0.500", "1.00", "7", "4", "0", "9"]);
        // Nothing new since: zero rates and counts.
        let idle: Vec<String> =
            now.rate_table(&now, 1.0, &config).lines().nth(1).unwrap().split_whitespace().map(String::from).collect();
        assert_eq!(idle, ["p0", "0.000", "0.00", "0.000", "0.00", "0", "0", "0", "0"]);
    }
}
