#!/usr/bin/env bash
# Issue 13's priority run: does an interactive tenant on one replica stay
# protected while a batch flood comes in through the other two? Three
# sluice-mock endpoints (6 sequences each, 20 ms per token; sluice lets 4 in
# per endpoint), priority_flood/base.yaml (interactive priority 100, batch
# -10). The interactive tenant (priority-flood-solo.yaml, ~1.2 req/s,
# streaming) and a batch flood of 120 req/s (fleet-priority-batch.yaml twice)
# go through:
#   one    one sluice, everything through it (the reference: one replica)
#   on     three replicas sharing through redis-server; batch through
#          replicas 1 and 2, interactive through replica 3
#   off    the same three replicas, each on its own (as llm-d today)
#   solo   the interactive tenant alone through one sluice (its floor)
# each ROUNDS times, interleaved. Reports the interactive TTFT p50/p99 and
# its ratio to solo, the batch output tokens/s and outcomes, the pool's
# overshoot (requests an endpoint ran over the 4, polled every 20 ms) and
# requests without an answer.
#
#   bash bench/fleet_priority.sh [BUILD_DIR]   (DURATION=10s ROUNDS=1: smoke)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" redis-server redis-cli \
  curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release; scripts/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
OUT=${OUT:-$ROOT/bench/results/fleet-priority}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20s}
mkdir -p "$OUT"

load() {  # scenario port json
  "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/$1" --quiet \
    --target "http://127.0.0.1:$2" --duration "$DURATION" --json "$3" >/dev/null
}

run_once() {  # mode round
  local mode=$1 round=$2 i n=3
  local tag="$mode-$round"
  [[ $mode == one || $mode == solo ]] && n=1
  start_mocks "$BUILD" --max-running 6 --decode-ms-per-token 20
  [[ $mode == on ]] && start_redis
  local ports=() aports=()
  for ((i = 1; i <= n; i++)); do
    sluice_config "$ROOT/bench/priority_flood/base.yaml" "$WORK/r$i.yaml"
    if [[ $mode == on ]]; then
      printf 'redis:\n  unixSocket: %s\n  replicaId: r%s\n  syncInterval: 25ms\n' \
        "$WORK/redis.sock" "$i" >>"$WORK/r$i.yaml"
    fi
    : >"$WORK/r$i.out"  # emptied here: see wait_listening (bench/lib.sh)
    "$BUILD/sluice" --config "$WORK/r$i.yaml" >"$WORK/r$i.out" 2>"$WORK/r$i.err" &
    PIDS+=($!)
    ports+=("$(wait_listening "$WORK/r$i.out")")
    aports+=("$(admin_port "$WORK/r$i.out")")
  done
  [[ $mode == on ]] && wait_fleet 3 "${aports[@]}"
  poll_running >"$WORK/running.txt" 2>/dev/null &
  local poller=$! loads=()
  case $mode in
    solo)
      load priority-flood-solo.yaml "${ports[0]}" "$OUT/$tag-i.json" & loads+=($!) ;;
    one)
      load priority-flood-solo.yaml "${ports[0]}" "$OUT/$tag-i.json" & loads+=($!)
      load fleet-priority-batch.yaml "${ports[0]}" "$OUT/$tag-b1.json" & loads+=($!)
      load fleet-priority-batch.yaml "${ports[0]}" "$OUT/$tag-b2.json" & loads+=($!) ;;
    *)
      load priority-flood-solo.yaml "${ports[2]}" "$OUT/$tag-i.json" & loads+=($!)
      load fleet-priority-batch.yaml "${ports[0]}" "$OUT/$tag-b1.json" & loads+=($!)
      load fleet-priority-batch.yaml "${ports[1]}" "$OUT/$tag-b2.json" & loads+=($!) ;;
  esac
  for i in "${loads[@]}"; do wait "$i"; done
  kill "$poller" 2>/dev/null || true
  wait "$poller" 2>/dev/null || true
  python3 - "$OUT/$tag-meta.json" "$WORK/running.txt" <<'PY'
