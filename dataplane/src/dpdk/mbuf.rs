//! The mbuf pool, the `Mbuf` wrapper that implements `PacketBuf`, and the `Burst` of mbufs
//! that rx and tx work in.
//!
//! Invariant: an `Mbuf` uniquely owns its `rte_mbuf` and frees it on drop; a `Burst` owns the
//! mbufs in its first `len` slots and frees them on drop; a pool outlives its mbufs: it keeps
//! the EAL running while it exists, and a pool dropped while some of its mbufs are still out
//! is kept (with the EAL) for the rest of the process instead of freed (`pools_kept` counts
//! them), so a late mbuf's free never writes into freed memory.

#![allow(unsafe_code)]

use super::{last_errno, strerror, DpdkError, Eal, BURST};
use crate::cpu::prefetch_line;
use crate::packet::PacketBuf;
use dpdk_sys as sys;
use std::ffi::{c_uint, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// An mbuf pool; it keeps the EAL running while it exists.
pub struct Mempool {
    pool: NonNull<sys::rte_mempool>,
    size: u32,
    data_room: u16,
    /// Set when the process ends right after the pool (`end_with_process`): its memory goes
    /// with the EAL's, unfreed.
    ends_with_process: std::sync::atomic::AtomicBool,
    _eal: Eal,
}

// SAFETY: a mempool is designed for concurrent use from many lcores (lock-free ring plus
// per-lcore caches); the handle is just a pointer to it.
unsafe impl Send for Mempool {}
// SAFETY: as above; the shared methods only read counts or allocate through DPDK's MP-safe API.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a pool of `size` mbufs with `data_room` bytes each (headroom included).
    pub fn new(eal: &Eal, name: &str, size: u32, cache: u32, data_room: u16, socket: i32) -> Result<Self, DpdkError> {
        let c_name = CString::new(name).expect("pool names have no NUL");
        // SAFETY: c_name is a valid C string for the duration of the call; DPDK copies it.
        let pool = unsafe { sys::rte_pktmbuf_pool_create(c_name.as_ptr(), size, cache, 0, data_room, socket) };
        match NonNull::new(pool) {
            Some(pool) => Ok(Self {
                pool,
                size,
                data_room,
                ends_with_process: std::sync::atomic::AtomicBool::new(false),
                _eal: eal.clone(),
            }),
            None => Err(DpdkError { context: format!("mbuf pool of {size} mbufs"), problem: strerror(last_errno()) }),
        }
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// The longest frame one of its mbufs holds in a single segment (its data room less
    /// DPDK's headroom).
    pub fn frame_room(&self) -> usize {
        usize::from(self.data_room).saturating_sub(sys::RTE_PKTMBUF_HEADROOM as usize)
    }

    /// Mbufs in the pool (per-lcore caches included).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is alive for as long as self.
        unsafe { sys::rte_mempool_avail_count(self.pool.as_ptr()) }
    }

    /// A fresh mbuf, or `None` when the pool is empty.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool is alive; the returned mbuf (if any) is ours alone.
        NonNull::new(unsafe { sys::shim_pktmbuf_alloc(self.pool.as_ptr()) }).map(Mbuf)
    }

    /// The process ends soon after this pool: dropping it leaves its memory to the EAL's
    /// cleanup instead of freeing it. DPDK zeroes what it frees, which for a pool is all of
    /// it, touching pages no mbuf ever used: a tenth of a second at a switch's exit, which a
    /// restart waits for (perf/restart.sh).
    pub fn end_with_process(&self) {
        self.ends_with_process.store(true, Ordering::Relaxed);
    }

    pub(super) fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.pool.as_ptr()
    }
}

/// Pools dropped while some of their mbufs were still out, and so kept (`Mempool`'s drop).
static POOLS_KEPT: AtomicU32 = AtomicU32::new(0);

/// How many pools this process kept rather than freed because mbufs were still out: a leak
/// the engines' exit check (`mbufs.available_at_exit`) also reports.
pub fn pools_kept() -> u32 {
    POOLS_KEPT.load(Ordering::Relaxed)
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // Mbufs carry no handle to their pool (they stay one pointer), so the pool checks at
        // its end instead: freeing it with mbufs out would leave their owners' frees writing
        // into freed memory. Such a pool, and the EAL under it, live on to the process's end.
        let out = self.size.saturating_sub(self.available());
        if out > 0 {
            tracing::warn!("an mbuf pool was released with {out} mbufs still out: kept, not freed");
            POOLS_KEPT.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(self._eal.clone());
            return;
        }
        if self.ends_with_process.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: every mbuf is back (counted above, caches included) and every port using the
        // pool holds it, so they are closed; the EAL handle is released after this.
        unsafe { sys::rte_mempool_free(self.pool.as_ptr()) };
    }
}

