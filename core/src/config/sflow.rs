//! `[sflow]`: sFlow v5 export, as SONiC's `SFLOW` and `SFLOW_COLLECTOR` tables set it: one
//! collector, the agent address the datagrams name, a sampling rate per port (1 in N frames
//! received, `[[port]] sflow_rate` over `sampling_rate` over SONiC's default of one sample
//! per million bits of port speed), the counter polling interval and the bytes of each
//! sampled header. Validated into `SflowConfig`.
//!
//! Invariant: an `SflowConfig` has a collector with a port, a rate of at least 1 for every
//! port, and a header length between an Ethernet header and `MAX_HEADER_BYTES`.

use super::{PortConfig, Validator};
use crate::error::InputError;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};

/// The most header bytes a flow sample carries (hsflowd's limit is 256 as well).
pub const MAX_HEADER_BYTES: u16 = 256;
/// sFlow's customary header length (SONiC, hsflowd).
pub const DEFAULT_HEADER_BYTES: u16 = 128;
/// SONiC's default counter polling interval.
pub const DEFAULT_POLLING_INTERVAL_S: u32 = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSflow {
    collector: String,
    agent: String,
    sampling_rate: Option<i64>,
    polling_interval_s: Option<i64>,
    header_bytes: Option<i64>,
    drop_limit: Option<i64>,
    namespace: Option<String>,
}

/// Dropped-packet notifications a second by default: enough to see every reason in a storm of
/// drops, few enough that the collector is never the storm's second victim.
const DEFAULT_DROP_LIMIT: u32 = 100;

/// Validated `[sflow]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SflowConfig {
    pub collector: SocketAddr,
    /// The agent address each datagram names (the switch's loopback, as a rule).
    pub agent: IpAddr,
    /// Per port, 1 in how many frames received are sampled.
    pub rates: Vec<u32>,
    /// Seconds between counter samples of every port; 0: none.
    pub polling_interval_s: u32,
    /// Bytes of a sampled frame's start each flow sample carries.
    pub header_bytes: u16,
    /// Dropped-packet notifications per second, per forwarding worker (sFlow's drop
    /// extension); 0: none.
    pub drop_limit: u32,
    /// Whether the datagrams leave from `[control]`'s namespace, through the switch's own
    /// ports, rather than from the namespace raceway runs in (a management network).
    pub through_ports: bool,
}

/// SONiC's default rate for a port: its speed in Mb/s (one sample per 10^6 bits of speed, so
/// 1 in 100,000 at 100G).
fn default_rate(port: &PortConfig) -> u32 {
    u32::try_from(port.speed_mbps).unwrap_or(u32::MAX).max(1)
}

