//! Ranks: one fabric run split over several processes (an MPI job) or, in tests, several
//! threads standing in for them. Each rank runs its own partitions (`parallel`) on its own
//! threads; between windows every rank sends every other one the frames that crossed to its
//! partitions, with its earliest pending time and its work done, in one all-to-all
//! (`Exchange`). Everything that crosses is bytes in an explicit little-endian encoding that
//! starts with `WIRE_VERSION` (`Encoder`, `Decoder`), so ranks need not share an address
//! space, a build or a byte order.
//!
//! Invariant: which rank runs a partition is a function of the fabric alone (`assign_ranks`),
//! and a rank's partitions compute the same whichever process runs them; every rank makes
//! the same sequence of exchanges, so none waits for one that will never come, and a rank
//! that leaves ends every other rank's exchange with an error rather than a hang.

use std::sync::{Arc, Condvar, Mutex};

/// The version of everything ranks send each other; a rank refuses another's bytes of any
/// other version.
pub const WIRE_VERSION: u8 = 1;

/// Why an exchange between ranks failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankError {
    /// A rank left the run (it failed, or was killed) while the others waited for it.
    Lost { rank: usize },
    /// A rank sent bytes this rank cannot read.
    Garbled { rank: usize, problem: String },
    /// A rank was started on another fabric, workload or options.
    Mismatch { rank: usize, theirs: u64, ours: u64 },
}

impl std::fmt::Display for RankError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RankError::Lost { rank } => write!(f, "rank {rank} left the run (it failed or was killed)"),
            RankError::Garbled { rank, problem } => write!(f, "rank {rank} sent what this rank cannot read: {problem}"),
            RankError::Mismatch { rank, theirs, ours } => write!(
                f,
                "rank {rank} runs another fabric, workload or options (digest {theirs:016x}, this rank's {ours:016x}): \
                 start every rank with the same files and flags"
            ),
        }
    }
}

impl RankError {
    /// As the one error line a run ends with: `rank N: problem`.
    pub fn to_input_error(&self, me: usize) -> crate::error::InputError {
        crate::error::InputError::whole_file(format!("rank {me}"), self.to_string())
    }
}

/// How ranks exchange bytes: the in-process run (one rank, `Alone`), an MPI job (the
/// `raceway` binary's `mpi` feature), or ranks as threads (`Loopback`, for tests).
pub trait Exchange {
    /// This rank's number, 0 to `ranks() - 1`.
    fn rank(&self) -> usize;
    /// How many ranks run.
    fn ranks(&self) -> usize;
    /// Sends `outgoing[r]` to every rank `r` (this rank's own included) and receives what
    /// each sent this one into `incoming[r]`; every rank calls it the same number of times.
    /// `outgoing`'s vectors are left empty (their capacity kept).
    fn all_to_all(&mut self, outgoing: &mut [Vec<u8>], incoming: &mut [Vec<u8>]) -> Result<(), RankError>;
}

/// The run in one process: rank 0 of 1.
#[derive(Debug, Default)]
pub struct Alone;

impl Exchange for Alone {
    fn rank(&self) -> usize {
        0
    }
    fn ranks(&self) -> usize {
        1
    }
    fn all_to_all(&mut self, outgoing: &mut [Vec<u8>], incoming: &mut [Vec<u8>]) -> Result<(), RankError> {
        incoming[0].clear();
        std::mem::swap(&mut outgoing[0], &mut incoming[0]);
        Ok(())
    }
}

/// Which rank runs each partition: the heaviest first, each to the least loaded rank, as
/// threads are dealt (`parallel::assign`); a function of the weights (the fabric) alone.
pub fn assign_ranks(weights: &[u64], ranks: usize) -> Vec<usize> {
    let mut owner = vec![0; weights.len()];
    for (rank, group) in crate::engine::fabric::parallel::assign(weights, ranks).into_iter().enumerate() {
        for partition in group {
            owner[partition] = rank;
        }
    }
    owner
}

/// Ranks as threads of one process, exchanging the same bytes an MPI job would: what
/// `cargo test` runs ranks on.
pub struct Loopback {
    rank: usize,
    hub: Arc<Hub>,
}

struct Hub {
    ranks: usize,
    state: Mutex<HubState>,
    turned: Condvar,
}

struct HubState {
    /// Bytes in flight, by exchange parity, sender and receiver: a rank writes its row of
    /// one parity while the others may still read their column of the other.
    slots: [Vec<Vec<Vec<u8>>>; 2],
    /// Exchanges each rank has started.
    started: Vec<u64>,
    /// Ranks that have left (dropped their `Loopback`).
    left: Vec<bool>,
}

