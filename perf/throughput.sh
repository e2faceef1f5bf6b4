#!/usr/bin/env bash
# Throughput of raceway next to dpdk-testpmd, DPDK's l3fwd example and Open vSwitch with DPDK,
# in one run, on identical virtual devices: net_pcap replaying a RoCEv2 trace forever
# (infinite_rx=1) into net_null (no-rx=1).
#
# The first table: frame sizes 64 B and 1024 B on the wire (60 and 1020 bytes before the
# FCS), 64 flows, one and two forwarding cores; Mpps and ratios to testpmd io.
#
# The second: 64 B, one core, 64 and 10,000 flows, the four forwarders in ROUNDS alternating
# rounds (default 3): testpmd io, l3fwd-lpm, OVS-DPDK port-to-port and with an L3 flow
# (perf/ovs.sh), raceway. Each round's Mpps and cycles per frame, then their medians, the
# cycles each spends over testpmd io (its own work: testpmd io does nothing but move the
# frames), and the medians of the rounds' ratios. Cycles per frame come from each
# forwarder's own counters: testpmd's --record-core-cycles, OVS's PMD statistics, raceway's
# busy cycles per frame; l3fwd has none, so its cycles are the TSC's rate (testpmd's clock
# line) over its frame rate (its core polls without rest).
#
# l3fwd is built from Debian's dpdk-doc examples (installed if missing) with one change: it
# asks for no rx checksum offload, which the vdevs lack (l3fwd then forwards without checking
# checksums, as it does on NICs without that offload). It routes with LPM from a rule file
# that sends the trace out of the net_null port, parses packet types in software
# (--parse-ptype: net_pcap sets none) and prints no counters, so its rate is read from its
# telemetry socket (perf/port_rate.py).
#
#   perf/throughput.sh                 # 6 s per measurement
#   DURATION=10 perf/throughput.sh
#   CONTROL=1 perf/throughput.sh       # also raceway with [control] on and idle (root: it
#                                      # makes a namespace and TAPs), and its ratio to without
#   ACL=1 perf/throughput.sh           # also raceway with 100 ACL rules on the in port that
#                                      # no frame matches (lib.sh's bench_acl), and its ratio
#   ROUNDS=5 perf/throughput.sh        # rounds of the second table
#   ONLY=forwarders perf/throughput.sh # the second table alone
#   BASELINE=/tmp/raceway-before perf/throughput.sh
#                                      # also another raceway binary, measured right after this
#                                      # one on each row, and this one's ratio to it (A/B)
#
# Machine notes: on a 2-vCPU machine "two cores" puts the second forwarding lcore on the CPU
# of the (mostly idle) main lcore. raceway's two-core rows spread the in port's two rx queues
# over both workers (`[[port]] rx_queues = 2`); the out port belongs to one of them, so the
# other's frames all cross to it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
DURATION=${DURATION:-6}
OUT=${OUT:-target/throughput}
mkdir -p "$OUT"
command -v dpdk-testpmd >/dev/null || { echo "error: dpdk-testpmd not found: install dpdk-dev (make deps does it)"; exit 2; }
raceway_binary
mapfile -t memory < <(eal_memory 1024)
EAL=("${memory[@]}" --no-pci --no-shconf --log-level '*:error')

for size in 60 1020; do
  "$RACEWAY" gen flows --out "$OUT/flows-$size.pcap" --flows 64 --packets 10000 --size "$size" >/dev/null
done
"$RACEWAY" gen flows --out "$OUT/flows10k-60.pcap" --flows 10000 --packets 10000 --size 60 >/dev/null

# lcore layout for N forwarding cores: main lcore 0, workers after it.
lcores() {
  if [ "$1" = 1 ]; then echo "-l 0-1"; else echo "--lcores 0@0,1@0,2@1"; fi
}

# Tx-pps of port 1, averaged over the periodic samples after the first two (warm-up), then
# testpmd's cycles per frame and its TSC's MHz (--record-core-cycles, printed at exit).
#   testpmd_run MODE SIZE CORES [TRACE]     -> "Mpps cycles MHz"
testpmd_run() {
  local mode=$1 size=$2 cores=$3 trace=${4:-$OUT/flows-$2.pcap} log="$OUT/testpmd-$1-$2-$3.log"
  local rx="rx_pcap=$trace"
  [ "$cores" = 2 ] && rx="$rx,rx_pcap=$trace"
  # shellcheck disable=SC2046
  timeout -s INT $((DURATION + 10)) dpdk-testpmd $(lcores "$cores") "${EAL[@]}" --file-prefix "tp-$$" \
    --vdev "net_pcap0,$rx,infinite_rx=1" --vdev "net_null0,no-rx=1" -- \
    --forward-mode="$mode" --nb-cores="$cores" --rxq="$cores" --txq="$cores" --stats-period=1 \
    --record-core-cycles </dev/null >"$log" 2>&1 || true
  forget_eal_prefix "tp-$$"
  awk '/NIC statistics for port/ {port=$(NF-1)} /Tx-pps:/ && port==1 {n++; if (n>2) {sum+=$2; k++}}
       /CPU cycles\/packet=/ {split($0, a, "="); split(a[2], c, " "); cycles=c[1]; mhz=$(NF-2)}
       END {printf "%s %s %s\n", (k ? sprintf("%.2f", sum/k/1e6) : "n/a"), (cycles ? sprintf("%.0f", cycles) : "n/a"), (mhz ? mhz : "n/a")}' "$log"
}
testpmd_mpps() { testpmd_run "$@" | cut -d' ' -f1; }

