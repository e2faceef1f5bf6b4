//! The operating system below std (ioctl, setns, sched_setscheduler): a thread entering the
//! switch's network namespace; TAP interfaces, one per port, through which punted frames reach
//! the kernel and the kernel's frames come back; the seqpacket socket `raceway show` speaks
//! on; the event fd that wakes the control thread; real-time scheduling.
//!
//! With `dpdk`, the only module of this crate allowed `unsafe`. Invariant: a `Tap` owns its
//! queue's file descriptor; the interface goes when its last queue closes (the switch's and
//! the keeper's, `control::keep`).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A `struct ifreq` (libc's, with the kernel's layout and size) naming interface `name`, its
/// union zeroed; an error for a name Linux cannot have (empty, or 16 bytes and more with the
/// NUL, `IFNAMSIZ`).
fn interface_request(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("'{name}' is not 1-15 bytes")));
    }
    // SAFETY: `ifreq` is plain C data (a name and a union of integers, socket addresses and a
    // pointer), for which all zero bytes is a valid value (a null pointer among them).
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, &byte) in request.ifr_name.iter_mut().zip(name.as_bytes()) {
        *slot = byte as libc::c_char;
    }
    Ok(request)
}

/// Moves the calling thread into the network namespace `/run/netns/<name>` (as `ip netns`
/// names them). Only this thread changes namespace; sockets and TAPs it opens afterwards live
/// in the namespace.
pub fn enter_netns(name: &str) -> io::Result<()> {
    enter_netns_of(&File::open(format!("/run/netns/{name}"))?)
}

/// The calling thread's network namespace, to come back to (`enter_netns_of`).
pub fn current_netns() -> io::Result<File> {
    File::open("/proc/thread-self/ns/net")
}

/// Moves the calling thread into the network namespace `file` refers to.
pub fn enter_netns_of(file: &File) -> io::Result<()> {
    // SAFETY: setns takes a namespace file descriptor that stays open for the call (owned by
    // `file`) and a namespace type constant; it touches no memory of ours.
    let result = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A TAP interface: Ethernet frames in and out, without the packet-information header.
pub struct Tap {
    file: File,
    pub name: String,
}

impl Tap {
    /// Attaches a queue to the multi-queue TAP `name` in the calling thread's namespace,
    /// creating it without carrier when there is none; non-blocking. The kernel sends each
    /// frame to one enabled queue; the interface lives while any queue, enabled or not, is
    /// open (`disable`), so another process's queue can keep it, and its carrier, across the
    /// switch's restart.
    pub fn attach(name: &str) -> io::Result<Self> {
        let mut request = interface_request(name)?;
        request.ifr_ifru.ifru_flags =
            (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_MULTI_QUEUE | libc::IFF_NO_CARRIER) as libc::c_short;
        let path = CString::new("/dev/net/tun").expect("no NUL");
        // SAFETY: `path` is a valid NUL-terminated string for the call; the returned
        // descriptor, if any, is ours alone and is wrapped in an OwnedFd at once.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened, is valid, and nothing else owns it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: TUNSETIFF reads (and writes back the name into) an ifreq; `request` is libc's
        // and lives across the call.
        let result = unsafe { libc::ioctl(owned.as_raw_fd(), libc::TUNSETIFF, &mut request as *mut libc::ifreq) };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { file: File::from(owned), name: name.to_string() })
    }

    /// Takes this queue out of the kernel's choice: no frame is sent to it, but it still holds
    /// the interface (and, while no queue is enabled, its carrier as it was).
    pub fn disable(&self) -> io::Result<()> {
        // SAFETY: `ifreq` is plain C data for which all zero bytes is a valid value.
        let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
        request.ifr_ifru.ifru_flags = libc::IFF_DETACH_QUEUE as libc::c_short;
        // SAFETY: TUNSETQUEUE reads one ifreq through the pointer, which is libc's and valid
        // for the call; the descriptor is our open TAP queue.
        let result = unsafe { libc::ioctl(self.file.as_raw_fd(), libc::TUNSETQUEUE, &mut request as *mut libc::ifreq) };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sets the interface's carrier (link up or down, as `ip link` shows it).
    pub fn set_carrier(&self, up: bool) -> io::Result<()> {
        let value: libc::c_int = i32::from(up);
        // SAFETY: TUNSETCARRIER reads one int through the pointer, which points at `value`
        // for the duration of the call; the descriptor is our open TAP.
        let result = unsafe { libc::ioctl(self.file.as_raw_fd(), libc::TUNSETCARRIER, &value as *const libc::c_int) };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads one frame the kernel sent; `WouldBlock` when there is none.
    pub fn read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        (&self.file).read(buffer)
    }

    /// Hands one frame to the kernel, as if it arrived on the interface.
    pub fn write(&self, frame: &[u8]) -> io::Result<usize> {
        (&self.file).write(frame)
    }

    /// The descriptor, for poll(2).
    pub fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }
}

