#!/usr/bin/env bash
# The RFC 2544 sweep on one host over net_memif (hairpin): raceway runs
# perf/pktgen/raceway-memif.toml with this run's socket and file prefix, pktgen-dpdk 23.03 runs
# rfc2544.lua against it, then raceway stops and its counters print beside pktgen's CSV.
#
#   PKTGEN=/path/to/Pktgen-DPDK/build/app/pktgen perf/pktgen/memif.sh
#   PKTGEN=... PKTGEN_SIZES=64,1024 PKTGEN_TRIAL_MS=2000 perf/pktgen/memif.sh
#
# Parameters (environment), defaults in brackets:
#   PKTGEN          pktgen's binary (required; perf/pktgen/README.md says how to build it)
#   RACEWAY         raceway's binary [built here: cargo build --release, target/release/raceway]
#   SOCKET          the memif socket [raceway-pktgen-<pid>.sock, abstract]
#   RACEWAY_PREFIX  raceway's EAL file prefix [raceway-pktgen-<pid>]
#   PKTGEN_PREFIX   pktgen's EAL file prefix [pktgen-<pid>]
#   PKTGEN_LCORES   pktgen's --lcores [0@0,1@1]   PKTGEN_MAIN_LCORE [1]   PKTGEN_MAP (-m) [0.0]
#     pktgen's main lcore spins its timers: on a 2-CPU host it shares CPU 1 with raceway's
#     worker less harmfully than its port lcore would; lcore 0 sends and receives on CPU 0,
#     beside raceway's mostly idle main lcore. (The guide's earlier 0@1,1@0 with -m "1.0" gave
#     a 2.4 x lower rate.)
#   OUT             where the CSV, raceway's stats JSON and both logs go [target/pktgen-memif]
#   and rfc2544.lua's own: PKTGEN_SIZES, PKTGEN_TRIAL_MS, PKTGEN_STEPS.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
: "${PKTGEN:?set PKTGEN to the pktgen binary, see perf/pktgen/README.md}"
raceway_binary
SOCKET=${SOCKET:-raceway-pktgen-$$.sock}
RACEWAY_PREFIX=${RACEWAY_PREFIX:-raceway-pktgen-$$}
PKTGEN_PREFIX=${PKTGEN_PREFIX:-pktgen-$$}
PKTGEN_LCORES=${PKTGEN_LCORES:-0@0,1@1}
PKTGEN_MAIN_LCORE=${PKTGEN_MAIN_LCORE:-1}
PKTGEN_MAP=${PKTGEN_MAP:-0.0}
OUT=$(realpath -m "${OUT:-target/pktgen-memif}")
mkdir -p "$OUT"
rm -f "$OUT/raceway.log" "$OUT/stats.json" "$OUT/rfc2544.csv"

# The shipped config with this run's socket and prefix (every other line as shipped).
sed -e "s|socket=/tmp/raceway.sock|socket=$SOCKET|" -e "s|\"raceway-memif\"|\"$RACEWAY_PREFIX\"|" \
  perf/pktgen/raceway-memif.toml >"$OUT/raceway.toml"
if ! { grep -q "socket=$SOCKET\"" "$OUT/raceway.toml" && grep -q "\"$RACEWAY_PREFIX\"" "$OUT/raceway.toml"; }; then
  echo "error: perf/pktgen/raceway-memif.toml: its socket or file prefix is not where memif.sh expects" >&2
  exit 2
fi

"$RACEWAY" run -c "$OUT/raceway.toml" --stats-json "$OUT/stats.json" >"$OUT/raceway.log" 2>&1 &
raceway=$!
trap 'kill -INT $raceway 2>/dev/null || true' EXIT
for _ in $(seq 900); do
  grep -q "worker on lcore" "$OUT/raceway.log" 2>/dev/null && break
  kill -0 $raceway 2>/dev/null || { cat "$OUT/raceway.log" >&2; exit 1; }
  sleep 0.1
done
grep -q "worker on lcore" "$OUT/raceway.log" || { echo "error: raceway did not start" >&2; exit 1; }

(cd "$OUT" && PKTGEN_RX_PORT=0 PKTGEN_CSV="$OUT/rfc2544.csv" "$PKTGEN" --lcores "$PKTGEN_LCORES" \
  --main-lcore "$PKTGEN_MAIN_LCORE" --no-huge -m 2048 --no-pci --file-prefix "$PKTGEN_PREFIX" \
  --vdev "net_memif0,role=client,socket=$SOCKET" \
  -- -P -m "$PKTGEN_MAP" -f "$OLDPWD/perf/pktgen/rfc2544.lua") >"$OUT/pktgen.log" 2>&1 || {
  tail -20 "$OUT/pktgen.log" >&2
  exit 1
}
kill -INT $raceway
wait $raceway || true
trap - EXIT
echo "# pktgen ($OUT/rfc2544.csv):"
cat "$OUT/rfc2544.csv"
python3 - "$OUT/stats.json" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
port = stats["ports"]["gen"]
drops = {reason: count for reason, count in port["drops"].items() if count}
print("# raceway (gen): rx_packets %d tx_packets %d drops %s" % (port["rx_packets"], port["tx_packets"], drops or "none"))
PY
