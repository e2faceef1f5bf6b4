//! The DPDK glue: EAL start and cleanup, lcore launch, the mbuf pool, the `Mbuf` wrapper that
//! implements `PacketBuf`, port bring-up and rx/tx bursts, the TSC, and the stop signal.
//!
//! This is the only module of the dataplane crate allowed `unsafe`; every block says why it
//! is sound. Invariant: an `Mbuf` uniquely owns its `rte_mbuf` and frees it on drop; a
//! `Burst` owns the mbufs in its first `len` slots and frees them on drop; so no path loses an
//! mbuf, and the pool is full again once ports are stopped and every wrapper is gone.

#![allow(unsafe_code)]

pub mod host;

use crate::packet::PacketBuf;
use dpdk_sys as sys;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Packets per rx/tx burst.
pub const BURST: usize = 32;

/// An error from DPDK: what was being done, and DPDK's own words.
#[derive(Debug, Clone)]
pub struct DpdkError {
    pub context: String,
    pub problem: String,
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.problem)
    }
}

impl std::error::Error for DpdkError {}

fn strerror(errnum: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a NUL-terminated string that DPDK owns (a
    // static table or a per-lcore buffer) and that stays valid until the next call here.
    unsafe { CStr::from_ptr(sys::rte_strerror(errnum.abs())) }.to_string_lossy().into_owned()
}

/// Turns DPDK's "negative errno on failure" convention into a `Result`.
fn check(rc: c_int, context: impl FnOnce() -> String) -> Result<c_int, DpdkError> {
    if rc < 0 {
        Err(DpdkError { context: context(), problem: strerror(rc) })
    } else {
        Ok(rc)
    }
}

fn last_errno() -> c_int {
    // SAFETY: reads the calling thread's rte_errno, a plain per-thread integer.
    unsafe { sys::shim_errno() }
}

/// The running EAL, a shared handle. Every `Mempool` holds one and every `Port` holds its
/// pool, so the types keep the teardown order: a port closes before its pool is freed, and
/// `rte_eal_cleanup` runs when the last handle goes, after every pool and port. (Mbufs carry
/// no handle, to stay one pointer: the engines return them all before dropping their pool,
/// and check `Mempool::available` to prove it.)
#[derive(Clone)]
pub struct Eal {
    _running: Arc<RunningEal>,
}

/// Cleans the EAL up when the last handle drops.
struct RunningEal {
    /// rte_pdump_init succeeded (shared memory): uninit before cleanup.
    pdump: bool,
}

/// Whether the EAL shares its memory with secondary processes, which is what `dpdk-dumpcap`
/// (through the pdump library) needs: not with `--no-huge`, `--in-memory` or `--no-shconf`.
pub fn shares_memory(args: &[String]) -> bool {
    !args.iter().any(|arg| matches!(arg.as_str(), "--no-huge" | "--in-memory" | "--no-shconf"))
}

/// The EAL's runtime directory (/var/run/dpdk/PREFIX as root), which the EAL makes for every
/// file prefix and leaves behind: removed at exit once empty, so that runs with fresh prefixes
/// (every test) do not pile them up. One with files still in it (another process's) stays.
static RUNTIME_DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

extern "C" fn remove_runtime_dir() {
    if let Some(dir) = RUNTIME_DIR.get() {
        let _ = std::fs::remove_dir(dir);
    }
}

impl Eal {
    /// Starts the EAL with `args` (without the program name). May be called once per process.
    pub fn init(args: &[String]) -> Result<Self, DpdkError> {
        let mut owned = Vec::with_capacity(args.len() + 1);
        for arg in std::iter::once("raceway").chain(args.iter().map(String::as_str)) {
            let arg = CString::new(arg).map_err(|_| DpdkError {
                context: "EAL arguments".into(),
                problem: format!("'{arg}' contains a NUL byte"),
            })?;
            owned.push(arg);
        }
        // The EAL may keep pointers into argv (and reorders it), so the strings live for the
        // rest of the process: a few bytes, once.
        let argv: &'static mut [*mut c_char] = Vec::leak(owned.into_iter().map(|arg| arg.into_raw()).collect());
        // Registered before the EAL's own exit handlers, so it runs after them (the telemetry
        // sockets in the directory go in one of those).
        // SAFETY: registers a function that takes nothing and touches only its static.
        unsafe { libc::atexit(remove_runtime_dir) };
        // SAFETY: argv holds argc valid, NUL-terminated, leaked strings that outlive the EAL.
        let rc = unsafe { sys::rte_eal_init(argv.len() as c_int, argv.as_mut_ptr()) };
        // SAFETY: a getter of the EAL's static buffer (empty if init stopped before naming
        // the directory), copied at once.
        let dir = unsafe { sys::rte_eal_get_runtime_dir() };
        if !dir.is_null() {
            // SAFETY: non-null and NUL-terminated, as above.
            let dir = unsafe { CStr::from_ptr(dir) }.to_string_lossy().into_owned();
            if !dir.is_empty() {
                let _ = RUNTIME_DIR.set(std::path::PathBuf::from(dir));
            }
        }
        if rc < 0 {
            return Err(DpdkError { context: "EAL init".into(), problem: strerror(last_errno()) });
        }
        let mut pdump = false;
        if shares_memory(args) {
            // SAFETY: plain call after a successful rte_eal_init, on the main lcore.
            let rc = unsafe { sys::rte_pdump_init() };
            if rc == 0 {
                pdump = true;
                tracing::info!("pdump enabled: dpdk-dumpcap can capture from this process");
            } else {
                tracing::warn!("pdump not enabled ({}): dpdk-dumpcap cannot attach", strerror(last_errno()));
            }
        }
        Ok(Self { _running: Arc::new(RunningEal { pdump }) })
    }

    /// The lcore the calling thread runs on.
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: plain getter, valid after rte_eal_init.
        unsafe { sys::rte_get_main_lcore() }
    }

    /// Worker lcores (all enabled lcores but the main one), in order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut lcores = Vec::new();
        let mut lcore = u32::MAX; // rte_get_next_lcore(-1, ...) starts the walk
        loop {
            // SAFETY: plain iteration over the EAL's lcore table, valid after init.
            lcore = unsafe { sys::rte_get_next_lcore(lcore, 1, 0) };
            if lcore >= sys::RTE_MAX_LCORE {
                return lcores;
            }
            lcores.push(lcore);
        }
    }

    /// Runs `task` on worker `lcore` (pinned by the EAL). `wait` returns its result.
    pub fn launch<F>(&self, lcore: u32, task: F) -> Result<Launched, DpdkError>
    where
        F: FnOnce() -> i32 + Send + 'static,
    {
        unsafe extern "C" fn trampoline<F: FnOnce() -> i32>(arg: *mut c_void) -> c_int {
            // SAFETY: `arg` is the Box<F> leaked by `launch` below, handed to exactly one
            // trampoline call, so taking it back is unique.
            let task = unsafe { Box::from_raw(arg.cast::<F>()) };
            task()
        }
        let arg = Box::into_raw(Box::new(task));
        // SAFETY: the trampoline matches lcore_function_t; `arg` stays valid until the
        // trampoline reclaims it. On failure the task never ran, so we reclaim it here.
        let rc = unsafe { sys::rte_eal_remote_launch(Some(trampoline::<F>), arg.cast(), lcore) };
        if rc < 0 {
            // SAFETY: the launch failed, so nothing else owns `arg`.
            drop(unsafe { Box::from_raw(arg) });
            return Err(DpdkError { context: format!("launch on lcore {lcore}"), problem: strerror(rc) });
        }
        Ok(Launched { lcore })
    }

    /// TSC ticks per second.
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: plain getter, valid after init.
        unsafe { sys::rte_get_tsc_hz() }
    }
}

