#!/usr/bin/env bash
# es-tools speed (docs/tools.md): `es-tools dump` and `es-tools restore` of
# a ~2 GiB data dir against plain `tar cf` / `tar xf` of the same dir, in
# the same run, on the same disk. The data dir is a real broker's: a
# release es-broker filled by es-bench (1 KiB records, 4 partitions,
# 64 MiB segments), then stopped.
#
# Each side is timed to durable on disk, since a backup is worth nothing
# until it is: `tar cf` + `sync` against `es-tools dump` (which fsyncs its
# archive), `tar xf` + `sync` against `es-tools restore` (which fsyncs
# every file, renames the staging dir and fsyncs the parent). The files
# come from the page cache on both sides (the machine's RAM holds the dir;
# no root to drop caches). Each pair runs ROUNDS times, alternating which
# side goes first; the report gives every round and the median.
#
# MB/s counts the data dir's bytes (du --apparent-size) per second;
# ratio = tar's time / es-tools' time (1.0 = as fast as tar; target >= 0.8).
#
# Env: SIZE_MB (2048), ROUNDS (3), BENCH_DIR (system temp dir), ES_BIN_DIR
# (target/release; es-broker, es-bench and es-tools are taken from it),
# BUILD (1: build es-tools, es-broker and es-bench in release first),
# HTTP_PORT (18085), BINARY_PORT (19095).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${ES_BIN_DIR:-target/release}
if [ "${BUILD:-1}" = 1 ]; then
    cargo build --release -q -p es-tools -p es-broker -p es-bench
fi
SIZE_MB=${SIZE_MB:-2048}
ROUNDS=${ROUNDS:-3}
HTTP=127.0.0.1:${HTTP_PORT:-18085}
BINARY=127.0.0.1:${BINARY_PORT:-19095}
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/es-tools-bench-XXXXXX")
broker=
cleanup() {
    if [ -n "$broker" ]; then kill "$broker" 2>/dev/null; wait "$broker" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# 1. Fill: a release broker, es-bench until the dir holds SIZE_MB.
"$BIN_DIR/es-broker" --data-dir "$WORK/data" --http-addr "$HTTP" --binary-addr "$BINARY" --registry-addr disabled --kafka-addr disabled \
    --shards 2 > "$WORK/broker.log" 2>&1 &
broker=$!
for _ in $(seq 1 300); do
    curl -sf "http://$HTTP/ready" > /dev/null && break
    sleep 0.1
done
curl -sf -XPOST "http://$HTTP/v1/topics" -H 'content-type: application/json' \
    -d '{"name":"bench","partitions":4,"config":{"segment_bytes":67108864}}' > /dev/null
while [ "$(du -sm "$WORK/data" | cut -f1)" -lt "$SIZE_MB" ]; do
    "$BIN_DIR/es-bench" produce --broker "$BINARY" --topic bench --partitions 4 --producers 4 \
        --record-size 1024 --batch 100 --duration 1 > /dev/null 2>&1
done
kill "$broker"
wait "$broker" || true
broker=
sync
bytes=$(du -s --apparent-size --block-size=1 "$WORK/data" | cut -f1)
files=$(find "$WORK/data" -type f | wc -l)
echo "load average before the timed steps: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "data dir: $((bytes / 1048576)) MiB in $files files ($(find "$WORK/data" -name '*.log' -path '*/topics/*' | wc -l) segments)"

now() { date +%s.%N; }
# timed ARRAY 'CMD': runs the shell command CMD, then sync; appends the
# seconds both took to ARRAY, and CMD's CPU seconds (user + system) to
# ARRAY_CPU. A failing CMD stops the run with its stderr.
timed() {
    local -n into=$1
    local -n cpu=${1}_CPU
    shift
    local t0 t1
    t0=$(now)
    /usr/bin/time -f '%U %S' -o "$WORK/time" sh -c "$1" > /dev/null 2> "$WORK/stderr" \
        || { echo "failed: $*"; tail -5 "$WORK/stderr"; exit 1; }
    sync
    t1=$(now)
    into+=("$(echo "$t1 - $t0" | bc -l)")
    cpu+=("$(awk '{print $1 + $2}' "$WORK/time")")
}
tar_cf="tar cf '$WORK/tar.tar' -C '$WORK' data"
es_dump="'$BIN_DIR/es-tools' dump --data-dir '$WORK/data' -o '$WORK/dump.tar'"
tar_xf="tar xf '$WORK/tar.tar' -C '$WORK/tarx'"
es_restore="'$BIN_DIR/es-tools' restore -i '$WORK/dump.tar' --data-dir '$WORK/restored'"
clear_out() { rm -rf "$WORK/tarx" "$WORK/restored"; mkdir "$WORK/tarx"; sync; }

declare -a D_TAR D_ES R_TAR R_ES D_TAR_CPU D_ES_CPU R_TAR_CPU R_ES_CPU
for r in $(seq 1 "$ROUNDS"); do
    rm -f "$WORK/tar.tar" "$WORK/dump.tar"; sync
    if [ $((r % 2)) = 1 ]; then
        timed D_TAR "$tar_cf"; timed D_ES "$es_dump"
    else
        timed D_ES "$es_dump"; timed D_TAR "$tar_cf"
    fi
    clear_out
    if [ $((r % 2)) = 1 ]; then
        timed R_TAR "$tar_xf"; clear_out; timed R_ES "$es_restore"
    else
        timed R_ES "$es_restore"; clear_out; timed R_TAR "$tar_xf"
    fi
    clear_out
    printf 'round %d: tar cf %.2f s (CPU %.2f), dump %.2f s (CPU %.2f), tar xf %.2f s (CPU %.2f), restore %.2f s (CPU %.2f); load %s\n' \
        "$r" "${D_TAR[-1]}" "${D_TAR_CPU[-1]}" "${D_ES[-1]}" "${D_ES_CPU[-1]}" \
        "${R_TAR[-1]}" "${R_TAR_CPU[-1]}" "${R_ES[-1]}" "${R_ES_CPU[-1]}" "$(cut -d' ' -f1 /proc/loadavg)"
done
archive=$(stat -c %s "$WORK/dump.tar")
echo "archive: $((archive / 1048576)) MiB (tar: $(($(stat -c %s "$WORK/tar.tar") / 1048576)) MiB)"

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mbs() { echo "$bytes / 1000000 / $1" | bc -l; }
dt=$(median "${D_TAR[@]}"); de=$(median "${D_ES[@]}")
rt=$(median "${R_TAR[@]}"); re=$(median "${R_ES[@]}")
echo
echo "| step | tar (s) | tar MB/s | es-tools (s) | es-tools MB/s | ratio (tar time / es-tools time) | CPU s: tar / es-tools |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '| dump vs tar cf | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f / %.2f |\n' "$dt" "$(mbs "$dt")" "$de" "$(mbs "$de")" \
    "$(echo "$dt / $de" | bc -l)" "$(median "${D_TAR_CPU[@]}")" "$(median "${D_ES_CPU[@]}")"
printf '| restore vs tar xf | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f / %.2f |\n' "$rt" "$(mbs "$rt")" "$re" "$(mbs "$re")" \
    "$(echo "$rt / $re" | bc -l)" "$(median "${R_TAR_CPU[@]}")" "$(median "${R_ES_CPU[@]}")"
