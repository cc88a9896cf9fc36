#!/usr/bin/env bash
# Soak test (loopback only, bounded): `sluice serve` on the Redis store for
# SOAK_SECONDS under mixed traffic while Redis is paused, killed and restarted
# and the config is reloaded every few seconds. Fails (exit 1) on a crash, RSS
# growth above 10% or descriptor growth after the warm-up, a non-clean exit
# on SIGTERM, or a window admitting more than its limit. docs/RELIABILITY.md "Soak".
#
#   bench/soak/run.sh [BUILD_DIR]     # default: build (builds nothing)
#
# Environment: SOAK_SECONDS (default 1800, at least 90), SOAK_KEEP=1 keeps the
# work folder (logs) and prints its path.
#
# Traffic (bench/soak/soak.py load, paced, about 130 requests/s in all):
#   gateway  GET/POST /api/items/N over 500 API keys and other paths over the
#            default route, proxied to a Python upstream that logs each request
#   strict   GET /strict on one key, fixed_window 5 per 2 s, 20 attempts/s
#   check    POST /v1/check over 1000 keys; auth  GET /v1/auth over 300 keys
#   misbehave  half requests, clients gone during a slow upstream answer,
#            short bodies, byte-by-byte writers, pipelined unread answers then
#            RST, silent connections (about 6/s)
#   wrk      a 2 s burst every 30 s over 1000 API keys
#   rls      rls_load (BUILD_DIR/bench/rls/rls_load, if built) 3 s every 20 s
# Chaos: a reload every 4 s (POST /admin/reload and SIGHUP in turn, the config
# rewritten each time); Redis (appendonly, fsync always) in turn: SIGSTOP 2 s
# then SIGCONT, SIGKILL and a restart after 3 s, SIGTERM and a restart after
# 2 s; 8 s between outages (2 s during the warm-up), the first at 4 s. First
# burst of wrk at 10 s, of rls_load at 5 s.
set -euo pipefail

cd "$(dirname "$0")/../.."
repo=$PWD
build_dir=${1:-build}
duration=${SOAK_SECONDS:-1800}
((duration < 90)) && duration=90
# Warm-up: the first 20% of the run, and at least 60 s. Sluice's RSS climbs
# in steps after Redis restarts (about +30% over the first few minutes at
# the normal chaos pace) and then stays flat, so during the warm-up the
# chaos runs 4 times faster (2 s instead of 8 s between outages): the high-
# water mark is reached before the baseline (docs/RELIABILITY.md "Soak").
warmup=$((duration / 5))
((warmup < 60)) && warmup=60
strict_limit=5
strict_window=2

sluice="$build_dir/sluice"
rls_load="$build_dir/bench/rls/rls_load"
py=/usr/bin/python3
for program in "$sluice" "$py" "$(command -v redis-server || true)" "$(command -v redis-cli || true)" \
  "$(command -v curl || true)" "$(command -v wrk || true)"; do
  if [[ -z $program || ! -x $program ]]; then
    echo "soak: needs $build_dir/sluice, /usr/bin/python3, redis-server, redis-cli, curl and wrk" >&2
    exit 1
  fi
done
[[ -x $rls_load ]] || rls_load=

work=$(mktemp -d /tmp/sluice-soak.XXXXXX)
pids=()
redis_pid=
sluice_pid=
cleanup() {
  local pid
  for pid in "${pids[@]}" $redis_pid; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}" $redis_pid; do wait "$pid" 2>/dev/null || true; done
  if [[ ${SOAK_KEEP:-0} == 1 ]]; then echo "soak: logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

source bench/lib.sh
BENCH_NAME="soak: FAIL"
fail() {
  echo "soak: FAIL: $*" >&2
  echo "--- last lines of the sluice log ---" >&2
  tail -n 30 "$work/sluice.log" >&2 || true
  exit 1
}

up_port=$(free_port)
gw_port=$(free_port)
dec_port=$(free_port)
admin_port=$(free_port)
grpc_port=$(free_port)
redis_port=$(free_port)

# Redis: no RDB snapshots, an AOF fsynced before each reply, so a SIGKILL
# loses no count that Sluice was told about (a restarted empty Redis would
# start the strict window again and admit it twice: not Sluice's doing).
mkdir -p "$work/redis"
start_redis() {
  redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$work/redis" --save "" \
    --appendonly yes --appendfsync always --daemonize no --logfile "$work/redis.log" &
  redis_pid=$!
  wait_port "$redis_port"
}
start_redis

"$py" bench/soak/soak.py upstream "$up_port" "$work/upstream.log" 2>"$work/upstream.err" &
pids+=($!)
wait_port "$up_port"

