#!/usr/bin/env bash
# Kafka protocol vs es binary protocol, side by side in one run on one
# release broker (docs/benchmarks.md, "Kafka protocol"): the same load,
# 1 KiB records to one partition, ~1,000 records a request, 5 requests in
# flight, acks after fsync. Binary: es-bench. Kafka: kcat (librdkafka, C,
# rdkafka_performance-style: records from a file, nothing per record in an
# interpreter; batching set for throughput: linger.ms, batch.size,
# batch.num.messages, no compression). Binary produces for BENCH_SECS (10);
# Kafka produces BENCH_RECORDS (500,000) records; each then fetches: the
# binary side sweeps a 500 MB prefill read once first, the Kafka side reads
# its records once untimed, then timed, so both read from the page cache.
#
# Each round starts a fresh broker per binary in BENCH_BROKERS (default:
# the release es-broker built here; give two to compare builds side by
# side) and runs the four loads on it; the table is per round, then the
# medians. "cpu s/GB" is the broker's own CPU time (user + system) per GB
# moved: what the protocol costs the broker, whatever else the machine is
# doing. The broker runs with --spin-before-park-us 0: the clients share
# its cores, and an idle shard's polling would take them from the client
# and count as the protocol's CPU. Env: BENCH_ROUNDS (3), BENCH_BROKERS (built by the caller),
# BENCH_DIR picks the disk.
# bench/kafka_load.py is the same load through confluent-kafka's Python
# API (client-bound: Python's per-record cost), for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${BENCH_SECS:-10}
RECORDS=${BENCH_RECORDS:-500000}
ROUNDS=${BENCH_ROUNDS:-3}
if [ -n "${BENCH_BROKERS:-}" ]; then
    cargo build --release -q -p es-bench
else
    cargo build --release -q -p es-broker -p es-bench
fi
BROKERS=${BENCH_BROKERS:-./target/release/es-broker}
dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-kafka-bench.XXXXXX")
broker=
trap '[ -n "$broker" ] && kill $broker 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
python3 -c "import sys; sys.stdout.buffer.write((b'x' * 1024 + b'\\n') * $RECORDS)" > "$dir/records"
mb=$(echo "$RECORDS * 1024 / 1000000" | bc -l)
# The broker's CPU time so far, in seconds (utime + stime, 100 ticks/s).
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$broker/stat"; }
per_gb() { echo "($2 - $1) * 1000 / $3" | bc -l; }
timed() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
bmbs() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["phases"][0]["mb_per_s"])' "$1"; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$dir/rows"
for round in $(seq "$ROUNDS"); do
    for bin in $BROKERS; do
        rm -rf "$dir/data"
        http=127.0.0.1:$(port); baddr=127.0.0.1:$(port); kafka=127.0.0.1:$(port)
        "$bin" --data-dir "$dir/data" --http-addr "$http" --binary-addr "$baddr" \
            --kafka-addr "$kafka" --registry-addr disabled --spin-before-park-us 0 \
            > "$dir/broker.log" 2>&1 &
        broker=$!
        for _ in $(seq 100); do curl -sf "http://$http/ready" >/dev/null && break; sleep 0.1; done
        curl -sf -XPOST "http://$http/v1/topics" -d '{"name":"kbench","partitions":1}' >/dev/null

        c0=$(cpu)
        bp=$(./target/release/es-bench produce --broker "$baddr" --topic bbench --partitions 1 \
            --producers 1 --record-size 1024 --batch 1000 --inflight 5 --duration "$SECS" --json)
        c1=$(cpu)
        consume() {
            ./target/release/es-bench consume --broker "$baddr" --topic bfetch --partitions 1 \
                --record-size 1024 --prefill-mb 500 --fetch-bytes 1048576 --duration "$SECS" --json
        }
        # The first run fills the topic; the second, timed, finds it full
        # (its one untimed read-through is in its CPU time: a few percent).
        consume > /dev/null
        c2=$(cpu)
        bf=$(consume)
        c3=$(cpu)
        bp_mbs=$(bmbs "$bp"); bf_mbs=$(bmbs "$bf")
        bp_cpu=$(per_gb "$c0" "$c1" "$(echo "$bp_mbs * $SECS" | bc -l)")
        bf_cpu=$(per_gb "$c2" "$c3" "$(echo "$bf_mbs * $SECS" | bc -l)")

        c4=$(cpu)
        kp_s=$(timed kcat -b "$kafka" -P -t kbench -p 0 -X acks=all -X linger.ms=2 \
            -X batch.size=1048576 -X batch.num.messages=1000 -X max.in.flight=5 \
            -X queue.buffering.max.kbytes=1048576 -X compression.codec=none -l "$dir/records")
        c5=$(cpu)
        fetch() {
            kcat -b "$kafka" -C -t kbench -p 0 -o beginning -e -q -X fetch.max.bytes=16777216 \
                -X max.partition.fetch.bytes=1048576 -f '%o\n'
        }
        fetch > /dev/null
        c6=$(cpu)
        kf_s=$(timed fetch)
        c7=$(cpu)
        kill "$broker"; wait "$broker" 2>/dev/null || true; broker=
        kp_mbs=$(echo "$mb / $kp_s" | bc -l); kf_mbs=$(echo "$mb / $kf_s" | bc -l)
        printf '%s %s %s %s %s %s %s %s %s %s\n' "$round" "$bin" "$bp_mbs" "$kp_mbs" "$bf_mbs" "$kf_mbs" \
            "$bp_cpu" "$(per_gb "$c4" "$c5" "$mb")" "$bf_cpu" "$(per_gb "$c6" "$c7" "$mb")" >> "$dir/rows"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$dir/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
head = (f"{'round':>5} {'broker':28} {'bin prod':>9} {'kafka prod':>10} {'k/b':>5} "
        f"{'bin fetch':>9} {'kafka fetch':>11} {'k/b':>5}   broker cpu s/GB: produce bin, kafka; fetch bin, kafka")
print("MB/s (1 MB = 10^6 bytes)")
print(head)
def line(r, name, v):
    bp, kp, bf, kf, c1, c2, c3, c4 = v
    print(f"{r:>5} {name[-28:]:28} {bp:9.1f} {kp:10.1f} {kp / bp:5.0%} {bf:9.1f} {kf:11.1f} {kf / bf:5.0%}"
          f"   {c1:.2f}, {c2:.2f}; {c3:.2f}, {c4:.2f}")
for r in rows:
    line(r[0], r[1], [float(x) for x in r[2:]])
for name in dict.fromkeys(r[1] for r in rows):
    mine = [[float(x) for x in r[2:]] for r in rows if r[1] == name]
    line("med", name, [statistics.median(c) for c in zip(*mine)])
PY
