#!/usr/bin/env bash
# Kafka protocol vs es binary protocol, side by side in one run on one
# release broker (docs/benchmarks.md, "Kafka protocol"): the same load,
# 1 KiB records to one partition, ~1,000 records a request, 5 requests in
# flight, acks after fsync. Binary: es-bench. Kafka: kcat (librdkafka, C,
# rdkafka_performance-style: records from a file, nothing per record in an
# interpreter). Binary produces for BENCH_SECS (10); Kafka produces
# BENCH_RECORDS (500,000) records; each then fetches what it wrote.
# bench/kafka_load.py is the same load through confluent-kafka's Python
# API (client-bound: Python's per-record cost), for reference.
# Env: BENCH_DIR picks the disk.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
RECORDS=${BENCH_RECORDS:-500000}
cargo build --release -q -p es-broker -p es-bench
dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-kafka-bench.XXXXXX")
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=127.0.0.1:$(port); bin=127.0.0.1:$(port); kafka=127.0.0.1:$(port)
./target/release/es-broker --data-dir "$dir/data" --http-addr "$http" --binary-addr "$bin" \
    --kafka-addr "$kafka" > "$dir/broker.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "http://$http/ready" >/dev/null && break; sleep 0.1; done
curl -sf -XPOST "http://$http/v1/topics" -d '{"name":"kbench","partitions":1}' >/dev/null

b_produce=$(./target/release/es-bench produce --broker "$bin" --topic bbench --partitions 1 \
    --producers 1 --record-size 1024 --batch 1000 --inflight 5 --duration "$SECS" --json)
b_fetch=$(./target/release/es-bench consume --broker "$bin" --topic bfetch --partitions 1 \
    --record-size 1024 --prefill-mb 500 --fetch-bytes 1048576 --duration "$SECS" --json)
python3 -c "import sys; sys.stdout.buffer.write((b'x' * 1023 + b'\\n') * $RECORDS)" > "$dir/records"
timed() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
k_produce_s=$(timed kcat -b "$kafka" -P -t kbench -p 0 -X acks=all -X linger.ms=2 -X batch.size=1048576 \
    -X batch.num.messages=1000 -X max.in.flight=5 -X queue.buffering.max.kbytes=1048576 -l "$dir/records")
k_fetch_s=$(timed kcat -b "$kafka" -C -t kbench -p 0 -o beginning -e -q -X fetch.max.bytes=16777216 \
    -X max.partition.fetch.bytes=1048576 -f '%o\n')
mb=$(echo "$RECORDS * 1024 / 1000000" | bc -l)
k_produce="{\"mb_s\": $(echo "$mb / $k_produce_s" | bc -l)}"
k_fetch="{\"mb_s\": $(echo "$mb / $k_fetch_s" | bc -l)}"

python3 - "$b_produce" "$k_produce" "$b_fetch" "$k_fetch" <<'PY'
import json, sys
def mbs(v):
    d = json.loads(v)
    return float(d["phases"][0]["mb_per_s"]) if "phases" in d else float(d["mb_s"])
bp, kp, bf, kf = (mbs(v) for v in sys.argv[1:5])
print(f"{'':10} {'binary MB/s':>12} {'kafka MB/s':>12} {'kafka/binary':>13}")
print(f"{'produce':10} {bp:12.1f} {kp:12.1f} {kp / bp:12.0%}")
print(f"{'fetch':10} {bf:12.1f} {kf:12.1f} {kf / bf:12.0%}")
PY
