#!/usr/bin/env bash
# Restart time with the control plane kept (issue 46): a leaf on net_af_packet ports, with FRR
# BGP and BFD (300 ms x 3) to a spine on its uplink and ROUTES /32 routes in its kernel, is
# stopped with SIGTERM (as `systemctl restart` stops it) and started again, ROUNDS times, while
# host0 pings the spine through it every 2 ms. Each round prints the time from the signal to
# the old process's exit, from the exec to the new worker, to the first frame forwarded (the
# first echo reply) and to the full FIB (raceway's log: the kernel's tables read whole), the
# gap in the replies, and the BGP drops and BFD downs on both sides. The keeper holds the
# namespace and the host interfaces between the two processes (`[control] keep_interfaces_s`).
# Needs root and FRR.
# TAKE_OVER=1: each round starts `raceway run --take-over` while the old switch runs
# (make-before-break) and prints the time to the hand-over, the old switch's stop, the time
# from its exit to the new worker, and the longest gap in the replies.
#   perf/restart.sh [ROUTES] [ROUNDS]          (default 1000000 3; SIGNAL=KILL for a crash)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
raceway_binary
python3 perf/restart.py --raceway "$RACEWAY" --routes "${1:-1000000}" --rounds "${2:-3}" --signal "${SIGNAL:-TERM}" \
	${TAKE_OVER:+--take-over}
