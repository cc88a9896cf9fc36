#!/usr/bin/env bash
# Redis CPU and script calls per decision on a 3-master Redis Cluster, this
# build against a baseline build in the same run (docs/BENCHMARKS.md,
# "Redis Cluster").
#
#   BASELINE=<older build dir> bench/redis/cluster_bench.sh [build-dir] [rounds]
#
# Starts three redis-server masters (cluster-enabled, no persistence) on free
# loopback ports, the slots split in three ranges, then `rounds` times
# (default 3) runs <build>/bench/redis_throughput --cluster yes on them: one
# thread, 50 calls in flight, token_bucket 100 + 20/s, 10,000 random client
# keys (so a loop turn's requests fall in many slots), for SECONDS_RUN
# seconds (default 5); with BASELINE, the same with that build's driver, in
# the same round. Per row: decisions/s, Redis CPU µs per decision (utime +
# stime of the three masters, summed), and script calls per decision
# (EVALSHA + EVAL in INFO commandstats, summed over the masters).
# ROWS (default "this") picks the rows: `this`, exact mode as above;
# `cached`, the same in cached mode (sync every 50 ms); `cached-hot`, cached
# mode on 10 keys (hot keys). BASELINE runs beside `this` only.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
ROUNDS=${2:-3}
BASE=${BASELINE:-}
SECS=${SECONDS_RUN:-5}
BENCH_NAME=cluster_bench
source bench/lib.sh
need_programs "redis-server and redis-cli (scripts/install-deps.sh)" \
  "$(command -v redis-server || true)" "$(command -v redis-cli || true)"
for b in "$BUILD" ${BASE:+"$BASE"}; do
  need_programs "a Release build with bench/redis_throughput in $b" "$b/bench/redis_throughput"
done

start_work sluice-cluster-bench
ports=()
masters=()
for i in 0 1 2; do
  # The cluster bus takes port + 10000: both must be free.
  for _ in $(seq 20); do
    p=$(free_port)
    (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null || break
  done
  mkdir -p "$work/$i"
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --save '' --appendonly no \
    --dir "$work/$i" --logfile "$work/$i/redis.log" --daemonize no &
  pids+=($!)
  masters+=($!)
  ports+=("$p")
done
cli() { redis-cli -p "$1" "${@:2}"; }
for p in "${ports[@]}"; do
  for _ in $(seq 100); do cli "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
cli "${ports[0]}" cluster addslotsrange 0 5460 >/dev/null
cli "${ports[1]}" cluster addslotsrange 5461 10922 >/dev/null
cli "${ports[2]}" cluster addslotsrange 10923 16383 >/dev/null
for p in "${ports[@]:1}"; do cli "${ports[0]}" cluster meet 127.0.0.1 "$p" >/dev/null; done
for _ in $(seq 200); do
  ok=0
  for p in "${ports[@]}"; do
    cli "$p" cluster info | grep -q 'cluster_state:ok' && ok=$((ok + 1))
  done
  [ "$ok" = 3 ] && break
  sleep 0.05
done
[ "$ok" = 3 ] || { echo "the cluster did not form" >&2; exit 1; }

script_calls() {
  local total=0 p n
  for p in "${ports[@]}"; do
    for n in $(cli "$p" info commandstats | tr -d '\r' |
      sed -nE 's/^cmdstat_(evalsha|eval):calls=([0-9]+).*/\2/p'); do
      total=$((total + n))
    done
  done
  echo "$total"
}

results="$work/results"
# run NAME BUILD [more redis_throughput flags, which win]: one row.
run() {
  local name=$1 build=$2 out c0 c1 decisions
  shift 2
  for p in "${ports[@]}"; do cli "$p" flushall >/dev/null; done
  c0=$(script_calls)
  out=$("$build/bench/redis_throughput" --address "127.0.0.1:${ports[0]}" --cluster yes \
    --seconds "$SECS" --in-flight 50 --keys 10000 --threads 1 \
    --redis-pid "$(IFS=,; echo "${masters[*]}")" "$@")
  c1=$(script_calls)
  decisions=$(echo "$out" | sed -nE 's/.*decisions=([0-9]+).*/\1/p')
  # The counts include the driver's warm-up and each master's first EVALSHA
  # (NOSCRIPT, then EVAL): a few calls in tens of thousands.
  printf '%-8s %8s decisions/s  redis %7s us/decision  %s script calls/decision\n' "$name" \
    "$(echo "$out" | sed -nE 's/.*decisions_per_s=([0-9]+).*/\1/p')" \
    "$(echo "$out" | sed -nE 's/.*redis_cpu_us_per_decision=([0-9.]+).*/\1/p')" \
    "$(awk -v c=$((c1 - c0)) -v d="$decisions" 'BEGIN {printf "%.3f", c / d}')" | tee -a "$results"
}

echo "# redis-server $(redis-server --version | awk '{print $3}'), 3 masters on 127.0.0.1:${ports[*]}, $(nproc) cores, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  echo "## round $round"
  for row in ${ROWS:-this}; do
    case $row in
      this)
        run this "$BUILD"
        [ -n "$BASE" ] && run base "$BASE"
        ;;
      cached) run cached "$BUILD" --mode cached ;;
      cached-hot) run cached-hot "$BUILD" --mode cached --keys 10 ;;
      *) echo "unknown row $row (this, cached, cached-hot)" >&2; exit 2 ;;
    esac
  done
done
echo
echo "medians of $ROUNDS rounds:"
awk '
  { rate[$1] = rate[$1] " " $2; cpu[$1] = cpu[$1] " " $5; calls[$1] = calls[$1] " " $7
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  function median(list,   a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((k + 1) / 2)]
  }
  END { for (i = 1; i <= n; ++i) { r = order[i]
    printf "| %s | %d | %.3f | %.3f |\n", r, median(rate[r]), median(cpu[r]), median(calls[r]) } }' "$results"
