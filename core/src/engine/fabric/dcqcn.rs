//! DCQCN rate control of one sending queue pair (Zhu et al., "Congestion Control for
//! Large-Scale RDMA Deployments", SIGCOMM 2015), as RoCE NICs run it.
//!
//! Reaction point: on a CNP the current rate RC is cut by alpha/2 (alpha is the EWMA of
//! congestion, raised by each CNP and decayed every `alpha_update_us` without one), and the
//! target RT remembers the rate before the cut. Recovery: a timer (`rate_increase_us`) and a
//! byte counter (`byte_counter_bytes`) each count stages; for the first `fast_recovery_stages`
//! stages RC moves halfway to RT (fast recovery), then RT grows by `additive_increase_mbps`
//! (additive) and, once both counters are past the fast stages, by a growing hyper step: the
//! k-th stage past fast recovery on both counters adds k x `hyper_increase_mbps`, as QCN's
//! hyper-active increase and the DCQCN authors' released simulator (ns3-rdma) do. Rates stay
//! within [min_rate, line rate]. Cuts happen at most once per `rate_decrease_interval_us`.
//!
//! Invariant: the rate is always within [min_rate_mbps, line rate], and the state changes only
//! through `on_cnp`, `on_bytes_sent` and `advance`, all in virtual time, so runs are
//! deterministic.

use crate::keyword::keywords;
use serde::{Deserialize, Serialize};

keywords! {
    /// A named set of DCQCN parameters to start from (`[dcqcn] preset`); keys given beside it
    /// override it.
    pub enum DcqcnPreset {
        /// raceway's: the authors' released settings, recovery scaled to 100G (below).
        Default => "default",
        /// The DCQCN paper's (SIGCOMM 2015, its 40G testbed): a byte-counter stage every
        /// 10 MB, 5 fast-recovery stages, Rai 40 Mb/s, Rhai 200 Mb/s.
        Paper => "paper",
    }
}

/// DCQCN parameters. Defaults: the authors' released settings (alpha gain g = 1/256, as
/// ns3-rdma's `DCTCP_GAIN 0.00390625` and HPCC's `EWMA_GAIN`; the paper's text suggests 1/16;
/// alpha decay and a recovery stage every 55 us, at most one cut per 4 us, 100 Mb/s floor;
/// receivers send at most one CNP per QP per 50 us) with the recovery steps scaled to 100G
/// links: a byte-counter
/// stage every 256 KiB, one fast-recovery stage, then additive steps of 1 Gb/s and hyper steps
/// of 5 Gb/s (1% and 5% of line rate). Measured on the 2x2 leaf-spine of docs/FABRIC.md: the
/// paper's 40G steps (40/200 Mb/s, 10 MB byte counter, 5 fast stages) starve a 100G incast
/// for milliseconds after the first cuts; NIC-style 32 KiB byte counters recover so fast that
/// PFC pauses hardly change; these remove PFC pauses for a 16-40% longer all-to-all/incast.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnParams {
    /// Senders react to CNPs and receivers send them; false runs every sender at line rate
    /// (ECN marks are then only counted).
    pub enabled: bool,
    /// EWMA gain of alpha.
    pub g: f64,
    pub alpha_update_us: f64,
    pub rate_increase_us: f64,
    pub byte_counter_bytes: u64,
    pub fast_recovery_stages: u32,
    pub additive_increase_mbps: f64,
    pub hyper_increase_mbps: f64,
    pub min_rate_mbps: f64,
    pub rate_decrease_interval_us: f64,
    /// Receiver side: the least time between two CNPs for one QP.
    pub cnp_interval_us: f64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        Self {
            enabled: true,
            g: 1.0 / 256.0,
            alpha_update_us: 55.0,
            rate_increase_us: 55.0,
            byte_counter_bytes: 256 * 1024,
            fast_recovery_stages: 1,
            additive_increase_mbps: 1000.0,
            hyper_increase_mbps: 5000.0,
            min_rate_mbps: 100.0,
            rate_decrease_interval_us: 4.0,
            cnp_interval_us: 50.0,
        }
    }
}

impl DcqcnParams {
    /// The parameters of a preset.
    pub fn preset(preset: DcqcnPreset) -> Self {
        match preset {
            DcqcnPreset::Default => Self::default(),
            DcqcnPreset::Paper => Self {
                byte_counter_bytes: 10 * 1024 * 1024,
                fast_recovery_stages: 5,
                additive_increase_mbps: 40.0,
                hyper_increase_mbps: 200.0,
                ..Self::default()
            },
        }
    }

