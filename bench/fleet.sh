#!/usr/bin/env bash
# Issue 13's benchmark: three sluice replicas in front of three sluice-mock
# endpoints (sluice lets 4 requests in flight into each; the mock would run
# 32; 10 ms per token), clients routed
# unevenly — tenant a only through replica 1, b only through replica 2, c
# through all three — all backlogged, weights 1:1:2. Run with the replicas
# sharing through a redis-server (on a unix socket) and without (each
# replica on its own, as llm-d today), each ROUNDS times, interleaved.
# Reports each tenant's share of output tokens against its weight, the
# pool's overshoot (requests an endpoint ran over the detector's 4, polled
# every 20 ms: the most, and the share of samples over), total output
# tokens/s, sluice CPU (all threads, and the sync threads alone) and
# redis-server CPU in cores, and Redis commands and bytes per second, over
# the load's whole run (warm-up included).
#
#   bash bench/fleet.sh [BUILD_DIR]     (DURATION=10s ROUNDS=1 for a smoke run)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" redis-server redis-cli \
  curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release; scripts/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
OUT=${OUT:-$ROOT/bench/results/fleet}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-30s}
mkdir -p "$OUT"

run_once() {  # mode (on|off) round
  local mode=$1 round=$2 i
  local tag="$mode-$round"
  start_mocks "$BUILD" --max-running 32 --decode-ms-per-token 10
  [[ $mode == on ]] && start_redis
  local ports=() spids=() aports=()
  for i in 1 2 3; do
    sluice_config "$ROOT/bench/fleet/base.yaml" "$WORK/r$i.yaml"
    if [[ $mode == on ]]; then
      printf 'redis:\n  unixSocket: %s\n  replicaId: r%s\n  syncInterval: 25ms\n  fairnessSlack: 256\n' \
        "$WORK/redis.sock" "$i" >>"$WORK/r$i.yaml"
    fi
    : >"$WORK/r$i.out"  # emptied here: see wait_listening (bench/lib.sh)
    "$BUILD/sluice" --config "$WORK/r$i.yaml" --admin-listen 127.0.0.1:0 \
      >"$WORK/r$i.out" 2>"$WORK/r$i.err" &
    PIDS+=($!)
    spids+=($!)
    ports+=("$(wait_listening "$WORK/r$i.out")")
    aports+=("$(admin_port "$WORK/r$i.out")")
  done
  # Load starts once every replica has seen the other two (a replica that
  # joins later is not known before its first report: the others would
  # count the pool theirs until then).
  [[ $mode == on ]] && wait_fleet 3 "${aports[@]}"
  local cpu0=() sync0=() r0 rcpu0=0
  for i in 0 1 2; do
    cpu0+=("$(cpu_seconds "${spids[$i]}")")
    sync0+=("$(cpu_seconds "${spids[$i]}" sluice-fleet)")
  done
  if [[ $mode == on ]]; then
    r0=$(redis-cli -s "$WORK/redis.sock" info stats | tr -d '\r')
    rcpu0=$(cpu_seconds "$REDIS_PID")
  fi
  local t0 t1
  t0=$(date +%s.%N)
  # The mocks' running sequences, polled while the load runs.
  poll_running >"$WORK/running.txt" 2>/dev/null &
  local poller=$!
  local loads=()
  "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/fleet-a.yaml" --quiet \
    --target "http://127.0.0.1:${ports[0]}" --duration "$DURATION" --json "$OUT/$tag-a.json" >/dev/null &
  loads+=($!)
  "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/fleet-b.yaml" --quiet \
    --target "http://127.0.0.1:${ports[1]}" --duration "$DURATION" --json "$OUT/$tag-b.json" >/dev/null &
  loads+=($!)
  for i in 0 1 2; do
    "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/fleet-c.yaml" --quiet \
      --target "http://127.0.0.1:${ports[$i]}" --duration "$DURATION" \
      --json "$OUT/$tag-c$i.json" >/dev/null &
    loads+=($!)
  done
  for i in "${loads[@]}"; do wait "$i"; done
  t1=$(date +%s.%N)
  kill "$poller" 2>/dev/null || true
  wait "$poller" 2>/dev/null || true
  local cpu=0 sync=0 rcpu=0
  for i in 0 1 2; do
    cpu=$(python3 -c "print($cpu + $(cpu_seconds "${spids[$i]}") - ${cpu0[$i]})")
    sync=$(python3 -c "print($sync + $(cpu_seconds "${spids[$i]}" sluice-fleet) - ${sync0[$i]})")
  done
  local redis_stats="{}"
  if [[ $mode == on ]]; then
    local r1
    rcpu=$(python3 -c "print($(cpu_seconds "$REDIS_PID") - $rcpu0)")
    r1=$(redis-cli -s "$WORK/redis.sock" info stats | tr -d '\r')
    redis_stats=$(python3 - "$r0" "$r1" <<'PY'
import json, sys
def parse(t): return {k: int(v) for k, v in (l.split(":", 1) for l in t.splitlines() if ":" in l) if v.isdigit()}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
print(json.dumps({k: b[k] - a[k] for k in ("total_commands_processed", "total_net_input_bytes", "total_net_output_bytes")}))
PY
)
  fi
  python3 - "$OUT/$tag-meta.json" "$cpu" "$redis_stats" "$WORK/running.txt" "$sync" "$rcpu" "$t0" "$t1" <<'PY'
import json, sys
running = [float(x) for x in open(sys.argv[4]).read().split() if x.strip()]
json.dump({"cpu": float(sys.argv[2]), "redis": json.loads(sys.argv[3]),
           "syncCpu": float(sys.argv[5]), "redisCpu": float(sys.argv[6]),
           "seconds": float(sys.argv[8]) - float(sys.argv[7]),
           "maxRunning": max(running) if running else 0,
           "overFraction": sum(1 for r in running if r > 4) / max(1, len(running))},
          open(sys.argv[1], "w"))
PY
  stop_all
}

