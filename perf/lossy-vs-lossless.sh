#!/usr/bin/env bash
# The comparison the field argues about, on raceway's own pipeline: the shipped leaf-spine
# (config/fabric/leaf-spine.toml) with only its size changed, run
#   - lossless: PFC on the data class, DCQCN, ECMP or adaptive uplinks;
#   - lossy with drops: no lossless class, DCQCN, ECMP uplinks, go-back-N, selective-repeat
#     or IRN hosts (each with its own timeouts: a RoCE NIC's for the first two);
#   - lossy with trimming: the same with [qos.trim] (to DSCP 48, the strict TC6), spraying
#     uplinks and uet-like hosts (a NACK per trimmed frame),
# under web search flows (Poisson arrivals at 50% and 80% load, config/fabric/cdf/websearch.txt)
# and an all-to-all. Prints a markdown table: FCT slowdown (FCT over the flow's ideal) p50 and
# p99 for small flows (up to 100 KB), large ones (over 1 MB) and all, PFC pause time, frames
# trimmed, frames sent again, drops and incomplete flows (their slowdown is not counted).
# Virtual time: the table is exact, and tests/dpdk/fabric.rs fails when docs/FABRIC.md's differs
# from this script's output with the test's settings.
#   perf/lossy-vs-lossless.sh                       # 256 hosts (16x8x16)
#   SIZE=8x4x8 DURATION_US=100 perf/lossy-vs-lossless.sh
#   RACEWAY=target/release/raceway OUT=DIR perf/lossy-vs-lossless.sh    # a built binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
SIZE=${SIZE:-16x8x16}
DURATION_US=${DURATION_US:-200}
LOADS=${LOADS:-0.5 0.8}
ALLTOALL_BYTES=${ALLTOALL_BYTES:-65536}
OUT=${OUT:-target/lossy-vs-lossless}
raceway_binary
mkdir -p "$OUT"
IFS=x read -r leaves spines per_leaf <<<"$SIZE"
base="$OUT/lossless.toml"
sed -e "s/^leaves = .*/leaves = $leaves/; s/^spines = .*/spines = $spines/" \
  -e "s/^hosts_per_leaf = .*/hosts_per_leaf = $per_leaf/" config/fabric/leaf-spine.toml >"$base"
# Lossy: the data class is no longer lossless (ECN still marks it for DCQCN).
sed -e '/^lossless = /d' "$base" >"$OUT/lossy.toml"
{ cat "$OUT/lossy.toml"; printf '\n[qos.trim]\ndscp = 48\n'; } >"$OUT/trim.toml"
echo "| workload | fabric | uplinks | transport | small p50 | small p99 | large p50 | large p99 | all p99 | PFC pause (us) | trimmed | retransmits | drops | incomplete |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
workloads=()
for load in $LOADS; do workloads+=("websearch-$load"); done
workloads+=(alltoall)
for workload in "${workloads[@]}"; do
  for setup in "lossless ecmp roce-sr" "lossless adaptive roce-sr" "lossy ecmp roce-gbn" "lossy ecmp roce-sr" "lossy ecmp irn" "trim spray uet-like"; do
    read -r fabric mode transport <<<"$setup"
    dir="$OUT/$workload-$fabric-$mode-$transport"
    case $workload in
      websearch-*) args=(--workload poisson --cdf config/fabric/cdf/websearch.txt --load "${workload#websearch-}" --duration-us "$DURATION_US") ;;
      alltoall) args=(--workload alltoall --message-bytes "$ALLTOALL_BYTES" --messages 1) ;;
    esac
    "$RACEWAY" fabric -c "$OUT/$fabric.toml" "${args[@]}" --mode "$mode" --transport "$transport" \
      --horizon-ms 200 --out "$dir" >/dev/null
    python3 - "$dir" "$workload" "$fabric" "$mode" "$transport" <<'PY'
import csv, json, sys
sys.path.insert(0, "perf")
from perflib import percentile
d, workload, fabric, mode, transport = sys.argv[1:]
r = json.load(open(d + "/results.json"))
small, large, every = [], [], []
for row in csv.DictReader(open(d + "/flows.csv")):
    if row["slowdown"] == "-":
        continue
    s, size = float(row["slowdown"]), int(row["bytes"])
    every.append(s)
    if size <= 100_000:
        small.append(s)
    elif size > 1_000_000:
        large.append(s)
def p(values, q):
    return "-" if not values else "%.1f" % percentile(sorted(values), q)
label = {"lossless": "lossless", "lossy": "lossy, drops", "trim": "lossy, trimming"}[fabric]
print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %d | %d | %d | %d |" % (
    workload, label, mode, transport, p(small, 0.5), p(small, 0.99), p(large, 0.5), p(large, 0.99),
    p(every, 0.99), r["pfc_pause_total_us"], r["trimmed"], r["retransmits"], r["drops"],
    r["incomplete_messages"]))
PY
  done
done
