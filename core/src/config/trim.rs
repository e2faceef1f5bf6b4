//! `[qos.trim]`: packet trimming, as SONiC's packet trimming design and Cumulus Linux
//! configure it. A frame the shared buffer refuses in an eligible egress queue is cut to
//! `size` bytes, remarked to a trim DSCP (`dscp`, or per egress class `tc_to_dscp`: SONiC's
//! asymmetric mode) and queued in the trim queue (`queue`, or the trim DSCP's own class:
//! SONiC's "dynamic" queue resolution). `classes` are the queues whose buffer profile's
//! discard action is "trim"; `[[port]] trim = false` takes a port out (Cumulus's port
//! eligibility). Validated into `TrimConfig`; `tm::trim` cuts and `switch` applies it.
//!
//! Invariant: a `TrimConfig` never trims a lossless class (PFC keeps those frames: the buffer
//! never refuses them for trimming to catch) and never queues a trimmed frame in a lossless
//! class; every class's trim DSCP is 0-63 and its trim queue 0-7.

use super::{Trust, Validator};
use crate::error::InputError;
use crate::units::TRAFFIC_CLASSES;
use serde::Deserialize;
use std::collections::BTreeMap;

/// SONiC's default trim size (Cumulus takes 256-1,024).
pub const DEFAULT_TRIM_BYTES: u16 = 128;
/// The bounds of `size`: a minimum Ethernet frame, and the largest jumbo frame a port takes.
pub const TRIM_BYTES: std::ops::RangeInclusive<i64> = 64..=9216;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrim {
    size: Option<i64>,
    dscp: Option<i64>,
    #[serde(default)]
    tc_to_dscp: BTreeMap<String, i64>,
    queue: Option<i64>,
    classes: Option<Vec<i64>>,
}

/// Validated `[qos.trim]`, resolved per egress class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimConfig {
    /// Bytes a trimmed frame keeps (its headers are kept whole if they are longer).
    pub size: u16,
    /// Per egress class a frame is refused in: the DSCP its trimmed frame carries.
    pub dscp: [u8; TRAFFIC_CLASSES],
    /// Per egress class a frame is refused in: the queue its trimmed frame waits in.
    pub queue: [u8; TRAFFIC_CLASSES],
    /// Bit n set: class n trims what the buffer refuses.
    pub classes: u8,
    /// Whether `queue` was given (else each trim DSCP's class).
    pub fixed_queue: bool,
}

impl TrimConfig {
    /// Whether class `tc` trims.
    #[inline]
    pub fn trims(&self, tc: usize) -> bool {
        self.classes & (1 << tc) != 0
    }
}

/// What `[qos.trim]` is validated against: the QoS maps already validated (`config::qos`
/// hands them over, so that this section needs nothing of that one's).
pub(super) struct TrimMaps<'a> {
    pub(super) trust: Trust,
    pub(super) dscp_to_tc: &'a [u8; 64],
    /// Bit n set: class n is lossless.
    pub(super) lossless_tcs: u8,
}

impl TrimMaps<'_> {
    fn tc_lossless(&self, tc: usize) -> bool {
        self.lossless_tcs & (1 << tc) != 0
    }
}

