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
# Each line goes to the log with the seconds since the start in front of
# it (the summary's slowest test binaries come from these); the terminal
# sees the lines as cargo prints them.
cargo test --workspace --no-fail-fast "$@" 2>&1 | python3 -uc '
import io, sys, time
t0 = time.monotonic()
with open(sys.argv[1], "w") as log:
    for line in io.TextIOWrapper(sys.stdin.buffer, errors="replace"):
        sys.stdout.write(line)
        log.write("%9.1f %s" % (time.monotonic() - t0, line))
        log.flush()
' "$LOG"
rc=${PIPESTATUS[0]}

python3 - "$LOG" "$rc" <<'PY'
import re, sys
log, rc = sys.argv[1], int(sys.argv[2])
passed = failed = ignored = binaries = 0
current, failures, started, spans = "?", [], None, []
for stamped in open(log, errors="replace"):
    at, line = float(stamped[:9]), stamped[10:]
    m = re.match(r"\s+(Running|Doc-tests)\s+(.*)", line)
    if m:
        if started is not None:
            spans.append((at - started, current))
        # "Running tests/x.rs (target/debug/deps/x-1f2e...)" names x.rs's
        # binary: x; "Doc-tests es_format": doc es_format.
        p = re.search(r"\(([^)]*)\)", m.group(2))
        name = re.sub(r"-[0-9a-f]+$", "", p.group(1).rsplit("/", 1)[-1]) if p else m.group(2).strip()
        started, current = at, name if m.group(1) == "Running" else "doc " + name
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
if started is not None:
    spans.append((at - started, current))
spans.sort(reverse=True)
if spans:
    print("slowest test binaries: " + ", ".join("%s %.0fs" % (name, s) for s, name in spans[:8]))
print("=" * 72)
PY
exit "$rc"
