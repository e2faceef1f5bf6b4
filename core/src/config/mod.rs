//! The switch configuration: TOML (docs/CONFIG.md is its contract) read into raw serde structs, then validated
//! into `Config`, whose fields the pipeline can use without further checks.
//!
//! Invariant: a `Config` that exists is consistent: names are unique, every route and group
//! names a port or group that exists, TCs are 0-7, DSCPs 0-63, speeds positive, thresholds
//! ordered. Every rejection is one `InputError` naming the file, the field and the problem.

mod acl;
mod buffer;
pub mod check;
mod control;
mod copp;
mod ecn;
pub mod fabric;
mod group;
pub mod plan;
mod port;
mod qos;
pub mod reload;
mod route;
mod sflow;
mod trim;

pub use acl::{AclAction, AclRule, AclStage, AclTable, PROTOCOL_TCP, PROTOCOL_UDP};
pub use buffer::{BufferConfig, PfcConfig, Threshold, WatchdogAction, WatchdogConfig};
pub use control::{ControlAcl, ControlConfig, CoppScope, Sources};
pub use copp::{CoppClass, CoppRate};
pub use ecn::{EcnMeasure, EcnProfile, MarkOn};
pub use group::{GroupConfig, GroupMode, DEFAULT_FLOWLET_GAP_US};
pub use port::{device_name, is_pci_address, InterfaceAddress, PauseRx, PortConfig, MAX_RX_QUEUES};
pub use qos::{Qos, Trust};
pub use route::{Neighbor, Prefix, RouteConfig, RouteTarget};
pub use sflow::{SflowConfig, MAX_HEADER_BYTES as SFLOW_MAX_HEADER_BYTES};
pub use trim::{TrimConfig, DEFAULT_TRIM_BYTES};

use crate::error::InputError;
use crate::keyword::Keyword;
use crate::wire::ethernet::MacAddress;
use acl::RawAcl;
use control::RawControl;
use group::RawGroup;
use port::{address_and_length, RawPort};
use qos::RawQos;
use route::{RawNeighbor, RawRoute};
use serde::Deserialize;
use std::path::Path;

const DEFAULT_BUFFER_BYTES: u64 = 16 * 1024 * 1024;
const DEFAULT_MTU: u32 = 9216;
/// DPDK's default (`RTE_MBUF_DEFAULT_DATAROOM`).
pub const DEFAULT_MBUF_BYTES: u32 = 2048;

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
    #[serde(default)]
    acl: Vec<RawAcl>,
    sflow: Option<sflow::RawSflow>,
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
    /// Only "run-to-completion", the one model: kept so that configs naming it still load,
    /// and so that one naming the retired pipelined model gets told what replaced it.
    model: Option<String>,
    mbuf_bytes: Option<u32>,
}

/// `dpdk.model`'s one value.
const RUN_TO_COMPLETION: &str = "run-to-completion";

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    pub mac: MacAddress,
    pub buffer_bytes: u64,
    pub mtu: u32,
    pub eal: Vec<String>,
    pub lcores: Option<String>,
    /// Frame bytes an mbuf holds (its data room less the headroom): a longer frame arrives
    /// as a chain of them (`[dpdk] mbuf_bytes`).
    pub mbuf_bytes: u32,
    pub qos: Qos,
    pub ports: Vec<PortConfig>,
    pub routes: Vec<RouteConfig>,
    pub groups: Vec<GroupConfig>,
    pub control: Option<ControlConfig>,
    /// Static neighbours (`[[neighbor]]`).
    pub neighbors: Vec<Neighbor>,
    /// Access control lists (`[[acl]]`), in the config's order.
    pub acls: Vec<AclTable>,
    /// sFlow export (`[sflow]`), off without the section.
    pub sflow: Option<SflowConfig>,
}

