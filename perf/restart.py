"""The driver of perf/restart.sh: a leaf with BGP and BFD to a spine and a large table in its
kernel, restarted as systemd restarts it (SIGTERM, then a new process), timed from the outside
(the signal, the exec, host0's pings through the switch) and from raceway's own log (when the
new FIB holds the kernel's tables whole)."""
import argparse, json, os, re, shutil, signal, subprocess, sys, time
from datetime import datetime

parser = argparse.ArgumentParser()
parser.add_argument("--raceway", required=True)
parser.add_argument("--routes", type=int, default=1_000_000)
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--bfd-ms", type=int, default=300)
parser.add_argument("--bfd-multiplier", type=int, default=3)
parser.add_argument("--signal", default="TERM", choices=["TERM", "KILL"])
parser.add_argument("--take-over", action="store_true",
                    help="make-before-break: `raceway run --take-over` while the old switch runs")
args = parser.parse_args()

tag = f"rr{os.getpid() % 100000}"
work = f"/tmp/raceway-restart-{tag}"
ctl, host, spine = f"{tag}ctl", f"{tag}h0", f"{tag}s0"
config_path = f"{work}/leaf.toml"
frr_dirs = []
switch = None
# Processes started beside the switch (the pinger, tcpdump), killed however the run ends.
helpers = []


def sh(*words, check=True):
    return subprocess.run(list(words), check=check, capture_output=True, text=True).stdout


def attach(ns, link):
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh("ip", "link", "set", link, "up")
    sh("ethtool", "-K", link, "tx", "off", "tso", "off", "gso", "off", "gro", "off")
    sh("ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", "gro", "off")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")


def frr(ns, conf):
    directory = f"{work}/frr-{ns}"
    os.makedirs(directory)
    with open(f"{directory}/frr.conf", "w") as file:
        file.write(conf)
    sh("chown", "-R", "frr:frr", work)
    frr_dirs.append(directory)
    for daemon in ["zebra", "bgpd", "bfdd"]:
        extra = ["--bfdctl", f"{directory}/bfdd.sock"] if daemon == "bfdd" else []
        sh("ip", "netns", "exec", ns, f"/usr/lib/frr/{daemon}", "-d", "-u", "frr", "-g", "frr", "-f",
           f"{directory}/frr.conf", "-i", f"{directory}/{daemon}.pid", "-z", f"{directory}/zserv.api",
           "--vty_socket", directory, "-P", "0", "--log", f"file:{directory}/{daemon}.log", *extra)
    return directory


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


def wait(what, limit, ready):
    deadline = time.time() + limit
    while not ready():
        if time.time() > deadline:
            sys.exit(f"error: timed out waiting for {what}")
        time.sleep(0.02)


