//! Ethdev ports: finding a device, starting it with its rx and tx queues, rx and tx bursts,
//! link and hardware counters, and closing it; and the devargs a device string names.
//!
//! Invariant: a `Port` holds the pool its rx queues fill, so the pool is freed only after the
//! port is stopped and closed (which returns the mbufs its driver held). A port's queues are
//! reached only through handles (`RxQueue`, `PortTx`), each claimed once and owned by the one
//! thread that bursts on it: DPDK's rule that no two lcores poll one queue is a type here, not
//! a convention. A handle keeps its port open.

#![allow(unsafe_code)]

use super::{check, strerror, Burst, DpdkError, Mempool, BURST};
use dpdk_sys as sys;
use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The tx queues a port opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxQueues {
    /// One, for everything.
    One,
    /// The data's, and one of its own for PFC frames (`tx_control_burst`).
    WithPfcQueue,
    /// This many data queues (a load generator spreading its frames, `tx_burst_on`).
    Data(u16),
}

/// A started ethdev port with `rx_queues` rx queues and its tx queues.
pub struct Port {
    id: u16,
    pub name: String,
    pub driver: String,
    /// Rx queues opened: as many as asked for, up to what the device offers.
    pub rx_queues: u16,
    /// Tx queues opened: the data's, and PFC's own where the port has one
    /// (`TxQueues::WithPfcQueue`).
    pub tx_queues: u16,
    /// Whether the device spreads frames over the rx queues by RSS (IP addresses, UDP/TCP
    /// ports), so each flow keeps to one queue. Without it, each queue has its own source (a
    /// net_pcap rx_pcap file per queue, say).
    pub rss: bool,
    /// How many rx queues the device offers (net_pcap: one per rx_pcap file).
    pub max_rx_queues: u16,
    /// The MTU the device was configured with: the one asked for, or its maximum if lower.
    pub mtu: u32,
    /// Which rx queues and whether the tx queues have a handle out (`rx_queue`, `transmitter`).
    rx_claimed: Vec<AtomicBool>,
    tx_claimed: AtomicBool,
    /// The pool its rx queues fill: freed only after the port is closed.
    _pool: Arc<Mempool>,
}

/// One rx queue of a port, held by the one thread that polls it. Not `Clone`: a second handle
/// to the same queue is refused while this one lives (`Port::rx_queue`), and bursting takes
/// `&mut self`, so two threads cannot poll one queue. It moves to the lcore that polls it:
///
/// ```
/// fn to_the_worker(queue: raceway::dpdk::RxQueue) -> impl Send {
///     queue
/// }
/// ```
///
/// but cannot be copied:
///
/// ```compile_fail
/// fn copies<T: Clone>() {}
/// copies::<raceway::dpdk::RxQueue>();
/// ```
pub struct RxQueue {
    port: Arc<Port>,
    queue: u16,
}

/// A port's tx queues (its data queue, PFC's own where it has one, or a load generator's
/// several), held by the one thread that transmits on the port. It moves, as `RxQueue`:
///
/// ```
/// fn to_the_owner(tx: raceway::dpdk::PortTx) -> impl Send {
///     tx
/// }
/// ```
///
/// but cannot be copied:
///
/// ```compile_fail
/// fn copies<T: Clone>() {}
/// copies::<raceway::dpdk::PortTx>();
/// ```
pub struct PortTx {
    port: Arc<Port>,
}

/// What a frame carries besides its IP packet: Ethernet header and two VLAN tags (QinQ).
pub const LINK_HEADERS: usize = 14 + 2 * 4;

/// Drivers that unmap a port's memory on the interrupt thread while lcores may be inside a
/// burst on it (net_memif, when its peer goes away): their bursts are guarded so the unmap
/// waits for them (`ffi/src/burst_guard.c`, with dpdk-sys's `burst-guard` feature). Without it a switch could
/// die of SIGSEGV when a memif peer went away (`tests/dpdk/live/memif.rs`,
/// `switch_survives_memif_peers_vanishing_mid_traffic`, failed 5 runs of 5 without it).
const DRIVERS_UNMAPPING_UNDER_BURSTS: &[&str] = &["net_memif"];

/// Virtual devices that send chained mbufs without offering `RTE_ETH_TX_OFFLOAD_MULTI_SEGS`
/// (DPDK 22.11): see `Port::sends_chains`.
const DRIVERS_SENDING_CHAINS_UNOFFERED: &[&str] = &["net_pcap", "net_null", "net_ring"];

