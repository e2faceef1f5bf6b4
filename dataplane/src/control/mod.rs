//! The live control plane: a Linux interface (TAP) per port in the switch's own network
//! namespace, the frames punted to it and the frames its kernel sends back, and the FIB that
//! follows the kernel's tables.
//!
//! Two threads, so that route work never delays a control frame:
//! - `raceway-control` moves frames. Punted frames come from the workers over bounded
//!   lock-free rings, one per CoPP class (full: `punt_queue_full`), served highest class first
//!   (`CoppClass::ALL`), so a flood in one class, already policed to its rate, never delays a
//!   frame of a class above it; each is written to its port's TAP. What the
//!   kernel writes on each TAP goes back over another ring, which a worker drains once per loop
//!   into the scheduler (`Switch::inject`, in the control class). It sleeps in poll(2) on the
//!   TAPs and an eventfd the workers write when they punt to it asleep (once per wake-up, not
//!   per frame), so a frame never waits for a timer. It also mirrors each port's link to its
//!   TAP's carrier, woken by the link watcher when one changes.
//! - `raceway-fib` reads the kernel's netlink messages, applies each to a `FibWriter` as a
//!   delta, and publishes a snapshot when the socket is drained or 1 ms after the first change
//!   not yet published (`PUBLISH_WITHIN`), whichever is first; it frees the snapshots the
//!   workers let go of. It also reads the TAPs' own state: `ip link set PORT down/up` and
//!   `mtu N` shut, open or re-size the port (`link::PortStates`); the kernel's BGP peers every
//!   `PEERS_EVERY` (`kernel::peers`, for `[control.acl]`); and a reload's static routes and
//!   neighbours (`ControlLink::reconfigure_fib`). A reload that changes the groups or a peer's
//!   MAC gets a new writer, filled by a fresh dump and published once whole. A take-over
//!   starts this thread first (`prepare`), so that the kernel's tables are read whole before
//!   the switch it replaces hands over; a plain start opens the TAPs first (`start`).
//!
//! Neither waits for the other: they share only the FIB handle and their counters, each
//! writing its own fields. The control thread runs in the real-time FIFO class (priority 1;
//! nice -10 where that is not allowed), so on a busy CPU it runs as soon as a frame wakes it,
//! ahead of route work and the processes that make it: with nice -10 alone, punt p99 was 7.8
//! ms while 100 k routes came and went (tests/root/bgp.rs), 0.52 ms in the FIFO class. Its
//! work is bounded by the CoPP policers and what the kernel sends. Each frame is stamped when it enters a ring; the time to the TAP
//! write (punt) and to the worker's inject are histograms in the control stats, and so is the
//! time from reading a netlink message to publishing the snapshot that holds it.
//!
//! The namespace (`[control] netns`) and the TAPs are the keeper's (`keep`): created if
//! missing, they outlive the switch for `keep_interfaces_s`, so that a restart takes them over
//! as they were, and then go (a namespace that existed before stays). Forwarding is on in the namespace, so
//! the kernel answers for frames the data plane cannot (glean: it resolves the neighbour and
//! forwards the first packets itself; TTL expiry: it sends time-exceeded; no route: destination
//! unreachable; over the egress port's MTU: fragmentation needed or Packet Too Big with the
//! TAP's MTU, which is the port's), and redirects are off (the kernel would otherwise redirect hosts to the neighbour on their own link).
//!
//! Invariant: every punted mbuf is written to its TAP or counted, then freed by the control
//! thread; every mbuf the control thread allocates is injected or freed; at exit both rings
//! are emptied (dropping frees) before the pool is checked.

mod fib_thread;
pub mod keep;
pub mod kernel;

