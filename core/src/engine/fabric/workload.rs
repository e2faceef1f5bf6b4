//! Workloads as messages between hosts: the collectives (N:1 incast, all-to-all and ring
//! all-reduce, with a message size and a count) and listed flows (a flow file or Poisson
//! arrivals, `flows`), each flow a message on a queue pair of its own, from its start time. A message may wait for another to be received first (a
//! ring all-reduce step waits for the previous step's chunk from the left neighbour), which
//! is how a collective's completion time comes out of the network's behaviour.
//!
//! Invariant: message ids index `messages`; a message's `after` names an earlier message, so
//! the dependencies form a forest and every message is released once its parent completes.

/// Which collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    /// Every host but `target` sends `messages` messages to `target`.
    Incast { target: usize },
    /// Every host sends `messages` messages to every other host, a queue pair per destination.
    AllToAll,
    /// Ring all-reduce of a `message_bytes` buffer, `messages` times in a row: 2 x (N - 1) steps
    /// of message_bytes / N to the next host in the ring, each step after the previous step's
    /// chunk arrived from the previous host. The ring alternates leaves, so every hop crosses
    /// the spines when there are several leaves. When servers have several NICs (`rails`, or
    /// `server_nics`) there is a ring per NIC instead, over NIC r of each server in turn, and
    /// each reduces 1 / NICs of the buffer (as NCCL's rings leave each server by the NIC of
    /// their rail); the reduction inside a server, over its own links, is not simulated.
    AllReduce,
    /// The flows of a flow file or of Poisson arrivals (`flows`): each its own queue pair.
    Listed,
}

crate::keyword::keywords! {
    /// The workload a fabric run's `--workload` names.
    pub enum Workload {
        Incast => "incast",
        AllToAll => "alltoall",
        AllReduce => "allreduce",
        /// The flows of `--flow-file`.
        Flows => "flows",
        /// Poisson arrivals at `--load` with sizes from `--cdf`, for `--duration-us`.
        Poisson => "poisson",
    }
}

impl Collective {
    /// The collective of `workload`; `target` is the incast's receiver.
    pub fn of(workload: Workload, target: usize) -> Self {
        match workload {
            Workload::Incast => Self::Incast { target },
            Workload::AllToAll => Self::AllToAll,
            Workload::AllReduce => Self::AllReduce,
            Workload::Flows | Workload::Poisson => Self::Listed,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Incast { .. } => Workload::Incast.name(),
            Self::AllToAll => Workload::AllToAll.name(),
            Self::AllReduce => Workload::AllReduce.name(),
            Self::Listed => "flows",
        }
    }
}

use super::flows::{self, Flow};
use super::HostSpec;
use crate::error::InputError;
use std::path::PathBuf;

/// One message: `bytes` from `sender` to `receiver` on queue pair `qp`.
#[derive(Debug, Clone)]
pub struct Message {
    pub sender: usize,
    pub receiver: usize,
    pub qp: usize,
    pub bytes: u64,
    /// Released only once this message has been received.
    pub after: Option<usize>,
    /// Released at this time (ps), if it waits for no message.
    pub start_ps: u64,
}

/// A queue pair: one sender to one receiver.
#[derive(Debug, Clone)]
pub struct QueuePairSpec {
    pub sender: usize,
    pub receiver: usize,
}

/// How many messages `build` makes (saturating), to refuse a workload before building it.
pub fn count(collective: Collective, hosts: &[HostSpec], messages: u32, listed: &[Flow]) -> u64 {
    let messages = u64::from(messages);
    let others = (hosts.len() as u64).saturating_sub(1);
    let per_round = match collective {
        Collective::Incast { .. } => others,
        Collective::AllToAll => (hosts.len() as u64).saturating_mul(others),
        Collective::AllReduce => {
            rings(hosts).1.iter().map(|span| 2 * (span.len() as u64 - 1) * span.len() as u64).sum()
        }
        Collective::Listed => return listed.len() as u64,
    };
    per_round.saturating_mul(messages)
}

/// One piece of a workload, in the order `for_each` gives them: a queue pair just before
/// the first message on it, then messages. Queue pairs and messages are numbered from 0 in
/// that order.
#[derive(Debug, Clone)]
pub enum Item {
    QueuePair(QueuePairSpec),
    Message(Message),
}

