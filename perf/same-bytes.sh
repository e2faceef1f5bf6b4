#!/usr/bin/env bash
# Two raceway binaries, the same bytes: runs the same replays, fabric runs and trace
# generators with each and compares every file they write (output pcaps, stats.json,
# report series, fabric results) by SHA-256. For refactors that must not change behaviour:
#
#   cp target/release/raceway /tmp/raceway-before     # before the change
#   perf/same-bytes.sh /tmp/raceway-before target/release/raceway
#
# Exit status 0 when every file is identical; otherwise the differing files are listed and
# the status is 1. The traces are written by the first binary, so both replay the same input.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
[ $# -eq 2 ] || { echo "usage: $0 OLD_RACEWAY NEW_RACEWAY" >&2; exit 2; }
OLD=$(realpath "$1")
NEW=$(realpath "$2")
WORK=$(mktemp -d -t raceway-same-bytes.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
TRACES=$WORK/traces
mkdir -p "$TRACES"

config/demo-traces.sh "$OLD" "$TRACES/demo" >/dev/null
"$OLD" gen pfc-storm --out "$TRACES/storm" --hosts 4 --storm 0 --messages 8 --seed 5 >/dev/null
"$OLD" gen alltoall --out "$TRACES/alltoall" --hosts 4 --messages 2 --message-bytes 16384 --seed 6 >/dev/null
"$OLD" gen allreduce --out "$TRACES/allreduce" --hosts 4 --messages 2 --seed 7 --pcp 3 >/dev/null
"$OLD" gen flows --out "$TRACES/flows.pcap" --packets 20000 --size 1020 >/dev/null

# run NAME BINARY ARGS...: the binary's outputs go to $WORK/<side>/NAME.
run() {
    local name=$1 side=$2 binary=$3
    shift 3
    local out=$WORK/$side/$name
    mkdir -p "$out"
    "$binary" --log-level error "$@" "$out" >"$out/stdout.txt" 2>"$out/stderr.txt" || {
        echo "$side $name failed: $(tail -1 "$out/stderr.txt")" >&2
        return 1
    }
}

DEMO_IN=(--in "host0=$TRACES/demo/host0.pcap" --in "host1=$TRACES/demo/host1.pcap"
    --in "up0=$TRACES/demo/incast/host2.pcap" --in "up1=$TRACES/demo/incast/host3.pcap")
for side in old new; do
    binary=$OLD
    [ $side = new ] && binary=$NEW
    run demo $side "$binary" replay -c config/demo.toml "${DEMO_IN[@]}" --seed 3 --report "$WORK/$side/demo-report" --out
    run demo-deaf-peer $side "$binary" replay -c config/demo.toml "${DEMO_IN[@]}" --peer-ignores-pfc host0 --out
    run storm $side "$binary" replay -c config/demo.toml --in "host0=$TRACES/storm/host0.pcap" \
        --in "host1=$TRACES/storm/host1.pcap" --in "up0=$TRACES/storm/host2.pcap" --in "up1=$TRACES/storm/host3.pcap" --out
    run alltoall $side "$binary" replay -c config/demo.toml --in "host0=$TRACES/alltoall/host0.pcap" \
        --in "host1=$TRACES/alltoall/host1.pcap" --in "up0=$TRACES/alltoall/host2.pcap" --in "up1=$TRACES/alltoall/host3.pcap" --out
    run allreduce $side "$binary" replay -c config/demo.toml --in "host0=$TRACES/allreduce/host0.pcap" \
        --in "host1=$TRACES/allreduce/host1.pcap" --in "up0=$TRACES/allreduce/host2.pcap" --in "up1=$TRACES/allreduce/host3.pcap" --out
    run flows $side "$binary" replay -c config/demo.toml --in "host0=$TRACES/flows.pcap" --out
    for mode in ecmp spray adaptive; do
        run "fabric-incast-$mode" $side "$binary" fabric -c config/fabric/leaf-spine.toml --workload incast \
            --messages 2 --message-bytes 262144 --mode $mode --seed 1 --out
    done
    run fabric-alltoall $side "$binary" fabric -c config/fabric/leaf-spine.toml --workload alltoall \
        --messages 1 --message-bytes 65536 --seed 2 --out
    mkdir -p "$WORK/$side/gen"
    "$binary" gen mixed --out "$WORK/$side/gen/mixed.pcap" --packets 3000 --seed 9 --host 1 >/dev/null
    "$binary" gen incast --out "$WORK/$side/gen/incast" --hosts 8 --target 2 --messages 3 --seed 4 >/dev/null
done

# Wall-clock lines (elapsed seconds, rates) are the only output allowed to differ.
(cd "$WORK/old" && find . -type f ! -name stderr.txt ! -name stdout.txt | sort | xargs sha256sum) >"$WORK/old.sums"
(cd "$WORK/new" && find . -type f ! -name stderr.txt ! -name stdout.txt | sort | xargs sha256sum) >"$WORK/new.sums"
files=$(wc -l <"$WORK/old.sums")
if diff "$WORK/old.sums" "$WORK/new.sums" >"$WORK/diff.txt"; then
    echo "same bytes: $files files from 11 runs identical (replay, fabric and gen)"
else
    echo "DIFFERENT ($files files compared):"
    cat "$WORK/diff.txt"
    exit 1
fi