/// One mbuf, uniquely owned. Only the first segment's bytes are visible (`data`); `len` is
/// the whole frame's. A frame longer than one mbuf's room arrives chained and stays so: the
/// pipeline reads and rewrites only headers, which are in the first segment
/// (`parse::parse_beyond`), and the driver sends the chain; `whole` reads all of it where a
/// copy is needed (the control plane's TAP).
///
/// The data pointer and length are read inline at the offsets `dpdk_sys::mbuf_offsets` gives
/// (constants that `shim.c` checks against `offsetof` at build time): five shim calls per
/// frame measurably cost forwarding rate (perf/RESULTS.md, "Figures once in code comments").
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an mbuf belongs to whoever holds its pointer; moving the owner to another lcore is
// how DPDK pipelines hand packets on.
unsafe impl Send for Mbuf {}

impl Mbuf {
    fn into_raw(self) -> *mut sys::rte_mbuf {
        let ptr = self.0.as_ptr();
        std::mem::forget(self);
        ptr
    }

    /// Appends `bytes` to an empty mbuf (for frames the switch builds, such as PFC).
    pub fn append(&mut self, bytes: &[u8]) -> bool {
        let Ok(len) = u16::try_from(bytes.len()) else { return false };
        // SAFETY: the mbuf is ours; append returns NULL when the tailroom is too small.
        let dst = unsafe { sys::shim_pktmbuf_append(self.0.as_ptr(), len) };
        if dst.is_null() {
            return false;
        }
        // SAFETY: `dst` points at `len` writable bytes that append just reserved.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        true
    }

    /// Whether the frame spans several segments (a driver chains a frame longer than one
    /// mbuf's room).
    #[inline(always)]
    pub fn is_chained(&self) -> bool {
        self.frame_len() != self.segment().1
    }

    /// The whole frame's length, over all segments (`pkt_len`).
    #[inline(always)]
    fn frame_len(&self) -> usize {
        let base = self.0.as_ptr().cast::<u8>();
        // SAFETY: the mbuf is ours and valid; PKT_LEN is `rte_mbuf.pkt_len`'s offset (checked
        // in shim.c), a naturally aligned u32.
        unsafe { base.add(sys::mbuf_offsets::PKT_LEN).cast::<u32>().read() as usize }
    }

    /// The whole frame: its one segment as it is, or, when it is chained, its bytes copied
    /// into `scratch`; `None` when `scratch` is too short for a chained frame. For the
    /// control thread, which writes punted frames to the kernel whole.
    pub fn whole<'a>(&'a self, scratch: &'a mut [u8]) -> Option<&'a [u8]> {
        if !self.is_chained() {
            return Some(PacketBuf::data(self));
        }
        let len = self.frame_len();
        let out = scratch.get_mut(..len)?;
        // SAFETY: the mbuf is ours; `out` has room for `len` bytes, and the pointer returned
        // (into the mbuf or `out`) is valid for `len` bytes while both are borrowed.
        unsafe {
            let data = sys::shim_pktmbuf_read(self.0.as_ptr(), 0, len as u32, out.as_mut_ptr().cast());
            (!data.is_null()).then(|| std::slice::from_raw_parts(data.cast::<u8>(), len))
        }
    }

    /// The frame copied whole into one mbuf of `pool` (whose room must hold it); `None` when
    /// the pool is empty or the frame is longer than its room. The chain is left as it was.
    pub fn linearize(&self, pool: &Mempool) -> Option<Mbuf> {
        if self.frame_len() > pool.frame_room() {
            return None;
        }
        let single = pool.alloc()?;
        // SAFETY: both mbufs are ours; the shim reads `self` and appends to the empty `single`.
        let rc = unsafe { sys::shim_pktmbuf_linearize_into(self.0.as_ptr(), single.0.as_ptr()) };
        (rc == 0).then_some(single)
    }

    /// Starts loading the mbuf's header (its two cache lines) ahead of the driver, which reads
    /// both when it frees the mbuf after sending. A frame that waited in a deep queue has a
    /// cold header; prefetched as it joins the tx burst, its misses overlap those of the
    /// frames after it instead of following one another inside the driver's free loop (the
    /// congested-port figures are in perf/RESULTS.md, `perf/congested.sh`).
    #[inline(always)]
    pub fn prefetch_header(&self) {
        let header = self.0.as_ptr().cast::<u8>().cast_const();
        prefetch_line(header);
        // `rte_mbuf` is 128 bytes: its second line is inside the same object.
        prefetch_line(header.wrapping_add(64));
    }
}

