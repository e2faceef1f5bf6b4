#!/usr/bin/env bash
# The live demo (`make run`): raceway on config/demo.toml, with a host behind each port played
# by `raceway blast --pfc`, a RoCE NIC that honours PFC per priority, over net_memif links.
#   config/demo-live.sh RACEWAY_BINARY OUT_DIR [SECONDS]
# RACEWAY_ARGS adds flags to `raceway run` (docker/compose.yaml adds --metrics).
# host0 and host1 send their mixed traffic, the remote hosts behind up0 and up1 a 2:1 incast
# of RoCEv2 into host1 (the traces from config/demo-traces.sh, each looped for SECONDS). The
# switch prints a counter table each second; at the end the summary shows, per port, what it
# received and sent, XOFF frames sent, ECN marks and drops, and per host the pauses it obeyed.
# host1's frames, in and out, are captured to OUT_DIR/host1.pcapng (PFC frames included).
set -euo pipefail
# shellcheck source=config/eal-memory.sh
. config/eal-memory.sh
raceway=$1
out=$2
seconds=${3:-4}
traces=$out/traces
mkdir -p "$out"
# The old log too: the wait for the switch below reads it, and must not see the last run.
rm -f "$out"/*.pcapng "$out"/stats.json "$out"/host-*.json "$out"/raceway.log
# Who plays which host: port, trace.
hosts=("host0 $traces/host0.pcap" "host1 $traces/host1.pcap" "up0 $traces/incast/host2.pcap" "up1 $traces/incast/host3.pcap")

pids=()
sfacctd_pid=""
cleanup() { for pid in "${pids[@]}" $sfacctd_pid; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# sFlow's collector (config/demo.toml's [sflow]): pmacct's sfacctd, when installed, estimating
# each source's frames from the samples into $out/sflow.csv.
rm -f "$out/sflow.csv"
if command -v sfacctd >/dev/null; then
  cat >"$out/sfacctd.conf" <<CONF
daemonize: false
sfacctd_ip: 127.0.0.1
sfacctd_port: 16343
sfacctd_renormalize: true
plugins: print[sources]
aggregate[sources]: src_host, dst_host
print_output[sources]: csv
print_output_file[sources]: $out/sflow.csv
print_refresh_time[sources]: 1
pidfile: $out/sfacctd.pid
logfile: $out/sfacctd.log
CONF
  sfacctd -f "$out/sfacctd.conf" &
  sfacctd_pid=$!
fi

# The switch runs until the hosts are done (SIGTERM below); its counter table goes to the
# terminal and to raceway.log, where the script also waits for it to be ready. It runs on
# hugepages when the machine has them (config/eal-memory.sh); the hosts, playing NICs, on
# --no-huge, so that the switch's gigabyte fits in the pages `make hugepages` reserves.
mapfile -t memory < <(eal_memory 1024)
echo "demo switch memory: $(memory_label)"
# shellcheck disable=SC2086
"$raceway" run -c config/demo.toml --stats-interval 1 --stats-json "$out/stats.json" --capture "host1=$out/host1.pcapng" \
  ${RACEWAY_ARGS:-} -- "${memory[@]}" \
  2> >(tee "$out/raceway.log" >&2) &
switch=$!
pids+=("$switch")
for _ in $(seq 300); do
  grep -q "worker on lcore" "$out/raceway.log" 2>/dev/null && break
  kill -0 "$switch" 2>/dev/null || { echo "raceway did not start: see $out/raceway.log"; exit 1; }
  sleep 0.1
done
index=0
for host in "${hosts[@]}"; do
  # shellcheck disable=SC2086 # a host's words, one positional parameter each
  set -- $host
  # Each host: 1 Gb/s, as fast as its 1 Gb/s link, pause quanta at 1 Gb/s.
  "$raceway" --log-level error blast --trace "$2" \
    --device "net_memif$index,role=client,socket=/raceway-demo-$1.sock,rsize=6" \
    --rate-gbps 1 --pfc 1 --duration "$seconds" -- -l 0 --no-huge -m 256 --no-pci --no-shconf \
    --log-level '*:error' --file-prefix "raceway-demo-$1" > "$out/host-$1.json" &
  pids+=("$!")
  index=$((index + 1))
done
for pid in "${pids[@]:1}"; do wait "$pid"; done
kill -TERM "$switch"
wait "$switch"
if [ -n "$sfacctd_pid" ]; then kill -INT "$sfacctd_pid"; wait "$sfacctd_pid" || true; fi
trap - EXIT

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
stats = json.load(open(f"{out}/stats.json"))
print(f"--- demo summary ({out}/stats.json; host1's frames in {out}/host1.pcapng)")
print(f"{'port':8} {'rx':>9} {'tx':>9} {'XOFF sent':>10} {'ECN marked':>11} {'lossless drops':>15} {'other drops':>12}"
      f"   host: {'sent':>9} {'PFC rx':>7} {'paused ms':>10}")
for port, counters in stats["ports"].items():
    host = json.load(open(f"{out}/host-{port}.json"))
    drops = counters["drops"]
    lossless = drops["headroom_overflow"] + drops["pfc_watchdog"]
    other = sum(drops.values()) - lossless
    marked = sum(queue["ecn_marked"] for queue in counters["queues"])
    print(f"{port:8} {counters['rx_packets']:>9} {counters['tx_packets']:>9} {sum(counters['pfc_xoff_tx']):>10} "
          f"{marked:>11} {lossless:>15} {other:>12}         {host['sent']:>9} {sum(host['pfc_rx']):>7} "
          f"{sum(host['paused_us']) / 1000:>10.1f}")
print("other drops: the mixed traces' deliberately bad frames (malformed, no route, TTL) and lossy tail drops")
capture = stats.get("capture", {})
written = sum(capture.get("files", {}).values())
print(f"capture: {written} frames written, {capture.get('not_captured', 0)} not captured (the writer fell behind)")
for table, body in stats.get("acl", {}).items():
    for rule in body["rules"]:
        print(f"acl {table} priority {rule['priority']} ({rule['match']}, {rule['action']}): {rule['packets']} frames")
try:
    rows = open(f"{out}/sflow.csv").read().splitlines()
    header, flows = rows[0].split(","), [row.split(",") for row in rows[1:]]
    frames = header.index("PACKETS")
    flows.sort(key=lambda flow: -int(flow[frames]))
    print(f"sflow: the collector (sfacctd) estimates {len(flows)} source-destination pairs from the samples; the largest:")
    for flow in flows[:4]:
        print(f"  {flow[0]:>15} -> {flow[1]:<15} {int(flow[frames]):>9} frames")
except FileNotFoundError:
    print("sflow: no collector output (install pmacct for sfacctd)")
PY
