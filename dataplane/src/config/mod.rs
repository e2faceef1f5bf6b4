//! The switch configuration: TOML (docs/CONFIG.md is its contract) read into raw serde structs, then validated
//! into `Config`, whose fields the pipeline can use without further checks.
//!
//! Invariant: a `Config` that exists is consistent: names are unique, every route and group
//! names a port or group that exists, TCs are 0-7, DSCPs 0-63, speeds positive, thresholds
//! ordered. Every rejection is one `InputError` naming the file, the field and the problem.

pub mod check;

use crate::error::InputError;
use crate::keyword::{keywords, Keyword};
use crate::pipeline::punt::{CoppClass, CoppRate};
use crate::units::{LinkRate, TRAFFIC_CLASSES};
use crate::wire::ethernet::MacAddress;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;

const DEFAULT_BUFFER_BYTES: u64 = 16 * 1024 * 1024;
const DEFAULT_MTU: u32 = 9216;
pub const DEFAULT_FLOWLET_GAP_US: u32 = 100;
/// The traffic class the control plane's own frames leave in.
const DEFAULT_CONTROL_TC: u8 = 7;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    switch: RawSwitch,
    #[serde(default)]
    dpdk: RawDpdk,
    #[serde(default)]
    qos: RawQos,
    #[serde(default)]
    port: Vec<RawPort>,
    #[serde(default)]
    route: Vec<RawRoute>,
    #[serde(default)]
    group: Vec<RawGroup>,
    control: Option<RawControl>,
    #[serde(default)]
    neighbor: Vec<RawNeighbor>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNeighbor {
    ip: String,
    mac: String,
    port: String,
}

