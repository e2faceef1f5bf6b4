#!/usr/bin/env python3
"""The driver of perf/faults.sh: faults an operator's day brings, injected in a seeded random
order into a leaf with BGP and BFD to two spines (perf/leaflab.py) while host0 pings the
spines' 10.200.0.1 through the switch every millisecond, sends a paced TCP flow to host1, and
a lossless RoCE flow runs between the lab's two PFC-honouring hosts. For each fault: the
longest gap in the replies (the data plane's downtime), BGP connections dropped and BFD downs
as the spines count them, lossless frames lost (gaps in the PSNs the receiving host saw, less
those that came late) and late (reordered), the TCP flow's longest stall (its sender's
intervals with no bytes acknowledged) and its retransmissions, the time from the fault until
forwarding, every session and both flows are as before, and what the switch said (its exit
status, or the line it logged). A fault that leaves the lab unrecoverable, or ends the TCP
connection, ends the run with one error line."""
import argparse, json, os, random, signal, subprocess, sys, time

from leaflab import TCP_INTERVAL_S, LeafLab, logged, replies, sh, tcp_intervals, vtysh, wait

parser = argparse.ArgumentParser()
parser.add_argument("--raceway", required=True)
parser.add_argument("--routes", type=int, default=100_000)
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--seed", type=int, default=None)
parser.add_argument("--only", default=None, help="one fault (its name in the table), for a closer look")
args = parser.parse_args()
seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)

tag = f"rf{os.getpid() % 100000}"
lab = LeafLab(args.raceway, tag, lossless=True, spines=2, tcp=True)
work = lab.work
ping_log = f"{work}/ping.log"
logs = iter(range(1, 1 << 30))


def new_log():
    return f"{work}/raceway-{next(logs)}.log"


current_log = None


def start_switch(*extra):
    """A new switch on the lab's config, as a service manager would start it."""
    global current_log
    current_log = new_log()
    lab.switch = lab.start(current_log, *extra)
    return current_log


def keeper_pids():
    listed = subprocess.run(["pgrep", "-f", f"raceway keep --netns {lab.ctl} "], capture_output=True, text=True)
    return [int(pid) for pid in listed.stdout.split()]


def reload(config=None):
    """`raceway reload`: (exit status, what it said)."""
    done = subprocess.run([args.raceway, "reload", "-c", config or lab.config_path], capture_output=True, text=True)
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1:]


def message(found):
    """A logged line's message, without its time and level (`logged`'s answer)."""
    return found[1].split(None, 2)[2] if found else "(not logged)"


def said_of(status, lines):
    text = lines[0] if lines else ""
    return f"exit {status}: {text}" if text else f"exit {status}"


# The faults. Each injects its fault, does what a service manager or an operator does next,
# and returns what the switch said.

def kill_switch():
    lab.switch.send_signal(signal.SIGKILL)
    lab.switch.wait()
    log = start_switch()
    wait("the restarted switch's worker", 60, lambda: logged(log, "forwarding worker") is not None)
    return "restarted: " + message(logged(log, "took over the host interfaces"))


def kill_keeper():
    pids = keeper_pids()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait("a new keeper", 30, lambda: logged(current_log, "a new keeper holds") is not None)
    return message(logged(current_log, "a new keeper holds"))


def kill_frr(daemon):
    """SIGKILL of one of the leaf's FRR daemons, then what watchfrr does: bgpd alone is
    restarted; zebra's death restarts every daemon (the others hold state zebra lost: bgpd's
    BFD registrations went with it)."""
    def inject():
        pid = lab.daemon_pid(lab.leaf_dir, daemon)
        os.kill(pid, signal.SIGKILL)
        wait(f"{daemon} to die", 10, lambda: not os.path.exists(f"/proc/{pid}"))
        restarted = [daemon] if daemon != "zebra" else ["zebra", "bgpd", "bfdd"]
        for other in restarted[1:]:
            other_pid = lab.daemon_pid(lab.leaf_dir, other)
            os.kill(other_pid, signal.SIGTERM)
            wait(f"{other} to stop", 10, lambda: not os.path.exists(f"/proc/{other_pid}"))
        for name in restarted:
            lab.start_daemon(lab.ctl, lab.leaf_dir, name)
        return f"{daemon} SIGKILL; restarted {', '.join(restarted)} (as watchfrr)"
    inject.__name__ = f"kill_{daemon}"
    return inject


def take_over():
    old = lab.switch
    log = start_switch("--take-over")
    status = old.wait()
    wait("the new switch's FIB", 120, lambda: logged(log, "tables read whole") is not None)
    return f"the switch before: exit {status}; " + message(logged(log, "closed its ports"))


def two_take_overs():
    first = take_over()
    return first + "; then " + take_over()


def route_of(address):
    """What the running switch's FIB does with `address` (`show route --json`): its prefix,
    or None when no route matches."""
    shown = subprocess.run([args.raceway, "show", "-c", lab.config_path, "route", address, "--json"],
                           capture_output=True, text=True)
    try:
        answer = json.loads(shown.stdout)[0]
    except (ValueError, IndexError, KeyError):
        return "unreadable: " + shown.stderr.strip()
    return answer.get("prefix") if answer.get("action") == "forward" else None


