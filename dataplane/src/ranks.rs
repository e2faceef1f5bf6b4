//! `raceway fabric` as one rank of an MPI job (`mpirun -np N raceway fabric ...`): what the
//! launcher's environment says, and, with the `mpi` feature, the fabric engine's exchange
//! between ranks (`raceway_core::engine::fabric::ranks::Exchange`) over MPI's all-to-all.
//!
//! Invariant: a binary built without the `mpi` feature never runs a share of a job (it would
//! run the whole fabric N times and write over itself): it refuses to, in one line.

#[cfg(feature = "mpi")]
pub use over_mpi::MpiRanks;

/// This process's peak resident memory in MB (`VmHWM`), when Linux says.
pub fn peak_rss_mb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// The ranks a launcher started, from the environment it gives each one: Open MPI's
/// `mpirun`, or a PMI launcher's (MPICH's Hydra); none when run alone.
pub fn launched_ranks() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"].iter().find_map(|name| std::env::var(name).ok()?.parse().ok())
}

/// The ranks the launcher started on this machine (they share its cores); 1 when it does
/// not say.
pub fn ranks_on_this_machine() -> usize {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.parse().ok())
        .unwrap_or(1usize)
        .max(1)
}

#[cfg(feature = "mpi")]
mod over_mpi {
    use mpi::datatype::{Partition, PartitionMut};
    use mpi::environment::Universe;
    use mpi::topology::{Communicator, SimpleCommunicator};
    use mpi::traits::*;
    use mpi::Count;
    use raceway_core::engine::fabric::ranks::{Exchange, RankError};

    /// The environment variable that makes an exchange's rounds smaller than MPI's limit
    /// (bytes per rank per round): for tests.
    pub const ROUND_BYTES: &str = "RACEWAY_MPI_ROUND_BYTES";

    /// This process as a rank of the MPI job that started it. Only the thread that made it
    /// calls MPI (`Threading::Funneled`): the engine's other threads never exchange.
    pub struct MpiRanks {
        /// Finalises MPI when dropped.
        _universe: Universe,
        world: SimpleCommunicator,
        rank: usize,
        ranks: usize,
        /// The most bytes one `MPI_Alltoallv` carries to each rank.
        round_bytes: usize,
        send: Vec<u8>,
        receive: Vec<u8>,
        /// Exchanges made, and the time spent in them (waiting for the slowest rank included).
        pub exchanges: u64,
        pub exchange_time: std::time::Duration,
    }

    impl MpiRanks {
        /// Initialises MPI; the problem when it cannot.
        pub fn init() -> Result<Self, String> {
            let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
                .ok_or("MPI: cannot initialise (already initialised)")?;
            let world = universe.world();
            let (rank, ranks) = (world.rank() as usize, world.size() as usize);
            // MPI's counts and offsets are 32 bits: a call carries at most 2 GiB in all. The
            // environment may make rounds smaller, so that tests can run many of them.
            let most = (Count::MAX as usize / ranks.max(1)).max(1);
            let round_bytes = std::env::var(ROUND_BYTES)
                .ok()
                .and_then(|text| text.parse::<usize>().ok())
                .map_or(most, |bytes| bytes.clamp(1, most));
            Ok(Self {
                _universe: universe,
                world,
                rank,
                ranks,
                round_bytes,
                send: Vec::new(),
                receive: Vec::new(),
                exchanges: 0,
                exchange_time: std::time::Duration::ZERO,
            })
        }

        /// Ends every rank of the job with `code`: a rank that failed cannot finalise, since
        /// the others may be waiting for it in an exchange.
        pub fn abort(&self, code: i32) -> ! {
            self.world.abort(code)
        }
    }

    /// `lens` as MPI's 32-bit counts, with their offsets in one buffer (their sum fits: a
    /// round carries at most `Count::MAX / ranks` bytes to each rank).
    fn counts_and_offsets(lens: impl Iterator<Item = usize>) -> (Vec<Count>, Vec<Count>) {
        let mut counts = Vec::new();
        let mut offsets = Vec::new();
        let mut total = 0;
        for len in lens {
            let count = Count::try_from(len).expect("at most Count::MAX / ranks per rank");
            counts.push(count);
            offsets.push(total);
            total += count;
        }
        (counts, offsets)
    }

    /// The part of `len` bytes that round `round` of `chunk` bytes each carries.
    fn in_round(len: usize, round: usize, chunk: usize) -> std::ops::Range<usize> {
        let start = (round * chunk).min(len);
        start..(start + chunk).min(len)
    }

    impl Exchange for MpiRanks {
        fn rank(&self) -> usize {
            self.rank
        }

        fn ranks(&self) -> usize {
            self.ranks
        }

        /// The byte counts in one `MPI_Alltoall` (with the most each rank sends any one, so
        /// that all agree on the rounds), then the bytes in `MPI_Alltoallv`s: one, or as many
        /// as it takes to carry the largest in MPI's 32-bit counts and offsets.
        fn all_to_all(&mut self, outgoing: &mut [Vec<u8>], incoming: &mut [Vec<u8>]) -> Result<(), RankError> {
            let started = std::time::Instant::now();
            let ranks = self.ranks;
            let most = outgoing.iter().map(Vec::len).max().unwrap_or(0) as u64;
            let sizes: Vec<u64> = outgoing.iter().flat_map(|bytes| [bytes.len() as u64, most]).collect();
            let mut theirs = vec![0u64; 2 * ranks];
            self.world.all_to_all_into(&sizes[..], &mut theirs[..]);
            let lens: Vec<usize> = theirs.chunks(2).map(|pair| pair[0] as usize).collect();
            let largest = theirs.chunks(2).map(|pair| pair[1]).max().unwrap_or(0) as usize;
            let chunk = self.round_bytes;
            let rounds = largest.div_ceil(chunk).max(1);
            for (bytes, &len) in incoming.iter_mut().zip(&lens) {
                bytes.clear();
                bytes.reserve(len);
            }
            for round in 0..rounds {
                let parts = outgoing.iter().map(|bytes| in_round(bytes.len(), round, chunk));
                let (send_counts, send_offsets) = counts_and_offsets(parts.map(|part| part.len()));
                let receiving = lens.iter().map(|&len| in_round(len, round, chunk).len());
                let (receive_counts, receive_offsets) = counts_and_offsets(receiving);
                self.send.clear();
                for bytes in outgoing.iter() {
                    self.send.extend_from_slice(&bytes[in_round(bytes.len(), round, chunk)]);
                }
                self.receive.clear();
                self.receive.resize(receive_counts.iter().map(|&count| count as usize).sum(), 0);
                {
                    let sent = Partition::new(&self.send[..], &send_counts[..], &send_offsets[..]);
                    let mut received =
                        PartitionMut::new(&mut self.receive[..], &receive_counts[..], &receive_offsets[..]);
                    self.world.all_to_all_varcount_into(&sent, &mut received);
                }
                for ((bytes, &offset), &count) in incoming.iter_mut().zip(&receive_offsets).zip(&receive_counts) {
                    bytes.extend_from_slice(&self.receive[offset as usize..(offset + count) as usize]);
                }
            }
            for bytes in outgoing.iter_mut() {
                bytes.clear();
            }
            self.exchanges += 1;
            self.exchange_time += started.elapsed();
            Ok(())
        }
    }
}