impl Mbuf {
    /// The first segment's data pointer and length, read at the offsets `shim.c` asserts.
    #[inline(always)]
    fn segment(&self) -> (*mut u8, usize) {
        use sys::mbuf_offsets::{BUF_ADDR, DATA_LEN, DATA_OFF};
        let base = self.0.as_ptr().cast::<u8>();
        // SAFETY: the mbuf is ours and valid; the offsets are those of `rte_mbuf` (checked at
        // build time in shim.c) and each field is naturally aligned there.
        unsafe {
            let buf_addr = base.add(BUF_ADDR).cast::<*mut u8>().read();
            let data_off = base.add(DATA_OFF).cast::<u16>().read();
            let data_len = base.add(DATA_LEN).cast::<u16>().read();
            (buf_addr.add(usize::from(data_off)), usize::from(data_len))
        }
    }
}

impl PacketBuf for Mbuf {
    #[inline]
    fn data(&self) -> &[u8] {
        let (ptr, len) = self.segment();
        // SAFETY: the mbuf is ours; its first segment holds data_len initialised bytes at
        // buf_addr + data_off, valid while we hold it.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        let (ptr, len) = self.segment();
        // SAFETY: as `data`, and &mut self guarantees no other view of the bytes exists.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    #[inline]
    fn len(&self) -> usize {
        self.frame_len()
    }

    fn truncate(&mut self, len: usize) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        // SAFETY: the mbuf and its chain are ours; the shim frees only segments wholly past
        // `len`, which nothing else points at, and leaves the frame as it was if it is
        // shorter than `len`.
        let rc = unsafe { sys::shim_pktmbuf_cut(self.0.as_ptr(), len) };
        debug_assert_eq!(rc, 0, "a frame is cut only to a length it has");
    }

    #[inline(always)]
    fn prefetch_buffer(&self) {
        self.prefetch_header();
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; after this it is back in its pool and never touched again.
        unsafe { sys::shim_pktmbuf_free(self.0.as_ptr()) };
    }
}

/// Up to `BURST` mbufs in a fixed array: what rx returns and what tx takes.
pub struct Burst {
    pub(super) mbufs: [*mut sys::rte_mbuf; BURST],
    pub(super) len: usize,
}

// SAFETY: a Burst owns the mbufs in its first `len` slots, like a [Mbuf; BURST].
unsafe impl Send for Burst {}

impl Default for Burst {
    fn default() -> Self {
        Self { mbufs: [std::ptr::null_mut(); BURST], len: 0 }
    }
}

impl Burst {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == BURST
    }

    /// Adds an mbuf; the caller checks `is_full` first.
    #[inline]
    pub fn push(&mut self, mbuf: Mbuf) {
        assert!(self.len < BURST, "burst overflow");
        self.mbufs[self.len] = mbuf.into_raw();
        self.len += 1;
    }

    /// Whether any frame of the burst passes `test` (given its first segment's bytes); the
    /// burst keeps them all.
    pub fn any_frame(&self, mut test: impl FnMut(&[u8]) -> bool) -> bool {
        self.mbufs[..self.len].iter().any(|&ptr| {
            // SAFETY: the first `len` slots are valid mbufs this burst owns; the view lends
            // one for the call and is never dropped (`ManuallyDrop`), so the burst still owns it.
            let view = std::mem::ManuallyDrop::new(Mbuf(unsafe { NonNull::new_unchecked(ptr) }));
            test(PacketBuf::data(&*view))
        })
    }

    /// Hands out the mbufs, in order, and empties the burst.
    pub fn drain(&mut self) -> impl Iterator<Item = Mbuf> + '_ {
        let len = std::mem::replace(&mut self.len, 0);
        self.mbufs[..len].iter().map(|&ptr| {
            // SAFETY: rx filled these slots with valid mbufs that this burst owned until now;
            // each is handed out exactly once.
            Mbuf(unsafe { NonNull::new_unchecked(ptr) })
        })
    }
}

impl Drop for Burst {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the first `len` slots are mbufs this burst owns.
            unsafe { sys::shim_pktmbuf_free_bulk(self.mbufs.as_mut_ptr(), self.len as c_uint) };
        }
    }
}
