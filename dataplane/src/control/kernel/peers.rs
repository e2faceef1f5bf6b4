//! The kernel's BGP peers: the remote addresses of its TCP connections to or from port 179 in
//! the control namespace, read with sock_diag as `ss` reads them. FRR connects to every
//! neighbour it is given, so a configured peer shows here from its first SYN, before any
//! session is up; with the config's `[[neighbor]]`s they are the sources `[control.acl]`'s
//! `neighbors` takes (`FibWriter::set_kernel_peers`).
//!
//! Invariant: a peer is reported once, an IPv4 peer reaching a dual-stack socket as its IPv4
//! address, a link-local one with the interface it is on.

use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// BGP's TCP port.
const BGP_PORT: u16 = 179;
/// SOCK_DIAG_BY_FAMILY: a dump request and its replies.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// TCP states of a connection being made or held (not LISTEN, TIME_WAIT or CLOSE): ESTABLISHED,
/// SYN_SENT, SYN_RECV, FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT, LAST_ACK, CLOSING.
const CONNECTION_STATES: u32 = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 8) | (1 << 9) | (1 << 11);
/// `struct inet_diag_msg`: family, state, timer, retrans, the socket id (ports, addresses,
/// interface, cookie), then expiry, queues, uid and inode.
const DIAG_MSG_LEN: usize = 72;

/// A sock_diag socket in the calling thread's namespace.
pub struct BgpPeers {
    socket: Socket,
    buffer: Vec<u8>,
    sequence: u32,
}

impl BgpPeers {
    pub fn open() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
        socket.bind_auto()?;
        Ok(Self { socket, buffer: vec![0; 64 << 10], sequence: 0 })
    }

    /// The peers of every BGP connection now: (the interface of a link-local peer, or 0;
    /// the address), sorted.
    pub fn read(&mut self) -> io::Result<Vec<(u32, IpAddr)>> {
        let mut peers = Vec::new();
        for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
            self.sequence = self.sequence.wrapping_add(1);
            self.socket.send(&dump_request(family, self.sequence), 0)?;
            'replies: loop {
                let received = self.socket.recv(&mut &mut self.buffer[..], 0)?;
                let mut rest = &self.buffer[..received.min(self.buffer.len())];
                while rest.len() >= 16 {
                    let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
                    let kind = u16::from_ne_bytes(rest[4..6].try_into().expect("2 bytes"));
                    if len < 16 || len > rest.len() {
                        break;
                    }
                    match kind {
                        NLMSG_DONE | NLMSG_ERROR => break 'replies,
                        SOCK_DIAG_BY_FAMILY => peers.extend(bgp_peer(&rest[16..len])),
                        _ => {}
                    }
                    rest = &rest[(len + 3) & !3..];
                }
            }
        }
        peers.sort_unstable();
        peers.dedup();
        Ok(peers)
    }
}

/// A dump of `family`'s TCP sockets in connection states: `nlmsghdr` and `inet_diag_req_v2`.
fn dump_request(family: u8, sequence: u32) -> Vec<u8> {
    let mut request = Vec::with_capacity(72);
    request.extend_from_slice(&72u32.to_ne_bytes());
    request.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    request.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request.extend_from_slice(&sequence.to_ne_bytes());
    request.extend_from_slice(&0u32.to_ne_bytes());
    request.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    request.extend_from_slice(&CONNECTION_STATES.to_ne_bytes());
    // The socket id to match: none (a dump).
    request.resize(72, 0);
    request
}

