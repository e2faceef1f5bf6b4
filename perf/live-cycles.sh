#!/usr/bin/env bash
# Raceway binaries forwarding live in turn, ROUNDS rounds (default 3), each binary once a
# round in the order given: the throughput table's one-core row (`raceway_mpps` in
# perf/lib.sh: 64-byte frames replayed on a net_pcap port, routed to net_null, the benchmark
# QoS). Prints each run's busy cycles per frame from the run's own counters (the stats JSON's
# `cores`), then each binary's median and least (a busy host only adds cycles, so on a shared
# machine the least of several rounds is the steadier comparison). Unlike perf/live-ab.sh's
# rates, the cycles need no frame counted as sent, so they also compare builds that leave
# parts of the path out (to see what a part costs).
#
#   perf/live-cycles.sh /tmp/raceway-before target/release/raceway [/tmp/raceway-other ...]
#   FLOWS=10000 perf/live-cycles.sh ...   # the throughput table's other row (64 flows by default)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
[ $# -ge 1 ] || { echo "usage: $0 RACEWAY..." >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
FLOWS=${FLOWS:-64}
OUT=$(mktemp -d -t raceway-live-cycles.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
"$1" gen flows --out "$OUT/flows-60.pcap" --flows "$FLOWS" --packets 10000 --size 60 >/dev/null
declare -A runs
for _ in $(seq "$ROUNDS"); do
  for binary in "$@"; do
    raceway_mpps 60 1 "" "$binary" >/dev/null
    runs[$binary]="${runs[$binary]:-} $(json_get "$OUT/raceway-60-1.json" cores.0.cycles_per_packet)"
  done
done
echo "64 B, $FLOWS flows, 1 core, $DURATION s runs, $ROUNDS rounds, $(memory_label), $(date -u +%Y-%m-%d)"
echo
echo "| binary | cycles per frame, each run | median | least |"
echo "|---|---|---|---|"
for binary in "$@"; do
  # shellcheck disable=SC2086 # the runs are words
  echo "| $binary |${runs[$binary]} | $(median ${runs[$binary]}) | $(python3 perf/perflib.py least ${runs[$binary]}) |"
done
