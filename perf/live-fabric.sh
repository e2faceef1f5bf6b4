#!/usr/bin/env bash
# A live leaf-spine on one host: four `raceway run` processes (leaf0, leaf1, spine0, spine1)
# joined by net_memif links, and a traffic process (`raceway blast`) sending lossless RoCEv2
# frames into leaf0's host port (10.0.0.0/24) towards leaf1's host (10.0.1.0/24, a net_pcap
# capture). Links run at
# 1 Gb/s (shaped), the blast offers 2 Gb/s: leaf1's host port is the bottleneck, so leaf1
# pauses the spines and the spines pause leaf0 (PFC across two hops), while leaf0 sprays over
# both spines. Prints each switch's counters and what arrived.
#
#   perf/live-fabric.sh                 # 4 s of traffic
#   DURATION=10 RATE_GBPS=3 perf/live-fabric.sh
#
# The same fabric, with the traffic from a pcap instead of blast, is the test
# live_memif_leaf_spine_forwards_sprays_and_propagates_pfc (tests/dpdk/live/memif.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
DURATION=${DURATION:-4}
RATE_GBPS=${RATE_GBPS:-2}
OUT=${OUT:-target/live-fabric}
rm -rf "$OUT" && mkdir -p "$OUT"
raceway_binary
DIR=$(realpath "$OUT")

memif() { echo "net_memif$4,role=$1,socket=$DIR/$2-$3.sock,socket-abstract=no"; }

