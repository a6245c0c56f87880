#!/usr/bin/env python3
"""Memory per idle keep-alive connection, plain and TLS (docs/security.md).

Starts sluice (1 I/O thread, a plain and a TLS listener, an ECDSA P-256
certificate from a private CA made here) in front of sluice-mock, opens
CONNECTIONS connections of each kind that each make one request and stay
open, and reports the growth of sluice's resident set per connection
(after a warm-up of 50 connections, so one-time allocations are not
charged).

  python3 bench/tls_memory.py [BUILD_DIR]      # default build/release
  env: CONNECTIONS (1000)
"""
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")
COUNT = int(os.environ.get("CONNECTIONS", "1000"))
BODY = b'{"model":"mock-model","prompt":"x","max_tokens":1}'
REQUEST = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(BODY)) + BODY


def pki(d):
    def run(*a):
        subprocess.run(a, cwd=d, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:prime256v1", "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=ca",
        "-days", "2", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
        "keyUsage=critical,keyCertSign")
    run("openssl", "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:prime256v1", "-keyout", "server.key", "-out", "server.csr", "-subj",
        "/CN=localhost")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-set_serial", "1", "-days", "2", "-extfile", "ext", "-out", "server.pem")


def printed_port(path, pattern, proc):
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{path}: exited")
        with open(path) as f:
            m = re.search(pattern + r".*?:(\d+)", f.read(), re.M)
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    sys.exit(f"{path}: no port printed")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    with tempfile.TemporaryDirectory() as d:
        pki(d)
        procs = []
        try:
            mock_out = os.path.join(d, "mock.out")
            mock = subprocess.Popen([os.path.join(BUILD, "sluice-mock"), "--listen", "127.0.0.1:0"],
                                    stdout=open(mock_out, "w"), stderr=subprocess.STDOUT)
            procs.append(mock)
            mock_port = printed_port(mock_out, "listening", mock)
            cfg = os.path.join(d, "sluice.yaml")
            with open(cfg, "w") as f:
                f.write(f"""server:
  listen: 127.0.0.1:0
  threads: 1
  maxConnections: {4 * COUNT}
  tls:
    listen: 127.0.0.1:0
    certificateFile: {d}/server.pem
    keyFile: {d}/server.key
endpoints:
  - address: 127.0.0.1:{mock_port}
""")
            out = os.path.join(d, "sluice.out")
            sluice = subprocess.Popen([os.path.join(BUILD, "sluice"), "--config", cfg,
                                       "--admin-listen", "127.0.0.1:0"],
                                      stdout=open(out, "w"), stderr=subprocess.STDOUT)
            procs.append(sluice)
            plain_port = printed_port(out, "^listening on", sluice)
            tls_port = printed_port(out, "tls listening on", sluice)
            ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))

            def connect(tls):
                s = socket.create_connection(("127.0.0.1", tls_port if tls else plain_port))
                if tls:
                    s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
                s.sendall(REQUEST)
                got = b""
                while b"\r\n\r\n" not in got:
                    chunk = s.recv(65536)
                    if not chunk:
                        sys.exit("connection closed before the answer")
                    got += chunk
                if not got.startswith(b"HTTP/1.1 200"):
                    sys.exit("not a 200: " + got[:80].decode(errors="replace"))
                return s

            held = [connect(False) for _ in range(50)] + [connect(True) for _ in range(50)]
            for tls in (False, True):
                before = rss_kib(sluice.pid)
                held += [connect(tls) for _ in range(COUNT)]
                time.sleep(0.5)  # the I/O thread settles (no synchronisation is measured)
                per = (rss_kib(sluice.pid) - before) / COUNT
                print(f"{'TLS' if tls else 'plain'}: {per:.1f} KiB per idle keep-alive connection "
                      f"({COUNT} connections, one request each)")
            for s in held:
                s.close()
        finally:
            for p in procs:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
