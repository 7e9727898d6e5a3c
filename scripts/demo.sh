#!/usr/bin/env bash
# End-to-end demo: build, start a broker on a temp dir, create a topic,
# produce and consume over HTTP, restart the broker, show the data is still
# there. Ends by printing DEMO OK (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -q -p es-broker
BROKER=./target/release/es-broker
DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
PID=
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

start() {
  "$BROKER" --data-dir "$DIR/data" --http-addr "127.0.0.1:$PORT" --shards 2 2>>"$DIR/broker.log" &
  PID=$!
  for _ in $(seq 1 150); do
    curl -sf "$URL/ready" >/dev/null && return 0
    sleep 0.1
  done
  echo "broker did not become ready"; cat "$DIR/broker.log"; exit 1
}
say() { printf '\n$ %s\n' "$*"; }

start
say "create topic demo with 3 partitions"
curl -sf -X POST "$URL/v1/topics" -d '{"name":"demo","partitions":3}'; echo
say "produce three records (two keyed, one to partition 2)"
curl -sf -X POST "$URL/v1/topics/demo/records" \
  -d '{"records":[{"key":"user-42","value":"signed up"},{"key":"user-42","value":"paid"},{"value":"hello","partition":2}]}'; echo
P=$(python3 -c 'h=0xcbf29ce484222325
for b in b"user-42": h=((h^b)*0x100000001b3)%2**64
print(h%3)')
say "consume partition $P (where key user-42 lives)"
BEFORE=$(curl -sf "$URL/v1/topics/demo/partitions/$P/records?offset=0")
echo "$BEFORE"
say "restart the broker (SIGTERM, then start again)"
kill -TERM "$PID"; wait "$PID"; PID=
start
AFTER=$(curl -sf "$URL/v1/topics/demo/partitions/$P/records?offset=0")
echo "$AFTER"
[ "$BEFORE" = "$AFTER" ] || { echo "records changed across restart"; exit 1; }
echo "$AFTER" | grep -q '"value":"paid"' || { echo "record missing"; exit 1; }
kill -TERM "$PID"; wait "$PID"; PID=
echo
echo "DEMO OK"
