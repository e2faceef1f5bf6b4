//! The lab every root-tier test builds: Linux hosts in network namespaces on veth pairs whose
//! other ends are raceway's `net_af_packet` ports, the kernel in raceway's own namespace as its
//! control plane, FRR where a test starts it. The hosts have an address and a default gateway,
//! nothing more.
//!
//! Every test names its namespaces and interfaces after itself and the process, and a `Lab`
//! removes them when dropped, so a failing test leaves nothing behind. Needs root,
//! /dev/net/tun, iproute2, ping and ethtool (the Makefile installs them).

use crate::bin::*;
use crate::util::*;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The goodput test measures a rate on a shared two-CPU machine: it runs alone among these
/// tests (the others hold this lock too).
pub(crate) static ALONE: Mutex<()> = Mutex::new(());

pub(crate) fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Namespaces, links and the switch process of one test; all removed on drop.
pub(crate) struct Lab {
    /// A short prefix unique to the test and process: interface names have 15 bytes.
    pub(crate) prefix: String,
    pub(crate) namespaces: Vec<String>,
    pub(crate) links: Vec<String>,
    pub(crate) switch: Option<Child>,
    pub(crate) dir: crate::util::TestDir,
    /// Directories of FRR daemons started (pid files inside), stopped on drop.
    pub(crate) frr: Vec<std::path::PathBuf>,
}

pub(crate) fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|err| panic!("{program}: {err}"))
}

