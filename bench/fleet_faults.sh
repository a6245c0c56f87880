#!/usr/bin/env bash
# Issue 13's fault runs, on bench/fleet.sh's setup (three replicas sharing
# through redis-server, three sluice-mock endpoints that sluice fills to 4
# each, tenants a via replica 1, b via 2, c via all three — here through an
# HAProxy in front of them, as a Service would spread it (round robin, a
# health check every 100 ms, a refused connection retried on another
# replica) — all backlogged):
#   redis    redis-server SIGKILLed FAULT_AT into the load, restarted on the
#            same socket DOWN later
#   replica  replica 3 SIGKILLed FAULT_AT into the load (its lease: 2 s, the
#            default); what c had in flight there is cut (HAProxy answers
#            502) — counted apart
# each ROUNDS times, interleaved. Reports requests answered, requests
# without an answer through the replicas that stayed up (must be 0), the
# requests cut on the killed replica, the pool's in-flight requests (sum
# over the three mocks, polled every 20 ms) before / during / after the
# fault against the limit of 12, the most over the limit of 4 per
# endpoint, and how long until the pool was full again (replica) or every
# replica was back on the fleet view (redis).
#
#   bash bench/fleet_faults.sh [BUILD_DIR]   (DURATION=12s ROUNDS=1: smoke)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" redis-server redis-cli \
  curl python3 haproxy; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release; scripts/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
OUT=${OUT:-$ROOT/bench/results/fleet-faults}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20s}
FAULT_AT=${FAULT_AT:-10}  # seconds after the load starts (its warm-up is 5 s)
DOWN=${DOWN:-3}           # seconds redis-server stays down
mkdir -p "$OUT"

now() { date +%s.%N; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_haproxy() {  # the three replicas' ports; sets LB_PORT
  LB_PORT=$(free_port)
  cat >"$WORK/haproxy.cfg" <<CFG
global
    maxconn 1000
defaults
    mode http
    retries 3
    option redispatch 1
    timeout connect 1s
    timeout client 60s
    timeout server 60s
frontend fe
    bind 127.0.0.1:$LB_PORT
    default_backend fleet
backend fleet
    balance roundrobin
    server r1 127.0.0.1:$1 check inter 100ms fall 1 rise 2
    server r2 127.0.0.1:$2 check inter 100ms fall 1 rise 2
    server r3 127.0.0.1:$3 check inter 100ms fall 1 rise 2
CFG
  haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.out" 2>&1 &
  PIDS+=($!)
  local deadline=$((SECONDS + 10))
  until curl -s -o /dev/null "http://127.0.0.1:$LB_PORT/"; do
    (( SECONDS < deadline )) || { log "haproxy did not start"; cat "$WORK/haproxy.out" >&2; exit 1; }
    sleep 0.05
  done
}

run_once() {  # fault round
  local fault=$1 round=$2 i
  local tag="$fault-$round"
  start_mocks "$BUILD" --max-running 32 --decode-ms-per-token 10
  start_redis
  local ports=() spids=() aports=()
  for i in 1 2 3; do
    sluice_config "$ROOT/bench/fleet/base.yaml" "$WORK/r$i.yaml"
    printf 'redis:\n  unixSocket: %s\n  replicaId: r%s\n  syncInterval: 25ms\n  fairnessSlack: 256\n' \
      "$WORK/redis.sock" "$i" >>"$WORK/r$i.yaml"
    : >"$WORK/r$i.out"  # emptied here: see wait_listening (bench/lib.sh)
    "$BUILD/sluice" --config "$WORK/r$i.yaml" --admin-listen 127.0.0.1:0 \
      >"$WORK/r$i.out" 2>"$WORK/r$i.err" &
    PIDS+=($!)
    spids+=($!)
    ports+=("$(wait_listening "$WORK/r$i.out")")
    aports+=("$(admin_port "$WORK/r$i.out")")
  done
  wait_fleet 3 "${aports[@]}"
  start_haproxy "${ports[@]}"
  poll_running stamp >"$WORK/running.txt" 2>/dev/null &
  local poller=$! loads=()
  local start
  start=$(now)
  "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/fleet-a.yaml" --quiet \
    --target "http://127.0.0.1:${ports[0]}" --duration "$DURATION" --json "$OUT/$tag-a.json" >/dev/null &
  loads+=($!)
  "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/fleet-b.yaml" --quiet \
    --target "http://127.0.0.1:${ports[1]}" --duration "$DURATION" --json "$OUT/$tag-b.json" >/dev/null &
  loads+=($!)
  # c: the three replicas' worth of clients (3 x 8) through the balancer.
  "$BUILD/sluice-load" --scenario "$ROOT/bench/scenarios/fleet-c-lb.yaml" --quiet \
    --target "http://127.0.0.1:$LB_PORT" --duration "$DURATION" \
    --json "$OUT/$tag-c.json" >/dev/null &
  loads+=($!)
  # The fault, at a set time into the load (a schedule, not a wait for a
  # condition).
  sleep "$FAULT_AT"
  local fault_t back_t="" healed_t=""
  fault_t=$(now)
  if [[ $fault == redis ]]; then
    kill -KILL "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
    sleep "$DOWN"
    back_t=$(now)
    start_redis
    # Every replica back on the fleet view: connected, not degraded, and
    # seeing all three.
    local deadline=$((SECONDS + 15)) ok
    while (( SECONDS < deadline )); do
      ok=0
      for i in 0 1 2; do
        curl -s "http://127.0.0.1:${aports[$i]}/admin/v1/fleet" | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d["connected"] and not d["degraded"] and len(d["replicas"]) == 3 else 1)' && ok=$((ok + 1))
      done
      if (( ok == 3 )); then healed_t=$(now); break; fi
      sleep 0.02
    done
  else
    kill -KILL "${spids[2]}"
    wait "${spids[2]}" 2>/dev/null || true
  fi
  for i in "${loads[@]}"; do wait "$i" || true; done
  kill "$poller" 2>/dev/null || true
  wait "$poller" 2>/dev/null || true
  python3 - "$OUT/$tag-meta.json" "$WORK/running.txt" "$start" "$fault_t" "$back_t" "$healed_t" <<'PY'
import json, sys
meta, running, start, fault, back, healed = sys.argv[1:]
rows = []
for line in open(running):
    p = line.split()
    if len(p) == 4:
        rows.append((float(p[0]), [float(x) for x in p[1:]]))
json.dump({"rows": rows, "start": float(start), "fault": float(fault),
           "back": float(back) if back else None, "healed": float(healed) if healed else None},
          open(meta, "w"))
PY
  stop_all
}

