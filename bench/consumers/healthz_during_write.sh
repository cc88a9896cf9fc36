#!/usr/bin/env bash
# /healthz while PUT /admin/consumers writes a large consumers file
# (docs/RELIABILITY.md, L4): the admin port must keep answering while the
# file is read, edited and replaced.
#
#   bench/consumers/healthz_during_write.sh [build-dir] [consumers] [puts]
#                                            # default: build, 100000, 20
#
# Writes a consumers file of CONSUMERS entries (about 30 bytes each), starts
# `sluice serve` on free loopback ports, then PUTS times moves one consumer
# to another plan (one PUT at a time, each answered once the file is
# durable) while a second client asks /healthz back to back on a keep-alive
# connection. Prints the PUT latency (median, max) and /healthz latency
# during the PUTs (median, p99, max), in milliseconds. Bounded: PUTS PUTs.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
CONSUMERS=${2:-100000}
PUTS=${3:-20}
BENCH_NAME=healthz_during_write
source bench/lib.sh
need_programs "$BUILD/sluice (make) and python3" "$BUILD/sluice" "$(command -v python3 || true)"

start_work sluice-healthz-write
python3 - "$work/consumers.yaml" "$CONSUMERS" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(f"key-{i:08d}-0123456789: {'pro' if i % 2 else 'free'}\n")
PY
port=$(free_port)
admin=$(free_port)
cat >"$work/sluice.yaml" <<YAML
listen: 127.0.0.1:$port
admin: 127.0.0.1:$admin
plans:
  free: [{capacity: 2, refill_rate: 1/h}]
  pro: [{capacity: 5, refill_rate: 1/h}]
consumers: {key: header:x-api-key, file: consumers.yaml, unknown: free}
routes:
  - match: GET /a
    limits: [plan]
YAML
"$BUILD/sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
pids+=($!)
wait_port "$admin"
echo "consumers file: $(stat -c %s "$work/consumers.yaml") bytes, $CONSUMERS consumers"
python3 - "$admin" "$PUTS" <<'PY'
import http.client, statistics, sys, threading, time
admin, puts = int(sys.argv[1]), int(sys.argv[2])
done = threading.Event()
healthz = []

def probe():
    c = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
    while not done.is_set():
        t = time.perf_counter()
        c.request("GET", "/healthz")
        c.getresponse().read()
        healthz.append((time.perf_counter() - t) * 1000)

put_ms = []
c = http.client.HTTPConnection("127.0.0.1", admin, timeout=60)
thread = threading.Thread(target=probe)
thread.start()
for i in range(puts):
    t = time.perf_counter()
    c.request("PUT", "/admin/consumers/key-00000001-0123456789",
              body='{"plan":"%s"}' % ("free" if i % 2 == 0 else "pro"),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"PUT {i}: status {r.status}")
    put_ms.append((time.perf_counter() - t) * 1000)
done.set()
thread.join()
healthz.sort()
p99 = healthz[min(len(healthz) - 1, int(len(healthz) * 0.99))]
print(f"PUT ms: median {statistics.median(put_ms):.1f}, max {max(put_ms):.1f} ({puts} PUTs)")
print(f"/healthz ms during the PUTs: median {statistics.median(healthz):.2f}, p99 {p99:.2f}, "
      f"max {healthz[-1]:.2f} ({len(healthz)} requests)")
PY
