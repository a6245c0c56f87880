#!/usr/bin/env bash
# `make demo`: three simulated model servers, sluice in front of them with
# config/demo.yaml, then the story — sluice-load drives an interactive
# tenant alone, then beside two batch tenants (one floods) and a sheddable
# one, and reports who got what and the interactive tenant's time to first
# token alone and flooded, side by side from the two JSON reports — and what
# an operator and a client see. Under two minutes; everything started here
# is stopped on exit.
set -euo pipefail

BUILD=${1:-build/release}
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
MOCK=$BUILD/sluice-mock
DECODE_MS=20  # the mocks' decode time per token: one engine step
SLUICE=$BUILD/sluice
LOAD=$BUILD/sluice-load
CTL=$BUILD/sluice-ctl
REPORT_DIR=$ROOT/build/demo
mkdir -p "$REPORT_DIR"
WORK=$(mktemp -d /tmp/sluice-demo.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }

# wait_listening FILE: prints the port once the process wrote "listening on".
wait_listening() {
  local deadline=$((SECONDS + 15)) line
  while (( SECONDS < deadline )); do
    line=$(grep -m1 -o 'listening on .*' "$1" 2>/dev/null || true)
    if [[ -n $line ]]; then echo "${line##*:}"; return 0; fi
    sleep 0.05
  done
  echo "demo: no 'listening on' in $1 after 15 s:" >&2
  cat "$1" >&2
  return 1
}

bold "1. Three simulated model servers (sluice-mock: vLLM metrics, 4 sequences per batch, $DECODE_MS ms per token)"
for port in 18001 18002 18003; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
    echo "demo: port $port is in use; config/demo.yaml needs 18001-18003 free" >&2
    exit 1
  fi
  "$MOCK" --listen 127.0.0.1:$port --max-running 4 --decode-ms-per-token "$DECODE_MS" \
    --seed $port >"$WORK/mock-$port.out" 2>&1 &
  PIDS+=($!)
  wait_listening "$WORK/mock-$port.out" >/dev/null
  echo "   model server on 127.0.0.1:$port"
done

bold "2. sluice with config/demo.yaml"
"$SLUICE" --config config/demo.yaml >"$WORK/sluice.out" 2>"$WORK/sluice.log" &
PIDS+=($!)
PORT=$(wait_listening "$WORK/sluice.out")
URL=http://127.0.0.1:$PORT
echo "   sluice listening on $URL"

ADMIN=$(grep -m1 -o 'admin listening on .*' "$WORK/sluice.out" | sed 's/admin listening on //')
echo "   admin plane on $ADMIN"

bold "3. The story, first the interactive tenant alone: 30 s (bench/scenarios/demo-solo.yaml)"
echo "   its latency on an idle pool, which the flood next must not take from it"
"$LOAD" --scenario bench/scenarios/demo-solo.yaml --target "$URL" \
  --json "$REPORT_DIR/solo.json" | sed 's/^/   /'

bold "   Then 30 s of load from four tenants (bench/scenarios/demo.yaml)"
cat <<'TXT'
   interactive    priority 100, 2 req/s, streamed             -> the same time to first token as alone
   batch-a        priority 0, 8 clients always waiting        -> should get half of the batch capacity
   batch-b-flood  priority 0, 20 req/s (3x what the pool has) -> the same half; its excess shed, with reasons
   best-effort    priority -10 (sheddable), 4 req/s           -> shed while the pool is full, with reasons
   While interactive requests come, sluice keeps two of the three engines for them
   (headroom.reserveEndpoints in config/demo.yaml): the other tenants share the third.
TXT
"$LOAD" --scenario bench/scenarios/demo.yaml --target "$URL" \
  --json "$REPORT_DIR/report.json" --html "$REPORT_DIR/report.html" | sed 's/^/   /'
echo
echo "   The same as a picture: $REPORT_DIR/report.html (throughput over time, latency CDFs, outcomes)"

bold "   The interactive tenant alone and beside the flood (from the two runs' JSON reports)"
python3 - "$REPORT_DIR/solo.json" "$REPORT_DIR/report.json" "$DECODE_MS" <<'PY' | sed 's/^/   /'
import json, sys

solo_path, flood_path, step_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
def flows(path):
    return {f["name"]: f for f in json.load(open(path))["flows"]}
solo, flood = flows(solo_path), flows(flood_path)
alone, flooded = solo["interactive"]["ttftSeconds"], flood["interactive"]["ttftSeconds"]
row = "%-34s %12s %18s"
print(row % ("interactive time to first token", "alone", "beside the flood"))
for q in ("p50", "p99"):
    print(row % (q, "%.0f ms" % (alone[q] * 1000), "%.0f ms" % (flooded[q] * 1000)))
print(row % ("answers measured", alone["count"], flooded["count"]))
gap = (flooded["p99"] - alone["p99"]) * 1000
print("p99 beside the flood minus alone: %+.0f ms, %s one engine step (%g ms, a decode step of the mocks)"
      % (gap, "within" if gap <= step_ms else "NOT within", step_ms))
print("(of this few answers, a p99 is the slowest one or two)")
print("token shares beside the flood: " + ", ".join(
    "%s %.1f%%" % (name, 100 * f["tokenShare"]) for name, f in flood.items()))
PY

bold "4. What the operator sees (sluice-ctl against the admin plane)"
"$CTL" --admin "$ADMIN" flows | sed 's/^/   /'
echo
"$CTL" --admin "$ADMIN" bands | sed 's/^/   /'

bold "5. One streamed answer, token by token, through sluice"
printf '   '
curl -s -N --max-time 30 "$URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"mock-model","prompt":"Tell me about fair queueing","max_tokens":12,"stream":true}' |
  while IFS= read -r line; do
    [[ $line == data:* ]] || continue
    [[ $line == 'data: [DONE]' ]] && { printf ' [DONE]\n'; break; }
    text=$(printf '%s' "${line#data: }" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"], end="")')
    printf '%s' "$text"
  done

bold "6. What a client gets when something is wrong (typed, never a hang)"
show() {
  local label=$1; shift
  local out
  out=$(curl -s --max-time 10 -w ' HTTP %{http_code}' "$@")
  printf '   %-28s %s\n' "$label" "$out"
}
show "malformed JSON:" "$URL/v1/completions" -H 'Content-Type: application/json' -d '{"model":'
show "missing model:" "$URL/v1/completions" -H 'Content-Type: application/json' -d '{"prompt":"hi"}'
show "unknown path:" "$URL/v1/nothing"
show "wrong method:" -X DELETE "$URL/v1/chat/completions"

bold "7. Stopping everything"
kill -TERM "${PIDS[-1]}"
wait "${PIDS[-1]}" && echo "   sluice drained and exited cleanly"
tail -n 3 "$WORK/sluice.log" | sed 's/^/   log: /'
