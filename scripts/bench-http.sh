#!/usr/bin/env bash
# HTTP produce throughput: a release broker on a temp dir, one topic, wrk
# posting batches of records over keep-alive connections. Prints wrk's
# report and records/s. Needs wrk (Debian: apt-get install wrk).
# Env: SHARDS (2), PARTITIONS (8), BATCH (100 records), VALUE_BYTES (1024),
#      CONNECTIONS (32), THREADS (2), SECS (10).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
SHARDS=${SHARDS:-2} PARTITIONS=${PARTITIONS:-8} BATCH=${BATCH:-100} VALUE_BYTES=${VALUE_BYTES:-1024}
CONNECTIONS=${CONNECTIONS:-32} THREADS=${THREADS:-2} SECS=${SECS:-10}

cargo build --release -q -p es-broker
DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
./target/release/es-broker --data-dir "$DIR/data" --http-addr "127.0.0.1:$PORT" --shards "$SHARDS" 2>"$DIR/broker.log" &
PID=$!
trap 'kill -9 $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 150); do curl -sf "$URL/ready" >/dev/null && break; sleep 0.1; done
curl -sf -X POST "$URL/v1/topics" -d "{\"name\":\"bench\",\"partitions\":$PARTITIONS}" >/dev/null
python3 - "$BATCH" "$VALUE_BYTES" > "$DIR/produce.lua" <<'PY'
import json, sys
batch, size = int(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"records": [{"value": "x" * size} for _ in range(batch)]})
print('wrk.method = "POST"\nwrk.body = [[%s]]\nwrk.headers["Content-Type"] = "application/json"' % body)
PY
echo "es HTTP produce: $SHARDS shards, $PARTITIONS partitions, batches of $BATCH x $VALUE_BYTES B, $CONNECTIONS connections, ${SECS}s"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECS}s" --latency -s "$DIR/produce.lua" "$URL/v1/topics/bench/records" | tee "$DIR/wrk.txt"
RPS=$(awk '/Requests\/sec/ {print $2}' "$DIR/wrk.txt")
python3 -c "print('records/s: %.0f   value MB/s: %.1f' % ($RPS * $BATCH, $RPS * $BATCH * $VALUE_BYTES / 1e6))"
curl -sf "$URL/metrics" | grep -E '^es_fsync_rounds_total|^es_records_appended_total'
