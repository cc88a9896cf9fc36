#!/usr/bin/env bash
# Redis CPU per decision and decisions/s of every way of deciding on Redis,
# side by side on one redis-server in one run (docs/BENCHMARKS.md, "Redis store,
# one Redis").
#
#   BASELINE=<older build dir> bench/redis/redis_bench.sh [build-dir] [rounds]
#
# Starts its own redis-server on a free loopback port (no persistence), then,
# `rounds` times (default 3), every row below, all at 50 concurrent clients
# on 10,000 random client keys:
#   floor-*        redis-benchmark -P 16 -c 50 EVALSHA of a 16-key script that
#                  decides nothing (bench/redis/floors/*.lua): per key
#   seed           redis-benchmark -P 16 -c 50 EVALSHA of the seed's token
#                  bucket script (bench/redis/seed_token_bucket.lua)
#   incrby+expire  envoyproxy/ratelimit's Redis work per descriptor: INCRBY
#                  and EXPIRE of one key, pipelined; measured as two
#                  redis-benchmark -P 16 -c 50 runs on the same keys, the CPU
#                  and time of both summed per descriptor
#   inproc         <build>/bench/redis_throughput: RedisStore in process, 50 calls in
#                  flight on one thread (batched), token_bucket 100 + 20/s
#   tb-alone       bench/redis/floors/token_bucket_alone.lua as the floors are
#                  run: a script that decides one token bucket per key and
#                  nothing else (what a token-bucket fast path could cost)
#   fw-counter     bench/redis/floors/fixed_window_counter.lua likewise: a
#                  fixed window kept as a counter per window (INCRBY)
#   inproc-refill1 inproc with the bucket refilled 1 per second: a state's TTL
#                  after a decision is about 2 s, not 100 ms, so at these rates
#                  keys do not expire between their decisions (as the floors'
#                  keys, written with a 5 s TTL, do not)
#   inproc-batch1  the same with max_batch 1: one request per script call
#                  (a cluster's calls mostly were, when a batch was per slot;
#                  bench/redis/cluster_bench.sh measures a cluster)
#   inproc-fw      inproc with a fixed window of 1,000 per 5 s instead (one limit:
#                  the fixed window's fast path, fast_fixed_window.lua)
#   inproc-fw-script  the same through the general script (fast path off:
#                  what every fixed window cost before it)
#   inproc-fw-batch1, inproc-fw-script-batch1  the two with max_batch 1
#   inproc-denied90, inproc-denied90-nocache
#                  inproc with 9 requests in 10 on a limit of 1 per hour
#                  (denied after each key's first): with the deny cache
#                  (default) and without
#   inproc-denied90-fw  inproc-denied90 with fixed windows (the allowed tenth
#                  on inproc-fw's window, the denied on a fixed window of 1
#                  per hour): the fast path and the deny cache together
#   inproc-cached  inproc in cached mode (store.redis.mode cached, sync every
#                  50 ms), 10,000 keys: each sync carries every key decided
#                  since the last one
#   inproc-cached-hot  the same on 10 keys (hot keys)
#   serve          `sluice serve` on the Redis store, wrk -t2 -c50 POST /v1/check
#                  (policy token_bucket 1,000,000 + 1,000,000/s: nothing denied);
#                  every serve row also prints wrk's p50 and p99
#   rls            the same server's Envoy RLS service (examples/envoy's
#                  descriptors, minute limits), <build>/bench/rls/rls_load with
#                  50 calls in flight
#   serve-denied90 serve, 9 requests in 10 for a policy of 1 per hour
#                  (bench/redis/check_denied_keys.lua), deny cache on
#   serve-cached   serve in cached mode (sync every 50 ms), as serve
#   serve-cached-hot  serve-cached on 10 client keys (hot keys)
#   serve-fw       serve for a fixed window policy (1,000,000 per second: the
#                  fast path), no RLS row
#   serve-cached-hot-idle-redis, serve-cached-idle-redis  not a load: the CPU
#                  of a second redis-server, started beside and never
#                  connected to, over the same span, per decision of the row
#                  (Redis's own running cost, serverCron; the row's gross
#                  figure includes as much)
# With BASELINE, inproc, inproc-fw, the cached rows, serve and rls run again with that build's binaries
# (rows "base-..."), in the same round, on the same Redis.
# Redis CPU: redis-server's utime + stime (/proc/<pid>/stat) over the run;
# Sluice CPU: the sluice process's, likewise (inproc rows: the driver's own).
#
# RATE=N paces every inproc row to at most N decisions/s (redis_throughput
# --rate: the requests due leave every 1 ms, so with 50 in flight a row
# runs at most about 50 per round trip): a state's TTL runs out between two
# of its decisions more often the slower its key is hit (a token bucket of
# 100 + 20/s on 10,000 keys: at about 120,000/s and below; the stderr line
# counts expired_keys), so two builds are compared fairly only at one rate.
# SYNC_INTERVAL (default 50ms) is the serve rows' store.redis.sync_interval.
# WARM=N runs each serve row's load N seconds before measuring it (after
# Redis's FLUSHALL): the row then leaves out the keys' first requests and
# first fetch, and the cached rows print Redis's INFO commandstats of the
# measured span (calls and microseconds per command).
# ROWS="inproc-fw serve ..." runs only the named rows (a serve row brings its
# rls row; "floors" the four floors; base rows follow theirs).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
ROUNDS=${2:-3}
BASE=${BASELINE:-}
SECS=${SECONDS_RUN:-5}
CALLS=40000  # per redis-benchmark run of a 16-request script: 640,000 keys
PAIRS=400000 # per INCRBY / EXPIRE run
for tool in redis-server redis-cli redis-benchmark wrk curl; do
  command -v "$tool" >/dev/null || { echo "$tool missing: scripts/install-deps.sh" >&2; exit 1; }
