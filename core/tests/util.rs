//! Helpers shared by every tier's end-to-end tests: temp dirs, pcap I/O done with pcap-file
//! directly, a replay and a `check` through the library (what `raceway replay` and `raceway
//! check` run), the configs the tests share, and an Internet checksum written apart from the
//! switch's own. The other tiers include this file (`#[path]`); what runs the binary is theirs
//! (`tests/bin.rs`).
#![allow(dead_code)]

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::TsResolution;
use raceway_core::config::Config;
use raceway_core::engine::replay;
use raceway_core::testing::Leaf;
use raceway_core::traffic::pcap::{OutputFormat, TraceSpec};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fresh directory under the target dir, unique per call: tests running side by side (or
/// two calls with one name) never share one. It is removed when the test is done with it,
/// and kept when the test fails, for a look at what it wrote (a suite's outputs, kept, filled
/// a CI disk).
pub fn temp_dir(name: &str) -> TestDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap_or_else(|e| panic!("a temp dir for {name}: {e}"))
        .keep();
    TestDir(dir)
}

/// A test's directory (`temp_dir`): removed on drop unless the thread is panicking.
#[derive(Debug)]
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TestDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // Best effort: a file a child process still holds open is no reason to fail.
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// What a replay into a fresh directory wrote (`replay_fresh`): derefs to its output
/// directory, and holds the directory until dropped.
#[derive(Debug)]
pub struct Replayed {
    out: PathBuf,
    _dir: TestDir,
}

impl std::ops::Deref for Replayed {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.out
    }
}

/// `replay_in` a fresh directory named after `name`.
pub fn replay_fresh(name: &str, config: &str, inputs: &[Input], extra: &[&str]) -> Replayed {
    let dir = temp_dir(name);
    Replayed { out: replay_in(&dir, config, inputs, extra), _dir: dir }
}

/// Writes (timestamp ns, frame) records as a nanosecond pcap.
pub fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let file = std::fs::File::create(path).unwrap();
    let header = PcapHeader { ts_resolution: TsResolution::NanoSecond, ..PcapHeader::default() };
    let mut writer = PcapWriter::with_header(file, header).unwrap();
    for (ns, bytes) in frames {
        writer.write_packet(&PcapPacket::new(Duration::from_nanos(*ns), bytes.len() as u32, bytes)).unwrap();
    }
}

/// Reads (timestamp ns, frame) records.
pub fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = PcapReader::new(file).unwrap();
    let mut frames = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap();
        frames.push((packet.timestamp.as_nanos() as u64, packet.data.into_owned()));
    }
    frames
}

/// (timestamp ns, frame) records of a trace.
pub type Records = [(u64, Vec<u8>)];
/// A trace offered on a port, by port name.
pub type Input<'a> = (&'a str, &'a Records);

/// Writes `config` and each input trace into `dir`, replays them as `raceway replay` does
/// with `extra` flags (`--seed N`, `--out-format pcapng`, `--peer-ignores-pfc PORT`), and
/// returns the output directory.
pub fn replay_in(dir: &Path, config: &str, inputs: &[Input], extra: &[&str]) -> PathBuf {
    let config_path = dir.join("leaf.toml");
    std::fs::write(&config_path, config).unwrap();
    let files: Vec<(String, PathBuf)> = inputs
        .iter()
        .map(|(port, frames)| {
            let path = dir.join(format!("in-{port}.pcap"));
            write_pcap(&path, frames);
            (port.to_string(), path)
        })
        .collect();
    let files: Vec<(&str, &Path)> = files.iter().map(|(port, path)| (port.as_str(), path.as_path())).collect();
    replay_files(&config_path, &files, &dir.join("out"), extra);
    dir.join("out")
}

/// Replays the trace files `inputs` (port, pcap or pcapng) through the config at
/// `config_path` into `out`, as `raceway replay` does with `extra` flags.
pub fn replay_files(config_path: &Path, inputs: &[(&str, &Path)], out: &Path, extra: &[&str]) {
    let config = Config::load(config_path).unwrap_or_else(|err| panic!("{err}"));
    let mut options = replay::ReplayOptions {
        seed: 0,
        ignore_pfc: Vec::new(),
        report: None,
        out_format: OutputFormat::Pcap,
        progress: false,
    };
    let mut flags = extra.iter();
    while let Some(flag) = flags.next() {
        let mut value = || *flags.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match *flag {
            "--seed" => options.seed = value().parse().unwrap(),
            "--out-format" => {
                options.out_format = if value() == "pcapng" { OutputFormat::PcapNg } else { OutputFormat::Pcap }
            }
            "--peer-ignores-pfc" => {
                let port = value();
                options.ignore_pfc.push(config.ports.iter().position(|p| p.name == port).unwrap());
            }
            "--report" => options.report = Some(PathBuf::from(value())),
            other => panic!("replay_files: {other} is not a flag the helper knows"),
        }
    }
    let inputs: Vec<(usize, TraceSpec)> = inputs
        .iter()
        .map(|(port, path)| {
            let index = config.ports.iter().position(|p| p.name == *port).unwrap_or_else(|| panic!("port {port}"));
            (index, TraceSpec::parse("--in", &path.to_string_lossy()).unwrap_or_else(|err| panic!("{err}")))
        })
        .collect();
    replay::run(&config, &inputs, out, &options).unwrap_or_else(|err| panic!("replay: {err}"));
}

