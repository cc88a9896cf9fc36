#!/usr/bin/env bash
# Where redis-server spends its CPU while it runs Sluice's scripts: perf
# samples per 1,000 decisions and the functions that take them
# (bench/results/2026-redis.md, "Less Lua per decision").
#
#   bench/redis/redis_profile.sh [build-dir] [row]
#
# row: tb (token bucket through entry.lua, default), fw (a fixed window:
# fast_fixed_window.lua) or fw-script (the fixed window through entry.lua).
# Starts its own redis-server ($REDIS_SERVER, default the one on PATH; a
# Debian redis-server is stripped of the Lua interpreter's internal symbols,
# so for a breakdown by function point it at one built from source), runs
# <build>/bench/redis_throughput as redis_bench.sh's inproc rows do (one
# thread, 50 calls in flight, 10,000 keys, batched) for $SECONDS_RUN
# seconds (default 4) and records redis-server with `perf record -F 2000 -g`
# meanwhile. Prints the decisions, the samples, samples per 1,000 decisions
# and the top $TOP (default 25) functions by self samples.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
ROW=${2:-tb}
SECS=${SECONDS_RUN:-4}
TOP=${TOP:-25}
server=${REDIS_SERVER:-$(command -v redis-server || true)}
source bench/lib.sh
need_programs "redis-server and perf" "$server" "$(command -v perf || true)" \
  "$(command -v redis-cli || true)" "$BUILD/bench/redis_throughput"
case $ROW in
  tb) flags=() ;;
  fw) flags=(--algorithm fixed_window) ;;
  fw-script) flags=(--algorithm fixed_window --fast-path no) ;;
  *) echo "row: tb, fw or fw-script" >&2; exit 1 ;;
esac

start_work redis-profile
port=$(free_port)
"$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" --daemonize no &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
# A first short run loads the script, so the profile sees only decisions.
"$BUILD/bench/redis_throughput" --address "127.0.0.1:$port" --seconds 1 --in-flight 50 \
  --keys 10000 --threads 1 "${flags[@]}" >/dev/null
redis-cli -p "$port" flushall >/dev/null
perf record -F 2000 -g -o "$work/perf.data" -p "$pid" 2>"$work/perf.log" &
perf_pid=$!
sleep 0.3  # perf attached
out=$("$BUILD/bench/redis_throughput" --address "127.0.0.1:$port" --seconds "$SECS" \
  --in-flight 50 --keys 10000 --threads 1 --redis-pid "$pid" "${flags[@]}")
kill -INT "$perf_pid"
wait "$perf_pid" || true
decisions=$(echo "$out" | sed -nE 's/.*decisions=([0-9]+).*/\1/p')
samples=$(perf report -i "$work/perf.data" --stdio --sort comm -F sample -g none 2>/dev/null |
  awk '!/^#/ && $1 ~ /^[0-9]+$/ {n += $1} END {print n + 0}')
echo "# $ROW, $BUILD, redis-server $server, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$out" | grep -E 'decisions=|redis_cpu' || true
echo "perf samples $samples (while the run lasted), per 1,000 decisions" \
  "$(awk -v s="$samples" -v d="$decisions" 'BEGIN {printf "%.1f", d ? s * 1000 / d : 0}')"
perf report -i "$work/perf.data" --stdio --no-children --sort symbol -g none \
  --percent-limit 0.5 2>/dev/null | grep -E '^ +[0-9]' | head -n "$TOP"
