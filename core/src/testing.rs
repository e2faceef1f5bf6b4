//! Fixtures for unit tests, end-to-end tests, benchmarks and fuzz targets (behind the `testing`
//! feature, so what ships does not carry them): a config builder (`Leaf`) and bursts of real
//! RoCEv2 frames, so each test says what is special about its switch instead of copying a page
//! of TOML.
//!
//! Invariant: what the builder writes is an ordinary config file that `Config::parse`
//! validates like any user's; port `i` has peer MAC `02:00:00:00:<0x10 + i>:00` and the switch
//! MAC is `SWITCH_MAC` unless the test says otherwise.

use crate::config::Config;
use crate::traffic::frames::{FrameSpec, Transport};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

/// The switch MAC of a `Leaf`.
pub const SWITCH_MAC: &str = "02:00:00:00:00:01";

/// A switch config written as its TOML file, section by section.
#[derive(Debug, Clone)]
pub struct Leaf {
    name: String,
    mac: String,
    switch: String,
    qos: String,
    ports: Vec<String>,
    rest: String,
}

impl Leaf {
    /// A switch with DSCP 26 in TC3 (lossless) and everything else in TC0, no ports yet.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            mac: SWITCH_MAC.to_string(),
            switch: String::new(),
            qos: "dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n".to_string(),
            ports: Vec::new(),
            rest: String::new(),
        }
    }

    /// The switch's own MAC, in place of `SWITCH_MAC`.
    pub fn mac(mut self, mac: &str) -> Self {
        self.mac = mac.to_string();
        self
    }

    /// More `[switch]` keys (`mtu = 1500`, ...).
    pub fn switch(mut self, lines: &str) -> Self {
        let _ = writeln!(self.switch, "{lines}");
        self
    }

    /// Replaces the `[qos]` keys (a table of its own may follow: `[qos.ecn.3]` ...).
    pub fn qos(mut self, lines: &str) -> Self {
        self.qos = format!("{lines}\n");
        self
    }

    /// Adds a port at `gbps` whose peer has the MAC of the port's index; `extra` adds keys
    /// to it.
    pub fn port(self, name: &str, gbps: f64, extra: &str) -> Self {
        let peer = format!("02:00:00:00:{:02x}:00", 0x10 + self.ports.len());
        self.port_to(name, gbps, &peer, extra)
    }

    /// Adds a port at `gbps` whose peer has MAC `peer_mac` (none when empty: no port routes
    /// or groups then); `extra` adds keys to it. It reads `name`, `extra`, `speed_gbps`,
    /// `peer_mac`, in that order.
    pub fn port_to(mut self, name: &str, gbps: f64, peer_mac: &str, extra: &str) -> Self {
        let extra = if extra.is_empty() || extra.ends_with('\n') { extra.to_string() } else { format!("{extra}\n") };
        let peer = if peer_mac.is_empty() { String::new() } else { format!("peer_mac = \"{peer_mac}\"\n") };
        self.ports.push(format!("[[port]]\nname = \"{name}\"\n{extra}speed_gbps = {gbps}\n{peer}"));
        self
    }

    /// A route from `prefix` to a port.
    pub fn route(self, prefix: &str, port: &str) -> Self {
        self.tables(&format!("[[route]]\nprefix = \"{prefix}\"\nport = \"{port}\""))
    }

    /// A route from `prefix` to a group.
    pub fn group_route(self, prefix: &str, group: &str) -> Self {
        self.tables(&format!("[[route]]\nprefix = \"{prefix}\"\ngroup = \"{group}\""))
    }

    /// A group of ports in `mode`.
    pub fn group(self, name: &str, ports: &[&str], mode: &str) -> Self {
        let ports: Vec<String> = ports.iter().map(|port| format!("\"{port}\"")).collect();
        self.tables(&format!("[[group]]\nname = \"{name}\"\nports = [{}]\nmode = \"{mode}\"", ports.join(", ")))
    }

    /// Any other tables (`[[neighbor]]`, `[control]`, ...), written after the ports.
    pub fn tables(mut self, text: &str) -> Self {
        let _ = writeln!(self.rest, "{text}");
        self
    }

    /// The config file.
    pub fn toml(&self) -> String {
        format!(
            "[switch]\nname = \"{}\"\nmac = \"{}\"\n{}[qos]\n{}{}{}",
            self.name,
            self.mac,
            self.switch,
            self.qos,
            self.ports.concat(),
            self.rest
        )
    }

    /// The validated config; panics with the parser's one line when the fixture is wrong.
    pub fn config(&self) -> Config {
        Config::parse(&self.toml(), &format!("{}.toml", self.name)).unwrap_or_else(|err| panic!("{err}"))
    }

    /// The leaf benchmarks and allocation tests run: `host` (10.0.0.0/24 and a port route for
    /// 10.0.9.0/24 out of `u0`) and uplinks `u0`, `u1` at 100 Gb/s in group `up` (`mode`),
    /// the default route; TC3 lossless with ECN marking from 150 KB.
    pub fn two_uplinks(name: &str, mode: &str) -> Self {
        Self::new(name)
            .qos("dscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n[qos.ecn.3]\nkmin_bytes = 150000\nkmax_bytes = 1500000\npmax = 0.2")
            .port("host", 100.0, "")
            .port("u0", 100.0, "")
            .port("u1", 100.0, "")
            .route("10.0.0.0/24", "host")
            .route("10.0.9.0/24", "u0")
            .group_route("0.0.0.0/0", "up")
            .group("up", &["u0", "u1"], mode)
    }
}

