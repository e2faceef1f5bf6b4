#!/usr/bin/env bash
# The suite in its tiers, each timed (make test runs it after fmt and clippy):
#   core  raceway-core's unit, replay, PFC, ECN, group and property tests: Rust alone, run with
#         pkg-config blinded so a DPDK dependency creeping into the core fails here;
#   dpdk  the other crates' unit tests, the binary's command line, hostile input, the fabric
#         command (under mpirun too) and live runs on DPDK vdevs (needs DPDK, root for the
#         EAL's memory, lua5.3, Open MPI);
#   root  the control plane with Linux hosts and FRR in network namespaces (root, FRR, tshark).
# Everything is compiled first, so a tier's time is its tests' alone; the dpdk and root tiers
# select the same packages as their build (cargo unifies features over what is selected, and
# another selection would rebuild), with the `mpi` feature, so the binary they test is the one
# that runs under mpirun (the default build's freedom from MPI is the Makefile's check).
# Wireshark's tools are on this machine (make deps), so the
# core tier's tests that need them run too.
set -euo pipefail
cargo=${CARGO:-cargo}
threads=${TEST_THREADS:-16}
times=()

tier() {
    local name=$1 start=$SECONDS
    shift
    echo "== tier $name"
    "$@"
    times+=("$name $((SECONDS - start)) s")
}

no_dpdk=(env PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH=)
rest=(--workspace --exclude raceway-core --features raceway/mpi)

core() {
    "${no_dpdk[@]}" "$cargo" test -p raceway-core --lib --tests -- --include-ignored --test-threads="$threads"
}

dpdk() {
    "$cargo" test "${rest[@]}" --lib --bins --test dpdk -- --test-threads="$threads"
}

root() {
    "$cargo" test "${rest[@]}" --test root -- --test-threads="$threads"
}

"${no_dpdk[@]}" "$cargo" test -p raceway-core --lib --tests --no-run --quiet
"$cargo" test "${rest[@]}" --lib --bins --tests --no-run --quiet
tier core core
tier dpdk dpdk
tier root root
echo "== tier times: ${times[*]/%/;}"
