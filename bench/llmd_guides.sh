#!/usr/bin/env bash
# Routing quality, end to end (issue 40, "Measured"): llm-d's
# optimized-baseline profile against sluice's default profile, on a pool of
# sluice-mock endpoints with a prefix cache, under a shared-prefix chat
# workload (streamed, so TTFT is measured). Rounds are interleaved
# (A, B, A, B ...), every process is started fresh for each run (cold caches
# in every run alike), and the table holds each figure's median over the
# rounds. Prints a markdown table and writes it to $OUT.
#
#   bash bench/llmd_guides.sh [BUILD_DIR]        (default build/release)
#
# Knobs (env): DURATION=30 (s of arrivals), WARMUP=10 (s, excluded from
# TTFT), ROUNDS=3, MOCKS=8, RATE=48 (requests/s, Poisson), PREFIXES=32
# (shared system prompts), PREFIX_TOKENS=2048, PROMPT_MIN=2300,
# PROMPT_MAX=2600, MAX_TOKENS=32, PROFILES="default guide perf",
# MOCK_ARGS (default: 8 sequences, 100 us/token prefill, 5 ms per decode
# step, a KV cache of 32768 tokens), OUT=bench/results/llmd_guides.md.
#
# Profiles: default = sluice with no schedulingProfiles (queue-scorer 2,
# kv-cache-utilization-scorer 2, prefix-cache-scorer 3, max-score-picker);
# guide = llm-d/llm-d guides/optimized-baseline/router/
# optimized-baseline.values.yaml (prefix-cache-affinity-filter before
# token-load-scorer); perf = llm-d-router's test/perf optimized-baseline
# (test/fixtures/llmd/optimized-baseline.yaml: queue 2, kv 2, prefix 3,
# no-hit-lru 2).
#
# Prefix-cache hit rate = the mocks' mock_prefix_cache_hit_tokens_total /
# the prompt tokens of every answered request, over the whole run (warm-up
# included). Requests per endpoint: served requests by
# x-gateway-destination-endpoint-served, whole run.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
DURATION=${DURATION:-30}
WARMUP=${WARMUP:-10}
ROUNDS=${ROUNDS:-3}
MOCKS=${MOCKS:-8}
RATE=${RATE:-48}
PREFIXES=${PREFIXES:-32}
PREFIX_TOKENS=${PREFIX_TOKENS:-2048}
PROMPT_MIN=${PROMPT_MIN:-2300}
PROMPT_MAX=${PROMPT_MAX:-2600}
MAX_TOKENS=${MAX_TOKENS:-32}
PROFILES=${PROFILES:-default guide perf}
read -r -a MOCK_ARGV <<<"${MOCK_ARGS:---max-running 8 --prefill-us-per-token 100 --decode-ms-per-token 5 --kv-capacity-tokens 32768}"
OUT=${OUT:-$ROOT/bench/results/llmd_guides.md}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" python3 curl; do
  command -v "$tool" >/dev/null || { echo "llmd_guides: missing $tool" >&2; exit 1; }
done

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
mkdir -p "$WORK/runs" "$(dirname "$OUT")"

cat >"$WORK/scenario.yaml" <<EOF
name: llmd-guides-shared-prefix
duration: ${DURATION}s
warmup: ${WARMUP}s
maxRequests: 100000
timeout: 60s
path: /v1/chat/completions
sharedPrefixes: {count: $PREFIXES, tokens: $PREFIX_TOKENS}
flows:
  - name: chat
    arrival: {type: poisson, rate: $RATE}
    promptTokens: {type: uniform, min: $PROMPT_MIN, max: $PROMPT_MAX}
    maxTokens: $MAX_TOKENS
    sharedPrefixShare: 0.9
    stream: true
EOF

# profile_plugins NAME: the plugins and profile of a profile (none for
# sluice's default).
profile_plugins() {
  case $1 in
    default) ;;
    guide)
      cat <<'EOF'
plugins:
- type: token-load-scorer
- type: inflight-load-producer
- type: approx-prefix-cache-producer
  parameters:
    maxPrefixTokensToMatch: 40960
- type: prefix-cache-affinity-filter
  parameters:
    affinityThreshold: 0.80
    maxTokensInFlightPenalty: 286720
    maxTTFTPenaltyMs: 0
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-affinity-filter
  - pluginRef: token-load-scorer
EOF
      ;;
    perf) sed -n '/^plugins:/,$p' "$ROOT/test/fixtures/llmd/optimized-baseline.yaml" ;;
    *) log "unknown profile $1 (default, guide, perf)"; return 1 ;;
  esac
}