pub(crate) fn ok(program: &str, args: &[&str]) -> String {
    let output = run(program, args);
    assert!(output.status.success(), "{program} {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Polls `ready` every 50 ms until it holds or `within` passes.
pub(crate) fn wait_for(what: &str, within: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Lab {
    pub(crate) fn new(tag: &str) -> Self {
        let prefix = format!("{tag}{}", std::process::id() % 100_000);
        let lab = Self {
            prefix,
            namespaces: Vec::new(),
            links: Vec::new(),
            switch: None,
            dir: temp_dir(tag),
            frr: Vec::new(),
        };
        lab.clean();
        lab
    }

    pub(crate) fn netns(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The control namespace raceway creates.
    pub(crate) fn control(&self) -> String {
        self.netns("ctl")
    }

    /// A host namespace with `eth0` on a veth pair whose other end (`<prefix>p<index>`) is a
    /// switch port; its addresses are 10.0.<index>.2/24 and fd00:<index>::2/64, the gateway .1.
    pub(crate) fn host(&mut self, index: usize) {
        let ns = self.attach(&format!("h{index}"), &format!("p{index}"));
        let v4 = format!("10.0.{index}.2/24");
        let v6 = format!("fd00:{index}::2/64");
        ok("ip", &["-n", &ns, "addr", "add", &v4, "dev", "eth0"]);
        ok("ip", &["-n", &ns, "addr", "add", &v6, "dev", "eth0", "nodad"]);
        ok("ip", &["-n", &ns, "route", "add", "default", "via", &format!("10.0.{index}.1")]);
        ok("ip", &["-n", &ns, "-6", "route", "add", "default", "via", &format!("fd00:{index}::1")]);
    }

    /// A namespace `<prefix><name>` whose `eth0` (up, offloads off) is a veth pair with the
    /// switch's link `<prefix><link>`.
    pub(crate) fn attach(&mut self, name: &str, link: &str) -> String {
        let (ns, link) = (self.netns(name), format!("{}{link}", self.prefix));
        ok("ip", &["netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        ok("ip", &["link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &ns]);
        self.links.push(link.clone());
        ok("ip", &["link", "set", &link, "up"]);
        // Frames with partial checksums or GSO sizes would reach the wire through af_packet.
        for (netns, dev) in [(None, link.as_str()), (Some(ns.as_str()), "eth0")] {
            let mut args = vec!["ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off"];
            if let Some(netns) = netns {
                args.splice(0..0, ["ip", "netns", "exec", netns]);
            }
            let output = run(args[0], &args[1..]);
            assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
        ok("ip", &["-n", &ns, "link", "set", "eth0", "up"]);
        ok("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        ns
    }

    /// Starts FRR's zebra, bgpd and (when `config` has a `bfd` section) bfdd in namespace `ns`
    /// with `config`, their sockets and pid files in a directory of their own (readable by
    /// the frr user), which `vtysh --vty_socket` reaches.
    pub(crate) fn frr(&mut self, ns: &str, config: &str) -> std::path::PathBuf {
        let dir = std::path::PathBuf::from(format!("/tmp/{}-frr-{ns}", self.prefix));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("frr.conf"), config).unwrap();
        ok("chown", &["-R", "frr:frr", dir.to_str().unwrap()]);
        self.frr.push(dir.clone());
        let path = |file: &str| dir.join(file).display().to_string();
        let bfd = config.lines().any(|line| line == "bfd");
        for daemon in ["zebra", "bgpd", "bfdd"] {
            if daemon == "bfdd" && !bfd {
                continue;
            }
            // bfdd's control socket defaults to one path for the machine.
            let bfdctl = path("bfdd.sock");
            let extra: &[&str] = if daemon == "bfdd" { &["--bfdctl", &bfdctl] } else { &[] };
            ok(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    &format!("/usr/lib/frr/{daemon}"),
                    "-d",
                    "-u",
                    "frr",
                    "-g",
                    "frr",
                    "-f",
                    &path("frr.conf"),
                    "-i",
                    &path(&format!("{daemon}.pid")),
                    "-z",
                    &path("zserv.api"),
                    "--vty_socket",
                    dir.to_str().unwrap(),
                    "-P",
                    "0",
                    "--log",
                    &format!("file:{}", path(&format!("{daemon}.log"))),
                ]
                .iter()
                .chain(extra)
                .copied()
                .collect::<Vec<&str>>(),
            );
        }
        dir
    }

    pub(crate) fn stop_frr(&mut self) {
        for dir in self.frr.drain(..) {
            for daemon in ["bfdd", "bgpd", "zebra"] {
                if let Ok(pid) = std::fs::read_to_string(dir.join(format!("{daemon}.pid"))) {
                    let _ = run("kill", &[pid.trim()]);
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// The switch's config: a port per host, each with the gateway addresses, and `extra`.
    pub(crate) fn config(&self, hosts: usize, extra: &str) -> String {
        let mut text = format!(
            "[switch]\nname = \"lab\"\nmac = \"02:00:00:00:00:01\"\n\
             [dpdk]\neal = [\"--no-huge\", \"-m\", \"512\", \"--no-pci\", \"--no-shconf\", \"--file-prefix\", \"{0}sw\", \"--log-level\", \"*:error\"]\n\
             lcores = \"0-1\"\n",
            self.prefix
        );
        for index in 0..hosts {
            text.push_str(&format!(
                "[[port]]\nname = \"host{index}\"\ndevice = \"net_af_packet{index},iface={}p{index}\"\nspeed_gbps = 1\n\
                 addresses = [\"10.0.{index}.1/24\", \"fd00:{index}::1/64\"]\n",
                self.prefix
            ));
        }
        // The host interfaces go with the switch unless a test keeps them for a restart.
        let keep = if extra.contains("keep_interfaces_s") { "" } else { "keep_interfaces_s = 0\n" };
        text.push_str(&format!("[control]\nnetns = \"{}\"\n{keep}{extra}\n", self.control()));
        text
    }

    /// Starts raceway and waits until the host interfaces of `ports` have carrier.
    pub(crate) fn start(&mut self, config: &str, ports: &[&str]) {
        self.start_with(config, ports, &[]);
    }

    /// `start`, with more arguments for `raceway run`.
    pub(crate) fn start_with(&mut self, config: &str, ports: &[&str], args: &[&std::ffi::OsStr]) {
        let path = self.dir.join("leaf.toml");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(self.dir.join("raceway.log")).unwrap();
        let child = raceway()
            .args(["run", "-c"])
            .arg(&path)
            .arg("--stats-json")
            .arg(self.dir.join("stats.json"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.switch = Some(child);
        let control = self.control();
        wait_for("the host interfaces", Duration::from_secs(30), || {
            if let Some(status) = self.switch.as_mut().and_then(|child| child.try_wait().unwrap()) {
                let log = std::fs::read_to_string(self.dir.join("raceway.log")).unwrap_or_default();
                panic!("raceway exited ({status}): {log}");
            }
            ports.iter().all(|port| {
                let output = run("ip", &["-n", &control, "link", "show", port]);
                output.status.success() && String::from_utf8_lossy(&output.stdout).contains("LOWER_UP")
            })
        });
    }

    /// Stops raceway (SIGINT, as an operator would) and returns its stats JSON.
    pub(crate) fn stop(&mut self) -> serde_json::Value {
        let mut child = self.switch.take().expect("started");
        ok("kill", &["-INT", &child.id().to_string()]);
        let status = child.wait().unwrap();
        let log = std::fs::read_to_string(self.dir.join("raceway.log")).unwrap_or_default();
        assert!(status.success(), "raceway: {status}\n{log}");
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("stats.json")).unwrap()).unwrap()
    }

    /// Runs `command` in host `index`'s namespace.
    pub(crate) fn in_host(&self, index: usize, command: &[&str]) -> Output {
        let ns = self.netns(&format!("h{index}"));
        let mut args = vec!["netns", "exec", ns.as_str()];
        args.extend_from_slice(command);
        run("ip", &args)
    }

    pub(crate) fn clean(&self) {
        for suffix in ["h0", "h1", "h2", "h3", "s0", "s1", "ctl"] {
            let _ = run("ip", &["netns", "del", &self.netns(suffix)]);
        }
        for link in ["p0", "p1", "p2", "p3", "u0", "u1"] {
            let _ = run("ip", &["link", "del", &format!("{}{link}", self.prefix)]);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop_frr();
        if let Some(mut child) = self.switch.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // What a keeper holds for a restart (the interfaces, the namespace) goes too.
        let _ = raceway().args(["clean", "-c"]).arg(self.dir.join("leaf.toml")).output();
        for link in &self.links {
            let _ = run("ip", &["link", "del", link]);
        }
        for ns in &self.namespaces {
            let _ = run("ip", &["netns", "del", ns]);
        }
        let _ = run("ip", &["netns", "del", &self.control()]);
        // A keeper's log, and the socket of one killed by a test.
        for ending in ["log", "sock"] {
            let _ = std::fs::remove_file(format!("/run/raceway/keep-{}.{ending}", self.control()));
        }
    }
}

pub(crate) fn ping(lab: &Lab, host: usize, args: &[&str]) -> Output {
    let mut command = vec!["ping"];
    command.extend_from_slice(args);
    lab.in_host(host, &command)
}

/// Milliseconds from now until `done` holds (polled every 5 ms), for reporting how fast a link
/// change is followed; panics after `within`.
pub(crate) fn millis_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) -> u128 {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    started.elapsed().as_millis()
}

/// ICMP echo requests namespace `<prefix><name>` has received (its /proc/net/snmp).
pub(crate) fn echoes(lab: &Lab, name: &str) -> u64 {
    let snmp = ok("ip", &["netns", "exec", &lab.netns(name), "cat", "/proc/net/snmp"]);
    let lines: Vec<&str> = snmp.lines().filter(|line| line.starts_with("Icmp:")).collect();
    let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
    names.zip(values).find(|(name, _)| *name == "InEchos").map(|(_, value)| value.parse().unwrap()).expect("InEchos")
}
