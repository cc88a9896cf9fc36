#!/usr/bin/env bash
# Envoy RLS benchmark (run by hand, loopback only, bounded): `sluice serve`
# with examples/envoy/sluice.yaml's descriptors on the memory store, driven by
# bench/rls/rls_load (ShouldRateLimit, many calls in flight on one channel).
#
#   bench/rls/run.sh [BUILD_DIR]     # a Release build; builds nothing
#
# Environment: SECONDS_RUN (default 5, at most 30), IN_FLIGHT (default 128),
# VALUES (distinct remote_address values, default 1000).
# Prints the client's line, then the server's CPU (utime+stime from
# /proc/PID/stat over the run): µs per call and calls per server CPU-second.
# Client and server share the machine's cores.
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
seconds=${SECONDS_RUN:-5}
in_flight=${IN_FLIGHT:-128}
values=${VALUES:-1000}
((seconds > 30)) && seconds=30

sluice="$build_dir/sluice"
load="$build_dir/bench/rls/rls_load"
for program in "$sluice" "$load"; do
  [[ -x $program ]] || { echo "rls bench: needs $program" >&2; exit 1; }
done

work=$(mktemp -d /tmp/sluice-rls-bench.XXXXXX)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The example config with every port 0 and the descriptor folder by absolute path.
sed -e 's/127\.0\.0\.1:[0-9]\+/127.0.0.1:0/' \
    -e "s|config_dir: ratelimit|config_dir: $PWD/examples/envoy/ratelimit|" \
    examples/envoy/sluice.yaml >"$work/sluice.yaml"

"$sluice" serve --config "$work/sluice.yaml" >"$work/server.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*grpc on 127\.0\.0\.1:\([0-9]\+\).*/\1/p' "$work/server.log" | head -1)
  [[ -n $port ]] && break
  sleep 0.05
done
if [[ -z $port ]]; then
  echo "rls bench: no 'grpc on' line from the server" >&2
  cat "$work/server.log" >&2
  exit 1
fi

source bench/lib.sh
hz=$(getconf CLK_TCK)
before=$(cpu_ticks "$server_pid")
line=$("$load" --target "127.0.0.1:$port" --seconds "$seconds" --in-flight "$in_flight" \
  --domain edge --key remote_address --value 10.0.0. --values "$values")
after=$(cpu_ticks "$server_pid")
echo "$line"
calls=$(sed -n 's/.*calls \([0-9]\+\) seconds.*/\1/p' <<<"$line")
awk -v t=$((after - before)) -v hz="$hz" -v calls="$calls" 'BEGIN {
  cpu = t / hz
  printf "server_cpu_s %.2f server_cpu_us_per_call %.2f calls_per_server_cpu_s %.0f\n",
    cpu, cpu * 1e6 / calls, (cpu > 0 ? calls / cpu : 0)
}'
