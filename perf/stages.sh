#!/usr/bin/env bash
# Where a 64-byte frame's cycles go in raceway's worker, by stage: raceway forwards the
# benchmark trace (perf/lib.sh's raceway_mpps: net_pcap infinite_rx into net_null, one worker
# on CPU 1, the benchmark QoS) while `perf record -e cpu-clock` samples CPU 1. Each sample is
# put in a stage by the source file of its innermost (inlined) frame, and a stage's cycles per
# frame are its share of the samples times the run's own busy cycles per frame (the stats
# JSON). The generic helpers the compiler inlines from Rust's core and alloc libraries
# (slice indexing, comparisons, Option) have no file of ours, so they are a row of their own.
#
#   perf/stages.sh                  # 64 flows, 8 s sampled
#   FLOWS=10000 SECONDS_SAMPLED=4 perf/stages.sh
#   RACEWAY=/tmp/raceway-before perf/stages.sh
#   perf/congested.sh && CONFIG=target/congested/congested.toml perf/stages.sh
#
# CONFIG runs that config instead of the benchmark's (its worker on CPU 1, its transmitting
# port named `out`): perf/congested.sh writes one whose queue stays full.
#
# Needs root (perf on a CPU) and `perf` (Debian's linux-perf). This machine's VM has no
# hardware counters, so the samples are of the CPU clock, not of cycles or cache misses.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
command -v perf >/dev/null || { echo "error: perf not found: install linux-perf" >&2; exit 2; }
FLOWS=${FLOWS:-64}
SECONDS_SAMPLED=${SECONDS_SAMPLED:-8}
OUT=${OUT:-target/stages}
mkdir -p "$OUT"
raceway_binary
"$RACEWAY" gen flows --out "$OUT/flows-60.pcap" --flows "$FLOWS" --packets 10000 --size 60 >/dev/null
DURATION=$((SECONDS_SAMPLED + 6))
if [ -n "${CONFIG:-}" ]; then
  {
    "$RACEWAY" --log-level warn run -c "$CONFIG" --duration "$DURATION" --stats-json "$OUT/raceway-60-1.json" \
      -- --file-prefix "st-$$" >"$OUT/config.log" 2>&1
    python3 perf/perflib.py mpps "$OUT/raceway-60-1.json" out >"$OUT/mpps.txt"
  } &
else
  raceway_mpps 60 1 >"$OUT/mpps.txt" &
fi
run=$!
# Past the start (EAL, pools, ports) and into forwarding; the samples end before the stop.
sleep 3
perf record -q -e cpu-clock -C 1 -o "$OUT/perf.data" -- sleep "$SECONDS_SAMPLED" 2>/dev/null
wait "$run"
perf report -i "$OUT/perf.data" --no-children --sort dso,srcfile --full-source-path --stdio 2>/dev/null \
  | grep '%' | grep -v '^#' >"$OUT/srcfile.txt"
python3 - "$OUT/srcfile.txt" "$OUT/raceway-60-1.json" "$(cat "$OUT/mpps.txt")" <<'PY'
import json, re, sys
rows = []
for line in open(sys.argv[1]):
    match = re.match(r"\s*([0-9.]+)%\s+(\S+)\s*(\S*)", line)
    if match:
        rows.append((float(match.group(1)), match.group(2), match.group(3)))
stats = json.load(open(sys.argv[2]))
cycles = stats["cores"][0]["cycles_per_packet"]
# The stages, by the source files that do their work (first match wins).
stages = [
    ("driver: net_pcap rx, net_null tx, ethdev calls", lambda dso, path: dso.startswith("librte")
        or ("/dpdk/" in path and "rte_cycles.h" not in path) or path.endswith(("shim.c", "burst_guard.c"))
        or "tls_get_addr" in path),
    ("parse: headers, checksum check, flow hash, scopes", lambda dso, path: "/core/src/wire/" in path),
    ("classify and resolve: MAC, scope, route cache, QoS map, TTL", lambda dso, path: "pipeline/classify.rs" in path
        or "pipeline/resolve.rs" in path or "pipeline/fib/" in path),
    ("rx prologue: chains, capture, the classify call", lambda dso, path: "live/ingress.rs" in path),
    ("receive and enqueue: verdict, ACL checks, MTU, cut-through", lambda dso, path: "/core/src/switch/" in path),
    ("buffer admission: cells, pools, groups", lambda dso, path: "tm/buffer.rs" in path or "config/plan.rs" in path),
    ("PFC, ECN, scheduler, trimming", lambda dso, path: "tm/pfc.rs" in path or "tm/ecn.rs" in path
        or "tm/schedule.rs" in path or "tm/trim.rs" in path),
    ("counters and latency", lambda dso, path: "/counters/" in path),
    ("worker loop: bursts, clock, shaper, tx hand-off", lambda dso, path: "/live/" in path or "engine/" in path
        or "units.rs" in path or "rte_cycles.h" in path),
    ("Rust's core and alloc, inlined (indexing, compares, Option)", lambda dso, path: "/library/" in path),
]
totals = [0.0] * (len(stages) + 1)
for share, dso, path in rows:
    for index, (_, belongs) in enumerate(stages):
        if belongs(dso, path):
            totals[index] += share
            break
    else:
        totals[-1] += share
whole = sum(totals)
print("| stage | share of samples | cycles per frame |")
print("|---|---|---|")
for (name, _), share in zip(stages + [("other", None)], totals):
    print("| %s | %.1f%% | %.0f |" % (name, share, share / whole * cycles))
print("| all (busy cycles per frame, %s Mpps) | 100%% | %.0f |" % (sys.argv[3], cycles))
PY
echo
echo "memory: $(memory_label)"
