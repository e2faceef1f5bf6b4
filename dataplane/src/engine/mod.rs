//! What drives a `Switch`: `live` on DPDK ports with workers on pinned cores, `replay` and
//! `fabric` in virtual time.
//!
//! Invariant: an engine owns time and I/O; the switch only ever sees frames and `now`.

pub mod fabric;
pub mod link_watch;
pub mod live;
pub mod port_tx;
pub mod replay;
pub mod sim;