# write_config N: the config, with a harmless setting changed by each reload.
write_config() {
  cat >"$work/sluice.yaml.new" <<YAML
listen: 127.0.0.1:$gw_port
admin: 127.0.0.1:$admin_port
grpc: 127.0.0.1:$grpc_port
rls:
  config_dir: $repo/examples/envoy/ratelimit
upstream:
  url: http://127.0.0.1:$up_port
  timeout: 5s
decision_api:
  listen: 127.0.0.1:$dec_port
store:
  backend: redis
  redis:
    addresses: [127.0.0.1:$redis_port]
    timeout: 100ms
    # deny: a Redis outage must not admit anything on /strict. With allow,
    # Sluice admits every request during an outage by design (fail open),
    # and the per-window check below would count those as over-admissions.
    on_failure: deny
server:
  threads: 2
  header_timeout: 3s
  idle_timeout: 10s
logging:
  level: warn
  denial_log_per_second: $((1 + $1 % 3))
policies:
  soak-check: {capacity: 20, refill_rate: 10/s}
default:
  limits: [{algorithm: gcra, capacity: 50, refill_rate: 50/s}]
routes:
  - match: GET /strict
    key: header:x-soak-key
    limits: [{algorithm: fixed_window, limit: $strict_limit, window: ${strict_window}s}]
  - match: GET /slow
    limits: [{capacity: 1000, refill_rate: 1000/s}]
  - match: GET /api/auth/{id}
    key: header:x-api-key
    limits: [{algorithm: sliding_window, limit: 30, window: 10s}]
  - match: "* /api/*"
    key: header:x-api-key
    limits: [{capacity: 20, refill_rate: 10/s}, {algorithm: sliding_log, limit: 100, window: 10s}]
YAML
  mv "$work/sluice.yaml.new" "$work/sluice.yaml"
}
write_config 0
"$sluice" validate --config "$work/sluice.yaml" >/dev/null || fail "the soak config does not validate"
"$sluice" serve --config "$work/sluice.yaml" >"$work/sluice.out" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)
for port in "$gw_port" "$dec_port" "$admin_port" "$grpc_port"; do wait_port "$port"; done

start=$SECONDS
end=$((start + duration))
echo "soak: $duration s (warm-up $warmup s), sluice pid $sluice_pid, redis on $redis_port, work $work"

# The client load (stops by itself at the end).
"$py" bench/soak/soak.py load "$gw_port" "$dec_port" "$duration" "$work/load.counts" 2>"$work/load.err" &
load_pid=$!
pids+=($load_pid)

# Reloads: every 4 s, POST /admin/reload and SIGHUP in turn.
(
  n=0
  while ((SECONDS < end - 4 && n < duration)); do
    sleep 4
    n=$((n + 1))
    write_config "$n"
    if ((n % 2)); then
      code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 -X POST "http://127.0.0.1:$admin_port/admin/reload" || true)
      echo "post $code" >>"$work/reloads"
    else
      kill -HUP "$sluice_pid" 2>/dev/null && echo "sighup" >>"$work/reloads"
    fi
  done
) &
pids+=($!)

# Bursts: wrk over many API keys, and rls_load.
cat >"$work/keys.lua" <<'LUA'
request = function()
  return wrk.format("GET", "/api/items/" .. math.random(100), {["X-Api-Key"] = "w" .. math.random(1000)})
end
LUA
(
  n=0
  while ((SECONDS < end - 35 && n < duration / 30 + 1)); do
    ((n)) && sleep 28 || sleep 10
    n=$((n + 1))
    wrk -t1 -c4 -d2s -s "$work/keys.lua" "http://127.0.0.1:$gw_port" >>"$work/wrk.out" 2>&1 || true
  done
) &
pids+=($!)
if [[ -n $rls_load ]]; then
  (
    n=0
    while ((SECONDS < end - 25 && n < duration / 20 + 1)); do
      ((n)) && sleep 17 || sleep 5
      n=$((n + 1))
      "$rls_load" --target "127.0.0.1:$grpc_port" --seconds 3 --in-flight 4 --domain edge \
        --key remote_address --value 10.1.0. --values 1000 >>"$work/rls.out" 2>&1 || true
    done
  ) &
  pids+=($!)
fi

