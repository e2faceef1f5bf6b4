//! The link watcher of a live switch: follows every port's link into `link::PortStates`, and
//! takes a device's link down and up when the operator shuts the port or opens it again.
//!
//! How each driver's link is known:
//! - net_af_packet reports its link up from start whatever the kernel interface does, so the
//!   interface it binds (`iface=`) is followed instead: its carrier (IFF_RUNNING) as the kernel
//!   announces it on a route netlink socket (RTNLGRP_LINK) in raceway's own namespace, read the
//!   moment it changes, and once by ioctl at start;
//! - every other driver through DPDK's link status, polled every `POLL` (net_memif reports its
//!   connection, a PCI NIC its PHY; polling `rte_eth_link_get_nowait` costs a read of the
//!   device's state, and needs no interrupt thread of its own).
//!
//! One thread (`raceway-link`) does both; it sleeps in poll(2) on the netlink socket for at
//! most `POLL`, so a carrier change reaches the workers within that, and the TAP (the control
//! thread mirrors it) within its housekeeping period after.
//!
//! Invariant: a port's carrier in `PortStates` is what its device (and, for net_af_packet, its
//! kernel interface) last said, and a port shut by the operator has had its device's link
//! taken down where the driver can.

use crate::dpdk::Port;
use crate::link::PortStates;
use crate::linux;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often DPDK's link status is read, and the longest a kernel carrier change waits.
pub const POLL: Duration = Duration::from_millis(10);

/// The kernel interface a net_af_packet device binds (`iface=NAME` in its devargs).
pub fn af_packet_interface(device: &str) -> Option<&str> {
    if !device.starts_with("net_af_packet") && !device.starts_with("eth_af_packet") {
        return None;
    }
    device.split(',').find_map(|arg| arg.strip_prefix("iface=")).filter(|name| !name.is_empty())
}

/// The running watcher; stops (and joins) on drop.
pub struct LinkWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LinkWatch {
    /// Reads every port's link once (so the workers start with the truth), then starts
    /// following them. `interfaces[i]` is port i's kernel interface when it is net_af_packet;
    /// `changed` runs after each change (to wake whoever mirrors links).
    pub fn start(
        ports: Vec<Arc<Port>>,
        interfaces: Vec<Option<String>>,
        states: Arc<PortStates>,
        changed: Box<dyn Fn() + Send>,
    ) -> io::Result<Self> {
        let mut watcher = Watcher::new(ports, interfaces, states, changed)?;
        watcher.refresh();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new().name("raceway-link".into()).spawn(move || watcher.run(&stop))?
        };
        Ok(Self { stop, thread: Some(thread) })
    }
}

impl Drop for LinkWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Watcher {
    ports: Vec<Arc<Port>>,
    states: Arc<PortStates>,
    /// Per port: its kernel interface's index and name (net_af_packet only).
    interfaces: Vec<Option<(u32, String)>>,
    /// Per port: whether that interface has carrier, as last reported.
    kernel_carrier: Vec<bool>,
    /// Per port: the administrative state last applied to the device.
    device_admin_up: Vec<bool>,
    netlink: Option<netlink_sys::Socket>,
    buffer: Vec<u8>,
    changed: Box<dyn Fn() + Send>,
}

/// RTM_NEWLINK and RTM_DELLINK; RTNLGRP_LINK.
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTNLGRP_LINK: u32 = 1;

impl Watcher {
    fn new(
        ports: Vec<Arc<Port>>,
        interfaces: Vec<Option<String>>,
        states: Arc<PortStates>,
        changed: Box<dyn Fn() + Send>,
    ) -> io::Result<Self> {
        let mut resolved = Vec::with_capacity(interfaces.len());
        let mut kernel_carrier = Vec::with_capacity(interfaces.len());
        for name in interfaces {
            match name {
                Some(name) => {
                    let index = linux::interface_index(&name)
                        .map_err(|err| io::Error::new(err.kind(), format!("interface '{name}': {err}")))?;
                    kernel_carrier.push(linux::interface_running(&name).unwrap_or(false));
                    resolved.push(Some((index, name)));
                }
                None => {
                    kernel_carrier.push(true);
                    resolved.push(None);
                }
            }
        }
        // Subscribed before anything is read below, so no change falls between.
        let netlink = if resolved.iter().any(Option::is_some) {
            let mut socket = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
            socket.bind_auto()?;
            socket.add_membership(RTNLGRP_LINK)?;
            socket.set_non_blocking(true)?;
            Some(socket)
        } else {
            None
        };
        let device_admin_up = vec![true; ports.len()];
        Ok(Self {
            ports,
            states,
            interfaces: resolved,
            kernel_carrier,
            device_admin_up,
            netlink,
            buffer: vec![0; 64 << 10],
            changed,
        })
    }

    fn run(mut self, stop: &AtomicBool) {
        let fds: Vec<i32> = self.netlink.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
        while !stop.load(Ordering::Relaxed) {
            if fds.is_empty() {
                std::thread::sleep(POLL);
            } else {
                let _ = linux::wait_readable(&fds, POLL.as_millis() as i32);
            }
            self.refresh();
        }
    }

