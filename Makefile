# es — build, test, lint, bench. `make test` is what CI runs (.ci/run).
CARGO ?= cargo

.PHONY: build test lint fmt bench-storage

build:
	$(CARGO) build --workspace --release

test:
	$(CARGO) test --workspace

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# Storage engine benchmark: raw append+fdatasync vs durable appends with
# 1, 16 and 256 concurrent appenders (docs/storage.md). BENCH_DIR picks the disk.
bench-storage:
	$(CARGO) bench -p es-storage --bench durable_append
