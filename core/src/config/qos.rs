//! `[qos]`: trust, the DSCP and PCP maps to traffic classes, the PFC priority a frame carries,
//! the maps from traffic classes to ingress priority groups and from received PFC priorities
//! to egress queues, the lossless priorities and the scheduler, validated into `Qos` together
//! with the buffer, PFC, watchdog and ECN sections below it (`buffer.rs`, `ecn.rs`).
//!
//! 802.1Qbb flow-controls priorities, not traffic classes, and SONiC keeps the two apart
//! (`tc_to_pg_map`, `pfc_to_pg_map`, `pfc_to_queue_map`). Here:
//! - a frame carries a PFC priority: its PCP with `trust = "pcp"`; with DSCP trust,
//!   `dscp_to_pfc_priority` (the peer NIC's own map; by default the DSCP's TC, which is what
//!   SONiC's identity `tc_to_pg` and `pfc_to_pg` maps give);
//! - its TC is its egress queue, and `tc_to_pg` names the ingress priority group it is charged
//!   to;
//! - a TC is lossless when a lossless priority's frames land in it, and a group when a
//!   lossless TC is charged to it. A group's XOFF names every lossless priority whose frames
//!   it holds (SONiC configures that inverse as `pfc_to_pg_map`; raceway derives it, so the
//!   two cannot disagree);
//! - a received pause for priority p stops queue `pfc_to_queue[p]`.
//!
//! Invariant: every map entry is a valid DSCP (0-63) or PCP (0-7) to a TC 0-7; a TC is strict
//! or weighted (1-100), never both; a priority group holds lossless TCs or lossy ones, never
//! both; no two lossless priorities stop the same queue.

