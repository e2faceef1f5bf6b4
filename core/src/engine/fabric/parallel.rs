//! Conservative parallel discrete-event simulation: partitions of a fabric, each with its own
//! event queue, run in windows of virtual time on several threads, as ns-3 and OMNeT++ split a
//! network. A partition affects another only by a frame on a link between them, which
//! arrives no sooner than the link's delay after it was sent (the lookahead); so every
//! partition may handle all its events before `start + lookahead`, where `start` is the
//! earliest pending event of all, without waiting for the others. Between windows the frames
//! that cross partitions are delivered through mailboxes; those for partitions another rank
//! runs (`ranks`) go to it in one exchange per window, with each rank's earliest pending time.
//!
//! Invariant: a window never contains an event that another partition's event of the same
//! window could cause (every crossing is due at or after the window's end), and which thread
//! or rank runs a partition changes nothing a partition computes; so the results are the same
//! on any number of threads and ranks, including one.

use crate::engine::fabric::ranks::{Alone, Decoder, Encoder, Exchange, RankError, WIRE_VERSION};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A time no event has: a partition with nothing pending.
pub const IDLE: u64 = u64::MAX;

/// One part of the simulation, with its own events.
pub trait Partition: Send {
    /// What one partition sends another between windows.
    type Mail: Send;
    /// When its earliest pending event is due (`IDLE` when none is).
    fn next_time(&self) -> u64;
    /// Handles its events due before `end`.
    fn run_until(&mut self, end: u64);
    /// Moves what it sent other partitions in this window into their mailboxes; returns when
    /// the earliest of it is due (`IDLE` when it sent nothing).
    fn post(&mut self, mailboxes: &[Mailbox<Self::Mail>]) -> u64;
    /// Takes what other partitions sent it.
    fn collect(&mut self, mailbox: &Mailbox<Self::Mail>);
    /// The work it has done so far (for the progress bar).
    fn work_done(&self) -> u64;
    /// Mail in the ranks' wire encoding.
    fn encode(mail: &Self::Mail, encoder: &mut Encoder);
    /// Mail from the wire encoding; the problem when it is not.
    fn decode(decoder: &mut Decoder) -> Result<Self::Mail, String>;
}

/// What a partition receives between windows.
pub struct Mailbox<M>(Mutex<Vec<M>>);

impl<M> Default for Mailbox<M> {
    fn default() -> Self {
        Self(Mutex::new(Vec::new()))
    }
}

impl<M> Mailbox<M> {
    /// Adds `mail` (emptying it).
    pub fn deliver(&self, mail: &mut Vec<M>) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).append(mail);
    }

    /// Swaps what was delivered for `empty` (whose capacity the mailbox keeps).
    pub fn take(&self, empty: &mut Vec<M>) {
        debug_assert!(empty.is_empty());
        std::mem::swap(&mut *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()), empty);
    }
}

/// How partitions run: the lookahead, when to stop, on how many threads.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    /// The shortest time from an event in one partition to its effect in another (ps, > 0).
    pub lookahead: u64,
    /// No event after this time is handled.
    pub horizon: u64,
    pub threads: usize,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish {
    /// Events were still pending after the horizon.
    pub timed_out: bool,
    /// Windows run.
    pub windows: u64,
}

/// Which thread runs which partition: the heaviest first, each to the least loaded thread
/// (the longest-processing-time rule). Only balance depends on it, never results.
pub fn assign(weights: &[u64], threads: usize) -> Vec<Vec<usize>> {
    let threads = threads.clamp(1, weights.len().max(1));
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&p| (std::cmp::Reverse(weights[p]), p));
    let mut load = vec![0u64; threads];
    let mut groups = vec![Vec::new(); threads];
    for partition in order {
        let thread = (0..threads).min_by_key(|&t| (load[t], t)).expect("a thread");
        load[thread] += weights[partition];
        groups[thread].push(partition);
    }
    for group in &mut groups {
        group.sort_unstable();
    }
    groups
}

