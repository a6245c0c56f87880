#!/usr/bin/env bash
# Issue 14, thousands of streams: STREAMS concurrent SSE streams (closed
# loop: each client streams MAX_TOKENS tokens, then asks again) from three
# sluice-mock endpoints decoding one token every MS_PER_TOKEN ms, relayed by
# each target in turn, in interleaved rounds:
#   direct   three drivers, each to its own mock (the mocks' and drivers'
#            own cost: confirms they are not the bottleneck)
#   sluice   sluice, 1 I/O thread, flow control and the scheduler on
#   nginx    1 worker, proxy_buffering off (as for any SSE), upstream keepalive
#   haproxy  nbthread 1, http-reuse always
#   sluice_tls, nginx_tls, haproxy_tls
#            the same proxy terminating TLS from the drivers (sluice-load
#            over https, the server verified against the run's private CA;
#            an ECDSA P-256 certificate, TLS 1.3 with one suite, as in
#            bench/tls_overhead.sh), plain HTTP to the mocks
# Each round, for each target: three sluice-load drivers (STREAMS/3 clients
# each) for DURATION seconds after WARMUP; the proxy's CPU (utime+stime of
# its processes) over the measured window divided by the token events the
# drivers received in it; the inter-token gap (time between two token
# events of a stream at the client) p50/p99/p99.9 against direct's.
#
#   bash bench/streams.sh [BUILD_DIR]
#   env: STREAMS (2000) MS_PER_TOKEN (50) MAX_TOKENS (64) DURATION (20)
#        WARMUP (5) ROUNDS (3) ST_TARGETS ("direct sluice nginx haproxy")
#        SUITE (TLS_AES_128_GCM_SHA256, for the _tls targets)
#        RESULTS_FILE (bench/results/streams.md; streams_tls.md when a
#        target is a _tls one)
#        SLUICE_B: another sluice binary, run as target "sluice-b" (an A/B
#        of two builds in the same interleaved rounds)
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
STREAMS=${STREAMS:-2000}
MS_PER_TOKEN=${MS_PER_TOKEN:-50}
MAX_TOKENS=${MAX_TOKENS:-64}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-5}
ROUNDS=${ROUNDS:-3}
read -r -a TARGETS <<<"${ST_TARGETS:-direct sluice nginx haproxy}"
SUITE=${SUITE:-TLS_AES_128_GCM_SHA256}
[[ $SUITE =~ ^[A-Z0-9_:]+$ ]] || { echo "SUITE: TLS 1.3 suite names only" >&2; exit 1; }
if [[ " ${TARGETS[*]}" == *_tls* ]]; then
  RESULTS_FILE=${RESULTS_FILE:-$ROOT/bench/results/streams_tls.md}
else
  RESULTS_FILE=${RESULTS_FILE:-$ROOT/bench/results/streams.md}
fi
NGINX=${NGINX:-/usr/sbin/nginx}
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}
for tool in "$BUILD/sluice" "$BUILD/sluice-mock" "$BUILD/sluice-load" "$NGINX" "$HAPROXY" python3 openssl; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
# Each stream holds a client and an upstream connection in the proxy.
ulimit -n "$(ulimit -Hn)"
(( $(ulimit -n) >= 2 * STREAMS + 256 )) || { log "open files limit $(ulimit -n) is below 2 x STREAMS"; exit 1; }
OUT=$WORK/out
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$OUT" "$(dirname "$RESULTS_FILE")"
# The certificate the _tls targets serve (made for every run: the peers'
# configs name it either way, and a plain listener does not read it).
make_pki "$WORK/pki"

start_mocks "$BUILD" --max-running 100000 --decode-ms-per-token "$MS_PER_TOKEN" \
  --kv-capacity-tokens 1000000000 --prefill-us-per-token 1
MOCK_PIDS=("${PIDS[@]}")
PIDS=()  # the mocks live through every round; stop_all stops the proxies
# ... and they are stopped on exit too (they once outlived every run, and
# with them any descriptor they inherited, such as a caller's lock).
trap 'PIDS+=("${MOCK_PIDS[@]}"); cleanup' EXIT

