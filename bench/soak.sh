#!/usr/bin/env bash
# A bounded soak of sluice with faults: three sluice-mock endpoints, sluice
# with flow control (bench/soak/sluice-a.yaml), mixed traffic for
# SOAK_SECONDS, faults on a schedule, then assertions and a report.
#
#   bash bench/soak.sh                      # 10 minutes, build/release
#   SOAK_SECONDS=60 bash bench/soak.sh      # the smoke `make test` runs (ctest -L soak)
#
# Environment: SOAK_SECONDS (600), SLUICE_BIN, SLUICE_MOCK_BIN,
# SLUICE_LOAD_BIN, SLUICE_CTL_BIN (default build/release/...), OUT (report
# directory, default bench/results), SOAK_CHURN_RATE (fairness-id churn
# requests per second, 6), SOAK_FAULT_INTERVAL (seconds between faults: 4
# up to 2 minutes, else 10), SOAK_KEEP=1 (keep the logs, access log,
# configs and samples in $OUT/soak-DATE-artifacts; always kept on failure). Run it under the shared lock on a shared
# machine: flock /tmp/sluice-build.lock bash bench/soak.sh
#
# Traffic (all on 127.0.0.1, every port picked by the kernel):
#  - sluice-load with bench/scenarios/soak.yaml: six flows, four tenants,
#    three objectives (one sheddable) and none, streamed and not, a little
#    over the pool's capacity, 8 s client timeout;
#  - sluice-load with bench/scenarios/soak-aborts.yaml: a 1.2 s timeout, so
#    it hangs up mid-stream or while queued (sluice-load can abort only by
#    its timeout, which is per scenario, hence a second driver);
#  - a curl loop: fairness-id churn (a new id per request, token characters,
#    some 128 bytes long; thousands over 10 minutes, past flowControl.maxFlows
#    128) with our own x-request-id on each, a quarter of them cut off by
#    curl --max-time mid-stream.
# Faults (every SOAK_FAULT_INTERVAL s after warm-up, cycling): SIGKILL of a
# mock and its restart on the same port; SIGHUP reloads alternating
# sluice-a.yaml / sluice-b.yaml, and sluice-invalid.yaml, which must change
# nothing; the third mock removed from and re-added to server.endpointsFile;
# sluice-ctl flow overrides (weight, priority), band changes; drain + undrain.
#
# Assertions (exit 1 with the reasons; the report is written either way):
#  - sluice never crashed: running at the end, exit 0 on SIGTERM, no
#    sanitizer report on its stderr;
#  - every request answered exactly once. Requests the clients sent
#    (sluice-load's totals.sent of both drivers + curl transfers whose body
#    went out whole) = sum of sluice_requests_total over outcomes (admin
#    /metrics) = access-log lines. Each curl request carries its own
#    x-request-id: each appears in the access log exactly once (none lost),
#    with the status curl saw when curl read a whole answer; no request_id
#    appears twice (none doubly answered);
#  - served <= what the mocks counted. A mock's mock_requests_total dies
#    with it, so the script reads it from the mock's /metrics right before
#    each SIGKILL and adds the final reading at the end: per endpoint,
#    the access log's served lines naming that endpoint <= the sum over the
#    mock's lifetimes. (A request that reaches a mock after the last reading
#    and before the kill cannot be served: the mock dies before it could
#    generate its tokens, so the bound holds. It is <= and not =: requests
#    cut by a kill, aborted by their client, or retried on a stale pooled
#    connection reached a mock without being served);
#  - every answer that is not a 200 has a typed outcome: the access log's
#    outcome is a documented dropped reason or error code (the list seen is
#    in the report); answers with 429/503 carry x-gateway-inference-dropped-
#    reason at the client (sluice-load's outcome table, curl's header);
#  - sluice's VmRSS and open fds, sampled every second: after the load ends
#    and sluice is idle, RSS <= max(2 x RSS after warm-up, warm-up + 64 MiB)
#    (plus ASan's quarantine, which is capped at 64 MiB here, in an ASan
#    build), and fds <= the idle baseline before any load + 4, not counting
#    sluice's pooled upstream connections (kept open by design, bounded by
#    upstreamMaxIdlePerEndpoint; counted with ss and reported);
#  - every fault was carried out and had the expected effect.
#
# Measured 2026-11-23 (commit 20351fb, 2-core dev machine). Release, 600 s:
# 15130 requests sent = sluice_requests_total = access-log lines, lost 0,
# doubly answered 0; served 10210 (mocks counted 11389), evicted-ttl 1489,
# client-closed 1397, rejected-no-endpoints 1086, rejected-capacity 383,
# evicted-displaced 303, draining 216, upstream-error 46; 3501 fairness ids
# (flows pinned at maxFlows 128); 70 faults, all survived (13 mock kills,
# 17 SIGHUP reloads of which 8 invalid, 10 endpoint-file changes, 26 admin
# changes, 4 drains); RSS 6.4 MiB idle, 9.4 after warm-up, peak and end
# 15.3 MiB; fds 21 idle, peak 147, end 42 (21 pooled upstream). The 60 s
# ctest in the ASan build: 67 s wall, 1594 requests, lost 0, 14 faults.
# Seen: while one of three mocks is dead, or right after an endpoint leaves
# the endpoints file, requests get 503 rejected-no-endpoints although the
# other endpoints are alive (typed, so no assertion fails).
set -uo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
SOAK_SECONDS=${SOAK_SECONDS:-600}
BUILD=${BUILD:-$ROOT/build/release}
SLUICE_BIN=${SLUICE_BIN:-$BUILD/sluice}
SLUICE_MOCK_BIN=${SLUICE_MOCK_BIN:-$BUILD/sluice-mock}
SLUICE_LOAD_BIN=${SLUICE_LOAD_BIN:-$BUILD/sluice-load}
SLUICE_CTL_BIN=${SLUICE_CTL_BIN:-$BUILD/sluice-ctl}
OUT=${OUT:-$ROOT/bench/results}
CHURN_RATE=${SOAK_CHURN_RATE:-6}
if ((SOAK_SECONDS <= 120)); then FAULT_INTERVAL=${SOAK_FAULT_INTERVAL:-4}; else FAULT_INTERVAL=${SOAK_FAULT_INTERVAL:-10}; fi
# Warm-up: the RSS reference is taken then, the faults start after it.
WARMUP=$((SOAK_SECONDS / 6)); ((WARMUP < 8)) && WARMUP=8; ((WARMUP > 30)) && WARMUP=30
STAMP=$(date -u +%Y%m%d-%H%M%S)