/// Descriptors asked for per queue (the driver may adjust them).
pub const RX_DESCRIPTORS: u16 = 1024;
pub const TX_DESCRIPTORS: u16 = 1024;

impl Port {
    /// Finds the ethdev whose name is `device_name` (the devargs before the first comma).
    pub fn find(device_name: &str) -> Result<u16, DpdkError> {
        let c_name = CString::new(device_name)
            .map_err(|_| DpdkError { context: device_name.into(), problem: "NUL in name".into() })?;
        let mut id = 0u16;
        // SAFETY: c_name and &mut id are valid for the call.
        let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
        check(rc, || format!("device '{device_name}'")).map(|_| id)
    }

    /// Creates the device `devargs` describes after the EAL's start (hot-plug): a virtual
    /// device, or a PCI device the EAL was told to leave alone (`-b`). A take-over opens its
    /// ports this way once the switch before it has closed them.
    pub fn probe(devargs: &str) -> Result<(), DpdkError> {
        let c_args = CString::new(devargs)
            .map_err(|_| DpdkError { context: devargs.into(), problem: "NUL in device arguments".into() })?;
        // SAFETY: c_args is a valid C string for the call; the EAL copies what it keeps.
        let rc = unsafe { sys::rte_dev_probe(c_args.as_ptr()) };
        check(rc, || format!("device '{devargs}': probe")).map(|_| ())
    }

    /// Whether the device sends a frame chained over several mbufs (it offers
    /// `RTE_ETH_TX_OFFLOAD_MULTI_SEGS`): then a frame longer than one mbuf crosses the switch
    /// as the chain it arrived in, with no copy.
    ///
    /// Some virtual devices take chains without offering the flag: net_pcap reads a chain
    /// into its file whole, net_null and net_ring hand it on or free it whole
    /// (`tests/dpdk/live/pcap.rs` forwards jumbo frames through net_pcap byte for byte).
    pub fn sends_chains(id: u16) -> Result<bool, DpdkError> {
        // SAFETY: a device-info query on a port id; no pointer crosses.
        let rc = unsafe { sys::shim_eth_tx_multi_seg(id) };
        let offered = check(rc, || format!("ethdev {id}: device info"))? == 1;
        Ok(offered || DRIVERS_SENDING_CHAINS_UNOFFERED.contains(&Self::driver(id)?.as_str()))
    }

    /// The name of the device's driver (`net_pcap`, `net_memif`, ...).
    fn driver(id: u16) -> Result<String, DpdkError> {
        let (mut max_rx, mut max_tx, mut rss, mut max_mtu, mut scatter) = (0u16, 0u16, 0u64, 0u16, 0);
        let mut driver: *const c_char = std::ptr::null();
        check(
            // SAFETY: the out-pointers are valid; the driver name is a static string of the PMD.
            unsafe {
                sys::shim_eth_dev_info(id, &mut max_rx, &mut max_tx, &mut rss, &mut driver, &mut max_mtu, &mut scatter)
            },
            || format!("ethdev {id}: device info"),
        )?;
        if driver.is_null() {
            return Ok(String::new());
        }
        // SAFETY: non-null, NUL-terminated, owned by the PMD for the process lifetime.
        Ok(unsafe { CStr::from_ptr(driver) }.to_string_lossy().into_owned())
    }

