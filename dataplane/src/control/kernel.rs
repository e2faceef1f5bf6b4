//! What the kernel in the switch's namespace knows, kept in sync over rtnetlink: addresses,
//! neighbours, routes (multipath included) and nexthop objects, turned into `fib::Learned`.
//!
//! The control thread opens a route netlink socket in the namespace, subscribes to address,
//! neighbour, route and nexthop changes, and dumps each table once (again after the kernel
//! reports that messages were lost). Each message is the full state of one object, so dumps
//! and live changes are applied alike. Route, neighbour and address messages are decoded by
//! `netlink-packet-route`; nexthop objects (`RTM_NEWNEXTHOP`, which FRR's zebra uses for its
//! routes when the kernel has them) are not in that crate and are decoded here.
//!
//! What is taken: the main table's unicast routes whose next hops leave through a host
//! interface (others are the kernel's own business), and its blackhole, unreachable and
//! prohibit routes (as routes with no next hop: dropped, `no_route`, so a less specific route
//! never catches what they discard), but IPv6 link-local ones (fe80::/10 and longer: the
//! kernel keeps an fe80::/64 per interface, which one prefix-keyed FIB cannot hold, and
//! link-local packets are punted before any lookup); neighbours on host interfaces in a
//! usable state (reachable, stale, delay, probe, permanent, noarp) with a MAC; every address
//! except loopback ones (an address on `lo`, such as a router id, is the switch's too).
//!
//! Links are read too (RTNLGRP_LINK and a dump): a port's host interface's administrative state
//! and MTU, which the caller takes with `Sync::take_link_changes` (they are not the FIB's).
//!
//! Invariant: `KernelTables` holds exactly the last state the kernel reported for each object;
//! `learned` is a pure function of it.

use crate::pipeline::fib::{masked, FibWriter, KernelHops, Source, Via};
use crate::wire::ethernet::MacAddress;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteType, RouteVia};
use netlink_packet_route::RouteNetlinkMessage;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How a route's next hops are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextHops {
    /// (gateway, interface index) pairs: one, or RTA_MULTIPATH's list.
    Direct(Vec<(Option<IpAddr>, u32)>),
    /// A nexthop object (RTA_NH_ID).
    Object(u32),
    /// A blackhole, unreachable or prohibit route: matching packets are dropped.
    Discard,
}

/// A nexthop object: one next hop, or a group of other objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nexthop {
    Single {
        gateway: Option<IpAddr>,
        interface: u32,
    },
    Group(Vec<u32>),
    /// Blackhole or something raceway does not forward through.
    Unusable,
}

/// One object's new state, or its removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Address {
        add: bool,
        interface: u32,
        ip: IpAddr,
    },
    Neighbor {
        interface: u32,
        ip: IpAddr,
        mac: Option<MacAddress>,
    },
    Route {
        add: bool,
        address: IpAddr,
        len: u8,
        next_hops: NextHops,
    },
    Nexthop {
        id: u32,
        nexthop: Option<Nexthop>,
    },
    /// An interface's administrative state (IFF_UP) and MTU: for a port's host interface,
    /// `ip link set PORT down/up` and `ip link set PORT mtu N`. Not the FIB's business (the
    /// kernel withdraws the routes of a downed interface itself).
    Link {
        interface: u32,
        up: bool,
        mtu: Option<u32>,
    },
}

/// A port's host interface as the operator set it: administratively up or not, and its MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkChange {
    pub port: usize,
    pub up: bool,
    pub mtu: Option<u32>,
}

/// The kernel's small tables as last reported (addresses, neighbours, nexthop objects), and
/// the interfaces that are ports. Routes are not kept here: each route message goes straight
/// to the FIB writer, which holds the only copy of a million of them.
#[derive(Debug, Default, Clone)]
pub struct KernelTables {
    /// The kernel's index of each port's host interface, by port.
    interfaces: Vec<u32>,
    addresses: HashMap<(u32, IpAddr), ()>,
    neighbors: HashMap<IpAddr, (u32, MacAddress)>,
    nexthops: HashMap<u32, Nexthop>,
}

impl KernelTables {
    /// Tables for a switch whose port `i` is the interface `interfaces[i]`.
    pub fn new(interfaces: Vec<u32>) -> Self {
        Self { interfaces, ..Self::default() }
    }

    fn port_of(&self, interface: u32) -> Option<usize> {
        self.interfaces.iter().position(|&index| index == interface)
    }

    /// Applies one event to these tables and what it changes to `writer`.
    pub fn apply(&mut self, event: Event, writer: &mut FibWriter) {
        match event {
            Event::Link { .. } => {}
            Event::Address { add, interface, ip } => {
                if add {
                    self.addresses.insert((interface, ip), ());
                } else {
                    self.addresses.remove(&(interface, ip));
                }
                // An address on `lo`, such as a router id, is the switch's too; loopback
                // addresses are not.
                let present = !ip.is_loopback() && self.addresses.keys().any(|&(_, address)| address == ip);
                writer.set_address(ip, present);
            }
            Event::Neighbor { interface, ip, mac } => {
                match mac {
                    Some(mac) => self.neighbors.insert(ip, (interface, mac)),
                    None => self.neighbors.remove(&ip),
                };
                let neighbor = mac.and_then(|mac| Some((self.port_of(interface)?, mac)));
                writer.set_neighbor(ip, neighbor);
            }
            Event::Route { add, address, len, next_hops } => {
                let via = if add { self.via(&next_hops) } else { None };
                writer.set_route(Source::Kernel, address, len, via);
            }
            Event::Nexthop { id, nexthop } => {
                match nexthop {
                    Some(nexthop) => self.nexthops.insert(id, nexthop),
                    None => self.nexthops.remove(&id),
                };
                // The object itself, and the groups it is a member of.
                let groups: Vec<u32> = self
                    .nexthops
                    .iter()
                    .filter(|(_, nexthop)| matches!(nexthop, Nexthop::Group(members) if members.contains(&id)))
                    .map(|(group, _)| *group)
                    .collect();
                for object in std::iter::once(id).chain(groups) {
                    let definition = self.nexthops.contains_key(&object).then(|| self.object(object));
                    writer.set_object(object, definition);
                }
            }
        }
    }

