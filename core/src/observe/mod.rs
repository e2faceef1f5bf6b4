//! What raceway tells its operator: views of the counters (`crate::counters`): Prometheus
//! `metrics`, DPDK `telemetry`, the replay `report`; and live `capture`. `raceway show`, a client of the running switch, is the `raceway` crate's.
//!
//! Invariant: observing never changes what the switch does.

pub mod capture;
pub mod metrics;
pub mod report;
pub mod sflow;
pub mod telemetry;
