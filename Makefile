# es — build, run, test, lint. CI (.ci/run) runs `make lint`, `make test-loaded`, the demo and
# `make jepsen`; docs/testing.md says what each runs and what it costs.
CARGO ?= cargo
DATA_DIR ?= ./data
HTTP_ADDR ?= 127.0.0.1:8080

BINARY_ADDR ?= 127.0.0.1:9090
REGISTRY_ADDR ?= 127.0.0.1:8081
KAFKA_ADDR ?= 127.0.0.1:9092

.PHONY: build run-broker demo test test-loaded soak stress-start lint fmt audit bench bench-storage fuzz jepsen jepsen-cluster jepsen-soak

# Every binary (es-broker, es, es-tools, es-bench) in release, with one feature set:
# run-broker, the demo and the CLI all use this one build.
build:
	@echo "building es-broker, es, es-tools and es-bench (release; the first build fetches crates and takes several minutes)"
	$(CARGO) build --workspace --release

# Start a broker on ./data: HTTP API on 127.0.0.1:8080, binary protocol (the
# es CLI) on 127.0.0.1:9090, schema registry on 127.0.0.1:8081, Kafka's
# protocol on 127.0.0.1:9092. Ctrl-C stops it cleanly.
run-broker: build
	./target/release/es-broker --data-dir $(DATA_DIR) --http-addr $(HTTP_ADDR) --binary-addr $(BINARY_ADDR) --registry-addr $(REGISTRY_ADDR) --kafka-addr $(KAFKA_ADDR)

# End-to-end run: broker on a temp dir, topic, produce, consume, restart; ends with DEMO OK.
demo:
	./scripts/demo.sh

# Every test, all of them even when one fails, then one summary.
test:
	./scripts/test.sh $(ARGS)

# The tests with every core kept busy (what CI runs): a test that depends on
# the machine's speed fails here.
test-loaded:
	$(CARGO) test --workspace --no-run
	./scripts/loaded.sh ./scripts/test.sh $(ARGS)

# The soak at its full length (bench/tests/soak.rs: every es-bench soak
# workload, 10,000 + 20,000 operations, 50 bytes per operation at most);
# `make test` runs it shorter (docs/testing.md).
soak:
	$(CARGO) test --workspace --no-run
	ES_SOAK_FULL=1 $(CARGO) test -p es-bench --test soak

# Start-up stress: 300 starts with --shards 8 and 1000 with the default
# shards, each ready, serving and stopped by SIGTERM (scripts/start_stress.py).
stress-start:
	$(CARGO) test --workspace --no-run
	./scripts/start_stress.py --starts 300 --shards 8
	./scripts/start_stress.py --starts 1000 --shards $$(nproc)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# Decoder fuzzing: the protocol's and the batch format's proptest properties
# with a million cases each.
fuzz:
	PROPTEST_CASES=$${PROPTEST_CASES:-1000000} $(CARGO) test -p es-format -p es-protocol --release

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
# 1, 16 and 256 concurrent appenders (docs/benchmarks.md). BENCH_DIR picks the disk.
bench-storage:
	$(CARGO) bench -p es-storage --bench durable_append

# The fault suite (docs/reliability.md): one debug broker under kill -9,
# clean restarts, pause, torn tails and a full disk (as root), a recorded workload, then
# the history checker; fixed seeds, each JEPSEN_TIME of faults, JEPSEN_JOBS
# seeds at once (each its own broker). A failing seed prints the command
# that reruns it. JEPSEN_BUILD makes the binaries: CI passes the test
# build's command, which finds them up to date after `make test-loaded`
# (`cargo build -p es-broker -p es-chaos` alone resolves other features
# than the workspace's tests and rebuilds much of es-broker: docs/testing.md).
JEPSEN_SEEDS ?= 1 2
JEPSEN_TIME ?= 60s
JEPSEN_NEMESIS ?= all
JEPSEN_JOBS ?= 2
JEPSEN_BUILD ?= $(CARGO) build -p es-broker -p es-chaos
# Then JEPSEN_CLUSTER_CI_SEED on a cluster of three (JEPSEN_CLUSTER_CI_TIME of
# the process, network and disk-full faults of "Cluster runs"; disk-full
# needs root, as in the single-node runs).
JEPSEN_CLUSTER_CI_SEED ?= 3
JEPSEN_CLUSTER_CI_TIME ?= 75s
JEPSEN_CLUSTER_CI_NEMESIS ?= kill,pause,partition,bridge,one-way,isolate-leader,leader-kill,delay,disk-full
jepsen:
	$(JEPSEN_BUILD)
	CHAOS_JOBS=$(JEPSEN_JOBS) ./bench/chaos/seeds.sh "$(JEPSEN_SEEDS)" $(JEPSEN_TIME) 8-12 $(JEPSEN_NEMESIS) jepsen; a=$$?; \
	CHAOS_NODES=3 ./bench/chaos/seeds.sh "$(JEPSEN_CLUSTER_CI_SEED)" $(JEPSEN_CLUSTER_CI_TIME) 8-12 $(JEPSEN_CLUSTER_CI_NEMESIS) jepsen-cluster; b=$$?; \
	exit $$(( a > b ? a : b ))

# The fault suite on a cluster of three debug brokers, every peer link through
# the harness's proxy (docs/reliability.md "Cluster runs"): each seed of
# JEPSEN_CLUSTER_SEEDS, JEPSEN_CLUSTER_TIME of JEPSEN_CLUSTER_NEMESIS (all:
# the cluster faults and the single-node ones). Not in CI: longer than CI's
# one cluster seed (JEPSEN_CLUSTER_CI_SEED above).
JEPSEN_CLUSTER_SEEDS ?= 21 22
JEPSEN_CLUSTER_TIME ?= 120s
JEPSEN_CLUSTER_NEMESIS ?= all
jepsen-cluster:
	$(JEPSEN_BUILD)
	CHAOS_NODES=3 CHAOS_JOBS=1 ./bench/chaos/seeds.sh "$(JEPSEN_CLUSTER_SEEDS)" $(JEPSEN_CLUSTER_TIME) 8-12 $(JEPSEN_CLUSTER_NEMESIS) jepsen-cluster

# The same for SOAK_MIN minutes per seed of SOAK_SEEDS on SOAK_NODES brokers
# (3: a cluster, every fault, the single-node ones included), a fault every
# 3-6 s, SOAK_JOBS seeds at once, then SOAK_WIDE_SEED on one broker with
# 1,000 partitions (500 per topic).
SOAK_MIN ?= 30
SOAK_SEEDS ?= 11 12 13
SOAK_NODES ?= 3
SOAK_JOBS ?= 1
SOAK_WIDE_SEED ?= 14
jepsen-soak:
	$(JEPSEN_BUILD)
	CHAOS_NODES=$(SOAK_NODES) CHAOS_JOBS=$(SOAK_JOBS) ./bench/chaos/seeds.sh "$(SOAK_SEEDS)" $(SOAK_MIN)m 3-6 $(JEPSEN_NEMESIS) soak; a=$$?; \
	CHAOS_ARGS="--partitions 500" ./bench/chaos/seeds.sh "$(SOAK_WIDE_SEED)" $(SOAK_MIN)m 3-6 $(JEPSEN_NEMESIS) soak-wide; b=$$?; \
	exit $$(( a > b ? a : b ))
