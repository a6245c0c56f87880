#!/usr/bin/env bash
# Installs sluice's build, test and bench dependencies from Debian 12 packages.
# Idempotent: packages already present are skipped; apt is not touched when
# nothing is missing. Nothing is downloaded from anywhere but Debian's mirrors.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config clang-14 clang-format
  libboost1.81-dev nlohmann-json3-dev libsimdjson-dev libconcurrentqueue-dev
  libyaml-cpp-dev libxxhash-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  libfuzzer-14-dev libssl-dev openssl
  redis-server libhiredis-dev dnsmasq util-linux
  curl wrk nginx-light haproxy prometheus python3 iproute2 git
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The OpenAI Node SDK for test/integration/openai_sdk_test.cc, from the npm
# registry at the version test/node/package-lock.json pins (Node >= 18:
# Debian's nodejs, or one already on the machine).
install_node_sdk() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/test/node"
  [ -f "$dir/node_modules/openai/package.json" ] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    # Only when node came from elsewhere without npm (apt installs it below).
    echo "install-deps: npm not found: OpenAiSdk.* fails under make test" \
      "(skips under make check) until the OpenAI SDK is in $dir" >&2
    return 0
  fi
  echo "install-deps: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

# Every test dependency is here: under make test a test whose dependency is
# missing fails naming it (test/support/requires.h), nothing skips.
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  install_node_sdk
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# nginx, haproxy, redis-server and dnsmasq start system services on install;
# the tests and benches run their own instances on loopback ports or unix
# sockets (the fleet's Redis, the discovery tests' DNS server), so the system
# ones are stopped.
for svc in nginx haproxy prometheus redis-server dnsmasq; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    $SUDO systemctl stop "$svc" || true
  fi
done
install_node_sdk
