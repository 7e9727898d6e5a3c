#!/usr/bin/env bash
# Runs es-chaos once per seed against the debug es-broker and says which
# seeds found a violation, each with the one command that reruns it.
#   bench/chaos/seeds.sh "1 2" 60s 8-12 kill,pause,torn-tail,disk-full [NAME]
# CHAOS_ARGS: more es-chaos flags (`--partitions 500`); CHAOS_NODES: the
# brokers to run (1; 3 for a cluster run); ES_CHAOS and ES_BROKER: the
# binaries (default: the debug builds).
# Exit 1 if any seed found a violation, 2 if a run itself failed.
set -uo pipefail
seeds=$1 time=$2 interval=$3 nemesis=$4 name=${5:-jepsen}
read -r -a extra <<< "${CHAOS_ARGS:-}"
chaos=${ES_CHAOS:-./target/debug/es-chaos}
broker=${ES_BROKER:-target/debug/es-broker}
nodes=${CHAOS_NODES:-1}
cd "$(dirname "$0")/../.."
rc=0
failed=()
for seed in $seeds; do
  out=target/chaos/$name-$seed
  echo "== es-chaos seed $seed: $time of $nemesis, a fault every $interval s; results in $out"
  "$chaos" run --broker "$broker" --nodes "$nodes" --time "$time" \
    --seed "$seed" --nemesis "$nemesis" --interval "$interval" --out "$out" "${extra[@]}"
  r=$?
  if [ "$r" -ne 0 ]; then
    failed+=("seed $seed (exit $r): $chaos run --broker $broker --nodes $nodes --time $time --seed $seed --nemesis $nemesis --interval $interval --out $out${CHAOS_ARGS:+ $CHAOS_ARGS}")
    [ "$r" -gt "$rc" ] && rc=$r
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== es-chaos: ${#failed[@]} seed(s) failed; rerun each with:"
  printf '   %s\n' "${failed[@]}"
else
  echo "== es-chaos: seeds $seeds: no violation"
fi
exit "$rc"
