#!/usr/bin/env bash
# One-host load test over net_memif: dpdk-testpmd in txonly mode generates 64 B UDP frames
# into a memif link; raceway receives them on its memif port and routes them to net_null.
# Prints the generator's rate and what raceway received, forwarded and dropped.
#
#   perf/memif.sh              # 8 s
#   DURATION=15 perf/memif.sh
#
# Cores (2-vCPU machine): testpmd forwards on CPU 0 (its main lcore on CPU 1), raceway's
# worker runs on CPU 1 (its main lcore on CPU 0); each main lcore mostly sleeps.
# pktgen-dpdk can take testpmd's place: see perf/pktgen/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
DURATION=${DURATION:-8}
OUT=${OUT:-target/memif}
mkdir -p "$OUT"
command -v dpdk-testpmd >/dev/null || { echo "error: dpdk-testpmd not found: install dpdk-dev (make deps does it)"; exit 2; }
raceway_binary
SOCKET="$OUT/memif.sock"
rm -f "$SOCKET"
cat >"$OUT/raceway.toml" <<TOML
[switch]
name = "memif-leaf"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "0-1"
[qos]
dscp_to_tc = { 26 = 3, default = 0 }
[[port]]
name = "gen"
device = "net_memif0,role=server,socket=$SOCKET"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "out"
device = "net_null0,no-rx=1"
speed_gbps = 100
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "0.0.0.0/0"
port = "out"
TOML
"$RACEWAY" --log-level warn run -c "$OUT/raceway.toml" --duration $((DURATION + 3)) \
  --stats-json "$OUT/raceway.json" -- --file-prefix "rw-memif-$$" >"$OUT/raceway.log" 2>&1 &
RACEWAY_PID=$!
sleep 1.5
mapfile -t memory < <(eal_memory 512)
timeout -s INT "$DURATION" dpdk-testpmd -l 0,1 --main-lcore 1 "${memory[@]}" --no-pci --no-shconf \
  --file-prefix "tp-memif-$$" --log-level '*:error' --vdev "net_memif0,role=client,socket=$SOCKET" -- \
  --forward-mode=txonly --txpkts=60 --eth-peer=0,02:00:00:00:00:01 --stats-period=1 </dev/null >"$OUT/testpmd.log" 2>&1 || true
wait "$RACEWAY_PID"
generated=$(awk '/Tx-pps:/ {n++; if (n>2) {sum+=$2; k++}} END {if (k) printf "%.2f", sum/k/1e6; else print "n/a"}' "$OUT/testpmd.log")
python3 - "$OUT/raceway.json" "$generated" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
gen, out = stats["ports"]["gen"], stats["ports"]["out"]
drops = sum(gen["drops"].values())
print(f"generator (testpmd txonly, 64 B): {sys.argv[2]} Mpps offered")
print(f"raceway: received {gen['rx_packets']}, forwarded {out['tx_packets']}, dropped {drops} "
      f"({out['tx_packets'] / stats['elapsed_s'] / 1e6:.2f} Mpps averaged over its whole run), "
      f"latency p50 {stats['latency_ns']['p50']} ns p99 {stats['latency_ns']['p99']} ns, "
      f"mbufs back {stats['mbufs']['available_at_exit']}/{stats['mbufs']['pool']}")
PY
echo "memory: $(memory_label)"
