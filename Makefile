# es — build, run, test, lint. `make test` is what CI runs (.ci/run).
CARGO ?= cargo
DATA_DIR ?= ./data
HTTP_ADDR ?= 127.0.0.1:8080

.PHONY: build run-broker demo test lint fmt audit bench bench-storage fuzz

build:
	$(CARGO) build --workspace --release

# Start a broker on ./data (HTTP on 127.0.0.1:8080). Ctrl-C stops it cleanly.
run-broker:
	$(CARGO) build --release -p es-broker
	./target/release/es-broker --data-dir $(DATA_DIR) --http-addr $(HTTP_ADDR)

# End-to-end run: broker on a temp dir, topic, produce, consume, restart; ends with DEMO OK.
demo:
	./scripts/demo.sh

test:
	$(CARGO) test --workspace

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# Decoder fuzzing: the protocol's proptest properties with a million cases each.
fuzz:
	PROPTEST_CASES=$${PROPTEST_CASES:-1000000} $(CARGO) test -p es-protocol --release

# Licenses and banned crates (deny.toml), offline: no advisory database fetch.
# Needs cargo-deny: `cargo install cargo-deny --locked`.
audit:
	@command -v cargo-deny >/dev/null || { echo "cargo-deny is not installed: cargo install cargo-deny --locked"; exit 1; }
	$(CARGO) deny --offline check licenses bans

# The storage benchmark, then the es-bench scenarios against a release broker
# (docs/benchmarks.md). BENCH_SECS: seconds per phase; BENCH_DIR picks the disk.
bench: bench-storage
	./bench/scenarios.sh

# Storage engine benchmark: raw append+fdatasync vs durable appends with
# 1, 16 and 256 concurrent appenders (docs/storage.md). BENCH_DIR picks the disk.
bench-storage:
	$(CARGO) bench -p es-storage --bench durable_append
