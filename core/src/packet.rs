//! The packet buffer trait the pipeline works on, and its in-memory implementation.
//!
//! Invariant: the pipeline reaches packet bytes only through `PacketBuf`, so the same code runs
//! on DPDK mbufs (live) and on `HeapPacket`s (replay, tests, benchmarks). Dropping a buffer
//! releases it (an mbuf goes back to its pool).

/// A frame's bytes, owned by the pipeline while it holds the buffer.
pub trait PacketBuf {
    fn data(&self) -> &[u8];
    fn data_mut(&mut self) -> &mut [u8];
    fn len(&self) -> usize {
        self.data().len()
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Cuts the frame to its first `len` bytes (at most `self.len()`): packet trimming.
    fn truncate(&mut self, len: usize);
    /// A hint that `value` (a queue slot about to be read, say) is needed soon: a CPU
    /// prefetch of its first cache line. Virtual time does not count cache misses, but a
    /// simulated fabric's wall time does.
    #[inline(always)]
    fn prefetch<T>(value: &T) {
        crate::cpu::prefetch_line((value as *const T).cast());
    }
    /// A hint that the buffer's first bytes (an mbuf's header, written last on another core;
    /// a heap frame's bytes) are needed soon.
    fn prefetch_buffer(&self);
}

/// A frame in ordinary memory (replay, tests, benchmarks, the fabric).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapPacket {
    pub bytes: Vec<u8>,
    /// Bytes of the frame past `bytes` that are declared but not held: the fabric's RoCE
    /// payloads, which no switch or host reads (as a chained mbuf's first segment is parsed
    /// with the rest of the frame elsewhere). Zero for a whole frame.
    pub beyond: usize,
    /// A number its sender gives it, carried unchanged and read by no switch: the fabric's
    /// hosts put where the receiver keeps a data frame's message and queue pair here (a
    /// simulator's bookkeeping, not a wire field). Zero otherwise.
    pub tag: u64,
}

impl HeapPacket {
    /// A whole frame.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, beyond: 0, tag: 0 }
    }

    /// A frame of which only `headers` are held, `beyond` more bytes following.
    pub fn headers(headers: Vec<u8>, beyond: usize) -> Self {
        Self { bytes: headers, beyond, tag: 0 }
    }
}

impl PacketBuf for HeapPacket {
    #[inline(always)]
    fn prefetch_buffer(&self) {
        crate::cpu::prefetch_line(self.bytes.as_ptr());
    }
    fn data(&self) -> &[u8] {
        &self.bytes
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
    fn len(&self) -> usize {
        self.bytes.len() + self.beyond
    }
    fn truncate(&mut self, len: usize) {
        debug_assert!(len <= self.len());
        if len <= self.bytes.len() {
            self.bytes.truncate(len);
            self.beyond = 0;
        } else {
            self.beyond = len - self.bytes.len();
        }
    }
}
