#!/usr/bin/env bash
# Route churn: forwarding while the kernel adds and removes 10,000 routes. raceway runs with
# [control] on virtual devices (a net_pcap source replaying 64-flow RoCEv2 traffic forever into
# a net_null port, as perf/throughput.sh); `ip -batch` adds 10,000 /32 routes via a next hop on
# the out port in raceway's namespace, then deletes them, CYCLES times. The driver reads
# raceway's telemetry: the out port's tx rate before and during the churn, and how long until
# the FIB the workers read holds all the routes (and none again). Needs root.
#   perf/route-churn.sh [SIZE] [CYCLES]     (SIZE: frame bytes before FCS, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
size=${1:-60}
cycles=${2:-3}
routes=${ROUTES:-10000}
work=$(mktemp -d /tmp/raceway-churn.XXXXXX)
ns=rw-churn-$$
switch=""
trap '[ -n "$switch" ] && kill $switch 2>/dev/null; wait 2>/dev/null; ip netns del $ns 2>/dev/null; rm -rf "$work"' EXIT
raceway_binary
raceway=$RACEWAY
$raceway gen flows --out "$work/flows.pcap" --flows 64 --packets 10000 --size "$size" >/dev/null
cat >"$work/leaf.toml" <<EOF2
[switch]
name = "churn"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--file-prefix", "rw-churn-$$", "--log-level", "*:error"]
lcores = "0-1"
[[port]]
name = "in"
device = "net_pcap0,rx_pcap=$work/flows.pcap,infinite_rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "out"
device = "net_null0,no-rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:11:00"
addresses = ["10.255.0.0/31"]
[[neighbor]]
ip = "10.255.0.1"
mac = "02:00:00:00:11:01"
port = "out"
[[route]]
prefix = "10.0.1.0/24"
port = "out"
[control]
netns = "$ns"
keep_interfaces_s = 0
EOF2
python3 - "$work" "$routes" <<'PY'
import sys
work, routes = sys.argv[1], int(sys.argv[2])
with open(f"{work}/add.batch", "w") as add, open(f"{work}/del.batch", "w") as delete:
    for i in range(routes):
        prefix = f"172.{16 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32"
        add.write(f"route add {prefix} via 10.255.0.1 dev out\n")
        delete.write(f"route del {prefix} via 10.255.0.1 dev out\n")
PY
$raceway --log-level warn run -c "$work/leaf.toml" --stats-json "$work/stats.json" >"$work/raceway.log" 2>&1 &
switch=$!
python3 - "/var/run/dpdk/rw-churn-$$/dpdk_telemetry.v2" "$ns" "$work" "$routes" "$cycles" <<'PY'
import json, os, socket, subprocess, sys, time
path, ns, work, routes, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def query(command):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.connect(path)
        hello = json.loads(connection.recv(1024))
        connection.send(command.encode())
        return json.loads(connection.recv(hello.get("max_output_len", 16384)))[command]

deadline = time.time() + 60
while True:
    try:
        fib = query("/raceway/control")["fib"]
        break
    except (OSError, KeyError, TypeError, ValueError):
        if time.time() > deadline:
            sys.exit("error: no telemetry from raceway after 60 s")
        time.sleep(0.1)
base_routes = fib["routes"]
tx = lambda: query("/raceway/ports")["out"]["tx_packets"]

def rate(seconds):
    first, start = tx(), time.time()
    time.sleep(seconds)
    return (tx() - first) / (time.time() - start) / 1e6

time.sleep(1)
idle = rate(2)
adds, deletes = [], []
first, start = tx(), time.time()
for _ in range(cycles):
    for batch, want, times in (("add", base_routes + routes, adds), ("del", base_routes, deletes)):
        began = time.time()
        subprocess.run(["ip", "-n", ns, "-batch", f"{work}/{batch}.batch"], check=True)
        kernel_done = time.time()
        while query("/raceway/control")["fib"]["routes"] != want:
            time.sleep(0.002)
        times.append((kernel_done - began, time.time() - began))
churn = (tx() - first) / (time.time() - start) / 1e6
fib = query("/raceway/control")["fib"]
print(f"forwarding (out port, Mpps): {idle:.2f} before the churn, {churn:.2f} during {cycles} cycles")
for name, times in (("add", adds), ("delete", deletes)):
    kernel = sorted(t[0] for t in times)[len(times) // 2]
    total = sorted(t[1] for t in times)[len(times) // 2]
    print(f"{name} {routes} routes: the kernel took {kernel:.2f} s (ip -batch), the workers' FIB had them "
          f"{total:.2f} s after the batch began: {routes / total:,.0f} routes/s (median of {len(times)})")
print(f"FIB generations published: {fib['generation']}; last update {fib['last_update_ns'] / 1e3:.0f} us")
PY
kill -INT $switch; wait $switch; switch=""
echo "memory: $(memory_label)"
