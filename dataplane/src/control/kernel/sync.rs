//! `Sync`: the route netlink socket in the switch's namespace, its subscriptions and dumps,
//! and the loop step that reads what the kernel says and applies it to `KernelTables` and the
//! FIB writer.
//!
//! Invariant: after lost messages (an overrun) every table is dumped again before the FIB is
//! trusted; the socket's receive buffer is forced large so that a burst of route changes is
//! read, not lost.

use super::decode::{decode, dump_request, resolve_request, Message, DUMPS, GROUPS, RTM_GETNEXTHOP};
use super::{Event, KernelTables, LinkChange, Stale, RESOLVE_PER_POLL};
use crate::pipeline::fib::FibWriter;
use std::io;

/// The netlink side of the control plane: subscribed, dumping in turn, applying changes to
/// a FIB writer as they arrive.
pub struct Sync {
    socket: netlink_sys::Socket,
    pub tables: KernelTables,
    /// The next dump to send once the current one is done (`DUMPS.len()`: all done).
    pub(super) next_dump: usize,
    dumping: bool,
    sequence: u32,
    buffer: Vec<u8>,
    /// During a fresh dump after lost messages: what has not been reported again.
    stale: Option<Stale>,
    /// Times messages were lost and the tables dumped again.
    pub resyncs: u64,
    /// Changes to the ports' host interfaces read since the caller last took them.
    links: Vec<LinkChange>,
    /// A fresh dump is wanted once the one under way ends.
    resync_after: bool,
    /// Dumps of every table after the first (`resyncs` of them after lost messages).
    pub refreshes: u64,
}

/// The socket's receive buffer: a million route messages arrive faster than any reader in
/// bursts of `ip -batch`; 64 MiB holds about half a million of them.
const RECEIVE_BUFFER: usize = 64 << 20;

impl Sync {
    /// Opens the socket in the calling thread's namespace, for a switch whose port `i` is the
    /// interface `interfaces[i]`, and starts the first dumps.
    pub fn open(interfaces: Vec<u32>) -> io::Result<Self> {
        let mut socket = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
        socket.bind_auto()?;
        for group in GROUPS {
            socket.add_membership(group)?;
        }
        // Past rmem_max when allowed (root), else as much as rmem_max gives.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
        if crate::linux::force_receive_buffer(fd, RECEIVE_BUFFER).is_err() {
            let _ = socket.set_rx_buf_sz(RECEIVE_BUFFER);
        }
        socket.set_non_blocking(true)?;
        let mut sync = Self {
            socket,
            tables: KernelTables::new(interfaces),
            next_dump: 0,
            dumping: false,
            sequence: 0,
            buffer: vec![0; 1 << 20],
            stale: None,
            resyncs: 0,
            links: Vec::new(),
            resync_after: false,
            refreshes: 0,
        };
        sync.send_next_dump()?;
        Ok(sync)
    }