    /// Brings the port up: info, configure (with RSS when more than one rx queue is opened and
    /// the device hashes; the MTU), descriptors, queues on the port's socket, start,
    /// promiscuous mode (where supported), link up (bounded wait). Opens up to `rx_queues` rx
    /// queues. `mtu` is the switch's (IP) MTU: the port takes it, or the largest the device
    /// does (a warning says so), and receives frames longer than an mbuf as chains where the
    /// device can; 0 leaves the driver's default.
    ///
    /// `TxQueues::WithPfcQueue` opens a second tx queue for PFC frames (`tx_control_burst`), so
    /// that they wait on the wire behind the frame in progress only; a device with one tx
    /// queue is then an error, since the headroom was planned for the second. A device
    /// offering fewer than `TxQueues::Data` asks for is an error too.
    pub fn start(
        id: u16,
        name: &str,
        pool: &Arc<Mempool>,
        rx_queues: u16,
        mtu: u32,
        tx: TxQueues,
    ) -> Result<Self, DpdkError> {
        let context = |step: &str| format!("port '{name}' (ethdev {id}): {step}");
        let mut max_rx = 0u16;
        let mut max_tx = 0u16;
        let mut rss_offloads = 0u64;
        let mut driver: *const c_char = std::ptr::null();
        let mut max_mtu = 0u16;
        let mut can_scatter = 0;
        check(
            // SAFETY: the out-pointers are valid; the driver name is a static string of the PMD.
            unsafe {
                sys::shim_eth_dev_info(
                    id,
                    &mut max_rx,
                    &mut max_tx,
                    &mut rss_offloads,
                    &mut driver,
                    &mut max_mtu,
                    &mut can_scatter,
                )
            },
            || context("device info"),
        )?;
        let driver = if driver.is_null() {
            String::new()
        } else {
            // SAFETY: non-null, NUL-terminated, owned by the PMD for the process lifetime.
            unsafe { CStr::from_ptr(driver) }.to_string_lossy().into_owned()
        };
        if max_rx == 0 || max_tx == 0 {
            return Err(DpdkError {
                context: context("queues"),
                problem: format!("driver {driver} offers {max_rx} rx / {max_tx} tx queues"),
            });
        }
        let tx_queues: u16 = match tx {
            TxQueues::One => 1,
            TxQueues::WithPfcQueue => 2,
            TxQueues::Data(queues) => queues.max(1),
        };
        if let TxQueues::Data(queues) = tx {
            if queues > max_tx {
                return Err(DpdkError {
                    context: context("tx queues"),
                    problem: format!("driver {driver} offers {max_tx} tx queues, not {queues}"),
                });
            }
        }
        if tx_queues > max_tx {
            return Err(DpdkError {
                context: context("pfc_tx_queue"),
                problem: format!(
                    "driver {driver} offers {max_tx} tx queue, none for PFC frames: set pfc_tx_queue = false \
                     (the auto headroom then counts the data PFC waits behind)"
                ),
            });
        }
        if DRIVERS_UNMAPPING_UNDER_BURSTS.contains(&driver.as_str()) {
            // SAFETY: a flag write for a valid port id, before the port starts and any burst.
            if unsafe { sys::shim_guard_bursts(id) } == 0 {
                tracing::warn!(
                    "{}: driver {driver} unmaps memory under running bursts, and this build has no burst \
                     guard (dpdk-sys without `burst-guard`): the switch may fault when the peer goes away",
                    context("bursts")
                );
            }
        }
        let rx_queues = rx_queues.clamp(1, max_rx);
        // SAFETY: a plain constant getter.
        let rss_hf = rss_offloads & unsafe { sys::shim_rss_ip_udp_tcp() };
        let rss = rx_queues > 1 && rss_hf != 0;
        let port_mtu = mtu.min(u32::from(max_mtu));
        if port_mtu < mtu {
            tracing::warn!(
                "{}: the device takes an MTU of at most {port_mtu} bytes; switch.mtu is {mtu}",
                context("mtu")
            );
        }
        // Frames longer than an mbuf's room arrive as chains where the device scatters (the
        // engine carries them, or copies them into one jumbo mbuf where a port cannot send
        // chains); elsewhere the driver decides.
        let scatter = can_scatter != 0 && port_mtu as usize + LINK_HEADERS > pool.frame_room();
        let rss_hf = if rss { rss_hf } else { 0 };
        let scatter = c_int::from(scatter);
        // Asked for only where offered: configure refuses an offload the device lacks.
        // SAFETY: a device-info query on a port id; no pointer crosses.
        let tx_chains = c_int::from(unsafe { sys::shim_eth_tx_multi_seg(id) } == 1);
        // SAFETY: plain calls on a valid port id; configuration is built in C with defaults.
        let configured =
            unsafe { sys::shim_eth_dev_configure(id, rx_queues, tx_queues, rss_hf, port_mtu, scatter, tx_chains) };
        check(configured, || context("configure"))?;
        let mut rx_desc = RX_DESCRIPTORS;
        let mut tx_desc = TX_DESCRIPTORS;
        // SAFETY: the out-pointers are valid.
        check(unsafe { sys::shim_eth_adjust_desc(id, &mut rx_desc, &mut tx_desc) }, || context("descriptors"))?;
        // SAFETY: plain getter on a valid port id.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) }.max(0) as c_uint;
        for queue in 0..rx_queues {
            // SAFETY: the pool outlives the port (teardown order); defaults for the queue conf.
            check(unsafe { sys::shim_eth_rx_queue_setup(id, queue, rx_desc, socket, pool.as_ptr()) }, || {
                context(&format!("rx queue {queue}"))
            })
            .map_err(|mut err| {
                // Drivers that preload frames (net_pcap with infinite_rx=1) refuse frames longer
                // than one mbuf, which they would have to chain.
                err.problem.push_str(&format!(
                    " (frames over {} bytes need chained mbufs, which some drivers refuse, e.g. net_pcap with \
                     infinite_rx=1)",
                    pool.frame_room()
                ));
                err
            })?;
        }
        for queue in 0..tx_queues {
            // SAFETY: as above.
            check(unsafe { sys::shim_eth_tx_queue_setup(id, queue, tx_desc, socket) }, || {
                context(&format!("tx queue {queue}"))
            })?;
        }
        // SAFETY: the port is configured with its queues.
        check(unsafe { sys::rte_eth_dev_start(id) }, || context("start"))?;
        // Not every PMD supports promiscuous mode (-ENOTSUP); a leaf switch routes frames
        // addressed to it either way, so only log it.
        // SAFETY: plain call on a started port.
        let rc = unsafe { sys::rte_eth_promiscuous_enable(id) };
        if rc < 0 {
            tracing::debug!("{}: {}", context("promiscuous mode"), strerror(rc));
        }
        let port = Self {
            id,
            name: name.to_string(),
            driver,
            rx_queues,
            tx_queues,
            rss,
            max_rx_queues: max_rx,
            mtu: port_mtu,
            rx_claimed: (0..rx_queues).map(|_| AtomicBool::new(false)).collect(),
            tx_claimed: AtomicBool::new(false),
            _pool: Arc::clone(pool),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while !port.link_up() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if !port.link_up() {
            tracing::warn!("{}: link is down after 3 s; continuing", context("link"));
        }
        Ok(port)
    }

    /// Takes the device's link down or up (an operator's shutdown). `Ok(false)` when the
    /// driver cannot (net_af_packet, net_ring, ...): the switch then only stops using the port.
    pub fn set_link(&self, up: bool) -> Result<bool, DpdkError> {
        // SAFETY: plain calls on a started port; control-path functions the link watcher
        // alone calls.
        let rc = unsafe {
            if up {
                sys::rte_eth_dev_set_link_up(self.id)
            } else {
                sys::rte_eth_dev_set_link_down(self.id)
            }
        };
        match rc {
            0 => Ok(true),
            rc if rc == -libc::ENOTSUP => Ok(false),
            rc => Err(DpdkError {
                context: format!("port '{}': link {}", self.name, if up { "up" } else { "down" }),
                problem: strerror(rc),
            }),
        }
    }

    /// Stops the device once no queue handle is out (the workers are done): a NIC's link
    /// goes down, a memif peer is disconnected, so that a host stops sending into rings
    /// nobody reads while the rest of the shutdown runs. Returns whether it stopped; dropping
    /// the port closes it as ever.
    pub fn stop_when_idle(&self) -> bool {
        let idle = !self.tx_claimed.load(Ordering::Acquire)
            && self.rx_claimed.iter().all(|claim| !claim.load(Ordering::Acquire));
        if idle {
            // SAFETY: no handle to a queue is out (checked above), so no burst runs on the
            // port; stopping a stopped port is a no-op.
            unsafe { sys::rte_eth_dev_stop(self.id) };
        }
        idle
    }

    pub fn link_up(&self) -> bool {
        let mut up = 0;
        let mut speed = 0;
        // SAFETY: the out-pointers are valid for the call.
        let rc = unsafe { sys::shim_eth_link(self.id, &mut up, &mut speed) };
        rc == 0 && up != 0
    }

    /// The handle of rx queue `queue`, for the thread that will poll it; `None` when the port
    /// has no such queue or another handle to it is alive.
    pub fn rx_queue(self: &Arc<Self>, queue: u16) -> Option<RxQueue> {
        let claim = self.rx_claimed.get(usize::from(queue))?;
        (!claim.swap(true, Ordering::AcqRel)).then(|| RxQueue { port: Arc::clone(self), queue })
    }

    /// The handle of the port's tx queues, for the thread that will transmit on it; `None`
    /// while another handle is alive.
    pub fn transmitter(self: &Arc<Self>) -> Option<PortTx> {
        (!self.tx_claimed.swap(true, Ordering::AcqRel)).then(|| PortTx { port: Arc::clone(self) })
    }

    /// Device counters: (rx packets, tx packets, rx missed + errors, rx without mbuf).
    pub fn hw_stats(&self) -> (u64, u64, u64, u64) {
        let mut stats = sys::rte_eth_stats::default();
        // SAFETY: the out-pointer is valid for the call.
        let rc = unsafe { sys::rte_eth_stats_get(self.id, &mut stats) };
        if rc != 0 {
            return (0, 0, 0, 0);
        }
        (stats.ipackets, stats.opackets, stats.imissed + stats.ierrors, stats.rx_nombuf)
    }
}

impl RxQueue {
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Receives up to `BURST - burst.len()` frames into `burst`.
    #[inline]
    pub fn burst(&mut self, burst: &mut Burst) -> usize {
        self.burst_upto(burst, BURST)
    }

