# raceway: `make run` (demo) and `make test` (the suite) on a fresh Debian/Ubuntu machine.
# Both install what is missing first; as a user they call sudo for apt only.

SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CARGO ?= cargo
APT_PACKAGES := build-essential pkg-config libdpdk-dev dpdk dpdk-dev clang libclang-dev libpcap-dev tshark iproute2 iputils-ping iputils-tracepath ethtool iperf3 frr hping3 tcpdump procps python3 prometheus lua5.3 time stress-ng shellcheck pmacct openmpi-bin libopenmpi-dev
RACEWAY := target/release/raceway

.PHONY: all deps hugepages build test test-stressed run lab report demo-traces bench fuzz-build fuzz-smoke fuzz mutants fmt clean

all: build

deps:
	@if ! command -v dpkg-query >/dev/null; then \
		echo "error: this Makefile installs with apt (Debian/Ubuntu); install $(APT_PACKAGES) by hand"; exit 2; fi
	@missing=""; for package in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found: install a Rust toolchain with rustup, then re-run make"; exit 2; }
	@for tool in fmt clippy; do \
		$(CARGO) $$tool --version >/dev/null 2>&1 || rustup component add $$([ $$tool = fmt ] && echo rustfmt || echo clippy) || \
			{ echo "error: cargo $$tool is missing and rustup could not add it"; exit 2; }; \
	done
	@$(MAKE) --no-print-directory hugepages

# Hugepages, as production runs on them (docs/DEPLOY.md): 2 GB of 2 MB pages reserved and
# mounted with DPDK's dpdk-hugepages.py, as root, when none are; perf/ runs on them when they
# are there (perf/lib.sh, `memory_mode`). Tests run with `--no-huge` either way. Best effort:
# without root, or where the kernel refuses (a container), it says so and goes on.
HUGEPAGES ?= 2G
hugepages:
	@if awk '$$3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts && \
		[ "$$(awk '/^HugePages_Total:/ { print $$2 }' /proc/meminfo)" -gt 0 ]; then \
		echo "hugepages: $$(awk '/^HugePages_Total:/ { print $$2 }' /proc/meminfo) pages of 2 MB reserved and mounted"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "hugepages: none reserved; as root, make hugepages (or dpdk-hugepages.py -p 2M --setup $(HUGEPAGES))"; \
	elif mkdir -p /dev/hugepages && dpdk-hugepages.py -p 2M --setup $(HUGEPAGES) && \
		awk '$$3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts; then \
		echo "hugepages: $$(awk '/^HugePages_Total:/ { print $$2 }' /proc/meminfo) pages of 2 MB reserved and mounted"; \
	else \
		echo "hugepages: dpdk-hugepages.py could not reserve $(HUGEPAGES); perf/ runs with --no-huge"; \
	fi

build: deps
	$(CARGO) build --release -p raceway

