#!/usr/bin/env bash
# Open vSwitch with DPDK (Debian's openvswitch-switch-dpdk) forwarding a trace on the vdevs
# raceway's benchmarks use: net_pcap replaying TRACE forever (infinite_rx=1) into net_null
# (no-rx=1), one PMD core (CPU 1; the main thread on CPU 0). Run by hand, with its own
# database, sockets, logs and EAL file prefix under a directory of its own, on the memory
# config/eal-memory.sh chooses (`memory_mode`): 1 GB of hugepages (`dpdk-socket-mem`, returned at exit:
# `--huge-unlink`), or without them `--no-huge --legacy-mem -m 1024`. Prints "Mpps cycles-per-frame", both from OVS's own PMD counters
# (`dpif-netdev/pmd-stats-show`, cleared after 2 s of warm-up): the frames the PMD received
# over the seconds between the clear and the reading, and its processing cycles per packet.
# (The interfaces' statistics are refreshed only every few seconds, so they cannot time a
# rate over a few seconds.) Both flows forward every frame received.
#
# FLOW is one of:
#   p2p  every frame from the in port to the out port (`in_port=1,actions=output:2`);
#   l3   a router's work: the destination prefix matched, both MACs set, the TTL decremented
#        (with the IPv4 checksum), out of the out port. With a trace of many flows (`raceway
#        gen flows --flows 10000`), OVS's exact-match cache misses and its megaflow
#        classifier works.
#
#   perf/ovs.sh FLOW TRACE DURATION_S WORKDIR
#
# Installs openvswitch-switch-dpdk if missing (as make deps does other tools), and never
# starts its system service: the daemons here are the script's own and stopped at exit.
set -euo pipefail
# shellcheck source=config/eal-memory.sh
. "$(dirname "$0")/../config/eal-memory.sh"
flow=${1:?flow: p2p or l3} trace=${2:?trace} duration=${3:?duration in s} work=${4:?work dir}
VSWITCHD=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
if [ ! -x "$VSWITCHD" ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openvswitch-switch-dpdk >/dev/null
fi
case "$flow" in
  p2p) rule="in_port=1,actions=output:2" ;;
  l3) rule="ip,nw_dst=10.0.1.0/24,actions=mod_dl_src:02:00:00:00:00:01,mod_dl_dst:02:00:00:00:01:00,dec_ttl,output:2" ;;
  *) echo "error: perf/ovs.sh: flow '$flow': expected p2p or l3" >&2; exit 2 ;;
esac
[ "$duration" -gt 2 ] || { echo "error: perf/ovs.sh: duration '$duration': more than the 2 s of warm-up" >&2; exit 2; }
dir=$(mktemp -d "$work/ovs.XXXXXX")
dir=$(cd "$dir" && pwd)
prefix="ovs-$$"
# The userspace datapath makes persistent TAP devices for the bridge and for itself
# (`ovs-netdev`), which outlive the daemons: the bridge gets a name of this run's, and both
# are deleted at exit (`ovs-netdev` only when it was not there before).
bridge="rwovs$$"
netdev_before=0
ip link show ovs-netdev >/dev/null 2>&1 && netdev_before=1
export OVS_RUNDIR=$dir OVS_LOGDIR=$dir OVS_DBDIR=$dir
vsctl() { ovs-vsctl --db="unix:$dir/db.sock" "$@"; }
appctl() { ovs-appctl -t "$dir/vswitchd.ctl" "$@"; }
stop() {
  local daemon pid
  for daemon in vswitchd ovsdb; do
    pid=$(cat "$dir/$daemon.pid" 2>/dev/null) || continue
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  done
  # ovs-vswitchd's EAL leaves its runtime directory behind, as testpmd does.
  local base=/var/run/dpdk
  [ "$(id -u)" = 0 ] || base=${XDG_RUNTIME_DIR:-/tmp}/dpdk
  rm -rf "${base:?}/$prefix"
  ip link delete "$bridge" 2>/dev/null || true
  [ "$netdev_before" = 1 ] || ip link delete ovs-netdev 2>/dev/null || true
}
trap stop EXIT
ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server --remote="punix:$dir/db.sock" --pidfile="$dir/ovsdb.pid" --unixctl="$dir/ovsdb.ctl" \
  --log-file="$dir/ovsdb.log" --detach --no-chdir "$dir/conf.db" 2>>"$dir/stderr.log"
vsctl --no-wait init
memory=(other_config:dpdk-socket-mem=1024 "other_config:dpdk-extra=--huge-unlink --no-pci --no-shconf --file-prefix $prefix")
[ "$(memory_mode)" = hugepages ] ||
  memory=("other_config:dpdk-extra=--no-huge --legacy-mem -m 1024 --no-pci --no-shconf --file-prefix $prefix")
vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true other_config:dpdk-lcore-mask=0x1 \
  other_config:pmd-cpu-mask=0x2 "${memory[@]}"
"$VSWITCHD" "unix:$dir/db.sock" --pidfile="$dir/vswitchd.pid" --unixctl="$dir/vswitchd.ctl" \
  --log-file="$dir/vswitchd.log" --detach --no-chdir 2>>"$dir/stderr.log"
vsctl add-br "$bridge" -- set bridge "$bridge" datapath_type=netdev
vsctl add-port "$bridge" in -- set Interface in type=dpdk ofport_request=1 \
  "options:dpdk-devargs=net_pcap_ovs$$,rx_pcap=$trace,infinite_rx=1"
vsctl add-port "$bridge" out -- set Interface out type=dpdk ofport_request=2 \
  "options:dpdk-devargs=net_null_ovs$$,no-rx=1"
ovs-ofctl del-flows "unix:$dir/$bridge.mgmt"
ovs-ofctl add-flow "unix:$dir/$bridge.mgmt" "$rule"
sleep 2
appctl dpif-netdev/pmd-stats-clear >/dev/null
started=$(date +%s.%N)
sleep $((duration - 2))
appctl dpif-netdev/pmd-stats-show >"$dir/pmd-stats.txt"
ended=$(date +%s.%N)
python3 - "$started" "$ended" "$dir/pmd-stats.txt" <<'PY'
import re, sys
started, ended = float(sys.argv[1]), float(sys.argv[2])
text = open(sys.argv[3]).read()
# The PMD core's block comes first; the main thread forwards nothing.
packets = re.search(r"packets received: ([0-9]+)", text)
cycles = re.search(r"avg processing cycles per packet: ([0-9.]+)", text)
mpps = "%.2f" % (int(packets.group(1)) / (ended - started) / 1e6) if packets else "n/a"
print(mpps, "%.0f" % float(cycles.group(1)) if cycles else "n/a")
PY
