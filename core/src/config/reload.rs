//! What a live reload may change in a running switch, and what needs a restart.
//!
//! A reload (`raceway reload`, SIGHUP) re-reads the config file; `live_changes` compares the
//! new config with the running one. The parts the workers apply between bursts
//! (`Switch::reconfigure`) are the QoS maps, the scheduler, the buffer pools and PFC
//! thresholds, the PFC watchdog, the ECN profiles, trimming, the CoPP rates, the ACL
//! tables and sFlow. A port's addresses and MTU apply live too, through its host interface
//! and its state, and the static routes, neighbours, groups and ports' `peer_mac` through the
//! FIB (the engine does these: `port addresses`, `port mtu`, `routes`, `neighbors`, `groups`,
//! `port peer_mac`). A change anywhere else is refused, naming its key:
//! - the ports, lcores, EAL and buffer size shape what the process opened and allocated;
//! - which traffic classes are lossless, the priority groups and the pause-to-queue map say
//!   how the frames already queued were charged, and are read again when they leave.
//!
//! Invariant: `live_changes` accepts a config only when every difference from the running
//! one is in a part `Switch::reconfigure` applies; then the two configs differ in nothing a
//! worker reads elsewhere.

use super::{Config, PortConfig};

/// Why a reload was refused: the first key that differs and cannot change live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub key: String,
    pub problem: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.problem)
    }
}

/// What a restart-only key's refusal says.
const RESTART: &str = "changed; this needs a restart (raceway reload applies QoS, ECN, PFC thresholds, the watchdog, trimming, CoPP rates and sources, ACLs, sFlow, routes, neighbours, groups, and ports' addresses, MTUs and peer MACs)";

/// The sections that differ between `running` and `new`, all of which apply live (empty when
/// nothing changed); or the first key that cannot change without a restart.
pub fn live_changes(running: &Config, new: &Config) -> Result<Vec<&'static str>, Refused> {
    let refuse = |key: &str, problem: &str| Err(Refused { key: key.to_string(), problem: problem.to_string() });
    let restart_keys: [(&str, bool); 7] = [
        ("switch.name", running.name != new.name),
        ("switch.mac", running.mac != new.mac),
        ("switch.buffer_bytes", running.buffer_bytes != new.buffer_bytes),
        ("switch.mtu", running.mtu != new.mtu),
        ("dpdk.eal", running.eal != new.eal),
        ("dpdk.lcores", running.lcores != new.lcores),
        ("dpdk.mbuf_bytes", running.mbuf_bytes != new.mbuf_bytes),
    ];
    if let Some((key, _)) = restart_keys.iter().find(|(_, changed)| *changed) {
        return refuse(key, RESTART);
    }
    let names = |config: &Config| config.ports.iter().map(|port| port.name.clone()).collect::<Vec<_>>();
    if names(running) != names(new) {
        return refuse("port", "ports were added, removed, renamed or reordered; this needs a restart");
    }
    for (old, port) in running.ports.iter().zip(&new.ports) {
        if let Some(field) = port_change(old, port) {
            return refuse(&format!("port.{}.{field}", port.name), RESTART);
        }
    }
    if let (Some(old), Some(sflow)) = (&running.sflow, &new.sflow) {
        if old.through_ports != sflow.through_ports {
            return refuse("sflow.namespace", RESTART);
        }
    }
    match (&running.control, &new.control) {
        (None, None) => {}
        (Some(old), Some(control)) => {
            let fixed = [
                ("control.netns", old.netns != control.netns),
                ("control.control_tc", old.control_tc != control.control_tc),
                ("control.multipath_mode", old.multipath_mode != control.multipath_mode),
                ("control.punt_ethertypes", old.punt_ethertypes != control.punt_ethertypes),
                ("control.keep_interfaces_s", old.keep_interfaces_s != control.keep_interfaces_s),
                ("control.copp.scope", old.copp_scope != control.copp_scope),
            ];
            if let Some((key, _)) = fixed.iter().find(|(_, changed)| *changed) {
                return refuse(key, RESTART);
            }
        }
        _ => return refuse("control", "[control] was added or removed; this needs a restart"),
    }
    let (old, qos) = (&running.qos, &new.qos);
    if (old.lossless_tcs, old.lossless_pgs, old.pg_priorities)
        != (qos.lossless_tcs, qos.lossless_pgs, qos.pg_priorities)
    {
        return refuse(
            "qos.lossless",
            &format!(
                "the lossless traffic classes would be {:#010b} instead of {:#010b} (qos.lossless, qos.dscp_to_tc, \
                 qos.pcp_to_tc, qos.dscp_to_pfc_priority); queued frames are counted by class, so this needs a restart",
                qos.lossless_tcs, old.lossless_tcs
            ),
        );
    }
    for (key, changed) in
        [("qos.tc_to_pg", old.tc_to_pg != qos.tc_to_pg), ("qos.pfc_to_queue", old.pfc_to_queue != qos.pfc_to_queue)]
    {
        if changed {
            return refuse(key, RESTART);
        }
    }
    let live = [
        (
            "qos maps",
            (old.trust, old.dscp_to_tc, old.pcp_to_tc, old.dscp_to_priority)
                != (qos.trust, qos.dscp_to_tc, qos.pcp_to_tc, qos.dscp_to_priority),
        ),
        ("qos.scheduler", (old.strict_mask, old.dwrr_weights) != (qos.strict_mask, qos.dwrr_weights)),
        ("qos.buffer", old.buffer != qos.buffer),
        ("qos.pfc", old.pfc != qos.pfc),
        ("qos.pfc_watchdog", old.watchdog != qos.watchdog),
        ("qos.ecn", old.ecn != qos.ecn),
        ("qos.trim", old.trim != qos.trim || running.ports.iter().zip(&new.ports).any(|(a, b)| a.trim != b.trim)),
        ("control.copp", running.control.as_ref().map(|c| c.copp) != new.control.as_ref().map(|c| c.copp)),
        ("control.acl", running.control.as_ref().map(|c| &c.acl) != new.control.as_ref().map(|c| &c.acl)),
        ("routes", running.routes != new.routes),
        ("neighbors", running.neighbors != new.neighbors),
        ("groups", running.groups != new.groups),
        ("port peer_mac", running.ports.iter().zip(&new.ports).any(|(a, b)| a.peer_mac != b.peer_mac)),
        ("port addresses", running.ports.iter().zip(&new.ports).any(|(a, b)| a.addresses != b.addresses)),
        ("port mtu", running.ports.iter().zip(&new.ports).any(|(a, b)| a.mtu != b.mtu)),
        ("acl", running.acls != new.acls),
        ("sflow", running.sflow != new.sflow),
    ];
    Ok(live.iter().filter(|(_, changed)| *changed).map(|(section, _)| *section).collect())
}