PER_DRIVER=$((STREAMS / 3))
cat >"$WORK/scenario.yaml" <<EOF
name: streams
duration: ${DURATION}s
warmup: ${WARMUP}s
drain: 10s
timeout: 60s
maxRequests: 10000000
maxConnections: $((PER_DRIVER + 16))
flows:
  - name: stream
    arrival: {type: closed, clients: $PER_DRIVER}
    promptTokens: 16
    maxTokens: $MAX_TOKENS
    stream: true
EOF

# sluice_yaml [tls]: sluice's config, with a TLS listener if asked.
sluice_yaml() {
  cat <<EOF
server:
  listen: 127.0.0.1:0
  threads: 1
  # As many idle upstream connections as nginx's keepalive 1024 below.
  upstreamMaxIdlePerEndpoint: 342
EOF
  [[ ${1:-} == tls ]] && cat <<EOF
  tls:
    listen: 127.0.0.1:0
    certificateFile: $WORK/pki/server.pem
    keyFile: $WORK/pki/server.key
    cipherSuites: $SUITE
EOF
  cat <<EOF
endpoints:
  - address: 127.0.0.1:${M[0]}
  - address: 127.0.0.1:${M[1]}
  - address: 127.0.0.1:${M[2]}
featureGates: [flowControl]
plugins:
  - type: concurrency-detector
    parameters: {maxConcurrency: 1000000}
saturationDetector: {pluginRef: concurrency-detector}
flowControl: {}
EOF
}
sluice_yaml >"$WORK/sluice.yaml"
sluice_yaml tls >"$WORK/sluice_tls.yaml"

mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
worker_rlimit_nofile $(ulimit -n);
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/client_body;
    proxy_temp_path       $WORK/nginx/proxy;
    fastcgi_temp_path     $WORK/nginx/fastcgi;
    uwsgi_temp_path       $WORK/nginx/uwsgi;
    scgi_temp_path        $WORK/nginx/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    upstream pool {
        least_conn;
        server 127.0.0.1:${M[0]};
        server 127.0.0.1:${M[1]};
        server 127.0.0.1:${M[2]};
        keepalive 1024;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:@PORT@@SSL@ backlog=4096;
        ssl_certificate     $WORK/pki/server.pem;
        ssl_certificate_key $WORK/pki/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_conf_command Ciphersuites $SUITE;
        location / {
            proxy_pass http://pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 120s;
        }
    }
}
EOF

cat >"$WORK/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn $(( ($(ulimit -n) - 200) / 2 ))
    ssl-default-bind-options ssl-min-ver TLSv1.2
    ssl-default-bind-ciphersuites $SUITE
defaults
    mode http
    option http-keep-alive
    # Without it HAProxy sends with MSG_MORE and the kernel holds a lone
    # event for up to 200 ms (measured: inter-token p99 259 ms): any SSE
    # deployment sets it.
    option http-no-delay
    http-reuse always
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    timeout http-request 10s
    timeout http-keep-alive 75s
frontend fe
    bind 127.0.0.1:@PORT@@SSL@
    default_backend pool
backend pool
    balance leastconn
    server m1 127.0.0.1:${M[0]}
    server m2 127.0.0.1:${M[1]}
    server m3 127.0.0.1:${M[2]}
EOF

