//! What happens to a frame on arrival, before any queue: `classify` parses it and decides
//! its traffic class and verdict, `route` and `fib` say where it goes (`resolve` caches the answer per worker), `balance` picks a
//! member of a next-hop group, `acl` matches the `[[acl]]` tables, `punt` polices what goes to the control plane.
//!
//! Invariant: these stages keep no queue; each frame leaves with exactly one verdict
//! (forward, flow control, punt, or a drop reason).

pub mod acl;
pub mod balance;
pub mod classify;
pub mod fib;
pub mod punt;
pub mod resolve;
pub mod route;
pub mod sample;