/// One next hop or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawVia {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawControl {
    netns: Option<String>,
    /// Replaced by `[control.copp.<class>]`; kept to say so.
    punt_pps: Option<toml::Value>,
    punt_burst: Option<toml::Value>,
    #[serde(default)]
    copp: BTreeMap<String, RawCopp>,
    control_tc: Option<i64>,
    multipath_mode: Option<String>,
    #[serde(default)]
    punt_ethertypes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCopp {
    pps: Option<u64>,
    burst: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    name: String,
    mac: String,
    buffer_bytes: Option<u64>,
    mtu: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDpdk {
    #[serde(default)]
    eal: Vec<String>,
    lcores: Option<String>,
    model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQos {
    trust: Option<String>,
    #[serde(default)]
    dscp_to_tc: BTreeMap<String, i64>,
    #[serde(default)]
    pcp_to_tc: BTreeMap<String, i64>,
    #[serde(default)]
    lossless: Vec<i64>,
    #[serde(default)]
    scheduler: RawScheduler,
    #[serde(default)]
    buffer: RawBuffer,
    #[serde(default)]
    pfc: RawPfc,
    #[serde(default)]
    pfc_watchdog: RawWatchdog,
    #[serde(default)]
    ecn: BTreeMap<String, RawEcn>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScheduler {
    #[serde(default)]
    strict: Vec<i64>,
    #[serde(default)]
    dwrr: BTreeMap<String, i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuffer {
    lossless_pool_bytes: Option<u64>,
    lossy_pool_bytes: Option<u64>,
    lossy_alpha: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPfc {
    headroom_bytes: Option<toml::Value>,
    xoff_bytes: Option<toml::Value>,
    xon_bytes: Option<toml::Value>,
    alpha: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWatchdog {
    detection_ms: Option<u32>,
    restoration_ms: Option<u32>,
    action: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEcn {
    kmin_bytes: u64,
    kmax_bytes: u64,
    pmax: f64,
    mark_on: Option<String>,
    measure: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: String,
    device: Option<String>,
    speed_gbps: f64,
    #[serde(default)]
    cable_m: f64,
    peer_mac: Option<String>,
    enabled: Option<bool>,
    #[serde(default)]
    addresses: Vec<String>,
    mtu: Option<u32>,
    pause: Option<String>,
    pfc_tx_queue: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    prefix: String,
    port: Option<String>,
    group: Option<String>,
    via: Option<RawVia>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    ports: Vec<String>,
    mode: Option<String>,
    flowlet_gap_us: Option<u32>,
}

keywords! {
    /// Which header field picks the traffic class (`qos.trust`).
    pub enum Trust {
        Dscp => "dscp",
        Pcp => "pcp",
    }
}

/// A byte threshold given as a number or derived ("auto").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Auto,
    Bytes(u64),
}

/// The shared buffer's pools (`[qos.buffer]`); `pfc::BufferPlan` derives their sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferConfig {
    /// Ingress pool the lossless groups share up to their XOFF points (headroom apart).
    pub lossless_pool_bytes: Option<u64>,
    /// Egress pool the lossy queues share, each up to its dynamic limit.
    pub lossy_pool_bytes: Option<u64>,
    /// A lossy queue may hold up to lossy_alpha x the free lossy pool (SONiC's
    /// `dynamic_th: 3` is alpha 2^3 = 8).
    pub lossy_alpha: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PfcConfig {
    pub headroom_bytes: Threshold,
    pub xoff_bytes: Threshold,
    pub xon_bytes: Threshold,
    pub alpha: f64,
}

keywords! {
    /// What the PFC watchdog does in a storm (`qos.pfc_watchdog.action`).
    pub enum WatchdogAction {
        Drop => "drop",
        Forward => "forward",
        Alert => "alert",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WatchdogConfig {
    pub detection_ms: u32,
    pub restoration_ms: u32,
    pub action: WatchdogAction,
}

keywords! {
    /// When an ECN profile marks (`qos.ecn.N.mark_on`).
    pub enum MarkOn {
        Enqueue => "enqueue",
        Dequeue => "dequeue",
    }
}

keywords! {
    /// What an ECN profile's kmin and kmax are compared with (`qos.ecn.N.measure`).
    pub enum EcnMeasure {
        /// The buffer cells the queue's frames hold (`tm::plan::CELL_BYTES` each), as Broadcom
        /// and Spectrum WRED profiles compare buffer occupancy: the unit XOFF points are in.
        Cells => "cells",
        /// The frame bytes queued: a 60-byte frame counts 60, not the 256 it holds.
        FrameBytes => "frame_bytes",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EcnProfile {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
    pub mark_on: MarkOn,
    pub measure: EcnMeasure,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Qos {
    pub trust: Trust,
    pub dscp_to_tc: [u8; 64],
    pub pcp_to_tc: [u8; 8],
    /// Bit n set: priority n is lossless.
    pub lossless_mask: u8,
    /// Bit n set: TC n is strict priority.
    pub strict_mask: u8,
    /// DWRR weight per TC (1-100; unnamed TCs get 1). Ignored for strict TCs.
    pub dwrr_weights: [u32; TRAFFIC_CLASSES],
    pub buffer: BufferConfig,
    pub pfc: PfcConfig,
    pub watchdog: WatchdogConfig,
    pub ecn: [Option<EcnProfile>; TRAFFIC_CLASSES],
}

#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    pub name: String,
    /// PCI address or vdev devargs (live mode only).
    pub device: Option<String>,
    /// Link speed in Mb/s (integer, so wire times are exact integer arithmetic).
    pub speed_mbps: u64,
    pub cable_m: f64,
    /// The MAC of the port's one neighbour, for `port = ...` routes and groups; optional when
    /// neighbours are learned (`[control]`) or listed (`[[neighbor]]`).
    pub peer_mac: Option<MacAddress>,
    pub enabled: bool,
    /// The port's own addresses (on its host interface, with `[control]`).
    pub addresses: Vec<InterfaceAddress>,
    /// The largest IP packet the port sends (`switch.mtu` unless given; at most that). With
    /// `[control]` its host interface's MTU, which `ip link set ... mtu` changes live.
    pub mtu: u32,
    /// Whether 802.3x PAUSE frames received on the port stop its egress (every class).
    pub honour_pause: bool,
    /// Whether the port's PFC frames leave on a tx queue of their own, so that on the wire
    /// they wait for at most the frame in progress, not for the data the shaper handed the
    /// NIC ahead of its wire time; without one the headroom counts that lookahead
    /// (`tm::plan`). Replay sends PFC frames ahead of data either way.
    pub pfc_tx_queue: bool,
}

/// The ethdev name of a device string: what precedes the first comma.
pub fn device_name(device: &str) -> &str {
    device.split(',').next().unwrap_or(device)
}

/// `0000:3b:00.0` or `3b:00.0`.
pub fn is_pci_address(name: &str) -> bool {
    let parts: Vec<&str> = name.split(':').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    let (bus, device_function) = match parts.as_slice() {
        [domain, bus, df] if hex(domain, 4) => (*bus, *df),
        [bus, df] => (*bus, *df),
        _ => return false,
    };
    match device_function.split_once('.') {
        Some((device, function)) => {
            hex(bus, 2) && hex(device, 2) && function.len() == 1 && function.chars().all(|c| ('0'..='7').contains(&c))
        }
        None => false,
    }
}

/// Whether a port's PFC frames get a tx queue of their own unless the config says: on a PCI
/// NIC, whose tx queues all feed one wire (and which offers several), and on a port with no
/// device (replay). Not on a virtual device: net_memif and net_ring carry each tx queue to
/// the peer's rx queue of the same number, net_pcap writes one file per queue, and
/// net_af_packet, net_af_xdp and net_tap spread a queue pair each over the kernel's queues,
/// while raceway opens one rx queue per port: a second queue there would be a link the peer
/// does not read.
fn default_pfc_tx_queue(device: Option<&str>) -> bool {
    device.is_none_or(|device| is_pci_address(device_name(device)))
}

/// An address on an interface, with the length of the subnet it is on (host bits allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceAddress {
    pub address: IpAddr,
    pub len: u8,
}

/// `ADDRESS/LENGTH`, with the length checked against the address family.
fn address_and_length(text: &str) -> Result<(IpAddr, u8), String> {
    let (address, len) = text.split_once('/').ok_or_else(|| format!("'{text}' is not ADDRESS/LENGTH"))?;
    let address: IpAddr = address.parse().map_err(|_| format!("'{address}' is not an IP address"))?;
    let len: u8 = len.parse().map_err(|_| format!("'{len}' is not a prefix length"))?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(format!("prefix length {len} is longer than {max}"));
    }
    Ok((address, len))
}

impl InterfaceAddress {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (address, len) = address_and_length(text)?;
        if address.is_unspecified() || address.is_multicast() {
            return Err(format!("'{address}' cannot be an interface address"));
        }
        Ok(Self { address, len })
    }
}

impl fmt::Display for InterfaceAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.len)
    }
}

/// The control plane (`[control]`): a Linux interface per port in a namespace of the switch's
/// own, and the frames punted to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlConfig {
    /// The network namespace of the host interfaces.
    pub netns: String,
    /// Each (port, CoPP class)'s policer, by `CoppClass::index`.
    pub copp: [CoppRate; CoppClass::COUNT],
    /// The traffic class frames from the control plane leave in.
    pub control_tc: u8,
    /// The load-balancing mode of the kernel's multipath routes.
    pub multipath_mode: GroupMode,
    /// EtherTypes punted besides ARP, slow protocols and LLDP (class `other`).
    pub punt_ethertypes: Vec<u16>,
}

impl PortConfig {
    /// Time on the wire of a frame of `len` bytes, in picoseconds (see `wire_bytes`).
    #[inline]
    pub fn wire_time_ps(&self, len: usize) -> u64 {
        Self::wire_time_for(self.speed_mbps, len)
    }

    /// `wire_time_ps` at `speed_mbps`.
    #[inline]
    pub fn wire_time_for(speed_mbps: u64, len: usize) -> u64 {
        LinkRate::new(speed_mbps).wire_time_ps(len)
    }
}

keywords! {
    /// How live workers share the pipeline (`dpdk.model`).
    pub enum WorkerModel {
        /// One worker polls every port and runs the whole pipeline.
        RunToCompletion => "run-to-completion",
        /// RX workers classify and hand frames over lock-free rings to one scheduler/TX worker.
        Pipelined => "pipelined",
    }
}

keywords! {
    /// Whether a port obeys 802.3x PAUSE (`port.pause`).
    pub enum PauseRx {
        Honour => "honour",
        Ignore => "ignore",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteTarget {
    Port(usize),
    Group(usize),
    /// Next-hop addresses, resolved to ports and MACs by the neighbour table.
    Via(Vec<IpAddr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub address: IpAddr,
    pub len: u8,
}

impl Prefix {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (address, len) = address_and_length(text)?;
        let host_bits_set = match address {
            IpAddr::V4(v4) => len < 32 && u32::from(v4) & (u32::MAX >> len) != 0,
            IpAddr::V6(v6) => len < 128 && u128::from(v6) & (u128::MAX >> len) != 0,
        };
        if host_bits_set {
            return Err(format!("'{text}' has host bits set"));
        }
        Ok(Self { address, len })
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.len)
    }
}

/// A neighbour the kernel (or the config, `[[neighbor]]`) knows: the FIB resolves next hops
/// to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbor {
    pub ip: IpAddr,
    pub mac: MacAddress,
    pub port: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouteConfig {
    pub prefix: Prefix,
    pub target: RouteTarget,
}

keywords! {
    /// How a group spreads frames over its members (`group.mode`, `control.multipath_mode`,
    /// `raceway fabric --mode`; `pipeline::balance` implements each).
    pub enum GroupMode {
        Ecmp => "ecmp",
        Spray => "spray",
        Random => "random",
        Adaptive => "adaptive",
        Flowlet => "flowlet",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupConfig {
    pub name: String,
    pub members: Vec<usize>,
    pub mode: GroupMode,
    pub flowlet_gap_us: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    pub mac: MacAddress,
    pub buffer_bytes: u64,
    pub mtu: u32,
    pub eal: Vec<String>,
    pub lcores: Option<String>,
    pub model: WorkerModel,
    pub qos: Qos,
    pub ports: Vec<PortConfig>,
    pub routes: Vec<RouteConfig>,
    pub groups: Vec<GroupConfig>,
    pub control: Option<ControlConfig>,
    /// Static neighbours (`[[neighbor]]`).
    pub neighbors: Vec<Neighbor>,
}

impl Config {
    pub fn port_index(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|port| port.name == name)
    }

    /// The port a command-line `flag` names; the error says which config lacks it.
    pub fn port_for_flag(&self, flag: &str, name: &str, config_path: &Path) -> Result<usize, InputError> {
        self.port_index(name)
            .ok_or_else(|| InputError::flag(flag, format!("'{name}' is not a port of {}", config_path.display())))
    }

    /// `PORT=FILE` arguments of a repeatable `flag` (`--in`, `--capture`): each port at most
    /// once.
    pub fn port_files(
        &self,
        flag: &str,
        arguments: &[String],
        config_path: &Path,
    ) -> Result<Vec<(usize, std::path::PathBuf)>, InputError> {
        let mut parsed: Vec<(usize, std::path::PathBuf)> = Vec::new();
        for argument in arguments {
            let (port, file) = argument
                .split_once('=')
                .ok_or_else(|| InputError::flag(flag, format!("'{argument}' is not PORT=FILE")))?;
            let index = self.port_for_flag(flag, port, config_path)?;
            if parsed.iter().any(|(other, _)| *other == index) {
                return Err(InputError::flag(flag, format!("port '{port}' is given twice")));
            }
            parsed.push((index, std::path::PathBuf::from(file)));
        }
        Ok(parsed)
    }

    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|err| InputError::whole_file(&file, format!("cannot read: {err}")))?;
        Self::parse(&text, &file)
    }

    /// Parses and validates config text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, InputError> {
        let raw: RawConfig = toml::from_str(text).map_err(|err| toml_error(text, file, &err))?;
        Validator { file }.validate(raw)
    }
}

/// Turns a TOML/serde error into one line: the line number and key where it points, and the
/// first line of the message.
fn toml_error(text: &str, file: &str, err: &toml::de::Error) -> InputError {
    let message = err.message().lines().next().unwrap_or("invalid TOML").to_string();
    let field = match err.span() {
        Some(span) => {
            let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let line = text.lines().nth(line_no - 1).unwrap_or("");
            match line.split_once('=') {
                Some((key, _)) if !key.trim().is_empty() => format!("line {line_no}: {}", key.trim()),
                _ => format!("line {line_no}"),
            }
        }
        None => String::new(),
    };
    InputError { file: file.to_string(), field, problem: message }
}

struct Validator<'a> {
    file: &'a str,
}

impl Validator<'_> {
    fn error(&self, field: impl Into<String>, problem: impl Into<String>) -> InputError {
        InputError { file: self.file.to_string(), field: field.into(), problem: problem.into() }
    }

    /// The value an optional word names (`default` when the config leaves it out).
    fn keyword<K: Keyword>(&self, field: &str, word: Option<&str>, default: K) -> Result<K, InputError> {
        word.map_or(Ok(default), |word| K::from_word(word).map_err(|problem| self.error(field, problem)))
    }

    fn traffic_class(&self, field: &str, value: i64) -> Result<u8, InputError> {
        u8::try_from(value)
            .ok()
            .filter(|tc| usize::from(*tc) < TRAFFIC_CLASSES)
            .ok_or_else(|| self.error(field, format!("traffic class {value} is not 0-7")))
    }

    fn validate(&self, raw: RawConfig) -> Result<Config, InputError> {
        let mac = MacAddress::parse(&raw.switch.mac)
            .ok_or_else(|| self.error("switch.mac", format!("'{}' is not a MAC address", raw.switch.mac)))?;
        let buffer_bytes = raw.switch.buffer_bytes.unwrap_or(DEFAULT_BUFFER_BYTES);
        if buffer_bytes == 0 {
            return Err(self.error("switch.buffer_bytes", "must be positive"));
        }
        let mtu = raw.switch.mtu.unwrap_or(DEFAULT_MTU);
        if !(68..=16 * 1024).contains(&mtu) {
            return Err(self.error("switch.mtu", format!("{mtu} is not between 68 and 16384")));
        }
        let ports = self.ports(raw.port, mtu, !raw.qos.lossless.is_empty())?;
        let groups = self.groups(raw.group, &ports)?;
        let weighted: Vec<String> = raw.qos.scheduler.dwrr.keys().cloned().collect();
        let mut qos = self.qos(raw.qos)?;
        let control = match raw.control {
            Some(control) => Some(self.control(control, &raw.switch.name)?),
            None => None,
        };
        if control.is_some() {
            // Each port names a Linux interface in the control namespace.
            if let Some(index) = ports.iter().position(|port| port.name.len() > 15) {
                return Err(self.error(
                    format!("port[{index}].name"),
                    format!(
                        "'{}' is longer than the 15 bytes of a Linux interface name ([control])",
                        ports[index].name
                    ),
                ));
            }
        }
        if let Some(control) = &control {
            // The control class is strict unless the operator gave it a DWRR weight: BGP
            // keepalives and ARP replies must not wait behind data.
            if !weighted.contains(&control.control_tc.to_string()) {
                qos.strict_mask |= 1 << control.control_tc;
            }
            if qos.lossless_mask & (1 << control.control_tc) != 0 {
                return Err(self.error(
                    "control.control_tc",
                    format!("TC {} is lossless; the control plane's frames need a lossy class (nothing can pause the kernel)", control.control_tc),
                ));
            }
        }
        let neighbors = self.neighbors(raw.neighbor, &ports)?;
        let routes = self.routes(raw.route, &ports, &groups, &neighbors, control.is_some())?;
        if control.is_none() {
            if let Some(index) = ports.iter().position(|port| !port.addresses.is_empty()) {
                return Err(self.error(
                    format!("port[{index}].addresses"),
                    "addresses need a [control] section (the kernel in the switch's namespace owns them)",
                ));
            }
        }
        let model = self.keyword("dpdk.model", raw.dpdk.model.as_deref(), WorkerModel::RunToCompletion)?;
        let config = Config {
            name: raw.switch.name,
            mac,
            buffer_bytes,
            mtu,
            eal: raw.dpdk.eal,
            lcores: raw.dpdk.lcores,
            model,
            qos,
            ports,
            routes,
            groups,
            control,
            neighbors,
        };
        crate::tm::plan::BufferPlan::new(&config).map_err(|(field, problem)| self.error(field, problem))?;
        Ok(config)
    }

    fn ports(&self, raw: Vec<RawPort>, switch_mtu: u32, pfc_runs: bool) -> Result<Vec<PortConfig>, InputError> {
        if raw.is_empty() {
            return Err(self.error("port", "at least one [[port]] is needed"));
        }
        let mut ports: Vec<PortConfig> = Vec::with_capacity(raw.len());
        for (index, port) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("port[{index}].{name}");
            if port.name.is_empty() || port.name.contains(['/', '=', ' ']) {
                return Err(
                    self.error(field("name"), format!("'{}' must be non-empty without '/', '=' or spaces", port.name))
                );
            }
            if ports.iter().any(|other| other.name == port.name) {
                return Err(self.error(field("name"), format!("duplicate port name '{}'", port.name)));
            }
            if !(port.speed_gbps.is_finite() && port.speed_gbps >= 0.001 && port.speed_gbps <= 1600.0) {
                return Err(self
                    .error(field("speed_gbps"), format!("{} is not a speed between 0.001 and 1600", port.speed_gbps)));
            }
            if !(port.cable_m.is_finite() && (0.0..=100_000.0).contains(&port.cable_m)) {
                return Err(
                    self.error(field("cable_m"), format!("{} is not a length between 0 and 100000", port.cable_m))
                );
            }
            let peer_mac = match &port.peer_mac {
                Some(text) => Some(
                    MacAddress::parse(text)
                        .ok_or_else(|| self.error(field("peer_mac"), format!("'{text}' is not a MAC address")))?,
                ),
                None => None,
            };
            let mut addresses: Vec<InterfaceAddress> = Vec::with_capacity(port.addresses.len());
            for text in &port.addresses {
                let address =
                    InterfaceAddress::parse(text).map_err(|problem| self.error(field("addresses"), problem))?;
                let taken = ports.iter().flat_map(|other| &other.addresses).chain(&addresses);
                if taken.clone().any(|other| other.address == address.address) {
                    return Err(self.error(field("addresses"), format!("{} is on two interfaces", address.address)));
                }
                addresses.push(address);
            }
            let mtu = port.mtu.unwrap_or(switch_mtu);
            if !(68..=switch_mtu).contains(&mtu) {
                return Err(self.error(
                    field("mtu"),
                    format!(
                        "{mtu} is not between 68 and switch.mtu ({switch_mtu}), the largest packet the switch takes"
                    ),
                ));
            }
            // PFC and PAUSE are exclusive on a port (802.3 Annex 31D): where PFC runs (any
            // lossless priority), PAUSE is ignored unless the port says otherwise.
            let default_pause = if pfc_runs { PauseRx::Ignore } else { PauseRx::Honour };
            let honour_pause = self.keyword(&field("pause"), port.pause.as_deref(), default_pause)? == PauseRx::Honour;
            let pfc_tx_queue = port.pfc_tx_queue.unwrap_or_else(|| default_pfc_tx_queue(port.device.as_deref()));
            ports.push(PortConfig {
                name: port.name,
                device: port.device,
                speed_mbps: (port.speed_gbps * 1000.0).round() as u64,
                cable_m: port.cable_m,
                peer_mac,
                enabled: port.enabled.unwrap_or(true),
                addresses,
                mtu,
                honour_pause,
                pfc_tx_queue,
            });
        }
        Ok(ports)
    }

    fn groups(&self, raw: Vec<RawGroup>, ports: &[PortConfig]) -> Result<Vec<GroupConfig>, InputError> {
        let mut groups: Vec<GroupConfig> = Vec::with_capacity(raw.len());
        for (index, group) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("group[{index}].{name}");
            if groups.iter().any(|other| other.name == group.name) {
                return Err(self.error(field("name"), format!("duplicate group name '{}'", group.name)));
            }
            if group.ports.is_empty() {
                return Err(self.error(field("ports"), "a group needs at least one port"));
            }
            let mut members = Vec::with_capacity(group.ports.len());
            for name in &group.ports {
                let port = ports
                    .iter()
                    .position(|port| &port.name == name)
                    .ok_or_else(|| self.error(field("ports"), format!("unknown port '{name}'")))?;
                if ports[port].peer_mac.is_none() {
                    return Err(self.error(field("ports"), format!("port '{name}' has no peer_mac to send to")));
                }
                if members.contains(&port) {
                    return Err(self.error(field("ports"), format!("port '{name}' is listed twice")));
                }
                members.push(port);
            }
            let mode = self.keyword(&field("mode"), group.mode.as_deref(), GroupMode::Ecmp)?;
            groups.push(GroupConfig {
                name: group.name,
                members,
                mode,
                flowlet_gap_us: group.flowlet_gap_us.unwrap_or(DEFAULT_FLOWLET_GAP_US),
            });
        }
        Ok(groups)
    }

    fn neighbors(&self, raw: Vec<RawNeighbor>, ports: &[PortConfig]) -> Result<Vec<Neighbor>, InputError> {
        let mut neighbors: Vec<Neighbor> = Vec::with_capacity(raw.len());
        for (index, neighbor) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("neighbor[{index}].{name}");
            let ip: IpAddr = neighbor
                .ip
                .parse()
                .map_err(|_| self.error(field("ip"), format!("'{}' is not an IP address", neighbor.ip)))?;
            if ip.is_unspecified() || ip.is_multicast() {
                return Err(self.error(field("ip"), format!("'{ip}' cannot be a neighbour")));
            }
            if neighbors.iter().any(|other| other.ip == ip) {
                return Err(self.error(field("ip"), format!("{ip} is listed twice")));
            }
            let mac = MacAddress::parse(&neighbor.mac)
                .ok_or_else(|| self.error(field("mac"), format!("'{}' is not a MAC address", neighbor.mac)))?;
            let port = ports
                .iter()
                .position(|port| port.name == neighbor.port)
                .ok_or_else(|| self.error(field("port"), format!("unknown port '{}'", neighbor.port)))?;
            neighbors.push(Neighbor { ip, mac, port });
        }
        Ok(neighbors)
    }

    fn routes(
        &self,
        raw: Vec<RawRoute>,
        ports: &[PortConfig],
        groups: &[GroupConfig],
        neighbors: &[Neighbor],
        control: bool,
    ) -> Result<Vec<RouteConfig>, InputError> {
        let mut routes: Vec<RouteConfig> = Vec::with_capacity(raw.len());
        for (index, route) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("route[{index}].{name}");
            let prefix = Prefix::parse(&route.prefix).map_err(|problem| self.error(field("prefix"), problem))?;
            if routes.iter().any(|other| other.prefix == prefix) {
                return Err(self.error(field("prefix"), format!("duplicate route for {prefix}")));
            }
            let target = match (route.port, route.group, route.via) {
                (None, None, Some(via)) => RouteTarget::Via(self.next_hops(&field("via"), via, neighbors, control)?),
                (Some(name), None, None) => {
                    let port = ports
                        .iter()
                        .position(|port| port.name == name)
                        .ok_or_else(|| self.error(field("port"), format!("unknown port '{name}'")))?;
                    if ports[port].peer_mac.is_none() {
                        return Err(self.error(
                            field("port"),
                            format!("port '{name}' has no peer_mac to send to (or route via a next-hop address)"),
                        ));
                    }
                    RouteTarget::Port(port)
                }
                (None, Some(name), None) => RouteTarget::Group(
                    groups
                        .iter()
                        .position(|group| group.name == name)
                        .ok_or_else(|| self.error(field("group"), format!("unknown group '{name}'")))?,
                ),
                _ => return Err(self.error(field("port"), "a route needs exactly one of port, group or via")),
            };
            routes.push(RouteConfig { prefix, target });
        }
        Ok(routes)
    }

    /// A route's next hops: addresses, each with a static neighbour unless the control plane
    /// resolves them.
    fn next_hops(
        &self,
        field: &str,
        raw: RawVia,
        neighbors: &[Neighbor],
        control: bool,
    ) -> Result<Vec<IpAddr>, InputError> {
        let texts = match raw {
            RawVia::One(text) => vec![text],
            RawVia::Many(texts) => texts,
        };
        if texts.is_empty() {
            return Err(self.error(field, "a route needs at least one next hop"));
        }
        let mut next_hops: Vec<IpAddr> = Vec::with_capacity(texts.len());
        for text in &texts {
            let ip: IpAddr = text.parse().map_err(|_| self.error(field, format!("'{text}' is not an IP address")))?;
            if next_hops.contains(&ip) {
                return Err(self.error(field, format!("{ip} is listed twice")));
            }
            if !control && !neighbors.iter().any(|neighbor| neighbor.ip == ip) {
                return Err(
                    self.error(field, format!("{ip} has no [[neighbor]], and without [control] nothing resolves it"))
                );
            }
            next_hops.push(ip);
        }
        Ok(next_hops)
    }

    fn control(&self, raw: RawControl, switch_name: &str) -> Result<ControlConfig, InputError> {
        let netns = raw.netns.unwrap_or_else(|| format!("raceway-{switch_name}"));
        if netns.is_empty() || netns.len() > 64 || netns.contains(['/', ' ', '\0']) || netns == "." || netns == ".." {
            return Err(self.error(
                "control.netns",
                format!("'{netns}' is not a namespace name (1-64 characters, no '/' or spaces)"),
            ));
        }
        for (field, value) in [("control.punt_pps", &raw.punt_pps), ("control.punt_burst", &raw.punt_burst)] {
            if value.is_some() {
                return Err(self.error(field, "replaced by per-class policers: [control.copp.<class>] pps, burst"));
            }
        }
        let copp = self.copp(&raw.copp)?;
        let control_tc = match raw.control_tc {
            Some(tc) => self.traffic_class("control.control_tc", tc)?,
            None => DEFAULT_CONTROL_TC,
        };
        let multipath_mode = self.keyword("control.multipath_mode", raw.multipath_mode.as_deref(), GroupMode::Ecmp)?;
        let mut punt_ethertypes = Vec::with_capacity(raw.punt_ethertypes.len());
        for text in &raw.punt_ethertypes {
            let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
            let value = digits.and_then(|digits| u16::from_str_radix(digits, 16).ok()).filter(|v| *v >= 0x0600);
            let value = value.ok_or_else(|| {
                self.error("control.punt_ethertypes", format!("'{text}' is not an EtherType (0x0600-0xffff, in hex)"))
            })?;
            if matches!(value, 0x0800 | 0x86dd | 0x8100 | 0x88a8 | 0x8808) {
                return Err(self.error(
                    "control.punt_ethertypes",
                    format!("{text} is routed or handled by the data plane; it cannot be punted whole"),
                ));
            }
            if let Some(class) = [(0x0806, "arp"), (0x8809, "lacp"), (0x88cc, "lldp")]
                .iter()
                .find_map(|(always, class)| (*always == value).then_some(class))
            {
                return Err(self.error(
                    "control.punt_ethertypes",
                    format!("{text} is always punted (class {class}); list only other EtherTypes"),
                ));
            }
            punt_ethertypes.push(value);
        }
        Ok(ControlConfig { netns, copp, control_tc, multipath_mode, punt_ethertypes })
    }

    /// `[control.copp.<class>]`: each class's rate and burst, SONiC's defaults where unset; a
    /// burst left out is one second's worth of the rate.
    fn copp(&self, raw: &BTreeMap<String, RawCopp>) -> Result<[CoppRate; CoppClass::COUNT], InputError> {
        let mut rates = CoppClass::ALL.map(CoppRate::default_for);
        for (name, settings) in raw {
            let class = CoppClass::parse(name).ok_or_else(|| {
                let names: Vec<&str> = CoppClass::ALL.iter().map(|class| class.name()).collect();
                self.error(format!("control.copp.{name}"), format!("not a CoPP class ({})", names.join(", ")))
            })?;
            let pps = settings.pps.unwrap_or(class.default_pps());
            let burst = settings.burst.unwrap_or(pps);
            for (field, value) in [("pps", pps), ("burst", burst)] {
                if !(1..=10_000_000).contains(&value) {
                    return Err(
                        self.error(format!("control.copp.{name}.{field}"), format!("{value} is not 1-10000000"))
                    );
                }
            }
            rates[class.index()] = CoppRate { pps, burst };
        }
        Ok(rates)
    }

    fn qos(&self, raw: RawQos) -> Result<Qos, InputError> {
        let trust = self.keyword("qos.trust", raw.trust.as_deref(), Trust::Dscp)?;
        let dscp_to_tc = self.class_map::<64>("qos.dscp_to_tc", "DSCP", &raw.dscp_to_tc)?;
        let pcp_to_tc = self.class_map::<8>("qos.pcp_to_tc", "PCP", &raw.pcp_to_tc)?;
        let mut lossless_mask = 0u8;
        for priority in &raw.lossless {
            lossless_mask |= 1 << self.traffic_class("qos.lossless", *priority)?;
        }
        let mut strict_mask = 0u8;
        for tc in &raw.scheduler.strict {
            strict_mask |= 1 << self.traffic_class("qos.scheduler.strict", *tc)?;
        }
        let mut dwrr_weights = [1u32; TRAFFIC_CLASSES];
        for (key, weight) in &raw.scheduler.dwrr {
            let field = format!("qos.scheduler.dwrr.{key}");
            let tc = key.parse::<i64>().map_err(|_| self.error(&field, "key must be a traffic class 0-7"))?;
            let tc = self.traffic_class(&field, tc)?;
            if strict_mask & (1 << tc) != 0 {
                return Err(self.error(&field, format!("TC {tc} is strict; it cannot also have a DWRR weight")));
            }
            if !(1..=100).contains(weight) {
                return Err(self.error(&field, format!("weight {weight} is not 1-100")));
            }
            dwrr_weights[usize::from(tc)] = *weight as u32;
        }
        Ok(Qos {
            trust,
            dscp_to_tc,
            pcp_to_tc,
            lossless_mask,
            strict_mask,
            dwrr_weights,
            buffer: self.buffer(raw.buffer)?,
            pfc: self.pfc(raw.pfc)?,
            watchdog: self.watchdog(raw.pfc_watchdog)?,
            ecn: self.ecn(raw.ecn)?,
        })
    }

    /// A `{ value = tc, ..., default = tc }` map from a header field (DSCP 0-63, PCP 0-7) to
    /// traffic classes; values not named take the default (TC 0 without one).
    fn class_map<const N: usize>(
        &self,
        name: &str,
        what: &str,
        raw: &BTreeMap<String, i64>,
    ) -> Result<[u8; N], InputError> {
        let mut map = [0u8; N];
        if let Some(default) = raw.get("default") {
            map = [self.traffic_class(&format!("{name}.default"), *default)?; N];
        }
        for (key, tc) in raw.iter().filter(|(key, _)| key.as_str() != "default") {
            let field = format!("{name}.{key}");
            let value: usize = key
                .parse()
                .ok()
                .filter(|value| *value < N)
                .ok_or_else(|| self.error(&field, format!("{what} must be 0-{} or 'default'", N - 1)))?;
            map[value] = self.traffic_class(&field, *tc)?;
        }
        Ok(map)
    }

    fn threshold(&self, field: &str, value: Option<toml::Value>) -> Result<Threshold, InputError> {
        match value {
            None => Ok(Threshold::Auto),
            Some(toml::Value::String(text)) if text == "auto" => Ok(Threshold::Auto),
            Some(toml::Value::Integer(bytes)) if bytes >= 0 => Ok(Threshold::Bytes(bytes as u64)),
            Some(other) => {
                Err(self.error(field, format!("a {} is neither \"auto\" nor a byte count", other.type_str())))
            }
        }
    }

    fn buffer(&self, raw: RawBuffer) -> Result<BufferConfig, InputError> {
        let lossy_alpha = raw.lossy_alpha.unwrap_or(8.0);
        if !(lossy_alpha.is_finite() && lossy_alpha > 0.0 && lossy_alpha <= 64.0) {
            return Err(
                self.error("qos.buffer.lossy_alpha", format!("{lossy_alpha} is not between 0 (exclusive) and 64"))
            );
        }
        Ok(BufferConfig {
            lossless_pool_bytes: raw.lossless_pool_bytes,
            lossy_pool_bytes: raw.lossy_pool_bytes,
            lossy_alpha,
        })
    }

    fn pfc(&self, raw: RawPfc) -> Result<PfcConfig, InputError> {
        let alpha = raw.alpha.unwrap_or(1.0);
        if !(alpha.is_finite() && alpha > 0.0 && alpha <= 64.0) {
            return Err(self.error("qos.pfc.alpha", format!("{alpha} is not between 0 (exclusive) and 64")));
        }
        let pfc = PfcConfig {
            headroom_bytes: self.threshold("qos.pfc.headroom_bytes", raw.headroom_bytes)?,
            xoff_bytes: self.threshold("qos.pfc.xoff_bytes", raw.xoff_bytes)?,
            xon_bytes: self.threshold("qos.pfc.xon_bytes", raw.xon_bytes)?,
            alpha,
        };
        if let (Threshold::Bytes(xoff), Threshold::Bytes(xon)) = (pfc.xoff_bytes, pfc.xon_bytes) {
            if xon > xoff {
                return Err(self.error("qos.pfc.xon_bytes", format!("xon {xon} is above xoff {xoff}")));
            }
        }
        Ok(pfc)
    }

    fn watchdog(&self, raw: RawWatchdog) -> Result<WatchdogConfig, InputError> {
        let detection_ms = raw.detection_ms.unwrap_or(200);
        if detection_ms == 0 {
            return Err(self.error("qos.pfc_watchdog.detection_ms", "must be positive"));
        }
        let action = self.keyword("qos.pfc_watchdog.action", raw.action.as_deref(), WatchdogAction::Drop)?;
        // SONiC's defaults: 200 ms to detect, 200 ms without PFC to restore.
        let restoration_ms = raw.restoration_ms.unwrap_or(200);
        if restoration_ms == 0 {
            return Err(self.error("qos.pfc_watchdog.restoration_ms", "must be positive"));
        }
        Ok(WatchdogConfig { detection_ms, restoration_ms, action })
    }

    fn ecn(&self, raw: BTreeMap<String, RawEcn>) -> Result<[Option<EcnProfile>; TRAFFIC_CLASSES], InputError> {
        let mut profiles: [Option<EcnProfile>; TRAFFIC_CLASSES] = Default::default();
        for (key, profile) in raw {
            let field = format!("qos.ecn.{key}");
            let tc = key.parse::<i64>().map_err(|_| self.error(&field, "key must be a traffic class 0-7"))?;
            let tc = self.traffic_class(&field, tc)?;
            if profile.kmin_bytes > profile.kmax_bytes {
                return Err(self.error(
                    format!("{field}.kmin_bytes"),
                    format!("kmin {} is above kmax {}", profile.kmin_bytes, profile.kmax_bytes),
                ));
            }
            if !(profile.pmax.is_finite() && (0.0..=1.0).contains(&profile.pmax)) {
                return Err(self.error(format!("{field}.pmax"), format!("{} is not a probability 0-1", profile.pmax)));
            }
            let mark_on = self.keyword(&format!("{field}.mark_on"), profile.mark_on.as_deref(), MarkOn::Enqueue)?;
            let measure = self.keyword(&format!("{field}.measure"), profile.measure.as_deref(), EcnMeasure::Cells)?;
            profiles[usize::from(tc)] = Some(EcnProfile {
                kmin_bytes: profile.kmin_bytes,
                kmax_bytes: profile.kmax_bytes,
                pmax: profile.pmax,
                mark_on,
                measure,
            });
        }
        Ok(profiles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[switch]
name = "leaf1"
mac = "02:00:00:00:00:01"

[qos]
dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }
lossless = [3]

[qos.scheduler]
strict = [6, 7]
dwrr = { 0 = 50, 3 = 50 }

[[port]]
name = "host0"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"

[[port]]
name = "up0"
speed_gbps = 25
peer_mac = "02:00:00:00:20:00"

[[route]]
prefix = "10.0.0.0/24"
port = "host0"

[[route]]
prefix = "0.0.0.0/0"
group = "uplinks"

[[group]]
name = "uplinks"
ports = ["up0"]
"#;

    #[test]
    fn a_valid_config_parses() {
        let config = Config::parse(MINIMAL, "t.toml").unwrap();
        assert_eq!(config.ports.len(), 2);
        assert_eq!(config.ports[1].speed_mbps, 25_000);
        assert_eq!(config.qos.dscp_to_tc[26], 3);
        assert_eq!(config.qos.dscp_to_tc[48], 6);
        assert_eq!(config.qos.dscp_to_tc[0], 0);
        assert_eq!(config.qos.lossless_mask, 0b1000);
        assert_eq!(config.qos.strict_mask, 0b1100_0000);
        assert_eq!(config.qos.dwrr_weights, [50, 1, 1, 50, 1, 1, 1, 1]);
        assert_eq!(config.routes[1].target, RouteTarget::Group(0));
        assert_eq!(config.buffer_bytes, DEFAULT_BUFFER_BYTES);
    }

    #[test]
    fn wire_time_counts_preamble_gap_and_fcs() {
        let config = Config::parse(MINIMAL, "t.toml").unwrap();
        // 60 bytes + 24 overhead = 84 bytes = 672 bits = 6.72 ns at 100G.
        assert_eq!(config.ports[0].wire_time_ps(60), 6_720);
        assert_eq!(config.ports[1].wire_time_ps(60), 26_880);
        // Shorter frames are padded to the minimum: a 42-byte ARP takes as long as 60 bytes.
        assert_eq!(config.ports[0].wire_time_ps(42), 6_720);
        assert_eq!(config.ports[0].wire_time_ps(61), 6_800);
    }

    fn error_for(edit: (&str, &str)) -> InputError {
        let text = MINIMAL.replacen(edit.0, edit.1, 1);
        assert_ne!(text, MINIMAL, "edit {edit:?} did not apply");
        Config::parse(&text, "t.toml").unwrap_err()
    }

    #[test]
    fn each_mistake_gets_one_clear_line() {
        let cases = [
            (("mac = \"02:00:00:00:00:01\"", "mac = \"02:00\""), "switch.mac"),
            (("name = \"up0\"", "name = \"host0\""), "port[1].name"),
            (("speed_gbps = 25", "speed_gbps = 0"), "port[1].speed_gbps"),
            (("port = \"host0\"", "port = \"host9\""), "route[0].port"),
            (("group = \"uplinks\"", "group = \"spines\""), "route[1].group"),
            (("ports = [\"up0\"]", "ports = [\"up9\"]"), "group[0].ports"),
            (("10.0.0.0/24", "10.0.0.1/24"), "route[0].prefix"),
            (("26 = 3", "26 = 8"), "qos.dscp_to_tc.26"),
            (("26 = 3", "64 = 3"), "qos.dscp_to_tc.64"),
            (("dwrr = { 0 = 50", "dwrr = { 6 = 50"), "qos.scheduler.dwrr.6"),
            (("dwrr = { 0 = 50", "dwrr = { 0 = 500"), "qos.scheduler.dwrr.0"),
            (("lossless = [3]", "lossless = [3]\ntrust = \"vlan\""), "qos.trust"),
            (
                ("lossless = [3]", "lossless = [3]\n[qos.ecn.3]\nkmin_bytes = 9\nkmax_bytes = 1\npmax = 0.1"),
                "qos.ecn.3.kmin_bytes",
            ),
            (
                (
                    "lossless = [3]",
                    "lossless = [3]\n[qos.ecn.3]\nkmin_bytes = 1\nkmax_bytes = 9\npmax = 0.1\nmeasure = \"packets\"",
                ),
                "qos.ecn.3.measure",
            ),
            (("lossless = [3]", "lossless = [3]\n[qos.pfc]\nxoff_bytes = 100\nxon_bytes = 200"), "qos.pfc.xon_bytes"),
        ];
        for (edit, field) in cases {
            let err = error_for(edit);
            assert_eq!(err.field, field, "{edit:?} gave {err}");
            assert_eq!(err.file, "t.toml");
            assert!(!err.to_string().contains('\n'));
        }
    }

    #[test]
    fn toml_errors_name_the_line_and_key() {
        let err = error_for(("speed_gbps = 25", "speed_gbps = \"fast\""));
        assert!(err.field.ends_with("speed_gbps"), "{err}");
        assert!(err.field.starts_with("line "), "{err}");
        let err = error_for(("speed_gbps = 25", "speed_gpbs = 25"));
        assert!(err.problem.contains("speed_gpbs"), "{err}");
        assert!(!err.to_string().contains('\n'));
        let err = Config::parse("[switch\n", "bad.toml").unwrap_err();
        assert_eq!(err.file, "bad.toml");
    }

    #[test]
    fn worker_model() {
        assert_eq!(Config::parse(MINIMAL, "t.toml").unwrap().model, WorkerModel::RunToCompletion);
        let pipelined = format!("{MINIMAL}\n[dpdk]\nlcores = \"0@0,1@1,2@0\"\nmodel = \"pipelined\"\n");
        assert_eq!(Config::parse(&pipelined, "t.toml").unwrap().model, WorkerModel::Pipelined);
        let err = Config::parse(&format!("{MINIMAL}\n[dpdk]\nmodel = \"turbo\"\n"), "t.toml").unwrap_err();
        assert_eq!(err.field, "dpdk.model");
    }

    #[test]
    fn pause_is_ignored_where_pfc_runs_unless_the_port_says_otherwise() {
        let parse = |lossless: &str, pause: &str| {
            crate::testing::Leaf::new("p")
                .qos(&format!("lossless = [{lossless}]"))
                .port("p0", 100.0, pause)
                .port("p1", 100.0, "")
                .toml()
        };
        let honours = |text: String| {
            let config = Config::parse(&text, "p.toml").unwrap();
            (config.ports[0].honour_pause, config.ports[1].honour_pause)
        };
        assert_eq!(honours(parse("", "")), (true, true), "no PFC: PAUSE honoured");
        assert_eq!(honours(parse("3", "")), (false, false), "PFC runs: ignored");
        assert_eq!(honours(parse("3", "pause = \"honour\"")), (true, false));
        assert_eq!(honours(parse("", "pause = \"ignore\"")), (false, true));
        let err = Config::parse(&parse("", "pause = \"obey\""), "p.toml").unwrap_err();
        assert_eq!(err.field, "port[0].pause");
        assert!(err.problem.contains("'obey' is not honour or ignore"), "{}", err.problem);
    }

    #[test]
    fn pfc_frames_get_a_tx_queue_of_their_own_on_pci_nics_and_without_a_device() {
        let queue = |extra: &str| {
            let text = crate::testing::Leaf::new("q").qos("lossless = [3]").port("p0", 100.0, extra).toml();
            Config::parse(&text, "q.toml").unwrap().ports[0].pfc_tx_queue
        };
        assert!(queue(""), "replay: no NIC queue to wait in");
        assert!(queue("device = \"0000:3b:00.0\""));
        assert!(!queue("device = \"net_memif0,role=server\""), "a second memif queue is another link");
        assert!(!queue("device = \"net_af_packet0,iface=veth0\""));
        assert!(queue("device = \"net_null0\"\npfc_tx_queue = true"), "the port says");
        assert!(!queue("device = \"0000:3b:00.0\"\npfc_tx_queue = false"));
    }

    #[test]
    fn copp_classes_take_sonic_defaults_and_overrides_per_class() {
        let copp = |tables: &str| {
            Config::parse(&format!("{MINIMAL}\n[control]\n{tables}"), "t.toml")
                .map(|config| config.control.unwrap().copp)
        };
        let rate = |pps, burst| CoppRate { pps, burst };
        let defaults = copp("").unwrap();
        assert_eq!(defaults, CoppClass::ALL.map(CoppRate::default_for));
        // A rate alone sets the burst to one second of it; a burst alone keeps the rate.
        let set = copp("[control.copp.ip2me]\npps = 100\n[control.copp.bgp]\nburst = 50\n").unwrap();
        assert_eq!(set[CoppClass::Ip2me.index()], rate(100, 100));
        assert_eq!(set[CoppClass::Bgp.index()], rate(6000, 50));
        assert_eq!(set[CoppClass::Arp.index()], defaults[CoppClass::Arp.index()]);
        let error = |tables: &str| {
            let err = copp(tables).unwrap_err();
            (err.field, err.problem)
        };
        let (field, problem) = error("[control.copp.icmp]\npps = 10\n");
        assert_eq!(field, "control.copp.icmp");
        assert!(problem.contains("bgp, bfd, lacp, arp, lldp, ip2me, glean, ttl, unreachable, mtu, other"), "{problem}");
        assert_eq!(error("[control.copp.arp]\npps = 0\n").0, "control.copp.arp.pps");
        assert_eq!(error("[control.copp.arp]\nburst = 10000001\n").0, "control.copp.arp.burst");
        let (field, problem) = error("punt_pps = 2000\n");
        assert_eq!(field, "control.punt_pps");
        assert!(problem.contains("[control.copp.<class>]"), "{problem}");
        assert_eq!(error("punt_burst = 10\n").0, "control.punt_burst");
        let (field, problem) = error("punt_ethertypes = [\"0x8809\"]\n");
        assert_eq!(field, "control.punt_ethertypes");
        assert!(problem.contains("class lacp"), "{problem}");
    }

    #[test]
    fn prefixes() {
        assert_eq!(Prefix::parse("10.0.0.0/8").unwrap().len, 8);
        assert_eq!(Prefix::parse("2001:db8::/32").unwrap().len, 32);
        assert!(Prefix::parse("10.0.0.0/33").is_err());
        assert!(Prefix::parse("10.0.0.0").is_err());
        assert!(Prefix::parse("2001:db8::1/64").is_err());
        assert_eq!(Prefix::parse("::/0").unwrap().len, 0);
    }
}
