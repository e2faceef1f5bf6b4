//! `raceway blast --answer-arp PREFIX`: the hosts behind a blast port answer ARP, as real
//! hosts do, so a switch in front of them resolves its neighbours the way it does in a
//! network (its kernel asks, a gleaned frame waiting) instead of by entries a test wrote.
//! Each address in the prefix is a host of its own, with the locally administered MAC
//! 02:00 followed by the address's four bytes.
//!
//! Invariant: only an Ethernet/IPv4 ARP request (untagged, hardware type 1, lengths 6 and 4)
//! whose target lies in the prefix is answered, with one reply to the asker's MAC; every
//! other frame gets none. IPv6 neighbour discovery is not answered.

use crate::config::Prefix;
use std::net::{IpAddr, Ipv4Addr};

const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
/// Hardware type Ethernet, protocol IPv4, lengths 6 and 4: the fixed part every request has.
const ETHERNET_IPV4: [u8; 6] = [0x00, 0x01, 0x08, 0x00, 6, 4];
const REQUEST: [u8; 2] = [0x00, 0x01];
const REPLY: [u8; 2] = [0x00, 0x02];
/// Ethernet's shortest frame without FCS: a reply is padded to it (42 bytes of ARP).
pub const REPLY_LEN: usize = 60;

/// The hosts that answer (module notes).
#[derive(Debug, Clone, Copy)]
pub struct ArpAnswerer {
    hosts: Prefix,
}

/// The MAC of the host with `address` (module notes).
pub fn host_mac(address: Ipv4Addr) -> [u8; 6] {
    let [a, b, c, d] = address.octets();
    [0x02, 0x00, a, b, c, d]
}

impl ArpAnswerer {
    /// Hosts for the addresses of `hosts`, an IPv4 prefix.
    pub fn new(hosts: Prefix) -> Option<Self> {
        hosts.address.is_ipv4().then_some(Self { hosts })
    }

    /// The reply to `frame` when it is an ARP request for one of the hosts (module notes).
    pub fn reply(&self, frame: &[u8]) -> Option<[u8; REPLY_LEN]> {
        let arp = frame.get(14..42)?;
        if frame[12..14] != ETHERTYPE_ARP || arp[0..6] != ETHERNET_IPV4 || arp[6..8] != REQUEST {
            return None;
        }
        let (asker_mac, asker_ip, target_ip) = (&arp[8..14], &arp[14..18], &arp[24..28]);
        let target = Ipv4Addr::new(target_ip[0], target_ip[1], target_ip[2], target_ip[3]);
        if !self.hosts.contains(IpAddr::V4(target)) {
            return None;
        }
        let mac = host_mac(target);
        let mut reply = [0u8; REPLY_LEN];
        reply[0..6].copy_from_slice(asker_mac);
        reply[6..12].copy_from_slice(&mac);
        reply[12..14].copy_from_slice(&ETHERTYPE_ARP);
        reply[14..20].copy_from_slice(&ETHERNET_IPV4);
        reply[20..22].copy_from_slice(&REPLY);
        reply[22..28].copy_from_slice(&mac);
        reply[28..32].copy_from_slice(target_ip);
        reply[32..38].copy_from_slice(asker_mac);
        reply[38..42].copy_from_slice(asker_ip);
        Some(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as Linux sends it: from 02:00:00:00:00:01 (10.0.2.254) for `target`,
    /// broadcast, padded to 60 bytes by the NIC.
    fn request(target: [u8; 4]) -> Vec<u8> {
        let mut frame = vec![0xff; 6];
        frame.extend([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
        frame.extend(ETHERTYPE_ARP);
        frame.extend([0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01]);
        frame.extend([0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0, 2, 254]);
        frame.extend([0x00; 6]);
        frame.extend(target);
        frame.resize(60, 0);
        frame
    }

    fn hosts() -> ArpAnswerer {
        ArpAnswerer::new(Prefix::parse("10.0.2.0/24").unwrap()).unwrap()
    }

    #[test]
    fn a_request_for_a_host_gets_its_reply_to_the_asker() {
        let reply = hosts().reply(&request([10, 0, 2, 7])).expect("answered");
        let expected: [u8; 60] = {
            let mut bytes = [0u8; 60];
            let head: [u8; 42] = [
                0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // to the asker
                0x02, 0x00, 10, 0, 2, 7, // from the host
                0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, // an Ethernet/IPv4 reply
                0x02, 0x00, 10, 0, 2, 7, 10, 0, 2, 7, // sender: the host
                0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0, 2, 254, // target: the asker
            ];
            bytes[..42].copy_from_slice(&head);
            bytes
        };
        assert_eq!(reply, expected);
    }

    #[test]
    fn only_requests_for_the_prefix_in_ethernet_ipv4_are_answered() {
        let answerer = hosts();
        assert!(answerer.reply(&request([10, 0, 3, 7])).is_none(), "outside the prefix");
        assert!(answerer.reply(&request([10, 0, 2, 0])).is_some(), "the prefix's first address");
        assert!(answerer.reply(&request([10, 0, 2, 255])).is_some(), "and its last");
        let mut reply = request([10, 0, 2, 7]);
        reply[21] = 2;
        assert!(answerer.reply(&reply).is_none(), "a reply is not answered");
        for (byte, value) in
            [(12, 0x86), (13, 0x00), (14, 0x01), (15, 0x06), (16, 0x86), (17, 0xdd), (18, 16), (19, 16), (20, 0x01)]
        {
            let mut other = request([10, 0, 2, 7]);
            other[byte] = value;
            assert!(answerer.reply(&other).is_none(), "byte {byte} = {value:#x}");
        }
        assert!(answerer.reply(&request([10, 0, 2, 7])[..41]).is_none(), "cut short");
        assert!(answerer.reply(&request([10, 0, 2, 7])[..42]).is_some(), "unpadded");
        assert!(ArpAnswerer::new(Prefix::parse("2001:db8::/64").unwrap()).is_none(), "IPv4 only");
    }

    #[test]
    fn each_host_has_its_own_mac() {
        assert_eq!(host_mac(Ipv4Addr::new(10, 0, 2, 7)), [0x02, 0x00, 10, 0, 2, 7]);
        assert_ne!(host_mac(Ipv4Addr::new(10, 0, 2, 7)), host_mac(Ipv4Addr::new(10, 0, 2, 8)));
    }
}
