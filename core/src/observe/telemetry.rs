//! What raceway answers over DPDK telemetry (`dpdk-telemetry.py`): `/raceway/ports`,
//! `/raceway/queues`, `/raceway/pfc` and `/raceway/groups`, each an object keyed by port (or
//! group) whose values are counters. The DPDK side (registration, the C callback) lives in
//! `dpdk`; this module only turns a stats snapshot into replies.
//!
//! Invariant: replies are built from one published snapshot, the numbers of the stats JSON and
//! the metrics endpoint, and every name is a fixed pattern (`tc3_depth_bytes`,
//! `xoff_sent_p3`, `drops_buffer_full`), so scripts can rely on them.

use crate::config::Config;
use crate::counters::{
    ControlValue, Counter, Section, SwitchStats, CONTROL_COUNTERS, GROUP_COUNTERS, PORT_COUNTERS, QUEUE_COUNTERS,
};
use crate::units::TRAFFIC_CLASSES;
use std::ffi::CStr;

/// The commands and their help lines.
pub const COMMANDS: [(&CStr, &CStr); 5] = [
    (c"/raceway/ports", c"Per port: rx/tx packets and bytes, drops and punts by reason."),
    (c"/raceway/queues", c"Per port: each traffic class's depth, peak depth, tx, drops and ECN marks."),
    (c"/raceway/pfc", c"Per port: PFC frames sent and received, watchdog events, lossless group peaks, per priority."),
    (c"/raceway/groups", c"Per port group: frames queued to each member."),
    (
        c"/raceway/control",
        c"The control plane: FIB generation, routes, neighbours, last update; per port injected frames and errors.",
    ),
];

/// `raceway show`'s command (`raceway::show`): answered with a page of a JSON document.
pub const SHOW: (&CStr, &CStr) =
    (c"/raceway/show", c"raceway show's pages: TOKEN VIEW PAGE (views: state, fib, clear, clear-persistent).");

/// A reply: (section, [(name, value)]).
pub type Reply = Vec<(String, Vec<(String, u64)>)>;

/// The values of `rows` for one owner in `section`: `<stem>` per value, with the label
/// appended (`_p3`, `_buffer_full`) or the queue prefixed (`tc3_`).
fn section_values<S>(
    rows: &[Counter<S>],
    section: Section,
    stats: &S,
    prefix: &str,
    suffix: &str,
) -> Vec<(String, u64)> {
    rows.iter()
        .filter(|row| row.telemetry.0 == section)
        .flat_map(|row| {
            (row.get)(stats).iter().enumerate().map(move |(index, &value)| {
                (format!("{prefix}{}{suffix}", row.labels.telemetry_name(row.telemetry.1, index)), value)
            })
        })
        .collect()
}

/// The reply to `command`, or `None` when it is not one of `COMMANDS`; every value comes from
/// the schema in `stats`.
pub fn reply(command: &str, stats: &SwitchStats, config: &Config) -> Option<Reply> {
    let ports = config.ports.iter().zip(&stats.ports);
    let lossless = |&pg: &usize| config.qos.pg_lossless(pg);
    let reply = match command {
        "/raceway/ports" => ports
            .map(|(port, s)| (port.name.clone(), section_values(&PORT_COUNTERS, Section::Ports, s, "", "")))
            .collect(),
        "/raceway/queues" => ports
            .map(|(port, s)| {
                let values = (0..TRAFFIC_CLASSES)
                    .flat_map(|tc| {
                        section_values(&QUEUE_COUNTERS, Section::Queues, &s.queues[tc], &format!("tc{tc}_"), "")
                    })
                    .collect();
                (port.name.clone(), values)
            })
            .collect(),
        "/raceway/pfc" => ports
            .map(|(port, s)| {
                let mut values = section_values(&PORT_COUNTERS, Section::Pfc, s, "", "");
                for pg in (0..8).filter(lossless) {
                    values.extend(section_values(
                        &GROUP_COUNTERS,
                        Section::Pfc,
                        &s.priority_groups[pg],
                        "",
                        &format!("_pg{pg}"),
                    ));
                }
                (port.name.clone(), values)
            })
            .collect(),
        "/raceway/groups" => stats
            .group_counts(config)
            .into_iter()
            .map(|(group, counts)| {
                let members = counts.into_iter().collect();
                (group, members)
            })
            .collect(),
        "/raceway/control" => {
            let mut reply: Reply = ports
                .enumerate()
                .map(|(index, (port, s))| {
                    let mut values = section_values(&PORT_COUNTERS, Section::Control, s, "", "");
                    for row in &CONTROL_COUNTERS {
                        if let ControlValue::PerPort(get) = row.value {
                            let value = stats.control.as_ref().and_then(|c| get(c).get(index).copied()).unwrap_or(0);
                            values.push((row.telemetry.to_string(), value));
                        }
                    }
                    (port.name.clone(), values)
                })
                .collect();
            if let Some(control) = &stats.control {
                let fib = CONTROL_COUNTERS
                    .iter()
                    .flat_map(|row| match row.value {
                        ControlValue::PerPort(_) => Vec::new(),
                        ControlValue::PerReason(get) => crate::counters::route_reasons()
                            .enumerate()
                            .map(|(index, reason)| {
                                (format!("{}_{reason}", row.telemetry), get(control).get(index).copied().unwrap_or(0))
                            })
                            .collect(),
                        ControlValue::One(get) | ControlValue::Nanoseconds(get) => {
                            vec![(row.telemetry.to_string(), get(control))]
                        }
                    })
                    .collect();
                reply.push(("fib".to_string(), fib));
            }
            reply
        }
        _ => return None,
    };
    Some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_name_every_counter() {
        let text = "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[qos]\nlossless = [3]\n\
            [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:02\"\n\
            [[port]]\nname = \"p1\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:00:03\"\n\
            [[group]]\nname = \"g\"\nports = [\"p0\", \"p1\"]\n";
        let config = Config::parse(text, "t.toml").unwrap();
        let mut stats = SwitchStats::new(&config);
        stats.ports[0].rx_packets = 11;
        stats.ports[1].queues[3].depth_bytes = 4096;
        stats.ports[1].pfc_xoff_tx[3] = 2;
        stats.groups[0][0] = 5;
        let value = |command: &str, section: &str, name: &str| {
            let reply = reply(command, &stats, &config).unwrap();
            let (_, values) = reply.iter().find(|(s, _)| s == section).unwrap();
            values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
        };
        assert_eq!(value("/raceway/ports", "p0", "rx_packets"), Some(11));
        assert_eq!(value("/raceway/ports", "p0", "drops_headroom_overflow"), Some(0));
        assert_eq!(value("/raceway/queues", "p1", "tc3_depth_bytes"), Some(4096));
        assert_eq!(value("/raceway/pfc", "p1", "xoff_sent_p3"), Some(2));
        assert_eq!(value("/raceway/pfc", "p1", "group_max_bytes_pg3"), Some(0));
        assert_eq!(value("/raceway/pfc", "p1", "group_max_bytes_pg0"), None, "lossy groups are not listed");
        assert_eq!(value("/raceway/groups", "g", "p0"), Some(5));
        assert!(reply("/raceway/nothing", &stats, &config).is_none());
        // DPDK's dicts hold at most 256 entries.
        for (command, _) in COMMANDS {
            for (_, values) in reply(command.to_str().unwrap(), &stats, &config).unwrap() {
                assert!(values.len() <= 256);
            }
        }
    }
}
