#!/usr/bin/env bash
# Runs a command while every core is kept busy by a spinning process at
# normal priority, so that a test whose verdict depends on how fast the
# machine is fails here rather than on a user's loaded laptop.
#   scripts/loaded.sh make test
# LOAD_PROCS: how many spinners (default: one per core).
set -uo pipefail
n=${LOAD_PROCS:-$(nproc)}
pids=()
stop() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; }
trap stop EXIT
for _ in $(seq 1 "$n"); do
  bash -c 'while :; do :; done' &
  pids+=("$!")
done
echo "loaded.sh: $n spinning processes (one per core) while running: $*"
"$@"
rc=$?
exit "$rc"
