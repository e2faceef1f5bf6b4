"""A leaf in network namespaces for the live control-plane benchmarks (perf/restart.sh,
perf/faults.sh): raceway on net_af_packet ports with `[control]`, host0 (10.0.0.2/24) on port
host0, and one or two spines on ports up0 and up1, each running FRR with BGP and BFD to the
leaf's own FRR in the control namespace and announcing 10.200.0.0/24 (10.200.0.1 on each
spine's lo: the leaf reaches it over both, ECMP); host0 pings 10.200.0.1 through the switch.
With `tcp`, host1 (10.0.1.2/24, port host1) runs an iperf3 server that host0 sends a paced
TCP flow to; with `lossless`, a RoCE flow runs between two PFC-honouring hosts on memif
links. Everything it creates carries a tag unique to the process and goes in `cleanup`,
however the run ends."""
import json, os, re, shutil, signal, subprocess, sys, time
from datetime import datetime


def sh(*words, check=True):
    return subprocess.run(list(words), check=check, capture_output=True, text=True).stdout


def wait(what, limit, ready):
    deadline = time.time() + limit
    while not ready():
        if time.time() > deadline:
            sys.exit(f"error: timed out waiting for {what}")
        time.sleep(0.02)


def vtysh(directory, command):
    output = subprocess.run(["vtysh", "--vty_socket", directory, "-c", command], capture_output=True, text=True)
    try:
        return json.loads(output.stdout)
    except ValueError:
        return None


def sessions(directory, peer):
    """(BGP established, connections dropped, BFD up, BFD session-down events)."""
    bgp = (vtysh(directory, f"show bgp neighbors {peer} json") or {}).get(peer, {})
    peers = vtysh(directory, "show bfd peers json") or []
    counters = vtysh(directory, "show bfd peers counters json") or []
    bfd = next((p for p in peers if p.get("peer") == peer), {})
    count = next((p for p in counters if p.get("peer") == peer), {})
    return (bgp.get("bgpState") == "Established", bgp.get("connectionsDropped", 0), bfd.get("status") == "up",
            count.get("session-down", 0))


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def logged(log, needle):
    """The time (epoch seconds) and text of the first line of `log` containing `needle`."""
    try:
        text = open(log).read()
    except OSError:
        return None
    for line in ANSI.sub("", text).splitlines():
        if needle in line:
            stamp = line.split()[0].rstrip("Z")
            return datetime.fromisoformat(stamp + "+00:00").timestamp(), line
    return None


def replies(path):
    """The epoch times of the echo replies a `ping -D` printed."""
    times = []
    for line in open(path):
        if " bytes from " in line and line.startswith("["):
            times.append(float(line[1:line.index("]")]))
    return times


LOSSLESS_RATE_GBPS = 0.2
# The TCP flow's pace, and the interval its sender reports at (the stall's resolution).
TCP_RATE = "50M"
TCP_INTERVAL_S = 0.1


def tcp_intervals(path):
    """The intervals a running `iperf3 -i` printed: (end s from the test's start, bytes,
    retransmits). The client's bytes are those its socket took, the server's those it
    received; only the client counts retransmits (0 on the server's)."""
    units = {"Bytes": 1, "KBytes": 1 << 10, "MBytes": 1 << 20, "GBytes": 1 << 30}
    found = []
    for line in open(path):
        words = line.split()
        # [  5]   1.00-1.10   sec   610 KBytes  49.9 Mbits/sec    0   64.2 KBytes   (client)
        # [  5]   1.00-1.10   sec   610 KBytes  49.9 Mbits/sec                    (server)
        if len(words) >= 8 and words[0] == "[" and words[3] == "sec" and words[5] in units and "-" in words[2]:
            try:
                end = float(words[2].split("-")[1])
                retransmits = int(words[8]) if len(words) >= 9 and words[8].isdigit() else 0
                found.append((end, float(words[4]) * units[words[5]], retransmits))
            except ValueError:
                continue
    return found