impl Drop for RunningEal {
    fn drop(&mut self) {
        if self.pdump {
            // SAFETY: pdump was initialised by `init` and is released once, before cleanup.
            unsafe { sys::rte_pdump_uninit() };
        }
        // SAFETY: this is the last EAL handle: every pool (each holds a handle) and so every
        // port (each holds its pool) is gone.
        unsafe { sys::rte_eal_cleanup() };
    }
}

/// A task running on a worker lcore.
#[must_use = "wait for the worker before tearing down ports"]
pub struct Launched {
    lcore: u32,
}

impl Launched {
    pub fn wait(self) -> i32 {
        // SAFETY: the lcore was launched by `Eal::launch` and is waited for exactly once.
        unsafe { sys::rte_eal_wait_lcore(self.lcore) }
    }
}

/// The lcore the calling thread runs on.
pub fn current_lcore() -> u32 {
    // SAFETY: reads the calling thread's lcore id, a per-thread value set by the EAL.
    unsafe { sys::shim_lcore_id() }
}

/// Reads the time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: reads the TSC; no memory is touched.
    unsafe { sys::shim_rdtsc() }
}

/// An mbuf pool; it keeps the EAL running while it exists.
pub struct Mempool {
    pool: NonNull<sys::rte_mempool>,
    size: u32,
    data_room: u16,
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
            Some(pool) => Ok(Self { pool, size, data_room, _eal: eal.clone() }),
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

    fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.pool.as_ptr()
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: every port using the pool holds it, so they are closed; the engines return
        // all mbufs before dropping their last handle; the EAL handle is released after this.
        unsafe { sys::rte_mempool_free(self.pool.as_ptr()) };
    }
}

/// One mbuf, uniquely owned. Only the first segment's bytes are visible; `len` is the whole
/// frame's. The engines linearize a chained frame (`linearize`) before the pipeline sees it,
/// so a frame the pipeline handles is one segment, whole.
///
/// The data pointer and length are read inline at the offsets `dpdk_sys::mbuf_offsets` gives
/// (constants that `shim.c` checks against `offsetof` at build time): five shim calls per
/// frame cost 14.61 vs 15.24 Mpps live at 64 B (perf/RESULTS.md).
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
    /// frames after it instead of following one another inside the driver's free loop
    /// (congested port, one worker: 412 -> 329 cycles per frame, min of five alternating runs).
    #[inline(always)]
    pub fn prefetch_header(&self) {
        let header = self.0.as_ptr().cast::<u8>().cast_const();
        prefetch_line(header);
        // SAFETY: `rte_mbuf` is 128 bytes, so the second line is inside the same object.
        prefetch_line(unsafe { header.add(64) });
    }
}

/// Asks the CPU to start loading the cache line holding `address` (DPDK's `rte_prefetch0`,
/// written here so that it inlines). A hint: it never faults, changes no memory, and does
/// nothing on other architectures.
#[inline(always)]
fn prefetch_line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of any address is architecturally a no-op that cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
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

    #[inline(always)]
    fn prefetch<T>(value: &T) {
        prefetch_line((value as *const T).cast());
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
    mbufs: [*mut sys::rte_mbuf; BURST],
    len: usize,
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

/// A started ethdev port with one tx queue and `rx_queues` rx queues.
pub struct Port {
    id: u16,
    pub name: String,
    pub driver: String,
    /// Rx queues opened: as many as asked for, up to what the device offers.
    pub rx_queues: u16,
    /// Tx queues opened: the data's, and PFC's own where the port has one.
    pub tx_queues: u16,
    /// Whether the device spreads frames over the rx queues by RSS (IP addresses, UDP/TCP
    /// ports), so each flow keeps to one queue. Without it, each queue has its own source (a
    /// net_pcap rx_pcap file per queue, say).
    pub rss: bool,
    /// How many rx queues the device offers (net_pcap: one per rx_pcap file).
    pub max_rx_queues: u16,
    /// The MTU the device was configured with: the one asked for, or its maximum if lower.
    pub mtu: u32,
    /// The pool its rx queues fill: freed only after the port is closed.
    _pool: Arc<Mempool>,
}

/// What a frame carries besides its IP packet: Ethernet header and two VLAN tags (QinQ).
pub const LINK_HEADERS: usize = 14 + 2 * 4;

/// Drivers that unmap a port's memory on the interrupt thread while lcores may be inside a
/// burst on it (net_memif, when its peer goes away): their bursts are guarded so the unmap
/// waits for them (`shim.c`, "Bursts against a driver's teardown"). Without it a switch could
/// die of SIGSEGV when a memif peer went away (`tests/live.rs`,
/// `switch_survives_memif_peers_vanishing_mid_traffic`, failed 5 runs of 5 without it).
const DRIVERS_UNMAPPING_UNDER_BURSTS: &[&str] = &["net_memif"];

/// Descriptors asked for per queue (the driver may adjust them).
pub const RX_DESCRIPTORS: u16 = 1024;
pub const TX_DESCRIPTORS: u16 = 1024;

impl Port {
    /// Finds the ethdev whose name is `device_name` (the devargs before the first comma).
    pub fn find(device_name: &str) -> Result<u16, DpdkError> {
        let c_name = CString::new(device_name)
            .map_err(|_| DpdkError { context: device_name.into(), problem: "NUL in name".into() })?;
        let mut id = 0u16;
        // SAFETY: c_name and &mut id are valid for the call.
        let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
        check(rc, || format!("device '{device_name}'")).map(|_| id)
    }

    /// Brings the port up: info, configure (with RSS when more than one rx queue is opened and
    /// the device hashes; the MTU), descriptors, queues on the port's socket, start,
    /// promiscuous mode (where supported), link up (bounded wait). Opens up to `rx_queues` rx
    /// queues. `mtu` is the switch's (IP) MTU: the port takes it, or the largest the device
    /// does (a warning says so), and receives frames longer than an mbuf as chains where the
    /// device can; 0 leaves the driver's default.
    ///
    /// `pfc_tx_queue` opens a second tx queue for PFC frames (`tx_control_burst`), so that
    /// they wait on the wire behind the frame in progress only; a device with one tx queue
    /// is then an error, since the headroom was planned for the second.
    pub fn start(
        id: u16,
        name: &str,
        pool: &Arc<Mempool>,
        rx_queues: u16,
        mtu: u32,
        pfc_tx_queue: bool,
    ) -> Result<Self, DpdkError> {
        let context = |step: &str| format!("port '{name}' (ethdev {id}): {step}");
        let mut max_rx = 0u16;
        let mut max_tx = 0u16;
        let mut rss_offloads = 0u64;
        let mut driver: *const c_char = std::ptr::null();
        let mut max_mtu = 0u16;
        let mut can_scatter = 0;
        check(
            // SAFETY: the out-pointers are valid; the driver name is a static string of the PMD.
            unsafe {
                sys::shim_eth_dev_info(
                    id,
                    &mut max_rx,
                    &mut max_tx,
                    &mut rss_offloads,
                    &mut driver,
                    &mut max_mtu,
                    &mut can_scatter,
                )
            },
            || context("device info"),
        )?;
        let driver = if driver.is_null() {
            String::new()
        } else {
            // SAFETY: non-null, NUL-terminated, owned by the PMD for the process lifetime.
            unsafe { CStr::from_ptr(driver) }.to_string_lossy().into_owned()
        };
        if max_rx == 0 || max_tx == 0 {
            return Err(DpdkError {
                context: context("queues"),
                problem: format!("driver {driver} offers {max_rx} rx / {max_tx} tx queues"),
            });
        }
        let tx_queues: u16 = if pfc_tx_queue { 2 } else { 1 };
        if tx_queues > max_tx {
            return Err(DpdkError {
                context: context("pfc_tx_queue"),
                problem: format!(
                    "driver {driver} offers {max_tx} tx queue, none for PFC frames: set pfc_tx_queue = false \
                     (the auto headroom then counts the data PFC waits behind)"
                ),
            });
        }
        if DRIVERS_UNMAPPING_UNDER_BURSTS.contains(&driver.as_str()) {
            // SAFETY: a flag write for a valid port id, before the port starts and any burst.
            unsafe { sys::shim_guard_bursts(id) };
        }
        let rx_queues = rx_queues.clamp(1, max_rx);
        // SAFETY: a plain constant getter.
        let rss_hf = rss_offloads & unsafe { sys::shim_rss_ip_udp_tcp() };
        let rss = rx_queues > 1 && rss_hf != 0;
        let port_mtu = mtu.min(u32::from(max_mtu));
        if port_mtu < mtu {
            tracing::warn!(
                "{}: the device takes an MTU of at most {port_mtu} bytes; switch.mtu is {mtu}",
                context("mtu")
            );
        }
        // Frames longer than an mbuf's room arrive as chains where the device scatters (and
        // the engine copies them into one jumbo mbuf); elsewhere the driver decides.
        let scatter = can_scatter != 0 && port_mtu as usize + LINK_HEADERS > pool.frame_room();
        let rss_hf = if rss { rss_hf } else { 0 };
        let scatter = c_int::from(scatter);
        // SAFETY: plain calls on a valid port id; configuration is built in C with defaults.
        let configured = unsafe { sys::shim_eth_dev_configure(id, rx_queues, tx_queues, rss_hf, port_mtu, scatter) };
        check(configured, || context("configure"))?;
        let mut rx_desc = RX_DESCRIPTORS;
        let mut tx_desc = TX_DESCRIPTORS;
        // SAFETY: the out-pointers are valid.
        check(unsafe { sys::shim_eth_adjust_desc(id, &mut rx_desc, &mut tx_desc) }, || context("descriptors"))?;
        // SAFETY: plain getter on a valid port id.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) }.max(0) as c_uint;
        for queue in 0..rx_queues {
            // SAFETY: the pool outlives the port (teardown order); defaults for the queue conf.
            check(unsafe { sys::shim_eth_rx_queue_setup(id, queue, rx_desc, socket, pool.as_ptr()) }, || {
                context(&format!("rx queue {queue}"))
            })
            .map_err(|mut err| {
                // Drivers that preload frames (net_pcap with infinite_rx=1) refuse frames longer
                // than one mbuf, which they would have to chain.
                err.problem.push_str(&format!(
                    " (frames over {} bytes need chained mbufs, which some drivers refuse, e.g. net_pcap with \
                     infinite_rx=1)",
                    pool.frame_room()
                ));
                err
            })?;
        }
        for queue in 0..tx_queues {
            // SAFETY: as above.
            check(unsafe { sys::shim_eth_tx_queue_setup(id, queue, tx_desc, socket) }, || {
                context(&format!("tx queue {queue}"))
            })?;
        }
        // SAFETY: the port is configured with its queues.
        check(unsafe { sys::rte_eth_dev_start(id) }, || context("start"))?;
        // Not every PMD supports promiscuous mode (-ENOTSUP); a leaf switch routes frames
        // addressed to it either way, so only log it.
        // SAFETY: plain call on a started port.
        let rc = unsafe { sys::rte_eth_promiscuous_enable(id) };
        if rc < 0 {
            tracing::debug!("{}: {}", context("promiscuous mode"), strerror(rc));
        }
        let port = Self {
            id,
            name: name.to_string(),
            driver,
            rx_queues,
            tx_queues,
            rss,
            max_rx_queues: max_rx,
            mtu: port_mtu,
            _pool: Arc::clone(pool),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while !port.link_up() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if !port.link_up() {
            tracing::warn!("{}: link is down after 3 s; continuing", context("link"));
        }
        Ok(port)
    }

    /// Takes the device's link down or up (an operator's shutdown). `Ok(false)` when the
    /// driver cannot (net_af_packet, net_ring, ...): the switch then only stops using the port.
    pub fn set_link(&self, up: bool) -> Result<bool, DpdkError> {
        // SAFETY: plain calls on a started port; control-path functions the link watcher
        // alone calls.
        let rc = unsafe {
            if up {
                sys::rte_eth_dev_set_link_up(self.id)
            } else {
                sys::rte_eth_dev_set_link_down(self.id)
            }
        };
        match rc {
            0 => Ok(true),
            rc if rc == -libc::ENOTSUP => Ok(false),
            rc => Err(DpdkError {
                context: format!("port '{}': link {}", self.name, if up { "up" } else { "down" }),
                problem: strerror(rc),
            }),
        }
    }

    pub fn link_up(&self) -> bool {
        let mut up = 0;
        let mut speed = 0;
        // SAFETY: the out-pointers are valid for the call.
        let rc = unsafe { sys::shim_eth_link(self.id, &mut up, &mut speed) };
        rc == 0 && up != 0
    }

    /// Receives up to `BURST - burst.len()` frames from rx queue `queue` into `burst`.
    #[inline]
    pub fn rx_burst(&self, queue: u16, burst: &mut Burst) -> usize {
        debug_assert!(queue < self.rx_queues);
        let room = (BURST - burst.len) as u16;
        // SAFETY: the slots from `len` on are writable; rx fills at most `room` of them with
        // mbufs that the burst then owns; the queue was set up in `start`.
        let received = unsafe { sys::shim_eth_rx_burst(self.id, queue, burst.mbufs.as_mut_ptr().add(burst.len), room) };
        burst.len += usize::from(received);
        usize::from(received)
    }

    /// Sends as much of `burst` as the tx queue takes; the rest stays in the burst, in order.
    #[inline]
    pub fn tx_burst(&self, burst: &mut Burst) -> usize {
        self.tx_burst_on(0, burst)
    }

    /// `tx_burst` for PFC frames: on their own tx queue where the port has one, so the NIC
    /// sends them after the frame in progress rather than after the data queued before them.
    #[inline]
    pub fn tx_control_burst(&self, burst: &mut Burst) -> usize {
        self.tx_burst_on(self.tx_queues - 1, burst)
    }

    #[inline]
    fn tx_burst_on(&self, queue: u16, burst: &mut Burst) -> usize {
        if burst.len == 0 {
            return 0;
        }
        // SAFETY: the first `len` slots are owned mbufs; the PMD takes ownership of the first
        // `sent` of them; the queue was set up in `start`.
        let sent =
            usize::from(unsafe { sys::shim_eth_tx_burst(self.id, queue, burst.mbufs.as_mut_ptr(), burst.len as u16) });
        burst.mbufs.copy_within(sent..burst.len, 0);
        burst.len -= sent;
        sent
    }

    /// Device counters: (rx packets, tx packets, rx missed + errors, rx without mbuf).
    pub fn hw_stats(&self) -> (u64, u64, u64, u64) {
        let mut stats = sys::rte_eth_stats::default();
        // SAFETY: the out-pointer is valid for the call.
        let rc = unsafe { sys::rte_eth_stats_get(self.id, &mut stats) };
        if rc != 0 {
            return (0, 0, 0, 0);
        }
        (stats.ipackets, stats.opackets, stats.imissed + stats.ierrors, stats.rx_nombuf)
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // Stop, then close: closing flushes capture-backed vdevs (net_pcap writes its file)
        // and releases the mbufs the driver held.
        // SAFETY: nothing uses the port any more (workers have been waited for).
        unsafe {
            sys::rte_eth_dev_stop(self.id);
            sys::rte_eth_dev_close(self.id);
        }
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
static DUMP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: c_int) {
    // Only an atomic store: async-signal-safe.
    if signal == libc::SIGUSR1 {
        DUMP.store(true, Ordering::Relaxed);
    } else {
        STOP.store(true, Ordering::Relaxed);
    }
}

/// Makes SIGINT and SIGTERM set the stop flag, and SIGUSR1 the dump request (and nothing
/// else).
/// A telemetry reply. DPDK renders it as JSON.
pub enum TelemetryReply {
    /// Named sections (ports, groups), each a dict of counters: one object of objects.
    Sections(Vec<(String, Vec<(String, u64)>)>),
    /// One string of at most `TELEMETRY_TEXT_MAX` bytes, of characters JSON needs no escape
    /// for (DPDK 22.11 writes it as it is).
    Text(String),
}

/// The longest string reply DPDK takes (RTE_TEL_MAX_SINGLE_STRING_LEN, with its NUL).
pub const TELEMETRY_TEXT_MAX: usize = 8191;
/// Answers a registered telemetry command (command, parameters), or `None` for an unknown one.
pub type TelemetryHandler = Box<dyn Fn(&str, &str) -> Option<TelemetryReply> + Send + Sync>;

static TELEMETRY_HANDLER: std::sync::OnceLock<TelemetryHandler> = std::sync::OnceLock::new();

/// A telemetry dict key: DPDK accepts only ASCII letters, digits, '_' and '/'.
fn telemetry_name(name: &str) -> CString {
    let clean: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '/' { c } else { '_' }).collect();
    CString::new(clean).expect("no NUL after cleaning")
}

/// The C callback of every raceway telemetry command: runs on DPDK's telemetry thread, asks
/// the handler, and fills the reply. A panic in the handler is caught (it must not unwind
/// into C) and answered with -EIO.
extern "C" fn telemetry_callback(cmd: *const c_char, params: *const c_char, data: *mut sys::rte_tel_data) -> c_int {
    let Some(handler) = TELEMETRY_HANDLER.get() else { return -libc::ENOENT };
    let text = |ptr: *const c_char| {
        if ptr.is_null() {
            String::new()
        } else {
            // SAFETY: DPDK passes NUL-terminated strings valid for the call.
            unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
        }
    };
    let (cmd, params) = (text(cmd), text(params));
    let reply = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&cmd, &params))) {
        Ok(Some(reply)) => reply,
        Ok(None) => return -libc::EINVAL,
        Err(_) => return -libc::EIO,
    };
    let reply = match reply {
        TelemetryReply::Text(text) => {
            let Ok(text) = CString::new(text) else { return -libc::EINVAL };
            if text.as_bytes().len() > TELEMETRY_TEXT_MAX {
                return -libc::E2BIG;
            }
            // SAFETY: `data` is the reply object DPDK passed for this call; DPDK copies the
            // string, which is NUL-terminated and within its limit.
            return unsafe { sys::rte_tel_data_string(data, text.as_ptr()) };
        }
        TelemetryReply::Sections(sections) => sections,
    };
    // SAFETY: `data` is the reply object DPDK passed for this call.
    unsafe { sys::rte_tel_data_start_dict(data) };
    for (section, values) in reply {
        // SAFETY: a plain allocation; checked for NULL below.
        let child = unsafe { sys::rte_tel_data_alloc() };
        if child.is_null() {
            return -libc::ENOMEM;
        }
        // SAFETY: `child` is a fresh telemetry object we own until it is added below.
        unsafe { sys::rte_tel_data_start_dict(child) };
        for (name, value) in values {
            let name = telemetry_name(&name);
            // SAFETY: `child` is a started dict; the name outlives the call (DPDK copies it).
            unsafe { sys::rte_tel_data_add_dict_u64(child, name.as_ptr(), value) };
        }
        let section = telemetry_name(&section);
        // SAFETY: `data` is a started dict; keep = 0 hands `child` to DPDK, which frees it
        // once the reply is written.
        unsafe { sys::rte_tel_data_add_dict_container(data, section.as_ptr(), child, 0) };
    }
    0
}

