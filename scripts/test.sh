#!/usr/bin/env bash
# `make test`: every test of the workspace, all run even when one fails,
# then one summary: totals, each failed test by name, the slowest test
# binaries.
#
# The test binaries are built once (`cargo test --workspace --no-run`),
# then run TEST_JOBS at once (default: one per core), each in its
# package's directory as `cargo test` runs it, its output printed whole
# when it ends; the doc tests follow. Most binaries spend their time
# waiting on brokers they started (fsyncs, restarts, timeouts), so
# binaries side by side finish sooner; the tests inside one binary run as
# `cargo test` runs them. The longest binaries of the last run (kept in
# target/test-times.tsv) start first.
#
# Extra arguments go to `cargo test` as before, one binary after another
# (e.g. `make test ARGS=-q`, `make test ARGS="-p es-cli"`); so does
# TEST_JOBS=1.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=$(mktemp "${TMPDIR:-/tmp}/es-test.XXXXXX")
trap 'rm -f "$LOG" "$LOG.json"' EXIT

# The real clients some tests drive (kcat, confluent-kafka, kafka-python).
./scripts/clients.sh
export ES_CLIENTS_PYTHON="${ES_CLIENTS_PYTHON:-$PWD/target/py-clients/bin/python}"

JOBS=${TEST_JOBS:-$(nproc)}

# Each line goes to the log with the seconds since the start in front of
# it (the summary's slowest test binaries come from these); the terminal
# sees the lines as they are printed.
stamp() {
  python3 -uc '
import io, sys, time
t0 = time.monotonic()
with open(sys.argv[1], "a") as log:
    for line in io.TextIOWrapper(sys.stdin.buffer, errors="replace"):
        sys.stdout.write(line)
        log.write("%9.1f %s" % (time.monotonic() - t0, line))
        log.flush()
' "$LOG"
}

