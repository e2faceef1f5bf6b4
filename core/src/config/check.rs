//! `raceway check`: what a config means once derived: ports and their wire times, the control
//! plane, routes, groups, QoS maps, the buffer's pools and every port's PFC thresholds and
//! headroom, and warnings where settings work against each other (ECN acting after PFC, a
//! control class that is not strict).
//!
//! Invariant: it only reads a validated config; everything it prints is computed by the same
//! functions the switch uses (`config::plan`), so what `check` says is what the switch does.

use super::plan::{self, BufferPlan, Xoff};
use super::CoppClass;
use super::{Config, EcnMeasure, RouteTarget, Trust};
use std::fmt::Write as _;

/// The shortest frame a port receives (no FCS): what holds the most cells per frame byte.
const MIN_FRAME: u64 = 60;

/// `writeln!` into a `String`, which cannot fail.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The buffer's pools, the lossy queue limit, the PFC thresholds of every port, and warnings
/// where ECN would act after PFC.
fn buffer(out: &mut String, config: &Config) {
    let qos = &config.qos;
    let plan = BufferPlan::new(config).expect("validated");
    let alpha = qos.buffer.lossy_alpha;
    // A lone congested queue stops where q = alpha x (pool - q).
    let alone = (plan.lossy_pool as f64 * alpha / (1.0 + alpha)) as u64;
    say!(
        out,
        "  buffer: headroom {} bytes, lossless pool {} bytes, lossy pool {} bytes",
        plan.reserved_headroom,
        plan.lossless_pool,
        plan.lossy_pool
    );
    say!(out,
        "  lossy queue limit: {alpha} x free lossy pool ({} bytes into an empty pool; one congested queue alone stops at {alone})",
        plan.lossy_limit(plan.lossy_pool).min(plan.lossy_pool)
    );
    let lossless: Vec<usize> = (0..8).filter(|&tc| qos.tc_lossless(tc)).collect();
    if lossless.is_empty() {
        say!(out, "  lossless priorities: none (no PFC)");
        return;
    }
    let idle_xoff = plan.xoff(plan.lossless_pool);
    let xoff_text = match plan.xoff {
        Xoff::Static(bytes) => format!("xoff {bytes} bytes"),
        Xoff::Dynamic(alpha) => format!("xoff dynamic: {} x free lossless pool", alpha as f64 / 65536.0),
    };
    say!(out,
        "  lossless priorities {lossless:?}: {xoff_text}; xon {}; watchdog detection {} ms, restoration {} ms, action {:?}",
        match qos.pfc.xon_bytes {
            crate::config::Threshold::Auto => "xoff - 2 x mtu".to_string(),
            crate::config::Threshold::Bytes(bytes) => format!("{bytes} bytes"),
        },
        qos.watchdog.detection_ms,
        qos.watchdog.restoration_ms,
        qos.watchdog.action
    );
    for (port, headroom) in config.ports.iter().zip(&plan.headroom) {
        say!(out,
            "  PFC {:<10} headroom {headroom} bytes per lossless group, xoff {idle_xoff} (idle), xon {} (idle), XOFF lasts {:.1} us, pause answered within {:.2} us (live tx lookahead), the peer's within {} quanta ({:.2} us)",
            port.name,
            plan.xon(idle_xoff),
            plan::quanta_ps(0xffff, port.speed_mbps) as f64 / 1e6,
            plan::lookahead_ps(port) as f64 / 1e6,
            port.peer_response_quanta,
            port.peer_response_ps() as f64 / 1e6
        );
        if qos.pfc.headroom_bytes == crate::config::Threshold::Auto {
            let parts = plan::HeadroomParts::of(port, config.mtu);
            say!(out,
                "    headroom, wire bytes: frame in progress {} + data ahead in the tx queue {} ({}) + PFC frame {} + cable there and back {:.0} + peer's response {} + peer's frame in progress {}{} = {:.0}; as minimum frames (84 wire bytes, one cell each): {} cells",
                parts.frame_in_progress,
                parts.local_lookahead,
                if port.pfc_tx_queue { "PFC has a tx queue of its own" } else { "one tx queue: the shaper's lookahead" },
                parts.pfc_frame,
                parts.cable_round_trip,
                parts.peer_response,
                parts.peer_frame,
                if parts.shared_rx > 0 {
                    format!(" + the other rx queues' last bursts {} ({} queues over workers)", parts.shared_rx, port.rx_queues)
                } else {
                    String::new()
                },
                parts.wire_bytes(),
                parts.cell_bytes() / plan::CELL_BYTES
            );
        }
    }
    for &tc in &lossless {
        let Some(profile) = &qos.ecn[tc] else { continue };
        // Like with like: XOFF counts a group's cells. A profile in frame bytes reaches kmin
        // holding the most cells with the smallest frames (60 bytes in 256).
        let (kmin_cells, unit) = match profile.measure {
            EcnMeasure::Cells => (profile.kmin_bytes, String::new()),
            EcnMeasure::FrameBytes => {
                let cells = profile.kmin_bytes.div_ceil(MIN_FRAME) * plan::charge(MIN_FRAME as usize);
                (cells, format!(" frame bytes ({cells} cell bytes of {MIN_FRAME}-byte frames)"))
            }
        };
        if kmin_cells > idle_xoff {
            say!(out,
                "warning: qos.ecn.{tc}.kmin_bytes {}{unit} is above the XOFF point {idle_xoff}: PFC would pause before ECN marks",
                profile.kmin_bytes
            );
        }
    }
}

