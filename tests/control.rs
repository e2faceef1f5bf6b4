//! raceway joining a real network: Linux hosts in network namespaces, on veth pairs whose
//! other ends are raceway's `net_af_packet` ports, and the kernel in raceway's own namespace
//! as its control plane. The hosts have an address and a default gateway, nothing more.
//!
//! Every test names its namespaces and interfaces after itself and the process, and a `Lab`
//! removes them when dropped, so a failing test leaves nothing behind. Needs root,
//! /dev/net/tun, iproute2, ping and ethtool (the Makefile installs them).

mod common;

use common::*;
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

    /// Starts FRR's zebra and bgpd in namespace `ns` with `config`, their sockets and pid
    /// files in a directory of their own (readable by the frr user).
    fn frr(&mut self, ns: &str, config: &str) -> std::path::PathBuf {
        let dir = std::path::PathBuf::from(format!("/tmp/{}-frr-{ns}", self.prefix));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("frr.conf"), config).unwrap();
        ok("chown", &["-R", "frr:frr", dir.to_str().unwrap()]);
        self.frr.push(dir.clone());
        let path = |file: &str| dir.join(file).display().to_string();
        for daemon in ["zebra", "bgpd"] {
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
                ],
            );
        }
        dir
    }

    fn stop_frr(&mut self) {
        for dir in self.frr.drain(..) {
            for daemon in ["bgpd", "zebra"] {
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
        let path = self.dir.join("leaf.toml");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(self.dir.join("raceway.log")).unwrap();
        let child = raceway()
            .args(["run", "-c"])
            .arg(&path)
            .arg("--stats-json")
            .arg(self.dir.join("stats.json"))
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
/// time-exceeded from the gateway; after the first packets the data plane forwards alone.
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
    let stats = lab.stop();
    let host0 = &stats["ports"]["host0"];
    assert!(host0["punted"]["arp"].as_u64().unwrap() >= 2, "ARP and ND: {host0}");
    assert!(host0["punted"]["ip2me"].as_u64().unwrap() >= 5, "the pings to the gateway: {host0}");
    assert_eq!(host0["punted"]["ttl"], 1);
    // 10 echo requests crossed host0 -> host1; at most the first of each family went through
    // the kernel (glean), the rest through the data plane.
    assert!(host0["punted"]["glean"].as_u64().unwrap() <= 2, "{host0}");
    assert!(stats["ports"]["host1"]["tx_packets"].as_u64().unwrap() >= 8, "{}", stats["ports"]["host1"]);
    assert!(host0["injected"].as_u64().unwrap() >= 3, "the kernel's replies: {host0}");
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"], "every mbuf back");
    assert!(stats["control"]["fib_generation"].as_u64().unwrap() >= 2, "{}", stats["control"]);
    assert!(!ok("ip", &["netns", "list"]).contains(&lab.control()), "raceway removes the namespace it created");
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

/// A spine's BGP: AS 65001, one session to the leaf, announcing 192.0.2.0/24 (on its lo, so
/// that it answers every address in it). Timers of 1 s / 3 s keep the test short.
fn spine_bgp(index: usize) -> String {
    format!(
        "hostname s{index}\nrouter bgp 65001\n bgp router-id 10.255.0.{me}\n no bgp ebgp-requires-policy\n \
         no bgp network import-check\n neighbor 10.255.0.{leaf} remote-as 65000\n neighbor 10.255.0.{leaf} timers 1 3\n \
         neighbor 10.255.0.{leaf} timers connect 1\n address-family ipv4 unicast\n  network 192.0.2.0/24\n \
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

/// RFC 7938 in miniature: two spines announce 192.0.2.0/24 by BGP to FRR in raceway's
/// namespace; raceway installs it as a two-member group and spreads flows over both uplinks.
/// When one spine's link goes down, BGP withdraws it and traffic moves to the other, while
/// traffic between the hosts never stops.
#[test]
fn bgp_multipath_from_two_spines_spreads_and_fails_over() {
    let _alone = alone();
    let mut lab = Lab::new("rwc");
    lab.host(0);
    lab.host(1);
    for index in 0..2 {
        let ns = lab.attach(&format!("s{index}"), &format!("u{index}"));
        ok("ip", &["-n", &ns, "addr", "add", &format!("10.255.0.{}/31", 2 * index + 1), "dev", "eth0"]);
        ok("ip", &["-n", &ns, "addr", "add", "192.0.2.1/24", "dev", "lo"]);
    }
    let mut config = lab.config(2, "");
    for index in 0..2 {
        config = config.replace(
            "[control]",
            &format!(
                "[[port]]\nname = \"up{index}\"\ndevice = \"net_af_packet{},iface={}u{index}\"\nspeed_gbps = 1\n\
                 addresses = [\"10.255.0.{}/31\"]\n[control]",
                index + 2,
                lab.prefix,
                2 * index
            ),
        );
    }
    lab.start(&config, &["host0", "host1", "up0", "up1"]);
    for index in 0..2 {
        let ns = lab.netns(&format!("s{index}"));
        lab.frr(&ns, &spine_bgp(index));
    }
    let control = lab.control();
    lab.frr(&control, LEAF_BGP);
    let route = || ok("ip", &["-n", &control, "route", "show", "192.0.2.0/24"]);
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
        (1..=32).all(|last| ping(lab, 0, &["-c", "1", "-W", "1", &format!("192.0.2.{last}")]).status.success())
    };
    wait_for("every destination through the leaf", Duration::from_secs(30), || all_answer(&lab));
    // 32 destinations: ECMP hashes each flow onto one uplink, and both get some.
    let ping_all = |lab: &Lab| {
        for last in 1..=32 {
            let reply = ping(lab, 0, &["-c", "1", "-W", "2", &format!("192.0.2.{last}")]);
            assert!(reply.status.success(), "ping 192.0.2.{last}: {}", String::from_utf8_lossy(&reply.stdout));
        }
    };
    let start = [echoes(&lab, "s0"), echoes(&lab, "s1")];
    ping_all(&lab);
    let before = [echoes(&lab, "s0") - start[0], echoes(&lab, "s1") - start[1]];
    assert_eq!(before[0] + before[1], 32, "each echo reached one spine: {before:?}");
    assert!(before[0] >= 4 && before[1] >= 4, "ECMP spread the flows over both uplinks: {before:?}");
    // A steady ping between the hosts across the failover: other routes never stall.
    let ns1 = lab.netns("h1");
    let steady = Command::new("ip")
        .args(["netns", "exec", &ns1, "ping", "-c", "60", "-i", "0.1", "-W", "1", "10.0.0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    ok("ip", &["-n", &lab.netns("s0"), "link", "set", "eth0", "down"]);
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
}

/// ICMP echo requests namespace `<prefix><name>` has received (its /proc/net/snmp).
fn echoes(lab: &Lab, name: &str) -> u64 {
    let snmp = ok("ip", &["netns", "exec", &lab.netns(name), "cat", "/proc/net/snmp"]);
    let lines: Vec<&str> = snmp.lines().filter(|line| line.starts_with("Icmp:")).collect();
    let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
    names.zip(values).find(|(name, _)| *name == "InEchos").map(|(_, value)| value.parse().unwrap()).expect("InEchos")
}

/// Linux TCP with ECN through a port shaped below the veth's rate, in a lossless class with
/// an ECN profile: raceway marks CE, the receiver echoes ECE, the sender backs off, goodput
/// stays within 10% of the shaped rate, and nothing is dropped.
#[test]
fn tcp_with_ecn_through_a_shaped_port_gets_its_rate_and_marks_not_drops() {
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
    assert!(goodput >= 90e6, "goodput {:.1} Mb/s through a 100 Mb/s port", goodput / 1e6);
    let drops: u64 = ["host0", "host1"]
        .iter()
        .flat_map(|port| stats["ports"][port]["drops"].as_object().unwrap().values())
        .map(|value| value.as_u64().unwrap())
        .sum();
    assert_eq!(drops, 0, "nothing dropped: {}", stats["ports"]);
    assert_eq!(stats["mbufs"]["pool"], stats["mbufs"]["available_at_exit"]);
}
