//! The control plane's FIB thread (`raceway-fib`): it owns the netlink socket and the FIB
//! writer, applies each message as a delta, publishes a snapshot when the socket is drained
//! or soon after the first unpublished change, follows the ports' administrative state and
//! MTU from their host interfaces, and reads the kernel's BGP peers for `[control.acl]`.
//!
//! Invariant: only this thread writes the FIB (through its writer) and frees replaced
//! snapshots; a change read waits at most `PUBLISH_WITHIN` to be published while more keep
//! coming (`PUBLISH_WITHIN_FIRST_READ` while the kernel's tables are first read).

use super::*;

/// The FIB side: netlink in, snapshots out; and the ports' administrative state and MTU from
/// their host interfaces.
pub(super) struct FibThread {
    pub(super) writer: FibWriter,
    pub(super) sync: kernel::Sync,
    /// The kernel's BGP peers, read every `PEERS_EVERY` (`[control.acl]`).
    pub(super) peers: Option<kernel::peers::BgpPeers>,
    pub(super) link: Arc<ControlLink>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) stopping: Arc<EventFd>,
    pub(super) stats: Arc<Mutex<ControlStats>>,
    pub(super) states: Arc<std::sync::OnceLock<Arc<PortStates>>>,
    /// Changes to the host interfaces read before the ports' states were given.
    pub(super) pending_links: Vec<kernel::LinkChange>,
    /// Said once the kernel's tables are read whole.
    pub(super) read_whole: Arc<(Mutex<bool>, std::sync::Condvar)>,
    /// The host interfaces' names, by port.
    pub(super) names: Vec<String>,
}

