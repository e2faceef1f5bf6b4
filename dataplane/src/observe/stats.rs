//! Counters and the stats JSON (docs/STATS.md is its contract).
//!
//! Invariant: rx/tx counters count data frames only; PFC frames are counted in
//! `pfc_rx` (once per enabled priority) and `pfc_xoff_tx`/`pfc_xon_tx` (an ignored PAUSE is a
//! received frame dropped as `pause_ignored`). So, summed over ports,
//! rx_packets + injected = tx_packets + drops + punted + packets still queued. Port `drops` are charged to the
//! port the packet came in on; a queue's `dropped` to the egress queue that refused it.
//! `priority_groups` (lossless priorities only) give each ingress group's peak occupancy and
//! peak headroom use, in buffer cell bytes; `pfc_watchdog` counts storms and restorations per
//! priority of the egress port.
//! Workers own their counters; the main core sums them with `add`.

#![forbid(unsafe_code)]

use crate::config::{Config, TRAFFIC_CLASSES};
use crate::drops::DropReason;
use crate::observe::latency::LatencyHistogram;
use crate::pipeline::punt::PuntReason;
use serde_json::{json, Map, Value};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub ecn_marked: u64,
    pub dropped: u64,
    pub max_depth_bytes: u64,
    /// Frame bytes queued when the counters were published (a gauge; live workers refresh it
    /// every publish period, replay at the end, when it is 0).
    pub depth_bytes: u64,
}

/// Peaks of one (ingress port, priority) group, in buffer cell bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub max_bytes: u64,
    pub max_headroom_bytes: u64,
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
    pub drops: [u64; DropReason::COUNT],
    /// Frames handed to the control plane, per `PuntReason`.
    pub punted: [u64; PuntReason::COUNT],
    /// Frames the control plane sent out of this port (its host interface).
    pub injected: u64,
    pub queues: [QueueStats; TRAFFIC_CLASSES],
    pub priority_groups: [GroupStats; 8],
    pub watchdog_storms: [u64; 8],
    pub watchdog_restorations: [u64; 8],
}

