#!/usr/bin/env python3
"""Start and stop at scale: how long a broker with many partitions takes to
stop cleanly, and to become ready again after a clean stop.

    bench/startstop.py --broker target/release/es-broker --topics 10000 --partitions 1
    bench/startstop.py --broker target/release/es-broker --topics 1 --partitions 1000

On a fresh data directory: creates the topics (over one keep-alive HTTP
connection), produces one record to every partition (so each has written
its active segment), then, `--rounds` times: SIGTERM and the time until the
process exits (the stop), a start and the time until `GET /ready` answers
200 (ready after a clean stop). The first stop follows the writes; later
ones follow a start with nothing written. Prints one line per measurement
and a summary; nothing here is a verdict, only figures (docs/benchmarks.md).

The broker runs with a soft open-files limit of `--nofile` (capped at the
hard limit), enough for 3 descriptors per written partition and 1 per
other: `--write` writes fewer partitions where the hard limit is short.
"""

import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Http:
    """One keep-alive connection; reconnects when the broker closes it."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def request(self, method, path, body=None, timeout=600):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
                data = None if body is None else json.dumps(body).encode()
                headers = {"Content-Type": "application/json"} if data else {}
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                text = resp.read()
                return resp.status, text
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn = None
                if attempt == 2:
                    raise
        raise RuntimeError("unreachable")


def start(args, data, http_port, binary_port, log):
    def limits():
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = args.nofile if hard == resource.RLIM_INFINITY else min(args.nofile, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    return subprocess.Popen(
        [
            args.broker,
            "--data-dir", data,
            "--http-addr", f"127.0.0.1:{http_port}",
            "--binary-addr", f"127.0.0.1:{binary_port}",
            "--shards", str(args.shards),
        ],
        stdout=log,
        stderr=log,
        preexec_fn=limits,
    )


def wait_ready(proc, http_port):
    """Seconds from now until GET /ready answers 200."""
    began = time.monotonic()
    while True:
        if proc.poll() is not None:
            sys.exit(f"the broker exited with {proc.returncode} before it was ready")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
            conn.request("GET", "/ready")
            if conn.getresponse().status == 200:
                return time.monotonic() - began
        except OSError:
            pass
        time.sleep(0.01)


def stop(proc):
    """Seconds from SIGTERM until the process exits; and its exit code."""
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait()
    return time.monotonic() - began, code


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", default="target/release/es-broker")
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--shards", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--nofile", type=int, default=65536)
    p.add_argument(
        "--write",
        type=int,
        default=None,
        help="partitions to produce one record to (default: all); each written partition holds 3 descriptors",
    )
    p.add_argument("--dir", default=None, help="where the data directory goes (default: a temp dir)")
    args = p.parse_args()

    root = tempfile.mkdtemp(prefix="es-startstop-", dir=args.dir)
    data = os.path.join(root, "data")
    log = open(os.path.join(root, "broker.log"), "ab")
    http_port, binary_port = free_port(), free_port()
    total = args.topics * args.partitions
    print(f"# {args.topics} topics x {args.partitions} partitions = {total}, {args.shards} shards, {args.broker}")
    proc = start(args, data, http_port, binary_port, log)
    wait_ready(proc, http_port)
    h = Http(http_port)
    began = time.monotonic()
    for t in range(args.topics):
        status, text = h.request("POST", "/v1/topics", {"name": f"t{t}", "partitions": args.partitions})
        if status != 201:
            sys.exit(f"create t{t}: {status} {text[:200]!r}")
    created = time.monotonic() - began
    began = time.monotonic()
    left = total if args.write is None else args.write
    for t in range(args.topics):
        if left <= 0:
            break
        records = [{"value": "x", "partition": p} for p in range(min(args.partitions, left))]
        left -= len(records)
        status, text = h.request("POST", f"/v1/topics/t{t}/records", {"records": records})
        if status != 200:
            sys.exit(f"produce t{t}: {status} {text[:200]!r}")
    produced = time.monotonic() - began
    h.conn = None
    written = total if args.write is None else min(args.write, total)
    print(f"create {created:.2f} s, produce one record to {written} partitions {produced:.2f} s")
    stops, readies = [], []
    for r in range(args.rounds):
        took, code = stop(proc)
        if code != 0:
            sys.exit(f"stop {r}: exit code {code} (see {root}/broker.log)")
        stops.append(took)
        print(f"round {r}: stop {took:.2f} s" + (" (after the writes)" if r == 0 else ""))
        proc = start(args, data, http_port, binary_port, log)
        took = wait_ready(proc, http_port)
        readies.append(took)
        print(f"round {r}: ready after a clean stop {took:.2f} s")
    took, code = stop(proc)
    stops.append(took)
    print(f"last stop {took:.2f} s (exit {code})")
    print(
        f"summary: {total} partitions: stop after writes {stops[0]:.2f} s, "
        f"stop after an idle start min {min(stops[1:]):.2f} s, "
        f"ready after a clean stop min {min(readies):.2f} s max {max(readies):.2f} s"
    )
    log.close()
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
