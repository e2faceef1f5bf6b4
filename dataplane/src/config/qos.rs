//! `[qos]`: trust, the DSCP and PCP maps to traffic classes, the lossless priorities and the
//! scheduler, validated into `Qos` together with the buffer, PFC, watchdog and ECN sections
//! below it (`buffer.rs`, `ecn.rs`).
//!
//! Invariant: every map entry is a valid DSCP (0-63) or PCP (0-7) to a TC 0-7; a TC is strict
//! or weighted (1-100), never both.

use super::buffer::{RawBuffer, RawPfc, RawWatchdog};
use super::ecn::RawEcn;
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
    /// Bit n set: priority n is lossless.
    pub lossless_mask: u8,
    /// Bit n set: TC n is strict priority.
    pub strict_mask: u8,
    /// DWRR weight per TC (1-100; unnamed TCs get 1). Ignored for strict TCs.
    pub dwrr_weights: [u32; TRAFFIC_CLASSES],
    pub buffer: BufferConfig,
    pub pfc: PfcConfig,
    pub watchdog: WatchdogConfig,
    pub ecn: [Option<EcnProfile>; TRAFFIC_CLASSES],
}

impl Validator<'_> {
    pub(super) fn qos(&self, raw: RawQos) -> Result<Qos, InputError> {
        let trust = self.keyword("qos.trust", raw.trust.as_deref(), Trust::Dscp)?;
        let dscp_to_tc = self.class_map::<64>("qos.dscp_to_tc", "DSCP", &raw.dscp_to_tc)?;
        let pcp_to_tc = self.class_map::<8>("qos.pcp_to_tc", "PCP", &raw.pcp_to_tc)?;
        let mut lossless_mask = 0u8;
        for priority in &raw.lossless {
            lossless_mask |= 1 << self.traffic_class("qos.lossless", *priority)?;
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
        Ok(Qos {
            trust,
            dscp_to_tc,
            pcp_to_tc,
            lossless_mask,
            strict_mask,
            dwrr_weights,
            buffer: self.buffer(raw.buffer)?,
            pfc: self.pfc(raw.pfc)?,
            watchdog: self.watchdog(raw.pfc_watchdog)?,
            ecn: self.ecn(raw.ecn)?,
        })
    }

    /// A `{ value = tc, ..., default = tc }` map from a header field (DSCP 0-63, PCP 0-7) to
    /// traffic classes; values not named take the default (TC 0 without one).
    fn class_map<const N: usize>(
        &self,
        name: &str,
        what: &str,
        raw: &BTreeMap<String, i64>,
    ) -> Result<[u8; N], InputError> {
        let mut map = [0u8; N];
        if let Some(default) = raw.get("default") {
            map = [self.traffic_class(&format!("{name}.default"), *default)?; N];
        }
        for (key, tc) in raw.iter().filter(|(key, _)| key.as_str() != "default") {
            let field = format!("{name}.{key}");
            let value: usize = key
                .parse()
                .ok()
                .filter(|value| *value < N)
                .ok_or_else(|| self.error(&field, format!("{what} must be 0-{} or 'default'", N - 1)))?;
            map[value] = self.traffic_class(&field, *tc)?;
        }
        Ok(map)
    }
}