    /// What a route's next hops lead to in the FIB; `None` when they leave through no host
    /// interface (the kernel's own business).
    fn via(&self, next_hops: &NextHops) -> Option<Via> {
        match next_hops {
            NextHops::Discard => Some(Via::Kernel(Box::new([]))),
            NextHops::Object(id) => Some(Via::Object(*id)),
            NextHops::Direct(list) => {
                let hops = self.on_ports(list.iter().copied());
                (!hops.is_empty()).then(|| Via::Kernel(hops.into()))
            }
        }
    }

    /// The (gateway, port) pairs of `hops` that leave through a host interface, each once.
    fn on_ports(&self, hops: impl Iterator<Item = (Option<IpAddr>, u32)>) -> Vec<(Option<IpAddr>, u16)> {
        let mut resolved: Vec<(Option<IpAddr>, u16)> = Vec::new();
        for (gateway, interface) in hops {
            if let Some(port) = self.port_of(interface) {
                if !resolved.contains(&(gateway, port as u16)) {
                    resolved.push((gateway, port as u16));
                }
            }
        }
        resolved
    }

    /// A nexthop object's definition for the FIB: its next hops on host interfaces (groups one
    /// level deep, as the kernel allows), or `None` for a blackhole.
    fn object(&self, id: u32) -> Option<KernelHops> {
        let single = |id: &u32| match self.nexthops.get(id) {
            Some(Nexthop::Single { gateway, interface }) => Some((*gateway, *interface)),
            _ => None,
        };
        match self.nexthops.get(&id)? {
            Nexthop::Single { gateway, interface } => {
                Some(self.on_ports(std::iter::once((*gateway, *interface))).into())
            }
            Nexthop::Group(members) => Some(self.on_ports(members.iter().filter_map(single)).into()),
            Nexthop::Unusable => None,
        }
    }

    /// What the tables hold now, to sweep what a fresh dump does not report again.
    fn contents(&self, writer: &FibWriter) -> Stale {
        Stale {
            routes: writer.kernel_prefixes().into_iter().collect(),
            addresses: self.addresses.keys().copied().collect(),
            neighbors: self.neighbors.keys().copied().collect(),
            nexthops: self.nexthops.keys().copied().collect(),
        }
    }
}

/// During a fresh dump, what the kernel has not reported again yet; what is left when the dump
/// ends is gone from the kernel. (Forgetting everything before the dump would leave the workers
/// without routes until it ended.)
#[derive(Debug, Default)]
struct Stale {
    routes: HashSet<(IpAddr, u8)>,
    addresses: HashSet<(u32, IpAddr)>,
    neighbors: HashSet<IpAddr>,
    nexthops: HashSet<u32>,
}

impl Stale {
    /// `event` was reported again: its object is not stale.
    fn refreshed(&mut self, event: &Event) {
        match event {
            Event::Address { interface, ip, .. } => self.addresses.remove(&(*interface, *ip)),
            Event::Neighbor { ip, .. } => self.neighbors.remove(ip),
            Event::Route { address, len, .. } => self.routes.remove(&(masked(*address, *len), *len)),
            Event::Nexthop { id, .. } => self.nexthops.remove(id),
            Event::Link { .. } => false,
        };
    }

    /// Removal events for everything left.
    fn into_removals(self) -> Vec<Event> {
        let routes = self.routes.into_iter().map(|(address, len)| Event::Route {
            add: false,
            address,
            len,
            next_hops: NextHops::Discard,
        });
        let addresses = self.addresses.into_iter().map(|(interface, ip)| Event::Address { add: false, interface, ip });
        let neighbors = self.neighbors.into_iter().map(|ip| Event::Neighbor { interface: 0, ip, mac: None });
        let nexthops = self.nexthops.into_iter().map(|id| Event::Nexthop { id, nexthop: None });
        routes.chain(addresses).chain(neighbors).chain(nexthops).collect()
    }
}