/// What `raceway check` prints for the config at `path`.
pub fn check(path: &Path) -> String {
    raceway_core::config::check::report(&Config::load(path).unwrap_or_else(|err| panic!("{err}")))
}

pub fn stats(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("stats.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// RFC 1071 one's-complement sum of an IPv4 header, written independently of the switch.
fn header_sum(header: &[u8]) -> u16 {
    let ihl = usize::from(header[0] & 0x0f) * 4;
    let mut sum: u64 = 0;
    for pair in header[..ihl].chunks(2) {
        sum += u64::from(pair[0]) << 8 | u64::from(pair[1]);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

pub fn ipv4_header_checksum_ok(header: &[u8]) -> bool {
    header_sum(header) == 0xffff
}

/// Recomputes an IPv4 header checksum in place, independently of the switch.
pub fn fix_ipv4_checksum(header: &mut [u8]) {
    header[10] = 0;
    header[11] = 0;
    let checksum = !header_sum(header);
    header[10..12].copy_from_slice(&checksum.to_be_bytes());
}

/// Offset of the L3 header (after up to two VLAN tags).
pub fn l3_offset(frame: &[u8]) -> usize {
    let mut offset = 12;
    while frame[offset..offset + 2] == [0x81, 0x00] || frame[offset..offset + 2] == [0x88, 0xa8] {
        offset += 4;
    }
    offset + 2
}

/// What a router makes of `frame`: new MACs, TTL/hop limit - 1, IPv4 checksum fixed.
pub fn routed(frame: &[u8], switch_mac: [u8; 6], peer_mac: [u8; 6]) -> Vec<u8> {
    let mut out = frame.to_vec();
    out[0..6].copy_from_slice(&peer_mac);
    out[6..12].copy_from_slice(&switch_mac);
    let l3 = l3_offset(&out);
    if out[l3] >> 4 == 4 {
        out[l3 + 8] -= 1;
        fix_ipv4_checksum(&mut out[l3..]);
    } else {
        out[l3 + 7] -= 1;
    }
    out
}

/// The 4-port leaf used by the end-to-end tests; `eal` and `devices` are for live runs.
pub fn four_port_config(extra_switch: &str, devices: [&str; 4], eal: &str) -> String {
    let mut leaf = Leaf::new("test-leaf").switch(extra_switch).qos(
        "trust = \"dscp\"\ndscp_to_tc = { 26 = 3, 48 = 6, default = 0 }\nlossless = [3]\n\
         [qos.scheduler]\nstrict = [6, 7]\ndwrr = { 0 = 50, 3 = 50 }",
    );
    for (index, name) in PORTS.iter().enumerate() {
        let [.., a, b] = PEER_MACS[index];
        let device = if devices[index].is_empty() { String::new() } else { format!("device = \"{}\"", devices[index]) };
        leaf = leaf.port_to(name, 100.0, &format!("02:00:00:00:{a:02x}:{b:02x}"), &device);
    }
    leaf.route("10.0.0.0/24", "host0")
        .route("10.0.1.0/24", "host1")
        .route("2001:db8:1::/64", "host1")
        .group_route("0.0.0.0/0", "uplinks")
        .group("uplinks", &["up0", "up1"], "ecmp")
        .tables(&format!("[dpdk]\neal = [{eal}]\nlcores = \"0-1\""))
        .toml()
}

pub const SWITCH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const PEER_MACS: [[u8; 6]; 4] =
    [[0x02, 0, 0, 0, 0x10, 0], [0x02, 0, 0, 0, 0x11, 0], [0x02, 0, 0, 0, 0x20, 0], [0x02, 0, 0, 0, 0x21, 0]];
pub const PORTS: [&str; 4] = ["host0", "host1", "up0", "up1"];

/// A leaf with `hosts` ports at 100G (3 m cables), host k owning 10.0.k.0/24 and
/// 2001:db8:k::/64 behind peer MAC 02:00:00:00:10:<k>.
pub fn leaf(hosts: usize, switch_extra: &str, qos_extra: &str, lossless: &str) -> String {
    let mut leaf = Leaf::new("pfc-leaf")
        .switch(switch_extra)
        .qos(&format!("dscp_to_tc = {{ 26 = 3, 48 = 6, default = 0 }}\nlossless = [{lossless}]\n{qos_extra}"));
    for host in 0..hosts {
        let name = format!("h{host}");
        leaf = leaf
            .port_to(&name, 100.0, &format!("02:00:00:00:10:{host:02x}"), "cable_m = 3")
            .route(&format!("10.0.{host}.0/24"), &name)
            .route(&format!("2001:db8:{host}::/64"), &name);
    }
    leaf.toml()
}
