//! A rank's share of a workload: every queue pair's places, and the messages its own hosts
//! send or receive with their NICs' tables, built in one pass over the workload (twice: the
//! first counts, so that every table is allocated once at its size). Nothing else of the
//! workload is kept: memory divides over ranks.
//!
//! Invariant: every rank goes over the whole workload in its order, so each numbers queue
//! pairs, messages and every NIC's tables as one process would, and draws the start jitter
//! from the same generator in the same order; a host's tables hold its messages in workload
//! order, at the places every other rank computes for them.

use super::events::{narrow, MessagePlan, Place, QpPlan, NO_MESSAGE};
use super::FabricOptions;
use crate::engine::fabric::host::{self, Nic, QueuePair};
use crate::engine::fabric::workload::{self, Item};
use crate::engine::fabric::Fabric;
use crate::error::InputError;

/// What a rank keeps of the workload.
pub(super) struct Share {
    /// Every queue pair's places.
    pub(super) qps: Vec<QpPlan>,
    /// The rank's messages (those its hosts send or receive), in workload order.
    pub(super) messages: Vec<MessagePlan>,
    /// The workload's messages, all ranks'.
    pub(super) workload_messages: usize,
    /// The messages that wait for no other, by the partition of their sender (the rank's
    /// partitions only), as places in `messages`.
    pub(super) roots: Vec<Vec<usize>>,
    /// The workload's bytes and frames, all ranks'.
    pub(super) total_bytes: u64,
    pub(super) frames: u64,
}

/// Goes over `options`' workload on `fabric` for the rank whose hosts have a NIC in `nics`
/// (`host_link`: each host's switch and speed; `host_at`: its partition): fills those NICs'
/// tables and returns the rank's share.
pub(super) fn build(
    fabric: &Fabric,
    options: &FabricOptions,
    nics: &mut [Option<Nic>],
    host_link: &[(usize, u64)],
    host_at: &[Place],
) -> Result<Share, InputError> {
    let hosts = fabric.hosts.len();
    let over_workload = |sink: &mut dyn FnMut(Item)| {
        let o = options;
        workload::for_each(o.collective, &fabric.hosts, o.message_bytes, o.messages, &o.flows, sink);
    };
    let ours: Vec<bool> = nics.iter().map(Option::is_some).collect();
    let here = |host: usize| ours[host];
    // First, how large each table will be.
    let (mut qps, mut messages, mut mine) = (0usize, 0usize, 0usize);
    let mut sizes = vec![TableSizes::default(); hosts];
    over_workload(&mut |item| match item {
        Item::QueuePair(spec) => {
            qps += 1;
            sizes[spec.sender].sending += 1;
            sizes[spec.receiver].senders += 1;
        }
        Item::Message(spec) => {
            messages += 1;
            sizes[spec.sender].sent += 1;
            sizes[spec.receiver].received += 1;
            mine += usize::from(here(spec.sender) || here(spec.receiver));
        }
    });
    for (nic, size) in nics.iter_mut().zip(&sizes) {
        if let Some(nic) = nic {
            nic.sending.reserve_exact(size.sending);
            nic.senders.reserve_exact(size.senders);
            nic.released.reserve_exact(size.sent);
            nic.resent.reserve_exact(size.sent);
            nic.acked.reserve_exact(size.sent);
            nic.receiving.reserve_exact(size.received);
        }
    }
    // Then the tables themselves; `sizes` now counts what each host's tables hold so far,
    // which is where the next entry goes on whichever rank.
    sizes.fill(TableSizes::default());
    let mut share = Share {
        qps: Vec::with_capacity(qps),
        messages: Vec::with_capacity(mine),
        workload_messages: messages,
        roots: vec![Vec::new(); fabric.switches.len()],
        total_bytes: 0,
        frames: 0,
    };
    // The workload's number of each message, as a place in `share.messages`.
    let mut place_of: Vec<u32> = Vec::with_capacity(messages);
    let mut jitter =
        (options.jitter_ps > 0).then(|| crate::rng::Rng::new(crate::rng::stream_seed(options.seed, u64::MAX)));
    let mtu = options.roce_mtu.max(1) as u64;
    let mut broken = None;
    over_workload(&mut |item| match item {
        Item::QueuePair(spec) => {
            let id = share.qps.len();
            let slot = sizes[spec.sender].sending;
            let inbound = sizes[spec.receiver].senders;
            sizes[spec.sender].sending += 1;
            sizes[spec.receiver].senders += 1;
            if let Some(nic) = &mut nics[spec.sender] {
                nic.sending.push(QueuePair::new(id, spec.receiver, host_link[spec.sender].1 as f64));
            }
            if let Some(nic) = &mut nics[spec.receiver] {
                nic.senders.push(host::Sender::new(fabric.hosts[spec.sender].address, narrow(slot)));
            }
            share.qps.push(QpPlan { slot: narrow(slot), inbound: narrow(inbound) });
        }
        Item::Message(spec) => {
            let number = place_of.len();
            let mut start_ps = spec.start_ps;
            if spec.after.is_none() {
                if let Some(rng) = &mut jitter {
                    start_ps += rng.below(options.jitter_ps);
                }
            }
            let frames = spec.bytes.div_ceil(mtu).max(1);
            share.total_bytes += spec.bytes;
            share.frames += frames;
            let outbound = sizes[spec.sender].sent;
            let inbound = sizes[spec.receiver].received;
            sizes[spec.sender].sent += 1;
            sizes[spec.receiver].received += 1;
            let (sends, receives) = (here(spec.sender), here(spec.receiver));
            if !(sends || receives) {
                place_of.push(NO_MESSAGE);
                return;
            }
            let place = share.messages.len();
            place_of.push(narrow(place));
            if let Some(nic) = &mut nics[spec.sender] {
                nic.released.push(None);
                nic.resent.push(0);
                nic.acked.push(None);
                match spec.after {
                    // Released where the parent arrives: its receiver must send it, so the
                    // parent is this rank's too.
                    Some(parent) => {
                        let parent = place_of.get(parent).copied().unwrap_or(NO_MESSAGE);
                        let theirs = share
                            .messages
                            .get_mut(parent as usize)
                            .filter(|p| p.receiver as usize == spec.sender && p.dependent == NO_MESSAGE);
                        match theirs {
                            Some(parent) => parent.dependent = narrow(place),
                            None => broken = Some(number),
                        }
                    }
                    None => share.roots[host_at[spec.sender].partition].push(place),
                }
            }
            if let Some(nic) = &mut nics[spec.receiver] {
                let (qp, from) = (narrow(spec.qp), share.qps[spec.qp].inbound);
                let frames = u32::try_from(frames).unwrap_or(u32::MAX);
                nic.receiving.push(host::Delivery::new(narrow(place), qp, from, frames));
            }
            share.messages.push(MessagePlan {
                sender: narrow(spec.sender),
                receiver: narrow(spec.receiver),
                qp: narrow(spec.qp),
                bytes: spec.bytes,
                frames,
                start_ps,
                outbound: narrow(outbound),
                inbound: narrow(inbound),
                dependent: NO_MESSAGE,
            });
        }
    });
    match broken {
        // The workloads never make one: a message waits for one its sender receives, and
        // each releases at most one other.
        Some(number) => Err(InputError::new(
            "the workload",
            format!("message {number}"),
            "waits for a message its sender does not receive, or one that releases another already",
        )),
        None => Ok(share),
    }
}

