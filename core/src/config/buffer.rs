//! `[qos.buffer]`, `[qos.pfc]` and `[qos.pfc_watchdog]`: the shared buffer's pools, the PFC
//! thresholds (bytes or "auto") and the watchdog, validated into `BufferConfig`, `PfcConfig`
//! and `WatchdogConfig`. `plan.rs` derives the pools' sizes and the thresholds from them.
//!
//! Invariant: alphas are in (0, 64]; a static XON is not above a static XOFF; the watchdog's
//! times are positive.

use super::Validator;
use crate::error::InputError;
use crate::keyword::keywords;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuffer {
    pub(super) lossless_pool_bytes: Option<u64>,
    pub(super) lossy_pool_bytes: Option<u64>,
    pub(super) lossy_alpha: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPfc {
    pub(super) headroom_bytes: Option<toml::Value>,
    pub(super) xoff_bytes: Option<toml::Value>,
    pub(super) xon_bytes: Option<toml::Value>,
    pub(super) alpha: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWatchdog {
    pub(super) detection_ms: Option<u32>,
    pub(super) restoration_ms: Option<u32>,
    pub(super) action: Option<String>,
}

/// A byte threshold given as a number or derived ("auto").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Auto,
    Bytes(u64),
}

/// The shared buffer's pools (`[qos.buffer]`); `pfc::BufferPlan` derives their sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferConfig {
    /// Ingress pool the lossless groups share up to their XOFF points (headroom apart).
    pub lossless_pool_bytes: Option<u64>,
    /// Egress pool the lossy queues share, each up to its dynamic limit.
    pub lossy_pool_bytes: Option<u64>,
    /// A lossy queue may hold up to lossy_alpha x the free lossy pool (SONiC's
    /// `dynamic_th: 3` is alpha 2^3 = 8).
    pub lossy_alpha: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PfcConfig {
    pub headroom_bytes: Threshold,
    pub xoff_bytes: Threshold,
    pub xon_bytes: Threshold,
    pub alpha: f64,
}

keywords! {
    /// What the PFC watchdog does in a storm (`qos.pfc_watchdog.action`).
    pub enum WatchdogAction {
        Drop => "drop",
        Forward => "forward",
        Alert => "alert",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WatchdogConfig {
    pub detection_ms: u32,
    pub restoration_ms: u32,
    pub action: WatchdogAction,
}

impl Validator<'_> {
    fn threshold(&self, field: &str, value: Option<toml::Value>) -> Result<Threshold, InputError> {
        match value {
            None => Ok(Threshold::Auto),
            Some(toml::Value::String(text)) if text == "auto" => Ok(Threshold::Auto),
            Some(toml::Value::Integer(bytes)) if bytes >= 0 => Ok(Threshold::Bytes(bytes as u64)),
            Some(other) => {
                Err(self.error(field, format!("a {} is neither \"auto\" nor a byte count", other.type_str())))
            }
        }
    }

    pub(super) fn buffer(&self, raw: RawBuffer) -> Result<BufferConfig, InputError> {
        let lossy_alpha = raw.lossy_alpha.unwrap_or(8.0);
        if !(lossy_alpha.is_finite() && lossy_alpha > 0.0 && lossy_alpha <= 64.0) {
            return Err(
                self.error("qos.buffer.lossy_alpha", format!("{lossy_alpha} is not between 0 (exclusive) and 64"))
            );
        }
        Ok(BufferConfig {
            lossless_pool_bytes: raw.lossless_pool_bytes,
            lossy_pool_bytes: raw.lossy_pool_bytes,
            lossy_alpha,
        })
    }

    pub(super) fn pfc(&self, raw: RawPfc) -> Result<PfcConfig, InputError> {
        let alpha = raw.alpha.unwrap_or(1.0);
        if !(alpha.is_finite() && alpha > 0.0 && alpha <= 64.0) {
            return Err(self.error("qos.pfc.alpha", format!("{alpha} is not between 0 (exclusive) and 64")));
        }
        let pfc = PfcConfig {
            headroom_bytes: self.threshold("qos.pfc.headroom_bytes", raw.headroom_bytes)?,
            xoff_bytes: self.threshold("qos.pfc.xoff_bytes", raw.xoff_bytes)?,
            xon_bytes: self.threshold("qos.pfc.xon_bytes", raw.xon_bytes)?,
            alpha,
        };
        if let (Threshold::Bytes(xoff), Threshold::Bytes(xon)) = (pfc.xoff_bytes, pfc.xon_bytes) {
            if xon > xoff {
                return Err(self.error("qos.pfc.xon_bytes", format!("xon {xon} is above xoff {xoff}")));
            }
        }
        Ok(pfc)
    }

    pub(super) fn watchdog(&self, raw: RawWatchdog) -> Result<WatchdogConfig, InputError> {
        let detection_ms = raw.detection_ms.unwrap_or(200);
        if detection_ms == 0 {
            return Err(self.error("qos.pfc_watchdog.detection_ms", "must be positive"));
        }
        let action = self.keyword("qos.pfc_watchdog.action", raw.action.as_deref(), WatchdogAction::Drop)?;
        // SONiC's defaults: 200 ms to detect, 200 ms without PFC to restore.
        let restoration_ms = raw.restoration_ms.unwrap_or(200);
        if restoration_ms == 0 {
            return Err(self.error("qos.pfc_watchdog.restoration_ms", "must be positive"));
        }
        Ok(WatchdogConfig { detection_ms, restoration_ms, action })
    }
}