/// Runs `partitions` (partition i is `partitions[i]`, its mailbox the i-th) in windows until
/// none has an event at or before the horizon, in this process alone (`run_ranked`).
pub fn run<P: Partition>(
    partitions: Vec<P>,
    weights: &[u64],
    windows: Windows,
    progress: &mut dyn FnMut(u64, u64),
) -> (Vec<P>, Finish) {
    let owner = vec![0; partitions.len()];
    run_ranked(partitions.into_iter().enumerate().collect(), &owner, weights, windows, &mut Alone, progress)
        .expect("a run alone exchanges with no other rank")
}

/// Runs this rank's `local` partitions (each with its number among all, in order; `weights`
/// theirs) in windows until no rank's partition has an event at or before the horizon; the
/// rank of partition p is `owner[p]`. `progress` is called on the calling thread before
/// each window with the work done by all ranks and the window's start.
///
/// Each thread runs the partitions `assign` gives it first, then any another thread has not
/// started yet (from the end of that thread's list), so that a window ends when its work is
/// done rather than when the thread dealt the most of it is: the load of a partition changes
/// from window to window, and a fixed deal left each of two threads waiting at the barrier a
/// tenth of a 1,024-host run. Between windows the calling thread exchanges mail with the
/// other ranks while the rank's other threads wait.
pub fn run_ranked<P: Partition>(
    local: Vec<(usize, P)>,
    owner: &[usize],
    weights: &[u64],
    windows: Windows,
    exchange: &mut dyn Exchange,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<P>, Finish), RankError> {
    assert!(windows.lookahead > 0, "a window needs a lookahead");
    let groups = assign(weights, windows.threads);
    let mailboxes: Vec<Mailbox<P::Mail>> = owner.iter().map(|_| Mailbox::default()).collect();
    let first = local.iter().map(|(_, p)| p.next_time()).min().unwrap_or(IDLE);
    let shared = Shared {
        barrier: SpinBarrier::new(groups.len()),
        start: AtomicU64::new(IDLE),
        earliest: AtomicU64::new(first),
        done: (0..groups.len()).map(|_| AtomicU64::new(0)).collect(),
    };
    let slots: Vec<Slot<P>> = local
        .into_iter()
        .map(|(id, p)| Slot { id, windows_run: AtomicU64::new(0), partition: Mutex::new(p) })
        .collect();
    let mut between = Between::new(exchange, owner, progress);
    let mut finish = Ok(Finish { timed_out: false, windows: 0 });
    std::thread::scope(|scope| {
        for thread in 1..groups.len() {
            let (shared, mailboxes, slots, groups) = (&shared, &mailboxes[..], &slots[..], &groups[..]);
            scope.spawn(move || run_thread(thread, groups, slots, shared, mailboxes, windows, None));
        }
        finish = run_thread(0, &groups, &slots, &shared, &mailboxes, windows, Some(&mut between));
    });
    let partitions = slots.into_iter().map(|slot| slot.partition.into_inner().unwrap_or_else(|p| p.into_inner()));
    Ok((partitions.collect(), finish?))
}

/// A partition, its number among all, and how many windows it has been run in: a thread
/// runs it in window `w` only if it moves that count from `w` to `w + 1`, so exactly one does.
#[repr(align(64))]
struct Slot<P> {
    id: usize,
    windows_run: AtomicU64,
    /// Never contended: only the thread that claimed it in this window locks it.
    partition: Mutex<P>,
}