import json, sys
running = [float(x) for x in open(sys.argv[2]).read().split() if x.strip()]
json.dump({"maxRunning": max(running) if running else 0,
           "overFraction": sum(1 for r in running if r > 4) / max(1, len(running))},
          open(sys.argv[1], "w"))
PY
  stop_all
}

for round in $(seq 1 "$ROUNDS"); do
  for mode in solo one on off; do
    log "round $round, $mode"
    run_once "$mode" "$round"
  done
done

python3 - "$OUT" "$ROUNDS" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import json, os, statistics, sys
out, rounds, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def flow(path, name):
    for f in json.load(open(path))["flows"]:
        if f["name"] == name:
            return f
med = statistics.median
rows = {}
for mode in ("solo", "one", "on", "off"):
    per = {k: [] for k in ("p50", "p99", "n", "batch", "over", "overfrac", "lost")}
    outcomes = {}
    for r in range(1, rounds + 1):
        tag = f"{out}/{mode}-{r}"
        i = flow(f"{tag}-i.json", "interactive")
        per["p50"].append(i["ttftSeconds"]["p50"])
        per["p99"].append(i["ttftSeconds"]["p99"])
        per["n"].append(i["ttftSeconds"]["count"])
        tput, lost = 0, json.load(open(f"{tag}-i.json"))["totals"]["lost"]
        for b in ("b1", "b2"):
            if os.path.exists(f"{tag}-{b}.json"):
                d = json.load(open(f"{tag}-{b}.json"))
                f = flow(f"{tag}-{b}.json", "batch")
                tput += f["outputTokensPerSecond"]
                lost += d["totals"]["lost"]
                for k, v in f["outcomes"].items():
                    outcomes[k] = outcomes.get(k, 0) + v
        per["batch"].append(tput)
        per["lost"].append(lost)
        meta = json.load(open(f"{tag}-meta.json"))
        per["over"].append(meta["maxRunning"] - 4)
        per["overfrac"].append(meta["overFraction"])
    rows[mode] = {k: med(v) for k, v in per.items()}
    rows[mode]["outcomes"] = ", ".join(f"{k} {v // rounds}" for k, v in sorted(outcomes.items()))
    rows[mode]["lostmax"] = max(per["lost"])
solo = rows["solo"]["p99"]
print(f"fleet priority at {commit}: 3 sluice-mock endpoints (6 sequences, 20 ms/token; sluice admits 4 each); "
      f"interactive ~1.2 req/s streaming (priority 100) beside a batch flood of 120 req/s (priority -10); "
      f"medians of {rounds} interleaved rounds\n")
print("| setup | interactive TTFT p50 / p99 ms (answers) | p99 ÷ solo | batch output tokens/s | batch outcomes (per round) | running over the limit of 4, most / share of samples | requests without an answer (most in a round) |")
print("|---|---:|---:|---:|---|---:|---:|")
names = {"solo": "interactive alone, one sluice", "one": "one sluice, everything through it",
         "on": "3 replicas, redis: (batch via 1–2, interactive via 3)",
         "off": "3 replicas alone, as llm-d (same routing)"}
for mode in ("solo", "one", "on", "off"):
    r = rows[mode]
    ratio = f"{r['p99'] / solo:.2f}×" if solo > 0 else "–"  # a short smoke run may see no answer alone
    print(f"| {names[mode]} | {1000 * r['p50']:.0f} / {1000 * r['p99']:.0f} ({r['n']:.0f}) | {ratio} | "
          f"{r['batch']:.0f} | {r['outcomes'] or '–'} | {r['over']:+.0f} / {100 * r['overfrac']:.0f}% | {r['lostmax']:.0f} |")
if any(rows[m]["lostmax"] > 0 for m in rows):
    sys.exit("requests were lost")
PY
