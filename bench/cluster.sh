#!/usr/bin/env bash
# Replicated produce side by side with standalone, in one run
# (shared/specs/raft.md §8.2, issue 23: P1-P4 and P6). Starts 3 es-broker
# processes on loopback (--shards 1 each, plaintext Raft), runs es-bench's
# block 1 (2 producers x 1000 x 1 KiB, 1 in flight) and block 2 (50
# connections x 16 single-record requests) against an rf 3 topic and an rf 1
# topic, the same blocks against a standalone broker es-bench starts (with
# the disk's append+fdatasync baseline, --compare-disk), then kills -9 the
# leader of an rf 3 partition mid-produce and measures how long produce was
# unavailable. Prints every figure and the ratios to the targets.
#
# Env: BENCH_SECS (10) seconds measured per phase; BENCH_WARMUP (5);
# BENCH_DIR (system temp dir) picks the disk; CLUSTER_PORT_BASE (19000):
# node i listens on base+10+i (HTTP), base+20+i (binary), base+30+i (Raft);
# ES_BIN_DIR: take es-broker, es and es-bench from there instead of building
# them (cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
WARMUP=${BENCH_WARMUP:-5}
BASE=${CLUSTER_PORT_BASE:-19000}
if [[ -z ${ES_BIN_DIR:-} ]]; then
    cargo build --release -q -p es-broker -p es-bench -p es-cli
    ES_BIN_DIR=./target/release
fi
BROKER=$ES_BIN_DIR/es-broker
BENCH=$ES_BIN_DIR/es-bench
ES=$ES_BIN_DIR/es
for tool in jq curl; do
    command -v "$tool" >/dev/null || { echo "cluster.sh needs $tool" >&2; exit 1; }
done
for flag in --node-id --raft-addr --peers --raft-insecure; do
    if ! "$BROKER" --help | grep -q -- "$flag"; then
        echo "cluster.sh: $BROKER has no $flag: it was built without cluster mode (issue 23)" >&2
        exit 1
    fi
done

WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-cluster-bench.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

http() { echo "127.0.0.1:$((BASE + 10 + $1))"; }
binary() { echo "127.0.0.1:$((BASE + 20 + $1))"; }
raft() { echo "127.0.0.1:$((BASE + 30 + $1))"; }
PEERS="1=$(raft 1),2=$(raft 2),3=$(raft 3)"
BROKERS="$(binary 1),$(binary 2),$(binary 3)"
declare -A PID_OF

start_node() {
    local i=$1
    mkdir -p "$WORK/n$i"
    "$BROKER" --data-dir "$WORK/n$i" --shards 1 --node-id "$i" \
        --http-addr "$(http "$i")" --binary-addr "$(binary "$i")" \
        --raft-addr "$(raft "$i")" --peers "$PEERS" --raft-insecure \
        --kafka-addr disabled --registry-addr disabled \
        >"$WORK/n$i.log" 2>&1 &
    PID_OF[$i]=$!
    PIDS+=($!)
}

wait_ready() {
    local i=$1 tries=0
    until curl -sf "http://$(http "$i")/ready" >/dev/null; do
        tries=$((tries + 1))
        if ((tries > 600)); then
            echo "node $i not ready after 60 s; its log:" >&2
            tail -20 "$WORK/n$i.log" >&2
            exit 1
        fi
        sleep 0.1
    done
}

for i in 1 2 3; do start_node "$i"; done
for i in 1 2 3; do wait_ready "$i"; done
echo "== cluster up: $BROKERS"
"$ES" --broker "$BROKERS" cluster status

COMMON=(--duration "$SECS" --warmup "$WARMUP" --json)
BLOCK1=(produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 1)
BLOCK2=(produce --producers 50 --partitions 2 --batch 1 --record-size 1024 --inflight 16)

# es-bench ARGS... > FILE, echoing the command.
bench() {
    local out=$1
    shift
    echo "\$ es-bench $*" >&2
    "$BENCH" "$@" "${COMMON[@]}" >"$out"
}