impl<P> Slot<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, P> {
        self.partition.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct Shared {
    barrier: SpinBarrier,
    /// The window's start, the earliest pending event of every rank: written by the calling
    /// thread before the barrier that opens the window, read by all after it.
    start: AtomicU64,
    /// The earliest pending event of this rank's partitions after the window (their own and
    /// the mail they posted), gathered by the threads as they run them.
    earliest: AtomicU64,
    /// The work done by the partitions each thread ran.
    done: Vec<AtomicU64>,
}

/// The order in which `thread` tries to claim partitions in a window: its own first, then
/// each other thread's from the end of that thread's list (where its owner gets to last).
fn claim_order(groups: &[Vec<usize>], thread: usize) -> Vec<usize> {
    let others = (1..groups.len()).map(|step| &groups[(thread + step) % groups.len()]);
    groups[thread].iter().copied().chain(others.flat_map(|group| group.iter().rev().copied())).collect()
}

/// What the calling thread does between windows: exchanges this rank's earliest time, work
/// and mail for other ranks' partitions with every other rank, and shows progress.
struct Between<'e> {
    exchange: &'e mut dyn Exchange,
    owner: &'e [usize],
    progress: &'e mut dyn FnMut(u64, u64),
    /// The partitions other ranks run, whose mailboxes are emptied onto the wire.
    remote: Vec<usize>,
    outgoing: Vec<Vec<u8>>,
    incoming: Vec<Vec<u8>>,
}

impl<'e> Between<'e> {
    fn new(exchange: &'e mut dyn Exchange, owner: &'e [usize], progress: &'e mut dyn FnMut(u64, u64)) -> Self {
        let (me, ranks) = (exchange.rank(), exchange.ranks());
        let remote = (0..owner.len()).filter(|&p| owner[p] != me).collect();
        let (outgoing, incoming) = (vec![Vec::new(); ranks], vec![Vec::new(); ranks]);
        Self { exchange, owner, progress, remote, outgoing, incoming }
    }

    /// The earliest pending time and the work done of all ranks, given this rank's; the
    /// mail for other ranks' partitions sent, theirs for this rank's delivered.
    fn exchange<P: Partition>(
        &mut self,
        earliest: u64,
        work: u64,
        mailboxes: &[Mailbox<P::Mail>],
    ) -> Result<(u64, u64), RankError> {
        let me = self.exchange.rank();
        if self.exchange.ranks() == 1 {
            return Ok((earliest, work));
        }
        for (rank, bytes) in self.outgoing.iter_mut().enumerate() {
            if rank != me {
                let mut encoder = Encoder::to(bytes);
                encoder.u8(WIRE_VERSION);
                encoder.u64(earliest);
                encoder.u64(work);
            }
        }
        let mut mail = Vec::new();
        for &partition in &self.remote {
            mailboxes[partition].take(&mut mail);
            if mail.is_empty() {
                continue;
            }
            let mut encoder = Encoder::to(&mut self.outgoing[self.owner[partition]]);
            encoder.u32(partition as u32);
            encoder.count(mail.len());
            for item in mail.drain(..) {
                P::encode(&item, &mut encoder);
            }
        }
        self.exchange.all_to_all(&mut self.outgoing, &mut self.incoming)?;
        let (mut earliest, mut work) = (earliest, work);
        for (rank, bytes) in self.incoming.iter().enumerate().filter(|&(rank, _)| rank != me) {
            let garbled = |problem: String| RankError::Garbled { rank, problem };
            let mut decoder = Decoder::new(bytes);
            decoder.version().map_err(garbled)?;
            earliest = earliest.min(decoder.u64("the earliest time").map_err(garbled)?);
            work += decoder.u64("the work done").map_err(garbled)?;
            while !decoder.is_done() {
                let partition = decoder.u32("a partition").map_err(garbled)? as usize;
                if self.owner.get(partition) != Some(&me) {
                    return Err(garbled(format!("mail for partition {partition}, which this rank does not run")));
                }
                // A crossing is more than 16 bytes on the wire.
                let count = decoder.count(16, "the mail's count").map_err(garbled)?;
                for _ in 0..count {
                    mail.push(P::decode(&mut decoder).map_err(garbled)?);
                }
                mailboxes[partition].deliver(&mut mail);
            }
        }
        Ok((earliest, work))
    }
}

