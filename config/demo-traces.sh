#!/bin/sh
# Writes the demo's input traffic (see config/demo.toml) with `raceway gen`:
#   config/demo-traces.sh RACEWAY_BINARY OUT_DIR
# OUT_DIR/host0.pcap and host1.pcap: each host's mixed traffic, mostly RoCEv2 to the other;
# OUT_DIR/incast/host2.pcap and host3.pcap: remote hosts behind up0 and up1 sending RoCEv2
# messages to host1 (a 2:1 incast on top of host0's traffic). The Makefile (make run, make
# report), the Docker image and the tests all call this, so the recipe lives in one place.
set -eu
raceway=$1
out=$2
mkdir -p "$out"
"$raceway" gen mixed --out "$out/host0.pcap" --packets 2000 --seed 1 --host 0 --rate-gbps 40 --size 60
"$raceway" gen mixed --out "$out/host1.pcap" --packets 2000 --seed 2 --host 1 --rate-gbps 40 --size 512
"$raceway" gen incast --out "$out/incast" --hosts 4 --target 1 --messages 48 --seed 3
