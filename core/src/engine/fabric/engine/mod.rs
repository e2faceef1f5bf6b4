//! The fabric's discrete-event engine: every switch of the fabric and every host NIC in one
//! virtual time (picoseconds), joined by links that serialise frames at their speed and
//! delay them by the cable's propagation time.
//!
//! - A switch port sends one frame at a time: PFC frames first, then what its scheduler
//!   picks; the frame arrives whole at the other end (store and forward) after its wire time
//!   plus the propagation delay.
//! - A host NIC sends one frame at a time: CNPs first, then data from its queue pairs in round
//!   robin, each queue pair held to its DCQCN rate; it stops a priority while the leaf's PFC
//!   pauses it. It answers CE-marked data with a CNP to the sender, at most one per queue pair
//!   per `cnp_interval_us`, and counts frames per message, in any order.
//! - A message is released when its dependency (if any) has been received; its flow
//!   completion time runs from release to its last frame's arrival.
//! - The fabric is split into partitions, one per switch with the hosts cabled to it, each
//!   with its own events, run in windows on `threads` threads (`parallel`): a frame between
//!   partitions is handed over between windows.
//!
//! Invariant: a partition's events are ordered by (time, partition that scheduled it, order
//! of scheduling there) only, a partition's state changes only by its own events, and every
//! random choice draws from seeded generators; so a fabric, a workload and a seed give the
//! same results every run and on any number of threads.

mod events;
mod partition;
mod results;
mod share;

use events::{narrow, Place, Plan, Wire};
use partition::{Partition, SwitchState};
use results::{results, Finished, Measured};
pub use results::{FabricResults, Percentiles};

use crate::engine::fabric::host::{self, Nic};
use crate::engine::fabric::parallel::{self, Windows};
use crate::engine::fabric::ranks::{self, Alone, Exchange, RankError};
use crate::engine::fabric::workload::{self, Collective};
use crate::engine::fabric::{Endpoint, Fabric};
use crate::engine::sim::{Alarm, EventQueue, LinkTx};
use crate::error::InputError;
use crate::observe::report::Recorder;
use crate::switch::Switch;
use std::collections::HashMap;
use std::path::Path;

/// What to run on a fabric.
#[derive(Debug, Clone)]
pub struct FabricOptions {
    pub collective: Collective,
    pub message_bytes: u64,
    pub messages: u32,
    /// RDMA payload per frame (the RoCE path MTU).
    pub roce_mtu: usize,
    pub seed: u64,
    /// Give up (and report what did not complete) this long after the first message's start
    /// (a flow file's flows may all start at 2 s, as HPCC's generator writes them).
    pub horizon_ms: f64,
    /// Show a progress bar on stderr: the workload's frames delivered (the caller checks that
    /// stderr is a terminal).
    pub progress: bool,
    /// Threads to run the partitions on; the results do not depend on it.
    pub threads: usize,
    /// The flows of `Collective::Listed` (a flow file, Poisson arrivals), sorted by start.
    pub flows: Vec<crate::engine::fabric::flows::Flow>,
    /// Where `flows` came from (results.json's `workload_parameters`).
    pub origin: workload::FlowOrigin,
    /// Each message that waits for no other starts at a time drawn uniformly from [0, this)
    /// (seeded): the collectives' start jitter. 0: all at once.
    pub jitter_ps: u64,
    /// The switches' queue samples: every this many ps, holding the maximum or the depth at
    /// the end (`None`: about 500 samples over the workload, maxima).
    pub sample: Option<(u64, crate::observe::report::Sampling)>,
    /// Record each active queue pair's DCQCN rate at every sample (`qp_rates.csv`).
    pub qp_rates: bool,
}

impl FabricOptions {
    /// `--jitter-us` and `--sample-us`, checked, in picoseconds.
    pub fn times_of_flags(jitter_us: f64, sample_us: Option<f64>) -> Result<(u64, Option<u64>), InputError> {
        if !(jitter_us.is_finite() && (0.0..=1e9).contains(&jitter_us)) {
            return Err(InputError::flag("--jitter-us", format!("{jitter_us} is not 0-1e9")));
        }
        if let Some(us) = sample_us {
            if !(us.is_finite() && (0.001..=1e6).contains(&us)) {
                return Err(InputError::flag("--sample-us", format!("{us} is not 0.001-1e6")));
            }
        }
        Ok(((jitter_us * 1e6) as u64, sample_us.map(|us| (us * 1e6) as u64)))
    }

    /// Checks the options against `fabric`; the error names the flag.
    pub fn validate(&self, fabric: &Fabric) -> Result<(), InputError> {
        if let Collective::Incast { target } = self.collective {
            if target >= fabric.hosts.len() {
                return Err(InputError::flag(
                    "--target",
                    format!("{target} is not a host (the fabric has {})", fabric.hosts.len()),
                ));
            }
        }
        if self.message_bytes == 0 || self.messages == 0 {
            return Err(InputError::flag("--message-bytes and --messages", "must be at least 1"));
        }
        if !(64..=9000).contains(&self.roce_mtu)
            || self.roce_mtu + crate::traffic::frames::ROCE_OVERHEAD > fabric.mtu() as usize + 14
        {
            return Err(InputError::flag(
                "--roce-mtu",
                format!("{} is not 64-9000 or does not fit the switches' mtu {}", self.roce_mtu, fabric.mtu()),
            ));
        }
        if self.threads == 0 {
            return Err(InputError::flag("--threads", "must be at least 1"));
        }
        // Hosts count a message's frames, and number messages and queue pairs (no more than
        // messages), in 32 bits (`host::Delivery`).
        if self.message_bytes.div_ceil(self.roce_mtu as u64) > u64::from(u32::MAX) {
            return Err(InputError::flag(
                "--message-bytes",
                format!("{} is more than 2^32 frames of --roce-mtu {}", self.message_bytes, self.roce_mtu),
            ));
        }
        if self.collective == Collective::Listed && self.flows.is_empty() {
            return Err(InputError::flag("--workload", "the flows workloads need at least one flow"));
        }
        let messages = workload::count(self.collective, &fabric.hosts, self.messages, &self.flows);
        if messages > u64::from(u32::MAX) {
            return Err(InputError::flag(
                "--messages",
                format!("{} on {} hosts makes {messages} messages, more than 2^32", self.messages, fabric.hosts.len()),
            ));
        }
        if !(self.horizon_ms.is_finite() && self.horizon_ms > 0.0) {
            return Err(InputError::flag("--horizon-ms", format!("{} is not positive", self.horizon_ms)));
        }
        Ok(())
    }

