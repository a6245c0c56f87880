#!/usr/bin/env bash
# Issue 12's benchmark: how well each protection keeps an interactive tenant
# unhurt by a batch flood, and what it costs the batch tenant when it is
# alone. For each variant (priority_flood/base.yaml plus its lines), three
# runs through sluice and three fresh sluice-mock endpoints (6 sequences
# each, 20 ms per token; sluice lets 4 in per endpoint unless a variant says
# otherwise): the interactive tenant alone (solo), beside the flood
# (flooded), and the batch tenant alone (batch). Prints a Markdown table.
#
#   bash bench/priority_flood.sh [BUILD_DIR]     (DURATION=10s shortens runs)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
OUT=$ROOT/bench/results/priority-flood
mkdir -p "$OUT"

# name | lines under flowControl: | endpoint line | maxConcurrency | mock args
VARIANTS=(
  "none||||"
  "holdback (minCeiling 0.75)|  usageLimitPolicyPluginRef: holdback|||"
  "soft-reflective|  usageLimitPolicyPluginRef: soft-reflective-ceiling-policy|||"
  "headroom (reserve 1, lent while idle)|  headroom: {protectedPriority: 100, reserve: 1, lendAfterIdle: 5s}|||"
  "over-admission 1|  headroom: {protectedPriority: 100, overAdmission: 1}|||"
  "eviction|  enableEviction: true|||"
  "none, 8 into each engine (fcfs engine)|||8|"
  "engine priority (8 into each engine)||    schedulingPolicy: priority|8|--scheduling-policy priority"
  "headroom + over-admission + eviction|  headroom: {protectedPriority: 100, reserve: 1, lendAfterIdle: 5s, overAdmission: 1}\n  enableEviction: true|||"
  "reserved endpoint (1, lent after 5 s idle)|  headroom: {protectedPriority: 100, reserveEndpoints: 1, lendAfterIdle: 5s}|||"
  "reserved endpoint + over-admission 1|  headroom: {protectedPriority: 100, reserveEndpoints: 1, lendAfterIdle: 5s, overAdmission: 1}|||"
  "engine priority + over-admission 1 (8 into each engine)|  headroom: {protectedPriority: 100, overAdmission: 1}|    schedulingPolicy: priority|8|--scheduling-policy priority"
  "reserved endpoints (2) + over-admission 1|  headroom: {protectedPriority: 100, reserveEndpoints: 2, lendAfterIdle: 5s, overAdmission: 1}|||"
)
# ONLY="0 4 10" runs those variants alone (the first listed is the
# throughput baseline).
SELECTED=(${ONLY:-${!VARIANTS[@]}})
# PIN_SLUICE=0 PIN_OTHERS=1: sluice alone on the first CPU list, the mocks
# and the load driver (this script's children) on the second — to tell the
# gateway's share of the flooded TTFT from CPU contention with them.
SLUICE_PIN=()
if [[ -n ${PIN_SLUICE:-} ]]; then
  [[ -n ${PIN_OTHERS:-} ]] || { echo "PIN_SLUICE needs PIN_OTHERS" >&2; exit 1; }
  taskset -pc "$PIN_OTHERS" $$ >/dev/null
  SLUICE_PIN=(taskset -c "$PIN_SLUICE")
fi
# ISOLATE=1: the interactive tenant's own path on CPU 0 — sluice, the
# pool's last endpoint (or the last N a variant's reserveEndpoints: N keeps
# for it) and an interactive-only driver — and the flood's on CPU 1: the
# other mocks and a driver sending only the flood. In production the
# tenants' clients and engines are different machines and only the gateway
# is shared; on two cores this is the nearest to that, so what the flood
# adds to the interactive TTFT is what it does through sluice (and through
# the engines for requests that land on a busy one).
ISOLATE=${ISOLATE:-}
if [[ -n $ISOLATE ]]; then
  [[ -z ${PIN_SLUICE:-} ]] || { echo "ISOLATE and PIN_SLUICE exclude each other" >&2; exit 1; }
  SLUICE_PIN=(taskset -c 0)
fi

# SEED=N: the scenarios' arrivals and sizes drawn from seed N (sluice-load's
# `seed:`, 1 unless set). Every run of one invocation uses the same seed, so
# solo and flooded see the same interactive arrivals; rounds with different
# seeds sample different ones.
seeded() {  # scenario file -> the file to run
  if [[ -z ${SEED:-} ]]; then echo "$1"; return; fi
  # A second `seed:` would be a duplicate key, which sluice-load refuses.
  if grep -q '^seed:' "$1"; then echo "$1 has its own seed: SEED cannot apply" >&2; exit 1; fi
  local out=$WORK/$(basename "$1" .yaml).seed$SEED.yaml
  { cat "$1"; echo "seed: $SEED"; } >"$out"
  echo "$out"
}