impl Validator<'_> {
    /// `[qos.trim]` against the validated QoS maps (lossless classes, DSCP trust).
    pub(super) fn trim(&self, raw: RawTrim, qos: &TrimMaps) -> Result<TrimConfig, InputError> {
        let size = raw.size.unwrap_or(i64::from(DEFAULT_TRIM_BYTES));
        if !TRIM_BYTES.contains(&size) {
            return Err(self.error(
                "qos.trim.size",
                format!("{size} is not between {} and {} bytes", TRIM_BYTES.start(), TRIM_BYTES.end()),
            ));
        }
        let dscp = match (raw.dscp, raw.tc_to_dscp.is_empty()) {
            (Some(_), false) => {
                return Err(self.error("qos.trim", "give dscp (one for every class) or tc_to_dscp, not both"))
            }
            (None, true) => {
                return Err(self.error("qos.trim", "give dscp or tc_to_dscp: the DSCP trimmed frames carry"))
            }
            (Some(dscp), true) => [self.dscp("qos.trim.dscp", dscp)?; TRAFFIC_CLASSES],
            (None, false) => self.tc_to_dscp(&raw.tc_to_dscp)?,
        };
        let fixed_queue = raw.queue.is_some();
        let queue = match raw.queue {
            Some(queue) => [self.traffic_class("qos.trim.queue", queue)?; TRAFFIC_CLASSES],
            None if qos.trust == Trust::Pcp => {
                return Err(self
                    .error("qos.trim.queue", "with trust = \"pcp\" the trim DSCP picks no class here: name the queue"))
            }
            None => dscp.map(|dscp| qos.dscp_to_tc[usize::from(dscp)]),
        };
        let classes = match raw.classes {
            Some(classes) => {
                let mut mask = 0u8;
                for tc in classes {
                    let tc = self.traffic_class("qos.trim.classes", tc)?;
                    if qos.tc_lossless(usize::from(tc)) {
                        return Err(self.error(
                            "qos.trim.classes",
                            format!("TC {tc} is lossless: PFC keeps its frames, the buffer never refuses one to trim"),
                        ));
                    }
                    mask |= 1 << tc;
                }
                mask
            }
            // Every lossy class but the ones trimmed frames wait in: a trimmed frame refused
            // again is dropped, not trimmed twice.
            None => (0..TRAFFIC_CLASSES)
                .filter(|&tc| !qos.tc_lossless(tc) && !queue.contains(&(tc as u8)))
                .fold(0, |mask, tc| mask | 1 << tc),
        };
        for tc in (0..TRAFFIC_CLASSES).filter(|tc| classes & (1 << tc) != 0) {
            let target = usize::from(queue[tc]);
            if qos.tc_lossless(target) {
                let why = if fixed_queue { String::new() } else { format!(" (DSCP {}'s class)", dscp[tc]) };
                return Err(self.error(
                    "qos.trim.queue",
                    format!(
                        "queue {target}{why} is lossless: a trimmed frame must wait in a lossy queue, which may drop it"
                    ),
                ));
            }
        }
        Ok(TrimConfig { size: size as u16, dscp, queue, classes, fixed_queue })
    }

    /// `tc_to_dscp = { 0 = 10, 3 = 11, default = 48 }`: the trim DSCP per egress class (0
    /// where neither the class nor `default` is named).
    fn tc_to_dscp(&self, raw: &BTreeMap<String, i64>) -> Result<[u8; TRAFFIC_CLASSES], InputError> {
        let mut map = [0u8; TRAFFIC_CLASSES];
        if let Some(default) = raw.get("default") {
            map = [self.dscp("qos.trim.tc_to_dscp.default", *default)?; TRAFFIC_CLASSES];
        }
        for (key, value) in raw.iter().filter(|(key, _)| key.as_str() != "default") {
            let field = format!("qos.trim.tc_to_dscp.{key}");
            let tc =
                key.parse::<i64>().map_err(|_| self.error(&field, "key must be a traffic class 0-7 or 'default'"))?;
            map[usize::from(self.traffic_class(&field, tc)?)] = self.dscp(&field, *value)?;
        }
        Ok(map)
    }

    pub(super) fn dscp(&self, field: &str, value: i64) -> Result<u8, InputError> {
        u8::try_from(value)
            .ok()
            .filter(|dscp| *dscp < 64)
            .ok_or_else(|| self.error(field, format!("DSCP {value} is not 0-63")))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn parse(qos: &str, trim: &str, port: &str) -> Result<Config, String> {
        let text = format!(
            "[switch]\nname = \"t\"\nmac = \"02:00:00:00:00:01\"\n[qos]\n{qos}\n[qos.trim]\n{trim}\n\
             [[port]]\nname = \"p0\"\nspeed_gbps = 100\npeer_mac = \"02:00:00:00:10:00\"\n{port}\n"
        );
        Config::parse(&text, "t.toml").map_err(|err| err.to_string())
    }

    const ROCE: &str = "dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }\nlossless = [3]";

    #[test]
    fn one_dscp_and_its_class_as_the_queue_every_lossy_class_but_that_one_trims() {
        let config = parse(ROCE, "dscp = 48", "").unwrap();
        let trim = config.qos.trim.unwrap();
        assert_eq!(trim.size, 128, "SONiC's default");
        assert_eq!((trim.dscp, trim.queue), ([48; 8], [6; 8]));
        assert_eq!(trim.classes, 0b1011_0111, "not lossless 3, not the trim queue 6");
        assert!(!trim.fixed_queue);
        assert!(config.ports[0].trim, "ports trim unless they opt out");
    }

    #[test]
    fn a_dscp_per_class_with_a_fixed_queue() {
        let config = parse(
            ROCE,
            "size = 256\ntc_to_dscp = { 0 = 10, default = 11 }\nqueue = 7\nclasses = [0, 1]",
            "trim = false",
        )
        .unwrap();
        let trim = config.qos.trim.unwrap();
        assert_eq!(
            (trim.size, trim.dscp, trim.queue, trim.classes),
            (256, [10, 11, 11, 11, 11, 11, 11, 11], [7; 8], 0b11)
        );
        assert!(!config.ports[0].trim);
    }

    #[test]
    fn bad_trim_settings_name_their_field() {
        let cases = [
            (ROCE, "dscp = 48\nsize = 32", "qos.trim.size: 32 is not between 64 and 9216 bytes"),
            (ROCE, "dscp = 64", "qos.trim.dscp: DSCP 64 is not 0-63"),
            (ROCE, "size = 128", "qos.trim: give dscp or tc_to_dscp"),
            (ROCE, "dscp = 48\ntc_to_dscp = { 0 = 1 }", "not both"),
            (ROCE, "tc_to_dscp = { x = 1 }", "qos.trim.tc_to_dscp.x: key must be a traffic class"),
            (ROCE, "dscp = 48\nclasses = [3]", "qos.trim.classes: TC 3 is lossless"),
            (ROCE, "dscp = 48\nclasses = [8]", "qos.trim.classes: traffic class 8 is not 0-7"),
            (ROCE, "dscp = 26", "qos.trim.queue: queue 3 (DSCP 26's class) is lossless"),
            (ROCE, "dscp = 48\nqueue = 3", "qos.trim.queue: queue 3 is lossless"),
            ("trust = \"pcp\"", "dscp = 48", "qos.trim.queue: with trust = \"pcp\""),
        ];
        for (qos, trim, expected) in cases {
            let err = parse(qos, trim, "").unwrap_err();
            assert!(err.contains(expected), "{trim}: {err}");
        }
    }
}