# switch NAME MAC "PORT|DEVICE|GBPS|PEER_MAC ..." "PREFIX|TARGET ..." [GROUP MEMBERS...]
# Each port's peer_mac is its neighbour's MAC: a switch routes only frames sent to its own.
switch() {
  local name=$1 mac=$2 ports=$3 routes=$4; shift 4
  {
    echo "[switch]"; echo "name = \"$name\""; echo "mac = \"$mac\""; echo "buffer_bytes = 16777216"
    echo "[dpdk]"; echo "eal = [$(eal_memory_toml 512), \"--no-pci\", \"--no-shconf\", \"--log-level\", \"*:warning\"]"
    echo 'lcores = "0@0,1@1"'
    echo "[qos]"; echo "dscp_to_tc = { 26 = 3, default = 0 }"; echo "lossless = [3]"
    echo "[qos.pfc]"; echo "xoff_bytes = 100000"; echo "xon_bytes = 50000"; echo "headroom_bytes = 4194304"
    for port in $ports; do
      IFS='|' read -r pname device gbps peer_mac <<<"$port"
      printf '[[port]]\nname = "%s"\ndevice = "%s"\nspeed_gbps = %s\ncable_m = 10\npeer_mac = "%s"\n' \
        "$pname" "$device" "$gbps" "$peer_mac"
    done
    for route in $routes; do
      IFS='|' read -r prefix target <<<"$route"
      kind=port; [ "$target" = spines ] && kind=group
      printf '[[route]]\nprefix = "%s"\n%s = "%s"\n' "$prefix" "$kind" "$target"
    done
    if [ $# -gt 0 ]; then
      printf '[[group]]\nname = "spines"\nports = [%s]\nmode = "spray"\n' "$(printf '"%s",' "$@" | sed 's/,$//')"
    fi
  } >"$OUT/$name.toml"
}

# leaf0's MAC is the one `raceway gen` addresses its frames to, as a host sends to its router.
SPINE0=02:00:00:30:00:00 SPINE1=02:00:00:30:01:00 LEAF0=02:00:00:00:00:01 LEAF1=02:00:00:20:01:00 HOST=02:00:00:00:99:99
switch spine0 $SPINE0 "l0|$(memif server l0 s0 70)|1|$LEAF0 l1|$(memif server l1 s0 71)|1|$LEAF1" \
  "10.0.0.0/24|l0 10.0.1.0/24|l1"
switch spine1 $SPINE1 "l0|$(memif server l0 s1 72)|1|$LEAF0 l1|$(memif server l1 s1 73)|1|$LEAF1" \
  "10.0.0.0/24|l0 10.0.1.0/24|l1"
switch leaf1 $LEAF1 "h0|net_pcap71,tx_pcap=$DIR/leaf1-h0.pcap|1|$HOST s0|$(memif client l1 s0 74)|1|$SPINE0 s1|$(memif client l1 s1 75)|1|$SPINE1" \
  "10.0.1.0/24|h0 0.0.0.0/0|spines" s0 s1
switch leaf0 $LEAF0 "h0|$(memif server h0 l0 76)|1|$HOST s0|$(memif client l0 s0 77)|1|$SPINE0 s1|$(memif client l0 s1 78)|1|$SPINE1" \
  "10.0.0.0/24|h0 0.0.0.0/0|spines" s0 s1

# The traffic: 16 lossless RoCEv2 flows from leaf0's host subnet 10.0.0.0/24 to leaf1's
# 10.0.1.0/24, 1000-byte frames.
"$RACEWAY" gen flows --out "$OUT/traffic.pcap" --flows 16 --packets 5000 --size 1000 >/dev/null

pids=()
start() {  # name duration
  "$RACEWAY" run -c "$OUT/$1.toml" --duration "$2" --stats-json "$OUT/$1.json" -- --file-prefix "lf-$$-$1" \
    >"$OUT/$1.log" 2>&1 &
  pids+=("$!")
}
wait_worker() { for _ in $(seq 300); do grep -q "worker on lcore" "$OUT/$1.log" 2>/dev/null && return; sleep 0.1; done; echo "error: $1 did not start (see $OUT/$1.log)" >&2; exit 2; }
start spine0 $((DURATION + 14)); start spine1 $((DURATION + 14))
wait_worker spine0; wait_worker spine1
start leaf1 $((DURATION + 8)); wait_worker leaf1
start leaf0 $((DURATION + 5)); wait_worker leaf0
# --pfc 1: blast is a RoCE NIC on a 1 Gb/s link, honouring leaf0's pauses per priority, so
# the traffic is lossless end to end (without it, leaf0's host port overflows its headroom).
mapfile -t memory < <(eal_memory 512)
"$RACEWAY" blast --trace "$OUT/traffic.pcap" --device "$(memif client h0 l0 0)" --rate-gbps "$RATE_GBPS" \
  --pfc 1 --duration "$DURATION" -- "${memory[@]}" --no-pci --no-shconf --file-prefix "lf-$$-blast" --log-level '*:error' \
  -l 0 >"$OUT/blast.json" 2>"$OUT/blast.log" || { echo "error: blast failed: see $OUT/blast.log" >&2; exit 2; }
for pid in "${pids[@]}"; do wait "$pid"; done
python3 - "$OUT" <<'PY'
import json, os, struct, sys
out = sys.argv[1]
blast = json.load(open(os.path.join(out, "blast.json")))
print(f"traffic (raceway blast): {blast['sent']} frames at {blast['gbps_on_wire']:.2f} Gb/s")
print(f"{'switch':8} {'port':4} {'rx':>8} {'tx':>8} {'drops':>7} {'XOFF tx':>8} {'PFC rx':>7}")
for name in ["leaf0", "spine0", "spine1", "leaf1"]:
    stats = json.load(open(os.path.join(out, name + ".json")))
    for port, c in stats["ports"].items():
        print(f"{name:8} {port:4} {c['rx_packets']:8} {c['tx_packets']:8} {sum(c['drops'].values()):7} "
              f"{sum(c['pfc_xoff_tx']):8} {sum(c['pfc_rx']):7}")
data = open(os.path.join(out, "leaf1-h0.pcap"), "rb").read()
order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
count, offset = 0, 24
while offset + 16 <= len(data):
    count += 1
    offset += 16 + struct.unpack_from(order + "I", data, offset + 8)[0]
print(f"arrived at leaf1's host: {count} frames; blast sent {blast['sent']}")
PY
echo "memory: $(memory_label)"
