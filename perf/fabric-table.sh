#!/usr/bin/env bash
# The README's fabric table: config/fabric/leaf-spine.toml (2 leaves, 2 spines, 4 hosts per
# leaf, 100G) running all-reduce and all-to-all under each uplink mode, with DCQCN and with
# senders that ignore ECN. Prints a markdown table.
# Virtual time: the table is exact, and tests/fabric.rs fails when the README's differs.
#   perf/fabric-table.sh                 # 1 MiB messages, 4 per sender
#   MESSAGE_BYTES=4194304 perf/fabric-table.sh
#   RACEWAY=target/debug/raceway OUT=DIR perf/fabric-table.sh    # a built binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGE_BYTES=${MESSAGE_BYTES:-1048576}
MESSAGES=${MESSAGES:-4}
OUT=${OUT:-target/fabric-table}
if [ -z "${RACEWAY:-}" ]; then
  cargo build --release -q -p raceway
  RACEWAY=target/release/raceway
fi
echo "| workload | mode | DCQCN | completion (us) | FCT p50 (us) | FCT p99 (us) | max queue (KB) | PFC pause, all links (us) | CNPs | drops |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for workload in allreduce alltoall; do
  for mode in ecmp flowlet spray adaptive; do
    for dcqcn in on off; do
      flag=""; [ "$dcqcn" = off ] && flag="--no-dcqcn"
      dir="$OUT/$workload-$mode-$dcqcn"
      # shellcheck disable=SC2086
      "$RACEWAY" fabric -c config/fabric/leaf-spine.toml --workload "$workload" --mode "$mode" $flag \
        --message-bytes "$MESSAGE_BYTES" --messages "$MESSAGES" --out "$dir" >/dev/null
      python3 - "$dir/results.json" "$workload" "$mode" "$dcqcn" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
queue = max(r["max_queue_bytes"].values()) / 1024
done = "%.0f" % r["completion_us"] if r["completion_us"] is not None else "incomplete"
print("| %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %d | %d |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], done, r["fct_us"]["p50"], r["fct_us"]["p99"],
    queue, r["pfc_pause_total_us"], r["cnps_sent"], r["drops"]))
PY
    done
  done
done
