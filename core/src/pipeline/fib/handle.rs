//! Where the FIB's current snapshot is published: the control plane's FIB thread stores a new
//! one, every worker loads it at its next burst (one atomic load when it has not changed).
//!
//! Invariant: a replaced snapshot is freed by the publisher, never by a worker, once no worker
//! holds it; a reader that sees a generation loads that snapshot or a newer one.

use super::Fib;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where the current snapshot is published: the control plane stores, workers load.
///
/// A replaced snapshot is kept here until no worker holds it, and then freed by the control
/// plane (`reclaim`): a worker letting go of one only decrements a count. (Freeing a large
/// snapshot on the worker slowed forwarding during route churn: perf/RESULTS.md, "Figures
/// once in code comments".)
pub struct FibHandle {
    current: ArcSwap<Fib>,
    generation: AtomicU64,
    /// Replaced snapshots some worker may still read; only the publisher touches it.
    retired: std::sync::Mutex<Vec<Arc<Fib>>>,
}

impl FibHandle {
    pub fn new(fib: Fib) -> Self {
        let generation = AtomicU64::new(fib.generation);
        Self { current: ArcSwap::from_pointee(fib), generation, retired: std::sync::Mutex::new(Vec::new()) }
    }

    /// Makes `fib` the current snapshot; readers pick it up at their next burst.
    pub fn publish(&self, fib: Fib) {
        let generation = fib.generation;
        let old = self.current.swap(Arc::new(fib));
        // After the pointer: a reader that sees the new number loads the new snapshot.
        self.generation.store(generation, Ordering::Release);
        let mut retired = self.retired.lock().expect("retired snapshots");
        retired.push(old);
        retired.retain(|fib| Arc::strong_count(fib) > 1);
    }

    /// Frees replaced snapshots no reader holds any more; returns how many are still held.
    pub fn reclaim(&self) -> usize {
        let mut retired = self.retired.lock().expect("retired snapshots");
        retired.retain(|fib| Arc::strong_count(fib) > 1);
        retired.len()
    }

    /// The generation readers should have (one atomic load: the per-burst check).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn load(&self) -> Arc<Fib> {
        self.current.load_full()
    }
}