for round in $(seq 1 "$ROUNDS"); do
  for fault in redis replica; do
    log "round $round, $fault"
    run_once "$fault" "$round"
  done
done

python3 - "$OUT" "$ROUNDS" "$(git -C "$ROOT" rev-parse --short HEAD)" "$DOWN" <<'PY'
import json, statistics, sys
out, rounds, commit, down = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
med = statistics.median
def load(path):
    return json.load(open(path))
def mean(xs): return sum(xs) / len(xs) if xs else float("nan")
table = []
bad = False
for fault in ("redis", "replica"):
    per = {k: [] for k in ("answered", "lost", "cut", "before", "during", "after", "over", "recover")}
    for r in range(1, rounds + 1):
        tag = f"{out}/{fault}-{r}"
        answered = lost = cut = 0
        for f in ("a", "b", "c"):
            d = load(f"{tag}-{f}.json")
            answered += d["totals"]["ok"]
            for flow in d["flows"]:
                for k, v in flow["outcomes"].items():
                    if k == "200":
                        continue
                    # What was in flight on the killed replica: HAProxy's 502.
                    if fault == "replica" and f == "c" and k.startswith("502"):
                        cut += v
                    else:
                        lost += v
        m = load(f"{tag}-meta.json")
        rows, fault_t = m["rows"], m["fault"]
        pool = [(t, sum(v)) for t, v in rows]
        warm = m["start"] + 5
        before = [s for t, s in pool if warm <= t < fault_t]
        if fault == "redis":
            end_fault = m["back"] or fault_t
            during = [s for t, s in pool if fault_t <= t < end_fault]
            after_from = m["healed"] or end_fault
            recover = (m["healed"] - m["back"]) if m["healed"] and m["back"] else float("nan")
        else:
            # Until the pool is full again: the first poll from which the
            # next 0.5 s average is at least 95% of the pre-fault average.
            recover = float("nan")
            ref = mean(before)
            for i, (t, s) in enumerate(pool):
                if t < fault_t:
                    continue
                win = [x for tt, x in pool[i:] if tt < t + 0.5]
                if win and mean(win) >= 0.95 * ref:
                    recover = t - fault_t
                    break
            end_fault = fault_t + (recover if recover == recover else 0)
            during = [s for t, s in pool if fault_t <= t < end_fault]
            after_from = end_fault
        last = max(t for t, _ in pool) if pool else 0
        after = [s for t, s in pool if after_from <= t < last - 1]
        over = max((max(v) for t, v in rows if t >= m["start"]), default=0) - 4
        for k, v in (("answered", answered), ("lost", lost), ("cut", cut), ("before", mean(before)),
                     ("during", mean(during)), ("after", mean(after)), ("over", over), ("recover", recover)):
            per[k].append(v)
        bad = bad or lost > 0
    table.append((fault, {k: med(v) for k, v in per.items()}, max(per["lost"]), max(per["cut"])))
print(f"fleet faults at {commit}: bench/fleet.sh's setup (3 replicas + redis-server, 3 mocks filled to 4 each = 12), "
      f"fault 10 s into the load (5 s warm-up), medians of {rounds} interleaved rounds\n")
print("| fault | requests answered | without an answer or failed, through the replicas that stayed up (most in a round) | cut on the killed replica (in flight there) | pool in flight (of 12): before / during / after | most over the limit of 4 per endpoint | back to normal after |")
print("|---|---:|---:|---:|---:|---:|---|")
for fault, r, lostmax, cutmax in table:
    name = f"redis-server SIGKILLed, restarted {down:.0f} s later" if fault == "redis" else "replica 3 SIGKILLed (lease 2 s)"
    rec = (f"{r['recover']:.2f} s from the restart until all 3 are back on the fleet view" if fault == "redis"
           else f"{r['recover']:.2f} s from the kill until the pool is full (≥ 95% of before)")
    print(f"| {name} | {r['answered']:.0f} | {lostmax} | {r['cut']:.0f} | {r['before']:.1f} / {r['during']:.1f} / {r['after']:.1f} | {r['over']:+.0f} | {rec} |")
if bad:
    sys.exit("requests were lost through a replica that stayed up")
PY