/// One thread's loop. Every thread reads the same `start` after the same barrier, so all
/// stop after the same window. The calling thread (`between` given) exchanges with the other
/// ranks and shows progress before each window; its error stops every thread.
fn run_thread<P: Partition>(
    thread: usize,
    groups: &[Vec<usize>],
    slots: &[Slot<P>],
    shared: &Shared,
    mailboxes: &[Mailbox<P::Mail>],
    windows: Windows,
    mut between: Option<&mut Between<'_>>,
) -> Result<Finish, RankError> {
    let _poison = PoisonOnPanic(&shared.barrier);
    let order = claim_order(groups, thread);
    let mut window = 0u64;
    let mut failed = None;
    loop {
        if let Some(between) = between.as_mut() {
            // Nobody touches `earliest` or `start` until after the barrier below.
            let earliest = shared.earliest.swap(IDLE, Ordering::AcqRel);
            let work = shared.done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
            let start = match between.exchange::<P>(earliest, work, mailboxes) {
                Ok((start, work)) => {
                    if start != IDLE && start <= windows.horizon {
                        (between.progress)(work, start);
                    }
                    start
                }
                Err(error) => {
                    failed = Some(error);
                    IDLE
                }
            };
            shared.start.store(start, Ordering::Release);
        }
        shared.barrier.wait();
        let start = shared.start.load(Ordering::Acquire);
        if start == IDLE || start > windows.horizon {
            return match failed {
                Some(error) => Err(error),
                None => Ok(Finish { timed_out: start != IDLE, windows: window }),
            };
        }
        let end = start.saturating_add(windows.lookahead).min(windows.horizon.saturating_add(1));
        let mut earliest = IDLE;
        let mut done = 0;
        for &index in &order {
            let slot = &slots[index];
            let claimed = slot.windows_run.compare_exchange(window, window + 1, Ordering::AcqRel, Ordering::Relaxed);
            if claimed.is_ok() {
                let mut partition = slot.lock();
                partition.collect(&mailboxes[slot.id]);
                let before = partition.work_done();
                partition.run_until(end);
                let posted = partition.post(mailboxes);
                earliest = earliest.min(posted).min(partition.next_time());
                done += partition.work_done() - before;
            }
        }
        shared.done[thread].fetch_add(done, Ordering::Relaxed);
        shared.earliest.fetch_min(earliest, Ordering::AcqRel);
        shared.barrier.wait();
        window += 1;
    }
}

/// A barrier that spins, then yields: a window is a few hundred events, so a futex sleep
/// and wake per window would cost as much as the window. With more threads than cores the
/// yield lets the others run.
struct SpinBarrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// A thread panicked: the others would wait for it forever.
    poisoned: AtomicBool,
}

impl SpinBarrier {
    fn new(threads: usize) -> Self {
        Self {
            threads,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Relaxed) {
                panic!("another fabric thread panicked");
            }
            if spins < 2_000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Marks the barrier poisoned when its thread unwinds.
struct PoisonOnPanic<'a>(&'a SpinBarrier);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poisoned.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_claims_its_own_partitions_first_then_the_others_from_their_ends() {
        let groups = vec![vec![0, 3], vec![1, 4], vec![2]];
        assert_eq!(claim_order(&groups, 0), [0, 3, 4, 1, 2]);
        assert_eq!(claim_order(&groups, 1), [1, 4, 2, 3, 0]);
        assert_eq!(claim_order(&groups, 2), [2, 3, 0, 4, 1]);
        assert_eq!(claim_order(&groups[..1], 0), [0, 3]);
    }