    pub fn raw_fd(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.socket)
    }

    /// The ports' host interface changes read since the last call, oldest first.
    pub fn take_link_changes(&mut self) -> Vec<LinkChange> {
        std::mem::take(&mut self.links)
    }

    /// Asks the kernel to resolve the neighbours of next hops it has not resolved (a route or
    /// group over them sends nothing there until then), each at once, then less and less
    /// often while it cannot; returns how many were asked.
    pub fn resolve_next_hops(&mut self, now: std::time::Instant) -> io::Result<usize> {
        let due = self.tables.due_for_resolution(now, RESOLVE_PER_POLL);
        for &(interface, gateway) in &due {
            self.sequence = self.sequence.wrapping_add(1);
            match self.socket.send(&resolve_request(interface, gateway, self.sequence), 0) {
                Ok(_) => {}
                // A full socket buffer: asked again later.
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) => return Err(err),
            }
        }
        Ok(due.len())
    }

    /// Follows the IPv6 routes whose time is up at `now` (`KernelTables::expire`), and dumps
    /// the tables again to learn whether the kernel was told to keep any of them longer.
    pub fn expire_routes(&mut self, now: std::time::Instant, writer: &mut FibWriter) -> io::Result<usize> {
        let expired = self.tables.expire(now, writer);
        self.resync_if_wanted(writer)?;
        Ok(expired)
    }

    /// Dumps the tables again when the kernel changed what only a dump shows (dead next hops);
    /// after the dump under way, if one is (a socket takes one dump at a time).
    fn resync_if_wanted(&mut self, writer: &FibWriter) -> io::Result<()> {
        if !std::mem::take(&mut self.tables.resync_wanted) {
            return Ok(());
        }
        if self.synced() {
            self.dump_again(writer)
        } else {
            self.resync_after = true;
            Ok(())
        }
    }

    /// Dumps every table again; what the dumps do not report is removed once they end.
    fn resync(&mut self, writer: &FibWriter) -> io::Result<()> {
        self.resyncs += 1;
        self.dump_again(writer)
    }

    /// Forgets what the kernel said and dumps every table again into `writer`, a new one
    /// (a reload changed what the FIB is laid out by: the groups, the peers' MACs); `synced`
    /// says when it holds everything again. A dump under way ends first.
    pub fn rebuild(&mut self, writer: &FibWriter) -> io::Result<()> {
        self.tables = self.tables.fresh();
        self.stale = None;
        if self.dumping || self.next_dump < DUMPS.len() {
            self.resync_after = true;
            return Ok(());
        }
        self.dump_again(writer)
    }

    /// Dumps every table again (messages were not lost: the kernel changed what only a dump
    /// shows); what the dumps do not report is removed once they end.
    fn dump_again(&mut self, writer: &FibWriter) -> io::Result<()> {
        self.refreshes += 1;
        if self.stale.is_none() {
            self.stale = Some(self.tables.contents(writer));
        }
        self.next_dump = 0;
        self.dumping = false;
        self.send_next_dump()
    }

    fn send_next_dump(&mut self) -> io::Result<()> {
        if self.dumping || self.next_dump >= DUMPS.len() {
            return Ok(());
        }
        let (kind, header_len) = DUMPS[self.next_dump];
        if kind == RTM_GETNEXTHOP {
            // The next hops' and then the routes' dumps come after the links' and addresses':
            // they read which next hops are dead after every change seen so far, so a fresh
            // dump wanted for one of those (the dump's own links and addresses among them, at
            // a start) is this one. Only a change from here on asks for another: a second full
            // dump at every start doubled the time to the full FIB.
            self.tables.resync_wanted = false;
            self.resync_after = false;
        }
        self.sequence = self.sequence.wrapping_add(1);
        self.socket.send(&dump_request(kind, header_len, self.sequence), 0)?;
        self.next_dump += 1;
        self.dumping = true;
        Ok(())
    }

    /// Whether the first full dump has been applied.
    pub fn synced(&self) -> bool {
        self.next_dump >= DUMPS.len() && !self.dumping
    }

    /// Reads what the kernel sent and applies it to `writer`, until nothing is waiting or
    /// `until` has passed (so that the caller publishes at least that often); returns how many
    /// messages were applied.
    pub fn poll(&mut self, writer: &mut FibWriter, until: std::time::Instant) -> io::Result<usize> {
        let mut applied = 0;
        loop {
            if applied > 0 && std::time::Instant::now() >= until {
                break;
            }
            let received = match self.socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(received) => received,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                // ENOBUFS: the kernel dropped messages; only a fresh dump is certain.
                Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => {
                    tracing::warn!("control: netlink messages were lost; dumping the kernel's tables again");
                    self.resync(writer)?;
                    continue;
                }
                Err(err) => return Err(err),
            };
            for message in decode(&self.buffer[..received.min(self.buffer.len())]) {
                match message {
                    Message::Event(Event::Link { interface, up, mtu }) => {
                        if let Some(port) = self.tables.port_of(interface) {
                            self.links.push(LinkChange { port, up, mtu });
                        }
                        self.tables.apply(Event::Link { interface, up, mtu }, writer);
                        self.resync_if_wanted(writer)?;
                    }
                    Message::Event(event) => {
                        if let Some(stale) = &mut self.stale {
                            stale.refreshed(&event, &mut self.tables);
                        }
                        self.tables.apply(event, writer);
                        applied += 1;
                        self.resync_if_wanted(writer)?;
                    }
                    Message::Done => {
                        self.dumping = false;
                        self.send_next_dump()?;
                        if self.synced() {
                            if let Some(stale) = self.stale.take() {
                                applied += stale.sweep(&mut self.tables, writer);
                            }
                            if std::mem::take(&mut self.resync_after) {
                                self.dump_again(writer)?;
                            }
                        }
                    }
                    Message::Lost => self.resync(writer)?,
                    Message::Other => {}
                }
            }
        }
        Ok(applied)
    }
}
