#!/usr/bin/env bash
# Installs every Debian package that building, testing and benchmarking Sluice
# needs. Idempotent and quick when everything is already there: it asks apt
# only for what is missing. This is the one place that lists the packages.
set -euo pipefail

packages=(
  # build
  cmake g++ make pkg-config clang-format
  # core library: tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # server: HTTP (Beast/Asio/URL/JSON), config, logs
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  # Redis store and its tests
  libhiredis-dev redis-server redis-tools
  # Envoy RLS gRPC API
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # nginx integration test and gateway benchmark
  nginx wrk curl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

# Debian starts redis-server and nginx as system services when they are
# installed (on ports 6379 and 80). The tests start their own instances on
# free loopback ports, so keep the package scripts from starting any service.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  created_policy=1
fi
cleanup() { [ "$created_policy" -eq 1 ] && $sudo rm -f "$policy"; }
trap cleanup EXIT

$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
