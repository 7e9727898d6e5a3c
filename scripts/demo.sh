#!/usr/bin/env bash
# End-to-end demo: build, start a broker on a temp dir, create a topic,
# produce and consume through the es CLI, restart the broker, show the data
# is still there. Ends by printing DEMO OK (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."

# The binaries come from the build the other make targets use, so nothing
# is built twice: release is `make build`'s; DEMO_PROFILE=debug is the one
# `make test` made (CI), which `cargo test --no-run` finds up to date.
PROFILE=${DEMO_PROFILE:-release}
if [ "$PROFILE" = release ]; then
  echo "demo: cargo build --workspace --release (es-broker, es)"
  cargo build --workspace --release
else
  echo "demo: cargo test --workspace --no-run (the debug es-broker and es the tests use)"
  cargo test --workspace --no-run
fi
TARGET=${CARGO_TARGET_DIR:-./target}
BROKER=$TARGET/$PROFILE/es-broker
ES=$TARGET/$PROFILE/es
DIR=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port)
BINARY_PORT=$(free_port)
REGISTRY_PORT=$(free_port)
KAFKA_PORT=$(free_port)
export ES_BROKER="127.0.0.1:$BINARY_PORT"
PID=
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

start() {
  "$BROKER" --data-dir "$DIR/data" --http-addr "127.0.0.1:$HTTP_PORT" \
    --binary-addr "$ES_BROKER" --registry-addr "127.0.0.1:$REGISTRY_PORT" \
    --kafka-addr "127.0.0.1:$KAFKA_PORT" --shards 2 2>>"$DIR/broker.log" &
  PID=$!
  # Wait as long as the broker runs: a slow machine is not a failure. The
  # broker gives up on its own when it cannot start (and exits).
  until ready "http://127.0.0.1:$HTTP_PORT/ready"; do
    if ! kill -0 "$PID" 2>/dev/null; then
      echo "broker exited before it was ready:"; cat "$DIR/broker.log"; exit 1
    fi
    sleep 0.1
  done
}
# python3 rather than curl: a fresh machine has python3.
ready() { python3 -c 'import sys, urllib.request; sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=1).status == 200 else 1)' "$1" 2>/dev/null; }
say() { printf '\n$ %s\n' "$*"; }

start
say "es topic create demo --partitions 3"
"$ES" topic create demo --partitions 3

say "printf 'user-42:signed up\nuser-42:paid\nuser-1:hello\n' | es produce demo --key-separator :"
printf 'user-42:signed up\nuser-42:paid\nuser-1:hello\n' | "$ES" produce demo --key-separator :

say "es topic describe demo"
"$ES" topic describe demo

P=$(python3 -c 'h=0xcbf29ce484222325
for b in b"user-42": h=((h^b)*0x100000001b3)%2**64
print(h%3)')
say "es consume demo --from-beginning --partition $P --print-key   # where key user-42 lives"
BEFORE=$("$ES" consume demo --from-beginning --partition "$P" --print-key)
echo "$BEFORE"

say "es --json consume demo --from-beginning"
"$ES" --json consume demo --from-beginning

say "restart the broker (SIGTERM, then start again)"
kill -TERM "$PID"; wait "$PID"; PID=
start
say "es consume demo --from-beginning --partition $P --print-key"
AFTER=$("$ES" consume demo --from-beginning --partition "$P" --print-key)
echo "$AFTER"
[ "$BEFORE" = "$AFTER" ] || { echo "records changed across restart"; exit 1; }
printf '%s\n' "$AFTER" | grep -q $'^user-42\tpaid$' || { echo "record missing"; exit 1; }
[ "$("$ES" consume demo --from-beginning | wc -l)" -eq 3 ] || { echo "expected 3 records"; exit 1; }
kill -TERM "$PID"; wait "$PID"; PID=
echo
echo "DEMO OK"
