//! raceway with FRR: BGP multipath from two spines and its failover, BGP unnumbered, BGP with
//! BFD at 100 ms x 3 through 100,000 routes of churn and through floods from the peer.

use crate::lab::*;
use crate::oracle::raceway_answers;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A spine's BGP: AS 65001, one session to the leaf, announcing 10.200.0.0/24 (on its lo, so
/// that it answers every address in it). Timers of 1 s / 3 s keep the test short.
pub(crate) fn spine_bgp(index: usize) -> String {
    format!(
        "hostname s{index}\nrouter bgp 65001\n bgp router-id 10.255.0.{me}\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n neighbor 10.255.0.{leaf} remote-as 65000\n neighbor 10.255.0.{leaf} timers 1 3\n \
         neighbor 10.255.0.{leaf} timers connect 1\n address-family ipv4 unicast\n  network 10.200.0.0/24\n \
         exit-address-family\n",
        me = 2 * index + 1,
        leaf = 2 * index
    )
}

/// The leaf's BGP in raceway's namespace: both spines, ECMP over them.
pub(crate) const LEAF_BGP: &str =
    "hostname leaf\nrouter bgp 65000\n bgp router-id 10.255.0.0\n no bgp ebgp-requires-policy\n \
    neighbor 10.255.0.1 remote-as 65001\n neighbor 10.255.0.1 timers 1 3\n neighbor 10.255.0.1 timers connect 1\n \
    neighbor 10.255.0.3 remote-as 65001\n neighbor 10.255.0.3 timers 1 3\n neighbor 10.255.0.3 timers connect 1\n \
    address-family ipv4 unicast\n  redistribute connected\n  maximum-paths 2\n exit-address-family\n";

