#!/usr/bin/env python3
"""Memory per idle binary connection (docs/benchmarks.md, "Memory per idle
connection"): starts a release broker on a temporary directory, opens N
connections that each complete the handshake and then wait, and prints the
broker's resident memory before and after.

Usage: bench/idle_connections.py [N] (default 2000; build first with
`cargo build --release -p es-broker`; ES_BROKER_BIN picks another broker
binary). Needs N + 50 open files.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BROKER = os.environ.get("ES_BROKER_BIN") or os.path.join(os.path.dirname(__file__), "..", "target", "release", "es-broker")
# Hello, request id 0, versions 1..1, client id "demo", no API key
# (docs/protocol.md, the worked example).
HELLO = bytes.fromhex("00000018" "01" "00" "0000" "0000000000000000" "00010001" "0004" "64656d6f" "0000")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    data = tempfile.mkdtemp(prefix="es-idle-")
    http, binary = free_port(), free_port()
    broker = subprocess.Popen(
        [BROKER, "--data-dir", data, "--http-addr", f"127.0.0.1:{http}",
         "--binary-addr", f"127.0.0.1:{binary}", "--shards", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socks = []
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", binary), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)
        before = rss_mib(broker.pid)
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", binary))
            s.sendall(HELLO)
            socks.append(s)
        for s in socks:
            head = s.recv(16, socket.MSG_WAITALL)
            assert head[4] == 0x81, f"expected HelloOk, got {head!r}"
        time.sleep(1)
        after = rss_mib(broker.pid)
        print(f"{n} idle connections: broker RSS {before:.0f} -> {after:.0f} MiB, "
              f"{(after - before) * 1024 / n:.0f} KiB per connection")
    finally:
        for s in socks:
            s.close()
        broker.terminate()
        broker.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