/// Packet trimming: which queues trim, to what size, DSCP and queue, on which ports; and
/// warnings where trimmed frames would not jump the queue they were refused in.
fn trim(out: &mut String, config: &Config) {
    let Some(trim) = &config.qos.trim else {
        say!(out, "  trim: off (a refused lossy frame is dropped)");
        return;
    };
    let lines: Vec<String> = (0..8)
        .filter(|&tc| trim.trims(tc))
        .map(|tc| format!("TC{tc} -> DSCP {} in TC{}", trim.dscp[tc], trim.queue[tc]))
        .collect();
    let ports: Vec<&str> = config.ports.iter().filter(|port| port.trim).map(|port| port.name.as_str()).collect();
    let off: Vec<&str> = config.ports.iter().filter(|port| !port.trim).map(|port| port.name.as_str()).collect();
    say!(
        out,
        "  trim: a frame the buffer refuses is cut to {} bytes (its headers kept), remarked and queued: {}; ports {}{}",
        trim.size,
        if lines.is_empty() { "no class".to_string() } else { lines.join("; ") },
        if ports.is_empty() { "none".to_string() } else { ports.join(", ") },
        if off.is_empty() { String::new() } else { format!(" (not {})", off.join(", ")) }
    );
    let strict = config.qos.strict_mask;
    let mut warned = 0u8;
    for tc in (0..8).filter(|&tc| trim.trims(tc)) {
        let queue = usize::from(trim.queue[tc]);
        if queue == tc {
            say!(
                out,
                "warning: qos.trim: TC{tc}'s trimmed frames wait in TC{tc} itself, behind the frames that filled it"
            );
        } else if strict & (1 << queue) == 0 && warned & (1 << queue) == 0 {
            warned |= 1 << queue;
            say!(out,
                "warning: qos.trim: trim queue TC{queue} is not strict (qos.scheduler.strict): trimmed frames, the loss signal, can wait behind data"
            );
        }
    }
}

/// The ACL tables: each with its stage and ports, its rules best first.
fn acls(out: &mut String, config: &Config) {
    for table in &config.acls {
        let ports: Vec<&str> = table.ports.iter().map(|&port| config.ports[port].name.as_str()).collect();
        say!(
            out,
            "acl {}: {} on {}; {} rules, best first (no match: permit)",
            table.name,
            table.stage,
            ports.join(", "),
            table.rules.len()
        );
        for rule in &table.rules {
            say!(out, "  {:>10}  {:<50} {}", rule.priority, rule.describe(), rule.action);
        }
    }
}