impl PortStats {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchStats {
    pub ports: Vec<PortStats>,
    /// Packets queued to each member, per group, in config order.
    pub groups: Vec<Vec<u64>>,
    /// Time frames spend in the switch, from being received to being handed to transmit
    /// (virtual time in replay, TSC time live).
    pub latency: LatencyHistogram,
    /// Per forwarding core (live only).
    pub cores: Vec<CoreStats>,
    /// The control plane's (live, with `[control]`).
    pub control: Option<ControlStats>,
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
            latency: LatencyHistogram::default(),
            cores: Vec::new(),
            control: None,
        }
    }

    /// Adds another worker's counters; depths take the maximum.
    pub fn add(&mut self, other: &SwitchStats) {
        for (mine, theirs) in self.ports.iter_mut().zip(&other.ports) {
            mine.rx_packets += theirs.rx_packets;
            mine.rx_bytes += theirs.rx_bytes;
            mine.tx_packets += theirs.tx_packets;
            mine.tx_bytes += theirs.tx_bytes;
            for p in 0..8 {
                mine.pfc_xoff_tx[p] += theirs.pfc_xoff_tx[p];
                mine.pfc_xon_tx[p] += theirs.pfc_xon_tx[p];
                mine.pfc_rx[p] += theirs.pfc_rx[p];
                mine.watchdog_storms[p] += theirs.watchdog_storms[p];
                mine.watchdog_restorations[p] += theirs.watchdog_restorations[p];
                let (a, b) = (&mut mine.priority_groups[p], &theirs.priority_groups[p]);
                a.max_bytes = a.max_bytes.max(b.max_bytes);
                a.max_headroom_bytes = a.max_headroom_bytes.max(b.max_headroom_bytes);
            }
            for (a, b) in mine.drops.iter_mut().zip(&theirs.drops) {
                *a += b;
            }
            for (a, b) in mine.punted.iter_mut().zip(&theirs.punted) {
                *a += b;
            }
            mine.injected += theirs.injected;
            for (a, b) in mine.queues.iter_mut().zip(&theirs.queues) {
                a.tx_packets += b.tx_packets;
                a.tx_bytes += b.tx_bytes;
                a.ecn_marked += b.ecn_marked;
                a.dropped += b.dropped;
                a.max_depth_bytes = a.max_depth_bytes.max(b.max_depth_bytes);
                a.depth_bytes += b.depth_bytes;
            }
        }
        self.latency.add(&other.latency);
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
            let mut drops = Map::new();
            for reason in DropReason::ALL {
                drops.insert(reason.name().into(), json!(stats.drops[reason.index()]));
            }
            let mut punted = Map::new();
            for reason in PuntReason::ALL {
                punted.insert(reason.name().into(), json!(stats.punted[reason.index()]));
            }
            let queues: Vec<Value> = stats
                .queues
                .iter()
                .enumerate()
                .map(|(tc, queue)| {
                    json!({
                        "tc": tc,
                        "tx_packets": queue.tx_packets,
                        "tx_bytes": queue.tx_bytes,
                        "ecn_marked": queue.ecn_marked,
                        "dropped": queue.dropped,
                        "max_depth_bytes": queue.max_depth_bytes,
                        "depth_bytes": queue.depth_bytes,
                    })
                })
                .collect();
            ports.insert(
                port.name.clone(),
                json!({
                    "rx_packets": stats.rx_packets,
                    "rx_bytes": stats.rx_bytes,
                    "tx_packets": stats.tx_packets,
                    "tx_bytes": stats.tx_bytes,
                    "pfc_xoff_tx": stats.pfc_xoff_tx,
                    "pfc_xon_tx": stats.pfc_xon_tx,
                    "pfc_rx": stats.pfc_rx,
                    "drops": drops,
                    "punted": punted,
                    "injected": stats.injected,
                    "queues": queues,
                    "pfc_watchdog": {
                        "storms": stats.watchdog_storms,
                        "restorations": stats.watchdog_restorations,
                    },
                    "priority_groups": stats.priority_groups.iter().enumerate()
                        .filter(|(priority, _)| config.qos.lossless_mask & (1 << priority) != 0)
                        .map(|(priority, group)| json!({
                            "priority": priority,
                            "max_bytes": group.max_bytes,
                            "max_headroom_bytes": group.max_headroom_bytes,
                        }))
                        .collect::<Vec<Value>>(),
                }),
            );
        }
        let mut groups = Map::new();
        for (group, counts) in config.groups.iter().zip(&self.groups) {
            let mut members = Map::new();
            for (&port, count) in group.members.iter().zip(counts) {
                members.insert(config.ports[port].name.clone(), json!(count));
            }
            groups.insert(group.name.clone(), Value::Object(members));
        }
        let latency = &self.latency;
        let cores: Vec<Value> = self
            .cores
            .iter()
            .map(|core| {
                json!({
                    "lcore": core.lcore,
                    "packets": core.packets,
                    "busy_cycles": core.busy_cycles,
                    "idle_cycles": core.idle_cycles,
                    "cycles_per_packet": (core.cycles_per_packet() * 10.0).round() / 10.0,
                    "busy_percent": (core.busy_percent() * 10.0).round() / 10.0,
                })
            })
            .collect();
        let mut document = json!({
            "ports": ports,
            "groups": groups,
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
            let per_port = |values: &[u64]| -> Map<String, Value> {
                config.ports.iter().zip(values).map(|(port, value)| (port.name.clone(), json!(value))).collect()
            };
            document["control"] = json!({
                "punt_tap_errors": per_port(&control.punt_tap_errors),
                "inject_dropped": per_port(&control.inject_dropped),
                "fib_generation": control.fib_generation,
                "fib_routes": control.fib_routes,
                "fib_neighbors": control.fib_neighbors,
                "last_update_ns": control.last_update_ns,
            });
        }
        document
    }

    /// One line of totals for periodic logs.
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
