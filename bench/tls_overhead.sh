#!/usr/bin/env bash
# TLS overhead benchmark: sluice vs HAProxy vs nginx terminating TLS for the
# client (the same ECDSA P-256 certificate, TLS 1.3 with one suite for all)
# in front of one static nginx backend over plain HTTP. Two modes:
#   keepalive (default)  wrk over https with keep-alive: what is measured is
#                        the records, not the handshakes
#   newconn              every request on a new connection (wrk with
#                        Connection: close), each a full TLS handshake: wrk
#                        would resume its last session on every reconnect,
#                        so tls_overhead/wrk_sessions.c (LD_PRELOAD) drops
#                        it before each handshake and counts the full and
#                        resumed ones, which the script checks and reports
# Modeled on bench/proxy_overhead.sh: its backend and wrk script, its CPU
# pinning, interleaved rounds and CPU per request; each peer also plain,
# so each one's own TLS cost is in the same run.
#
# Usage:   bench/tls_overhead.sh
# Env:     MODE         keepalive | newconn (default keepalive)
#          RESUME       newconn only: 1 lets wrk resume its sessions (TLS 1.3
#                       tickets), to measure resumption instead (default 0)
#          SLUICE_BIN   sluice binary (default: <repo>/build/release/sluice)
#          DURATION     seconds measured per target and round (default 10)
#          ROUNDS       interleaved rounds; the median is reported (default 3)
#          WARMUP       seconds of wrk before each measured run (default 2)
#          CONNECTIONS  wrk connections (default 64)
#          PIN          auto|0: servers on the first usable CPU, wrk on the
#                       second (default auto), as in proxy_overhead.sh
#          SUITE        the TLS 1.3 suite every server offers (default
#                       TLS_AES_128_GCM_SHA256)
#          RESULTS_FILE where the report goes (default
#                       bench/results/tls_overhead.md, tls_newconn.md for newconn)
#
# Targets, in this order in every round:
#   direct       wrk -> backend (http)
#   sluice       wrk -> sluice (1 I/O thread) -> backend, http
#   sluice_tls   the same sluice, its TLS listener
#   nginx        wrk -> nginx (1 worker, upstream keepalive 64), http
#   nginx_tls    the same nginx, its TLS listener
#   haproxy      wrk -> HAProxy (nbthread 1, http-reuse always), http
#   haproxy_tls  the same HAProxy, its TLS bind
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)
# shellcheck source=bench/lib.sh
source "$SCRIPT_DIR/lib.sh"  # WORK, PIDS, log, the EXIT trap

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
PIN=${PIN:-auto}
SUITE=${SUITE:-TLS_AES_128_GCM_SHA256}
SLUICE_BIN=${SLUICE_BIN:-$REPO_ROOT/build/release/sluice}
MODE=${MODE:-keepalive}
RESUME=${RESUME:-0}
case $MODE in
  keepalive) RESULTS_FILE=${RESULTS_FILE:-$REPO_ROOT/bench/results/tls_overhead.md} ;;
  newconn) RESULTS_FILE=${RESULTS_FILE:-$REPO_ROOT/bench/results/tls_newconn.md} ;;
  *) log "MODE must be keepalive or newconn (got '$MODE')"; exit 2 ;;
esac
WARMUP=${WARMUP:-2}
READY_TIMEOUT=10
LUA_SCRIPT=$SCRIPT_DIR/proxy_overhead/post_chat.lua
TARGETS=(direct sluice sluice_tls nginx nginx_tls haproxy haproxy_tls)

# check_int NAME MIN MAX: NAME's value must be an integer in MIN..MAX.
check_int() {
  local v=${!1}
  if ! [[ $v =~ ^[0-9]+$ ]] || (( v < $2 || v > $3 )); then
    log "$1 must be an integer in $2..$3 (got '$v')"
    exit 2
  fi
}
check_int DURATION 1 600
check_int ROUNDS 1 21
check_int WARMUP 1 60
check_int CONNECTIONS 1 1024
check_int RESUME 0 1
[[ $SUITE =~ ^[A-Z0-9_:]+$ ]] || { log "SUITE: TLS 1.3 suite names only"; exit 2; }
for tool in nginx haproxy wrk curl openssl python3 timeout; do
  command -v "$tool" >/dev/null || { log "required tool not found: $tool"; exit 2; }
