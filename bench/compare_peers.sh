#!/usr/bin/env bash
# The demo scenario (bench/scenarios/demo.yaml) against three gateways in
# front of the same three sluice-mock endpoints, one after the other in one
# run: sluice (config/demo.yaml), HAProxy 2.6 (two priority classes,
# per-server maxconn, timeout queue) and nginx 1.22 (max_conns). Prints one
# table, writes bench/results/compare_peers.md and the table of
# docs/benchmarks/compare-peers.md (without the sluice build: user pages name
# no commits; the build is in bench/results/compare_peers.md and printed).
#
#   bash bench/compare_peers.sh [BUILD_DIR]     (default build/release)
#   DURATION=30s (the scenario's own) | any Go-style duration
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
DURATION=${DURATION:-30s}
NGINX=${NGINX:-/usr/sbin/nginx}
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}
SCENARIO=$ROOT/bench/scenarios/demo.yaml
OUT=$ROOT/bench/results/compare_peers.md
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" "$NGINX" "$HAPROXY" python3; do
  command -v "$tool" >/dev/null || { echo "compare_peers: missing $tool" >&2; exit 1; }
done

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  local deadline=$((SECONDS + 15))
  while (( SECONDS < deadline )); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.05
  done
  log "nothing listening on $1"; return 1
}

start_mocks "$BUILD"

run_load() {  # NAME URL
  log "$1: $DURATION of bench/scenarios/demo.yaml against $2"
  "$BUILD/sluice-load" --scenario "$SCENARIO" --target "$2" --duration "$DURATION" --quiet \
    --json "$WORK/$1.json" --html "$WORK/$1.html"
}

# (a) sluice with the demo config, pointed at these mocks.
sluice_config "$ROOT/config/demo.yaml" "$WORK/sluice.yaml"
"$BUILD/sluice" --config "$WORK/sluice.yaml" >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
SLUICE_PID=$!
PIDS+=($SLUICE_PID)
run_load sluice "http://127.0.0.1:$(wait_listening "$WORK/sluice.out")"
kill -TERM $SLUICE_PID; wait $SLUICE_PID || true

render() {  # TEMPLATE OUT PORT
  sed -e "s|@PORT@|$3|g" -e "s|@M1@|${M[0]}|g" -e "s|@M2@|${M[1]}|g" -e "s|@M3@|${M[2]}|g" \
      -e "s|@WORK@|$WORK|g" "$1" >"$2"
}

# (b) HAProxy.
HP=$(free_port)
render "$ROOT/bench/compare_peers/haproxy.cfg.in" "$WORK/haproxy.cfg" "$HP"
"$HAPROXY" -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.out" 2>&1 &
HAPROXY_PID=$!
PIDS+=($HAPROXY_PID)
wait_port "$HP"
run_load haproxy "http://127.0.0.1:$HP"
kill -TERM $HAPROXY_PID; wait $HAPROXY_PID || true

# (c) nginx.
NP=$(free_port)
mkdir -p "$WORK/nginx"
render "$ROOT/bench/compare_peers/nginx.conf.in" "$WORK/nginx/nginx.conf" "$NP"
"$NGINX" -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf" >"$WORK/nginx.out" 2>&1 &
NGINX_PID=$!
PIDS+=($NGINX_PID)
wait_port "$NP"
run_load nginx "http://127.0.0.1:$NP"
kill -TERM $NGINX_PID; wait $NGINX_PID || true

SLUICE_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
NGINX_VERSION=$("$NGINX" -v 2>&1 | sed -n 's|.*nginx/||p')
HAPROXY_VERSION=$("$HAPROXY" -v 2>&1 | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p')
python3 - "$WORK" "$OUT" "$ROOT/docs/benchmarks/compare-peers.md" "$DURATION" "$SLUICE_COMMIT" "$HAPROXY_VERSION" "$NGINX_VERSION" <<'PY'
import json, sys, datetime
work, out, page, duration, commit, hv, nv = sys.argv[1:8]
rows = []
for key, label in (("sluice", "sluice (config/demo.yaml)"),
                   ("haproxy", f"HAProxy {hv} (2 priority classes, maxconn 4/server, timeout queue 20s)"),
                   ("nginx", f"nginx {nv} (max_conns=4/server)")):
    r = json.load(open(f"{work}/{key}.json"))
    flows = {f["name"]: f for f in r["flows"]}
    a, b = flows["batch-a"], flows["batch-b-flood"]
    # Jain between the two equal batch tenants, over token throughput.
    x = [a["inputTokensPerSecond"] + a["outputTokensPerSecond"], b["inputTokensPerSecond"] + b["outputTokensPerSecond"]]
    jain = (sum(x) ** 2) / (2 * sum(v * v for v in x)) if sum(x) > 0 else 0
    share_a = x[0] / sum(x) if sum(x) > 0 else 0
    inter = flows["interactive"]
    t = r["totals"]
    rows.append((label, jain, share_a, inter["latencySeconds"]["p99"] * 1000, inter["ok"], inter["sent"],
                 t["shed"], t["errors"], t["lost"], t["sent"]))
lines = [f"| gateway | Jain, batch-a vs batch-b-flood | batch-a's share | interactive p99 (ms) | interactive served | shed with a typed reason | errors without a reason | no answer at all | sent |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for (label, jain, share, p99, iok, isent, shed, err, lost, sent) in rows:
    lines.append(f"| {label} | {jain:.3f} | {share*100:.1f}% | {p99:.0f} | {iok}/{isent} | {shed} | {err} | {lost} | {sent} |")
table = "\n".join(lines)
head = (f"- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; scenario bench/scenarios/demo.yaml for {duration} "
        "(5 s warm-up excluded); the same three sluice-mock endpoints (4 sequences, 20 ms/token) behind each gateway, one after the other\n")
open(out, "w").write("# The demo scenario through sluice, HAProxy and nginx (`bench/compare_peers.sh`)\n\n"
                     + f"- sluice build: {commit}\n" + head + "\n" + table + "\n")
print(f"sluice build: {commit}")
print(table)
text = open(page).read()
b, e = "<!-- compare_peers:begin -->", "<!-- compare_peers:end -->"
if b in text and e in text:
    i, j = text.index(b) + len(b), text.index(e)
    text = text[:i] + "\n" + head + "\n" + table + "\n" + text[j:]
    open(page, "w").write(text)
else:
    print(f"compare_peers: the markers {b} / {e} are missing from {page}; its table is not updated", file=sys.stderr)
PY
for name in sluice haproxy nginx; do
  cp "$WORK/$name.json" "$ROOT/bench/results/compare_$name.json"
  cp "$WORK/$name.html" "$ROOT/bench/results/compare_$name.html"
done
log "written to $OUT (and the table in docs/benchmarks/compare-peers.md); each gateway's reports: bench/results/compare_*.{json,html}"