    /// A `[dcqcn]` table: its `preset` (default: "default"), then the keys it gives. The error
    /// names the key and the problem.
    pub fn from_table(mut table: toml::Table) -> Result<Self, (String, String)> {
        let preset = match table.remove("preset") {
            None => DcqcnPreset::Default,
            Some(toml::Value::String(word)) => {
                DcqcnPreset::parse(&word).map_err(|problem| ("dcqcn.preset".to_string(), problem))?
            }
            Some(other) => return Err(("dcqcn.preset".into(), format!("{other} is not a preset name"))),
        };
        let mut merged =
            toml::Table::try_from(Self::preset(preset)).map_err(|err| ("dcqcn".into(), err.to_string()))?;
        merged.extend(table);
        let params: Self = toml::Value::Table(merged)
            .try_into()
            .map_err(|err: toml::de::Error| ("dcqcn".to_string(), err.message().to_string()))?;
        params.validate().map_err(|problem| (String::new(), problem))?;
        Ok(params)
    }

    /// Checks the parameters; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("dcqcn.g", self.g),
            ("dcqcn.alpha_update_us", self.alpha_update_us),
            ("dcqcn.rate_increase_us", self.rate_increase_us),
            ("dcqcn.min_rate_mbps", self.min_rate_mbps),
            ("dcqcn.cnp_interval_us", self.cnp_interval_us),
        ];
        if let Some((field, value)) = positive.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return Err(format!("{field}: {value} is not positive"));
        }
        if self.g > 1.0 {
            return Err(format!("dcqcn.g: {} is above 1", self.g));
        }
        if self.byte_counter_bytes == 0 {
            return Err("dcqcn.byte_counter_bytes: must be positive".into());
        }
        for (field, value) in [
            ("dcqcn.additive_increase_mbps", self.additive_increase_mbps),
            ("dcqcn.hyper_increase_mbps", self.hyper_increase_mbps),
            ("dcqcn.rate_decrease_interval_us", self.rate_decrease_interval_us),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!("{field}: {value} is negative or not a number"));
            }
        }
        Ok(())
    }
}

fn us_to_ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

/// One queue pair's reaction point.
#[derive(Debug, Clone)]
pub struct RateControl {
    line_mbps: f64,
    /// Current rate RC and target rate RT, Mb/s.
    current: f64,
    target: f64,
    alpha: f64,
    /// Stages counted by the timer and the byte counter since the last cut.
    timer_stages: u32,
    byte_stages: u32,
    bytes_since_stage: u64,
    next_alpha_update: u64,
    next_rate_increase: u64,
    last_cut: Option<u64>,
    /// Cuts applied (CNPs that changed the rate).
    pub cuts: u64,
}

impl RateControl {
    pub fn new(line_mbps: f64) -> Self {
        Self {
            line_mbps,
            current: line_mbps,
            target: line_mbps,
            alpha: 1.0,
            timer_stages: 0,
            byte_stages: 0,
            bytes_since_stage: 0,
            next_alpha_update: u64::MAX,
            next_rate_increase: u64::MAX,
            last_cut: None,
            cuts: 0,
        }
    }

    /// The rate the queue pair may send at, Mb/s.
    pub fn rate_mbps(&self) -> f64 {
        self.current
    }

    /// When the rate next changes by itself (a recovery stage), or u64::MAX at line rate.
    pub fn next_event(&self) -> u64 {
        self.next_rate_increase
    }

    /// A CNP arrived at `now` (ps).
    pub fn on_cnp(&mut self, params: &DcqcnParams, now: u64) {
        self.advance(params, now);
        if self.last_cut.is_some_and(|at| now < at + us_to_ps(params.rate_decrease_interval_us)) {
            return;
        }
        self.last_cut = Some(now);
        self.cuts += 1;
        self.target = self.current;
        self.current = (self.current * (1.0 - self.alpha / 2.0)).max(params.min_rate_mbps);
        self.alpha = (1.0 - params.g) * self.alpha + params.g;
        self.timer_stages = 0;
        self.byte_stages = 0;
        self.bytes_since_stage = 0;
        self.next_alpha_update = now + us_to_ps(params.alpha_update_us);
        self.next_rate_increase = now + us_to_ps(params.rate_increase_us);
    }

