#!/usr/bin/env bash
# Redis memory per distinct client key, by the length of the key's value
# (docs/SCALING.md, "Memory in Redis"): what a client sends never sizes what
# Redis keeps.
#
#   bench/redis/key_memory.sh [build-dir] [keys]      # default: build, 2000
#
# Starts its own redis-server (no persistence) and `sluice serve` (store
# redis, one route keyed by header:x-api-key, token_bucket 3 per hour) on free
# loopback ports. For each value length (16 B, 256 B: the longest kept as
# sent, 257 B, 15,000 B) it sends KEYS requests, each with a new X-Api-Key of
# that length, on one keep-alive connection, then prints Redis's used_memory
# growth per key (INFO memory), MEMORY USAGE of one key and the key's length.
# The database is flushed between lengths. Then, for each maxmemory-policy
# (noeviction, allkeys-lru, volatile-ttl): Redis is given 1 MB above what it
# uses empty, one key is spent to its limit (3 allowed, the 4th denied), and
# FLOOD (default 20,000) requests each bring a new 16-byte key; it prints how
# many of them were allowed, how many keys Redis evicted, and whether the
# exhausted key's state is still in Redis (evicted, it would start full).
# Bounded: 4 x KEYS + 3 x (FLOOD + 4) requests.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
KEYS=${2:-2000}
FLOOD=${FLOOD:-20000}
BENCH_NAME=key_memory
source bench/lib.sh
need_programs "$BUILD/sluice (make), redis-server, redis-cli and python3" \
  "$BUILD/sluice" "$(command -v redis-server || true)" "$(command -v redis-cli || true)" \
  "$(command -v python3 || true)"

start_work sluice-key-memory
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" --daemonize no &
pids+=($!)
wait_port "$redis_port"
port=$(free_port)
admin=$(free_port)
cat >"$work/sluice.yaml" <<YAML
listen: 127.0.0.1:$port
admin: 127.0.0.1:$admin
headers: none
store:
  backend: redis
  redis: {addresses: [127.0.0.1:$redis_port], timeout: 1s, on_failure: deny}
routes:
  - match: GET /reports
    key: header:x-api-key
    limits: [{capacity: 3, refill_rate: 1/h}]
YAML
"$BUILD/sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
pids+=($!)
wait_port "$port"
for _ in $(seq 200); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz" || true) == 200 ]] && break
  sleep 0.05
done

# send LENGTH COUNT PREFIX: COUNT requests, each with a new key of LENGTH
# bytes starting with PREFIX (or, with COUNT 0, four with the key PREFIX);
# prints how many were allowed.
send() {
  python3 - "$port" "$1" "$2" "$3" <<'PY'
import http.client, sys
port, length, count, prefix = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
allowed = 0
for i in range(count or 4):
    value = prefix if count == 0 else (prefix + str(i) + "-").ljust(length, "k")
    c.request("GET", "/reports", headers={"X-Api-Key": value})
    r = c.getresponse()
    r.read()
    allowed += r.status == 200
print(allowed)
PY
}
used() { redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory:/ {print $2+0}'; }

printf '%-12s %8s %16s %14s %12s\n' "value bytes" "keys" "used_memory/key" "MEMORY USAGE" "key bytes"
for length in 16 256 257 15000; do
  redis-cli -p "$redis_port" flushall >/dev/null
  before=$(used)
  send "$length" "$KEYS" new >/dev/null
  after=$(used)
  count=$(redis-cli -p "$redis_port" dbsize)
  sample=$(redis-cli -p "$redis_port" randomkey)
  usage=$(redis-cli -p "$redis_port" memory usage "$sample")
  printf '%-12s %8s %16s %14s %12s\n' "$length" "$count" "$(((after - before) / KEYS))" \
    "$usage" "${#sample}"
done

echo
printf '%-14s %16s %14s %28s\n' "policy" "flood allowed" "evicted keys" "exhausted key still held"
rc() { redis-cli -p "$redis_port" "$@"; }
for policy in noeviction allkeys-lru volatile-ttl; do
  rc config set maxmemory 0 >/dev/null
  rc flushall >/dev/null
  rc config resetstat >/dev/null
  rc config set maxmemory-policy "$policy" >/dev/null
  rc config set maxmemory $(($(used) + 1048576)) >/dev/null
  # A key of its own per policy: the deny cache remembers the last one's denial.
  spent=$(send 16 0 "exhausted-$policy")
  flood=$(send 16 "$FLOOD" "flood-$policy-")
  evicted=$(rc info stats | awk -F: '/^evicted_keys:/ {print $2+0}')
  held=$(rc --scan --pattern "*x-api-key=exhausted-$policy" | wc -l)
  printf '%-14s %16s %14s %28s\n' "$policy" "$flood of $FLOOD" "$evicted" \
    "$([[ $held == 1 ]] && echo yes || echo no) ($spent of 4 allowed)"
done
