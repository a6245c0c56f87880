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
  redis-server libhiredis-dev dnsmasq
  curl wrk nginx-light haproxy prometheus python3 iproute2 git
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
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
