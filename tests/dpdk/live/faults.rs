//! An operator's mistakes around a running switch (issue 65's campaign, the part that needs
//! no namespace): a second plain start of the same config, `show` when the file on disk no
//! longer validates, and flags where an operator puts them.

use super::*;
use crate::util::*;

/// One switch runs a config whose `[dpdk] eal` names its file prefix (so `-c FILE` finds it).
/// A second `raceway run` of the same file is refused before it starts an EAL, naming the
/// running switch's pid and the take-over; `show ... --json` takes its flag after the
/// subcommand; and when the file on disk stops validating, `show -c FILE` still asks the
/// running switch, with one warning that the file differs from what runs.
#[test]
fn a_running_switch_survives_a_second_start_and_a_broken_file() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-operator");
    let prefix = format!("raceway-operator-{}", std::process::id());
    let devices = with_null_sinks("net_null70,no-rx=1".into(), 71);
    let eal = format!(
        r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning", "--file-prefix", "{prefix}""#
    );
    let config = dir.join("leaf.toml");
    let text = four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], &eal);
    std::fs::write(&config, &text).unwrap();
    let (stats, log) = (dir.join("stats.json"), dir.join("raceway.log"));
    let mut running = KillOnDrop(
        raceway()
            .args(["run", "-c"])
            .arg(&config)
            .arg("--stats-json")
            .arg(&stats)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_log(&log, "worker on lcore");

    // A second plain start: refused with one line, before its EAL (no runtime directory of
    // its own to clean) and without touching the first.
    let second = raceway().args(["run", "-c"]).arg(&config).args(["--duration", "1"]).output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{said}");
    let errors: Vec<&str> = error_lines(&said);
    assert_eq!(errors.len(), 1, "{said}");
    assert!(errors[0].contains("held by another switch"), "{said}");
    assert!(errors[0].contains(&format!("pid {}", running.0.id())), "{said}");
    assert!(errors[0].contains("--take-over"), "{said}");
    assert!(!said.contains("EAL arguments"), "refused before its EAL: {said}");

    // `--json` after the subcommand, as `--quiet` goes anywhere.
    let route = raceway().args(["show", "-c"]).arg(&config).args(["route", "10.0.1.7", "--json"]).output().unwrap();
    assert!(route.status.success(), "{}", String::from_utf8_lossy(&route.stderr));
    let route: serde_json::Value = serde_json::from_slice(&route.stdout).unwrap();
    assert!(route.to_string().contains("host1"), "{route}");

    // The file broken on disk (a reload of it is refused): `show` still reaches the switch.
    std::fs::write(&config, text.replace("[switch]\n", "[switch]\nbuffer_bytes = \"lots\"\n")).unwrap();
    let refused = raceway().args(["reload", "-c"]).arg(&config).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    let shown = raceway().args(["show", "-c"]).arg(&config).arg("running-config").output().unwrap();
    let warned = String::from_utf8_lossy(&shown.stderr);
    assert!(shown.status.success(), "{warned}");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("host1"), "{}", String::from_utf8_lossy(&shown.stdout));
    assert_eq!(warned.lines().count(), 1, "{warned}");
    assert!(warned.contains("line 2: buffer_bytes") && warned.contains("differs from this file"), "{warned}");
    // Not TOML at all: nothing to find the switch by, one error line.
    std::fs::write(&config, "[switch\n").unwrap();
    let lost = raceway().args(["show", "-c"]).arg(&config).arg("interfaces").output().unwrap();
    assert_eq!(lost.status.code(), Some(2), "{}", String::from_utf8_lossy(&lost.stderr));

    signal(running.0.id(), "INT");
    assert!(running.wait_for_exit().success(), "{}", read(&log));
    assert!(read(&log).contains("mbufs back in pool"), "{}", read(&log));
}

/// The stats JSON's disk is full at exit (`/dev/full`): the run's summary is logged, every
/// mbuf is back, and the write's failure is one error line with exit status 2, naming the
/// file and the disk's error.
#[test]
fn a_full_disk_for_the_stats_json_is_one_line_after_the_summary() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-stats-full");
    let devices = with_null_sinks("net_null80,no-rx=1".into(), 81);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let prefix = format!("raceway-stats-full-{}", std::process::id());
    let output = raceway()
        .args(["run", "-c"])
        .arg(&config)
        .args(["--duration", "1", "--stats-json", "/dev/full", "--", "--file-prefix", &prefix])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    let errors: Vec<&str> = error_lines(&said);
    assert_eq!(errors, ["error: /dev/full: cannot write: No space left on device (os error 28)"], "{said}");
    assert!(said.contains("mbufs back in pool"), "the summary comes first: {said}");
    assert!(!said.contains("panicked"), "{said}");
}

/// A switch with a net_memif server port on a socket file (`socket-abstract=no`) killed with
/// SIGKILL leaves the file behind; DPDK's memif cannot create its socket over it, and the next
/// start used to fail ("device not found after EAL init"). The next start now removes the
/// stale socket (nothing listens on it), says so once, and runs; a plain file at that path is
/// one clear error line, exit status 2, and is left alone.
#[test]
fn a_start_after_a_kill_clears_the_stale_memif_socket_file() {
    let _cpus = cpus_shared();
    let dir = temp_dir("live-stale-memif");
    let socket = dir.join("m0.sock");
    let devices =
        with_null_sinks(format!("net_memif72,role=server,socket={},socket-abstract=no", socket.display()), 72);
    let eal = r#""--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--log-level", "*:warning""#;
    let config = dir.join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let prefix = format!("raceway-stale-memif-{}", std::process::id());
    let stats = dir.join("stats.json");
    let mut first = start_switch(&config, &stats, &dir.join("first.log"), &prefix);
    assert!(socket.exists(), "the memif socket file");
    first.0.kill().unwrap();
    first.wait_for_exit();
    assert!(socket.exists(), "a killed switch leaves its socket file");

    let second_log = dir.join("second.log");
    let mut second = start_switch(&config, &stats, &second_log, &prefix);
    assert!(read(&second_log).contains("removed the stale memif socket"), "{}", read(&second_log));
    assert!(kill(second.0.id(), "TERM"));
    assert!(second.wait_for_exit().success(), "{}", read(&second_log));

    std::fs::write(&socket, "not a socket").unwrap();
    let refused = raceway().args(["run", "-c"]).arg(&config).args(["--", "--file-prefix", &prefix]).output().unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    let errors = error_lines(&said);
    assert_eq!(errors.len(), 1, "{said}");
    assert!(errors[0].contains("port 'host0'") && errors[0].contains("not a socket"), "{said}");
    assert_eq!(std::fs::read_to_string(&socket).unwrap(), "not a socket", "left alone");
    let _ = std::fs::remove_dir_all(dpdk_runtime_dir(&prefix));
}
