#!/usr/bin/env bash
# Runs one scenario through sluice in front of three sluice-mock endpoints
# and keeps its reports.
#
#   bash bench/run_scenario.sh SCENARIO [SLUICE_CONFIG] [BUILD_DIR]
#
# SCENARIO: a file in bench/scenarios/ (or any). SLUICE_CONFIG: a config
# written for endpoints 127.0.0.1:18001-18003 (default: the scenario's
# *.sluice.yaml next to it if there is one, else config/demo.yaml); the
# ports are rewritten to the mocks'. Reports: bench/results/NAME.{json,html}.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
SCENARIO=${1:?usage: run_scenario.sh SCENARIO [SLUICE_CONFIG] [BUILD_DIR]}
CONFIG=${2:-}
BUILD=${3:-$ROOT/build/release}
if [[ -z $CONFIG ]]; then
  CONFIG=${SCENARIO%.yaml}.sluice.yaml
  [[ -r $CONFIG ]] || CONFIG=$ROOT/config/demo.yaml
fi
NAME=$(basename "${SCENARIO%.yaml}")
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
start_mocks "$BUILD"
sluice_config "$CONFIG" "$WORK/sluice.yaml"
"$BUILD/sluice" --config "$WORK/sluice.yaml" >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
PIDS+=($!)
PORT=$(wait_listening "$WORK/sluice.out")
log "sluice ($CONFIG) on 127.0.0.1:$PORT; running $SCENARIO"
mkdir -p "$ROOT/bench/results"
# DURATION=20s (say) shortens the scenario.
"$BUILD/sluice-load" --scenario "$SCENARIO" --target "http://127.0.0.1:$PORT" ${DURATION:+--duration "$DURATION"} \
  --json "$ROOT/bench/results/$NAME.json" --html "$ROOT/bench/results/$NAME.html"
log "reports: bench/results/$NAME.json, bench/results/$NAME.html"
