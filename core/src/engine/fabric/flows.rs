//! Workloads as researchers bring them: a flow file (the HPCC simulator's `flow.txt`), and
//! Poisson flow arrivals at a load factor with sizes drawn from a size distribution file
//! (the HPCC simulator's CDF format; `config/fabric/cdf/` ships the web search and Hadoop
//! distributions, their sources named in each file).
//!
//! Flow file: a first line with the number of flows, then one flow per line,
//! `<source host> <destination host> <priority> <destination port> <bytes> <start seconds>`,
//! as HPCC's `traffic_gen.py` writes it. Hosts are numbered as the fabric lists them (leaf
//! by leaf for a generated leaf-spine); the priority and port are read and ignored (every
//! flow is RoCE data in the data class, on a queue pair of its own). Lines starting with `#`
//! and blank lines are skipped. As HPCC's simulator reads it, the first line's count is the
//! workload: the flows after that many are not read (HPCC's own example declares 2, lists
//! 256 and ends with help text), and the caller says how many lines were left.
//!
//! HPCC topology file (`--hpcc-topology`, HPCC's `topology.txt`): `<nodes> <switches>
//! <links>`, then the switches' node numbers, then one link per line, `<node> <node> <rate>
//! <delay> <error rate>`. HPCC numbers hosts and switches among one set of nodes, and a flow
//! file made for a topology names hosts by node. With the topology given, the flow file's
//! node numbers map to the fabric's hosts in order (the topology's lowest host node is host
//! 0), and the mapping is refused unless the topology has as many hosts as the fabric and
//! the hosts under each of its top-of-rack switches are the hosts of one of the fabric's
//! leaves, in order, with each rack the same size as its leaf. Only the hosts and their
//! racks are read from it: links beyond the racks, their rates and delays are the fabric
//! file's.
//!
//! CDF file: one point per line, `<bytes> <percent of flows no larger>`, both increasing, the
//! last at 100; sizes between points are linear, as HPCC's generator draws them.
//!
//! Invariant: flows are sorted by start time (then by their order in the file), every host
//! number is below the fabric's host count, a flow never goes from a host to itself, and
//! every flow has at least one byte.

use crate::error::InputError;
use crate::rng::Rng;
use std::path::Path;

/// One flow: `bytes` from `sender` to `receiver`, starting at `start_ps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub start_ps: u64,
    pub sender: usize,
    pub receiver: usize,
    pub bytes: u64,
}

/// A flow file as read: its flows, the lines after the declared count that were not read,
/// and the file's digest (`digest::hex`), which results name it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFile {
    pub flows: Vec<Flow>,
    pub lines_not_read: usize,
    pub digest: String,
}

/// Reads a flow file for a fabric of `hosts` hosts, its host numbers HPCC's nodes when
/// `nodes` maps them (`HpccTopology::hosts_of`).
pub fn read_flow_file(path: &Path, hosts: usize, nodes: Option<&NodeHosts>) -> Result<FlowFile, InputError> {
    let (file, text) = read_text(path)?;
    parse_flow_file_of(&text, &file, hosts, nodes)
}

/// A workload file's name (for its errors) and text; one error line when it cannot be read.
pub fn read_text(path: &Path) -> Result<(String, String), InputError> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|err| InputError::new(&file, "", format!("cannot read: {err}")))?;
    Ok((file, text))
}

/// HPCC's node numbers of a topology's hosts, each to the fabric's host it is.
pub type NodeHosts = hashbrown::HashMap<usize, usize>;

/// An HPCC topology's hosts: each host node's number and the switch it hangs off (its rack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HpccTopology {
    /// (host node, its top-of-rack switch node), by host node.
    pub hosts: Vec<(usize, usize)>,
}

