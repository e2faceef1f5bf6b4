//! `[[route]]` and `[[neighbor]]`: static routes to a port, a group or next-hop addresses, or
//! blackholes, and the neighbours that resolve those addresses, validated into `RouteConfig` and
//! `Neighbor`.
//!
//! Invariant: one route per prefix, no host bits set; every target exists; without
//! `[control]` every next hop has a `[[neighbor]]`.

use super::{address_and_length, GroupConfig, PortConfig, Validator};
use crate::error::InputError;
use crate::wire::ethernet::MacAddress;
use serde::Deserialize;
use std::fmt;
use std::net::IpAddr;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNeighbor {
    pub(super) ip: String,
    pub(super) mac: String,
    pub(super) port: String,
}

/// One next hop or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawVia {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(super) prefix: String,
    pub(super) port: Option<String>,
    pub(super) group: Option<String>,
    pub(super) via: Option<RawVia>,
    /// SONiC's STATIC_ROUTE `blackhole`, FRR's `Null0`: the prefix is dropped.
    pub(super) blackhole: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteTarget {
    Port(usize),
    Group(usize),
    /// Next-hop addresses, resolved to ports and MACs by the neighbour table.
    Via(Vec<IpAddr>),
    /// Dropped, counted as `blackhole`.
    Blackhole,
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

    /// Whether `address` lies in the prefix (never across families).
    pub fn contains(&self, address: IpAddr) -> bool {
        match (self.address, address) {
            (IpAddr::V4(net), IpAddr::V4(address)) => {
                self.len == 0 || (u32::from(net) ^ u32::from(address)) >> (32 - u32::from(self.len)) == 0
            }
            (IpAddr::V6(net), IpAddr::V6(address)) => {
                self.len == 0 || (u128::from(net) ^ u128::from(address)) >> (128 - u32::from(self.len)) == 0
            }
            _ => false,
        }
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

impl Validator<'_> {
    pub(super) fn neighbors(&self, raw: Vec<RawNeighbor>, ports: &[PortConfig]) -> Result<Vec<Neighbor>, InputError> {
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

    pub(super) fn routes(
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
                _ if route.blackhole == Some(false) => {
                    return Err(self.error(field("blackhole"), "only `blackhole = true` is meaningful: leave it out"))
                }
                (None, None, None) if route.blackhole == Some(true) => RouteTarget::Blackhole,
                _ if route.blackhole.is_some() => {
                    return Err(self.error(field("blackhole"), "a blackhole route has no port, group or via"))
                }
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
                _ => {
                    return Err(self.error(field("port"), "a route needs exactly one of port, group, via or blackhole"))
                }
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
