#!/usr/bin/env python3
"""How long POST /admin/v1/keys takes with many keys in the key file, and how
long /healthz takes to answer while key changes are being made (issue 39,
item 9). A measurement for a lab note or a report, not a test.

  bench/key_write_latency.py BUILD_DIR [--keys 20000] [--creates 20]

Starts sluice-mock and sluice (BUILD_DIR/sluice, BUILD_DIR/sluice-mock) on
port 0 with a key file of --keys records, then makes --creates keys one
after the other while another thread asks /healthz over and over; prints
the latency of each (median, p99, max, in ms).
"""
import argparse
import hashlib
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def key_file(n):
    lines = ["keys:"]
    for i in range(n):
        kid = "bulk_%08d" % i
        lines += [
            "  - id: " + kid,
            '    tenant: "bulk"',
            "    sha256: " + hashlib.sha256(kid.encode()).hexdigest(),
        ]
    return "\n".join(lines) + "\n"


def printed_port(path, pattern, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path) as f:
            m = re.search(pattern + r" \S+:(\d+)", f.read(), re.M)
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            sys.exit("%s exited" % proc.args[0])
        time.sleep(0.05)
    sys.exit("no port printed by " + proc.args[0])


def request(port, method, path, body=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t = time.perf_counter()
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, (time.perf_counter() - t) * 1000


def summary(name, ms):
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print("%-8s n=%-6d median %8.1f ms  p99 %8.1f ms  max %8.1f ms"
          % (name, len(ms), statistics.median(ms), p99, ms[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--keys", type=int, default=20000)
    ap.add_argument("--creates", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        keys = os.path.join(d, "keys.yaml")
        with open(keys, "w") as f:
            f.write(key_file(a.keys))
        mock_out = os.path.join(d, "mock.out")
        mock = subprocess.Popen([os.path.join(a.build, "sluice-mock"), "--listen", "127.0.0.1:0"],
                                stdout=open(mock_out, "w"))
        try:
            mock_port = printed_port(mock_out, "^listening on", mock)
            cfg = os.path.join(d, "sluice.yaml")
            with open(cfg, "w") as f:
                f.write("server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n"
                        "  - address: 127.0.0.1:%d\nauth:\n  apiKeys: {file: %s}\n"
                        % (mock_port, keys))
            out = os.path.join(d, "sluice.out")
            sluice = subprocess.Popen([os.path.join(a.build, "sluice"), "--config", cfg,
                                       "--admin-listen", "127.0.0.1:0"], stdout=open(out, "w"),
                                      stderr=subprocess.DEVNULL)
            try:
                admin = printed_port(out, "^admin listening on", sluice)
                creates, health = [], []
                done = threading.Event()

                def probe():
                    while not done.is_set():
                        status, ms = request(admin, "GET", "/healthz")
                        assert status == 200, status
                        health.append(ms)

                t = threading.Thread(target=probe)
                t.start()
                for i in range(a.creates):
                    status, ms = request(admin, "POST", "/admin/v1/keys", '{"tenant": "acme"}')
                    assert status == 201, status
                    creates.append(ms)
                done.set()
                t.join()
                print("%d keys in the file, %d creates; load average %.2f"
                      % (a.keys, a.creates, os.getloadavg()[0]))
                summary("create", creates)
                summary("healthz", health)
            finally:
                sluice.terminate()
                sluice.wait()
        finally:
            mock.terminate()
            mock.wait()


if __name__ == "__main__":
    main()