# sluice-load for `kind` (solo, flooded or batch) against port $1, its
# report in $OUT/$i-$kind.json. Isolated, a flooded run is two drivers: the
# interactive tenant on CPU 0 and the flood on CPU 1 (its report in
# $OUT/$i-flooded-flood.json), started together with the same duration and
# warmup, so their measured windows coincide.
drive() {  # port index kind scenario
  local port=$1 i=$2 kind=$3 scenario
  scenario=$(seeded "$4")
  local load=("$BUILD/sluice-load" --target "http://127.0.0.1:$port" --quiet ${DURATION:+--duration "$DURATION"})
  if [[ -z $ISOLATE ]]; then
    "${load[@]}" --scenario "$scenario" --json "$OUT/$i-$kind.json" \
      --requests "$OUT/$i-$kind.requests.jsonl" >/dev/null
    return
  fi
  case $kind in
    solo | batch)
      taskset -c "$([[ $kind == solo ]] && echo 0 || echo 1)" "${load[@]}" --scenario "$scenario" \
        --json "$OUT/$i-$kind.json" --requests "$OUT/$i-$kind.requests.jsonl" >/dev/null
      ;;
    flooded)
      python3 - "$scenario" "$WORK/flood-only.yaml" <<'PY'
import re, sys
# The scenario without its interactive flow (a list item up to the next).
text = open(sys.argv[1]).read()
text, n = re.subn(r"(?ms)^  - name: interactive\n.*?(?=^  - name: )", "", text)
assert n == 1, "no interactive flow in " + sys.argv[1]
open(sys.argv[2], "w").write(text.replace("name: priority-flood", "name: priority-flood-flood-only", 1))
PY
      taskset -c 1 "${load[@]}" --scenario "$WORK/flood-only.yaml" --json "$OUT/$i-flooded-flood.json" \
        --requests "$OUT/$i-flooded-flood.requests.jsonl" >/dev/null &
      local flood=$!
      taskset -c 0 "${load[@]}" --scenario "$(seeded "$ROOT/bench/scenarios/priority-flood-solo.yaml")" \
        --json "$OUT/$i-flooded.json" --requests "$OUT/$i-flooded.requests.jsonl" >/dev/null
      wait "$flood"
      ;;
  esac
}

run_variant() {  # index name flow_lines endpoint_line max_concurrency mock_args
  local i=$1 name=$2 flow=$3 ep=$4 conc=${5:-4} margs=$6 kind
  for kind in solo flooded batch; do
    local scenario=$ROOT/bench/scenarios/priority-flood.yaml
    [[ $kind == solo ]] && scenario=$ROOT/bench/scenarios/priority-flood-solo.yaml
    [[ $kind == batch ]] && scenario=$ROOT/bench/scenarios/priority-flood-batch.yaml
    # shellcheck disable=SC2086
    start_mocks "$BUILD" --max-running 6 --decode-ms-per-token 20 $margs
    if [[ -n $ISOLATE ]]; then
      # The reserved endpoints are the pool's last ones (at least one).
      local lane=1 m
      [[ $flow =~ reserveEndpoints:\ ([0-9]+) ]] && lane=${BASH_REMATCH[1]}
      for m in 0 1 2; do
        taskset -apc "$(( m >= 3 - lane ? 0 : 1 ))" "${PIDS[m]}" >/dev/null
      done
    fi
    python3 - "$ROOT/bench/priority_flood/base.yaml" "$WORK/template.yaml" "$flow" "$ep" "$conc" <<'PY'
import sys
src, out, flow, ep, conc = sys.argv[1:]
text = open(src).read().replace("maxConcurrency: 4", "maxConcurrency: " + conc)
if ep:
    lines = []
    for line in text.splitlines(keepends=True):
        lines.append(line)
        if line.startswith("  - address: 127.0.0.1:1800"):
            lines.append(ep + "\n")
    text = "".join(lines)
if flow:
    text += flow.replace("\\n", "\n") + "\n"
open(out, "w").write(text)
PY
    sluice_config "$WORK/template.yaml" "$WORK/sluice.yaml"
    # sluice appends to an access log: a previous run's lines would count.
    rm -f "$OUT/$i-$kind.access.log"
    : >"$WORK/sluice.out"  # emptied here: see wait_listening (bench/lib.sh)
    "${SLUICE_PIN[@]}" "$BUILD/sluice" --config "$WORK/sluice.yaml" --access-log "$OUT/$i-$kind.access.log" \
      >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
    PIDS+=($!)
    local port
    port=$(wait_listening "$WORK/sluice.out")
    log "[$name] $kind"
    drive "$port" "$i" "$kind" "$scenario"
    stop_all
  done
}