    /// Reads what the kernel announced, applies shutdowns to the devices, and sets each port's
    /// carrier.
    fn refresh(&mut self) {
        self.read_netlink();
        for (port, device) in self.ports.iter().enumerate() {
            let admin_up = self.states.get(port).admin_up;
            if admin_up != self.device_admin_up[port] {
                self.device_admin_up[port] = admin_up;
                match device.set_link(admin_up) {
                    Ok(true) => {}
                    Ok(false) => tracing::debug!("port '{}': the driver cannot take its link down", device.name),
                    Err(err) => tracing::warn!("{err}"),
                }
            }
            let carrier = device.link_up() && self.kernel_carrier[port];
            if self.states.set_carrier(port, carrier) {
                tracing::info!("port '{}': link {}", device.name, if carrier { "up" } else { "down" });
                (self.changed)();
            }
        }
    }

    /// Applies every link message waiting on the socket.
    fn read_netlink(&mut self) {
        let Some(socket) = &self.netlink else { return };
        loop {
            let received = match socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(received) => received.min(self.buffer.len()),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) => {
                    // Lost messages (ENOBUFS): ask each interface directly.
                    tracing::debug!("link watcher: netlink: {err}; reading the interfaces again");
                    for (port, interface) in self.interfaces.iter().enumerate() {
                        if let Some((_, name)) = interface {
                            self.kernel_carrier[port] = linux::interface_running(name).unwrap_or(false);
                        }
                    }
                    continue;
                }
            };
            for (index, running) in link_messages(&self.buffer[..received]) {
                for (port, interface) in self.interfaces.iter().enumerate() {
                    if matches!(interface, Some((ifindex, _)) if *ifindex == index) {
                        self.kernel_carrier[port] = running;
                    }
                }
            }
        }
    }
}

/// The (interface index, operationally up) of each RTM_NEWLINK / RTM_DELLINK message in a
/// datagram: the `ifinfomsg` after each 16-byte netlink header holds the index (bytes 4-8)
/// and the flags (8-12), IFF_RUNNING among them. A removed interface is down.
pub fn link_messages(datagram: &[u8]) -> Vec<(u32, bool)> {
    let mut links = Vec::new();
    let mut rest = datagram;
    while rest.len() >= 16 {
        let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(rest[4..6].try_into().expect("2 bytes"));
        if len < 16 || len > rest.len() {
            break;
        }
        let body = &rest[16..len];
        if (kind == RTM_NEWLINK || kind == RTM_DELLINK) && body.len() >= 12 {
            let index = u32::from_ne_bytes(body[4..8].try_into().expect("4 bytes"));
            let flags = u32::from_ne_bytes(body[8..12].try_into().expect("4 bytes"));
            links.push((index, kind == RTM_NEWLINK && flags & libc::IFF_RUNNING as u32 != 0));
        }
        // Messages are padded to 4 bytes.
        let next = len.div_ceil(4) * 4;
        rest = rest.get(next..).unwrap_or(&[]);
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn af_packet_devices_name_their_interface() {
        assert_eq!(af_packet_interface("net_af_packet0,iface=veth-a,qpairs=1"), Some("veth-a"));
        assert_eq!(af_packet_interface("eth_af_packet1,iface=x"), Some("x"));
        assert_eq!(af_packet_interface("net_af_packet0,iface="), None);
        assert_eq!(af_packet_interface("net_memif0,role=server"), None);
        assert_eq!(af_packet_interface("net_tap0,iface=tap0"), None, "TAP ports report their own link");
    }

    /// A netlink header and an `ifinfomsg` (family, type, index, flags, change), padded to 4.
    fn message(kind: u16, index: u32, flags: u32, extra: usize) -> Vec<u8> {
        let len = 16 + 16 + extra;
        let mut bytes = Vec::new();
        bytes.extend((len as u32).to_ne_bytes());
        bytes.extend(kind.to_ne_bytes());
        bytes.extend([0u8; 10]);
        bytes.extend([0u8, 0, 1, 0]); // AF_UNSPEC, pad, ARPHRD_ETHER
        bytes.extend(index.to_ne_bytes());
        bytes.extend(flags.to_ne_bytes());
        bytes.extend(0u32.to_ne_bytes());
        bytes.extend(vec![0xaa; extra]);
        bytes.resize(len.div_ceil(4) * 4, 0);
        bytes
    }

    #[test]
    fn link_messages_give_each_interfaces_carrier() {
        let up = (libc::IFF_UP | libc::IFF_RUNNING | libc::IFF_LOWER_UP) as u32;
        let no_carrier = libc::IFF_UP as u32;
        let mut datagram = message(RTM_NEWLINK, 7, up, 3);
        datagram.extend(message(RTM_NEWLINK, 8, no_carrier, 0));
        datagram.extend(message(20, 9, up, 0)); // an address message: not a link
        datagram.extend(message(RTM_DELLINK, 10, up, 8));
        assert_eq!(link_messages(&datagram), [(7, true), (8, false), (10, false)]);
        // A truncated or lying length ends the walk without reading past the datagram.
        let mut truncated = message(RTM_NEWLINK, 7, up, 0);
        truncated[0] = 200;
        assert!(link_messages(&truncated).is_empty());
        assert!(link_messages(&datagram[..20]).is_empty());
    }
}