impl Validator<'_> {
    pub(super) fn sflow(&self, raw: RawSflow, ports: &[PortConfig], control: bool) -> Result<SflowConfig, InputError> {
        let collector = raw.collector.parse::<SocketAddr>().map_err(|_| {
            self.error("sflow.collector", format!("'{}' is not ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)", raw.collector))
        })?;
        if collector.port() == 0 {
            return Err(self.error("sflow.collector", "port 0 is no collector's (sFlow's is 6343)"));
        }
        let agent = raw
            .agent
            .parse::<IpAddr>()
            .map_err(|_| self.error("sflow.agent", format!("'{}' is not an IPv4 or IPv6 address", raw.agent)))?;
        let sampling_rate = match raw.sampling_rate {
            None => None,
            Some(rate) => Some(u32::try_from(rate).ok().filter(|&rate| rate >= 1).ok_or_else(|| {
                self.error(
                    "sflow.sampling_rate",
                    format!("{rate} is not a sampling rate (1 in N, N from 1 to 2^32 - 1)"),
                )
            })?),
        };
        let polling_interval_s = match raw.polling_interval_s {
            None => DEFAULT_POLLING_INTERVAL_S,
            Some(seconds) => u32::try_from(seconds).ok().filter(|&seconds| seconds <= 3600).ok_or_else(|| {
                self.error("sflow.polling_interval_s", format!("{seconds} is not between 0 (no counters) and 3600"))
            })?,
        };
        let header_bytes = match raw.header_bytes {
            None => DEFAULT_HEADER_BYTES,
            Some(bytes) => {
                u16::try_from(bytes).ok().filter(|bytes| (14..=MAX_HEADER_BYTES).contains(bytes)).ok_or_else(|| {
                    self.error("sflow.header_bytes", format!("{bytes} is not between 14 and {MAX_HEADER_BYTES}"))
                })?
            }
        };
        let drop_limit = match raw.drop_limit {
            None => DEFAULT_DROP_LIMIT,
            Some(limit) => u32::try_from(limit).ok().filter(|&limit| limit <= 100_000).ok_or_else(|| {
                self.error(
                    "sflow.drop_limit",
                    format!("{limit} is not between 0 (no notifications) and 100000 a second"),
                )
            })?,
        };
        let through_ports = match raw.namespace.as_deref() {
            None | Some("host") => false,
            Some("control") if control => true,
            Some("control") => {
                return Err(self.error("sflow.namespace", "\"control\" needs a [control] section (its namespace)"))
            }
            Some(other) => {
                return Err(self.error(
                    "sflow.namespace",
                    format!("'{other}' is not \"host\" (raceway's own) or \"control\" (through the switch's ports)"),
                ))
            }
        };
        let rates =
            ports.iter().map(|port| port.sflow_rate.or(sampling_rate).unwrap_or_else(|| default_rate(port))).collect();
        Ok(SflowConfig { collector, agent, rates, polling_interval_s, header_bytes, drop_limit, through_ports })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn parse(sflow: &str, port_extra: &str) -> Result<Config, String> {
        let text = format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n\
             [[port]]\nname = \"p0\"\nspeed_gbps = 100\n{port_extra}\n[[port]]\nname = \"p1\"\nspeed_gbps = 25\n{sflow}"
        );
        Config::parse(&text, "t.toml").map_err(|err| err.to_string())
    }

    #[test]
    fn rates_come_from_the_port_then_the_section_then_the_speed() {
        let config = parse("[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"", "").unwrap();
        let sflow = config.sflow.unwrap();
        assert_eq!(sflow.rates, [100_000, 25_000], "SONiC's default: speed in Mb/s");
        assert_eq!((sflow.polling_interval_s, sflow.header_bytes, sflow.drop_limit), (20, 128, 100));
        assert_eq!(sflow.collector, "10.9.0.2:6343".parse().unwrap());
        let config = parse(
            "[sflow]\ncollector = \"[fd00::2]:6343\"\nagent = \"fd00::1\"\nsampling_rate = 4096\npolling_interval_s = 0\nheader_bytes = 64",
            "sflow_rate = 1000",
        )
        .unwrap();
        let sflow = config.sflow.unwrap();
        assert_eq!(sflow.rates, [1000, 4096]);
        assert_eq!((sflow.polling_interval_s, sflow.header_bytes), (0, 64));
        assert!(parse("", "").unwrap().sflow.is_none());
    }

    #[test]
    fn each_sflow_mistake_names_its_field() {
        let base = "[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\n";
        let cases = [
            ("[sflow]\ncollector = \"10.9.0.2\"\nagent = \"10.9.0.1\"", "", "sflow.collector"),
            ("[sflow]\ncollector = \"10.9.0.2:0\"\nagent = \"10.9.0.1\"", "", "sflow.collector"),
            ("[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"leaf\"", "", "sflow.agent"),
            (&format!("{base}sampling_rate = 0"), "", "sflow.sampling_rate"),
            (&format!("{base}polling_interval_s = -1"), "", "sflow.polling_interval_s"),
            (&format!("{base}header_bytes = 1000"), "", "sflow.header_bytes"),
            (&format!("{base}drop_limit = -1"), "", "sflow.drop_limit"),
            (&format!("{base}namespace = \"control\""), "", "sflow.namespace"),
            (&format!("{base}namespace = \"mgmt\""), "", "sflow.namespace"),
            (base, "sflow_rate = 0", "port[0].sflow_rate"),
            ("[sflow]\nagent = \"10.9.0.1\"", "", "collector"),
        ];
        for (sflow, port, field) in cases {
            let said = parse(sflow, port).unwrap_err();
            assert!(said.contains(field), "{sflow} {port}: {said}");
        }
    }
}
