//! `[[port]]`: a port's name, device, speed, cable, peer, addresses, MTU, PAUSE and PFC tx
//! queue, validated into `PortConfig`; and the device-string and address helpers the rest of
//! the config and the live engine use.
//!
//! Invariant: port names are unique, usable as Linux interface names' stems and in `PORT=FILE`
//! flags; a port's MTU is at most `switch.mtu`; an address is on one port at most.

use super::Validator;
use crate::error::InputError;
use crate::keyword::keywords;
use crate::units::LinkRate;
use crate::wire::ethernet::MacAddress;
use serde::Deserialize;
use std::fmt;
use std::net::IpAddr;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPort {
    pub(super) name: String,
    pub(super) device: Option<String>,
    pub(super) speed_gbps: f64,
    #[serde(default)]
    pub(super) cable_m: f64,
    pub(super) peer_mac: Option<String>,
    pub(super) enabled: Option<bool>,
    #[serde(default)]
    pub(super) addresses: Vec<String>,
    pub(super) mtu: Option<u32>,
    pub(super) pause: Option<String>,
    pub(super) pfc_tx_queue: Option<bool>,
    pub(super) rx_queues: Option<u16>,
    pub(super) peer_response_quanta: Option<i64>,
    pub(super) trim: Option<bool>,
    pub(super) sflow_rate: Option<i64>,
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
    /// (`config::plan`). Replay sends PFC frames ahead of data either way.
    pub pfc_tx_queue: bool,
    /// Rx queues the port opens live (run-to-completion): the device spreads flows over them
    /// (RSS), and each is polled by its own worker where there are enough, so that one hot
    /// port's work is shared by several cores (`tm::shard`).
    pub rx_queues: u16,
    /// How long the port's peer takes to stop after a PFC frame, in pause quanta at the port's
    /// speed: 802.3 31B.3.7's allowance for the speed unless given. The auto headroom counts
    /// it, and replay's and the fabric's peers take it.
    pub peer_response_quanta: u16,
    /// Whether the port's eligible queues trim what the buffer refuses (`[qos.trim]`; a
    /// port opts out with `trim = false`).
    pub trim: bool,
    /// 1 in how many frames received on the port sFlow samples, when the port sets it
    /// (`[sflow]` resolves the rest).
    pub sflow_rate: Option<u32>,
}

/// The most rx queues a port may open: a worker per queue at most, and 64 lcores is more
/// than any machine this runs on gives one switch.
pub const MAX_RX_QUEUES: u16 = 64;

/// Whether a port's PFC frames get a tx queue of their own unless the config says: on a PCI
/// NIC, whose tx queues all feed one wire (and which offers several), and on a port with no
/// device (replay). Not on a virtual device: net_memif and net_ring carry each tx queue to
/// the peer's rx queue of the same number, net_pcap writes one file per queue, and
/// net_af_packet, net_af_xdp and net_tap spread a queue pair each over the kernel's queues,
/// while raceway opens one rx queue per port: a second queue there would be a link the peer
/// does not read.
pub(super) fn default_pfc_tx_queue(device: Option<&str>) -> bool {
    device.is_none_or(|device| is_pci_address(device_name(device)))
}

/// An address on an interface, with the length of the subnet it is on (host bits allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceAddress {
    pub address: IpAddr,
    pub len: u8,
}

/// `ADDRESS/LENGTH`, with the length checked against the address family.
pub(super) fn address_and_length(text: &str) -> Result<(IpAddr, u8), String> {
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

impl PortConfig {
    /// Time on the wire of a frame of `len` bytes, in picoseconds (see `wire_bytes`).
    #[inline]
    pub fn wire_time_ps(&self, len: usize) -> u64 {
        Self::wire_time_for(self.speed_mbps, len)
    }

    /// How long the port's peer takes to stop after a PFC frame reaches it, in ps.
    pub fn peer_response_ps(&self) -> u64 {
        super::plan::quanta_ps(self.peer_response_quanta, self.speed_mbps)
    }

    /// `wire_time_ps` at `speed_mbps`.
    #[inline]
    pub fn wire_time_for(speed_mbps: u64, len: usize) -> u64 {
        LinkRate::new(speed_mbps).wire_time_ps(len)
    }
}

keywords! {
    /// Whether a port obeys 802.3x PAUSE (`port.pause`).
    pub enum PauseRx {
        Honour => "honour",
        Ignore => "ignore",
    }
}

impl Validator<'_> {
    pub(super) fn ports(
        &self,
        raw: Vec<RawPort>,
        switch_mtu: u32,
        pfc_runs: bool,
        trims: bool,
    ) -> Result<Vec<PortConfig>, InputError> {
        if raw.is_empty() {
            return Err(self.error("port", "at least one [[port]] is needed"));
        }
        let mut ports: Vec<PortConfig> = Vec::with_capacity(raw.len());
        for (index, port) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("port[{index}].{name}");
            if port.trim == Some(true) && !trims {
                return Err(self.error(field("trim"), "there is no [qos.trim] to say how to trim"));
            }
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
            let rx_queues = port.rx_queues.unwrap_or(1);
            if !(1..=MAX_RX_QUEUES).contains(&rx_queues) {
                return Err(self.error(field("rx_queues"), format!("{rx_queues} is not between 1 and {MAX_RX_QUEUES}")));
            }
            let speed_mbps = (port.speed_gbps * 1000.0).round() as u64;
            let peer_response_quanta = match port.peer_response_quanta {
                None => super::plan::nic_response_quanta(speed_mbps),
                Some(quanta) => u16::try_from(quanta).map_err(|_| {
                    self.error(
                        field("peer_response_quanta"),
                        format!("{quanta} is not between 0 and 65535 pause quanta"),
                    )
                })?,
            };
            let sflow_rate = match port.sflow_rate {
                None => None,
                Some(rate) => Some(u32::try_from(rate).ok().filter(|&rate| rate >= 1).ok_or_else(|| {
                    self.error(
                        field("sflow_rate"),
                        format!("{rate} is not a sampling rate (1 in N, N from 1 to 2^32 - 1)"),
                    )
                })?),
            };
            ports.push(PortConfig {
                name: port.name,
                device: port.device,
                speed_mbps,
                cable_m: port.cable_m,
                peer_mac,
                enabled: port.enabled.unwrap_or(true),
                addresses,
                mtu,
                honour_pause,
                pfc_tx_queue,
                rx_queues,
                peer_response_quanta,
                trim: port.trim.unwrap_or(trims),
                sflow_rate,
            });
        }
        Ok(ports)
    }
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

#[cfg(test)]
mod tests {
    use super::{device_name, is_pci_address};
    use crate::config::Config;

    #[test]
    fn pci_addresses_and_vdevs_are_told_apart() {
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(is_pci_address("3b:00.1"));
        assert!(!is_pci_address("net_pcap0"));
        assert!(!is_pci_address("net_memif0"));
        assert!(!is_pci_address("0000:3b:00.9"));
        assert_eq!(device_name("net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap"), "net_pcap0");
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
}
