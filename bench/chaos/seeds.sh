#!/usr/bin/env bash
# Runs es-chaos once per seed against the debug es-broker and says which
# seeds found a violation, each with the one command that reruns it.
#   bench/chaos/seeds.sh "1 2" 60s 8-12 kill,pause,torn-tail,disk-full [NAME]
# CHAOS_ARGS: more es-chaos flags (`--partitions 500`); CHAOS_NODES: the
# brokers to run (1; 3 for a cluster run); ES_CHAOS and ES_BROKER: the
# binaries (default: the debug builds); CHAOS_JOBS: seeds run at once
# (default 1; each has its own brokers, ports and directory, and its
# output is printed whole when it ends). The faults last TIME of wall
# clock whatever the machine's speed, so seeds side by side take TIME
# together, not TIME each.
# Exit 1 if any seed found a violation, 2 if a run itself failed.
set -uo pipefail
seeds=$1 time=$2 interval=$3 nemesis=$4 name=${5:-jepsen}
read -r -a extra <<< "${CHAOS_ARGS:-}"
chaos=${ES_CHAOS:-./target/debug/es-chaos}
broker=${ES_BROKER:-target/debug/es-broker}
nodes=${CHAOS_NODES:-1}
cd "$(dirname "$0")/../.."
jobs=${CHAOS_JOBS:-1}
mkdir -p target/chaos
rc=0
failed=()
# One seed: its run, its output in target/chaos/NAME-SEED.log, its exit
# status in target/chaos/NAME-SEED.rc.
# With one seed at a time its output is also shown as it comes.
one() {
  local seed=$1 out=target/chaos/$name-$1
  rm -f "$out.rc"
  {
    echo "== es-chaos seed $seed: $time of $nemesis, a fault every $interval s; results in $out"
    "$chaos" run --broker "$broker" --nodes "$nodes" --time "$time" \
      --seed "$seed" --nemesis "$nemesis" --interval "$interval" --out "$out" "${extra[@]}"
    echo $? > "$out.rc"
  } 2>&1 | if [ "$jobs" -gt 1 ]; then cat > "$out.log"; else tee "$out.log"; fi
}
pending=()
# Prints the oldest running seed's output once it ends, and records its
# verdict.
reap() {
  local seed=${pending[0]} out=target/chaos/$name-${pending[0]}
  wait "${pids[0]}"
  pending=("${pending[@]:1}")
  pids=("${pids[@]:1}")
  [ "$jobs" -gt 1 ] && cat "$out.log"
  local r
  r=$(cat "$out.rc" 2>/dev/null || echo 2)
  if [ "$r" -ne 0 ]; then
    failed+=("seed $seed (exit $r): $chaos run --broker $broker --nodes $nodes --time $time --seed $seed --nemesis $nemesis --interval $interval --out $out${CHAOS_ARGS:+ $CHAOS_ARGS}")
    [ "$r" -gt "$rc" ] && rc=$r
  fi
}
pids=()
for seed in $seeds; do
  [ ${#pending[@]} -ge "$jobs" ] && reap
  one "$seed" &
  pids+=("$!")
  pending+=("$seed")
done
while [ ${#pending[@]} -gt 0 ]; do reap; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== es-chaos: ${#failed[@]} seed(s) failed; rerun each with:"
  printf '   %s\n' "${failed[@]}"
else
  echo "== es-chaos: seeds $seeds: no violation"
fi
exit "$rc"
