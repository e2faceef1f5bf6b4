#!/usr/bin/env bash
# Instructions a forwarded frame costs raceway's worker, counted by valgrind's callgrind: the
# one-core benchmark of perf/live-cycles.sh (`raceway_mpps` in perf/lib.sh: 64-byte frames
# replayed on a net_pcap port, routed to net_null, the benchmark QoS), each binary run once
# under callgrind. Prints, per binary, the worker's own instructions per frame sent (those of
# `run_to_completion` and `transmit_all`, with everything inlined into them; the driver's and
# the EAL's are not counted) and, with FILES=1, the same split by source file. Unlike cycles,
# the counts do not depend on what else the machine runs: the tool for finding which lines a
# change made dearer (`callgrind_annotate --auto=yes OUT/NAME.out` shows them line by line).
#
#   perf/instructions.sh /tmp/raceway-before target/release/raceway
#   FLOWS=10000 FILES=1 perf/instructions.sh target/release/raceway
#   CONGESTED=0.15 perf/instructions.sh target/release/raceway
#
# CONGESTED=SPEED runs perf/congested.sh's config instead, its out port shaped to SPEED Gb/s:
# a frame's instructions through a full queue (admission, ECN, the queue, the scheduler).
# Under valgrind the worker receives a few hundred thousand frames a second, so SPEED must
# sit below that for the queue to fill, and near it for few frames to be dropped; the table
# gives the deepest TC 3 queue and the drops, to judge whether it did.
#
# Needs valgrind. A run lasts DURATION seconds of the switch's own clock (default 5), which
# under valgrind is a minute or two of wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
[ $# -ge 1 ] || { echo "usage: $0 RACEWAY..." >&2; exit 2; }
command -v valgrind >/dev/null || { echo "error: valgrind not found: install valgrind" >&2; exit 2; }
DURATION=${DURATION:-5}
FLOWS=${FLOWS:-64}
OUT=${OUT:-$(mktemp -d -t raceway-instructions.XXXXXX)}
mkdir -p "$OUT"
"$1" gen flows --out "$OUT/flows-60.pcap" --flows "$FLOWS" --packets 10000 --size 60 >/dev/null
echo "64 B, $FLOWS flows, 1 core, under callgrind, $(memory_label), $(date -u +%Y-%m-%d)"
echo
if [ -n "${CONGESTED:-}" ]; then
  echo "congested: the out port shaped to $CONGESTED Gb/s (perf/congested.sh's config)"
  echo
fi
echo "| binary | frames sent | worker instructions per frame | deepest TC 3 queue | dropped |"
echo "|---|---|---|---|---|"
index=0
for binary in "$@"; do
  index=$((index + 1))
  name="run$index"
  wrapper="$OUT/$name.sh"
  printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s "$@"\n' \
    "$OUT/$name.out" "$(realpath "$binary")" >"$wrapper"
  chmod +x "$wrapper"
  if [ -n "${CONGESTED:-}" ]; then
    congested_config "$OUT/flows-60.pcap" "$CONGESTED" >"$OUT/$name.toml"
    "$wrapper" --log-level warn run -c "$OUT/$name.toml" --duration "$DURATION" --stats-json "$OUT/$name.json" \
      -- --file-prefix "in-$$" >"$OUT/$name.log" 2>&1
  else
    raceway_mpps 60 1 "" "$wrapper" >/dev/null
    cp "$OUT/raceway-60-1.json" "$OUT/$name.json"
  fi
  frames=$(json_get "$OUT/$name.json" ports.out.tx_packets)
  callgrind_annotate "$OUT/$name.out" 2>/dev/null >"$OUT/$name.functions"
  python3 - "$OUT/$name.functions" "$frames" "$binary" "${FILES:-}" "$OUT/$name.json" <<'PY'
import json, re, sys
path, frames, binary, by_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
queue = json.load(open(sys.argv[5]))["ports"]["out"]["queues"][3]
files = {}
for line in open(path):
    match = re.match(r"\s*([0-9,]+)\s+\([^)]*\)\s+(\S+?):(\S+)", line)
    if match and ("run_to_completion" in match.group(3) or "transmit_all" in match.group(3)):
        name = match.group(2).rsplit("/", 1)[-1]
        files[name] = files.get(name, 0) + int(match.group(1).replace(",", ""))
print("| %s | %d | %.1f | %d B | %d |" % (binary, frames, sum(files.values()) / max(frames, 1),
      queue["max_depth_bytes"], queue["dropped"]))
if by_file:
    for name, count in sorted(files.items(), key=lambda item: -item[1]):
        if count / max(frames, 1) >= 1:
            print("|   %s | | %.1f | | |" % (name, count / frames))
PY
done
echo
echo "callgrind's outputs (callgrind_annotate --auto=yes FILE): $OUT/run*.out, in the order given"
