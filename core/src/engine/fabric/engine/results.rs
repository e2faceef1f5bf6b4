//! What a fabric run measured: the partitions gathered back by switch and host, the results
//! document (`results.json`) and the per-switch outputs.
//!
//! Invariant: the results depend only on the partitions' final state, never on how many
//! threads ran them.

use super::events::Plan;
use super::partition::{Partition, SwitchState};
use crate::engine::fabric::host::Nic;
use crate::engine::fabric::ranks::{Decoder, Encoder, WIRE_VERSION};
use crate::engine::fabric::workload::{self, Item};
use crate::engine::fabric::Endpoint;
use crate::error::InputError;
use crate::observe::report::Intervals;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

/// What a fabric run measured (`results.json`; docs/FABRIC.md's outputs).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FabricResults {
    pub fabric: String,
    /// `--workload`'s name: incast, alltoall, allreduce, flows (a flow file) or poisson.
    pub workload: String,
    /// Everything the workload was made from (`WorkloadParameters`).
    pub workload_parameters: WorkloadParameters,
    /// The leaves' uplink group mode.
    pub mode: String,
    pub dcqcn: bool,
    /// How hosts recovered losses (`[fabric] transport`).
    pub transport: String,
    pub hosts: usize,
    /// A collective's message size; null for listed flows, which have their own sizes.
    pub message_bytes: Option<u64>,
    pub messages: usize,
    pub incomplete_messages: usize,
    /// The horizon passed before every message completed.
    pub timed_out: bool,
    /// When the last message completed (none when some did not).
    pub completion_us: Option<f64>,
    /// Flow completion times of the messages that completed, from release to the last frame's
    /// arrival (one way); they say how many they cover and how many incomplete messages they
    /// leave out.
    pub fct_us: Percentiles,
    /// HPCC's flow completion time: from release to the last ACK's arrival at the sender.
    pub fct_to_last_ack_us: Percentiles,
    /// Peak queue depth per `switch:port`.
    pub max_queue_bytes: BTreeMap<String, u64>,
    /// Time each link direction's transmitter was paused by PFC (any priority), `a -> b`.
    pub pfc_pause_us: BTreeMap<String, f64>,
    pub pfc_pause_total_us: f64,
    pub cnps_sent: u64,
    pub ecn_marked: u64,
    /// Data frames the hosts sent again, and the retransmission timeouts behind some of them.
    pub retransmits: u64,
    pub timeouts: u64,
    /// Frames the switches trimmed, and trimmed data frames that reached their hosts.
    pub trimmed: u64,
    pub trims_received: u64,
    /// Events the engine handled (frames arriving, transmissions done, switch timers, host
    /// wake-ups): the simulation's work, for events per second.
    pub events: u64,
    /// Windows the engine ran (`parallel`): its synchronisations between partitions, and
    /// between ranks an exchange each; the same on any number of threads and ranks.
    pub windows: u64,
    pub drops: u64,
    pub drops_by_reason: BTreeMap<String, u64>,
    /// FCT slowdown (one-way FCT over the flow's one-way ideal: `IdlePath::ideal_ps`) by flow
    /// size; each row's incomplete flows are counted, not in its percentiles. A sprayed flow's
    /// frames travel in parallel, so it can fall below 1.
    pub slowdown_by_size: Vec<SizeBucket>,
    /// HPCC's slowdown, as its papers plot it: FCT to the last ACK over the standalone FCT
    /// (`IdlePath::standalone_ps`), floored at 1; a flow whose last ACK never came is incomplete.
    pub slowdown_hpcc_by_size: Vec<SizeBucket>,
}

/// What a run's workload was made from: every key is present, null where it does not apply
/// to the workload (a collective has no flow file, a flow file no load).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkloadParameters {
    /// The collectives': message size, messages per sender (per destination for all-to-all,
    /// iterations for all-reduce), the incast's receiver and the start jitter.
    pub message_bytes: Option<u64>,
    pub messages_per_sender: Option<u32>,
    pub target: Option<usize>,
    pub jitter_us: Option<f64>,
    /// Listed flows: how many.
    pub flows: Option<usize>,
    /// A flow file: its path, its digest (FNV-1a 64 of its bytes) and the lines after its
    /// declared flows, not read.
    pub flow_file: Option<String>,
    pub flow_file_digest: Option<String>,
    pub flow_file_lines_not_read: Option<usize>,
    /// The HPCC topology whose node numbers the flow file used (`--hpcc-topology`).
    pub hpcc_topology: Option<String>,
    /// Poisson arrivals: the size distribution file and its digest, each host's load, and
    /// the span flows start in.
    pub cdf: Option<String>,
    pub cdf_digest: Option<String>,
    pub load: Option<f64>,
    pub duration_us: Option<f64>,
    pub seed: u64,
    pub roce_mtu: usize,
    /// The run gives up `horizon_ms` after the first start, at `first_start_us`.
    pub horizon_ms: f64,
    pub first_start_us: f64,
}

