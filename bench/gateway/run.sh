#!/usr/bin/env bash
# Gateway benchmark (run by hand, loopback only, bounded): the Sluice gateway
# in front of the demo upstream against nginx `limit_req` in front of the same
# upstream, same machine, same run; and the /v1/auth decision endpoint.
#
#   bench/gateway/run.sh [BUILD_DIR]        # default: build (a Release build)
#
# Environment: DURATION (wrk seconds per run, at most 10; default 10),
# CONNECTIONS (default 50), THREADS (server worker threads / nginx workers,
# default 1), ROUNDS (default 1: each comparison once; 2 alternates them twice),
# BASELINE (optional: another build directory whose `sluice` runs beside the
# first, same config, for before/after figures in the same run; named "base"),
# TLS=1 (both gateways terminate TLS with the same certificate, ECDSA P-256
# made here by openssl; wrk speaks https; nginx has TLS 1.2 and 1.3 as Sluice
# does and its shared session cache).
#
# Scenarios, each with the same wrk command against Sluice and against nginx:
#   pass   GET /pass   limit far above the offered load: every request is proxied
#   deny   GET /deny   limit of 1 per hour: every request after the first gets 429
#   auth   GET /v1/auth on Sluice alone (its decision API port, 204), allowed and denied
#   newconn  GET /deny with "Connection: close": a new connection per request
#          (with TLS=1, a TLS handshake per request too)
# nginx runs at its best: rejections are logged below its error_log level (as
# most production configs do; Sluice logs at most one denial a second), one
# worker per Sluice worker. A second nginx, labelled "nginx+log", writes a
# line per rejected request (its limit_req_log_level at warn, under error_log warn):
# shown apart, never the comparison.
# For each: requests/s, p99 latency, and the server's CPU time per request
# (utime+stime from /proc/PID/stat over the run, divided by the requests;
# nginx: master and workers summed). wrk, the servers and the upstream share
# the machine's cores: compare within one run, not across machines.
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
duration=${DURATION:-10}
connections=${CONNECTIONS:-50}
threads=${THREADS:-1}
rounds=${ROUNDS:-1}
tls=${TLS:-0}
((duration > 10)) && duration=10

sluice="$build_dir/sluice"
upstream_bin="$build_dir/sluice-demo-upstream"
source bench/lib.sh
BENCH_NAME="gateway bench"
need_programs "$build_dir/sluice, $build_dir/sluice-demo-upstream, wrk and nginx" \
  "$sluice" "$upstream_bin" "$(command -v wrk || true)" "$(command -v nginx || true)"
start_work sluice-gw-bench

