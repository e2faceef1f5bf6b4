//! A fixed-size log-linear latency histogram (8 sub-buckets per power of two of nanoseconds,
//! so any reported value is within 12.5% of the truth), cheap enough to record every packet.
//!
//! Invariant: recording never allocates (the buckets are a fixed array) and percentiles are
//! reported as the upper bound of the bucket that holds them, so they never understate.

const SUB_BUCKET_BITS: u32 = 3;
const SUB_BUCKETS: usize = 1 << SUB_BUCKET_BITS;
/// Up to 2^40 ns (18 minutes) before the last bucket saturates.
const BUCKETS: usize = (41 - SUB_BUCKET_BITS as usize) * SUB_BUCKETS + SUB_BUCKETS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    buckets: Box<[u64; BUCKETS]>,
    pub samples: u64,
    pub max_ns: u64,
    /// Sum of every sample (Prometheus's `_sum`).
    pub sum_ns: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self { buckets: Box::new([0; BUCKETS]), samples: 0, max_ns: 0, sum_ns: 0 }
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < SUB_BUCKETS as u64 {
        return ns as usize;
    }
    let magnitude = 63 - ns.leading_zeros(); // >= SUB_BUCKET_BITS
    let shift = magnitude - SUB_BUCKET_BITS;
    let sub = ((ns >> shift) as usize) & (SUB_BUCKETS - 1);
    (((magnitude - SUB_BUCKET_BITS + 1) as usize) * SUB_BUCKETS + sub).min(BUCKETS - 1)
}

/// The largest value a bucket holds.
fn upper_bound(bucket: usize) -> u64 {
    if bucket < SUB_BUCKETS {
        return bucket as u64;
    }
    let magnitude = (bucket / SUB_BUCKETS) as u32 - 1 + SUB_BUCKET_BITS;
    let sub = (bucket % SUB_BUCKETS) as u64;
    let shift = magnitude - SUB_BUCKET_BITS;
    ((SUB_BUCKETS as u64 + sub + 1) << shift) - 1
}

impl LatencyHistogram {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.buckets[bucket_of(ns)] += 1;
        self.samples += 1;
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns = self.sum_ns.wrapping_add(ns);
    }

    /// Records `count` samples of `ns` at once (frames that left together).
    #[inline]
    pub fn record_many(&mut self, ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.buckets[bucket_of(ns)] += count;
        self.samples += count;
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns = self.sum_ns.wrapping_add(ns.wrapping_mul(count));
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.samples += other.samples;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns = self.sum_ns.wrapping_add(other.sum_ns);
    }

    /// Samples of at most `2^k - 1` ns for each k in `bits` (a bucket boundary, so the counts
    /// are exact), cumulative: Prometheus's `_bucket{le=...}`.
    pub fn cumulative_below_powers_of_two(&self, bits: std::ops::RangeInclusive<u32>) -> Vec<(u64, u64)> {
        bits.map(|k| {
            let bound = (1u64 << k) - 1;
            let count = self.buckets.iter().enumerate().filter(|(b, _)| upper_bound(*b) <= bound).map(|(_, c)| c).sum();
            (bound, count)
        })
        .collect()
    }

    /// The value at `quantile` (0-1), as the upper bound of its bucket, capped at the maximum.
    pub fn quantile(&self, quantile: f64) -> u64 {
        if self.samples == 0 {
            return 0;
        }
        let rank = ((quantile * self.samples as f64).ceil() as u64).clamp(1, self.samples);
        let mut seen = 0;
        for (bucket, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return upper_bound(bucket).min(self.max_ns);
            }
        }
        self.max_ns
    }
}

/// The same buckets as atomics, for a latency several threads record (frames the control
/// thread hands to whichever worker injects them). Recording is one relaxed add per bucket
/// and counter; readers take a `LatencyHistogram` copy.
pub struct SharedHistogram {
    buckets: Box<[std::sync::atomic::AtomicU64]>,
    max_ns: std::sync::atomic::AtomicU64,
    sum_ns: std::sync::atomic::AtomicU64,
}

impl Default for SharedHistogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            max_ns: std::sync::atomic::AtomicU64::new(0),
            sum_ns: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl SharedHistogram {
    #[inline]
    pub fn record(&self, ns: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    /// What has been recorded so far (samples are counted from the buckets, so the copy is
    /// consistent with itself even while others record).
    pub fn snapshot(&self) -> LatencyHistogram {
        use std::sync::atomic::Ordering::Relaxed;
        let mut copy = LatencyHistogram::default();
        for (mine, shared) in copy.buckets.iter_mut().zip(self.buckets.iter()) {
            *mine = shared.load(Relaxed);
        }
        copy.samples = copy.buckets.iter().sum();
        copy.max_ns = self.max_ns.load(Relaxed);
        copy.sum_ns = self.sum_ns.load(Relaxed);
        copy
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shared_histogram_reads_back_as_recorded() {
        let (shared, mut plain) = (SharedHistogram::default(), LatencyHistogram::default());
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    for ns in [5u64, 900, 1_000_000] {
                        shared.record(ns);
                    }
                });
            }
        });
        for ns in [5u64, 900, 1_000_000, 5, 900, 1_000_000] {
            plain.record(ns);
        }
        assert_eq!(shared.snapshot(), plain);
    }

    use super::*;

    #[test]
    fn recording_many_at_once_is_recording_each() {
        let (mut many, mut each) = (LatencyHistogram::default(), LatencyHistogram::default());
        for (ns, count) in [(3u64, 5u64), (1_000, 32), (0, 0), (70_000, 1)] {
            many.record_many(ns, count);
            for _ in 0..count {
                each.record(ns);
            }
        }
        assert_eq!(many, each);
        assert_eq!((many.samples, many.max_ns, many.sum_ns), (38, 70_000, 15 + 32_000 + 70_000));
    }

    #[test]
    fn buckets_are_within_an_eighth() {
        for ns in [0u64, 1, 7, 8, 9, 15, 16, 100, 1_000, 123_456, 10_000_000_000] {
            let bucket = bucket_of(ns);
            assert!(upper_bound(bucket) >= ns, "{ns}");
            assert!(upper_bound(bucket) as f64 <= ns as f64 * 1.125 + 1.0, "{ns}: {}", upper_bound(bucket));
            if bucket > 0 {
                assert!(upper_bound(bucket - 1) < ns, "{ns}");
            }
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut histogram = LatencyHistogram::default();
        for ns in 1..=1000u64 {
            histogram.record(ns * 100);
        }
        let p50 = histogram.quantile(0.5);
        assert!((50_000..=56_250).contains(&p50), "{p50}");
        let p99 = histogram.quantile(0.99);
        assert!((99_000..=100_000).contains(&p99), "{p99}");
        assert_eq!(histogram.quantile(1.0), 100_000);
        assert_eq!(LatencyHistogram::default().quantile(0.5), 0);
    }

    #[test]
    fn cumulative_counts_at_powers_of_two_are_exact() {
        let mut histogram = LatencyHistogram::default();
        for ns in [0, 63, 64, 1_000, 1_023, 1_024, 5_000] {
            histogram.record(ns);
        }
        let counts = histogram.cumulative_below_powers_of_two(6..=13);
        assert_eq!(counts[0], (63, 2));
        assert_eq!(counts[4], (1_023, 5));
        assert_eq!(counts[5], (2_047, 6));
        assert_eq!(counts[7], (8_191, 7));
        assert_eq!(histogram.sum_ns, 63 + 64 + 1_000 + 1_023 + 1_024 + 5_000);
    }
}
