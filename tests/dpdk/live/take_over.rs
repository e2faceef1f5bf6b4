//! A make-before-break restart under a service manager: SIGUSR2 makes the running switch start
//! its successor (`raceway run --take-over`, same arguments), which starts beside it, is handed
//! the ports, and tells the manager it is the service's process now. The manager here is a
//! datagram socket standing in for systemd's `$NOTIFY_SOCKET`, as `Type=notify` with
//! `NotifyAccess=all` sees it.

use super::*;
use crate::util::*;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The next message the service manager gets, within 90 s (a bound on hangs: EAL starts on a
/// loaded machine have taken 21 s).
fn told(manager: &UnixDatagram) -> String {
    manager.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    let mut buffer = [0u8; 512];
    let len = manager.recv(&mut buffer).expect("the service manager was told nothing");
    String::from_utf8_lossy(&buffer[..len]).into_owned()
}

/// Whether process `pid` still runs (it is not this test's child once its parent exited).
fn alive(pid: u32) -> bool {
    std::process::Command::new("kill").args(["-0", &pid.to_string()]).status().unwrap().success()
}

#[test]
fn sigusr2_starts_a_successor_that_takes_the_ports_over_and_tells_the_service_manager() {
    let _cpus = cpus_shared();
    let dir = tempfile::tempdir().unwrap();
    let id = std::process::id() % 10_000;
    let devices: Vec<String> = (0..4).map(|port| format!("net_null{},no-rx=1", 70 + port)).collect();
    let eal = r#""--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--log-level", "*:error""#;
    let config = dir.path().join("leaf.toml");
    std::fs::write(&config, four_port_config("", [&devices[0], &devices[1], &devices[2], &devices[3]], eal)).unwrap();
    let socket = dir.path().join("notify.sock");
    let manager = UnixDatagram::bind(&socket).unwrap();
    let log = dir.path().join("raceway.log");
    let prefix = format!("raceway-successor-{id}");
    let mut first = KillOnDrop(
        raceway()
            .env("NOTIFY_SOCKET", &socket)
            .args(["run", "-c"])
            .arg(&config)
            .args(["--", "--file-prefix", &prefix])
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    assert_eq!(told(&manager), "READY=1");
    signal(first.0.id(), "USR2");
    let said = told(&manager);
    let successor: u32 = said
        .strip_prefix("MAINPID=")
        .and_then(|rest| rest.strip_suffix("\nREADY=1"))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("the successor said '{said}'"));
    assert_ne!(successor, first.0.id());
    let status = first.wait_for_exit();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "the switch before: {status}\n{text}");
    for line in [
        format!("SIGUSR2: started pid {successor} to take over"),
        format!(
            "take-over: pid {} runs this config's switch; starting beside it on file prefix {prefix}-2",
            first.0.id()
        ),
        "take-over: a new switch takes over".to_string(),
        format!("take-over: pid {} closed its ports", first.0.id()),
        "take-over: 4 port(s) probed".to_string(),
    ] {
        assert!(text.contains(&line), "'{line}' not in:\n{text}");
    }
    assert!(alive(successor), "the successor runs on:\n{text}");
    let shown = raceway().args(["show", "--prefix", &prefix, "interfaces"]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("host0") && shown.contains("up1"), "show finds the successor on {prefix}-2: {shown}");
    signal(successor, "TERM");
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(successor) {
        assert!(Instant::now() < deadline, "the successor did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("mbufs back in pool: ").count(), 2, "both exited cleanly:\n{text}");
    assert!(!text.contains("not back in the pool"), "{text}");
}
