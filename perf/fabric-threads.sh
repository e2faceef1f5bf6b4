#!/usr/bin/env bash
# How many threads pay for a fabric run, by its size: the shipped leaf-spine
# (config/fabric/leaf-spine.toml) with only its size changed, web search flows (Poisson at 50%
# load for 1 ms) and an all-to-all of 64 KiB per pair, each on 1 and 2 threads, the best wall
# time of 3 runs. `raceway fabric`'s default thread count (one per 32 hosts, at most the
# machine's cores: `engine::default_threads`) comes from this table.
#   perf/fabric-threads.sh                    # 8, 32, 64, 128 and 256 hosts
#   SIZES="2x2x4 8x4x8" perf/fabric-threads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
SIZES=${SIZES:-2x2x4 4x2x8 8x4x8 8x4x16 16x8x16}
raceway_binary
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| hosts | fabric | workload | 1 thread (s) | 2 threads (s) | 2 / 1 |"
echo "|---|---|---|---|---|---|"
for size in $SIZES; do
  IFS=x read -r leaves spines per_leaf <<<"$size"
  sed -e "s/^leaves = .*/leaves = $leaves/; s/^spines = .*/spines = $spines/" \
    -e "s/^hosts_per_leaf = .*/hosts_per_leaf = $per_leaf/" config/fabric/leaf-spine.toml >"$out/fabric.toml"
  for workload in poisson alltoall; do
    case $workload in
      poisson) args=(--workload poisson --cdf config/fabric/cdf/websearch.txt --load 0.5 --duration-us 1000) ;;
      alltoall) args=(--workload alltoall --message-bytes 65536 --messages 1) ;;
    esac
    best=()
    for threads in 1 2; do
      times=()
      for _ in 1 2 3; do
        start=$(date +%s.%N)
        "$RACEWAY" fabric -c "$out/fabric.toml" "${args[@]}" --threads "$threads" --out "$out/run" >/dev/null
        times+=("$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$start" "$(date +%s.%N)")")
      done
      best+=("$(python3 -c "import sys; print(min(float(t) for t in sys.argv[1:]))" "${times[@]}")")
    done
    echo "| $((leaves * per_leaf)) | ${leaves}x${spines}x${per_leaf} | $workload | ${best[0]} | ${best[1]} | $(ratio "${best[1]}" "${best[0]}") |"
  done
done
