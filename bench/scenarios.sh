#!/usr/bin/env bash
# `make bench`: the es-bench scenarios of docs/benchmarks.md, each one run
# of es-bench against a release broker it starts on a temporary directory.
# Env: BENCH_SECS (10) seconds measured per phase; BENCH_WARMUP (15) seconds
# of unmeasured load before each produce and disk phase (past the disk's
# write burst: docs/benchmarks.md); BENCH_DIR (system temp dir) picks the
# disk; ES_BENCH_ONLY=N runs scenario N alone (1, 1b, 2-5); ES_BENCH_ARGS adds flags
# to every run (e.g. --json). After each scenario: the kernel's TCP
# retransmit counters over it (system-wide, from /proc/net): on loopback a
# spurious retransmit holds a request for milliseconds (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
WARMUP=${BENCH_WARMUP:-15}
ROUNDS=${BENCH_ROUNDS:-5}
cargo build --release -q -p es-broker -p es-bench
BENCH=(./target/release/es-bench)
COMMON=(--start-broker --duration "$SECS" --warmup "$WARMUP" ${BENCH_DIR:+--data-dir "$BENCH_DIR"} ${ES_BENCH_ARGS:-})

# "retransmitted segments, fast retransmits, loss probes" so far.
tcp_counters() {
    awk '$1 == "Tcp:" && !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
         $1 == "Tcp:" { r = $c["RetransSegs"] }
         END { printf "%s ", r + 0 }' /proc/net/snmp 2>/dev/null || printf "0 "
    awk '$1 == "TcpExt:" && !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
         $1 == "TcpExt:" { printf "%s %s", $c["TCPFastRetrans"] + 0, $c["TCPLossProbes"] + 0 }' \
        /proc/net/netstat 2>/dev/null || printf "0 0"
}

run() {
    local n=$1 title=$2
    shift 2
    if [[ -n ${ES_BENCH_ONLY:-} && $ES_BENCH_ONLY != "$n" ]]; then return; fi
    echo
    echo "== $n. $title"
    echo "\$ es-bench $*"
    local before after
    before=($(tcp_counters))
    "${BENCH[@]}" "$@" "${COMMON[@]}"
    after=($(tcp_counters))
    echo "tcp during this scenario: $((after[0] - before[0])) segments retransmitted," \
        "$((after[1] - before[1])) fast retransmits, $((after[2] - before[2])) loss probes"
}

run 1 "2 producers, batches of 1000 x 1 KiB, one partition each, vs the disk" \
    produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 1 --compare-disk --rounds "$ROUNDS"
run 1b "the same producers pipelined (4 requests in flight each, es-bench's default), vs the same disk" \
    produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 4 --compare-disk --rounds "$ROUNDS"
run 2 "50 connections x 16 single-record requests in flight (group commit)" \
    produce --producers 50 --partitions 2 --batch 1 --record-size 1024 --inflight 16 --compare-disk --rounds "$ROUNDS"
run 3 "produce p99 at half the maximum rate vs the disk's write+fdatasync p99" \
    produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 1 --rate half --compare-disk --rounds "$ROUNDS"
run 4 "consume from the page cache, one connection" \
    consume --partitions 1 --batch 1000 --record-size 1024 --prefill-mb 1024
run 5 "page-cache workload, 8 partitions: 2 shards vs 1" \
    consume --shards 1,2 --partitions 8 --batch 1000 --record-size 1024 --prefill-mb 1024
