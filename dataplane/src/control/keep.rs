//! The keeper: a small process (`raceway keep`, started by the switch) that holds the control
//! namespace and one disabled queue of every host interface (multi-queue TAPs), so that they
//! outlive the switch. A restart, or a crash, then finds the interfaces as they were: their
//! addresses, routes and neighbours in the kernel, their carrier, and the BGP and BFD sessions
//! FRR runs on them. The kernel sends frames to enabled queues only, so the keeper never reads
//! one; while no switch is attached, what the kernel sends out of an interface is dropped, as a
//! dead link would.
//!
//! The switch connects to the keeper's socket (`/run/raceway/keep-<netns>.sock`) and stays
//! connected while it runs. When the connection closes (the switch exited, however), the keeper
//! waits `[control] keep_interfaces_s` for the next switch, then lets everything go: the
//! interfaces vanish with their last queue, and a namespace the keeper created is removed.
//! `raceway clean`, `raceway run --clean`, and a switch stopping with `keep_interfaces_s = 0`
//! release them at once.
//!
//! Protocol, one line each way: the client sends `attach <pid> <keep-ms>` or `release`; to an
//! attach the keeper answers `kept <port,port,...>`, or `busy <pid>` while another switch is
//! attached (to a release too). An attached switch that hands over to another
//! (`raceway run --take-over`) says `hand-over` before it goes: the keeper then waits for the
//! next attach at least `FIRST_ATTACH_WITHIN`, even with a keep time of zero. A release ends with the keeper's exit: the client reads to the
//! end of the stream, which comes once the interfaces and the namespace are gone.
//!
//! A keeper holds its namespace only while `/run/netns/<netns>` names it. An operator's `ip
//! netns del` (or a namespace made anew under the name) makes it let go within a second, or at
//! the next attach, which it answers `gone`: the switch then starts afresh rather than take
//! interfaces in a namespace it can no longer enter. A keeper that lets go of a namespace it
//! created removes it only when no other process runs in it: FRR's daemons in a namespace
//! whose switch crashed keep their namespace, and the next switch finds them there. The
//! keeper says what it does in `/run/raceway/keep-<netns>.log` (its standard error).
//!
//! Invariant: at most one switch is attached to a keeper, and a keeper holds the interfaces of
//! exactly the ports it was started with; a switch whose ports differ releases it and starts a
//! new one.

use crate::control::ip;
use crate::linux::{self, Tap};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where keepers listen.
const KEEP_DIR: &str = "/run/raceway";
/// How long a keeper waits for the switch that started it to attach.
const FIRST_ATTACH_WITHIN: Duration = Duration::from_secs(10);
/// How long either side waits for the other's line.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// How often a keeper looks whether its namespace is still named.
const NAMESPACE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// The keeper's socket for namespace `netns`.
pub fn socket_path(netns: &str) -> PathBuf {
    PathBuf::from(format!("{KEEP_DIR}/keep-{netns}.sock"))
}

/// Where the keeper of `netns` writes what it does (its standard error).
pub fn log_path(netns: &str) -> PathBuf {
    PathBuf::from(format!("{KEEP_DIR}/keep-{netns}.log"))
}

/// A switch's hold on its keeper: the interfaces stay while this lives, and `keep_for` after.
pub struct Kept {
    stream: UnixStream,
    /// The interfaces were there from a switch before (a restart): their carrier, addresses and
    /// MAC are as that one left them.
    pub took_over: bool,
}

/// What a keeper said to an attach.
enum Answer {
    Kept(Vec<String>),
    Busy(String),
    /// Its namespace is no longer named: it lets go.
    Gone,
}