/// RFC 7938 in miniature: two spines announce 10.200.0.0/24 by BGP to FRR in raceway's
/// namespace; raceway installs it as a two-member group and spreads flows over both uplinks.
/// When one spine's link goes down, the group skips that member at once (the data plane fails
/// over before any routing protocol notices: a flow on it loses no more than was in flight),
/// then the route loses that next hop and traffic stays on the other, while traffic between
/// the hosts never stops.
#[test]
fn bgp_multipath_from_two_spines_spreads_and_fails_over() {
    let _alone = alone();
    let mut lab = Lab::new("rwc");
    lab.host(0);
    lab.host(1);
    for index in 0..2 {
        let ns = lab.attach(&format!("s{index}"), &format!("u{index}"));
        ok("ip", &["-n", &ns, "addr", "add", &format!("10.255.0.{}/31", 2 * index + 1), "dev", "eth0"]);
        ok("ip", &["-n", &ns, "addr", "add", "10.200.0.1/24", "dev", "lo"]);
    }
    let config = with_uplinks(&lab, &lab.config(2, ""), 2, 2);
    lab.start(&config, &["host0", "host1", "up0", "up1"]);
    for index in 0..2 {
        let ns = lab.netns(&format!("s{index}"));
        lab.frr(&ns, &spine_bgp(index));
    }
    let control = lab.control();
    lab.frr(&control, LEAF_BGP);
    let route = || ok("ip", &["-n", &control, "route", "show", "10.200.0.0/24"]);
    wait_for("the ECMP route from both spines", Duration::from_secs(60), || {
        route().matches("nexthop via").count() == 2
    });
    // The replies need the way back: each spine learns the hosts' subnet from the leaf's
    // `redistribute connected`, on its own schedule.
    for index in 0..2 {
        let spine = lab.netns(&format!("s{index}"));
        wait_for("the spine's route back to the hosts", Duration::from_secs(60), || {
            ok("ip", &["-n", &spine, "route", "show", "10.0.0.0/24"]).contains("via 10.255.0.")
        });
    }
    // raceway's own FIB follows the kernel's by netlink, a moment later: every destination
    // answers once before the echoes are counted.
    let all_answer = |lab: &Lab| {
        (1..=32).all(|last| ping(lab, 0, &["-c", "1", "-W", "1", &format!("10.200.0.{last}")]).status.success())
    };
    wait_for("every destination through the leaf", Duration::from_secs(30), || all_answer(&lab));
    // 32 destinations: ECMP hashes each flow onto one uplink, and both get some.
    let ping_all = |lab: &Lab| {
        for last in 1..=32 {
            let reply = ping(lab, 0, &["-c", "1", "-W", "2", &format!("10.200.0.{last}")]);
            assert!(reply.status.success(), "ping 10.200.0.{last}: {}", String::from_utf8_lossy(&reply.stdout));
        }
    };
    let start = [echoes(&lab, "s0"), echoes(&lab, "s1")];
    ping_all(&lab);
    let before = [echoes(&lab, "s0") - start[0], echoes(&lab, "s1") - start[1]];
    assert_eq!(before[0] + before[1], 32, "each echo reached one spine: {before:?}");
    assert!(before[0] >= 4 && before[1] >= 4, "ECMP spread the flows over both uplinks: {before:?}");
    // A destination whose flow the group sends to spine 0.
    let on_spine0 = (1..=32)
        .map(|last| format!("10.200.0.{last}"))
        .find(|destination| {
            let before = echoes(&lab, "s0");
            ping(&lab, 0, &["-c", "1", "-W", "2", destination]);
            echoes(&lab, "s0") > before
        })
        .expect("a flow on spine 0");
    let ns0 = lab.netns("h0");
    let failing_over = Command::new("ip")
        .args(["netns", "exec", &ns0, "ping", "-c", "60", "-i", "0.05", "-W", "1", &on_spine0])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // A steady ping between the hosts across the failover: other routes never stall.
    let ns1 = lab.netns("h1");
    let steady = Command::new("ip")
        .args(["netns", "exec", &ns1, "ping", "-c", "60", "-i", "0.1", "-W", "1", "10.0.0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000)); // both pings flowing before the failure
    ok("ip", &["-n", &lab.netns("s0"), "link", "set", "eth0", "down"]);
    let failing_over = failing_over.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&failing_over.stdout);
    let received: u64 = text
        .lines()
        .find(|line| line.contains("packets transmitted"))
        .and_then(|line| line.split(", ").nth(1)?.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    // 20 echoes a second: one or two were on the wire or in spine 0 when its link went. BGP's
    // hold time alone (3 s) would have lost 40 or more.
    assert!(received >= 57, "the flow on spine 0 lost more than what was in flight: {text}");
    wait_for("BGP to withdraw spine 0", Duration::from_secs(30), || !route().contains("10.255.0.1"));
    wait_for("every destination through spine 1", Duration::from_secs(30), || all_answer(&lab));
    let withdrawn = [echoes(&lab, "s0"), echoes(&lab, "s1")];
    ping_all(&lab);
    assert_eq!(echoes(&lab, "s0"), withdrawn[0], "nothing more to the withdrawn spine");
    assert_eq!(echoes(&lab, "s1"), withdrawn[1] + 32, "every flow to the remaining one");
    let steady = steady.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&steady.stdout);
    assert!(text.contains(" 0% packet loss"), "host traffic during the failover: {text}");
    lab.stop_frr();
    let stats = lab.stop();
    assert!(stats["ports"]["host0"]["punted"]["glean"].as_u64().unwrap() <= 2, "{}", stats["ports"]["host0"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
    // The kernel's multipath route made a group of both spines: counted per member, named by
    // its next hops, and kept after the route lost one of them.
    let groups = stats["groups"].as_object().unwrap();
    let (name, members) = groups.iter().find(|(name, _)| name.starts_with("via ")).expect("the multipath group");
    assert!(name.contains("10.255.0.1") && name.contains("10.255.0.3"), "{name}");
    for member in ["up0 10.255.0.1", "up1 10.255.0.3"] {
        assert!(members[member].as_u64().unwrap() >= 4, "{member} of {name}: {members}");
    }
}

/// A spine for BGP unnumbered: its uplink end's only link-local address is fe80::1 (both
/// spines share it, as fabrics number them), one session over it (RFC 5549: IPv4 routes with
/// IPv6 next hops), announcing 10.200.0.0/24 and fd20::/64, each answered for every address
/// (on lo, the IPv6 one as AnyIP).
pub(crate) fn unnumbered_spine(lab: &mut Lab, index: usize) {
    let ns = lab.attach(&format!("s{index}"), &format!("u{index}"));
    ok("ip", &["-n", &ns, "-6", "addr", "flush", "dev", "eth0", "scope", "link"]);
    ok("ip", &["-n", &ns, "addr", "add", "fe80::1/64", "dev", "eth0", "nodad"]);
    ok("ip", &["-n", &ns, "addr", "add", "10.200.0.1/24", "dev", "lo"]);
    ok("ip", &["-n", &ns, "-6", "route", "add", "local", "fd20::/64", "dev", "lo"]);
    lab.frr(
        &ns,
        &format!(
            "hostname s{index}\nrouter bgp 65001\n bgp router-id 10.255.1.{index}\n no bgp ebgp-requires-policy\n \
             no bgp network import-check\n neighbor eth0 interface remote-as external\n neighbor eth0 timers 1 3\n \
             neighbor eth0 timers connect 1\n address-family ipv4 unicast\n  network 10.200.0.0/24\n \
             exit-address-family\n address-family ipv6 unicast\n  network fd20::/64\n  neighbor eth0 activate\n \
             exit-address-family\n"
        ),
    );
}

/// The leaf's side of BGP unnumbered: a session per uplink interface, ECMP over both, v4 and v6.
pub(crate) const LEAF_UNNUMBERED: &str = "hostname leaf\nrouter bgp 65000\n bgp router-id 10.255.1.100\n \
    no bgp ebgp-requires-policy\n neighbor up0 interface remote-as external\n neighbor up0 timers 1 3\n \
    neighbor up0 timers connect 1\n neighbor up1 interface remote-as external\n neighbor up1 timers 1 3\n \
    neighbor up1 timers connect 1\n address-family ipv4 unicast\n  redistribute connected\n  maximum-paths 2\n \
    exit-address-family\n address-family ipv6 unicast\n  redistribute connected\n  neighbor up0 activate\n \
    neighbor up1 activate\n  maximum-paths 2\n exit-address-family\n";

/// ICMPv6 echo requests namespace `<prefix><name>` has received (its /proc/net/snmp6).
pub(crate) fn echoes_v6(lab: &Lab, name: &str) -> u64 {
    let snmp = ok("ip", &["netns", "exec", &lab.netns(name), "cat", "/proc/net/snmp6"]);
    let line = snmp.lines().find(|line| line.starts_with("Icmp6InEchos ")).expect("Icmp6InEchos");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// BGP unnumbered on two uplinks whose peers are both fe80::1: the kernel's routes to
/// 10.200.0.0/24 (over IPv6 next hops, RFC 5549) and fd20::/64 have two next hops with the
/// same address on different ports, which raceway keeps apart (neighbours by port and
/// address). With no data traffic before, both members carry traffic within 2 s of the
/// kernel holding the routes, in both families, and every destination answers. (0.22 s here,
/// 0.24 s with `stress-ng --cpu 2` on both CPUs: the 2 s bound is the issue's, with room.)
#[test]
fn bgp_unnumbered_peers_that_share_fe80_1_both_carry_ecmp_in_both_families() {
    let _alone = alone();
    let mut lab = Lab::new("rwn");
    lab.host(0);
    for index in 0..2 {
        unnumbered_spine(&mut lab, index);
    }
    let mut config = lab.config(1, "");
    for index in 0..2 {
        config = config.replace(
            "[control]",
            &format!(
                "[[port]]\nname = \"up{index}\"\ndevice = \"net_af_packet{},iface={}u{index}\"\nspeed_gbps = 1\n[control]",
                index + 1,
                lab.prefix
            ),
        );
    }
    lab.start(&config, &["host0", "up0", "up1"]);
    let control = lab.control();
    lab.frr(&control, LEAF_UNNUMBERED);
    let route = |family: &str, prefix: &str| ok("ip", &["-n", &control, family, "route", "show", prefix]);
    wait_for("both ECMP routes over fe80::1 on up0 and up1", Duration::from_secs(90), || {
        [("-4", "10.200.0.0/24"), ("-6", "fd20::/64")].iter().all(|(family, prefix)| {
            let text = route(family, prefix);
            text.contains("fe80::1 dev up0") && text.contains("fe80::1 dev up1")
        })
    });
    // The way back: each spine learns the host's subnets from the leaf.
    for index in 0..2 {
        let spine = lab.netns(&format!("s{index}"));
        wait_for("the spine's routes back to the host", Duration::from_secs(60), || {
            ok("ip", &["-n", &spine, "route", "show", "10.0.0.0/24"]).contains("via")
                && ok("ip", &["-n", &spine, "-6", "route", "show", "fd00:0::/64"]).contains("via")
        });
    }
    // From the kernel holding the routes: flows to 16 destinations per family, swept until
    // both spines have echoes of both, at most 2 s (the bound: the FIB follows the
    // kernel within milliseconds, and one sweep takes a few).
    let started = std::time::Instant::now();
    let destinations: Vec<String> =
        (1..=16).flat_map(|last| [format!("10.200.0.{last}"), format!("fd20::{last:x}")]).collect();
    let base = [echoes(&lab, "s0"), echoes(&lab, "s1"), echoes_v6(&lab, "s0"), echoes_v6(&lab, "s1")];
    let carried = |lab: &Lab| {
        [echoes(lab, "s0"), echoes(lab, "s1"), echoes_v6(lab, "s0"), echoes_v6(lab, "s1")]
            .iter()
            .zip(&base)
            .map(|(now, before)| now - before)
            .collect::<Vec<u64>>()
    };
    while carried(&lab).contains(&0) && started.elapsed() < Duration::from_secs(2) {
        for destination in &destinations {
            ping(&lab, 0, &["-c", "1", "-W", "1", destination]);
        }
    }
    let elapsed = started.elapsed();
    let counts = carried(&lab);
    println!(
        "both members carried v4 and v6 after {elapsed:?}: echoes s0/s1 v4 {:?}, v6 {:?}",
        &counts[..2],
        &counts[2..]
    );
    assert!(!counts.contains(&0), "after {elapsed:?}, echoes per spine (v4 s0, s1, v6 s0, s1): {counts:?}");
    // raceway's answer names both next hops: fe80::1 on each uplink, each with its own MAC.
    let answers =
        raceway_answers(&lab.dir.join("leaf.toml"), &["10.200.0.1".parse().unwrap(), "fd20::1".parse().unwrap()]);
    for answer in &answers {
        assert_eq!(answer["action"], "forward", "{answer}");
        let hops = answer["next_hops"].as_array().unwrap();
        // In the kernel's order, which follows the order the sessions came up in.
        let mut ports: Vec<&str> = hops.iter().map(|hop| hop["port"].as_str().unwrap()).collect();
        ports.sort_unstable();
        assert_eq!(ports, ["up0", "up1"], "{answer}");
        assert!(hops.iter().all(|hop| hop["ip"] == "fe80::1"), "{answer}");
        assert_ne!(hops[0]["mac"], hops[1]["mac"], "each port's fe80::1 is its own neighbour: {answer}");
    }
    // Every destination answers.
    for destination in &destinations {
        let reply = ping(&lab, 0, &["-c", "1", "-W", "2", destination]);
        assert!(reply.status.success(), "ping {destination}: {}", String::from_utf8_lossy(&reply.stdout));
    }
    lab.stop_frr();
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// `config` (from `Lab::config` with `hosts` ports) with `count` uplinks: `up<i>` on link
/// `<prefix>u<i>`, the leaf's address 10.255.0.<2i>/31 (the spine's is .<2i + 1>).
pub(crate) fn with_uplinks(lab: &Lab, config: &str, hosts: usize, count: usize) -> String {
    let mut config = config.to_string();
    for index in 0..count {
        config = config.replace(
            "[control]",
            &format!(
                "[[port]]\nname = \"up{index}\"\ndevice = \"net_af_packet{},iface={}u{index}\"\nspeed_gbps = 1\n\
                 addresses = [\"10.255.0.{}/31\"]\n[control]",
                index + hosts,
                lab.prefix,
                2 * index
            ),
        );
    }
    config
}

/// BFD at 100 ms x 3, as a production fabric runs it; both sides use this profile.
pub(crate) const BFD_FAST: &str =
    "bfd\n profile fast\n  detect-multiplier 3\n  receive-interval 100\n  transmit-interval 100\n !\n!\n";

/// A leaf with host0 and one uplink to spine s0, BGP with BFD (100 ms x 3) between FRR in the
/// spine's namespace and FRR in raceway's; the spine announces 10.200.0.0/24 and learns the
/// hosts' subnet. raceway runs with `--fib-dump` into the lab's directory, `control` in its
/// `[control]` section. Returns once BGP is established, BFD up and host0 reaches 10.200.0.1
/// through the switch.
pub(crate) fn bgp_bfd_lab(tag: &str, control: &str) -> (Lab, std::path::PathBuf, std::path::PathBuf) {
    bgp_bfd_lab_with(tag, control, BFD_FAST)
}

/// `bgp_bfd_lab` with the BFD profile `bfd` (named `fast`) on both sides.
pub(crate) fn bgp_bfd_lab_with(tag: &str, control: &str, bfd: &str) -> (Lab, std::path::PathBuf, std::path::PathBuf) {
    let mut lab = Lab::new(tag);
    lab.host(0);
    let spine = lab.attach("s0", "u0");
    ok("ip", &["-n", &spine, "addr", "add", "10.255.0.1/31", "dev", "eth0"]);
    ok("ip", &["-n", &spine, "addr", "add", "10.200.0.1/24", "dev", "lo"]);
    let config = with_uplinks(&lab, &lab.config(1, control), 1, 1);
    let dump = lab.dir.join("fib.txt");
    lab.start_with(&config, &["host0", "up0"], &[std::ffi::OsStr::new("--fib-dump"), dump.as_os_str()]);
    let session = |me: &str, peer: &str, asn: u32, peer_asn: u32, extra: &str| {
        format!(
            "hostname {me}\n{bfd}router bgp {asn}\n bgp router-id {me_ip}\n no bgp ebgp-requires-policy\n \
             no bgp network import-check\n neighbor {peer} remote-as {peer_asn}\n neighbor {peer} timers 1 3\n \
             neighbor {peer} timers connect 1\n neighbor {peer} bfd profile fast\n address-family ipv4 unicast\n{extra} \
             exit-address-family\n",
            me_ip = if asn == 65000 { "10.255.0.0" } else { "10.255.0.1" },
        )
    };
    let spine_dir = lab.frr(&spine, &session("s0", "10.255.0.0", 65001, 65000, "  network 10.200.0.0/24\n"));
    let control = lab.control();
    let leaf = lab.frr(&control, &session("leaf", "10.255.0.1", 65000, 65001, "  redistribute connected\n"));
    wait_for("BGP established and BFD up on both sides", Duration::from_secs(60), || {
        sessions(&leaf, "10.255.0.1").up && sessions(&spine_dir, "10.255.0.0").up
    });
    wait_for("the spine's route back to the hosts", Duration::from_secs(60), || {
        ok("ip", &["-n", &spine, "route", "show", "10.0.0.0/24"]).contains("via 10.255.0.0")
    });
    wait_for("host0 to reach the spine through the switch", Duration::from_secs(30), || {
        ping(&lab, 0, &["-c", "1", "-W", "1", "10.200.0.1"]).status.success()
    });
    (lab, leaf, spine_dir)
}

/// What FRR in `dir` says of its BGP session and BFD peer `peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sessions {
    /// BGP established and BFD up.
    pub(crate) up: bool,
    pub(crate) bgp_established: u64,
    pub(crate) bgp_dropped: u64,
    pub(crate) bfd_up_events: u64,
    pub(crate) bfd_down_events: u64,
}

pub(crate) fn vtysh(dir: &std::path::Path, command: &str) -> serde_json::Value {
    let output = run("vtysh", &["--vty_socket", dir.to_str().unwrap(), "-c", command]);
    serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null)
}

pub(crate) fn sessions(dir: &std::path::Path, peer: &str) -> Sessions {
    let bgp = &vtysh(dir, &format!("show bgp neighbors {peer} json"))[peer];
    let counters = vtysh(dir, "show bfd peers counters json");
    let counters = counters.as_array().and_then(|peers| peers.iter().find(|p| p["peer"] == peer)).cloned();
    let status = vtysh(dir, "show bfd peers json");
    let bfd_up = status.as_array().is_some_and(|peers| peers.iter().any(|p| p["peer"] == peer && p["status"] == "up"));
    let number = |value: &serde_json::Value| value.as_u64().unwrap_or(0);
    let counter = |name: &str| counters.as_ref().map_or(0, |c| number(&c[name]));
    Sessions {
        up: bgp["bgpState"] == "Established" && bfd_up,
        bgp_established: number(&bgp["connectionsEstablished"]),
        bgp_dropped: number(&bgp["connectionsDropped"]),
        bfd_up_events: counter("session-up"),
        bfd_down_events: counter("session-down"),
    }
}

/// Asks raceway for its FIB (SIGUSR1 with `--fib-dump`) and returns the dump's lines, once
/// the new dump is there.
pub(crate) fn fib_dump(lab: &Lab, path: &std::path::Path) -> Vec<String> {
    let _ = std::fs::remove_file(path);
    let pid = lab.switch.as_ref().expect("started").id().to_string();
    ok("kill", &["-USR1", &pid]);
    wait_for("the FIB dump", Duration::from_secs(30), || path.exists());
    std::fs::read_to_string(path).unwrap().lines().map(str::to_string).collect()
}

/// How many routes the dump's header says the FIB holds.
pub(crate) fn dumped_routes(lines: &[String]) -> usize {
    let header = &lines[0];
    let count = header.split(": ").nth(1).and_then(|rest| rest.split(' ').next());
    count.and_then(|count| count.parse().ok()).unwrap_or_else(|| panic!("dump header: {header}"))
}

/// The kernel's main tables (v4 and v6) in raceway's namespace as the dump writes them, but
/// the IPv6 link-local routes: a route via a gateway as the port and the gateway's MAC (from
/// the kernel's neighbours), or `glean` while it has none; a route without one as connected to
/// its port.
pub(crate) fn kernel_routes(control: &str) -> Vec<String> {
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec!["-j", "-n", control];
        all.extend_from_slice(args);
        serde_json::from_str(&ok("ip", &all)).unwrap()
    };
    let mut macs = std::collections::HashMap::new();
    for neighbor in json(&["neigh", "show"]) {
        if let (Some(ip), Some(mac)) = (neighbor["dst"].as_str(), neighbor["lladdr"].as_str()) {
            macs.insert(ip.to_string(), mac.to_string());
        }
    }
    let mut lines = Vec::new();
    for family in ["-4", "-6"] {
        for route in json(&[family, "route", "show", "table", "main"]) {
            let dst = route["dst"].as_str().unwrap();
            let prefix = match dst {
                "default" if family == "-4" => "0.0.0.0/0".to_string(),
                "default" => "::/0".to_string(),
                dst if dst.contains('/') => dst.to_string(),
                dst => format!("{dst}/{}", if family == "-4" { 32 } else { 128 }),
            };
            if prefix.starts_with("fe80:") {
                // Per interface in the kernel; never routed, so not the FIB's.
                continue;
            }
            let dev = route["dev"].as_str().unwrap_or("?");
            let target = match (route["type"].as_str(), route["gateway"].as_str()) {
                (Some("blackhole"), _) => "blackhole".to_string(),
                (Some(kind @ ("unreachable" | "prohibit" | "throw")), _) => format!("kernel {kind}"),
                (_, Some(gateway)) => match macs.get(gateway) {
                    Some(mac) => format!("via {dev} {mac}"),
                    None => "glean".to_string(),
                },
                (_, None) => format!("connected {dev}"),
            };
            lines.push(format!("{prefix} {target}"));
        }
    }
    lines.sort();
    lines
}

/// The dump's routes but the kernel's local table (the switch's own addresses, its subnets'
/// broadcast addresses, IPv6 anycast), sorted as `kernel_routes`.
pub(crate) fn forwarding_routes(dump: &[String]) -> Vec<String> {
    let local = |line: &str| {
        [" local", " kernel local", " kernel broadcast", " kernel anycast"].iter().any(|end| line.ends_with(end))
    };
    let mut routes: Vec<String> =
        dump[1..].iter().filter(|line| !line.starts_with("neighbor ") && !local(line)).cloned().collect();
    routes.sort();
    routes
}

/// Writes an `ip -batch` file of `verb` for the /32 routes numbered `range` (from 10.64.0.0),
/// via `via` unless it is empty.
pub(crate) fn route_batch(
    dir: &std::path::Path,
    name: &str,
    verb: &str,
    range: std::ops::Range<u32>,
    via: &str,
) -> String {
    let path = dir.join(name);
    let mut text = String::with_capacity(64 * range.len());
    for i in range {
        let via = if via.is_empty() { String::new() } else { format!(" via {via}") };
        text.push_str(&format!("route {verb} 10.{}.{}.{}/32{via}\n", 64 + (i >> 16), (i >> 8) & 255, i & 255));
    }
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A leaf learning a production-sized table: 100,000 routes come into its kernel, then half go
/// and a tenth move to another next hop, then all go, while BGP with BFD at 100 ms x 3 runs on
/// the uplink and a host pings through. No BFD or BGP session flaps, nothing is lost, and the
/// FIB the workers forward by equals the kernel's table, prefix by prefix and next hop by
/// next hop, after the churn and after the withdrawal.
#[test]
fn bgp_and_bfd_stay_up_while_100k_routes_come_and_go_and_the_fib_matches_the_kernel() {
    let _alone = alone();
    let (mut lab, leaf, spine) = bgp_bfd_lab("rwd", "");
    let control = lab.control();
    let dump_path = lab.dir.join("fib.txt");
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    let base = dumped_routes(&fib_dump(&lab, &dump_path));
    let ns0 = lab.netns("h0");
    let steady = Command::new("ip")
        // A deadline, so that a failing test (which never interrupts it) leaves no ping behind.
        // -O reports each echo overtaken by the next without a reply, so that an echo still in
        // flight when the pinger is stopped (rtt reaches tens of ms beside a busy neighbour) is
        // not counted as lost, as ping's own summary would.
        .args(["netns", "exec", &ns0, "ping", "-O", "-n", "-i", "0.02", "-W", "2", "-w", "600", "10.200.0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let batch = |name: &str, verb: &str, range: std::ops::Range<u32>, via: &str| {
        let path = route_batch(&lab.dir, name, verb, range, via);
        ok("ip", &["-n", &control, "-batch", &path]);
    };
    let wait_routes = |lab: &Lab, want: usize| {
        let mut have = 0;
        wait_for("the FIB to hold the kernel's routes", Duration::from_secs(120), || {
            have = dumped_routes(&fib_dump(lab, &dump_path));
            have == want
        });
    };
    batch("add.batch", "add", 0..100_000, "10.255.0.1 dev up0");
    wait_routes(&lab, base + 100_000);
    // Churn: the first half withdrawn, the next 10,000 moved to host0 as their next hop.
    batch("del.batch", "del", 0..50_000, "10.255.0.1 dev up0");
    batch("move.batch", "replace", 50_000..60_000, "10.0.0.2 dev host0");
    wait_routes(&lab, base + 50_000);
    // The moved routes resolve once the kernel knows host0's MAC (it does: host0 pinged).
    let dump = fib_dump(&lab, &dump_path);
    assert!(dump.iter().any(|line| line.starts_with("10.64.195.80/32 via host0 ")), "a moved route in the FIB");
    assert_eq!(forwarding_routes(&dump), kernel_routes(&control), "the FIB after churn is the kernel's table");
    batch("rest.batch", "del", 50_000..100_000, "");
    wait_routes(&lab, base);
    assert_eq!(forwarding_routes(&fib_dump(&lab, &dump_path)), kernel_routes(&control), "after the withdrawal");
    let after = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    assert_eq!(after, before, "no BGP or BFD session went down (leaf, spine)");
    assert!(after.0.up && after.1.up);
    ok("kill", &["-INT", &steady.id().to_string()]);
    let steady = steady.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&steady.stdout).to_string();
    lab.stop_frr();
    let stats = lab.stop();
    let (answered, lost) = echo_replies(&text);
    // Asserted once the switch has stopped, so that a loss comes with its counters.
    assert!(
        answered > 100 && lost.is_empty(),
        "pings through the switch during the churn: {answered} answered, lost {lost:?}\nhost0: {}\nup0: {}\ncontrol: {}",
        stats["ports"]["host0"],
        stats["ports"]["up0"],
        stats["control"]
    );
    assert_eq!(stats["control"]["fib_resyncs"], 0, "no netlink message lost: {}", stats["control"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// What `ping -O -n` printed: how many echoes were answered, and the sequence numbers of those
/// overtaken without a reply that never got one later (the last echo, in flight when ping
/// stopped, is neither).
pub(crate) fn echo_replies(text: &str) -> (usize, Vec<u64>) {
    let seq = |line: &str| -> Option<u64> { line.split("icmp_seq=").nth(1)?.split_whitespace().next()?.parse().ok() };
    let answered: std::collections::HashSet<u64> =
        text.lines().filter(|line| line.contains(" bytes from ")).filter_map(seq).collect();
    let mut lost: Vec<u64> = text
        .lines()
        .filter(|line| line.starts_with("no answer yet"))
        .filter_map(seq)
        .filter(|seq| !answered.contains(seq))
        .collect();
    lost.sort_unstable();
    lost.dedup();
    (answered.len(), lost)
}

/// A misbehaving BGP peer: ICMP echo at line rate to the leaf's address on that very uplink,
/// then TTL=1 packets through it, each for longer than the BGP hold time. Each flood is cut to
/// its CoPP class's rate on that port and waits behind BGP and BFD, so both sessions stay up,
/// and ARP on the uplink still resolves; the stats show each flood in its class's `policed`.
#[test]
fn floods_from_the_bgp_peer_leave_its_sessions_up_and_show_in_their_classes() {
    let _alone = alone();
    // The floods' classes are policed below what hping3 sends even when it gets little CPU:
    // at nice 19 beside a busy neighbour (`stress-ng --cpu 2`) it sent about 1,200 echoes a
    // second, under ip2me's default rate of 6,000, and nothing was policed.
    let copp = "[control.copp.ip2me]\npps = 200\nburst = 200\n[control.copp.ttl]\npps = 200\nburst = 200";
    let (mut lab, leaf, spine_dir) = bgp_bfd_lab("rwf", copp);
    let (control, spine) = (lab.control(), lab.netns("s0"));
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine_dir, "10.255.0.0"));
    // hping3 as fast as it sends: echo requests to the leaf's own address, then echo requests
    // with TTL 1 to host0, which expire at the leaf. At the lowest CPU priority: the flood's
    // source stands for another machine. At normal priority, in one run of `make test` on two
    // CPUs, the spine's BFD session went down (300 ms detection) while the leaf's stayed up:
    // there the flood competes for the CPU with the spine's own bfdd, as no remote attacker
    // would. At nice 19 it still did, twice in eight runs of `make test` (once the spine's
    // BFD, once its BGP connection): nice 19 keeps a share of the CPU. SCHED_IDLE gives the
    // sender only what the switch and both FRRs leave.
    for flood in [&["10.255.0.0"][..], &["--ttl", "1", "10.0.0.2"][..]] {
        let mut args =
            vec!["netns", "exec", spine.as_str(), "chrt", "--idle", "0", "hping3", "--flood", "--icmp", "-q"];
        args.extend_from_slice(flood);
        let mut hping = Command::new("ip").args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let started = Instant::now();
        // ARP both ways across the flooded link: forgotten, then learned again.
        ok("ip", &["-n", &spine, "neigh", "flush", "dev", "eth0"]);
        ok("ip", &["-n", &control, "neigh", "flush", "dev", "up0"]);
        let resolved = |ns: &str, dev: &str, ip: &str| {
            let text = ok("ip", &["-n", ns, "neigh", "show", "dev", dev, ip]);
            text.contains("lladdr") && !text.contains("FAILED") && !text.contains("INCOMPLETE")
        };
        wait_for("ARP on the flooded uplink", Duration::from_secs(10), || {
            resolved(&spine, "eth0", "10.255.0.0") && resolved(&control, "up0", "10.255.0.1")
        });
        // Longer than the BGP hold time (3 s), a dozen BFD detection times.
        wait_for("the flood to run 4 s", Duration::from_secs(10), || started.elapsed() >= Duration::from_secs(4));
        let during = (sessions(&leaf, "10.255.0.1"), sessions(&spine_dir, "10.255.0.0"));
        let _ = hping.kill();
        let _ = hping.wait();
        assert_eq!(during, before, "no BGP or BFD session went down during the flood {flood:?} (leaf, spine)");
    }
    lab.stop_frr();
    let stats = lab.stop();
    let up0 = &stats["ports"]["up0"];
    let class = |counter: &str, class: &str| up0[counter][class].as_u64().unwrap();
    assert!(class("policed", "ip2me") > 0, "the echo flood, cut to its rate: {up0}");
    assert!(class("policed", "ttl") > 0, "the TTL flood: {up0}");
    for session in ["bgp", "bfd", "arp"] {
        assert_eq!(class("policed", session), 0, "{session} never policed: {up0}");
        assert!(class("punted", session) > 0, "{session} reached the kernel: {up0}");
    }
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// A host on host0 floods the leaf's gateway address with BGP SYNs and BFD packets, first
/// spoofing the spine's address, then from its own. `[control.acl]`'s default takes BGP and
/// BFD from the control plane's peers only (here the spine, a BGP peer of the leaf's kernel,
/// on the port the FIB routes it through), so both floods are refused at host0, before its
/// policers, and counted by class in `refused`; the real sessions on the uplink never go
/// down and keep being punted.
#[test]
fn spoofed_bgp_and_bfd_from_a_host_port_are_refused_and_the_sessions_stay_up() {
    let _alone = alone();
    let (mut lab, leaf, spine_dir) = bgp_bfd_lab("rwx", "");
    let host = lab.netns("h0");
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine_dir, "10.255.0.0"));
    // As fast as hping3 sends, at the lowest priority: it stands for another machine.
    let floods: [&[&str]; 4] = [
        &["-S", "-p", "179", "-a", "10.255.0.1"],
        &["--udp", "-p", "3784", "-a", "10.255.0.1"],
        &["-S", "-p", "179"],
        &["--udp", "-p", "3784"],
    ];
    for flood in floods {
        let mut args = vec!["netns", "exec", host.as_str(), "nice", "-n", "19", "hping3", "--flood", "-q"];
        args.extend_from_slice(flood);
        args.push("10.0.0.1");
        let mut hping = Command::new("ip").args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let started = Instant::now();
        // Three BFD detection times (100 ms x 3) each.
        wait_for("the flood to run 1 s", Duration::from_secs(10), || started.elapsed() >= Duration::from_secs(1));
        let _ = hping.kill();
        let _ = hping.wait();
    }
    let after = (sessions(&leaf, "10.255.0.1"), sessions(&spine_dir, "10.255.0.0"));
    assert_eq!(after, before, "no BGP or BFD session went down during the floods (leaf, spine)");
    lab.stop_frr();
    let stats = lab.stop();
    let (host0, up0) = (&stats["ports"]["host0"], &stats["ports"]["up0"]);
    let count = |port: &serde_json::Value, counter: &str, class: &str| port[counter][class].as_u64().unwrap();
    for class in ["bgp", "bfd"] {
        assert!(count(host0, "refused", class) > 100, "the {class} floods, refused: {host0}");
        assert_eq!(count(host0, "punted", class), 0, "none of host0's {class} reached the kernel: {host0}");
        assert_eq!(count(host0, "policed", class), 0, "refused before the policer: {host0}");
        assert!(count(up0, "punted", class) > 0, "the spine's {class} did: {up0}");
        // Only frames of the sessions' first moments, before the kernel's BGP connection to
        // the spine was read (every 50 ms), if any. BFD starts before BGP connects (`timers
        // connect 1`: a try a second) and sends 10 a second, so the margin is five seconds of
        // it: a busy neighbour on CI's two cores once delayed the connection past a second (12
        // BFD frames refused).
        assert!(count(up0, "refused", class) < 50, "{up0}");
    }
    let refused: u64 = host0["refused"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(host0["drops"]["control_acl"].as_u64().unwrap(), refused, "the drop reason sums the classes");
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}