impl WorkloadParameters {
    fn of(options: &super::FabricOptions) -> Self {
        use crate::engine::fabric::workload::{Collective, FlowOrigin};
        let collective = options.collective != Collective::Listed;
        let (mut flow_file, mut flow_file_digest, mut flow_file_lines_not_read) = (None, None, None);
        let mut hpcc_topology = None;
        let (mut cdf, mut cdf_digest, mut load, mut duration_us) = (None, None, None, None);
        match &options.origin {
            FlowOrigin::None => {}
            FlowOrigin::File { path, digest, lines_not_read, hpcc_topology: topology } => {
                (flow_file, flow_file_digest, flow_file_lines_not_read) =
                    (Some(path.clone()), Some(digest.clone()), Some(*lines_not_read));
                hpcc_topology.clone_from(topology);
            }
            FlowOrigin::Poisson { cdf: path, cdf_digest: digest, load: l, duration_us: d } => {
                (cdf, cdf_digest, load, duration_us) = (Some(path.clone()), Some(digest.clone()), Some(*l), Some(*d));
            }
        }
        Self {
            message_bytes: collective.then_some(options.message_bytes),
            messages_per_sender: collective.then_some(options.messages),
            target: match options.collective {
                Collective::Incast { target } => Some(target),
                _ => None,
            },
            jitter_us: collective.then_some(options.jitter_ps as f64 / 1e6),
            flows: (!collective).then_some(options.flows.len()),
            flow_file,
            flow_file_digest,
            flow_file_lines_not_read,
            hpcc_topology,
            cdf,
            cdf_digest,
            load,
            duration_us,
            seed: options.seed,
            roce_mtu: options.roce_mtu,
            horizon_ms: options.horizon_ms,
            first_start_us: options.first_start_ps() as f64 / 1e6,
        }
    }

    /// The workload's name as `--workload` spells it.
    fn workload_name(options: &super::FabricOptions) -> &'static str {
        use crate::engine::fabric::workload::{FlowOrigin, Workload};
        match options.origin {
            FlowOrigin::Poisson { .. } => Workload::Poisson.name(),
            _ => options.collective.name(),
        }
    }
}

/// The flows of one size range (bytes up to `max_bytes`; none: the rest). The percentiles
/// are null when none of its flows completed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeBucket {
    pub max_bytes: Option<u64>,
    pub flows: usize,
    pub incomplete: usize,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// The size buckets' upper bounds: 10 KB, 100 KB, 1 MB, 10 MB, then the rest.
const SIZE_BUCKETS: [u64; 4] = [10_000, 100_000, 1_000_000, 10_000_000];

/// What a message's path costs on an idle fabric: its frames back to back at its sender's
/// link speed, the one-way propagation of every link on the way, its first frame's time (a
/// full frame's, and the links and switches it crosses: host, leaf, host on one leaf, through
/// a spine between leaves of a pod, and through a spine, a core and a spine between pods (a
/// listed fabric's hosts count as on one leaf).
struct IdlePath {
    serialisation_ps: u64,
    first_frame_ps: u64,
    full_frame_ps: u64,
    propagation_ps: u64,
    links: u64,
    switches: u64,
}

impl IdlePath {
    fn of(plan: &Plan<'_>, sender: usize, receiver: usize, bytes: u64) -> Self {
        let wire = plan.host_wires[sender];
        let mtu = plan.options.roce_mtu as u64;
        let frame_ps = |payload: u64| {
            crate::config::PortConfig::wire_time_for(
                wire.speed_mbps,
                payload as usize + crate::traffic::frames::ROCE_OVERHEAD,
            )
        };
        let full = bytes / mtu;
        let last = bytes % mtu;
        let serialisation_ps = full * frame_ps(mtu) + if last > 0 { frame_ps(last) } else { 0 };
        let (first_frame_ps, full_frame_ps) = (frame_ps(mtu.min(bytes)), frame_ps(mtu));
        let hosts = &plan.fabric.hosts;
        let host_links = wire.propagation_ps + plan.host_wires[receiver].propagation_ps;
        // Tiers climbed above the leaves: none on one leaf, the spines within a pod, the
        // cores between pods.
        let tiers = if hosts[sender].leaf == hosts[receiver].leaf {
            0
        } else if hosts[sender].pod == hosts[receiver].pod {
            1
        } else {
            2
        };
        let cables = &plan.fabric.uplink_cables_m;
        let climbed: u64 = cables.iter().take(tiers).map(|&cable| 2 * crate::config::plan::cable_delay_ps(cable)).sum();
        let tiers = tiers as u64;
        Self {
            serialisation_ps,
            first_frame_ps,
            full_frame_ps,
            propagation_ps: host_links + climbed,
            links: 2 + 2 * tiers,
            switches: 1 + 2 * tiers,
        }
    }

    /// raceway's one-way ideal (HPCC's base): the frames back to back, the propagation, and
    /// the first frame's store and forward at each switch.
    fn ideal_ps(&self) -> u64 {
        self.serialisation_ps + self.propagation_ps + self.switches * self.first_frame_ps
    }