use crate::config::CoppClass;
use crate::config::{Config, ControlConfig};
use crate::counters::latency::{LatencyHistogram, SharedHistogram};
use crate::counters::ControlStats;
use crate::dpdk::{Mbuf, Mempool};
use crate::link::PortStates;
use crate::linux::{self, EventFd, Tap};
use crate::pipeline::fib::{Fib, FibHandle, FibWriter};
use crate::pipeline::punt::ClassRings;
use crossbeam_queue::ArrayQueue;
use fib_thread::FibThread;
use std::io;
use std::process::Command;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Frames each CoPP class's punt ring holds: a few bursts of control traffic.
pub const PUNT_RING_FRAMES: usize = 256;
/// Frames the ring from the kernel holds.
pub const INJECT_RING_FRAMES: usize = 1024;
/// Mbufs the rings to and from the control thread can hold, for sizing the pool.
pub const RING_MBUFS: usize = PUNT_RING_FRAMES * CoppClass::COUNT + INJECT_RING_FRAMES;
/// Frames read from one TAP per turn, so one chatty interface cannot starve the others.
const READ_PER_TURN: usize = 32;
/// How often counters are published (also the longest sleep; link changes wake the thread).
const HOUSEKEEPING: Duration = Duration::from_millis(50);
/// Routes a table must have reached before its halving gives the allocator's free memory
/// back: smaller tables leave too little behind to be worth the allocator's walk.
const TRIM_AFTER_ROUTES: usize = 65_536;
/// The longest a change read from the kernel waits to be published while more keep coming.
pub const PUBLISH_WITHIN: Duration = Duration::from_millis(1);
/// How often the kernel's BGP peers are read (`[control.acl]`), the FIB thread's longest sleep:
/// a new peer's first answer may come before it is known and be refused; TCP sends again a
/// second later, by when it is.
const PEERS_EVERY: Duration = HOUSEKEEPING;
/// The same while the kernel's tables are first read (a start, a restart): a snapshot each
/// millisecond had the pages of a large table copied again and again (the published snapshot
/// shares them), a good part of the read (perf/RESULTS.md, "Issue 46: restart times");
/// meanwhile what the FIB lacks goes to the kernel, which forwards it.
const PUBLISH_WITHIN_FIRST_READ: Duration = Duration::from_millis(20);

/// The control thread's nice value where the real-time class is refused: above everything else
/// on a shared CPU (route work, `ip`, routing daemons), so a batch of a million routes delays a
/// BFD packet less. Raising a priority needs CAP_SYS_NICE; without it the thread keeps the
/// process's and says so.
const CONTROL_NICE: i32 = -10;
/// The control thread's SCHED_FIFO priority, tried before `CONTROL_NICE`: the lowest real-time
/// one, above every ordinary thread.
const CONTROL_RT_PRIORITY: i32 = 1;

/// A frame on a ring, with the time it entered it.
pub type Stamped = (u16, Mbuf, Instant);

/// What the workers and the control threads share.
pub struct ControlLink {
    /// (port, frame, when punted) for the kernel, one ring per CoPP class.
    punt: ClassRings<Stamped>,
    /// (port, frame, when read from the TAP) from the kernel, to send out of that port.
    pub inject: ArrayQueue<Stamped>,
    pub fib: FibHandle,
    /// Set by the control thread before it sleeps; the first worker to punt clears it and
    /// writes `wake`.
    sleeping: AtomicBool,
    wake: EventFd,
    /// From reading a frame off its TAP to a worker injecting it.
    pub inject_latency: SharedHistogram,
    /// Reloads whose static routes or neighbours the FIB thread has yet to apply: (running,
    /// new) configs, oldest first.
    fib_reloads: Mutex<Vec<(Arc<Config>, Arc<Config>)>>,
}

impl ControlLink {
    /// The rings, the wake-up, and `fib` published as the first generation.
    pub fn new(fib: Fib) -> io::Result<Self> {
        Ok(Self {
            punt: ClassRings::new(PUNT_RING_FRAMES),
            inject: ArrayQueue::new(INJECT_RING_FRAMES),
            fib: FibHandle::new(fib),
            sleeping: AtomicBool::new(false),
            wake: EventFd::new()?,
            inject_latency: SharedHistogram::default(),
            fib_reloads: Mutex::new(Vec::new()),
        })
    }

