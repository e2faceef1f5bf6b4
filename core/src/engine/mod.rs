//! What drives a `Switch` in virtual time: `replay` (pcap traces through one switch) and
//! `fabric` (hosts and switches in one simulated network). The live engine, on DPDK ports with
//! workers on pinned cores, is the `raceway` crate's `live`; it shares `port_tx` with these.
//!
//! Invariant: an engine owns time and I/O; the switch only ever sees frames and `now`.

pub mod fabric;
pub mod port_tx;
pub mod replay;
pub mod sim;
