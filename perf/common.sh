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
