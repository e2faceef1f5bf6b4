"""The driver of perf/restart.sh: a leaf with BGP and BFD to a spine and a large table in its
kernel, restarted as systemd restarts it (SIGTERM, then a new process), timed from the outside
(the signal, the exec, host0's pings through the switch) and from raceway's own log (when the
new FIB holds the kernel's tables whole)."""
import argparse, os, re, signal, subprocess, sys, time

from leaflab import LeafLab, logged, replies, sh, wait

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
lab = LeafLab(args.raceway, tag, bfd_ms=args.bfd_ms, bfd_multiplier=args.bfd_multiplier)
work = lab.work


def start(log, take_over=False):
    return lab.start(log, *(["--take-over"] if take_over else []))


def main():
    lab.up(f"{work}/raceway-0.log", args.routes)
    kernel_routes = len(sh("ip", "-n", lab.ctl, "route", "show", "table", "main").splitlines())
    print(f"the kernel's main table: {kernel_routes} routes; BFD {args.bfd_ms} ms x {args.bfd_multiplier}, "
          f"BGP timers 3 9; " + ("a take-over (make-before-break)" if args.take_over else
                                   f"SIG{args.signal} then a new process") + f", {args.rounds} rounds")
    before = lab.sessions()
    ping_log = f"{work}/ping.log"
    pinger = lab.pinger(ping_log)
    if os.environ.get("CAPTURE_BFD"):
        lab.helpers.append(subprocess.Popen(["ip", "netns", "exec", lab.spine, "tcpdump", "-n", "-tt", "-i", "eth0", "-w",
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
            old, lab.switch = lab.switch, start(log, take_over=True)
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
            now = lab.sessions()
            bgp_drops = sum(n[1] - b[1] for n, b in zip(now, before))
            bfd_downs = sum(n[3] - b[3] for n, b in zip(now, before))
            print(f"| {round_} | {ms(asked - executed)} | {stop_ms} ms | {ms(worker - stopped)} "
                  f"| {ms(whole - executed)} | {routes} | {ms(gap)} | {bgp_drops} | {bfd_downs} |")
            sys.stdout.flush()
            continue
        signalled = time.time()
        lab.switch.send_signal(getattr(signal, f"SIG{args.signal}"))
        lab.switch.wait()
        exited = time.time()
        log = f"{work}/raceway-{round_}.log"
        executed = time.time()
        lab.switch = start(log)
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
        now = lab.sessions()
        bgp_drops = sum(n[1] - b[1] for n, b in zip(now, before))
        bfd_downs = sum(n[3] - b[3] for n, b in zip(now, before))
        print(f"| {round_} | {ms(exited - signalled)} | {ms(worker - executed)} | {ms(first_after - executed)} "
              f"| {ms(whole - executed)} | {routes} | {ms(first_after - last_before)} apart | {bgp_drops} "
              f"| {bfd_downs} |")
        sys.stdout.flush()
    pinger.send_signal(signal.SIGINT)
    pinger.wait()
    after = lab.sessions()
    print(f"sessions before: leaf {before[0]}, spine {before[1]}; after: leaf {after[0]}, spine {after[1]} "
          "(BGP established, connections dropped, BFD up, BFD session-down events)")


try:
    main()
finally:
    lab.cleanup()
