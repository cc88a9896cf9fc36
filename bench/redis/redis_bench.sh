#!/usr/bin/env bash
# Redis store throughput against the seed's token bucket script, same Redis,
# same run (docs/BENCHMARKS.md, "Redis store").
#
#   bench/redis/redis_bench.sh [build-dir] [rounds]
#
# Starts its own redis-server on a free loopback port (no persistence), then
# alternates, `rounds` times (default 3):
#   - redis-benchmark -P 16 -c 50 running EVALSHA of bench/redis/seed_token_bucket.lua
#     on 10,000 random keys (the pipelined ceiling of a one-script-call-per-decision
#     client);
#   - build/redis_throughput: RedisStore in process, token_bucket 100 + 20/s,
#     10,000 keys, Redis TIME, 1,024 calls in flight per worker thread: 1 and 2
#     threads with batching (max_batch 64), and 1 thread with max_batch 1 (one
#     script call per decision, pipelined: the script's own cost).
# Redis CPU per decision comes from /proc/<redis pid>/stat (utime + stime).
# Prints one line per run and a summary with the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
ROUNDS=${2:-3}
DRIVER=$BUILD/redis_throughput
SECONDS_PER_RUN=5
SEED_REQUESTS=400000
[ -x "$DRIVER" ] || { echo "missing $DRIVER: run make (Release build) first" >&2; exit 1; }
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
  { echo "redis-server/redis-benchmark missing: scripts/install-deps.sh" >&2; exit 1; }

source bench/lib.sh
port=$(free_port)
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --daemonize no &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done

cpu() { cpu_ticks "$pid"; }
hz=$(getconf CLK_TCK)
sha=$(redis-cli -p "$port" script load "$(cat bench/redis/seed_token_bucket.lua)")

echo "# redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port, $(nproc) cores, $(date -u +%F)"
seed_rates=(); seed_cpu=(); one_rates=(); one_cpu=(); two_rates=(); two_cpu=(); solo_rates=(); solo_cpu=()
for round in $(seq "$ROUNDS"); do
  redis-cli -p "$port" flushall >/dev/null
  c0=$(cpu)
  line=$(redis-benchmark -p "$port" -P 16 -c 50 -n "$SEED_REQUESTS" -r 10000 -q \
    EVALSHA "$sha" 1 bucket:__rand_int__ 100 20 "$(date +%s%3N)" 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -1)
  c1=$(cpu)
  rate=$(echo "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
  us=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$SEED_REQUESTS" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
  echo "round $round seed script (redis-benchmark -P 16 -c 50): $rate decisions/s, redis cpu $us us/decision"
  seed_rates+=("$rate"); seed_cpu+=("$us")
  for run in one two solo; do
    threads=1; batch=64
    [ "$run" = two ] && threads=2
    [ "$run" = solo ] && batch=1
    redis-cli -p "$port" flushall >/dev/null
    out=$("$DRIVER" --address "127.0.0.1:$port" --seconds "$SECONDS_PER_RUN" --in-flight 1024 \
      --keys 10000 --threads "$threads" --max-batch "$batch" --redis-pid "$pid")
    rate=$(echo "$out" | sed -nE 's/.*decisions_per_s=([0-9]+).*/\1/p')
    us=$(echo "$out" | sed -nE 's/.*redis_cpu_us_per_decision=([0-9.]+).*/\1/p')
    echo "round $round RedisStore in process, $threads thread(s), max_batch $batch: $rate decisions/s, redis cpu $us us/decision"
    case $run in
      one) one_rates+=("$rate"); one_cpu+=("$us") ;;
      two) two_rates+=("$rate"); two_cpu+=("$us") ;;
      solo) solo_rates+=("$rate"); solo_cpu+=("$us") ;;
    esac
  done
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
s=$(median "${seed_rates[@]}"); o=$(median "${one_rates[@]}"); t=$(median "${two_rates[@]}")
u=$(median "${solo_rates[@]}")
echo
echo "| client | decisions/s (median of $ROUNDS) | vs seed script | Redis CPU per decision |"
echo "|---|---|---|---|"
echo "| redis-benchmark -P 16, seed token bucket script | $s | 1.00x | $(median "${seed_cpu[@]}") us |"
awk -v o="$o" -v s="$s" -v c="$(median "${one_cpu[@]}")" 'BEGIN {printf "| RedisStore, 1 thread | %d | %.2fx | %s us |\n", o, o / s, c}'
awk -v o="$t" -v s="$s" -v c="$(median "${two_cpu[@]}")" 'BEGIN {printf "| RedisStore, 2 threads | %d | %.2fx | %s us |\n", o, o / s, c}'
awk -v o="$u" -v s="$s" -v c="$(median "${solo_cpu[@]}")" 'BEGIN {printf "| RedisStore, 1 thread, max_batch 1 (one script call per decision) | %d | %.2fx | %s us |\n", o, o / s, c}'
