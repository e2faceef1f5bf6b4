//! The fabric engine's events (`Kind`) and its plan: what every switch, link, host, queue pair
//! and message is, fixed before the first event and shared by every partition.
//!
//! Invariant: the plan never changes during a run; events carry 32-bit numbers (`narrow`).

use super::FabricOptions;
use crate::engine::fabric::parallel::{self};
use crate::engine::fabric::{Endpoint, Fabric};

/// An event. Its numbers are 32 bits, so that an entry of the queue is 32 bytes (with
/// `Endpoint`s in it, 48). Switch, port and host numbers fit (each costs far more than 2^-32
/// of memory: `narrow`), as do frame slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    ArriveAtSwitch {
        switch: u32,
        port: u32,
        frame: u32,
    },
    ArriveAtHost {
        host: u32,
        frame: u32,
    },
    SwitchTxDone {
        switch: u32,
        port: u32,
    },
    HostTxDone(u32),
    Timer(u32),
    HostWake(u32),
    /// A message that waits for no other starts (a flow's start time, a start jitter).
    Release(u32),
    /// A NIC's retransmission tick (`Partition::nic_tick`).
    NicTimer(u32),
    /// A NIC records its active queue pairs' rates (`--qp-rates`).
    RateSample(u32),
}

/// A number of a switch, port, host or frame slot as an event holds it, or of a message or
/// queue pair as a host's records do (`run` refuses workloads with more than 2^32).
pub(super) fn narrow(number: usize) -> u32 {
    debug_assert!(u32::try_from(number).is_ok(), "{number} does not fit an event");
    number as u32
}

impl Kind {
    /// `frame` (in its slot) arrives whole at `to`.
    pub(super) fn arrive(to: Endpoint, frame: usize) -> Self {
        match to {
            Endpoint::Switch { switch, port } => {
                Kind::ArriveAtSwitch { switch: narrow(switch), port: narrow(port), frame: narrow(frame) }
            }
            Endpoint::Host(host) => Kind::ArriveAtHost { host: narrow(host), frame: narrow(frame) },
        }
    }

    /// `from`'s transmitter is done with its frame.
    pub(super) fn tx_done(from: Endpoint) -> Self {
        match from {
            Endpoint::Switch { switch, port } => Kind::SwitchTxDone { switch: narrow(switch), port: narrow(port) },
            Endpoint::Host(host) => Kind::HostTxDone(narrow(host)),
        }
    }

    /// The switch whose queues or PFC decisions the event may change.
    pub(super) fn switch(self) -> Option<usize> {
        match self {
            Kind::ArriveAtSwitch { switch, .. } | Kind::SwitchTxDone { switch, .. } | Kind::Timer(switch) => {
                Some(switch as usize)
            }
            Kind::ArriveAtHost { .. }
            | Kind::HostTxDone(_)
            | Kind::HostWake(_)
            | Kind::NicTimer(_)
            | Kind::RateSample(_)
            | Kind::Release(_) => None,
        }
    }
}

/// Where a link end sends to: the other end, the link's speed and its propagation delay.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wire {
    pub(super) to: Endpoint,
    pub(super) speed_mbps: u64,
    pub(super) propagation_ps: u64,
}

/// A queue pair's places in its ends' NICs' tables (every rank holds every queue pair's, 8
/// bytes each, since a sender tags its frames with the receiver's place).
#[derive(Debug, Clone, Copy)]
pub(super) struct QpPlan {
    /// In the sender's `Nic::sending`.
    pub(super) slot: u32,
    /// In the receiver's `Nic::senders`.
    pub(super) inbound: u32,
}

/// A message a rank's hosts send or receive, and its places in its NICs' tables (the same on
/// every rank, by which results find it). A rank numbers its messages in the workload's
/// order (`Plan::messages`), which is the workload's own numbering when one process runs
/// everything.
#[derive(Debug, Clone)]
pub(super) struct MessagePlan {
    pub(super) sender: u32,
    pub(super) receiver: u32,
    /// Its queue pair (`Plan::qps`).
    pub(super) qp: u32,
    pub(super) bytes: u64,
    pub(super) frames: u64,
    /// When it is released, if it waits for no message.
    pub(super) start_ps: u64,
    /// In the sender's `Nic::released` (and `resent`, `acked`).
    pub(super) outbound: u32,
    /// In the receiver's `Nic::receiving`.
    pub(super) inbound: u32,
    /// The message released when this one has been received (`NO_MESSAGE` when none): it is
    /// sent by this one's receiver, so the release happens where the arrival does.
    pub(super) dependent: u32,
}

/// No message (`MessagePlan::dependent`).
pub(super) const NO_MESSAGE: u32 = u32::MAX;

impl MessagePlan {
    /// The message released when this one has been received, by its place in the plan.
    pub(super) fn dependent(&self) -> Option<usize> {
        (self.dependent != NO_MESSAGE).then_some(self.dependent as usize)
    }
}

/// Where a switch or host runs: its partition and its index among the partition's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub(super) partition: usize,
    pub(super) index: usize,
}

/// What every partition reads and none changes: the fabric, the workload and where each
/// switch and host runs.
pub(super) struct Plan<'a> {
    pub(super) fabric: &'a Fabric,
    pub(super) options: &'a FabricOptions,
    /// Each switch port's link, by switch and port (`Fabric::parse` links every port).
    pub(super) switch_wires: Vec<Vec<Wire>>,
    /// Each host's link.
    pub(super) host_wires: Vec<Wire>,
    /// Every queue pair's, by number.
    pub(super) qps: Vec<QpPlan>,
    /// The messages this rank's hosts send or receive (every message, in one process).
    pub(super) messages: Vec<MessagePlan>,
    /// The workload's messages, all ranks'.
    pub(super) workload_messages: usize,
    pub(super) switch_at: Vec<Place>,
    pub(super) host_at: Vec<Place>,
    pub(super) data_priority: usize,
    /// The sampling interval of queue depths and queue pairs' rates.
    pub(super) sample_ps: u64,
    /// The most frames a queue pair may have unacknowledged (irn's BDP-FC; else no limit).
    pub(super) window_frames: u32,
}

impl Plan<'_> {
    /// The link from `end` (a vector lookup: a hashed one was 3% of a run).
    pub(super) fn wire(&self, end: Endpoint) -> Wire {
        match end {
            Endpoint::Switch { switch, port } => self.switch_wires[switch][port],
            Endpoint::Host(host) => self.host_wires[host],
        }
    }

    pub(super) fn partition_of(&self, end: Endpoint) -> usize {
        match end {
            Endpoint::Switch { switch, .. } => self.switch_at[switch].partition,
            Endpoint::Host(host) => self.host_at[host].partition,
        }
    }

    /// The shortest time from sending on a link between two partitions to the frame's
    /// arrival: the smallest frame's wire time plus the cable's delay (`parallel::IDLE` when
    /// no link crosses).
    pub(super) fn lookahead(&self) -> u64 {
        self.fabric
            .links
            .iter()
            .filter(|link| self.partition_of(link.a) != self.partition_of(link.b))
            .map(|link| {
                crate::config::PortConfig::wire_time_for(link.speed_mbps, 0)
                    + crate::config::plan::cable_delay_ps(link.cable_m)
            })
            .min()
            .unwrap_or(parallel::IDLE)
            .max(1)
    }
}