# Redis chaos: a 30 s cycle of pause, kill, graceful restart. Runs in this
# shell (redis_pid changes), one step per monitoring tick.
outages=0
chaos_at=$((start + 4))
chaos_step=0
redis_down_since=
redis_chaos() {
  ((SECONDS < chaos_at || SECONDS >= end - 6)) && return 0
  local gap=8
  ((SECONDS - start < warmup - 6)) && gap=2
  case $chaos_step in
    0) kill -STOP "$redis_pid"; echo "$((SECONDS - start)) pause" >>"$work/chaos"; chaos_at=$((SECONDS + 2)) ;;
    1) kill -CONT "$redis_pid"; outages=$((outages + 1)); chaos_at=$((SECONDS + gap)) ;;
    2) kill -KILL "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
       echo "$((SECONDS - start)) kill" >>"$work/chaos"; chaos_at=$((SECONDS + 3)) ;;
    3) start_redis; outages=$((outages + 1)); chaos_at=$((SECONDS + gap)) ;;
    4) kill -TERM "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
       echo "$((SECONDS - start)) term" >>"$work/chaos"; chaos_at=$((SECONDS + 2)) ;;
    5) start_redis; outages=$((outages + 1)); chaos_at=$((SECONDS + gap)) ;;
  esac
  chaos_step=$(((chaos_step + 1) % 6))
}

# Monitoring: every second, sluice alive, its RSS and descriptors.
sample() {
  local rss fds
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$sluice_pid/status" 2>/dev/null || true)
  fds=$(ls "/proc/$sluice_pid/fd" 2>/dev/null | wc -l)
  echo "$((SECONDS - start)) $rss $fds" >>"$work/samples"
  last_rss=$rss
  last_fds=$fds
}
alive() {
  [[ -r /proc/$sluice_pid/stat ]] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$sluice_pid/stat"
}
base_rss=
base_fds=
max_rss=0
max_fds=0
while ((SECONDS < end)); do
  sleep 1
  if ! alive; then
    wait "$sluice_pid" && status=0 || status=$?
    fail "sluice exited (status $status) at $((SECONDS - start)) s"
  fi
  redis_chaos
  sample
  if ((SECONDS - start >= warmup)); then
    if [[ -z $base_rss ]]; then
      base_rss=$last_rss
      base_fds=$last_fds
    fi
    ((last_rss > max_rss)) && max_rss=$last_rss
    ((last_fds > max_fds)) && max_fds=$last_fds
  fi
done
kill -CONT "$redis_pid" 2>/dev/null || true
end_rss=$last_rss
end_fds=$last_fds
wait "$load_pid" || fail "the load client failed: $(tail -n 5 "$work/load.err")"

# A clean exit on SIGTERM (in-flight requests are done by now).
kill -TERM "$sluice_pid"
wait "$sluice_pid" && status=0 || status=$?

echo
echo "== soak summary: $duration s, build $build_dir =="
echo "requests by kind and status (client side):"
sed 's/^/  /' "$work/load.counts"
wrk_reqs=$(awk '/requests in/ {s += $1} END {print s + 0}' "$work/wrk.out" 2>/dev/null || echo 0)
echo "  wrk bursts: $(grep -c 'requests in' "$work/wrk.out" 2>/dev/null || echo 0), requests $wrk_reqs"
if [[ -n $rls_load ]]; then
  rls_calls=$(sed -n 's/.*calls \([0-9]\+\) seconds.*/\1/p' "$work/rls.out" | awk '{s += $1} END {print s + 0}')
  echo "  rls_load bursts: $(grep -c 'calls' "$work/rls.out" || echo 0), calls $rls_calls"
else
  echo "  rls_load: not built in $build_dir (skipped)"
fi
echo "reloads: $(grep -c 'post 200' "$work/reloads" || true) POST /admin/reload answered 200," \
  "$(grep -c sighup "$work/reloads" || true) SIGHUP, $(grep -c 'post' "$work/reloads" | tr -d '\n') POST in all"
echo "redis outages: $outages ($(grep -c pause "$work/chaos" || true) paused, $(grep -c kill "$work/chaos" || true) killed," \
  "$(grep -c term "$work/chaos" || true) stopped and restarted)"
echo "rss_kib: baseline $base_rss (at ${warmup} s) end $end_rss max $max_rss"
echo "fds: baseline $base_fds end $end_fds max $max_fds"
echo "sluice exit on SIGTERM: $status"
upstream_total=$(wc -l <"$work/upstream.log")
echo "upstream served: $upstream_total"
check=$("$py" bench/soak/soak.py check "$work/upstream.log" "$strict_limit" "$strict_window") && check_ok=1 || check_ok=0
echo "$check"

failed=()
((check_ok)) || failed+=("more requests admitted in a window than its limit of $strict_limit per ${strict_window}s")
((end_rss * 10 > base_rss * 11)) && failed+=("RSS grew from $base_rss to $end_rss KiB (over 10%)")
((end_fds > base_fds + 16)) && failed+=("descriptors grew from $base_fds to $end_fds (slack 16)")
((status == 0)) || failed+=("sluice exited with status $status on SIGTERM")
grep -q '^strict 200 ' "$work/load.counts" || failed+=("no /strict request was ever admitted (is the gateway working?)")
if ((${#failed[@]})); then
  for f in "${failed[@]}"; do echo "soak: FAIL: $f" >&2; done
  exit 1
fi
echo "soak: PASS"