impl Kept {
    /// Attaches to the keeper of `netns`, taking over the interfaces it holds when they are
    /// `ports`; otherwise (none, or other ports) starts a new keeper, which creates the
    /// namespace when missing and the interfaces. Fails when another switch is attached.
    pub fn attach(netns: &str, ports: &[String], keep_for: Duration) -> Result<Self, String> {
        if let Some(mut stream) = connect(netns)? {
            match ask_attach(&mut stream, netns, keep_for)? {
                Answer::Busy(pid) => return Err(busy(netns, &pid)),
                Answer::Kept(names) if names == ports => return Ok(Self { stream, took_over: true }),
                Answer::Kept(names) => {
                    tracing::info!(
                        "control: the interfaces kept in {netns} are for ports {}; released for new ones",
                        names.join(", ")
                    );
                    release_attached(stream);
                }
                Answer::Gone => {
                    tracing::warn!(
                        "control: the keeper of {netns} held a namespace that is no longer named {netns} \
                         (deleted, or made anew); it let go, and this switch starts afresh"
                    );
                    // Its stream ends once its socket is gone, before the new keeper's.
                    let _ = io::copy(&mut stream, &mut io::sink());
                }
            }
        }
        spawn_keeper(netns, ports)?;
        let mut stream = connect(netns)?.ok_or_else(|| format!("control: the keeper of {netns} does not answer"))?;
        match ask_attach(&mut stream, netns, keep_for)? {
            Answer::Kept(names) if names == ports => Ok(Self { stream, took_over: false }),
            Answer::Kept(names) => Err(format!("control: the new keeper of {netns} holds {}", names.join(", "))),
            Answer::Busy(pid) => Err(busy(netns, &pid)),
            Answer::Gone => Err(format!("control: the new keeper of {netns} lost its namespace at once")),
        }
    }

    /// The connection's descriptor: the keeper sends nothing after its answer, so it turns
    /// readable only when the keeper ends (`KeeperWatch`).
    pub fn raw_fd(&self) -> i32 {
        self.stream.as_raw_fd()
    }

    /// A switch taking over follows this one: the keeper waits for it to attach whatever the
    /// keep time (at most `FIRST_ATTACH_WITHIN` beyond it).
    pub fn hand_over(&mut self) {
        if let Err(err) = self.stream.write_all(b"hand-over\n") {
            tracing::warn!("control: cannot tell the keeper a switch takes over: {err}");
        }
    }

    /// Lets the interfaces and a namespace the keeper created go now; returns once they have.
    pub fn release(self) {
        release_attached(self.stream);
    }
}

fn busy(netns: &str, pid: &str) -> String {
    format!("control: another raceway (pid {pid}) runs the host interfaces in {netns}; stop it first")
}

/// Connects to the keeper of `netns`; `None` when there is none (no socket, or nobody on it).
fn connect(netns: &str) -> Result<Option<UnixStream>, String> {
    let path = socket_path(netns);
    match UnixStream::connect(&path) {
        Ok(stream) => {
            stream
                .set_read_timeout(Some(ANSWER_WITHIN))
                .map_err(|err| format!("control: keeper socket {}: {err}", path.display()))?;
            Ok(Some(stream))
        }
        Err(err) if matches!(err.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => Ok(None),
        Err(err) => Err(format!("control: keeper socket {}: {err}", path.display())),
    }
}

fn ask_attach(stream: &mut UnixStream, netns: &str, keep_for: Duration) -> Result<Answer, String> {
    let line = format!("attach {} {}\n", std::process::id(), keep_for.as_millis());
    let answer = exchange(stream, &line).map_err(|err| format!("control: the keeper of {netns}: {err}"))?;
    match answer.split_once(' ') {
        Some(("kept", names)) => Ok(Answer::Kept(names.split(',').map(str::to_string).collect())),
        Some(("busy", pid)) => Ok(Answer::Busy(pid.to_string())),
        None if answer == "gone" => Ok(Answer::Gone),
        _ => Err(format!("control: the keeper of {netns} answered '{answer}'")),
    }
}

/// Sends `line` and reads one line back (without its newline).
fn exchange(stream: &mut UnixStream, line: &str) -> io::Result<String> {
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    BufReader::new(&*stream).read_line(&mut answer)?;
    Ok(answer.trim_end().to_string())
}

/// Asks the keeper this stream is attached to to let go, and waits until it has.
fn release_attached(mut stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(ANSWER_WITHIN));
    if stream.write_all(b"release\n").is_ok() {
        let _ = io::copy(&mut stream, &mut io::sink());
    }
}

