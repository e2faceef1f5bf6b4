#!/usr/bin/env bash
# How raceway scales with workers, next to dpdk-testpmd io on the same virtual devices, in one
# run: for k = 1 .. N workers (N = this machine's CPUs, or WORKERS), k port pairs, each an
# in port (net_pcap replaying a RoCEv2 trace forever) routed to its out port (net_null). Each
# pair's trace goes to its own subnet, so with run-to-completion sharding each worker owns one
# pair and no frame crosses between workers: the curve shows what sharding costs and where
# the machine runs out. CROSS=1 routes pair i's traffic to the out port of pair i+1 instead,
# so every frame crosses to another worker's port over a ring (k >= 2).
#
# Then one hot port: for k = 1 .. N workers, one in port with k rx queues (net_pcap, a trace
# per queue, each to all k subnets in turn) and k out ports, each owned by a worker
# (`[[port]] rx_queues = k`): every worker polls a queue of the hot port, and (k-1)/k of its
# frames cross to another worker's out port, as RSS hashing flows to queues would have them.
# testpmd io forwards the same k rx queues to k tx queues of one out port. Each point of this
# table is the median of REPEAT runs (default 3; this machine's runs of one configuration
# vary by up to 1.5x), the runs on stderr. ONLY=pairs or ONLY=hot runs one table.
#
#   perf/scaling.sh                  # 64 B frames, 6 s per point
#   SIZE=1020 DURATION=10 perf/scaling.sh
#   CROSS=1 ONLY=pairs perf/scaling.sh
#
# Prints Mpps (sum over the out ports), the speed-up over one worker, and raceway / testpmd.
# Machine notes: lcore j runs on CPU j mod N and the main lcore on CPU 0, so with N workers one
# shares CPU 0 with the (mostly sleeping) main lcore, as in perf/throughput.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
DURATION=${DURATION:-6}
SIZE=${SIZE:-60}
CPUS=$(nproc)
WORKERS=${WORKERS:-$CPUS}
CROSS=${CROSS:-}
ONLY=${ONLY:-}
REPEAT=${REPEAT:-3}
OUT=${OUT:-target/scaling}
mkdir -p "$OUT"
command -v dpdk-testpmd >/dev/null || { echo "error: dpdk-testpmd not found: install dpdk-dev (make deps does it)"; exit 2; }
raceway_binary
mapfile -t memory < <(eal_memory 2048)
EAL=("${memory[@]}" --no-pci --no-shconf --log-level '*:error')

for pair in $(seq 1 "$WORKERS"); do
  "$RACEWAY" gen flows --out "$OUT/flows-$SIZE-$pair.pcap" --flows 64 --packets 10000 --size "$SIZE" \
    --to-subnet "$pair" >/dev/null
done
# The hot port's traces: for k subnets, the k pair traces interleaved (same timestamps), one
# copy per rx queue.
for k in $(seq 1 "$WORKERS"); do
  parts=()
  for pair in $(seq 1 "$k"); do parts+=("$OUT/flows-$SIZE-$pair.pcap"); done
  mergecap -F pcap -w "$OUT/hot-$SIZE-$k.pcap" "${parts[@]}"
done

# --lcores for k workers: main lcore 0 on CPU 0, worker lcore j on CPU j mod CPUS.
lcores() {
  local list="0@0"
  for j in $(seq 1 "$1"); do list="$list,$j@$((j % CPUS))"; done
  echo "$list"
}

testpmd_mpps() {
  local k=$1 log="$OUT/testpmd-$SIZE-$1.log" vdevs=()
  for pair in $(seq 1 "$k"); do
    vdevs+=(--vdev "net_pcap$pair,rx_pcap=$OUT/flows-$SIZE-$pair.pcap,infinite_rx=1" --vdev "net_null$pair,no-rx=1")
  done
  timeout -s INT $((DURATION + 10)) dpdk-testpmd --lcores "$(lcores "$k")" "${EAL[@]}" --file-prefix "sc-tp-$$" \
    "${vdevs[@]}" -- --forward-mode=io --nb-cores="$k" --stats-period=1 </dev/null >"$log" 2>&1 || true
  forget_eal_prefix "sc-tp-$$"
  # Sum of the out ports' (odd port ids) Tx-pps, averaged over the samples after the first two.
  awk '/NIC statistics for port/ {port=$(NF-1)} /Tx-pps:/ && port % 2 == 1 {sample[port]++; if (sample[port] > 2) {sum+=$2; n++}}
       END {if (n) printf "%.2f", sum / (n / '"$k"') / 1e6; else print "n/a"}' "$log"
}

# A benchmark config's switch, EAL, lcores for K workers and QoS.
#   config_head NAME K
config_head() {
  cat <<TOML
[switch]
name = "$1"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 2048), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "$(lcores "$2")"
$(bench_qos)
TOML
}

# Out port J (net_null, a sink) and the route of subnet 10.0.S.0/24 to out port T.
#   out_port J S T
out_port() {
  cat <<TOML
[[port]]
name = "out$1"
device = "net_null$1,no-rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:11:0$1"
[[route]]
prefix = "10.0.$2.0/24"
port = "out$3"
TOML
}