/// The messages and queue pairs of a workload over the fabric's `hosts` (their leaves and
/// rails set the all-reduce's rings), into `sink` one at a time: a rank keeps only its
/// own, and nobody holds the whole list (an all-to-all of 4,096 hosts has 16.8 million
/// messages).
pub fn for_each(
    collective: Collective,
    hosts: &[HostSpec],
    message_bytes: u64,
    messages: u32,
    listed: &[Flow],
    sink: &mut dyn FnMut(Item),
) {
    let message = |sender, receiver, qp, bytes, after, start_ps| {
        Item::Message(Message { sender, receiver, qp, bytes, after, start_ps })
    };
    let queue_pair = |sender, receiver| Item::QueuePair(QueuePairSpec { sender, receiver });
    // Queue pairs are numbered in the order they first carry a message; each collective
    // below knows that number without a search.
    match collective {
        Collective::Incast { target } => {
            for (qp, sender) in (0..hosts.len()).filter(|&h| h != target).enumerate() {
                sink(queue_pair(sender, target));
                for _ in 0..messages {
                    sink(message(sender, target, qp, message_bytes, None, 0));
                }
            }
        }
        Collective::AllToAll => {
            let hosts = hosts.len();
            let others = hosts.saturating_sub(1);
            for round in 0..messages {
                for sender in 0..hosts {
                    for receiver in (0..hosts).filter(|&r| r != sender) {
                        if round == 0 {
                            sink(queue_pair(sender, receiver));
                        }
                        let qp = sender * others + receiver - usize::from(receiver > sender);
                        sink(message(sender, receiver, qp, message_bytes, None, 0));
                    }
                }
            }
        }
        Collective::AllReduce => {
            // Every ring's places, one after another: a place's number is its queue pair's.
            let (places, spans) = rings(hosts);
            let steps = spans.iter().map(|span| 2 * (span.len() - 1)).max().unwrap_or(0);
            let share = spans.len() as u64;
            // last[p]: the message place p sent in the previous step (the next place in its
            // ring waits for it before its own next step).
            let mut last: Vec<Option<usize>> = vec![None; places.len()];
            let mut made = 0;
            for iteration in 0..messages {
                for step in 0..steps {
                    let mut sent = vec![None; places.len()];
                    for span in spans.iter().filter(|span| step < 2 * (span.len() - 1)) {
                        let n = span.len();
                        let chunk = message_bytes.div_ceil(share * n as u64).max(1);
                        for position in 0..n {
                            let place = span.start + position;
                            let (sender, receiver) = (places[place], places[span.start + (position + 1) % n]);
                            if iteration == 0 && step == 0 {
                                sink(queue_pair(sender, receiver));
                            }
                            // Wait for the chunk the left neighbour sent in the previous step.
                            let after = last[span.start + (position + n - 1) % n];
                            sink(message(sender, receiver, place, chunk, after, 0));
                            sent[place] = Some(made);
                            made += 1;
                        }
                    }
                    last = sent;
                }
            }
        }
        Collective::Listed => {
            for (qp, flow) in listed.iter().enumerate() {
                sink(queue_pair(flow.sender, flow.receiver));
                sink(message(flow.sender, flow.receiver, qp, flow.bytes, None, flow.start_ps));
            }
        }
    }
}

/// The messages and queue pairs of a workload (`for_each`), as two lists.
pub fn build(
    collective: Collective,
    hosts: &[HostSpec],
    message_bytes: u64,
    messages: u32,
    listed: &[Flow],
) -> (Vec<QueuePairSpec>, Vec<Message>) {
    let (mut qps, mut list) = (Vec::new(), Vec::new());
    for_each(collective, hosts, message_bytes, messages, listed, &mut |item| match item {
        Item::QueuePair(qp) => qps.push(qp),
        Item::Message(message) => list.push(message),
    });
    (qps, list)
}