    #[test]
    fn the_heaviest_partitions_spread_over_threads_first() {
        // 5 and 3 first, then the other 3 joins the lighter, then 1: loads 6 and 6.
        assert_eq!(assign(&[1, 5, 3, 3], 2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(assign(&[2, 2, 2], 1), vec![vec![0, 1, 2]]);
        // Never more threads than partitions.
        assert_eq!(assign(&[4, 1], 8), vec![vec![0], vec![1]]);
    }

    /// A ring of partitions passing tokens: each token, at time t in partition p, goes to
    /// partition p + 1 at t + delay (delay >= the lookahead), `hops` times. Each partition
    /// logs what it handled.
    struct Ring {
        index: usize,
        count: usize,
        delay: u64,
        pending: std::collections::BTreeSet<(u64, u32, u32)>,
        outbox: Vec<(u64, u32, u32)>,
        log: Vec<(u64, u32)>,
        /// It fails (panics) at an event at or after this time.
        fails_at: u64,
    }

    impl Partition for Ring {
        type Mail = (u64, u32, u32);
        fn next_time(&self) -> u64 {
            self.pending.first().map_or(IDLE, |&(t, _, _)| t)
        }
        fn run_until(&mut self, end: u64) {
            while let Some(&(time, token, hops)) = self.pending.first() {
                if time >= end {
                    break;
                }
                self.pending.pop_first();
                assert!(time < self.fails_at, "partition {} fails at {time}", self.index);
                assert!(self.log.last().is_none_or(|&(last, _)| last <= time), "in time order");
                self.log.push((time, token));
                if hops > 0 {
                    self.outbox.push((time + self.delay + u64::from(token), token, hops - 1));
                }
            }
        }
        fn post(&mut self, mailboxes: &[Mailbox<Self::Mail>]) -> u64 {
            let earliest = self.outbox.iter().map(|&(t, _, _)| t).min().unwrap_or(IDLE);
            mailboxes[(self.index + 1) % self.count].deliver(&mut self.outbox);
            earliest
        }
        fn collect(&mut self, mailbox: &Mailbox<Self::Mail>) {
            let mut mail = Vec::new();
            mailbox.take(&mut mail);
            self.pending.extend(mail);
        }
        fn work_done(&self) -> u64 {
            self.log.len() as u64
        }
        fn encode(mail: &Self::Mail, encoder: &mut Encoder) {
            encoder.u64(mail.0);
            encoder.u32(mail.1);
            encoder.u32(mail.2);
        }
        fn decode(decoder: &mut Decoder) -> Result<Self::Mail, String> {
            Ok((decoder.u64("time")?, decoder.u32("token")?, decoder.u32("hops")?))
        }
    }

    fn ring(threads: usize, horizon: u64) -> (Vec<Vec<(u64, u32)>>, Finish) {
        ring_failing(threads, horizon, IDLE)
    }

    /// The ring, partition 3 failing at `fails_at`.
    fn ring_failing(threads: usize, horizon: u64, fails_at: u64) -> (Vec<Vec<(u64, u32)>>, Finish) {
        let partitions = ring_partitions(fails_at);
        let mut done = Vec::new();
        let windows = Windows { lookahead: 10, horizon, threads };
        let (partitions, finish) = run(partitions, &[1; 5], windows, &mut |work, _| done.push(work));
        assert_eq!(done.len() as u64, finish.windows, "progress after every window");
        // The work done by all partitions (the tokens handled) before each window.
        let handled: u64 = partitions.iter().map(|p| p.log.len() as u64).sum();
        assert!(done.windows(2).all(|pair| pair[0] <= pair[1]) && done.last() < Some(&handled), "{done:?}");
        assert!(done.last() > Some(&0), "{done:?}");
        (partitions.into_iter().map(|p| p.log).collect(), finish)
    }

    /// What a ring partition handled: (time, token).
    type Log = Vec<(u64, u32)>;

    /// Five partitions of three tokens each, partition 3 failing at `fails_at`.
    fn ring_partitions(fails_at: u64) -> Vec<Ring> {
        let count = 5;
        (0..count)
            .map(|index| Ring {
                index,
                count,
                delay: 10,
                pending: (0..3).map(|token| (index as u64 * 3, token + index as u32 * 10, 40)).collect(),
                outbox: Vec::new(),
                log: Vec::new(),
                fails_at: if index == 3 { fails_at } else { IDLE },
            })
            .collect()
    }

    /// The ring on `ranks` loopback ranks of `threads` threads each: every partition's log,
    /// in partition order, and each rank's finish; or the first rank's error.
    fn ring_ranked(ranks: usize, threads: usize, fails_at: u64) -> Result<(Vec<Log>, Vec<Finish>), RankError> {
        use crate::engine::fabric::ranks::{assign_ranks, Loopback};
        let owner = assign_ranks(&[1; 5], ranks);
        let windows = Windows { lookahead: 10, horizon: IDLE - 1, threads };
        let runs: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = Loopback::ranks(ranks)
                .into_iter()
                .map(|mut exchange| {
                    let owner = &owner;
                    scope.spawn(move || {
                        let me = exchange.rank();
                        let local: Vec<(usize, Ring)> = ring_partitions(fails_at)
                            .into_iter()
                            .enumerate()
                            .filter(|(p, _)| owner[*p] == me)
                            .collect();
                        let ids: Vec<usize> = local.iter().map(|(id, _)| *id).collect();
                        let (partitions, finish) =
                            run_ranked(local, owner, &vec![1; ids.len()], windows, &mut exchange, &mut |_, _| {})?;
                        Ok((ids.into_iter().zip(partitions.into_iter().map(|p| p.log)).collect::<Vec<_>>(), finish))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(Err(RankError::Lost { rank: usize::MAX }))).collect()
        });
        let mut logs = vec![Vec::new(); 5];
        let mut finishes = Vec::new();
        for run in runs {
            let (parts, finish): (Vec<(usize, Log)>, Finish) = run?;
            finishes.push(finish);
            for (id, log) in parts {
                logs[id] = log;
            }
        }
        Ok((logs, finishes))
    }

    #[test]
    fn partitions_handle_the_same_events_on_any_number_of_ranks() {
        let (one, finish) = ring(1, IDLE - 1);
        for (ranks, threads) in [(1, 1), (2, 1), (3, 2), (5, 1), (4, 3)] {
            let (logs, finishes) = ring_ranked(ranks, threads, IDLE).unwrap();
            assert_eq!(logs, one, "{ranks} ranks of {threads} threads");
            assert_eq!(finishes, vec![finish; ranks], "every rank stops after the same window");
        }
        // A rank whose partition fails leaves the run: the others end with an error naming
        // a lost rank, not a hang.
        let lost = ring_ranked(3, 1, 50).unwrap_err();
        assert!(matches!(lost, RankError::Lost { .. }), "{lost:?}");
    }

    #[test]
    fn partitions_handle_the_same_events_on_any_number_of_threads() {
        let (one, finish) = ring(1, IDLE - 1);
        assert!(!finish.timed_out);
        assert_eq!(one.iter().map(Vec::len).sum::<usize>(), 5 * 3 * 41, "every hop of every token");
        assert!(finish.windows > 1);
        for threads in [2, 3, 8] {
            assert_eq!(ring(threads, IDLE - 1), (one.clone(), finish), "{threads} threads");
        }
    }

    #[test]
    fn a_partition_that_fails_stops_the_run_on_any_number_of_threads() {
        // Whichever thread runs it, the failure reaches the caller: the others, waiting at
        // the barrier for it, give up rather than wait forever.
        for threads in [1, 2, 3] {
            let run = std::panic::catch_unwind(|| ring_failing(threads, IDLE - 1, 50));
            assert!(run.is_err(), "{threads} threads: the failure is the run's");
        }
    }

    #[test]
    fn nothing_after_the_horizon_is_handled() {
        let (logs, finish) = ring(2, 100);
        assert!(finish.timed_out);
        let times: Vec<u64> = logs.iter().flatten().map(|&(t, _)| t).collect();
        assert!(times.iter().all(|&t| t <= 100), "{times:?}");
        // Token 0 of partition 0 hops every 10: its eleventh event is at the horizon itself.
        assert!(times.contains(&100), "an event at the horizon is handled: {times:?}");
        let (_, idle) = ring(2, 100_000);
        assert!(!idle.timed_out, "the tokens stop before 100,000");
    }
}