/// `raceway clean`, `raceway run --clean`: releases what a keeper holds for `netns`. True when
/// there was one; an error while a switch is attached to it.
pub fn clean(netns: &str) -> Result<bool, String> {
    let Some(mut stream) = connect(netns)? else { return Ok(false) };
    stream.write_all(b"release\n").map_err(|err| format!("control: the keeper of {netns}: {err}"))?;
    // A busy keeper answers; a releasing one says nothing and ends the stream once done.
    let mut answer = Vec::new();
    let _ = io::Read::read_to_end(&mut stream, &mut answer);
    match String::from_utf8_lossy(&answer).trim_end().split_once(' ') {
        Some(("busy", pid)) => Err(busy(netns, pid)),
        _ => Ok(true),
    }
}

/// Starts `raceway keep` for `netns` and `ports`, and waits until it holds them (its first
/// line: `ready`, or what went wrong).
fn spawn_keeper(netns: &str, ports: &[String]) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|err| format!("control: cannot find raceway's binary: {err}"))?;
    std::fs::create_dir_all(KEEP_DIR).map_err(|err| format!("control: cannot create {KEEP_DIR}: {err}"))?;
    let log = log_path(netns);
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|err| format!("control: cannot open the keeper's log {}: {err}", log.display()))?;
    let mut child = Command::new(exe)
        .args(["keep", "--netns", netns, "--ports", &ports.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .map_err(|err| format!("control: cannot start the keeper: {err}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    let read = BufReader::new(stdout).read_line(&mut line);
    match (read, line.trim_end()) {
        (Ok(_), "ready") => Ok(()),
        (Ok(_), said) if !said.is_empty() => {
            let _ = child.wait();
            Err(format!("control: keeper: {said}"))
        }
        (result, _) => {
            let status = child.wait();
            Err(format!("control: the keeper ended before it was ready ({result:?}, {status:?})"))
        }
    }
}

/// The `raceway keep` process: takes `ports`' interfaces in `netns`, says `ready` on standard
/// output, and serves switches until released. Errors before `ready` are printed instead.
pub fn run_keeper(netns: &str, ports: &[String]) -> Result<(), String> {
    // Descriptors the switch left open (its DPDK ports' sockets among them) are not the keeper's.
    linux::close_inherited_descriptors();
    linux::new_session().map_err(|err| format!("cannot start a session: {err}"))?;
    // What a service manager sends the whole unit for the switch (a reload, a take-over, a
    // FIB dump) must not end the keeper.
    linux::ignore_signals(&[libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2]);
    let created = !std::path::Path::new(&format!("/run/netns/{netns}")).exists();
    if created {
        ip(&["netns", "add", netns])?;
    }
    let held = hold(netns, ports);
    let (taps, listener) = match held {
        Ok(held) => held,
        Err(err) => {
            if created {
                let _ = ip(&["netns", "del", netns]);
            }
            return Err(err);
        }
    };
    println!("ready");
    let _ = io::stdout().flush();
    tracing::info!("keeper {netns}: holds {} for the switch", ports.join(", "));
    // Whoever asked for the release is answered by this stream's end, once all is gone.
    let ending = serve(&listener, ports, || namespace_still_named(netns));
    match &ending {
        Ending::Released(_) => tracing::info!("keeper {netns}: released; letting go"),
        Ending::Expired => tracing::info!("keeper {netns}: no switch within the keep time; letting go"),
        Ending::Gone(_) => tracing::warn!(
            "keeper {netns}: /run/netns/{netns} no longer names its namespace (deleted, or made anew); letting go"
        ),
    }
    let still_named = namespace_still_named(netns);
    drop(listener);
    let _ = std::fs::remove_file(socket_path(netns));
    drop(taps);
    if created && still_named {
        let others = others_in_namespace();
        if others.is_empty() {
            match ip(&["netns", "del", netns]) {
                Ok(()) => tracing::info!("keeper {netns}: removed the namespace it created"),
                Err(err) => tracing::warn!("keeper {netns}: {err}"),
            }
        } else {
            tracing::warn!(
                "keeper {netns}: the namespace stays: {} still run in it (the next switch finds them there; \
                 `ip netns del {netns}` once they are stopped)",
                others.join(", ")
            );
        }
    }
    ending.answer();
    Ok(())
}

/// Whether `/run/netns/<netns>` still names the namespace the calling thread is in.
pub fn namespace_still_named(netns: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let named = std::fs::metadata(format!("/run/netns/{netns}"));
    let ours = std::fs::metadata("/proc/thread-self/ns/net");
    matches!((named, ours), (Ok(named), Ok(ours)) if (named.dev(), named.ino()) == (ours.dev(), ours.ino()))
}

/// The other processes in the calling thread's namespace, as "pid N (command)".
fn others_in_namespace() -> Vec<String> {
    let Ok(ours) = std::fs::read_link("/proc/thread-self/ns/net") else { return Vec::new() };
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|byte| byte.is_ascii_digit()) && *pid != me)
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|theirs| theirs == ours))
        .map(|pid| {
            let command = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("pid {pid} ({})", command.trim_end())
        })
        .collect()
}

