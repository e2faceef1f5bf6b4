#!/usr/bin/env bash
# Two raceway binaries forwarding live, in turn: the throughput table's one-core row
# (`raceway_mpps` in perf/lib.sh: SIZE-byte frames replayed on a net_pcap port, routed to
# net_null, the benchmark QoS), PAIRS times each binary, the order alternating. Prints every
# run, each binary's median and the ratio new / old. For changes that must not cost speed,
# where one run of each varies more than the change could:
#
#   cp target/release/raceway /tmp/raceway-before     # before the change
#   perf/live-ab.sh /tmp/raceway-before target/release/raceway [PAIRS] [SIZE] [CORES]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
[ $# -ge 2 ] || { echo "usage: $0 OLD_RACEWAY NEW_RACEWAY [PAIRS] [SIZE] [CORES]" >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2") PAIRS=${3:-5} SIZE=${4:-60} CORES=${5:-1}
DURATION=${DURATION:-4}
OUT=$(mktemp -d -t raceway-live-ab.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
RACEWAY=$NEW
"$OLD" gen flows --out "$OUT/flows-$SIZE.pcap" --flows 64 --packets 10000 --size "$SIZE" >/dev/null
old_runs=() new_runs=()
for pair in $(seq "$PAIRS"); do
  if [ $((pair % 2)) = 1 ]; then
    old_runs+=("$(raceway_mpps "$SIZE" "$CORES" "" "$OLD")"); new_runs+=("$(raceway_mpps "$SIZE" "$CORES" "" "$NEW")")
  else
    new_runs+=("$(raceway_mpps "$SIZE" "$CORES" "" "$NEW")"); old_runs+=("$(raceway_mpps "$SIZE" "$CORES" "" "$OLD")")
  fi
done
old_median=$(median "${old_runs[@]}") new_median=$(median "${new_runs[@]}")
echo "$SIZE B, $CORES core(s), $DURATION s runs, $PAIRS alternating pairs, $(memory_label), $(date -u +%Y-%m-%d)"
echo
echo "| binary | runs (Mpps) | median |"
echo "|---|---|---|"
echo "| old ($1) | ${old_runs[*]} | $old_median |"
echo "| new ($2) | ${new_runs[*]} | $new_median |"
echo
awk -v n="$new_median" -v o="$old_median" 'BEGIN {printf "new / old: %.2f\n", n / o}'
