"""The driver of perf/route-scale.sh: route batches in raceway's namespace, timed against
raceway's DPDK telemetry, while host0 pings host1 through the switch and its own gateway."""
import argparse, json, os, subprocess, sys, time

import perflib

parser = argparse.ArgumentParser()
parser.add_argument("--telemetry")
parser.add_argument("--pid", type=int)
parser.add_argument("--control")
parser.add_argument("--host0")
parser.add_argument("--work")
parser.add_argument("--sizes", nargs="+", type=int)
parser.add_argument("--raceway")
parser.add_argument("--prefix")
args = parser.parse_args()


def query(command):
    return perflib.telemetry(args.telemetry, command)[command]


def fib():
    return query("/raceway/control")["fib"]


def rss_bytes():
    with open(f"/proc/{args.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


deadline = time.time() + 90
while True:
    try:
        if fib()["generation"] >= 2:
            break
    except (OSError, KeyError, TypeError, ValueError):
        pass
    if time.time() > deadline:
        sys.exit("error: no FIB from raceway's control plane after 90 s")
    time.sleep(0.1)


def ip(*words):
    subprocess.run(["ip", "-n", args.control, *words], check=True, capture_output=True)


# Resolve host1 (the routes' next hop) first, then keep both pings going throughout.
subprocess.run(["ip", "netns", "exec", args.host0, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"],
               check=True, capture_output=True)
across = subprocess.Popen(["ip", "netns", "exec", args.host0, "ping", "-q", "-i", "0.005", "-W", "2", "10.0.1.2"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
gateway = subprocess.Popen(["ip", "netns", "exec", args.host0, "ping", "-q", "-i", "0.01", "-W", "2", "10.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
time.sleep(1)


def prefixes(family, count):
    for i in range(count):
        if family == 4:
            yield f"10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32"
        else:
            yield f"fd10:0:{i >> 16:x}:{i & 0xffff:x}::/64"


def write_batch(family, count, verb):
    path = f"{args.work}/{verb}-{family}-{count}.batch"
    via = "10.0.1.2" if family == 4 else "fd00:1::2"
    with open(path, "w") as batch:
        for prefix in prefixes(family, count):
            batch.write(f"route {verb} {prefix} via {via} dev host1\n")
    return path


def wait_routes(want, limit=600):
    start = time.time()
    while fib()["routes"] != want:
        if time.time() - start > limit:
            sys.exit(f"error: the FIB never reached {want} routes (has {fib()['routes']})")
        time.sleep(0.002)


def single_changes(family, count, samples=100):
    """Time from `ip route add`/`del` of one more route returning to the FIB holding it."""
    times = []
    via = "10.0.1.2" if family == 4 else "fd00:1::2"
    for n in range(samples):
        prefix = f"10.127.{n >> 8}.{n & 255}/32" if family == 4 else f"fd11::{n:x}/128"
        base = fib()["routes"]
        for verb, want in (("add", base + 1), ("del", base)):
            ip(*(["-6"] if family == 6 else []), "route", verb, prefix, "via", via, "dev", "host1")
            returned = time.perf_counter()
            while fib()["routes"] != want:
                time.sleep(0.0001)
            times.append(time.perf_counter() - returned)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def show_routes():
    """`raceway show routes` with the table in place: its time, its client's peak RSS, lines."""
    started = time.time()
    client = subprocess.Popen([args.raceway, "show", "--prefix", args.prefix, "routes"], stdout=subprocess.PIPE)
    lines = sum(1 for _ in client.stdout)
    _, status, usage = os.wait4(client.pid, 0)
    client.returncode = os.waitstatus_to_exitcode(status)
    if client.returncode != 0:
        sys.exit(f"error: raceway show routes failed ({client.returncode})")
    return time.time() - started, usage.ru_maxrss * 1024, lines


fib_at_start = fib()
base_routes = fib_at_start["routes"]
idle_rss = rss_bytes()
peak_rss = idle_rss
shown = None
rows = []
# IPv6 first: the allocator keeps what a batch freed, so RSS is read against each batch's own
# start, and the largest batch comes last.
for family, count in [(6, 100_000)] + [(4, size) for size in args.sizes]:
    add, delete = write_batch(family, count, "add"), write_batch(family, count, "del")
    base_rss = rss_bytes()
    started = time.time()
    subprocess.run(["ip", "-n", args.control, "-batch", add], check=True)
    kernel = time.time() - started
    wait_routes(base_routes + count)
    seen = time.time() - started
    rss = rss_bytes()
    peak_rss = max(peak_rss, rss)
    if family == 4 and count == max(args.sizes):
        shown = (count,) + show_routes()
    p50, p99 = single_changes(family, count)
    started = time.time()
    subprocess.run(["ip", "-n", args.control, "-batch", delete], check=True)
    kernel_del = time.time() - started
    wait_routes(base_routes)
    seen_del = time.time() - started
    rows.append((family, count, kernel, seen, kernel_del, seen_del, p50, p99, (rss - base_rss) / count))
    os.unlink(add)
    os.unlink(delete)

# The switch gives freed memory back in its housekeeping once the deletes settle: read RSS
# until it stops falling (at most 5 s).
after_rss = rss_bytes()
for _ in range(50):
    time.sleep(0.1)
    now = rss_bytes()
    if now >= after_rss:
        break
    after_rss = now
across.send_signal(2)
gateway.send_signal(2)
out_across, _ = across.communicate()
out_gateway, _ = gateway.communicate()
control = fib()


def summary(text):
    lines = [line for line in text.splitlines() if "packets transmitted" in line]
    return lines[0] if lines else text[-200:]


print("| routes | kernel adds (ip -batch) | in the workers' FIB | kernel deletes | FIB empty again | one more route visible, p50 / p99 | RSS per route |")
print("|---|---|---|---|---|---|---|")
for family, count, kernel, seen, kernel_del, seen_del, p50, p99, per_route in rows:
    kind = "IPv4 /32" if family == 4 else "IPv6 /64"
    print(f"| {count:,} {kind} | {kernel:.2f} s ({count / kernel / 1e3:,.0f} k/s) | {seen:.2f} s ({count / seen / 1e3:,.0f} k/s) "
          f"| {kernel_del:.2f} s | {seen_del:.2f} s ({count / seen_del / 1e3:,.0f} k/s) | {p50 * 1e3:.2f} / {p99 * 1e3:.2f} ms "
          f"| {per_route:.0f} B |")
print(f"raceway RSS: idle {idle_rss / 2**20:.0f} MB; at most {peak_rss / 2**20:.0f} MB with routes in; "
      f"{after_rss / 2**20:.0f} MB once every batch was deleted ({after_rss / idle_rss:.2f} x idle)")
if shown:
    count, seconds, client_rss, lines = shown
    print(f"raceway show routes at {count:,} routes and more: {lines:,} lines in {seconds:.2f} s, "
          f"client peak RSS {client_rss / 2**20:.0f} MB")
print(f"ping host0 -> host1 every 5 ms through the switch: {summary(out_across)}")
print(f"ping host0 -> its gateway every 10 ms (punted): {summary(out_gateway)}")
print(f"raceway: read-to-publish p50 {control['publish_p50_ns'] / 1e3:.0f} us, p99 {control['publish_p99_ns'] / 1e3:.0f} us; "
      f"punt p50 {control['punt_p50_ns'] / 1e3:.0f} us, p99 {control['punt_p99_ns'] / 1e3:.0f} us; "
      f"inject p99 {control['inject_p99_ns'] / 1e3:.0f} us")