/// A fabric file: 2 leaves, 2 spines, 2 hosts per leaf, 4 MB buffers, TC3 lossless with ECN
/// from 50 KB to `kmax_bytes`, TC6 and TC7 strict; `fabric_extra` adds `[fabric]` keys.
pub fn leaf_spine(name: &str, fabric_extra: &str, kmax_bytes: u64) -> String {
    format!(
        "[fabric]\nname = \"{name}\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n{fabric_extra}\n\
         [switch]\nbuffer_bytes = 4194304\n\
         [qos]\ndscp_to_tc = {{ 26 = 3, 48 = 6, default = 0 }}\nlossless = [3]\n\
         [qos.scheduler]\nstrict = [6, 7]\ndwrr = {{ 0 = 50, 3 = 50 }}\n\
         [qos.ecn.3]\nkmin_bytes = 50000\nkmax_bytes = {kmax_bytes}\npmax = 0.2\n"
    )
}

/// `count` RoCEv2 frames, each its own flow (source port and queue pair), from 10.0.0.2 to
/// 10.0.1.<flow> with DSCP 26 and ECT(0) in 60 bytes, as `shape` then changes each frame's
/// spec (its destination, DSCP, length...).
pub fn rocev2_burst(count: u8, shape: impl Fn(u8, &mut FrameSpec)) -> Vec<Vec<u8>> {
    (0..count)
        .map(|flow| {
            let source = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
            let mut spec = FrameSpec::rocev2(source, IpAddr::V4(Ipv4Addr::new(10, 0, 1, flow)), 1);
            spec.transport =
                Transport::Roce { source: 0xc000 + u16::from(flow), opcode: 4, dest_qp: u32::from(flow), psn: 0 };
            shape(flow, &mut spec);
            spec.build()
        })
        .collect()
}

/// Runs `promtool check metrics` (Debian's prometheus package) on an exposition; the error
/// is what promtool said.
pub fn promtool_check(exposition: &str) -> Result<(), String> {
    use std::io::Write;
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|err| format!("promtool (make deps installs Debian's prometheus package): {err}"))?;
    promtool.stdin.take().expect("piped").write_all(exposition.as_bytes()).map_err(|err| err.to_string())?;
    let output = promtool.wait_with_output().map_err(|err| err.to_string())?;
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if output.status.success() && said.is_empty() {
        Ok(())
    } else {
        Err(said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_writes_a_config_the_parser_accepts() {
        let config = Leaf::two_uplinks("t", "spray").switch("mtu = 1500").config();
        assert_eq!(config.ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["host", "u0", "u1"]);
        assert_eq!(config.ports[2].peer_mac.unwrap().to_string(), "02:00:00:00:12:00");
        assert_eq!((config.mtu, config.routes.len(), config.groups.len()), (1500, 3, 1));
        assert_eq!(config.qos.lossless_priorities, 0b1000);
    }

    #[test]
    fn a_burst_is_one_flow_per_frame_of_the_asked_length() {
        let burst = rocev2_burst(4, |_, spec| spec.frame_len = 200);
        assert_eq!(burst.len(), 4);
        assert!(burst.iter().all(|frame| frame.len() == 200));
        // Distinct UDP source ports (bytes 34-35 after a 14-byte Ethernet and 20-byte IPv4 header).
        assert_ne!(burst[0][34..36], burst[1][34..36]);
    }
}
