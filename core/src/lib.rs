//! raceway-core: the switch without its I/O. Everything here is pure Rust: it builds and
//! tests with no DPDK, no libclang and no root, and the `raceway` crate adds the live engine
//! on DPDK, the Linux control plane and the command line on top.
//!
//! The tree follows a frame (docs/ARCHITECTURE.md has the picture):
//! - `wire`: zero-copy views of the headers raceway reads and writes;
//! - `pipeline`: what happens to a frame on arrival: classify (parse, trust, traffic class),
//!   route (the FIB), balance (pick a group member), punt (to the control plane);
//! - `tm`: traffic management: the shared buffer and its pools, PFC, ECN, the scheduler;
//! - `switch`: `Switch`, the composition of the pipeline and traffic management;
//! - `engine`: what drives a `Switch` in virtual time: replay and the fabric simulator;
//! - `counters`: what the switch counts (and the latency histogram), and the stats JSON;
//! - `observe`: the counters' views (metrics, telemetry, the replay report), and capture;
//! - `traffic`: frames and trace generators;
//! - `config`, `drops`, `packet`, `rng`, `progress` (a terminal's progress bar), `cpu` (a
//!   prefetch hint: the crate's one `unsafe`).
//!
//! The pipeline knows nothing of DPDK: it works on the `PacketBuf` trait, which the DPDK mbuf
//! wrapper (in `raceway`) and the in-memory buffer here both implement, so unit tests,
//! benchmarks, the replay engine and the live switch all run the same code.

pub mod config;
pub mod counters;
pub mod cpu;
pub mod digest;
pub mod drops;
pub mod engine;
pub mod error;
pub mod keyword;
pub mod link;
pub mod observe;
pub mod packet;
pub mod pipeline;
pub mod progress;
pub mod rng;
pub mod switch;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tm;
pub mod traffic;
pub mod units;
pub mod wire;