    /// HPCC's standalone FCT, as its simulator's `qp_finish` computes it: the base RTT (twice
    /// the one-way propagation, plus a full frame's serialisation on each link of the way)
    /// and the message's bytes with their headers at the sender's link speed.
    fn standalone_ps(&self) -> u64 {
        2 * self.propagation_ps + self.links * self.full_frame_ps + self.serialisation_ps
    }
}

/// Percentiles of the messages that completed; null when none did.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// Messages the percentiles are over (those that completed).
    pub messages: usize,
    /// Messages that never completed, which the percentiles leave out: with any, p99 and max
    /// are of the survivors, not of the workload.
    pub left_out: usize,
}

impl FabricResults {
    /// The one line `raceway fabric` prints.
    pub fn summary_line(&self) -> String {
        format!(
            "{} {} mode {} dcqcn {} transport {}: completion {} us, FCT p50 {} us p99 {} us{}, PFC pause {:.1} us, CNPs {}, drops {}, trimmed {}, retransmits {}, incomplete {}",
            self.fabric,
            self.workload,
            self.mode,
            self.dcqcn,
            self.transport,
            self.completion_us.map_or("-".to_string(), |c| format!("{c:.1}")),
            self.fct_us.p50.map_or("-".to_string(), |p| format!("{p:.1}")),
            self.fct_us.p99.map_or("-".to_string(), |p| format!("{p:.1}")),
            if self.fct_us.left_out > 0 {
                format!(" (of the {} completed; {} incomplete left out)", self.fct_us.messages, self.fct_us.left_out)
            } else {
                String::new()
            },
            self.pfc_pause_total_us,
            self.cnps_sent,
            self.drops,
            self.trimmed,
            self.retransmits,
            self.incomplete_messages,
        )
    }

    /// results.json: keys sorted, as every raceway JSON document.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("results serialise")
    }
}

impl Percentiles {
    /// Of `sorted` values, `left_out` messages not among them.
    fn of(sorted: &[f64], left_out: usize) -> Self {
        Self {
            p50: percentile(sorted, 0.5),
            p99: percentile(sorted, 0.99),
            max: sorted.last().copied(),
            messages: sorted.len(),
            left_out,
        }
    }
}

/// Each size bucket's slowdowns (unsorted) and incomplete flows, as `SizeBucket`s.
fn by_size(buckets: Vec<(Vec<f64>, usize)>) -> Vec<SizeBucket> {
    buckets
        .into_iter()
        .enumerate()
        .map(|(index, (mut slowdowns, incomplete))| {
            slowdowns.sort_by(f64::total_cmp);
            SizeBucket {
                max_bytes: SIZE_BUCKETS.get(index).copied(),
                flows: slowdowns.len() + incomplete,
                incomplete,
                p50: percentile(&slowdowns, 0.5),
                p99: percentile(&slowdowns, 0.99),
            }
        })
        .collect()
}

/// Percentile `q` (0-1) of sorted values (nearest rank); none of none.
pub(super) fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// A rank's partitions after a run: its switches by number, its hosts' NICs by number.
pub(super) struct Finished {
    pub(super) switches: Vec<SwitchState>,
    pub(super) nics: Vec<Nic>,
    pub(super) paused: HashMap<Endpoint, [Intervals; 8]>,
    /// The last event's time.
    pub(super) end: u64,
    pub(super) frames_delivered: u64,
    pub(super) events_handled: u64,
}

impl Finished {
    pub(super) fn gather(partitions: Vec<Partition>) -> Self {
        let mut finished = Finished {
            switches: Vec::new(),
            nics: Vec::new(),
            paused: HashMap::new(),
            end: 0,
            frames_delivered: 0,
            events_handled: 0,
        };
        for partition in partitions {
            finished.switches.extend(partition.switches);
            finished.nics.extend(partition.nics);
            finished.paused.extend(partition.paused);
            finished.end = finished.end.max(partition.last_ps);
            finished.frames_delivered += partition.frames_delivered;
            finished.events_handled += partition.events_handled;
        }
        finished.switches.sort_by_key(|s| s.id);
        finished.nics.sort_by_key(|n| n.host);
        finished
    }

