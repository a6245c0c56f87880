# Shared helpers for the scenario scripts (bench/compare_peers.sh,
# bench/run_scenario.sh): start processes on port 0, find their ports, stop
# everything on exit. Source it; it sets WORK and an EXIT trap.
WORK=$(mktemp -d /tmp/sluice-bench.XXXXXX)
PIDS=()
cleanup() {
  stop_all
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log() { echo "[${0##*/}] $*" >&2; }
# In a script under `set -e`, a command that fails ends it; say which (a
# failed command substitution in an assignment is otherwise silent).
if [[ $- == *e* ]]; then
  set -E
  trap 'log "failed (status $?) at line $LINENO: $BASH_COMMAND"' ERR
fi

# wait_listening FILE: the port a process printed ("listening on HOST:PORT").
# A file reused for a restarted process must be emptied before the process
# is started in the background: its own redirection truncates the file only
# once the child runs, and a read before that finds the last run's port.
wait_listening() { wait_printed_port "$1" 'listening on'; }

# wait_printed_port FILE WORDS: the port of the first "WORDS HOST:PORT" in
# FILE, waited for up to 15 s.
wait_printed_port() {
  local deadline=$((SECONDS + 15)) line
  while (( SECONDS < deadline )); do
    line=$(grep -m1 -o "$2 [^ ]*" "$1" 2>/dev/null || true)
    if [[ -n $line ]]; then echo "${line##*:}"; return 0; fi
    sleep 0.05
  done
  log "no '$2' in $1"; cat "$1" >&2; return 1
}

# start_mocks BUILD [MOCK_ARGS...]: three sluice-mock endpoints, their
# ports in M[0..2]. Without MOCK_ARGS: 4 sequences, 20 ms per token (as make
# demo); the seeds are 1, 2, 3 either way.
start_mocks() {
  local build=$1 i
  shift
  local args=("$@")
  (( ${#args[@]} )) || args=(--max-running 4 --decode-ms-per-token 20)
  M=()
  for i in 1 2 3; do
    : >"$WORK/mock$i.out"  # emptied here: see wait_listening
    "$build/sluice-mock" --listen 127.0.0.1:0 "${args[@]}" --seed $i \
      >"$WORK/mock$i.out" 2>"$WORK/mock$i.err" &
    PIDS+=($!)
    M+=("$(wait_listening "$WORK/mock$i.out")")
  done
  log "mocks on ${M[*]}"
}

# stop_all: SIGTERM to every process in PIDS, wait for each, empty PIDS.
stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}

# sluice_config TEMPLATE OUT: a config written for 127.0.0.1:18001-18003
# (config/demo.yaml and the like) pointed at the mocks in M.
sluice_config() {
  sed -e "s/127.0.0.1:18001/127.0.0.1:${M[0]}/" -e "s/127.0.0.1:18002/127.0.0.1:${M[1]}/" \
      -e "s/127.0.0.1:18003/127.0.0.1:${M[2]}/" "$1" >"$2"
}

# make_pki DIR: a private CA made for the run (DIR/ca.pem) and an ECDSA
# P-256 server certificate it signed for 127.0.0.1 and localhost
# (DIR/server.pem, DIR/server.key; both in DIR/combined.pem, as HAProxy
# reads them), valid 2 days. Fails, with openssl's output, if openssl does.
make_pki() {
  mkdir -p "$1"
  (
    cd "$1"
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
      -keyout ca.key -out ca.pem -subj '/CN=sluice bench CA' -days 2 \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
      -keyout server.key -out server.csr -subj '/CN=localhost'
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 1 -days 2 \
      -extfile server.ext -out server.pem
    cat server.pem server.key >combined.pem
  ) >"$1/openssl.log" 2>&1 || { log "openssl failed"; cat "$1/openssl.log" >&2; return 1; }
}

# tls_group HOST:PORT CA_FILE: the key exchange group a TLS server chose
# for an OpenSSL client with the default groups (X25519 when the server
# takes the client's first key share; another name, with a retry, when not).
tls_group() {
  openssl s_client -connect "$1" -CAfile "$2" </dev/null 2>/dev/null |
    sed -n 's/^Server Temp Key: \([^,]*\).*/\1/p'
}

# admin_port FILE: the admin port a sluice printed ("admin listening on").
admin_port() { wait_printed_port "$1" 'admin listening on'; }

# wait_fleet N ADMIN_PORT...: until every replica's GET /admin/v1/fleet
# lists N replicas (the fleet has formed: each has seen the others), or
# fail after 15 s.
wait_fleet() {
  local n=$1 p
  shift
  local deadline=$((SECONDS + 15))
  for p in "$@"; do
    until [[ $(curl -s "http://127.0.0.1:$p/admin/v1/fleet" |
      python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("replicas", [])))' 2>/dev/null) == "$n" ]]; do
      (( SECONDS < deadline )) || { log "replica on admin port $p never saw $n replicas"; return 1; }
      sleep 0.05
    done
  done
}

# cpu_seconds PID [THREAD_NAME]: utime + stime so far, of the process or of
# its threads with that name (sluice names its threads sluice-io,
# sluice-dispatch, sluice-fleet, ...).
cpu_seconds() {
  local pid=$1 name=${2:-}
  if [[ -z $name ]]; then
    awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$pid/stat"
    return
  fi
  local t total=0
  for t in /proc/"$pid"/task/*; do
    [[ $(cat "$t/comm" 2>/dev/null) == "$name" ]] || continue
    total=$((total + $(awk '{ print $14 + $15 }' "$t/stat")))
  done
  python3 -c "print($total / $(getconf CLK_TCK))"
}

# start_redis: a redis-server on $WORK/redis.sock (no persistence), its pid
# in REDIS_PID; waits until it answers (fails after 10 s). Appends to
# $WORK/redis.out, so a restart on the same socket keeps the first log.
start_redis() {
  redis-server --port 0 --unixsocket "$WORK/redis.sock" --unixsocketperm 700 --dir "$WORK" \
    --save "" --appendonly no --loglevel warning >>"$WORK/redis.out" 2>&1 &
  PIDS+=($!)
  REDIS_PID=$!
  local deadline=$((SECONDS + 10))
  until redis-cli -s "$WORK/redis.sock" ping >/dev/null 2>&1; do
    (( SECONDS < deadline )) || { log "redis-server did not start"; cat "$WORK/redis.out" >&2; exit 1; }
    sleep 0.05
  done
}

# poll_running [stamp]: until killed, every 20 ms, each mock's (M) running
# sequences — one number per line, or with "stamp" one line per poll:
# the time, then the three counts.
poll_running() {
  local m line
  while :; do
    if [[ ${1:-} == stamp ]]; then
      line=$(date +%s.%N)
      for m in "${M[@]}"; do
        line+=" $(curl -s "http://127.0.0.1:$m/metrics" | awk '/^vllm:num_requests_running/ { print $2 }')"
      done
      echo "$line"
    else
      for m in "${M[@]}"; do
        curl -s "http://127.0.0.1:$m/metrics" | awk '/^vllm:num_requests_running/ { print $2 }'
      done
    fi
    sleep 0.02
  done
}