L3FWD=$OUT/l3fwd/l3fwd/build/l3fwd
build_l3fwd() {
  [ -x "$L3FWD" ] && return
  if [ ! -d /usr/share/dpdk/examples/l3fwd ]; then
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpdk-doc >/dev/null
  fi
  rm -rf "$OUT/l3fwd" && mkdir -p "$OUT/l3fwd"
  cp -r /usr/share/dpdk/examples/l3fwd /usr/share/dpdk/examples/common "$OUT/l3fwd/"
  sed -i 's/\.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,/.offloads = 0,/' "$OUT/l3fwd/l3fwd/main.c"
  make -s -C "$OUT/l3fwd/l3fwd" >"$OUT/l3fwd/build.log" 2>&1 || { echo "error: l3fwd did not build: see $OUT/l3fwd/build.log" >&2; exit 2; }
}

l3fwd_mpps() {
  local size=$1 cores=$2 trace=${3:-$OUT/flows-$1.pcap} prefix="l3-$$" log="$OUT/l3fwd-$1-$2.log"
  printf 'R10.0.1.0/24 1\n' >"$OUT/l3fwd-v4.rules"
  printf 'R2001:db8::/64 1\n' >"$OUT/l3fwd-v6.rules"
  # l3fwd opens a tx queue per lcore on every port; net_pcap has one per tx_pcap.
  local rx="rx_pcap=$trace,tx_pcap=/dev/null" lcores="-l 1" config="(0,0,1)"
  if [ "$cores" = 2 ]; then rx="$rx,$rx"; lcores="-l 0-1"; config="(0,0,0),(0,1,1)"; fi
  # shellcheck disable=SC2086
  timeout -s INT $((DURATION + 5)) "$L3FWD" $lcores "${EAL[@]}" --file-prefix "$prefix" \
    --vdev "net_pcap0,$rx,infinite_rx=1" --vdev "net_null0,no-rx=1" -- -p 0x3 --config="$config" \
    --lookup=lpm --parse-ptype --rule_ipv4="$OUT/l3fwd-v4.rules" --rule_ipv6="$OUT/l3fwd-v6.rules" \
    --rx-queue-size 4096 --tx-queue-size 4096 </dev/null >"$log" 2>&1 &
  local pid=$!
  python3 perf/port_rate.py "/var/run/dpdk/$prefix/dpdk_telemetry.v2" 1 "$((DURATION - 2))" 2 || echo "n/a"
  wait "$pid" || true
  forget_eal_prefix "$prefix"
}

build_l3fwd
if [ "${ONLY:-}" != forwarders ]; then
header="| frame | cores | testpmd io Mpps | testpmd 5tswap Mpps | l3fwd-lpm Mpps | raceway Mpps | raceway / io | raceway / l3fwd |"
rule="|---|---|---|---|---|---|---|---|"
if [ -n "${CONTROL:-}" ]; then header="$header raceway [control] Mpps | [control] / without |"; rule="$rule---|---|"; fi
if [ -n "${ACL:-}" ]; then header="$header raceway 100 ACL rules Mpps | ACL / without |"; rule="$rule---|---|"; fi
if [ -n "${BASELINE:-}" ]; then header="$header baseline Mpps | raceway / baseline |"; rule="$rule---|---|"; fi
echo "$header"
echo "$rule"
for size in 60 1020; do
  for cores in 1 2; do
    io=$(testpmd_mpps io "$size" "$cores")
    swap=$(testpmd_mpps 5tswap "$size" "$cores")
    l3=$(l3fwd_mpps "$size" "$cores")
    rw=$(raceway_mpps "$size" "$cores")
    row="| $((size + 4)) B | $cores | $io | $swap | $l3 | $rw | $(ratio "$rw" "$io") | $(ratio "$rw" "$l3") |"
    if [ -n "${CONTROL:-}" ]; then
      rwc=$(raceway_mpps "$size" "$cores" -control)
      row="$row $rwc | $(ratio "$rwc" "$rw") |"
    fi
    if [ -n "${ACL:-}" ]; then
      rwa=$(raceway_mpps "$size" "$cores" -acl)
      row="$row $rwa | $(ratio "$rwa" "$rw") |"
    fi
    if [ -n "${BASELINE:-}" ]; then
      base=$(raceway_mpps "$size" "$cores" -baseline "$BASELINE")
      row="$row $base | $(ratio "$rw" "$base") |"
    fi
    echo "$row"
  done