/// Netlink message types this module reads beyond the crate's.
const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const RTM_GETNEXTHOP: u16 = 106;
const RTM_GETLINK: u16 = 18;
const RTM_GETADDR: u16 = 22;
const RTM_GETROUTE: u16 = 26;
const RTM_GETNEIGH: u16 = 30;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
/// The route netlink groups subscribed to.
const GROUPS: [u32; 7] = [
    1,  // RTNLGRP_LINK
    3,  // RTNLGRP_NEIGH
    5,  // RTNLGRP_IPV4_IFADDR
    7,  // RTNLGRP_IPV4_ROUTE
    9,  // RTNLGRP_IPV6_IFADDR
    11, // RTNLGRP_IPV6_ROUTE
    32, // RTNLGRP_NEXTHOP
];
/// The dumps, in the order that lets each resolve against the previous: nexthop objects and
/// neighbours before the routes that use them (links first: the interfaces' state and MTU).
const DUMPS: [(u16, usize); 5] =
    [(RTM_GETLINK, 16), (RTM_GETADDR, 8), (RTM_GETNEIGH, 12), (RTM_GETNEXTHOP, 8), (RTM_GETROUTE, 12)];

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
            // A failed dump request (e.g. no nexthop objects in an old kernel) ends that dump.
            NLMSG_ERROR => Message::Done,
            NLMSG_OVERRUN => Message::Lost,
            RTM_NEWNEXTHOP | RTM_DELNEXTHOP => decode_nexthop(kind == RTM_NEWNEXTHOP, &message[16..]),
            _ => match NetlinkMessage::<RouteNetlinkMessage>::deserialize(message) {
                Ok(NetlinkMessage { payload: NetlinkPayload::InnerMessage(inner), .. }) => decode_route_message(inner),
                _ => Message::Other,
            },
        });
        offset += len.div_ceil(4) * 4;
    }
    messages
}

/// A next hop's address: RTA_GATEWAY, or RTA_VIA for an IPv4 route over an IPv6 next hop
/// (RFC 5549, as BGP unnumbered installs them).
fn gateway_of(attributes: &[RouteAttribute]) -> Option<IpAddr> {
    attributes.iter().find_map(|attribute| match attribute {
        RouteAttribute::Gateway(address) => route_address(address),
        RouteAttribute::Via(RouteVia::Inet(ip)) => Some(IpAddr::V4(*ip)),
        RouteAttribute::Via(RouteVia::Inet6(ip)) => Some(IpAddr::V6(*ip)),
        _ => None,
    })
}

fn route_address(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(ip) => Some(IpAddr::V4(*ip)),
        RouteAddress::Inet6(ip) => Some(IpAddr::V6(*ip)),
        _ => None,
    }
}

fn decode_route_message(message: RouteNetlinkMessage) -> Message {
    match message {
        RouteNetlinkMessage::NewAddress(message) => address_event(true, &message),
        RouteNetlinkMessage::DelAddress(message) => address_event(false, &message),
        RouteNetlinkMessage::NewNeighbour(message) => neighbor_event(true, &message),
        RouteNetlinkMessage::DelNeighbour(message) => neighbor_event(false, &message),
        RouteNetlinkMessage::NewRoute(message) => route_event(true, &message),
        RouteNetlinkMessage::DelRoute(message) => route_event(false, &message),
        RouteNetlinkMessage::NewLink(message) => link_event(&message),
        _ => Message::Other,
    }
}

fn link_event(message: &netlink_packet_route::link::LinkMessage) -> Message {
    let mtu = message.attributes.iter().find_map(|attribute| match attribute {
        netlink_packet_route::link::LinkAttribute::Mtu(mtu) => Some(*mtu),
        _ => None,
    });
    let up = message.header.flags.contains(netlink_packet_route::link::LinkFlags::Up);
    Message::Event(Event::Link { interface: message.header.index, up, mtu })
}

fn address_event(add: bool, message: &netlink_packet_route::address::AddressMessage) -> Message {
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

fn neighbor_event(add: bool, message: &netlink_packet_route::neighbour::NeighbourMessage) -> Message {
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

fn route_event(add: bool, message: &netlink_packet_route::route::RouteMessage) -> Message {
    let header = &message.header;
    let table = message
        .attributes
        .iter()
        .find_map(|attribute| match attribute {
            RouteAttribute::Table(table) => Some(*table),
            _ => None,
        })
        .unwrap_or(u32::from(header.table));
    let discard = matches!(header.kind, RouteType::BlackHole | RouteType::Unreachable | RouteType::Prohibit);
    if table != u32::from(RouteHeader::RT_TABLE_MAIN) || !(header.kind == RouteType::Unicast || discard) {
        return Message::Other;
    }
    let destination = message.attributes.iter().find_map(|attribute| match attribute {
        RouteAttribute::Destination(address) => route_address(address),
        _ => None,
    });
    let address = match destination {
        Some(address) => address,
        // A default route carries no destination.
        None => match header.address_family {
            netlink_packet_route::AddressFamily::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            netlink_packet_route::AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            _ => return Message::Other,
        },
    };
    let len = header.destination_prefix_length;
    if let IpAddr::V6(v6) = address {
        if len >= 10 && u128::from(v6) >> 118 == 0x3fa {
            return Message::Other;
        }
    }
    let gateway = gateway_of(&message.attributes);
    let mut next_hops = None;
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::NhId(id) => next_hops = Some(NextHops::Object(*id)),
            RouteAttribute::Oif(interface) if next_hops.is_none() => {
                next_hops = Some(NextHops::Direct(vec![(gateway, *interface)]));
            }
            RouteAttribute::MultiPath(list) => {
                next_hops = Some(NextHops::Direct(
                    list.iter().map(|hop| (gateway_of(&hop.attributes), hop.interface_index)).collect(),
                ));
            }
            _ => {}
        }
    }
    let next_hops = if discard { NextHops::Discard } else { next_hops.unwrap_or(NextHops::Direct(Vec::new())) };
    Message::Event(Event::Route { add, address, len, next_hops })
}

