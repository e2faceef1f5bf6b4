//! sFlow's packet sampling (`[sflow]`): 1 in N of the frames each port receives, chosen at
//! random as the sFlow v5 spec asks (a skip count drawn uniformly from 1 to 2N - 1 after each
//! sample, so that the mean gap is N and no traffic pattern can align with the sampler), their
//! first bytes copied into a `FlowSample` with the port's sample pool (frames the port saw).
//! The samples wait in a fixed outbox for the engine to take (live: the exporter thread); one
//! that finds the outbox full is counted in `dropped`, which sFlow reports.
//!
//! Dropped frames become dropped-packet notifications (sFlow's drop extension): each drop the
//! switch counts is offered with its reason, and taken while a token bucket of `drop_limit` a
//! second (in the frames' own time) has a token; the rest are counted in `discards_lost`,
//! which each notification reports.
//!
//! Invariant: a port's pool counts every frame `offer` saw on it, sampled or not; a frame is
//! sampled only at a skip count's end; nothing allocates after `new`.

use crate::config::{Config, SFLOW_MAX_HEADER_BYTES};
use crate::drops::DropReason;
use crate::pipeline::punt::Policer;
use crate::rng::Rng;

/// Samples the outbox holds between two takes: a 100 ms publish period of 10 Mpps at 1 in
/// 1,000, with room to spare.
pub const OUTBOX: usize = 1024;
/// An egress port not (yet) known: the frame was dropped, punted or never routed.
pub const NO_PORT: u16 = u16::MAX;

/// One sampled frame.
#[derive(Clone, Copy)]
pub struct FlowSample {
    pub ingress: u16,
    /// The port it was queued for, `NO_PORT` when none.
    pub egress: u16,
    /// The frame's length (without FCS).
    pub frame_len: u32,
    /// The port's sampling rate and pool when it was taken.
    pub rate: u32,
    pub pool: u32,
    pub header_len: u16,
    pub header: [u8; SFLOW_MAX_HEADER_BYTES as usize],
    /// A dropped frame's notification: why (a flow sample otherwise).
    pub discarded: Option<DropReason>,
}

struct PortSampler {
    rate: u32,
    /// Frames to let pass before the next sample.
    skip: u32,
    /// Frames seen (sFlow's sample_pool, a wrapping 32-bit count).
    pool: u32,
}

/// The token bucket of `drop_limit` notifications a second (a second's worth at once).
fn discard_limit(sflow: &crate::config::SflowConfig) -> Option<Policer> {
    (sflow.drop_limit > 0).then(|| Policer::new(u64::from(sflow.drop_limit), u64::from(sflow.drop_limit)))
}

/// The sampler of one switch (one worker live).
pub struct Sampler {
    ports: Vec<PortSampler>,
    header_bytes: u16,
    rng: Rng,
    outbox: Vec<FlowSample>,
    /// Samples the outbox had no room for (sFlow's `drops`).
    pub dropped: u32,
    /// Dropped-packet notifications a second (`drop_limit`); `None`: none.
    discards: Option<Policer>,
    /// Drops not notified: over the limit, or no room (a notification's `drops`).
    pub discards_lost: u32,
}

impl Sampler {
    /// The sampler `config` asks for (`None` without `[sflow]`).
    pub fn new(config: &Config, seed: u64) -> Option<Self> {
        let sflow = config.sflow.as_ref()?;
        let mut rng = Rng::new(seed ^ 0x5f10_5a3b);
        let ports = sflow.rates.iter().map(|&rate| PortSampler { rate, skip: draw(&mut rng, rate), pool: 0 }).collect();
        Some(Self {
            ports,
            header_bytes: sflow.header_bytes,
            rng,
            outbox: Vec::with_capacity(OUTBOX),
            dropped: 0,
            discards: discard_limit(sflow),
            discards_lost: 0,
        })
    }

    /// Takes a reloaded config's rates and header length; a port whose rate changed starts a
    /// new skip count. (A reload that adds or removes `[sflow]` swaps the whole sampler.)
    pub fn set_rates(&mut self, config: &crate::config::SflowConfig) {
        self.header_bytes = config.header_bytes;
        self.discards = discard_limit(config);
        for (port, &rate) in self.ports.iter_mut().zip(&config.rates) {
            if port.rate != rate {
                port.rate = rate;
                port.skip = draw(&mut self.rng, rate);
            }
        }
    }

