//! Traffic raceway makes for tests and benchmarks: `frames` builds valid frames, `gen`
//! writes traces (`raceway blast`, in the `raceway` crate, sends one on a DPDK device).
//!
//! Invariant: every frame built here parses (the switch is tested on what a NIC would send).

pub mod frames;
pub mod gen;
pub mod pcap;