impl Config {
    /// An identity of the groups' layout (each group's name and members, in order): what the
    /// per-member group counters and a FIB's first groups are laid out by. A reload that
    /// changes it re-lays the counters, and a FIB carries the one it was built from.
    pub fn group_layout(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for group in &self.groups {
            (&group.name, &group.members).hash(&mut hasher);
        }
        hasher.finish()
    }

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
        self.zero_to_seven(field, "traffic class", value)
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
        let ports = self.ports(raw.port, mtu, !raw.qos.lossless.is_empty(), raw.qos.trim.is_some())?;
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
            if qos.tc_lossless(usize::from(control.control_tc)) {
                return Err(self.error(
                    "control.control_tc",
                    format!("TC {} is lossless; the control plane's frames need a lossy class (nothing can pause the kernel)", control.control_tc),
                ));
            }
        }
        let neighbors = self.neighbors(raw.neighbor, &ports)?;
        let acls = self.acls(raw.acl, &ports, &qos)?;
        let sflow = raw.sflow.map(|sflow| self.sflow(sflow, &ports, control.is_some())).transpose()?;
        let routes = self.routes(raw.route, &ports, &groups, &neighbors, control.is_some())?;
        if control.is_none() {
            if let Some(index) = ports.iter().position(|port| !port.addresses.is_empty()) {
                return Err(self.error(
                    format!("port[{index}].addresses"),
                    "addresses need a [control] section (the kernel in the switch's namespace owns them)",
                ));
            }
        }
        match raw.dpdk.model.as_deref() {
            None | Some(RUN_TO_COMPLETION) => {}
            Some("pipelined") => {
                return Err(self.error(
                    "dpdk.model",
                    "the pipelined model was retired: spread a busy port over the workers with its rx_queues \
                     (docs/CONFIG.md)",
                ))
            }
            Some(other) => {
                return Err(self.error("dpdk.model", format!("'{other}' is not {RUN_TO_COMPLETION}, the one model")))
            }
        }
        let mbuf_bytes = raw.dpdk.mbuf_bytes.unwrap_or(DEFAULT_MBUF_BYTES);
        if !(1024..=32 * 1024).contains(&mbuf_bytes) {
            return Err(self.error("dpdk.mbuf_bytes", format!("{mbuf_bytes} is not between 1024 and 32768")));
        }
        let config = Config {
            name: raw.switch.name,
            mac,
            buffer_bytes,
            mtu,
            eal: raw.dpdk.eal,
            lcores: raw.dpdk.lcores,
            mbuf_bytes,
            qos,
            ports,
            routes,
            groups,
            control,
            neighbors,
            acls,
            sflow,
        };
        plan::BufferPlan::new(&config).map_err(|(field, problem)| self.error(field, problem))?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const MINIMAL: &str = r#"
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
        assert_eq!(config.qos.lossless_priorities, 0b1000);
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
            (("lossless = [3]", "lossless = [8]"), "qos.lossless"),
            (("lossless = [3]", "lossless = [3]\ntc_to_pg = { 3 = 8 }"), "qos.tc_to_pg.3"),
            (("lossless = [3]", "lossless = [3]\ntc_to_pg = { 9 = 1 }"), "qos.tc_to_pg.9"),
            (("lossless = [3]", "lossless = [3]\npfc_to_queue = { 3 = 8 }"), "qos.pfc_to_queue.3"),
            (("lossless = [3]", "lossless = [3]\ndscp_to_pfc_priority = { 26 = 8 }"), "qos.dscp_to_pfc_priority.26"),
            // A group holds lossless TCs or lossy ones: TC 0 (lossy) and TC 3 share PG 3.
            (("lossless = [3]", "lossless = [3]\ntc_to_pg = { 0 = 3 }"), "qos.tc_to_pg.0"),
            // One pause state per queue: two lossless priorities cannot stop the same one.
            (("lossless = [3]", "lossless = [3, 4]\npfc_to_queue = { 4 = 3 }"), "qos.pfc_to_queue.4"),
        ];
        for (edit, field) in cases {
            let err = error_for(edit);
            assert_eq!(err.field, field, "{edit:?} gave {err}");
            assert_eq!(err.file, "t.toml");
            assert!(!err.to_string().contains('\n'));
        }
    }

    #[test]
    fn pfc_priorities_groups_and_queues_are_derived_from_the_maps() {
        let qos = |extra: &str| Config::parse(&MINIMAL.replacen("lossless = [3]", extra, 1), "t.toml").unwrap().qos;
        // DSCP trust, no priority map: a DSCP's priority is its TC (SONiC's identity maps).
        let plain = qos("lossless = [3]");
        assert_eq!((plain.dscp_to_priority[26], plain.dscp_to_priority[0]), (3, 0));
        assert_eq!((plain.lossless_tcs, plain.lossless_pgs, plain.pg_priorities[3]), (1 << 3, 1 << 3, 1 << 3));
        // The NIC gives DSCP 26 priority 5, the switch queues it in TC 3 charged to PG 6 (and
        // TC 6 to PG 3).
        let mapped = qos(
            "lossless = [5]\ndscp_to_pfc_priority = { 26 = 5 }\ntc_to_pg = { 3 = 6, 6 = 3 }\npfc_to_queue = { 5 = 3 }",
        );
        assert_eq!((mapped.dscp_to_priority[26], mapped.dscp_to_priority[48]), (5, 6), "unnamed DSCPs keep their TC");
        assert_eq!((mapped.lossless_tcs, mapped.lossless_pgs), (1 << 3, 1 << 6));
        assert_eq!(mapped.pg_priorities, [0, 0, 0, 0, 0, 0, 1 << 5, 0]);
        assert_eq!(mapped.pausable_queues(), 1 << 3);
        assert_eq!(mapped.tc_to_pg, [0, 1, 2, 6, 4, 5, 3, 7], "unnamed TCs keep their own group");
        // PCP trust: PCP 3 and 5 both queue in TC 4; only 3 is lossless.
        let pcp = qos("lossless = [3]\ntrust = \"pcp\"\npcp_to_tc = { 3 = 4, 5 = 4 }");
        assert_eq!((pcp.lossless_tcs, pcp.pg_priorities[4]), (1 << 4, 1 << 3));
        assert_eq!(pcp.priority_tcs()[5], 1 << 4);
        // Both lossless: one TC, its group naming both.
        let both = qos("lossless = [3, 5]\ntrust = \"pcp\"\npcp_to_tc = { 3 = 4, 5 = 4 }");
        assert_eq!((both.lossless_tcs, both.pg_priorities[4]), (1 << 4, 1 << 3 | 1 << 5));
        // One priority in two TCs charged to one group: the group names it once, and stays
        // lossless.
        let split = qos("lossless = [3]\ndscp_to_pfc_priority = { 48 = 3 }\ntc_to_pg = { 6 = 3 }");
        assert_eq!((split.lossless_tcs, split.lossless_pgs, split.pg_priorities[3]), (1 << 3 | 1 << 6, 1 << 3, 1 << 3));
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
    fn worker_model_and_mbufs() {
        let model = |name: &str| Config::parse(&format!("{MINIMAL}\n[dpdk]\nmodel = \"{name}\"\n"), "t.toml");
        assert!(model("run-to-completion").is_ok());
        let err = model("pipelined").unwrap_err();
        assert_eq!(err.field, "dpdk.model");
        assert!(err.problem.contains("retired") && err.problem.contains("rx_queues"), "{}", err.problem);
        let err = model("turbo").unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.problem.as_str()),
            ("dpdk.model", "'turbo' is not run-to-completion, the one model")
        );
        let mbufs = |bytes: &str| Config::parse(&format!("{MINIMAL}\n[dpdk]\nmbuf_bytes = {bytes}\n"), "t.toml");
        assert_eq!(Config::parse(MINIMAL, "t.toml").unwrap().mbuf_bytes, 2048);
        assert_eq!(mbufs("10240").unwrap().mbuf_bytes, 10_240);
        assert_eq!(mbufs("512").unwrap_err().field, "dpdk.mbuf_bytes");
        assert_eq!(mbufs("65536").unwrap_err().field, "dpdk.mbuf_bytes");
    }
}
