//! What happens to a frame on arrival, before any queue: `classify` parses it and decides
//! its traffic class and verdict, `route` and `fib` say where it goes (`resolve` caches the
//! answer per worker), `balance` picks a member of a next-hop group, `acl` matches the
//! `[[acl]]` tables, `sample` takes sFlow's samples, `punt` polices what goes to the control
//! plane, and `rewrite` writes a routed frame's headers once all of that is decided.
//!
//! Invariant: these stages keep no queue; each frame leaves with exactly one verdict
//! (forward, flow control, punt, or a drop reason), and only `rewrite` writes to it.

pub mod acl;
pub mod balance;
pub mod classify;
pub mod fib;
pub mod punt;
pub mod resolve;
pub mod rewrite;
pub mod route;
pub mod sample;