/// The PFC maps: the priority frames carry, the groups they are charged to, the queues a
/// received pause holds; and warnings where a lossless priority is not kept lossless.
fn pfc_maps(out: &mut String, qos: &crate::config::Qos) {
    if qos.trust == Trust::Dscp {
        let lines: Vec<String> = (0..8u8)
            .filter_map(|priority| {
                let dscps: Vec<String> =
                    (0..64).filter(|&d| qos.dscp_to_priority[d] == priority).map(|d| d.to_string()).collect();
                match dscps.len() {
                    0 => None,
                    64 => Some(format!("P{priority} <- every DSCP")),
                    _ => Some(format!("P{priority} <- DSCP {}", dscps.join(","))),
                }
            })
            .collect();
        say!(out, "  dscp_to_pfc_priority: {}", lines.join("; "));
    } else {
        say!(out, "  pfc priority: the frame's PCP (untagged: 0)");
    }
    say!(out, "  tc_to_pg: {:?}", qos.tc_to_pg);
    say!(out, "  pfc_to_queue: {:?}", qos.pfc_to_queue);
    let tcs_of = qos.priority_tcs();
    for priority in (0..8).filter(|&p| qos.priority_lossless(p)) {
        let tcs: Vec<usize> = (0..8).filter(|tc| tcs_of[priority] & (1 << tc) != 0).collect();
        let pgs: Vec<u8> = tcs.iter().map(|&tc| qos.tc_to_pg[tc]).collect();
        let queue = usize::from(qos.pfc_to_queue[priority]);
        say!(
            out,
            "  lossless priority {priority}: frames in TC {tcs:?}, charged to PG {pgs:?}; its pauses hold UC{queue}"
        );
        for &tc in tcs.iter().filter(|&&tc| tc != queue) {
            say!(out,
                "warning: lossless priority {priority}'s frames queue in TC {tc}, but a pause for priority {priority} holds queue {queue} (qos.pfc_to_queue): the peer's pause does not stop them"
            );
        }
    }
    for tc in (0..8).filter(|&tc| qos.tc_lossless(tc)) {
        let lossy: Vec<usize> = (0..8).filter(|&p| !qos.priority_lossless(p) && tcs_of[p] & (1 << tc) != 0).collect();
        if !lossy.is_empty() {
            say!(out,
                "warning: TC {tc} is lossless but also holds lossy priorities {lossy:?}: their frames are charged to lossless PG {}, and no XOFF names them",
                qos.tc_to_pg[tc]
            );
        }
    }
}

/// The subnet an interface address is on, as text (10.0.0.1/24 -> 10.0.0.0/24).
fn network(address: &crate::config::InterfaceAddress) -> String {
    let network: std::net::IpAddr = match address.address {
        std::net::IpAddr::V4(ip) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(address.len)).unwrap_or(0);
            std::net::Ipv4Addr::from(u32::from(ip) & mask).into()
        }
        std::net::IpAddr::V6(ip) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(address.len)).unwrap_or(0);
            std::net::Ipv6Addr::from(u128::from(ip) & mask).into()
        }
    };
    format!("{network}/{}", address.len)
}

