//! ACL tables end to end, in replay: an ingress table on h1 that drops by source and port,
//! remarks and moves a port range to TC1, and drops TCP SYNs; an egress table on h0 that drops
//! one IPv6 source. Every frame out is the exact bytes a router makes, with the remarked
//! frame's DSCP and IPv4 checksum computed apart from the switch; each rule counts what it
//! matched, and each dropped frame counts once under `acl` on its ingress port.

use crate::util::*;
use raceway_core::traffic::frames::{FrameSpec, Transport};

const TABLES: &str = "[[acl]]\nname = \"edge\"\nports = [\"h1\"]\n\
    [[acl.rule]]\npriority = 30\nsrc = \"10.0.1.9/32\"\nprotocol = \"udp\"\ndst_port = 9000\naction = \"drop\"\n\
    [[acl.rule]]\npriority = 20\nprotocol = \"udp\"\ndst_port = \"9000-9010\"\naction = { dscp = 10, tc = 1 }\n\
    [[acl.rule]]\npriority = 10\nprotocol = \"tcp\"\ntcp_flags = \"0x02/0x12\"\naction = \"drop\"\n\
    [[acl]]\nname = \"out\"\nports = [\"h0\"]\nstage = \"egress\"\n\
    [[acl.rule]]\npriority = 5\nsrc = \"2001:db8:1::/64\"\naction = \"drop\"\n";

fn frame(source: &str, destination: &str, transport: Transport, tcp_flags: Option<u8>) -> Vec<u8> {
    let mut spec = FrameSpec::rocev2(source.parse().unwrap(), destination.parse().unwrap(), 1);
    spec.dscp = 0;
    spec.transport = transport;
    let mut bytes = spec.build();
    if let Some(flags) = tcp_flags {
        let l4 = l3_offset(&bytes) + if bytes[l3_offset(&bytes)] >> 4 == 4 { 20 } else { 40 };
        bytes[l4 + 13] = flags;
    }
    bytes
}

fn udp(source: &str, destination: &str, port: u16) -> Vec<u8> {
    frame(source, destination, Transport::Udp { source: 50000, destination: port }, None)
}

fn tcp(source: &str, flags: u8) -> Vec<u8> {
    frame(source, "10.0.0.2", Transport::Tcp { source: 40000, destination: 179 }, Some(flags))
}

#[test]
fn ingress_and_egress_tables_drop_remark_and_move_what_their_rules_say() {
    // (frame, from h1, what the rules make of it: None dropped, Some(dscp) remarked).
    let cases: Vec<(Vec<u8>, bool, Option<Option<u8>>)> = vec![
        (udp("10.0.1.9", "10.0.0.2", 9000), true, None),
        (udp("10.0.1.8", "10.0.0.2", 9000), true, Some(Some(10))),
        (udp("10.0.1.8", "10.0.0.2", 9010), true, Some(Some(10))),
        (udp("10.0.1.8", "10.0.0.2", 9011), true, Some(None)),
        (tcp("10.0.1.8", 0x02), true, None),
        (tcp("10.0.1.8", 0x12), true, Some(None)),
        (udp("2001:db8:1::9", "2001:db8::2", 9011), true, None),
        (udp("2001:db8:2::9", "2001:db8::2", 9011), false, Some(None)),
        // h2 has no ingress table: the port h1 would drop passes.
        (udp("10.0.2.9", "10.0.0.2", 9000), false, Some(None)),
    ];
    // A microsecond apart: nothing queues, so frames leave in the order they came.
    let (mut h1, mut h2) = (Vec::new(), Vec::new());
    for (index, (bytes, from_h1, _)) in cases.iter().enumerate() {
        let record = (index as u64 * 1000, bytes.clone());
        if *from_h1 {
            h1.push(record)
        } else {
            h2.push(record)
        }
    }
    let config = leaf(3, "", "", "3") + TABLES;
    let out = replay_fresh("acl-replay", &config, &[("h1", &h1), ("h2", &h2)], &[]);
    let expected: Vec<Vec<u8>> = cases
        .iter()
        .filter_map(|(bytes, _, fate)| {
            let remark = (*fate)?;
            let mut routed = routed(bytes, SWITCH_MAC, PEER_MACS[0]);
            if let Some(dscp) = remark {
                let l3 = l3_offset(&routed);
                routed[l3 + 1] = dscp << 2 | (routed[l3 + 1] & 0x03);
                fix_ipv4_checksum(&mut routed[l3..]);
            }
            Some(routed)
        })
        .collect();
    let outputs: Vec<Vec<u8>> = read_pcap(&out.join("h0.pcap")).into_iter().map(|(_, bytes)| bytes).collect();
    assert_eq!(outputs, expected);
    let stats = stats(&out);
    assert_eq!(stats["ports"]["h1"]["drops"]["acl"], 3, "two by the edge table, one by the egress table");
    assert_eq!(stats["ports"]["h2"]["drops"]["acl"], 0);
    assert_eq!(stats["ports"]["h0"]["queues"][1]["tx_packets"], 2, "the remarked frames moved to TC1");
    let rules = |table: &str| -> Vec<(u64, u64)> {
        let rules = stats["acl"][table]["rules"].as_array().unwrap();
        rules.iter().map(|rule| (rule["priority"].as_u64().unwrap(), rule["packets"].as_u64().unwrap())).collect()
    };
    assert_eq!(rules("edge"), [(30, 1), (20, 2), (10, 1)]);
    assert_eq!(rules("out"), [(5, 1)]);
    assert_eq!(stats["acl"]["out"]["stage"], "egress");
    let matched = &stats["acl"]["edge"]["rules"][1];
    assert_eq!(matched["bytes"].as_u64().unwrap(), (cases[1].0.len() + cases[2].0.len()) as u64);
    assert_eq!(
        (matched["match"].as_str().unwrap(), matched["action"].as_str().unwrap()),
        ("udp dport 9000-9010", "set dscp=10 tc=1")
    );
}

#[test]
fn a_table_with_no_rules_permits_everything() {
    let config = leaf(2, "", "", "3") + "[[acl]]\nname = \"empty\"\nports = [\"h1\"]\n";
    let input = vec![(0, udp("10.0.1.9", "10.0.0.2", 9000))];
    let out = replay_fresh("acl-empty", &config, &[("h1", &input)], &[]);
    assert_eq!(read_pcap(&out.join("h0.pcap")).len(), 1);
    assert_eq!(stats(&out)["acl"]["empty"]["rules"], serde_json::json!([]));
}
