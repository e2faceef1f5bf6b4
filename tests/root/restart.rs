//! Restarts with the control plane kept: the keeper (`raceway keep`) holds the namespace and
//! the host interfaces while the switch stops, so a restart, or a crash, finds them as they
//! were, and FRR's BGP and BFD sessions on them never see the data plane go away.

use crate::bgp::{bgp_bfd_lab_with, sessions};
use crate::bin::raceway;
use crate::lab::*;
use std::time::{Duration, Instant};

/// BFD at 300 ms x 10 on both sides: the goal is 300 ms x 3 (perf/restart.sh measures the
/// restart's gap against it on a quiet machine), but a restart here waits for the EAL's start
/// in 512 MB of ordinary pages, which beside a busy neighbour on two CPUs takes longer than the
/// 600 ms that x 3 leaves in the worst case. The margin keeps what this test proves, that the
/// interfaces stay: without the keeper, the interfaces vanish with the switch and BGP resets
/// at once, whatever BFD's timers.
const BFD_RESTART: &str =
    "bfd\n profile fast\n  detect-multiplier 10\n  receive-interval 300\n  transmit-interval 300\n !\n!\n";

/// The kernel's index of interface `name` in namespace `netns`, and whether it has carrier.
fn interface(netns: &str, name: &str) -> (u64, bool) {
    let json: serde_json::Value = serde_json::from_str(&ok("ip", &["-j", "-n", netns, "link", "show", name])).unwrap();
    let link = &json[0];
    let flags = link["flags"].as_array().unwrap();
    (link["ifindex"].as_u64().unwrap(), flags.iter().any(|flag| flag == "LOWER_UP"))
}

/// A leaf with BGP and BFD to a spine is stopped as systemd's restart stops it (SIGTERM), then
/// killed outright (a crash), and started again each time. Both times the new switch takes
/// over the same host interfaces (same index, carrier kept), forwards again, and no BGP or BFD
/// session went down on either side. While a switch runs, `raceway clean` refuses; `run
/// --clean` starts with new interfaces; once the switch has stopped, `raceway clean` removes
/// the interfaces and the namespace at once.
#[test]
fn a_restart_or_a_crash_keeps_the_host_interfaces_and_every_bgp_and_bfd_session() {
    let _alone = alone();
    let (mut lab, leaf, spine) = bgp_bfd_lab_with("rwk", "keep_interfaces_s = 30", BFD_RESTART);
    let control = lab.control();
    let config_path = lab.dir.join("leaf.toml");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let dump = lab.dir.join("fib.txt");
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    let indexes = (interface(&control, "host0").0, interface(&control, "up0").0);

    let refused = raceway().args(["clean", "-c"]).arg(&config_path).output().unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "clean while the switch runs: {said}");
    let pid = lab.switch.as_ref().unwrap().id();
    assert!(said.contains(&format!("another raceway (pid {pid})")), "{said}");

    for (how, signal) in [("a restart", "-TERM"), ("a crash", "-KILL")] {
        let mut child = lab.switch.take().unwrap();
        let stopped_at = Instant::now();
        ok("kill", &[signal, &child.id().to_string()]);
        let status = child.wait().unwrap();
        if signal == "-TERM" {
            assert!(status.success(), "{how}: raceway {status}");
        }
        for port in ["host0", "up0"] {
            assert!(interface(&control, port).1, "{how}: {port} keeps its carrier while no switch runs");
        }
        lab.start_with(&config, &["host0", "up0"], &[std::ffi::OsStr::new("--fib-dump"), dump.as_os_str()]);
        wait_for("host0 to reach the spine through the new switch", Duration::from_secs(30), || {
            ping(&lab, 0, &["-c", "1", "-W", "1", "10.200.0.1"]).status.success()
        });
        eprintln!("{how}: forwarding again {} ms after the signal", stopped_at.elapsed().as_millis());
        let log = std::fs::read_to_string(lab.dir.join("raceway.log")).unwrap();
        assert!(log.contains("took over the host interfaces kept in"), "{how}: {log}");
        assert_eq!((interface(&control, "host0").0, interface(&control, "up0").0), indexes, "{how}: same interfaces");
    }
    // A whole detection time after the last restart: a session about to fail has failed.
    let settled = Instant::now();
    wait_for("3 s to pass", Duration::from_secs(10), || settled.elapsed() >= Duration::from_secs(3));
    let after = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    assert_eq!(after, before, "no BGP or BFD session went down (leaf, spine)");
    assert!(after.0.up && after.1.up);
    // A mark on the kept interface, which a new one would not have.
    ok("ip", &["-n", &control, "link", "set", "host0", "alias", "kept"]);
    lab.stop_frr();
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
    assert!(interface(&control, "host0").1, "kept after the last stop too");
    // `run --clean`: new interfaces, the kept ones let go first.
    lab.start_with(&config, &["host0", "up0"], &[std::ffi::OsStr::new("--clean")]);
    // The kept interfaces had carrier already: the new switch's are there once it says so.
    let mut log = String::new();
    wait_for("the new switch's host interfaces", Duration::from_secs(30), || {
        log = std::fs::read_to_string(lab.dir.join("raceway.log")).unwrap();
        log.contains("control: a host interface per port")
    });
    assert!(log.contains("--clean: let go of the host interfaces kept in") && !log.contains("took over"), "{log}");
    let shown = ok("ip", &["-n", &control, "link", "show", "host0"]);
    assert!(!shown.contains("alias kept"), "a new interface: {shown}");
    lab.stop();
    let cleaned = ok(env!("CARGO_BIN_EXE_raceway"), &["clean", "-c", config_path.to_str().unwrap()]);
    assert!(cleaned.contains(&format!("let go of the host interfaces kept in {control}")), "{cleaned}");
    let namespaces = ok("ip", &["netns", "list"]);
    assert!(!namespaces.lines().any(|line| line.split(' ').next() == Some(control.as_str())), "{namespaces}");
}

