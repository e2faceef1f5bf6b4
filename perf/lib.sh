# shellcheck shell=bash
# What every perf script shares (each sources it after `cd` to the repository's root): the
# binary under test, the arithmetic of its tables (through perf/perflib.py, the one Python
# helper), and the QoS, ports and runs every live benchmark uses, so that their numbers are for
# the same switch configuration.

# The raceway binary a script measures, in $RACEWAY: the one given (a built binary, no build:
# `RACEWAY=target/release/raceway perf/X.sh`), else a fresh release build.
raceway_binary() {
  if [ -z "${RACEWAY:-}" ]; then
    cargo build --release -q -p raceway
    RACEWAY=target/release/raceway
  fi
}

# A / B to two decimals; "n/a" when either is n/a or B is zero.
#   ratio A B
ratio() { python3 perf/perflib.py ratio "$1" "$2"; }

# The median of the numbers given (the mean of the two middle ones of an even count), to two
# decimals; "n/a" when any is n/a.
#   median N...
median() { python3 perf/perflib.py median "$@"; }

# A value of a JSON file at a dotted path (`ports.out.tx_packets`).
#   json_get FILE PATH
json_get() { python3 perf/perflib.py get "$1" "$2"; }

# Removes the EAL runtime directory of file prefix PREFIX (/var/run/dpdk/PREFIX as root), which
# dpdk-testpmd and DPDK's examples leave behind at exit; raceway removes its own.
#   forget_eal_prefix PREFIX
forget_eal_prefix() {
  local base=/var/run/dpdk
  [ "$(id -u)" = 0 ] || base=${XDG_RUNTIME_DIR:-/tmp}/dpdk
  rm -rf "${base:?}/${1:?}"
}

# The EAL's memory (hugepages when the machine has them, else --no-huge): config/eal-memory.sh.
# shellcheck source=config/eal-memory.sh
. config/eal-memory.sh

# Whether A < B, as numbers (for `if less_than ...`).
#   less_than A B
less_than() { python3 perf/perflib.py less "$1" "$2"; }

# SONiC's RoCE classes (DSCP 26 -> lossless TC 3, DSCP 48 -> strict TC 6), DWRR 50/50 between
# TC 0 and TC 3, ECN on TC 3 from KMIN to KMAX bytes (default NVIDIA's 150 KB / 1.5 MB).
#   bench_qos [KMIN KMAX]
# shellcheck disable=SC2120
bench_qos() {
  local kmin=${1:-150000} kmax=${2:-1500000}
  cat <<TOML
[qos]
dscp_to_tc = { 26 = 3, 48 = 6, default = 0 }
lossless = [3]
[qos.scheduler]
strict = [6, 7]
dwrr = { 0 = 50, 3 = 50 }
[qos.ecn.3]
kmin_bytes = $kmin
kmax_bytes = $kmax
pmax = 0.2
TOML
}

# The ports and route of every one-in, one-out live benchmark: NAME on DEVICE (400 Gb/s, so
# the shaper never holds back), routed to a net_null port "out" for 10.0.1.0/24; EXTRA lines
# go in NAME's table.
#   bench_ports NAME DEVICE [EXTRA]
bench_ports() {
  cat <<TOML
[[port]]
name = "$1"
device = "$2"
speed_gbps = 400
peer_mac = "02:00:00:00:10:00"
${3:-}
[[port]]
name = "out"
device = "net_null0,no-rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "out"
TOML
}

# perf/congested.sh's config: TRACE replayed forever on "in" (400 Gb/s) into "out" shaped to
# SPEED Gb/s, TC 3 lossless with ECN from 100 KB to 500 KB, so that at a SPEED below the
# offered rate the TC 3 queue fills and stays above kmax.
#   congested_config TRACE SPEED
congested_config() {
  cat <<TOML
[switch]
name = "congested"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "0-1"
$(bench_qos 100000 500000)
[[port]]
name = "in"
device = "net_pcap0,rx_pcap=$1,infinite_rx=1"
speed_gbps = 400
peer_mac = "02:00:00:00:10:00"
[[port]]
name = "out"
device = "net_null0,no-rx=1"
speed_gbps = $2
peer_mac = "02:00:00:00:11:00"
[[route]]
prefix = "10.0.1.0/24"
port = "out"
TOML
}

