//! A fixed-size log-linear latency histogram (8 sub-buckets per power of two of nanoseconds,
//! so any reported value is within 12.5% of the truth), cheap enough to record every packet.
//!
//! Invariant: recording never allocates (the buckets are a fixed array) and percentiles are
//! reported as the upper bound of the bucket that holds them, so they never understate.

#![forbid(unsafe_code)]

const SUB_BUCKET_BITS: u32 = 3;
const SUB_BUCKETS: usize = 1 << SUB_BUCKET_BITS;
/// Up to 2^40 ns (18 minutes) before the last bucket saturates.
const BUCKETS: usize = (41 - SUB_BUCKET_BITS as usize) * SUB_BUCKETS + SUB_BUCKETS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    buckets: Box<[u64; BUCKETS]>,
    pub samples: u64,
    pub max_ns: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self { buckets: Box::new([0; BUCKETS]), samples: 0, max_ns: 0 }
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
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.samples += other.samples;
        self.max_ns = self.max_ns.max(other.max_ns);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