ARGS=()
for i in "${SELECTED[@]}"; do
  IFS='|' read -r name flow ep conc margs <<<"${VARIANTS[$i]}"
  run_variant "$i" "$name" "$flow" "$ep" "$conc" "$margs"
  ARGS+=("$i|${VARIANTS[$i]}")
done

python3 - "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" "${ARGS[@]}" <<'PY'
import json, os, sys
out, commit, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
def flow(path, name):
    for f in json.load(open(path))["flows"]:
        if f["name"] == name:
            return f
def ms(x): return "%.0f" % (x * 1000)
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
def queue_ms(path, window):
    # sluice's own share of the interactive TTFT: its queue wait (access
    # log), for requests that arrived in the driver's measured window (the
    # first arrival stands for the driver's start: the flood sends at once).
    from datetime import datetime
    recs = []
    for line in open(path):
        r = json.loads(line)
        end = datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp()
        recs.append((end - r["total_ms"] / 1000, r))
    t0 = min(t for t, _ in recs)
    waits = [r["queue_ms"] for t, r in recs
             if r.get("objective") == "interactive" and r.get("outcome") == "served"
             and window["start"] <= t - t0 < window["end"]]
    return "%.1f / %.1f (%d)" % (pct(waits, 0.5), pct(waits, 0.99), len(waits))
base_batch = None
rows = []
for v in variants:
    i, name = v.split("|")[:2]
    solo = flow(f"{out}/{i}-solo.json", "interactive")
    fl = flow(f"{out}/{i}-flooded.json", "interactive")
    flood = f"{out}/{i}-flooded-flood.json" if os.environ.get("ISOLATE") else f"{out}/{i}-flooded.json"
    fb = flow(flood, "batch")
    b = flow(f"{out}/{i}-batch.json", "batch")
    tput = b["outputTokensPerSecond"]
    if base_batch is None: base_batch = tput
    kinds = ("solo", "flooded", "batch") + (("flooded-flood",) if os.environ.get("ISOLATE") else ())
    lost = sum(json.load(open(f"{out}/{i}-{k}.json"))["totals"]["lost"] for k in kinds)
    n = fl["ttftSeconds"]["count"]
    rows.append("| %s | %s / %s | %s / %s (%d) | %s | %s / %s | %.2f× | %.0f | %.0f (%.0f%%) | %s | %d |" % (
        name, ms(solo["ttftSeconds"]["p50"]), ms(solo["ttftSeconds"]["p99"]),
        ms(fl["ttftSeconds"]["p50"]), ms(fl["ttftSeconds"]["p99"]), n,
        queue_ms(f"{out}/{i}-flooded.access.log", json.load(open(f"{out}/{i}-flooded.json"))["window"]),
        ms(fl["latencySeconds"]["p50"]), ms(fl["latencySeconds"]["p99"]),
        fl["ttftSeconds"]["p99"] / max(solo["ttftSeconds"]["p99"], 1e-9),
        fb["outputTokensPerSecond"], tput, 100 * tput / base_batch, ", ".join("%s %d" % kv for kv in sorted(fb["outcomes"].items())), lost))
pin = os.environ.get("PIN_SLUICE")
if pin: print(f"pinned: sluice on CPU {pin}, mocks and driver on CPU {os.environ.get('PIN_OTHERS')}")
if os.environ.get("ISOLATE"): print("isolated: sluice, the reserved endpoints' mocks (the last one where none is reserved) and the interactive driver on CPU 0; the other mocks and the flood's driver on CPU 1")
if os.environ.get("SEED"): print(f"scenarios' seed: {os.environ['SEED']}")
print(f"priority-flood at {commit} (3 sluice-mock endpoints, 6 sequences each, 20 ms/token; sluice admits 4 per endpoint unless noted)\n")
print("| protection | interactive TTFT p50 / p99 ms, solo | TTFT p50 / p99, flooded (answers) | of which queued in sluice, p50 / p99 ms (requests) | e2e p50 / p99, flooded | flooded ÷ solo TTFT p99 | batch output tokens/s, flooded | batch alone, output tokens/s (vs the first row) | batch outcomes, flooded | requests without an answer |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
print("\n".join(rows))
PY