/// RTM_NEWNEXTHOP/RTM_DELNEXTHOP: `struct nhmsg` (8 bytes) then attributes.
fn decode_nexthop(add: bool, body: &[u8]) -> Message {
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
            // struct nexthop_grp { u32 id; u8 weight; u8 resvd1; u16 resvd2; }
            (NHA_GROUP, _) => {
                group = Some(
                    value
                        .chunks_exact(8)
                        .map(|entry| u32::from_ne_bytes(entry[0..4].try_into().expect("4 bytes")))
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
fn dump_request(kind: u16, header_len: usize, sequence: u32) -> Vec<u8> {
    let len = 16 + header_len;
    let mut request = vec![0u8; len];
    request[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&kind.to_ne_bytes());
    let flags = netlink_packet_core::NLM_F_REQUEST | netlink_packet_core::NLM_F_DUMP;
    request[6..8].copy_from_slice(&flags.to_ne_bytes());
    request[8..12].copy_from_slice(&sequence.to_ne_bytes());
    request
}

/// The netlink side of the control plane: subscribed, dumping in turn, applying changes to
/// a FIB writer as they arrive.
pub struct Sync {
    socket: netlink_sys::Socket,
    pub tables: KernelTables,
    /// The next dump to send once the current one is done (`DUMPS.len()`: all done).
    next_dump: usize,
    dumping: bool,
    sequence: u32,
    buffer: Vec<u8>,
    /// During a fresh dump after lost messages: what has not been reported again.
    stale: Option<Stale>,
    /// Times messages were lost and the tables dumped again.
    pub resyncs: u64,
    /// Changes to the ports' host interfaces read since the caller last took them.
    links: Vec<LinkChange>,
}

/// The socket's receive buffer: a million route messages arrive faster than any reader in
/// bursts of `ip -batch`; 64 MiB holds about half a million of them.
const RECEIVE_BUFFER: usize = 64 << 20;

impl Sync {
    /// Opens the socket in the calling thread's namespace, for a switch whose port `i` is the
    /// interface `interfaces[i]`, and starts the first dumps.
    pub fn open(interfaces: Vec<u32>) -> io::Result<Self> {
        let mut socket = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
        socket.bind_auto()?;
        for group in GROUPS {
            socket.add_membership(group)?;
        }
        // Past rmem_max when allowed (root), else as much as rmem_max gives.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
        if crate::dpdk::host::force_receive_buffer(fd, RECEIVE_BUFFER).is_err() {
            let _ = socket.set_rx_buf_sz(RECEIVE_BUFFER);
        }
        socket.set_non_blocking(true)?;
        let mut sync = Self {
            socket,
            tables: KernelTables::new(interfaces),
            next_dump: 0,
            dumping: false,
            sequence: 0,
            buffer: vec![0; 1 << 20],
            stale: None,
            resyncs: 0,
            links: Vec::new(),
        };
        sync.send_next_dump()?;
        Ok(sync)
    }

    pub fn raw_fd(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.socket)
    }

    /// The ports' host interface changes read since the last call, oldest first.
    pub fn take_link_changes(&mut self) -> Vec<LinkChange> {
        std::mem::take(&mut self.links)
    }

    /// Dumps every table again; what the dumps do not report is removed once they end.
    fn resync(&mut self, writer: &FibWriter) -> io::Result<()> {
        self.resyncs += 1;
        if self.stale.is_none() {
            self.stale = Some(self.tables.contents(writer));
        }
        self.next_dump = 0;
        self.dumping = false;
        self.send_next_dump()
    }

    fn send_next_dump(&mut self) -> io::Result<()> {
        if self.dumping || self.next_dump >= DUMPS.len() {
            return Ok(());
        }
        let (kind, header_len) = DUMPS[self.next_dump];
        self.sequence = self.sequence.wrapping_add(1);
        self.socket.send(&dump_request(kind, header_len, self.sequence), 0)?;
        self.next_dump += 1;
        self.dumping = true;
        Ok(())
    }

    /// Whether the first full dump has been applied.
    pub fn synced(&self) -> bool {
        self.next_dump >= DUMPS.len() && !self.dumping
    }

    /// Reads what the kernel sent and applies it to `writer`, until nothing is waiting or
    /// `until` has passed (so that the caller publishes at least that often); returns how many
    /// messages were applied.
    pub fn poll(&mut self, writer: &mut FibWriter, until: std::time::Instant) -> io::Result<usize> {
        let mut applied = 0;
        loop {
            if applied > 0 && std::time::Instant::now() >= until {
                break;
            }
            let received = match self.socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(received) => received,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                // ENOBUFS: the kernel dropped messages; only a fresh dump is certain.
                Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => {
                    tracing::warn!("control: netlink messages were lost; dumping the kernel's tables again");
                    self.resync(writer)?;
                    continue;
                }
                Err(err) => return Err(err),
            };
            for message in decode(&self.buffer[..received.min(self.buffer.len())]) {
                match message {
                    Message::Event(Event::Link { interface, up, mtu }) => {
                        if let Some(port) = self.tables.port_of(interface) {
                            self.links.push(LinkChange { port, up, mtu });
                        }
                    }
                    Message::Event(event) => {
                        if let Some(stale) = &mut self.stale {
                            stale.refreshed(&event);
                        }
                        self.tables.apply(event, writer);
                        applied += 1;
                    }
                    Message::Done => {
                        self.dumping = false;
                        self.send_next_dump()?;
                        if self.synced() {
                            for event in self.stale.take().map(Stale::into_removals).unwrap_or_default() {
                                self.tables.apply(event, writer);
                                applied += 1;
                            }
                        }
                    }
                    Message::Lost => self.resync(writer)?,
                    Message::Other => {}
                }
            }
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn mac(last: u8) -> MacAddress {
        MacAddress([0x02, 0, 0, 0, 0, last])
    }

    /// Ports 0 and 1 (host interfaces 10 and 11) of a switch with `[control]`; 1 is lo.
    fn writer() -> FibWriter {
        let config =
            crate::testing::Leaf::new("k").port("host0", 100.0, "").port("up0", 100.0, "").tables("[control]").config();
        FibWriter::new(&config)
    }

    fn v4(text: &str) -> crate::wire::parse::Destination {
        crate::wire::parse::Destination::V4(u32::from(text.parse::<Ipv4Addr>().unwrap()))
    }

    #[test]
    fn tables_follow_the_kernels_changes_into_the_fib() {
        use crate::pipeline::fib::{Adjacency, Target};
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        tables.apply(Event::Address { add: true, interface: 10, ip: ip("10.0.0.1") }, &mut writer);
        tables.apply(Event::Address { add: true, interface: 1, ip: ip("10.255.255.1") }, &mut writer);
        tables.apply(Event::Address { add: true, interface: 1, ip: ip("127.0.0.1") }, &mut writer);
        tables.apply(Event::Neighbor { interface: 10, ip: ip("10.0.0.2"), mac: Some(mac(2)) }, &mut writer);
        tables.apply(Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(3)) }, &mut writer);
        tables.apply(Event::Neighbor { interface: 11, ip: ip("10.255.0.3"), mac: Some(mac(4)) }, &mut writer);
        // A neighbour on an interface that is not a port is not the FIB's.
        tables.apply(Event::Neighbor { interface: 1, ip: ip("10.255.0.9"), mac: Some(mac(9)) }, &mut writer);
        // A multipath route, a connected one, one through a nexthop group, and one via lo only.
        let multipath = NextHops::Direct(vec![(Some(ip("10.255.0.1")), 11), (Some(ip("10.255.0.3")), 11)]);
        tables.apply(Event::Route { add: true, address: ip("0.0.0.0"), len: 0, next_hops: multipath }, &mut writer);
        let connected = NextHops::Direct(vec![(None, 10)]);
        tables.apply(Event::Route { add: true, address: ip("10.0.0.0"), len: 24, next_hops: connected }, &mut writer);
        let single = |gateway: &str| Some(Nexthop::Single { gateway: Some(ip(gateway)), interface: 11 });
        tables.apply(Event::Nexthop { id: 7, nexthop: single("10.255.0.1") }, &mut writer);
        tables.apply(Event::Nexthop { id: 8, nexthop: single("10.255.0.3") }, &mut writer);
        tables.apply(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![7, 8])) }, &mut writer);
        let object = NextHops::Object(9);
        tables.apply(Event::Route { add: true, address: ip("192.0.2.0"), len: 24, next_hops: object }, &mut writer);
        let via_lo = NextHops::Direct(vec![(None, 1)]);
        tables.apply(Event::Route { add: true, address: ip("198.51.100.0"), len: 24, next_hops: via_lo }, &mut writer);
        let discard = NextHops::Discard;
        tables.apply(Event::Route { add: true, address: ip("203.0.113.0"), len: 24, next_hops: discard }, &mut writer);
        let fib = writer.snapshot(1);
        assert_eq!(fib.lookup(v4("10.0.0.1")), Some(Target::Local));
        assert_eq!(fib.lookup(v4("10.255.255.1")), Some(Target::Local), "an address on lo is the switch's");
        assert_ne!(fib.lookup(v4("127.0.0.1")), Some(Target::Local), "loopback addresses are not");
        assert_eq!(fib.neighbors(), 3);
        assert_eq!(fib.neighbor(v4("10.0.0.2")), Some(Adjacency { port: 0, mac: mac(2) }));
        let both = vec![Adjacency { port: 1, mac: mac(3) }, Adjacency { port: 1, mac: mac(4) }];
        let Some(Target::Group(group)) = fib.lookup(v4("8.8.8.8")) else { panic!() };
        assert_eq!(fib.groups[group as usize].members, both);
        assert_eq!(fib.lookup(v4("10.0.0.7")), Some(Target::Connected(0)));
        assert_eq!(fib.lookup(v4("192.0.2.1")), Some(Target::Group(group)), "a nexthop group, expanded");
        assert_eq!(fib.lookup(v4("198.51.100.1")), Some(Target::Group(group)), "lo's route is not taken");
        assert_eq!(fib.lookup(v4("203.0.113.1")), Some(Target::Discard), "a blackhole");
        // Withdrawals: one member of the group, the neighbour, the multipath route.
        tables.apply(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![8])) }, &mut writer);
        tables.apply(Event::Neighbor { interface: 10, ip: ip("10.0.0.2"), mac: None }, &mut writer);
        let gone = NextHops::Direct(Vec::new());
        tables.apply(Event::Route { add: false, address: ip("0.0.0.0"), len: 0, next_hops: gone }, &mut writer);
        // A member object redefined moves the group over it.
        tables.apply(Event::Nexthop { id: 8, nexthop: single("10.255.0.1") }, &mut writer);
        let fib = writer.snapshot(2);
        assert_eq!(fib.neighbors(), 2);
        assert_eq!(fib.lookup(v4("8.8.8.8")), None);
        assert_eq!(fib.lookup(v4("192.0.2.1")), Some(Target::Adjacency(both[0])));
        // The address leaves lo: no longer local.
        tables.apply(Event::Address { add: false, interface: 1, ip: ip("10.255.255.1") }, &mut writer);
        assert_eq!(writer.snapshot(3).lookup(v4("10.255.255.1")), None);
    }

    /// After lost messages, a fresh dump: what it reports again stays (with no gap), what it
    /// does not is removed when it ends.
    #[test]
    fn a_fresh_dump_sweeps_what_it_does_not_report_again() {
        let mut tables = KernelTables::new(vec![10, 11]);
        let mut writer = writer();
        let route = |address: &str| Event::Route {
            add: true,
            address: ip(address),
            len: 24,
            next_hops: NextHops::Direct(vec![(None, 11)]),
        };
        for event in [
            route("192.0.2.0"),
            route("198.51.100.0"),
            Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(1)) },
            Event::Neighbor { interface: 11, ip: ip("10.255.0.3"), mac: Some(mac(3)) },
            Event::Address { add: true, interface: 10, ip: ip("10.0.0.1") },
            Event::Nexthop { id: 4, nexthop: Some(Nexthop::Unusable) },
        ] {
            tables.apply(event, &mut writer);
        }
        let mut stale = tables.contents(&writer);
        for event in [route("192.0.2.0"), Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(1)) }] {
            stale.refreshed(&event);
            tables.apply(event, &mut writer);
        }
        assert_eq!(writer.snapshot(1).routes(), 3, "nothing is gone before the dump ends");
        for event in stale.into_removals() {
            tables.apply(event, &mut writer);
        }
        let fib = writer.snapshot(2);
        assert_eq!(
            fib.dump().iter().map(|(address, len, _)| (*address, *len)).collect::<Vec<_>>(),
            vec![(ip("192.0.2.0"), 24)]
        );
        assert_eq!(fib.neighbors(), 1);
        assert!(tables.nexthops.is_empty() && tables.addresses.is_empty());
    }

    /// One message as the kernel would write it, serialised by netlink-packet-route.
    fn emit(inner: RouteNetlinkMessage) -> Vec<u8> {
        use netlink_packet_core::NetlinkHeader;
        let mut message = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(inner));
        message.finalize();
        let mut bytes = vec![0u8; message.buffer_len()];
        message.serialize(&mut bytes);
        bytes
    }

    /// A datagram of netlink messages as the kernel writes them (native byte order).
    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let len = 16 + body.len();
        let mut bytes = vec![0u8; len.div_ceil(4) * 4];
        bytes[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        bytes[4..6].copy_from_slice(&kind.to_ne_bytes());
        bytes[16..len].copy_from_slice(body);
        bytes
    }

    fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut bytes = vec![0u8; len.div_ceil(4) * 4];
        bytes[0..2].copy_from_slice(&(len as u16).to_ne_bytes());
        bytes[2..4].copy_from_slice(&kind.to_ne_bytes());
        bytes[4..len].copy_from_slice(value);
        bytes
    }

    #[test]
    fn nexthop_objects_and_dump_ends_decode() {
        let mut single = vec![2u8, 0, 3, 0, 0, 0, 0, 0]; // nhmsg: AF_INET, scope, protocol
        single.extend(attribute(1, &7u32.to_ne_bytes()));
        single.extend(attribute(5, &11u32.to_ne_bytes()));
        single.extend(attribute(6, &[10, 255, 0, 1]));
        let mut group = vec![0u8; 8];
        group.extend(attribute(1, &9u32.to_ne_bytes()));
        let entries: Vec<u8> =
            [7u32, 8].iter().flat_map(|id| [id.to_ne_bytes().to_vec(), vec![1, 0, 0, 0]].concat()).collect();
        group.extend(attribute(2, &entries));
        let mut deleted = vec![0u8; 8];
        deleted.extend(attribute(1, &8u32.to_ne_bytes()));
        let mut blackhole = vec![0u8; 8];
        blackhole.extend(attribute(1, &3u32.to_ne_bytes()));
        blackhole.extend(attribute(4, &[]));
        let datagram = [
            message(RTM_NEWNEXTHOP, &single),
            message(RTM_NEWNEXTHOP, &group),
            message(RTM_DELNEXTHOP, &deleted),
            message(RTM_NEWNEXTHOP, &blackhole),
            message(NLMSG_DONE, &[0; 4]),
            // A failed dump request (errno, then the request's header) ends that dump too.
            message(NLMSG_ERROR, &[[0xa1, 0xff, 0xff, 0xff].as_slice(), &[0u8; 16]].concat()),
            message(NLMSG_OVERRUN, &[]),
        ]
        .concat();
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Nexthop {
                    id: 7,
                    nexthop: Some(Nexthop::Single { gateway: Some(ip("10.255.0.1")), interface: 11 })
                }),
                Message::Event(Event::Nexthop { id: 9, nexthop: Some(Nexthop::Group(vec![7, 8])) }),
                Message::Event(Event::Nexthop { id: 8, nexthop: None }),
                Message::Event(Event::Nexthop { id: 3, nexthop: Some(Nexthop::Unusable) }),
                Message::Done,
                Message::Done,
                Message::Lost,
            ]
        );
        // Truncated or lying lengths end the walk without a panic.
        assert_eq!(decode(&datagram[..10]), vec![]);
        let mut lying = message(RTM_NEWNEXTHOP, &single);
        lying[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(decode(&lying), vec![]);
    }

    #[test]
    fn route_neighbour_and_address_messages_decode() {
        use netlink_packet_route::route::{RouteMessage, RouteNextHop};
        // 0.0.0.0/0 over two next hops: one IPv4 gateway, one IPv6 link-local via (RFC 5549).
        let mut route = RouteMessage::default();
        route.header.address_family = netlink_packet_route::AddressFamily::Inet;
        route.header.table = RouteHeader::RT_TABLE_MAIN;
        route.header.kind = RouteType::Unicast;
        let hop = |attribute: RouteAttribute, interface_index: u32| {
            let mut hop = RouteNextHop::default();
            hop.interface_index = interface_index;
            hop.attributes = vec![attribute];
            hop
        };
        route.attributes = vec![RouteAttribute::MultiPath(vec![
            hop(RouteAttribute::Gateway(RouteAddress::Inet("10.255.0.1".parse().unwrap())), 11),
            hop(RouteAttribute::Via(RouteVia::Inet6("fe80::1".parse().unwrap())), 12),
        ])];
        let mut local_table = route.clone();
        local_table.header.table = 255;
        let mut neighbour = netlink_packet_route::neighbour::NeighbourMessage::default();
        neighbour.header.family = netlink_packet_route::AddressFamily::Inet;
        neighbour.header.ifindex = 11;
        neighbour.header.state = NeighbourState::Stale;
        neighbour.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet("10.255.0.1".parse().unwrap())),
            NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 9]),
        ];
        let mut failed = neighbour.clone();
        failed.header.state = NeighbourState::Failed;
        let mut address = netlink_packet_route::address::AddressMessage::default();
        address.header.family = netlink_packet_route::AddressFamily::Inet;
        address.header.index = 10;
        address.attributes = vec![AddressAttribute::Address("10.0.0.1".parse().unwrap())];
        let datagram = [
            emit(RouteNetlinkMessage::NewRoute(route)),
            emit(RouteNetlinkMessage::NewRoute(local_table)),
            emit(RouteNetlinkMessage::NewNeighbour(neighbour)),
            emit(RouteNetlinkMessage::NewNeighbour(failed)),
            emit(RouteNetlinkMessage::NewAddress(address.clone())),
            emit(RouteNetlinkMessage::DelAddress(address)),
        ]
        .concat();
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Route {
                    add: true,
                    address: ip("0.0.0.0"),
                    len: 0,
                    next_hops: NextHops::Direct(vec![(Some(ip("10.255.0.1")), 11), (Some(ip("fe80::1")), 12)]),
                }),
                Message::Other,
                Message::Event(Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: Some(mac(9)) }),
                Message::Event(Event::Neighbor { interface: 11, ip: ip("10.255.0.1"), mac: None }),
                Message::Event(Event::Address { add: true, interface: 10, ip: ip("10.0.0.1") }),
                Message::Event(Event::Address { add: false, interface: 10, ip: ip("10.0.0.1") }),
            ]
        );
    }

    #[test]
    fn every_route_shape_the_kernel_sends_decodes() {
        use netlink_packet_route::route::RouteMessage;
        use netlink_packet_route::AddressFamily;
        let route = |family: AddressFamily, table: u8, len: u8, attributes: Vec<RouteAttribute>| {
            let mut route = RouteMessage::default();
            route.header.address_family = family;
            route.header.table = table;
            route.header.kind = RouteType::Unicast;
            route.header.destination_prefix_length = len;
            route.attributes = attributes;
            route
        };
        let v6 = |text: &str| RouteAddress::Inet6(text.parse().unwrap());
        // Table given by RTA_TABLE (header says unspec); a single gateway and interface.
        let single = route(
            AddressFamily::Inet,
            0,
            24,
            vec![
                RouteAttribute::Table(254),
                RouteAttribute::Destination(RouteAddress::Inet("192.0.2.0".parse().unwrap())),
                RouteAttribute::Gateway(RouteAddress::Inet("10.255.0.1".parse().unwrap())),
                RouteAttribute::Oif(11),
            ],
        );
        let other_table = route(AddressFamily::Inet, 0, 24, vec![RouteAttribute::Table(100)]);
        // The kernel's per-interface link-local route: never the FIB's.
        let link_local = route(
            AddressFamily::Inet6,
            254,
            64,
            vec![RouteAttribute::Destination(v6("fe80::")), RouteAttribute::Oif(12)],
        );
        // IPv6 default route (no destination) through a nexthop object, an Oif after it ignored.
        let object = route(AddressFamily::Inet6, 254, 0, vec![RouteAttribute::NhId(9), RouteAttribute::Oif(12)]);
        // An IPv6 prefix via an IPv4 next hop (RTA_VIA).
        let via_v4 = route(
            AddressFamily::Inet6,
            254,
            64,
            vec![
                RouteAttribute::Destination(v6("2001:db8::")),
                RouteAttribute::Via(RouteVia::Inet("10.255.0.3".parse().unwrap())),
                RouteAttribute::Oif(12),
            ],
        );
        let mut blackhole = route(
            AddressFamily::Inet,
            254,
            16,
            vec![RouteAttribute::Destination(RouteAddress::Inet("172.16.0.0".parse().unwrap()))],
        );
        blackhole.header.kind = RouteType::BlackHole;
        let mut neighbour = netlink_packet_route::neighbour::NeighbourMessage::default();
        neighbour.header.family = AddressFamily::Inet6;
        neighbour.header.ifindex = 12;
        neighbour.header.state = NeighbourState::Reachable;
        neighbour.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet6("fe80::1".parse().unwrap())),
            NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 7]),
        ];
        let mut address = netlink_packet_route::address::AddressMessage::default();
        address.header.family = AddressFamily::Inet;
        address.header.index = 11;
        // Point-to-point: IFA_LOCAL is ours, IFA_ADDRESS the peer's.
        address.attributes = vec![
            AddressAttribute::Address("10.255.0.1".parse().unwrap()),
            AddressAttribute::Local("10.255.0.0".parse().unwrap()),
        ];
        let datagram = [
            emit(RouteNetlinkMessage::NewRoute(single.clone())),
            emit(RouteNetlinkMessage::DelRoute(single)),
            emit(RouteNetlinkMessage::NewRoute(other_table)),
            emit(RouteNetlinkMessage::NewRoute(link_local)),
            emit(RouteNetlinkMessage::NewRoute(object)),
            emit(RouteNetlinkMessage::NewRoute(via_v4)),
            emit(RouteNetlinkMessage::NewRoute(blackhole)),
            emit(RouteNetlinkMessage::NewNeighbour(neighbour.clone())),
            emit(RouteNetlinkMessage::DelNeighbour(neighbour)),
            emit(RouteNetlinkMessage::NewAddress(address)),
        ]
        .concat();
        let gateway = NextHops::Direct(vec![(Some(ip("10.255.0.1")), 11)]);
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Route {
                    add: true,
                    address: ip("192.0.2.0"),
                    len: 24,
                    next_hops: gateway.clone()
                }),
                Message::Event(Event::Route { add: false, address: ip("192.0.2.0"), len: 24, next_hops: gateway }),
                Message::Other,
                Message::Other,
                Message::Event(Event::Route { add: true, address: ip("::"), len: 0, next_hops: NextHops::Object(9) }),
                Message::Event(Event::Route {
                    add: true,
                    address: ip("2001:db8::"),
                    len: 64,
                    next_hops: NextHops::Direct(vec![(Some(ip("10.255.0.3")), 12)]),
                }),
                Message::Event(Event::Route {
                    add: true,
                    address: ip("172.16.0.0"),
                    len: 16,
                    next_hops: NextHops::Discard
                }),
                Message::Event(Event::Neighbor { interface: 12, ip: ip("fe80::1"), mac: Some(mac(7)) }),
                Message::Event(Event::Neighbor { interface: 12, ip: ip("fe80::1"), mac: None }),
                Message::Event(Event::Address { add: true, interface: 11, ip: ip("10.255.0.0") }),
            ]
        );
    }

    #[test]
    fn nexthop_attributes_are_walked_by_their_lengths() {
        // Values whose last byte is not zero, an IPv6 gateway, and a blackhole flag after the
        // interface: each attribute is found where its length says.
        let mut single = vec![10u8, 0, 3, 0, 0, 0, 0, 0]; // AF_INET6
        single.extend(attribute(1, &0x0100_0007u32.to_ne_bytes()));
        single.extend(attribute(5, &0x0100_000bu32.to_ne_bytes()));
        single.extend(attribute(6, &"fe80::1".parse::<Ipv6Addr>().unwrap().octets()));
        let mut blackhole = vec![0u8; 8];
        blackhole.extend(attribute(1, &0x0100_0003u32.to_ne_bytes()));
        blackhole.extend(attribute(5, &11u32.to_ne_bytes()));
        blackhole.extend(attribute(4, &[]));
        // An attribute claiming 2 bytes ends the walk (what follows is not read).
        let mut short = vec![0u8; 8];
        short.extend(attribute(1, &5u32.to_ne_bytes()));
        short.extend([2u8, 0, 5, 0]);
        short.extend(attribute(5, &11u32.to_ne_bytes()));
        let datagram =
            [message(RTM_NEWNEXTHOP, &single), message(RTM_NEWNEXTHOP, &blackhole), message(RTM_NEWNEXTHOP, &short)]
                .concat();
        assert_eq!(
            decode(&datagram),
            vec![
                Message::Event(Event::Nexthop {
                    id: 0x0100_0007,
                    nexthop: Some(Nexthop::Single { gateway: Some(ip("fe80::1")), interface: 0x0100_000b }),
                }),
                Message::Event(Event::Nexthop { id: 0x0100_0003, nexthop: Some(Nexthop::Unusable) }),
                Message::Event(Event::Nexthop { id: 5, nexthop: Some(Nexthop::Unusable) }),
            ]
        );
    }

    #[test]
    fn dump_requests_are_well_formed() {
        let request = dump_request(RTM_GETROUTE, 12, 7);
        assert_eq!(request.len(), 28);
        assert_eq!(u32::from_ne_bytes(request[0..4].try_into().unwrap()), 28);
        assert_eq!(u16::from_ne_bytes([request[4], request[5]]), RTM_GETROUTE);
        assert_eq!(u16::from_ne_bytes([request[6], request[7]]), 0x301, "NLM_F_REQUEST | NLM_F_DUMP");
        assert_eq!(u32::from_ne_bytes(request[8..12].try_into().unwrap()), 7);
        assert!(request[12..].iter().all(|&byte| byte == 0), "pid 0 and a zeroed family header");
    }

    /// Against the real kernel (of the namespace the tests run in, read only): the four dumps
    /// go out one after the other and end.
    #[test]
    fn sync_dumps_the_kernels_tables_in_turn() {
        let mut sync = Sync::open(Vec::new()).expect("a route netlink socket");
        let mut writer = writer();
        assert!(sync.raw_fd() > 2, "a descriptor of its own");
        assert!(!sync.synced(), "the dumps have only begun");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut changed = false;
        while !sync.synced() {
            assert!(std::time::Instant::now() < deadline, "the dumps never ended");
            changed |= sync.poll(&mut writer, std::time::Instant::now()).expect("netlink") > 0;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(sync.next_dump, DUMPS.len());
        // Every namespace has at least its loopback interface's addresses or routes to report.
        assert!(changed, "the dumps filled the tables");
    }
}
