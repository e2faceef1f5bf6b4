#!/usr/bin/env bash
# How `raceway fabric` scales with the fabric: config/fabric/leaf-spine.toml with only the
# sizes changed (leaves x spines x hosts per leaf, and for a three-tier Clos x pods x cores,
# the leaves and spines then per pod), all-to-all (or WORKLOAD and its FLAGS), 64 KiB per
# pair, adaptive uplinks, DCQCN on. Prints hosts, the fabric's name, ranks, threads per rank,
# virtual time, events, events per second of wall time, windows, wall time, the time per
# exchange between ranks, and peak RSS (the largest rank's, and all ranks' summed), one row
# per size, rank count and thread count; and whether each size's outputs (results.json,
# flows.csv, stats, charts) are the same bytes in every run.
#
# The 1,024-host fabric's 48-port leaves need more headroom than 8 MiB of buffer leaves for
# their lossless class, so its switches get 64 MiB; the smaller fabrics keep the file's.
#
#   perf/fabric-scale.sh                  # 64, 256 and 1,024 hosts
#   SIZES="8x4x8 16x8x16" perf/fabric-scale.sh
#   SIZES=64x32x64 BUFFER=268435456 perf/fabric-scale.sh     # 4,096 hosts
#   SIZES=16x8x128x16x64 perf/fabric-scale.sh                # 16 pods of 16 leaves, 64 cores
#   FABRIC_EXTRA="spine_speed_gbps = 800; core_speed_gbps = 3200" perf/fabric-scale.sh  # [fabric] settings
#   THREADS="1 2 4" perf/fabric-scale.sh                     # thread counts (default: 1 and the cores)
#   RANKS="1 2 4" THREADS=1 perf/fabric-scale.sh             # MPI ranks (mpirun; builds --features mpi)
#   WORKLOAD=poisson FLAGS="--cdf examples/websearch.cdf --load 0.5 --duration-us 100" perf/fabric-scale.sh
#   TRANSPORT=uet-like perf/fabric-scale.sh                  # the hosts' transport (default: the file's)
#   RACEWAY=target/release/raceway perf/fabric-scale.sh      # a built binary, no build
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
SIZES=${SIZES:-8x4x8 16x8x16 32x16x32}
THREADS=${THREADS:-1 $(nproc)}
RANKS=${RANKS:-1}
WORKLOAD=${WORKLOAD:-alltoall}
MESSAGE_BYTES=${MESSAGE_BYTES:-65536}
OUT=${OUT:-target/fabric-scale}
if [ "$RANKS" != 1 ] && [ -z "${RACEWAY:-}" ]; then
  command -v mpirun >/dev/null || { echo "error: mpirun not found: install openmpi-bin and libopenmpi-dev (make deps does it)"; exit 2; }
  cargo build --release -q -p raceway --features mpi
  RACEWAY=target/release/raceway
fi
raceway_binary
command -v /usr/bin/time >/dev/null || { echo "error: /usr/bin/time not found: install the time package (make deps does it)"; exit 2; }
mkdir -p "$OUT"
echo "| hosts | fabric | ranks | threads | virtual time (ms) | events | events/s | windows | wall (s) | per exchange (us) | peak RSS, largest rank (MB) | peak RSS, summed (MB) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
same=()
for size in $SIZES; do
  IFS=x read -r leaves spines per_leaf pods cores <<<"$size"
  hosts=$((leaves * per_leaf * ${pods:-1}))
  buffer=${BUFFER:-}
  [ -z "$buffer" ] && [ "$hosts" -ge 1024 ] && buffer=67108864
  file="$OUT/fabric-$size.toml"
  sed -e "s/^leaves = .*/leaves = $leaves/; s/^spines = .*/spines = $spines/" \
    -e "s/^hosts_per_leaf = .*/hosts_per_leaf = $per_leaf${pods:+\\npods = $pods\\ncores = $cores}/" \
    ${buffer:+-e "s/^buffer_bytes = .*/buffer_bytes = $buffer/"} config/fabric/leaf-spine.toml >"$file"
  if [ -n "${FABRIC_EXTRA:-}" ]; then
    # Each setting replaces the file's line of that key, or joins [fabric] after its sizes.
    while IFS= read -r setting; do
      key=${setting%% =*}
      if grep -q "^$key = " "$file"; then
        sed -i "s/^$key = .*/$setting/" "$file"
      else
        sed -i "s/^hosts_per_leaf = .*/&\\n$setting/" "$file"
      fi
    done < <(printf '%s\n' "$FABRIC_EXTRA" | tr ';' '\n' | sed 's/^ *//')
  fi
  first=""
  for ranks in $RANKS; do
    for threads in $THREADS; do
      run="$size-r$ranks-t$threads"
      dir="$OUT/run-$run"
      rm -rf "$dir"
      launch=()
      [ "$ranks" != 1 ] && launch=(mpirun --oversubscribe --allow-run-as-root -np "$ranks")
      # shellcheck disable=SC2086 # FLAGS is a list of flags
      /usr/bin/time -f "%e %M" -o "$OUT/time-$run" "${launch[@]}" "$RACEWAY" fabric -c "$file" \
        --workload "$WORKLOAD" --mode adaptive --message-bytes "$MESSAGE_BYTES" --messages 1 \
        --threads "$threads" --out "$dir" ${TRANSPORT:+--transport "$TRANSPORT"} ${FLAGS:-} \
        >"$OUT/log-$run" 2>&1 || { echo "error: $size on $ranks ranks of $threads threads failed: $OUT/log-$run"; exit 1; }
      python3 - "$dir/results.json" "$OUT/time-$run" "$OUT/log-$run" "$ranks" "$threads" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
wall, rss_kb = open(sys.argv[2]).read().split()[-2:]
wall = float(wall)
ranks = int(sys.argv[4])
if ranks == 1:
    per_exchange, largest, summed = "-", int(rss_kb) / 1024, int(rss_kb) / 1024
else:
    # Each rank's own line: "rank R of N: T s, E exchanges, X s in them (U us each), peak RSS M MB".
    lines = re.findall(r"rank \d+ of \d+: [\d.]+ s, (\d+) exchanges, ([\d.]+) s in them \([\d.]+ us each\), peak RSS (\d+) MB",
                       open(sys.argv[3]).read())
    assert len(lines) == ranks, "%d rank lines of %d in %s" % (len(lines), ranks, sys.argv[3])
    exchanges = sum(int(e) for e, _, _ in lines)
    per_exchange = "%.1f" % (sum(float(t) for _, t, _ in lines) * 1e6 / max(exchanges, 1))
    largest, summed = max(int(m) for _, _, m in lines), sum(int(m) for _, _, m in lines)
virtual = "%.1f" % (r["completion_us"] / 1000) if r["completion_us"] is not None else "incomplete"
print("| %d | %s | %d | %s | %s | %d | %.0f | %d | %.1f | %s | %.0f | %.0f |" % (
    r["hosts"], r["fabric"], ranks, sys.argv[5], virtual, r["events"], r["events"] / max(wall, 1e-9),
    r["windows"], wall, per_exchange, largest, summed))
PY
      if [ -z "$first" ]; then
        first=$dir
      elif diff -rq "$first" "$dir" >/dev/null; then
        same+=("$size: $ranks ranks of $threads threads wrote the same bytes as the first run")
      else
        same+=("$size: $ranks ranks of $threads threads DIFFER from the first run: diff -r $first $dir")
      fi
    done
  done
done
echo
printf '%s\n' "${same[@]}"
echo
echo "machine: $(nproc) CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%Y-%m-%d)"
