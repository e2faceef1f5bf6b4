#!/usr/bin/env bash
# docs/VALIDATION.md's table: published results set beside what `raceway fabric` gives for
# the same experiment, each row computed here from a run (virtual time: exact, and a few
# seconds each):
#   - IRN (Mittal et al., SIGCOMM 2018) against go-back-N and against RoCE with PFC: the
#     64-host all-to-all of perf/lossy-vs-lossless.sh (SIZE=8x4x8 DURATION_US=100);
#   - HPCC's standalone FCT (Li et al., SIGCOMM 2019): a lone flow's HPCC slowdown;
#   - DCQCN against its fluid model (Zhu et al., CoNEXT 2016): perf/dcqcn_fluid.py, 8:1;
#   - trimming against drops (NDP, Handley et al., SIGCOMM 2017; Ultra Ethernet 1.0): the
#     same all-to-all, lossy with trimming and uet-like hosts against lossy with drops.
#   RACEWAY=target/release/raceway perf/validation.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
raceway_binary
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
RACEWAY=$RACEWAY SIZE=8x4x8 DURATION_US=100 LOADS=0.5 OUT="$out/lvl" perf/lossy-vs-lossless.sh >"$out/lvl.txt"
# A lone 1 MB flow across the spines of the shipped fabric.
printf '1\n0 15 3 100 1000000 0\n' >"$out/lone.txt"
sed -e "s/^hosts_per_leaf = .*/hosts_per_leaf = 8/" config/fabric/leaf-spine.toml >"$out/lone.toml"
"$RACEWAY" fabric -c "$out/lone.toml" --workload flows --flow-file "$out/lone.txt" --out "$out/lone" >/dev/null
python3 perf/dcqcn_fluid.py "$RACEWAY" config/fabric/leaf-spine.toml default 8 >"$out/fluid.txt"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
for line in open(out + "/lvl.txt"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells[0] == "alltoall":
        rows[(cells[1], cells[2], cells[3])] = cells
def p99(fabric, uplinks, transport):
    return float(rows[(fabric, uplinks, transport)][8])
irn, gbn = p99("lossy, drops", "ecmp", "irn"), p99("lossy, drops", "ecmp", "roce-gbn")
sr = p99("lossy, drops", "ecmp", "roce-sr")
pfc = p99("lossless", "ecmp", "roce-sr")
trim, pfc_spread = p99("lossy, trimming", "spray", "uet-like"), p99("lossless", "adaptive", "roce-sr")
lone = json.load(open(out + "/lone/results.json"))["slowdown_hpcc_by_size"][2]["p50"]
fluid = [l for l in open(out + "/fluid.txt") if l.startswith("| 8 |")][0].strip().strip("|").split("|")
model, raceway = float(fluid[1]), float(fluid[2])
print("| result | the paper | raceway | agrees |")
print("|---|---|---|---|")
print("| IRN against go-back-N, with drops (IRN) | IRN's tail FCT well below RoCE's go-back-N without PFC | all-to-all p99 slowdown %.1f against %.1f (roce-sr %.1f) | %s |"
      % (irn, gbn, sr, "yes" if irn <= gbn else "no"))
print("| IRN without PFC against RoCE with PFC, both on ECMP (IRN) | IRN as good or better | p99 %.1f against %.1f: %+.1f%% | %s |"
      % (irn, pfc, (irn / pfc - 1) * 100, "yes (within 10%)" if irn <= pfc * 1.1 else "no"))
print("| a lone flow on an idle fabric (HPCC's standalone FCT) | slowdown 1 | HPCC slowdown %.3f | %s |"
      % (lone, "yes" if lone == 1.0 else "no"))
close = abs(raceway / model - 1) < 1 / 3
print("| DCQCN, 8:1 incast, back to 95%% of line rate (the fluid model) | %.2f ms | %.2f ms (%+.0f%%) | %s |"
      % (model, raceway, (raceway / model - 1) * 100, "within a third" if close else "no"))
print("| trimming against drops, all-to-all (NDP; UEC 1.0) | trimming's tail near lossless, drops' far above | spraying: p99 %.1f against %.1f with drops on ECMP (%.1f lossless, adaptive) | %s |"
      % (trim, sr, pfc_spread, "yes" if trim < sr and trim <= pfc_spread * 1.25 else "no"))
PY
