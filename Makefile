# The two commands of the README: `make demo` and `make test`.
# Each installs missing Debian packages first (scripts/install-deps.sh is a no-op
# when everything is present), then configures and builds with CMake + Ninja.
JOBS ?= 2
CMAKE_COMMON = -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON

.PHONY: deps release asan tsan clang test test-asan check layers demo bench format format-check clean fuzz fuzz-smoke

deps:
	@bash scripts/install-deps.sh

release: deps
	cmake -S . -B build/release $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Release
	cmake --build build/release -j $(JOBS)

asan: deps
	cmake -S . -B build/asan $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug \
	  -DSLUICE_SANITIZE=address,undefined -DSLUICE_WERROR=ON
	cmake --build build/asan -j $(JOBS)

# Also the registry's unit tests: its huge-page allocator is bypassed under
# ASan, so this is the gate's one run of it. And the I/O threads verifying
# JWTs with one shared key set.
tsan: deps
	cmake -S . -B build/tsan $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug \
	  -DSLUICE_SANITIZE=thread -DSLUICE_WERROR=ON
	cmake --build build/tsan -j $(JOBS)
	cd build/tsan && $(STRICT) TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/test/tsan.supp" \
	  ctest -L 'integration|threads' --output-on-failure -j $(JOBS)
	cd build/tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/test/tsan.supp" \
	  ./unit_registry
	cd build/tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/test/tsan.supp" \
	  ./unit_auth --gtest_filter='Jwt.Threads*'
	cd build/tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/test/tsan.supp" \
	  ./unit_quota --gtest_filter='QuotaLedger.Threads*'

# The second supported compiler (fuzzing builds use it later).
clang: deps
	cmake -S . -B build/clang $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DSLUICE_WERROR=ON
	cmake --build build/clang -j $(JOBS)
	cd build/clang && ctest --output-on-failure -j $(JOBS)

# The gate's test runs: a test whose dependency (redis-server, dnsmasq,
# prometheus, node and the OpenAI SDK, openssl, ...) is missing fails naming
# it instead of skipping (test/support/requires.h; docs/testing.md).
# `make check` leaves it unset: such a test is skipped, and says so.
STRICT = SLUICE_TESTS_STRICT=1

# The CI gate (.ci/run): formatting and the layer rules; every test under ASan+UBSan (any
# sanitizer report aborts the process that hit it, which fails its test;
# children started by integration tests are checked for a clean exit too);
# the threaded and integration tests under TSan; a 10 s smoke of every
# fuzzer with its saved reproducers. About 20 minutes on 2 cores.
test: format-check layers test-asan tsan fuzz-smoke

# The layer rules of src/ (the tables of docs/architecture.md, read by the
# check: what each folder may import, what admin/ and auth/ may not include;
# no include cycle; the size limits of the restructured planes), the check's
# own tests (a violating include per rule), and the docs' own rules (README
# length, links that resolve, no commit hashes outside the lab notes).
layers:
	python3 scripts/check_layers.py
	python3 scripts/test_check_layers.py
	python3 scripts/check_docs.py

# The fast loop for whoever changes the code: the Release build and the unit
# and integration tests (no sanitizers, no fuzzing). `make test` stays the
# gate.
check: release layers
	cd build/release && ctest -L 'unit|integration' --output-on-failure -j $(JOBS)

test-asan: asan
	cd build/asan && $(STRICT) ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1" \
	  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	  ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (test/fuzz) in build/fuzz with clang 14 + ASan/UBSan: saved
# reproducers first, then each fuzzer for FUZZ_SECONDS on a copy of its seeds;
# exits non-zero on any crash. fuzz-smoke is the short run for `make test`.
FUZZ_SECONDS ?= 120
fuzz: deps
	JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

fuzz-smoke: deps
	JOBS=$(JOBS) FUZZ_SECONDS=10 bash scripts/fuzz.sh --smoke

demo: release
	bash scripts/demo.sh build/release

bench: release
	SLUICE_BIN=build/release/sluice bash bench/proxy_overhead.sh

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

# Fails (and lists the files) when a tracked source differs from .clang-format.
format-check: deps
	@bad=$$(git ls-files '*.h' '*.cc' | xargs -n 20 clang-format --dry-run 2>&1 | \
	  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning:.*/\1/p' | sort -u); \
	if [ -n "$$bad" ]; then echo "format-check: these files differ from .clang-format (run make format):"; \
	  echo "$$bad"; exit 1; fi; echo "format-check: all sources formatted"

clean:
	rm -rf build
