#!/usr/bin/env bash
# Live PFC response: how long after raceway reads a PFC XOFF does the last frame of the paused
# priority leave its port? Frames the shaper handed to the NIC before the pause cannot be
# recalled; raceway bounds them to one tx burst of maximum standard frames (32 x 1542 wire
# bytes), the peer response its auto headroom allows for.
#   perf/pfc-response.sh [SPEED_GBPS] [SECONDS]     (default 1 Gb/s: see below)
# Set-up: port `in` replays lossless TC3 RoCEv2 frames as fast as net_pcap can (infinite_rx),
# all routed to port `out` (SPEED_GBPS, default 1), whose peer is `raceway blast` sending an
# XOFF for priority 3 and an XON, each every ~1.3 ms, over net_memif. raceway captures `out`
# (frames in and out, TSC-stamped when read or handed to the tx queue). perf/pfc_response.py
# replays the shaper's link schedule from the capture (each frame starts when the link is free
# and takes its wire time) and reports, per XOFF, when the last TC3 frame handed before it
# leaves the wire, after the XOFF was read; and that no TC3 frame is handed during a pause.
# What it cannot see: the time between the XOFF reaching the port and raceway's rx poll
# reading it (one loop, a few us when the core is not shared). The peer must drain `out` at
# its speed, or frames wait in the tx burst rather than in the shaper's schedule: a blast
# process sharing two CPUs drains 1 Gb/s of 1 KB frames, not 10.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
speed=${1:-1}
seconds=${2:-3}
work=$(mktemp -d /tmp/raceway-pfc-response.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
raceway_binary
raceway=$RACEWAY
$raceway gen flows --out "$work/data.pcap" --packets 64 --size 1078 --dscp 26 >/dev/null
# The PFC peer's trace: XOFF (0xffff quanta) for priority 3, then XON.
python3 - "$work/pfc.pcap" <<'PY'
import struct, sys
def pfc(time):
    frame = bytes.fromhex("0180c2000001") + bytes.fromhex("020000000099") + b"\x88\x08\x01\x01\x00\x08"
    frame += b"".join(struct.pack(">H", time if p == 3 else 0) for p in range(8))
    return frame.ljust(60, b"\0")
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    for i, time in enumerate([0xffff, 0]):
        frame = pfc(time)
        f.write(struct.pack("<IIII", 0, i * 1000, len(frame), len(frame)) + frame)
PY
cat > "$work/leaf.toml" <<EOF
[switch]
name = "pfc-response"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--file-prefix", "raceway-pfc-response", "--log-level", "*:error"]
lcores = "0-1"
[qos]
dscp_to_tc = { 26 = 3, default = 0 }
lossless = [3]
[[port]]
name = "in"
device = "net_pcap90,rx_pcap=$work/data.pcap,infinite_rx=1"
speed_gbps = 100
peer_mac = "02:00:00:00:00:02"
[[port]]
name = "out"
device = "net_memif90,role=server,socket=/raceway-pfc-response.sock"
speed_gbps = $speed
peer_mac = "02:00:00:00:00:03"
[[route]]
prefix = "10.0.1.0/24"
port = "out"
EOF
$raceway run -c "$work/leaf.toml" --stats-json "$work/stats.json" --capture "out=$work/out.pcapng" \
  2>"$work/raceway.log" &
switch=$!
for _ in $(seq 300); do grep -q "worker on lcore" "$work/raceway.log" && break; sleep 0.1; done
# 60-byte frames at 0.0004 Gb/s: one every 1.68 ms, XOFF and XON taking turns.
mapfile -t memory < <(eal_memory 256)
$raceway --log-level error blast --trace "$work/pfc.pcap" --device "net_memif0,role=client,socket=/raceway-pfc-response.sock" \
  --rate-gbps 0.0004 --duration "$seconds" -- -l 0 "${memory[@]}" --no-pci --no-shconf --log-level '*:error' \
  --file-prefix raceway-pfc-response-peer >/dev/null
kill -TERM $switch
wait $switch
python3 perf/pfc_response.py "$work/out.pcapng" "$speed"
echo "memory: $(memory_label)"
