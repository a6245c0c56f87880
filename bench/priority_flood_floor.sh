#!/usr/bin/env bash
# Where the interactive TTFT lost under bench/priority_flood.sh's flood goes,
# with sluice's best protection (headroom.overAdmission 1) in front: rounds
# of three interleaved runs — interactive alone (solo), beside the flood
# (flooded), and beside the same flood with one-token batch prompts (no batch
# prefill can share the interactive request's step). Prints each round and
# the median of the rounds as a Markdown table.
#
#   bash bench/priority_flood_floor.sh [BUILD_DIR]     (ROUNDS=2 by default)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
ROUNDS=${ROUNDS:-2}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make release)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
OUT=$ROOT/bench/results/priority-flood-floor
mkdir -p "$OUT"
rm -f "$OUT"/*.json

run() {  # tag scenario
  local tag=$1 scenario=$2
  start_mocks "$BUILD" --max-running 6 --decode-ms-per-token 20
  { cat "$ROOT/bench/priority_flood/base.yaml"
    echo "  headroom: {protectedPriority: 100, overAdmission: 1}"; } >"$WORK/template.yaml"
  sluice_config "$WORK/template.yaml" "$WORK/sluice.yaml"
  : >"$WORK/sluice.out"  # emptied here: see wait_listening (bench/lib.sh)
  "$BUILD/sluice" --config "$WORK/sluice.yaml" >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
  PIDS+=($!)
  local port
  port=$(wait_listening "$WORK/sluice.out")
  log "$tag"
  "$BUILD/sluice-load" --scenario "$scenario" --target "http://127.0.0.1:$port" --quiet \
    ${DURATION:+--duration "$DURATION"} --json "$OUT/$tag.json" >/dev/null
  stop_all
}

S=$ROOT/bench/scenarios
for r in $(seq 1 "$ROUNDS"); do
  run "solo-$r" "$S/priority-flood-solo.yaml"
  run "flooded-$r" "$S/priority-flood.yaml"
  run "tiny-$r" "$S/priority-flood-tiny-batch-prompts.yaml"
done

python3 - "$OUT" "$ROUNDS" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
out, rounds, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def ttft(tag):
    for f in json.load(open(f"{out}/{tag}.json"))["flows"]:
        if f["name"] == "interactive":
            t = f["ttftSeconds"]
            return t["p50"] * 1000, t["p90"] * 1000, t["p99"] * 1000, t["count"]
kinds = [("solo", "interactive alone"), ("flooded", "beside the flood"),
         ("tiny", "beside the flood, one-token batch prompts")]
print(f"priority-flood floor at {commit}, overAdmission 1, {rounds} interleaved rounds\n")
print("| interactive TTFT, ms | " + " | ".join(f"round {r} p50 / p90 / p99 (n)" for r in range(1, rounds + 1)) + " | median p50 / p99 |")
print("|---|" + "---:|" * (rounds + 1))
for k, label in kinds:
    cells, p50s, p99s = [], [], []
    for r in range(1, rounds + 1):
        p50, p90, p99, n = ttft(f"{k}-{r}")
        cells.append("%.0f / %.0f / %.0f (%d)" % (p50, p90, p99, n))
        p50s.append(p50)
        p99s.append(p99)
    print(f"| {label} | " + " | ".join(cells) + " | %.0f / %.0f |" % (statistics.median(p50s), statistics.median(p99s)))
PY