    /// A frame received on `port`: true when it is to be sampled (then call `take`).
    #[inline(always)]
    pub fn offer(&mut self, port: usize) -> bool {
        let sampler = &mut self.ports[port];
        sampler.pool = sampler.pool.wrapping_add(1);
        sampler.skip -= 1;
        sampler.skip == 0
    }

    /// Samples `frame` received on `port` (after `offer` said so); returns its index in the
    /// outbox, for `set_egress`, or `None` if the outbox was full (counted).
    #[cold]
    pub fn take(&mut self, port: usize, frame: &[u8], frame_len: usize) -> Option<usize> {
        let sampler = &mut self.ports[port];
        sampler.skip = draw(&mut self.rng, sampler.rate);
        if self.outbox.len() == OUTBOX {
            self.dropped = self.dropped.wrapping_add(1);
            return None;
        }
        let header_len = frame.len().min(usize::from(self.header_bytes));
        let mut sample = FlowSample {
            ingress: port as u16,
            egress: NO_PORT,
            frame_len: frame_len as u32,
            rate: sampler.rate,
            pool: sampler.pool,
            header_len: header_len as u16,
            header: [0; SFLOW_MAX_HEADER_BYTES as usize],
            discarded: None,
        };
        sample.header[..header_len].copy_from_slice(&frame[..header_len]);
        self.outbox.push(sample);
        Some(self.outbox.len() - 1)
    }

    /// A frame received on `ingress` was dropped for `reason` (before an egress port was
    /// chosen: `NO_PORT`) at `now` (ps): notified while the limit has room.
    #[cold]
    pub fn discard(
        &mut self,
        ingress: usize,
        egress: u16,
        reason: DropReason,
        frame: &[u8],
        frame_len: usize,
        now: u64,
    ) {
        let Some(limit) = &mut self.discards else { return };
        if !limit.admit(now) || self.outbox.len() == OUTBOX {
            self.discards_lost = self.discards_lost.wrapping_add(1);
            return;
        }
        let header_len = frame.len().min(usize::from(self.header_bytes));
        let mut sample = FlowSample {
            ingress: ingress as u16,
            egress,
            frame_len: frame_len as u32,
            rate: 0,
            pool: 0,
            header_len: header_len as u16,
            header: [0; SFLOW_MAX_HEADER_BYTES as usize],
            discarded: Some(reason),
        };
        sample.header[..header_len].copy_from_slice(&frame[..header_len]);
        self.outbox.push(sample);
    }

    /// The sampled frame `index` (from `take`) was queued for `egress`.
    #[inline]
    pub fn set_egress(&mut self, index: usize, egress: usize) {
        if let Some(sample) = self.outbox.get_mut(index) {
            sample.egress = egress as u16;
        }
    }

    /// The sampled frame `index` as it came in (its header copy), for an engine that has
    /// already decremented its TTL.
    pub fn header_mut(&mut self, index: usize) -> Option<&mut [u8]> {
        let sample = self.outbox.get_mut(index)?;
        Some(&mut sample.header[..usize::from(sample.header_len)])
    }