/// The kernel's index of interface `name` in the calling thread's namespace.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let name = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))?;
    // SAFETY: `name` is a valid NUL-terminated string for the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}

/// Runs one SIOCGIF*/SIOCSIF* ioctl on interface `name` (in the calling thread's namespace),
/// with what `fill` puts in the request's union; returns the request as the kernel left it.
fn interface_ioctl(
    name: &str,
    request: libc::c_ulong,
    fill: impl FnOnce(&mut libc::__c_anonymous_ifr_ifru),
) -> io::Result<libc::ifreq> {
    let mut request_block = interface_request(name)?;
    fill(&mut request_block.ifr_ifru);
    // SAFETY: socket takes constants and returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the interface ioctls read and write one `struct ifreq` through the pointer,
    // which is libc's and valid for the call; `socket` is open.
    let result = unsafe { libc::ioctl(socket.as_raw_fd(), request, &mut request_block as *mut libc::ifreq) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(request_block)
}

/// Whether interface `name` is operationally up (IFF_RUNNING: up, with carrier).
pub fn interface_running(name: &str) -> io::Result<bool> {
    let answer = interface_ioctl(name, libc::SIOCGIFFLAGS, |_| {})?;
    // SAFETY: SIOCGIFFLAGS answers in the union's `ifr_flags`, and any bits are a valid short.
    let flags = unsafe { answer.ifr_ifru.ifru_flags };
    Ok(libc::c_int::from(flags) & libc::IFF_RUNNING != 0)
}

/// Interface `name`'s MAC address.
pub fn interface_mac(name: &str) -> io::Result<[u8; 6]> {
    let answer = interface_ioctl(name, libc::SIOCGIFHWADDR, |_| {})?;
    // SAFETY: SIOCGIFHWADDR answers in the union's `ifr_hwaddr`, a sockaddr of plain bytes.
    let address = unsafe { answer.ifr_ifru.ifru_hwaddr };
    Ok(std::array::from_fn(|index| address.sa_data[index] as u8))
}

/// Sets interface `name`'s MTU.
pub fn set_interface_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let mtu = libc::c_int::try_from(mtu).unwrap_or(libc::c_int::MAX);
    interface_ioctl(name, libc::SIOCSIFMTU, |union| union.ifru_mtu = mtu).map(|_| ())
}

/// A client of a Unix SOCK_SEQPACKET socket (DPDK telemetry's): one message per send and recv.
pub struct SeqPacket {
    fd: OwnedFd,
}