    /// When the first message may start: a listed workload's first flow, else 0.
    pub fn first_start_ps(&self) -> u64 {
        match self.collective {
            Collective::Listed => self.flows.iter().map(|flow| flow.start_ps).min().unwrap_or(0),
            _ => 0,
        }
    }

    /// The virtual time the run gives up at (`horizon_ms` after the first start).
    pub fn horizon_ps(&self) -> u64 {
        self.first_start_ps().saturating_add((self.horizon_ms * 1e9) as u64)
    }
}

/// Hosts per thread that a fabric run's default gives: below 64 hosts a second thread costs
/// more in window barriers than it saves, at 64 it is even or ahead, and beyond it pays
/// (`perf/fabric-threads.sh`, measured with one and two threads: perf/RESULTS.md).
pub const HOSTS_PER_THREAD: usize = 32;

/// The threads a run of `hosts` hosts takes by default on a machine of `cores`: one per
/// `HOSTS_PER_THREAD` hosts, at least one, at most `cores`.
pub fn default_threads(hosts: usize, cores: usize) -> usize {
    (hosts / HOSTS_PER_THREAD).clamp(1, cores.max(1))
}

/// BDP-FC's window for irn (`transport::irn`): the frames a host link carries in the longest
/// path's base RTT (twice its one-way propagation, plus a full frame's serialisation on each
/// of its links: HPCC's and IRN's base RTT), rounded up; no limit for the other transports.
fn window_frames(fabric: &Fabric, options: &FabricOptions, host_wires: &[events::Wire]) -> u32 {
    if fabric.transport.kind != crate::engine::fabric::transport::TransportKind::Irn {
        return u32::MAX;
    }
    let fastest = host_wires.iter().map(|wire| wire.speed_mbps).max().unwrap_or(100_000);
    let frame_ps =
        crate::config::PortConfig::wire_time_for(fastest, options.roce_mtu + crate::traffic::frames::ROCE_OVERHEAD)
            .max(1);
    let host_link = host_wires.iter().map(|wire| wire.propagation_ps).max().unwrap_or(0);
    // A generated fabric's tiers above the leaves; a listed one's longest switch-to-switch
    // link, once.
    let tiers: Vec<u64> = if fabric.uplink_cables_m.is_empty() {
        fabric
            .links
            .iter()
            .filter(|link| matches!((link.a, link.b), (Endpoint::Switch { .. }, Endpoint::Switch { .. })))
            .map(|link| crate::config::plan::cable_delay_ps(link.cable_m))
            .max()
            .into_iter()
            .collect()
    } else {
        fabric.uplink_cables_m.iter().map(|&cable| crate::config::plan::cable_delay_ps(cable)).collect()
    };
    let propagation = 2 * host_link + 2 * tiers.iter().sum::<u64>();
    let links = 2 + 2 * tiers.len() as u64;
    let rtt = 2 * propagation + links * frame_ps;
    u32::try_from(rtt.div_ceil(frame_ps)).unwrap_or(u32::MAX).max(1)
}

/// Runs `options` on `fabric`; writes per-switch stats and charts under `out` when given.
/// Returns the results document (also written as `out/results.json`).
pub fn run(fabric: &Fabric, options: &FabricOptions, out: Option<&Path>) -> Result<FabricResults, InputError> {
    Ok(run_on(fabric, options, out, &mut Alone)?.expect("rank 0 of one has the results"))
}

/// What a rank must agree on with every other: the fabric and everything about the workload
/// that changes a result (not the threads, nor the progress bar).
fn digest(fabric: &Fabric, options: &FabricOptions) -> u64 {
    let o = options;
    let workload = (
        o.collective,
        o.message_bytes,
        o.messages,
        o.roce_mtu,
        o.seed,
        o.horizon_ms.to_bits(),
        o.jitter_ps,
        o.qp_rates,
    );
    ranks::debug_digest(&(fabric, workload, &o.flows, &o.origin, &o.sample))
}

