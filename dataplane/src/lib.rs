//! raceway: a software leaf switch for AI backend networks.
//!
//! The switch itself (wire formats, pipeline, traffic management, config, counters, and the
//! replay and fabric engines) is `raceway-core`, which needs neither DPDK nor Linux. This crate
//! is what runs it on a machine:
//! - `dpdk`: the EAL, mempools, mbufs, ports and telemetry over `dpdk-sys`;
//! - `live`: the live engine, workers on pinned lcores polling DPDK ports;
//! - `linux`: the operating system's part: TAP devices, network namespaces, sockets, event
//!   fds, real-time scheduling;
//! - `control`: the Linux kernel as control plane (host interfaces, netlink, the FIB);
//! - `show`: `raceway show`, the client of a running switch, and the documents it serves;
//! - `blast`: a DPDK load generator that sends a trace at a paced rate;
//! - `ranks`: `raceway fabric` as one rank of an MPI job (MPI itself behind the `mpi` feature).
//!
//! `dpdk` and `linux` hold the only `unsafe` outside `dpdk-sys` and `raceway_core::cpu`.
//! raceway-core's modules are re-exported here under their own names, so `raceway::config`
//! and `raceway_core::config` are one module.

pub use raceway_core::{
    config, counters, cpu, digest, drops, engine, error, keyword, link, observe, packet, pipeline, rng, switch,
};
pub use raceway_core::{progress, tm, traffic, units, wire};

#[cfg(feature = "testing")]
pub use raceway_core::testing;

pub mod blast;
pub mod control;
pub mod dpdk;
pub mod linux;
pub mod live;
pub mod ranks;
pub mod show;