/// The all-reduce's rings as places, one ring after another, and each ring's span of them;
/// rings of one host (nothing to reduce with) are left out. When servers have several NICs,
/// a ring per NIC index over the servers in order (on rails, consecutive servers share the
/// rail's leaf, so most hops stay on it). Otherwise one ring over every host, ordered so that
/// consecutive ones sit on different leaves where possible: the first host of every leaf,
/// then the second of every leaf, and so on.
fn rings(hosts: &[HostSpec]) -> (Vec<usize>, Vec<std::ops::Range<usize>>) {
    let nics = hosts.iter().map(|host| usize::from(host.rail) + 1).max().unwrap_or(1);
    let mut places = Vec::with_capacity(hosts.len());
    let mut spans = Vec::new();
    if nics > 1 {
        for rail in 0..nics {
            let start = places.len();
            places.extend((0..hosts.len()).filter(|&host| usize::from(hosts[host].rail) == rail));
            spans.push(start..places.len());
        }
    } else {
        let leaves = hosts.iter().map(|host| host.leaf + 1).max().unwrap_or(0);
        let mut by_leaf: Vec<Vec<usize>> = vec![Vec::new(); leaves];
        for (index, host) in hosts.iter().enumerate() {
            by_leaf[host.leaf].push(index);
        }
        let deepest = by_leaf.iter().map(Vec::len).max().unwrap_or(0);
        places.extend((0..deepest).flat_map(|i| by_leaf.iter().filter_map(move |l| l.get(i).copied())));
        spans.push(0..places.len());
    }
    // A ring of one could only send to itself; keep the places of the others contiguous.
    if spans.iter().any(|span| span.len() < 2) {
        let (mut kept, mut kept_spans) = (Vec::new(), Vec::new());
        for span in spans.into_iter().filter(|span| span.len() >= 2) {
            let start = kept.len();
            kept.extend_from_slice(&places[span]);
            kept_spans.push(start..kept.len());
        }
        return (kept, kept_spans);
    }
    (places, spans)
}

/// Where `--workload flows` and `poisson` take their flows from (the `fabric` command's
/// flags, named in its errors).
#[derive(Debug, Clone, Default)]
pub struct FlowSource {
    /// `--flow-file`: the flows of `--workload flows`.
    pub flow_file: Option<PathBuf>,
    /// `--hpcc-topology`: the HPCC topology the flow file numbers its hosts by.
    pub hpcc_topology: Option<PathBuf>,
    /// `--cdf`, `--load` and `--duration-us`: the sizes, load factor and span of `poisson`.
    pub cdf: Option<PathBuf>,
    pub load: Option<f64>,
    pub duration_us: Option<f64>,
}

/// Where a listed workload's flows came from, as results.json records it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum FlowOrigin {
    /// A collective: no listed flows.
    #[default]
    None,
    /// A flow file: its path, digest and the lines after its declared flows, not read; and
    /// the HPCC topology that numbered its hosts, if one did.
    File { path: String, digest: String, lines_not_read: usize, hpcc_topology: Option<String> },
    /// Poisson arrivals: the size distribution's path and digest, the load and the span.
    Poisson { cdf: String, cdf_digest: String, load: f64, duration_us: f64 },
}