    /// A worker hands a punted frame to its class's ring; gives it back when the ring is full.
    #[inline]
    pub fn punt(&self, class: CoppClass, frame: Stamped) -> Result<(), Stamped> {
        self.punt.push(class, frame)
    }

    /// The next punted frame for the kernel: the oldest of the highest class that has one.
    pub fn next_punted(&self) -> Option<(CoppClass, Stamped)> {
        self.punt.pop()
    }

    /// Whether no punted frame waits.
    fn nothing_punted(&self) -> bool {
        self.punt.is_empty()
    }

    /// After a worker's punts of one loop: wakes the control thread if it sleeps (one write
    /// per wake-up; the ring's push came first, so the thread cannot sleep past it).
    #[inline]
    pub fn punted(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.wake.notify();
        }
    }

    /// A port's link changed (the link watcher): wakes the control thread to mirror it onto
    /// the port's host interface.
    pub fn link_changed(&self) {
        self.wake.notify();
    }

    /// A reload changed the config's static routes or neighbours: the FIB thread applies them
    /// at its next turn (within `HOUSEKEEPING`) and publishes them as any change.
    pub fn reconfigure_fib(&self, running: Arc<Config>, new: Arc<Config>) {
        self.fib_reloads.lock().expect("FIB reloads").push((running, new));
    }

    /// A worker takes an injected frame: counts how long it waited.
    #[inline]
    pub fn took_injected(&self, since: Instant) {
        self.inject_latency.record(since.elapsed().as_nanos() as u64);
    }
}

/// Where the control thread takes mbufs for the kernel's frames: the switch's pool, and its
/// jumbo pool for frames longer than one of those (a host interface's MTU is its port's, up to
/// switch.mtu).
pub struct Pools {
    pub small: Arc<Mempool>,
    pub jumbo: Option<Arc<Mempool>>,
}

impl Pools {
    /// An mbuf holding `frame`, from the pool whose mbufs fit it; `None` when it fits neither
    /// or the pool is empty.
    fn copy(&self, frame: &[u8]) -> Option<Mbuf> {
        let pool = if frame.len() <= self.small.frame_room() { &self.small } else { self.jumbo.as_ref()? };
        let mut mbuf = pool.alloc()?;
        mbuf.append(frame).then_some(mbuf)
    }
}

/// The running control threads.
pub struct ControlPlane {
    pub link: Arc<ControlLink>,
    pub stats: Arc<Mutex<ControlStats>>,
    stop: Arc<AtomicBool>,
    /// Wakes the FIB thread from its wait on the kernel when stopping: a stop (a take-over's
    /// among them) need not wait out the wait.
    stopping: Arc<EventFd>,
    /// The ports' states, once the ports are open (`attach`): the FIB thread applies the host
    /// interfaces' changes to them, holding those that come before.
    states: Arc<std::sync::OnceLock<Arc<PortStates>>>,
    /// Set by the FIB thread once it has read the kernel's tables whole.
    read_whole: Arc<(Mutex<bool>, std::sync::Condvar)>,
    threads: Vec<JoinHandle<()>>,
    /// The keeper holding the namespace and the host interfaces beyond this process (shared
    /// with the thread that watches it, `watch_keeper`, which replaces one that ended).
    kept: Arc<Mutex<Option<keep::Kept>>>,
    /// Set before this switch tells its keeper a successor follows: the keeper's closing of
    /// this switch's connection is then no loss.
    handing_over: Arc<AtomicBool>,
    /// Whether stopping lets them go at once (`keep_interfaces_s = 0`, or a start that failed
    /// on interfaces it created) rather than after the keep time.
    release_at_stop: bool,
}

/// Runs `ip` with `args`; the error names the command and what it printed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).output().map_err(|err| format!("cannot run ip: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim()))
}

