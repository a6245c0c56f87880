#!/usr/bin/env bash
# What a fleet costs Redis with many tenants: three sluice replicas sharing
# through a redis-server (unix socket), FLOWS distinct fairness ids (1,000 by
# default) spread over the replicas, each backlogged by one closed-loop
# client, in front of three sluice-mock endpoints (4 admitted each, 10 ms
# per token). Reports Redis commands/s and bytes/s (in + out), the service
# tables' sizes, and sluice CPU seconds, over the measured window.
#
#   bash bench/fleet_flows.sh [BUILD_DIR]     (FLOWS=1000 DURATION=20s)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release; scripts/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
FLOWS=${FLOWS:-1000}
DURATION=${DURATION:-20s}

start_redis
start_mocks "$BUILD" --max-running 32 --decode-ms-per-token 10
ports=() spids=()
for i in 1 2 3; do
  sluice_config "$ROOT/bench/fleet/base.yaml" "$WORK/r$i.yaml"
  printf 'redis:\n  unixSocket: %s\n  replicaId: r%s\n  syncInterval: 25ms\n' "$WORK/redis.sock" "$i" \
    >>"$WORK/r$i.yaml"
  : >"$WORK/r$i.out"  # emptied here: see wait_listening (bench/lib.sh)
  "$BUILD/sluice" --config "$WORK/r$i.yaml" --admin-listen 127.0.0.1:0 >"$WORK/r$i.out" 2>"$WORK/r$i.err" &
  PIDS+=($!)
  spids+=($!)
  ports+=("$(wait_listening "$WORK/r$i.out")")
done
# One scenario per replica: every third id, one closed-loop client each.
for i in 0 1 2; do
  python3 - "$FLOWS" "$i" "$WORK/load$i.yaml" <<'PY'
import sys
flows, part, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with open(out, "w") as f:
    f.write("name: fleet-flows\nduration: 20s\nwarmup: 5s\nmaxRequests: 1000000\nflows:\n")
    for k in range(part, flows, 3):
        f.write(f"  - {{name: t{k}, fairnessId: tenant-{k}, arrival: {{type: closed, clients: 1}}, "
                "promptTokens: 32, maxTokens: 16}\n")
PY
done
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }
loads=()
for i in 0 1 2; do
  "$BUILD/sluice-load" --scenario "$WORK/load$i.yaml" --quiet --target "http://127.0.0.1:${ports[$i]}" \
    --duration "$DURATION" --json "$WORK/load$i.json" >/dev/null &
  loads+=($!)
done
# The window: from 5 s in (every flow has sent) to 5 s before the end.
sleep 5
c0=0; for p in "${spids[@]}"; do c0=$(python3 -c "print($c0 + $(cpu "$p"))"); done
s0=$(redis-cli -s "$WORK/redis.sock" info stats | tr -d '\r')
t0=$SECONDS
sleep 10
s1=$(redis-cli -s "$WORK/redis.sock" info stats | tr -d '\r')
t1=$SECONDS
c1=0; for p in "${spids[@]}"; do c1=$(python3 -c "print($c1 + $(cpu "$p"))"); done
sizes=$(for i in 1 2 3; do redis-cli -s "$WORK/redis.sock" hlen "sluice:s:r$i"; done | tr '\n' ' ')
for i in "${loads[@]}"; do wait "$i"; done
python3 - "$s0" "$s1" "$((t1 - t0))" "$(python3 -c "print($c1 - $c0)")" "$sizes" "$FLOWS" \
  "$(git -C "$ROOT" rev-parse --short HEAD)" "$WORK"/load*.json <<'PY'
import json, sys
def parse(t): return {k: int(v) for k, v in (l.split(":", 1) for l in t.splitlines() if ":" in l) if v.isdigit()}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
secs, cpu, sizes, flows, commit = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5].split(), int(sys.argv[6]), sys.argv[7]
lost = sum(json.load(open(p))["totals"].get("lost", 0) for p in sys.argv[8:])
cmds = (b["total_commands_processed"] - a["total_commands_processed"]) / secs
byts = (b["total_net_input_bytes"] - a["total_net_input_bytes"] + b["total_net_output_bytes"] - a["total_net_output_bytes"]) / secs
print(f"fleet with {flows} active flows at {commit}: 3 replicas, syncInterval 25 ms, {secs:.0f} s window\n")
print("| active flows | Redis commands/s | Redis bytes/s (in + out) | service-table entries per replica | sluice CPU s over the window (3 replicas) | requests lost |")
print("|---:|---:|---:|---|---:|---:|")
print(f"| {flows} | {cmds:.0f} | {byts:.0f} | {' / '.join(sizes)} | {cpu:.1f} | {lost} |")
if lost: sys.exit("requests were lost")
PY
