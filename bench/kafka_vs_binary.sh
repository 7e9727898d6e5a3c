#!/usr/bin/env bash
# Kafka protocol vs es binary protocol, side by side in one run on one
# release broker (docs/benchmarks.md, "Kafka protocol"): the same load,
# 1 KiB records to one partition, ~1,000 records a request, 5 requests in
# flight, acks after fsync. Binary: es-bench. Kafka: confluent-kafka
# (librdkafka) through bench/kafka_load.py. Produce for BENCH_SECS (10)
# each, then fetch what each wrote from the start.
# Env: ES_CLIENTS_PYTHON (default target/py-clients/bin/python), BENCH_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
PY=${ES_CLIENTS_PYTHON:-target/py-clients/bin/python}
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
k_produce=$("$PY" bench/kafka_load.py produce "$kafka" kbench "$SECS")
b_fetch=$(./target/release/es-bench consume --broker "$bin" --topic bfetch --partitions 1 \
    --record-size 1024 --prefill-mb 500 --fetch-bytes 1048576 --duration "$SECS" --json)
k_fetch=$("$PY" bench/kafka_load.py consume "$kafka" kbench)

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