pub fn report(config: &Config) -> String {
    let mut text = String::new();
    let out = &mut text;
    say!(
        out,
        "switch {} mac {} buffer {} bytes ({} cells of {}) mtu {}",
        config.name,
        config.mac,
        config.buffer_bytes,
        config.buffer_bytes / plan::CELL_BYTES,
        plan::CELL_BYTES,
        config.mtu
    );
    say!(out, "ports:");
    for port in &config.ports {
        say!(
            out,
            "  {:<10} {:>7} Gb/s  cable {:>5} m  peer {}  {}  64B frame {:.2} ns  MTU frame {:.1} ns{}",
            port.name,
            port.speed_mbps as f64 / 1000.0,
            port.cable_m,
            port.peer_mac.map_or("-".to_string(), |mac| mac.to_string()),
            port.device.as_deref().unwrap_or("(no device: replay only)"),
            port.wire_time_ps(60) as f64 / 1000.0,
            port.wire_time_ps(config.mtu as usize + 14) as f64 / 1000.0,
            if port.enabled { "" } else { "  DISABLED" }
        );
        if !port.addresses.is_empty() {
            let addresses: Vec<String> = port.addresses.iter().map(ToString::to_string).collect();
            say!(out, "  {:<10} addresses {}", "", addresses.join(", "));
        }
    }
    match &config.control {
        Some(control) => {
            let extra: Vec<String> = control.punt_ethertypes.iter().map(|e| format!("0x{e:04x}")).collect();
            say!(
                out,
                "control: host interfaces in netns {}; punt ARP, ND, LACP, LLDP, local and link-local IP, TTL <= 1, glean{}; \
                 control frames leave in TC{}; multipath routes {}",
                control.netns,
                if extra.is_empty() { String::new() } else { format!(", EtherTypes {}", extra.join(" ")) },
                control.control_tc,
                control.multipath_mode.name()
            );
            // Highest priority first, as the control thread serves them.
            let classes: Vec<String> = CoppClass::ALL
                .iter()
                .map(|class| {
                    let rate = control.copp[class.index()];
                    format!("{} {}/{}", class.name(), rate.pps, rate.burst)
                })
                .collect();
            say!(
                out,
                "  CoPP per {}, frames/s / burst, highest priority first: {}",
                control.copp_scope.name(),
                classes.join(", ")
            );
            let limited: Vec<String> = CoppClass::ALL
                .iter()
                .filter_map(|&class| {
                    let sources = control.acl.limits(class)?;
                    let mut taken: Vec<String> = sources.prefixes.iter().map(ToString::to_string).collect();
                    if sources.neighbors {
                        taken.insert(0, "neighbors".into());
                    }
                    Some(format!("{} from {}", class.name(), taken.join(" ")))
                })
                .collect();
            say!(out, "  sources (control.acl): {}; the other classes from any", limited.join(", "));
            match control.keep_interfaces_s {
                0 => say!(out, "  host interfaces go with the switch"),
                seconds => say!(
                    out,
                    "  host interfaces kept {seconds} s after the switch stops, for a restart (raceway clean lets them go)"
                ),
            }
            if config.qos.strict_mask & (1 << control.control_tc) == 0 {
                say!(out,
                    "warning: control.control_tc {} is not strict (qos.scheduler.strict): data can delay BGP keepalives and ARP replies",
                    control.control_tc
                );
            }
        }
        None => say!(out, "control: none (no host interfaces; ARP, ND, LLDP are unsupported, TTL expiry is dropped)"),
    }
    say!(out, "routes (longest prefix wins):");
    for route in &config.routes {
        let target = match &route.target {
            RouteTarget::Port(port) => format!("port {}", config.ports[*port].name),
            RouteTarget::Group(group) => format!("group {}", config.groups[*group].name),
            RouteTarget::Blackhole => "blackhole (dropped)".to_string(),
            RouteTarget::Via(next_hops) => {
                let next_hops: Vec<String> = next_hops
                    .iter()
                    .map(|ip| match config.neighbors.iter().find(|neighbor| neighbor.ip == *ip) {
                        Some(neighbor) => format!("{ip} ({} {})", config.ports[neighbor.port].name, neighbor.mac),
                        None => format!("{ip} (resolved by the control plane)"),
                    })
                    .collect();
                format!("via {}", next_hops.join(", "))
            }
        };
        say!(out, "  {:<24} -> {target}", route.prefix.to_string());
    }
    for port in &config.ports {
        for address in &port.addresses {
            say!(
                out,
                "  {:<24} -> connected, port {} (address {} is local)",
                network(address),
                port.name,
                address.address
            );
        }
    }
    for neighbor in &config.neighbors {
        say!(out, "neighbor {} is {} on port {}", neighbor.ip, neighbor.mac, config.ports[neighbor.port].name);
    }
    for group in &config.groups {
        let members: Vec<&str> = group.members.iter().map(|&p| config.ports[p].name.as_str()).collect();
        say!(out, "group {}: {} over [{}]", group.name, group.mode.name(), members.join(", "));
    }
    let qos = &config.qos;
    let trust = match qos.trust {
        Trust::Dscp => "dscp",
        Trust::Pcp => "pcp",
    };
    say!(out, "qos: trust {trust}");
    let mut dscp_lines = Vec::new();
    for tc in 0..8u8 {
        let dscps: Vec<String> = (0..64).filter(|&d| qos.dscp_to_tc[d] == tc).map(|d| d.to_string()).collect();
        if !dscps.is_empty() && dscps.len() < 64 {
            dscp_lines.push(format!("TC{tc} <- DSCP {}", dscps.join(",")));
        } else if dscps.len() == 64 {
            dscp_lines.push(format!("TC{tc} <- every DSCP"));
        }
    }
    say!(out, "  dscp_to_tc: {}", dscp_lines.join("; "));
    say!(out, "  pcp_to_tc: {:?}", qos.pcp_to_tc);
    pfc_maps(out, qos);
    let strict: Vec<usize> = (0..8).filter(|tc| qos.strict_mask & (1 << tc) != 0).collect();
    let dwrr: Vec<String> = (0..8)
        .filter(|tc| qos.strict_mask & (1 << tc) == 0)
        .map(|tc| format!("TC{tc}:{}", qos.dwrr_weights[tc]))
        .collect();
    say!(out, "  scheduler: strict {strict:?}, then DWRR {}", dwrr.join(" "));
    buffer(out, config);
    for (tc, profile) in qos.ecn.iter().enumerate() {
        if let Some(profile) = profile {
            say!(
                out,
                "  ECN TC{tc}: kmin {} kmax {} pmax {}, marked at {:?}, depth in {}",
                profile.kmin_bytes,
                profile.kmax_bytes,
                profile.pmax,
                profile.mark_on,
                match profile.measure {
                    EcnMeasure::Cells => "buffer cells",
                    EcnMeasure::FrameBytes => "frame bytes",
                }
            );
        }
    }
    trim(out, config);
    acls(out, config);
    if let Some(sflow) = &config.sflow {
        let rates: Vec<String> =
            config.ports.iter().zip(&sflow.rates).map(|(port, rate)| format!("{} 1 in {rate}", port.name)).collect();
        say!(
            out,
            "sflow: collector {} agent {}{} counters every {} s, {} header bytes; drop notifications {}/s per worker; sampling {}",
            sflow.collector,
            sflow.agent,
            if sflow.through_ports { " (sent through the switch's ports)" } else { "" },
            sflow.polling_interval_s,
            sflow.header_bytes,
            sflow.drop_limit,
            rates.join(", ")
        );
    }
    if let Some(lcores) = &config.lcores {
        say!(out, "dpdk: lcores {lcores}, EAL {}", config.eal.join(" "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// host0 with addresses, up0 disabled with a neighbour, a default route over two next
    /// hops of which one is static, and a control plane.
    fn leaf(lossless: &str) -> Config {
        crate::testing::Leaf::new("leaf")
            .qos(&format!("lossless = [{lossless}]"))
            .port_to("host0", 100.0, "", "addresses = [\"10.0.0.1/24\", \"fd00:0:0:1::1/64\"]")
            .port("up0", 25.0, "enabled = false")
            .tables("[[neighbor]]\nip = \"10.255.0.1\"\nmac = \"02:00:00:00:10:01\"\nport = \"up0\"")
            .tables("[[route]]\nprefix = \"0.0.0.0/0\"\nvia = [\"10.255.0.1\", \"10.255.0.3\"]")
            .tables("[control]")
            .config()
    }

    /// The control plane's policing scope, sources and keep time, and sFlow's drop limit and
    /// path, are in the report (`raceway show running-config` prints it).
    #[test]
    fn the_control_planes_scope_sources_and_keep_time_are_reported() {
        let defaults = report(&leaf("3"));
        for expect in [
            "  CoPP per port, frames/s / burst",
            "  sources (control.acl): bgp from neighbors, bfd from neighbors; the other classes from any",
            "  host interfaces kept 30 s after the switch stops",
        ] {
            assert!(defaults.contains(expect), "{expect}\n{defaults}");
        }
        let text = crate::testing::Leaf::new("leaf")
            .port_to("host0", 100.0, "", "addresses = [\"10.0.0.1/24\"]")
            .tables("[control]\nkeep_interfaces_s = 0\n[control.copp]\nscope = \"switch\"\n[control.acl]\nbgp = \"any\"\nip2me = \"10.9.0.0/16\"")
            .tables("[sflow]\ncollector = \"10.0.0.2:6343\"\nagent = \"10.0.0.1\"\ndrop_limit = 7\nnamespace = \"control\"")
            .toml();
        let config = Config::parse(&text, "t.toml").unwrap();
        let set = report(&config);
        for expect in [
            "  CoPP per switch, frames/s / burst",
            "  sources (control.acl): bfd from neighbors, ip2me from 10.9.0.0/16; the other classes from any",
            "  host interfaces go with the switch",
            "agent 10.0.0.1 (sent through the switch's ports)",
            "drop notifications 7/s per worker",
        ] {
            assert!(set.contains(expect), "{expect}\n{set}");
        }
    }

    #[test]
    fn routes_say_how_each_next_hop_resolves_and_addresses_make_connected_subnets() {
        let config = leaf("3");
        let text = report(&config);
        for expect in [
            "0.0.0.0/0                -> via 10.255.0.1 (up0 02:00:00:00:10:01), 10.255.0.3 (resolved by the control plane)",
            "10.0.0.0/24              -> connected, port host0 (address 10.0.0.1 is local)",
            "fd00:0:0:1::/64          -> connected, port host0 (address fd00:0:0:1::1 is local)",
            "neighbor 10.255.0.1 is 02:00:00:00:10:01 on port up0",
            "  DISABLED",
            "peer -",
            "(no device: replay only)",
        ] {
            assert!(text.contains(expect), "check lacks '{expect}':\n{text}");
        }
        // The numbers come from the switch's own plan.
        let plan = plan::BufferPlan::new(&config).unwrap();
        assert!(
            text.contains(&format!("lossless pool {} bytes, lossy pool {} bytes", plan.lossless_pool, plan.lossy_pool))
        );
    }

    #[test]
    fn trimming_is_printed_per_class_with_its_ports_and_a_trim_queue_that_is_not_strict() {
        let config = crate::testing::Leaf::new("leaf")
            .qos(
                "dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }\nlossless = [3]\n[qos.trim]\ndscp = 48\nclasses = [0, 1]",
            )
            .port("p0", 100.0, "")
            .port("p1", 100.0, "trim = false")
            .config();
        let text = report(&config);
        assert!(
            text.contains("trim: a frame the buffer refuses is cut to 128 bytes (its headers kept), remarked and queued: TC0 -> DSCP 48 in TC6; TC1 -> DSCP 48 in TC6; ports p0 (not p1)"),
            "{text}"
        );
        assert_eq!(text.matches("warning: qos.trim: trim queue TC6 is not strict").count(), 1, "{text}");
        let strict = crate::testing::Leaf::new("leaf")
            .qos("dscp_to_tc = { 48 = 6, default = 0 }\n[qos.scheduler]\nstrict = [6]\n[qos.trim]\ndscp = 48\nqueue = 0\nclasses = [0]")
            .port("p0", 100.0, "")
            .config();
        let text = report(&strict);
        assert!(text.contains("TC0's trimmed frames wait in TC0 itself"), "{text}");
        assert!(report(&leaf("3")).contains("trim: off"));
    }

    #[test]
    fn acl_tables_are_printed_with_their_rules_best_first() {
        let config = crate::testing::Leaf::new("leaf")
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .tables(
                "[[acl]]\nname = \"edge\"\nports = [\"p0\", \"p1\"]\nstage = \"egress\"\n\
                 [[acl.rule]]\npriority = 5\nprotocol = \"udp\"\ndst_port = 4791\naction = \"drop\"\n\
                 [[acl.rule]]\npriority = 9\nsrc = \"10.0.0.0/8\"\naction = { dscp = 10 }",
            )
            .config();
        let text = report(&config);
        let table = text.find("acl edge: egress on p0, p1; 2 rules, best first (no match: permit)").expect(&text);
        let first = text.find("src 10.0.0.0/8").expect(&text);
        let second = text.find("udp dport 4791").expect(&text);
        assert!(table < first && first < second, "{text}");
        assert!(text.contains("set dscp=10") && text.contains(" drop"), "{text}");
    }

    #[test]
    fn a_switch_without_lossless_priorities_has_no_pfc() {
        let config = leaf("");
        let text = report(&config);
        assert!(text.contains("lossless priorities: none (no PFC)"), "{text}");
        assert!(!text.contains("PFC host0"), "{text}");
    }

    #[test]
    fn subnets_mask_the_host_bits() {
        let address = |text: &str| crate::config::InterfaceAddress::parse(text).unwrap();
        assert_eq!(network(&address("10.1.2.3/8")), "10.0.0.0/8");
        assert_eq!(network(&address("10.1.2.3/32")), "10.1.2.3/32");
        assert_eq!(network(&address("10.1.2.3/0")), "0.0.0.0/0");
        assert_eq!(network(&address("fd00::1:2/112")), "fd00::1:0/112");
        assert_eq!(network(&address("fd00::1:2/64")), "fd00::/64");
    }
}