    /// `burst` of at most `most` frames.
    #[inline]
    pub fn burst_upto(&mut self, burst: &mut Burst, most: usize) -> usize {
        let room = (BURST - burst.len).min(most) as u16;
        // SAFETY: the slots from `len` on are writable; rx fills at most `room` of them with
        // mbufs that the burst then owns; the queue was set up in `start`, and this handle is
        // its only poller (claimed once, `&mut self`).
        let received =
            unsafe { sys::shim_eth_rx_burst(self.port.id, self.queue, burst.mbufs.as_mut_ptr().add(burst.len), room) };
        burst.len += usize::from(received);
        usize::from(received)
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        self.port.rx_claimed[usize::from(self.queue)].store(false, Ordering::Release);
    }
}

impl PortTx {
    /// Sends as much of `burst` as the data tx queue takes; the rest stays in the burst, in
    /// order.
    #[inline]
    pub fn burst(&mut self, burst: &mut Burst) -> usize {
        self.burst_on(0, burst)
    }

    /// `burst` for PFC frames: on their own tx queue where the port has one, so the NIC sends
    /// them after the frame in progress rather than after the data queued before them.
    #[inline]
    pub fn control_burst(&mut self, burst: &mut Burst) -> usize {
        self.burst_on(self.port.tx_queues - 1, burst)
    }

