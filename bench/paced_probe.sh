#!/usr/bin/env bash
# Block 3's load at a fixed rate against a broker started by hand, then the
# broker's own histograms: where a paced request's time goes.
#
#   bench/paced_probe.sh [BROKER FLAGS...]
#
# Env: RATE records/s over both producers (480000), SECS measured seconds
# (12), PROBE_DIR data directory (a fresh one under the system temp dir),
# ES_BROKER_BIN / ES_BENCH_BIN other binaries (default: this checkout's
# release builds). Prints es-bench's table row, each histogram's p50/p99/
# p999 bucket bounds, and the share of disk-thread jobs that waited over
# 0.5 ms for a thread (docs/design/disk-threads.md; the runs:
# bench/results/2026-12-01-scenario-changes.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BROKER=${ES_BROKER_BIN:-./target/release/es-broker}
BENCH=${ES_BENCH_BIN:-./target/release/es-bench}
[[ -n ${ES_BROKER_BIN:-} && -n ${ES_BENCH_BIN:-} ]] || cargo build --release -q -p es-broker -p es-bench
DIR=${PROBE_DIR:-$(mktemp -d)}
HTTP=127.0.0.1:18180
BIN=127.0.0.1:19190
"$BROKER" --data-dir "$DIR/data" --http-addr $HTTP --binary-addr $BIN --registry-addr disabled --kafka-addr disabled --shards 2 "$@" > "$DIR/broker.log" 2>&1 &
BP=$!
trap 'kill $BP 2>/dev/null; wait $BP 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do curl -sf $HTTP/ready > /dev/null && break; sleep 0.1; done
curl -sf -XPOST $HTTP/v1/topics -d '{"name":"bench","partitions":2}' > /dev/null
"$BENCH" produce --broker $BIN --topic bench --producers 2 --partitions 2 --batch 1000 --record-size 1024 \
    --inflight 1 --rate "${RATE:-480000}" --duration "${SECS:-12}" --warmup 3 --quiet \
    | grep -E "^(phase|produce) "
curl -s $HTTP/metrics > "$DIR/metrics"
python3 - "$DIR/metrics" <<'PY'
import collections, re, sys
buckets = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.match(r'(\w+)_bucket\{(.*)\} (\S+)', line)
    if not m:
        continue
    name, labels, value = m.groups()
    le = re.search(r'le="([^"]+)"', labels).group(1)
    rest = re.sub(r',?le="[^"]+"', '', labels)
    key = name + ("{" + rest + "}" if rest else "")
    bound = float('inf') if le == '+Inf' else float(le)
    buckets[key][bound] = buckets[key].get(bound, 0) + float(value)
wanted = r'append_duration|fsync_duration|segment_write|disk_thread_wait|produce_batch|batch_receive'
for key, h in sorted(buckets.items()):
    if not re.search(wanted, key):
        continue
    bounds = sorted(h)
    total = h[bounds[-1]]
    if not total:
        continue
    def q(p):
        return next(b for b in bounds if h[b] >= p * total) * 1000
    print(f"{key[:70]:70s} n={int(total):6d}  p50<={q(.5):.2f}  p99<={q(.99):.2f}  p999<={q(.999):.2f} ms")
    if 'disk_thread_wait' in key:
        print(f"disk-thread jobs that waited over 0.5 ms: {(total - h[0.0005]) / total * 100:.2f}%")
PY