/// The flows of `--workload flows` (its flow file) or `poisson` (drawn from `--cdf` at
/// `--load` for `--duration-us`, at the first host's link speed), and where they came from;
/// none for the collectives.
pub fn flows_of(
    fabric: &super::Fabric,
    workload: Workload,
    source: FlowSource,
    seed: u64,
) -> Result<(Vec<flows::Flow>, FlowOrigin), InputError> {
    let hosts = fabric.hosts.len();
    match workload {
        Workload::Flows => {
            let path = source
                .flow_file
                .ok_or_else(|| InputError::flag("--flow-file", "--workload flows reads its flows from it"))?;
            let nodes = match &source.hpcc_topology {
                Some(topology) => {
                    let leaf_of: Vec<usize> = fabric.hosts.iter().map(|host| host.leaf).collect();
                    let file = topology.display().to_string();
                    Some(flows::HpccTopology::load(topology)?.hosts_of(&leaf_of, &file)?)
                }
                None => None,
            };
            let read = flows::read_flow_file(&path, hosts, nodes.as_ref())?;
            if read.lines_not_read > 0 {
                tracing::info!(
                    "{}: read the {} flows its first line declares; the {} lines after them are not read (as HPCC reads it)",
                    path.display(),
                    read.flows.len(),
                    read.lines_not_read
                );
            }
            let origin = FlowOrigin::File {
                path: path.display().to_string(),
                digest: read.digest,
                lines_not_read: read.lines_not_read,
                hpcc_topology: source.hpcc_topology.map(|topology| topology.display().to_string()),
            };
            Ok((read.flows, origin))
        }
        Workload::Poisson => {
            let path =
                source.cdf.ok_or_else(|| InputError::flag("--cdf", "--workload poisson draws its sizes from it"))?;
            let load =
                source.load.ok_or_else(|| InputError::flag("--load", "--workload poisson needs the load (0-1]"))?;
            if !(load > 0.0 && load <= 1.0) {
                return Err(InputError::flag("--load", format!("{load} is not in (0, 1]")));
            }
            let duration_us =
                source.duration_us.ok_or_else(|| InputError::flag("--duration-us", "--workload poisson needs it"))?;
            if !(duration_us.is_finite() && duration_us > 0.0 && duration_us <= 1e7) {
                return Err(InputError::flag("--duration-us", format!("{duration_us} is not in (0, 1e7]")));
            }
            let (file, text) = flows::read_text(&path)?;
            let cdf = flows::SizeCdf::parse(&text, &file)?;
            let origin =
                FlowOrigin::Poisson { cdf: file, cdf_digest: crate::digest::hex(text.as_bytes()), load, duration_us };
            let speed = fabric
                .links
                .iter()
                .find(|link| matches!(link.a, super::Endpoint::Host(_)))
                .map_or(100_000, |link| link.speed_mbps);
            Ok((flows::poisson(hosts, speed, &cdf, load, (duration_us * 1e6) as u64, seed), origin))
        }
        _ => Ok((Vec::new(), FlowOrigin::None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workload_word_names_its_collective() {
        for workload in &Workload::ALL[..3] {
            let collective = Collective::of(*workload, 3);
            assert_eq!(collective.name(), workload.name());
        }
        assert_eq!(Collective::of(Workload::Poisson, 0), Collective::Listed);
        assert_eq!(Collective::of(Workload::Incast, 3), Collective::Incast { target: 3 });
        assert_eq!(Collective::AllReduce.name(), "allreduce");
    }

    fn two_leaves(host: usize) -> usize {
        host / 2
    }

    /// `count` hosts, two to a leaf; with `rails`, numbered server by server as a
    /// rail-optimised fabric numbers them (NIC r of each server on leaf r of its group).
    fn hosts(count: usize, rails: usize) -> Vec<HostSpec> {
        (0..count)
            .map(|host| {
                let (server, rail) = (host / rails, host % rails);
                let leaf = if rails > 1 { (server / 2) * rails + rail } else { two_leaves(host) };
                HostSpec {
                    name: format!("h{host}"),
                    leaf,
                    pod: 0,
                    index: (server % 2) as u8,
                    server,
                    rail: rail as u8,
                    address: std::net::Ipv4Addr::new(10, leaf as u8, (server % 2) as u8, 1),
                    mac: crate::wire::ethernet::MacAddress([2, 0, 0, 0x10, leaf as u8, (server % 2) as u8]),
                }
            })
            .collect()
    }

    #[test]
    fn the_count_is_what_build_makes_and_saturates() {
        for collective in [Collective::Incast { target: 0 }, Collective::AllToAll, Collective::AllReduce] {
            for (count_of, messages) in [(1, 1), (2, 3), (5, 2)] {
                let built = build(collective, &hosts(count_of, 1), 4000, messages, &[]).1.len() as u64;
                assert_eq!(
                    count(collective, &hosts(count_of, 1), messages, &[]),
                    built,
                    "{collective:?} {count_of} {messages}"
                );
            }
        }
        assert_eq!(count(Collective::AllToAll, &hosts(70_000, 1), u32::MAX, &[]), u64::MAX);
        let flows = [
            Flow { start_ps: 5, sender: 1, receiver: 0, bytes: 9 },
            Flow { start_ps: 7, sender: 1, receiver: 0, bytes: 3 },
        ];
        let (qps, messages) = build(Collective::Listed, &hosts(2, 1), 0, 0, &flows);
        assert_eq!(
            (qps.len(), messages.len(), count(Collective::Listed, &hosts(2, 1), 0, &flows)),
            (2, 2, 2),
            "a queue pair per flow"
        );
        assert_eq!((messages[1].qp, messages[1].bytes, messages[1].start_ps), (1, 3, 7));
    }

    #[test]
    fn incast_all_to_all_and_ring_messages() {
        let (qps, messages) = build(Collective::Incast { target: 0 }, &hosts(4, 1), 1000, 3, &[]);
        assert_eq!((qps.len(), messages.len()), (3, 9));
        assert!(messages.iter().all(|m| m.receiver == 0 && m.after.is_none()));

        let (qps, messages) = build(Collective::AllToAll, &hosts(4, 1), 1000, 2, &[]);
        assert_eq!((qps.len(), messages.len()), (12, 24));

        let (qps, messages) = build(Collective::AllReduce, &hosts(4, 1), 4000, 1, &[]);
        // Ring 0, 2, 1, 3: every hop crosses leaves.
        assert_eq!(qps.len(), 4);
        assert!(qps.iter().all(|q| two_leaves(q.sender) != two_leaves(q.receiver)));
        // 2 x 3 steps x 4 hosts, chunks of 1000 bytes; step 0 free, later steps wait.
        assert_eq!(messages.len(), 24);
        assert!(messages.iter().all(|m| m.bytes == 1000));
        assert!(messages[..4].iter().all(|m| m.after.is_none()));
        assert!(messages[4..].iter().all(|m| m.after.is_some_and(|a| a < 24)));
        // Host 2 (ring position 1) waits, in step 1, for what host 0 sent in step 0.
        let step1_from_2 = messages[4..8].iter().find(|m| m.sender == 2).unwrap();
        assert_eq!(messages[step1_from_2.after.unwrap()].sender, 0);
    }

    /// On rails, a ring per rail over its NICs in server order, each reducing half the
    /// buffer here (two rails); a server's own NICs never send to each other.
    #[test]
    fn a_rail_optimised_all_reduce_runs_a_ring_per_rail() {
        let fabric = hosts(8, 2);
        let (qps, messages) = build(Collective::AllReduce, &fabric, 8000, 1, &[]);
        let pairs: Vec<(usize, usize)> = qps.iter().map(|q| (q.sender, q.receiver)).collect();
        assert_eq!(pairs, [(0, 2), (2, 4), (4, 6), (6, 0), (1, 3), (3, 5), (5, 7), (7, 1)]);
        // Two rings of four: 2 x 3 steps x 8 places, chunks of 8000 / (2 x 4).
        assert_eq!((messages.len() as u64, count(Collective::AllReduce, &fabric, 1, &[])), (48, 48));
        assert!(messages.iter().all(|m| m.bytes == 1000 && fabric[m.sender].rail == fabric[m.receiver].rail));
        let same_leaf = pairs.iter().filter(|(a, b)| fabric[*a].leaf == fabric[*b].leaf).count();
        assert_eq!(same_leaf, 4, "servers 0 and 1 share their rail leaves, as do 2 and 3");
        assert!(messages[..8].iter().all(|m| m.after.is_none()));
        // Step 1: host 3 (rail 1, place 5) waits for what host 1 sent in step 0, on its qp.
        let from_3 = messages[8..16].iter().find(|m| m.sender == 3).unwrap();
        assert_eq!((from_3.qp, messages[from_3.after.unwrap()].sender), (5, 1));
        // A rail of one NIC has nobody to reduce with: the other rails' queue pairs are
        // numbered from 0 all the same.
        let mut uneven = hosts(3, 2);
        for (host, rail) in uneven.iter_mut().zip([1, 0, 1]) {
            host.rail = rail;
        }
        let (qps, messages) = build(Collective::AllReduce, &uneven, 8000, 1, &[]);
        assert_eq!(qps.iter().map(|q| (q.sender, q.receiver)).collect::<Vec<_>>(), [(0, 2), (2, 0)]);
        assert!(messages.iter().all(|m| m.qp < 2), "{messages:?}");
        // One server per rail has nobody to reduce with, as one host has not.
        assert_eq!(count(Collective::AllReduce, &hosts(2, 2), 1, &[]), 0);
        assert_eq!(count(Collective::AllReduce, &hosts(1, 1), 1, &[]), 0);
    }
}
