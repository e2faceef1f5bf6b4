//! `[qos.ecn.<tc>]`: a traffic class's ECN marking profile (WRED-style kmin, kmax, pmax;
//! where it marks and what it measures), validated into `EcnProfile`; `tm::ecn` applies it.
//!
//! Invariant: kmin is not above kmax, and pmax is a probability.

use super::Validator;
use crate::error::InputError;
use crate::keyword::keywords;
use crate::units::TRAFFIC_CLASSES;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEcn {
    pub(super) kmin_bytes: u64,
    pub(super) kmax_bytes: u64,
    pub(super) pmax: f64,
    pub(super) mark_on: Option<String>,
    pub(super) measure: Option<String>,
}

keywords! {
    /// When an ECN profile marks (`qos.ecn.N.mark_on`).
    pub enum MarkOn {
        Enqueue => "enqueue",
        Dequeue => "dequeue",
    }
}

keywords! {
    /// What an ECN profile's kmin and kmax are compared with (`qos.ecn.N.measure`).
    pub enum EcnMeasure {
        /// The buffer cells the queue's frames hold (`config::plan::CELL_BYTES` each), as Broadcom
        /// and Spectrum WRED profiles compare buffer occupancy: the unit XOFF points are in.
        Cells => "cells",
        /// The frame bytes queued: a 60-byte frame counts 60, not the 256 it holds.
        FrameBytes => "frame_bytes",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EcnProfile {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
    pub mark_on: MarkOn,
    pub measure: EcnMeasure,
}

impl Validator<'_> {
    pub(super) fn ecn(
        &self,
        raw: BTreeMap<String, RawEcn>,
    ) -> Result<[Option<EcnProfile>; TRAFFIC_CLASSES], InputError> {
        let mut profiles: [Option<EcnProfile>; TRAFFIC_CLASSES] = Default::default();
        for (key, profile) in raw {
            let field = format!("qos.ecn.{key}");
            let tc = key.parse::<i64>().map_err(|_| self.error(&field, "key must be a traffic class 0-7"))?;
            let tc = self.traffic_class(&field, tc)?;
            if profile.kmin_bytes > profile.kmax_bytes {
                return Err(self.error(
                    format!("{field}.kmin_bytes"),
                    format!("kmin {} is above kmax {}", profile.kmin_bytes, profile.kmax_bytes),
                ));
            }
            if !(profile.pmax.is_finite() && (0.0..=1.0).contains(&profile.pmax)) {
                return Err(self.error(format!("{field}.pmax"), format!("{} is not a probability 0-1", profile.pmax)));
            }
            let mark_on = self.keyword(&format!("{field}.mark_on"), profile.mark_on.as_deref(), MarkOn::Enqueue)?;
            let measure = self.keyword(&format!("{field}.measure"), profile.measure.as_deref(), EcnMeasure::Cells)?;
            profiles[usize::from(tc)] = Some(EcnProfile {
                kmin_bytes: profile.kmin_bytes,
                kmax_bytes: profile.kmax_bytes,
                pmax: profile.pmax,
                mark_on,
                measure,
            });
        }
        Ok(profiles)
    }
}
