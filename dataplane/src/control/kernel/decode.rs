//! Netlink on the wire: the route, address, neighbour, link, rule and nexthop messages the
//! kernel sends, decoded into `Message`s (nexthop objects by hand: `netlink-packet-route` does
//! not know them), and the dump and resolve requests sent to it.
//!
//! Invariant: decoding never fails on a message it does not know or cannot read: it becomes
//! `Message::Other` (or a resync when the kernel reports lost messages), never a panic.

use super::{Event, Hop, NextHops, Nexthop, Placed, Route, RouteKind, Rule};
use crate::wire::ethernet::MacAddress;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteType, RouteVia};
use netlink_packet_route::RouteNetlinkMessage;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Netlink message types this module reads beyond the crate's.
pub(super) const RTM_NEWNEXTHOP: u16 = 104;
pub(super) const RTM_DELNEXTHOP: u16 = 105;
pub(super) const RTM_GETNEXTHOP: u16 = 106;
pub(super) const RTM_GETLINK: u16 = 18;
pub(super) const RTM_GETADDR: u16 = 22;
pub(super) const RTM_GETROUTE: u16 = 26;
pub(super) const RTM_GETNEIGH: u16 = 30;
pub(super) const RTM_GETRULE: u16 = 34;
pub(super) const RTM_NEWNEIGH: u16 = 28;
pub(super) const NLMSG_ERROR: u16 = 2;
pub(super) const NLMSG_DONE: u16 = 3;
pub(super) const NLMSG_OVERRUN: u16 = 4;
/// The route netlink groups subscribed to.
pub(super) const GROUPS: [u32; 9] = [
    1,  // RTNLGRP_LINK
    3,  // RTNLGRP_NEIGH
    5,  // RTNLGRP_IPV4_IFADDR
    7,  // RTNLGRP_IPV4_ROUTE
    8,  // RTNLGRP_IPV4_RULE
    9,  // RTNLGRP_IPV6_IFADDR
    11, // RTNLGRP_IPV6_ROUTE
    19, // RTNLGRP_IPV6_RULE
    32, // RTNLGRP_NEXTHOP
];
/// The dumps, in the order that lets each resolve against the previous: nexthop objects and
/// neighbours before the routes that use them (links first: the interfaces' state and MTU).
pub(super) const DUMPS: [(u16, usize); 6] = [
    (RTM_GETLINK, 16),
    (RTM_GETADDR, 8),
    (RTM_GETNEIGH, 12),
    (RTM_GETNEXTHOP, 8),
    (RTM_GETRULE, 12),
    (RTM_GETROUTE, 12),
];

/// What one netlink message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Event(Event),
    /// The end of a dump (or its error).
    Done,
    /// Messages were lost: the tables must be dumped again.
    Lost,
    Other,
}

/// Splits a datagram into netlink messages and decodes each one.
pub fn decode(datagram: &[u8]) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut offset = 0;
    while offset + 16 <= datagram.len() {
        let len = u32::from_ne_bytes(datagram[offset..offset + 4].try_into().expect("4 bytes")) as usize;
        if len < 16 || offset + len > datagram.len() {
            break;
        }
        let message = &datagram[offset..offset + len];
        let kind = u16::from_ne_bytes([message[4], message[5]]);
        messages.push(match kind {
            NLMSG_DONE => Message::Done,
            // The kernel's answer to a resolution request (`resolve_request`) is not a dump's.
            NLMSG_ERROR if message.len() >= 26 && u16::from_ne_bytes([message[24], message[25]]) == RTM_NEWNEIGH => {
                Message::Other
            }
            // A failed dump request (e.g. no nexthop objects in an old kernel) ends that dump.
            NLMSG_ERROR => Message::Done,
            NLMSG_OVERRUN => Message::Lost,
            RTM_NEWNEXTHOP | RTM_DELNEXTHOP => decode_nexthop(kind == RTM_NEWNEXTHOP, &message[16..]),
            _ => match NetlinkMessage::<RouteNetlinkMessage>::deserialize(message) {
                Ok(NetlinkMessage { payload: NetlinkPayload::InnerMessage(inner), header, .. }) => {
                    decode_route_message(inner, header.flags)
                }
                _ => Message::Other,
            },
        });
        offset += len.div_ceil(4) * 4;
    }
    messages
}

/// A next hop's address: RTA_GATEWAY, or RTA_VIA for an IPv4 route over an IPv6 next hop
/// (RFC 5549, as BGP unnumbered installs them).
pub(super) fn gateway_of(attributes: &[RouteAttribute]) -> Option<IpAddr> {
    attributes.iter().find_map(|attribute| match attribute {
        RouteAttribute::Gateway(address) => route_address(address),
        RouteAttribute::Via(RouteVia::Inet(ip)) => Some(IpAddr::V4(*ip)),
        RouteAttribute::Via(RouteVia::Inet6(ip)) => Some(IpAddr::V6(*ip)),
        _ => None,
    })
}