impl SeqPacket {
    /// Connects to the socket at `path`; replies wait at most `timeout`.
    pub fn connect(path: &std::path::Path, timeout: std::time::Duration) -> io::Result<Self> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
        let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        if bytes.len() >= address.sun_path.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "socket path too long"));
        }
        address.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (slot, &byte) in address.sun_path.iter_mut().zip(bytes) {
            *slot = byte as libc::c_char;
        }
        // SAFETY: socket takes constants and returns a new descriptor or -1.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let socket = Self { fd: unsafe { OwnedFd::from_raw_fd(fd) } };
        let wait = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: libc::suseconds_t::from(timeout.subsec_micros() as i32),
        };
        // SAFETY: setsockopt reads one timeval through the pointer, valid for the call.
        unsafe {
            libc::setsockopt(
                socket.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &wait as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        // SAFETY: `address` is a filled sockaddr_un of the size passed.
        let result = unsafe {
            libc::connect(
                socket.fd.as_raw_fd(),
                &address as *const libc::sockaddr_un as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(socket)
    }

    /// Sends one message.
    pub fn send(&self, message: &[u8]) -> io::Result<()> {
        // SAFETY: send reads `message.len()` bytes from the slice, valid for the call.
        let sent =
            unsafe { libc::send(self.fd.as_raw_fd(), message.as_ptr() as *const libc::c_void, message.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one message into `buffer`; its length (0: the peer closed).
    pub fn recv(&self, buffer: &mut [u8]) -> io::Result<usize> {
        // SAFETY: recv writes at most `buffer.len()` bytes into the slice, valid for the call.
        let received =
            unsafe { libc::recv(self.fd.as_raw_fd(), buffer.as_mut_ptr() as *mut libc::c_void, buffer.len(), 0) };
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(received as usize)
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns whether any is.
pub fn wait_readable(fds: &[i32], timeout_ms: i32) -> io::Result<bool> {
    Ok(which_readable(fds, timeout_ms)?.contains(&true))
}

/// Waits until one of `fds` is readable (or closed by its peer) or `timeout_ms` passes
/// (negative: no limit); returns which are.
pub fn which_readable(fds: &[i32], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut polled: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `polled` is a valid array of `polled.len()` pollfd structs for the call.
    let result = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout_ms) };
    if result < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted { Ok(vec![false; fds.len()]) } else { Err(err) };
    }
    Ok(polled.iter().map(|entry| entry.revents != 0).collect())
}

/// Makes `signals` do nothing to this process (their default would end it).
pub fn ignore_signals(signals: &[i32]) {
    for &signal in signals {
        // SAFETY: SIG_IGN installs no handler; signal takes two integers.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
}

/// Tells the service manager `state` (systemd's sd_notify: `READY=1`, `MAINPID=N`) when it
/// gave this process a socket for it (`$NOTIFY_SOCKET`, a path or an abstract name after
/// `@`); true when sent, false when there is none.
pub fn notify_service_manager(state: &str) -> io::Result<bool> {
    use std::os::linux::net::SocketAddrExt;
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else { return Ok(false) };
    let socket = socket.to_string_lossy().into_owned();
    let address = match socket.strip_prefix('@') {
        Some(name) => std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?,
        None => std::os::unix::net::SocketAddr::from_pathname(&socket)?,
    };
    let sender = std::os::unix::net::UnixDatagram::unbound()?;
    sender.send_to_addr(state.as_bytes(), &address)?;
    Ok(true)
}

/// An exclusive lock (flock) on `path`, created if missing: held while the returned file is
/// open, and let go by the kernel however the process ends. `wait`: block until it is free;
/// otherwise `None` when another holds it.
pub fn lock_file(path: &std::path::Path, wait: bool) -> io::Result<Option<File>> {
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
    let operation = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
    loop {
        // SAFETY: flock takes a descriptor this function owns and a constant.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(Some(file));
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(err),
        }
    }
}

/// Closes every descriptor above standard error: those a process was started with beyond the
/// three standard ones are its parent's, not its own.
pub fn close_inherited_descriptors() {
    // SAFETY: close_range takes three integers and closes descriptors of this process only;
    // at a process's start nothing of ours holds one above 2.
    unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
}

/// Makes the calling process the leader of a session of its own, out of its parent's process
/// group and terminal: a terminal's Ctrl-C or hang-up, or a signal to the switch's group, no
/// longer reaches it.
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid takes nothing and changes only the process's session and group.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets a socket's receive buffer to `bytes` past the `net.core.rmem_max` limit
/// (SO_RCVBUFFORCE, which needs CAP_NET_ADMIN); the caller falls back to SO_RCVBUF without it.
pub fn force_receive_buffer(fd: i32, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads one int through the pointer, which points at `value` for the
    // call; `fd` is the caller's open socket.
    let result = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A counter the workers bump to wake a sleeping control thread (eventfd): one write when a
/// punted frame finds the control thread asleep, never per frame.
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes an initial value and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created, is valid, and nothing else owns it.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Makes the descriptor readable (a waiting `wait_readable` returns).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: write reads 8 bytes from `one`, which lives for the call. A full counter
        // (EAGAIN) already wakes the reader, so the result does not matter.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Resets the counter after a wake-up.
    pub fn clear(&self) {
        let mut value: u64 = 0;
        // SAFETY: read writes at most 8 bytes into `value`, which lives for the call; a
        // counter at zero returns EAGAIN, which is fine.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), &mut value as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// Puts the calling thread in the real-time FIFO class at `priority` (1-99): it runs as soon
/// as it is runnable, ahead of every ordinary thread on its CPU, until it sleeps again. For a
/// thread whose work is bounded by what reaches it (the kernel's RT throttling still keeps 5%
/// of each second for the others).
pub fn set_thread_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: pthread_self names the calling thread; `param` is a valid sched_param for the
    // call's duration.
    let result = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if result != 0 {
        return Err(io::Error::from_raw_os_error(result));
    }
    Ok(())
}

/// Gives the C allocator's free memory back to the kernel (glibc's `malloc_trim`: the free
/// top of every arena, and free pages inside them): after a million routes go, their
/// thousands of small freed blocks would otherwise stay resident. Takes milliseconds on a
/// large heap; for the control plane's housekeeping, never the packet path.
pub fn release_free_memory() {
    // SAFETY: malloc_trim takes a byte count and touches only the allocator's own state,
    // which it locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Sets the calling thread's nice value (Linux threads each have their own), so that a
/// latency-bound thread gets a shared CPU ahead of bulk work.
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid takes nothing and returns the calling thread's id.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // SAFETY: setpriority reads its three integer arguments only.
    let result = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interface_request_names_what_linux_can_name() {
        let request = interface_request("leaf0-up1").unwrap();
        let name: Vec<u8> = request.ifr_name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        assert_eq!(name, b"leaf0-up1");
        assert_eq!(interface_request("a-fifteen-bytes").unwrap().ifr_name[15], 0, "the NUL fits");
        for bad in ["", "sixteen-bytes-xx", "nul\0here"] {
            assert_eq!(interface_request(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert_eq!(std::mem::size_of::<libc::ifreq>(), 40, "the kernel's struct ifreq on 64-bit Linux");
    }
}