def withdrawals_during_take_over():
    """Up to 10,000 of the kernel's /32 routes withdrawn while a take-over runs, then added back:
    the new switch's FIB must have neither more nor less than the kernel."""
    count = min(10_000, args.routes)
    batch = f"{work}/withdraw.batch"
    with open(batch, "w") as file:
        for i in range(count):
            file.write(f"route del 10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32 via 10.255.0.1 dev up0\n")
    withdrawing = subprocess.Popen(["ip", "-n", lab.ctl, "-batch", batch], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
    said = take_over()
    withdrawing.wait()
    last = f"10.{64 + ((count - 1) >> 16)}.{((count - 1) >> 8) & 255}.{(count - 1) & 255}"
    wait("the withdrawals in the FIB", 60, lambda: route_of(last) is None)
    with open(batch, "w") as file:
        for i in range(count):
            file.write(f"route add 10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32 via 10.255.0.1 dev up0\n")
    sh("ip", "-n", lab.ctl, "-batch", batch)
    wait("the routes back in the FIB", 60, lambda: route_of(last) == f"{last}/32")
    return f"{count} withdrawn during it, then added back: the FIB followed both; {said}"


def take_over_during_reload():
    reloading = subprocess.Popen([args.raceway, "reload", "-c", lab.config_path], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
    said = take_over()
    out = reloading.communicate()[0].strip().splitlines()[-1:]
    return f"reload {said_of(reloading.returncode, out)}; take-over: {said}"


def reload_broken_then_valid():
    original = open(lab.config_path).read()
    with open(lab.config_path, "w") as file:
        file.write(original.replace("speed_gbps = 1\n", "speed_gbps = \"fast\"\n", 1))
    broken = reload()
    with open(lab.config_path, "w") as file:
        file.write(original)
    valid = reload()
    return f"broken: {said_of(*broken)}; valid: {said_of(*valid)}"


def reload_while_port_flaps():
    sh("ip", "link", "set", f"{tag}u0", "down")
    said = reload()
    sh("ip", "link", "set", f"{tag}u0", "up")
    return said_of(*said)


def config_removed():
    moved = f"{lab.config_path}.away"
    os.rename(lab.config_path, moved)
    said = reload()
    os.rename(moved, lab.config_path)
    return said_of(*said)


def config_a_directory():
    moved = f"{lab.config_path}.away"
    os.rename(lab.config_path, moved)
    os.mkdir(lab.config_path)
    said = reload()
    os.rmdir(lab.config_path)
    os.rename(moved, lab.config_path)
    return said_of(*said)


def stale_telemetry_socket():
    lab.switch.send_signal(signal.SIGTERM)
    status = lab.switch.wait()
    path = f"/var/run/dpdk/{tag}/dpdk_telemetry.v2"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.remove(path)  # a socket the switch left (a stale file is what the fault is)
    with open(path, "w") as file:
        file.write("stale\n")
    log = start_switch()
    wait("the restarted switch's worker", 60, lambda: logged(log, "forwarding worker") is not None)
    answered = subprocess.run([args.raceway, "show", "-c", lab.config_path, "interfaces"], capture_output=True)
    return f"stopped with exit {status}; restarted; show {'answers' if answered.returncode == 0 else 'fails'}"


def netns_deleted_while_stopped():
    lab.switch.send_signal(signal.SIGTERM)
    lab.switch.wait()
    sh("ip", "netns", "del", lab.ctl)
    wait("the keeper to let go", 10, lambda: not keeper_pids())
    # FRR's leaf daemons are stranded in the old namespace: stopped, and started in the new one
    # once the switch has made it (the operator's step, docs/FAULTS.md).
    for daemon in ["bfdd", "bgpd", "zebra"]:
        pid = lab.daemon_pid(lab.leaf_dir, daemon)
        if pid:
            os.kill(pid, signal.SIGKILL)
    log = start_switch()
    wait("the host interfaces", 60, lambda: "LOWER_UP" in sh("ip", "-n", lab.ctl, "link", "show", "up0", check=False))
    for daemon in ["zebra", "bgpd", "bfdd"]:
        lab.start_daemon(lab.ctl, lab.leaf_dir, daemon)
    lab.load_routes()
    return "keeper let go; new namespace; FRR and the routes put back in it"


FAULTS = [kill_switch, kill_keeper, kill_frr("zebra"), kill_frr("bgpd"), take_over, two_take_overs,
          take_over_during_reload, reload_broken_then_valid, reload_while_port_flaps, config_removed,
          config_a_directory, stale_telemetry_socket, netns_deleted_while_stopped, withdrawals_during_take_over]


def sessions_back(fault):
    """Waits until BGP is established and BFD up on both sides of every session; else one error
    line with what each side says."""
    deadline = time.time() + 120
    while not all(side[0] and side[2] for pair in lab.all_sessions() for side in pair):
        if time.time() > deadline:
            peers = [vtysh(directory, "show bfd peers json") for directory in [lab.leaf_dir, *lab.spine_dirs]]
            sys.exit(f"error: BGP and BFD not back after {fault}: {lab.all_sessions()}; BFD peers {peers}")
        time.sleep(0.05)


def spines_count():
    """(BGP connections dropped, BFD session downs), summed over the spines' own counts: their
    FRR never restarts, while the leaf's counters start again with a restarted bgpd or bfdd."""
    views = [pair[1] for pair in lab.all_sessions()]
    return sum(view[1] for view in views), sum(view[3] for view in views)


def tcp_during(began, ended):
    """The TCP flow's longest stall (s: a run of the receiver's intervals with no bytes) and the
    sender's retransmissions, over the intervals that end between `began` and `ended` (epoch s)."""
    def during(log):
        return [(sent, retransmits) for end, sent, retransmits in tcp_intervals(log)
                if began <= lab.tcp_began + end <= ended + TCP_INTERVAL_S]
    stall = longest = 0.0
    for received, _ in during(lab.tcp_server_log):
        stall = stall + TCP_INTERVAL_S if received == 0 else 0.0
        longest = max(longest, stall)
    return longest, sum(retransmits for _, retransmits in during(lab.tcp_log))


def main():
    global current_log
    current_log = new_log()
    lab.up(current_log, args.routes)
    pinger = lab.pinger(ping_log, interval="0.001")
    faults = [fault for fault in FAULTS if args.only in (None, fault.__name__)]
    if not faults:
        sys.exit(f"error: --only: no fault named '{args.only}'")
    order = [fault for fault in faults for _ in range(args.rounds)]
    random.Random(seed).shuffle(order)
    print(f"{args.routes} routes; two spines, BFD 300 ms x 3, BGP timers 3 9; host0 pings the spines every 1 ms "
          f"and sends TCP to host1; {len(faults)} faults x {args.rounds}, seed {seed} (SEED={seed} replays the order)")
    print()
    print("| # | fault | downtime (longest gap in replies) | BGP drops (spines) | BFD downs (spines) | lossless frames lost "
          "| lossless frames late | TCP stall | TCP retransmits | back as before after | said |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for index, fault in enumerate(order, 1):
        before = spines_count()
        flow_before = lab.lossless_counts()
        began = time.time()
        said = fault()
        ended = time.time()
        flow_ended = lab.lossless_counts()["received"]
        wait(f"forwarding after {fault.__name__}", 120, lambda: any(t > ended for t in replies(ping_log)))
        sessions_back(fault.__name__)
        wait(f"the lossless flow after {fault.__name__}", 60,
             lambda: lab.lossless_counts()["received"] > flow_ended + 100)
        wait(f"the TCP flow after {fault.__name__}", 120, lambda: any(
            lab.tcp_began + end > ended and received > 0 for end, received, _ in tcp_intervals(lab.tcp_server_log)))
        recovered = max(time.time(), min(t for t in replies(ping_log) if t > ended))
        # A detection time after: a session about to fail has failed.
        settle = time.time() + 1.0
        wait("a detection time", 10, lambda: time.time() > settle)
        after = spines_count()
        flow_after = lab.lossless_counts()
        late = flow_after["late"] - flow_before["late"]
        lost = flow_after["lost"] - flow_before["lost"] - late
        if not lab.tcp_alive():
            sys.exit(f"error: the TCP flow ended after {fault.__name__}: {open(lab.tcp_log).read()[-400:]}")
        stall, retransmits = tcp_during(began, recovered)
        times = [t for t in replies(ping_log) if began - 1 <= t <= recovered + 0.01]
        gap = max((b - a for a, b in zip(times, times[1:])), default=0.0)
        drops, downs = after[0] - before[0], after[1] - before[1]
        back = recovered - began
        rows.setdefault(fault.__name__, []).append((gap, drops, downs, back, lost, late, stall, retransmits))
        print(f"| {index} | {fault.__name__} | {gap * 1e3:.0f} ms | {drops} | {downs} | {lost} | {late} "
              f"| {stall * 1e3:.0f} ms | {retransmits} | {back * 1e3:.0f} ms | {said} |")
        sys.stdout.flush()
    pinger.send_signal(signal.SIGINT)
    pinger.wait()
    print()
    print("| fault | runs | worst downtime | BGP drops (spines) | BFD downs (spines) | lossless frames lost "
          "| lossless frames late | worst TCP stall | TCP retransmits | worst time back |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fault in FAULTS:
        runs = rows.get(fault.__name__, [])
        if runs:
            print(f"| {fault.__name__} | {len(runs)} | {max(r[0] for r in runs) * 1e3:.0f} ms "
                  f"| {sum(r[1] for r in runs)} | {sum(r[2] for r in runs)} | {sum(r[4] for r in runs)} "
                  f"| {sum(r[5] for r in runs)} | {max(r[6] for r in runs) * 1e3:.0f} ms | {sum(r[7] for r in runs)} "
                  f"| {max(r[3] for r in runs) * 1e3:.0f} ms |")


try:
    main()
finally:
    lab.cleanup()
