# Shared by the benchmark scripts (sourced): the QoS every live benchmark runs with, so that
# their numbers are for the same switch configuration.

# SONiC's RoCE classes (DSCP 26 -> lossless TC 3, DSCP 48 -> strict TC 6), DWRR 50/50 between
# TC 0 and TC 3, ECN on TC 3 from KMIN to KMAX bytes (default NVIDIA's 150 KB / 1.5 MB).
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
  "$RACEWAY" --log-level error blast --trace "$trace" \
    --device "net_memif0,role=client,socket=$socket" --rate-gbps "$rate" --duration "$duration" -- \
    -l 0 --no-huge -m 256 --no-pci --no-shconf --file-prefix "$prefix-blast-$$" --log-level '*:error' \
    >"$stem-blast.json" 2>"$stem-blast.log"
  wait "$pid"
}
