#!/usr/bin/env bash
# Queueing benchmark (run by hand, loopback only, bounded): what holding N
# delayed requests costs the server. Sluice with a route's `delay` and,
# as the baseline in the same run, nginx with `limit_req burst` (no nodelay),
# both at 3 r/s with room for N in the queue (delay 1h: 10,800 turns), one
# worker each, in front of the demo upstream. bench/queue/hold.py opens N
# connections, sends one request on each and waits until the server has
# queued N - 1 of them (Sluice: sluice_held_requests_total; nginx: its
# "delaying request" log lines), then reads the server's RSS and thread
# count from /proc (3 a second leave the queue meanwhile: counted out).
#
#   bench/queue/run.sh [BUILD_DIR]     # default: build (a Release build)
#
# Environment: REQUESTS (N, default 10000, at most 10800; the open-file
# limit must allow N + 100 for each server).
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
requests=${REQUESTS:-10000}
sluice="$build_dir/sluice"
upstream_bin="$build_dir/sluice-demo-upstream"
source bench/lib.sh
BENCH_NAME="queue bench"
need_programs "$build_dir/sluice, $build_dir/sluice-demo-upstream, nginx and curl" \
  "$sluice" "$upstream_bin" "$(command -v nginx || true)" "$(command -v curl || true)"
start_work sluice-queue-bench

up_port=$(free_port)
sl_port=$(free_port)
admin_port=$(free_port)
ng_port=$(free_port)
"$upstream_bin" --host 127.0.0.1 --port "$up_port" --threads 1 2>"$work/upstream.log" &
pids+=($!)

# The connections wait for their requests while RSS settles: header_timeout
# 60s. A delay of 1h needs idle_timeout 1h, and N held needs max_held N.
cat >"$work/sluice.yaml" <<EOF
listen: 127.0.0.1:$sl_port
admin: 127.0.0.1:$admin_port
upstream: http://127.0.0.1:$up_port
server: {threads: 1, max_connections: $((requests + 100)), max_held: $requests, header_timeout: 60s, idle_timeout: 1h}
logging: {level: warn}
routes:
  - match: GET /q
    limits: [{capacity: 1, refill_rate: 3/s}]
    delay: 1h
EOF
"$sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)

user_line=""
[[ $(id -u) == 0 ]] && user_line="user $(id -un);"
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
$user_line
worker_processes 1;
worker_rlimit_nofile $((requests + 1000));
error_log $work/nginx/error.log warn;
pid $work/nginx/nginx.pid;
events { worker_connections $((requests + 500)); }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  limit_req_zone \$binary_remote_addr zone=q:10m rate=3r/s;
  server {
    listen 127.0.0.1:$ng_port;
    location / {
      limit_req zone=q burst=$requests;
      proxy_pass http://127.0.0.1:$up_port;
    }
  }
}
EOF
nginx -p "$work/nginx/" -c "$work/nginx/nginx.conf" -g "daemon off;" 2>"$work/nginx/stderr.log" &
nginx_pid=$!
pids+=($nginx_pid)

wait_port "$up_port"
wait_port "$sl_port"
wait_port "$admin_port"
wait_port "$ng_port"

held_sluice="curl -s http://127.0.0.1:$admin_port/metrics | awk '\$1 == \"sluice_held_requests_total\" {print \$2}'"
held_nginx="grep -c 'delaying request' $work/nginx/error.log || true"

echo "sluice: $(python3 bench/queue/hold.py "$sl_port" "$requests" "$sluice_pid" 3 "$held_sluice")"
echo "nginx:  $(python3 bench/queue/hold.py "$ng_port" "$requests" "$nginx_pid" 3 "$held_nginx")"