impl HpccTopology {
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let (file, text) = read_text(path)?;
        Self::parse(&text, &file)
    }

    pub fn parse(text: &str, file: &str) -> Result<Self, InputError> {
        let mut lines = text.lines().enumerate().map(|(i, line)| (i + 1, line.trim())).filter(|(_, l)| !l.is_empty());
        let numbers = |number: usize, line: &str, what: &str| -> Result<Vec<usize>, InputError> {
            line.split_whitespace()
                .map(|word| word.parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| InputError::new(file, format!("line {number}"), format!("{what} are whole numbers")))
        };
        let (first, head) = lines
            .next()
            .ok_or_else(|| InputError::new(file, "", "empty: the first line is nodes, switches and links"))?;
        let [nodes, switch_count, links] = numbers(first, head, "nodes, switches and links")?[..] else {
            return Err(InputError::new(file, format!("line {first}"), "the first line is: nodes switches links"));
        };
        let (second, listed) = lines.next().unwrap_or((first + 1, ""));
        let switches: hashbrown::HashSet<usize> = numbers(second, listed, "the switches' nodes")?.into_iter().collect();
        if switches.len() != switch_count || switches.iter().any(|&node| node >= nodes) {
            return Err(InputError::new(
                file,
                format!("line {second}"),
                format!(
                    "{switch_count} distinct switch nodes below {nodes}, not {}",
                    listed.split_whitespace().count()
                ),
            ));
        }
        let mut rack: Vec<Option<usize>> = vec![None; nodes];
        let mut seen = 0;
        for (number, line) in lines.take(links) {
            seen += 1;
            let words: Vec<&str> = line.split_whitespace().collect();
            let ends = words.get(..2).map(|ends| (ends[0].parse::<usize>(), ends[1].parse::<usize>()));
            let (Some((Ok(a), Ok(b))), 5) = (ends, words.len()) else {
                return Err(InputError::new(
                    file,
                    format!("line {number}"),
                    "a link is: node node rate delay error_rate",
                ));
            };
            if a >= nodes || b >= nodes {
                return Err(InputError::new(file, format!("line {number}"), format!("a node is below {nodes}")));
            }
            for (host, switch) in [(a, b), (b, a)] {
                if !switches.contains(&host) && switches.contains(&switch) {
                    if rack[host].is_some_and(|known| known != switch) {
                        return Err(InputError::new(
                            file,
                            format!("line {number}"),
                            format!("host node {host} hangs off two switches: raceway's hosts have one link"),
                        ));
                    }
                    rack[host] = Some(switch);
                }
            }
        }
        if seen != links {
            return Err(InputError::new(file, "line 1", format!("says {links} links, the file has {seen}")));
        }
        let hosts: Vec<(usize, usize)> = (0..nodes)
            .filter(|node| !switches.contains(node))
            .map(|node| {
                rack[node]
                    .map(|switch| (node, switch))
                    .ok_or_else(|| InputError::new(file, "", format!("host node {node} has no link to a switch")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { hosts })
    }

    /// The fabric's host for each of the topology's host nodes, in order, when the racks are
    /// the fabric's leaves (`leaf_of` gives each fabric host's leaf; module notes).
    pub fn hosts_of(&self, leaf_of: &[usize], file: &str) -> Result<NodeHosts, InputError> {
        if self.hosts.len() != leaf_of.len() {
            return Err(InputError::new(
                file,
                "",
                format!(
                    "{} hosts, the fabric has {}: a flow file made for it would not fit",
                    self.hosts.len(),
                    leaf_of.len()
                ),
            ));
        }
        // Racks in the order their first host comes, and the fabric's leaves likewise.
        let runs = |keys: &mut dyn Iterator<Item = usize>| -> Vec<(usize, usize)> {
            let mut runs: Vec<(usize, usize)> = Vec::new();
            for key in keys {
                match runs.last_mut() {
                    Some((last, count)) if *last == key => *count += 1,
                    _ => runs.push((key, 1)),
                }
            }
            runs
        };
        let racks = runs(&mut self.hosts.iter().map(|&(_, rack)| rack));
        let leaves = runs(&mut leaf_of.iter().copied());
        let sizes = |runs: &[(usize, usize)]| runs.iter().map(|&(_, count)| count).collect::<Vec<_>>();
        let distinct =
            |runs: &[(usize, usize)]| runs.iter().map(|&(key, _)| key).collect::<hashbrown::HashSet<_>>().len();
        if sizes(&racks) != sizes(&leaves) || distinct(&racks) != racks.len() || distinct(&leaves) != leaves.len() {
            return Err(InputError::new(
                file,
                "",
                format!(
                    "its racks (hosts per top-of-rack switch, in node order: {:?}) are not the fabric's leaves ({:?})",
                    sizes(&racks),
                    sizes(&leaves)
                ),
            ));
        }
        Ok(self.hosts.iter().enumerate().map(|(host, &(node, _))| (node, host)).collect())
    }
}

/// Parses flow-file text (`file` names it in errors): the declared flows, sorted by start.
pub fn parse_flows(text: &str, file: &str, hosts: usize) -> Result<Vec<Flow>, InputError> {
    parse_flow_file(text, file, hosts).map(|read| read.flows)
}

/// Parses flow-file text (`file` names it in errors).
pub fn parse_flow_file(text: &str, file: &str, hosts: usize) -> Result<FlowFile, InputError> {
    parse_flow_file_of(text, file, hosts, None)
}

/// Parses flow-file text whose host numbers are HPCC's nodes when `nodes` maps them.
pub fn parse_flow_file_of(
    text: &str,
    file: &str,
    hosts: usize,
    nodes: Option<&NodeHosts>,
) -> Result<FlowFile, InputError> {
    let mut lines = meaningful(text);
    let Some((count_line, count_text)) = lines.next() else {
        return Err(InputError::new(file, "", "empty: the first line is the number of flows"));
    };
    let count: usize = count_text.parse().map_err(|_| {
        InputError::new(file, format!("line {count_line}"), format!("'{count_text}' is not a number of flows"))
    })?;
    let mut flows = Vec::with_capacity(count.min(1 << 20));
    for (number, line) in lines.by_ref().take(count) {
        let field = format!("line {number}");
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() != 6 {
            return Err(InputError::new(
                file,
                field,
                format!("{} fields; a flow is: source destination priority port bytes start_seconds", words.len()),
            ));
        }
        let number_line = number;
        let host = |word: &str, what: &str| -> Result<usize, InputError> {
            let number = word.parse::<usize>().ok();
            let found = match nodes {
                Some(nodes) => number.and_then(|node| nodes.get(&node).copied()),
                None => number.filter(|&h| h < hosts),
            };
            found.ok_or_else(|| {
                let problem = match nodes {
                    Some(_) => format!("{what} '{word}' is not a host node of the HPCC topology"),
                    None => format!("{what} '{word}' is not a host 0-{}", hosts.saturating_sub(1)),
                };
                InputError::new(file, format!("line {number_line}"), problem)
            })
        };
        let (sender, receiver) = (host(words[0], "source")?, host(words[1], "destination")?);
        if sender == receiver {
            return Err(InputError::new(file, field, format!("host {sender} sends to itself")));
        }
        let bytes: u64 =
            words[4].parse().ok().filter(|&b| b > 0).ok_or_else(|| {
                InputError::new(file, &field, format!("bytes '{}' is not a positive integer", words[4]))
            })?;
        let start: f64 = words[5]
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s < 1e3)
            .ok_or_else(|| InputError::new(file, &field, format!("start '{}' is not 0-1000 seconds", words[5])))?;
        flows.push(Flow { start_ps: (start * 1e12).round() as u64, sender, receiver, bytes });
    }
    if flows.len() != count {
        return Err(InputError::new(
            file,
            format!("line {count_line}"),
            format!("says {count} flows, the file has {}", flows.len()),
        ));
    }
    // Stable: flows starting together keep the file's order.
    flows.sort_by_key(|flow| flow.start_ps);
    Ok(FlowFile { flows, lines_not_read: lines.count(), digest: crate::digest::hex(text.as_bytes()) })
}

/// The lines that are not blank or `#` comments, with their 1-based numbers.
fn meaningful(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// A flow size distribution: (bytes, cumulative fraction) points.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeCdf {
    points: Vec<(f64, f64)>,
}

impl SizeCdf {
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let (file, text) = read_text(path)?;
        Self::parse(&text, &file)
    }

    pub fn parse(text: &str, file: &str) -> Result<Self, InputError> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (number, line) in meaningful(text) {
            let field = format!("line {number}");
            let words: Vec<f64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
            let [bytes, percent] = words[..] else {
                return Err(InputError::new(file, field, "a point is: bytes percent"));
            };
            let last = points.last().copied().unwrap_or((-1.0, -1.0));
            if !(bytes.is_finite() && percent.is_finite())
                || bytes < last.0
                || percent < last.1
                || !(0.0..=100.0).contains(&percent)
            {
                return Err(InputError::new(file, field, "bytes and percent must not decrease; percent is 0-100"));
            }
            points.push((bytes, percent / 100.0));
        }
        match points.last() {
            Some(&(bytes, fraction)) if fraction == 1.0 && bytes >= 1.0 => Ok(Self { points }),
            _ => Err(InputError::new(file, "", "the last point must be at 100 percent, of at least 1 byte")),
        }
    }

    /// The size at cumulative fraction `u` (0-1), linear between points, at least one byte.
    pub fn size_at(&self, u: f64) -> u64 {
        let mut previous = (0.0, 0.0);
        for &(bytes, fraction) in &self.points {
            if u <= fraction {
                let span = fraction - previous.1;
                let size =
                    if span <= 0.0 { bytes } else { previous.0 + (bytes - previous.0) * (u - previous.1) / span };
                return (size.round() as u64).max(1);
            }
            previous = (bytes, fraction);
        }
        (previous.0.round() as u64).max(1)
    }

    /// The mean size, integrated over the linear pieces.
    pub fn mean(&self) -> f64 {
        let mut previous = (0.0, 0.0);
        let mut mean = 0.0;
        for &(bytes, fraction) in &self.points {
            mean += (fraction - previous.1) * (bytes + previous.0) / 2.0;
            previous = (bytes, fraction);
        }
        mean
    }
}

