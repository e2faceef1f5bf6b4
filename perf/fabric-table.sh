#!/usr/bin/env bash
# docs/FABRIC.md's fabric table: config/fabric/leaf-spine.toml (2 leaves, 2 spines, 4 hosts per
# leaf, 100G) running all-reduce and all-to-all under each uplink mode, with DCQCN and with
# senders that ignore ECN. Prints a markdown table.
# Virtual time: the table is exact, and tests/dpdk/fabric.rs fails when docs/FABRIC.md's differs.
#   perf/fabric-table.sh                 # 1 MiB messages, 4 per sender
#   MESSAGE_BYTES=4194304 perf/fabric-table.sh
#   RACEWAY=target/debug/raceway OUT=DIR perf/fabric-table.sh    # a built binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
MESSAGE_BYTES=${MESSAGE_BYTES:-1048576}
MESSAGES=${MESSAGES:-4}
OUT=${OUT:-target/fabric-table}
raceway_binary
echo "| workload | mode | DCQCN | completion (us) | FCT p50 (us) | FCT p99 (us) | max queue (KB) | PFC pause, all links (us) | CNPs | drops | retransmits |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
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
fct = r["fct_us"]
# Percentiles over the messages that completed: say so when some did not.
p99 = "%.0f" % fct["p99"] + ("" if fct["left_out"] == 0 else " (%d of %d done)" % (fct["messages"], r["messages"]))
print("| %s | %s | %s | %s | %.0f | %s | %.0f | %.0f | %d | %d | %d |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], done, fct["p50"], p99,
    queue, r["pfc_pause_total_us"], r["cnps_sent"], r["drops"], r["retransmits"]))
PY
    done
  done
done
# The all-to-all's bounds at line rate, from the fabric file: what each leaf sends across its
# uplinks, and what each host receives, as frames of --roce-mtu 4096 payload bytes and 82
# bytes of RoCEv2 headers and wire overhead (Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS
# 4, preamble 8, gap 12).
python3 - "$MESSAGE_BYTES" "$MESSAGES" <<'PY'
import sys, tomllib
message_bytes, messages = int(sys.argv[1]), int(sys.argv[2])
f = tomllib.load(open("config/fabric/leaf-spine.toml", "rb"))["fabric"]
leaves, spines, per_leaf = f["leaves"], f["spines"], f["hosts_per_leaf"]
host_gbps, spine_gbps = f["host_speed_gbps"], f["spine_speed_gbps"]
wire = lambda payload: payload + -(-payload // 4096) * 82
per_pair = messages * wire(message_bytes)
remote = (leaves - 1) * per_leaf
leaf_up = per_leaf * remote * per_pair * 8 / (spines * spine_gbps * 1e3)
host_in = (leaves * per_leaf - 1) * per_pair * 8 / (host_gbps * 1e3)
print(f"all-to-all at line rate: each leaf sends {per_leaf * remote * messages * message_bytes / 2**20:.0f} MiB over "
      f"{spines} x {spine_gbps}G uplinks ({per_leaf * host_gbps}G of hosts below: "
      f"{per_leaf * host_gbps / (spines * spine_gbps):.0f}:1 oversubscribed): {leaf_up:,.0f} us; each host receives "
      f"{(leaves * per_leaf - 1) * messages * message_bytes / 2**20:.0f} MiB: {host_in:,.0f} us")
PY