    /// What the results document needs of these partitions (`Tally`): each NIC's message
    /// tables are taken, and the rest of the NIC freed, one NIC at a time.
    pub(super) fn tally(&mut self) -> Tally {
        let mut hosts = Vec::with_capacity(self.nics.len());
        let mut tally = Tally {
            frames_delivered: self.frames_delivered,
            events_handled: self.events_handled,
            hosts: Vec::new(),
            ports: Vec::new(),
            paused: Vec::new(),
            cnps_sent: 0,
            retransmits: 0,
            timeouts: 0,
            trims_received: 0,
            rates: Vec::new(),
        };
        for mut nic in self.nics.drain(..) {
            let when = |at: &Option<u64>| at.unwrap_or(NEVER);
            hosts.push(HostTally {
                host: nic.host as u64,
                released: nic.released.iter().map(when).collect(),
                resent: std::mem::take(&mut nic.resent),
                acked: nic.acked.iter().map(when).collect(),
                done: nic.receiving.iter().map(|delivery| delivery.done_ps().unwrap_or(NEVER)).collect(),
                trims: nic.receiving.iter().map(|delivery| delivery.trims).collect(),
            });
            tally.cnps_sent += nic.cnps_sent;
            tally.retransmits += nic.retransmits;
            tally.timeouts += nic.timeouts;
            tally.trims_received += nic.trims_received;
            let sender = nic.host as u64;
            tally.rates.extend(nic.rates.iter().map(|&(at, qp, receiver, mbps)| Rate {
                at,
                qp,
                sender,
                receiver,
                mbps,
            }));
        }
        tally.hosts = hosts;
        for state in &self.switches {
            for (port, counters) in state.switch.stats.ports.iter().enumerate() {
                let drops = crate::drops::DropReason::ALL
                    .iter()
                    .enumerate()
                    .map(|(reason, &r)| (reason as u8, counters.drops_for(r)))
                    .filter(|&(_, count)| count > 0)
                    .collect();
                tally.ports.push(PortTally {
                    switch: state.id as u64,
                    port: port as u64,
                    max_depth: counters.queues.iter().map(|q| q.max_depth_bytes).max().unwrap_or(0),
                    dropped: counters.dropped(),
                    drops,
                    marked: counters.queues.iter().map(|q| q.ecn_marked).sum(),
                    trimmed: counters.queues.iter().map(|q| q.trimmed).sum(),
                });
            }
        }
        tally.paused = self
            .paused
            .iter_mut()
            .map(|(&at, slots)| (at, slots.iter_mut().flat_map(|slot| slot.finish().iter().copied()).collect()))
            .collect();
        tally.paused.sort_by_key(|&(at, _)| at);
        tally
    }
}

/// No time: a message never released, acknowledged or completed.
const NEVER: u64 = u64::MAX;

/// What a rank's partitions measured that the results document needs: its hosts' message
/// tables, its switches' ports, the pauses its link ends received and its hosts' counters.
/// Rank 0 merges every rank's (`Measured`); one process keeps its own.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tally {
    frames_delivered: u64,
    events_handled: u64,
    hosts: Vec<HostTally>,
    ports: Vec<PortTally>,
    /// Each link end's pause intervals, every priority's, in no order.
    paused: Vec<(Endpoint, Vec<(u64, u64)>)>,
    cnps_sent: u64,
    retransmits: u64,
    timeouts: u64,
    trims_received: u64,
    rates: Vec<Rate>,
}

/// A host's messages as its NIC measured them, by their places in its tables (a place is
/// the same on every rank: `share`): those it sent (`Nic::released`), when each was
/// released, its frames sent again and when its last ACK came; those it received
/// (`Nic::receiving`), when the last frame arrived and its frames that arrived trimmed.
/// `NEVER` where it did not happen.
#[derive(Debug, Clone, PartialEq, Default)]
struct HostTally {
    host: u64,
    released: Vec<u64>,
    resent: Vec<u32>,
    acked: Vec<u64>,
    done: Vec<u64>,
    trims: Vec<u32>,
}

/// A switch port's peak queue, drops (in all and by `DropReason` number), marks and trims.
#[derive(Debug, Clone, PartialEq)]
struct PortTally {
    switch: u64,
    port: u64,
    max_depth: u64,
    dropped: u64,
    drops: Vec<(u8, u64)>,
    marked: u64,
    trimmed: u64,
}

/// A queue pair's DCQCN rate at a sample (`qp_rates.csv`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rate {
    at: u64,
    qp: u32,
    sender: u64,
    receiver: u32,
    mbps: f64,
}

/// A list of numbers in the wire encoding: its length, then each.
fn encode_u64s(e: &mut Encoder, values: &[u64]) {
    e.count(values.len());
    for &value in values {
        e.u64(value);
    }
}

fn encode_u32s(e: &mut Encoder, values: &[u32]) {
    e.count(values.len());
    for &value in values {
        e.u32(value);
    }
}

fn decode_u64s(d: &mut Decoder, what: &str) -> Result<Vec<u64>, String> {
    (0..d.count(8, what)?).map(|_| d.u64(what)).collect()
}

fn decode_u32s(d: &mut Decoder, what: &str) -> Result<Vec<u32>, String> {
    (0..d.count(4, what)?).map(|_| d.u32(what)).collect()
}

