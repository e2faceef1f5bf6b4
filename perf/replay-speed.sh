#!/usr/bin/env bash
# How fast `raceway replay` runs a trace end to end on one core, and in how much memory,
# next to what the disk does with the same bytes in the same run: `cp` of the trace reads it
# once and writes it once, which a replay of one port to another must do at least.
#
#   perf/replay-speed.sh                                # 5 M x 64 B and 2 M x 1 KB frames
#   TRACES="10000000x1020" RUNS=1 perf/replay-speed.sh  # a 10 GB trace
#
# TRACES lists FRAMESxSIZE (size without FCS), written by `raceway gen flows` at 100 Gb/s
# into OUT (kept between runs; delete it to write them again). config/leaf.toml: host0 (100G)
# in, host1 out. Each trace is replayed RUNS times (best wall time kept) after one `cp`,
# alternating with `cp` so that both see the same page cache and disk.
# Prints frames/s, wall / user / system seconds, peak RSS, and the time over `cp`'s.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
TRACES=${TRACES:-5000000x60 2000000x1020}
RUNS=${RUNS:-3}
OUT=${OUT:-target/replay-speed}
mkdir -p "$OUT"
raceway_binary
trap 'rm -rf "$OUT/replay" "$OUT/copy.pcap"' EXIT

# timed NAME COMMAND...: runs it under /usr/bin/time; prints "wall user sys rss_kb".
timed() {
  local name=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$OUT/$name.time" "$@" >/dev/null
  cat "$OUT/$name.time"
}

printf '%-16s %10s %8s %8s %8s %9s %8s %9s\n' trace "frames/s" wall user sys "RSS MB" "cp s" "x cp"
for spec in $TRACES; do
  frames=${spec%x*}
  size=${spec#*x}
  trace=$OUT/flows-$frames-$size.pcap
  [ -s "$trace" ] || "$RACEWAY" --quiet gen flows --out "$trace" --packets "$frames" --size "$size" >/dev/null
  best="" best_cp=""
  for _ in $(seq "$RUNS"); do
    rm -rf "$OUT/replay" "$OUT/copy.pcap"
    read -r cp_wall _ <<<"$(timed cp cp "$trace" "$OUT/copy.pcap")"
    rm -f "$OUT/copy.pcap"
    read -r wall user sys rss <<<"$(timed replay "$RACEWAY" --quiet --log-level error replay -c config/leaf.toml \
      --in "host0=$trace" --out "$OUT/replay")"
    tx=$(json_get "$OUT/replay/stats.json" ports.host1.tx_packets)
    [ "$tx" = "$frames" ] || { echo "error: host1 sent $tx frames of $frames" >&2; exit 1; }
    if [ -z "$best" ] || less_than "$wall" "$best"; then
      best=$wall best_user=$user best_sys=$sys best_rss=$rss
    fi
    if [ -z "$best_cp" ] || less_than "$cp_wall" "$best_cp"; then
      best_cp=$cp_wall
    fi
  done
  python3 - "$frames" "$size" "$best" "$best_user" "$best_sys" "$best_rss" "$best_cp" <<'EOF'
import sys
frames, size = int(sys.argv[1]), int(sys.argv[2])
wall, user, system, rss_kb, cp = (float(value) for value in sys.argv[3:])
label = f"{frames / 1e6:g} M x {size + 4} B"
print(f"{label:<16} {frames / wall / 1e6:9.2f}M {wall:8.2f} {user:8.2f} {system:8.2f} {rss_kb / 1024:9.1f} {cp:8.2f} {wall / max(cp, 0.01):9.2f}")
EOF
done
