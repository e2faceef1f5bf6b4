#!/usr/bin/env bash
# Faults in operation (issue 65, docs/FAULTS.md): a leaf with FRR BGP and BFD (300 ms x 3) to
# a spine and ROUTES /32 routes in its kernel, host0 pinging the spine through it every 1 ms,
# and a lossless RoCE flow between two PFC-honouring `raceway blast` hosts on memif links;
# each fault of perf/faults.py's list ROUNDS times, in an order drawn from SEED (a new one each
# run, printed). Per fault: the longest gap in the replies, BGP drops, BFD downs, lossless
# frames lost (by PSN at the receiving host), the time until forwarding, both sessions and the
# flow are back, and what the switch said; then the worst of each fault. STRESS=1 runs it beside `stress-ng --cpu 2` (a busy neighbour on both CPUs).
# Needs root, FRR and (for STRESS) stress-ng.
#   perf/faults.sh [ROUTES] [ROUNDS]     (default 100000 3; SEED=N replays an order)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
raceway_binary
if [ -n "${STRESS:-}" ]; then
  stress-ng --cpu 2 --timeout 0 >/dev/null 2>&1 &
  stress=$!
  trap 'kill $stress 2>/dev/null || true' EXIT
  echo "beside stress-ng --cpu 2"
fi
python3 perf/faults.py --raceway "$RACEWAY" --routes "${1:-100000}" --rounds "${2:-3}" ${SEED:+--seed "$SEED"}
