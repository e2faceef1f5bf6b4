//! The DPDK glue: EAL start and cleanup, lcore launch, the TSC and the stop signal here; the
//! mbuf pool, the `Mbuf` wrapper that implements `PacketBuf` and bursts in `mbuf.rs`; port
//! bring-up and rx/tx bursts in `port.rs`; telemetry commands in `telemetry.rs`. The
//! kernel's side (TAP, namespaces, sockets) is `crate::linux`.
//!
//! With `linux`, the only module of this crate allowed `unsafe`; every block says why it is
//! sound. Invariant: an `Mbuf` uniquely owns its `rte_mbuf` and frees it on drop; a
//! `Burst` owns the mbufs in its first `len` slots and frees them on drop; so no path loses an
//! mbuf, and the pool is full again once ports are stopped and every wrapper is gone.

#![allow(unsafe_code)]

mod mbuf;
mod port;
mod telemetry;

pub use mbuf::{pools_kept, Burst, Mbuf, Mempool};
pub use port::{Port, PortTx, RxQueue, TxQueues, LINK_HEADERS, RX_DESCRIPTORS, TX_DESCRIPTORS};
pub use telemetry::{register_telemetry, TelemetryHandler, TelemetryReply, TELEMETRY_TEXT_MAX};

use dpdk_sys as sys;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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
/// no handle, to stay one pointer: a pool dropped with mbufs out is kept, EAL and all, rather
/// than freed; `pools_kept`.)
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
    ///
    /// A panic in `task` aborts the whole process, after its message is printed: it cannot
    /// unwind through the EAL's C frames, and Rust aborts a panic that reaches an `extern "C"`
    /// function's edge (the trampoline below). That is wanted: raceway's workers do not panic
    /// on any input (bad frames are counted drops), so a panic is a bug, and stopping at once
    /// keeps the other workers from forwarding on state the panicking one left half-written.
    /// Ports, pools and capture files are then not closed; the kernel reclaims the process.
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

/// Reads the time-stamp counter: the instruction itself where the target has one (DPDK's
/// `rte_rdtsc` is a plain RDTSC there too), so the worker's reads are inlined rather than a
/// call into the shim.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and touches no memory.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// Reads the time-stamp counter (DPDK's `rte_rdtsc`).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: reads the TSC; no memory is touched.
    unsafe { sys::shim_rdtsc() }
}

static STOP: AtomicBool = AtomicBool::new(false);
static DUMP: AtomicBool = AtomicBool::new(false);
/// The last SIGHUP (a reload) or SIGUSR2 (logged), for the main lcore to take.
static NOTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: c_int) {
    // Only an atomic store: async-signal-safe.
    match signal {
        libc::SIGUSR1 => DUMP.store(true, Ordering::Relaxed),
        libc::SIGHUP | libc::SIGUSR2 => NOTED.store(signal, Ordering::Relaxed),
        _ => STOP.store(true, Ordering::Relaxed),
    }
}

/// Makes SIGINT and SIGTERM set the stop flag and SIGUSR1 the dump request; SIGHUP (what a
/// `systemctl reload` or logrotate sends: a reload of the config) and SIGUSR2 (logged) are
/// noted for the main lcore, never fatal (a daemon's default would end it). SIGPIPE is ignored by Rust's runtime already.
pub fn install_stop_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1, libc::SIGHUP, libc::SIGUSR2] {
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

/// The name of a noted signal (SIGHUP, SIGUSR2) that arrived since the last call, once.
pub fn take_noted_signal() -> Option<&'static str> {
    match NOTED.swap(0, Ordering::Relaxed) {
        libc::SIGHUP => Some("SIGHUP"),
        libc::SIGUSR2 => Some("SIGUSR2"),
        _ => None,
    }
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