/// Whether the FIB `new` builds differs from `running`'s: its static routes, neighbours,
/// groups or peers' MACs.
pub fn fib_changed(running: &Config, new: &Config) -> bool {
    running.routes != new.routes || running.neighbors != new.neighbors || fib_layout_changed(running, new)
}

/// Whether what a FIB is laid out by changed: the groups (they lead its group table) or a
/// peer's MAC (in the groups' members and the ports' routes).
pub fn fib_layout_changed(running: &Config, new: &Config) -> bool {
    running.groups != new.groups || running.ports.iter().zip(&new.ports).any(|(a, b)| a.peer_mac != b.peer_mac)
}

/// A port's first field that differs and cannot change live.
fn port_change(old: &PortConfig, port: &PortConfig) -> Option<&'static str> {
    let fields = [
        ("device", old.device != port.device),
        ("speed_gbps", old.speed_mbps != port.speed_mbps),
        ("cable_m", old.cable_m != port.cable_m),
        ("enabled", old.enabled != port.enabled),
        ("pause", old.honour_pause != port.honour_pause),
        ("pfc_tx_queue", old.pfc_tx_queue != port.pfc_tx_queue),
        ("rx_queues", old.rx_queues != port.rx_queues),
        ("peer_response_quanta", old.peer_response_quanta != port.peer_response_quanta),
    ];
    fields.iter().find(|(_, changed)| *changed).map(|&(field, _)| field)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[switch]
