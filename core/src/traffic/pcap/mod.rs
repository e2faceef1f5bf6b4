//! Reading traces and writing captures, for the engines and tools that do (replay, the trace
//! generators, blast): the `--in` spec grammar (`spec.rs`),
//! the pcap and pcapng readers and the merge of several inputs (`read.rs`), and the writers
//! (`write.rs`). It sits below the engines: nothing here knows the switch.
//!
//! Inputs are Ethernet captures in either format Wireshark and tcpdump write:
//! - pcap, with micro- or nanosecond timestamps, in either byte order;
//! - pcapng: section headers (either byte order, several sections), interface descriptions
//!   (link type, `if_name`, `if_tsresol`, `if_tsoffset`), enhanced and simple packet blocks,
//!   any number of interfaces. A `TraceSpec` picks the frames of one interface (`:if=1` or
//!   `:if=NAME`; required when the file has several) and, optionally, one direction
//!   (`:dir=in` or `:dir=out`, from the enhanced packet block's flags), so that a live
//!   `run --capture` file replays directly. A simple packet block has no timestamp: it
//!   takes the time of the frame before it. Other blocks are skipped.
//!
//! A truncated record (captured length under the frame's length: the capture ran with a snap
//! length) is an error naming the file and record: replay needs whole frames, and a cut
//! frame would be counted as malformed by the switch instead of as what it was.
//!
//! Timestamps are the file's (Unix time for real captures): `read_traces` counts them from the
//! whole second of the earliest input's first frame, and output captures add that back.
//!
//! Invariant: a trace is read as frames with timestamps in picoseconds, in file order, or
//! rejected with one `InputError` naming the file, the record or block and the problem; output
//! captures are Ethernet pcaps with nanosecond timestamps.

use std::fmt;

mod read;
mod spec;
mod write;

pub use read::{open_traces, read_trace, read_traces, CapturedFrame, TraceFrame, TraceReader, TraceSource};
pub use spec::{Direction, InterfaceChoice, TraceSpec};
pub use write::{ethernet_interface, CaptureWriter, OutputFormat};

/// Picoseconds per second.
const PS_PER_S: u128 = 1_000_000_000_000;

fn first_line(err: impl fmt::Display) -> String {
    err.to_string().lines().next().unwrap_or("").to_string()
}
