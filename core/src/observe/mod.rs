//! What raceway tells its operator: counters (`stats`) and their views (the stats JSON,
//! Prometheus `metrics`, DPDK `telemetry`), the `latency` histogram, live `capture`, and the
//! replay `report`. `raceway show`, a client of the running switch, is the `raceway` crate's.
//!
//! Invariant: observing never changes what the switch does.

pub mod capture;
pub mod latency;
pub mod metrics;
pub mod progress;
pub mod report;
pub mod stats;
pub mod telemetry;