if [ $# -gt 0 ] || [ "$JOBS" -le 1 ]; then
  echo "make test: cargo test --workspace --no-fail-fast $*"
  cargo test --workspace --no-fail-fast "$@" 2>&1 | stamp
  rc=${PIPESTATUS[0]}
else
  echo "make test: cargo test --workspace --no-run, then the test binaries $JOBS at once, then the doc tests"
  cargo test --workspace --no-run --message-format=json-render-diagnostics 2>&1 >"$LOG.json" | stamp
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    python3 -u - "$LOG.json" "$JOBS" <<'PY' 2>&1 | stamp
# Runs every test executable of the build's artifacts, JOBS at once.
import json, os, subprocess, sys, tempfile, threading, time

artifacts, jobs = sys.argv[1], int(sys.argv[2])
root = os.getcwd()
runs = []
for line in open(artifacts, errors="replace"):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test") or not m.get("executable"):
        continue
    if m["target"]["kind"][0] == "bench":
        continue
    pkg_dir = os.path.dirname(m["manifest_path"])
    src = os.path.relpath(m["target"]["src_path"], pkg_dir)
    kind = m["target"]["kind"][0]
    label = ("unittests " if kind in ("lib", "bin", "proc-macro") else "") + src
    exe = m["executable"]
    # "path+file:///.../cli#es-cli@0.1.0" -> es-cli
    pkg = m["package_id"].rsplit("#", 1)[-1].split("@")[0]
    runs.append((label, exe, pkg_dir, pkg))

# Longest first, by the last run's times; unknown ones first of all (a
# new binary may be long), and of those the ones known to be long (a clean
# checkout, as in CI, has no times yet).
times_file = os.path.join(root, "target", "test-times.tsv")
last = {}
try:
    for row in open(times_file):
        name, secs = row.rstrip("\n").split("\t")
        last[name] = float(secs)
except (OSError, ValueError):
    pass
def short(exe, pkg):
    """A binary's name across builds: its package, its name without the hash."""
    base = os.path.basename(exe)
    return pkg + "/" + (base.rsplit("-", 1)[0] if "-" in base else base)
LONG = ["es-bench/soak", "es-broker/kafka_security", "es-broker/full_disk", "es-raft/controller", "es-broker/kafka_clients"]
def order(r):
    name = short(r[1], r[3])
    if name in last:
        return (1, -last[name])
    return (0, LONG.index(name) if name in LONG else len(LONG))
runs.sort(key=order)

lock = threading.Lock()
pending = list(runs)
took, failed_bins = {}, 0

def worker():
    global failed_bins
    while True:
        with lock:
            if not pending:
                return
            label, exe, pkg_dir, pkg = pending.pop(0)
        env = dict(os.environ)
        # As cargo runs a test: in its package's directory, with its
        # manifest directory named.
        env["CARGO_MANIFEST_DIR"] = pkg_dir
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as out:
            rc = subprocess.call([exe], cwd=pkg_dir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            secs = time.monotonic() - t0
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
        rel = os.path.relpath(exe, root)
        with lock:
            took[short(exe, pkg)] = secs
            sys.stdout.write("     Running %s (%s) in %.1fs\n" % (label, rel, secs))
            sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
            if rc != 0:
                failed_bins += 1
                if "test result: FAILED" not in text:
                    sys.stdout.write("error: %s exited %d without a test result (a crash?)\n" % (rel, rc))
            sys.stdout.flush()

threads = [threading.Thread(target=worker) for _ in range(jobs)]
for t in threads:
    t.start()
for t in threads:
    t.join()
try:
    with open(times_file, "w") as f:
        for name, secs in sorted(took.items()):
            f.write("%s\t%.1f\n" % (name, secs))
except OSError:
    pass
sys.exit(1 if failed_bins else 0)
PY
    rc=${PIPESTATUS[0]}
    cargo test --workspace --doc --no-fail-fast 2>&1 | stamp
    doc=${PIPESTATUS[0]}
    [ "$doc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$doc
  fi
fi

python3 - "$LOG" "$rc" <<'PY'
import re, sys
log, rc = sys.argv[1], int(sys.argv[2])
passed = failed = ignored = binaries = 0
current, failures, started, spans, crashed = "?", [], None, [], []
for stamped in open(log, errors="replace"):
    at, line = float(stamped[:9]), stamped[10:]
    m = re.match(r"\s+(Running|Doc-tests)\s+(.*)", line)
    if m:
        if started is not None:
            spans.append((at - started, current))
            started = None
        # "Running tests/x.rs (target/debug/deps/x-1f2e...)" names x.rs's
        # binary: x; "Doc-tests es_format": doc es_format. The parallel
        # runner says how long it took ("... in 12.3s").
        p = re.search(r"\(([^)]*)\)", m.group(2))
        name = re.sub(r"-[0-9a-f]+$", "", p.group(1).rsplit("/", 1)[-1]) if p else m.group(2).strip()
        current = name if m.group(1) == "Running" else "doc " + name
        took = re.search(r" in ([0-9.]+)s$", line.rstrip())
        if took:
            spans.append((float(took.group(1)), current))
        else:
            started = at
    m = re.match(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", line)
    if m:
        binaries += 1
        passed += int(m.group(1)); failed += int(m.group(2)); ignored += int(m.group(3))
    m = re.match(r"test (\S+) \.\.\. FAILED", line)
    if m:
        failures.append(f"{current}: {m.group(1)}")
    m = re.match(r"error: (\S+) exited (-?\d+) without a test result", line)
    if m:
        crashed.append(f"{current} (exit {m.group(2)})")
print()
print("=" * 72)
print(f"make test: {passed} passed, {failed} failed, {ignored} ignored, in {binaries} test binaries")
for f in failures:
    print(f"  FAILED {f}")
for c in crashed:
    print(f"  CRASHED {c}")
if rc != 0 and not failures and not crashed:
    print(f"  cargo test exited {rc} without a failed test: a build error or a crashed test binary (see above)")
if started is not None:
    spans.append((at - started, current))
spans.sort(reverse=True)
if spans:
    print("slowest test binaries: " + ", ".join("%s %.0fs" % (name, s) for s, name in spans[:8]))
print("=" * 72)
PY
exit "$rc"