/// The remote end of the connection `message` (an `inet_diag_msg`) describes, if it is BGP's.
fn bgp_peer(message: &[u8]) -> Option<(u32, IpAddr)> {
    if message.len() < DIAG_MSG_LEN {
        return None;
    }
    let family = message[0];
    let (local_port, remote_port) =
        (u16::from_be_bytes([message[4], message[5]]), u16::from_be_bytes([message[6], message[7]]));
    if local_port != BGP_PORT && remote_port != BGP_PORT {
        return None;
    }
    let remote = &message[24..40];
    let interface = u32::from_ne_bytes(message[40..44].try_into().expect("4 bytes"));
    let address = if family == libc::AF_INET as u8 {
        IpAddr::V4(Ipv4Addr::new(remote[0], remote[1], remote[2], remote[3]))
    } else {
        let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(remote).expect("16 bytes"));
        // An IPv4 peer of a dual-stack socket (bgpd listens on ::).
        v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
    };
    let link_local = matches!(address, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
    Some((if link_local { interface } else { 0 }, address))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `inet_diag_msg` as the kernel writes it, for the connection between `local` and
    /// `remote` on `interface`.
    fn message(family: u8, local: (u16, &[u8]), remote: (u16, &[u8]), interface: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; DIAG_MSG_LEN];
        bytes[0] = family;
        bytes[1] = 1; // ESTABLISHED
        bytes[4..6].copy_from_slice(&local.0.to_be_bytes());
        bytes[6..8].copy_from_slice(&remote.0.to_be_bytes());
        bytes[8..8 + local.1.len()].copy_from_slice(local.1);
        bytes[24..24 + remote.1.len()].copy_from_slice(remote.1);
        bytes[40..44].copy_from_slice(&interface.to_ne_bytes());
        bytes
    }

    #[test]
    fn bgp_connections_give_their_peers_and_nothing_else_does() {
        let v4 = libc::AF_INET as u8;
        let v6 = libc::AF_INET6 as u8;
        // The leaf connected out to the spine, and the spine in to the leaf.
        let out = message(v4, (40000, &[10, 255, 0, 0]), (179, &[10, 255, 0, 1]), 0);
        assert_eq!(bgp_peer(&out), Some((0, "10.255.0.1".parse().unwrap())));
        let mapped: Ipv6Addr = "::ffff:10.255.0.3".parse().unwrap();
        let inbound = message(v6, (179, &[0; 16]), (51000, &mapped.octets()), 0);
        assert_eq!(bgp_peer(&inbound), Some((0, "10.255.0.3".parse().unwrap())), "IPv4 on a dual-stack socket");
        let link_local: Ipv6Addr = "fe80::1".parse().unwrap();
        let unnumbered = message(v6, (179, &[0; 16]), (52000, &link_local.octets()), 7);
        assert_eq!(bgp_peer(&unnumbered), Some((7, IpAddr::V6(link_local))), "with its interface");
        let global: Ipv6Addr = "fd00:255::1".parse().unwrap();
        assert_eq!(
            bgp_peer(&message(v6, (179, &[0; 16]), (52000, &global.octets()), 7)),
            Some((0, IpAddr::V6(global)))
        );
        assert_eq!(bgp_peer(&message(v4, (22, &[10, 0, 0, 1]), (50000, &[10, 0, 0, 2]), 0)), None, "SSH");
        assert_eq!(bgp_peer(&out[..DIAG_MSG_LEN - 1]), None, "short");
    }

    #[test]
    fn dump_requests_ask_for_tcp_connections_of_a_family() {
        let request = dump_request(libc::AF_INET6 as u8, 9);
        assert_eq!(request.len(), 72);
        assert_eq!(u32::from_ne_bytes(request[0..4].try_into().unwrap()), 72);
        assert_eq!(u16::from_ne_bytes(request[4..6].try_into().unwrap()), SOCK_DIAG_BY_FAMILY);
        assert_eq!(request[16..18], [libc::AF_INET6 as u8, libc::IPPROTO_TCP as u8]);
        let states = u32::from_ne_bytes(request[20..24].try_into().unwrap());
        assert_eq!(states & (1 << 10), 0, "not listening sockets");
        assert_ne!(states & (1 << 2), 0, "a connection being made");
    }

    /// Against the real kernel (of the namespace the tests run in): a TCP connection to a
    /// listener on 179 shows both ends as peers.
    #[test]
    fn a_connection_on_port_179_is_read_back() {
        let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:179") else {
            // Port 179 taken, or no right to bind below 1024: nothing to read here.
            return;
        };
        let _client = std::net::TcpStream::connect("127.0.0.1:179").unwrap();
        let _server = listener.accept().unwrap();
        let peers = BgpPeers::open().unwrap().read().unwrap();
        assert!(peers.contains(&(0, "127.0.0.1".parse().unwrap())), "{peers:?}");
    }
}