/// Registers `commands` (name, help) with DPDK telemetry, all answered by `handler`, so that
/// `dpdk-telemetry.py` can query them. Once per process, after the EAL is up.
pub fn register_telemetry(
    commands: &[(&'static CStr, &'static CStr)],
    handler: TelemetryHandler,
) -> Result<(), DpdkError> {
    if TELEMETRY_HANDLER.set(handler).is_err() {
        return Err(DpdkError { context: "telemetry".into(), problem: "commands are already registered".into() });
    }
    for (command, help) in commands {
        // SAFETY: static NUL-terminated strings; the callback is a plain extern "C" fn.
        let rc = unsafe { sys::rte_telemetry_register_cmd(command.as_ptr(), Some(telemetry_callback), help.as_ptr()) };
        check(rc, || format!("telemetry command {}", command.to_string_lossy()))?;
    }
    Ok(())
}

pub fn install_stop_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(signal, on_signal as extern "C" fn(c_int) as libc::sighandler_t) };
    }
}

/// True once SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// True once per SIGUSR1 (or several that arrived together): the request is taken.
pub fn take_dump_request() -> bool {
    DUMP.swap(false, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdump_needs_shared_memory() {
        let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(shares_memory(&args(&["-l", "0-1", "--file-prefix", "x"])));
        assert!(!shares_memory(&args(&["--no-huge", "-m", "1024"])));
        assert!(!shares_memory(&args(&["--in-memory"])));
        assert!(!shares_memory(&args(&["--no-shconf"])));
    }
}