    /// Whether samples wait.
    #[inline(always)]
    pub fn has_samples(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Hands every waiting sample to `sink`, oldest first.
    pub fn drain(&mut self, mut sink: impl FnMut(&FlowSample)) {
        for sample in &self.outbox {
            sink(sample);
        }
        self.outbox.clear();
    }

    /// Port `port`'s frames seen so far (its sample pool).
    pub fn pool(&self, port: usize) -> u32 {
        self.ports[port].pool
    }
}

/// A skip count with mean `rate`: uniform over 1..=2 x rate - 1 (1 when the rate is 1).
#[inline]
fn draw(rng: &mut Rng, rate: u32) -> u32 {
    let span = 2 * u64::from(rate) - 1;
    (1 + rng.below(span)).min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Leaf;

    fn sampler(rate: u32) -> Sampler {
        let config = Leaf::new("s")
            .port("p0", 100.0, &format!("sflow_rate = {rate}"))
            .port("p1", 100.0, "")
            .tables("[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\nheader_bytes = 64")
            .config();
        Sampler::new(&config, 7).unwrap()
    }

    /// Drops are notified while `drop_limit` a second allows, the rest counted as lost; a
    /// notification carries its reason and the frame's header, not a rate or pool.
    #[test]
    fn drops_are_notified_up_to_the_limit_and_the_rest_counted() {
        let config = Leaf::new("s")
            .port("p0", 100.0, "")
            .port("p1", 100.0, "")
            .tables("[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\ndrop_limit = 3")
            .config();
        let mut sampler = Sampler::new(&config, 7).unwrap();
        let frame: Vec<u8> = (0..200u8).collect();
        let second = 1_000_000_000_000;
        for _ in 0..5 {
            sampler.discard(1, NO_PORT, DropReason::NoRoute, &frame, 200, second);
        }
        assert_eq!(sampler.discards_lost, 2, "three a second");
        sampler.discard(0, 1, DropReason::BufferFull, &frame, 200, second + second / 3);
        assert_eq!(sampler.discards_lost, 2, "a token a third of a second later");
        let mut taken = Vec::new();
        sampler.drain(|sample| {
            taken.push((sample.ingress, sample.egress, sample.discarded, sample.rate, sample.header_len))
        });
        let no_route = (1, NO_PORT, Some(DropReason::NoRoute), 0, 128);
        assert_eq!(taken, [no_route, no_route, no_route, (0, 1, Some(DropReason::BufferFull), 0, 128)]);
        assert_eq!(sampler.pool(1), 0, "a drop is not in the sample pool");
        // A limit of 0: nothing notified, nothing counted as lost.
        let quiet = Leaf::new("s")
            .port("p0", 100.0, "")
            .tables("[sflow]\ncollector = \"10.9.0.2:6343\"\nagent = \"10.9.0.1\"\ndrop_limit = 0")
            .config();
        let mut sampler = Sampler::new(&quiet, 7).unwrap();
        sampler.discard(0, NO_PORT, DropReason::Acl, &frame, 200, second);
        assert!(!sampler.has_samples() && sampler.discards_lost == 0);
    }

    #[test]
    fn one_in_n_on_average_with_gaps_that_vary() {
        let mut sampler = sampler(100);
        let frame = [0xabu8; 200];
        let (mut taken, mut gaps, mut since) = (0u32, Vec::new(), 0u32);
        for _ in 0..100_000 {
            since += 1;
            if sampler.offer(0) {
                if sampler.has_samples() {
                    sampler.drain(|_| {});
                }
                sampler.take(0, &frame, 200).unwrap();
                taken += 1;
                gaps.push(since);
                since = 0;
            }
        }
        // 1,000 expected; the skip counts' spread gives a standard deviation near 18.
        assert!((900..=1100).contains(&taken), "{taken} samples of 100,000 at 1 in 100");
        assert!(gaps.iter().any(|&gap| gap < 50) && gaps.iter().any(|&gap| gap > 150), "random gaps");
        assert!(gaps.iter().all(|&gap| (1..=199).contains(&gap)));
        assert_eq!(sampler.pool(0), 100_000);
        assert_eq!(sampler.pool(1), 0);
    }

    #[test]
    fn a_sample_carries_the_header_pool_and_ports_and_a_full_outbox_counts() {
        let mut sampler = sampler(1);
        let frame: Vec<u8> = (0..100u8).collect();
        assert!(sampler.offer(0), "1 in 1 samples every frame");
        let index = sampler.take(0, &frame, 104).unwrap();
        sampler.set_egress(index, 1);
        let mut seen = Vec::new();
        sampler.drain(|sample| seen.push(*sample));
        let sample = &seen[0];
        assert_eq!((sample.ingress, sample.egress, sample.frame_len, sample.rate, sample.pool), (0, 1, 104, 1, 1));
        assert_eq!(&sample.header[..usize::from(sample.header_len)], &frame[..64], "header_bytes = 64");
        for _ in 0..OUTBOX {
            assert!(sampler.offer(0));
            sampler.take(0, &frame, 100).unwrap();
        }
        assert!(sampler.offer(0));
        assert!(sampler.take(0, &frame, 100).is_none());
        assert_eq!(sampler.dropped, 1);
        assert_eq!(sampler.pool(0), OUTBOX as u32 + 2);
    }
}
