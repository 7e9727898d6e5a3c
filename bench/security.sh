#!/usr/bin/env bash
# What security costs: scenarios 1, 2 and 4 of bench/scenarios.sh against
# three brokers in one sitting, each on a fresh directory of the same disk:
#   plain  --auth disabled, no TLS (today's default)
#   auth   --auth required, plaintext on loopback; es-bench uses a key that
#          is not an admin, with prefixed grants, so every request pays the
#          key check and the grant match
#   tls    --auth required and --tls-cert/--tls-key (HTTP and binary over TLS)
# Produce scenarios report the broker as a share of the disk's own
# write+fdatasync rate measured in the same run (--compare-disk), so the
# configurations compare as ratios even where the disk's speed wanders.
# Needs openssl (the test certificate) and curl. Env as bench/scenarios.sh:
# BENCH_SECS, BENCH_WARMUP, BENCH_ROUNDS, BENCH_DIR; SECURITY_CONFIGS picks
# configurations (default "plain auth tls"); ES_BENCH_ONLY=N one scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
WARMUP=${BENCH_WARMUP:-15}
ROUNDS=${BENCH_ROUNDS:-3}
CONFIGS=${SECURITY_CONFIGS:-plain auth tls}
for tool in openssl curl; do
    command -v "$tool" >/dev/null || { echo "bench/security.sh needs $tool" >&2; exit 2; }
done
cargo build --release -q -p es-broker -p es-bench
BROKER=$PWD/target/release/es-broker
BENCH=$PWD/target/release/es-bench

WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-security-bench.XXXXXX")
PID=
cleanup() {
    if [[ -n $PID ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# A CA and a certificate for 127.0.0.1 signed by it.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=es bench CA" -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=127.0.0.1" -keyout "$WORK/broker.key" -out "$WORK/broker.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > "$WORK/ext.cnf"
openssl x509 -req -in "$WORK/broker.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
    -CAcreateserial -days 2 -extfile "$WORK/ext.cnf" -out "$WORK/broker.pem" 2>/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start CONFIG: a broker on a fresh directory; sets PID, HTTP, BINARY,
# SCHEME, KEY (the key es-bench uses) and TLS_ARGS.
start() {
    local config=$1 dir=$WORK/$1
    mkdir -p "$dir"
    HTTP=127.0.0.1:$(free_port)
    BINARY=127.0.0.1:$(free_port)
    local flags=(--data-dir "$dir/data" --http-addr "$HTTP" --binary-addr "$BINARY" --registry-addr disabled --kafka-addr disabled)
    SCHEME=http TLS_ARGS=() CURL_TLS=()
    case $config in
        plain) ;;
        auth) flags+=(--auth required) ;;
        tls)
            flags+=(--auth required --tls-cert "$WORK/broker.pem" --tls-key "$WORK/broker.key")
            SCHEME=https TLS_ARGS=(--tls-ca "$WORK/ca.pem") CURL_TLS=(--cacert "$WORK/ca.pem") ;;
        *) echo "unknown configuration $config" >&2; exit 2 ;;
    esac
    "$BROKER" "${flags[@]}" > "$dir/broker.log" 2>&1 &
    PID=$!
    for _ in $(seq 600); do
        curl -sf "${CURL_TLS[@]}" "$SCHEME://$HTTP/ready" >/dev/null 2>&1 && break
        kill -0 "$PID" 2>/dev/null || { echo "broker ($config) exited:"; tail "$dir/broker.log"; exit 1; }
        sleep 0.1
    done
    KEY=
    if [[ $config != plain ]]; then
        local admin
        admin=$(cat "$dir/data/admin.key")
        KEY=$(curl -sf "${CURL_TLS[@]}" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
            -d '{"name":"bench","grants":[{"resource":"topic","pattern":"prefixed","name":"bench","operations":["read","write","create","delete"]}]}' \
            "$SCHEME://$HTTP/v1/keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
    fi
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=
}

run() {
    local n=$1 config=$2
    shift 2
    if [[ -n ${ES_BENCH_ONLY:-} && $ES_BENCH_ONLY != "$n" ]]; then return; fi
    start "$config"
    echo
    echo "== scenario $n, $config"
    echo "\$ es-bench $*"
    "$BENCH" "$@" --broker "$BINARY" --duration "$SECS" --data-dir "$WORK/$config" \
        ${KEY:+--api-key "$KEY"} "${TLS_ARGS[@]}" ${ES_BENCH_ARGS:-}
    stop
    # A produce scenario leaves gigabytes: free the disk for the next.
    rm -rf "${WORK:?}/$config"
}

for config in $CONFIGS; do
    run 1 "$config" produce --producers 2 --partitions 2 --batch 1000 --record-size 1024 --inflight 1 \
        --warmup "$WARMUP" --compare-disk --rounds "$ROUNDS"
done
for config in $CONFIGS; do
    run 2 "$config" produce --producers 50 --partitions 2 --batch 1 --record-size 1024 --inflight 16 \
        --warmup "$WARMUP" --compare-disk --rounds "$ROUNDS"
done
for config in $CONFIGS; do
    run 4 "$config" consume --partitions 1 --batch 1000 --record-size 1024 --prefill-mb 1024
done
