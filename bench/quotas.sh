#!/usr/bin/env bash
# Issue 41's benchmark: quotas across a fleet. Three sluice replicas, one
# sluice-mock (1 ms per output token), two tenants with 100k tokens a
# minute each: `hot` at twice its limit (about 500 tokens a request, half
# of them streamed), its clients spread 70/20/10 over the replicas; `cool`
# at about a third of its limit, through replica 1. Four runs, one after
# another:
#   lease    the replicas share the limits through a redis-server (leases)
#   local    the same, Redis killed once the fleet has formed and leased:
#            quota.failMode local (each replica a third of each limit)
#   alone    no Redis: each replica holds the whole limit (LiteLLM's case)
#   lease2x  as lease, hot at four times its limit (Redis commands per
#            second should not move with the request rate)
# Reports per run, from the replicas' access logs: hot's tokens served in
# each clock minute after the first (its usage: what the books charged)
# and in the worst trailing minute, against the limit; cool's 429s; the
# requests that waited for a lease (sluice_quota_lease_waits_total); Redis
# commands per second. bench/quotas_table.py renders the table.
#
#   bash bench/quotas.sh [BUILD_DIR]     (DURATION=70s for a smoke run)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" redis-server redis-cli \
  curl python3 sha256sum; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release; scripts/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
OUT=${OUT:-$ROOT/bench/results/quotas}
DURATION=${DURATION:-190s}
RUNS=${RUNS:-lease local alone lease2x}
mkdir -p "$OUT"

HOT=sk-sluice-benchhot0123456789abcdefghijkl
COOL=sk-sluice-benchcool0123456789abcdefghijk
cat >"$WORK/keys.yaml" <<KEYS
keys:
  - {id: key_hot, tenant: hot, sha256: $(printf %s "$HOT" | sha256sum | cut -d' ' -f1)}
  - {id: key_cool, tenant: cool, sha256: $(printf %s "$COOL" | sha256sum | cut -d' ' -f1)}
KEYS

# hot's per-flow rate on each replica: 70/20/10 of 2x (or 4x) 100k tokens a
# minute at 500 tokens a request, two flows a replica.
rates() {  # factor
  python3 -c "
f=$1; total=f*100000/60/500
print(' '.join('%.3f' % (total*s/2) for s in (0.7, 0.2, 0.1)))"
}