pub(super) fn route_address(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(ip) => Some(IpAddr::V4(*ip)),
        RouteAddress::Inet6(ip) => Some(IpAddr::V6(*ip)),
        _ => None,
    }
}

/// A route netlink message; `flags` are its netlink header's (where a route was placed).
pub(super) fn decode_route_message(message: RouteNetlinkMessage, flags: u16) -> Message {
    match message {
        RouteNetlinkMessage::NewAddress(message) => address_event(true, &message),
        RouteNetlinkMessage::DelAddress(message) => address_event(false, &message),
        RouteNetlinkMessage::NewNeighbour(message) => neighbor_event(true, &message),
        RouteNetlinkMessage::DelNeighbour(message) => neighbor_event(false, &message),
        RouteNetlinkMessage::NewRoute(message) => route_event(true, &message, flags),
        RouteNetlinkMessage::DelRoute(message) => route_event(false, &message, flags),
        RouteNetlinkMessage::NewLink(message) => link_event(&message),
        RouteNetlinkMessage::NewRule(message) => rule_event(true, &message),
        RouteNetlinkMessage::DelRule(message) => rule_event(false, &message),
        _ => Message::Other,
    }
}

pub(super) fn link_event(message: &netlink_packet_route::link::LinkMessage) -> Message {
    let mtu = message.attributes.iter().find_map(|attribute| match attribute {
        netlink_packet_route::link::LinkAttribute::Mtu(mtu) => Some(*mtu),
        _ => None,
    });
    let up = message.header.flags.contains(netlink_packet_route::link::LinkFlags::Up);
    Message::Event(Event::Link { interface: message.header.index, up, mtu })
}

pub(super) fn rule_event(add: bool, message: &netlink_packet_route::rule::RuleMessage) -> Message {
    use netlink_packet_route::rule::{RuleAction, RuleAttribute};
    use std::hash::{Hash, Hasher};
    let header = &message.header;
    let v4 = match header.family {
        netlink_packet_route::AddressFamily::Inet => true,
        netlink_packet_route::AddressFamily::Inet6 => false,
        _ => return Message::Other,
    };
    let (mut priority, mut table, mut destination, mut selects) = (0, u32::from(header.table), None, false);
    for attribute in &message.attributes {
        match attribute {
            RuleAttribute::Priority(value) => priority = *value,
            RuleAttribute::Table(value) => table = *value,
            RuleAttribute::Destination(address) => destination = Some(*address),
            // What the kernel's own rules carry besides these.
            RuleAttribute::Protocol(_) | RuleAttribute::SuppressPrefixLen(_) => {}
            _ => selects = true,
        }
    }
    let destination = destination.filter(|_| header.dst_len > 0).map(|address| (address, header.dst_len));
    let selects = selects || header.src_len > 0 || header.tos != 0;
    let defaults: &[(u32, u32)] = if v4 { &[(0, 255), (32766, 254), (32767, 253)] } else { &[(0, 255), (32766, 254)] };
    let default = !selects
        && destination.is_none()
        && header.action == RuleAction::ToTable
        && defaults.contains(&(priority, table));
    // The whole rule, so that rules of one priority differing otherwise are told apart.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    format!("{:?}{:?}{:?}", header.action, header.tos, message.attributes).hash(&mut hasher);
    let digest = hasher.finish();
    Message::Event(Event::Rule { add, rule: Rule { v4, priority, destination, default, digest } })
}