for b in "$SLUICE_BIN" "$SLUICE_MOCK_BIN" "$SLUICE_LOAD_BIN" "$SLUICE_CTL_BIN"; do
  [[ -x $b ]] || { echo "soak: FAIL: $b is not an executable (set SLUICE_BIN etc. or build: make release)" >&2; exit 1; }
done
for t in curl jq python3 ss; do
  command -v "$t" >/dev/null || { echo "soak: FAIL: $t is needed" >&2; exit 1; }
done
mkdir -p "$OUT"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"  # WORK, log, wait_listening (its EXIT trap is replaced below)
T0=$EPOCHREALTIME
rel() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
log() { echo "[soak $(rel)s] $*" >&2; }
FAILS=()
fail() { FAILS+=("$*"); log "FAIL: $*"; }
die() { fail "$*"; exit 1; }

# Everything started here, by pid; the mocks' current incarnations by name.
declare -A MOCK_PID MOCK_PORT MOCK_DECODE MOCK_GEN MOCK_DEAD_COUNT
SLUICE_PID=""
BG_PIDS=()
soak_cleanup() {
  local rc=$? pid
  touch "$WORK/stop-load" "$WORK/stop-sampler" 2>/dev/null
  for pid in "${BG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; pkill -TERM -P "$pid" 2>/dev/null; done
  for pid in "${MOCK_PID[@]}" $SLUICE_PID; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${BG_PIDS[@]}" "${MOCK_PID[@]}" $SLUICE_PID; do
    for _ in $(seq 50); do [[ -d /proc/$pid ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  if { ((rc != 0)) || [[ -n ${SOAK_KEEP:-} ]]; } && [[ -d $WORK ]]; then
    local keep="$OUT/soak-$STAMP-artifacts"
    mkdir -p "$keep" && cp -r "$WORK"/. "$keep"/ 2>/dev/null
    echo "[soak] logs, configs and samples kept in $keep" >&2
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap soak_cleanup EXIT

alive() { [[ -d /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# start_mock NAME PORT(0: any) DECODE_MS: one incarnation; sets MOCK_PID/PORT.
start_mock() {
  local name=$1 port=$2 decode=$3 gen=$((${MOCK_GEN[$1]:-0} + 1)) try out
  MOCK_GEN[$name]=$gen
  for try in $(seq 20); do
    out="$WORK/mock-$name.$gen.$try"
    "$SLUICE_MOCK_BIN" --listen "127.0.0.1:$port" --max-running 4 --decode-ms-per-token "$decode" \
      --seed "$gen" >"$out.out" 2>"$out.err" &
    MOCK_PID[$name]=$!
    local deadline=$((SECONDS + 15)) line=""
    while ((SECONDS < deadline)); do
      line=$(grep -m1 -o 'listening on [^ ]*' "$out.out" 2>/dev/null)
      [[ -n $line ]] && break
      alive "${MOCK_PID[$name]}" || break
      sleep 0.05
    done
    if [[ -n $line ]]; then
      MOCK_PORT[$name]=${line##*:}; MOCK_DECODE[$name]=$decode
      return 0
    fi
    # The port may still be held a moment after a kill: try again.
    kill -KILL "${MOCK_PID[$name]}" 2>/dev/null; wait "${MOCK_PID[$name]}" 2>/dev/null
    sleep 0.5
  done
  return 1
}

# mock_count NAME: its mock_requests_total now ("" if it does not answer).
mock_count() {
  local i v
  for i in 1 2 3 4 5; do
    v=$(curl -s --max-time 2 "http://127.0.0.1:${MOCK_PORT[$1]}/metrics" | awk '$1 == "mock_requests_total" { printf "%d", $2 + 0 }')
    [[ -n $v ]] && { echo "$v"; return; }
    sleep 0.2
  done
}

# ---------------------------------------------------------------------------
# Start: three mocks (A and B are in the config, C in the endpoints file).
start_mock A 0 10 || die "mock A did not start"
start_mock B 0 20 || die "mock B did not start"
start_mock C 0 30 || die "mock C did not start"
log "mocks: A 127.0.0.1:${MOCK_PORT[A]} (10 ms/token), B :${MOCK_PORT[B]} (20 ms), C :${MOCK_PORT[C]} (30 ms, endpoints file)"

ACCESS_LOG=$WORK/access.log
EPFILE=$WORK/endpoints.yaml
CONFIG=$WORK/sluice.yaml
render() {  # render TEMPLATE > file
  sed -e "s|@MOCK_A@|${MOCK_PORT[A]}|g" -e "s|@MOCK_B@|${MOCK_PORT[B]}|g" \
      -e "s|@ACCESS_LOG@|$ACCESS_LOG|g" -e "s|@ENDPOINTS_FILE@|$EPFILE|g" "$ROOT/bench/soak/$1"
}
for v in a b invalid; do render "sluice-$v.yaml" >"$WORK/config-$v.yaml"; done
# install FILE DEST: atomically (write, then rename), as an operator would.
install_file() { cp "$1" "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"; }
endpoints_file() {  # endpoints_file with|without
  if [[ $1 == with ]]; then
    printf 'endpoints:\n  - address: 127.0.0.1:%s\n    labels: {rack: r3}\n' "${MOCK_PORT[C]}" >"$WORK/ep.new"
  else
    printf 'endpoints: []\n' >"$WORK/ep.new"
  fi
  install_file "$WORK/ep.new" "$EPFILE"
  EP_STATE=$1
}
endpoints_file with
install_file "$WORK/config-a.yaml" "$CONFIG"
CURRENT_CONFIG=a

# ASan: its quarantine keeps freed memory resident; cap it so the RSS bound
# means something (64 MiB, counted in the bound).
ASAN_BUILD=0
if grep -aq __asan_init "$SLUICE_BIN"; then
  ASAN_BUILD=1
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=64"
fi
"$SLUICE_BIN" --config "$CONFIG" >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
SLUICE_PID=$!
PORT=$(wait_listening "$WORK/sluice.out") || die "sluice did not start: $(tail -5 "$WORK/sluice.err")"
ADMIN=$(grep -m1 -o 'admin listening on [^ ]*' "$WORK/sluice.out" | sed 's/admin listening on //')
URL=http://127.0.0.1:$PORT
CTL=("$SLUICE_CTL_BIN" --admin "$ADMIN")
log "sluice pid $SLUICE_PID on $URL, admin $ADMIN (asan=$ASAN_BUILD); duration ${SOAK_SECONDS}s, warm-up ${WARMUP}s, a fault every ${FAULT_INTERVAL}s"

# Ready when every endpoint has been scraped (C comes from the file).
for _ in $(seq 100); do
  n=$(curl -s --max-time 2 "http://$ADMIN/admin/v1/endpoints" | jq '[.[] | select(.removed | not)] | length' 2>/dev/null)
  [[ $n == 3 ]] && break; sleep 0.1
done
[[ $n == 3 ]] || die "sluice does not list the 3 endpoints: $(curl -s "http://$ADMIN/admin/v1/endpoints")"

# Resources: VmRSS (kB) and open fds, every second, from here on.
sample_once() {
  local rss fds
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SLUICE_PID/status" 2>/dev/null) || return 1
  fds=$(find "/proc/$SLUICE_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "$(rel) $rss $fds"
}
sleep 1
read -r _ RSS_BASE FD_BASE < <(sample_once)
(
  while [[ ! -e $WORK/stop-sampler ]]; do sample_once >>"$WORK/samples.txt" || break; sleep 1; done
) &
BG_PIDS+=($!)

# ---------------------------------------------------------------------------
# Load.
T_LOAD=$(rel)
"$SLUICE_LOAD_BIN" --scenario "$ROOT/bench/scenarios/soak.yaml" --target "$URL" --duration "${SOAK_SECONDS}s" \
  --quiet --json "$WORK/load-main.json" >"$WORK/load-main.out" 2>&1 &
LOAD_MAIN=$!
"$SLUICE_LOAD_BIN" --scenario "$ROOT/bench/scenarios/soak-aborts.yaml" --target "$URL" --duration "${SOAK_SECONDS}s" \
  --quiet --json "$WORK/load-aborts.json" >"$WORK/load-aborts.out" 2>&1 &
LOAD_ABORTS=$!
BG_PIDS+=("$LOAD_MAIN" "$LOAD_ABORTS")

# Fairness-id churn: every 12 / SOAK_CHURN_RATE seconds a batch of 12
# requests in one curl (--parallel, all at once, in the background), each
# with a new id and our x-request-id. One line per transfer (churn.N.log,
# then churn.log): request-id http-code curl-exit bytes-uploaded body-bytes
# dropped-reason. A transfer whose body did not go out whole never reached
# sluice as a request; it is counted apart.
churn_loop() {
  local n=0 b=0 batch=12 k id rid body obj stream mt maxt objhdr
  local special="!#\$%&'*+-.^_\`|~:/@="
  while [[ ! -e $WORK/stop-load ]]; do
    b=$((b + 1))
    : >"$WORK/churn.$b.cfg"
    for ((k = 0; k < batch; k++)); do
      n=$((n + 1))
      rid="soak-churn-$STAMP-$n"
      case $((n % 10)) in
        0) id="t/$n:$RANDOM@eu=1.$special" ;;                                  # every token character
        5) id=$(printf 'L%s-%0120d' "$n" 0 | cut -c1-128) ;;                   # 128 bytes
        *) id="churn-$n-$RANDOM" ;;
      esac
      case $((RANDOM % 4)) in 0) obj=interactive ;; 1) obj=batch ;; 2) obj=best-effort ;; *) obj="" ;; esac
      if ((RANDOM % 4 == 0)); then
        stream=true; maxt=$((100 + RANDOM % 100)); mt=0.$((5 + RANDOM % 4))  # cut off mid-stream
      else
        stream=$([[ $((RANDOM % 2)) == 0 ]] && echo true || echo false); maxt=$((8 + RANDOM % 24)); mt=8
      fi
      body="{\"model\":\"mock-model\",\"prompt\":\"churn $n tell me about fair queueing\",\"max_tokens\":$maxt,\"stream\":$stream}"
      objhdr=""; [[ -n $obj ]] && objhdr="header = \"x-gateway-inference-objective: $obj\""
      cat >>"$WORK/churn.$b.cfg" <<CFG
url = "$URL/v1/completions"
header = "Content-Type: application/json"
header = "x-request-id: $rid"
header = "x-gateway-inference-fairness-id: $id"
$objhdr
data = "${body//\"/\\\"}"
output = "/dev/null"
max-time = $mt
write-out = "$rid %{http_code} %{exitcode} %{size_upload} ${#body} %header{x-gateway-inference-dropped-reason}\\n"
CFG
      ((k < batch - 1)) && echo next >>"$WORK/churn.$b.cfg"
    done
    curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max "$batch" -K "$WORK/churn.$b.cfg" \
      >"$WORK/churn.$b.log" 2>/dev/null &
    sleep "$(awk -v n="$batch" -v r="$CHURN_RATE" 'BEGIN { printf "%.2f", n / r }')"
  done
  wait  # the last batches (8 s at most)
  for ((k = 1; k <= b; k++)); do cat "$WORK/churn.$k.log"; done >"$WORK/churn.log"
}
churn_loop &
CHURN_PID=$!
BG_PIDS+=("$CHURN_PID")

# ---------------------------------------------------------------------------
# Faults. Each: a line in faults.log (seconds since start, UTC time, what,
# ok or FAILED and why).
FAULTS_OK=0
FAULTS_FAILED=0
FLOWS_PEAK=0
record_fault() {  # record_fault ok|FAILED WHAT [DETAIL]
  local line
  line=$(printf '%7ss  %s  %-44s %s %s' "$(rel)" "$(date -u +%H:%M:%S)" "$2" "$1" "${3:-}")
  echo "$line" >>"$WORK/faults.log"
  log "fault: $2: $1 ${3:-}"
  if [[ $1 == ok ]]; then FAULTS_OK=$((FAULTS_OK + 1)); else FAULTS_FAILED=$((FAULTS_FAILED + 1)); fail "fault '$2': ${3:-}"; fi
}
bands_config() {  # the configured view of the bands (no live counts)
  curl -s --max-time 5 "http://$ADMIN/admin/v1/bands" |
    jq -cS 'map({priority, configured, maxBytes, maxRequests, fairnessPolicy, orderingPolicy, antiStarvationShare}) | sort_by(.priority)'
}
band_limit() { curl -s --max-time 5 "http://$ADMIN/admin/v1/bands/$1" | jq -r '.maxRequests' 2>/dev/null; }
reload_lines() { grep -c -E 'config .* (applying|not applied)' "$WORK/sluice.err"; }
wait_reload_line() {  # wait_reload_line BEFORE PATTERN: a new reload line matching
  local before=$1 i
  for i in $(seq 100); do
    if (($(reload_lines) > before)); then
      grep -E 'config .* (applying|not applied)' "$WORK/sluice.err" | tail -n +$((before + 1)) | grep -q -E "$2" && return 0
    fi
    sleep 0.05
  done
  return 1
}

fault_kill() {  # SIGKILL mock NAME, restart it on the same port
  local name=$1 port=${MOCK_PORT[$1]} count down
  count=$(mock_count "$name")
  if [[ -z $count ]]; then record_fault FAILED "kill+restart mock $name" "its /metrics did not answer before the kill"; return; fi
  kill -KILL "${MOCK_PID[$name]}"; wait "${MOCK_PID[$name]}" 2>/dev/null
  MOCK_DEAD_COUNT[$name]=$((${MOCK_DEAD_COUNT[$name]:-0} + count))
  echo "$name $port $count" >>"$WORK/mock-kills.txt"
  sleep 2
  down=$EPOCHREALTIME
  if ! start_mock "$name" "$port" "${MOCK_DECODE[$name]}" || [[ ${MOCK_PORT[$name]} != "$port" ]]; then
    record_fault FAILED "kill+restart mock $name (127.0.0.1:$port)" "could not restart on the same port"
    return
  fi
  record_fault ok "kill+restart mock $name (127.0.0.1:$port)" "(it had counted $count requests; down 2 s + $(awk -v a="$down" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}') s restart)"
}
fault_reload() {  # SIGHUP with config a or b
  local v=$1 before want limit
  before=$(reload_lines)
  install_file "$WORK/config-$v.yaml" "$CONFIG"
  kill -HUP "$SLUICE_PID"
  if ! wait_reload_line "$before" 'applying'; then
    record_fault FAILED "SIGHUP reload -> sluice-$v.yaml" "no 'applying' line in sluice's log within 5 s"; return
  fi
  CURRENT_CONFIG=$v
  want=$([[ $v == a ]] && echo 80 || echo 100)
  for _ in $(seq 50); do limit=$(band_limit 100); [[ $limit == "$want" ]] && break; sleep 0.1; done
  if [[ $limit != "$want" ]]; then
    record_fault FAILED "SIGHUP reload -> sluice-$v.yaml" "band 100's maxRequests is $limit, want $want"; return
  fi
  record_fault ok "SIGHUP reload -> sluice-$v.yaml" "(applied; band 100 maxRequests $want)"
}
fault_invalid_reload() {  # SIGHUP with an invalid config: nothing may change
  local before b1 b2 api
  b1=$(bands_config)
  before=$(reload_lines)
  install_file "$WORK/config-invalid.yaml" "$CONFIG"
  kill -HUP "$SLUICE_PID"
  if ! wait_reload_line "$before" 'not applied'; then
    install_file "$WORK/config-$CURRENT_CONFIG.yaml" "$CONFIG"
    record_fault FAILED "SIGHUP reload -> sluice-invalid.yaml" "no 'not applied' line in sluice's log"; return
  fi
  # The API says the same: 400 invalid-config.
  api=$(curl -s --max-time 5 -o "$WORK/reload-api.json" -w '%{http_code}' -X POST "http://$ADMIN/admin/v1/reload")
  b2=$(bands_config)
  install_file "$WORK/config-$CURRENT_CONFIG.yaml" "$CONFIG"
  if [[ $api != 400 ]] || ! grep -q invalid-config "$WORK/reload-api.json"; then
    record_fault FAILED "SIGHUP reload -> sluice-invalid.yaml" "POST /admin/v1/reload answered $api $(head -c 200 "$WORK/reload-api.json")"; return
  fi
  if [[ -z $b1 || $b1 != "$b2" ]]; then
    record_fault FAILED "SIGHUP reload -> sluice-invalid.yaml" "the bands changed: before $b1 after $b2"; return
  fi
  record_fault ok "SIGHUP reload -> sluice-invalid.yaml" "(refused, 'not applied' logged, API 400 invalid-config, bands unchanged)"
}
fault_endpoint() {  # remove|add mock C through the endpoints file
  local what=$1 want r
  if [[ $what == remove ]]; then endpoints_file without; want=true; else endpoints_file with; want=false; fi
  for _ in $(seq 60); do
    r=$(curl -s --max-time 5 "http://$ADMIN/admin/v1/endpoints" |
      jq -r --arg a "127.0.0.1:${MOCK_PORT[C]}" '[.[] | select(.address == $a) | .removed] | if length == 0 then true else .[0] end' 2>/dev/null)
    [[ $r == "$want" ]] && break; sleep 0.1
  done
  if [[ $r != "$want" ]]; then record_fault FAILED "endpoints file: $what mock C" "sluice shows removed=$r after 6 s"; return; fi
  record_fault ok "endpoints file: $what mock C (127.0.0.1:${MOCK_PORT[C]})" "(seen by sluice)"
}
fault_ctl() {  # fault_ctl WHAT sluice-ctl-args... (must exit 0)
  local what=$1 out; shift
  if out=$("${CTL[@]}" "$@" 2>&1); then
    record_fault ok "$what" "(sluice-ctl $*)"
  else
    record_fault FAILED "$what" "sluice-ctl $* exited $?: $(echo "$out" | head -c 300)"
  fi
}
fault_admin_set() {
  fault_ctl "flow override tenant-b weight 3" flow set tenant-b --weight 3
  fault_ctl "flow override chat-app-2 priority 50" flow set chat-app-2 --priority 50
}
fault_admin_band() { fault_ctl "band 0: maxRequests 30, share 0.1" band set 0 --max-requests 30 --share 0.1; }
fault_admin_reset() {
  fault_ctl "flow override reset tenant-b" flow reset tenant-b
  fault_ctl "flow override reset chat-app-2" flow reset chat-app-2
  fault_ctl "band 0: maxRequests 60 again" band set 0 --max-requests 60 --share 0.05
}
fault_drain() {  # drain for 2 s, then admit again
  local s
  if ! "${CTL[@]}" drain >/dev/null 2>&1; then record_fault FAILED "drain + undrain" "sluice-ctl drain failed"; return; fi
  sleep 2
  "${CTL[@]}" drain cancel >/dev/null 2>&1
  s=$(curl -s --max-time 5 "http://$ADMIN/admin/v1/drain" | jq -r .state 2>/dev/null)
  if [[ $s != serving ]]; then record_fault FAILED "drain + undrain" "state after cancel: $s"; return; fi
  record_fault ok "drain 2 s + undrain" "(state serving again)"
}
FAULTS=(
  "fault_kill A" "fault_reload b" fault_admin_set "fault_endpoint remove" fault_invalid_reload
  fault_admin_band "fault_endpoint add" "fault_kill B" "fault_reload a" fault_admin_reset
  fault_drain "fault_kill C" fault_invalid_reload
)
flows_count() { curl -s --max-time 5 "http://$ADMIN/admin/v1/flows" | jq 'length' 2>/dev/null; }

load_end=$(awk -v a="$T_LOAD" -v d="$SOAK_SECONDS" 'BEGIN { printf "%d", a + d }')
fault_at=$(awk -v a="$T_LOAD" -v w="$WARMUP" 'BEGIN { printf "%d", a + w }')
sleep "$(awk -v t="$fault_at" -v n="$(rel)" 'BEGIN { d = t - n; printf "%.1f", (d > 0 ? d : 0) }')"
read -r _ RSS_WARM FD_WARM < <(sample_once)
log "warm-up done: RSS $((RSS_WARM / 1024)) MiB, $FD_WARM fds (idle baseline before load: $((RSS_BASE / 1024)) MiB, $FD_BASE fds)"
i=0
while :; do
  now=$(rel)
  next=$(awk -v n="$now" -v i="$FAULT_INTERVAL" 'BEGIN { printf "%d", n + i }')
  ((next + 4 > load_end)) && break  # the last fault ends before the load does
  alive "$SLUICE_PID" || { fail "sluice died during the load (pid $SLUICE_PID)"; break; }
  ${FAULTS[$((i % ${#FAULTS[@]}))]}
  i=$((i + 1))
  f=$(flows_count); [[ -n $f ]] && ((f > FLOWS_PEAK)) && FLOWS_PEAK=$f
  sleep "$(awk -v t="$next" -v n="$(rel)" 'BEGIN { d = t - n; printf "%.1f", (d > 0 ? d : 0) }')"
done
# Put everything back as it started: both endpoint sources, config A.
[[ $EP_STATE == with ]] || fault_endpoint add
while (($(awk -v n="$(rel)" -v e="$load_end" 'BEGIN { print (n < e) }'))); do
  f=$(flows_count); [[ -n $f ]] && ((f > FLOWS_PEAK)) && FLOWS_PEAK=$f
  sleep 2
done

# ---------------------------------------------------------------------------
# The end: the drivers finish (their drain), the churn loop stops, sluice
# goes idle.
log "load ends; waiting for the drivers"
touch "$WORK/stop-load"
wait "$LOAD_MAIN"; RC_MAIN=$?
wait "$LOAD_ABORTS"; RC_ABORTS=$?
wait "$CHURN_PID"
((RC_MAIN == 0)) || fail "sluice-load (soak.yaml) exited $RC_MAIN: $(tail -3 "$WORK/load-main.out")"
((RC_ABORTS == 0)) || fail "sluice-load (soak-aborts.yaml) exited $RC_ABORTS: $(tail -3 "$WORK/load-aborts.out")"
T_DRAIN=$(rel)
idle=0
for _ in $(seq 60); do
  m=$(curl -s --max-time 5 "http://$ADMIN/metrics")
  busy=$(echo "$m" | awk '/^(sluice_endpoint_in_flight|inference_extension_flow_control_queue_size)[{ ]/ { s += $NF } END { print s + 0 }')
  total=$(echo "$m" | awk '/^sluice_requests_total[{ ]/ { s += $NF } END { printf "%d", s }')
  lines=$(wc -l <"$ACCESS_LOG")
  if [[ $busy == 0 && $total == "$lines" ]]; then idle=1; break; fi
  sleep 0.5
done
((idle)) || fail "sluice not idle 30 s after the load: in flight + queued = $busy, requests_total $total, access-log lines $lines"
log "idle $(awk -v a="$T_DRAIN" -v b="$(rel)" 'BEGIN{printf "%.1f", b-a}') s after the drivers ended; letting memory settle"
sleep 3
alive "$SLUICE_PID" && SLUICE_ALIVE=1 || SLUICE_ALIVE=0
((SLUICE_ALIVE)) || fail "sluice is not running at the end (crashed?): $(tail -5 "$WORK/sluice.err")"
read -r _ RSS_END FD_END < <(sample_once || echo "x 0 0")
# sluice's upstream sockets (the keep-alive pool) by state.
ss -tanpH 2>/dev/null | grep "pid=$SLUICE_PID," |
  awk -v a=":${MOCK_PORT[A]}" -v b=":${MOCK_PORT[B]}" -v c=":${MOCK_PORT[C]}" \
    '{ p = $5; if (p ~ a "$" || p ~ b "$" || p ~ c "$") n[$1]++ } END { for (s in n) print s, n[s] }' >"$WORK/upstream-sockets.txt"
UPSTREAM_SOCKETS=$(awk '{ s += $2 } END { print s + 0 }' "$WORK/upstream-sockets.txt")
curl -s --max-time 5 "http://$ADMIN/metrics" >"$WORK/metrics-end.txt"
curl -s --max-time 5 "http://$ADMIN/admin/v1/flows" >"$WORK/flows-end.json"
f=$(jq 'length' "$WORK/flows-end.json" 2>/dev/null); [[ -n $f ]] && ((f > FLOWS_PEAK)) && FLOWS_PEAK=$f
for name in A B C; do
  c=$(mock_count "$name")
  [[ -n $c ]] || fail "mock $name's /metrics did not answer at the end"
  echo "$name ${MOCK_PORT[$name]} ${c:-0} ${MOCK_DEAD_COUNT[$name]:-0} ${MOCK_GEN[$name]}" >>"$WORK/mock-counts.txt"
done
touch "$WORK/stop-sampler"

# SIGTERM: a clean exit (0), no sanitizer report.
SLUICE_RC=-1
if ((SLUICE_ALIVE)); then
  kill -TERM "$SLUICE_PID"
  for _ in $(seq 400); do alive "$SLUICE_PID" || break; sleep 0.1; done
  if alive "$SLUICE_PID"; then
    fail "sluice still running 40 s after SIGTERM"; kill -KILL "$SLUICE_PID"
  fi
  wait "$SLUICE_PID"; SLUICE_RC=$?
  ((SLUICE_RC == 0)) || fail "sluice exited $SLUICE_RC on SIGTERM: $(tail -5 "$WORK/sluice.err")"
fi
SLUICE_PID=""
if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Undefined|Leak)' "$WORK/sluice.err"; then
  fail "sanitizer report in sluice's stderr: $(grep -m3 -E 'ERROR: |runtime error:|SUMMARY:' "$WORK/sluice.err")"
fi
for name in A B C; do kill -TERM "${MOCK_PID[$name]}" 2>/dev/null; wait "${MOCK_PID[$name]}" 2>/dev/null; done
MOCK_PID=()
T_END=$(rel)

# ---------------------------------------------------------------------------
# Reconciliation and report.
REPORT=$OUT/soak-$STAMP.md
export WORK REPORT SOAK_SECONDS WARMUP T_LOAD T_END RSS_BASE FD_BASE RSS_WARM FD_WARM RSS_END FD_END \
  UPSTREAM_SOCKETS FAULTS_OK FAULTS_FAILED FLOWS_PEAK SLUICE_RC ASAN_BUILD SLUICE_BIN STAMP
printf '%s\n' "${FAILS[@]}" >"$WORK/fails.txt"
sed -i '/^$/d' "$WORK/fails.txt"
python3 - <<'PY'
import collections, json, os, re, sys
W = os.environ["WORK"]; E = os.environ
fails = [l.rstrip("\n") for l in open(f"{W}/fails.txt")]

# Clients.
loads = {}
for name in ("main", "aborts"):
    try:
        loads[name] = json.load(open(f"{W}/load-{name}.json"))
    except Exception as e:
        fails.append(f"no JSON report from sluice-load ({name}): {e}")
        loads[name] = {"totals": {"sent": 0, "ok": 0, "shed": 0, "errors": 0, "lost": 0}, "flows": []}
load_sent = sum(l["totals"]["sent"] for l in loads.values())
load_not_sent = sum(f.get("notSent", f.get("not_sent", 0)) or 0 for l in loads.values() for f in l["flows"])
client_outcomes = collections.Counter()
for l in loads.values():
    for f in l["flows"]:
        for k, v in f["outcomes"].items():
            client_outcomes[k] += v
curl = []
for line in open(f"{W}/churn.log") if os.path.exists(f"{W}/churn.log") else []:
    p = line.rstrip("\n").split(" ", 5)
    if len(p) < 5: continue
    curl.append({"rid": p[0], "code": p[1], "exit": int(p[2]), "up": int(p[3]), "len": int(p[4]),
                 "reason": p[5] if len(p) > 5 else ""})
curl_full = [c for c in curl if c["up"] == c["len"]]
curl_partial = [c for c in curl if c["up"] != c["len"]]

# sluice.
log = []
bad = 0
for line in open(f"{W}/access.log"):
    try: log.append(json.loads(line))
    except Exception: bad += 1
if bad: fails.append(f"{bad} access-log lines are not JSON")
metrics = collections.Counter()
for line in open(f"{W}/metrics-end.txt"):
    m = re.match(r'^sluice_requests_total\{outcome="([^"]*)"\} (\S+)$', line)
    if m: metrics[m.group(1)] += int(float(m.group(2)))
met_total = sum(metrics.values())
by_rid = collections.Counter(r.get("request_id", "") for r in log)
dups = {k: v for k, v in by_rid.items() if v > 1}
log_by_rid = {r.get("request_id"): r for r in log}
outcomes = collections.Counter(r.get("outcome", "") for r in log)

# Every request answered once: counts.
partial_seen = sum(1 for c in curl_partial if c["rid"] in by_rid)
expected = load_sent + len(curl_full) + partial_seen
lost_curl = [c["rid"] for c in curl_full if c["rid"] not in by_rid]
lost = max(0, expected - len(log))   # requests no line accounts for
extra = max(0, len(log) - expected)  # lines no request accounts for
if not (expected == met_total == len(log)):
    fails.append(f"requests sent by the clients {expected} (sluice-load {load_sent} + curl {len(curl_full)}"
                 f"{' + %d partly sent' % partial_seen if partial_seen else ''}) / sluice_requests_total {met_total}"
                 f" / access-log lines {len(log)} differ")
if lost_curl:
    fails.append(f"{len(lost_curl)} curl requests have no access-log line (lost), e.g. {lost_curl[:5]}")
if dups:
    fails.append(f"{len(dups)} request ids logged more than once (doubly answered), e.g. {list(dups.items())[:5]}")
if metrics != outcomes:
    diff = {k: (metrics.get(k, 0), outcomes.get(k, 0)) for k in set(metrics) | set(outcomes) if metrics.get(k, 0) != outcomes.get(k, 0)}
    fails.append(f"sluice_requests_total by outcome differs from the access log's outcomes (metrics, log): {diff}")
# What curl saw = what sluice logged, when curl read a whole answer.
mismatch = []
for c in curl_full:
    r = log_by_rid.get(c["rid"])
    if r and c["exit"] == 0 and c["code"] != "000" and str(r.get("status")) != c["code"]:
        mismatch.append((c["rid"], c["code"], r.get("status"), r.get("outcome")))
if mismatch:
    fails.append(f"{len(mismatch)} curl answers differ from the access log's status, e.g. {mismatch[:5]}")

# Typed outcomes.
documented = {"served", "client-closed", "rejected-capacity", "rejected-no-endpoints", "evicted-displaced",
              "evicted-ttl", "evicted-other", "draining", "upstream-error", "upstream-timeout", "invalid-json",
              "missing-model", "invalid-field", "unsupported-content-type", "not-found", "method-not-allowed",
              "body-too-large", "headers-too-large", "invalid-ttl", "invalid-fairness-id"}
untyped = collections.Counter()
for r in log:
    o = r.get("outcome", "")
    if r.get("status") != 200 and o not in documented: untyped[(r.get("status"), o)] += 1
    if r.get("status") == 200 and o not in ("served", "client-closed", "upstream-error", "upstream-timeout"):
        untyped[(200, o)] += 1
if untyped:
    fails.append(f"answers without a typed outcome (status, outcome): {dict(untyped)}")
reasonless = {k: v for k, v in client_outcomes.items()
              if re.fullmatch(r"(429|503)", k)}
reasonless_curl = [c for c in curl if c["code"] in ("429", "503") and not c["reason"].strip()]
if reasonless or reasonless_curl:
    fails.append(f"429/503 answers without x-gateway-inference-dropped-reason: sluice-load {reasonless}, curl {len(reasonless_curl)}")

# Served <= what the mocks counted, per endpoint.
served_by_ep = collections.Counter(r.get("endpoint") for r in log if r.get("outcome") == "served")
mocks = []
for line in open(f"{W}/mock-counts.txt") if os.path.exists(f"{W}/mock-counts.txt") else []:
    name, port, final, dead, gens = line.split()
    total = int(final) + int(dead)
    ep = f"127.0.0.1:{port}"
    mocks.append((name, ep, int(final), int(dead), int(gens), total, served_by_ep.get(ep, 0)))
    if served_by_ep.get(ep, 0) > total:
        fails.append(f"mock {name} ({ep}) counted {total} requests over its lifetimes but sluice logged {served_by_ep[ep]} served by it")
served = outcomes.get("served", 0)
mock_total = sum(m[5] for m in mocks)
other_eps = {k: v for k, v in served_by_ep.items() if k not in {m[1] for m in mocks}}
if other_eps: fails.append(f"served by unknown endpoints: {other_eps}")
if served > mock_total: fails.append(f"served {served} > requests the mocks counted {mock_total}")

# Resources.
samples = [l.split() for l in open(f"{W}/samples.txt")] if os.path.exists(f"{W}/samples.txt") else []
rss = [int(s[1]) for s in samples]; fds = [int(s[2]) for s in samples]
rss_base, rss_warm, rss_end = int(E["RSS_BASE"]), int(E["RSS_WARM"]), int(E["RSS_END"])
fd_base, fd_warm, fd_end = int(E["FD_BASE"]), int(E["FD_WARM"]), int(E["FD_END"])
asan = E["ASAN_BUILD"] == "1"
bound = max(2 * rss_warm, rss_warm + 64 * 1024) + (64 * 1024 if asan else 0)
ups = int(E["UPSTREAM_SOCKETS"])
if rss_end > bound:
    fails.append(f"RSS after the load {rss_end // 1024} MiB > bound {bound // 1024} MiB (warm-up {rss_warm // 1024} MiB)")
if fd_end - ups > fd_base + 4:
    fails.append(f"open fds after the load {fd_end} ({ups} of them pooled upstream sockets) > idle baseline {fd_base} + 4")
if ups > 3 * 2 * 128:
    fails.append(f"{ups} upstream sockets held: more than upstreamMaxIdlePerEndpoint x threads x endpoints")
upstream_states = open(f"{W}/upstream-sockets.txt").read().split("\n") if os.path.exists(f"{W}/upstream-sockets.txt") else []
upstream_states = ", ".join(s for s in upstream_states if s)

faults = open(f"{W}/faults.log").read() if os.path.exists(f"{W}/faults.log") else ""
kills = sum(1 for l in faults.splitlines() if "kill+restart" in l and " ok " in l)
reloads = sum(1 for l in faults.splitlines() if "SIGHUP" in l and " ok " in l)
mb = lambda kb: f"{kb / 1024:.1f} MiB"
verdict = "PASS" if not fails else "FAIL"
duration = float(E["T_END"])
R = []
R.append(f"# sluice soak {E['STAMP']} — {verdict}\n")
R.append(f"- sluice: `{E['SLUICE_BIN']}`{' (ASan build)' if asan else ''}; load {E['SOAK_SECONDS']} s "
         f"(warm-up {E['WARMUP']} s), whole run {duration:.0f} s wall")
R.append(f"- clients: sluice-load soak.yaml {loads['main']['totals']['sent']} + soak-aborts.yaml "
         f"{loads['aborts']['totals']['sent']} requests, curl fairness-id churn {len(curl)} "
         f"({len(curl_full)} sent whole{', %d partly' % len(curl_partial) if curl_partial else ''}); "
         f"not sent (driver connection cap) {load_not_sent}")
R.append(f"- **requests sent {expected}; sluice_requests_total {met_total}; access-log lines {len(log)}; "
         f"lost {max(lost, len(lost_curl))}; doubly answered {len(dups)}"
         f"{'; lines without a request %d' % extra if extra else ''}**")
R.append(f"- served {served} (mocks counted {mock_total} over their lifetimes); distinct fairness ids in the "
         f"access log {len(set(r.get('flow') for r in log))}; flows tracked by sluice, peak {E['FLOWS_PEAK']} (maxFlows 128)")
R.append(f"- faults: {E['FAULTS_OK']} carried out and survived, {E['FAULTS_FAILED']} failed "
         f"({kills} mock kills, {reloads} SIGHUP reloads)")
R.append(f"- RSS: idle {mb(rss_base)}, after warm-up {mb(rss_warm)}, peak {mb(max(rss + [rss_end]))}, "
         f"end {mb(rss_end)} (bound {mb(bound)})")
R.append(f"- open fds: idle {fd_base}, after warm-up {fd_warm}, peak {max(fds + [fd_end])}, end {fd_end} "
         f"(of which pooled upstream sockets {ups}: {upstream_states or 'none'})")
R.append(f"- sluice exit code on SIGTERM: {E['SLUICE_RC']}\n")
R.append("## Outcomes at sluice (access log = sluice_requests_total)\n")
R.append("| outcome | requests |\n|---|---:|")
for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1]): R.append(f"| {k} | {v} |")
R.append("\n## What the clients saw (sluice-load outcome tables; `lost:` there = client timeouts and streams cut by a mock kill)\n")
R.append("| outcome | requests |\n|---|---:|")
for k, v in sorted(client_outcomes.items(), key=lambda kv: -kv[1]): R.append(f"| {k} | {v} |")
cc = collections.Counter((c["code"] + (" " + c["reason"].strip() if c["reason"].strip() else "") + (" (curl timeout)" if c["exit"] == 28 else "")) for c in curl)
R.append("\ncurl churn: " + ", ".join(f"{k}: {v}" for k, v in sorted(cc.items(), key=lambda kv: -kv[1])))
R.append("\n## Served per endpoint vs the mocks' counters\n")
R.append("| mock | endpoint | lifetimes | counted before kills | counted by the last | total | served (access log) |\n|---|---|---:|---:|---:|---:|---:|")
for name, ep, final, dead, gens, total, s in mocks: R.append(f"| {name} | {ep} | {gens} | {dead} | {final} | {total} | {s} |")
R.append("\n## Faults\n\n```\n" + (faults.rstrip() or "(none)") + "\n```\n")
R.append("## Assertions\n")
R.append("All passed." if not fails else "\n".join(f"- FAIL: {f}" for f in fails))
text = "\n".join(R) + "\n"
open(E["REPORT"], "w").write(text)
print(text)
sys.exit(1 if fails else 0)
PY
rc=$?
log "report: $REPORT"
if ((rc != 0)); then log "soak FAILED"; exit 1; fi
log "soak passed"
exit 0
