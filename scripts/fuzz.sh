#!/usr/bin/env bash
# Builds sluice's libFuzzer targets (test/fuzz) in build/fuzz — clang 14,
# ASan+UBSan, coverage in every layer library — and runs each of them:
#   1. every saved reproducer in test/fuzz/regressions/<target>/ once (a
#      crash found once stays fixed);
#   2. the fuzzer for FUZZ_SECONDS on a copy of the seed corpus in
#      build/fuzz/corpus/<target> (the repo's corpus is never written),
#      crash/leak/timeout inputs saved in build/fuzz/artifacts/<target>/.
# Prints one summary line per target and exits non-zero if any target
# crashed or a reproducer failed.
#
# usage: scripts/fuzz.sh [--smoke] [--no-build] [TARGET...]
#   --smoke      10 s per target unless FUZZ_SECONDS is set, on a fresh copy of
#                the seeds in build/fuzz/corpus-smoke (a full run keeps what
#                earlier runs found in build/fuzz/corpus)
#   --no-build   use the binaries already in the build directory
# env: FUZZ_SECONDS (default 120), FUZZ_BUILD_DIR (build/fuzz), JOBS (2)
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz_request fuzz_response fuzz_config fuzz_endpoints_file fuzz_prometheus
  fuzz_scenario fuzz_json_render fuzz_admin_body fuzz_ctl_answer fuzz_flow_control fuzz_jwt
  fuzz_jwks fuzz_keyfile fuzz_redis_reply)

smoke=0
build_it=1
targets=()
for arg in "$@"; do
  case "$arg" in
    --smoke) smoke=1 ;;
    --no-build) build_it=0 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    fuzz_*) targets+=("$arg") ;;
    *)
      echo "fuzz.sh: unknown argument '$arg' (targets: ${all_targets[*]})" >&2
      exit 2
      ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
if [ "$smoke" = 1 ]; then seconds=${FUZZ_SECONDS:-10}; else seconds=${FUZZ_SECONDS:-120}; fi
build=${FUZZ_BUILD_DIR:-build/fuzz}
jobs=${JOBS:-2}

# Inputs longer than the parsers' interesting range only slow the search down.
max_len_of() {
  case "$1" in
    fuzz_request | fuzz_response | fuzz_prometheus) echo 16384 ;;
    fuzz_config | fuzz_scenario | fuzz_jwt | fuzz_jwks) echo 8192 ;;
    *) echo 4096 ;;
  esac
}
dict_of() {
  case "$1" in
    fuzz_request | fuzz_response) echo test/fuzz/dict/http.dict ;;
    fuzz_config | fuzz_endpoints_file | fuzz_scenario | fuzz_keyfile) echo test/fuzz/dict/yaml.dict ;;
    fuzz_prometheus) echo test/fuzz/dict/prometheus.dict ;;
    fuzz_ctl_answer) echo test/fuzz/dict/json.dict ;;
    fuzz_jwt | fuzz_jwks) echo test/fuzz/dict/jose.dict ;;
  esac
}

if [ "$build_it" = 1 ]; then
  # -O1 -g without NDEBUG: assertions stay on, stacks stay readable.
  cmake -S . -B "$build" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" -DSLUICE_SANITIZE=address,undefined \
    -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build" --target fuzzers -j "$jobs"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

failed=0
summary=()
for t in "${targets[@]}"; do
  bin="$build/$t"
  art="$build/artifacts/$t"
  # A smoke starts from the seeds alone (quick and repeatable) and leaves the
  # corpus that full runs build up alone.
  if [ "$smoke" = 1 ]; then corpus="$build/corpus-smoke/$t"; else corpus="$build/corpus/$t"; fi
  log="$build/logs/$t.log"
  mkdir -p "$art" "$build/logs"
  [ -x "$bin" ] || {
    echo "fuzz.sh: $bin is not built" >&2
    exit 2
  }
  common=(-max_len="$(max_len_of "$t")" -timeout=10 -rss_limit_mb=2048)

  # 1. Reproducers of earlier findings: each must run clean.
  regressions=()
  if [ -d "test/fuzz/regressions/$t" ]; then
    while IFS= read -r -d '' f; do regressions+=("$f"); done \
      < <(find "test/fuzz/regressions/$t" -type f ! -name '*.md' -print0 | sort -z)
  fi
  reg_status="no reproducers"
  if [ ${#regressions[@]} -gt 0 ]; then
    if "$bin" "${common[@]}" -artifact_prefix="$art/regression-" "${regressions[@]}" \
      >"$build/logs/$t.regressions.log" 2>&1; then
      reg_status="${#regressions[@]} reproducers ok"
    else
      reg_status="REPRODUCER FAILED (see $build/logs/$t.regressions.log)"
      failed=1
      tail -n 40 "$build/logs/$t.regressions.log" >&2
    fi
  fi

  # 2. Fuzz on a copy of the seeds.
  if [ "$smoke" = 1 ]; then rm -rf "$corpus"; fi
  mkdir -p "$corpus"
  cp -n "test/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
  dict=$(dict_of "$t")
  args=("${common[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$art/")
  [ -n "$dict" ] && args+=(-dict="$dict")
  echo "fuzz.sh: $t for ${seconds}s ($reg_status)"
  rc=0
  "$bin" "${args[@]}" "$corpus" >"$log" 2>&1 || rc=$?

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  covft=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 || true)
  units=$(find "$corpus" -type f | wc -l)
  found=$(sed -n "s/.*Test unit written to \(.*\)/\1/p" "$log" | grep -Ev '/slow-unit-' || true)
  status="ok"
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    status="CRASH (exit $rc): ${found:-see $log}"
    failed=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|FINDING|.*runtime error)' "$log" | head -n 5 >&2 || true
  fi
  summary+=("$(printf '%-20s %10s execs %7s exec/s  %-22s corpus %5s  %s' "$t" "${execs:-?}" \
    "${rate:-?}" "${covft:-cov: ?}" "$units" "$status")")
done

echo
echo "fuzz.sh summary (${seconds}s per target; logs in $build/logs):"
printf '%s\n' "${summary[@]}"
exit $failed
