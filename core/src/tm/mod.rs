//! Traffic management: the shared buffer and its pools (sized by `config::plan::BufferPlan`), PFC, ECN,
//! packet trimming and the egress scheduler. `Switch` composes them.
//!
//! Invariant: nothing here parses a frame or knows a route; these types see cells, classes
//! and times.

pub mod buffer;
pub mod ecn;
pub mod frame;
pub mod pfc;
pub mod schedule;
pub mod shard;
pub mod trim;
