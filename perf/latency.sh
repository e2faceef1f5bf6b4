#!/usr/bin/env bash
# Latency through raceway live at a given load: `raceway blast` (TSC-paced) sends a RoCEv2
# trace over net_memif at LOAD x the out port's speed; raceway routes it to a net_null port
# of SPEED Gb/s. Prints, for one and two run-to-completion workers, what was offered and
# forwarded and raceway's latency (rx poll to tx hand-off) percentiles from its stats JSON.
#
#   perf/latency.sh                      # 1,024 B frames, 50 % of 10 Gb/s, 5 s per run
#   SIZE=60 SPEED=2 LOAD=0.5 perf/latency.sh
#
# Machine notes: the generator runs on CPU 0. One worker runs on CPU 1; two workers run on
# CPU 1 (the memif port) and CPU 0 (the out port, beside the generator), so on a 2-vCPU
# machine the second worker shares its CPU and its tail shows the scheduler's time slices.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
SIZE=${SIZE:-1020}
SPEED=${SPEED:-10}
LOAD=${LOAD:-0.5}
DURATION=${DURATION:-5}
OUT=${OUT:-target/latency}
mkdir -p "$OUT"
raceway_binary
"$RACEWAY" gen flows --out "$OUT/flows-$SIZE.pcap" --flows 64 --packets 1000 --size "$SIZE" >/dev/null
RATE=$(python3 -c "print($SPEED * $LOAD)")

run() { # workers lcores
  local workers=$1 lcores=$2 socket="$OUT/memif.sock"
  rm -f "$socket"
  cat >"$OUT/raceway-$workers.toml" <<TOML
[switch]
name = "latency"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "$lcores"
$(bench_qos)
[[port]]
name = "gen"
device = "net_memif0,role=server,socket=$socket"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "out"
device = "net_null0,no-rx=1"
speed_gbps = $SPEED
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "out"
TOML
  blast_through "$OUT/raceway-$workers.toml" "$OUT/raceway-$workers" "$OUT/flows-$SIZE.pcap" "$socket" \
    "$RATE" "$DURATION" lat
  python3 - "$workers" "$OUT/raceway-$workers-blast.json" "$OUT/raceway-$workers.json" <<'PY'
import json, sys
workers, blast, stats = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
latency = stats["latency_ns"]
drops = sum(sum(port["drops"].values()) for port in stats["ports"].values())
print("| %s | %.2f | %.3f | %d | %d | %d | %.1f | %.1f | %.1f | %.1f |" % (
    workers, blast["gbps_on_wire"], blast["mpps"], stats["ports"]["out"]["tx_packets"], drops,
    latency["samples"], latency["p50"] / 1000, latency["p99"] / 1000, latency["p999"] / 1000, latency["max"] / 1000))
PY
}

echo "| workers | offered Gb/s | offered Mpps | forwarded | dropped | latency samples | p50 us | p99 us | p99.9 us | max us |"
echo "|---|---|---|---|---|---|---|---|---|---|"
run 1 "0-1"
run 2 "0@0,1@1,2@0"
echo
echo "frames $((SIZE + 4)) B at $LOAD x $SPEED Gb/s; raceway's latency is from rx poll to tx hand-off"
echo "memory: $(memory_label)"
