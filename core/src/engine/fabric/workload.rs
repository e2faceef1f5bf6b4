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
    /// the spines when there are several leaves.
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
pub fn count(collective: Collective, hosts: usize, messages: u32, listed: &[Flow]) -> u64 {
    let (hosts, messages) = (hosts as u64, u64::from(messages));
    let others = hosts.saturating_sub(1);
    let per_round = match collective {
        Collective::Incast { .. } => others,
        Collective::AllToAll => hosts.saturating_mul(others),
        Collective::AllReduce => others.saturating_mul(2).saturating_mul(hosts),
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

/// The messages and queue pairs of a workload over `hosts` hosts (`leaf_of` gives a host's
/// leaf, for the all-reduce ring order), into `sink` one at a time: a rank keeps only its
/// own, and nobody holds the whole list (an all-to-all of 4,096 hosts has 16.8 million
/// messages).
pub fn for_each(
    collective: Collective,
    hosts: usize,
    leaf_of: &dyn Fn(usize) -> usize,
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
            for (qp, sender) in (0..hosts).filter(|&h| h != target).enumerate() {
                sink(queue_pair(sender, target));
                for _ in 0..messages {
                    sink(message(sender, target, qp, message_bytes, None, 0));
                }
            }
        }
        Collective::AllToAll => {
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
            let ring = ring_order(hosts, leaf_of);
            let n = ring.len();
            let chunk = message_bytes.div_ceil(n as u64).max(1);
            let steps = 2 * (n - 1);
            // last[i]: the message ring[i] sent in the previous step (its right neighbour waits
            // for it before its own next step).
            let mut last: Vec<Option<usize>> = vec![None; n];
            let mut made = 0;
            for iteration in 0..messages {
                for step in 0..steps {
                    let mut sent = vec![None; n];
                    for (position, &sender) in ring.iter().enumerate() {
                        let receiver = ring[(position + 1) % n];
                        if iteration == 0 && step == 0 {
                            sink(queue_pair(sender, receiver));
                        }
                        // Wait for the chunk the left neighbour sent in the previous step.
                        let after = last[(position + n - 1) % n];
                        sink(message(sender, receiver, position, chunk, after, 0));
                        sent[position] = Some(made);
                        made += 1;
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
    hosts: usize,
    leaf_of: &dyn Fn(usize) -> usize,
    message_bytes: u64,
    messages: u32,
    listed: &[Flow],
) -> (Vec<QueuePairSpec>, Vec<Message>) {
    let (mut qps, mut list) = (Vec::new(), Vec::new());
    for_each(collective, hosts, leaf_of, message_bytes, messages, listed, &mut |item| match item {
        Item::QueuePair(qp) => qps.push(qp),
        Item::Message(message) => list.push(message),
    });
    (qps, list)
}

/// Hosts ordered so that consecutive ones sit on different leaves where possible: the first
/// host of every leaf, then the second of every leaf, and so on.
fn ring_order(hosts: usize, leaf_of: &dyn Fn(usize) -> usize) -> Vec<usize> {
    let leaves = (0..hosts).map(leaf_of).max().map_or(0, |m| m + 1);
    let mut by_leaf: Vec<Vec<usize>> = vec![Vec::new(); leaves];
    for host in 0..hosts {
        by_leaf[leaf_of(host)].push(host);
    }
    let deepest = by_leaf.iter().map(Vec::len).max().unwrap_or(0);
    (0..deepest).flat_map(|i| by_leaf.iter().filter_map(move |l| l.get(i).copied())).collect()
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

    #[test]
    fn the_count_is_what_build_makes_and_saturates() {
        for collective in [Collective::Incast { target: 0 }, Collective::AllToAll, Collective::AllReduce] {
            for (hosts, messages) in [(1, 1), (2, 3), (5, 2)] {
                let built = build(collective, hosts, &two_leaves, 4000, messages, &[]).1.len() as u64;
                assert_eq!(count(collective, hosts, messages, &[]), built, "{collective:?} {hosts} {messages}");
            }
        }
        assert_eq!(count(Collective::AllToAll, usize::MAX, u32::MAX, &[]), u64::MAX);
        let flows = [
            Flow { start_ps: 5, sender: 1, receiver: 0, bytes: 9 },
            Flow { start_ps: 7, sender: 1, receiver: 0, bytes: 3 },
        ];
        let (qps, messages) = build(Collective::Listed, 2, &two_leaves, 0, 0, &flows);
        assert_eq!(
            (qps.len(), messages.len(), count(Collective::Listed, 2, 0, &flows)),
            (2, 2, 2),
            "a queue pair per flow"
        );
        assert_eq!((messages[1].qp, messages[1].bytes, messages[1].start_ps), (1, 3, 7));
    }

    #[test]
    fn incast_all_to_all_and_ring_messages() {
        let (qps, messages) = build(Collective::Incast { target: 0 }, 4, &two_leaves, 1000, 3, &[]);
        assert_eq!((qps.len(), messages.len()), (3, 9));
        assert!(messages.iter().all(|m| m.receiver == 0 && m.after.is_none()));

        let (qps, messages) = build(Collective::AllToAll, 4, &two_leaves, 1000, 2, &[]);
        assert_eq!((qps.len(), messages.len()), (12, 24));

        let (qps, messages) = build(Collective::AllReduce, 4, &two_leaves, 4000, 1, &[]);
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
}
