#!/usr/bin/env bash
# docs/FABRIC.md's rails table: the same switches and servers cabled two ways, running the
# all-reduce as NCCL's rings do (a ring per NIC index over the servers): rail-optimised
# (`rails`: NIC i of each server on rail leaf i of its group) and one leaf per server
# (`server_nics`: a server's NICs on one leaf). config/fabric/leaf-spine.toml with only the
# sizes and the layout changed: RAIL_GROUPS groups of RAILS leaves, SERVERS servers per group
# (hosts_per_leaf), SPINES spines, under each uplink mode in MODES. Prints, per layout and
# mode, the all-reduce's completion, message FCT p50 and p99, the bytes the spines sent (from
# each spine's series.json), the deepest queue, PFC pause summed over links, drops and
# retransmitted frames.
# Virtual time: the table is exact on any machine.
#   perf/fabric-rails.sh                  # 8 rails, 4 groups of 16 servers (512 NICs), 8 spines
#   RAILS=4 RAIL_GROUPS=2 SERVERS=8 SPINES=4 perf/fabric-rails.sh
#   MESSAGE_BYTES=16777216 MODES="ecmp spray" perf/fabric-rails.sh
#   RACEWAY=target/release/raceway OUT=DIR perf/fabric-rails.sh      # a built binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
RAILS=${RAILS:-8}
RAIL_GROUPS=${RAIL_GROUPS:-4}
SERVERS=${SERVERS:-16}
SPINES=${SPINES:-8}
MODES=${MODES:-ecmp spray adaptive}
MESSAGE_BYTES=${MESSAGE_BYTES:-67108864}
OUT=${OUT:-target/fabric-rails}
raceway_binary
mkdir -p "$OUT"
leaves=$((RAILS * RAIL_GROUPS))
echo "$((leaves * SERVERS)) NICs: $((RAIL_GROUPS * SERVERS)) servers of $RAILS NICs, $leaves leaves of $SERVERS NICs, $SPINES spines; all-reduce of $MESSAGE_BYTES bytes"
echo
echo "| layout | mode | completion (us) | FCT p50 (us) | FCT p99 (us) | spines sent (MB) | max queue (KB) | PFC pause, all links (us) | drops | retransmits |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for layout in rails server_nics; do
  file="$OUT/$layout.toml"
  sed -e "s/^leaves = .*/leaves = $leaves/; s/^spines = .*/spines = $SPINES/" \
    -e "s/^hosts_per_leaf = .*/hosts_per_leaf = $SERVERS\\n$layout = $RAILS/" config/fabric/leaf-spine.toml >"$file"
  for mode in $MODES; do
    dir="$OUT/run-$layout-$mode"
    rm -rf "$dir"
    "$RACEWAY" fabric -c "$file" --workload allreduce --mode "$mode" --message-bytes "$MESSAGE_BYTES" \
      --messages 1 --out "$dir" >"$OUT/log-$layout-$mode" 2>&1 ||
      { echo "error: $layout under $mode failed: $OUT/log-$layout-$mode"; exit 1; }
    python3 - "$dir" "$layout" "$mode" <<'PY'
import glob, json, os, sys
out, layout, mode = sys.argv[1:]
r = json.load(open(os.path.join(out, "results.json")))
spine_bytes = 0
for series in glob.glob(os.path.join(out, "spine*", "series.json")):
    for port in json.load(open(series))["ports"].values():
        spine_bytes += sum(port["tx_bytes"])
done = "%.0f" % r["completion_us"] if r["completion_us"] is not None else "incomplete"
fct = r["fct_us"]
queue = max(r["max_queue_bytes"].values(), default=0) / 1024
name = {"rails": "rail-optimised", "server_nics": "a leaf per server"}[layout]
print("| %s | %s | %s | %.0f | %.0f | %.1f | %.0f | %.0f | %d | %d |" % (
    name, mode, done, fct["p50"], fct["p99"], spine_bytes / 1e6, queue, r["pfc_pause_total_us"], r["drops"],
    r["retransmits"]))
PY
  done
done