impl Tally {
    /// The wire encoding (`ranks`), version first.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut e = Encoder::to(&mut bytes);
        e.u8(WIRE_VERSION);
        e.u64(self.frames_delivered);
        e.u64(self.events_handled);
        e.count(self.hosts.len());
        for host in &self.hosts {
            e.u64(host.host);
            encode_u64s(&mut e, &host.released);
            encode_u32s(&mut e, &host.resent);
            encode_u64s(&mut e, &host.acked);
            encode_u64s(&mut e, &host.done);
            encode_u32s(&mut e, &host.trims);
        }
        e.count(self.ports.len());
        for port in &self.ports {
            for value in [port.switch, port.port, port.max_depth, port.dropped, port.marked, port.trimmed] {
                e.u64(value);
            }
            e.count(port.drops.len());
            for &(reason, count) in &port.drops {
                e.u8(reason);
                e.u64(count);
            }
        }
        e.count(self.paused.len());
        for (at, spans) in &self.paused {
            let (kind, switch, port) = match *at {
                Endpoint::Switch { switch, port } => (0, switch, port),
                Endpoint::Host(host) => (1, host, 0),
            };
            e.u8(kind);
            e.u64(switch as u64);
            e.u64(port as u64);
            e.count(spans.len());
            for &(from, to) in spans {
                e.u64(from);
                e.u64(to);
            }
        }
        for value in [self.cnps_sent, self.retransmits, self.timeouts, self.trims_received] {
            e.u64(value);
        }
        e.count(self.rates.len());
        for rate in &self.rates {
            e.u64(rate.at);
            e.u32(rate.qp);
            e.u64(rate.sender);
            e.u32(rate.receiver);
            e.f64(rate.mbps);
        }
        bytes
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut d = Decoder::new(bytes);
        d.version()?;
        let (frames_delivered, events_handled) = (d.u64("frames delivered")?, d.u64("events")?);
        let mut hosts = Vec::with_capacity(d.count(48, "hosts")?);
        for _ in 0..hosts.capacity() {
            hosts.push(HostTally {
                host: d.u64("a host")?,
                released: decode_u64s(&mut d, "releases")?,
                resent: decode_u32s(&mut d, "frames resent")?,
                acked: decode_u64s(&mut d, "last ACKs")?,
                done: decode_u64s(&mut d, "last frames")?,
                trims: decode_u32s(&mut d, "trims")?,
            });
        }
        let mut ports = Vec::with_capacity(d.count(56, "ports")?);
        for _ in 0..ports.capacity() {
            let mut values = [0u64; 6];
            for value in &mut values {
                *value = d.u64("a port's counters")?;
            }
            let mut drops = Vec::with_capacity(d.count(9, "a port's drop reasons")?);
            for _ in 0..drops.capacity() {
                let reason = d.u8("a drop reason")?;
                if usize::from(reason) >= crate::drops::DropReason::COUNT {
                    return Err(format!("drop reason {reason}"));
                }
                drops.push((reason, d.u64("its drops")?));
            }
            let [switch, port, max_depth, dropped, marked, trimmed] = values;
            ports.push(PortTally { switch, port, max_depth, dropped, drops, marked, trimmed });
        }
        let mut paused = Vec::with_capacity(d.count(25, "paused link ends")?);
        for _ in 0..paused.capacity() {
            let kind = d.u8("a link end's kind")?;
            let (number, port) = (d.u64("a link end")? as usize, d.u64("its port")? as usize);
            let at = match kind {
                0 => Endpoint::Switch { switch: number, port },
                1 => Endpoint::Host(number),
                other => return Err(format!("a link end of kind {other}")),
            };
            let mut spans = Vec::with_capacity(d.count(16, "pauses")?);
            for _ in 0..spans.capacity() {
                spans.push((d.u64("a pause's start")?, d.u64("its end")?));
            }
            paused.push((at, spans));
        }
        let counters = [d.u64("CNPs")?, d.u64("retransmits")?, d.u64("timeouts")?, d.u64("trims received")?];
        let mut rates = Vec::with_capacity(d.count(32, "rates")?);
        for _ in 0..rates.capacity() {
            rates.push(Rate {
                at: d.u64("a rate's time")?,
                qp: d.u32("its queue pair")?,
                sender: d.u64("its sender")?,
                receiver: d.u32("its receiver")?,
                mbps: d.f64("the rate")?,
            });
        }
        if !d.is_done() {
            return Err("bytes after the tally".into());
        }
        let [cnps_sent, retransmits, timeouts, trims_received] = counters;
        Ok(Self {
            frames_delivered,
            events_handled,
            hosts,
            ports,
            paused,
            cnps_sent,
            retransmits,
            timeouts,
            trims_received,
            rates,
        })
    }
}

/// Every rank's tally, merged by host, switch port and link end: what the results are
/// computed from, the same however the partitions were spread.
pub(super) struct Measured {
    /// By host number.
    hosts: Vec<HostTally>,
    /// By (switch, port).
    ports: Vec<PortTally>,
    /// By link end.
    paused: Vec<(Endpoint, Vec<(u64, u64)>)>,
    pub(super) frames_delivered: u64,
    events_handled: u64,
    cnps_sent: u64,
    retransmits: u64,
    timeouts: u64,
    trims_received: u64,
    rates: Vec<Rate>,
}

