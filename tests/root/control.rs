//! raceway joining a real network: Linux hosts in network namespaces, on veth pairs whose
//! other ends are raceway's `net_af_packet` ports, and the kernel in raceway's own namespace
//! as its control plane. The hosts have an address and a default gateway, nothing more.
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
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Namespaces, links and the switch process of one test; all removed on drop.
struct Lab {
    /// A short prefix unique to the test and process: interface names have 15 bytes.
    prefix: String,
    namespaces: Vec<String>,
    links: Vec<String>,
    switch: Option<Child>,
    dir: std::path::PathBuf,
    /// Directories of FRR daemons started (pid files inside), stopped on drop.
    frr: Vec<std::path::PathBuf>,
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|err| panic!("{program}: {err}"))
}

fn ok(program: &str, args: &[&str]) -> String {
    let output = run(program, args);
    assert!(output.status.success(), "{program} {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Polls `ready` every 50 ms until it holds or `within` passes.
fn wait_for(what: &str, within: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Lab {
    fn new(tag: &str) -> Self {
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

    fn netns(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The control namespace raceway creates.
    fn control(&self) -> String {
        self.netns("ctl")
    }

    /// A host namespace with `eth0` on a veth pair whose other end (`<prefix>p<index>`) is a
    /// switch port; its addresses are 10.0.<index>.2/24 and fd00:<index>::2/64, the gateway .1.
    fn host(&mut self, index: usize) {
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
    fn attach(&mut self, name: &str, link: &str) -> String {
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
    fn frr(&mut self, ns: &str, config: &str) -> std::path::PathBuf {
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

    fn stop_frr(&mut self) {
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
    fn config(&self, hosts: usize, extra: &str) -> String {
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
        text.push_str(&format!("[control]\nnetns = \"{}\"\n{extra}\n", self.control()));
        text
    }

    /// Starts raceway and waits until the host interfaces of `ports` have carrier.
    fn start(&mut self, config: &str, ports: &[&str]) {
        self.start_with(config, ports, &[]);
    }

    /// `start`, with more arguments for `raceway run`.
    fn start_with(&mut self, config: &str, ports: &[&str], args: &[&std::ffi::OsStr]) {
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
    fn stop(&mut self) -> serde_json::Value {
        let mut child = self.switch.take().expect("started");
        ok("kill", &["-INT", &child.id().to_string()]);
        let status = child.wait().unwrap();
        let log = std::fs::read_to_string(self.dir.join("raceway.log")).unwrap_or_default();
        assert!(status.success(), "raceway: {status}\n{log}");
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("stats.json")).unwrap()).unwrap()
    }

    /// Runs `command` in host `index`'s namespace.
    fn in_host(&self, index: usize, command: &[&str]) -> Output {
        let ns = self.netns(&format!("h{index}"));
        let mut args = vec!["netns", "exec", ns.as_str()];
        args.extend_from_slice(command);
        run("ip", &args)
    }

    fn clean(&self) {
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
        for link in &self.links {
            let _ = run("ip", &["link", "del", link]);
        }
        for ns in &self.namespaces {
            let _ = run("ip", &["netns", "del", ns]);
        }
        let _ = run("ip", &["netns", "del", &self.control()]);
    }
}

fn ping(lab: &Lab, host: usize, args: &[&str]) -> Output {
    let mut command = vec!["ping"];
    command.extend_from_slice(args);
    lab.in_host(host, &command)
}

/// Hosts with only an address and a default gateway reach the gateway and each other, in
/// IPv4 and IPv6; they learn the switch's MAC and the switch learns theirs; `ping -t 1` gets
/// time-exceeded from the gateway, and a ping to an unused subnet of the plan gets
/// destination unreachable from it, v4 and v6; after the first packets the data plane forwards
/// alone.
#[test]
fn hosts_with_only_a_gateway_reach_each_other_through_the_kernels_control_plane() {
    let _alone = alone();
    let mut lab = Lab::new("rwa");
    lab.host(0);
    lab.host(1);
    lab.start(&lab.config(2, ""), &["host0", "host1"]);
    for gateway in ["10.0.0.1", "fd00:0::1"] {
        let reply = ping(&lab, 0, &["-c", "2", "-W", "2", gateway]);
        assert!(reply.status.success(), "ping the gateway {gateway}: {}", String::from_utf8_lossy(&reply.stdout));
    }
    for (destination, family) in [("10.0.1.2", "-4"), ("fd00:1::2", "-6")] {
        let across = ping(&lab, 0, &[family, "-c", "5", "-i", "0.2", "-W", "2", destination]);
        let text = String::from_utf8_lossy(&across.stdout);
        assert!(across.status.success() && text.contains(" 0% packet loss"), "ping {destination}: {text}");
    }
    let neighbors = String::from_utf8_lossy(&lab.in_host(0, &["ip", "neigh"]).stdout).into_owned();
    assert!(neighbors.contains("10.0.0.1 dev eth0 lladdr 02:00:00:00:00:01"), "host0's neighbours: {neighbors}");
    let host1_mac = ok("ip", &["-n", &lab.netns("h1"), "-br", "link", "show", "eth0"]);
    let host1_mac = host1_mac.split_whitespace().nth(2).expect("a MAC").to_string();
    let learned = ok("ip", &["-n", &lab.control(), "neigh", "show", "dev", "host1"]);
    assert!(learned.contains(&format!("10.0.1.2 lladdr {host1_mac}")), "the switch's neighbours: {learned}");
    // An address added with plain `ip addr` in raceway's namespace is the switch's too.
    ok("ip", &["-n", &lab.control(), "addr", "add", "10.0.0.100/24", "dev", "host0"]);
    wait_for("the added address to answer", Duration::from_secs(10), || {
        ping(&lab, 0, &["-c", "1", "-W", "1", "10.0.0.100"]).status.success()
    });
    // Time-exceeded from the gateway's address, as traceroute needs.
    let expired = ping(&lab, 0, &["-c", "1", "-t", "1", "-W", "2", "10.0.1.2"]);
    let text = String::from_utf8_lossy(&expired.stdout);
    assert!(text.contains("From 10.0.0.1") && text.contains("Time to live exceeded"), "ping -t 1: {text}");
    // Nothing routes 10.0.99.0/24 or fd00:99::/64: the gateway says so, as a router does.
    let unreachable = ping(&lab, 0, &["-c", "1", "-W", "2", "10.0.99.2"]);
    let text = String::from_utf8_lossy(&unreachable.stdout);
    assert!(text.contains("From 10.0.0.1") && text.contains("Destination Net Unreachable"), "ping: {text}");
    let unreachable = ping(&lab, 0, &["-6", "-c", "1", "-W", "2", "fd00:99::2"]);
    let text = String::from_utf8_lossy(&unreachable.stdout);
    assert!(text.contains("From fd00::1") && text.contains("No route"), "ping -6: {text}");
    let stats = lab.stop();
    let host0 = &stats["ports"]["host0"];
    assert!(host0["punted"]["arp"].as_u64().unwrap() >= 2, "ARP and ND: {host0}");
    assert!(host0["punted"]["ip2me"].as_u64().unwrap() >= 5, "the pings to the gateway: {host0}");
    assert_eq!(host0["punted"]["ttl"], 1);
    assert_eq!(host0["punted"]["unreachable"], 2, "{host0}");
    assert_eq!(host0["drops"]["no_route"], 0, "{host0}");
    // 10 echo requests crossed host0 -> host1; at most the first of each family went through
    // the kernel (glean), the rest through the data plane.
    assert!(host0["punted"]["glean"].as_u64().unwrap() <= 2, "{host0}");
    assert!(stats["ports"]["host1"]["tx_packets"].as_u64().unwrap() >= 8, "{}", stats["ports"]["host1"]);
    assert!(host0["injected"].as_u64().unwrap() >= 3, "the kernel's replies: {host0}");
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"], "every mbuf back");
    assert!(stats["control"]["fib_generation"].as_u64().unwrap() >= 2, "{}", stats["control"]);
    assert!(!ok("ip", &["netns", "list"]).contains(&lab.control()), "raceway removes the namespace it created");
}

/// Path MTU discovery across a port with a smaller MTU (`mtu = 1400`): a DF ping over it gets
/// "fragmentation needed" with 1,400 from the gateway, `tracepath` and `tracepath -6` find a
/// path MTU of 1,400, and a TCP transfer across it completes. `ip link set host1 mtu 1300` in
/// the control namespace then changes the port's MTU live.
#[test]
fn path_mtu_discovery_finds_a_smaller_ports_mtu_and_follows_it_live() {
    let _alone = alone();
    let mut lab = Lab::new("rwm");
    lab.host(0);
    lab.host(1);
    let config = lab.config(2, "").replace("name = \"host1\"\n", "name = \"host1\"\nmtu = 1400\n");
    lab.start(&config, &["host0", "host1"]);
    let control = lab.control();
    assert!(ok("ip", &["-n", &control, "link", "show", "host1"]).contains("mtu 1400"), "the TAP mirrors the port");
    for (destination, family) in [("10.0.1.2", "-4"), ("fd00:1::2", "-6")] {
        wait_for("host1 to answer", Duration::from_secs(10), || {
            ping(&lab, 0, &[family, "-c", "1", "-W", "1", destination]).status.success()
        });
    }
    // 1,422 bytes of payload: a 1,450-byte packet, DF set.
    let too_big = ping(&lab, 0, &["-c", "1", "-W", "2", "-M", "do", "-s", "1422", "10.0.1.2"]);
    let text = String::from_utf8_lossy(&too_big.stdout);
    assert!(text.contains("From 10.0.0.1") && text.contains("Frag needed and DF set (mtu = 1400)"), "ping: {text}");
    // Without DF the kernel fragments it (at the mtu class's rate): to an address host0 has
    // no path MTU for yet, so that host0 sends it whole.
    ok("ip", &["-n", &lab.netns("h1"), "addr", "add", "10.0.1.3/24", "dev", "eth0"]);
    let fragmented = ping(&lab, 0, &["-c", "1", "-W", "2", "-M", "dont", "-s", "1422", "10.0.1.3"]);
    let text = String::from_utf8_lossy(&fragmented.stdout);
    assert!(fragmented.status.success() && text.contains("1430 bytes from 10.0.1.3"), "ping -M dont: {text}");
    for (family, destination) in [("-4", "10.0.1.2"), ("-6", "fd00:1::2")] {
        let traced = lab.in_host(0, &["tracepath", family, "-n", destination]);
        let text = String::from_utf8_lossy(&traced.stdout);
        assert!(text.contains("Resume: pmtu 1400"), "tracepath {family}: {text}");
    }
    // A TCP transfer: its full-sized segments meet the smaller port, and PMTUD makes it fit.
    // The receiver counts what arrived once the sender has closed its side, and says so.
    let port = 5201 + std::process::id() % 1000;
    let receiver = format!(
        "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('10.0.1.2', {port}))\ns.listen(1)\nc, _ = s.accept()\nn = 0\nwhile True:\n    d = c.recv(65536)\n\
         \x20   if not d:\n        break\n    n += len(d)\nc.sendall(str(n).encode())\nc.close()\n"
    );
    let sender = format!(
        "import socket\nc = socket.create_connection(('10.0.1.2', {port}), timeout=20)\nc.sendall(b'x' * 4194304)\n\
         c.shutdown(socket.SHUT_WR)\nprint(c.recv(64).decode())\n"
    );
    let server = Command::new("ip")
        .args(["netns", "exec", &lab.netns("h1"), "python3", "-c", &receiver])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut received = String::new();
    wait_for("the receiver", Duration::from_secs(10), || {
        let output = lab.in_host(0, &["python3", "-c", &sender]);
        received = String::from_utf8_lossy(&output.stdout).trim().to_string();
        output.status.success()
    });
    assert_eq!(received, "4194304", "the whole transfer arrived");
    let server = server.wait_with_output().unwrap();
    assert!(server.status.success(), "{}", String::from_utf8_lossy(&server.stderr));
    // The operator lowers the port's MTU on its host interface: the next packet over it hears
    // the new one.
    ok("ip", &["-n", &control, "link", "set", "dev", "host1", "mtu", "1300"]);
    wait_for("the new MTU to be heard", Duration::from_secs(10), || {
        let output = ping(&lab, 0, &["-c", "1", "-W", "1", "-M", "do", "-s", "1372", "10.0.1.2"]);
        String::from_utf8_lossy(&output.stdout).contains("mtu = 1300")
    });
    // Above what the port takes (a net_af_packet device takes its interface's MTU, 1,500 for
    // these veths, below switch.mtu): clamped, and the interface set back.
    ok("ip", &["-n", &control, "link", "set", "dev", "host1", "mtu", "9000"]);
    wait_for("the MTU set back", Duration::from_secs(10), || {
        ok("ip", &["-n", &control, "link", "show", "host1"]).contains("mtu 1500")
    });
    let stats = lab.stop();
    let host0 = &stats["ports"]["host0"];
    assert!(host0["punted"]["mtu"].as_u64().unwrap() >= 3, "{host0}");
    assert_eq!(host0["drops"]["oversize"], 0, "{host0}");
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// Milliseconds from now until `done` holds (polled every 5 ms), for reporting how fast a link
/// change is followed; panics after `within`.
fn millis_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) -> u128 {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    started.elapsed().as_millis()
}

/// A host's veth losing carrier takes its port down: the TAP loses carrier, frames to the port
/// are dropped and counted (`link_down`), none held for the link's return (no reply comes back
/// late), and carrier back restores it. `ip link set host1 down` on the TAP shuts the port
/// (what host1 sends is dropped too) and `up` opens it again.
#[test]
fn a_port_follows_its_links_carrier_and_the_operators_shutdown() {
    let _alone = alone();
    let mut lab = Lab::new("rwl");
    lab.host(0);
    lab.host(1);
    lab.start(&lab.config(2, ""), &["host0", "host1"]);
    let control = lab.control();
    wait_for("host1 to answer", Duration::from_secs(10), || {
        ping(&lab, 0, &["-c", "1", "-W", "1", "10.0.1.2"]).status.success()
    });
    let tap_has_carrier = || !ok("ip", &["-n", &control, "link", "show", "host1"]).contains("NO-CARRIER");
    // A steady ping across a 3 s outage of host1's link.
    let steady = Command::new("ip")
        .args(["netns", "exec", &lab.netns("h0"), "ping", "-c", "120", "-i", "0.05", "-W", "4", "10.0.1.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000)); // traffic flowing before the outage
    let h1 = lab.netns("h1");
    ok("ip", &["-n", &h1, "link", "set", "eth0", "down"]);
    let down_ms = millis_until("the TAP to lose carrier", Duration::from_secs(10), || !tap_has_carrier());
    std::thread::sleep(Duration::from_millis(3000));
    ok("ip", &["-n", &h1, "link", "set", "eth0", "up"]);
    // Down took host1's default route with it.
    ok("ip", &["-n", &h1, "route", "replace", "default", "via", "10.0.1.1"]);
    let up_ms = millis_until("the TAP's carrier back", Duration::from_secs(10), tap_has_carrier);
    eprintln!("carrier followed: down in {down_ms} ms, up in {up_ms} ms (ip, netlink and the watcher)");
    let steady = steady.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&steady.stdout);
    // Nothing was held over the outage: a request held for the link would come back up to 3 s
    // late. (The first after it may wait one ARP retry, 1 s, on host1, whose ARP request
    // can cross before the switch has seen the link come back.)
    let slowest = text
        .lines()
        .filter_map(|line| line.split("time=").nth(1))
        .filter_map(|time| time.split_whitespace().next()?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    assert!(slowest < 2000.0, "a reply {slowest} ms late: held across the outage\n{text}");
    assert!(text.contains("120 packets transmitted"), "{text}");
    wait_for("host1 to answer again", Duration::from_secs(10), || {
        ping(&lab, 0, &["-c", "1", "-W", "1", "10.0.1.2"]).status.success()
    });
    // Shut by the operator: nothing crosses either way; then opened again.
    ok("ip", &["-n", &control, "link", "set", "dev", "host1", "down"]);
    wait_for("the shutdown to hold", Duration::from_secs(10), || {
        !ping(&lab, 0, &["-c", "1", "-W", "1", "10.0.1.2"]).status.success()
    });
    let _ = lab.in_host(1, &["ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.0.2"]);
    let show = |what: &str| -> serde_json::Value {
        let output =
            raceway().args(["show", "--json", "-c"]).arg(lab.dir.join("leaf.toml")).arg(what).output().unwrap();
        assert!(output.status.success(), "show {what}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let interfaces = show("interfaces");
    let host1 = &interfaces["interfaces"][1];
    assert_eq!(
        (&host1["interface"], &host1["admin"], &host1["oper"]),
        (&"host1".into(), &"down".into(), &"down".into())
    );
    assert_eq!(host1["carrier"], "up", "shut, with its link up");
    ok("ip", &["-n", &control, "link", "set", "dev", "host1", "up"]);
    wait_for("host1 to answer after startup", Duration::from_secs(10), || {
        ping(&lab, 0, &["-c", "1", "-W", "1", "10.0.1.2"]).status.success()
    });
    assert_eq!(show("interfaces")["interfaces"][1]["oper"], "up");
    let neighbors = show("neighbors");
    let host1_entry = neighbors["neighbors"].as_array().unwrap().iter().find(|n| n["address"] == "10.0.1.2");
    assert_eq!(host1_entry.map(|n| &n["port"]), Some(&"host1".into()), "{neighbors}");
    let routes = show("routes");
    let connected = routes["routes"].as_array().unwrap().iter().find(|r| r["prefix"] == "10.0.1.0/24");
    assert_eq!(connected.map(|r| &r["resolves_to"]), Some(&"connected host1".into()), "{routes}");
    let stats = lab.stop();
    assert!(stats["ports"]["host0"]["drops"]["link_down"].as_u64().unwrap() > 0, "{}", stats["ports"]["host0"]);
    assert!(stats["ports"]["host1"]["drops"]["link_down"].as_u64().unwrap() >= 3, "{}", stats["ports"]["host1"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// A flood of pings and ARP requests at the switch's own address is policed per port and
/// class; forwarding between the hosts goes on untouched, and the counters show what each
/// class's policer dropped.
#[test]
fn a_flood_at_the_switch_is_policed_and_forwarding_goes_on() {
    let _alone = alone();
    let mut lab = Lab::new("rwb");
    lab.host(0);
    lab.host(1);
    let copp = "[control.copp.arp]\npps = 200\nburst = 50\n[control.copp.ip2me]\npps = 200\nburst = 50";
    lab.start(&lab.config(2, copp), &["host0", "host1"]);
    // Resolve both ways first, then flood the gateway while host1 pings host0 across.
    assert!(ping(&lab, 1, &["-c", "1", "-W", "2", "10.0.0.2"]).status.success());
    let ns0 = lab.netns("h0");
    let mut flood = Command::new("ip")
        .args(["netns", "exec", &ns0, "ping", "-f", "-c", "20000", "-W", "1", "10.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // And 20,000 ARP requests for the gateway, as fast as a raw socket sends them.
    let arp_flood = "import socket\n\
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
        s.bind(('eth0', 0))\n\
        mac = open('/sys/class/net/eth0/address').read().strip().replace(':', '')\n\
        frame = bytes.fromhex('ffffffffffff' + mac + '0806' + '0001080006040001' + mac + '0a000002' + '000000000000' + '0a000001')\n\
        for _ in range(20000):\n    s.send(frame)\n";
    let mut arps = Command::new("ip").args(["netns", "exec", &ns0, "python3", "-c", arp_flood]).spawn().unwrap();
    let across = ping(&lab, 1, &["-c", "20", "-i", "0.05", "-W", "2", "10.0.0.2"]);
    let _ = flood.kill();
    let _ = flood.wait();
    assert!(arps.wait().unwrap().success(), "the ARP flood ran");
    let text = String::from_utf8_lossy(&across.stdout);
    assert!(across.status.success() && text.contains(" 0% packet loss"), "forwarding during the flood: {text}");
    let stats = lab.stop();
    let host0 = &stats["ports"]["host0"];
    let policed = host0["drops"]["punt_policed"].as_u64().unwrap();
    let class = |counter: &str, class: &str| host0[counter][class].as_u64().unwrap();
    assert!(class("policed", "ip2me") > 0 && class("policed", "arp") > 0, "each flood was policed: {host0}");
    assert_eq!(class("policed", "ip2me") + class("policed", "arp"), policed, "the breakdown of punt_policed");
    let (ip2me, arp) = (class("punted", "ip2me"), class("punted", "arp"));
    assert!(ip2me > 0, "some pings still reached the kernel: {host0}");
    assert!(arp > 0, "{host0}");
    // 200 frames/s and a burst of 50 per class over the few seconds of the test: the policers
    // passed a few hundred of the ~20,000 ARP requests and of the pings.
    assert!(arp + ip2me < 3_000 && policed > 10_000, "policed {policed}, passed {}: {host0}", arp + ip2me);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// A spine's BGP: AS 65001, one session to the leaf, announcing 10.200.0.0/24 (on its lo, so
/// that it answers every address in it). Timers of 1 s / 3 s keep the test short.
fn spine_bgp(index: usize) -> String {
    format!(
        "hostname s{index}\nrouter bgp 65001\n bgp router-id 10.255.0.{me}\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n neighbor 10.255.0.{leaf} remote-as 65000\n neighbor 10.255.0.{leaf} timers 1 3\n \
         neighbor 10.255.0.{leaf} timers connect 1\n address-family ipv4 unicast\n  network 10.200.0.0/24\n \
         exit-address-family\n",
        me = 2 * index + 1,
        leaf = 2 * index
    )
}

/// The leaf's BGP in raceway's namespace: both spines, ECMP over them.
const LEAF_BGP: &str = "hostname leaf\nrouter bgp 65000\n bgp router-id 10.255.0.0\n no bgp ebgp-requires-policy\n \
    neighbor 10.255.0.1 remote-as 65001\n neighbor 10.255.0.1 timers 1 3\n neighbor 10.255.0.1 timers connect 1\n \
    neighbor 10.255.0.3 remote-as 65001\n neighbor 10.255.0.3 timers 1 3\n neighbor 10.255.0.3 timers connect 1\n \
    address-family ipv4 unicast\n  redistribute connected\n  maximum-paths 2\n exit-address-family\n";

/// RFC 7938 in miniature: two spines announce 10.200.0.0/24 by BGP to FRR in raceway's
/// namespace; raceway installs it as a two-member group and spreads flows over both uplinks.
/// When one spine's link goes down, the group skips that member at once (the data plane fails
/// over before any routing protocol notices: a flow on it loses no more than was in flight),
/// then the route loses that next hop and traffic stays on the other, while traffic between
/// the hosts never stops.
#[test]
fn bgp_multipath_from_two_spines_spreads_and_fails_over() {
    let _alone = alone();
    let mut lab = Lab::new("rwc");
    lab.host(0);
    lab.host(1);
    for index in 0..2 {
        let ns = lab.attach(&format!("s{index}"), &format!("u{index}"));
        ok("ip", &["-n", &ns, "addr", "add", &format!("10.255.0.{}/31", 2 * index + 1), "dev", "eth0"]);
        ok("ip", &["-n", &ns, "addr", "add", "10.200.0.1/24", "dev", "lo"]);
    }
    let config = with_uplinks(&lab, &lab.config(2, ""), 2, 2);
    lab.start(&config, &["host0", "host1", "up0", "up1"]);
    for index in 0..2 {
        let ns = lab.netns(&format!("s{index}"));
        lab.frr(&ns, &spine_bgp(index));
    }
    let control = lab.control();
    lab.frr(&control, LEAF_BGP);
    let route = || ok("ip", &["-n", &control, "route", "show", "10.200.0.0/24"]);
    wait_for("the ECMP route from both spines", Duration::from_secs(60), || {
        route().matches("nexthop via").count() == 2
    });
    // The replies need the way back: each spine learns the hosts' subnet from the leaf's
    // `redistribute connected`, on its own schedule.
    for index in 0..2 {
        let spine = lab.netns(&format!("s{index}"));
        wait_for("the spine's route back to the hosts", Duration::from_secs(60), || {
            ok("ip", &["-n", &spine, "route", "show", "10.0.0.0/24"]).contains("via 10.255.0.")
        });
    }
    // raceway's own FIB follows the kernel's by netlink, a moment later: every destination
    // answers once before the echoes are counted.
    let all_answer = |lab: &Lab| {
        (1..=32).all(|last| ping(lab, 0, &["-c", "1", "-W", "1", &format!("10.200.0.{last}")]).status.success())
    };
    wait_for("every destination through the leaf", Duration::from_secs(30), || all_answer(&lab));
    // 32 destinations: ECMP hashes each flow onto one uplink, and both get some.
    let ping_all = |lab: &Lab| {
        for last in 1..=32 {
            let reply = ping(lab, 0, &["-c", "1", "-W", "2", &format!("10.200.0.{last}")]);
            assert!(reply.status.success(), "ping 10.200.0.{last}: {}", String::from_utf8_lossy(&reply.stdout));
        }
    };
    let start = [echoes(&lab, "s0"), echoes(&lab, "s1")];
    ping_all(&lab);
    let before = [echoes(&lab, "s0") - start[0], echoes(&lab, "s1") - start[1]];
    assert_eq!(before[0] + before[1], 32, "each echo reached one spine: {before:?}");
    assert!(before[0] >= 4 && before[1] >= 4, "ECMP spread the flows over both uplinks: {before:?}");
    // A destination whose flow the group sends to spine 0.
    let on_spine0 = (1..=32)
        .map(|last| format!("10.200.0.{last}"))
        .find(|destination| {
            let before = echoes(&lab, "s0");
            ping(&lab, 0, &["-c", "1", "-W", "2", destination]);
            echoes(&lab, "s0") > before
        })
        .expect("a flow on spine 0");
    let ns0 = lab.netns("h0");
    let failing_over = Command::new("ip")
        .args(["netns", "exec", &ns0, "ping", "-c", "60", "-i", "0.05", "-W", "1", &on_spine0])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // A steady ping between the hosts across the failover: other routes never stall.
    let ns1 = lab.netns("h1");
    let steady = Command::new("ip")
        .args(["netns", "exec", &ns1, "ping", "-c", "60", "-i", "0.1", "-W", "1", "10.0.0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000)); // both pings flowing before the failure
    ok("ip", &["-n", &lab.netns("s0"), "link", "set", "eth0", "down"]);
    let failing_over = failing_over.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&failing_over.stdout);
    let received: u64 = text
        .lines()
        .find(|line| line.contains("packets transmitted"))
        .and_then(|line| line.split(", ").nth(1)?.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    // 20 echoes a second: one or two were on the wire or in spine 0 when its link went. BGP's
    // hold time alone (3 s) would have lost 40 or more.
    assert!(received >= 57, "the flow on spine 0 lost more than what was in flight: {text}");
    wait_for("BGP to withdraw spine 0", Duration::from_secs(30), || !route().contains("10.255.0.1"));
    wait_for("every destination through spine 1", Duration::from_secs(30), || all_answer(&lab));
    let withdrawn = [echoes(&lab, "s0"), echoes(&lab, "s1")];
    ping_all(&lab);
    assert_eq!(echoes(&lab, "s0"), withdrawn[0], "nothing more to the withdrawn spine");
    assert_eq!(echoes(&lab, "s1"), withdrawn[1] + 32, "every flow to the remaining one");
    let steady = steady.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&steady.stdout);
    assert!(text.contains(" 0% packet loss"), "host traffic during the failover: {text}");
    lab.stop_frr();
    let stats = lab.stop();
    assert!(stats["ports"]["host0"]["punted"]["glean"].as_u64().unwrap() <= 2, "{}", stats["ports"]["host0"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
    // The kernel's multipath route made a group of both spines: counted per member, named by
    // its next hops, and kept after the route lost one of them.
    let groups = stats["groups"].as_object().unwrap();
    let (name, members) = groups.iter().find(|(name, _)| name.starts_with("via ")).expect("the multipath group");
    assert!(name.contains("10.255.0.1") && name.contains("10.255.0.3"), "{name}");
    for member in ["up0 10.255.0.1", "up1 10.255.0.3"] {
        assert!(members[member].as_u64().unwrap() >= 4, "{member} of {name}: {members}");
    }
}

/// A spine for BGP unnumbered: its uplink end's only link-local address is fe80::1 (both
/// spines share it, as fabrics number them), one session over it (RFC 5549: IPv4 routes with
/// IPv6 next hops), announcing 10.200.0.0/24 and fd20::/64, each answered for every address
/// (on lo, the IPv6 one as AnyIP).
fn unnumbered_spine(lab: &mut Lab, index: usize) {
    let ns = lab.attach(&format!("s{index}"), &format!("u{index}"));
    ok("ip", &["-n", &ns, "-6", "addr", "flush", "dev", "eth0", "scope", "link"]);
    ok("ip", &["-n", &ns, "addr", "add", "fe80::1/64", "dev", "eth0", "nodad"]);
    ok("ip", &["-n", &ns, "addr", "add", "10.200.0.1/24", "dev", "lo"]);
    ok("ip", &["-n", &ns, "-6", "route", "add", "local", "fd20::/64", "dev", "lo"]);
    lab.frr(
        &ns,
        &format!(
            "hostname s{index}\nrouter bgp 65001\n bgp router-id 10.255.1.{index}\n no bgp ebgp-requires-policy\n \
             no bgp network import-check\n neighbor eth0 interface remote-as external\n neighbor eth0 timers 1 3\n \
             neighbor eth0 timers connect 1\n address-family ipv4 unicast\n  network 10.200.0.0/24\n \
             exit-address-family\n address-family ipv6 unicast\n  network fd20::/64\n  neighbor eth0 activate\n \
             exit-address-family\n"
        ),
    );
}

/// The leaf's side of BGP unnumbered: a session per uplink interface, ECMP over both, v4 and v6.
const LEAF_UNNUMBERED: &str = "hostname leaf\nrouter bgp 65000\n bgp router-id 10.255.1.100\n \
    no bgp ebgp-requires-policy\n neighbor up0 interface remote-as external\n neighbor up0 timers 1 3\n \
    neighbor up0 timers connect 1\n neighbor up1 interface remote-as external\n neighbor up1 timers 1 3\n \
    neighbor up1 timers connect 1\n address-family ipv4 unicast\n  redistribute connected\n  maximum-paths 2\n \
    exit-address-family\n address-family ipv6 unicast\n  redistribute connected\n  neighbor up0 activate\n \
    neighbor up1 activate\n  maximum-paths 2\n exit-address-family\n";

/// ICMPv6 echo requests namespace `<prefix><name>` has received (its /proc/net/snmp6).
fn echoes_v6(lab: &Lab, name: &str) -> u64 {
    let snmp = ok("ip", &["netns", "exec", &lab.netns(name), "cat", "/proc/net/snmp6"]);
    let line = snmp.lines().find(|line| line.starts_with("Icmp6InEchos ")).expect("Icmp6InEchos");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// BGP unnumbered on two uplinks whose peers are both fe80::1: the kernel's routes to
/// 10.200.0.0/24 (over IPv6 next hops, RFC 5549) and fd20::/64 have two next hops with the
/// same address on different ports, which raceway keeps apart (neighbours by port and
/// address). With no data traffic before, both members carry traffic within 2 s of the
/// kernel holding the routes, in both families, and every destination answers. (0.22 s here,
/// 0.24 s with `stress-ng --cpu 2` on both CPUs: the 2 s bound is the issue's, with room.)
#[test]
fn bgp_unnumbered_peers_that_share_fe80_1_both_carry_ecmp_in_both_families() {
    let _alone = alone();
    let mut lab = Lab::new("rwn");
    lab.host(0);
    for index in 0..2 {
        unnumbered_spine(&mut lab, index);
    }
    let mut config = lab.config(1, "");
    for index in 0..2 {
        config = config.replace(
            "[control]",
            &format!(
                "[[port]]\nname = \"up{index}\"\ndevice = \"net_af_packet{},iface={}u{index}\"\nspeed_gbps = 1\n[control]",
                index + 1,
                lab.prefix
            ),
        );
    }
    lab.start(&config, &["host0", "up0", "up1"]);
    let control = lab.control();
    lab.frr(&control, LEAF_UNNUMBERED);
    let route = |family: &str, prefix: &str| ok("ip", &["-n", &control, family, "route", "show", prefix]);
    wait_for("both ECMP routes over fe80::1 on up0 and up1", Duration::from_secs(90), || {
        [("-4", "10.200.0.0/24"), ("-6", "fd20::/64")].iter().all(|(family, prefix)| {
            let text = route(family, prefix);
            text.contains("fe80::1 dev up0") && text.contains("fe80::1 dev up1")
        })
    });
    // The way back: each spine learns the host's subnets from the leaf.
    for index in 0..2 {
        let spine = lab.netns(&format!("s{index}"));
        wait_for("the spine's routes back to the host", Duration::from_secs(60), || {
            ok("ip", &["-n", &spine, "route", "show", "10.0.0.0/24"]).contains("via")
                && ok("ip", &["-n", &spine, "-6", "route", "show", "fd00:0::/64"]).contains("via")
        });
    }
    // From the kernel holding the routes: flows to 16 destinations per family, swept until
    // both spines have echoes of both, at most 2 s (the issue's bound: the FIB follows the
    // kernel within milliseconds, and one sweep takes a few).
    let started = std::time::Instant::now();
    let destinations: Vec<String> =
        (1..=16).flat_map(|last| [format!("10.200.0.{last}"), format!("fd20::{last:x}")]).collect();
    let base = [echoes(&lab, "s0"), echoes(&lab, "s1"), echoes_v6(&lab, "s0"), echoes_v6(&lab, "s1")];
    let carried = |lab: &Lab| {
        [echoes(lab, "s0"), echoes(lab, "s1"), echoes_v6(lab, "s0"), echoes_v6(lab, "s1")]
            .iter()
            .zip(&base)
            .map(|(now, before)| now - before)
            .collect::<Vec<u64>>()
    };
    while carried(&lab).contains(&0) && started.elapsed() < Duration::from_secs(2) {
        for destination in &destinations {
            ping(&lab, 0, &["-c", "1", "-W", "1", destination]);
        }
    }
    let elapsed = started.elapsed();
    let counts = carried(&lab);
    println!(
        "both members carried v4 and v6 after {elapsed:?}: echoes s0/s1 v4 {:?}, v6 {:?}",
        &counts[..2],
        &counts[2..]
    );
    assert!(!counts.contains(&0), "after {elapsed:?}, echoes per spine (v4 s0, s1, v6 s0, s1): {counts:?}");
    // raceway's answer names both next hops: fe80::1 on each uplink, each with its own MAC.
    let answers =
        raceway_answers(&lab.dir.join("leaf.toml"), &["10.200.0.1".parse().unwrap(), "fd20::1".parse().unwrap()]);
    for answer in &answers {
        assert_eq!(answer["action"], "forward", "{answer}");
        let hops = answer["next_hops"].as_array().unwrap();
        // In the kernel's order, which follows the order the sessions came up in.
        let mut ports: Vec<&str> = hops.iter().map(|hop| hop["port"].as_str().unwrap()).collect();
        ports.sort_unstable();
        assert_eq!(ports, ["up0", "up1"], "{answer}");
        assert!(hops.iter().all(|hop| hop["ip"] == "fe80::1"), "{answer}");
        assert_ne!(hops[0]["mac"], hops[1]["mac"], "each port's fe80::1 is its own neighbour: {answer}");
    }
    // Every destination answers.
    for destination in &destinations {
        let reply = ping(&lab, 0, &["-c", "1", "-W", "2", destination]);
        assert!(reply.status.success(), "ping {destination}: {}", String::from_utf8_lossy(&reply.stdout));
    }
    lab.stop_frr();
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// `config` (from `Lab::config` with `hosts` ports) with `count` uplinks: `up<i>` on link
/// `<prefix>u<i>`, the leaf's address 10.255.0.<2i>/31 (the spine's is .<2i + 1>).
fn with_uplinks(lab: &Lab, config: &str, hosts: usize, count: usize) -> String {
    let mut config = config.to_string();
    for index in 0..count {
        config = config.replace(
            "[control]",
            &format!(
                "[[port]]\nname = \"up{index}\"\ndevice = \"net_af_packet{},iface={}u{index}\"\nspeed_gbps = 1\n\
                 addresses = [\"10.255.0.{}/31\"]\n[control]",
                index + hosts,
                lab.prefix,
                2 * index
            ),
        );
    }
    config
}

/// BFD at 100 ms x 3, as a production fabric runs it; both sides use this profile.
const BFD_FAST: &str =
    "bfd\n profile fast\n  detect-multiplier 3\n  receive-interval 100\n  transmit-interval 100\n !\n!\n";

/// A leaf with host0 and one uplink to spine s0, BGP with BFD (100 ms x 3) between FRR in the
/// spine's namespace and FRR in raceway's; the spine announces 10.200.0.0/24 and learns the
/// hosts' subnet. raceway runs with `--fib-dump` into the lab's directory, `control` in its
/// `[control]` section. Returns once BGP is established, BFD up and host0 reaches 10.200.0.1
/// through the switch.
fn bgp_bfd_lab(tag: &str, control: &str) -> (Lab, std::path::PathBuf, std::path::PathBuf) {
    let mut lab = Lab::new(tag);
    lab.host(0);
    let spine = lab.attach("s0", "u0");
    ok("ip", &["-n", &spine, "addr", "add", "10.255.0.1/31", "dev", "eth0"]);
    ok("ip", &["-n", &spine, "addr", "add", "10.200.0.1/24", "dev", "lo"]);
    let config = with_uplinks(&lab, &lab.config(1, control), 1, 1);
    let dump = lab.dir.join("fib.txt");
    lab.start_with(&config, &["host0", "up0"], &[std::ffi::OsStr::new("--fib-dump"), dump.as_os_str()]);
    let session = |me: &str, peer: &str, asn: u32, peer_asn: u32, extra: &str| {
        format!(
            "hostname {me}\n{BFD_FAST}router bgp {asn}\n bgp router-id {me_ip}\n no bgp ebgp-requires-policy\n \
             no bgp network import-check\n neighbor {peer} remote-as {peer_asn}\n neighbor {peer} timers 1 3\n \
             neighbor {peer} timers connect 1\n neighbor {peer} bfd profile fast\n address-family ipv4 unicast\n{extra} \
             exit-address-family\n",
            me_ip = if asn == 65000 { "10.255.0.0" } else { "10.255.0.1" },
        )
    };
    let spine_dir = lab.frr(&spine, &session("s0", "10.255.0.0", 65001, 65000, "  network 10.200.0.0/24\n"));
    let control = lab.control();
    let leaf = lab.frr(&control, &session("leaf", "10.255.0.1", 65000, 65001, "  redistribute connected\n"));
    wait_for("BGP established and BFD up on both sides", Duration::from_secs(60), || {
        sessions(&leaf, "10.255.0.1").up && sessions(&spine_dir, "10.255.0.0").up
    });
    wait_for("the spine's route back to the hosts", Duration::from_secs(60), || {
        ok("ip", &["-n", &spine, "route", "show", "10.0.0.0/24"]).contains("via 10.255.0.0")
    });
    wait_for("host0 to reach the spine through the switch", Duration::from_secs(30), || {
        ping(&lab, 0, &["-c", "1", "-W", "1", "10.200.0.1"]).status.success()
    });
    (lab, leaf, spine_dir)
}

/// What FRR in `dir` says of its BGP session and BFD peer `peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sessions {
    /// BGP established and BFD up.
    up: bool,
    bgp_established: u64,
    bgp_dropped: u64,
    bfd_up_events: u64,
    bfd_down_events: u64,
}

fn vtysh(dir: &std::path::Path, command: &str) -> serde_json::Value {
    let output = run("vtysh", &["--vty_socket", dir.to_str().unwrap(), "-c", command]);
    serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null)
}

fn sessions(dir: &std::path::Path, peer: &str) -> Sessions {
    let bgp = &vtysh(dir, &format!("show bgp neighbors {peer} json"))[peer];
    let counters = vtysh(dir, "show bfd peers counters json");
    let counters = counters.as_array().and_then(|peers| peers.iter().find(|p| p["peer"] == peer)).cloned();
    let status = vtysh(dir, "show bfd peers json");
    let bfd_up = status.as_array().is_some_and(|peers| peers.iter().any(|p| p["peer"] == peer && p["status"] == "up"));
    let number = |value: &serde_json::Value| value.as_u64().unwrap_or(0);
    let counter = |name: &str| counters.as_ref().map_or(0, |c| number(&c[name]));
    Sessions {
        up: bgp["bgpState"] == "Established" && bfd_up,
        bgp_established: number(&bgp["connectionsEstablished"]),
        bgp_dropped: number(&bgp["connectionsDropped"]),
        bfd_up_events: counter("session-up"),
        bfd_down_events: counter("session-down"),
    }
}

/// Asks raceway for its FIB (SIGUSR1 with `--fib-dump`) and returns the dump's lines, once
/// the new dump is there.
fn fib_dump(lab: &Lab, path: &std::path::Path) -> Vec<String> {
    let _ = std::fs::remove_file(path);
    let pid = lab.switch.as_ref().expect("started").id().to_string();
    ok("kill", &["-USR1", &pid]);
    wait_for("the FIB dump", Duration::from_secs(30), || path.exists());
    std::fs::read_to_string(path).unwrap().lines().map(str::to_string).collect()
}

/// How many routes the dump's header says the FIB holds.
fn dumped_routes(lines: &[String]) -> usize {
    let header = &lines[0];
    let count = header.split(": ").nth(1).and_then(|rest| rest.split(' ').next());
    count.and_then(|count| count.parse().ok()).unwrap_or_else(|| panic!("dump header: {header}"))
}

/// The kernel's main tables (v4 and v6) in raceway's namespace as the dump writes them, but
/// the IPv6 link-local routes: a route via a gateway as the port and the gateway's MAC (from
/// the kernel's neighbours), or `glean` while it has none; a route without one as connected to
/// its port.
fn kernel_routes(control: &str) -> Vec<String> {
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec!["-j", "-n", control];
        all.extend_from_slice(args);
        serde_json::from_str(&ok("ip", &all)).unwrap()
    };
    let mut macs = std::collections::HashMap::new();
    for neighbor in json(&["neigh", "show"]) {
        if let (Some(ip), Some(mac)) = (neighbor["dst"].as_str(), neighbor["lladdr"].as_str()) {
            macs.insert(ip.to_string(), mac.to_string());
        }
    }
    let mut lines = Vec::new();
    for family in ["-4", "-6"] {
        for route in json(&[family, "route", "show", "table", "main"]) {
            let dst = route["dst"].as_str().unwrap();
            let prefix = match dst {
                "default" if family == "-4" => "0.0.0.0/0".to_string(),
                "default" => "::/0".to_string(),
                dst if dst.contains('/') => dst.to_string(),
                dst => format!("{dst}/{}", if family == "-4" { 32 } else { 128 }),
            };
            if prefix.starts_with("fe80:") {
                // Per interface in the kernel; never routed, so not the FIB's.
                continue;
            }
            let dev = route["dev"].as_str().unwrap_or("?");
            let target = match (route["type"].as_str(), route["gateway"].as_str()) {
                (Some("blackhole"), _) => "blackhole".to_string(),
                (Some(kind @ ("unreachable" | "prohibit" | "throw")), _) => format!("kernel {kind}"),
                (_, Some(gateway)) => match macs.get(gateway) {
                    Some(mac) => format!("via {dev} {mac}"),
                    None => "glean".to_string(),
                },
                (_, None) => format!("connected {dev}"),
            };
            lines.push(format!("{prefix} {target}"));
        }
    }
    lines.sort();
    lines
}

/// The dump's routes but the kernel's local table (the switch's own addresses, its subnets'
/// broadcast addresses, IPv6 anycast), sorted as `kernel_routes`.
fn forwarding_routes(dump: &[String]) -> Vec<String> {
    let local = |line: &str| {
        [" local", " kernel local", " kernel broadcast", " kernel anycast"].iter().any(|end| line.ends_with(end))
    };
    let mut routes: Vec<String> =
        dump[1..].iter().filter(|line| !line.starts_with("neighbor ") && !local(line)).cloned().collect();
    routes.sort();
    routes
}

/// Writes an `ip -batch` file of `verb` for the /32 routes numbered `range` (from 10.64.0.0),
/// via `via` unless it is empty.
fn route_batch(dir: &std::path::Path, name: &str, verb: &str, range: std::ops::Range<u32>, via: &str) -> String {
    let path = dir.join(name);
    let mut text = String::with_capacity(64 * range.len());
    for i in range {
        let via = if via.is_empty() { String::new() } else { format!(" via {via}") };
        text.push_str(&format!("route {verb} 10.{}.{}.{}/32{via}\n", 64 + (i >> 16), (i >> 8) & 255, i & 255));
    }
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A leaf learning a production-sized table: 100,000 routes come into its kernel, then half go
/// and a tenth move to another next hop, then all go, while BGP with BFD at 100 ms x 3 runs on
/// the uplink and a host pings through. No BFD or BGP session flaps, nothing is lost, and the
/// FIB the workers forward by equals the kernel's table, prefix by prefix and next hop by
/// next hop, after the churn and after the withdrawal.
#[test]
fn bgp_and_bfd_stay_up_while_100k_routes_come_and_go_and_the_fib_matches_the_kernel() {
    let _alone = alone();
    let (mut lab, leaf, spine) = bgp_bfd_lab("rwd", "");
    let control = lab.control();
    let dump_path = lab.dir.join("fib.txt");
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    let base = dumped_routes(&fib_dump(&lab, &dump_path));
    let ns0 = lab.netns("h0");
    let steady = Command::new("ip")
        // A deadline, so that a failing test (which never interrupts it) leaves no ping behind.
        // -O reports each echo overtaken by the next without a reply, so that an echo still in
        // flight when the pinger is stopped (rtt reaches tens of ms beside a busy neighbour) is
        // not counted as lost, as ping's own summary would.
        .args(["netns", "exec", &ns0, "ping", "-O", "-n", "-i", "0.02", "-W", "2", "-w", "600", "10.200.0.1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let batch = |name: &str, verb: &str, range: std::ops::Range<u32>, via: &str| {
        let path = route_batch(&lab.dir, name, verb, range, via);
        ok("ip", &["-n", &control, "-batch", &path]);
    };
    let wait_routes = |lab: &Lab, want: usize| {
        let mut have = 0;
        wait_for("the FIB to hold the kernel's routes", Duration::from_secs(120), || {
            have = dumped_routes(&fib_dump(lab, &dump_path));
            have == want
        });
    };
    batch("add.batch", "add", 0..100_000, "10.255.0.1 dev up0");
    wait_routes(&lab, base + 100_000);
    // Churn: the first half withdrawn, the next 10,000 moved to host0 as their next hop.
    batch("del.batch", "del", 0..50_000, "10.255.0.1 dev up0");
    batch("move.batch", "replace", 50_000..60_000, "10.0.0.2 dev host0");
    wait_routes(&lab, base + 50_000);
    // The moved routes resolve once the kernel knows host0's MAC (it does: host0 pinged).
    let dump = fib_dump(&lab, &dump_path);
    assert!(dump.iter().any(|line| line.starts_with("10.64.195.80/32 via host0 ")), "a moved route in the FIB");
    assert_eq!(forwarding_routes(&dump), kernel_routes(&control), "the FIB after churn is the kernel's table");
    batch("rest.batch", "del", 50_000..100_000, "");
    wait_routes(&lab, base);
    assert_eq!(forwarding_routes(&fib_dump(&lab, &dump_path)), kernel_routes(&control), "after the withdrawal");
    let after = (sessions(&leaf, "10.255.0.1"), sessions(&spine, "10.255.0.0"));
    assert_eq!(after, before, "no BGP or BFD session went down (leaf, spine)");
    assert!(after.0.up && after.1.up);
    ok("kill", &["-INT", &steady.id().to_string()]);
    let steady = steady.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&steady.stdout).to_string();
    lab.stop_frr();
    let stats = lab.stop();
    let (answered, lost) = echo_replies(&text);
    // Asserted once the switch has stopped, so that a loss comes with its counters.
    assert!(
        answered > 100 && lost.is_empty(),
        "pings through the switch during the churn: {answered} answered, lost {lost:?}\nhost0: {}\nup0: {}\ncontrol: {}",
        stats["ports"]["host0"],
        stats["ports"]["up0"],
        stats["control"]
    );
    assert_eq!(stats["control"]["fib_resyncs"], 0, "no netlink message lost: {}", stats["control"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// What `ping -O -n` printed: how many echoes were answered, and the sequence numbers of those
/// overtaken without a reply that never got one later (the last echo, in flight when ping
/// stopped, is neither).
fn echo_replies(text: &str) -> (usize, Vec<u64>) {
    let seq = |line: &str| -> Option<u64> { line.split("icmp_seq=").nth(1)?.split_whitespace().next()?.parse().ok() };
    let answered: std::collections::HashSet<u64> =
        text.lines().filter(|line| line.contains(" bytes from ")).filter_map(seq).collect();
    let mut lost: Vec<u64> = text
        .lines()
        .filter(|line| line.starts_with("no answer yet"))
        .filter_map(seq)
        .filter(|seq| !answered.contains(seq))
        .collect();
    lost.sort_unstable();
    lost.dedup();
    (answered.len(), lost)
}

/// A misbehaving BGP peer: ICMP echo at line rate to the leaf's address on that very uplink,
/// then TTL=1 packets through it, each for longer than the BGP hold time. Each flood is cut to
/// its CoPP class's rate on that port and waits behind BGP and BFD, so both sessions stay up,
/// and ARP on the uplink still resolves; the stats show each flood in its class's `policed`.
#[test]
fn floods_from_the_bgp_peer_leave_its_sessions_up_and_show_in_their_classes() {
    let _alone = alone();
    // The floods' classes are policed below what hping3 sends even when it gets little CPU:
    // at nice 19 beside a busy neighbour (`stress-ng --cpu 2`) it sent about 1,200 echoes a
    // second, under ip2me's default rate of 6,000, and nothing was policed.
    let copp = "[control.copp.ip2me]\npps = 200\nburst = 200\n[control.copp.ttl]\npps = 200\nburst = 200";
    let (mut lab, leaf, spine_dir) = bgp_bfd_lab("rwf", copp);
    let (control, spine) = (lab.control(), lab.netns("s0"));
    let before = (sessions(&leaf, "10.255.0.1"), sessions(&spine_dir, "10.255.0.0"));
    // hping3 as fast as it sends: echo requests to the leaf's own address, then echo requests
    // with TTL 1 to host0, which expire at the leaf. At the lowest CPU priority: the flood's
    // source stands for another machine. At normal priority, in one run of `make test` on two
    // CPUs, the spine's BFD session went down (300 ms detection) while the leaf's stayed up:
    // there the flood competes for the CPU with the spine's own bfdd, as no remote attacker
    // would.
    for flood in [&["10.255.0.0"][..], &["--ttl", "1", "10.0.0.2"][..]] {
        let mut args = vec!["netns", "exec", spine.as_str(), "nice", "-n", "19", "hping3", "--flood", "--icmp", "-q"];
        args.extend_from_slice(flood);
        let mut hping = Command::new("ip").args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let started = Instant::now();
        // ARP both ways across the flooded link: forgotten, then learned again.
        ok("ip", &["-n", &spine, "neigh", "flush", "dev", "eth0"]);
        ok("ip", &["-n", &control, "neigh", "flush", "dev", "up0"]);
        let resolved = |ns: &str, dev: &str, ip: &str| {
            let text = ok("ip", &["-n", ns, "neigh", "show", "dev", dev, ip]);
            text.contains("lladdr") && !text.contains("FAILED") && !text.contains("INCOMPLETE")
        };
        wait_for("ARP on the flooded uplink", Duration::from_secs(10), || {
            resolved(&spine, "eth0", "10.255.0.0") && resolved(&control, "up0", "10.255.0.1")
        });
        // Longer than the BGP hold time (3 s), a dozen BFD detection times.
        wait_for("the flood to run 4 s", Duration::from_secs(10), || started.elapsed() >= Duration::from_secs(4));
        let during = (sessions(&leaf, "10.255.0.1"), sessions(&spine_dir, "10.255.0.0"));
        let _ = hping.kill();
        let _ = hping.wait();
        assert_eq!(during, before, "no BGP or BFD session went down during the flood {flood:?} (leaf, spine)");
    }
    lab.stop_frr();
    let stats = lab.stop();
    let up0 = &stats["ports"]["up0"];
    let class = |counter: &str, class: &str| up0[counter][class].as_u64().unwrap();
    assert!(class("policed", "ip2me") > 0, "the echo flood, cut to its rate: {up0}");
    assert!(class("policed", "ttl") > 0, "the TTL flood: {up0}");
    for session in ["bgp", "bfd", "arp"] {
        assert_eq!(class("policed", session), 0, "{session} never policed: {up0}");
        assert!(class("punted", session) > 0, "{session} reached the kernel: {up0}");
    }
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// ICMP echo requests namespace `<prefix><name>` has received (its /proc/net/snmp).
fn echoes(lab: &Lab, name: &str) -> u64 {
    let snmp = ok("ip", &["netns", "exec", &lab.netns(name), "cat", "/proc/net/snmp"]);
    let lines: Vec<&str> = snmp.lines().filter(|line| line.starts_with("Icmp:")).collect();
    let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
    names.zip(values).find(|(name, _)| *name == "InEchos").map(|(_, value)| value.parse().unwrap()).expect("InEchos")
}

/// Linux TCP with ECN through a port shaped below the veth's rate, in a lossless class with
/// an ECN profile: raceway marks CE, the receiver echoes ECE, the sender backs off without
/// collapsing, and nothing is dropped.
///
/// The goodput is printed, not held to the shaped rate: on two shared vCPUs the same binary
/// gave 26 to 95 Mb/s from run to run (the hosts' TCP, the veths and raceway's worker share
/// the CPUs), and speed is for perf/, never a timed assertion here. The floor of a tenth of
/// the rate only catches a collapse (marking every frame from the start would leave the
/// sender's window at its minimum).
#[test]
fn tcp_with_ecn_through_a_shaped_port_backs_off_and_marks_not_drops() {
    let _alone = alone();
    let mut lab = Lab::new("rwd");
    lab.host(0);
    lab.host(1);
    for host in ["h0", "h1"] {
        ok("ip", &["netns", "exec", &lab.netns(host), "sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1"]);
    }
    // host1 is shaped to 100 Mb/s; TCP in DSCP 26 is lossless TC3, marked from 20 KB.
    let config = lab
        .config(2, "")
        .replacen("speed_gbps = 1\naddresses = [\"10.0.1.1/24\"", "speed_gbps = 0.1\naddresses = [\"10.0.1.1/24\"", 1)
        .replacen(
            "[[port]]",
            "[qos]\ndscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n\
             [qos.ecn.3]\nkmin_bytes = 20000\nkmax_bytes = 100000\npmax = 0.1\n[[port]]",
            1,
        );
    assert!(config.contains("speed_gbps = 0.1"), "{config}");
    lab.start(&config, &["host0", "host1"]);
    let (ns0, ns1) = (lab.netns("h0"), lab.netns("h1"));
    let mut server =
        Command::new("ip").args(["netns", "exec", &ns1, "iperf3", "-s", "-1"]).stdout(Stdio::null()).spawn().unwrap();
    wait_for("iperf3 to listen", Duration::from_secs(10), || {
        ok("ip", &["netns", "exec", &ns1, "ss", "-ltn"]).contains(":5201")
    });
    // The ACKs coming back to the sender, captured for ECE.
    let acks = lab.dir.join("acks.pcap");
    let mut capture = Command::new("ip")
        .args(["netns", "exec", &ns0, "tcpdump", "-i", "eth0", "-U", "-w", acks.to_str().unwrap(), "tcp src port 5201"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // tcpdump says "listening on" once it captures.
    let mut stderr = std::io::BufReader::new(capture.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.contains("listening"), "tcpdump: {line}");
    let client = lab.in_host(0, &["iperf3", "-c", "10.0.1.2", "-t", "4", "-J", "--tos", "104"]);
    let _ = server.wait();
    ok("kill", &["-INT", &capture.id().to_string()]);
    let _ = capture.wait();
    assert!(client.status.success(), "iperf3: {}", String::from_utf8_lossy(&client.stdout));
    let report: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap();
    let goodput = report["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    let ece = ok("tcpdump", &["-r", acks.to_str().unwrap(), "-n", "tcp[13] & 0x40 != 0"]);
    let stats = lab.stop();
    let queue = &stats["ports"]["host1"]["queues"][3];
    eprintln!(
        "goodput {:.1} Mb/s through 100 Mb/s; {} frames marked CE; {} ACKs with ECE; max queue {} bytes",
        goodput / 1e6,
        queue["ecn_marked"],
        ece.lines().count(),
        queue["max_depth_bytes"]
    );
    assert!(queue["ecn_marked"].as_u64().unwrap() > 0, "raceway marked CE: {queue}");
    assert!(ece.lines().count() > 0, "the receiver echoed ECE");
    assert!(goodput >= 10e6, "goodput {:.1} Mb/s through a 100 Mb/s port: collapsed", goodput / 1e6);
    let drops: u64 = ["host0", "host1"]
        .iter()
        .flat_map(|port| stats["ports"][port]["drops"].as_object().unwrap().values())
        .map(|value| value.as_u64().unwrap())
        .sum();
    assert_eq!(drops, 0, "nothing dropped: {}", stats["ports"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}

/// A small PRNG for the random route sets (xorshift64*): the seed is printed and can be given.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The differential test's plan: four ports (`host0`-`host3`, 10.0.i.1/24 and fd00:i::1/64),
/// and in raceway's namespace `lo` up and a veth pair `xa`/`xb` (10.250.0.1/24, fd50::1/64):
/// an interface that is no port.
struct FibPlan {
    control: String,
    /// Where batches are written, numbered, with what `ip` said of each.
    dir: std::path::PathBuf,
    batches: usize,
    ports: usize,
    /// Nexthop object ids defined (single and group) and their families (true: IPv4).
    objects: Vec<(u32, bool)>,
}

impl FibPlan {
    /// A gateway on port `port` of the given family: on the port's subnet, or (IPv6) a
    /// link-local one (fe80::1 on every port, as BGP unnumbered peers use).
    fn gateway(&self, random: &mut Random, port: usize, v4: bool) -> String {
        let host = 10 + random.below(12);
        match (v4, random.below(3)) {
            (true, _) => format!("10.0.{port}.{host}"),
            (false, 0) => "fe80::1".to_string(),
            (false, 1) => format!("fe80::{host:x}"),
            (false, _) => format!("fd00:{port}::{host:x}"),
        }
    }

    /// A random prefix of any length from `shortest` (IPv4 from /8, in 10.0.0.0/8; IPv6 from
    /// /8, in fd00::/8). Default routes come in a delta round of their own: until then, some
    /// destinations have no route.
    fn prefix(random: &mut Random, v4: bool, shortest: u32) -> String {
        if v4 {
            let shortest = shortest.clamp(8, 32);
            let len = shortest + random.below(u64::from(33 - shortest)) as u32;
            let bits = (10u32 << 24) | (random.next() as u32 & 0x00ff_ffff);
            let mask = if len == 32 { u32::MAX } else { !(u32::MAX >> len) };
            format!("{}/{len}", std::net::Ipv4Addr::from(bits & mask))
        } else {
            let shortest = (shortest * 4).clamp(8, 128);
            let len = shortest + random.below(u64::from(129 - shortest)) as u32;
            let bits = (0xfdu128 << 120)
                | (u128::from(random.next()) << 56 | u128::from(random.next() >> 8)) & (u128::MAX >> 8);
            let mask = if len == 128 { u128::MAX } else { !(u128::MAX >> len) };
            format!("{}/{len}", std::net::Ipv6Addr::from(bits & mask))
        }
    }

    /// One `ip -batch` line adding (or, with `verb` "replace", replacing) a random route.
    fn route(&self, random: &mut Random, verb: &str, prefix: Option<&str>, metric: Option<u64>) -> String {
        let v4 = prefix.map_or(random.chance(55), |prefix| prefix.contains('.'));
        let kind = random.below(100);
        // An AnyIP range of the local table (IPv6) and a source route cover what is inside
        // them: kept long, so that they do not cover most of the plan.
        let shortest = if (84..=86).contains(&kind) || (!v4 && (91..=93).contains(&kind)) { 24 } else { 8 };
        let prefix = prefix.map_or_else(|| Self::prefix(random, v4, shortest), str::to_string);
        // The metric comes straight after the prefix (after a nexthop list it would not parse).
        let metric = metric.or_else(|| random.chance(30).then(|| 1 + random.below(30)));
        let prefix = match metric {
            Some(metric) => format!("{prefix} metric {metric}"),
            None => prefix,
        };
        let port = random.below(self.ports as u64) as usize;
        let line = match kind {
            0..=34 => format!("route {verb} {prefix} via {} dev host{port}", self.gateway(random, port, v4)),
            35..=39 if v4 => {
                format!("route {verb} {prefix} via 10.9.{port}.{} dev host{port} onlink", random.below(200))
            }
            40..=54 => {
                let hops: Vec<String> = (0..2 + random.below(2))
                    .map(|_| {
                        let port = random.below(self.ports as u64) as usize;
                        let weight = 1 + random.below(10);
                        format!("nexthop via {} dev host{port} weight {weight}", self.gateway(random, port, v4))
                    })
                    .collect();
                format!("route {verb} {prefix} {}", hops.join(" "))
            }
            55..=69 => {
                let ids: Vec<u32> =
                    self.objects.iter().filter(|(_, family)| *family == v4).map(|(id, _)| *id).collect();
                if ids.is_empty() {
                    format!("route {verb} blackhole {prefix}")
                } else {
                    format!("route {verb} {prefix} nhid {}", random.pick(&ids))
                }
            }
            70..=74 => format!("route {verb} blackhole {prefix}"),
            75..=77 => format!("route {verb} unreachable {prefix}"),
            78..=80 => format!("route {verb} prohibit {prefix}"),
            81..=83 => format!("route {verb} throw {prefix}"),
            84..=86 => format!("route {verb} local {prefix} dev lo"),
            87..=90 => {
                let gateway = if v4 { "10.250.0.2" } else { "fd50::2" };
                format!("route {verb} {prefix} via {gateway} dev xa")
            }
            91..=93 if v4 => {
                format!("route {verb} {prefix} tos 0x10 via {} dev host{port}", self.gateway(random, port, v4))
            }
            91..=93 => format!(
                "route {verb} {prefix} from fd99:{:x}::/64 via {} dev host{port}",
                random.below(9),
                self.gateway(random, port, v4)
            ),
            94..=96 if v4 => {
                format!("route {verb} {prefix} via {} dev host{port} table default", self.gateway(random, port, v4))
            }
            _ => format!("route {verb} {prefix} dev host{port}"),
        };
        // A batch line takes no family option: the prefix's own says it.
        line
    }

    /// Runs `lines` with `ip -batch -force` in raceway's namespace (some fail, as they may:
    /// a duplicate, a family mismatch; the kernel's tables are the truth compared with).
    fn batch(&mut self, lines: &[String]) {
        self.batches += 1;
        let path = self.dir.join(format!("batch-{}.txt", self.batches));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let output = run("ip", &["-n", &self.control, "-force", "-batch", path.to_str().unwrap()]);
        std::fs::write(path.with_extension("err"), &output.stderr).unwrap();
        // A line ip cannot parse ends the batch, even with -force: the generator must not write one.
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr
                .lines()
                .any(|line| line.contains("is unknown") || line.contains("expected") || line.contains("is invalid")),
            "{}: a line ip could not parse:\n{stderr}",
            path.display()
        );
    }

    /// Every route of the kernel's tables (`ip -j route show table all`, both families).
    fn kernel_routes(&self) -> Vec<serde_json::Value> {
        let mut routes = Vec::new();
        for family in ["-4", "-6"] {
            let text = ok("ip", &["-n", &self.control, family, "-j", "route", "show", "table", "all"]);
            routes.extend(serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap());
        }
        routes
    }
}

/// A kernel route's destination as `a/len`.
fn route_prefix(dst: &str, v4: bool) -> String {
    match dst {
        "default" => (if v4 { "0.0.0.0/0" } else { "::/0" }).to_string(),
        dst if dst.contains('/') => dst.to_string(),
        dst => format!("{dst}/{}", if v4 { 32 } else { 128 }),
    }
}

/// Addresses at the edges of `prefix` (its first and last, and those just outside) and three
/// inside; none a front door drops before any lookup (link-local, multicast, loopback,
/// unspecified, broadcast).
fn edges(prefix: &str, random: &mut Random) -> Vec<std::net::IpAddr> {
    use std::net::IpAddr;
    let (address, len) = prefix.split_once('/').unwrap();
    let len: u32 = len.parse().unwrap();
    let address: IpAddr = address.parse().unwrap();
    let mut out = Vec::new();
    match address {
        IpAddr::V4(v4) => {
            let first = u32::from(v4);
            let size = if len == 0 { u32::MAX } else { (1u32 << (32 - len)) - 1 };
            let last = first | size;
            let mut inside = || first | (random.next() as u32 & size);
            for candidate in [first, last, first.wrapping_sub(1), last.wrapping_add(1), inside(), inside(), inside()] {
                out.push(IpAddr::V4(candidate.into()));
            }
        }
        IpAddr::V6(v6) => {
            let first = u128::from(v6);
            let size = if len == 0 { u128::MAX } else { (1u128 << (128 - len)) - 1 };
            let last = first | size;
            let mut inside = || first | ((u128::from(random.next()) << 64 | u128::from(random.next())) & size);
            for candidate in [first, last, first.wrapping_sub(1), last.wrapping_add(1), inside(), inside(), inside()] {
                out.push(IpAddr::V6(candidate.into()));
            }
        }
    }
    out.retain(|address| match address {
        IpAddr::V4(v4) => {
            !(v4.is_loopback() || v4.is_multicast() || v4.is_broadcast() || v4.is_unspecified() || v4.is_link_local())
                && v4.octets()[0] != 0
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(*v6);
            !(v6.is_loopback() || v6.is_multicast() || v6.is_unspecified() || bits >> 118 == 0x3fa)
        }
    });
    out
}

/// What the kernel says for one destination: it delivers it itself (`local`, `broadcast`,
/// `anycast`), forwards it by a route (`fibmatch`: the FIB entry that matches), or the error
/// of the lookup.
#[derive(Debug, Clone)]
enum KernelAnswer {
    Delivered(String),
    Route(serde_json::Value),
    Error(String),
}

/// The kernel's answer for each address: `ip -j route get` says whether it delivers or
/// forwards (its local table comes first, which `fibmatch` does not show) or fails; for what
/// it forwards, `ip -j route get fibmatch` gives the route.
fn kernel_answers(control: &str, addresses: &[std::net::IpAddr]) -> Vec<KernelAnswer> {
    let plain = route_gets(control, addresses, "");
    let matched = route_gets(control, addresses, "fibmatch ");
    plain
        .into_iter()
        .zip(matched)
        .map(|(plain, matched)| match plain {
            Err(why) => KernelAnswer::Error(why),
            Ok(route) => {
                let kind = route["type"].as_str().unwrap_or("unicast").to_string();
                let local = route["cache"].as_array().into_iter().flatten().any(|flag| flag == "local");
                match (kind.as_str(), local, matched) {
                    ("blackhole", _, _) => KernelAnswer::Route(route),
                    ("broadcast" | "anycast", _, _) => KernelAnswer::Delivered(kind),
                    (_, true, _) | ("local", _, _) => KernelAnswer::Delivered("local".into()),
                    (_, false, Ok(matched)) => KernelAnswer::Route(matched),
                    (_, false, Err(why)) => KernelAnswer::Error(why),
                }
            }
        })
        .collect()
}

/// `ip -j route get [fibmatch] ADDR` for each address, in one batch: the route, or the error.
fn route_gets(control: &str, addresses: &[std::net::IpAddr], how: &str) -> Vec<Result<serde_json::Value, String>> {
    let mut child = Command::new("ip")
        .args(["-n", control, "-j", "-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = addresses.iter().map(|address| format!("route get {how}{address}\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(input.as_bytes()).unwrap();
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    // Errors name the batch line that failed: "RTNETLINK answers: WHY" then "Command failed -:N".
    let mut failed = std::collections::HashMap::new();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut why = String::new();
    for line in stderr.lines() {
        if let Some(number) = line.strip_prefix("Command failed -:") {
            failed.insert(number.trim().parse::<usize>().unwrap(), std::mem::take(&mut why));
        } else {
            why = line.trim_start_matches("RTNETLINK answers: ").to_string();
        }
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answered = stdout.lines().filter(|line| line.starts_with('[')).count();
    assert_eq!(answered + failed.len(), addresses.len(), "one answer per question:\n{stderr}");
    let mut routes = stdout.lines().filter(|line| line.starts_with('['));
    (1..=addresses.len())
        .map(|line| match failed.remove(&line) {
            Some(why) => Err(why),
            None => {
                let answer: Vec<serde_json::Value> =
                    serde_json::from_str(routes.next().expect("an answer per line")).unwrap();
                Ok(answer.into_iter().next().expect("one route"))
            }
        })
        .collect()
}

/// What the comparison needs of the kernel besides its answers: the usable neighbours (by
/// interface and address, their MAC) and the prefixes of routes the FIB sends to the kernel
/// for want of representing them (with the reason raceway gives).
struct KernelContext {
    neighbors: std::collections::HashMap<(String, String), String>,
    /// The nexthop object of the main-table route in force (the lowest metric) of each prefix,
    /// when it is over one.
    objects: std::collections::HashMap<String, u64>,
    /// Each nexthop object's next hops (a group's expanded), as `ip -j route` shows them.
    nexthops: std::collections::HashMap<u64, Vec<serde_json::Value>>,
    unrepresented: std::collections::HashSet<(String, &'static str)>,
}

fn kernel_context(plan: &FibPlan) -> KernelContext {
    let text = ok("ip", &["-n", &plan.control, "-j", "neigh", "show"]);
    let mut neighbors = std::collections::HashMap::new();
    for entry in serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap() {
        let usable = entry["state"].as_array().into_iter().flatten().any(|state| {
            matches!(state.as_str(), Some("REACHABLE" | "STALE" | "DELAY" | "PROBE" | "PERMANENT" | "NOARP"))
        });
        if let (true, Some(mac)) = (usable, entry["lladdr"].as_str()) {
            neighbors.insert(
                (entry["dev"].as_str().unwrap().to_string(), entry["dst"].as_str().unwrap().to_string()),
                mac.to_string(),
            );
        }
    }
    let mut unrepresented = std::collections::HashSet::new();
    let mut in_force: std::collections::HashMap<String, (u64, Option<u64>)> = std::collections::HashMap::new();
    for route in plan.kernel_routes() {
        let dst = route["dst"].as_str().unwrap_or("");
        let v4 = !dst.contains(':') && dst != "default"
            || (dst == "default" && route["gateway"].as_str().is_none_or(|g| !g.contains(':')));
        let prefix = route_prefix(dst, v4);
        if route["table"].is_null() && route["type"].is_null() && route["tos"].is_null() && route["from"].is_null() {
            let metric = route["metric"].as_u64().unwrap_or(0);
            let entry = in_force.entry(prefix.clone()).or_insert((u64::MAX, None));
            if metric < entry.0 {
                *entry = (metric, route["nhid"].as_u64());
            }
        }
        if route["tos"].as_str().is_some_and(|tos| tos != "0" && tos != "default") {
            unrepresented.insert((prefix.clone(), "tos"));
        }
        if route["from"].is_string() {
            unrepresented.insert((prefix.clone(), "source"));
        }
        if route["table"] == "default" {
            unrepresented.insert((prefix, "default_table"));
        }
    }
    // Policy rules that select by destination (the kernel's defaults select everything).
    let text = ok("ip", &["-n", &plan.control, "-j", "rule", "show"]);
    for rule in serde_json::from_str::<Vec<serde_json::Value>>(&text).unwrap_or_default() {
        if let (Some(dst), Some(len)) = (rule["dst"].as_str(), rule["dstlen"].as_u64()) {
            unrepresented.insert((format!("{dst}/{len}"), "rule"));
        }
    }
    let text = ok("ip", &["-n", &plan.control, "-j", "nexthop", "show"]);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
    let single: std::collections::HashMap<u64, &serde_json::Value> = listed
        .iter()
        .filter(|entry| entry["group"].is_null())
        .map(|entry| (entry["id"].as_u64().unwrap(), entry))
        .collect();
    let mut nexthops = std::collections::HashMap::new();
    for entry in &listed {
        let id = entry["id"].as_u64().unwrap();
        let hops = match entry["group"].as_array() {
            Some(members) => members
                .iter()
                .filter_map(|member| {
                    let hop = single.get(&member["id"].as_u64()?)?;
                    Some(serde_json::json!({ "dev": hop["dev"], "gateway": hop["gateway"], "weight": member["weight"].as_u64().unwrap_or(1) }))
                })
                .collect(),
            None => vec![serde_json::json!({ "dev": entry["dev"], "gateway": entry["gateway"] })],
        };
        nexthops.insert(id, hops);
    }
    let objects = in_force.into_iter().filter_map(|(prefix, (_, id))| Some((prefix, id?))).collect();
    KernelContext { neighbors, objects, nexthops, unrepresented }
}

/// Whether prefix `inner` (`a/len`) lies inside `outer`.
fn prefix_inside(inner: &str, outer: &str) -> bool {
    let parse = |prefix: &str| -> Option<(u128, u32, bool)> {
        let (address, len) = prefix.split_once('/')?;
        let len: u32 = len.parse().ok()?;
        match address.parse::<std::net::IpAddr>().ok()? {
            std::net::IpAddr::V4(v4) => Some((u128::from(u32::from(v4)) << 96, len, true)),
            std::net::IpAddr::V6(v6) => Some((u128::from(v6), len, false)),
        }
    };
    let (Some((inner, inner_len, inner_v4)), Some((outer, outer_len, outer_v4))) = (parse(inner), parse(outer)) else {
        return false;
    };
    let mask = |len: u32| if len == 0 { 0 } else { u128::MAX << (128 - len) };
    inner_v4 == outer_v4 && inner_len >= outer_len && inner & mask(outer_len) == outer & mask(outer_len)
}

/// Why raceway's `answer` for `address` differs from the kernel's, or `None` when they agree.
fn disagreement(
    address: std::net::IpAddr,
    kernel: &KernelAnswer,
    answer: &serde_json::Value,
    context: &KernelContext,
    ports: &[String],
) -> Option<String> {
    let action = answer["action"].as_str().unwrap_or("");
    let reason = answer["reason"].as_str().unwrap_or("");
    let prefix = answer["prefix"].as_str().unwrap_or("");
    let differ = || Some(format!("{address}: kernel {kernel:?}, raceway {answer}"));
    // Routes raceway cannot represent send their prefix to the kernel: right, if slow.
    if action == "kernel" && ["tos", "source", "default_table", "rule"].contains(&reason) {
        // A source route or a rule covers what is inside its prefix (the kernel's lookup goes
        // into its subtree, or the rule's table first), the others only their own prefix.
        let covering = ["source", "rule"].contains(&reason);
        let known = context
            .unrepresented
            .iter()
            .any(|(at, why)| *why == reason && (at == prefix || (covering && prefix_inside(prefix, at))));
        return (!known).then(|| format!("{address}: raceway says {reason} at {prefix}, the kernel has no such route"));
    }
    // A throw route ends the main table's lookup; the kernel goes on in the default table.
    if action == "kernel" && reason == "throw" {
        let agrees = match kernel {
            KernelAnswer::Error(why) => why == "Network is unreachable",
            KernelAnswer::Route(route) => route["table"] == "default",
            KernelAnswer::Delivered(_) => false,
        };
        return (!agrees).then(differ).flatten();
    }
    let route = match kernel {
        KernelAnswer::Delivered(kind) => return (action != "kernel" || reason != kind).then(differ).flatten(),
        KernelAnswer::Error(why) => {
            let agrees = match why.as_str() {
                "Network is unreachable" => action == "kernel" && reason == "no_route",
                "No route to host" => action == "kernel" && reason == "unreachable",
                "Permission denied" => action == "kernel" && reason == "prohibit",
                "Invalid argument" => action == "drop" && reason == "blackhole",
                _ => false,
            };
            return if agrees { None } else { differ() };
        }
        KernelAnswer::Route(route) => route,
    };
    if route["type"] == "blackhole" {
        return (action != "drop" || reason != "blackhole").then(differ).flatten();
    }
    // IPv6 `fibmatch` may name another route over the same nexthop object than the one that
    // matched (the kernel reports the object's first route): the same next hops, which is
    // what forwarding uses, provided raceway's prefix is over that object in the kernel too.
    let same_object = route["nhid"].as_u64().is_some() && address.is_ipv6() && context.objects.contains_key(prefix);
    if route_prefix(route["dst"].as_str().unwrap_or(""), address.is_ipv4()) != prefix && !same_object {
        return differ();
    }
    match route["type"].as_str().unwrap_or("unicast") {
        "unicast" => {}
        _ => return differ(),
    }
    let listed: Vec<serde_json::Value>;
    let hops: Vec<&serde_json::Value> = match route["nexthops"].as_array() {
        // The object raceway's prefix is over, when fibmatch named another route.
        _ if same_object && route_prefix(route["dst"].as_str().unwrap_or(""), false) != prefix => {
            let id = context.objects[prefix];
            listed = context.nexthops.get(&id).cloned().unwrap_or_default();
            listed.iter().collect()
        }
        Some(hops) => hops.iter().collect(),
        None => vec![route],
    };
    if hops.iter().any(|hop| !ports.iter().any(|port| hop["dev"].as_str() == Some(port))) {
        return (action != "kernel" || reason != "not_a_port").then(differ).flatten();
    }
    let key =
        |port: Option<&str>, ip: Option<&str>, weight: u64| (port.map(str::to_string), ip.map(str::to_string), weight);
    // A lone next hop's weight means nothing (the kernel does not show it).
    let weight = |hop: &serde_json::Value, lone: bool| if lone { 1 } else { hop["weight"].as_u64().unwrap_or(1) };
    let mut expected: Vec<_> = hops
        .iter()
        .map(|hop| key(hop["dev"].as_str(), hop["gateway"].as_str(), weight(hop, hops.len() == 1)))
        .collect();
    let ours = answer["next_hops"].as_array().cloned().unwrap_or_default();
    let mut got: Vec<_> =
        ours.iter().map(|hop| key(hop["port"].as_str(), hop["ip"].as_str(), weight(hop, ours.len() == 1))).collect();
    expected.sort();
    got.sort();
    if expected != got {
        return differ();
    }
    // Each next hop is used exactly when the kernel's is alive and its neighbour usable, with
    // that neighbour's MAC.
    let mut used = false;
    for hop in &hops {
        let dev = hop["dev"].as_str().unwrap().to_string();
        let gateway = hop["gateway"].as_str().map_or_else(|| address.to_string(), str::to_string);
        let dead = hop["flags"].as_array().into_iter().flatten().any(|flag| flag == "dead");
        let mac = if dead { None } else { context.neighbors.get(&(dev.clone(), gateway)) };
        let ours = ours
            .iter()
            .find(|our| our["port"].as_str() == Some(&dev) && our["ip"].as_str() == hop["gateway"].as_str())?;
        if ours["mac"].as_str() != mac.map(String::as_str) {
            return differ();
        }
        used |= mac.is_some();
    }
    let expected_action = if used { "forward" } else { "glean" };
    (action != expected_action).then(differ).flatten()
}

/// raceway's answers for `addresses` (`show route --json`).
fn raceway_answers(config: &std::path::Path, addresses: &[std::net::IpAddr]) -> Vec<serde_json::Value> {
    let mut command = raceway();
    command.args(["show", "--json", "-c"]).arg(config).arg("route");
    command.args(addresses.iter().map(ToString::to_string));
    let output = command.output().unwrap();
    assert!(output.status.success(), "show route: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The disagreements for `addresses`, asked again (both sides) while some remain, for up to
/// 10 s: raceway follows the kernel within milliseconds, but a neighbour the kernel learns
/// between the two questions must not count.
///
/// Also returns how many of raceway's first answers had each action and reason, so that a run
/// that never met some kind of route is seen.
fn disagreements(
    plan: &FibPlan,
    config: &std::path::Path,
    addresses: &[std::net::IpAddr],
    ports: &[String],
) -> (Vec<String>, std::collections::BTreeMap<String, usize>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut asking: Vec<std::net::IpAddr> = addresses.to_vec();
    let mut kinds = std::collections::BTreeMap::new();
    loop {
        let kernel = kernel_answers(&plan.control, &asking);
        let ours = raceway_answers(config, &asking);
        if kinds.is_empty() {
            for answer in &ours {
                let kind =
                    format!("{} {}", answer["action"].as_str().unwrap_or(""), answer["reason"].as_str().unwrap_or(""));
                *kinds.entry(kind).or_default() += 1;
            }
        }
        let context = kernel_context(plan);
        assert_eq!(ours.len(), asking.len());
        let found: Vec<(std::net::IpAddr, String)> = asking
            .iter()
            .zip(&kernel)
            .zip(&ours)
            .filter_map(|((address, kernel), ours)| {
                Some((*address, disagreement(*address, kernel, ours, &context, ports)?))
            })
            .collect();
        if found.is_empty() || Instant::now() > deadline {
            return (found.into_iter().map(|(_, why)| why).collect(), kinds);
        }
        asking = found.into_iter().map(|(address, _)| address).collect();
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The FIB is the kernel's: random routes of every kind in raceway's namespace (both
/// families, at least 2,000, over nexthop objects and groups, with weights, metrics, onlink
/// and unresolved gateways, routes to an interface that is no port, tos, from and the default
/// table), then random deltas (routes added, deleted and replaced, a port down and up, an
/// address removed, neighbours changed, a nexthop id reused). After each, at least 10,000
/// destinations at prefix edges are asked of the kernel (`ip -j route get fibmatch`) and of
/// raceway (`show route --json`): not one disagreement. The seed is printed;
/// RACEWAY_FIB_SEED=N repeats a run, RACEWAY_FIB_SEED=random explores.
#[test]
fn the_fib_answers_as_the_kernel_does_for_random_routes_and_deltas() {
    let _alone = alone();
    // A fixed seed by default, so that make test is the same test every time; any other seed
    // explores (RACEWAY_FIB_SEED=N, or =random for one from the clock).
    let seed = match std::env::var("RACEWAY_FIB_SEED").ok().as_deref() {
        Some("random") => {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        }
        Some(seed) => seed.parse().expect("RACEWAY_FIB_SEED: a number or 'random'"),
        None => 42,
    };
    eprintln!("FIB differential test: seed {seed} (RACEWAY_FIB_SEED={seed} repeats this run)");
    let mut random = Random(seed);
    let mut lab = Lab::new("rwf");
    let ports: Vec<String> = (0..4).map(|index| format!("host{index}")).collect();
    for index in 0..ports.len() {
        lab.host(index);
    }
    let config = lab.config(ports.len(), "");
    lab.start(&config, &ports.iter().map(String::as_str).collect::<Vec<_>>());
    let config_path = lab.dir.join("leaf.toml");
    let mut plan =
        FibPlan { control: lab.control(), dir: lab.dir.clone(), batches: 0, ports: ports.len(), objects: Vec::new() };
    let mut setup = vec![
        "link set lo up".to_string(),
        "link add xa type veth peer name xb".to_string(),
        "link set xa up".to_string(),
        "link set xb up".to_string(),
        "addr add 10.250.0.1/24 dev xa".to_string(),
        "addr add fd50::1/64 dev xa nodad".to_string(),
    ];
    // Half the gateways resolved (fe80::1 on every port, each with its own MAC), half not.
    for port in 0..ports.len() {
        for host in 10..22 {
            for gateway in [format!("10.0.{port}.{host}"), format!("fd00:{port}::{host:x}"), format!("fe80::{host:x}")]
            {
                if random.chance(50) || gateway == "fe80::a" {
                    setup.push(format!("neigh replace {gateway} lladdr 02:00:00:{port:02x}:{:02x}:{host:02x} dev host{port} nud permanent", random.below(256)));
                }
            }
        }
        setup.push(format!("neigh replace fe80::1 lladdr 02:00:00:{port:02x}:00:01 dev host{port} nud permanent"));
    }
    // Nexthop objects: singles of both families, then groups of them with weights.
    for id in 1..=24u32 {
        let v4 = id % 2 == 0;
        let port = random.below(ports.len() as u64) as usize;
        setup.push(format!("nexthop add id {id} via {} dev host{port}", plan.gateway(&mut random, port, v4)));
        plan.objects.push((id, v4));
    }
    for id in 100..112u32 {
        let v4 = id % 2 == 0;
        let members: Vec<String> = (0..2 + random.below(2))
            .map(|_| {
                let singles: Vec<u32> = (1..=24).filter(|single| (single % 2 == 0) == v4).collect();
                format!("{},{}", random.pick(&singles), 1 + random.below(8))
            })
            .collect();
        setup.push(format!("nexthop add id {id} group {}", members.join("/")));
        plan.objects.push((id, v4));
    }
    plan.batch(&setup);
    let routes: Vec<String> = (0..2_300).map(|_| plan.route(&mut random, "add", None, None)).collect();
    plan.batch(&routes);
    // Metrics: some prefixes again at other metrics.
    let prefixes: Vec<String> = routes
        .iter()
        .filter_map(|line| {
            line.split_whitespace().find(|word| word.contains('/') && !word.starts_with("fd99")).map(str::to_string)
        })
        .collect();
    let mut again = Vec::new();
    for prefix in prefixes {
        if random.chance(15) {
            let metric = 40 + random.below(20);
            again.push(plan.route(&mut random, "add", Some(&prefix), Some(metric)));
        }
    }
    plan.batch(&again);
    let mainly = |plan: &FibPlan| {
        plan.kernel_routes()
            .into_iter()
            .filter(|route| {
                route["protocol"] != "kernel"
                    && route["table"] != "local"
                    && route["dst"].as_str().is_some_and(|dst| !dst.starts_with("fe80") && !dst.starts_with("ff00"))
            })
            .collect::<Vec<_>>()
    };
    let installed = mainly(&plan);
    assert!(installed.len() >= 2_000, "only {} routes were installed", installed.len());
    let destinations = |plan: &FibPlan, random: &mut Random| {
        let mut addresses: Vec<std::net::IpAddr> = Vec::new();
        for route in plan.kernel_routes() {
            let dst = route["dst"].as_str().unwrap_or("");
            if dst.starts_with("fe80") || dst.starts_with("ff00") {
                continue;
            }
            let v4 = if dst == "default" { !route.to_string().contains("\"gateway\":\"f") } else { !dst.contains(':') };
            addresses.extend(edges(&route_prefix(dst, v4), random));
        }
        // And the prefixes policy rules select.
        let rules = ok("ip", &["-n", &plan.control, "-j", "rule", "show"]);
        for rule in serde_json::from_str::<Vec<serde_json::Value>>(&rules).unwrap_or_default() {
            if let (Some(dst), Some(len)) = (rule["dst"].as_str(), rule["dstlen"].as_u64()) {
                addresses.extend(edges(&format!("{dst}/{len}"), random));
            }
        }
        addresses.sort();
        addresses.dedup();
        addresses
    };
    let check = |plan: &FibPlan, random: &mut Random, what: &str| {
        let addresses = destinations(plan, random);
        assert!(addresses.len() >= 10_000, "{what}: only {} destinations", addresses.len());
        let (found, kinds) = disagreements(plan, &config_path, &addresses, &ports);
        // Every kind of answer was met at first (a test that only ever saw one would prove
        // little); the deltas may take some away (a rule's or an AnyIP range's cover). (The
        // rule's own answers are not always met: some runs' third round shows none, not yet
        // understood; the unit tests in control/kernel.rs hold rules.)
        let mut expected = Vec::new();
        if what == "after the first routes" {
            expected.extend([
                "forward ",
                "glean unresolved",
                "drop blackhole",
                "kernel unreachable",
                "kernel prohibit",
            ]);
            expected.extend(["kernel local", "kernel not_a_port", "kernel throw", "kernel tos", "kernel source"]);
            expected.push("kernel no_route");
        }
        for kind in expected {
            assert!(
                kinds.get(kind).is_some_and(|count| *count > 0),
                "{what} (seed {seed}): no '{kind}' answer among {kinds:?}"
            );
        }
        // The first few of each kind of disagreement (the kernel's answer's shape, raceway's
        // action and reason).
        let mut kinds: std::collections::BTreeMap<String, Vec<&String>> = std::collections::BTreeMap::new();
        for why in &found {
            let kernel = if why.contains("kernel Error") {
                "error"
            } else if why.contains("kernel Delivered") {
                "delivered"
            } else if why.contains("nexthops") {
                "multipath"
            } else {
                "route"
            };
            let ours = why.split("\"action\":").nth(1).unwrap_or("").split(',').next().unwrap_or("").to_string();
            let reason = why.split("\"reason\":").nth(1).unwrap_or("").split('}').next().unwrap_or("").to_string();
            kinds.entry(format!("{kernel} / {ours} {reason}")).or_default().push(why);
        }
        let report: Vec<String> = kinds
            .iter()
            .map(|(kind, whys)| {
                format!(
                    "{kind}: {}\n  {}",
                    whys.len(),
                    whys.iter().take(3).map(|why| why.as_str()).collect::<Vec<_>>().join("\n  ")
                )
            })
            .collect();
        if !found.is_empty() {
            // What a reader of the failure needs next: the kernel's nexthop objects.
            let objects = ok("ip", &["-n", &plan.control, "nexthop", "show"]);
            std::fs::write(plan.dir.join("nexthops.txt"), objects).unwrap();
        }
        assert!(
            found.is_empty(),
            "{what} (seed {seed}): {} of {} destinations disagree (the kernel's nexthop objects are in {}):\n{}",
            found.len(),
            addresses.len(),
            plan.dir.join("nexthops.txt").display(),
            report.join("\n")
        );
        addresses.len()
    };
    check(&plan, &mut random, "after the first routes");

    // Deltas, batch by batch.
    for round in 0..4 {
        let mut lines = Vec::new();
        let current = mainly(&plan);
        for _ in 0..150 {
            let route = random.pick(&current);
            let dst = route["dst"].as_str().unwrap();
            let v4 = !route.to_string().contains(':') || dst.contains('.');
            let prefix = route_prefix(dst, v4);
            let metric = route["metric"].as_u64().map_or(String::new(), |metric| format!(" metric {metric}"));
            let table = route["table"].as_str().map_or(String::new(), |table| format!(" table {table}"));
            let tos = route["tos"].as_str().map_or(String::new(), |tos| format!(" tos {tos}"));
            let from = route["from"].as_str().map_or(String::new(), |from| format!(" from {from}"));
            match random.below(3) {
                0 => lines.push(format!("route del {prefix}{tos}{from}{metric}{table}")),
                1 => lines.push(plan.route(&mut random, "replace", Some(&prefix), route["metric"].as_u64())),
                _ => lines.push(plan.route(&mut random, "add", None, None)),
            }
        }
        // IPv6 multipath: one next hop deleted.
        if let Some(route) = current.iter().find(|route| {
            route["dst"].as_str().is_some_and(|dst| dst.contains(':'))
                && route["nexthops"].is_array()
                && route["nhid"].is_null()
        }) {
            let hop = &route["nexthops"][0];
            let metric = route["metric"].as_u64().map_or(String::new(), |metric| format!(" metric {metric}"));
            lines.push(format!(
                "route del {} via {} dev {}{metric}",
                route_prefix(route["dst"].as_str().unwrap(), false),
                hop["gateway"].as_str().unwrap_or("::"),
                hop["dev"].as_str().unwrap()
            ));
        }
        // Neighbours change: one moves to another MAC, one goes.
        let port = random.below(ports.len() as u64);
        lines.push(format!(
            "neigh replace 10.0.{port}.{} lladdr 02:00:00:ee:{round:02x}:01 dev host{port} nud permanent",
            10 + random.below(12)
        ));
        lines.push(format!("neigh del fe80::{:x} dev host{port}", 10 + random.below(12)));
        // A nexthop id reused: deleted, then defined again elsewhere.
        let (id, v4) = *random.pick(&plan.objects.iter().filter(|(id, _)| *id <= 24).copied().collect::<Vec<_>>());
        lines.push(format!("nexthop del id {id}"));
        let other = random.below(ports.len() as u64) as usize;
        lines.push(format!("nexthop add id {id} via {} dev host{other}", plan.gateway(&mut random, other, v4)));
        match round {
            // A port goes down (and comes back in the next round).
            0 => lines.push("link set host3 down".to_string()),
            // Default routes: nothing is unrouted any more.
            1 => lines.extend([
                "link set host3 up".to_string(),
                "route add 0.0.0.0/0 via 10.0.1.10 dev host1".to_string(),
                "route add ::/0 via fe80::1 dev host2".to_string(),
            ]),
            // A port loses its IPv4 address (and has it again in the next round); a policy
            // rule selects the prefix of a main-table route (its edges are destinations), /16 to
            // /23: no AnyIP range of the local table (/24 and longer here) holds it.
            2 => {
                let selected = current
                    .iter()
                    .filter(|route| route["table"].is_null() && route["type"].is_null())
                    .filter_map(|route| route["dst"].as_str())
                    .find(|dst| {
                        dst.contains('.')
                            && dst.split_once('/').is_some_and(|(_, len)| (16..=23).contains(&len.parse().unwrap_or(0)))
                    })
                    .unwrap_or("10.64.0.0/16");
                lines.extend([
                    format!("rule add to {selected} table 100 priority 100"),
                    "addr del 10.0.2.1/24 dev host2".to_string(),
                ]);
            }
            _ => lines.push("addr add 10.0.2.1/24 dev host2".to_string()),
        }
        plan.batch(&lines);
        check(&plan, &mut random, &format!("after delta round {round}"));
    }
    let stats = lab.stop();
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}
