//! The report of a replay or fabric run (`--report`): what the engines record as they run
//! (`record`) and how it is drawn (`render`).
//!
//! Invariant: a report never changes the run it reports: recording only reads the switch.

mod record;
mod render;

pub use record::{default_interval_ps, Recorder, Sampling};
pub(crate) use record::{record_pfc, Intervals};
pub use render::{draw_slowdown_cdf, write};
