//! The live switch on real DPDK ports: the same trace gives the same frames per port as
//! replay, counters agree, and every mbuf is back in the pool at exit. By device: net_pcap
//! runs against replay, signals, PFC, ECN and a port's link (`pcap`); Prometheus and DPDK
//! telemetry against the stats JSON (`telemetry`); sFlow to real collectors (`sflow`); SIGUSR2's
//! make-before-break restart under a service manager (`take_over`); an operator's mistakes
//! around a running switch (`faults`); net_memif with `raceway blast` hosts:
//! accounting, vanishing peers, a leaf-spine, lossless incasts (`memif`). The helpers that
//! start, signal and read a switch are here.

mod faults;
mod memif;
mod pcap;
mod sflow;
mod take_over;
mod telemetry;

use crate::bin::*;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Live tests run busy-polling DPDK processes side by side. Most tolerate sharing the CPUs;
/// one whose outcome depends on how fast a host reacts to a pause (the PFC-honouring incast)
/// takes them alone.
static CPUS: RwLock<()> = RwLock::new(());

fn cpus_shared() -> RwLockReadGuard<'static, ()> {
    CPUS.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn cpus_alone() -> RwLockWriteGuard<'static, ()> {
    CPUS.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// PFC on real DPDK ports: two senders flood a lossless class into a port shaped to 1 Gb/s.
/// The switch sends XOFF (built in mbufs, ahead of data) to both, then XON once drained, on
/// host1 over a tx queue of their own; a net_pcap peer ignores PFC, so its excess overflows
/// the headroom and is counted. A PFC frame received on the egress port is counted.
/// 2,000 lossless RoCEv2 frames of 1000 bytes from 10.0.1.<host> to 10.0.0.2.
fn flood_to_host0(host: u8) -> Vec<(u64, Vec<u8>)> {
    let mut spec = raceway::traffic::frames::FrameSpec::rocev2(
        std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, host)),
        "10.0.0.2".parse().unwrap(),
        u32::from(host),
    );
    spec.frame_len = 1000;
    (0..2000u64).map(|i| (i * 100, spec.build())).collect()
}

/// Runs raceway live for 2 s on `config` (with its own file prefix) and returns its stats.
fn run_live(dir: &std::path::Path, config: &std::path::Path, name: &str, extra: &[&str]) -> serde_json::Value {
    let stats_path = dir.join("stats.json");
    let prefix = format!("raceway-live-{name}-{}", std::process::id());
    run_ok(
        raceway()
            .args(["run", "-c"])
            .arg(config)
            .args(["--duration", "2"])
            .args(extra)
            .arg("--stats-json")
            .arg(&stats_path)
            .args(["--", "--file-prefix", &prefix]),
    );
    serde_json::from_str(&std::fs::read_to_string(&stats_path).unwrap()).unwrap()
}

/// Four port devices: `input`, then three net_null sinks (no rx) named from `first_null`
/// (vdev names are per process, so tests may share them).
fn with_null_sinks(input: String, first_null: u32) -> [String; 4] {
    let sink = |offset: u32| format!("net_null{},no-rx=1", first_null + offset);
    [input, sink(0), sink(1), sink(2)]
}

/// A child process killed if the test fails before it is waited for.
struct KillOnDrop(std::process::Child);

impl KillOnDrop {
    /// Waits (up to 60 s: a bound on hangs, never reached by a working run) for the process
    /// to exit.
    fn wait_for_exit(&mut self) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "raceway did not exit");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Starts `raceway run` on `config` (stats JSON at exit, log to `log`) and returns once its
/// worker runs: memif sockets may be abstract, so there is no file to watch.
fn start_switch(config: &std::path::Path, stats: &std::path::Path, log: &std::path::Path, prefix: &str) -> KillOnDrop {
    start_switch_by(raceway(), config, stats, log, prefix)
}