def start(log, take_over=False):
    return subprocess.Popen([args.raceway, "run", "-c", config_path, "--stats-json", f"{work}/stats.json"]
                            + (["--take-over"] if take_over else []),
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"))


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
    """The epoch times of the echo replies host0's ping printed (-D)."""
    times = []
    for line in open(path):
        if " bytes from " in line and line.startswith("["):
            times.append(float(line[1:line.index("]")]))
    return times


def cleanup():
    if switch and switch.poll() is None:
        switch.kill()
        switch.wait()
    for helper in helpers:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
    for directory in frr_dirs:
        for daemon in ["bfdd", "bgpd", "zebra"]:
            try:
                os.kill(int(open(f"{directory}/{daemon}.pid").read()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
    subprocess.run([args.raceway, "clean", "-c", config_path], capture_output=True)
    for ns in [host, spine, ctl]:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    for link in [f"{tag}p0", f"{tag}u0"]:
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    if not os.environ.get("KEEP_WORK"):
        shutil.rmtree(work, ignore_errors=True)


def main():
    global switch
    os.makedirs(work)
    attach(host, f"{tag}p0")
    sh("ip", "-n", host, "addr", "add", "10.0.0.2/24", "dev", "eth0")
    sh("ip", "-n", host, "route", "add", "default", "via", "10.0.0.1")
    attach(spine, f"{tag}u0")
    sh("ip", "-n", spine, "addr", "add", "10.255.0.1/31", "dev", "eth0")
    sh("ip", "-n", spine, "addr", "add", "10.200.0.1/24", "dev", "lo")
    with open(config_path, "w") as file:
        file.write(f"""[switch]
name = "restart"
mac = "02:00:00:00:00:01"
[dpdk]
eal = ["--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--file-prefix", "{tag}", "--log-level", "*:error"]
lcores = "0-1"
[[port]]
name = "host0"
device = "net_af_packet0,iface={tag}p0"
speed_gbps = 1
addresses = ["10.0.0.1/24"]
[[port]]
name = "up0"
device = "net_af_packet1,iface={tag}u0"
speed_gbps = 1
addresses = ["10.255.0.0/31"]
[control]
netns = "{ctl}"
""")
    switch = start(f"{work}/raceway-0.log")
    wait("the host interfaces", 60, lambda: "LOWER_UP" in sh("ip", "-n", ctl, "link", "show", "up0", check=False))
    bfd = (f"bfd\n profile fast\n  detect-multiplier {args.bfd_multiplier}\n  receive-interval {args.bfd_ms}\n"
           f"  transmit-interval {args.bfd_ms}\n !\n!\n")

    def bgp(me, asn, peer, peer_asn, extra):
        return (f"hostname {me}\n{bfd}router bgp {asn}\n bgp router-id {me}\n no bgp ebgp-requires-policy\n"
                f" no bgp network import-check\n neighbor {peer} remote-as {peer_asn}\n neighbor {peer} timers 3 9\n"
                f" neighbor {peer} timers connect 1\n neighbor {peer} bfd profile fast\n address-family ipv4 unicast\n"
                f"{extra} exit-address-family\n")

    spine_dir = frr(spine, bgp("10.255.0.1", 65001, "10.255.0.0", 65000, "  network 10.200.0.0/24\n"))
    leaf_dir = frr(ctl, bgp("10.255.0.0", 65000, "10.255.0.1", 65001, "  redistribute connected\n"))
    wait("BGP and BFD up", 120, lambda: sessions(leaf_dir, "10.255.0.1")[::2] == (True, True)
         and sessions(spine_dir, "10.255.0.0")[::2] == (True, True))
    wait("host0 through the switch", 60, lambda: subprocess.run(
        ["ip", "netns", "exec", host, "ping", "-c", "1", "-W", "1", "10.200.0.1"], capture_output=True).returncode == 0)
    batch = f"{work}/routes.batch"
    with open(batch, "w") as file:
        for i in range(args.routes):
            file.write(f"route add 10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32 via 10.255.0.1 dev up0\n")
    began = time.time()
    sh("ip", "-n", ctl, "-batch", batch)
    print(f"{args.routes} routes into the leaf's kernel: {time.time() - began:.1f} s (ip -batch)")
    kernel_routes = len(sh("ip", "-n", ctl, "route", "show", "table", "main").splitlines())
    print(f"the kernel's main table: {kernel_routes} routes; BFD {args.bfd_ms} ms x {args.bfd_multiplier}, "
          f"BGP timers 3 9; " + ("a take-over (make-before-break)" if args.take_over else
                                   f"SIG{args.signal} then a new process") + f", {args.rounds} rounds")
    before = (sessions(leaf_dir, "10.255.0.1"), sessions(spine_dir, "10.255.0.0"))
    ping_log = f"{work}/ping.log"
    pinger = subprocess.Popen(["ip", "netns", "exec", host, "ping", "-D", "-n", "-i", "0.002", "-W", "1",
                               "10.200.0.1"], stdout=open(ping_log, "w"), stderr=subprocess.DEVNULL)
    helpers.append(pinger)
    wait("the pings to flow", 10, lambda: len(replies(ping_log)) > 10)
    if os.environ.get("CAPTURE_BFD"):
        helpers.append(subprocess.Popen(["ip", "netns", "exec", spine, "tcpdump", "-n", "-tt", "-i", "eth0", "-w",
                                         f"{work}/bfd.pcap", "udp", "port", "3784"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
    if args.take_over:
        print("| round | exec to hand-over | old switch's stop (asked to ports closed) | then to new worker "
              "| exec to full FIB | routes in it | longest gap in pings | BGP drops | BFD downs |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print("| round | stop (signal to exit) | exec to worker | exec to first frame forwarded | exec to full FIB "
              "| routes in it | pings: last before, first after | BGP drops | BFD downs |")
        print("|---|---|---|---|---|---|---|---|---|")
    ms = lambda seconds: f"{seconds * 1e3:.0f} ms"
    for round_ in range(1, args.rounds + 1):
        if args.take_over:
            log = f"{work}/raceway-{round_}.log"
            executed = time.time()
            old, switch = switch, start(log, take_over=True)
            old.wait()
            wait("the new FIB whole", 120, lambda: logged(log, "tables read whole") is not None)
            wait("a ping through the new switch", 30, lambda: any(t > executed for t in replies(ping_log)))
            settle = time.time() + 3 * args.bfd_ms * args.bfd_multiplier / 1000 + 1
            wait("a detection time", 30, lambda: time.time() > settle)
            stopped, line = logged(log, "closed its ports")
            stop_ms = int(re.search(r"ports (\d+) ms after", line).group(1))
            asked = stopped - stop_ms / 1000
            worker = logged(log, "forwarding worker")[0]
            whole, line = logged(log, "tables read whole")
            routes = re.search(r"(\d+) routes", line).group(1)
            times = [t for t in replies(ping_log) if t > executed - 1]
            gap = max(b - a for a, b in zip(times, times[1:]))
            now = (sessions(leaf_dir, "10.255.0.1"), sessions(spine_dir, "10.255.0.0"))
            bgp_drops = sum(n[1] - b[1] for n, b in zip(now, before))
            bfd_downs = sum(n[3] - b[3] for n, b in zip(now, before))
            print(f"| {round_} | {ms(asked - executed)} | {stop_ms} ms | {ms(worker - stopped)} "
                  f"| {ms(whole - executed)} | {routes} | {ms(gap)} | {bgp_drops} | {bfd_downs} |")
            sys.stdout.flush()
            continue
        signalled = time.time()
        switch.send_signal(getattr(signal, f"SIG{args.signal}"))
        switch.wait()
        exited = time.time()
        log = f"{work}/raceway-{round_}.log"
        executed = time.time()
        switch = start(log)
        wait("the new FIB whole", 120, lambda: logged(log, "tables read whole") is not None)
        wait("a ping through the new switch", 30, lambda: any(t > executed for t in replies(ping_log)))
        worker = logged(log, "forwarding worker")[0]
        whole, line = logged(log, "tables read whole")
        routes = re.search(r"(\d+) routes", line).group(1)
        times = replies(ping_log)
        last_before = max(t for t in times if t < signalled)
        first_after = min(t for t in times if t > executed)
        settle = time.time() + 3 * args.bfd_ms * args.bfd_multiplier / 1000 + 1
        wait("a detection time", 30, lambda: time.time() > settle)
        now = (sessions(leaf_dir, "10.255.0.1"), sessions(spine_dir, "10.255.0.0"))
        bgp_drops = sum(n[1] - b[1] for n, b in zip(now, before))
        bfd_downs = sum(n[3] - b[3] for n, b in zip(now, before))
        print(f"| {round_} | {ms(exited - signalled)} | {ms(worker - executed)} | {ms(first_after - executed)} "
              f"| {ms(whole - executed)} | {routes} | {ms(first_after - last_before)} apart | {bgp_drops} "
              f"| {bfd_downs} |")
        sys.stdout.flush()
    pinger.send_signal(signal.SIGINT)
    pinger.wait()
    after = (sessions(leaf_dir, "10.255.0.1"), sessions(spine_dir, "10.255.0.0"))
    print(f"sessions before: leaf {before[0]}, spine {before[1]}; after: leaf {after[0]}, spine {after[1]} "
          "(BGP established, connections dropped, BFD up, BFD session-down events)")


try:
    main()
finally:
    cleanup()