impl Loopback {
    /// `ranks` ranks, to be moved to a thread each.
    pub fn ranks(ranks: usize) -> Vec<Loopback> {
        let empty = || (0..ranks).map(|_| (0..ranks).map(|_| Vec::new()).collect()).collect();
        let hub = Arc::new(Hub {
            ranks,
            state: Mutex::new(HubState {
                slots: [empty(), empty()],
                started: vec![0; ranks],
                left: vec![false; ranks],
            }),
            turned: Condvar::new(),
        });
        (0..ranks).map(|rank| Loopback { rank, hub: Arc::clone(&hub) }).collect()
    }
}

impl Exchange for Loopback {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.hub.ranks
    }
    fn all_to_all(&mut self, outgoing: &mut [Vec<u8>], incoming: &mut [Vec<u8>]) -> Result<(), RankError> {
        let hub = &self.hub;
        let mut state = hub.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let round = state.started[self.rank];
        let parity = (round % 2) as usize;
        for (to, bytes) in outgoing.iter_mut().enumerate() {
            let slot = &mut state.slots[parity][self.rank][to];
            slot.clear();
            slot.append(bytes);
        }
        state.started[self.rank] = round + 1;
        hub.turned.notify_all();
        // Every rank has written this round once every rank has started it.
        loop {
            if let Some(rank) = (0..hub.ranks).find(|&r| state.started[r] <= round && state.left[r]) {
                return Err(RankError::Lost { rank });
            }
            if state.started.iter().all(|&started| started > round) {
                break;
            }
            state = hub.turned.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        for (from, bytes) in incoming.iter_mut().enumerate() {
            bytes.clear();
            bytes.extend_from_slice(&state.slots[parity][from][self.rank]);
        }
        Ok(())
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        let mut state = self.hub.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.left[self.rank] = true;
        self.hub.turned.notify_all();
    }
}

/// Writes the wire encoding: little-endian integers, lengths before what they count.
#[derive(Debug)]
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Encoder<'a> {
    /// Appends to `out`.
    pub fn to(out: &'a mut Vec<u8>) -> Self {
        Self { out }
    }

    fn bytes_mut(&mut self) -> &mut Vec<u8> {
        self.out
    }

    pub fn u8(&mut self, value: u8) {
        self.bytes_mut().push(value);
    }

    pub fn u32(&mut self, value: u32) {
        self.bytes_mut().extend_from_slice(&value.to_le_bytes());
    }

    pub fn u64(&mut self, value: u64) {
        self.bytes_mut().extend_from_slice(&value.to_le_bytes());
    }

    pub fn f64(&mut self, value: f64) {
        self.u64(value.to_bits());
    }

    /// A time or count that may be absent: `u64::MAX` stands for none (no time reaches it).
    pub fn option(&mut self, value: Option<u64>) {
        self.u64(value.unwrap_or(u64::MAX));
    }

    /// A count of what follows.
    pub fn count(&mut self, count: usize) {
        self.u64(count as u64);
    }

    pub fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.bytes_mut().extend_from_slice(bytes);
    }

    pub fn string(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }
}

/// Reads the wire encoding; every read says what was cut short.
#[derive(Debug)]
pub struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Nothing is left to read.
    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    fn take(&mut self, count: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(count).filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("cut short in {what} at byte {} of {}", self.at, self.bytes.len()));
        };
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("four bytes")))
    }

    pub fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("eight bytes")))
    }

    pub fn f64(&mut self, what: &str) -> Result<f64, String> {
        Ok(f64::from_bits(self.u64(what)?))
    }

    pub fn option(&mut self, what: &str) -> Result<Option<u64>, String> {
        Ok(Some(self.u64(what)?).filter(|&value| value != u64::MAX))
    }

    /// A length, no more than the bytes left could hold at `least` bytes each (so a garbled
    /// length cannot make a reader reserve memory it never fills).
    pub fn count(&mut self, least: usize, what: &str) -> Result<usize, String> {
        let len = self.u64(what)?;
        let left = (self.bytes.len() - self.at) / least.max(1);
        usize::try_from(len)
            .ok()
            .filter(|&len| len <= left)
            .ok_or_else(|| format!("{what}: a length of {len} where {left} at most fit"))
    }

    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let len = self.count(1, what)?;
        self.take(len, what)
    }

    pub fn string(&mut self, what: &str) -> Result<String, String> {
        String::from_utf8(self.bytes(what)?.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    }

    /// The version byte every message between ranks opens with.
    pub fn version(&mut self) -> Result<(), String> {
        match self.u8("the version")? {
            WIRE_VERSION => Ok(()),
            other => Err(format!("wire version {other}, this rank reads {WIRE_VERSION}")),
        }
    }
}

