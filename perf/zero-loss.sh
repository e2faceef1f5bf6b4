#!/usr/bin/env bash
# RFC 2544-style zero-loss search with the port shaper on: `raceway blast` offers RoCEv2
# frames over net_memif at a paced rate; raceway routes them out of a port shaped to
# SHAPER_GBPS (net_null behind it). A binary search finds the highest offered rate at which
# every frame is forwarded: blast's tx was never refused (no rx overflow at raceway), raceway
# received all of them and dropped none.
#
#   perf/zero-loss.sh                        # 64 B and 1024 B, shaper 10 Gb/s, 3 s trials
#   SHAPER_GBPS=25 TRIAL=5 perf/zero-loss.sh
#
# Cores (2-vCPU machine): raceway's worker on CPU 1, blast on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
SHAPER_GBPS=${SHAPER_GBPS:-10}
TRIAL=${TRIAL:-3}
STEPS=${STEPS:-7}
OUT=${OUT:-target/zero-loss}
mkdir -p "$OUT"
raceway_binary

trial() { # size rate -> prints "pass" or "fail" and the numbers
  local size=$1 rate=$2 socket="$OUT/memif.sock"
  rm -f "$socket"
  cat >"$OUT/raceway.toml" <<TOML
[switch]
name = "zero-loss"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "0-1"
[qos]
dscp_to_tc = { 26 = 3, default = 0 }
[[port]]
name = "gen"
device = "net_memif0,role=server,socket=$socket"
speed_gbps = 100
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "out"
device = "net_null0,no-rx=1"
speed_gbps = $SHAPER_GBPS
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "out"
TOML
  blast_through "$OUT/raceway.toml" "$OUT/raceway" "$OUT/flows-$size.pcap" "$socket" "$rate" "$TRIAL" zl
  python3 - "$OUT/raceway-blast.json" "$OUT/raceway.json" <<'PY'
import json, sys
blast = json.load(open(sys.argv[1]))
stats = json.load(open(sys.argv[2]))
rx = stats["ports"]["gen"]["rx_packets"]
tx = stats["ports"]["out"]["tx_packets"]
drops = sum(sum(port["drops"].values()) for port in stats["ports"].values())
ok = blast["refused"] == 0 and rx == blast["sent"] and tx == rx and drops == 0
print("pass" if ok else "fail", f'{blast["mpps"]:.2f} Mpps {blast["gbps_on_wire"]:.2f} Gb/s sent {blast["sent"]} refused {blast["refused"]} received {rx} dropped {drops}')
PY
}

echo "| frame | shaper Gb/s | zero-loss offered rate (Gb/s on the wire) | Mpps | last passing trial |"
echo "|---|---|---|---|---|"
for size in 60 1020; do
  "$RACEWAY" gen flows --out "$OUT/flows-$size.pcap" --flows 64 --packets 1000 --size "$size" >/dev/null
  low=0; high=$(python3 -c "print($SHAPER_GBPS * 1.25)"); best="none"; best_line=""
  for _ in $(seq "$STEPS"); do
    rate=$(python3 -c "print(round(($low + $high) / 2, 3))")
    line=$(trial "$size" "$rate")
    echo "  size $((size + 4)) B, offered $rate Gb/s: $line" >&2
    if [ "${line%% *}" = pass ]; then low=$rate; best=$rate; best_line=${line#pass }; else high=$rate; fi
  done
  mpps=$(python3 -c "print('%.2f' % ($best * 1e9 / (($size + 24) * 8) / 1e6) if '$best' != 'none' else 'n/a')")
  echo "| $((size + 4)) B | $SHAPER_GBPS | $best | $mpps | $best_line |"
done
echo "memory: $(memory_label)"
