#!/usr/bin/env bash
# RoCE-sized frames: 4,160 bytes (a 4,096-byte RoCE MTU's data frame) and 9,000 bytes, through
# raceway and through dpdk-testpmd io on the same devices, in one run. A testpmd in txonly mode
# generates the frames into a memif link; the forwarder under test receives them on its memif
# port and sends them to net_null. net_pcap cannot be the source: with infinite_rx=1 it
# refuses frames longer than one mbuf, which raceway's 2,048-byte mbufs chain.
#
#   perf/jumbo.sh                 # 8 s per run
#   DURATION=15 perf/jumbo.sh
#
# Each forwarder runs twice: with mbufs of 10,240 bytes (testpmd `--mbuf-size=10240`, raceway
# `[dpdk] mbuf_bytes = 10240` with the same room), so a frame is one mbuf, and with DPDK's
# default 2,048-byte room, so memif hands each frame over as a chain (raceway carries it, no
# copy). Rates are in Mpps, the mean of each forwarder's per-second samples after the first two
# (testpmd's Tx-pps; raceway's counter table, `--stats-interval 1`).
#
# DPDK 22.11's memif splits or merges a few multi-segment frames between the two processes
# (frames of 808 or 6,952 bytes out of 9,000, the rest zeros): raceway counts them as
# `malformed`, `unsupported` or `oversize` and says how many per run; testpmd io forwards them.
#
# Cores (2-vCPU machine): the generator forwards on CPU 1, the forwarder under test on CPU 0;
# each main lcore mostly sleeps on the other CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
DURATION=${DURATION:-8}
OUT=${OUT:-target/jumbo}
mkdir -p "$OUT"
command -v dpdk-testpmd >/dev/null || { echo "error: dpdk-testpmd not found: install dpdk-dev (make deps does it)"; exit 2; }
raceway_binary
# The generator (1 GB) and a forwarder (raceway: 2 GB of 10 KB mbufs) run at once.
hugepages_for 3072
mapfile -t memory < <(eal_memory 1024)
EAL=("${memory[@]}" --no-pci --no-shconf --log-level '*:error')

# The generator, in the background for at most DURATION + 6 s: SIZE-byte UDP frames from
# 10.0.0.1 to 10.0.1.2, to raceway's MAC (raceway drops frames to another station's as
# `not_router_mac`; testpmd io forwards whatever comes), into the memif link at SOCKET (it
# connects once the forwarder listens).
# `stop_generator` ends it, so the next run starts alone.
start_generator() {
  local size=$1 socket=$2 log=$3
  timeout -s INT $((DURATION + 6)) dpdk-testpmd -l 0,1 --main-lcore 0 "${EAL[@]}" --file-prefix "gen-$$-$RANDOM" \
    --vdev "net_memif0,role=client,socket=$socket" -- --mbuf-size=10240 --total-num-mbufs=16384 --forward-mode=txonly \
    --txpkts="$size" --tx-ip=10.0.0.1,10.0.1.2 --eth-peer=0,02:00:00:00:00:01 --stats-period=1 </dev/null >"$log" 2>&1 &
  GENERATOR=$!
}

# Waits (up to 10 s) for the forwarder's memif socket (an abstract one: DPDK's default), then
# starts the generator on it.
generate_once_listening() {
  local socket=$2
  for _ in $(seq 100); do grep -q "@$socket\$" /proc/net/unix && break; sleep 0.1; done
  start_generator "$@"
}

stop_generator() {
  kill -INT "$GENERATOR" 2>/dev/null || true
  wait "$GENERATOR" 2>/dev/null || true
}

# Mean of the per-second samples after the first two, in Mpps.
after_warmup() {
  awk '{n++; if (n>2) {sum+=$1; k++}} END {if (k) printf "%.3f", sum/k; else print "n/a"}'
}