pub(super) fn address_event(add: bool, message: &netlink_packet_route::address::AddressMessage) -> Message {
    // IFA_LOCAL is the interface's own address where IFA_ADDRESS is a peer's (point-to-point).
    let local = message.attributes.iter().find_map(|attribute| match attribute {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    let address = message.attributes.iter().find_map(|attribute| match attribute {
        AddressAttribute::Address(ip) => Some(*ip),
        _ => None,
    });
    match local.or(address) {
        Some(ip) => Message::Event(Event::Address { add, interface: message.header.index, ip }),
        None => Message::Other,
    }
}

pub(super) fn neighbor_event(add: bool, message: &netlink_packet_route::neighbour::NeighbourMessage) -> Message {
    let ip = message.attributes.iter().find_map(|attribute| match attribute {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => Some(IpAddr::V4(*ip)),
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(ip)) => Some(IpAddr::V6(*ip)),
        _ => None,
    });
    let Some(ip) = ip else { return Message::Other };
    let mac = message.attributes.iter().find_map(|attribute| match attribute {
        NeighbourAttribute::LinkLayerAddress(bytes) => <[u8; 6]>::try_from(bytes.as_slice()).ok().map(MacAddress),
        _ => None,
    });
    let usable = matches!(
        message.header.state,
        NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
            | NeighbourState::Noarp
    );
    let mac = if add && usable { mac } else { None };
    Message::Event(Event::Neighbor { interface: message.header.ifindex, ip, mac })
}

pub(super) fn route_event(add: bool, message: &netlink_packet_route::route::RouteMessage, flags: u16) -> Message {
    let header = &message.header;
    let table = message
        .attributes
        .iter()
        .find_map(|attribute| match attribute {
            RouteAttribute::Table(table) => Some(*table),
            _ => None,
        })
        .unwrap_or(u32::from(header.table));
    let kind = match header.kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable => RouteKind::Unreachable,
        RouteType::Prohibit => RouteKind::Prohibit,
        RouteType::Throw => RouteKind::Throw,
        RouteType::Local => RouteKind::Local,
        RouteType::Broadcast => RouteKind::Broadcast,
        RouteType::Anycast => RouteKind::Anycast,
        _ => RouteKind::Other,
    };
    let unspecified = match header.address_family {
        netlink_packet_route::AddressFamily::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        netlink_packet_route::AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return Message::Other,
    };
    let (mut destination, mut source, mut metric) = (None, None, 0);
    let (mut preferred_source, mut expires) = (None, None);
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::Destination(address) => destination = route_address(address),
            RouteAttribute::Source(address) => source = route_address(address),
            RouteAttribute::Priority(priority) => metric = *priority,
            RouteAttribute::PrefSource(address) => preferred_source = route_address(address),
            // In USER_HZ (hundredths of a second), signed: negative for a route past its time
            // that the kernel has not deleted yet; 0 for one that does not expire.
            RouteAttribute::CacheInfo(info) if info.expires != 0 => {
                let left = (info.expires as i32).max(0) as u64;
                expires = Some(std::time::Duration::from_millis(left * 10));
            }
            _ => {}
        }
    }
    // A default route carries no destination.
    let address = destination.unwrap_or(unspecified);
    let len = header.destination_prefix_length;
    if let IpAddr::V6(v6) = address {
        if len >= 10 && u128::from(v6) >> 118 == 0x3fa {
            return Message::Other;
        }
    }
    let source =
        (header.source_prefix_length > 0).then(|| (source.unwrap_or(unspecified), header.source_prefix_length));
    let gateway = gateway_of(&message.attributes);
    // A route over a nexthop object also carries the object's next hops as they are now
    // (RTA_MULTIPATH, or RTA_GATEWAY and RTA_OIF): the object, which changes, is what counts.
    let object = message.attributes.iter().find_map(|attribute| match attribute {
        RouteAttribute::NhId(id) => Some(NextHops::Object(*id)),
        _ => None,
    });
    let next_hops = object.unwrap_or_else(|| {
        let mut hops = Vec::new();
        for attribute in &message.attributes {
            match attribute {
                RouteAttribute::Oif(interface) if hops.is_empty() => {
                    let dead = header.flags.contains(netlink_packet_route::route::RouteFlags::Dead);
                    let onlink = header.flags.contains(netlink_packet_route::route::RouteFlags::Onlink);
                    hops = vec![Hop { dead, onlink, ..Hop::new(gateway, *interface) }];
                }
                RouteAttribute::MultiPath(list) => {
                    hops = list
                        .iter()
                        .map(|hop| Hop {
                            gateway: gateway_of(&hop.attributes),
                            interface: hop.interface_index,
                            // rtnh_hops is the weight less one.
                            weight: u16::from(hop.hops) + 1,
                            dead: hop.flags.contains(netlink_packet_route::route::RouteNextHopFlags::Dead),
                            onlink: hop.flags.contains(netlink_packet_route::route::RouteNextHopFlags::Onlink),
                        })
                        .collect();
                }
                _ => {}
            }
        }
        NextHops::Direct(hops)
    });
    let route = Route {
        address,
        len,
        table,
        kind,
        metric,
        tos: header.tos,
        source,
        next_hops,
        protocol: u8::from(header.protocol),
        scope: u8::from(header.scope),
        preferred_source,
        expires,
        placed: Placed::from_flags(flags),
    };
    Message::Event(Event::Route { add, route })
}

