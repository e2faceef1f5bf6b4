//! What the pipeline asks of the CPU itself: a prefetch hint. The one `unsafe` block outside
//! the DPDK glue, because no stable safe prefetch exists.
//!
//! Invariant: nothing here reads or writes memory; removing every call changes speed, never
//! behaviour.
#![allow(unsafe_code)]

/// Asks the CPU to start loading the cache line holding `address` (DPDK's `rte_prefetch0`,
/// written here so that it inlines). A hint: it never faults, changes no memory, and does
/// nothing on other architectures.
#[inline(always)]
pub fn prefetch_line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of any address, mapped or not, is architecturally a hint that cannot
    // fault and writes nothing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