# testpmd io's rate for SIZE-byte frames with mbufs of MBUF bytes (2176: DPDK's default, so
# frames arrive chained as raceway's do; 10240: one mbuf per frame).
testpmd_mpps() {
  local size=$1 mbuf=$2 socket="$OUT/tp-$1.sock" log="$OUT/testpmd-$1-$2.log"
  rm -f "$socket"
  timeout -s INT "$DURATION" dpdk-testpmd -l 0,1 --main-lcore 1 "${EAL[@]}" --file-prefix "tp-$$-$RANDOM" \
    --vdev "net_memif0,role=server,socket=$socket" --vdev "net_null0,no-rx=1" -- \
    --forward-mode=io --mbuf-size="$mbuf" --total-num-mbufs=16384 --stats-period=1 </dev/null >"$log" 2>&1 &
  local forwarder=$!
  generate_once_listening "$size" "$socket" "$OUT/gen-testpmd-$size-$mbuf.log"
  wait "$forwarder" || true
  stop_generator
  awk '/NIC statistics for port/ {port=$(NF-1)} /Tx-pps:/ && port==1 {print $2/1e6}' "$log" | after_warmup
}

# raceway's rate for SIZE-byte frames with mbufs of MBUF frame bytes (`[dpdk] mbuf_bytes`;
# 2048, the default, chains them).
raceway_mpps_with() {
  local size=$1 mbuf=$2 socket="$OUT/rw-$1.sock" log="$OUT/raceway-$1-$2.log" config="$OUT/raceway-$1-$2.toml"
  rm -f "$socket"
  cat >"$config" <<TOML
[switch]
name = "jumbo"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 2048), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "0@1,1@0"
mbuf_bytes = $mbuf
$(bench_qos)
$(bench_ports gen "net_memif0,role=server,socket=$socket")
TOML
  "$RACEWAY" --log-level info run -c "$config" --duration "$DURATION" --stats-interval 1 \
    --stats-json "$OUT/raceway-$size-$mbuf.json" -- --file-prefix "rw-$$-$RANDOM" >"$log" 2>&1 &
  local forwarder=$!
  generate_once_listening "$size" "$socket" "$OUT/gen-raceway-$size.log"
  wait "$forwarder"
  stop_generator
  python3 - "$OUT/raceway-$size-$mbuf.json" "$size" "$mbuf" >&2 <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
gen, mbufs = stats["ports"]["gen"], stats["mbufs"]
drops = {reason: count for reason, count in gen["drops"].items() if count}
print(f"raceway, {sys.argv[2]} B, mbuf_bytes {sys.argv[3]}: received {gen['rx_packets']} frames, mean {gen['rx_bytes'] / max(1, gen['rx_packets']):.0f} "
      f"bytes, dropped {drops or 'none'}, mbufs back {mbufs['available_at_exit']}/{mbufs['pool']}")
PY
  awk '$1 == "out" && NF == 9 {print $4}' "$log" | after_warmup
}

echo "memory: $(memory_label); machine: $(nproc) vCPU $(lscpu | sed -n 's/^Model name: *//p' | head -1), DPDK $(pkg-config --modversion libdpdk), $(date -u +%Y-%m-%d)"
echo
echo "| frame | testpmd io, 10 KB mbufs | testpmd io, 2 KB mbufs | raceway, 10 KB mbufs | raceway, 2 KB mbufs | raceway 10 KB / io 10 KB | raceway 2 KB / io 2 KB |"
echo "|---|---|---|---|---|---|---|"
for size in 4160 9000; do
  io=$(testpmd_mpps "$size" 10240)
  io_chains=$(testpmd_mpps "$size" 2176)
  rw=$(raceway_mpps_with "$size" 10240)
  rw_chains=$(raceway_mpps_with "$size" 2048)
  awk -v s="$size" -v io="$io" -v ioc="$io_chains" -v rw="$rw" -v rwc="$rw_chains" 'BEGIN {
    printf "| %d B | %s | %s | %s | %s | %.2f | %.2f |\n", s, io, ioc, rw, rwc, (io > 0 ? rw / io : 0),
      (ioc > 0 ? rwc / ioc : 0) }'
done