/// How many entries a host's NIC tables get (`Nic::sending`, `senders`, `released` and its
/// kin, `receiving`).
#[derive(Debug, Clone, Copy, Default)]
struct TableSizes {
    sending: usize,
    senders: usize,
    sent: usize,
    received: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fabric::workload::Collective;

    fn nics_of(fabric: &Fabric, here: &dyn Fn(usize) -> bool) -> Vec<Option<Nic>> {
        let mac = crate::wire::ethernet::MacAddress([2, 0, 0, 0, 0, 1]);
        (0..fabric.hosts.len())
            .map(|h| here(h).then(|| Nic::new(h, fabric.hosts[h].address, mac, mac, 100_000)))
            .collect()
    }

    /// A rank that runs host 0 of a four-host all-reduce with start jitter: it keeps
    /// the messages they send or receive, at the places, with the start times, that one
    /// process gives them, and its NICs' tables are those one process builds for them.
    #[test]
    fn a_ranks_share_is_what_one_process_holds_of_its_hosts() {
        let fabric = Fabric::parse(&crate::engine::fabric::tests::small(), "small.toml", None).unwrap();
        let options = FabricOptions {
            collective: Collective::AllReduce,
            message_bytes: 64 * 1024,
            messages: 2,
            roce_mtu: 4096,
            seed: 3,
            horizon_ms: 1.0,
            progress: false,
            threads: 1,
            flows: Vec::new(),
            origin: Default::default(),
            jitter_ps: 1_000_000,
            sample: None,
            qp_rates: false,
        };
        let host_link = vec![(0, 100_000); 4];
        let host_at: Vec<Place> = (0..4).map(|h| Place { partition: h / 2, index: h % 2 }).collect();
        let mut all = nics_of(&fabric, &|_| true);
        let whole = build(&fabric, &options, &mut all, &host_link, &host_at).unwrap();
        let mut ours = nics_of(&fabric, &|h| h == 0);
        let share = build(&fabric, &options, &mut ours, &host_link, &host_at).unwrap();
        assert_eq!((whole.workload_messages, share.workload_messages), (whole.messages.len(), whole.messages.len()));
        assert_eq!((share.total_bytes, share.frames), (whole.total_bytes, whole.frames));
        assert_eq!(share.qps.len(), whole.qps.len(), "every queue pair's places");
        let kept: Vec<&MessagePlan> = whole.messages.iter().filter(|m| m.sender == 0 || m.receiver == 0).collect();
        assert!(kept.len() < whole.messages.len() && !kept.is_empty());
        assert_eq!(share.messages.len(), kept.len());
        for (mine, theirs) in share.messages.iter().zip(&kept) {
            let key = |m: &MessagePlan| (m.sender, m.receiver, m.qp, m.bytes, m.start_ps, m.outbound, m.inbound);
            assert_eq!(key(mine), key(theirs), "the same places and start");
            // The message it releases is sent by its receiver: this rank keeps the link
            // when that receiver is its own, and it leads to the same message.
            assert_eq!(mine.dependent().is_some(), theirs.dependent().is_some() && mine.receiver == 0);
            if let (Some(mine), Some(theirs)) = (mine.dependent(), theirs.dependent()) {
                assert_eq!(key(&share.messages[mine]), key(&whole.messages[theirs]));
            }
        }
        {
            let (mine, theirs) = (ours[0].as_ref().unwrap(), all[0].as_ref().unwrap());
            assert_eq!((mine.sending.len(), mine.senders.len()), (theirs.sending.len(), theirs.senders.len()));
            assert_eq!((mine.released.len(), mine.receiving.len()), (theirs.released.len(), theirs.receiving.len()));
            assert_eq!(mine.released.capacity(), mine.released.len(), "allocated once, at its size");
        }
        assert!(ours[1..].iter().all(Option::is_none));
        // The jitter drew a different start for the roots, the same on both.
        let roots: Vec<u64> = share.messages.iter().filter(|m| m.start_ps > 0).map(|m| m.start_ps).collect();
        assert!(!roots.is_empty());
    }
}
