#!/usr/bin/env bash
# Start-up time after kill -9 with much written since the last start
# (docs/benchmarks.md, "Start-up after kill -9"). For each run: a fresh
# broker on a temporary directory, a topic of PARTITIONS partitions with
# SEGMENT_BYTES segments, 20,000 records from an idempotent producer
# (`es produce`, so partitions hold producer state), then SECS seconds of
# `es-bench produce` at RATE records/s of 1 KiB; kill -9; and the time from
# the restart to `GET /ready` answering 200, with what the start read:
# batches to rebuild producer state
# (es_recovery_producer_batches_scanned_total) and segments recovery
# scanned (es_recovery_segments_scanned_total).
# Env: BROKER (an es-broker binary; default: build target/release), RUNS
# (3), SECS (20), RATE (100000), PARTITIONS (2), SEGMENT_BYTES (67108864),
# SHARDS (2), BENCH_DIR (system temp dir), HTTP_PORT (18085), BINARY_PORT
# (19095), KEEP_LOG (1: keep each run's broker log, with the time of each
# partition's recovery and producer state rebuild).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BROKER:-}" ]; then
    cargo build --release -q -p es-broker -p es-bench -p es-cli
    BROKER=./target/release/es-broker
fi
RUNS=${RUNS:-3}
SECS=${SECS:-20}
RATE=${RATE:-100000}
PARTITIONS=${PARTITIONS:-2}
SEGMENT_BYTES=${SEGMENT_BYTES:-67108864}
SHARDS=${SHARDS:-2}
HTTP=127.0.0.1:${HTTP_PORT:-18085}
BIN=127.0.0.1:${BINARY_PORT:-19095}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
metric() { curl -sf "http://$HTTP/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
start() {
    "$BROKER" --data-dir "$1" --http-addr "$HTTP" --binary-addr "$BIN" --registry-addr disabled --kafka-addr disabled --shards "$SHARDS" >> "$1.log" 2>&1 &
    broker=$!
    until curl -sf "http://$HTTP/ready" > /dev/null; do
        kill -0 "$broker" 2> /dev/null || { echo "broker exited; its log: $1.log" >&2; exit 1; }
        sleep 0.01
    done
}

for run in $(seq 1 "$RUNS"); do
    dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-startup-XXXXXX")
    start "$dir"
    curl -sf -XPOST "http://$HTTP/v1/topics" -H 'content-type: application/json' \
        -d "{\"name\":\"bench\",\"partitions\":$PARTITIONS,\"config\":{\"segment_bytes\":$SEGMENT_BYTES}}" > /dev/null
    seq 1 20000 | ./target/release/es --broker "$BIN" produce bench > /dev/null 2>&1
    ./target/release/es-bench produce --broker "$BIN" --topic bench --partitions "$PARTITIONS" \
        --producers 2 --batch 1000 --record-size 1024 --rate "$RATE" --duration "$SECS" \
        --warmup 0 --quiet > /dev/null 2>&1
    written=$(du -sm "$dir/topics/bench" | cut -f1)
    segments=$(find "$dir/topics/bench" -name '*.log' | wc -l)
    kill -9 "$broker"
    wait "$broker" 2> /dev/null || true
    t0=$(now_ms)
    start "$dir"
    t1=$(now_ms)
    echo "run $run: $written MiB in $segments segments since the start; ready $((t1 - t0)) ms after kill -9;" \
        "producer batches read $(metric es_recovery_producer_batches_scanned_total)," \
        "segments scanned $(metric es_recovery_segments_scanned_total)"
    kill "$broker"
    wait "$broker" 2> /dev/null || true
    rm -rf "$dir"
    if [ "${KEEP_LOG:-0}" = 1 ]; then echo "  log: $dir.log"; else rm -f "$dir.log"; fi
done