/// Every rank checks that every other runs the same thing: it sends its `digest` (of the
/// fabric, workload and options) and compares each rank's with its own.
pub fn agree(exchange: &mut dyn Exchange, digest: u64) -> Result<(), RankError> {
    let ranks = exchange.ranks();
    let mut outgoing: Vec<Vec<u8>> = (0..ranks)
        .map(|_| {
            let mut bytes = Vec::new();
            let mut encoder = Encoder::to(&mut bytes);
            encoder.u8(WIRE_VERSION);
            encoder.u64(ranks as u64);
            encoder.u64(digest);
            bytes
        })
        .collect();
    let mut incoming = vec![Vec::new(); ranks];
    exchange.all_to_all(&mut outgoing, &mut incoming)?;
    for (rank, bytes) in incoming.iter().enumerate() {
        let garbled = |problem: String| RankError::Garbled { rank, problem };
        let mut decoder = Decoder::new(bytes);
        decoder.version().map_err(garbled)?;
        let theirs_ranks = decoder.u64("the ranks").map_err(garbled)?;
        if theirs_ranks != ranks as u64 {
            return Err(garbled(format!("it counts {theirs_ranks} ranks, this one {ranks}")));
        }
        let theirs = decoder.u64("the digest").map_err(garbled)?;
        if theirs != digest {
            return Err(RankError::Mismatch { rank, theirs, ours: digest });
        }
    }
    Ok(())
}

/// The largest of every rank's `value` (the run's end).
pub fn max_of(exchange: &mut dyn Exchange, value: u64) -> Result<u64, RankError> {
    let ranks = exchange.ranks();
    if ranks == 1 {
        return Ok(value);
    }
    let mut outgoing: Vec<Vec<u8>> = (0..ranks)
        .map(|_| {
            let mut bytes = Vec::new();
            let mut encoder = Encoder::to(&mut bytes);
            encoder.u8(WIRE_VERSION);
            encoder.u64(value);
            bytes
        })
        .collect();
    let mut incoming = vec![Vec::new(); ranks];
    exchange.all_to_all(&mut outgoing, &mut incoming)?;
    let mut largest = value;
    for (rank, bytes) in incoming.iter().enumerate() {
        let garbled = |problem: String| RankError::Garbled { rank, problem };
        let mut decoder = Decoder::new(bytes);
        decoder.version().map_err(garbled)?;
        largest = largest.max(decoder.u64("a value").map_err(garbled)?);
    }
    Ok(largest)
}

/// Every rank's `item` at rank 0, in rank order (`None` at the others), through `encode`
/// and `decode` (which read and write the version).
pub fn gather<T>(
    exchange: &mut dyn Exchange,
    item: T,
    encode: fn(&T) -> Vec<u8>,
    decode: fn(&[u8]) -> Result<T, String>,
) -> Result<Option<Vec<T>>, RankError> {
    let ranks = exchange.ranks();
    if ranks == 1 {
        return Ok(Some(vec![item]));
    }
    let mut outgoing = vec![Vec::new(); ranks];
    outgoing[0] = encode(&item);
    drop(item);
    let mut incoming = vec![Vec::new(); ranks];
    exchange.all_to_all(&mut outgoing, &mut incoming)?;
    if exchange.rank() != 0 {
        return Ok(None);
    }
    // Each rank's bytes are freed once read: they may be most of what rank 0 holds.
    let mut items = Vec::with_capacity(ranks);
    for (rank, bytes) in incoming.into_iter().enumerate() {
        items.push(decode(&bytes).map_err(|problem| RankError::Garbled { rank, problem })?);
    }
    Ok(Some(items))
}

