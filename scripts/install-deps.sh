#!/usr/bin/env bash
# Installs the Debian packages Sluice needs. Idempotent and quick when
# everything is already there: it asks apt only for what is missing. This is
# the one place that lists the packages.
#
#   scripts/install-deps.sh build   # building and running (make build, make run)
#   scripts/install-deps.sh         # everything: also the tests and benchmarks
#
# The package names are Debian 12 (bookworm)'s (libboost1.81-dev, ...). On
# another system the script says so and stops: install the equivalents of the
# lists below yourself.
set -euo pipefail

profile=${1:-all}
case "$profile" in
  build | all) ;;
  *)
    echo "usage: $0 [build|all]" >&2
    exit 2
    ;;
esac

packages=(
  # build
  cmake g++ make pkg-config
  # core library: benchmarks (make build builds them beside the server)
  libbenchmark-dev
  # server: HTTP (Beast/Asio/URL/JSON), config, logs
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  # JWT keys (key: jwt:CLAIM): libcrypto's HMAC, RSA and ECDSA
  libssl-dev
  # Redis store
  libhiredis-dev
  # HTTP/2 to clients (http2: true)
  libnghttp2-dev
  # Envoy RLS gRPC API
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # the demo's lines to try (make run)
  curl
)
if [ "$profile" = all ]; then
  packages+=(
    # tests, formatting
    libgtest-dev libgmock-dev clang-format
    # fuzz targets (make fuzz): clang with libFuzzer and the sanitizer runtimes
    clang-14 libclang-rt-14-dev
    # Redis store tests (redis-sentinel: the Sentinel failover tests)
    redis-server redis-tools redis-sentinel
    # nginx integration test and gateway benchmark
    nginx wrk
    # the soak (bench/soak, make soak): its logging upstream and clients
    python3
    # HTTP/2 tests: a scripted client (python3-h2) and h2load for many streams
    python3-h2 nghttp2-client
    # dashboard browser test (tests/dashboard): node runs playwright-core on Debian's chromium
    chromium nodejs
    # the .deb (make package, ctest -L package): CPack's shared library
    # dependencies need dpkg-shlibdeps (dpkg-dev) and file. systemd-analyze
    # (package systemd) is optional: the unit check is skipped without it.
    dpkg-dev file
    # the container image (make image, ctest -L container): podman runs it
    # with runc (tests/container/containers.conf), netavark and iptables map
    # its ports; the image carries the CA certificates
    podman runc netavark iptables ca-certificates
    # deploy/prometheus's alert rules: promtool check rules / test rules
    prometheus
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm is a package of its own with Debian's nodejs but part of the nodejs
# package from NodeSource (which conflicts with Debian's npm): ask for it only
# when the command is missing.
if [ "$profile" = all ]; then command -v npm >/dev/null 2>&1 || missing+=(npm); fi
[ ${#missing[@]} -eq 0 ] && exit 0

# Only now: a machine that already has everything may be anything.
release=unknown
if [ -r /etc/os-release ]; then
  release=$(. /etc/os-release && echo "${ID:-?} ${VERSION_CODENAME:-?}")
fi
if [ "$release" != "debian bookworm" ]; then
  echo "install-deps: these package names are Debian 12 (bookworm)'s; this machine is" \
    "'$release'. Install the equivalents of: ${missing[*]}" >&2
  exit 1
fi

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
# (an if, not &&: a false test as the last command of the EXIT trap would
# become the exit status of the script under set -e)
cleanup() { if [ "$created_policy" -eq 1 ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT

$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