use super::buffer::{RawBuffer, RawPfc, RawWatchdog};
use super::ecn::RawEcn;
use super::trim::{RawTrim, TrimConfig, TrimMaps};
use super::{BufferConfig, EcnProfile, PfcConfig, Validator, WatchdogConfig};
use crate::error::InputError;
use crate::keyword::keywords;
use crate::units::TRAFFIC_CLASSES;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQos {
    pub(super) trust: Option<String>,
    #[serde(default)]
    pub(super) dscp_to_tc: BTreeMap<String, i64>,
    #[serde(default)]
    pub(super) pcp_to_tc: BTreeMap<String, i64>,
    #[serde(default)]
    pub(super) dscp_to_pfc_priority: BTreeMap<String, i64>,
    #[serde(default)]
    pub(super) tc_to_pg: BTreeMap<String, i64>,
    #[serde(default)]
    pub(super) pfc_to_queue: BTreeMap<String, i64>,
    #[serde(default)]
    pub(super) lossless: Vec<i64>,
    #[serde(default)]
    pub(super) scheduler: RawScheduler,
    #[serde(default)]
    pub(super) buffer: RawBuffer,
    #[serde(default)]
    pub(super) pfc: RawPfc,
    #[serde(default)]
    pub(super) pfc_watchdog: RawWatchdog,
    #[serde(default)]
    pub(super) ecn: BTreeMap<String, RawEcn>,
    pub(super) trim: Option<RawTrim>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScheduler {
    #[serde(default)]
    pub(super) strict: Vec<i64>,
    #[serde(default)]
    pub(super) dwrr: BTreeMap<String, i64>,
}

keywords! {
    /// Which header field picks the traffic class (`qos.trust`).
    pub enum Trust {
        Dscp => "dscp",
        Pcp => "pcp",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Qos {
    pub trust: Trust,
    pub dscp_to_tc: [u8; 64],
    pub pcp_to_tc: [u8; 8],
    /// With DSCP trust: the PFC priority a frame of each DSCP carries.
    pub dscp_to_priority: [u8; 64],
    /// The ingress priority group each TC is charged to.
    pub tc_to_pg: [u8; TRAFFIC_CLASSES],
    /// The egress queue a received pause for each priority stops.
    pub pfc_to_queue: [u8; 8],
    /// Bit n set: PFC priority n is lossless (`qos.lossless`).
    pub lossless_priorities: u8,
    /// Bit n set: TC n holds a lossless priority's frames (derived).
    pub lossless_tcs: u8,
    /// Bit n set: priority group n holds lossless TCs (derived).
    pub lossless_pgs: u8,
    /// Per priority group: the lossless priorities its XOFF names (derived).
    pub pg_priorities: [u8; TRAFFIC_CLASSES],
    /// Bit n set: TC n is strict priority.
    pub strict_mask: u8,
    /// DWRR weight per TC (1-100; unnamed TCs get 1). Ignored for strict TCs.
    pub dwrr_weights: [u32; TRAFFIC_CLASSES],
    pub buffer: BufferConfig,
    pub pfc: PfcConfig,
    pub watchdog: WatchdogConfig,
    pub ecn: [Option<EcnProfile>; TRAFFIC_CLASSES],
    /// Packet trimming (`[qos.trim]`), off without it.
    pub trim: Option<TrimConfig>,
}

impl Validator<'_> {
    pub(super) fn qos(&self, raw: RawQos) -> Result<Qos, InputError> {
        let trust = self.keyword("qos.trust", raw.trust.as_deref(), Trust::Dscp)?;
        let dscp_to_tc = self.class_map::<64>("qos.dscp_to_tc", ("DSCP", "traffic class"), &raw.dscp_to_tc)?;
        let pcp_to_tc = self.class_map::<8>("qos.pcp_to_tc", ("PCP", "traffic class"), &raw.pcp_to_tc)?;
        let tc_to_pg = self.class_map::<8>("qos.tc_to_pg", ("TC", "priority group"), &identity_map(&raw.tc_to_pg))?;
        let pfc_to_queue =
            self.class_map::<8>("qos.pfc_to_queue", ("priority", "queue"), &identity_map(&raw.pfc_to_queue))?;
        let mut dscp_to_priority = dscp_to_tc;
        if let Some(default) = raw.dscp_to_pfc_priority.get("default") {
            dscp_to_priority = [self.priority("qos.dscp_to_pfc_priority.default", *default)?; 64];
        }
        let named =
            self.class_map::<64>("qos.dscp_to_pfc_priority", ("DSCP", "priority"), &raw.dscp_to_pfc_priority)?;
        for key in raw.dscp_to_pfc_priority.keys().filter_map(|key| key.parse::<usize>().ok()) {
            dscp_to_priority[key] = named[key];
        }
        let mut lossless_priorities = 0u8;
        for priority in &raw.lossless {
            lossless_priorities |= 1 << self.priority("qos.lossless", *priority)?;
        }
        let mut strict_mask = 0u8;
        for tc in &raw.scheduler.strict {
            strict_mask |= 1 << self.traffic_class("qos.scheduler.strict", *tc)?;
        }
        let mut dwrr_weights = [1u32; TRAFFIC_CLASSES];
        for (key, weight) in &raw.scheduler.dwrr {
            let field = format!("qos.scheduler.dwrr.{key}");
            let tc = key.parse::<i64>().map_err(|_| self.error(&field, "key must be a traffic class 0-7"))?;
            let tc = self.traffic_class(&field, tc)?;
            if strict_mask & (1 << tc) != 0 {
                return Err(self.error(&field, format!("TC {tc} is strict; it cannot also have a DWRR weight")));
            }
            if !(1..=100).contains(weight) {
                return Err(self.error(&field, format!("weight {weight} is not 1-100")));
            }
            dwrr_weights[usize::from(tc)] = *weight as u32;
        }
        let mut qos = Qos {
            trust,
            dscp_to_tc,
            pcp_to_tc,
            dscp_to_priority,
            tc_to_pg,
            pfc_to_queue,
            lossless_priorities,
            lossless_tcs: 0,
            lossless_pgs: 0,
            pg_priorities: [0; TRAFFIC_CLASSES],
            strict_mask,
            dwrr_weights,
            buffer: self.buffer(raw.buffer)?,
            pfc: self.pfc(raw.pfc)?,
            watchdog: self.watchdog(raw.pfc_watchdog)?,
            ecn: self.ecn(raw.ecn)?,
            trim: None,
        };
        self.derive_lossless(&mut qos)?;
        if let Some(trim) = raw.trim {
            let maps = TrimMaps { trust: qos.trust, dscp_to_tc: &qos.dscp_to_tc, lossless_tcs: qos.lossless_tcs };
            qos.trim = Some(self.trim(trim, &maps)?);
        }
        Ok(qos)
    }

    /// Which TCs and groups are lossless and which priorities each group's XOFF names; refuses
    /// a group shared by lossless and lossy TCs, and two lossless priorities on one queue.
    fn derive_lossless(&self, qos: &mut Qos) -> Result<(), InputError> {
        for (priority, tcs) in qos.priority_tcs().into_iter().enumerate() {
            if !qos.priority_lossless(priority) {
                continue;
            }
            qos.lossless_tcs |= tcs;
            for tc in (0..TRAFFIC_CLASSES).filter(|tc| tcs & (1 << tc) != 0) {
                let pg = usize::from(qos.tc_to_pg[tc]);
                qos.lossless_pgs |= 1 << pg;
                qos.pg_priorities[pg] |= 1 << priority;
            }
        }
        for tc in 0..TRAFFIC_CLASSES {
            let pg = qos.tc_to_pg[tc];
            if qos.pg_lossless(usize::from(pg)) && !qos.tc_lossless(tc) {
                let other = (0..TRAFFIC_CLASSES)
                    .find(|&other| qos.tc_to_pg[other] == pg && qos.tc_lossless(other))
                    .unwrap_or(tc);
                return Err(self.error(
                    format!("qos.tc_to_pg.{tc}"),
                    format!("TC {tc} is lossy and TC {other} lossless, but both are charged to PG {pg}; a priority group is lossless or lossy"),
                ));
            }
        }
        let mut stopped_by = [None::<usize>; 8];
        for priority in (0..8).filter(|&p| qos.priority_lossless(p)) {
            let queue = usize::from(qos.pfc_to_queue[priority]);
            if let Some(other) = stopped_by[queue] {
                return Err(self.error(
                    format!("qos.pfc_to_queue.{priority}"),
                    format!(
                        "lossless priorities {other} and {priority} both stop queue {queue}; give each its own queue"
                    ),
                ));
            }
            stopped_by[queue] = Some(priority);
        }
        Ok(())
    }

    /// A PFC priority, 0-7.
    fn priority(&self, field: &str, value: i64) -> Result<u8, InputError> {
        self.zero_to_seven(field, "priority", value)
    }

    /// A value 0-7 of some kind (`noun`: a traffic class, a priority group, a priority).
    pub(super) fn zero_to_seven(&self, field: &str, noun: &str, value: i64) -> Result<u8, InputError> {
        u8::try_from(value)
            .ok()
            .filter(|value| *value < 8)
            .ok_or_else(|| self.error(field, format!("{noun} {value} is not 0-7")))
    }

    /// A `{ key = value, ..., default = value }` map from a header field or a class (DSCP 0-63,
    /// PCP, TC or priority 0-7: `key`) to values 0-7 (`value`: a traffic class, a priority
    /// group, a priority); keys not named take the default (0 without one).
    fn class_map<const N: usize>(
        &self,
        name: &str,
        (key_noun, value_noun): (&str, &str),
        raw: &BTreeMap<String, i64>,
    ) -> Result<[u8; N], InputError> {
        let mut map = [0u8; N];
        if let Some(default) = raw.get("default") {
            map = [self.zero_to_seven(&format!("{name}.default"), value_noun, *default)?; N];
        }
        for (key, value) in raw.iter().filter(|(key, _)| key.as_str() != "default") {
            let field = format!("{name}.{key}");
            let index: usize = key
                .parse()
                .ok()
                .filter(|index| *index < N)
                .ok_or_else(|| self.error(&field, format!("{key_noun} must be 0-{} or 'default'", N - 1)))?;
            map[index] = self.zero_to_seven(&field, value_noun, *value)?;
        }
        Ok(map)
    }
}

/// A map whose unnamed keys map to themselves (SONiC's default for `tc_to_pg_map` and
/// `pfc_to_queue_map`), unless it has its own `default`.
fn identity_map(raw: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    let mut map: BTreeMap<String, i64> = if raw.contains_key("default") {
        BTreeMap::new()
    } else {
        (0..8).map(|value| (value.to_string(), value)).collect()
    };
    map.extend(raw.iter().map(|(key, value)| (key.clone(), *value)));
    map
}

impl Qos {
    /// Per PFC priority: the TCs its frames land in (bit n: TC n). A priority no frame
    /// carries (with DSCP trust, no DSCP gives it) lands in the TC of its own number, as
    /// SONiC's identity maps keep PG p lossless for `pfc_enable` p whatever the traffic.
    pub fn priority_tcs(&self) -> [u8; 8] {
        let mut tcs = [0u8; 8];
        match self.trust {
            Trust::Pcp => {
                for (pcp, tc) in self.pcp_to_tc.iter().enumerate() {
                    tcs[pcp] |= 1 << tc;
                }
            }
            Trust::Dscp => {
                for (dscp, tc) in self.dscp_to_tc.iter().enumerate() {
                    tcs[usize::from(self.dscp_to_priority[dscp])] |= 1 << tc;
                }
            }
        }
        for (priority, tcs) in tcs.iter_mut().enumerate() {
            if *tcs == 0 {
                *tcs = 1 << priority;
            }
        }
        tcs
    }

    /// Whether TC `tc` is lossless.
    pub fn tc_lossless(&self, tc: usize) -> bool {
        self.lossless_tcs & (1 << tc) != 0
    }

    /// Whether priority group `pg` is lossless.
    pub fn pg_lossless(&self, pg: usize) -> bool {
        self.lossless_pgs & (1 << pg) != 0
    }

    /// Bit n set: a lossless priority's pause holds egress queue n (`pfc_to_queue`).
    pub fn pausable_queues(&self) -> u8 {
        (0..8)
            .filter(|&priority| self.priority_lossless(priority))
            .fold(0, |queues, priority| queues | 1 << self.pfc_to_queue[priority])
    }

    /// Whether PFC priority `priority` is lossless.
    pub fn priority_lossless(&self, priority: usize) -> bool {
        self.lossless_priorities & (1 << priority) != 0
    }
}