done
fi

# The second table: 64 B, one core, four forwarders in alternating rounds.
ROUNDS=${ROUNDS:-3}
rounds="$OUT/rounds.txt"
: >"$rounds"
echo
echo "64 B, one core, $ROUNDS alternating rounds (Mpps / cycles per frame):"
echo
echo "| flows | round | testpmd io | l3fwd-lpm | OVS port-to-port | OVS L3 | raceway |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for flows in 64 10000; do
    trace="$OUT/flows-60.pcap"
    [ "$flows" = 10000 ] && trace="$OUT/flows10k-60.pcap"
    read -r io_mpps io_cycles mhz < <(testpmd_run io 60 1 "$trace")
    l3_mpps=$(l3fwd_mpps 60 1 "$trace")
    l3_cycles=$(python3 -c "import sys; m, r = sys.argv[1:]; print('n/a' if 'n/a' in (m, r) else '%.0f' % (float(m) / float(r)))" "$mhz" "$l3_mpps")
    read -r p2p_mpps p2p_cycles < <(perf/ovs.sh p2p "$trace" "$DURATION" "$OUT")
    read -r ovs_mpps ovs_cycles < <(perf/ovs.sh l3 "$trace" "$DURATION" "$OUT")
    rw_mpps=$(raceway_mpps 60 1 "" "$RACEWAY" "$trace")
    rw_cycles=$(python3 perf/perflib.py get "$OUT/raceway-60-1.json" cores.0.cycles_per_packet)
    echo "$flows $io_mpps $io_cycles $l3_mpps $l3_cycles $p2p_mpps $p2p_cycles $ovs_mpps $ovs_cycles $rw_mpps $rw_cycles" >>"$rounds"
    echo "| $flows | $round | $io_mpps / $io_cycles | $l3_mpps / $l3_cycles | $p2p_mpps / $p2p_cycles | $ovs_mpps / $ovs_cycles | $rw_mpps / $rw_cycles |"
  done
done
python3 - "$rounds" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
names = ["testpmd io", "l3fwd-lpm", "OVS-DPDK port-to-port", "OVS-DPDK L3 flow", "raceway"]
def number(text):
    return None if text == "n/a" else float(text)
def median(values):
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None
def show(value, digits):
    return "n/a" if value is None else "%.*f" % (digits, value)
print()
print("Medians (cycles per frame from each forwarder's own counters; l3fwd's from the TSC over its rate):")
print()
print("| 64 B, one core | flows | Mpps | cycles per frame | over testpmd io |")
print("|---|---|---|---|---|")
for flows in ("64", "10000"):
    mine = [row[1:] for row in rows if row[0] == flows]
    io_cycles = median(number(row[1]) for row in mine)
    for index, name in enumerate(names):
        mpps = median(number(row[2 * index]) for row in mine)
        cycles = median(number(row[2 * index + 1]) for row in mine)
        over = None if cycles is None or io_cycles is None else cycles - io_cycles
        print("| %s | %s | %s | %s | %s |" % (name, flows, show(mpps, 2), show(cycles, 0), show(over, 0)))
print()
print("Medians of the rounds' ratios of raceway's Mpps:")
print()
print("| flows | raceway / testpmd io | raceway / l3fwd-lpm | raceway / OVS port-to-port | raceway / OVS L3 |")
print("|---|---|---|---|---|")
for flows in ("64", "10000"):
    mine = [[number(value) for value in row[1:]] for row in rows if row[0] == flows]
    def ratio(index):
        return median(row[8] / row[index] if row[8] is not None and row[index] else None for row in mine)
    print("| %s | %s | %s | %s | %s |" % (flows, show(ratio(0), 2), show(ratio(2), 2), show(ratio(4), 2), show(ratio(6), 2)))
PY
echo
echo "memory: $(memory_label); machine: $(nproc) vCPU $(lscpu | sed -n 's/^Model name: *//p' | head -1), DPDK $(pkg-config --modversion libdpdk), OVS $(ovs-vsctl --version | sed -n '1s/.* //p'), $(date -u +%Y-%m-%d)"
