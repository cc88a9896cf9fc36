#!/usr/bin/env bash
# Envoy RLS benchmark (run by hand, loopback only, bounded). In one run, each
# row driven by bench/rls/rls_load (ShouldRateLimit, many calls in flight on
# one channel) for SECONDS_RUN seconds:
#
#   floor    bench/rls/empty_rls_server: the same gRPC server setup
#            (rls::GrpcServer), every call answered OK without deciding
#   memory   `sluice serve` with examples/envoy/sluice.yaml's descriptors,
#            store.backend memory
#   redis    the same on store.backend redis, against a redis-server this
#            script starts on loopback (no persistence)
#   base-*   memory and redis with the build in $BASELINE, when set
#
#   bench/rls/run.sh [BUILD_DIR]     # a Release build; builds nothing
#   BASELINE=build-base bench/rls/run.sh build
#
# Environment: SECONDS_RUN (default 4, at most 30), IN_FLIGHT (default 128),
# VALUES (distinct remote_address values, default 1000), ROUNDS (default 2:
# the rows alternate, each round runs every row once).
# Per row: the client's line, then the server's CPU (utime+stime from
# /proc/PID/stat over the row): µs per call, calls per server CPU-second and
# the ratio of µs per call to the floor's in the same round; the redis rows
# also Redis's CPU per call. Client, server and Redis share the cores.
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
seconds=${SECONDS_RUN:-4}
in_flight=${IN_FLIGHT:-128}
values=${VALUES:-1000}
rounds=${ROUNDS:-2}
baseline=${BASELINE:-}
((seconds > 30)) && seconds=30
BENCH_NAME="rls bench"
source bench/lib.sh

load="$build_dir/bench/rls/rls_load"
floor_server="$build_dir/bench/rls/empty_rls_server"
need_programs "a Release build in $build_dir (sluice, rls_load, empty_rls_server)" \
  "$build_dir/sluice" "$load" "$floor_server"
[[ -z $baseline ]] || need_programs "a build in $baseline" "$baseline/sluice"
need_programs "redis-server and curl" "$(command -v redis-server || true)" \
  "$(command -v curl || true)"

start_work sluice-rls-bench
hz=$(getconf CLK_TCK)

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" --daemonize no &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 100); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.05
done

# The example config with free ports, the descriptor folder by absolute path,
# and the store section $1 asks for.
write_config() {
  local store=$1 admin=$2
  sed -e 's/^listen: 127\.0\.0\.1:[0-9]\+/listen: 127.0.0.1:0/' \
      -e "s/^admin: 127\.0\.0\.1:[0-9]\+/admin: 127.0.0.1:$admin/" \
      -e 's/^grpc: 127\.0\.0\.1:[0-9]\+/grpc: 127.0.0.1:0/' \
      -e "s|config_dir: ratelimit|config_dir: $PWD/examples/envoy/ratelimit|" \
      -e '/^store:/,$d' \
      examples/envoy/sluice.yaml
  if [[ $store == redis ]]; then
    printf 'store:\n  backend: redis\n  redis:\n    addresses: [127.0.0.1:%s]\n' "$redis_port"
  else
    printf 'store:\n  backend: memory\n'
  fi
}

# grpc_port LOG: waits for the "grpc on" line and prints its port.
grpc_port() {
  local port=
  for _ in $(seq 200); do
    port=$(sed -n 's/.*grpc on 127\.0\.0\.1:\([0-9]\+\).*/\1/p' "$1" | head -1)
    [[ -n $port ]] && break
    sleep 0.05
  done
  echo "$port"
}

floor_us=
# run_row NAME PROGRAM STORE: starts the server, drives it, prints the row.
run_row() {
  local name=$1 program=$2 store=$3 admin port pid line
  local log="$work/$name.log"
  if [[ $store == none ]]; then
    "$program" >"$log" 2>&1 &
    pid=$!
  else
    admin=$(free_port)
    write_config "$store" "$admin" >"$work/$name.yaml"
    "$program" serve --config "$work/$name.yaml" >"$log" 2>&1 &
    pid=$!
  fi
  pids+=("$pid")
  port=$(grpc_port "$log")
  if [[ -z $port ]]; then
    echo "rls bench: no 'grpc on' line from $name" >&2
    cat "$log" >&2
    exit 1
  fi
  if [[ $store != none ]]; then
    for _ in $(seq 200); do
      [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true) == 200 ]] &&
        break
      sleep 0.05
    done
  fi
  local before redis_before after redis_after
  before=$(cpu_ticks "$pid")
  redis_before=$(cpu_ticks "$redis_pid")
  line=$("$load" --target "127.0.0.1:$port" --seconds "$seconds" --in-flight "$in_flight" \
    --domain edge --key remote_address --value 10.0.0. --values "$values")
  after=$(cpu_ticks "$pid")
  redis_after=$(cpu_ticks "$redis_pid")
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  local calls us
  calls=$(sed -n 's/.*calls \([0-9]\+\) seconds.*/\1/p' <<<"$line")
  us=$(awk -v t=$((after - before)) -v hz="$hz" -v calls="$calls" \
    'BEGIN { printf "%.2f", t / hz * 1e6 / calls }')
  [[ $name == floor ]] && floor_us=$us
  echo "$name: $line" | tee -a "$work/rows.client"
  awk -v name="$name" -v t=$((after - before)) -v r=$((redis_after - redis_before)) -v hz="$hz" \
    -v calls="$calls" -v us="$us" -v floor="$floor_us" -v redis="$store" 'BEGIN {
    cpu = t / hz
    printf "%s: server_cpu_s %.2f server_cpu_us_per_call %.2f calls_per_server_cpu_s %.0f vs_floor %.2fx",
      name, cpu, us, (cpu > 0 ? calls / cpu : 0), us / floor
    if (redis == "redis") printf " redis_cpu_us_per_call %.2f", r / hz * 1e6 / calls
    printf "\n"
  }' | tee -a "$work/rows"
}

echo "# $(nproc) cores, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$seconds s per row, $in_flight in flight, $values values"
for ((round = 1; round <= rounds; ++round)); do
  echo "# round $round"
  run_row floor "$floor_server" none
  run_row memory "$build_dir/sluice" memory
  run_row redis "$build_dir/sluice" redis
  if [[ -n $baseline ]]; then
    run_row base-memory "$baseline/sluice" memory
    run_row base-redis "$baseline/sluice" redis
  fi
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
# Per row, the median over the rounds of µs per call, calls/s and the ratio
# to the same round's floor (a loaded machine moves single rows a lot).
echo "# medians over $rounds round(s)"
for name in floor memory redis base-memory base-redis; do
  grep "^$name: server_cpu_s" "$work/rows" >"$work/row" || continue
  us=$(awk '{print $5}' "$work/row" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  ratio=$(awk '{sub("x", "", $9); print $9}' "$work/row" | sort -n |
    awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  rate=$(grep "^$name: calls" "$work/rows.client" | awk '{print $7}' | sort -n |
    awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  redis=$(awk '$10 == "redis_cpu_us_per_call" {print $11}' "$work/row" | sort -n |
    awk '{v[NR] = $1} END {if (NR) print " redis_cpu_us_per_call " v[int((NR + 1) / 2)]}')
  echo "$name: median server_cpu_us_per_call $us calls_per_s $rate vs_floor ${ratio}x$redis"
done
