//! raceway: a software leaf switch for AI backend networks.
//!
//! The pipeline (wire → classify → queue → schedule) knows nothing of DPDK: it works on the
//! `PacketBuf` trait, which the DPDK mbuf wrapper and the in-memory buffer both implement, so
//! unit tests, benchmarks, the replay engine and the live switch all run the same code.
//! `unsafe` lives only in the `dpdk` module (and the `dpdk-sys` crate).

#![deny(unsafe_code)]

pub mod blast;
pub mod buffer;
pub mod capture;
pub mod classify;
pub mod config;
pub mod control;
pub mod dpdk;
pub mod drops;
pub mod ecn;
pub mod fabric;
pub mod fib;
pub mod frames;
pub mod gen;
pub mod kernel;
pub mod latency;
pub mod live;
pub mod metrics;
pub mod pfc;
pub mod punt;
pub mod replay;
pub mod report;
pub mod rng;
pub mod route;
pub mod schedule;
pub mod spray;
pub mod stats;
pub mod switch;
pub mod telemetry;
pub mod wire;
