//! raceway: a software leaf switch for AI backend networks.
//!
//! The pipeline (wire → classify → queue → schedule) knows nothing of DPDK: it works on the
//! `PacketBuf` trait, which the DPDK mbuf wrapper and the in-memory buffer both implement, so
//! unit tests, benchmarks, the replay engine and the live switch all run the same code.
//! `unsafe` lives only in the `dpdk` module (and the `dpdk-sys` crate).

pub mod wire;