/// A digest of anything `Debug` prints (a fabric, the options), FNV-1a over its text as it
/// is printed, without holding the text.
pub fn debug_digest(value: &dyn std::fmt::Debug) -> u64 {
    use std::fmt::Write;
    struct Fnv(u64);
    impl Write for Fnv {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            self.0 = crate::digest::fnv1a64_from(self.0, text.as_bytes());
            Ok(())
        }
    }
    let mut hash = Fnv(crate::digest::fnv1a64(b""));
    write!(hash, "{value:?}").expect("hashing never fails");
    hash.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoding_reads_back_and_says_where_it_was_cut() {
        let mut bytes = Vec::new();
        let mut encoder = Encoder::to(&mut bytes);
        encoder.u8(WIRE_VERSION);
        encoder.u32(0xdead_beef);
        encoder.u64(1 << 40);
        encoder.f64(-2.5);
        encoder.option(None);
        encoder.option(Some(7));
        encoder.string("leaf0");
        // Little-endian, whatever the machine.
        assert_eq!(&bytes[1..5], &[0xef, 0xbe, 0xad, 0xde]);
        let mut decoder = Decoder::new(&bytes);
        decoder.version().unwrap();
        assert_eq!(decoder.u32("a").unwrap(), 0xdead_beef);
        assert_eq!(decoder.u64("b").unwrap(), 1 << 40);
        assert_eq!(decoder.f64("c").unwrap(), -2.5);
        assert_eq!((decoder.option("d").unwrap(), decoder.option("e").unwrap()), (None, Some(7)));
        assert_eq!(decoder.string("f").unwrap(), "leaf0");
        assert!(decoder.is_done());
        let problem = Decoder::new(&bytes[..3]).u64("the time").unwrap_err();
        assert_eq!(problem, "cut short in the time at byte 0 of 3");
        assert!(Decoder::new(&[9]).version().unwrap_err().contains("wire version 9"));
        // A length longer than what follows is refused before anything is reserved.
        let mut huge = Vec::new();
        Encoder::to(&mut huge).u64(u64::MAX / 2);
        assert!(Decoder::new(&huge).bytes("frame").unwrap_err().contains("a length of"));
    }

    /// Ranks as threads: each sends every other its number; a rank that leaves ends the
    /// others' exchange with an error naming it, never a hang.
    #[test]
    fn loopback_ranks_exchange_bytes_and_a_rank_that_leaves_is_named() {
        let ranks = Loopback::ranks(3);
        let received: Vec<Vec<Vec<u8>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ranks
                .into_iter()
                .map(|mut rank| {
                    scope.spawn(move || {
                        let me = rank.rank() as u8;
                        let mut log = Vec::new();
                        for round in 0..5u8 {
                            let mut outgoing: Vec<Vec<u8>> = (0..3).map(|to| vec![me, to, round]).collect();
                            let mut incoming = vec![Vec::new(); 3];
                            rank.all_to_all(&mut outgoing, &mut incoming).unwrap();
                            assert!(outgoing.iter().all(Vec::is_empty));
                            log.push(incoming.concat());
                        }
                        log
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, log) in received.iter().enumerate() {
            for (round, bytes) in log.iter().enumerate() {
                let round = round as u8;
                let me = me as u8;
                assert_eq!(bytes, &[0, me, round, 1, me, round, 2, me, round]);
            }
        }
        let mut ranks = Loopback::ranks(2);
        let leaver = ranks.pop().unwrap();
        drop(leaver);
        let mut stayer = ranks.pop().unwrap();
        let error = stayer.all_to_all(&mut [vec![], vec![]], &mut [vec![], vec![]]).unwrap_err();
        assert_eq!(error, RankError::Lost { rank: 1 });
        assert_eq!(error.to_input_error(0).to_string(), "rank 0: rank 1 left the run (it failed or was killed)");
    }

    #[test]
    fn ranks_that_run_other_inputs_are_refused() {
        let ranks = Loopback::ranks(2);
        let results: Vec<Result<(), RankError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ranks
                .into_iter()
                .map(|mut rank| {
                    scope.spawn(move || {
                        let digest = 10 + rank.rank() as u64;
                        agree(&mut rank, digest)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(results[0], Err(RankError::Mismatch { rank: 1, theirs: 11, ours: 10 }));
        assert_eq!(results[1], Err(RankError::Mismatch { rank: 0, theirs: 10, ours: 11 }));
        assert_eq!(agree(&mut Alone, 5), Ok(()));
        assert_ne!(debug_digest(&(1, "a")), debug_digest(&(1, "b")));
        assert_eq!(debug_digest(&[1.5f64]), debug_digest(&[1.5f64]));
    }

    #[test]
    fn partitions_go_to_ranks_by_weight_alone() {
        assert_eq!(assign_ranks(&[1, 5, 3, 3], 2), vec![0, 0, 1, 1]);
        assert_eq!(assign_ranks(&[1, 1, 1], 1), vec![0, 0, 0]);
    }
}
