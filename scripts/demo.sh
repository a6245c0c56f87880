#!/usr/bin/env bash
# `make demo`: three simulated model servers, sluice in front of them with
# config/demo.yaml, then the story — sluice-load drives an interactive
# tenant, two batch tenants (one floods) and a sheddable one, and reports
# who got what — and what an operator and a client see. Under two minutes;
# everything started here is stopped on exit.
set -euo pipefail

BUILD=${1:-build/release}
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
MOCK=$BUILD/sluice-mock
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

bold "1. Three simulated model servers (sluice-mock: vLLM metrics, 4 sequences per batch, 20 ms per token)"
for port in 18001 18002 18003; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
    echo "demo: port $port is in use; config/demo.yaml needs 18001-18003 free" >&2
    exit 1
  fi
  "$MOCK" --listen 127.0.0.1:$port --max-running 4 --decode-ms-per-token 20 \
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

bold "3. The story: 30 s of load from four tenants (bench/scenarios/demo.yaml)"
cat <<'TXT'
   interactive    priority 100, 2 req/s, streamed             -> should see a flat, low latency
   batch-a        priority 0, 8 clients always waiting        -> should get half of the batch capacity
   batch-b-flood  priority 0, 20 req/s (3x what the pool has) -> the same half; its excess shed, with reasons
   best-effort    priority -10 (sheddable), 4 req/s           -> shed while the pool is full, with reasons
TXT
"$LOAD" --scenario bench/scenarios/demo.yaml --target "$URL" \
  --json "$REPORT_DIR/report.json" --html "$REPORT_DIR/report.html" | sed 's/^/   /'
echo
echo "   The same as a picture: $REPORT_DIR/report.html (throughput over time, latency CDFs, outcomes)"

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
