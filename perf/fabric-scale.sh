#!/usr/bin/env bash
# How `raceway fabric` scales with the fabric: config/fabric/leaf-spine.toml with only the
# sizes changed (leaves x spines x hosts per leaf), all-to-all, 64 KiB per pair, adaptive
# uplinks, DCQCN on. Prints hosts, the fabric's name, threads, virtual time, events, events per
# second of wall time, wall time and peak RSS, one row per size and thread count, and whether
# each size's outputs (results.json, stats, charts) are the same bytes on every thread count.
#
# The 1,024-host fabric's 48-port leaves need more headroom than 8 MiB of buffer leaves for
# their lossless class, so its switches get 64 MiB; the smaller fabrics keep the file's.
#
#   perf/fabric-scale.sh                  # 64, 256 and 1,024 hosts
#   SIZES="8x4x8 16x8x16" perf/fabric-scale.sh
#   SIZES=64x32x64 BUFFER=268435456 perf/fabric-scale.sh     # 4,096 hosts
#   THREADS="1 2 4" perf/fabric-scale.sh                     # thread counts (default: 1 and the cores)
#   TRANSPORT=uet-like perf/fabric-scale.sh                  # the hosts' transport (default: the file's)
#   RACEWAY=target/release/raceway perf/fabric-scale.sh      # a built binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
SIZES=${SIZES:-8x4x8 16x8x16 32x16x32}
THREADS=${THREADS:-1 $(nproc)}
MESSAGE_BYTES=${MESSAGE_BYTES:-65536}
OUT=${OUT:-target/fabric-scale}
raceway_binary
command -v /usr/bin/time >/dev/null || { echo "error: /usr/bin/time not found: install the time package (make deps does it)"; exit 2; }
mkdir -p "$OUT"
echo "| hosts | fabric | threads | virtual time (ms) | events | events/s | wall (s) | peak RSS (MB) |"
echo "|---|---|---|---|---|---|---|---|"
same=()
for size in $SIZES; do
  IFS=x read -r leaves spines per_leaf <<<"$size"
  hosts=$((leaves * per_leaf))
  buffer=${BUFFER:-}
  [ -z "$buffer" ] && [ "$hosts" -ge 1024 ] && buffer=67108864
  file="$OUT/fabric-$size.toml"
  sed -e "s/^leaves = .*/leaves = $leaves/; s/^spines = .*/spines = $spines/" \
    -e "s/^hosts_per_leaf = .*/hosts_per_leaf = $per_leaf/" \
    ${buffer:+-e "s/^buffer_bytes = .*/buffer_bytes = $buffer/"} config/fabric/leaf-spine.toml >"$file"
  first=""
  for threads in $THREADS; do
    run="$size-t$threads"
    dir="$OUT/run-$run"
    rm -rf "$dir"
    /usr/bin/time -f "%e %M" -o "$OUT/time-$run" "$RACEWAY" fabric -c "$file" --workload alltoall \
      --mode adaptive --message-bytes "$MESSAGE_BYTES" --messages 1 --threads "$threads" --out "$dir" \
      ${TRANSPORT:+--transport "$TRANSPORT"} \
      >"$OUT/log-$run" 2>&1 || { echo "error: $size on $threads threads failed: $OUT/log-$run"; exit 1; }
    python3 - "$dir/results.json" "$OUT/time-$run" "$threads" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
wall, rss_kb = open(sys.argv[2]).read().split()[-2:]
wall = float(wall)
virtual = "%.1f" % (r["completion_us"] / 1000) if r["completion_us"] is not None else "incomplete"
print("| %d | %s | %s | %s | %d | %.0f | %.1f | %.0f |" % (
    r["hosts"], r["fabric"], sys.argv[3], virtual, r["events"], r["events"] / max(wall, 1e-9), wall,
    int(rss_kb) / 1024))
PY
    if [ -z "$first" ]; then
      first=$dir
    elif diff -rq "$first" "$dir" >/dev/null; then
      same+=("$size: $threads threads wrote the same bytes as ${THREADS%% *}")
    else
      same+=("$size: $threads threads DIFFER from ${THREADS%% *}: diff -r $first $dir")
    fi
  done
done
echo
printf '%s\n' "${same[@]}"
echo
echo "machine: $(nproc) CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%Y-%m-%d)"
