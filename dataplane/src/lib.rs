//! raceway: a software leaf switch for AI backend networks.
//!
//! The tree follows a frame (docs/ARCHITECTURE.md has the picture):
//! - `wire`: zero-copy views of the headers raceway reads and writes;
//! - `pipeline`: what happens to a frame on arrival: classify (parse, trust, traffic class),
//!   route (the FIB), balance (pick a group member), punt (to the control plane);
//! - `tm`: traffic management: the shared buffer and its pools, PFC, ECN, the scheduler;
//! - `switch`: `Switch`, the composition of the pipeline and traffic management;
//! - `engine`: what drives a `Switch`: live on DPDK, replay and fabric in virtual time;
//! - `observe`: stats, metrics, telemetry, capture, latency, the replay report;
//! - `traffic`: frames, trace generators and the load generator;
//! - `control`: the Linux kernel as control plane (host interfaces, netlink);
//! - `config`, `drops`, `packet`, `rng`, `dpdk` (the only unsafe outside `dpdk-sys`).
//!
//! The pipeline knows nothing of DPDK: it works on the `PacketBuf` trait, which the DPDK mbuf
//! wrapper and the in-memory buffer both implement, so unit tests, benchmarks, the replay
//! engine and the live switch all run the same code.

pub mod config;
pub mod control;
pub mod dpdk;
pub mod drops;
pub mod engine;
pub mod error;
pub mod keyword;
pub mod link;
pub mod observe;
pub mod packet;
pub mod pipeline;
pub mod rng;
pub mod switch;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tm;
pub mod traffic;
pub mod units;
pub mod wire;
