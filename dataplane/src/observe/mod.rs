//! What raceway tells its operator: counters (`stats`) and their views (the stats JSON,
//! Prometheus `metrics`, DPDK `telemetry`), the `latency` histogram, live `capture`, and the
//! replay `report`.
//!
//! Invariant: observing never changes what the switch does.

pub mod capture;
pub mod latency;
pub mod metrics;
pub mod progress;
pub mod report;
pub mod route_stream;
pub mod show;
pub mod stats;
pub mod telemetry;