bench "$WORK/alone1.json" "${BLOCK1[@]}" --start-broker --shards 1 --compare-disk ${BENCH_DIR:+--data-dir "$BENCH_DIR"}
bench "$WORK/alone1h.json" "${BLOCK1[@]}" --start-broker --shards 1 --rate half ${BENCH_DIR:+--data-dir "$BENCH_DIR"}
bench "$WORK/alone2.json" "${BLOCK2[@]}" --start-broker --shards 1 ${BENCH_DIR:+--data-dir "$BENCH_DIR"}
bench "$WORK/rf3b1.json" "${BLOCK1[@]}" --broker "$BROKERS" --topic bench-rf3 --replication-factor 3
bench "$WORK/rf3b1h.json" "${BLOCK1[@]}" --broker "$BROKERS" --topic bench-rf3 --replication-factor 3 --rate half
bench "$WORK/rf3b2.json" "${BLOCK2[@]}" --broker "$BROKERS" --topic bench-rf3-b2 --replication-factor 3
bench "$WORK/rf1b1.json" "${BLOCK1[@]}" --broker "$BROKERS" --topic bench-rf1 --replication-factor 1

# FIELD of phase NAME in FILE.
fig() { jq -r --arg n "$2" ".phases[] | select(.name == \$n) | $3" "$1"; }
ratio() { jq -rn --argjson a "$1" --argjson b "$2" 'if $b == 0 then "-" else ($a / $b * 100 | round / 100 | tostring) end'; }

a1=$(fig "$WORK/alone1.json" produce .mb_per_s)
disk=$(fig "$WORK/alone1.json" disk .mb_per_s)
a1p50=$(fig "$WORK/alone1h.json" "produce half-rate" .latency_us.p50)
a1p99=$(fig "$WORK/alone1h.json" "produce half-rate" .latency_us.p99)
a2=$(fig "$WORK/alone2.json" produce .records_per_s)
r3=$(fig "$WORK/rf3b1.json" produce .mb_per_s)
r3p50=$(fig "$WORK/rf3b1h.json" "produce half-rate" .latency_us.p50)
r3p99=$(fig "$WORK/rf3b1h.json" "produce half-rate" .latency_us.p99)
r3b2=$(fig "$WORK/rf3b2.json" produce .records_per_s)
r1=$(fig "$WORK/rf1b1.json" produce .mb_per_s)
r1p50=$(fig "$WORK/rf1b1.json" produce .latency_us.p50)
a1p50full=$(fig "$WORK/alone1.json" produce .latency_us.p50)

# P6: one record every 20 ms to partition 0 of an rf 3 topic; kill -9 its
# leader; the longest gap between two acknowledged records is the time
# produce was unavailable (as es sees it: redirects and leader waits
# included).
"$ES" --broker "$BROKERS" topic create failover --partitions 1 --replication-factor 3 >/dev/null
# A topic just created elects its leader within a few election timeouts.
leader=null
for _ in $(seq 600); do
    leader=$(curl -sf "http://$(http 1)/v1/topics/failover" | jq -r '.partitions[0].leader')
    [[ $leader =~ ^[0-9]+$ ]] && break
    sleep 0.1
done
[[ $leader =~ ^[0-9]+$ ]] || { echo "failover/0 has no leader after 60 s" >&2; exit 1; }
acks="$WORK/failover.acks"
(
    end=$((SECONDS + 20))
    while ((SECONDS < end)); do
        if echo x | "$ES" --broker "$BROKERS" produce failover --partition 0 >/dev/null 2>&1; then
            date +%s%N >>"$acks"
        fi
        sleep 0.02
    done
) &
writer=$!
sleep 5
kill -9 "${PID_OF[$leader]}"
echo "== killed node $leader (the leader of failover/0) mid-produce" >&2
wait "$writer"
gap_ms=$(awk 'NR > 1 { g = ($1 - p) / 1e6; if (g > m) m = g } { p = $1 } END { printf "%.0f", m }' "$acks")

cat <<EOF

== Replicated produce vs standalone (3 brokers on loopback, --shards 1 each; same run)
disk append+fdatasync:       $disk MB/s
standalone block 1:          $a1 MB/s (p50 ${a1p50full} us); half rate p50 $a1p50 us, p99 $a1p99 us
standalone block 2:          $a2 acks/s
P1 rf 3 block 1:             $r3 MB/s = $(ratio "$r3" "$a1")x standalone (target >= 0.25x; ideal 0.33x)
P2 rf 3 half rate:           p50 $r3p50 us = $(ratio "$r3p50" "$a1p50")x, p99 $r3p99 us = $(ratio "$r3p99" "$a1p99")x (targets <= 3x, <= 4x)
P3 rf 3 block 2:             $r3b2 acks/s = $(ratio "$r3b2" "$a2")x (target >= 0.2x)
P4 rf 1 in cluster, block 1: $r1 MB/s = $(ratio "$r1" "$a1")x, p50 $r1p50 us (targets >= 0.9x, p50 <= standalone + 300 us)
P6 failover:                 produce unavailable for $gap_ms ms after kill -9 of the leader (target <= election timeout max + 1 s)
EOF
