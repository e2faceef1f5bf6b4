//! The criterion benches of the pipeline stages (`wire.rs`, `route.rs`, `pipeline.rs`, beside
//! this file; `make bench` runs them); this crate has no code of its own.