for round in $(seq 1 "$ROUNDS"); do
  for mode in on off; do
    log "round $round, sharing $mode"
    run_once "$mode" "$round"
  done
done

python3 - "$OUT" "$ROUNDS" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
out, rounds, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
weights = {"a": 1, "b": 1, "c": 2}
def tokens(path):
    d = json.load(open(path))
    w = d["window"]
    secs = w["end"] - w["start"]
    return sum(f["outputTokensPerSecond"] for f in d["flows"]), d["totals"].get("lost", 0), secs
rows = {}
for mode in ("on", "off"):
    per = {k: [] for k in ("a", "b", "c", "total", "over", "overfrac", "cpu", "sync", "rcpu", "cmds", "bytes", "lost")}
    for r in range(1, rounds + 1):
        tag = f"{out}/{mode}-{r}"
        t = {}
        lost = 0
        for ten, files in (("a", ["a"]), ("b", ["b"]), ("c", ["c0", "c1", "c2"])):
            t[ten] = 0
            for f in files:
                tps, l, secs = tokens(f"{tag}-{f}.json")
                t[ten] += tps
                lost += l
        total = sum(t.values())
        for ten in weights:
            per[ten].append(t[ten] / total)
        per["total"].append(total)
        meta = json.load(open(f"{tag}-meta.json"))
        per["over"].append(meta["maxRunning"] - 4)
        per["overfrac"].append(meta["overFraction"])
        per["cpu"].append(meta["cpu"] / meta["seconds"])
        per["sync"].append(meta["syncCpu"] / meta["seconds"])
        per["rcpu"].append(meta["redisCpu"] / meta["seconds"])
        secs = meta["seconds"]  # the counters' window: warm-up and measured part
        per["cmds"].append(meta["redis"].get("total_commands_processed", 0) / secs)
        per["bytes"].append((meta["redis"].get("total_net_input_bytes", 0) + meta["redis"].get("total_net_output_bytes", 0)) / secs)
        per["lost"].append(lost)
    rows[mode] = {k: statistics.median(v) for k, v in per.items()}
print(f"fleet at {commit}: 3 replicas, 3 sluice-mock endpoints (sluice admits 4 each, 10 ms/token), "
      f"a only through replica 1, b only through 2, c through all; weights 1:1:2; medians of {rounds} interleaved rounds\n")
print("| sharing | a (target 0.25) | b (0.25) | c (0.50) | running over the limit of 4, most / share of samples | output tokens/s | sluice CPU, cores (3 replicas) | of which sync threads | redis-server CPU, cores | Redis commands/s | Redis bytes/s | requests lost |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for mode, name in (("on", "redis: (sluice)"), ("off", "none (each replica alone, as llm-d)")):
    r = rows[mode]
    print(f"| {name} | {r['a']:.3f} | {r['b']:.3f} | {r['c']:.3f} | {r['over']:+.0f} / {100 * r['overfrac']:.0f}% | {r['total']:.0f} | {r['cpu']:.3f} | {r['sync']:.3f} | {r['rcpu']:.3f} | {r['cmds']:.0f} | {r['bytes']:.0f} | {r['lost']:.0f} |")
if any(v > 0 for mode in rows for v in [rows[mode]["lost"]]):
    sys.exit("requests were lost")
PY