# Formatting and lints (the workspace's [workspace.lints], warnings are errors; shellcheck on
# every script, and every Python script compiled); the three test
# tiers, each timed (tests/tiers.sh: core with pkg-config blinded, so a DPDK dependency
# creeping into the core fails as it would on a machine without DPDK; dpdk; root), with 16
# test threads (tests must not share names, directories or ports); every criterion bench run
# once in test mode (so benches cannot rot); and the doc tests. Everything is built with the
# `mpi` feature (the dpdk tier runs the fabric under mpirun), once; and the default build is
# checked to have no MPI in its dependency tree.
TEST_THREADS ?= 16
SHELL_SCRIPTS := $(wildcard perf/*.sh perf/pktgen/*.sh tests/*.sh config/*.sh examples/*.sh) .ci/run
PYTHON_SCRIPTS := $(wildcard perf/*.py fuzz/*.py)
test: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --features raceway/mpi --quiet -- -D warnings
	@if $(CARGO) tree -p raceway -e normal --prefix none | grep -qE '^mpi'; then \
		echo "error: the default build depends on MPI (cargo tree -p raceway): keep it behind the mpi feature"; exit 1; fi
	shellcheck -x $(SHELL_SCRIPTS)
	PYTHONPYCACHEPREFIX=target/pycache python3 -m py_compile $(PYTHON_SCRIPTS)
	CARGO=$(CARGO) TEST_THREADS=$(TEST_THREADS) tests/tiers.sh
	$(CARGO) test --workspace --features raceway/mpi --benches
	$(CARGO) test --workspace --features raceway/mpi --doc

# The root tier beside a busy neighbour: stress-ng keeps both CPUs busy while the tier runs
# (tests/root/main.rs says what its timing tests rely on to hold).
test-stressed: deps
	$(CARGO) test --workspace --exclude raceway-core --test root --no-run --quiet
	stress-ng --cpu 2 --timeout 900s --quiet & stress=$$!; \
		$(CARGO) test --workspace --exclude raceway-core --test root -- --test-threads=$(TEST_THREADS); status=$$?; \
		kill $$stress 2>/dev/null; wait $$stress 2>/dev/null; exit $$status

# The demo's input traffic, written by `raceway gen` (config/demo.toml says what it is).
DEMO_TRACES := out/demo/traces
demo-traces: build
	config/demo-traces.sh $(RACEWAY) $(DEMO_TRACES)

# The demo replayed in virtual time, with charts: out/demo/report/index.html.
report: demo-traces
	$(RACEWAY) replay -c config/demo.toml --out out/demo/replay --report out/demo/report \
		--in host0=$(DEMO_TRACES)/host0.pcap --in host1=$(DEMO_TRACES)/host1.pcap \
		--in up0=$(DEMO_TRACES)/incast/host2.pcap --in up1=$(DEMO_TRACES)/incast/host3.pcap
	@echo "report: out/demo/report/index.html"

# The live demo: raceway and four PFC-honouring hosts (raceway blast --pfc) over net_memif.
run: demo-traces
	config/demo-live.sh $(RACEWAY) out/demo

# A leaf in a real network (root): hosts and FRR spines in namespaces, FRR in raceway's own
# namespace learning an ECMP route by BGP; leaves nothing behind.
lab: build
	examples/lab.sh $(RACEWAY)

# Fuzzing with libFuzzer on stable Rust: the coverage flags cargo-fuzz passes with
# `--sanitizer none` (the fuzzed code has no unsafe), plus debug assertions and overflow
# checks so arithmetic mistakes are findings. An explicit --target keeps the flags off build
# scripts. `make fuzz-smoke` runs each target FUZZ_SECONDS (CI); `make fuzz TARGET=wire
# FUZZ_SECONDS=600` runs one for long.
HOST_TRIPLE = $(shell rustc -vV | sed -n 's/^host: //p')
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
	-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks
FUZZ_TARGETS := wire pipeline config
FUZZ_SECONDS ?= 20
FUZZ_BIN = fuzz/target/$(HOST_TRIPLE)/release

fuzz-build: build
	RUSTFLAGS="$(FUZZ_RUSTFLAGS)" $(CARGO) build --release --manifest-path fuzz/Cargo.toml --target $(HOST_TRIPLE)
	@if [ ! -d fuzz/seeds ]; then python3 fuzz/seed.py $(RACEWAY) fuzz/seeds; fi

fuzz-smoke: fuzz-build
	@for target in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus/$$target fuzz/artifacts/$$target; \
		echo "fuzz $$target for $(FUZZ_SECONDS) s"; \
		$(FUZZ_BIN)/$$target -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=20000 \
			-artifact_prefix=fuzz/artifacts/$$target/ -print_final_stats=1 \
			fuzz/corpus/$$target fuzz/seeds/$$target 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==|SUMMARY|panicked|Done)" ; \
		test $${PIPESTATUS[0]} -eq 0 || { echo "fuzz $$target found a crash: see fuzz/artifacts/$$target"; exit 1; }; \
	done

fuzz: fuzz-build
	@mkdir -p fuzz/corpus/$(TARGET) fuzz/artifacts/$(TARGET)
	$(FUZZ_BIN)/$(TARGET) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=20000 \
		-artifact_prefix=fuzz/artifacts/$(TARGET)/ -print_final_stats=1 fuzz/corpus/$(TARGET) fuzz/seeds/$(TARGET)

# Mutation testing (docs/MUTANTS.md): cargo-mutants changes the traffic-management and
# pipeline code one mutant at a time; a mutant that survives is a test not yet written.
# Too slow for CI (1,364 mutants at 10-20 s each on two cores: hours); run it when these
# modules change. `make mutants MUTANTS_FILES="core/src/tm/ecn.rs"` narrows it.
# Two passes: the unit tests alone (one test binary to rebuild per mutant), then `--iterate`
# runs the unit tests and the four replay suites end to end (seconds each) on only what the
# first pass missed or timed out on, so a mutant only an end-to-end replay notices is caught
# too. Debug info off and mold (when installed) shorten each rebuild: 11 s against 15 s for
# the same mutant here. cargo-mutants exits 2 or 3 when mutants were missed or timed out.
MUTANTS_TESTS := --lib --test tests
MUTANTS_FILES ?= $(wildcard core/src/tm/*.rs core/src/pipeline/*.rs core/src/pipeline/fib/*.rs \
	core/src/switch/*.rs core/src/config/plan.rs)
MUTANTS_ENV := CARGO_PROFILE_DEV_DEBUG=0 $(if $(shell command -v mold),RUSTFLAGS="-C link-arg=-fuse-ld=mold")
MUTANTS_ARGS := --test-package raceway-core --copy-target false $(foreach file,$(MUTANTS_FILES),--file $(file)) -o target/mutants
mutants: deps
	@command -v cargo-mutants >/dev/null || $(CARGO) install --locked cargo-mutants
	$(MUTANTS_ENV) $(CARGO) mutants $(MUTANTS_ARGS) -C --lib --timeout 8 || [ $$? -le 3 ]
	$(MUTANTS_ENV) $(CARGO) mutants $(MUTANTS_ARGS) --iterate $(foreach arg,$(MUTANTS_TESTS),-C $(arg))

bench: deps
	$(CARGO) bench -p raceway-perf

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf out