/// In the namespace: a disabled queue of each port's interface (created when missing), and the
/// socket switches attach on.
fn hold(netns: &str, ports: &[String]) -> Result<(Vec<Tap>, UnixListener), String> {
    linux::enter_netns(netns).map_err(|err| format!("cannot enter {netns}: {err}"))?;
    let mut taps = Vec::with_capacity(ports.len());
    for name in ports {
        let tap = Tap::attach(name).map_err(|err| format!("cannot create TAP '{name}' in {netns}: {err}"))?;
        tap.disable().map_err(|err| format!("cannot disable the keeper's queue of '{name}': {err}"))?;
        taps.push(tap);
    }
    std::fs::create_dir_all(KEEP_DIR).map_err(|err| format!("cannot create {KEEP_DIR}: {err}"))?;
    let path = socket_path(netns);
    // Nobody answered on it (the switch checked), so a file there is a dead keeper's.
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|err| format!("cannot listen on {}: {err}", path.display()))?;
    Ok((taps, listener))
}

/// How a keeper's service ended.
enum Ending {
    /// Released: the stream that asked, answered by its end once all is gone.
    Released(UnixStream),
    /// No switch attached for the keep time.
    Expired,
    /// The namespace is no longer named: the stream of the attach it answered `gone`, if any.
    Gone(Option<UnixStream>),
}

impl Ending {
    /// Answers whoever asked, by closing its stream: once all is gone, and after the socket
    /// went, so that a new keeper's socket is never removed by this one.
    fn answer(self) {
        match self {
            Ending::Released(stream) | Ending::Gone(Some(stream)) => drop(stream),
            Ending::Expired | Ending::Gone(None) => {}
        }
    }
}

