#!/usr/bin/env bash
# A leaf in a real network, on one machine: two Linux hosts and two BGP spines (FRR) in network
# namespaces, joined by veth pairs to raceway's net_af_packet ports; FRR runs in raceway's own
# namespace as its control plane. Shows the leaf learning an ECMP route by BGP, hosts reaching
# each other and the spines with no static neighbours, and what plain Linux tools see. Removes
# everything it made when it ends, even on failure or Ctrl-C. Needs root.
#   examples/lab.sh [RACEWAY]          (make lab builds raceway and runs it)
set -euo pipefail
raceway=${1:-target/release/raceway}
p=rwlab$$                     # a prefix unique to this run: namespaces, links, FRR directories
ctl=raceway-lab-$$            # raceway's namespace ([control] netns)
work=$(mktemp -d /tmp/raceway-lab.XXXXXX)
chmod 755 "$work"
switch=""

cleanup() {
  set +e
  for pid in "$work"/*/*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null; done
  [ -n "$switch" ] && kill "$switch" 2>/dev/null && wait "$switch" 2>/dev/null
  for ns in ${p}h0 ${p}h1 ${p}s0 ${p}s1 "$ctl"; do ip netns del "$ns" 2>/dev/null; done
  for link in ${p}p0 ${p}p1 ${p}u0 ${p}u1; do ip link del "$link" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

say() { printf '\n== %s\n' "$*"; }

# A namespace whose eth0 is a veth pair with the switch-side link $2 (offloads off both ends:
# af_packet would otherwise see partial checksums and GSO frames).
attach() {
  ip netns add "$1"
  ip link add "$2" type veth peer name eth0 netns "$1"
  ip link set "$2" up
  ethtool -K "$2" tx off tso off gso off gro off >/dev/null
  ip netns exec "$1" ethtool -K eth0 tx off tso off gso off gro off >/dev/null
  ip -n "$1" link set eth0 up
  ip -n "$1" link set lo up
}

# zebra and bgpd in namespace $1 with config $2, sockets and pids in $work/$1.
frr() {
  local dir=$work/$1
  mkdir -p "$dir" && cp "$2" "$dir/frr.conf" && chown -R frr:frr "$dir"
  for daemon in zebra bgpd; do
    ip netns exec "$1" /usr/lib/frr/$daemon -d -u frr -g frr -f "$dir/frr.conf" -i "$dir/$daemon.pid" \
      -z "$dir/zserv.api" --vty_socket "$dir" -P 0 --log "file:$dir/$daemon.log" 2>/dev/null
  done
}

say "hosts and spines"
for i in 0 1; do
  attach ${p}h$i ${p}p$i
  ip -n ${p}h$i addr add 10.0.$i.2/24 dev eth0
  ip -n ${p}h$i route add default via 10.0.$i.1
  attach ${p}s$i ${p}u$i
  ip -n ${p}s$i addr add 10.255.0.$((2 * i + 1))/31 dev eth0
  ip -n ${p}s$i addr add 10.200.0.1/24 dev lo            # the prefix both spines announce
  cat > "$work/s$i.conf" <<EOT
hostname spine$i
router bgp 65001
 bgp router-id 10.255.0.$((2 * i + 1))
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.255.0.$((2 * i)) remote-as 65000
 neighbor 10.255.0.$((2 * i)) timers 1 3
 address-family ipv4 unicast
  network 10.200.0.0/24
 exit-address-family
EOT
  frr ${p}s$i "$work/s$i.conf"
done
echo "host0 10.0.0.2/24, host1 10.0.1.2/24 (gateway .1, no static neighbours); spines AS 65001 announce 10.200.0.0/24"

say "raceway (its config: $work/leaf.toml)"
cat > "$work/leaf.toml" <<EOT
[switch]
name = "lab"
mac = "02:00:00:00:00:01"
[dpdk]
eal = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", "$p", "--log-level", "*:error"]
lcores = "0-1"
[[port]]
name = "host0"
device = "net_af_packet0,iface=${p}p0"
speed_gbps = 1
addresses = ["10.0.0.1/24"]
[[port]]
name = "host1"
device = "net_af_packet1,iface=${p}p1"
speed_gbps = 1
addresses = ["10.0.1.1/24"]
[[port]]
name = "up0"
device = "net_af_packet2,iface=${p}u0"
speed_gbps = 1
addresses = ["10.255.0.0/31"]
[[port]]
name = "up1"
device = "net_af_packet3,iface=${p}u1"
speed_gbps = 1
addresses = ["10.255.0.2/31"]
[control]
netns = "$ctl"
keep_interfaces_s = 0
EOT
"$raceway" run -c "$work/leaf.toml" --stats-json "$work/stats.json" >"$work/raceway.log" 2>&1 &
switch=$!
for _ in $(seq 300); do
  ip -n "$ctl" link show up1 2>/dev/null | grep -q LOWER_UP && break
  kill -0 $switch 2>/dev/null || { cat "$work/raceway.log"; exit 1; }
  sleep 0.1
done
ip -n "$ctl" -br address

say "FRR in raceway's namespace: BGP to both spines, ECMP"
cat > "$work/leaf.conf" <<EOT
hostname leaf
router bgp 65000
 bgp router-id 10.255.0.0
 no bgp ebgp-requires-policy
 neighbor 10.255.0.1 remote-as 65001
 neighbor 10.255.0.1 timers 1 3
 neighbor 10.255.0.3 remote-as 65001
 neighbor 10.255.0.3 timers 1 3
 address-family ipv4 unicast
  redistribute connected
  maximum-paths 2
 exit-address-family
EOT
frr "$ctl" "$work/leaf.conf"
for _ in $(seq 300); do
  [ "$(ip -n "$ctl" route show 10.200.0.0/24 | grep -c 'nexthop via')" = 2 ] && break
  sleep 0.1
done
vtysh --vty_socket "$work/$ctl" -c 'show ip bgp summary' | grep -E '^(Neighbor|10\.)'
echo "\$ ip -n $ctl route"
ip -n "$ctl" route

say "traffic"
ip netns exec ${p}h0 ping -c 3 -i 0.2 10.0.0.1 | tail -2
ip netns exec ${p}h0 ping -c 3 -i 0.2 10.0.1.2 | tail -2
for last in $(seq 1 16); do ip netns exec ${p}h0 ping -c 1 -W 1 10.200.0."$last" >/dev/null; done
echo "16 flows to 10.200.0.1-16 sent; traceroute through the leaf:"
ip netns exec ${p}h0 ping -c 1 -t 1 -W 1 10.0.1.2 | grep -i 'exceeded' || true
echo "\$ ip -n $ctl neigh"
ip -n "$ctl" neigh | grep -v fe80

say "what a router answers"
ip netns exec ${p}h0 ping -c 1 -W 1 10.0.99.2 | grep -i 'unreachable' || true   # a subnet no one routes

say "raceway show (over its telemetry socket)"
for view in interfaces routes "counters --period 1"; do
  echo "\$ raceway show -c leaf.toml $view"
  # shellcheck disable=SC2086 # the view's flags split on purpose
  "$raceway" show -c "$work/leaf.toml" $view
  echo
done

say "spine 0's link goes down: the port follows, the group skips it, nothing waits for BGP"
ip -n ${p}s0 link set eth0 down
down_at=$(( $(date +%s%N) / 1000000 ))
sleep 0.1
"$raceway" show -c "$work/leaf.toml" interfaces | grep -E 'Interface|up0'
answered=0
for last in $(seq 1 16); do
  ip netns exec ${p}h0 ping -c 1 -W 1 10.200.0."$last" >/dev/null && answered=$((answered + 1))
done
echo "$answered of 16 flows answered within $(( $(date +%s%N) / 1000000 - down_at )) ms of the link going down (BGP's hold time is 3 s)"
ip -n "$ctl" route show 10.200.0.0/24

kill -INT $switch && wait $switch; switch=""
say "raceway's counters"
python3 - "$work/stats.json" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
for name, port in stats["ports"].items():
    punted = {k: v for k, v in port["punted"].items() if v}
    print(f"{name:6} rx {port['rx_packets']:4} tx {port['tx_packets']:4} injected {port['injected']:3} punted {punted}")
print("FIB generation", stats["control"]["fib_generation"], "- last update", stats["control"]["last_update_ns"], "ns")
PY