class LeafLab:
    """The leaf, its hosts and its spines (module notes); `tag` names everything it creates.
    With `lossless`, two more ports, rdma0 and rdma1, over net_memif to two `raceway blast
    --pfc --sequence --answer-arp` hosts: rdma0's sends RoCEv2 flows in TC3 (lossless) to the
    hosts behind rdma1 (10.0.2.1-8, which answer the leaf's ARP themselves), whose blast
    counts the frames lost by PSN (`lossless_counts`), and sends a trickle back (to
    10.0.3.1-8)."""

    def __init__(self, raceway, tag, keep_s=None, bfd_ms=300, bfd_multiplier=3, lossless=False, spines=1,
                 tcp=False):
        self.raceway, self.tag = raceway, tag
        self.work = f"/tmp/raceway-{tag}"
        self.ctl, self.host = f"{tag}ctl", f"{tag}h0"
        self.spines = [f"{tag}s{index}" for index in range(spines)]
        self.spine = self.spines[0]
        self.tcp_host = f"{tag}h1" if tcp else None
        self.tcp_log = f"{self.work}/tcp.log"
        self.tcp_server_log = f"{self.work}/tcp-server.log"
        self.tcp_began = None
        self.config_path = f"{self.work}/leaf.toml"
        self.keep_s, self.bfd_ms, self.bfd_multiplier = keep_s, bfd_ms, bfd_multiplier
        self.frr_dirs = []
        self.switch = None
        # Processes started beside the switch (a pinger, tcpdump), killed however the run ends.
        self.helpers = []
        self.leaf_dir = None
        self.spine_dirs = []
        self.lossless = lossless
        self.blasts = []

    def attach(self, ns, link):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", link, "up")
        sh("ethtool", "-K", link, "tx", "off", "tso", "off", "gso", "off", "gro", "off")
        sh("ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", "gro", "off")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")

    def frr(self, ns, conf):
        directory = f"{self.work}/frr-{ns}"
        os.makedirs(directory, exist_ok=True)
        with open(f"{directory}/frr.conf", "w") as file:
            file.write(conf)
        sh("chown", "-R", "frr:frr", self.work)
        if directory not in self.frr_dirs:
            self.frr_dirs.append(directory)
        for daemon in ["zebra", "bgpd", "bfdd"]:
            self.start_daemon(ns, directory, daemon)
        return directory

    def start_daemon(self, ns, directory, daemon):
        """Starts one of FRR's daemons in `ns` with the files of `directory` (as watchfrr
        would restart it)."""
        extra = ["--bfdctl", f"{directory}/bfdd.sock"] if daemon == "bfdd" else []
        sh("ip", "netns", "exec", ns, f"/usr/lib/frr/{daemon}", "-d", "-u", "frr", "-g", "frr", "-f",
           f"{directory}/frr.conf", "-i", f"{directory}/{daemon}.pid", "-z", f"{directory}/zserv.api",
           "--vty_socket", directory, "-P", "0", "--log", f"file:{directory}/{daemon}.log", *extra)

    def daemon_pid(self, directory, daemon):
        try:
            return int(open(f"{directory}/{daemon}.pid").read())
        except (OSError, ValueError):
            return None

    def config_text(self):
        ports = [("host0", f"net_af_packet0,iface={self.tag}p0", "10.0.0.1/24")]
        ports += [(f"up{index}", f"net_af_packet{1 + index},iface={self.tag}u{index}", f"10.255.0.{2 * index}/31")
                  for index in range(len(self.spines))]
        if self.tcp_host:
            ports.append(("host1", f"net_af_packet{1 + len(self.spines)},iface={self.tag}p1", "10.0.1.1/24"))
        qos = ""
        if self.lossless:
            qos = "[qos]\ndscp_to_tc = { 26 = 3, default = 0 }\nlossless = [3]\n"
            ports += [("rdma0", f"net_memif0,role=client,socket={self.memif_socket('rdma0')}", "10.0.3.254/24"),
                      ("rdma1", f"net_memif1,role=client,socket={self.memif_socket('rdma1')}", "10.0.2.254/24")]
        keep = f"keep_interfaces_s = {self.keep_s}\n" if self.keep_s is not None else ""
        return (f"""[switch]
name = "{self.tag}"
mac = "02:00:00:00:00:01"
[dpdk]
eal = ["--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--file-prefix", "{self.tag}", "--log-level", "*:error"]
lcores = "0-1"
""" + qos + "".join(f"""[[port]]
name = "{name}"
device = "{device}"
speed_gbps = 1
addresses = ["{address}"]
""" for name, device, address in ports) + f"""[control]
netns = "{self.ctl}"
""" + keep)

    def memif_socket(self, port):
        """An abstract socket's name: it goes with the process that listens on it."""
        return f"/raceway-{self.tag}-{port}.sock"

    def start_lossless_hosts(self):
        """Starts the rdma hosts (class notes), which serve the memif links the switch's ports
        connect to: rdma0's sends its trace at LOSSLESS_RATE_GBPS until the lab ends, rdma1's
        a trickle back; each writes its counts every 100 ms."""
        traces = {}
        for port, subnet in [("rdma0", "2"), ("rdma1", "3")]:
            traces[port] = f"{self.work}/{port}.pcap"
            sh(self.raceway, "--quiet", "gen", "flows", "--flows", "8", "--packets", "64", "--size", "1078",
               "--dscp", "26", "--to-subnet", subnet, "--out", traces[port])
        for port, hosts in [("rdma0", "10.0.3.0/24"), ("rdma1", "10.0.2.0/24")]:
            rate = LOSSLESS_RATE_GBPS if port == "rdma0" else 0.0001
            # Both hosts on the first CPU, beside the switch's main lcore: the second is its worker's.
            self.blasts.append(subprocess.Popen(
                [self.raceway, "--log-level", "warn", "blast", "--trace", traces[port], "--device",
                 f"net_memif0,role=server,socket={self.memif_socket(port)}", "--rate-gbps", str(rate), "--pfc", "1",
                 "--sequence", "--answer-arp", hosts, "--progress", f"{self.work}/{port}.json",
                 "--duration", "1000000",
                 "--", "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--log-level", "*:critical",
                 "--file-prefix", f"{self.tag}-{port}"],
                stdout=subprocess.DEVNULL, stderr=open(f"{self.work}/{port}.log", "w")))
        self.helpers.extend(self.blasts)

    def lossless_counts(self):
        """What rdma1's host counted (its sequence: in_order, lost, late), with what rdma0's
        sent and still holds (sent, unsent); zeros before the first report."""
        def report(port):
            try:
                return json.load(open(f"{self.work}/{port}.json"))
            except (OSError, ValueError):
                return {}
        sender, receiver = report("rdma0"), report("rdma1")
        counts = dict(receiver.get("sequence") or {"in_order": 0, "lost": 0, "late": 0})
        counts["arp_answered"] = sender.get("arp_answered", 0) + receiver.get("arp_answered", 0)
        counts["received"] = counts["in_order"] + counts["late"]
        counts["sent"] = sender.get("sent", 0)
        return counts

    def start(self, log, *extra):
        """Starts `raceway run` on the config, logging to `log`; returns the process."""
        return subprocess.Popen([self.raceway, "run", "-c", self.config_path, "--stats-json",
                                 f"{self.work}/stats.json", *extra],
                                stdout=subprocess.DEVNULL, stderr=open(log, "w"))

    def bgp(self, me, asn, peers, extra):
        """FRR's config for `me` in `asn` with eBGP and BFD to each (address, asn) of `peers`."""
        bfd = (f"bfd\n profile fast\n  detect-multiplier {self.bfd_multiplier}\n  receive-interval {self.bfd_ms}\n"
               f"  transmit-interval {self.bfd_ms}\n !\n!\n")
        neighbours = "".join(
            f" neighbor {peer} remote-as {peer_asn}\n neighbor {peer} timers 3 9\n neighbor {peer} timers connect 1\n"
            f" neighbor {peer} bfd profile fast\n" for peer, peer_asn in peers)
        return (f"hostname {me}\n{bfd}router bgp {asn}\n bgp router-id {me}\n no bgp ebgp-requires-policy\n"
                f" no bgp network import-check\n bgp bestpath as-path multipath-relax\n{neighbours}"
                f" address-family ipv4 unicast\n{extra} exit-address-family\n")

    def spine_peer(self, index):
        """Spine `index`'s address on its link to the leaf, and the leaf's."""
        return f"10.255.0.{2 * index + 1}", f"10.255.0.{2 * index}"

    def up(self, log, routes):
        """Builds the lab, starts the switch (logging to `log`) and the FRRs, waits for BGP, BFD
        and host0's pings through the switch (and the TCP and lossless flows), and puts
        `routes` /32 routes in the leaf's kernel."""
        os.makedirs(self.work)
        self.attach(self.host, f"{self.tag}p0")
        sh("ip", "-n", self.host, "addr", "add", "10.0.0.2/24", "dev", "eth0")
        sh("ip", "-n", self.host, "route", "add", "default", "via", "10.0.0.1")
        if self.tcp_host:
            self.attach(self.tcp_host, f"{self.tag}p1")
            sh("ip", "-n", self.tcp_host, "addr", "add", "10.0.1.2/24", "dev", "eth0")
            sh("ip", "-n", self.tcp_host, "route", "add", "default", "via", "10.0.1.1")
        for index, spine in enumerate(self.spines):
            self.attach(spine, f"{self.tag}u{index}")
            sh("ip", "-n", spine, "addr", "add", f"{self.spine_peer(index)[0]}/31", "dev", "eth0")
            sh("ip", "-n", spine, "addr", "add", "10.200.0.1/24", "dev", "lo")
        with open(self.config_path, "w") as file:
            file.write(self.config_text())
        if self.lossless:
            self.start_lossless_hosts()
        self.switch = self.start(log)
        wait("the host interfaces", 60,
             lambda: "LOWER_UP" in sh("ip", "-n", self.ctl, "link", "show", "up0", check=False))
        for index, spine in enumerate(self.spines):
            me, leaf = self.spine_peer(index)
            self.spine_dirs.append(self.frr(spine, self.bgp(me, 65001 + index, [(leaf, 65000)],
                                                            "  network 10.200.0.0/24\n")))
        peers = [(self.spine_peer(index)[0], 65001 + index) for index in range(len(self.spines))]
        self.leaf_dir = self.frr(self.ctl, self.bgp("10.255.0.0", 65000, peers, "  redistribute connected\n"))
        wait("BGP and BFD up", 120, lambda: all(side[0] and side[2] for pair in self.all_sessions() for side in pair))
        wait("host0 through the switch", 60, lambda: subprocess.run(
            ["ip", "netns", "exec", self.host, "ping", "-c", "1", "-W", "1", "10.200.0.1"],
            capture_output=True).returncode == 0)
        if self.lossless:
            wait("the lossless flow to arrive", 60, lambda: self.lossless_counts()["received"] > 1000)
        if self.tcp_host:
            self.start_tcp()
        if routes:
            batch = f"{self.work}/routes.batch"
            with open(batch, "w") as file:
                for i in range(routes):
                    file.write(f"route add 10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32 via 10.255.0.1 dev up0\n")
            began = time.time()
            self.load_routes()
            print(f"{routes} routes into the leaf's kernel: {time.time() - began:.1f} s (ip -batch)")

    def start_tcp(self):
        """host0's TCP flow to host1's iperf3 server, paced at TCP_RATE, the intervals of each
        end in `tcp_log` and `tcp_server_log` (`tcp_intervals`); `tcp_began` is when the test
        began."""
        self.helpers.append(subprocess.Popen(["ip", "netns", "exec", self.tcp_host, "iperf3", "-s", "-1", "-B",
                                              "10.0.1.2", "-i", str(TCP_INTERVAL_S), "--forceflush"],
                                             stdout=open(self.tcp_server_log, "w"), stderr=subprocess.STDOUT))
        wait("host1's iperf3 server", 10, lambda: "10.0.1.2:5201" in sh("ip", "netns", "exec", self.tcp_host, "ss",
                                                                          "-ltn", check=False))
        began = time.time()
        self.tcp = subprocess.Popen(["ip", "netns", "exec", self.host, "iperf3", "-c", "10.0.1.2", "-t", "86400",
                                     "-b", TCP_RATE, "-i", str(TCP_INTERVAL_S), "--forceflush"],
                                    stdout=open(self.tcp_log, "w"), stderr=subprocess.STDOUT)
        self.helpers.append(self.tcp)
        wait("the TCP flow", 20, lambda: len(tcp_intervals(self.tcp_log)) > 0)
        # The test's clock starts as the connection is made: before the first interval's end.
        first_end = tcp_intervals(self.tcp_log)[0][0]
        self.tcp_began = max(began, time.time() - first_end)

    def tcp_alive(self):
        return self.tcp_host is None or self.tcp.poll() is None

    def load_routes(self):
        """The lab's routes into the leaf's kernel (`up`'s batch; none when it had none): again
        after a namespace made afresh, whose tables start empty."""
        batch = f"{self.work}/routes.batch"
        if os.path.exists(batch):
            sh("ip", "-n", self.ctl, "-batch", batch)

    def sessions(self):
        """The leaf's and the first spine's view of their session (`sessions`)."""
        return self.all_sessions()[0]

    def all_sessions(self):
        """Per spine, the leaf's and the spine's view of their session (`sessions`)."""
        return [(sessions(self.leaf_dir, self.spine_peer(index)[0]), sessions(directory, self.spine_peer(index)[1]))
                for index, directory in enumerate(self.spine_dirs)]

    def pinger(self, log, interval="0.002"):
        """host0 pinging the spine through the switch every `interval` s, into `log`."""
        pinger = subprocess.Popen(["ip", "netns", "exec", self.host, "ping", "-D", "-n", "-i", interval, "-W", "1",
                                   "10.200.0.1"], stdout=open(log, "w"), stderr=subprocess.DEVNULL)
        self.helpers.append(pinger)
        wait("the pings to flow", 10, lambda: len(replies(log)) > 10)
        return pinger

    def cleanup(self):
        if self.switch and self.switch.poll() is None:
            self.switch.kill()
            self.switch.wait()
        for helper in self.helpers:
            if helper.poll() is None:
                helper.kill()
                helper.wait()
        for directory in self.frr_dirs:
            for daemon in ["bfdd", "bgpd", "zebra"]:
                pid = self.daemon_pid(directory, daemon)
                if pid:
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except OSError:
                        pass
        subprocess.run([self.raceway, "clean", "-c", self.config_path], capture_output=True)
        for ns in [self.host, self.tcp_host, *self.spines, self.ctl]:
            if ns:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for link in [f"{self.tag}p0", f"{self.tag}p1", *[f"{self.tag}u{index}" for index in range(len(self.spines))]]:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        for ending in ["log", "sock"]:
            try:
                os.remove(f"/run/raceway/keep-{self.ctl}.{ending}")
            except OSError:
                pass
        if not os.environ.get("KEEP_WORK"):
            shutil.rmtree(self.work, ignore_errors=True)
