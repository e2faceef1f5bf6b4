"""A leaf in network namespaces for the live control-plane benchmarks (perf/restart.sh,
perf/faults.sh): raceway on net_af_packet ports with `[control]`, host0 (10.0.0.2/24) on port
host0, and a spine on port up0 running FRR with BGP and BFD to the leaf's own FRR in the
control namespace; host0 pings the spine's 10.200.0.1 through the switch (and, with
`lossless`, a RoCE flow runs between two PFC-honouring hosts on memif links). Everything it
creates carries a tag unique to the process and goes in `cleanup`, however the run ends."""
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


class LeafLab:
    """The leaf, its host and its spine (module notes); `tag` names everything it creates.
    With `lossless`, two more ports, rdma0 and rdma1, over net_memif to two `raceway blast
    --pfc --sequence` hosts: rdma0's sends RoCEv2 flows in TC3 (lossless) to the hosts
    behind rdma1 (10.0.2.1-8, their neighbours permanent in the leaf's kernel), whose blast
    counts the frames lost by PSN (`lossless_counts`), and sends a trickle back (to
    10.0.3.1-8)."""

    def __init__(self, raceway, tag, keep_s=None, bfd_ms=300, bfd_multiplier=3, lossless=False):
        self.raceway, self.tag = raceway, tag
        self.work = f"/tmp/raceway-{tag}"
        self.ctl, self.host, self.spine = f"{tag}ctl", f"{tag}h0", f"{tag}s0"
        self.config_path = f"{self.work}/leaf.toml"
        self.keep_s, self.bfd_ms, self.bfd_multiplier = keep_s, bfd_ms, bfd_multiplier
        self.frr_dirs = []
        self.switch = None
        # Processes started beside the switch (a pinger, tcpdump), killed however the run ends.
        self.helpers = []
        self.leaf_dir = self.spine_dir = None
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
        ports = [("host0", f"net_af_packet0,iface={self.tag}p0", "10.0.0.1/24"),
                 ("up0", f"net_af_packet1,iface={self.tag}u0", "10.255.0.0/31")]
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
        for port, subnet, rate in [("rdma0", "2", LOSSLESS_RATE_GBPS), ("rdma1", "3", 0.0001)]:
            traces[port] = f"{self.work}/{port}.pcap"
            sh(self.raceway, "--quiet", "gen", "flows", "--flows", "8", "--packets", "64", "--size", "1078",
               "--dscp", "26", "--to-subnet", subnet, "--out", traces[port])
        for index, port in enumerate(["rdma0", "rdma1"]):
            rate = LOSSLESS_RATE_GBPS if port == "rdma0" else 0.0001
            # Both hosts on the first CPU, beside the switch's main lcore: the second is its worker's.
            self.blasts.append(subprocess.Popen(
                [self.raceway, "--log-level", "warn", "blast", "--trace", traces[port], "--device",
                 f"net_memif0,role=server,socket={self.memif_socket(port)}", "--rate-gbps", str(rate), "--pfc", "1",
                 "--sequence", "--progress", f"{self.work}/{port}.json", "--duration", "1000000",
                 "--", "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--log-level", "*:critical",
                 "--file-prefix", f"{self.tag}-{port}"],
                stdout=subprocess.DEVNULL, stderr=open(f"{self.work}/{port}.log", "w")))
        self.helpers.extend(self.blasts)

    def lossless_neighbours(self):
        """The rdma hosts' addresses, permanent in the leaf's kernel (they answer no ARP)."""
        for host in range(1, 9):
            for subnet, port in [("2", "rdma1"), ("3", "rdma0")]:
                sh("ip", "-n", self.ctl, "neigh", "replace", f"10.0.{subnet}.{host}", "lladdr",
                   f"02:00:00:00:2{subnet}:{host:02x}", "dev", port, "nud", "permanent")

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
        counts["received"] = counts["in_order"] + counts["late"]
        counts["sent"] = sender.get("sent", 0)
        return counts

    def start(self, log, *extra):
        """Starts `raceway run` on the config, logging to `log`; returns the process."""
        return subprocess.Popen([self.raceway, "run", "-c", self.config_path, "--stats-json",
                                 f"{self.work}/stats.json", *extra],
                                stdout=subprocess.DEVNULL, stderr=open(log, "w"))

    def bgp(self, me, asn, peer, peer_asn, extra):
        bfd = (f"bfd\n profile fast\n  detect-multiplier {self.bfd_multiplier}\n  receive-interval {self.bfd_ms}\n"
               f"  transmit-interval {self.bfd_ms}\n !\n!\n")
        return (f"hostname {me}\n{bfd}router bgp {asn}\n bgp router-id {me}\n no bgp ebgp-requires-policy\n"
                f" no bgp network import-check\n neighbor {peer} remote-as {peer_asn}\n neighbor {peer} timers 3 9\n"
                f" neighbor {peer} timers connect 1\n neighbor {peer} bfd profile fast\n address-family ipv4 unicast\n"
                f"{extra} exit-address-family\n")

    def up(self, log, routes):
        """Builds the lab, starts the switch (logging to `log`) and both FRRs, waits for BGP, BFD
        and host0's pings through the switch, and puts `routes` /32 routes in the leaf's kernel."""
        os.makedirs(self.work)
        self.attach(self.host, f"{self.tag}p0")
        sh("ip", "-n", self.host, "addr", "add", "10.0.0.2/24", "dev", "eth0")
        sh("ip", "-n", self.host, "route", "add", "default", "via", "10.0.0.1")
        self.attach(self.spine, f"{self.tag}u0")
        sh("ip", "-n", self.spine, "addr", "add", "10.255.0.1/31", "dev", "eth0")
        sh("ip", "-n", self.spine, "addr", "add", "10.200.0.1/24", "dev", "lo")
        with open(self.config_path, "w") as file:
            file.write(self.config_text())
        if self.lossless:
            self.start_lossless_hosts()
        self.switch = self.start(log)
        wait("the host interfaces", 60,
             lambda: "LOWER_UP" in sh("ip", "-n", self.ctl, "link", "show", "up0", check=False))
        self.spine_dir = self.frr(self.spine, self.bgp("10.255.0.1", 65001, "10.255.0.0", 65000,
                                                       "  network 10.200.0.0/24\n"))
        self.leaf_dir = self.frr(self.ctl, self.bgp("10.255.0.0", 65000, "10.255.0.1", 65001,
                                                    "  redistribute connected\n"))
        wait("BGP and BFD up", 120, lambda: self.sessions()[0][::2] == (True, True)
             and self.sessions()[1][::2] == (True, True))
        wait("host0 through the switch", 60, lambda: subprocess.run(
            ["ip", "netns", "exec", self.host, "ping", "-c", "1", "-W", "1", "10.200.0.1"],
            capture_output=True).returncode == 0)
        if self.lossless:
            self.lossless_neighbours()
            wait("the lossless flow to arrive", 60, lambda: self.lossless_counts()["received"] > 1000)
        if routes:
            batch = f"{self.work}/routes.batch"
            with open(batch, "w") as file:
                for i in range(routes):
                    file.write(f"route add 10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32 via 10.255.0.1 dev up0\n")
            began = time.time()
            self.load_routes()
            print(f"{routes} routes into the leaf's kernel: {time.time() - began:.1f} s (ip -batch)")

    def load_routes(self):
        """The lab's routes into the leaf's kernel (`up`'s batch; none when it had none): again
        after a namespace made afresh, whose tables start empty."""
        batch = f"{self.work}/routes.batch"
        if os.path.exists(batch):
            sh("ip", "-n", self.ctl, "-batch", batch)

    def sessions(self):
        """The leaf's and the spine's view of their session (`sessions`)."""
        return sessions(self.leaf_dir, "10.255.0.1"), sessions(self.spine_dir, "10.255.0.0")

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
        for ns in [self.host, self.spine, self.ctl]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for link in [f"{self.tag}p0", f"{self.tag}u0"]:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        for ending in ["log", "sock"]:
            try:
                os.remove(f"/run/raceway/keep-{self.ctl}.{ending}")
            except OSError:
                pass
        if not os.environ.get("KEEP_WORK"):
            shutil.rmtree(self.work, ignore_errors=True)