    /// When `bits` sent from `from` at this queue pair's rate are through, taking the recovery
    /// stages its timer brings meanwhile: the rate limiter's gap to the next frame follows
    /// the rate as it rises, rather than staying what the rate was when the frame left (at
    /// the 100 Mb/s floor a 4 KiB frame's gap is 334 us, six recovery periods).
    pub fn send_time(&self, params: &DcqcnParams, bits: u64, from: u64) -> u64 {
        let through = |at: u64, bits: f64, rate: f64| at + (bits * 1e6 / rate).ceil() as u64;
        let mut end = through(from, bits as f64, self.current);
        if end <= self.next_rate_increase {
            return end;
        }
        let mut ahead = self.clone();
        let (mut at, mut left) = (from, bits as f64);
        while end > ahead.next_rate_increase {
            let stage = ahead.next_rate_increase;
            left -= (stage - at) as f64 * ahead.current / 1e6;
            at = stage;
            ahead.advance(params, stage);
            end = through(at, left.max(0.0), ahead.current);
        }
        end
    }

    /// `bytes` were sent at `now`: the byte counter may complete a recovery stage.
    pub fn on_bytes_sent(&mut self, params: &DcqcnParams, bytes: u64, now: u64) {
        if self.current >= self.line_mbps && self.target >= self.line_mbps {
            return;
        }
        self.bytes_since_stage += bytes;
        while self.bytes_since_stage >= params.byte_counter_bytes {
            self.bytes_since_stage -= params.byte_counter_bytes;
            self.byte_stages += 1;
            self.increase(params);
        }
        self.advance(params, now);
    }

    /// Runs the timers due by `now`. Alpha keeps decaying while the rate is back at line
    /// rate (a later CNP must find it small), computed for all the periods at once.
    pub fn advance(&mut self, params: &DcqcnParams, now: u64) {
        if self.next_alpha_update <= now {
            let period = us_to_ps(params.alpha_update_us).max(1);
            let periods = (now - self.next_alpha_update) / period + 1;
            self.alpha *= (1.0 - params.g).powf(periods as f64);
            self.next_alpha_update += periods * period;
        }
        while self.next_rate_increase <= now {
            self.timer_stages += 1;
            self.increase(params);
            self.next_rate_increase = if self.current >= self.line_mbps {
                u64::MAX
            } else {
                self.next_rate_increase + us_to_ps(params.rate_increase_us)
            };
        }
    }

