# shellcheck shell=bash
# Sourced by perf/lib.sh, perf/ovs.sh and the live demo (config/demo-live.sh) from the
# repository's root.
#
# The EAL's memory, as production has it (docs/DEPLOY.md): 2 MB hugepages when the machine
# has them reserved and mounted (`make hugepages`, as root), else `--no-huge`, which the perf
# tables before hugepages all ran on. MEMORY=no-huge forces the latter (the comparison
# table); MEMORY=hugepages insists on the former. Chosen once per script, so that every
# process of a table runs on the same memory; the processes a script runs at once must fit in
# the free pages together. `--huge-unlink`: the pages go back when a process ends, however it
# ends.
memory_mode() {
  if [ -z "${MEMORY_MODE:-}" ]; then
    local free mounted
    free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
    mounted=$(awk '$3 == "hugetlbfs" { found = 1 } END { print found + 0 }' /proc/mounts)
    case "${MEMORY:-auto}" in
      no-huge) MEMORY_MODE=no-huge ;;
      hugepages | auto)
        if [ "${free:-0}" -gt 0 ] && [ "$mounted" = 1 ]; then
          MEMORY_MODE=hugepages
        elif [ "${MEMORY:-auto}" = hugepages ]; then
          echo "error: MEMORY=hugepages: no free hugepages mounted (make hugepages, as root)" >&2
          exit 2
        else
          MEMORY_MODE=no-huge
        fi
        ;;
      *) echo "error: MEMORY '$MEMORY': expected auto, hugepages or no-huge" >&2; exit 2 ;;
    esac
  fi
  echo "$MEMORY_MODE"
}

# For a script whose processes at once need MB megabytes: on hugepages with fewer free, it
# says so and runs all of them with `--no-huge` instead (one memory for the whole table).
#   hugepages_for MB
hugepages_for() {
  local free
  free=$(awk '/^HugePages_Free:/ { free = $2 } /^Hugepagesize:/ { kb = $2 } END { print int(free * kb / 1024) }' /proc/meminfo)
  if [ "$MEMORY_MODE" = hugepages ] && [ "$free" -lt "$1" ]; then
    echo "note: $1 MB of hugepages needed at once, $free MB free: running with --no-huge" >&2
    MEMORY_MODE=no-huge
  fi
}

# The EAL's memory words for a process of MB megabytes, one a line (for `mapfile` or $(...)
# into an array; `-m` preallocates them either way).
#   eal_memory MB
eal_memory() {
  if [ "$(memory_mode)" = hugepages ]; then printf -- '-m\n%s\n--huge-unlink\n' "$1"; else printf -- '--no-huge\n-m\n%s\n' "$1"; fi
}

# The same words as a TOML array's items (`eal = [$(eal_memory_toml 1024), "--no-pci"]`).
#   eal_memory_toml MB
eal_memory_toml() {
  eal_memory "$1" | python3 -c 'import sys; print(", ".join("\"%s\"" % word for word in sys.stdin.read().split()))'
}

# What a table ran on, for its heading: "2 MB hugepages" or "no hugepages (--no-huge)".
memory_label() {
  if [ "$(memory_mode)" = hugepages ]; then echo "2 MB hugepages"; else echo "no hugepages (--no-huge)"; fi
}

# The memory every EAL of this script runs on, chosen now (and for the scripts it calls).
memory_mode >/dev/null
export MEMORY_MODE