# wait_up PID PORT [TARGET]: until PORT answers HTTP, or fail if PID exits
# or 10 s pass. For a _tls TARGET: over https, the certificate verified
# against the run's CA; what was negotiated goes to $OUT/TARGET.tls.
wait_up() {
  local deadline=$((SECONDS + 10)) t=${3:-} scheme=http
  [[ $t == *_tls ]] && scheme=https
  until curl -sv -o /dev/null --cacert "$WORK/pki/ca.pem" "$scheme://127.0.0.1:$2/metrics" \
    2>"$WORK/wait_up.curl"; do
    kill -0 "$1" 2>/dev/null || { log "process $1 exited before listening on $2"; exit 1; }
    (( SECONDS < deadline )) || { log "nothing listening on $2 after 10 s"; exit 1; }
    sleep 0.05
  done
  [[ $scheme == http ]] ||
    echo "$(sed -n 's/^\* SSL connection using //p' "$WORK/wait_up.curl") / $(tls_group "127.0.0.1:$2" "$WORK/pki/ca.pem")" >"$OUT/$t.tls"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# cpu_of PID...: utime+stime of these processes, in seconds (one awk: the
# samples are taken at nearly one instant).
cpu_of() {
  local files=() p
  for p in "$@"; do files+=("/proc/$p/stat"); done
  awk -v hz="$(getconf CLK_TCK)" '{ t += $14 + $15 } END { printf "%.2f\n", t / hz }' "${files[@]}"
}

run_target() {  # round target
  local round=$1 t=$2 port proxy_pids=() targets=() scheme=http nginx_ssl="" haproxy_ssl=""
  if [[ $t == *_tls ]]; then
    scheme=https
    nginx_ssl=" ssl"
    haproxy_ssl=" ssl crt $WORK/pki/combined.pem alpn http/1.1"
  fi
  case ${t%_tls} in
    direct) targets=("${M[@]}") ;;
    sluice | sluice-b)
      local bin=$BUILD/sluice config=$WORK/sluice.yaml
      [[ $t == sluice-b* ]] && bin=${SLUICE_B:?sluice-b needs SLUICE_B, the binary to compare}
      [[ $scheme == https ]] && config=$WORK/sluice_tls.yaml
      : >"$WORK/sluice.out"  # emptied here: see wait_listening (bench/lib.sh)
      "$bin" --config "$config" >"$WORK/sluice.out" 2>"$WORK/sluice.err" &
      PIDS+=($!)
      proxy_pids=($!)
      if [[ $scheme == https ]]; then
        port=$(wait_printed_port "$WORK/sluice.out" 'tls listening on')
        wait_up "${proxy_pids[0]}" "$port" "$t"
      else
        port=$(wait_printed_port "$WORK/sluice.out" '^listening on')
      fi
      targets=("$port" "$port" "$port")
      ;;
    nginx)
      port=$(free_port)
      sed -e "s/@PORT@/$port/" -e "s/@SSL@/$nginx_ssl/" "$WORK/nginx/nginx.conf" >"$WORK/nginx/run.conf"
      "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/run.conf" -e "$WORK/nginx/error.log" &
      PIDS+=($!)
      proxy_pids=($!)
      wait_up "${proxy_pids[0]}" "$port" "$t"
      proxy_pids+=($(pgrep -P "${proxy_pids[0]}"))
      targets=("$port" "$port" "$port")
      ;;
    haproxy)
      port=$(free_port)
      sed -e "s/@PORT@/$port/" -e "s|@SSL@|$haproxy_ssl|" "$WORK/haproxy.cfg" >"$WORK/haproxy.run.cfg"
      "$HAPROXY" -db -f "$WORK/haproxy.run.cfg" >"$WORK/haproxy.out" 2>&1 &
      PIDS+=($!)
      proxy_pids=($!)
      wait_up "${proxy_pids[0]}" "$port" "$t"
      targets=("$port" "$port" "$port")
      ;;
  esac
  log "round $round: $t"
  local drivers=() i
  # The mocks (direct) speak plain HTTP only.
  [[ $t == direct ]] && scheme=http
  for i in 0 1 2; do
    "$BUILD/sluice-load" --scenario "$WORK/scenario.yaml" --target "$scheme://127.0.0.1:${targets[$i]}" \
      --ca-file "$WORK/pki/ca.pem" --quiet --json "$OUT/$round-$t-$i.json" >/dev/null \
      2>"$OUT/$round-$t-$i.err" &
    drivers+=($!)
  done
  # The measured window, as the drivers count it (their clocks start within
  # milliseconds of each other and of this one).
  # CPU is sampled over most of the measured window (ending a second early,
  # while every driver still runs) and divided by the wall time between the
  # samples: cores, then per event at the drivers' event rate.
  sleep "$WARMUP"
  local s0 s1
  s0="$(date +%s.%N) $( ((${#proxy_pids[@]})) && cpu_of "${proxy_pids[@]}" || echo 0)"
  s0+=" $(cpu_of "${MOCK_PIDS[@]}") $(cpu_of "${drivers[@]}")"
  sleep $((DURATION - WARMUP - 1))
  s1="$(date +%s.%N) $( ((${#proxy_pids[@]})) && cpu_of "${proxy_pids[@]}" || echo 0)"
  s1+=" $(cpu_of "${MOCK_PIDS[@]}") $(cpu_of "${drivers[@]}")"
  for i in "${drivers[@]}"; do wait "$i" || log "driver exited $?"; done
  echo "$s0 $s1" >"$OUT/$round-$t.cpu"
  stop_all
}