impl ControlPlane {
    /// Creates the namespace if needed, a TAP per port in it (the switch's MAC, the port's
    /// MTU, the configured addresses), and starts the control and FIB threads. Returns once
    /// both run, or with the first thing that failed. The TAPs' carrier follows the ports'
    /// links in `states`; their administrative state and MTU go into `states`.
    pub fn start(
        config: &Config,
        states: Arc<PortStates>,
        pools: Pools,
        link: Arc<ControlLink>,
    ) -> Result<Self, String> {
        let kept = Self::keep(config)?;
        let mut plane = Self::idle(config, link)?;
        // The TAPs first: the FIB thread's first read of a large table holds the kernel's
        // routing lock in turns, which the control thread's `ip` commands would wait for.
        plane.attach(config, kept, states, pools)?;
        plane.start_fib_thread(config)?;
        plane.started(config);
        Ok(plane)
    }

    /// Everything runs: from now on a stop keeps the interfaces for the keep time.
    fn started(&mut self, config: &Config) {
        self.release_at_stop = config.control.as_ref().is_none_or(|control| control.keep_interfaces_s == 0);
    }

    /// Attaches to the keeper of the config's namespace, which creates it and the host
    /// interfaces when it holds none (or other ports').
    fn keep(config: &Config) -> Result<keep::Kept, String> {
        let control = config.control.as_ref().expect("start needs [control]");
        let names: Vec<String> = config.ports.iter().map(|port| port.name.clone()).collect();
        let keep_for = Duration::from_secs(u64::from(control.keep_interfaces_s));
        let kept = keep::Kept::attach(&control.netns, &names, keep_for)?;
        if kept.took_over {
            tracing::info!("control: took over the host interfaces kept in {} (a restart)", control.netns);
        }
        Ok(kept)
    }

    /// Starts the FIB thread alone, on host interfaces that exist already: it reads the
    /// kernel's tables whole while the switch a take-over replaces still forwards. `attach`
    /// does the rest once that switch has let the interfaces go. Fails when an interface is
    /// missing (the switch before had other ports).
    pub fn prepare(config: &Config, link: Arc<ControlLink>) -> Result<Self, String> {
        let mut plane = Self::idle(config, link)?;
        plane.start_fib_thread(config)?;
        Ok(plane)
    }

