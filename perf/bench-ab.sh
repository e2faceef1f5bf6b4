#!/usr/bin/env bash
# A criterion bench of this tree against the same bench at an older commit, in one sitting:
# the two binaries run in turn, ROUNDS times each (order alternating), and for each benchmark
# the driver (perf/bench_ab.py) prints the minimum and the median of the per-run estimates and
# their ratios new/old. The minimum is the figure least touched by a shared machine's noise.
#   perf/bench-ab.sh REV BENCH [ROUNDS]     e.g. perf/bench-ab.sh 0f757d6 route 8
# The old tree is checked out with `git worktree` and built in a target dir of its own (kept
# for the next run under /tmp); the bench must exist at REV under the same name.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=perf/lib.sh
. perf/lib.sh
rev=$1 bench=$2 rounds=${3:-6}
commit=$(git rev-parse --short "$rev")
old_tree=/tmp/raceway-ab-$commit
old_target=/tmp/raceway-ab-target-$commit
[ -d "$old_tree" ] || git worktree add -f --detach "$old_tree" "$commit" >/dev/null
executable() { # the bench binary cargo reports for the tree in $1 with target dir $2
  (cd "$1" && CARGO_TARGET_DIR="$2" cargo bench -p raceway-perf --bench "$bench" --no-run --message-format json 2>/dev/null) |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["bench"] and m.get("executable"):
        print(m["executable"])' | tail -1
}
old=$(executable "$old_tree" "$old_target")
new=$(executable "$PWD" "$PWD/target")
echo "$bench: $commit (old) against $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes') (new), $rounds runs each"
python3 perf/bench_ab.py "$old" "$new" "$rounds"
