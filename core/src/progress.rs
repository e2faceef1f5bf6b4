//! The progress bar of the long commands (replay, fabric, gen) on stderr: work done against
//! the total, simulated time, rate and ETA. It shows only when stderr is a terminal and
//! `--quiet` is not given, so CI logs, pipes and files never hold it.
//!
//! Invariant: the engines pay one increment and one compare per event for it; the bar is
//! updated every `STRIDE` events and redrawn by indicatif at most 20 times a second.

use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;

/// Events between two updates of the bar.
const STRIDE: u64 = 1 << 14;

/// A progress bar, or nothing when it is not shown.
pub struct Progress {
    bar: Option<ProgressBar>,
    events: u64,
}

impl Progress {
    /// Whether a bar should show: stderr is a terminal and the user did not ask for quiet.
    pub fn wanted(quiet: bool) -> bool {
        !quiet && std::io::stderr().is_terminal()
    }

    /// A bar over `total` units of work (`unit`: "B" for input bytes, "frames", ...), shown when
    /// `show`.
    pub fn new(show: bool, total: u64, unit: &str) -> Self {
        let bar = show.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let template = match unit {
                "B" => "{bar:30} {bytes}/{total_bytes} read: {msg} ({bytes_per_sec}, ETA {eta})",
                _ => "{bar:30} {human_pos}/{human_len} {msg} ({rate}, ETA {eta})",
            };
            let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
            // indicatif's own {per_sec} prints four decimals: "92,384.8618/s".
            let rate = |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = write!(out, "{}/s", HumanCount(state.per_sec() as u64));
            };
            bar.set_style(style.with_key("rate", rate));
            bar
        });
        Self { bar, events: 0 }
    }

    /// Counts an event; every `STRIDE` events asks `state` for (work done, message) and
    /// updates the bar.
    #[inline]
    pub fn tick(&mut self, state: impl FnOnce() -> (u64, String)) {
        self.tick_by(1, state);
    }

    /// Counts `count` events at once (a window of a parallel run); asks `state` whenever
    /// they pass a multiple of `STRIDE`.
    #[inline]
    pub fn tick_by(&mut self, count: u64, state: impl FnOnce() -> (u64, String)) {
        let before = self.events / STRIDE;
        self.events += count;
        if self.events / STRIDE == before {
            return;
        }
        if let Some(bar) = &self.bar {
            let (done, message) = state();
            bar.set_position(done);
            bar.set_message(message);
        }
    }

    /// Draws the bar at `done` a last time, then clears it: the command's own summary line
    /// follows.
    pub fn finish(self, done: u64, message: String) {
        if let Some(bar) = self.bar {
            // The message first: its draw is never held back by the redraw limit.
            bar.set_message(message);
            bar.set_position(done);
            bar.finish_and_clear();
        }
    }
}

/// A simulated time for the bar's message: "12.5 ms simulated".
pub fn simulated(ps: u64) -> String {
    let seconds = ps as f64 / 1e12;
    if seconds >= 1.0 {
        format!("{seconds:.2} s simulated")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms simulated", seconds * 1e3)
    } else {
        format!("{:.1} us simulated", seconds * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_time_reads_in_its_unit() {
        assert_eq!(simulated(2_500_000_000_000), "2.50 s simulated");
        assert_eq!(simulated(12_500_000_000), "12.50 ms simulated");
        assert_eq!(simulated(7_000_000), "7.0 us simulated");
    }

    #[test]
    fn a_hidden_bar_never_asks_for_its_state() {
        let mut progress = Progress::new(false, 10, "frames");
        for _ in 0..(3 * STRIDE) {
            progress.tick(|| unreachable!("hidden"));
        }
        progress.finish(10, String::new());
    }
}