impl Measured {
    /// `tallies` of a run on `plan`'s fabric; the problem when they do not fit it (a host
    /// or port out of range, a host twice or never).
    pub(super) fn merge(tallies: Vec<Tally>, plan: &Plan<'_>) -> Result<Self, String> {
        let hosts = plan.fabric.hosts.len();
        let mut measured = Measured {
            hosts: Vec::new(),
            ports: Vec::new(),
            paused: Vec::new(),
            frames_delivered: 0,
            events_handled: 0,
            cnps_sent: 0,
            retransmits: 0,
            timeouts: 0,
            trims_received: 0,
            rates: Vec::new(),
        };
        let mut by_host: Vec<Option<HostTally>> = (0..hosts).map(|_| None).collect();
        for tally in tallies {
            for host in tally.hosts {
                let slot = by_host.get_mut(host.host as usize).ok_or_else(|| format!("host {}", host.host))?;
                if slot.is_some() {
                    return Err(format!("host {} twice", host.host));
                }
                *slot = Some(host);
            }
            for port in &tally.ports {
                let ports = plan.fabric.switches.get(port.switch as usize).map_or(0, |config| config.ports.len());
                if port.port as usize >= ports {
                    return Err(format!("switch {} port {}", port.switch, port.port));
                }
            }
            measured.ports.extend(tally.ports);
            measured.paused.extend(tally.paused);
            measured.frames_delivered += tally.frames_delivered;
            measured.events_handled += tally.events_handled;
            measured.cnps_sent += tally.cnps_sent;
            measured.retransmits += tally.retransmits;
            measured.timeouts += tally.timeouts;
            measured.trims_received += tally.trims_received;
            measured.rates.extend(tally.rates);
        }
        measured.hosts = by_host
            .into_iter()
            .enumerate()
            .map(|(host, tally)| tally.ok_or_else(|| format!("no host {host}")))
            .collect::<Result<_, _>>()?;
        measured.ports.sort_by_key(|port| (port.switch, port.port));
        measured.paused.sort_by_key(|&(at, _)| at);
        Ok(measured)
    }
}

