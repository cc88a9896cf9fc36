#!/usr/bin/env bash
# Decisions per second through `sluice serve` with store.backend redis, against
# the same server on the memory store and RedisStore in process, same Redis,
# same run (docs/BENCHMARKS.md, "Redis store through `sluice serve`").
#
#   bench/redis/serve_bench.sh [build-dir] [seconds]
#
# Starts its own redis-server (no persistence) and `sluice serve` on free
# loopback ports, then for each store (memory, redis) runs
#   wrk -t2 -c64 -d<seconds>s --latency -s bench/redis/check_random_keys.lua
# (POST /v1/check, policy "bench" = token_bucket 1,000,000 + 1,000,000/s, so
# nothing is denied, on 10,000 random client keys), and
# then redis-benchmark -P 16 -c 50 with EVALSHA of the seed article's token
# bucket script (bench/redis/seed_token_bucket.lua) on 10,000 random keys, and
#   <build>/redis_throughput (RedisStore in process, 10,000 keys, 1 thread).
# Redis CPU per decision comes from /proc/<redis pid>/stat (utime + stime).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
SECS=${2:-10}
SLUICE=$BUILD/sluice
DRIVER=$BUILD/redis_throughput
[ -x "$SLUICE" ] || { echo "missing $SLUICE: run make (Release build) first" >&2; exit 1; }
for tool in redis-server redis-cli wrk; do
  command -v "$tool" >/dev/null || { echo "$tool missing: scripts/install-deps.sh" >&2; exit 1; }
done

source bench/lib.sh

dir=$(mktemp -d)
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --daemonize no &
redis_pid=$!
sluice_pid=""
cleanup() {
  [ -n "$sluice_pid" ] && kill "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null
  kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done

cpu() { cpu_ticks "$redis_pid"; }
sluice_cpu() { cpu_ticks "$sluice_pid"; }
hz=$(getconf CLK_TCK)

# Runs sluice serve with the given store section, then wrk against it.
run_serve() {
  local name=$1 store=$2
  local port admin
  port=$(free_port); admin=$(free_port)
  cat > "$dir/$name.yaml" <<YAML
listen: 127.0.0.1:$port
admin: 127.0.0.1:$admin
$store
policies:
  bench: {algorithm: token_bucket, capacity: 1000000, refill_rate: 1000000/s}
YAML
  "$SLUICE" serve --config "$dir/$name.yaml" 2> "$dir/$name.log" &
  sluice_pid=$!
  local ready=""
  for _ in $(seq 200); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true)" = 200 ]; then
      ready=1; break
    fi
    kill -0 "$sluice_pid" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$ready" ]; then
    echo "sluice serve ($name) did not become ready; its log:" >&2
    cat "$dir/$name.log" >&2
    exit 1
  fi
  redis-cli -p "$redis_port" flushall >/dev/null
  local c0 c1 s0 s1 out rate p50 p99 total us sus
  c0=$(cpu); s0=$(sluice_cpu)
  out=$(wrk -t2 -c64 -d"${SECS}s" --latency -s bench/redis/check_random_keys.lua \
    "http://127.0.0.1:$port/v1/check")
  c1=$(cpu); s1=$(sluice_cpu)
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  total=$(echo "$out" | awk '/requests in/ {print $1}')
  if echo "$out" | grep -q "Non-2xx"; then
    echo "$name: unexpected answers: $(echo "$out" | grep Non-2xx)" >&2
  fi
  us=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$total" 'BEGIN {printf "%.2f", n ? t / hz * 1e6 / n : 0}')
  sus=$(awk -v t=$((s1 - s0)) -v hz="$hz" -v n="$total" 'BEGIN {printf "%.2f", n ? t / hz * 1e6 / n : 0}')
  echo "sluice serve, $name: $rate decisions/s, p50 $p50, p99 $p99, sluice cpu $sus us/decision, redis cpu $us us/decision"
  curl -s "http://127.0.0.1:$admin/metrics" | grep -E '^sluice_(store_errors_total|redis_errors_total)' |
    awk '$2 != 0 {print "  " $0}'
  kill "$sluice_pid"; wait "$sluice_pid" 2>/dev/null || true
  sluice_pid=""
}

echo "# redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$redis_port, $(nproc) cores, $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
run_serve memory "store: {backend: memory}"
run_serve redis "store:
  backend: redis
  redis:
    addresses: [127.0.0.1:$redis_port]
    timeout: 50ms"
# The seed article's token bucket script, pipelined (the reference ceiling).
if command -v redis-benchmark >/dev/null; then
  sha=$(redis-cli -p "$redis_port" script load "$(cat bench/redis/seed_token_bucket.lua)")
  redis-cli -p "$redis_port" flushall >/dev/null
  c0=$(cpu)
  line=$(redis-benchmark -p "$redis_port" -P 16 -c 50 -n 400000 -r 10000 -q \
    EVALSHA "$sha" 1 bucket:__rand_int__ 100 20 "$(date +%s%3N)" 2>&1 | tr '\r' '\n' |
    grep 'requests per second' | tail -1)
  c1=$(cpu)
  rate=$(echo "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
  us=$(awk -v t=$((c1 - c0)) -v hz="$hz" 'BEGIN {printf "%.2f", t / hz * 1e6 / 400000}')
  echo "redis-benchmark -P 16 -c 50, seed token bucket script: $rate decisions/s, redis cpu $us us/decision"
fi
if [ -x "$DRIVER" ]; then
  redis-cli -p "$redis_port" flushall >/dev/null
  out=$("$DRIVER" --address "127.0.0.1:$redis_port" --seconds 5 --in-flight 1024 --keys 10000 \
    --threads 1 --redis-pid "$redis_pid")
  echo "RedisStore in process, 1 thread: $(echo "$out" | sed -nE 's/.*decisions_per_s=([0-9]+).*/\1/p') decisions/s, redis cpu $(echo "$out" | sed -nE 's/.*redis_cpu_us_per_decision=([0-9.]+).*/\1/p') us/decision"
fi