/// Serves attaches and releases until released, until no switch has been attached for its
/// keep time, or until `still_ours` says the namespace is no longer named (asked every
/// `NAMESPACE_CHECK_EVERY` and at each attach).
fn serve(listener: &UnixListener, ports: &[String], still_ours: impl Fn() -> bool) -> Ending {
    let kept = format!("kept {}\n", ports.join(","));
    // The attached switch: its connection and pid.
    let mut attached: Option<(UnixStream, String)> = None;
    let mut keep_for = FIRST_ATTACH_WITHIN;
    let mut alone_since = Some(Instant::now());
    // The attached switch said a switch takes over from it.
    let mut handing_over = false;
    loop {
        if !still_ours() {
            return Ending::Gone(None);
        }
        let mut fds = vec![listener.as_raw_fd()];
        fds.extend(attached.as_ref().map(|(stream, _)| stream.as_raw_fd()));
        let left = match alone_since {
            Some(since) => {
                let left = keep_for.saturating_sub(since.elapsed());
                if left.is_zero() {
                    return Ending::Expired;
                }
                left
            }
            None => NAMESPACE_CHECK_EVERY,
        };
        let timeout = left.min(NAMESPACE_CHECK_EVERY).as_millis().clamp(1, i32::MAX as u128) as i32;
        let Ok(ready) = linux::which_readable(&fds, timeout) else { return Ending::Expired };
        if ready.get(1) == Some(&true) {
            let (stream, pid) = attached.take().expect("polled");
            match read_line(&stream).as_deref() {
                // The switch releases on its way out, with `keep_interfaces_s = 0`.
                Some("release") => return Ending::Released(stream),
                // A switch taking over follows: whatever the keep time, wait for it to attach.
                Some("hand-over") => {
                    keep_for = keep_for.max(FIRST_ATTACH_WITHIN);
                    handing_over = true;
                    attached = Some((stream, pid));
                }
                // Anything else, or the end: the switch is gone.
                _ => {
                    alone_since = Some(Instant::now());
                    if keep_for.is_zero() {
                        return Ending::Expired;
                    }
                }
            }
        }
        if ready[0] {
            let Ok((mut stream, _)) = listener.accept() else { continue };
            let _ = stream.set_read_timeout(Some(ANSWER_WITHIN));
            let line = read_line(&stream).unwrap_or_default();
            if handing_over && line.starts_with("attach ") {
                // The switch taking over: the one handing over is on its way out (its end may
                // not have been read yet); it gets `ANSWER_WITHIN` to go.
                if let Some((old, _)) = attached.take() {
                    let _ = old.set_read_timeout(Some(ANSWER_WITHIN));
                    while read_line(&old).is_some() {}
                }
                handing_over = false;
            }
            if line.starts_with("attach ") && !still_ours() {
                let _ = stream.write_all(b"gone\n");
                return Ending::Gone(Some(stream));
            }
            let mut words = line.split(' ');
            match (words.next(), &attached) {
                (Some("attach" | "release"), Some((_, pid))) => {
                    let _ = stream.write_all(format!("busy {pid}\n").as_bytes());
                }
                (Some("attach"), None) => {
                    let pid = words.next().unwrap_or("?").to_string();
                    keep_for = words.next().and_then(|ms| ms.parse().ok()).map_or(keep_for, Duration::from_millis);
                    if stream.write_all(kept.as_bytes()).is_ok() {
                        let _ = stream.set_read_timeout(None);
                        attached = Some((stream, pid));
                        alone_since = None;
                    }
                }
                (Some("release"), None) => return Ending::Released(stream),
                _ => {}
            }
        }
    }
}