name = "leaf"
mac = "02:00:00:00:00:01"
[qos]
dscp_to_tc = { "26" = 3, "46" = 5 }
lossless = [3]
[qos.ecn.3]
kmin_bytes = 100000
kmax_bytes = 400000
pmax = 0.1
[[port]]
name = "p0"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "p1"
speed_gbps = 100
peer_mac = "02:00:00:00:10:01"
"#;

    fn config(text: &str) -> Config {
        Config::parse(text, "leaf.toml").unwrap_or_else(|err| panic!("{err}"))
    }

    /// `BASE` with `from` replaced by `to` (which must occur).
    fn edited(from: &str, to: &str) -> Config {
        assert!(BASE.contains(from), "{from}");
        config(&BASE.replacen(from, to, 1))
    }

    #[test]
    fn live_sections_are_named_and_nothing_changed_is_none() {
        let running = config(BASE);
        assert_eq!(live_changes(&running, &config(BASE)), Ok(vec![]));
        let cases = [
            ("kmin_bytes = 100000", "kmin_bytes = 50000", "qos.ecn"),
            ("\"46\" = 5", "\"46\" = 6", "qos maps"),
            // DSCP 26 leaves TC 3, which stays lossless for PCP 3.
            ("\"26\" = 3", "\"26\" = 4", "qos maps"),
            ("lossless = [3]", "lossless = [3]\n[qos.scheduler]\ndwrr = { \"0\" = 10 }", "qos.scheduler"),
            ("lossless = [3]", "lossless = [3]\n[qos.pfc]\nxoff_bytes = 60000", "qos.pfc"),
            ("lossless = [3]", "lossless = [3]\n[qos.pfc_watchdog]\naction = \"forward\"", "qos.pfc_watchdog"),
            (
                "[[port]]\nname = \"p0\"",
                "[[acl]]\nname = \"a\"\nports = [\"p0\"]\n[[acl.rule]]\npriority = 1\naction = \"drop\"\n[[port]]\nname = \"p0\"",
                "acl",
            ),
            ("name = \"p0\"", "name = \"p0\"\nmtu = 1500", "port mtu"),
        ];
        for (from, to, section) in cases {
            assert_eq!(live_changes(&running, &edited(from, to)), Ok(vec![section]), "{to}");
        }
    }

    /// Which reloads give a new FIB, and which of those a new layout (the control plane's
    /// writer built again from a fresh dump).
    #[test]
    fn routes_neighbours_groups_and_peer_macs_change_the_fib_and_groups_and_macs_its_layout() {
        let running = config(BASE);
        let route = "[[route]]\nprefix = \"10.9.0.0/16\"\nport = \"p0\"\n[[port]]\nname = \"p0\"";
        let neighbor =
            "[[neighbor]]\nport = \"p0\"\nip = \"10.0.0.9\"\nmac = \"02:00:00:00:10:09\"\n[[port]]\nname = \"p0\"";
        let group = "[[group]]\nname = \"g\"\nports = [\"p0\", \"p1\"]\n[[port]]\nname = \"p0\"";
        let cases = [
            (("pmax = 0.1", "pmax = 0.2"), (false, false)),
            (("[[port]]\nname = \"p0\"", route), (true, false)),
            (("[[port]]\nname = \"p0\"", neighbor), (true, false)),
            (("[[port]]\nname = \"p0\"", group), (true, true)),
            (("peer_mac = \"02:00:00:00:10:00\"", "peer_mac = \"02:00:00:00:10:07\""), (true, true)),
            (("peer_mac = \"02:00:00:00:10:01\"", "peer_mac = \"02:00:00:00:10:07\""), (true, true)),
        ];
        for ((from, to), expected) in cases {
            let new = edited(from, to);
            assert_ne!(new, running, "{to}");
            assert_eq!((fib_changed(&running, &new), fib_layout_changed(&running, &new)), expected, "{to}");
        }
    }

    #[test]
    fn a_change_that_needs_a_restart_names_its_key() {
        let running = config(BASE);
        let cases = [
            ("name = \"leaf\"", "name = \"leaf2\"", "switch.name"),
            (
                "speed_gbps = 100\npeer_mac = \"02:00:00:00:10:01\"",
                "speed_gbps = 25\npeer_mac = \"02:00:00:00:10:01\"",
                "port.p1.speed_gbps",
            ),
            ("name = \"p1\"", "name = \"p9\"", "port"),
            ("lossless = [3]", "lossless = [3, 4]", "qos.lossless"),
            ("lossless = [3]", "lossless = [3]\ntc_to_pg = { \"0\" = 1, \"1\" = 0 }", "qos.tc_to_pg"),
        ];
        for (from, to, key) in cases {
            let refused = live_changes(&running, &edited(from, to)).unwrap_err();
            assert_eq!(refused.key, key, "{to}");
            assert!(refused.problem.contains("restart"), "{refused}");
        }
        let routed = edited(
            "[[port]]\nname = \"p0\"",
            "[[route]]\nprefix = \"10.9.0.0/16\"\nport = \"p0\"\n[[port]]\nname = \"p0\"",
        );
        assert_eq!(live_changes(&running, &routed), Ok(vec!["routes"]), "a static route is live");
        let grouped = edited(
            "[[port]]\nname = \"p0\"",
            "[[group]]\nname = \"g\"\nports = [\"p0\", \"p1\"]\n[[port]]\nname = \"p0\"",
        );
        assert_eq!(live_changes(&running, &grouped), Ok(vec!["groups"]), "a group is live");
        let moved = edited("peer_mac = \"02:00:00:00:10:01\"", "peer_mac = \"02:00:00:00:10:09\"");
        assert_eq!(live_changes(&running, &moved), Ok(vec!["port peer_mac"]), "a peer's MAC is live");
    }
}