# Runs raceway with CONFIG for DURATION + 5 s in the background, then `raceway blast` of
# TRACE at RATE Gb/s for DURATION s into the memif SOCKET it serves, and waits for both.
# Writes STEM.json and STEM.log for raceway, STEM-blast.json and STEM-blast.log for blast.
#   blast_through CONFIG STEM TRACE SOCKET RATE DURATION PREFIX
blast_through() {
  local config=$1 stem=$2 trace=$3 socket=$4 rate=$5 duration=$6 prefix=$7
  "$RACEWAY" --log-level error run -c "$config" --duration $((duration + 5)) \
    --stats-json "$stem.json" -- --file-prefix "$prefix-rw-$$" >"$stem.log" 2>&1 &
  local pid=$!
  # raceway's memif server needs a moment to listen; blast retries its connection anyway.
  sleep 1.5
  local memory
  mapfile -t memory < <(eal_memory 256)
  "$RACEWAY" --log-level error blast --trace "$trace" \
    --device "net_memif0,role=client,socket=$socket" --rate-gbps "$rate" --duration "$duration" -- \
    -l 0 "${memory[@]}" --no-pci --no-shconf --file-prefix "$prefix-blast-$$" --log-level '*:error' \
    >"$stem-blast.json" 2>"$stem-blast.log"
  wait "$pid"
}

# An ingress [[acl]] table of 100 rules on PORT in the shapes operators write, none of which
# `raceway gen flows` traffic (UDP 4791, DSCP 26, from 10.0.0.0/24) matches, so that every
# frame is looked up in every shape (the matcher's worst case), then permitted: 20 source
# /24s; 20 destination /24s with a UDP port; 20 BGP sources (/32, TCP 179); 20 DSCPs moved to
# TC 1; 20 source /24s with a UDP port range (several masks).
#   bench_acl PORT
bench_acl() {
  printf '[[acl]]\nname = "bench"\nports = ["%s"]\n' "$1"
  local k priority=1000
  for k in $(seq 0 19); do
    printf '[[acl.rule]]\npriority = %d\nsrc = "10.200.%d.0/24"\naction = "drop"\n' $((priority--)) "$k"
    printf '[[acl.rule]]\npriority = %d\ndst = "10.201.%d.0/24"\nprotocol = "udp"\ndst_port = %d\naction = "drop"\n' \
      $((priority--)) "$k" $((5000 + k))
    printf '[[acl.rule]]\npriority = %d\nsrc = "10.202.0.%d/32"\nprotocol = "tcp"\ndst_port = 179\naction = "drop"\n' \
      $((priority--)) "$k"
    printf '[[acl.rule]]\npriority = %d\ndscp = %d\naction = { tc = 1 }\n' $((priority--)) $((k + 30))
    printf '[[acl.rule]]\npriority = %d\nsrc = "10.203.%d.0/24"\nprotocol = "udp"\ndst_port = "6000-6999"\naction = "drop"\n' \
      $((priority--)) "$k"
  done
}

# Forwarded Mpps of raceway BINARY (default $RACEWAY) for DURATION s: SIZE-byte frames of
# $OUT/flows-SIZE.pcap (from `raceway gen flows`) replayed without end on one port, routed to
# a net_null port, with the benchmark QoS. CORES 1 is one worker; 2 is two workers (on CPU 1,
# and on CPU 0 beside the sleeping main lcore) with the in port's two rx queues (a trace
# each) one on each, the out port on the second, so the first's frames all cross to it.
# CONTROL "-control" adds an idle [control]; "-acl" binds bench_acl's 100 rules, none of which
# the trace matches, to the in port. Writes its config, stats and log under $OUT.
# DURATION is the calling script's. TRACE replaces $OUT/flows-SIZE.pcap.
#   raceway_mpps SIZE CORES [CONTROL] [BINARY] [TRACE]
raceway_mpps() {
  local size=$1 cores=$2 control=${3:-} binary=${4:-$RACEWAY} trace=${5:-$OUT/flows-$1.pcap}
  local config="$OUT/raceway-$1-$2$control.toml" stats="$OUT/raceway-$1-$2$control.json"
  local lcores="0-1" rx="rx_pcap=$trace" extra=""
  if [ "$cores" = 2 ]; then lcores="0@0,1@1,2@0" rx="$rx,$rx" extra="rx_queues = 2"; fi
  cat >"$config" <<TOML
[switch]
name = "bench"
mac = "02:00:00:00:00:01"
[dpdk]
eal = [$(eal_memory_toml 1024), "--no-pci", "--no-shconf", "--log-level", "*:error"]
lcores = "$lcores"
$(bench_qos)
$(bench_ports in "net_pcap0,$rx,infinite_rx=1" "$extra")
TOML
  if [ "$control" = -control ]; then printf '[control]\nnetns = "rw-bench-%s"\nkeep_interfaces_s = 0\n' "$$" >>"$config"; fi
  if [ "$control" = -acl ]; then bench_acl in >>"$config"; fi
  # shellcheck disable=SC2153 # DURATION is the calling script's
  "$binary" --log-level warn run -c "$config" --duration "$DURATION" --stats-json "$stats" \
    -- --file-prefix "rw-$$" >"$OUT/raceway-$size-$cores.log" 2>&1
  python3 perf/perflib.py mpps "$stats" out
}

