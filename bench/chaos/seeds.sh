#!/usr/bin/env bash
# Runs es-chaos once per seed against the debug es-broker and says which
# seeds found a violation, each with the one command that reruns it.
#   bench/chaos/seeds.sh "1 2" 60s 8-12 kill,pause,torn-tail,disk-full [NAME]
# Exit 1 if any seed found a violation, 2 if a run itself failed.
set -uo pipefail
seeds=$1 time=$2 interval=$3 nemesis=$4 name=${5:-jepsen}
cd "$(dirname "$0")/../.."
rc=0
failed=()
for seed in $seeds; do
  out=target/chaos/$name-$seed
  echo "== es-chaos seed $seed: $time of $nemesis, a fault every $interval s; results in $out"
  ./target/debug/es-chaos run --broker target/debug/es-broker --nodes 1 --time "$time" \
    --seed "$seed" --nemesis "$nemesis" --interval "$interval" --out "$out"
  r=$?
  if [ "$r" -ne 0 ]; then
    failed+=("seed $seed (exit $r): ./target/debug/es-chaos run --broker target/debug/es-broker --nodes 1 --time $time --seed $seed --nemesis $nemesis --interval $interval --out $out")
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