    fn increase(&mut self, params: &DcqcnParams) {
        let fast = params.fast_recovery_stages;
        if self.timer_stages > fast && self.byte_stages > fast {
            let hyper_stage = self.timer_stages.min(self.byte_stages) - fast;
            self.target += params.hyper_increase_mbps * f64::from(hyper_stage);
        } else if self.timer_stages > fast || self.byte_stages > fast {
            self.target += params.additive_increase_mbps;
        }
        self.target = self.target.min(self.line_mbps);
        self.current = ((self.current + self.target) / 2.0).min(self.line_mbps);
        if self.line_mbps - self.current < 1e-6 {
            self.current = self.line_mbps;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_to_the_next_frame_follows_the_rate_as_recovery_raises_it() {
        let params = DcqcnParams::default();
        let mut rate = RateControl::new(100_000.0);
        // At the 100 Mb/s floor, the target at line rate, a recovery stage due at 55 us.
        rate.current = 100.0;
        rate.next_rate_increase = 55_000_000;
        // A 4 KiB frame's 33,424 wire bits take 334.24 us at 100 Mb/s. By the stage, 5,500
        // are through; fast recovery then moves the rate halfway to the target, 50,050 Mb/s,
        // and the other 27,924 take 0.558 us.
        assert_eq!(rate.send_time(&params, 33_424, 0), 55_000_000 + 557_923);
        // The same from 10 us, the stage at 65 us: only what is left of the gap moves.
        rate.next_rate_increase = 65_000_000;
        assert_eq!(rate.send_time(&params, 33_424, 10_000_000), 65_000_000 + 557_923);
        rate.next_rate_increase = 55_000_000;
        // Done before the stage: the plain gap.
        assert_eq!(rate.send_time(&params, 1_000, 0), 10_000_000);
        // At line rate no stage is due.
        assert_eq!(RateControl::new(100_000.0).send_time(&params, 33_424, 7), 7 + 334_240);
    }

    #[test]
    fn a_cnp_cuts_by_half_alpha_and_recovery_returns_to_line_rate() {
        let params = DcqcnParams::default();
        let mut rc = RateControl::new(100_000.0);
        rc.on_cnp(&params, 0);
        // alpha starts at 1: the first cut halves the rate.
        assert!((rc.rate_mbps() - 50_000.0).abs() < 1e-6);
        // A second CNP within the decrease interval changes nothing.
        rc.on_cnp(&params, 1_000_000);
        assert!((rc.rate_mbps() - 50_000.0).abs() < 1e-6);
        assert_eq!(rc.cuts, 1);
        // Fast recovery: each timer stage halves the distance to the target (100G).
        rc.advance(&params, us_to_ps(params.rate_increase_us));
        assert!((rc.rate_mbps() - 75_000.0).abs() < 1e-6);
        // Long enough without CNPs, it is back at line rate and its timers stop.
        rc.advance(&params, us_to_ps(params.rate_increase_us * 60.0));
        assert_eq!(rc.rate_mbps(), 100_000.0);
        assert_eq!(rc.next_event(), u64::MAX);
    }

    #[test]
    fn repeated_cnps_never_go_below_the_floor() {
        let params = DcqcnParams::default();
        let mut rc = RateControl::new(100_000.0);
        for i in 0..1000u64 {
            rc.on_cnp(&params, i * us_to_ps(5.0));
        }
        assert!(rc.rate_mbps() >= params.min_rate_mbps);
        assert!(rc.rate_mbps() < 1000.0, "{}", rc.rate_mbps());
    }

    #[test]
    fn hyper_increase_grows_with_each_stage_past_fast_recovery() {
        // Fast recovery for 1 stage; a byte-counter stage every 1000 bytes, and the timer far.
        let params = DcqcnParams {
            fast_recovery_stages: 1,
            byte_counter_bytes: 1000,
            additive_increase_mbps: 10.0,
            hyper_increase_mbps: 100.0,
            ..DcqcnParams::default()
        };
        let step = us_to_ps(params.rate_increase_us);
        // Two cuts, so that the target sits below line rate; then both counters go past fast
        // recovery, the timer first.
        let mut rc = RateControl::new(100_000.0);
        rc.on_cnp(&params, 0);
        rc.on_cnp(&params, us_to_ps(10.0));
        let target = rc.target;
        rc.advance(&params, us_to_ps(10.0) + 3 * step); // timer stages 1, 2, 3: +0, +10, +10
        assert!((rc.target - (target + 20.0)).abs() < 1e-6, "{}", rc.target - target);
        rc.on_bytes_sent(&params, 1000, us_to_ps(10.0) + 3 * step); // byte stage 1: still additive
        assert!((rc.target - (target + 30.0)).abs() < 1e-6, "{}", rc.target - target);
        rc.on_bytes_sent(&params, 1000, us_to_ps(10.0) + 3 * step); // byte 2: hyper stage 1
        assert!((rc.target - (target + 130.0)).abs() < 1e-6, "{}", rc.target - target);
        rc.on_bytes_sent(&params, 1000, us_to_ps(10.0) + 3 * step); // byte 3: hyper stage 2
        assert!((rc.target - (target + 330.0)).abs() < 1e-6, "{}", rc.target - target);
    }

    #[test]
    fn the_default_alpha_gain_is_the_authors_1_in_256() {
        let params = DcqcnParams::default();
        assert_eq!(params.g, 1.0 / 256.0);
        let mut rc = RateControl::new(100_000.0);
        rc.on_cnp(&params, 0);
        assert!((rc.alpha - (1.0 - 1.0 / 256.0 + 1.0 / 256.0)).abs() < 1e-12);
        rc.advance(&params, us_to_ps(params.alpha_update_us));
        assert!((rc.alpha - 255.0 / 256.0).abs() < 1e-12);
    }

    #[test]
    fn the_byte_counter_recovers_too() {
        let params = DcqcnParams { byte_counter_bytes: 1000, ..DcqcnParams::default() };
        let mut rc = RateControl::new(100_000.0);
        rc.on_cnp(&params, 0);
        rc.on_bytes_sent(&params, 1000, 1);
        assert!((rc.rate_mbps() - 75_000.0).abs() < 1e-6);
    }
}