/// `start_switch` with `command` running raceway (raceway itself, or a wrapper such as
/// taskset given raceway's path).
fn start_switch_by(
    mut command: std::process::Command,
    config: &std::path::Path,
    stats: &std::path::Path,
    log: &std::path::Path,
    prefix: &str,
) -> KillOnDrop {
    let switch = KillOnDrop(
        command
            .args(["run", "-c"])
            .arg(config)
            .arg("--stats-json")
            .arg(stats)
            .args(["--", "--file-prefix", prefix])
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_log(log, "worker on lcore");
    switch
}

/// Waits until `log` contains `text`, for up to 90 s: a bound on hangs. On a loaded machine a
/// switch took 21 s from the EAL's start to its worker (CI: four DPDK processes creating their
/// pools at once on two CPUs).
fn wait_for_log(log: &std::path::Path, text: &str) {
    wait_until(&format!("raceway never logged '{text}'"), std::time::Duration::from_secs(90), || {
        read(log).contains(text)
    });
}

/// Waits until `ready` holds, for up to `within`: a bound on hangs, never reached by a working
/// run; `what` says what never happened.
fn wait_until(what: &str, within: std::time::Duration, ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// DPDK's runtime directory for a file prefix, by the EAL's rule: under /var/run/dpdk as
/// root, else under $XDG_RUNTIME_DIR (or /tmp) /dpdk.
fn dpdk_runtime_dir(prefix: &str) -> std::path::PathBuf {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find_map(|line| line.strip_prefix("Uid:")).unwrap().split_whitespace().next().unwrap();
    let base = if uid == "0" {
        "/var/run".to_string()
    } else {
        std::env::var("XDG_RUNTIME_DIR").unwrap_or_else(|_| "/tmp".to_string())
    };
    std::path::Path::new(&base).join("dpdk").join(prefix)
}

/// The whole records of a pcap file that may still be growing (0 until its header is there).
fn whole_pcap_records(path: &std::path::Path) -> u64 {
    let bytes = std::fs::read(path).unwrap_or_default();
    let (mut at, mut records) = (24, 0);
    while at + 16 <= bytes.len() {
        let captured = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + captured > bytes.len() {
            break;
        }
        at += 16 + captured;
        records += 1;
    }
    records
}

fn signal(pid: u32, name: &str) {
    let sent = std::process::Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}

/// Waits until every thread of `pid` is stopped (state T in /proc).
fn wait_until_stopped(pid: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().all(|task| {
            let stat = std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
            // "pid (comm) S ...": the state follows the command's closing parenthesis.
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
        })
    };
    while !stopped() {
        assert!(std::time::Instant::now() < deadline, "process {pid} did not stop");
        std::thread::yield_now();
    }
}

/// Sends `signal` (TERM, INT, ...) to `pid`; whether `kill` succeeded.
fn kill(pid: u32, signal: &str) -> bool {
    std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().unwrap().success()
}

/// The lines of a command's standard error that are raceway's own errors (`error: ...`).
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.starts_with("error:")).collect()
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// (interface name, direction flags, bytes) of every packet of a pcapng file.
fn read_pcapng(path: &std::path::Path) -> Vec<(String, u32, Vec<u8>)> {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut reader = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut names = Vec::new();
    let mut packets = Vec::new();
    while let Some(block) = reader.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(idb) => names.push(
                idb.options
                    .iter()
                    .find_map(|o| match o {
                        InterfaceDescriptionOption::IfName(name) => Some(name.to_string()),
                        _ => None,
                    })
                    .unwrap_or_default(),
            ),
            Block::EnhancedPacket(epb) => {
                let flags = epb
                    .options
                    .iter()
                    .find_map(|o| match o {
                        EnhancedPacketOption::Flags(flags) => Some(*flags),
                        _ => None,
                    })
                    .unwrap_or(0);
                packets.push((names[epb.interface_id as usize].clone(), flags, epb.data.to_vec()));
            }
            _ => {}
        }
    }
    packets
}

/// A switch config of the live fabric. PFC goes early (static XOFF at 100 KB) and the headroom
/// is large (4 MiB per priority group): these processes share two CPUs, so a switch reacts
/// to a pause in scheduler time slices (milliseconds), not the microseconds the automatic
/// headroom allows for. `ports` are (name, device, speed Gb/s),
/// `routes` (prefix, port or group), and an uplink group `spines` over `group` when given.
fn live_switch(
    name: &str,
    mac: &str,
    ports: &[(&str, String, &str)],
    routes: &[(&str, &str)],
    group: &[&str],
) -> String {
    let mut text = format!(
        "[switch]\nname = \"{name}\"\nmac = \"{mac}\"\nbuffer_bytes = 16777216\n\
         [dpdk]\neal = [\"--no-huge\", \"-m\", \"512\", \"--no-pci\", \"--no-shconf\", \"--log-level\", \"*:warning\"]\n\
         lcores = \"0@0,1@1\"\n\
         [qos]\ndscp_to_tc = {{ 26 = 3, default = 0 }}\nlossless = [3]\n\
         [qos.pfc]\nxoff_bytes = 100000\nxon_bytes = 50000\nheadroom_bytes = 4194304\n\
         [qos.pfc_watchdog]\ndetection_ms = 10000\nrestoration_ms = 20000\n"
    );
    for (port, device, peer_mac) in ports {
        text.push_str(&format!(
            "[[port]]\nname = \"{port}\"\ndevice = \"{device}\"\nspeed_gbps = 1\ncable_m = 10\npeer_mac = \"{peer_mac}\"\n"
        ));
    }
    for (prefix, target) in routes {
        let kind = if *target == "spines" { "group" } else { "port" };
        text.push_str(&format!("[[route]]\nprefix = \"{prefix}\"\n{kind} = \"{target}\"\n"));
    }
    if !group.is_empty() {
        let members: Vec<String> = group.iter().map(|m| format!("\"{m}\"")).collect();
        text.push_str(&format!("[[group]]\nname = \"spines\"\nports = [{}]\nmode = \"spray\"\n", members.join(", ")));
    }
    text
}