scheme=http
sluice_tls=""
nginx_ssl=""
nginx_tls=""
if [[ $tls == 1 ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" \
    -out "$work/cert.pem" -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
  scheme=https
  sluice_tls="tls: {cert: $work/cert.pem, key: $work/key.pem}"
  nginx_ssl=" ssl"
  nginx_tls="ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m;
  ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;"
fi

up_port=$(free_port)
sl_port=$(free_port)
admin_port=$(free_port)
ng_port=$(free_port)
nglog_port=$(free_port)
dec_port=$(free_port)

# The upstream gets one thread: both gateways talk to the same one.
"$upstream_bin" --host 127.0.0.1 --port "$up_port" --threads 1 2>"$work/upstream.log" &
pids+=($!)

cat >"$work/sluice.yaml" <<EOF
listen: 127.0.0.1:$sl_port
admin: 127.0.0.1:$admin_port
upstream: http://127.0.0.1:$up_port
$sluice_tls
decision_api:
  listen: 127.0.0.1:$dec_port
headers: [legacy]
server:
  threads: $threads
logging:
  level: warn
routes:
  - match: GET /pass
    limits: [{capacity: 1000000000, refill_rate: 1000000000/s}]
  - match: GET /deny
    limits: [{capacity: 1, refill_rate: 1/h}]
EOF
"$sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)

base_pid=""
if [[ -n ${BASELINE:-} ]]; then
  if [[ ! -x $BASELINE/sluice ]]; then
    echo "gateway bench: BASELINE=$BASELINE has no sluice" >&2
    exit 1
  fi
  base_port=$(free_port)
  base_admin_port=$(free_port)
  base_dec_port=$(free_port)
  sed -e "s/^listen: .*/listen: 127.0.0.1:$base_port/" -e "s/^admin: .*/admin: 127.0.0.1:$base_admin_port/" \
    -e "s/^  listen: 127.0.0.1:$dec_port/  listen: 127.0.0.1:$base_dec_port/" \
    "$work/sluice.yaml" >"$work/base.yaml"
  # A baseline from before decision_api answered /v1/auth on its listen port.
  if ! "$BASELINE/sluice" validate --config "$work/base.yaml" >/dev/null 2>&1; then
    sed -i -e '/^decision_api:/d' -e "/^  listen: 127.0.0.1:$base_dec_port/d" "$work/base.yaml"
    base_dec_port=$base_port
  fi
  "$BASELINE/sluice" serve --config "$work/base.yaml" 2>"$work/base.log" &
  base_pid=$!
  pids+=($base_pid)
fi

# start_nginx NAME PORT LOG_LEVEL: a config and a running nginx in $work/NAME.
start_nginx() {
  local name=$1 port=$2 level=$3 dir="$work/$1"
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes $threads;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  limit_req_zone \$binary_remote_addr zone=pass:10m rate=1000000r/s;
  limit_req_zone \$binary_remote_addr zone=deny:10m rate=1r/m;
  limit_req_status 429;
  limit_req_log_level $level;
  $nginx_tls
  upstream app {
    server 127.0.0.1:$up_port;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:$port$nginx_ssl;
    location /pass {
      limit_req zone=pass burst=1000 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
    location /deny {
      limit_req zone=deny nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
}
EOF
  nginx -p "$dir/" -c "$dir/nginx.conf" -g "daemon off; pid $dir/nginx.pid;" 2>"$dir/stderr.log" &
}
user_line=""
[[ $(id -u) == 0 ]] && user_line="user $(id -un);"
# At its best: a rejection is an info line, below error_log's warn: not written.
start_nginx nginx "$ng_port" info
nginx_pid=$!
pids+=($nginx_pid)
start_nginx nginx-log "$nglog_port" warn
nginxlog_pid=$!
pids+=($nginxlog_pid)

wait_port "$up_port"
wait_port "$sl_port"
wait_port "$ng_port"
wait_port "$nglog_port"
wait_port "$dec_port"
[[ -n $base_pid ]] && wait_port "$base_port"
sleep 0.5

results="$work/results.txt"
: >"$results"

echo "Gateway benchmark ($scheme): wrk -t1 -c$connections -d${duration}s --latency; $threads server thread(s)/worker(s);"
echo "$(nproc) cores shared by wrk, the server under test and the upstream; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sluice $("$sluice" --version 2>/dev/null | head -1), $(nginx -v 2>&1)"
echo
# Warm both paths (pools, caches) and spend /deny's single token.
urls=("$scheme://127.0.0.1:$sl_port" "$scheme://127.0.0.1:$ng_port" "$scheme://127.0.0.1:$nglog_port")
[[ -n $base_pid ]] && urls+=("$scheme://127.0.0.1:$base_port")
for u in "${urls[@]}"; do
  wrk -t1 -c10 -d1s "$u/pass" >/dev/null
  wrk -t1 -c1 -d1s "$u/deny" >/dev/null
done
for ((r = 1; r <= rounds; r++)); do
  wrk_run "pass  sluice" "$sluice_pid" "$scheme://127.0.0.1:$sl_port/pass"
  wrk_run "pass  nginx" "$nginx_pid" "$scheme://127.0.0.1:$ng_port/pass"
  [[ -n $base_pid ]] && wrk_run "pass  base" "$base_pid" "$scheme://127.0.0.1:$base_port/pass"
  wrk_run "deny  sluice" "$sluice_pid" "$scheme://127.0.0.1:$sl_port/deny"
  wrk_run "deny  nginx" "$nginx_pid" "$scheme://127.0.0.1:$ng_port/deny"
  wrk_run "deny  nginx+log" "$nginxlog_pid" "$scheme://127.0.0.1:$nglog_port/deny"
  [[ -n $base_pid ]] && wrk_run "deny  base" "$base_pid" "$scheme://127.0.0.1:$base_port/deny"
  wrk_run "newconn sluice" "$sluice_pid" "$scheme://127.0.0.1:$sl_port/deny" -H "Connection: close"
  wrk_run "newconn nginx" "$nginx_pid" "$scheme://127.0.0.1:$ng_port/deny" -H "Connection: close"
  [[ -n $base_pid ]] && wrk_run "newconn base" "$base_pid" "$scheme://127.0.0.1:$base_port/deny" \
    -H "Connection: close"
  wrk_run "auth allowed sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" \
    -H "X-Original-Method: GET" -H "X-Original-URI: /pass"
  wrk_run "auth denied sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" \
    -H "X-Original-Method: GET" -H "X-Original-URI: /deny"
  if [[ -n $base_pid ]]; then
    wrk_run "auth allowed base" "$base_pid" "http://127.0.0.1:$base_dec_port/v1/auth" \
      -H "X-Original-Method: GET" -H "X-Original-URI: /pass"
    wrk_run "auth denied base" "$base_pid" "http://127.0.0.1:$base_dec_port/v1/auth" \
      -H "X-Original-Method: GET" -H "X-Original-URI: /deny"
  fi
done
echo
ratios "$results"