for round in $(seq 1 "$ROUNDS"); do
  for t in "${TARGETS[@]}"; do run_target "$round" "$t"; done
done
PIDS=("${MOCK_PIDS[@]}")
MOCK_PIDS=()
stop_all

python3 - "$OUT" "$ROUNDS" "$((DURATION - WARMUP))" "$STREAMS" "$MS_PER_TOKEN" \
  "$(git -C "$ROOT" rev-parse --short HEAD)" "$LOADAVG" "${TARGETS[@]}" <<'PY' | tee "$RESULTS_FILE"
import json, statistics, sys
out, rounds, window, streams, ms, commit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
loadavg = sys.argv[7]
targets = sys.argv[8:]
rows = {}
for t in targets:
    per = []
    for r in range(1, rounds + 1):
        flows = [json.load(open(f"{out}/{r}-{t}-{i}.json"))["flows"][0] for i in range(3)]
        totals = [json.load(open(f"{out}/{r}-{t}-{i}.json"))["totals"] for i in range(3)]
        ev = sum(f["tokenEventsPerSecond"] for f in flows)
        w0, c0, m0, d0, w1, c1, m1, d1 = map(float, open(f"{out}/{r}-{t}.cpu").read().split())
        wall = w1 - w0
        per.append({
            "events": ev,
            "cpu_us": (c1 - c0) / wall / ev * 1e6 if ev else float("nan"),
            "proxy_cores": (c1 - c0) / wall,
            "mock_cores": (m1 - m0) / wall,
            "driver_cores": (d1 - d0) / wall,
            # The drivers' own percentiles: each driver sees a third of the
            # streams; the worst of the three is reported.
            "p50": max(f["interTokenSeconds"]["p50"] for f in flows) * 1e3,
            "p99": max(f["interTokenSeconds"]["p99"] for f in flows) * 1e3,
            "max": max(f["interTokenSeconds"]["max"] for f in flows) * 1e3,
            "lost": sum(x["lost"] + x["errors"] for x in totals),
            "ok": sum(x["ok"] for x in totals),
        })
    rows[t] = {k: statistics.median(p[k] for p in per) for k in per[0]}
    # Each round's figure too (to the log), to see the spread behind a median.
    print(f"{t}: CPU us per event by round: " + " ".join("%.2f" % p["cpu_us"] for p in per),
          file=sys.stderr)
print(f"streams at {commit}: {streams} concurrent SSE streams, 3 sluice-mock endpoints at {ms} ms per token, "
      f"{rounds} interleaved rounds of {window:.0f} s measured (medians); load average before the run {loadavg}\n")
tls = [t for t in targets if t.endswith("_tls")]
for t in tls:
    # What curl negotiated with the target before the round (the drivers
    # verified the same certificate against the run's CA).
    print(f"- {t}: clients over TLS, {open(f'{out}/{t}.tls').read().strip() or 'not recorded'}")
if tls:
    print()
print("| target | token events/s | proxy CPU µs per event | proxy cores | inter-token p50 / p99 / max ms | added p99 vs direct, ms | mocks cores | drivers cores | answers | lost or failed |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
base = rows.get("direct")
for t in targets:
    r = rows[t]
    added = "%.2f" % (r["p99"] - base["p99"]) if base and t != "direct" else "–"
    cpu = "–" if t == "direct" else "%.2f" % r["cpu_us"]
    cores = "–" if t == "direct" else "%.3f" % r["proxy_cores"]
    print("| %s | %.0f | %s | %s | %.1f / %.1f / %.1f | %s | %.2f | %.2f | %.0f | %.0f |" % (
        t, r["events"], cpu, cores, r["p50"], r["p99"], r["max"], added, r["mock_cores"],
        r["driver_cores"], r["ok"], r["lost"]))
if any(rows[t]["lost"] for t in targets) or any(rows[t]["ok"] == 0 for t in targets):
    sys.exit("a target lost or failed requests, or answered none")
PY