# Runs raceway on CONFIG for DURATION s (stats JSON to STATS, log to LOG) and prints the Mpps
# its out ports sent.
#   run_raceway CONFIG STATS LOG
run_raceway() {
  "$RACEWAY" --log-level warn run -c "$1" --duration "$DURATION" --stats-json "$2" \
    -- --file-prefix "sc-rw-$$" >"$3" 2>&1
  python3 - "$2" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
sent = sum(port["tx_packets"] for name, port in stats["ports"].items() if name.startswith("out"))
print("%.2f" % (sent / stats["elapsed_s"] / 1e6))
PY
}

raceway_mpps() {
  local k=$1 config="$OUT/raceway-$SIZE-$1.toml" stats="$OUT/raceway-$SIZE-$1.json"
  cat >"$config" <<TOML
$(config_head scaling "$k")
TOML
  for pair in $(seq 1 "$k"); do
    local to=$pair
    if [ -n "$CROSS" ] && [ "$k" -gt 1 ]; then to=$((pair % k + 1)); fi
    cat >>"$config" <<TOML
[[port]]
name = "in$pair"
device = "net_pcap$pair,rx_pcap=$OUT/flows-$SIZE-$pair.pcap,infinite_rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:10:0$pair"
$(out_port "$pair" "$pair" "$to")
TOML
  done
  run_raceway "$config" "$stats" "$OUT/raceway-$SIZE-$k.log"
}

# One hot port over k workers: queue q of "in" replays the k-subnet trace; out j takes subnet j.
hot_rx_pcaps() {
  local k=$1 list=""
  for _ in $(seq 1 "$k"); do list="${list}rx_pcap=$OUT/hot-$SIZE-$k.pcap,"; done
  echo "$list"
}

testpmd_hot_mpps() {
  local k=$1 log="$OUT/testpmd-hot-$SIZE-$1.log"
  timeout -s INT $((DURATION + 10)) dpdk-testpmd --lcores "$(lcores "$k")" "${EAL[@]}" --file-prefix "sc-tph-$$" \
    --vdev "net_pcap0,$(hot_rx_pcaps "$k")infinite_rx=1" --vdev "net_null0,no-rx=1" \
    -- --forward-mode=io --nb-cores="$k" --rxq="$k" --txq="$k" --stats-period=1 </dev/null >"$log" 2>&1 || true
  forget_eal_prefix "sc-tph-$$"
  awk '/NIC statistics for port/ {port=$(NF-1)} /Tx-pps:/ && port == 1 {n++; if (n > 2) {sum+=$2; m++}}
       END {if (m) printf "%.2f", sum / m / 1e6; else print "n/a"}' "$log"
}

raceway_hot_mpps() {
  local k=$1 config="$OUT/raceway-hot-$SIZE-$1.toml" stats="$OUT/raceway-hot-$SIZE-$1.json"
  cat >"$config" <<TOML
$(config_head scaling-hot "$k")
[[port]]
name = "in"
device = "net_pcap0,$(hot_rx_pcaps "$k")infinite_rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:10:00"
rx_queues = $k
TOML
  for out in $(seq 1 "$k"); do
    out_port "$out" "$out" "$out" >>"$config"
  done
  run_raceway "$config" "$stats" "$OUT/raceway-hot-$SIZE-$k.log"
}



# A table for k = 1 .. WORKERS of the median of RUNS runs each of TESTPMD K and RACEWAY K (the
# runs on stderr when more than one), with speed-ups over k = 1.
#   scaling_table TITLE TESTPMD RACEWAY RUNS
scaling_table() {
  echo "$1"
  echo
  echo "| workers | testpmd io Mpps | raceway Mpps | raceway speed-up | testpmd speed-up | raceway / io |"
  echo "|---|---|---|---|---|---|"
  local k io rw io1 rw1
  for k in $(seq 1 "$WORKERS"); do
    local ios=() rws=()
    for _ in $(seq "$4"); do ios+=("$("$2" "$k")"); rws+=("$("$3" "$k")"); done
    io=$(median "${ios[@]}") rw=$(median "${rws[@]}")
    if [ "$4" -gt 1 ]; then echo "  k=$k runs: testpmd ${ios[*]}, raceway ${rws[*]}" >&2; fi
    if [ "$k" = 1 ]; then io1=$io; rw1=$rw; fi
    echo "| $k | $io | $rw | $(ratio "$rw" "$rw1") | $(ratio "$io" "$io1") | $(ratio "$rw" "$io") |"
  done
  echo
}

if [ "$ONLY" != hot ]; then
  scaling_table "A port pair per worker${CROSS:+, every frame crossing workers}:" testpmd_mpps raceway_mpps 1
fi
if [ "$ONLY" != pairs ]; then
  scaling_table "One hot port, its rx queues over the workers, (k-1)/k of its frames crossing to another worker's out port:" \
    testpmd_hot_mpps raceway_hot_mpps "$REPEAT"
fi
echo "frames $((SIZE + 4)) B; memory: $(memory_label); machine: $CPUS vCPU $(lscpu | sed -n 's/^Model name: *//p' | head -1), DPDK $(pkg-config --modversion libdpdk), $(date -u +%Y-%m-%d)"