/// Summarises a finished run from what every rank measured; writes results.json, flows.csv,
/// the slowdown CDF and the queue pairs' rates under `out` (rank 0's work).
pub(super) fn results(
    measured: Measured,
    plan: &Plan<'_>,
    out: Option<&Path>,
    finish: crate::engine::fabric::parallel::Finish,
    end: u64,
) -> Result<FabricResults, InputError> {
    let timed_out = finish.timed_out;
    let (fabric, options) = (plan.fabric, plan.options);
    let mut fcts: Vec<f64> = Vec::new();
    let mut fcts_to_ack: Vec<f64> = Vec::new();
    let mut incomplete = 0;
    let mut completion: u64 = 0;
    // flows.csv goes out a row at a time: a 4,096-host all-to-all has 16.8 million.
    let flows_path = out.map(|out| out.join("flows.csv"));
    let mut flows_csv: Box<dyn std::io::Write> = match (&flows_path, out) {
        (Some(path), Some(out)) => {
            std::fs::create_dir_all(out)
                .map_err(|err| InputError::new(out.display(), "", format!("cannot create: {err}")))?;
            let file = std::fs::File::create(path)
                .map_err(|err| InputError::new(path.display(), "", format!("cannot write: {err}")))?;
            Box::new(std::io::BufWriter::new(file))
        }
        _ => Box::new(std::io::sink()),
    };
    let mut unwritten: Option<std::io::Error> = None;
    let mut row = |text: std::fmt::Arguments| {
        if unwritten.is_none() {
            if let Err(err) = flows_csv.write_fmt(text) {
                unwritten = Some(err);
            }
        }
    };
    row(format_args!("flow,sender,receiver,bytes,start_us,finish_us,fct_us,ideal_us,slowdown,retransmits,trims,last_ack_us,fct_to_last_ack_us,standalone_us,slowdown_hpcc\n"));
    let mut buckets: Vec<(Vec<f64>, usize)> = vec![(Vec::new(), 0); SIZE_BUCKETS.len() + 1];
    let mut hpcc_buckets: Vec<(Vec<f64>, usize)> = vec![(Vec::new(), 0); SIZE_BUCKETS.len() + 1];
    // The workload once more, message by message, as every rank went over it.
    let mut index = 0;
    let o = options;
    let hosts = fabric.hosts.len();
    // Where each message sits in its sender's and its receiver's tables, as `share` put it.
    let (mut sent, mut received) = (vec![0; hosts], vec![0; hosts]);
    let mut missing = None;
    workload::for_each(o.collective, &fabric.hosts, o.message_bytes, o.messages, &o.flows, &mut |item| {
        let Item::Message(spec) = item else { return };
        let (outbound, inbound) = (sent[spec.sender], received[spec.receiver]);
        sent[spec.sender] += 1;
        received[spec.receiver] += 1;
        let (sender, receiver) = (&measured.hosts[spec.sender], &measured.hosts[spec.receiver]);
        let at = |values: &[u64], place: usize| values.get(place).copied().filter(|&at| at != NEVER);
        if outbound >= sender.released.len().min(sender.resent.len()).min(sender.acked.len())
            || inbound >= receiver.done.len().min(receiver.trims.len())
        {
            missing.get_or_insert(index);
        }
        let released = at(&sender.released, outbound);
        let done = at(&receiver.done, inbound);
        let path = IdlePath::of(plan, spec.sender, spec.receiver, spec.bytes);
        let (ideal, standalone) = (path.ideal_ps(), path.standalone_ps());
        let size_bucket = SIZE_BUCKETS.iter().position(|&max| spec.bytes <= max).unwrap_or(SIZE_BUCKETS.len());
        let bucket = &mut buckets[size_bucket];
        let resent = sender.resent.get(outbound).copied().unwrap_or(0);
        let us = |ps: u64| ps as f64 / 1e6;
        let start = released.map_or("-".to_string(), |at| format!("{:.3}", us(at)));
        let (finish, fct, slowdown) = match (released, done) {
            (Some(start), Some(done)) => {
                fcts.push(us(done - start));
                completion = completion.max(done);
                let slowdown = (done - start) as f64 / ideal.max(1) as f64;
                bucket.0.push(slowdown);
                (format!("{:.3}", us(done)), format!("{:.3}", us(done - start)), format!("{slowdown:.3}"))
            }
            _ => {
                incomplete += 1;
                bucket.1 += 1;
                ("incomplete".to_string(), "-".to_string(), "-".to_string())
            }
        };
        let last_ack = at(&sender.acked, outbound);
        let hpcc_bucket = &mut hpcc_buckets[size_bucket];
        let (acked, fct_to_ack, slowdown_hpcc) = match (released, last_ack, done) {
            (Some(start), Some(acked), Some(_)) => {
                fcts_to_ack.push(us(acked - start));
                let slowdown = ((acked - start) as f64 / standalone.max(1) as f64).max(1.0);
                hpcc_bucket.0.push(slowdown);
                (format!("{:.3}", us(acked)), format!("{:.3}", us(acked - start)), format!("{slowdown:.3}"))
            }
            _ => {
                hpcc_bucket.1 += 1;
                ("incomplete".to_string(), "-".to_string(), "-".to_string())
            }
        };
        row(format_args!(
            "{index},{},{},{},{start},{finish},{fct},{:.3},{slowdown},{resent},{},{acked},{fct_to_ack},{:.3},{slowdown_hpcc}\n",
            spec.sender,
            spec.receiver,
            spec.bytes,
            us(ideal),
            receiver.trims.get(inbound).copied().unwrap_or(0),
            us(standalone),
        ));
        index += 1;
    });
    if let Some(message) = missing {
        return Err(InputError::whole_file(
            "the ranks' tallies",
            format!("message {message} is not in its hosts' tables: the ranks ran different workloads"),
        ));
    }
    if let Some(path) = &flows_path {
        let flushed = match unwritten.take() {
            Some(err) => Err(err),
            None => flows_csv.flush(),
        };
        flushed.map_err(|err| InputError::new(path.display(), "", format!("cannot write: {err}")))?;
    }
    let labels = ["up to 10 KB", "10-100 KB", "100 KB-1 MB", "1-10 MB", "over 10 MB"];
    let cdf: Vec<(String, Vec<f64>)> =
        labels.iter().zip(&buckets).map(|(label, (values, _))| (label.to_string(), values.clone())).collect();
    let slowdown_by_size = by_size(buckets);
    let slowdown_hpcc_by_size = by_size(hpcc_buckets);
    fcts.sort_by(f64::total_cmp);
    fcts_to_ack.sort_by(f64::total_cmp);
    let incomplete_to_ack = plan.workload_messages - fcts_to_ack.len();
    let mut drops = BTreeMap::new();
    let mut total_drops = 0u64;
    let mut max_queue = BTreeMap::new();
    let mut marked = 0u64;
    let mut trimmed = 0u64;
    for port in &measured.ports {
        let config = &fabric.switches[port.switch as usize];
        total_drops += port.dropped;
        max_queue.insert(format!("{}:{}", config.name, config.ports[port.port as usize].name), port.max_depth);
        marked += port.marked;
        trimmed += port.trimmed;
        for &(reason, count) in &port.drops {
            *drops.entry(crate::drops::DropReason::ALL[usize::from(reason)].name().to_string()).or_insert(0) += count;
        }
    }
    // PFC pause time per link direction: the time each transmitter was held (any priority).
    let mut pauses = BTreeMap::new();
    let mut total_pause_ps = 0u64;
    for (at, spans) in &measured.paused {
        let mut merged = Intervals::default();
        let mut spans: Vec<(u64, u64)> = spans.iter().map(|&(a, b)| (a, b.min(end.max(a)))).collect();
        spans.sort();
        for (a, b) in spans {
            merged.pause(a, b);
        }
        let paused: u64 = merged.finish().iter().map(|(a, b)| b - a).sum();
        if paused > 0 {
            total_pause_ps += paused;
            let to = plan.wire(*at).to;
            pauses
                .insert(format!("{} -> {}", fabric.endpoint_name(*at), fabric.endpoint_name(to)), paused as f64 / 1e6);
        }
    }
    let result = FabricResults {
        fabric: fabric.name.clone(),
        workload: WorkloadParameters::workload_name(options).to_string(),
        workload_parameters: WorkloadParameters::of(options),
        mode: format!("{:?}", fabric.mode()).to_lowercase(),
        dcqcn: fabric.dcqcn.enabled,
        transport: fabric.transport.kind.name().to_string(),
        hosts: fabric.hosts.len(),
        message_bytes: (options.collective != crate::engine::fabric::workload::Collective::Listed)
            .then_some(options.message_bytes),
        messages: plan.workload_messages,
        incomplete_messages: incomplete,
        // Only a run with messages left is cut short: a NIC's last timer tick may lie past the
        // horizon after everything completed.
        timed_out: timed_out && incomplete > 0,
        completion_us: (incomplete == 0).then_some(completion as f64 / 1e6),
        fct_us: Percentiles::of(&fcts, incomplete),
        fct_to_last_ack_us: Percentiles::of(&fcts_to_ack, incomplete_to_ack),
        max_queue_bytes: max_queue,
        pfc_pause_us: pauses,
        pfc_pause_total_us: total_pause_ps as f64 / 1e6,
        cnps_sent: measured.cnps_sent,
        ecn_marked: marked,
        retransmits: measured.retransmits,
        timeouts: measured.timeouts,
        trimmed,
        trims_received: measured.trims_received,
        events: measured.events_handled,
        windows: finish.windows,
        drops: total_drops,
        drops_by_reason: drops,
        slowdown_by_size,
        slowdown_hpcc_by_size,
    };
    if let Some(out) = out {
        std::fs::create_dir_all(out)
            .map_err(|err| InputError::new(out.display(), "", format!("cannot create: {err}")))?;
        if options.qp_rates {
            let mut rates = measured.rates;
            rates.sort_by_key(|rate| (rate.at, rate.qp));
            let mut csv = String::from("time_us,qp,sender,receiver,rate_gbps\n");
            for Rate { at, qp, sender, receiver, mbps } in rates {
                csv.push_str(&format!("{:.3},{qp},{sender},{receiver},{:.3}\n", at as f64 / 1e6, mbps / 1000.0));
            }
            let path = out.join("qp_rates.csv");
            std::fs::write(&path, csv)
                .map_err(|err| InputError::new(path.display(), "", format!("cannot write: {err}")))?;
        }
        if cdf.iter().any(|(_, values)| !values.is_empty()) {
            crate::observe::report::draw_slowdown_cdf(&out.join("fct_slowdown.svg"), &cdf)
                .map_err(|problem| InputError::new(out.display(), "fct_slowdown.svg", problem))?;
        }
        let text = serde_json::to_string_pretty(&result.to_json()).expect("json") + "\n";
        let path = out.join("results.json");
        std::fs::write(&path, text)
            .map_err(|err| InputError::new(path.display(), "", format!("cannot write: {err}")))?;
    }
    Ok(result)
}

