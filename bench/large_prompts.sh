#!/usr/bin/env bash
# Issue 14's large-prompt run: bench/proxy_overhead.sh's setup (one static
# nginx backend, each proxy single-threaded, pinned as there) with
# chat-completions bodies of 4k-, 32k- and 128k-token prompts (16, 128 and
# 640 KB of prompt text) at 4 connections: sluice with flow control parses
# the body, classifies it, hashes the prompt's prefix blocks, schedules it
# and forwards it; nginx and HAProxy forward the same bytes. Reports per
# size and proxy the requests/s, the CPU per request, and the latency p50 /
# p99 added to the direct one (the backend alone), medians of ROUNDS
# interleaved rounds.
#
#   bash bench/large_prompts.sh        (DURATION=4 ROUNDS=1 for a smoke run)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/bench/results/large-prompts}
mkdir -p "$OUT"
export ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-8} CONNECTIONS=${CONNECTIONS:-4}
export PO_TARGETS="direct sluice_fc nginx haproxy"
SIZES=(4k:16000 32k:128000 128k:640000)
for s in "${SIZES[@]}"; do
  echo "[large_prompts] ${s%%:*}-token prompt (${s##*:} bytes)" >&2
  PROMPT_BYTES=${s##*:} RESULTS_FILE=$OUT/${s%%:*}.md bash "$ROOT/bench/proxy_overhead.sh" >/dev/null
done
python3 - "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" "${SIZES[@]}" <<'PY'
import re, sys
out, commit, sizes = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"large prompts at {commit}: 4 connections, each proxy single-threaded and pinned with the backend; "
      f"medians of interleaved rounds\n")
print("| prompt (body) | target | requests/s | CPU µs per request | × HAProxy's | p50 / p99 ms | added to direct p50 / p99 ms |")
print("|---|---|---:|---:|---:|---:|---:|")
fail = False
for s in sizes:
    name, size = s.split(":")
    rows = {}
    for line in open(f"{out}/{name}.md"):
        m = re.match(r"\| (.+?) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9]+) \|", line)
        if m:
            rows[m.group(1)] = [float(x) for x in m.groups()[1:]]
    direct = next(v for k, v in rows.items() if k.startswith("direct"))
    haproxy = next(v for k, v in rows.items() if k.startswith("haproxy"))
    for k, (rps, p50, p99, cpu, errors) in rows.items():
        fail = fail or errors > 0
        added = "–" if k.startswith("direct") else f"{p50 - direct[1]:.2f} / {p99 - direct[2]:.2f}"
        print(f"| {name} ({int(size) // 1000} KB) | {k} | {rps:.0f} | {cpu:.0f} | {cpu / haproxy[3]:.2f} | {p50:.2f} / {p99:.2f} | {added} |")
if fail:
    sys.exit("errors in a run")
PY