done
driver() { echo "$1/bench/redis_throughput"; }
for b in "$BUILD" ${BASE:+"$BASE"}; do
  [ -x "$(driver "$b")" ] || { echo "missing $(driver "$b"): a Release build first" >&2; exit 1; }
  [ -x "$b/sluice" ] || echo "no $b/sluice: its serve and rls rows are left out" >&2
done

source bench/lib.sh
dir=$(mktemp -d)
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --daemonize no &
pid=$!
# An idle redis-server beside, nothing connected: what Redis costs just
# running (serverCron) over the same span, shown apart in the cached rows.
idle_port=$(free_port)
redis-server --port "$idle_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/idle.log" --daemonize no &
idle_pid=$!
sluice_pid=""
cleanup() {
  [ -n "$sluice_pid" ] && kill "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null
  kill "$pid" "$idle_pid" 2>/dev/null; wait "$pid" "$idle_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
for _ in $(seq 100); do redis-cli -p "$idle_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
hz=$(getconf CLK_TCK)
per() { awk -v t="$1" -v hz="$hz" -v n="$2" 'BEGIN {printf "%.3f", n ? t / hz * 1e6 / n : 0}'; }
results="$dir/results"
# Redis's CPU in microseconds (INFO cpu: getrusage, to the microsecond): the
# serve rows use it, since cached mode's few syncs can cost Redis less than
# one /proc tick (10 ms) over a whole row.
redis_cpu_us() {
  redis-cli -p "${1:-$port}" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ {t += $2} END {printf "%d", t * 1e6}'
}
per_us() { awk -v t="$1" -v n="$2" 'BEGIN {printf "%.3f", n ? t / n : 0}'; }

# row NAME RATE REDIS_US [SLUICE_US]: one line per run, kept for the summary.
row() {
  printf '%-16s %10s decisions/s  redis %6s us/decision  sluice %6s us/decision\n' "$1" "$2" "$3" "${4:--}"
  echo "$1 $2 $3 ${4:--}" >> "$results"
}

# redis-benchmark -P 16 -c 50; prints "<requests/s> <redis cpu ticks>".
bench_redis() {
  local n=$1 c0 c1 line
  shift
  redis-cli -p "$port" flushall >/dev/null
  c0=$(cpu_ticks "$pid")
  line=$(redis-benchmark -p "$port" -P 16 -c 50 -n "$n" -r 10000 -q "$@" 2>&1 | tr '\r' '\n' |
    grep 'requests per second' | tail -1)
  c1=$(cpu_ticks "$pid")
  echo "$(echo "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/') $((c1 - c0))"
}

floor_keys=()
for i in $(seq 16); do floor_keys+=("sluice:{__rand_int__}$i:k"); done
floors() {
  local f sha rate ticks
  for f in get_set_px mget_set_px mget_set mget_mset; do
    sha=$(redis-cli -p "$port" script load "$(cat "bench/redis/floors/$f.lua")")
    read -r rate ticks < <(bench_redis "$CALLS" EVALSHA "$sha" 16 "${floor_keys[@]}")
    row "floor-$f" "$(awk -v r="$rate" 'BEGIN {printf "%d", r * 16}')" "$(per "$ticks" $((CALLS * 16)))"
  done
}

# A script deciding one token_bucket limit (100 + 1/s) per key and nothing
# else (bench/redis/floors/token_bucket_alone.lua), 16 keys per call as the
# floors: what a token-bucket-only fast path could cost.
tb_alone() {
  local sha rate ticks
  sha=$(redis-cli -p "$port" script load "$(cat bench/redis/floors/token_bucket_alone.lua)")
  read -r rate ticks < <(bench_redis "$CALLS" EVALSHA "$sha" 16 "${floor_keys[@]}" 100 1000000 1 0)
  row tb-alone "$(awk -v r="$rate" 'BEGIN {printf "%d", r * 16}')" "$(per "$ticks" $((CALLS * 16)))"
}

# A fixed window kept as a counter per window (bench/redis/floors/
# fixed_window_counter.lua: INCRBY, PEXPIRE when new), 100 per 5 s, 16 keys
# per call as the floors: what that state would cost (docs/SCALING.md).
fw_counter() {
  local sha rate ticks
  sha=$(redis-cli -p "$port" script load "$(cat bench/redis/floors/fixed_window_counter.lua)")
  read -r rate ticks < <(bench_redis "$CALLS" EVALSHA "$sha" 16 "${floor_keys[@]}" 100 5000000)
  row fw-counter "$(awk -v r="$rate" 'BEGIN {printf "%d", r * 16}')" "$(per "$ticks" $((CALLS * 16)))"
}

seed() {
  local sha rate ticks
  sha=$(redis-cli -p "$port" script load "$(cat bench/redis/seed_token_bucket.lua)")
  read -r rate ticks < <(bench_redis "$PAIRS" EVALSHA "$sha" 1 bucket:__rand_int__ 100 20 "$(date +%s%3N)")
  row seed "${rate%.*}" "$(per "$ticks" "$PAIRS")"
}

incrby_expire() {
  local r1 t1 r2 t2
  read -r r1 t1 < <(bench_redis "$PAIRS" INCRBY rl:__rand_int__ 1)
  # The keys INCRBY made, so EXPIRE finds them (no FLUSHALL in between).
  local c0 c1 line
  c0=$(cpu_ticks "$pid")
  line=$(redis-benchmark -p "$port" -P 16 -c 50 -n "$PAIRS" -r 10000 -q EXPIRE rl:__rand_int__ 60 2>&1 |
    tr '\r' '\n' | grep 'requests per second' | tail -1)
  c1=$(cpu_ticks "$pid")
  r2=$(echo "$line" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
  t2=$((c1 - c0))
  row incrby+expire "$(awk -v a="$r1" -v b="$r2" 'BEGIN {printf "%d", 1 / (1 / a + 1 / b)}')" \
    "$(per $((t1 + t2)) "$PAIRS")"
}

# EVALSHA + EVAL calls so far (INFO commandstats).
script_calls() {
  redis-cli -p "$port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_eval(sha)?:/ {n += $3} END {print n + 0}'
}

# Keys Redis expired so far (INFO stats): a state whose TTL ran out between
# two of its decisions costs Redis a delete and a new key, so a slower row
# pays more per decision for the same work.
expired_keys() {
  redis-cli -p "$port" info stats | tr -d '\r' | awk -F: '/^expired_keys:/ {print $2 + 0}'
}

# inproc NAME BUILD [MAX_BATCH] [more redis_throughput flags]
inproc() {
  local name=$1 build=$2 batch=${3:-64} out
  shift 3 || shift $#
  redis-cli -p "$port" flushall >/dev/null
  local calls0 calls1 expired0 expired1
  calls0=$(script_calls)
  expired0=$(expired_keys)
  out=$("$(driver "$build")" --address "127.0.0.1:$port" --seconds "$SECS" --in-flight 50 \
    --keys 10000 --threads 1 --max-batch "$batch" --redis-pid "$pid" ${RATE:+--rate "$RATE"} "$@")
  calls1=$(script_calls)
  expired1=$(expired_keys)
  echo "  $name: $(echo "$out" | grep -oE 'decisions=[0-9]+ allowed=[0-9]+')" \
    "script_calls=$((calls1 - calls0)) expired_keys=$((expired1 - expired0))" >&2
  row "$name" "$(echo "$out" | sed -nE 's/.*decisions_per_s=([0-9]+).*/\1/p')" \
    "$(echo "$out" | sed -nE 's/.*redis_cpu_us_per_decision=([0-9.]+).*/\1/p')" \
    "$(echo "$out" | sed -nE 's/.*sluice_cpu_us_per_decision=([0-9.]+).*/\1/p')"
}

# Whether ROWS (if set) names row $1.
want() { [ -z "${ROWS:-}" ] || [[ " $ROWS " == *" $1 "* ]]; }

# Starts `sluice serve` from BUILD on the Redis store, with the RLS service;
# MODE exact (default) or cached.
start_serve() {
  local build=$1 mode=${2:-exact} sync=""
  http=$(free_port); admin=$(free_port); grpc=$(free_port)
  # The config refuses sync_interval outside cached mode.
  [ "$mode" = cached ] && sync="sync_interval: ${SYNC_INTERVAL:-50ms}"
  cat > "$dir/serve.yaml" <<YAML
listen: 127.0.0.1:$http
admin: 127.0.0.1:$admin
grpc: 127.0.0.1:$grpc
rls:
  config_dir: $PWD/examples/envoy/ratelimit
store:
  backend: redis
  redis:
    addresses: [127.0.0.1:$port]
    timeout: 50ms
    mode: $mode
    $sync
policies:
  bench: {algorithm: token_bucket, capacity: 1000000, refill_rate: 1000000/s}
  window: {algorithm: fixed_window, limit: 1000000, window: 1s}
  denied: {algorithm: token_bucket, capacity: 1, refill_rate: 1/h}
YAML
  "$build/sluice" serve --config "$dir/serve.yaml" 2> "$dir/serve.log" &
  sluice_pid=$!
  for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true)" = 200 ] && return
    kill -0 "$sluice_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "sluice serve ($build) did not become ready; its log:" >&2
  cat "$dir/serve.log" >&2
  exit 1
}

stop_serve() {
  curl -s "http://127.0.0.1:$admin/metrics" | grep -E '^sluice_(store_errors_total|redis_errors_total)' |
    awk '$2 != 0 {print "  " $0}'
  kill "$sluice_pid"; wait "$sluice_pid" 2>/dev/null || true
  sluice_pid=""
}

# serve NAME BUILD [MODE] [WRK_SCRIPT] [POLICY] [KEYS]: the /v1/check row, then
# (exact mode, the default script, policy and keys) the RLS row on the same
# server.
serve() {
  local name=$1 build=$2 mode=${3:-exact} script=${4:-bench/redis/check_random_keys.lua}
  local policy=${5:-bench} keys=${6:-10000}
  local c0 c1 s0 s1 i0 i1 calls0 calls1 out total rate
  [ -x "$build/sluice" ] || return 0
  start_serve "$build" "$mode"
  redis-cli -p "$port" flushall >/dev/null
  if [ -n "${WARM:-}" ]; then
    POLICY=$policy KEYS=$keys wrk -t2 -c50 -d"${WARM}s" -s "$script" "http://127.0.0.1:$http/v1/check" >/dev/null
  fi
  redis-cli -p "$port" config resetstat >/dev/null
  c0=$(redis_cpu_us); s0=$(cpu_ticks "$sluice_pid"); i0=$(redis_cpu_us "$idle_port")
  calls0=$(script_calls)
  out=$(POLICY=$policy KEYS=$keys wrk -t2 -c50 -d"${SECS}s" --latency -s "$script" \
    "http://127.0.0.1:$http/v1/check")
  c1=$(redis_cpu_us); s1=$(cpu_ticks "$sluice_pid"); i1=$(redis_cpu_us "$idle_port")
  echo "  $name: latency $(echo "$out" | awk '$1 == "50%" || $1 == "99%" {printf "p%s %s ", $1, $2}')" |
    tr -d '%' >&2
  calls1=$(script_calls)
  total=$(echo "$out" | awk '/requests in/ {print $1}')
  rate=$(echo "$out" | awk '/Requests\/sec/ {printf "%d", $2}')
  echo "$out" | grep -q "Non-2xx" && echo "  $name: $(echo "$out" | grep Non-2xx)" >&2
  curl -s "http://127.0.0.1:$admin/metrics" | grep -E '^sluice_(redis_syncs_total|deny_cache_hits_total)' |
    sed "s/^/  $name: /" >&2
  echo "  $name: script_calls=$((calls1 - calls0)) redis_cpu_us=$((c1 - c0))" \
    "idle_redis_cpu_us=$((i1 - i0))" >&2
  [ "$mode" = cached ] && redis-cli -p "$port" info commandstats | tr -d '\r' | grep '^cmdstat' |
    sed "s/^/  $name: /" >&2
  # Cached rows: decisions the store took over 100 us for, since the start
  # (sluice_store_latency_seconds): a local one takes a few us, one Redis
  # made in exact mode a round trip; a rough count of the exact phase, as a
  # local decision delayed by a loaded machine counts too.
  [ "$mode" = cached ] && curl -s "http://127.0.0.1:$admin/metrics" |
    awk -v n="$name" '/^sluice_store_latency_seconds_bucket\{le="0.0001"\}/ {fast = $2}
      /^sluice_store_latency_seconds_count/ {all = $2}
      END {printf "  %s: decisions over 100 us=%d\n", n, all - fast}' >&2
  row "$name" "$rate" "$(per_us $((c1 - c0)) "$total")" "$(per $((s1 - s0)) "$total")"
  # Cached rows: the idle redis-server's CPU over the same span, per decision
  # of the row (the gross figure above includes as much).
  [ "$mode" = cached ] && row "$name-idle-redis" "$rate" "$(per_us $((i1 - i0)) "$total")"
  if [ "$mode" = exact ] && [ "$script" = bench/redis/check_random_keys.lua ] &&
    [ "$policy" = bench ] && [ "$keys" = 10000 ] &&
    [ -x "$build/bench/rls/rls_load" ]; then
    redis-cli -p "$port" flushall >/dev/null
    c0=$(cpu_ticks "$pid"); s0=$(cpu_ticks "$sluice_pid")
    out=$("$build/bench/rls/rls_load" --target "127.0.0.1:$grpc" --seconds "$SECS" --in-flight 50 \
      --values 10000)
    c1=$(cpu_ticks "$pid"); s1=$(cpu_ticks "$sluice_pid")
    total=$(echo "$out" | sed -nE 's/^calls ([0-9]+) .*/\1/p')
    row "${name/serve/rls}" "$(echo "$out" | sed -nE 's/.* calls_per_s ([0-9]+).*/\1/p')" \
      "$(per $((c1 - c0)) "$total")" "$(per $((s1 - s0)) "$total")"
  fi
  stop_serve
}

echo "# redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port, $(nproc) cores, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  echo "## round $round"
  if want floors; then floors; fi
  if want tb-alone; then tb_alone; fi
  if want fw-counter; then fw_counter; fi
  if want seed; then seed; fi
  if want incrby+expire; then incrby_expire; fi
  if want inproc; then
    inproc inproc "$BUILD"
    [ -n "$BASE" ] && inproc base-inproc "$BASE"
  fi
  if want inproc-batch1; then
    inproc inproc-batch1 "$BUILD" 1
    [ -n "$BASE" ] && inproc base-inproc-batch1 "$BASE" 1
  fi
  if want inproc-refill1; then inproc inproc-refill1 "$BUILD" 64 --refill 1; fi
  if want inproc-fw; then
    inproc inproc-fw "$BUILD" 64 --algorithm fixed_window
    [ -n "$BASE" ] && inproc base-inproc-fw "$BASE" 64 --algorithm fixed_window
  fi
  if want inproc-fw-script; then
    inproc inproc-fw-script "$BUILD" 64 --algorithm fixed_window --fast-path no
  fi
  if want inproc-fw-batch1; then inproc inproc-fw-batch1 "$BUILD" 1 --algorithm fixed_window; fi
  if want inproc-fw-script-batch1; then
    inproc inproc-fw-script-batch1 "$BUILD" 1 --algorithm fixed_window --fast-path no
  fi
  if want inproc-denied90; then
    inproc inproc-denied90 "$BUILD" 64 --denied 9
    [ -n "$BASE" ] && inproc base-inproc-denied90 "$BASE" 64 --denied 9
  fi
  if want inproc-denied90-fw; then
    inproc inproc-denied90-fw "$BUILD" 64 --denied 9 --algorithm fixed_window
    [ -n "$BASE" ] && inproc base-inproc-denied90-fw "$BASE" 64 --denied 9 --algorithm fixed_window
  fi
  if want inproc-denied90-nocache; then
    inproc inproc-denied90-nocache "$BUILD" 64 --denied 9 --deny-cache no
  fi
  if want inproc-cached; then
    inproc inproc-cached "$BUILD" 64 --mode cached
    [ -n "$BASE" ] && inproc base-inproc-cached "$BASE" 64 --mode cached
  fi
  if want inproc-cached-hot; then
    inproc inproc-cached-hot "$BUILD" 64 --mode cached --keys 10
    [ -n "$BASE" ] && inproc base-inproc-cached-hot "$BASE" 64 --mode cached --keys 10
  fi
  if want serve; then
    serve serve "$BUILD"
    [ -n "$BASE" ] && serve base-serve "$BASE"
  fi
  if want serve-fw; then
    serve serve-fw "$BUILD" exact bench/redis/check_random_keys.lua window
    [ -n "$BASE" ] && serve base-serve-fw "$BASE" exact bench/redis/check_random_keys.lua window
  fi
  if want serve-denied90; then
    serve serve-denied90 "$BUILD" exact bench/redis/check_denied_keys.lua
    [ -n "$BASE" ] && serve base-serve-denied90 "$BASE" exact bench/redis/check_denied_keys.lua
  fi
  if want serve-cached; then
    serve serve-cached "$BUILD" cached
    [ -n "$BASE" ] && serve base-serve-cached "$BASE" cached
  fi
  if want serve-cached-hot; then
    serve serve-cached-hot "$BUILD" cached bench/redis/check_random_keys.lua bench 10
    [ -n "$BASE" ] && serve base-serve-cached-hot "$BASE" cached bench/redis/check_random_keys.lua bench 10
  fi
done

# Medians per row, and each row against the seed script and the MGET + SET PX floor.
echo
echo "| row | decisions/s (median of $ROUNDS) | Redis CPU µs per decision | vs seed | vs floor-mget_set_px | Sluice CPU µs per decision |"
echo "|---|---|---|---|---|---|"
awk '
  { rate[$1] = rate[$1] " " $2; cpu[$1] = cpu[$1] " " $3; sl[$1] = sl[$1] " " $4; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  function median(list,   a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((k + 1) / 2)]
  }
  END {
    seed = median(cpu["seed"]); floor = median(cpu["floor-mget_set_px"])
    for (i = 1; i <= n; ++i) {
      r = order[i]; c = median(cpu[r]); s = median(sl[r])
      printf "| %s | %d | %.3f | %.3fx | %.3fx | %s |\n", r, median(rate[r]), c, c / seed, c / floor, s
    }
  }' "$results"