run_once() {  # name
  local name=$1 i
  rm -f "$WORK"/r*.log
  start_mocks_one
  local with_redis=1
  [[ $name == alone ]] && with_redis=0
  (( with_redis )) && start_redis
  local ports=() aports=()
  for i in 1 2 3; do
    sed -e "s/127.0.0.1:18001/127.0.0.1:$MOCK/" -e "s|KEYFILE|$WORK/keys.yaml|" \
      -e "s|ACCESSLOG|$WORK/r$i.log|" "$ROOT/bench/quotas/base.yaml" >"$WORK/r$i.yaml"
    printf 'quota:\n  failMode: local\n' >>"$WORK/r$i.yaml"
    if (( with_redis )); then
      printf 'redis:\n  unixSocket: %s\n  replicaId: r%s\n  syncInterval: 25ms\n  lease: 2s\n' \
        "$WORK/redis.sock" "$i" >>"$WORK/r$i.yaml"
    fi
    : >"$WORK/r$i.out"
    "$BUILD/sluice" --config "$WORK/r$i.yaml" --admin-listen 127.0.0.1:0 \
      >"$WORK/r$i.out" 2>"$WORK/r$i.err" &
    PIDS+=($!)
    ports+=("$(wait_listening "$WORK/r$i.out")")
    aports+=("$(admin_port "$WORK/r$i.out")")
  done
  (( with_redis )) && wait_fleet 3 "${aports[@]}"
  local factor=2
  [[ $name == lease2x ]] && factor=4
  read -r -a rate <<<"$(rates $factor)"
  local t0 c0=0 c1=0 loads=()
  t0=$(date +%s.%N)
  (( with_redis )) && c0=$(redis-cli -s "$WORK/redis.sock" info stats | tr -d '\r' |
    sed -n 's/^total_commands_processed://p')
  for i in 0 1 2; do
    sed -e "s/HOTKEY/$HOT/" -e "s/RATE/${rate[$i]}/" "$ROOT/bench/quotas/hot.yaml" >"$WORK/hot$i.yaml"
    "$BUILD/sluice-load" --scenario "$WORK/hot$i.yaml" --quiet --target "http://127.0.0.1:${ports[$i]}" \
      --duration "$DURATION" --json "$OUT/$name-hot$i.json" >/dev/null &
    loads+=($!)
  done
  sed -e "s/COOLKEY/$COOL/" "$ROOT/bench/quotas/cool.yaml" >"$WORK/cool.yaml"
  "$BUILD/sluice-load" --scenario "$WORK/cool.yaml" --quiet --target "http://127.0.0.1:${ports[0]}" \
    --duration "$DURATION" --json "$OUT/$name-cool.json" >/dev/null &
  loads+=($!)
  if [[ $name == local ]]; then
    # The fleet leases for 20 s, then Redis goes: after a lease (2 s) each
    # replica holds a third of each limit.
    sleep 20
    kill -KILL "$REDIS_PID"
  fi
  for i in "${loads[@]}"; do wait "$i"; done
  local t1
  t1=$(date +%s.%N)
  if (( with_redis )) && [[ $name != local ]]; then
    c1=$(redis-cli -s "$WORK/redis.sock" info stats | tr -d '\r' |
      sed -n 's/^total_commands_processed://p')
  fi
  local waits=0 m
  for i in 0 1 2; do
    m=$(curl -s "http://127.0.0.1:${aports[$i]}/metrics" |
      sed -n 's/^sluice_quota_lease_waits_total{tenant="hot",quota="tpm"} //p')
    waits=$((waits + ${m:-0}))
  done
  python3 - "$t0" "$t1" "$c0" "$c1" "$waits" "$name" "$WORK"/r1.log "$WORK"/r2.log "$WORK"/r3.log \
    >"$OUT/$name.json" <<'PY'
import json, sys, datetime
t0, t1, c0, c1, waits, name = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
served = {}   # second since t0 -> hot's tokens
hot_requests = hot_429 = cool_429 = cool_requests = 0
for path in sys.argv[7:]:
    for line in open(path):
        r = json.loads(line)
        ts = datetime.datetime.strptime(r["ts"].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        if r.get("tenant") == "hot":
            hot_requests += 1
            if r["status"] == 429: hot_429 += 1
            if r["status"] == 200:
                s = int(ts - t0)
                served[s] = served.get(s, 0) + r["input_tokens"] + r["output_tokens"]
        elif r.get("tenant") == "cool":
            cool_requests += 1
            if r["status"] == 429: cool_429 += 1
end = int(t1 - t0)
minutes = [sum(served.get(s, 0) for s in range(m * 60, m * 60 + 60)) for m in range(1, end // 60)]
trailing = [sum(served.get(s, 0) for s in range(a, a + 60)) for a in range(0, max(1, end - 59))]
print(json.dumps({"run": name, "limit": 100000, "minutes": minutes,
                  "worst_trailing_minute": max(trailing) if trailing else 0,
                  "hot_requests": hot_requests, "hot_429": hot_429,
                  "cool_requests": cool_requests, "cool_429": cool_429,
                  "lease_waits": waits,
                  "redis_commands_per_s": (c1 - c0) / (t1 - t0) if c1 else None}))
PY
  log "$name: $(cat "$OUT/$name.json")"
  stop_all
}

start_mocks_one() {
  : >"$WORK/mock.out"
  "$BUILD/sluice-mock" --listen 127.0.0.1:0 --max-running 256 --decode-ms-per-token 1 --seed 1 \
    >"$WORK/mock.out" 2>"$WORK/mock.err" &
  PIDS+=($!)
  MOCK=$(wait_listening "$WORK/mock.out")
}

for run in $RUNS; do run_once "$run"; done
python3 "$ROOT/bench/quotas_table.py" "$OUT" | tee "$OUT/table.md"
