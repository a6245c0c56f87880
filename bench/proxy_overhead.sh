#!/usr/bin/env bash
# Proxy overhead benchmark: sluice vs nginx vs HAProxy in front of one static
# nginx "LLM" backend, single-threaded unless THREADS says otherwise, loopback only.
#
# Usage:   bench/proxy_overhead.sh
# Env:     SLUICE_BIN  sluice binary (default: <repo>/build/release/sluice)
#          SLUICE_BASE_BIN another sluice binary (e.g. main before a change): adds
#                      the targets sluice_base and sluice_fc_base, the same
#                      configs as sluice and sluice_fc, measured in the same
#                      interleaved rounds (before vs after in one run)
#          DURATION    seconds measured per target and round (default 10)
#          ROUNDS      interleaved rounds; the median is reported (default 3)
#          CONNECTIONS wrk connections (default 64)
#          PIN         auto|0 - CPU pinning, see below (default auto)
#          PROMPT_BYTES the prompt's length in the body (default 900: ~1 KB)
#          PO_TARGETS  the targets to measure (default: all below)
#          RESULTS_FILE where the report goes (default bench/results/proxy_overhead.md)
#          THREADS     I/O threads of every proxy: sluice --threads, nginx
#                      worker_processes, HAProxy nbthread (default 1; with 2,
#                      run PIN=0: the servers cannot share one pinned core)
#          WRK_THREADS wrk threads (default 1)
#
# Targets, measured in this order in every round (interleaving spreads slow
# drifts such as thermal throttling or background load over all targets):
#   direct   wrk -> backend
#   sluice   wrk -> sluice (1 I/O thread) -> backend
#   nginx    wrk -> nginx proxy (1 worker, upstream keepalive 64) -> backend
#   haproxy  wrk -> haproxy (nbthread 1, http-reuse always) -> backend
#
# CPU pinning (PIN=auto, needs >= 2 usable CPUs): wrk runs alone on the second
# usable CPU; the backend and every proxy share the first one. Rationale: on a
# 2-core box wrk needs a whole core to push one proxy thread, and keeping wrk
# off the server core stops it from stealing cycles from whichever server is
# measured. With the servers confined to one core, "proxied rps / direct rps"
# measures the proxy's CPU cost per request at a fixed CPU budget, identically
# for all three proxies (idle proxies cost nothing while another target runs).
# PIN=0 disables pinning for every target alike.
#
# Progress goes to stderr; the markdown report goes to stdout and to
# bench/results/proxy_overhead.md. Exit status is non-zero if any target
# failed to start or to produce a result (a missing sluice build is not a
# failure: its row says "sluice: not built").

set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)
SUPPORT_DIR=$SCRIPT_DIR/proxy_overhead
RESULTS_DIR=$REPO_ROOT/bench/results
RESULTS_FILE=${RESULTS_FILE:-$RESULTS_DIR/proxy_overhead.md}

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
PIN=${PIN:-auto}
THREADS=${THREADS:-1}
WRK_THREADS=${WRK_THREADS:-1}
SLUICE_BIN=${SLUICE_BIN:-$REPO_ROOT/build/release/sluice}
NGINX=${NGINX:-/usr/sbin/nginx}
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}
WRK=${WRK:-wrk}
WARMUP=2          # seconds of unrecorded load before every measurement
READY_TIMEOUT=10  # seconds a server gets to start accepting requests
STOP_TIMEOUT=5    # seconds a process gets to exit after SIGTERM
LUA_SCRIPT=$SUPPORT_DIR/post_chat.lua

# PO_TARGETS: a subset, e.g. "direct sluice_fc haproxy" (bench/large_prompts.sh).
SLUICE_BASE_BIN=${SLUICE_BASE_BIN:-}
DEFAULT_TARGETS="direct sluice sluice_fc sluice_fc_thread nginx haproxy"
[[ -n $SLUICE_BASE_BIN ]] && DEFAULT_TARGETS="direct sluice sluice_base sluice_fc sluice_fc_base sluice_fc_thread nginx haproxy"
read -r -a TARGETS <<<"${PO_TARGETS:-$DEFAULT_TARGETS}"

log() { printf '[proxy_overhead] %s\n' "$*" >&2; }
die() { printf 'proxy_overhead: error: %s\n' "$*" >&2; exit 1; }