/// Runs `options` on `fabric` as one of `exchange`'s ranks: this rank runs its share of the
/// partitions (`ranks::assign_ranks`) and writes its switches' outputs under `out`; rank 0
/// gathers what every rank measured, writes the run's outputs and returns its results (the
/// others `None`). Every rank must be given the same fabric and options (the digest is
/// checked first); every rank ends with an error if any leaves.
pub fn run_on(
    fabric: &Fabric,
    options: &FabricOptions,
    out: Option<&Path>,
    exchange: &mut dyn Exchange,
) -> Result<Option<FabricResults>, InputError> {
    let me = exchange.rank();
    let rank_error = |error: RankError| error.to_input_error(me);
    if exchange.ranks() > 1 {
        ranks::agree(exchange, digest(fabric, options)).map_err(rank_error)?;
    }
    let hosts = fabric.hosts.len();
    // Each host runs with the switch its link goes to, at that link's speed, and answers PFC
    // within the response its switch port gives its peer.
    let mut host_link = vec![(0, 100_000); hosts];
    let mut host_response_ps = vec![0; hosts];
    for link in &fabric.links {
        if let (Endpoint::Host(host), Endpoint::Switch { switch, port })
        | (Endpoint::Switch { switch, port }, Endpoint::Host(host)) = (link.a, link.b)
        {
            host_link[host] = (switch, link.speed_mbps);
            host_response_ps[host] = fabric.switches[switch].ports[port].peer_response_ps();
        }
    }
    let count = fabric.switches.len();
    let switch_at: Vec<Place> = (0..count).map(|switch| Place { partition: switch, index: 0 }).collect();
    let mut hosts_of = vec![0; count];
    let host_at: Vec<Place> = host_link
        .iter()
        .map(|&(switch, _)| {
            hosts_of[switch] += 1;
            Place { partition: switch, index: hosts_of[switch] - 1 }
        })
        .collect();
    // A rank's and a thread's share: the ports it switches and the hosts it runs.
    let weights: Vec<u64> = (0..count).map(|p| (hosts_of[p] + fabric.switches[p].ports.len()) as u64).collect();
    let owner = ranks::assign_ranks(&weights, exchange.ranks());
    // This rank's hosts' NICs; the others' are other ranks' business.
    let mut nics: Vec<Option<Nic>> = (0..hosts)
        .map(|i| {
            let (switch, speed_mbps) = host_link[i];
            (owner[switch] == me).then(|| {
                let host = &fabric.hosts[i];
                let mut nic = Nic::new(i, host.address, host.mac, fabric.switches[switch].mac, speed_mbps);
                nic.response_ps = host_response_ps[i];
                nic
            })
        })
        .collect();
    let built = share::build(fabric, options, &mut nics, &host_link, &host_at)?;
    let mut switch_wires: Vec<Vec<Option<Wire>>> = fabric.switches.iter().map(|c| vec![None; c.ports.len()]).collect();
    let mut host_wires: Vec<Option<Wire>> = vec![None; fabric.hosts.len()];
    for link in &fabric.links {
        let propagation_ps = crate::config::plan::cable_delay_ps(link.cable_m);
        for (from, to) in [(link.a, link.b), (link.b, link.a)] {
            let wire = Some(Wire { to, speed_mbps: link.speed_mbps, propagation_ps });
            match from {
                Endpoint::Switch { switch, port } => switch_wires[switch][port] = wire,
                Endpoint::Host(host) => host_wires[host] = wire,
            }
        }
    }
    let linked = "Fabric::parse links every port and host";
    let switch_wires =
        switch_wires.into_iter().map(|ports| ports.into_iter().map(|w| w.expect(linked)).collect()).collect();
    let host_wires: Vec<events::Wire> = host_wires.into_iter().map(|w| w.expect(linked)).collect();
    let total_bytes = built.total_bytes;
    let line_mbps = host_link.first().map_or(100_000, |&(_, speed)| speed).max(1);
    let span_ps = total_bytes * 8 * 1_000_000 / line_mbps / fabric.hosts.len().max(1) as u64;
    // The PFC priority the hosts' untagged data carries, as their leaf reads it.
    let qos = &fabric.switches[0].qos;
    let data_priority = match qos.trust {
        crate::config::Trust::Dscp => usize::from(qos.dscp_to_priority[usize::from(host::DATA_DSCP)]),
        crate::config::Trust::Pcp => 0,
    };
    let sample_ps = options.sample.map_or_else(|| crate::observe::report::default_interval_ps(span_ps), |(ps, _)| ps);
    let window_frames = window_frames(fabric, options, &host_wires);
    let mut plan = Plan {
        fabric,
        options,
        switch_wires,
        host_wires,
        qps: built.qps,
        messages: built.messages,
        workload_messages: built.workload_messages,
        switch_at,
        host_at,
        data_priority,
        sample_ps,
        window_frames,
    };

    let mut partitions: Vec<(usize, Partition)> = (0..count)
        .filter(|&id| owner[id] == me)
        .map(|id| {
            let partition = Partition {
                plan: &plan,
                id,
                switches: Vec::new(),
                nics: Vec::new(),
                events: EventQueue::with_origin(u32::try_from(id).expect("fewer switches than 2^24")),
                frames: Vec::new(),
                free_frames: Vec::new(),
                paused: HashMap::new(),
                outbox: (0..count).map(|_| Vec::new()).collect(),
                mail_for: Vec::new(),
                inbox: Vec::new(),
                last_ps: 0,
                frames_delivered: 0,
                touched_ports: Vec::new(),
                events_handled: 0,
            };
            (id, partition)
        })
        .collect();
    // Where each partition of this rank sits in `partitions`.
    let mut here = vec![usize::MAX; count];
    for (index, (id, _)) in partitions.iter().enumerate() {
        here[*id] = index;
    }
    for (id, config) in fabric.switches.iter().enumerate().filter(|&(id, _)| owner[id] == me) {
        partitions[here[plan.switch_at[id].partition]].1.switches.push(SwitchState {
            id,
            switch: Switch::new(config, crate::rng::stream_seed(options.seed, id as u64)),
            links: vec![LinkTx::default(); config.ports.len()],
            timer: Alarm::default(),
            recorder: match options.sample {
                Some((interval_ps, sampling)) => Recorder::sampled(config.ports.len(), interval_ps, sampling),
                None => Recorder::new(config.ports.len(), span_ps),
            },
            control_seen: 0,
        });
    }
    // In host order, as `host_at` numbers each partition's hosts.
    for nic in nics.into_iter().flatten() {
        partitions[here[plan.host_at[nic.host].partition]].1.nics.push(nic);
    }
    for (id, partition) in &mut partitions {
        for &message in &built.roots[*id] {
            match plan.messages[message].start_ps {
                0 => partition.release(message, 0),
                at => partition.events.schedule(at, events::Kind::Release(narrow(message))),
            }
        }
    }
    let horizon = options.horizon_ps();
    let windows = Windows { lookahead: plan.lookahead(), horizon, threads: options.threads };
    let local_weights: Vec<u64> = partitions.iter().map(|&(p, _)| weights[p]).collect();
    // The work is the workload's frames, delivered; the horizon only bounds the run.
    let mut progress = crate::progress::Progress::new(options.progress && me == 0, built.frames, "frames");
    let mut shown = 0;
    let (partitions, finish) =
        parallel::run_ranked(partitions, &owner, &local_weights, windows, exchange, &mut |done, start| {
            progress.tick_by(done - shown, || (done, format!("delivered, {}", crate::progress::simulated(start))));
            shown = done;
        })
        .map_err(rank_error)?;
    let mut finished = Finished::gather(partitions);
    // The run ends when the last frame within the horizon is off the wire (its `TxDone`,
    // scheduled or not), on whichever rank.
    let last_done = finished
        .switches
        .iter()
        .flat_map(|s| s.links.iter().filter_map(LinkTx::done_at))
        .filter(|&at| at <= horizon)
        .max();
    let local_end = finished.end.max(last_done.unwrap_or(0));
    let end = ranks::max_of(exchange, local_end).map_err(rank_error)?;
    let tally = finished.tally();
    // Every rank writes its switches' outputs and sends its tally, even when one of them
    // fails to write: the others would wait for it otherwise.
    let written = match out {
        Some(out) => results::write_switches(out, std::mem::take(&mut finished.switches), fabric, end, options.threads),
        None => Ok(()),
    };
    // What the run held is no longer needed: rank 0's results go through the workload again.
    drop(finished);
    plan.messages = Vec::new();
    let tallies = ranks::gather(exchange, tally, results::Tally::encode, results::Tally::decode).map_err(rank_error)?;
    written?;
    let Some(tallies) = tallies else { return Ok(None) };
    let measured = Measured::merge(tallies, &plan)
        .map_err(|problem| rank_error(RankError::Garbled { rank: me, problem: format!("a tally names {problem}") }))?;
    let delivered = format!("delivered, {}", crate::progress::simulated(end));
    progress.finish(measured.frames_delivered, delivered);
    results(measured, &plan, out, finish, end).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fabric::transport::TransportKind;

    fn small(extra: &str) -> Fabric {
        let text = format!("{}{extra}", super::super::tests::small());
        Fabric::parse(&text, "small.toml", None).unwrap()
    }

    fn options(collective: Collective) -> FabricOptions {
        FabricOptions {
            collective,
            message_bytes: 256 * 1024,
            messages: 2,
            roce_mtu: 4096,
            seed: 1,
            horizon_ms: 100.0,
            progress: false,
            threads: 1,
            flows: Vec::new(),
            origin: Default::default(),
            jitter_ps: 0,
            sample: None,
            qp_rates: false,
        }
    }

    #[test]
    fn every_message_completes_and_the_results_are_deterministic() {
        let fabric = small("");
        for collective in [Collective::Incast { target: 0 }, Collective::AllToAll, Collective::AllReduce] {
            let first = run(&fabric, &options(collective), None).unwrap();
            assert_eq!(first.incomplete_messages, 0, "{collective:?}: {first:?}");
            assert_eq!(first.drops, 0, "{collective:?}: {first:?}");
            assert!(first.completion_us.unwrap() > 0.0);
            assert_eq!(first, run(&fabric, &options(collective), None).unwrap(), "{collective:?} not deterministic");
            // Four partitions (two leaves with their hosts, two spines) on three threads.
            let threaded = run(&fabric, &FabricOptions { threads: 3, ..options(collective) }, None).unwrap();
            assert_eq!(first, threaded, "{collective:?} differs on three threads");
        }
    }

    /// The small leaf-spine run lossy: no lossless class, a 256 KiB buffer, uplinks in
    /// `mode`, hosts on `transport`, and `trim` (a `[qos.trim]` body, or nothing).
    fn lossy(mode: &str, transport: &str, trim: &str) -> Fabric {
        lossy_buffer(mode, transport, trim, 262_144)
    }

    fn lossy_buffer(mode: &str, transport: &str, trim: &str, buffer_bytes: u64) -> Fabric {
        let trim = if trim.is_empty() { String::new() } else { format!("[qos.trim]\n{trim}\n") };
        let text = format!(
            "[fabric]\nname = \"lossy\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\nmode = \"{mode}\"\n\
             transport = \"{transport}\"\nrto_us = 200\n\
             [switch]\nbuffer_bytes = {buffer_bytes}\n\
             [qos]\ndscp_to_tc = {{ 26 = 3, 48 = 6, default = 0 }}\n\
             [qos.scheduler]\nstrict = [6, 7]\n\
             [qos.ecn.3]\nkmin_bytes = 20000\nkmax_bytes = 100000\npmax = 0.2\n{trim}"
        );
        Fabric::parse(&text, "lossy.toml", None).unwrap()
    }

    /// A three-tier Clos carries every collective across its pods without a drop, the same
    /// on any thread count, and a lone flow between pods takes its ideal time (five switches,
    /// six links).
    #[test]
    fn a_three_tier_clos_carries_every_collective_across_pods() {
        use crate::engine::fabric::flows::parse_flows;
        let fabric = Fabric::parse(&super::super::tests::clos(), "clos.toml", None).unwrap();
        for collective in [Collective::Incast { target: 0 }, Collective::AllToAll, Collective::AllReduce] {
            let first = run(&fabric, &options(collective), None).unwrap();
            assert_eq!((first.incomplete_messages, first.drops), (0, 0), "{collective:?}: {first:?}");
            assert!(first.max_queue_bytes.keys().any(|port| port.starts_with("core")), "the cores carried frames");
            assert_eq!(first, run(&fabric, &FabricOptions { threads: 3, ..options(collective) }, None).unwrap());
        }
        for (text, tiers) in [("1\n0 7 3 100 1000000 0\n", "pods"), ("1\n0 3 3 100 1000000 0\n", "leaves of a pod")] {
            let flows = parse_flows(text, "f.txt", 8).unwrap();
            let result = run(&fabric, &FabricOptions { flows, ..options(Collective::Listed) }, None).unwrap();
            let slowdown = result.slowdown_by_size[2].p50.unwrap();
            assert!((1.0..1.001).contains(&slowdown), "between {tiers}: slowdown {slowdown}");
        }
    }

    /// On a rail-optimised leaf-spine of one rail group, the all-reduce's rings (one per
    /// rail) never leave their rail leaf: the spines send nothing. The same servers with
    /// their NICs on one leaf each run the same rings across the spines. Ranks write what one
    /// process does.
    #[test]
    fn a_rail_optimised_all_reduce_stays_on_its_rail_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let tx_bytes = |out: &Path, switch: &str| -> Vec<u64> {
            let text = std::fs::read_to_string(out.join(switch).join("series.json")).unwrap();
            let series: serde_json::Value = serde_json::from_str(&text).unwrap();
            let ports = series["ports"].as_object().unwrap();
            ports
                .values()
                .map(|port| port["tx_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum())
                .collect()
        };
        let rails =
            Fabric::parse(&crate::testing::leaf_spine("rails", "rails = 2", 400_000), "rails.toml", None).unwrap();
        let alone = dir.path().join("rails-alone");
        let one = run(&rails, &options(Collective::AllReduce), Some(&alone)).unwrap();
        assert_eq!((one.incomplete_messages, one.drops, one.messages), (0, 0, 2 * 2 * 2 * 2), "{one:?}");
        for spine in ["spine0", "spine1"] {
            assert!(tx_bytes(&alone, spine).iter().all(|&bytes| bytes == 0), "{spine} sent nothing");
        }
        assert!(tx_bytes(&alone, "leaf1").iter().filter(|&&bytes| bytes > 0).count() == 2, "to its two NICs only");
        let racked_text = crate::testing::leaf_spine("racked", "server_nics = 2", 400_000);
        let racked = dir.path().join("racked");
        let across = run(
            &Fabric::parse(&racked_text, "racked.toml", None).unwrap(),
            &options(Collective::AllReduce),
            Some(&racked),
        )
        .unwrap();
        assert_eq!(across.messages, one.messages, "the same rings");
        assert!(tx_bytes(&racked, "spine0").iter().chain(&tx_bytes(&racked, "spine1")).any(|&bytes| bytes > 0));
        let ranked = dir.path().join("rails-ranks");
        assert_eq!(run_ranks(&rails, &vec![options(Collective::AllReduce); 3], &ranked).unwrap(), one);
        assert_eq!(files(&ranked), files(&alone), "the same files on three ranks");
    }

    /// Runs `options` on `ranks` loopback ranks (threads standing in for processes), writing
    /// under `out`: rank 0's results, or the first rank's error (in rank order).
    fn run_ranks(fabric: &Fabric, options: &[FabricOptions], out: &Path) -> Result<FabricResults, InputError> {
        let ranks = options.len();
        let runs: Vec<Result<Option<FabricResults>, InputError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ranks::Loopback::ranks(ranks)
                .into_iter()
                .zip(options)
                .map(|(mut exchange, options)| scope.spawn(move || run_on(fabric, options, Some(out), &mut exchange)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut results = None;
        for run in runs {
            if let Some(result) = run? {
                results = Some(result);
            }
        }
        Ok(results.expect("rank 0 returns the results"))
    }

    /// Every file under `a` and `b`, by path below them, with its bytes.
    fn files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
        let mut files = std::collections::BTreeMap::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(at) = pending.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    files.insert(path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
                }
            }
        }
        files
    }

    /// The outputs of one process on one thread, and of 2, 3 and 4 ranks (ranks as threads,
    /// exchanging the bytes an MPI job would), are the same files, byte for byte: a two-tier
    /// and a three-tier fabric, each collective.
    #[test]
    fn ranks_write_the_same_outputs_as_one_process_on_one_thread() {
        let dir = tempfile::tempdir().unwrap();
        let fabrics = [
            ("leaf-spine", small("")),
            ("clos", Fabric::parse(&super::super::tests::clos(), "clos.toml", None).unwrap()),
        ];
        for (name, fabric) in &fabrics {
            for collective in [Collective::Incast { target: 0 }, Collective::AllToAll, Collective::AllReduce] {
                let alone = dir.path().join(format!("{name}-{}-alone", collective.name()));
                let one = run(fabric, &options(collective), Some(&alone)).unwrap();
                let expected = files(&alone);
                assert!(expected.len() > 10 && expected.contains_key(Path::new("results.json")), "{expected:?}");
                for (ranks, threads) in [(2, 1), (3, 2), (4, 1)] {
                    let out = dir.path().join(format!("{name}-{}-{ranks}", collective.name()));
                    let ranked = vec![FabricOptions { threads, ..options(collective) }; ranks];
                    let result = run_ranks(fabric, &ranked, &out).unwrap();
                    assert_eq!(result, one, "{name} {collective:?} on {ranks} ranks");
                    let written = files(&out);
                    assert_eq!(written.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
                    for (path, bytes) in &expected {
                        assert!(
                            &written[path] == bytes,
                            "{name} {collective:?} {ranks} ranks: {} differs",
                            path.display()
                        );
                    }
                }
            }
        }
    }

    /// A lossy incast under each transport, sampled queue pairs' rates included, on three
    /// ranks: what one process computes.
    #[test]
    fn a_lossy_incast_on_ranks_is_what_one_process_computes_under_each_transport() {
        let dir = tempfile::tempdir().unwrap();
        for transport in TransportKind::ALL {
            let fabric = lossy_buffer("ecmp", transport.name(), "", 65_536);
            let sampled = FabricOptions { qp_rates: true, ..options(Collective::Incast { target: 0 }) };
            let alone = dir.path().join(format!("{transport}-alone"));
            let one = run(&fabric, &sampled, Some(&alone)).unwrap();
            assert!(one.drops > 0 && one.incomplete_messages == 0, "{transport}: {one:?}");
            let out = dir.path().join(format!("{transport}-ranks"));
            assert_eq!(run_ranks(&fabric, &vec![sampled.clone(); 3], &out).unwrap(), one, "{transport}");
            assert_eq!(files(&out), files(&alone), "{transport}: the same files");
        }
    }

    /// A rank started on another workload is refused by every rank, in one line naming it.
    #[test]
    fn a_rank_on_other_options_is_refused_before_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let fabric = small("");
        let other = FabricOptions { seed: 2, ..options(Collective::AllToAll) };
        let error = run_ranks(&fabric, &[options(Collective::AllToAll), other], dir.path()).unwrap_err();
        let line = error.to_string();
        assert!(line.starts_with("rank 0: rank 1 runs another fabric, workload or options (digest "), "{line}");
        // Threads and the progress bar are the rank's own business.
        let own = FabricOptions { threads: 2, progress: false, ..options(Collective::AllToAll) };
        assert!(run_ranks(&fabric, &[options(Collective::AllToAll), own], dir.path()).is_ok());
    }

    #[test]
    fn small_fabrics_run_on_one_thread_by_default_and_large_ones_on_the_cores() {
        assert_eq!(default_threads(8, 16), 1);
        assert_eq!(default_threads(63, 16), 1);
        assert_eq!(default_threads(64, 16), 2);
        assert_eq!(default_threads(256, 2), 2);
        assert_eq!(default_threads(1024, 16), 16);
        assert_eq!(default_threads(0, 0), 1);
    }

    /// A lossless incast of many flows queues for longer than a millisecond, yet drops nothing:
    /// with a RoCE NIC's timeout, nothing times out either (with 1 ms, as before, it did).
    #[test]
    fn a_lossless_incast_of_many_flows_takes_no_timeout_with_a_roce_nics_timeout() {
        use crate::engine::fabric::flows::parse_flows;
        let incast = |rto: &str| {
            let text = crate::testing::leaf_spine("lossless", rto, 400_000)
                .replace("4194304", "16777216")
                .replace("hosts_per_leaf = 2", "hosts_per_leaf = 8");
            let fabric = Fabric::parse(&text, "lossless.toml", None).unwrap();
            let listing: String = std::iter::once("256\n".to_string())
                .chain((0..256).map(|i| format!("{} 0 3 100 262144 0\n", 1 + i % 15)))
                .collect();
            let flows = parse_flows(&listing, "f.txt", 16).unwrap();
            run(&fabric, &FabricOptions { flows, ..options(Collective::Listed) }, None).unwrap()
        };
        let before = incast("rto_us = 1000");
        let now = incast("");
        assert_eq!((now.drops, now.incomplete_messages), (0, 0));
        assert_eq!((now.timeouts, now.retransmits), (0, 0), "{now:?}");
        assert!(before.timeouts > 0, "the test's queueing outlasts 1 ms: {before:?}");
    }

    /// BDP-FC: an irn sender keeps at most a base RTT's worth of frames unacknowledged, so
    /// the incast that overflows 256 KiB under roce-sr fits it.
    #[test]
    fn irns_window_keeps_an_incast_within_the_buffer_that_roce_sr_overflows() {
        let collective = Collective::Incast { target: 0 };
        let sr = run(&lossy("ecmp", "roce-sr", ""), &options(collective), None).unwrap();
        let irn = run(&lossy("ecmp", "irn", ""), &options(collective), None).unwrap();
        assert!(sr.drops > 0, "{sr:?}");
        assert_eq!((irn.drops, irn.incomplete_messages, irn.retransmits), (0, 0, 0), "{irn:?}");
        let fabric = lossy("ecmp", "irn", "");
        let plan_window = super::window_frames(
            &fabric,
            &options(collective),
            &[events::Wire {
                to: Endpoint::Host(0),
                speed_mbps: 100_000,
                propagation_ps: crate::config::plan::cable_delay_ps(3.0),
            }],
        );
        let frame = 4096 + crate::traffic::frames::ROCE_OVERHEAD as u64;
        let deepest = irn.max_queue_bytes.values().max().copied().unwrap_or(0);
        assert!(deepest <= 3 * u64::from(plan_window) * frame, "three senders' windows of {plan_window}: {deepest}");
        assert_eq!(super::window_frames(&lossy("ecmp", "roce-sr", ""), &options(collective), &[]), u32::MAX);
    }

    #[test]
    fn a_lossy_incast_completes_every_message_under_each_transport() {
        for transport in TransportKind::ALL {
            // irn's BDP-FC keeps three senders' frames within a 256 KiB buffer (below): its
            // buffer here is eight frames.
            let buffer = if *transport == TransportKind::Irn { 32_768 } else { 262_144 };
            let fabric = lossy_buffer("ecmp", transport.name(), "", buffer);
            let result = run(&fabric, &options(Collective::Incast { target: 0 }), None).unwrap();
            assert!(result.drops > 0, "{transport}: the incast overflows the buffer: {result:?}");
            assert_eq!(result.incomplete_messages, 0, "{transport}: {result:?}");
            assert!(result.retransmits > 0);
            let threaded = FabricOptions { threads: 2, ..options(Collective::Incast { target: 0 }) };
            assert_eq!(result, run(&fabric, &threaded, None).unwrap(), "{transport}: the same on two threads");
        }
    }

    #[test]
    fn go_back_n_retransmits_more_than_selective_repeat_under_spraying() {
        let collective = Collective::Incast { target: 0 };
        let gbn = run(&lossy("spray", "roce-gbn", ""), &options(collective), None).unwrap();
        let sr = run(&lossy("spray", "roce-sr", ""), &options(collective), None).unwrap();
        assert_eq!((gbn.incomplete_messages, sr.incomplete_messages), (0, 0));
        assert!(gbn.retransmits > sr.retransmits, "gbn {} sr {}\n{gbn:?}\n{sr:?}", gbn.retransmits, sr.retransmits);
    }

    #[test]
    fn trimming_cuts_the_tail_of_a_lossy_incast() {
        let collective = Collective::Incast { target: 0 };
        let dropped = run(&lossy("spray", "uet-like", ""), &options(collective), None).unwrap();
        let trimmed = run(&lossy("spray", "uet-like", "dscp = 48"), &options(collective), None).unwrap();
        assert!(trimmed.trimmed > 0 && trimmed.trims_received > 0);
        assert_eq!((dropped.incomplete_messages, trimmed.incomplete_messages), (0, 0));
        assert!(trimmed.fct_us.p99 < dropped.fct_us.p99, "{:?} vs {:?}", trimmed.fct_us.p99, dropped.fct_us.p99);
        assert!(trimmed.timeouts < dropped.timeouts);
    }

    #[test]
    fn a_flow_file_and_poisson_arrivals_run_the_same_on_one_and_two_threads() {
        use crate::engine::fabric::flows::{parse_flows, poisson, SizeCdf};
        let fabric = small("");
        let listed =
            parse_flows("3\n0 3 3 100 300000 0\n1 3 3 100 5000 0.00001\n2 0 3 100 1 0.00002\n", "f.txt", 4).unwrap();
        let cdf = SizeCdf::parse("0 0\n10000 50\n400000 100\n", "c.txt").unwrap();
        let drawn = poisson(4, 100_000, &cdf, 0.5, 200_000_000, 3);
        assert!(drawn.len() > 10);
        for flows in [listed, drawn] {
            let count = flows.len();
            let one = FabricOptions { flows, ..options(Collective::Listed) };
            let first = run(&fabric, &one, None).unwrap();
            assert_eq!((first.messages, first.incomplete_messages), (count, 0));
            assert_eq!(first.slowdown_by_size.iter().map(|b| b.flows).sum::<usize>(), count);
            assert!(
                first.slowdown_by_size.iter().all(|b| b.flows == 0 || b.p50 >= Some(1.0)),
                "{:?}",
                first.slowdown_by_size
            );
            assert_eq!(first, run(&fabric, &FabricOptions { threads: 2, ..one }, None).unwrap());
        }
    }

    #[test]
    fn a_lone_flow_takes_its_ideal_time() {
        use crate::engine::fabric::flows::parse_flows;
        let fabric = small("");
        // Host 0 to host 3, across the spines, and host 0 to host 1 on its own leaf.
        for text in ["1\n0 3 3 100 1000000 0\n", "1\n0 1 3 100 1000000 0\n"] {
            let flows = parse_flows(text, "f.txt", 4).unwrap();
            let result = run(&fabric, &FabricOptions { flows, ..options(Collective::Listed) }, None).unwrap();
            let bucket = &result.slowdown_by_size[2];
            assert_eq!(bucket.flows, 1);
            // ACKs share no link with the data: only rounding separates FCT from its ideal.
            assert!((1.0..1.001).contains(&bucket.p50.unwrap()), "{text}: slowdown {:?}", bucket.p50);
        }
    }

    /// HPCC's definitions beside raceway's one-way ones: the FCT runs to the last ACK at the
    /// sender, the ideal is the standalone FCT (a base RTT and the bytes at line rate), and
    /// the slowdown is floored at 1, even for a sprayed flow whose frames travel in parallel.
    #[test]
    fn hpcc_fct_runs_to_the_last_ack_and_its_slowdown_is_never_below_one() {
        use crate::engine::fabric::flows::parse_flows;
        let fabric = small("");
        let flows = parse_flows("1\n0 3 3 100 1000000 0\n", "f.txt", 4).unwrap();
        let result = run(&fabric, &FabricOptions { flows, ..options(Collective::Listed) }, None).unwrap();
        let (one_way, to_ack) = (result.fct_us.p50.unwrap(), result.fct_to_last_ack_us.p50.unwrap());
        assert!(to_ack > one_way, "the last ACK comes back after the last frame: {to_ack} vs {one_way}");
        let bucket = &result.slowdown_hpcc_by_size[2];
        assert_eq!((bucket.flows, bucket.incomplete), (1, 0));
        // On an idle fabric the ACK's way back costs less than a full frame per link (the
        // standalone FCT's base RTT counts one): floored at 1.
        assert_eq!(bucket.p50, Some(1.0), "{:?}", result.slowdown_hpcc_by_size);
        // Two-frame flows sprayed over both spines: one way, faster than one path's ideal
        // (below 1); HPCC's slowdown never is.
        let text: String = std::iter::once("8\n".to_string())
            .chain((0..8).map(|i| format!("{} {} 3 100 8192 {}\n", i % 2, 2 + i % 2, i as f64 * 1e-5)))
            .collect();
        let flows = parse_flows(&text, "f.txt", 4).unwrap();
        let sprayed =
            run(&lossy("spray", "roce-sr", ""), &FabricOptions { flows, ..options(Collective::Listed) }, None).unwrap();
        assert_eq!(sprayed.incomplete_messages, 0);
        for bucket in sprayed.slowdown_hpcc_by_size.iter().filter(|bucket| bucket.flows > 0) {
            assert!(bucket.p50 >= Some(1.0) && bucket.p99 >= Some(1.0), "{:?}", sprayed.slowdown_hpcc_by_size);
        }
    }

    /// HPCC's generator starts every flow at 2 s or later: the horizon counts from the first
    /// start, so a file made for HPCC runs whole with the default horizon.
    #[test]
    fn the_horizon_counts_from_the_first_flow_start() {
        use crate::engine::fabric::flows::parse_flows;
        let fabric = small("");
        let flows = parse_flows("2\n0 3 3 100 100000 2\n1 2 3 100 100000 2.000001\n", "f.txt", 4).unwrap();
        let listed = FabricOptions { flows, horizon_ms: 1.0, ..options(Collective::Listed) };
        assert_eq!(listed.first_start_ps(), 2_000_000_000_000);
        assert_eq!(listed.horizon_ps(), 2_001_000_000_000);
        let result = run(&fabric, &listed, None).unwrap();
        assert_eq!((result.incomplete_messages, result.timed_out), (0, false), "{result:?}");
        assert!(result.completion_us.unwrap() > 2e6, "finished after its start: {:?}", result.completion_us);
        assert_eq!(result.workload_parameters.first_start_us, 2e6);
        // A collective starts at 0.
        assert_eq!(options(Collective::AllToAll).horizon_ps(), 100_000_000_000);
    }

    /// results.json says what ran, and null where nothing completed.
    #[test]
    fn the_results_name_the_workload_its_parameters_and_null_where_none_completed() {
        use crate::engine::fabric::flows::parse_flows;
        use crate::engine::fabric::workload::FlowOrigin;
        let fabric = small("");
        let incast = run(&fabric, &options(Collective::Incast { target: 2 }), None).unwrap();
        let json = incast.to_json();
        assert_eq!(json["workload"], "incast");
        assert_eq!(json["message_bytes"], 256 * 1024);
        let parameters = &json["workload_parameters"];
        assert_eq!((parameters["target"].as_u64(), parameters["messages_per_sender"].as_u64()), (Some(2), Some(2)));
        assert!(parameters["flow_file"].is_null() && parameters["cdf"].is_null() && parameters["flows"].is_null());
        let flows = parse_flows("1\n0 3 3 100 100000 0\n", "f.txt", 4).unwrap();
        let origin = FlowOrigin::Poisson { cdf: "c.txt".into(), cdf_digest: "ab".into(), load: 0.3, duration_us: 5.0 };
        let poisson = FabricOptions { flows: flows.clone(), origin, ..options(Collective::Listed) };
        let json = run(&fabric, &poisson, None).unwrap().to_json();
        assert_eq!(json["workload"], "poisson");
        assert!(json["message_bytes"].is_null(), "a listed flow has its own size");
        let parameters = &json["workload_parameters"];
        assert_eq!((parameters["cdf"].as_str(), parameters["cdf_digest"].as_str()), (Some("c.txt"), Some("ab")));
        assert_eq!((parameters["load"].as_f64(), parameters["duration_us"].as_f64()), (Some(0.3), Some(5.0)));
        assert_eq!(parameters["flows"], 1);
        assert!(parameters["message_bytes"].is_null() && parameters["target"].is_null());
        let origin =
            FlowOrigin::File { path: "f.txt".into(), digest: "cd".into(), lines_not_read: 3, hpcc_topology: None };
        let file = FabricOptions { flows: flows.clone(), origin, ..options(Collective::Listed) };
        let json = run(&fabric, &file, None).unwrap().to_json();
        assert_eq!(json["workload"], "flows");
        let parameters = &json["workload_parameters"];
        assert_eq!(
            (parameters["flow_file_digest"].as_str(), parameters["flow_file_lines_not_read"].as_u64()),
            (Some("cd"), Some(3))
        );
        // A horizon too short for the flow to finish: nothing completed, nothing to rank.
        let cut =
            run(&fabric, &FabricOptions { flows, horizon_ms: 0.000_001, ..options(Collective::Listed) }, None).unwrap();
        assert_eq!((cut.incomplete_messages, cut.timed_out), (1, true));
        let json = cut.to_json();
        for key in ["p50", "p99", "max"] {
            assert!(json["fct_us"][key].is_null(), "{key}: {json}");
        }
        assert!(json["completion_us"].is_null());
        assert!(json["slowdown_by_size"].as_array().unwrap().iter().all(|b| b["p50"].is_null() && b["p99"].is_null()));
    }

    #[test]
    fn queue_samples_at_a_chosen_interval_and_queue_pair_rates_on_request() {
        use crate::observe::report::Sampling;
        let fabric = small("");
        let dir = tempfile::tempdir().unwrap();
        let mut depths = Vec::new();
        for sampling in [Sampling::Max, Sampling::Instant] {
            let chosen = FabricOptions {
                sample: Some((2_000_000, sampling)),
                qp_rates: true,
                ..options(Collective::Incast { target: 0 })
            };
            let out = dir.path().join(sampling.name());
            run(&fabric, &chosen, Some(&out)).unwrap();
            let series: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("leaf0/series.json")).unwrap()).unwrap();
            assert_eq!(
                (series["interval_ns"].as_f64(), series["sampling"].as_str()),
                (Some(2000.0), Some(sampling.name()))
            );
            assert!(
                std::fs::read_to_string(out.join("fct_slowdown.svg")).unwrap().contains("<polyline"),
                "the CDF drawn"
            );
            let rates = std::fs::read_to_string(out.join("qp_rates.csv")).unwrap();
            let rows: Vec<&str> = rates.lines().skip(1).collect();
            assert!(rows.len() > 10, "{rates}");
            assert!(rows.iter().all(|row| row.split(',').count() == 5));
            assert!(rows[0].starts_with("2.000,"), "on the 2 us grid: {}", rows[0]);
            // The incast's queue: leaf0's port to host 0, the data class.
            let queue = &series["ports"]["h0"]["queue_depth_bytes"]["3"];
            depths.push(queue.as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect::<Vec<_>>());
        }
        let (max, instant) = (&depths[0], &depths[1]);
        assert_eq!(max.len(), instant.len());
        assert!(max.iter().zip(instant).all(|(m, i)| m >= i), "a maximum is never below the depth at the end");
        assert!(max.iter().zip(instant).any(|(m, i)| m > i), "and the queue moved within a sample");
    }

    #[test]
    fn start_jitter_spreads_the_collectives_start() {
        let fabric = small("");
        let at_once = run(&fabric, &options(Collective::AllToAll), None).unwrap();
        let jittered = FabricOptions { jitter_ps: 50_000_000, ..options(Collective::AllToAll) };
        let spread = run(&fabric, &jittered, None).unwrap();
        assert_eq!(spread.incomplete_messages, 0);
        assert_ne!(at_once, spread);
        assert_eq!(spread, run(&fabric, &FabricOptions { threads: 2, ..jittered }, None).unwrap());
    }

    #[test]
    fn an_uncongested_message_runs_at_line_rate() {
        // One host sends 256 KiB twice to a host on the other leaf: 64 frames each of 4154 B
        // at 100G (~340 ns each), plus three hops of store and forward.
        let fabric = small("");
        let result =
            run(&fabric, &FabricOptions { messages: 1, ..options(Collective::Incast { target: 0 }) }, None).unwrap();
        // Three senders into one host: about 3 x 64 frames at line rate into h0.
        let completion = result.completion_us.unwrap();
        let line_rate_us = 3.0 * 64.0 * (4154.0 + 24.0) * 8.0 / 100_000.0;
        assert!(completion >= line_rate_us && completion < line_rate_us * 1.25, "{completion} vs {line_rate_us}");
    }
}
