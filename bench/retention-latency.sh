#!/usr/bin/env bash
# Produce latency while retention deletes segments
# (docs/design/stepwise-reclaim.md): for each topic config, a fresh
# release broker on a temporary directory with cleanup every second, 2
# producers paced at RATE records/s (1 MiB requests, one in flight), and the client's
# p50/p99/p999/max plus the kernel's TCP retransmit counters for the run,
# and how many of the broker's produce handlers, appends and fsyncs took
# over 50 ms (its histograms, warm-up included): a client stall with none
# of these slow happened outside the broker's handler.
# Env: RUNS (3), RATE (400000), SECS (10), WARMUP (8), BENCH_DIR (system
# temp dir), HTTP_PORT (18084), BINARY_PORT (19094).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p es-broker -p es-bench
RUNS=${RUNS:-3}
RATE=${RATE:-400000}
SECS=${SECS:-10}
WARMUP=${WARMUP:-8}
HTTP=127.0.0.1:${HTTP_PORT:-18084}
BIN=127.0.0.1:${BINARY_PORT:-19094}
declare -A CONFIGS=(
    [none]='{"segment_bytes":67108864}'
    [retention]='{"segment_bytes":67108864,"retention_bytes":536870912}'
)
for run in $(seq 1 "$RUNS"); do
    for name in none retention; do
        dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-retention-XXXXXX")
        ./target/release/es-broker --data-dir "$dir" --http-addr "$HTTP" --binary-addr "$BIN" --registry-addr disabled --kafka-addr disabled \
            --shards 2 --cleanup-interval-ms 1000 > "$dir.log" 2>&1 &
        broker=$!
        for _ in $(seq 1 100); do
            curl -sf "http://$HTTP/ready" > /dev/null && break
            sleep 0.1
        done
        curl -sf -XPOST "http://$HTTP/v1/topics" -H 'content-type: application/json' \
            -d "{\"name\":\"bench\",\"partitions\":2,\"config\":${CONFIGS[$name]}}" > /dev/null
        before=$(nstat -az 2>/dev/null | awk '/TcpRetransSegs|TcpExtTCPLossProbes /{printf "%s ", $2}' || true)
        result=$(./target/release/es-bench produce --broker "$BIN" --producers 2 --partitions 2 \
            --batch 1000 --record-size 1024 --inflight 1 --rate "$RATE" --duration "$SECS" \
            --warmup "$WARMUP" --quiet 2>&1 | tail -1 | awk '{print "p50", $6, "p99", $7, "p999", $8, "max", $9}')
        after=$(nstat -az 2>/dev/null | awk '/TcpRetransSegs|TcpExtTCPLossProbes /{printf "%s ", $2}' || true)
        slow=$(curl -sf "http://$HTTP/metrics" | awk '
            /^es_binary_request_duration_seconds_(bucket|count)\{endpoint="produce_batch"/ ||
            /^es_(append|fsync)_duration_seconds_(bucket|count)/ {
                name = $1; sub(/_(bucket|count).*/, "", name); sub(/^es_/, "", name)
                sub(/_duration_seconds$/, "", name); sub(/^binary_request$/, "produce", name)
                if ($1 ~ /_count/) total[name] += $2
                else if ($1 ~ /le="0.05"/) fast[name] += $2
            }
            END { for (n in total) printf "%s %d ", n, total[n] - fast[n] }')
        echo "run $run $name: $result ms | retrans, loss probes before: $before after: $after | over 50 ms: $slow"
        kill "$broker"
        wait "$broker" || true
        rm -rf "$dir" "$dir.log"
    done
done
