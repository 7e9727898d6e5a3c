#!/usr/bin/env bash
# Schema registry requests/s (docs/registry.md, docs/benchmarks.md): a
# release broker on a temp dir, wrk over keep-alive connections against
# its registry listener, three phases:
#   get-by-id   GET /schemas/ids/{id}, ids spread over the registered ones
#               (what deserializers ask; clients cache the answer)
#   register    POST /subjects/{s}/versions of a new schema under a new
#               subject each request: each is appended to _schemas and
#               fsynced before it is answered, one change at a time
#   re-register POST of a schema the subject already has (what a producer
#               with auto.register.schemas sends at start): no write
# Needs wrk (Debian: apt-get install wrk) and a release es-broker (built
# here). Env: SHARDS (2), SCHEMAS (1000, registered before get-by-id),
# CONNECTIONS (32), THREADS (2), SECS (10), BENCH_DIR (the disk; default
# a temp dir), KEEP (1 keeps the temp dir and the broker log).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
SHARDS=${SHARDS:-2} SCHEMAS=${SCHEMAS:-1000} CONNECTIONS=${CONNECTIONS:-32} THREADS=${THREADS:-2} SECS=${SECS:-10}

cargo build --release -q -p es-broker
DIR=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-registry-bench.XXXXXX")
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP=$(port) BIN=$(port) REG=$(port)
R="http://127.0.0.1:$REG"
./target/release/es-broker --data-dir "$DIR/data" --http-addr "127.0.0.1:$HTTP" --binary-addr "127.0.0.1:$BIN" \
    --registry-addr "127.0.0.1:$REG" --kafka-addr disabled --shards "$SHARDS" 2>"$DIR/broker.log" &
PID=$!
# KEEP=1 keeps the temp dir (broker.log, wrk outputs) for a look afterwards.
trap 'kill -9 $PID 2>/dev/null || true; [ "${KEEP:-0}" = 1 ] && echo "kept $DIR" || rm -rf "$DIR"' EXIT
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$HTTP/ready" >/dev/null && curl -sf "$R/" >/dev/null && break; sleep 0.1; done
curl -sf -X PUT "$R/config" -H 'Content-Type: application/json' -d '{"compatibility":"NONE"}' >/dev/null

# Registered ahead: SCHEMAS schemas, one record each, over 10 subjects.
python3 - "$R" "$SCHEMAS" <<'PY'
import json, sys, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    schema = json.dumps({"type": "record", "name": "Pre%d" % i, "fields": [{"name": "id", "type": "long"}]})
    req = urllib.request.Request("%s/subjects/pre-%d-value/versions" % (url, i % 10), method="POST",
                                 data=json.dumps({"schema": schema}).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    urllib.request.urlopen(req).read()
PY

cat > "$DIR/get.lua" <<LUA
local n = $SCHEMAS
counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/schemas/ids/" .. ((counter % n) + 1))
end
LUA
# Each wrk thread numbers its own schemas: a thread id set in setup.
cat > "$DIR/register.lua" <<'LUA'
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
counter = 0
request = function()
  counter = counter + 1
  local name = "T" .. tid .. "N" .. counter
  local schema = '{\\"type\\":\\"record\\",\\"name\\":\\"' .. name .. '\\",\\"fields\\":[{\\"name\\":\\"id\\",\\"type\\":\\"long\\"}]}'
  return wrk.format("POST", "/subjects/bench-" .. name .. "-value/versions",
    {["Content-Type"] = "application/vnd.schemaregistry.v1+json"}, '{"schema":"' .. schema .. '"}')
end
LUA
cat > "$DIR/again.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/vnd.schemaregistry.v1+json"
wrk.body = '{"schema":"{\\"type\\":\\"record\\",\\"name\\":\\"Pre0\\",\\"fields\\":[{\\"name\\":\\"id\\",\\"type\\":\\"long\\"}]}"}'
LUA

run() { # name script path
    echo "== $1: $CONNECTIONS connections, ${SECS}s"
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECS}s" --latency -s "$2" "$R$3" | tee "$DIR/$1.txt"
    local non2xx; non2xx=$(awk '/Non-2xx/ {print $NF}' "$DIR/$1.txt")
    [ -z "$non2xx" ] || { echo "$1: $non2xx answers were not 2xx"; tail -5 "$DIR/broker.log"; exit 1; }
}
run get-by-id "$DIR/get.lua" /schemas/ids/1
run register "$DIR/register.lua" /subjects/bench-value/versions
run re-register "$DIR/again.lua" /subjects/pre-0-value/versions

echo
echo "shards=$SHARDS schemas=$SCHEMAS connections=$CONNECTIONS secs=$SECS"
for p in get-by-id register re-register; do
    printf '%-12s %10s req/s   p50 %8s   p99 %8s\n' "$p" \
        "$(awk '/Requests\/sec/ {print $2}' "$DIR/$p.txt")" \
        "$(awk '$1=="50%" {print $2}' "$DIR/$p.txt")" \
        "$(awk '$1=="99%" {print $2}' "$DIR/$p.txt")"
done
curl -sf "http://127.0.0.1:$HTTP/metrics" | grep -E '^es_(registry_(schemas|subjects|registrations_total)|executor_kicks_total) '