# run_one PROFILE ROUND: fresh mocks and sluice, the scenario, the mocks'
# counters; leaves $WORK/runs/PROFILE.ROUND.{json,requests,mocks}.
run_one() {
  local profile=$1 round=$2 i port base=$WORK/runs/$1.$2
  M=()
  for ((i = 1; i <= MOCKS; i++)); do
    : >"$WORK/mock$i.out"
    "$BUILD/sluice-mock" --listen 127.0.0.1:0 "${MOCK_ARGV[@]}" --seed "$i" \
      >"$WORK/mock$i.out" 2>"$WORK/mock$i.err" &
    PIDS+=($!)
    M+=("$(wait_listening "$WORK/mock$i.out")")
  done
  {
    printf 'apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n'
    printf 'server:\n  listen: 127.0.0.1:0\n  threads: 2\nendpoints:\n'
    for port in "${M[@]}"; do printf '  - address: 127.0.0.1:%s\n' "$port"; done
    profile_plugins "$profile"
  } >"$WORK/sluice.yaml"
  : >"$WORK/sluice.out"
  "$BUILD/sluice" --config "$WORK/sluice.yaml" >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
  PIDS+=($!)
  port=$(wait_listening "$WORK/sluice.out")
  log "round $round, $profile: sluice on $port, $MOCKS mocks, ${DURATION}s at $RATE/s"
  "$BUILD/sluice-load" --scenario "$WORK/scenario.yaml" --target "http://127.0.0.1:$port" --quiet \
    --json "$base.json" --requests "$base.requests" >"$base.load.out" 2>&1 ||
    { log "sluice-load failed"; cat "$base.load.out" >&2; return 1; }
  : >"$base.mocks"
  for port in "${M[@]}"; do
    curl -sf "http://127.0.0.1:$port/metrics" |
      awk -v p="127.0.0.1:$port" '$1 == "mock_prefix_cache_hit_tokens_total" { print p, $2 }' >>"$base.mocks"
  done
  stop_all
}

for ((r = 1; r <= ROUNDS; r++)); do
  for profile in $PROFILES; do run_one "$profile" "$r"; done
done

python3 - "$WORK/runs" "$OUT" "$ROUNDS" "$MOCKS" "$PROFILES" <<'PY'
import collections, json, statistics, sys
runs, out, rounds, mocks, profiles = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
label = {"default": "sluice default (queue 2, kv-cache 2, prefix-cache 3)",
         "guide": "llm-d optimized-baseline guide (prefix-cache-affinity-filter, token-load-scorer)",
         "perf": "llm-d optimized-baseline, perf config (queue 2, kv-cache 2, prefix-cache 3, no-hit-lru 2)"}
def one(profile, r):
    base = f"{runs}/{profile}.{r}"
    rep = json.load(open(base + ".json"))
    flow = rep["flows"][0]
    hits = {}
    for line in open(base + ".mocks"):
        addr, v = line.split()
        hits[addr] = float(v)
    served = collections.Counter()
    prompt = 0
    for line in open(base + ".requests"):
        q = json.loads(line)
        if q["status"] == 200:
            served[q.get("endpoint", "?")] += 1
            prompt += q["inputTokens"]
    if len(hits) != mocks:
        sys.exit(f"llmd_guides: {base}: counters of {len(hits)} mocks, not {mocks}")
    if flow["ttftSeconds"]["count"] == 0 or prompt == 0:
        sys.exit(f"llmd_guides: {base}: no TTFT or no prompt tokens measured")
    counts = sorted((served.get(a, 0) for a in hits), reverse=True)
    t = rep["totals"]
    return {"p50": flow["ttftSeconds"]["p50"] * 1000, "p99": flow["ttftSeconds"]["p99"] * 1000,
            "hit": sum(hits.values()) / prompt, "ok": t["ok"], "bad": t["errors"] + t["lost"] + t["shed"],
            "sent": t["sent"], "counts": counts}
res = {p: [one(p, r) for r in range(1, rounds + 1)] for p in profiles}
med = statistics.median
lines = ["| profile | TTFT p50 (ms) | TTFT p99 (ms) | prefix-cache hit rate | requests per endpoint (most to fewest) | served / sent | not served |",
         "|---|---:|---:|---:|---|---:|---:|"]
for p in profiles:
    rs = res[p]
    counts = [round(med([x["counts"][i] for x in rs])) for i in range(mocks)]
    lines.append(f"| {label[p]} | {med([x['p50'] for x in rs]):.0f} | {med([x['p99'] for x in rs]):.0f} | "
                 f"{med([x['hit'] for x in rs]) * 100:.1f}% | {' / '.join(map(str, counts))} | "
                 f"{med([x['ok'] for x in rs]):.0f} / {med([x['sent'] for x in rs]):.0f} | {med([x['bad'] for x in rs]):.0f} |")
lines.append("")
lines.append("Per round (TTFT p50 / p99 ms, hit rate):")
lines.append("")
for p in profiles:
    lines.append(f"- {p}: " + "; ".join(f"{x['p50']:.0f} / {x['p99']:.0f}, {x['hit'] * 100:.1f}%" for x in res[p]))
table = "\n".join(lines)
open(out, "w").write(table + "\n")
print(table)
PY
log "written to $OUT"