/// A make-before-break restart: `raceway run --take-over` starts beside the running leaf (BGP
/// and BFD to a spine), which forwards until the new one has its EAL and pools, then hands
/// over: it closes its ports and leaves the host interfaces, even with `keep_interfaces_s = 0`,
/// and the new one opens them. Twice, so the file prefix goes to its second slot and back;
/// `raceway show` finds the switch on either. The same interfaces, no session down, and the
/// switch before exits cleanly with every mbuf back. The namespace's sysctls, now written
/// from the control thread inside it, are in force there.
#[test]
fn a_take_over_starts_beside_the_running_switch_and_keeps_every_session() {
    let _alone = alone();
    let (mut lab, leaf, spine) = bgp_bfd_lab_with("rwt", "keep_interfaces_s = 0", BFD_RESTART);
    let control = lab.control();
    let config = std::fs::read_to_string(lab.dir.join("leaf.toml")).unwrap();
    let config_path = lab.dir.join("leaf.toml");
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    let indexes = (interface(&control, "host0").0, interface(&control, "up0").0);
    let prefix = format!("{}sw", lab.prefix);
    let telemetry = |slot: &str| std::path::Path::new("/var/run/dpdk").join(slot).join("dpdk_telemetry.v2");
    for (round, slot) in [format!("{prefix}-2"), prefix.clone()].iter().enumerate() {
        let mut old = lab.switch.take().unwrap();
        let old_log = lab.dir.join(format!("raceway-before-{round}.log"));
        std::fs::rename(lab.dir.join("raceway.log"), &old_log).unwrap();
        let asked = Instant::now();
        lab.start_with(&config, &["host0", "up0"], &[std::ffi::OsStr::new("--take-over")]);
        let status = old.wait().unwrap();
        let said = std::fs::read_to_string(&old_log).unwrap();
        assert!(status.success(), "the switch before: {status}\n{said}");
        assert!(said.contains("take-over: a new switch takes over"), "{said}");
        assert!(said.contains("mbufs back in pool: ") && !said.contains("not back in the pool"), "{said}");
        let reached = Instant::now();
        while !ping(&lab, 0, &["-c", "1", "-W", "1", "10.200.0.1"]).status.success() {
            let log = std::fs::read_to_string(lab.dir.join("raceway.log")).unwrap();
            assert!(reached.elapsed() < Duration::from_secs(30), "host0 cannot reach the spine: {log}");
        }
        eprintln!("take-over {round}: forwarding again {} ms after the start", asked.elapsed().as_millis());
        let log = std::fs::read_to_string(lab.dir.join("raceway.log")).unwrap();
        assert!(log.contains(&format!("take-over: pid {} closed its ports", old.id())), "{log}");
        assert!(
            log.contains(&format!("on file prefix {slot}")) && log.contains("took over the host interfaces"),
            "{log}"
        );
        assert!(telemetry(slot).exists(), "the new switch's telemetry on {slot}");
        let shown = ok(env!("CARGO_BIN_EXE_raceway"), &["show", "-c", config_path.to_str().unwrap(), "interfaces"]);
        assert!(shown.contains("host0") && shown.contains("up0"), "{shown}");
        assert_eq!((interface(&control, "host0").0, interface(&control, "up0").0), indexes, "same interfaces");
    }
    let settled = Instant::now();
    wait_for("3 s to pass", Duration::from_secs(10), || settled.elapsed() >= Duration::from_secs(3));
    let after = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    assert_eq!(after, before, "no BGP or BFD session went down (leaf, spine)");
    assert!(after.0.up && after.1.up);
    for (key, value) in [("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.send_redirects", "0")] {
        let read = ok("ip", &["netns", "exec", &control, "sysctl", "-n", key]);
        assert_eq!(read.trim(), value, "{key} in {control}");
    }
    lab.stop_frr();
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}