    /// Stops and starts the port again, as a NIC retrains a link that went down: a net_memif
    /// client connects to its server anew (the driver tries only when started, so a server
    /// that restarted, or was not listening yet, is otherwise never reached again). Frames in
    /// the device's rings are dropped. When the start fails (no server listening: "Operation
    /// not permitted"), the port is left stopped: it must not be polled until a later restart
    /// succeeds. Holding this, the port's only transmitter, and `rx`,
    /// the handle of its only rx queue, proves no burst runs on the port meanwhile; a port
    /// with more rx queues, or another port's queue, is refused.
    pub fn restart_port(&mut self, rx: &mut RxQueue) -> Result<(), DpdkError> {
        let port = &self.port;
        let fail =
            |problem: &str| DpdkError { context: format!("port '{}': restart", port.name), problem: problem.into() };
        if !Arc::ptr_eq(port, &rx.port) || port.rx_queues != 1 {
            return Err(fail("needs the port's only rx queue and its transmitter"));
        }
        // SAFETY: the port is started and no burst runs on it: the caller holds its only
        // transmitter and its only rx queue, mutably (checked above).
        let rc = unsafe {
            sys::rte_eth_dev_stop(port.id);
            sys::rte_eth_dev_start(port.id)
        };
        if rc != 0 {
            return Err(fail(&strerror(rc)));
        }
        Ok(())
    }

    /// `burst` on tx queue `queue`; a queue the port did not open is an error of the caller's
    /// (`TxQueues::Data` says how many there are), and sends nothing.
    #[inline]
    pub fn burst_on(&mut self, queue: u16, burst: &mut Burst) -> usize {
        if burst.len == 0 || queue >= self.port.tx_queues {
            debug_assert!(queue < self.port.tx_queues, "tx queue {queue} of {}", self.port.tx_queues);
            return 0;
        }
        // SAFETY: the first `len` slots are owned mbufs; the PMD takes ownership of the first
        // `sent` of them; the queue was set up in `start`, and this handle is the port's only
        // transmitter (claimed once, `&mut self`).
        let sent = usize::from(unsafe {
            sys::shim_eth_tx_burst(self.port.id, queue, burst.mbufs.as_mut_ptr(), burst.len as u16)
        });
        burst.mbufs.copy_within(sent..burst.len, 0);
        burst.len -= sent;
        sent
    }
}

impl Drop for PortTx {
    fn drop(&mut self) {
        self.port.tx_claimed.store(false, Ordering::Release);
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // Stop, then close: closing flushes capture-backed vdevs (net_pcap writes its file)
        // and releases the mbufs the driver held.
        // SAFETY: nothing uses the port any more: every queue handle holds the port, so none
        // is left.
        unsafe {
            sys::rte_eth_dev_stop(self.id);
            sys::rte_eth_dev_close(self.id);
        }
    }
}