# --- argument checks: keep the total run time bounded --------------------------
# check_int NAME MIN MAX: NAME's value must be an integer in MIN..MAX.
check_int() {
  local v=${!1}
  if ! [[ $v =~ ^[0-9]+$ ]] || (( v < $2 || v > $3 )); then
    die "$1 must be an integer in $2..$3 (got '$v')"
  fi
}
check_int DURATION 1 600
check_int ROUNDS 1 21
check_int CONNECTIONS 1 1024
[[ $PIN == auto || $PIN == 0 ]] || die "PIN must be 'auto' or '0' (got '$PIN')"
for tool in "$NGINX" "$HAPROXY" "$WRK" curl python3 timeout; do
  command -v "$tool" >/dev/null || die "required tool not found: $tool"
done
[[ -r $LUA_SCRIPT ]] || die "missing $LUA_SCRIPT"

# --- process bookkeeping and cleanup --------------------------------------------
# LIVE holds the pids of every child we started and have not reaped yet. Pids
# are removed once reaped so cleanup can never signal a recycled pid.
declare -A LIVE=()
WORKDIR=""

# alive PID: true if PID exists and is not a zombie (kill -0 succeeds on an
# unreaped zombie, which would make every stop look like a timeout).
alive() {
  local stat rest
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  rest=${stat##*) }   # skip "pid (comm) ": comm may contain spaces
  [[ ${rest%% *} != Z ]]
}

# stop_pid PID: SIGTERM, bounded wait, then SIGKILL the process and its direct
# children (an nginx master killed with SIGKILL would orphan its worker).
# shellcheck disable=SC2317  # also reached from cleanup (EXIT trap)
stop_pid() {
  local pid=$1 deadline children
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
    if alive "$pid"; then
      children=$(pgrep -P "$pid" || true)
      log "pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
      # shellcheck disable=SC2086  # $children is a list of numeric pids
      kill -KILL "$pid" $children 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
  unset "LIVE[$pid]"
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$? pid
  trap '' INT TERM   # finish cleaning up even if the user presses ^C again
  for pid in "${!LIVE[@]}"; do stop_pid "$pid"; done
  if [[ -n $WORKDIR && -d $WORKDIR ]]; then
    if (( rc != 0 )) && [[ -n ${KEEP_WORKDIR_ON_ERROR:-} ]]; then
      log "keeping work dir $WORKDIR"
    else
      rm -rf -- "$WORKDIR"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap does the (single) cleanup.
trap 'exit 130' INT
trap 'exit 143' TERM

# Load before we add any: a busy machine (e.g. a compile) skews every number.
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/sluice-proxy-overhead.XXXXXX")
mkdir -p "$WORKDIR"/{backend,nginx-proxy,haproxy,sluice,wrk}

# --- CPU pinning -------------------------------------------------------------------
SERVER_PIN=()
WRK_PIN=()
PIN_DESC="none (PIN=0)"
if [[ $PIN == auto ]]; then
  # Use the CPUs we are actually allowed to run on (containers/cgroups may not
  # start at CPU 0).
  read -r -a CPUS <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
  if (( ${#CPUS[@]} >= 2 )) && command -v taskset >/dev/null; then
    SERVER_PIN=(taskset -c "${CPUS[0]}")
    WRK_PIN=(taskset -c "${CPUS[1]}")
    PIN_DESC="servers (backend + proxy) on CPU ${CPUS[0]}, wrk on CPU ${CPUS[1]}"
  else
    PIN_DESC="none (fewer than 2 usable CPUs or no taskset)"
  fi
fi

# --- helpers -------------------------------------------------------------------------
# Ask the kernel for N distinct free loopback ports (all bound at once, so they
# differ; the tiny window until our servers bind them is acceptable here).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*[s.getsockname()[1] for s in socks])
EOF
}

# render TEMPLATE OUT KEY=VALUE...: replace @KEY@ placeholders.
render() {
  local tmpl=$1 out=$2 kv args=()
  shift 2
  for kv in "$@"; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
  sed "${args[@]}" "$tmpl" >"$out"
  if grep -q '@[A-Z_]*@' "$out"; then die "unrendered placeholder in $out"; fi
}

# start_bg STDOUT STDERR CMD...: start a server pinned to the server CPU as a
# foreground-mode child; its pid is left in LAST_PID.
LAST_PID=""
start_bg() {
  local out=$1 err=$2
  shift 2
  "${SERVER_PIN[@]}" "$@" >"$out" 2>"$err" </dev/null &
  LAST_PID=$!
  LIVE[$LAST_PID]=1
}

show_logs() {
  local f
  for f in "$@"; do
    [[ -s $f ]] || continue
    printf -- '--- %s (last lines) ---\n' "$f" >&2
    tail -n 15 -- "$f" >&2
  done
}

# wait_ready NAME URL PID LOGS...: poll until URL answers a chat POST with 200,
# bounded by READY_TIMEOUT; fails early if the server process died.
wait_ready() {
  local name=$1 url=$2 pid=$3 code deadline
  shift 3
  deadline=$((SECONDS + READY_TIMEOUT))
  while (( SECONDS < deadline )); do
    if ! alive "$pid"; then
      log "$name exited during start-up"
      show_logs "$@"
      return 1
    fi
    code=$(curl -s -o "$WORKDIR/$name.body" -w '%{http_code}' --max-time 1 \
      -H 'Content-Type: application/json' \
      --data '{"model":"bench-model","messages":[{"role":"user","content":"ping"}]}' \
      "$url" 2>/dev/null) || code=000
    if [[ $code == 200 ]]; then return 0; fi
    sleep 0.1
  done
  log "$name did not answer 200 on $url within ${READY_TIMEOUT}s (last status $code)"
  show_logs "$@"
  return 1
}

# --- start the servers ------------------------------------------------------------------
declare -A URL=() STATUS=() PIDS_OF=() LABEL=()
FAILED=0

# nginx as root defaults its workers to "nobody", which cannot enter our 0700
# work dir (temp paths); run them as the invoking user instead. As non-root,
# nginx ignores "user" with a warning, so we leave it out.
USER_DIRECTIVE=""
if (( EUID == 0 )); then USER_DIRECTIVE="user root;"; fi

read -r BACKEND_PORT NGINX_PORT HAPROXY_PORT <<<"$(free_ports 3)"

NGINX_VERSION=$("$NGINX" -v 2>&1 | sed -n 's|.*nginx/||p')
HAPROXY_VERSION=$("$HAPROXY" -v 2>&1 | awk 'NR==1 {print $3}')
WRK_VERSION=$({ "$WRK" -v 2>&1 || true; } | awk 'NR==1 {print $2}')

LABEL[direct]="direct (nginx $NGINX_VERSION backend)"
LABEL[sluice]="sluice ($THREADS I/O thread(s))"
LABEL[sluice_fc]="sluice + flow control ($THREADS I/O thread(s))"
LABEL[sluice_fc_thread]="sluice + flow control, dispatcher thread (before)"
LABEL[sluice_base]="sluice, base build ($THREADS I/O thread(s))"
LABEL[sluice_fc_base]="sluice + flow control, base build ($THREADS I/O thread(s))"
LABEL[nginx]="nginx $NGINX_VERSION proxy ($THREADS worker(s))"
LABEL[haproxy]="haproxy $HAPROXY_VERSION (nbthread $THREADS)"

log "work dir $WORKDIR; pinning: $PIN_DESC"

# Backend.
render "$SUPPORT_DIR/backend.nginx.conf.in" "$WORKDIR/backend/nginx.conf" \
  "WORKDIR=$WORKDIR" "BACKEND_PORT=$BACKEND_PORT" "USER_DIRECTIVE=$USER_DIRECTIVE"
start_bg "$WORKDIR/backend/stdout.log" "$WORKDIR/backend/stderr.log" \
  "$NGINX" -p "$WORKDIR/backend" -e "$WORKDIR/backend/error.log" -c "$WORKDIR/backend/nginx.conf"
BACKEND_PID=$LAST_PID
URL[direct]="http://127.0.0.1:$BACKEND_PORT/v1/chat/completions"
wait_ready backend "${URL[direct]}" "$BACKEND_PID" \
  "$WORKDIR/backend/stderr.log" "$WORKDIR/backend/error.log" \
  || die "backend failed to start; nothing to measure"
cp "$WORKDIR/backend.body" "$WORKDIR/expected.body"
STATUS[direct]=ok
PIDS_OF[direct]=$BACKEND_PID

# check_proxy NAME: after a proxy is ready, make sure it relays the backend's
# body unchanged (a proxy answering 200 on its own would make numbers bogus).
check_proxy() {
  if ! cmp -s "$WORKDIR/$1.body" "$WORKDIR/expected.body"; then
    log "$1: response body differs from the backend's"
    return 1
  fi
}

# start_sluice NAME TEMPLATE [BINARY]: a sluice target from a config template
# (BINARY: SLUICE_BIN by default).
# sluice prints "listening on 127.0.0.1:PORT" on stdout once bound to port 0.
start_sluice() {
  local name=$1 template=$2 bin=${3:-$SLUICE_BIN} dir=$WORKDIR/$1 line pid port="" deadline
  mkdir -p "$dir"
  if [[ ! -x $bin ]]; then
    # Under make test (SLUICE_TESTS_STRICT=1) nothing may be left out.
    [[ ${SLUICE_TESTS_STRICT:-0} == 0 ]] || die "missing test dependency: sluice binary $bin"
    log "sluice binary not found at $bin; skipping $name"
    STATUS[$name]="not built"
    return
  fi
  render "$SUPPORT_DIR/$template" "$dir/sluice.yaml" "BACKEND_PORT=$BACKEND_PORT"
  # stdbuf -oL: if sluice writes the line through stdio without flushing, a
  # redirected stdout would otherwise be block-buffered and the line would
  # never show up.
  start_bg "$dir/stdout.log" "$dir/stderr.log" \
    stdbuf -oL "$bin" --config "$dir/sluice.yaml" --threads "$THREADS" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  pid=$LAST_PID
  deadline=$((SECONDS + READY_TIMEOUT))
  while (( SECONDS < deadline )) && alive "$pid"; do
    if line=$(grep -m1 -oE 'listening on 127\.0\.0\.1:[0-9]+' "$dir/stdout.log"); then
      port=${line##*:}
      break
    fi
    sleep 0.1
  done
  if [[ -z $port ]]; then
    log "$name did not print 'listening on 127.0.0.1:PORT' within ${READY_TIMEOUT}s"
    show_logs "$dir/stdout.log" "$dir/stderr.log"
    stop_pid "$pid"   # don't leave it competing for the server CPU
    STATUS[$name]="FAILED: no 'listening on' line"
    FAILED=1
    return
  fi
  URL[$name]="http://127.0.0.1:$port/v1/chat/completions"
  if wait_ready "$name" "${URL[$name]}" "$pid" "$dir/stdout.log" "$dir/stderr.log" \
     && check_proxy "$name"; then
    STATUS[$name]=ok
    PIDS_OF[$name]="$pid $BACKEND_PID"
  else
    stop_pid "$pid"
    STATUS[$name]="FAILED: not serving 200 with the backend's body"
    FAILED=1
  fi
}

start_sluice sluice sluice.yaml.in
# The same with flow control on: every request goes through the dispatcher
# thread (one band, a detector that is never saturated).
start_sluice sluice_fc sluice-flowcontrol.yaml.in
# The same with the dispatcher on a thread of its own (server.dispatcher:
# thread; the default before the inline dispatcher): the hop it saves.
start_sluice sluice_fc_thread sluice-flowcontrol-thread.yaml.in
if [[ -n $SLUICE_BASE_BIN ]]; then
  start_sluice sluice_base sluice.yaml.in "$SLUICE_BASE_BIN"
  start_sluice sluice_fc_base sluice-flowcontrol.yaml.in "$SLUICE_BASE_BIN"
fi

# nginx reverse proxy.
render "$SUPPORT_DIR/proxy.nginx.conf.in" "$WORKDIR/nginx-proxy/nginx.conf" \
  "WORKDIR=$WORKDIR" "BACKEND_PORT=$BACKEND_PORT" "PROXY_PORT=$NGINX_PORT" \
  "USER_DIRECTIVE=$USER_DIRECTIVE" "WORKERS=$THREADS"
start_bg "$WORKDIR/nginx-proxy/stdout.log" "$WORKDIR/nginx-proxy/stderr.log" \
  "$NGINX" -p "$WORKDIR/nginx-proxy" -e "$WORKDIR/nginx-proxy/error.log" \
  -c "$WORKDIR/nginx-proxy/nginx.conf"
NGINX_PID=$LAST_PID
URL[nginx]="http://127.0.0.1:$NGINX_PORT/v1/chat/completions"
if wait_ready nginx "${URL[nginx]}" "$NGINX_PID" \
     "$WORKDIR/nginx-proxy/stderr.log" "$WORKDIR/nginx-proxy/error.log" \
   && check_proxy nginx; then
  STATUS[nginx]=ok
  PIDS_OF[nginx]="$NGINX_PID $BACKEND_PID"
else
  stop_pid "$NGINX_PID"
  STATUS[nginx]="FAILED: not serving 200 with the backend's body"
  FAILED=1
fi

# HAProxy (-db: stay in the foreground, no daemon, no master-worker).
render "$SUPPORT_DIR/haproxy.cfg.in" "$WORKDIR/haproxy/haproxy.cfg" \
  "BACKEND_PORT=$BACKEND_PORT" "PROXY_PORT=$HAPROXY_PORT" "WORKERS=$THREADS"
start_bg "$WORKDIR/haproxy/stdout.log" "$WORKDIR/haproxy/stderr.log" \
  "$HAPROXY" -db -f "$WORKDIR/haproxy/haproxy.cfg"
HAPROXY_PID=$LAST_PID
URL[haproxy]="http://127.0.0.1:$HAPROXY_PORT/v1/chat/completions"
if wait_ready haproxy "${URL[haproxy]}" "$HAPROXY_PID" \
     "$WORKDIR/haproxy/stdout.log" "$WORKDIR/haproxy/stderr.log" \
   && check_proxy haproxy; then
  STATUS[haproxy]=ok
  PIDS_OF[haproxy]="$HAPROXY_PID $BACKEND_PID"
else
  stop_pid "$HAPROXY_PID"
  STATUS[haproxy]="FAILED: not serving 200 with the backend's body"
  FAILED=1
fi

# --- measure ------------------------------------------------------------------------------
# wrk_run SECONDS URL OUTFILE: one wrk run, bounded by timeout(1), run in the
# background and waited for so that ^C/TERM interrupt it immediately.
wrk_run() {
  local secs=$1 url=$2 out=$3 pid rc=0
  timeout -k 2 $((secs + 15)) "${WRK_PIN[@]}" "$WRK" -t"$WRK_THREADS" -c"$CONNECTIONS" \
    -d"${secs}s" --timeout 5s --latency -s "$LUA_SCRIPT" "$url" >"$out" 2>&1 </dev/null &
  pid=$!
  LIVE[$pid]=1
  wait "$pid" || rc=$?
  unset "LIVE[$pid]"
  return "$rc"
}

# field LINE KEY: value of KEY=... in a RESULT line.
field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<" $1"; }

median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) exit
          if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# cpu_ticks PID: utime + stime of PID and its children (nginx's workers), in
# clock ticks.
cpu_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  echo "$total"
}
HZ=$(getconf CLK_TCK)

declare -A RPS=() P50=() P99=() ERRS=() OK_ROUNDS=() CPU=()
for t in "${TARGETS[@]}"; do RPS[$t]=""; P50[$t]=""; P99[$t]=""; CPU[$t]=""; ERRS[$t]=0; OK_ROUNDS[$t]=0; done

per_run=$((WARMUP + DURATION))
n_ok=0
for t in "${TARGETS[@]}"; do [[ ${STATUS[$t]} == ok ]] && n_ok=$((n_ok + 1)); done
log "measuring $n_ok target(s) x $ROUNDS round(s) x (${WARMUP}s warm-up + ${DURATION}s): ~$((n_ok * ROUNDS * per_run))s"

for ((round = 1; round <= ROUNDS; round++)); do
  for t in "${TARGETS[@]}"; do
    [[ ${STATUS[$t]} == ok ]] || continue
    dead=""
    for pid in ${PIDS_OF[$t]}; do alive "$pid" || dead=$pid; done
    if [[ -n $dead ]]; then
      log "round $round $t: a server process ($dead) has died; skipping"
      continue
    fi
    out="$WORKDIR/wrk/$t.r$round"
    # Warm-up: fills the proxies' upstream pools and wakes the CPUs; discarded.
    wrk_run "$WARMUP" "${URL[$t]}" "$out.warmup" || true
    # The CPU the proxy process spent (the first of PIDS_OF: for direct, the
    # backend itself) over the measured run.
    read -r proxy_pid _ <<<"${PIDS_OF[$t]}"
    ticks0=$(cpu_ticks "$proxy_pid")
    if ! wrk_run "$DURATION" "${URL[$t]}" "$out.out"; then
      log "round $round $t: wrk failed"
      show_logs "$out.out"
      continue
    fi
    if ! line=$(grep -m1 '^RESULT ' "$out.out"); then
      log "round $round $t: no RESULT line from wrk"
      show_logs "$out.out"
      continue
    fi
    ticks1=$(cpu_ticks "$proxy_pid")
    RPS[$t]+=" $(field "$line" rps)"
    CPU[$t]+=" $(awk -v d=$((ticks1 - ticks0)) -v hz="$HZ" -v n="$(field "$line" requests)" \
      'BEGIN { printf "%.3f", (n > 0) ? d / hz / n * 1e6 : 0 }')"
    P50[$t]+=" $(field "$line" p50_us)"
    P99[$t]+=" $(field "$line" p99_us)"
    ERRS[$t]=$((ERRS[$t] + $(field "$line" errors)))
    OK_ROUNDS[$t]=$((OK_ROUNDS[$t] + 1))
    log "round $round $t: $line"
  done
done

# --- report --------------------------------------------------------------------------------
# Medians per target, computed here (not inside table, which runs in a
# command substitution whose assignments would be lost).
declare -A MED_RPS=() MED_P50=() MED_P99=() MED_CPU=()
for t in "${TARGETS[@]}"; do
  if [[ ${STATUS[$t]} == ok ]] && (( OK_ROUNDS[$t] > 0 )); then
    read -r -a v <<<"${RPS[$t]}"; MED_RPS[$t]=$(median "${v[@]}")
    read -r -a v <<<"${P50[$t]}"; MED_P50[$t]=$(median "${v[@]}")
    read -r -a v <<<"${P99[$t]}"; MED_P99[$t]=$(median "${v[@]}")
    read -r -a v <<<"${CPU[$t]}"; MED_CPU[$t]=$(median "${v[@]}")
  fi
done

table() {
  local t name err
  echo "| target | requests/s | p50 (ms) | p99 (ms) | CPU µs per request | errors |"
  echo "|---|---:|---:|---:|---:|---:|"
  for t in "${TARGETS[@]}"; do
    name=${LABEL[$t]}
    if [[ ${STATUS[$t]} == "not built" ]]; then
      echo "| $name | sluice: not built | – | – | – | – |"
      continue
    elif [[ ${STATUS[$t]} != ok ]]; then
      echo "| **⚠ $name** | **${STATUS[$t]}** | – | – | – | – |"
      continue
    elif (( OK_ROUNDS[$t] == 0 )); then
      echo "| **⚠ $name** | **FAILED: no successful round** | – | – | – | – |"
      continue
    fi
    err=${ERRS[$t]}
    if (( err > 0 )); then
      name="**⚠ $name**"
      err="**⚠ $err**"
    fi
    if (( OK_ROUNDS[$t] < ROUNDS )); then
      name="$name (only ${OK_ROUNDS[$t]}/$ROUNDS rounds)"
    fi
    printf '| %s | %.0f | %.2f | %.2f | %.1f | %s |\n' "$name" "${MED_RPS[$t]}" \
      "$(awk -v v="${MED_P50[$t]}" 'BEGIN { print v / 1000 }')" \
      "$(awk -v v="${MED_P99[$t]}" 'BEGIN { print v / 1000 }')" "${MED_CPU[$t]}" "$err"
  done
}

# ratio A B: A/B with 2 decimals, or n/a.
ratio() {
  if [[ -n $1 && -n $2 ]]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
  else echo "n/a"; fi
}

# With SLUICE_BASE_BIN: this build against the base build, same rounds.
base_lines() {
  [[ -n $SLUICE_BASE_BIN ]] || return 0
  echo "- base build: $SLUICE_BASE_BIN (${STATUS[sluice_base]:-}, ${STATUS[sluice_fc_base]:-})"
  echo "- sluice / base: rps $(ratio "${MED_RPS[sluice]:-}" "${MED_RPS[sluice_base]:-}"), CPU per request $(ratio "${MED_CPU[sluice]:-}" "${MED_CPU[sluice_base]:-}")"
  echo "- sluice + flow control / base: rps $(ratio "${MED_RPS[sluice_fc]:-}" "${MED_RPS[sluice_fc_base]:-}"), CPU per request $(ratio "${MED_CPU[sluice_fc]:-}" "${MED_CPU[sluice_fc_base]:-}"), p99 $(ratio "${MED_P99[sluice_fc]:-}" "${MED_P99[sluice_fc_base]:-}")"
  echo "- base + flow control/haproxy: CPU per request $(ratio "${MED_CPU[sluice_fc_base]:-}" "${MED_CPU[haproxy]:-}")"
}

report() {
  cat <<EOF
# Proxy overhead: sluice vs nginx vs HAProxy

- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')
- host: nproc=$(nproc), load average before run: $LOADAVG
- nginx $NGINX_VERSION, HAProxy $HAPROXY_VERSION, wrk $WRK_VERSION
- sluice: $SLUICE_BIN (${STATUS[sluice]}); repo commit: $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo none)
- load: wrk -t$WRK_THREADS -c$CONNECTIONS, POST /v1/chat/completions with a $BODY_BYTES-byte JSON body; ${WARMUP}s warm-up + ${DURATION}s per target, $ROUNDS interleaved round(s), median reported; errors summed over rounds
- pinning: $PIN_DESC
- proxies with $THREADS I/O thread(s) each (sluice --threads, nginx worker_processes, HAProxy nbthread), keep-alive to the client and pooled keep-alive to the backend (nginx 1 worker, static \`return 200\`, ${BACKEND_BYTES}-byte body)

$(table)

- sluice/nginx rps: $(ratio "${MED_RPS[sluice]:-}" "${MED_RPS[nginx]:-}")
- sluice/haproxy rps: $(ratio "${MED_RPS[sluice]:-}" "${MED_RPS[haproxy]:-}")
- sluice+flow control/nginx rps: $(ratio "${MED_RPS[sluice_fc]:-}" "${MED_RPS[nginx]:-}")
- sluice+flow control/nginx p99: $(ratio "${MED_P99[sluice_fc]:-}" "${MED_P99[nginx]:-}") (lower is better)
- sluice/nginx p99: $(ratio "${MED_P99[sluice]:-}" "${MED_P99[nginx]:-}") (lower is better)
- sluice+flow control/haproxy: rps $(ratio "${MED_RPS[sluice_fc]:-}" "${MED_RPS[haproxy]:-}"), p99 $(ratio "${MED_P99[sluice_fc]:-}" "${MED_P99[haproxy]:-}"), CPU per request $(ratio "${MED_CPU[sluice_fc]:-}" "${MED_CPU[haproxy]:-}") (lower is better)
- sluice+flow control, inline dispatcher / dispatcher thread: rps $(ratio "${MED_RPS[sluice_fc]:-}" "${MED_RPS[sluice_fc_thread]:-}"), CPU per request $(ratio "${MED_CPU[sluice_fc]:-}" "${MED_CPU[sluice_fc_thread]:-}")
$(base_lines)
EOF
}

BODY_BYTES=$(sed -n 's/.* body_bytes=\([0-9]*\).*/\1/p' "$WORKDIR"/wrk/*.out 2>/dev/null | awk 'NR==1') || true
BODY_BYTES=${BODY_BYTES:-"~1000"}
BACKEND_BYTES=$(wc -c <"$WORKDIR/expected.body")

mkdir -p "$RESULTS_DIR"
report | tee "$RESULTS_FILE"
log "report written to $RESULTS_FILE"

for t in "${TARGETS[@]}"; do
  if [[ ${STATUS[$t]} == ok ]] && (( OK_ROUNDS[$t] < ROUNDS )); then FAILED=1; fi
done
exit "$FAILED"
