#!/usr/bin/env bash
# `make test`: every test of the workspace, all run even when one fails
# (--no-fail-fast), then one summary: totals and each failed test by name.
# Extra arguments go to `cargo test` (e.g. `make test ARGS=-q`).
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=$(mktemp "${TMPDIR:-/tmp}/es-test.XXXXXX")
trap 'rm -f "$LOG"' EXIT

# The real clients some tests drive (kcat, confluent-kafka, kafka-python).
./scripts/clients.sh
export ES_CLIENTS_PYTHON="${ES_CLIENTS_PYTHON:-$PWD/target/py-clients/bin/python}"

echo "make test: cargo test --workspace --no-fail-fast $*"
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}

python3 - "$LOG" "$rc" <<'PY'
import re, sys
log, rc = sys.argv[1], int(sys.argv[2])
passed = failed = ignored = binaries = 0
current, failures = "?", []
for line in open(log, errors="replace"):
    m = re.match(r"\s+(Running|Doc-tests)\s+(\S+)", line)
    if m:
        current = m.group(2)
    m = re.match(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", line)
    if m:
        binaries += 1
        passed += int(m.group(1)); failed += int(m.group(2)); ignored += int(m.group(3))
    m = re.match(r"test (\S+) \.\.\. FAILED", line)
    if m:
        failures.append(f"{current}: {m.group(1)}")
print()
print("=" * 72)
print(f"make test: {passed} passed, {failed} failed, {ignored} ignored, in {binaries} test binaries")
for f in failures:
    print(f"  FAILED {f}")
if rc != 0 and not failures:
    print(f"  cargo test exited {rc} without a failed test: a build error or a crashed test binary (see above)")
print("=" * 72)
PY
exit "$rc"
