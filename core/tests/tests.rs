//! The core tier: raceway-core's end-to-end tests, in one binary (a module per area, as
//! ripgrep's tests/tests.rs), needing nothing but Rust. Replays with exact expected outputs
//! (`replay`), PFC (`pfc`), ECN (`ecn`), groups and spraying (`groups`), and property tests
//! over random traces and configs (`properties`), trimming (`trim`) and ACL tables (`acl`). Tests that compare against Wireshark's
//! tools are `#[ignore]`d here with the reason, so a machine without them still runs the
//! rest; `make test` runs them too (`--include-ignored`).
//!
//! The other tiers: `tests/dpdk/` (the binary, live DPDK runs on vdevs), `tests/root/` (network
//! namespaces, FRR). `tests/alloc.rs` is a binary of its own: its counting allocator is the
//! whole process's.

mod acl;
mod docs;
mod ecn;
mod groups;
mod pfc;
mod properties;
mod replay;
mod trim;
mod util;
