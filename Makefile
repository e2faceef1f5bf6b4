# raceway: `make run` (demo) and `make test` (the suite) on a fresh Debian/Ubuntu machine.
# Both install what is missing first; as a user they call sudo for apt only.

SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CARGO ?= cargo
APT_PACKAGES := build-essential pkg-config libdpdk-dev dpdk dpdk-dev clang libclang-dev libpcap-dev tshark
RACEWAY := target/release/raceway

.PHONY: all deps build test run report demo-traces bench fmt clean

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

build: deps
	$(CARGO) build --release -p raceway

# Unit tests, replay end-to-end tests, the live DPDK test on vdevs, and every criterion bench
# run once in test mode (so benches cannot rot).
test: deps
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	$(CARGO) clippy --workspace --all-targets --quiet -- -D clippy::undocumented_unsafe_blocks

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

run: demo-traces
	@mkdir -p out/demo
	$(RACEWAY) run -c config/demo.toml --duration 3 --stats-interval 1 --stats-json out/demo/stats.json
	@echo "--- demo summary: per-port counters in out/demo/stats.json; transmitted frames:"
	@for file in out/demo/*.pcap; do printf '%-28s %s frames\n' "$$file" "$$(tshark -r $$file 2>/dev/null | wc -l)"; done

bench: deps
	$(CARGO) bench -p raceway-perf

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf out