/// One line from `stream`, without its newline; `None` at its end or on an error.
fn read_line(stream: &UnixStream) -> Option<String> {
    let mut line = String::new();
    match BufReader::new(stream).read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keeper's `serve` on a socket in a directory of the test's own, on a thread, its
    /// namespace named for as many looks as `named_for` says.
    fn keeper_named_for(
        ports: &[&str],
        named_for: usize,
    ) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<Ending>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keep.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let ports: Vec<String> = ports.iter().map(|port| port.to_string()).collect();
        let looks = std::sync::atomic::AtomicUsize::new(0);
        let still_ours = move || looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < named_for;
        let serving = std::thread::spawn(move || serve(&listener, &ports, still_ours));
        (dir, path, serving)
    }

    fn keeper(ports: &[&str]) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<Ending>) {
        keeper_named_for(ports, usize::MAX)
    }

    fn client(path: &std::path::Path) -> UnixStream {
        let stream = UnixStream::connect(path).unwrap();
        stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
        stream
    }

    fn say(stream: &mut UnixStream, line: &str) -> String {
        exchange(stream, &format!("{line}\n")).unwrap()
    }

    #[test]
    fn a_keeper_serves_one_switch_at_a_time_and_lets_go_its_keep_time_after_the_last() {
        let (_dir, path, serving) = keeper(&["host0", "up0"]);
        let mut first = client(&path);
        assert_eq!(say(&mut first, "attach 11 200"), "kept host0,up0");
        assert_eq!(say(&mut client(&path), "attach 12 200"), "busy 11", "a second switch");
        assert_eq!(say(&mut client(&path), "release"), "busy 11", "clean while a switch runs");
        drop(first);
        // The next switch, within the keep time, finds the same interfaces.
        let mut second = client(&path);
        assert_eq!(say(&mut second, "attach 13 50"), "kept host0,up0");
        let left = Instant::now();
        drop(second);
        assert!(matches!(serving.join().unwrap(), Ending::Expired), "nobody asked: the keep time ran out");
        assert!(left.elapsed() >= Duration::from_millis(50), "not before the second switch's keep time");
    }

    #[test]
    fn a_release_ends_the_keeper_and_answers_with_the_streams_end() {
        let (_dir, path, serving) = keeper(&["host0"]);
        let mut attached = client(&path);
        assert_eq!(say(&mut attached, "attach 11 60000"), "kept host0");
        attached.write_all(b"release\n").unwrap();
        let Ending::Released(released_by) = serving.join().unwrap() else { panic!("the attached switch asked") };
        drop(released_by);
        let mut rest = Vec::new();
        assert_eq!(io::Read::read_to_end(&mut attached, &mut rest).unwrap(), 0, "the end, nothing said");
        // `raceway clean` when no switch runs.
        let (_dir, path, serving) = keeper(&["host0"]);
        let mut cleaner = client(&path);
        cleaner.write_all(b"release\n").unwrap();
        assert!(matches!(serving.join().unwrap(), Ending::Released(_)));
    }

    #[test]
    fn a_keep_time_of_zero_lets_go_as_the_switch_goes() {
        let (_dir, path, serving) = keeper(&["host0"]);
        let mut attached = client(&path);
        assert_eq!(say(&mut attached, "attach 11 0"), "kept host0");
        drop(attached);
        assert!(matches!(serving.join().unwrap(), Ending::Expired));
    }

    #[test]
    fn a_switch_handing_over_leaves_the_interfaces_to_the_next_whatever_its_keep_time() {
        let (_dir, path, serving) = keeper(&["host0", "up0"]);
        let mut first = client(&path);
        assert_eq!(say(&mut first, "attach 11 0"), "kept host0,up0");
        first.write_all(b"hand-over\n").unwrap();
        // The switch taking over may ask before the keeper has read the first one's end: the
        // keeper waits for it rather than answer busy.
        let mut next = client(&path);
        next.write_all(b"attach 12 0\n").unwrap();
        drop(first);
        // Without the hand-over, a keep time of zero would have ended the keeper here.
        let mut answer = String::new();
        BufReader::new(&next).read_line(&mut answer).unwrap();
        assert_eq!(answer.trim_end(), "kept host0,up0", "the switch taking over finds them");
        drop(next);
        assert!(matches!(serving.join().unwrap(), Ending::Expired), "its own keep time of zero applies again");
    }

    /// An operator deletes the namespace: an attach after that is answered `gone` (the
    /// switch starts afresh), and a keeper with a switch attached lets go within a look.
    #[test]
    fn a_keeper_whose_namespace_is_no_longer_named_lets_go() {
        // Named at the first look only: the attach finds it gone.
        let (_dir, path, serving) = keeper_named_for(&["host0"], 1);
        let mut late = client(&path);
        assert_eq!(say(&mut late, "attach 11 60000"), "gone");
        let Ending::Gone(Some(answered)) = serving.join().unwrap() else { panic!("the attach was answered") };
        drop(answered);
        let mut rest = Vec::new();
        assert_eq!(io::Read::read_to_end(&mut late, &mut rest).unwrap(), 0, "then the stream's end");
        // Named for the attach, then not: the attached switch's keeper lets go.
        let (_dir, path, serving) = keeper_named_for(&["host0"], 3);
        let mut attached = client(&path);
        assert_eq!(say(&mut attached, "attach 12 60000"), "kept host0");
        assert!(matches!(serving.join().unwrap(), Ending::Gone(None)));
    }
}