/// RTM_NEWNEXTHOP/RTM_DELNEXTHOP: `struct nhmsg` (8 bytes) then attributes.
pub(super) fn decode_nexthop(add: bool, body: &[u8]) -> Message {
    const NHA_ID: u16 = 1;
    const NHA_GROUP: u16 = 2;
    const NHA_BLACKHOLE: u16 = 4;
    const NHA_OIF: u16 = 5;
    const NHA_GATEWAY: u16 = 6;
    let (mut id, mut group, mut blackhole, mut interface, mut gateway) = (None, None, false, None, None);
    let mut offset = 8;
    while offset + 4 <= body.len() {
        let len = usize::from(u16::from_ne_bytes([body[offset], body[offset + 1]]));
        let kind = u16::from_ne_bytes([body[offset + 2], body[offset + 3]]) & 0x3fff;
        if len < 4 || offset + len > body.len() {
            break;
        }
        let value = &body[offset + 4..offset + len];
        match (kind, value.len()) {
            (NHA_ID, 4) => id = Some(u32::from_ne_bytes(value.try_into().expect("4 bytes"))),
            (NHA_OIF, 4) => interface = Some(u32::from_ne_bytes(value.try_into().expect("4 bytes"))),
            (NHA_GATEWAY, 4) => gateway = Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(value).expect("4")))),
            (NHA_GATEWAY, 16) => gateway = Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(value).expect("16")))),
            (NHA_BLACKHOLE, _) => blackhole = true,
            // struct nexthop_grp { u32 id; u8 weight; u8 resvd1; u16 resvd2; }, the weight less one.
            (NHA_GROUP, _) => {
                group = Some(
                    value
                        .chunks_exact(8)
                        .map(|entry| {
                            (u32::from_ne_bytes(entry[0..4].try_into().expect("4 bytes")), u16::from(entry[4]) + 1)
                        })
                        .collect(),
                );
            }
            _ => {}
        }
        offset += len.div_ceil(4) * 4;
    }
    let Some(id) = id else { return Message::Other };
    if !add {
        return Message::Event(Event::Nexthop { id, nexthop: None });
    }
    let nexthop = match (group, interface) {
        _ if blackhole => Nexthop::Unusable,
        (Some(members), _) => Nexthop::Group(members),
        (None, Some(interface)) => Nexthop::Single { gateway, interface },
        (None, None) => Nexthop::Unusable,
    };
    Message::Event(Event::Nexthop { id, nexthop: Some(nexthop) })
}

/// A dump request: the netlink header and a zeroed family header of `header_len` bytes.
pub(super) fn dump_request(kind: u16, header_len: usize, sequence: u32) -> Vec<u8> {
    let len = 16 + header_len;
    let mut request = vec![0u8; len];
    request[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&kind.to_ne_bytes());
    let flags = netlink_packet_core::NLM_F_REQUEST | netlink_packet_core::NLM_F_DUMP;
    request[6..8].copy_from_slice(&flags.to_ne_bytes());
    request[8..12].copy_from_slice(&sequence.to_ne_bytes());
    request
}

/// A request that the kernel resolve `gateway`'s neighbour on `interface` (RTM_NEWNEIGH with
/// NTF_USE, as `ip neigh replace ADDR dev IF use`): it sends ARP or ND as it would for traffic,
/// and reports the neighbour when it answers. No acknowledgement is asked for; an error comes
/// back as an NLMSG_ERROR naming RTM_NEWNEIGH, which `decode` passes over.
pub(super) fn resolve_request(interface: u32, gateway: IpAddr, sequence: u32) -> Vec<u8> {
    const NLM_F_REPLACE: u16 = 0x100;
    const NLM_F_CREATE: u16 = 0x400;
    const NUD_PERMANENT: u16 = 0x80;
    const NTF_USE: u8 = 0x01;
    const NDA_DST: u16 = 1;
    let (family, address): (u8, Vec<u8>) = match gateway {
        IpAddr::V4(v4) => (2, v4.octets().to_vec()),
        IpAddr::V6(v6) => (10, v6.octets().to_vec()),
    };
    let len = 16 + 12 + 4 + address.len();
    let mut request = Vec::with_capacity(len);
    request.extend_from_slice(&(len as u32).to_ne_bytes());
    request.extend_from_slice(&RTM_NEWNEIGH.to_ne_bytes());
    request.extend_from_slice(&(netlink_packet_core::NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE).to_ne_bytes());
    request.extend_from_slice(&sequence.to_ne_bytes());
    request.extend_from_slice(&0u32.to_ne_bytes());
    // struct ndmsg: family, two pad fields, ifindex, state, flags, type.
    request.extend_from_slice(&[family, 0, 0, 0]);
    request.extend_from_slice(&interface.to_ne_bytes());
    request.extend_from_slice(&NUD_PERMANENT.to_ne_bytes());
    request.extend_from_slice(&[NTF_USE, 0]);
    request.extend_from_slice(&((4 + address.len()) as u16).to_ne_bytes());
    request.extend_from_slice(&NDA_DST.to_ne_bytes());
    request.extend_from_slice(&address);
    request
}
