#!/usr/bin/env bash
# What congestion costs raceway per frame, on one worker core: a net_pcap port replaying a
# 64 B RoCEv2 trace (DSCP 26, lossless TC 3, ECN-capable) forever into one out port (net_null),
# first at 400 Gb/s (the queue stays empty: frames cut through), then shaped to SPEED Gb/s
# (default 5), so the TC 3 queue fills and stays above ECN kmax (kmin 100 KB, kmax 500 KB here) while the source,
# which ignores PFC, overflows the headroom. Prints cycles per received frame both ways and
# their ratio, the congested port's rate against its line rate, its deepest queue and the CE
# marks it sent.
#
#   perf/congested.sh                 # 6 s per run
#   SPEED=10 DURATION=10 perf/congested.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
DURATION=${DURATION:-6}
SPEED=${SPEED:-5}
OUT=${OUT:-target/congested}
mkdir -p "$OUT"
raceway_binary
"$RACEWAY" gen flows --out "$OUT/flows-60.pcap" --flows 64 --packets 10000 --size 60 >/dev/null

run() {
  local name=$1 config="$OUT/$1.toml"
  congested_config "$OUT/flows-60.pcap" "$2" >"$config"
  "$RACEWAY" --log-level warn run -c "$config" --duration "$DURATION" --stats-json "$OUT/$name.json" \
    -- --file-prefix "cg-$$" >"$OUT/$name.log" 2>&1
}

run empty 400
run congested "$SPEED"
python3 - "$OUT/empty.json" "$OUT/congested.json" "$SPEED" <<'PY'
import json, sys
empty, congested = (json.load(open(path)) for path in sys.argv[1:3])
speed = float(sys.argv[3])
cycles = lambda stats: stats["cores"][0]["cycles_per_packet"]
out = congested["ports"]["out"]
line_mpps = speed * 1e9 / (84 * 8) / 1e6
mpps = out["tx_packets"] / congested["elapsed_s"] / 1e6
queue = out["queues"][3]
print("| queue | cycles per frame | busy % | out Mpps | of line rate | deepest TC3 queue | CE marked |")
print("|---|---|---|---|---|---|---|")
for name, stats in (("empty (400G)", empty), ("congested (%gG)" % speed, congested)):
    port = stats["ports"]["out"]
    rate = port["tx_packets"] / stats["elapsed_s"] / 1e6
    share = "%.1f %%" % (100 * rate / line_mpps) if stats is congested else "-"
    print("| %s | %.0f | %.1f | %.2f | %s | %d B | %d |" % (name, cycles(stats), stats["cores"][0]["busy_percent"],
          rate, share, port["queues"][3]["max_depth_bytes"], port["queues"][3]["ecn_marked"]))
print()
print("congested / empty cycles per frame: %.2f (goal <= 1.3, issue 64); line rate %.2f Mpps at %g Gb/s, 64 B"
      % (cycles(congested) / cycles(empty), line_mpps, speed))
print("the out port's rate counts the run from its start (ports coming up included)")
PY
echo "memory: $(memory_label)"