/// Writes each of `switches`' outputs under `out` (`write_switch`), on `threads` threads:
/// drawing them took longer than simulating a 256-host fabric on two threads (2.8 s of 5).
/// Every rank writes its own switches'.
pub(super) fn write_switches(
    out: &Path,
    switches: Vec<SwitchState>,
    fabric: &crate::engine::fabric::Fabric,
    end: u64,
    threads: usize,
) -> Result<(), InputError> {
    std::fs::create_dir_all(out).map_err(|err| InputError::new(out.display(), "", format!("cannot create: {err}")))?;
    let threads = threads.clamp(1, switches.len().max(1));
    let mut shares: Vec<Vec<(SwitchState, &crate::config::Config)>> = (0..threads).map(|_| Vec::new()).collect();
    for (index, mut state) in switches.into_iter().enumerate() {
        state.switch.refresh_gauges(end);
        let config = &fabric.switches[state.id];
        shares[index % threads].push((state, config));
    }
    let written: Vec<Result<(), InputError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    share.into_iter().try_for_each(|(state, config)| write_switch(out, config, state, end))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    written.into_iter().collect()
}

/// Writes a switch's report (charts, series) and stats.json under `out/<switch>`.
pub(super) fn write_switch(
    out: &Path,
    config: &crate::config::Config,
    state: SwitchState,
    end: u64,
) -> Result<(), InputError> {
    let SwitchState { switch, mut recorder, .. } = state;
    let dir = out.join(&config.name);
    recorder.finish(end, &switch);
    crate::observe::report::write(&dir, "fabric", config, &switch.stats, recorder)
        .map_err(|problem| InputError::new(dir.display(), "", problem))?;
    let stats = serde_json::to_string_pretty(&switch.stats.to_json(config)).expect("json") + "\n";
    std::fs::write(dir.join("stats.json"), stats)
        .map_err(|err| InputError::new(dir.display(), "stats.json", format!("cannot write: {err}")))
}
