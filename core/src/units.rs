//! Units of the wire every layer counts in: traffic classes, a frame's bytes on the link
//! (preamble, gap and padding included) and a link's time per frame. They sit below the
//! config and the pipeline, so both can use them without importing each other.
//!
//! Invariant: a frame's wire time is `wire_bytes(len)` at the link's speed, everywhere (the
//! shaper, DWRR, the headroom plan, the fabric's links and the load generator agree).

/// Traffic classes (and PFC priorities) per port.
pub const TRAFFIC_CLASSES: usize = 8;

/// A link's speed, with the time of a byte on it worked out once: the per-frame wire time is
/// then a multiply. (Deciding per frame whether the speed divides evenly cost a 64-bit
/// division, ~2% of a 64-byte frame's samples on one worker.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRate {
    speed_mbps: u64,
    /// Picoseconds per byte when a whole number (80 at 100G, 320 at 25G), else 0.
    ps_per_byte: u64,
}

impl LinkRate {
    pub fn new(speed_mbps: u64) -> Self {
        let ps_per_byte = if 8_000_000 % speed_mbps == 0 { 8_000_000 / speed_mbps } else { 0 };
        Self { speed_mbps, ps_per_byte }
    }

    pub fn speed_mbps(self) -> u64 {
        self.speed_mbps
    }

    /// Time on the wire of a frame of `len` bytes, in picoseconds (see `wire_bytes`); speeds
    /// that are not a whole number of picoseconds per byte round up.
    #[inline(always)]
    pub fn wire_time_ps(self, len: usize) -> u64 {
        self.time_of_wire_bytes_ps(wire_bytes(len))
    }

    /// `wire_time_ps` of a frame whose `wire_bytes` the caller already has.
    #[inline(always)]
    pub fn time_of_wire_bytes_ps(self, bytes: u64) -> u64 {
        if self.ps_per_byte != 0 {
            bytes * self.ps_per_byte
        } else {
            (bytes * 8_000_000).div_ceil(self.speed_mbps)
        }
    }
}

/// Preamble + SFD (8) + IFG (12) + FCS (4), which frames in captures and mbufs do not hold.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;
/// The shortest frame Ethernet carries, without its FCS: a MAC pads shorter ones to this.
pub const MIN_FRAME_BYTES: u64 = 60;

/// Bytes a frame of `len` bytes (as captured, without FCS) takes on the link: padded to the
/// 64-byte minimum with its FCS, plus preamble, start delimiter and inter-frame gap. A 42-byte
/// ARP takes 84, as a 60-byte frame does.
#[inline]
pub const fn wire_bytes(len: usize) -> u64 {
    let len = len as u64;
    (if len > MIN_FRAME_BYTES { len } else { MIN_FRAME_BYTES }) + WIRE_OVERHEAD_BYTES
}