impl FibThread {
    pub(super) fn run(mut self) {
        let mut generation = self.link.fib.generation();
        let mut publish_latency = LatencyHistogram::default();
        let mut next_housekeeping = Instant::now();
        // The most routes since the allocator last gave memory back.
        let mut routes_peak = 0;
        // Until the kernel's tables have been read whole once (said in the log, with the time
        // it took: after a restart, the time to the full FIB).
        let mut reading = Some(Instant::now());
        let mut next_peers = Instant::now();
        // Since a reload asked for a new writer, until it holds the kernel's tables whole: the
        // snapshot published before stays in force meanwhile.
        let mut rebuilding: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let within = if reading.is_some() { PUBLISH_WITHIN_FIRST_READ } else { PUBLISH_WITHIN };
            match self.sync.poll(&mut self.writer, started + within) {
                Ok(_) => {}
                Err(err) => tracing::warn!("control: netlink: {err}"),
            }
            self.pending_links.extend(self.sync.take_link_changes());
            if let Some(states) = self.states.get() {
                for change in std::mem::take(&mut self.pending_links) {
                    apply_link(states, &self.names, change);
                }
            }
            // Each loop comes within HOUSEKEEPING, well inside kernel::EXPIRY_MARGIN.
            if let Err(err) = self.sync.expire_routes(Instant::now(), &mut self.writer) {
                tracing::warn!("control: netlink: {err}");
            }
            if let Err(err) = self.sync.resolve_next_hops(Instant::now()) {
                tracing::warn!("control: asking the kernel to resolve next hops: {err}");
            }
            let reloads = std::mem::take(&mut *self.link.fib_reloads.lock().expect("FIB reloads"));
            for (running, new) in reloads {
                if crate::config::reload::fib_layout_changed(&running, &new) {
                    // The groups lead the FIB's group table, and the kernel's routes may share
                    // their entries: a new writer is filled by a fresh dump, published whole.
                    let peers = self.writer.kernel_peers().to_vec();
                    self.writer = FibWriter::mirroring(&new);
                    self.writer.set_kernel_peers(peers);
                    if let Err(err) = self.sync.rebuild(&self.writer) {
                        tracing::warn!("control: netlink: {err}");
                    }
                    rebuilding.get_or_insert_with(Instant::now);
                } else {
                    self.writer.reconfigure(&running, &new);
                }
            }
            if Instant::now() >= next_peers {
                next_peers = Instant::now() + PEERS_EVERY;
                self.read_peers();
            }
            let mut changed = self.writer.take_changed();
            if let Some(since) = rebuilding {
                changed = self.sync.synced();
                if changed {
                    rebuilding = None;
                    tracing::info!(
                        "control: the FIB laid out for the reloaded groups: {} routes read again, {:.1} ms",
                        self.writer.routes(),
                        since.elapsed().as_secs_f64() * 1e3
                    );
                }
            }
            if changed {
                generation += 1;
                self.link.fib.publish(self.writer.snapshot(generation));
                let elapsed = started.elapsed().as_nanos() as u64;
                publish_latency.record(elapsed);
                let mut stats = self.stats.lock().expect("control stats");
                stats.fib_generation = generation;
                stats.fib_routes = self.writer.routes() as u64;
                stats.fib_neighbors = self.writer.neighbors() as u64;
                stats.last_update_ns = elapsed;
            }
            // The last dump's end may change nothing: the snapshot published before holds it all.
            if let Some(since) = reading.filter(|_| self.sync.synced()) {
                reading = None;
                let (lock, read) = &*self.read_whole;
                *lock.lock().expect("read-whole lock") = true;
                read.notify_all();
                tracing::info!(
                    "control: the kernel's tables read whole: {} routes and {} neighbours in the FIB, {:.1} ms",
                    self.writer.routes(),
                    self.writer.neighbors(),
                    since.elapsed().as_secs_f64() * 1e3
                );
            }
            if changed || Instant::now() >= next_housekeeping {
                // Snapshots the workers have let go of are freed here, off the packet path.
                self.link.fib.reclaim();
            }
            if Instant::now() >= next_housekeeping {
                next_housekeeping = Instant::now() + HOUSEKEEPING;
                let mut stats = self.stats.lock().expect("control stats");
                stats.publish_latency.clone_from(&publish_latency);
                stats.fib_resyncs = self.sync.resyncs;
                stats.fib_dumps = self.sync.refreshes;
                stats.fib_kernel_routes = self.sync.tables.kernel_route_counts();
                stats.fib_partial = u64::from(self.sync.tables.partial());
                drop(stats);
                // Once a large table has halved and its changes have settled (the snapshots
                // that held the old routes reclaimed), the freed memory goes back.
                let routes = self.writer.routes();
                routes_peak = routes_peak.max(routes);
                if !changed && routes_peak >= TRIM_AFTER_ROUTES && routes * 2 < routes_peak {
                    linux::release_free_memory();
                    routes_peak = routes;
                }
            }
            if !changed {
                let _ = linux::wait_readable(
                    &[self.sync.raw_fd(), self.stopping.raw_fd()],
                    HOUSEKEEPING.as_millis() as i32,
                );
            }
        }
        let mut stats = self.stats.lock().expect("control stats");
        stats.publish_latency = publish_latency;
        stats.fib_resyncs = self.sync.resyncs;
        stats.fib_dumps = self.sync.refreshes;
        stats.fib_kernel_routes = self.sync.tables.kernel_route_counts();
        stats.fib_partial = u64::from(self.sync.tables.partial());
    }

    /// Reads the kernel's BGP peers into the FIB: a link-local one on its interface's port
    /// (one on an interface that is no port cannot reach the switch), the others wherever the
    /// FIB routes them (`Fib::is_control_peer`).
    fn read_peers(&mut self) {
        let Some(peers) = &mut self.peers else { return };
        match peers.read() {
            Ok(read) => {
                let on_ports = read.into_iter().filter_map(|(interface, address)| match interface {
                    0 => Some((None, address)),
                    interface => self.sync.tables.port_of(interface).map(|port| (Some(port as u16), address)),
                });
                self.writer.set_kernel_peers(on_ports.collect());
            }
            Err(err) => tracing::warn!("control: reading the kernel's BGP peers: {err}"),
        }
    }
}

/// The operator changed a port's host interface: `ip link set PORT down/up` shuts the port or
/// opens it (as SONiC's `config interface shutdown/startup`), `mtu N` sets the largest packet
/// it sends (`config interface mtu`). An MTU the port cannot take is clamped, and the
/// interface set back to it, so that the kernel's ICMP errors give the MTU that holds.
fn apply_link(states: &PortStates, names: &[String], change: kernel::LinkChange) {
    let name = &names[change.port];
    if states.set_admin_up(change.port, change.up) {
        tracing::info!("control: port '{name}' {}", if change.up { "up (startup)" } else { "shut down" });
    }
    let Some(mtu) = change.mtu else { return };
    let before = states.get(change.port).mtu;
    let set = states.set_mtu(change.port, mtu);
    if set != mtu {
        tracing::warn!(
            "control: port '{name}': MTU {mtu} is outside what it takes ({}-{}); it stays at {set}",
            crate::link::MIN_MTU,
            states.max_mtu(change.port)
        );
        if let Err(err) = linux::set_interface_mtu(name, set) {
            tracing::warn!("control: cannot set the MTU of '{name}' back to {set}: {err}");
        }
    } else if set != before {
        tracing::info!("control: port '{name}' MTU {set}");
    }
}
