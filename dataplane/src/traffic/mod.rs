//! Traffic raceway makes for tests and benchmarks: `frames` builds valid frames, `gen`
//! writes traces, `blast` sends a trace on a DPDK device at a paced rate.
//!
//! Invariant: every frame built here parses (the switch is tested on what a NIC would send).

pub mod blast;
pub mod frames;
pub mod gen;
pub mod pcap;
