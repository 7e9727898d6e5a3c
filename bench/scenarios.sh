#!/usr/bin/env bash
# `make bench`: the es-bench scenarios of docs/benchmarks.md, each one run
# of es-bench against a release broker it starts on a temporary directory.
# Env: BENCH_SECS (10) seconds measured per phase; BENCH_WARMUP (15) seconds
# of unmeasured load before each produce and disk phase (past the disk's
# write burst: docs/benchmarks.md); BENCH_DIR (system temp dir) picks the
# disk; ES_BENCH_ONLY=N runs scenario N alone (1, 1b, 2-5); ES_BENCH_ARGS adds flags
# to every run (e.g. --json).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
WARMUP=${BENCH_WARMUP:-15}
cargo build --release -q -p es-broker -p es-bench
BENCH=(./target/release/es-bench)
COMMON=(--start-broker --duration "$SECS" --warmup "$WARMUP" ${BENCH_DIR:+--data-dir "$BENCH_DIR"} ${ES_BENCH_ARGS:-})

run() {
    local n=$1 title=$2
    shift 2
    if [[ -n ${ES_BENCH_ONLY:-} && $ES_BENCH_ONLY != "$n" ]]; then return; fi
    echo
    echo "== $n. $title"
    echo "\$ es-bench $*"
    "${BENCH[@]}" "$@" "${COMMON[@]}"
}

run 1 "2 producers, batches of 1000 x 1 KiB, one partition each, vs the disk" \
    produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 1 --compare-disk
run 1b "the same producers pipelined (4 requests in flight each, es-bench's default), vs the same disk" \
    produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 4 --compare-disk
run 2 "50 connections x 16 single-record requests in flight (group commit)" \
    produce --producers 50 --partitions 2 --batch 1 --record-size 1024 --inflight 16 --compare-disk
run 3 "produce p99 at half the maximum rate vs the disk's write+fdatasync p99" \
    produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 1 --rate half --compare-disk
run 4 "consume from the page cache, one connection" \
    consume --partitions 1 --batch 1000 --record-size 1024 --prefill-mb 1024
run 5 "page-cache workload, 8 partitions: 2 shards vs 1" \
    consume --shards 1,2 --partitions 8 --batch 1000 --record-size 1024 --prefill-mb 1024