    /// A control plane with no thread yet.
    fn idle(config: &Config, link: Arc<ControlLink>) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::new(EventFd::new().map_err(|err| format!("control: cannot create an eventfd: {err}"))?);
        let stats = Arc::new(Mutex::new(ControlStats {
            punt_tap_errors: vec![0; config.ports.len()],
            inject_dropped: vec![0; config.ports.len()],
            ..ControlStats::default()
        }));
        let states = Arc::new(std::sync::OnceLock::new());
        let read_whole = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        Ok(Self {
            link,
            stats,
            stop,
            stopping,
            states,
            read_whole,
            threads: Vec::new(),
            kept: Arc::default(),
            handing_over: Arc::default(),
            release_at_stop: true,
        })
    }

    /// Starts the FIB thread on the host interfaces, which must exist; returns once its netlink
    /// socket is open, or with what failed.
    fn start_fib_thread(&mut self, config: &Config) -> Result<(), String> {
        let control = config.control.clone().expect("start needs [control]");
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let spawned = {
            let (config, stats, link) = (config.clone(), Arc::clone(&self.stats), Arc::clone(&self.link));
            let (stop, stopping) = (Arc::clone(&self.stop), Arc::clone(&self.stopping));
            let (states, read_whole) = (Arc::clone(&self.states), Arc::clone(&self.read_whole));
            std::thread::Builder::new().name("raceway-fib".into()).spawn(move || {
                let names: Vec<String> = config.ports.iter().map(|port| port.name.clone()).collect();
                let opened = linux::enter_netns(&control.netns)
                    .map_err(|err| format!("control.netns: cannot enter '{}': {err}", control.netns))
                    .and_then(|()| {
                        names
                            .iter()
                            .map(|name| {
                                linux::interface_index(name)
                                    .map_err(|err| format!("control: index of '{name}' in {}: {err}", control.netns))
                            })
                            .collect::<Result<Vec<u32>, String>>()
                    })
                    .and_then(|interfaces| {
                        kernel::Sync::open(interfaces)
                            .map_err(|err| format!("control: cannot open a netlink socket in {}: {err}", control.netns))
                    });
                match opened {
                    Ok(sync) => {
                        let _ = ready_tx.send(Ok(()));
                        // Without it (an old kernel), `[control.acl]`'s `neighbors` are the config's.
                        let peers = kernel::peers::BgpPeers::open()
                            .map_err(|err| tracing::warn!("control: cannot read the kernel's BGP peers: {err}"))
                            .ok();
                        FibThread {
                            writer: FibWriter::mirroring(&config),
                            sync,
                            peers,
                            link,
                            stop,
                            stopping,
                            stats,
                            states,
                            pending_links: Vec::new(),
                            read_whole,
                            names,
                        }
                        .run();
                    }
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                    }
                }
            })
        };
        self.await_thread(spawned, &ready_rx, "FIB", "its netlink socket was open")
    }

    /// Keeps a thread just spawned and waits for its first word: ready, or what failed, which
    /// stops everything started so far.
    fn await_thread(
        &mut self,
        spawned: io::Result<JoinHandle<()>>,
        ready: &mpsc::Receiver<Result<(), String>>,
        thread: &str,
        before: &str,
    ) -> Result<(), String> {
        let failed = match (spawned, ready) {
            (Err(err), _) => format!("cannot start the {thread} thread: {err}"),
            (Ok(handle), ready) => {
                self.threads.push(handle);
                match ready.recv() {
                    Ok(Ok(())) => return Ok(()),
                    Ok(Err(err)) => err,
                    Err(_) => format!("the {thread} thread ended before {before}"),
                }
            }
        };
        self.stop();
        Err(failed)
    }

    /// After `prepare`: takes the interfaces over from the keeper and starts the control thread
    /// on them (`attach`).
    pub fn take_interfaces(&mut self, config: &Config, states: Arc<PortStates>, pools: Pools) -> Result<(), String> {
        let kept = Self::keep(config)?;
        self.attach(config, kept, states, pools)?;
        self.started(config);
        Ok(())
    }

    /// Waits until the FIB thread has read the kernel's tables whole, at most `within`; true
    /// when it has.
    pub fn wait_until_read_whole(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let (lock, read) = &*self.read_whole;
        let mut done = lock.lock().expect("read-whole lock");
        while !*done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            done = read.wait_timeout(done, left).expect("read-whole lock").0;
        }
        true
    }

    /// Holds the keeper's interfaces (`kept`) and starts the control thread on them, and gives
    /// the FIB thread the ports' states. Returns once the TAPs are up, or with what failed.
    fn attach(
        &mut self,
        config: &Config,
        kept: keep::Kept,
        states: Arc<PortStates>,
        pools: Pools,
    ) -> Result<(), String> {
        let control = config.control.clone().expect("start needs [control]");
        let keep_for = Duration::from_secs(u64::from(control.keep_interfaces_s));
        let took_over = kept.took_over;
        *self.kept.lock().expect("keeper lock") = Some(kept);
        // Interfaces this start made go again if it fails.
        self.release_at_stop = !took_over || keep_for.is_zero();
        let _ = self.states.set(Arc::clone(&states));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let spawned = {
            let (config, link, stop, stats) =
                (config.clone(), Arc::clone(&self.link), Arc::clone(&self.stop), Arc::clone(&self.stats));
            std::thread::Builder::new().name("raceway-control".into()).spawn(move || {
                if let Err(err) = linux::set_thread_realtime(CONTROL_RT_PRIORITY) {
                    tracing::info!("control: no real-time class for the control thread ({err}); nice {CONTROL_NICE}");
                    if let Err(err) = linux::set_thread_nice(CONTROL_NICE) {
                        tracing::warn!("control: cannot raise the control thread's priority: {err}");
                    }
                }
                match open_interfaces(&config, &control, &states, took_over) {
                    Ok(taps) => {
                        let _ = ready_tx.send(Ok(()));
                        ControlThread { taps, states, pools, link, stop, stats, config }.run();
                    }
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                    }
                }
            })
        };
        self.await_thread(spawned, &ready_rx, "control", "its interfaces were up")?;
        self.start_keeper_watch(config)
    }

    /// Starts the thread that watches the keeper (`watch_keeper`).
    fn start_keeper_watch(&mut self, config: &Config) -> Result<(), String> {
        let control = config.control.clone().expect("start needs [control]");
        let names: Vec<String> = config.ports.iter().map(|port| port.name.clone()).collect();
        let watch = KeeperWatch {
            kept: Arc::clone(&self.kept),
            handing_over: Arc::clone(&self.handing_over),
            stopping: Arc::clone(&self.stopping),
            keep_for: Duration::from_secs(u64::from(control.keep_interfaces_s)),
            netns: control.netns,
            names,
        };
        let spawned = std::thread::Builder::new().name("raceway-keeper".into()).spawn(move || watch.run());
        match spawned {
            Ok(handle) => {
                self.threads.push(handle);
                Ok(())
            }
            Err(err) => {
                self.stop();
                Err(format!("cannot start the keeper's watch thread: {err}"))
            }
        }
    }

    /// A switch taking over follows: stopping leaves the interfaces with the keeper, whatever
    /// the keep time, for it to attach to.
    pub fn leave_to_successor(&mut self) {
        self.release_at_stop = false;
        self.handing_over.store(true, Ordering::Relaxed);
        if let Some(kept) = self.kept.lock().expect("keeper lock").as_mut() {
            kept.hand_over();
        }
    }

    /// Stops both threads (after the workers: the control thread frees what they punted
    /// last), empties both rings, and lets the keeper go (now, or after its keep time).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.link.wake.notify();
        self.stopping.notify();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        while self.link.next_punted().is_some() {}
        while self.link.inject.pop().is_some() {}
        let kept = self.kept.lock().expect("keeper lock").take();
        if let Some(kept) = kept {
            if self.release_at_stop {
                kept.release();
            }
        }
    }
}