done
[[ -x $SLUICE_BIN ]] || { log "no sluice at $SLUICE_BIN (make release, or set SLUICE_BIN)"; exit 2; }

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$WORK"/{backend,nginx,sluice,wrk}

# newconn: the handshake counter preloaded into wrk (see its header).
WRK_ARGS=()
if [[ $MODE == newconn ]]; then
  command -v cc >/dev/null || { log "MODE=newconn needs a C compiler (cc)"; exit 2; }
  cc -O2 -shared -fPIC -o "$WORK/wrk_sessions.so" "$SCRIPT_DIR/tls_overhead/wrk_sessions.c" -ldl ||
    { log "cannot build tls_overhead/wrk_sessions.c"; exit 1; }
  WRK_ARGS=(-H 'Connection: close')
fi

# --- CPU pinning, as bench/proxy_overhead.sh ---------------------------------------
SERVER_PIN=()
WRK_PIN=()
PIN_DESC="none (PIN=0)"
if [[ $PIN == auto ]]; then
  read -r -a CPUS <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
  if (( ${#CPUS[@]} >= 2 )) && command -v taskset >/dev/null; then
    SERVER_PIN=(taskset -c "${CPUS[0]}")
    WRK_PIN=(taskset -c "${CPUS[1]}")
    PIN_DESC="servers (backend + proxy) on CPU ${CPUS[0]}, wrk on CPU ${CPUS[1]}"
  else
    PIN_DESC="none (fewer than 2 usable CPUs or no taskset)"
  fi
fi

# --- the certificate: a private CA and an ECDSA P-256 server certificate ----------
make_pki "$WORK/pki"

# --- helpers --------------------------------------------------------------------------
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

# render TEMPLATE OUT: @KEY@ placeholders from the variables below.
render() {
  sed -e "s|@WORKDIR@|$WORK|g" -e "s|@BACKEND_PORT@|$BACKEND_PORT|g" \
    -e "s|@PLAIN_PORT@|${PLAIN_PORT:-}|g" -e "s|@TLS_PORT@|${TLS_PORT:-}|g" \
    -e "s|@SUITE@|$SUITE|g" -e "s|@USER_DIRECTIVE@|$USER_DIRECTIVE|g" "$1" >"$2"
  if grep -q '@[A-Z_]*@' "$2"; then log "unrendered placeholder in $2"; exit 1; fi
}

# start NAME CMD...: a server pinned to the server CPU; its pid in LAST_PID.
start() {
  local name=$1
  shift
  "${SERVER_PIN[@]}" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
}

BODY='{"model":"bench-model","messages":[{"role":"user","content":"ping"}]}'
# ready NAME URL: answers 200 with the backend's body within READY_TIMEOUT
# (https verified against the run's CA); the negotiated TLS noted.
ready() {
  local name=$1 url=$2 deadline=$((SECONDS + READY_TIMEOUT)) code
  while (( SECONDS < deadline )); do
    code=$(curl -sv -o "$WORK/$name.body" -w '%{http_code}' --max-time 2 --cacert "$WORK/pki/ca.pem" \
      -H 'Content-Type: application/json' --data "$BODY" "$url" 2>"$WORK/$name.curl") || code=000
    if [[ $code == 200 ]]; then
      if [[ $name != direct ]] && ! cmp -s "$WORK/$name.body" "$WORK/direct.body"; then
        log "$name: the body differs from the backend's"
        return 1
      fi
      NEGOTIATED[$name]=$(sed -n 's/^\* SSL connection using //p' "$WORK/$name.curl")
      if [[ $url == https://* ]]; then
        local hostport=${url#https://}
        NEGOTIATED[$name]+=" / $(tls_group "${hostport%%/*}" "$WORK/pki/ca.pem")"
      fi
      return 0
    fi
    sleep 0.1
  done
  log "$name: no 200 from $url within ${READY_TIMEOUT}s"
  tail -n 5 "$WORK"/*.err >&2 || true
  return 1
}

declare -A URL=() PID_OF=() NEGOTIATED=()
USER_DIRECTIVE=""
if (( EUID == 0 )); then USER_DIRECTIVE="user root;"; fi
read -r BACKEND_PORT NGINX_PLAIN NGINX_TLS HAPROXY_PLAIN HAPROXY_TLS <<<"$(free_ports 5)"

# --- the servers ------------------------------------------------------------------------
render "$SCRIPT_DIR/proxy_overhead/backend.nginx.conf.in" "$WORK/backend/nginx.conf"
start backend nginx -p "$WORK/backend" -e "$WORK/backend/error.log" -c "$WORK/backend/nginx.conf"
PID_OF[direct]=$LAST_PID
URL[direct]="http://127.0.0.1:$BACKEND_PORT/v1/chat/completions"
ready direct "${URL[direct]}" || exit 1

render "$SCRIPT_DIR/tls_overhead/sluice.yaml.in" "$WORK/sluice/sluice.yaml"
start sluice stdbuf -oL "$SLUICE_BIN" --config "$WORK/sluice/sluice.yaml" --admin-listen 127.0.0.1:0
PID_OF[sluice]=$LAST_PID
PID_OF[sluice_tls]=$LAST_PID
URL[sluice]="http://127.0.0.1:$(wait_printed_port "$WORK/sluice.out" '^listening on')/v1/chat/completions"
URL[sluice_tls]="https://127.0.0.1:$(wait_printed_port "$WORK/sluice.out" 'tls listening on')/v1/chat/completions"

PLAIN_PORT=$NGINX_PLAIN TLS_PORT=$NGINX_TLS render "$SCRIPT_DIR/tls_overhead/nginx.conf.in" "$WORK/nginx/nginx.conf"
start nginx nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf"
PID_OF[nginx]=$LAST_PID
PID_OF[nginx_tls]=$LAST_PID
URL[nginx]="http://127.0.0.1:$NGINX_PLAIN/v1/chat/completions"
URL[nginx_tls]="https://127.0.0.1:$NGINX_TLS/v1/chat/completions"

PLAIN_PORT=$HAPROXY_PLAIN TLS_PORT=$HAPROXY_TLS render "$SCRIPT_DIR/tls_overhead/haproxy.cfg.in" "$WORK/haproxy.cfg"
start haproxy haproxy -db -f "$WORK/haproxy.cfg"
PID_OF[haproxy]=$LAST_PID
PID_OF[haproxy_tls]=$LAST_PID
URL[haproxy]="http://127.0.0.1:$HAPROXY_PLAIN/v1/chat/completions"
URL[haproxy_tls]="https://127.0.0.1:$HAPROXY_TLS/v1/chat/completions"

for t in "${TARGETS[@]}"; do
  [[ $t == direct ]] || ready "$t" "${URL[$t]}" || exit 1
done
log "work dir $WORK; pinning: $PIN_DESC"

# --- measure ---------------------------------------------------------------------------
# cpu_ticks PID: utime + stime of PID and its children (nginx's worker).
cpu_ticks() {
  local total=0 p
  for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  echo "$total"
}
HZ=$(getconf CLK_TCK)
field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<" $1"; }
median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) exit
          if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# wrk_run SECONDS URL OUT: wrk's output in OUT; in newconn mode its
# handshake counts in OUT.sessions ("full=N resumed=M").
wrk_run() {
  local preload=()
  [[ $MODE == newconn ]] && preload=(env "LD_PRELOAD=$WORK/wrk_sessions.so"
    "WRK_SESSIONS_OUT=$3.sessions" "WRK_SESSIONS_RESUME=$RESUME")
  timeout -k 2 $(($1 + 15)) "${WRK_PIN[@]}" "${preload[@]}" wrk -t1 -c"$CONNECTIONS" -d"$1s" \
    --timeout 5s --latency "${WRK_ARGS[@]}" -s "$LUA_SCRIPT" "$2" >"$3" 2>&1 </dev/null
}

declare -A RPS=() CPU=() P50=() P99=() ERRS=() FULL=() RESUMED=()
for t in "${TARGETS[@]}"; do
  RPS[$t]=""; CPU[$t]=""; P50[$t]=""; P99[$t]=""; ERRS[$t]=0; FULL[$t]=0; RESUMED[$t]=0
done
log "measuring ${#TARGETS[@]} targets x $ROUNDS round(s) x (${WARMUP}s + ${DURATION}s)"
for ((round = 1; round <= ROUNDS; round++)); do
  for t in "${TARGETS[@]}"; do
    out="$WORK/wrk/$t.r$round"
    wrk_run "$WARMUP" "${URL[$t]}" "$out.warmup" || true
    ticks0=$(cpu_ticks "${PID_OF[$t]}")
    if ! wrk_run "$DURATION" "${URL[$t]}" "$out.out" || ! line=$(grep -m1 '^RESULT ' "$out.out"); then
      log "round $round $t: wrk failed"
      tail -n 5 "$out.out" >&2
      exit 1
    fi
    ticks1=$(cpu_ticks "${PID_OF[$t]}")
    RPS[$t]+=" $(field "$line" rps)"
    CPU[$t]+=" $(awk -v d=$((ticks1 - ticks0)) -v hz="$HZ" -v n="$(field "$line" requests)" \
      'BEGIN { printf "%.3f", (n > 0) ? d / hz / n * 1e6 : 0 }')"
    P50[$t]+=" $(field "$line" p50_us)"
    P99[$t]+=" $(field "$line" p99_us)"
    ERRS[$t]=$((ERRS[$t] + $(field "$line" errors)))
    if [[ $MODE == newconn ]]; then
      sessions=$(cat "$out.out.sessions" 2>/dev/null) || { log "round $round $t: no handshake counts"; exit 1; }
      FULL[$t]=$((FULL[$t] + $(field "$sessions" full)))
      RESUMED[$t]=$((RESUMED[$t] + $(field "$sessions" resumed)))
      line+=" $sessions"
    fi
    log "round $round $t: $line cpu_us_per_request=${CPU[$t]##* }"
  done
done

# --- report ---------------------------------------------------------------------------
declare -A M_RPS=() M_CPU=() M_P50=() M_P99=()
for t in "${TARGETS[@]}"; do
  read -r -a v <<<"${RPS[$t]}"; M_RPS[$t]=$(median "${v[@]}")
  read -r -a v <<<"${CPU[$t]}"; M_CPU[$t]=$(median "${v[@]}")
  read -r -a v <<<"${P50[$t]}"; M_P50[$t]=$(median "${v[@]}")
  read -r -a v <<<"${P99[$t]}"; M_P99[$t]=$(median "${v[@]}")
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

table() {
  local t
  if [[ $MODE == newconn ]]; then
    echo "| target | TLS | requests/s | connection time (ms) | p50 (ms) | p99 (ms) | CPU µs per request | handshakes full / resumed | errors |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  else
    echo "| target | TLS | requests/s | p50 (ms) | p99 (ms) | CPU µs per request | errors |"
    echo "|---|---|---:|---:|---:|---:|---:|"
  fi
  for t in "${TARGETS[@]}"; do
    printf '| %s | %s | %.0f' "$t" "${NEGOTIATED[$t]:-–}" "${M_RPS[$t]}"
    # The mean time a connection takes, connect and handshake included
    # (Little's law: CONNECTIONS connections, each busy all the time).
    [[ $MODE == newconn ]] && printf ' | %.2f' \
      "$(awk -v c="$CONNECTIONS" -v r="${M_RPS[$t]}" 'BEGIN { print (r > 0) ? c / r * 1000 : 0 }')"
    printf ' | %.2f | %.2f | %.1f' "$(awk -v v="${M_P50[$t]}" 'BEGIN { print v / 1000 }')" \
      "$(awk -v v="${M_P99[$t]}" 'BEGIN { print v / 1000 }')" "${M_CPU[$t]}"
    [[ $MODE == newconn ]] && printf ' | %s / %s' "${FULL[$t]}" "${RESUMED[$t]}"
    printf ' | %s |\n' "${ERRS[$t]}"
  done
}

load_line() {
  if [[ $MODE == keepalive ]]; then
    echo "wrk -t1 -c$CONNECTIONS over keep-alive connections (the handshakes are not measured)"
  elif (( RESUME )); then
    echo "wrk -t1 -c$CONNECTIONS, Connection: close (a new connection per request), wrk resuming its TLS 1.3 session on each (RESUME=1)"
  else
    echo "wrk -t1 -c$CONNECTIONS, Connection: close (a new connection per request), a full TLS handshake on each (wrk's session dropped before it; counts below); wrk's p50/p99 run from the request's first byte to the answer's last (connect and handshake not included); the connection time (CONNECTIONS ÷ requests/s) includes them"
  fi
}

report() {
  cat <<EOF
# TLS overhead ($MODE): sluice vs nginx vs HAProxy terminating TLS

- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')
- host: nproc=$(nproc), load average before run: $LOADAVG
- $(nginx -v 2>&1 | sed 's|.*/|nginx |'), $(haproxy -v | awk 'NR==1 {print "HAProxy " $3}'), $(openssl version | awk '{print $1, $2}'), wrk $({ wrk -v 2>&1 || true; } | awk 'NR==1 {print $2}')
- sluice: $SLUICE_BIN; repo commit: $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo none)
- load: $(load_line), POST /v1/chat/completions, ~1 KB body; ${WARMUP}s warm-up + ${DURATION}s per target, $ROUNDS interleaved round(s), median reported
- TLS: ECDSA P-256 certificate, TLS 1.3, suite $SUITE on every server; the backend is plain HTTP
- pinning: $PIN_DESC; every proxy has 1 I/O thread / worker

$(table)

- TLS / plain, CPU per request: sluice $(ratio "${M_CPU[sluice_tls]}" "${M_CPU[sluice]}"), nginx $(ratio "${M_CPU[nginx_tls]}" "${M_CPU[nginx]}"), HAProxy $(ratio "${M_CPU[haproxy_tls]}" "${M_CPU[haproxy]}")
- TLS, sluice / nginx: CPU per request $(ratio "${M_CPU[sluice_tls]}" "${M_CPU[nginx_tls]}"), rps $(ratio "${M_RPS[sluice_tls]}" "${M_RPS[nginx_tls]}"), p99 $(ratio "${M_P99[sluice_tls]}" "${M_P99[nginx_tls]}")
- TLS, sluice / HAProxy: CPU per request $(ratio "${M_CPU[sluice_tls]}" "${M_CPU[haproxy_tls]}"), rps $(ratio "${M_RPS[sluice_tls]}" "${M_RPS[haproxy_tls]}"), p99 $(ratio "${M_P99[sluice_tls]}" "${M_P99[haproxy_tls]}")
EOF
}

mkdir -p "$(dirname "$RESULTS_FILE")"
report | tee "$RESULTS_FILE"
log "report written to $RESULTS_FILE"
for t in "${TARGETS[@]}"; do (( ERRS[$t] == 0 )) || exit 1; done
# newconn: every TLS request had its own handshake, full unless RESUME=1.
if [[ $MODE == newconn ]]; then
  for t in "${TARGETS[@]}"; do
    [[ $t == *_tls ]] || continue
    if (( FULL[$t] + RESUMED[$t] == 0 )) || { (( ! RESUME )) && (( RESUMED[$t] > 0 )); }; then
      log "$t: handshakes full=${FULL[$t]} resumed=${RESUMED[$t]} (RESUME=$RESUME)"
      exit 1
    fi
  done
fi
