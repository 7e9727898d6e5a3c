#!/usr/bin/env python3
"""Start-up stress: start es-broker many times over, and each time wait for
/ready, create a topic, produce, fetch, then SIGTERM and expect exit 0.

    scripts/start_stress.py [--starts 300] [--shards 8] [--broker target/debug/es-broker]

A start that is not ready within --hang-secs (default 60; a start takes well
under a second) counts as hung: its log is kept and the broker is killed.
Another run sends SIGTERM while the broker is still starting (--term-early)
and expects it to exit anyway. Exits 1 if any start hung or failed. This is a
stress tool (make stress-start), not a test: it is the one place a timeout
is the verdict, because a hang has no other symptom.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def one_start(args, i, term_early):
    with tempfile.TemporaryDirectory(prefix="es-stress-") as d:
        http_port, bin_port = free_port(), free_port()
        base = f"http://127.0.0.1:{http_port}"
        log_path = os.path.join(d, "broker.log")
        with open(log_path, "wb") as log:
            p = subprocess.Popen(
                [args.broker, "--data-dir", os.path.join(d, "data"),
                 "--http-addr", f"127.0.0.1:{http_port}",
                 "--binary-addr", f"127.0.0.1:{bin_port}",
                 "--registry-addr", "disabled", "--kafka-addr", "disabled",
                 "--shards", str(args.shards)],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            if term_early:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=args.hang_secs)
                    return "ok"
                except subprocess.TimeoutExpired:
                    return keep(args, i, log_path, "ignored SIGTERM during start-up")
            deadline = time.monotonic() + args.hang_secs
            while True:
                if p.poll() is not None:
                    return keep(args, i, log_path, f"exited {p.returncode} before ready")
                try:
                    if http("GET", base + "/ready", timeout=2)[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    return keep(args, i, log_path, "hung: not ready")
                time.sleep(0.02)
            status, _ = http("POST", base + "/v1/topics", {"name": "s", "partitions": 4})
            if status != 201:
                return keep(args, i, log_path, f"create answered {status}")
            status, body = http("POST", base + "/v1/topics/s/records",
                                {"records": [{"key": f"k{n}", "value": "v"} for n in range(20)]})
            if status != 200:
                return keep(args, i, log_path, f"produce answered {status}")
            offsets = json.loads(body)["offsets"]
            p0 = offsets[0]["partition"]
            status, body = http("GET", f"{base}/v1/topics/s/partitions/{p0}/records?offset=0")
            if status != 200 or not json.loads(body)["records"]:
                return keep(args, i, log_path, f"fetch answered {status}")
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(timeout=args.hang_secs)
            except subprocess.TimeoutExpired:
                return keep(args, i, log_path, "hung: did not stop on SIGTERM")
            return "ok" if rc == 0 else keep(args, i, log_path, f"exited {rc} after SIGTERM")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def keep(args, i, log_path, why):
    kept = os.path.join(args.keep_dir, f"start-{i}.log")
    with open(log_path, "rb") as src, open(kept, "wb") as dst:
        dst.write(src.read())
    print(f"start {i}: {why} (log: {kept})", flush=True)
    return why


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=300)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--broker", default="target/debug/es-broker")
    ap.add_argument("--hang-secs", type=float, default=60)
    ap.add_argument("--term-early", type=int, default=20,
                    help="extra starts that get SIGTERM at once (default 20)")
    ap.add_argument("--keep-dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    failures = {}
    started = time.monotonic()
    runs = [(i, False) for i in range(args.starts)] + [(args.starts + i, True) for i in range(args.term_early)]
    for i, early in runs:
        outcome = one_start(args, i, early)
        if outcome != "ok":
            failures[outcome] = failures.get(outcome, 0) + 1
        if (i + 1) % 50 == 0:
            print(f"{i + 1} starts, {sum(failures.values())} failed", flush=True)
    secs = time.monotonic() - started
    print(f"start_stress: {len(runs)} starts (--shards {args.shards}, {args.term_early} with an early SIGTERM) "
          f"in {secs:.0f} s: {len(runs) - sum(failures.values())} ok, {sum(failures.values())} failed {failures or ''}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