/// The thread that watches the keeper while the switch runs. A keeper ends while a switch is
/// attached only when killed, or when its namespace is no longer named (an operator's `ip
/// netns del`). Killed: the watch says so and starts a new keeper, which takes another queue
/// of the interfaces this switch holds, so that they outlive it as before. The namespace gone:
/// the interfaces go when this switch stops, and the watch says so; the next start makes them
/// anew.
/// Attaches a watch tries, 200 ms apart, after its keeper ended.
const KEEPER_ATTACH_TRIES: usize = 15;

struct KeeperWatch {
    kept: Arc<Mutex<Option<keep::Kept>>>,
    handing_over: Arc<AtomicBool>,
    stopping: Arc<EventFd>,
    keep_for: Duration,
    netns: String,
    names: Vec<String>,
}

impl KeeperWatch {
    fn run(self) {
        let netns = self.netns.as_str();
        if let Err(err) = linux::enter_netns(netns) {
            tracing::warn!(
                "control: the keeper's watch cannot enter {netns}: {err}; a keeper that ends goes unnoticed"
            );
            return;
        }
        loop {
            let Some(fd) = self.kept.lock().expect("keeper lock").as_ref().map(keep::Kept::raw_fd) else { return };
            let Ok(ready) = linux::which_readable(&[fd, self.stopping.raw_fd()], -1) else { return };
            if ready[1] || self.handing_over.load(Ordering::Relaxed) {
                return;
            }
            if !ready[0] {
                continue;
            }
            let log = keep::log_path(netns);
            if !keep::namespace_still_named(netns) {
                tracing::error!(
                    "control: {netns} was deleted (or made anew) while the switch runs, and its keeper let go \
                     ({}): the host interfaces go when this switch stops, and the next start makes them anew",
                    log.display()
                );
                return;
            }
            tracing::error!(
                "control: the keeper of {netns} ended while the switch runs (killed? {}); starting a new one",
                log.display()
            );
            // A killed keeper's connection ends before its listening socket closes: an attach
            // in between is reset. Tries for a few seconds, unless stopping.
            let mut replaced = keep::Kept::attach(netns, &self.names, self.keep_for);
            for _ in 0..KEEPER_ATTACH_TRIES {
                if replaced.is_ok() || linux::which_readable(&[self.stopping.raw_fd()], 200).map_or(true, |r| r[0]) {
                    break;
                }
                replaced = keep::Kept::attach(netns, &self.names, self.keep_for);
            }
            let mut kept = self.kept.lock().expect("keeper lock");
            match replaced {
                Ok(new) => {
                    *kept = Some(new);
                    tracing::info!("control: a new keeper holds the host interfaces in {netns}");
                }
                Err(err) => {
                    *kept = None;
                    tracing::error!("{err}; the host interfaces will not outlive this switch");
                    return;
                }
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// In the control thread: enters the namespace and attaches to the TAP of each port (the
/// keeper holds another queue of each), bringing it up with the switch's MAC, its port's MTU
/// and addresses. Interfaces taken over from a switch before keep their carrier until the
/// control thread sets it from the port, and their MAC is set only when it differs: setting it
/// flushes the interface's neighbours.
fn open_interfaces(
    config: &Config,
    control: &ControlConfig,
    states: &PortStates,
    took_over: bool,
) -> Result<Vec<Tap>, String> {
    linux::enter_netns(&control.netns)
        .map_err(|err| format!("control.netns: cannot enter '{}': {err}", control.netns))?;
    let netns = control.netns.as_str();
    // Written under /proc/sys from this thread, which is in the namespace now: the kernel
    // resolves a net sysctl in the namespace of the thread that opens it (no process per
    // setting, which a take-over would wait for).
    let sysctl = |setting: &str| -> Result<(), String> {
        let (key, value) = setting.split_once('=').expect("key=value");
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        std::fs::write(&path, value).map_err(|err| format!("sysctl {setting} in {netns}: {err}"))
    };
    for setting in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.default.send_redirects=0",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        // Addresses usable at once: duplicate detection would hold them tentative for a second.
        "net.ipv6.conf.default.accept_dad=0",
    ] {
        sysctl(setting)?;
    }
    let mut taps = Vec::with_capacity(config.ports.len());
    for (index, port) in config.ports.iter().enumerate() {
        let tap = Tap::attach(&port.name)
            .map_err(|err| format!("control: cannot attach to TAP '{}' in {netns}: {err}", port.name))?;
        let mac = config.mac.to_string();
        let mtu = states.get(index).mtu.to_string();
        let mut link = vec!["-n", netns, "link", "set", "dev", &port.name];
        if linux::interface_mac(&port.name).ok() != Some(config.mac.0) {
            link.extend(["address", &mac]);
        }
        link.extend(["mtu", &mtu, "up"]);
        ip(&link)?;
        for address in &port.addresses {
            ip(&["-n", netns, "address", "replace", &address.to_string(), "dev", &port.name])?;
        }
        if !took_over {
            // Down until the data-plane port says otherwise.
            tap.set_carrier(false).map_err(|err| format!("control: carrier of '{}': {err}", port.name))?;
        }
        taps.push(tap);
    }
    Ok(taps)
}

struct ControlThread {
    taps: Vec<Tap>,
    states: Arc<PortStates>,
    pools: Pools,
    link: Arc<ControlLink>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<ControlStats>>,
    config: Config,
}

impl ControlThread {
    fn run(self) {
        let ports = self.taps.len();
        let (mut tap_errors, mut inject_dropped) = (vec![0u64; ports], vec![0u64; ports]);
        let mut punt_latency = LatencyHistogram::default();
        let mut carrier: Vec<Option<bool>> = vec![None; ports];
        let mut buffer = vec![0u8; 65_536];
        let mut whole = vec![0u8; 65_536];
        let mut next_housekeeping = Instant::now();
        let mut carrier_generation = 0;
        let mut fds: Vec<i32> = self.taps.iter().map(Tap::raw_fd).collect();
        fds.push(self.link.wake.raw_fd());
        loop {
            let stopping = self.stop.load(Ordering::Relaxed);
            let mut busy = false;
            while let Some((_, (port, mbuf, since))) = self.link.next_punted() {
                busy = true;
                let port = usize::from(port);
                // A chained frame (longer than one mbuf) is gathered into `whole` first.
                let frame = mbuf.whole(&mut whole);
                if frame.is_none_or(|frame| self.taps[port].write(frame).is_err()) {
                    tap_errors[port] += 1;
                }
                punt_latency.record(since.elapsed().as_nanos() as u64);
            }
            if stopping {
                break;
            }
            for (port, tap) in self.taps.iter().enumerate() {
                for _ in 0..READ_PER_TURN {
                    let len = match tap.read(&mut buffer) {
                        Ok(len) => len,
                        Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                        Err(err) => {
                            tracing::warn!("control: reading TAP '{}': {err}", tap.name);
                            break;
                        }
                    };
                    busy = true;
                    let read_at = Instant::now();
                    let injected = self.pools.copy(&buffer[..len]);
                    match injected.map(|mbuf| self.link.inject.push((port as u16, mbuf, read_at))) {
                        Some(Ok(())) => {}
                        // No mbuf, too long for one, or the ring full (dropping the frame frees it).
                        _ => inject_dropped[port] += 1,
                    }
                }
            }
            // A link change wakes this thread (`ControlLink::link_changed`): the TAP follows
            // at once, so the kernel neither answers into a dead link nor stays silent on a
            // live one.
            let generation = self.states.generation();
            if generation != carrier_generation {
                carrier_generation = generation;
                for (index, tap) in self.taps.iter().enumerate() {
                    let up = self.states.get(index).carrier && self.config.ports[index].enabled;
                    if carrier[index] != Some(up) {
                        match tap.set_carrier(up) {
                            Ok(()) => carrier[index] = Some(up),
                            Err(err) => tracing::warn!("control: carrier of '{}': {err}", tap.name),
                        }
                    }
                }
            }
            if Instant::now() >= next_housekeeping {
                next_housekeeping = Instant::now() + HOUSEKEEPING;
                self.publish(&tap_errors, &inject_dropped, &punt_latency);
            }
            if !busy {
                // Idle: the kernel's frames, a worker's punt (through `wake`) or the next
                // housekeeping end the sleep. A punt pushed before `sleeping` was set is seen
                // by the check after it.
                self.link.sleeping.store(true, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if self.link.nothing_punted() && !self.stop.load(Ordering::Relaxed) {
                    let timeout = next_housekeeping.saturating_duration_since(Instant::now());
                    let _ = linux::wait_readable(&fds, timeout.as_millis().clamp(1, 50) as i32);
                }
                self.link.sleeping.store(false, Ordering::SeqCst);
                self.link.wake.clear();
            }
        }
        self.publish(&tap_errors, &inject_dropped, &punt_latency);
    }

    /// Copies this thread's counters into the shared stats (the FIB thread owns the others).
    fn publish(&self, tap_errors: &[u64], inject_dropped: &[u64], punt_latency: &LatencyHistogram) {
        let inject_latency = self.link.inject_latency.snapshot();
        let mut stats = self.stats.lock().expect("control stats");
        stats.punt_tap_errors.copy_from_slice(tap_errors);
        stats.inject_dropped.copy_from_slice(inject_dropped);
        stats.punt_latency.clone_from(punt_latency);
        stats.inject_latency = inject_latency;
    }
}
