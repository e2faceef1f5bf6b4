#!/usr/bin/env bash
# Route scale: how fast raceway's FIB follows the kernel's, and what a large table costs, while
# hosts talk through the switch. raceway runs with [control] on net_af_packet ports to two host
# namespaces (veth pairs). Throughout, host0 pings host1 every 5 ms through the switch (loss)
# and pings its gateway, the switch's own address, every 10 ms (the punt path). In raceway's
# namespace, `ip -batch` adds then deletes, in turn: 100 k IPv6 /64s (fd10::/32, via host1),
# then 10 k, 100 k and 1 M IPv4 /32 routes (10.64.0.0/10, via host1). For each batch the driver
# (perf/route_scale.py) prints the kernel's time (`ip -batch`), the time until the FIB the
# workers read holds every route (raceway's telemetry), raceway's RSS growth per route over the
# batch, and, with the
# batch's routes in place, the time from one more `ip route add` returning to the FIB holding it
# (p50/p99 of 100), and raceway's own read-to-publish and punt latency quantiles. Then raceway's
# RSS idle, at its peak, and once every batch is deleted again; and `raceway show routes` with
# the largest batch in place: its time and its client's peak RSS. Needs root.
#   perf/route-scale.sh [SIZES]      (SIZES: IPv4 batch sizes, default "10000 100000 1000000")
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
sizes=${1:-10000 100000 1000000}
work=$(mktemp -d /tmp/raceway-scale.XXXXXX)
tag=rs$$
switch=""
cleanup() {
  [ -n "$switch" ] && kill "$switch" 2>/dev/null
  wait 2>/dev/null || true
  for n in h0 h1 ctl; do ip netns del "$tag$n" 2>/dev/null || true; done
  for l in p0 p1; do ip link del "$tag$l" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
raceway_binary
raceway=$RACEWAY
for index in 0 1; do
  ns=$tag"h$index" link=$tag"p$index"
  ip netns add "$ns"
  ip link add "$link" type veth peer name eth0 netns "$ns"
  ip link set "$link" up
  ethtool -K "$link" tx off tso off gso off gro off >/dev/null
  ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off gro off >/dev/null
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.0.$index.2/24" dev eth0
  ip -n "$ns" route add default via "10.0.$index.1"
done
cat >"$work/leaf.toml" <<TOML
[switch]
name = "scale"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--file-prefix", "$tag", "--log-level", "*:error"]
lcores = "0-1"
[[port]]
name = "host0"
device = "net_af_packet0,iface=${tag}p0"
speed_gbps = 1
addresses = ["10.0.0.1/24"]
[[port]]
name = "host1"
device = "net_af_packet1,iface=${tag}p1"
speed_gbps = 1
addresses = ["10.0.1.1/24", "fd00:1::1/64"]
[control]
netns = "${tag}ctl"
keep_interfaces_s = 0
TOML
$raceway --log-level warn run -c "$work/leaf.toml" --stats-json "$work/stats.json" >"$work/raceway.log" 2>&1 &
switch=$!
# shellcheck disable=SC2086 # $sizes is a list: one argument per size
python3 perf/route_scale.py --telemetry "/var/run/dpdk/$tag/dpdk_telemetry.v2" --pid "$switch" \
  --control "${tag}ctl" --host0 "${tag}h0" --work "$work" --sizes $sizes --raceway "$raceway" --prefix "$tag"
kill -INT "$switch"; wait "$switch"; switch=""
python3 - "$work/stats.json" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
control = stats["control"]
print(f"at exit: {control['fib_generation']} FIB generations, read-to-publish p50 {control['publish_p50_ns'] / 1e3:.0f} us, "
      f"p99 {control['publish_p99_ns'] / 1e3:.0f} us; punt p99 {control['punt_p99_ns'] / 1e3:.0f} us, "
      f"inject p99 {control['inject_p99_ns'] / 1e3:.0f} us; netlink resyncs {control['fib_resyncs']}")
print(f"mbufs: pool {stats['mbufs']['pool']}, back at exit {stats['mbufs']['available_at_exit']}")
PY
echo "memory: $(memory_label)"