/// Poisson arrivals: each of `hosts` hosts starts flows to a destination drawn uniformly
/// among the others, sizes drawn from `cdf`, with exponential gaps whose mean makes each
/// host's offered load `load` x `speed_mbps`, from 0 to `duration_ps`. Seeded: the same
/// arguments give the same flows.
pub fn poisson(hosts: usize, speed_mbps: u64, cdf: &SizeCdf, load: f64, duration_ps: u64, seed: u64) -> Vec<Flow> {
    let mut flows = Vec::new();
    if hosts < 2 || load <= 0.0 {
        return flows;
    }
    // Mean gap (ps) = mean bits / (load x rate in bits per ps).
    let mean_gap_ps = cdf.mean() * 8.0 / (load * speed_mbps as f64 * 1e-6);
    for sender in 0..hosts {
        let mut rng = Rng::new(crate::rng::stream_seed(seed, sender as u64));
        let mut at = 0.0;
        loop {
            at += -mean_gap_ps * (1.0 - rng.unit()).ln();
            if at >= duration_ps as f64 {
                break;
            }
            let other = rng.below((hosts - 1) as u64) as usize;
            let receiver = if other >= sender { other + 1 } else { other };
            flows.push(Flow { start_ps: at as u64, sender, receiver, bytes: cdf.size_at(rng.unit()) });
        }
    }
    flows.sort_by_key(|flow| (flow.start_ps, flow.sender));
    flows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hpcc_flow_file_reads_sorted_by_start() {
        let text = "3\n2 0 3 100 5000 0.000002\n# a comment\n0 1 3 100 64 0\n\n1 3 3 100 1000000 0.000001\n";
        let flows = parse_flows(text, "flow.txt", 4).unwrap();
        assert_eq!(
            flows,
            [
                Flow { start_ps: 0, sender: 0, receiver: 1, bytes: 64 },
                Flow { start_ps: 1_000_000, sender: 1, receiver: 3, bytes: 1_000_000 },
                Flow { start_ps: 2_000_000, sender: 2, receiver: 0, bytes: 5000 },
            ]
        );
    }

    /// HPCC's own `simulation/mix/flow.txt` in its shape: it declares 2 flows, lists more
    /// (256 in the original; three here), then ends with help text; its flows start at 2 s.
    #[test]
    fn a_flow_file_is_its_declared_flows_and_the_rest_is_not_read() {
        let text = "2\n2 1 3 100 200000000 2\n3 1 3 100 200000000 2\n4 1 3 100 150000000 2\n\
                    5 1 3 100 5000000 2\n\nFirst line: # of flows\nsrc0 dst0 3 dst_port0 size0 start_time0\n\
                    ...\n\nPlease order the flows in ascending start_time!\n";
        let read = parse_flow_file(text, "flow.txt", 6).unwrap();
        let at_2s = 2_000_000_000_000;
        assert_eq!(
            read.flows,
            [
                Flow { start_ps: at_2s, sender: 2, receiver: 1, bytes: 200_000_000 },
                Flow { start_ps: at_2s, sender: 3, receiver: 1, bytes: 200_000_000 },
            ]
        );
        assert_eq!(read.lines_not_read, 6, "two flows, three lines of help text and '...'");
        assert_eq!(read.digest, crate::digest::hex(text.as_bytes()));
        let exact = parse_flow_file("1\n0 1 3 100 64 0\n", "flow.txt", 2).unwrap();
        assert_eq!(exact.lines_not_read, 0);
    }

    /// HPCC's `mix/fat.txt` in small: 8 hosts in two racks (ToRs 8 and 9) and two spines,
    /// in its own format (rates and delays read and left to the fabric file).
    const HPCC_TOPOLOGY: &str = "12 4 12\n8 9 10 11\n0 8 100Gbps 1000ns 0.000000\n1 8 100Gbps 1000ns 0.000000\n\
        2 8 100Gbps 1000ns 0.000000\n3 8 100Gbps 1000ns 0.000000\n4 9 100Gbps 1000ns 0.000000\n\
        5 9 100Gbps 1000ns 0.000000\n6 9 100Gbps 1000ns 0.000000\n7 9 100Gbps 1000ns 0.000000\n\
        8 10 400Gbps 1000ns 0.000000\n8 11 400Gbps 1000ns 0.000000\n9 10 400Gbps 1000ns 0.000000\n\
        9 11 400Gbps 1000ns 0.000000\n\n";

    #[test]
    fn an_hpcc_topology_maps_its_host_nodes_to_the_fabrics_hosts_rack_by_leaf() {
        let topology = HpccTopology::parse(HPCC_TOPOLOGY, "topology.txt").unwrap();
        assert_eq!(topology.hosts, (0..8).map(|node| (node, if node < 4 { 8 } else { 9 })).collect::<Vec<_>>());
        let two_leaves = [0, 0, 0, 0, 1, 1, 1, 1];
        let nodes = topology.hosts_of(&two_leaves, "topology.txt").unwrap();
        assert_eq!((nodes[&0], nodes[&5], nodes.len()), (0, 5, 8));
        // A flow file for it names host nodes; switches are no hosts.
        let flows = parse_flow_file_of("1\n5 1 3 100 1000 2\n", "flow.txt", 8, Some(&nodes)).unwrap();
        assert_eq!((flows.flows[0].sender, flows.flows[0].receiver), (5, 1));
        let err = parse_flow_file_of("1\n8 1 3 100 1000 2\n", "flow.txt", 8, Some(&nodes)).unwrap_err().to_string();
        assert!(err.contains("line 2: source '8' is not a host node of the HPCC topology"), "{err}");
        // Switches numbered first: the hosts are nodes 4-11, in order.
        let renumbered = "12 4 10\n0 1 2 3\n4 0 1 1 0\n5 0 1 1 0\n6 0 1 1 0\n7 0 1 1 0\n8 1 1 1 0\n9 1 1 1 0\n\
                          10 1 1 1 0\n11 1 1 1 0\n0 2 1 1 0\n1 3 1 1 0\n";
        let nodes = HpccTopology::parse(renumbered, "t.txt").unwrap().hosts_of(&two_leaves, "t.txt").unwrap();
        assert_eq!((nodes[&4], nodes[&11]), (0, 7));
    }

    #[test]
    fn an_hpcc_topology_that_is_not_the_fabric_is_refused_in_one_line() {
        let topology = HpccTopology::parse(HPCC_TOPOLOGY, "topology.txt").unwrap();
        let err = topology.hosts_of(&[0, 0, 1, 1, 1, 1, 1, 1], "topology.txt").unwrap_err().to_string();
        assert!(
            err.contains(
                "racks (hosts per top-of-rack switch, in node order: [4, 4]) are not the fabric's leaves ([2, 6])"
            ),
            "{err}"
        );
        let err = topology.hosts_of(&[0, 0, 1, 1], "topology.txt").unwrap_err().to_string();
        assert!(err.contains("8 hosts, the fabric has 4"), "{err}");
        let interleaved = "6 2 4\n4 5\n0 4 1 1 0\n1 5 1 1 0\n2 4 1 1 0\n3 5 1 1 0\n";
        let err = HpccTopology::parse(interleaved, "t.txt").unwrap().hosts_of(&[0, 0, 1, 1], "t.txt").unwrap_err();
        assert!(err.to_string().contains("[1, 1, 1, 1]"), "racks that alternate are not leaves: {err}");
        // The same sizes, a rack met twice: not one leaf each.
        let err = HpccTopology::parse(interleaved, "t.txt").unwrap().hosts_of(&[0, 1, 2, 3], "t.txt").unwrap_err();
        assert!(err.to_string().contains("are not the fabric's leaves"), "a rack in two runs: {err}");
        for (text, expected) in [
            ("", "empty"),
            ("4 1\n3\n", "line 1: the first line is: nodes switches links"),
            ("4 2 1\n3\n0 3 1 1 0\n", "line 2: 2 distinct switch nodes below 4"),
            ("4 1 2\n3\n0 3 1 1 0\n", "says 2 links, the file has 1"),
            ("4 1 1\n3\n0 3 1 1\n", "line 3: a link is: node node rate delay error_rate"),
            ("4 1 0\n", "line 2: 1 distinct switch nodes below 4"),
            ("4 1 1\n3\n0 9 1 1 0\n", "line 3: a node is below 4"),
            ("3 1 2\n2\n0 2 1 1 0\n1 2 1 1 0\n", ""),
            ("3 1 1\n2\n0 2 1 1 0\n", "host node 1 has no link to a switch"),
            ("4 2 2\n2 3\n0 2 1 1 0\n0 3 1 1 0\n", "host node 0 hangs off two switches"),
        ] {
            match HpccTopology::parse(text, "t.txt") {
                Ok(_) => assert!(expected.is_empty(), "{text:?} should fail: {expected}"),
                Err(err) => assert!(!expected.is_empty() && err.to_string().contains(expected), "{text:?}: {err}"),
            }
        }
    }

    #[test]
    fn a_flow_files_mistakes_name_their_line() {
        let cases = [
            ("", "empty"),
            ("x\n", "line 1: 'x' is not a number of flows"),
            ("1\n0 1 3 100 64\n", "line 2: 5 fields"),
            ("1\n0 4 3 100 64 0\n", "line 2: destination '4' is not a host 0-3"),
            ("1\n2 2 3 100 64 0\n", "line 2: host 2 sends to itself"),
            ("1\n0 1 3 100 0 0\n", "line 2: bytes '0' is not a positive integer"),
            ("1\n0 1 3 100 64 -1\n", "line 2: start '-1' is not 0-1000 seconds"),
            ("1\n0 1 3 100 64 1000\n", "line 2: start '1000' is not 0-1000 seconds"),
            ("2\n0 1 3 100 64 0\n", "line 1: says 2 flows, the file has 1"),
            ("# HPCC\n2\n0 1 3 100 64 0\n", "line 2: says 2 flows, the file has 1"),
        ];
        for (text, expected) in cases {
            let err = parse_flows(text, "flow.txt", 4).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_shipped_distributions_read_and_draw_within_their_points() {
        for name in ["websearch", "hadoop"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../config/fabric/cdf/{name}.txt"));
            let cdf = SizeCdf::load(&path).unwrap();
            assert!(cdf.mean() > 1000.0, "{name}");
            assert_eq!(cdf.size_at(1.0), cdf.points.last().unwrap().0 as u64);
        }
        let cdf = SizeCdf::parse("0 0\n100 50\n300 100\n", "c.txt").unwrap();
        assert_eq!((cdf.size_at(0.25), cdf.size_at(0.5), cdf.size_at(0.75)), (50, 100, 200));
        assert_eq!(cdf.mean(), 0.5 * 50.0 + 0.5 * 200.0);
        assert!(SizeCdf::parse("0 0\n100 90\n", "c.txt").is_err(), "must reach 100");
        assert!(SizeCdf::parse("0 0\n100 60\n50 100\n", "c.txt").unwrap_err().to_string().contains("line 3"));
    }

    #[test]
    fn poisson_arrivals_offer_the_load_and_repeat_with_the_seed() {
        let cdf = SizeCdf::parse("0 0\n1000 50\n3000 100\n", "c.txt").unwrap();
        let duration_ps = 10_000_000_000; // 10 ms
        let flows = poisson(8, 100_000, &cdf, 0.5, duration_ps, 7);
        assert_eq!(flows, poisson(8, 100_000, &cdf, 0.5, duration_ps, 7));
        assert!(flows.windows(2).all(|w| w[0].start_ps <= w[1].start_ps));
        assert!(flows.iter().all(|f| f.sender != f.receiver && f.receiver < 8 && f.start_ps < duration_ps));
        // Offered: 8 hosts x 50 Gb/s x 10 ms = 500 MB; Poisson counts spread by ~1/sqrt(n).
        let offered: u64 = flows.iter().map(|f| f.bytes).sum();
        let expected = 8.0 * 50e9 / 8.0 * 0.01;
        assert!((offered as f64 / expected - 1.0).abs() < 0.05, "{offered} vs {expected}");
    }
}
