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
# first, same config, for before/after figures in the same run; named "base").
#
# Scenarios, each with the same wrk command against Sluice and against nginx:
#   pass   GET /pass   limit far above the offered load: every request is proxied
#   deny   GET /deny   limit of 1 per hour: every request after the first gets 429
#   auth   GET /v1/auth on Sluice alone (its decision API port, 204), allowed and denied
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
((duration > 10)) && duration=10

sluice="$build_dir/sluice"
upstream_bin="$build_dir/sluice-demo-upstream"
for program in "$sluice" "$upstream_bin" "$(command -v wrk || true)" "$(command -v nginx || true)"; do
  if [[ -z $program || ! -x $program ]]; then
    echo "gateway bench: needs $build_dir/sluice, $build_dir/sluice-demo-upstream, wrk and nginx" >&2
    exit 1
  fi
done

work=$(mktemp -d /tmp/sluice-gw-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

source bench/lib.sh
BENCH_NAME="gateway bench"

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
  upstream app {
    server 127.0.0.1:$up_port;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:$port;
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

hz=$(getconf CLK_TCK)

results="$work/results.txt"
: >"$results"
# run NAME PID URL [wrk header args...]
run() {
  local name=$1 pid=$2 url=$3
  shift 3
  local before after out requests rps p99 non2xx
  before=$(cpu_ticks "$pid")
  out=$(wrk -t1 -c"$connections" -d"${duration}s" --latency "$@" "$url")
  after=$(cpu_ticks "$pid")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  local us
  us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" \
    'BEGIN { printf "%.1f", (n > 0 ? t * 1000000 / hz / n : 0) }')
  printf '%-22s %10s req/s  p99 %8s  %7s us CPU/req  (%s requests, %s non-2xx)\n' \
    "$name" "$rps" "$p99" "$us" "$requests" "${non2xx:-0}" | tee -a "$results"
}

echo "Gateway benchmark: wrk -t1 -c$connections -d${duration}s --latency; $threads server thread(s)/worker(s);"
echo "$(nproc) cores shared by wrk, the server under test and the upstream; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sluice $("$sluice" --version 2>/dev/null | head -1), $(nginx -v 2>&1)"
echo
# Warm both paths (pools, caches) and spend /deny's single token.
urls=("http://127.0.0.1:$sl_port" "http://127.0.0.1:$ng_port" "http://127.0.0.1:$nglog_port")
[[ -n $base_pid ]] && urls+=("http://127.0.0.1:$base_port")
for u in "${urls[@]}"; do
  wrk -t1 -c10 -d1s "$u/pass" >/dev/null
  wrk -t1 -c1 -d1s "$u/deny" >/dev/null
done
for ((r = 1; r <= rounds; r++)); do
  run "pass  sluice" "$sluice_pid" "http://127.0.0.1:$sl_port/pass"
  run "pass  nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/pass"
  [[ -n $base_pid ]] && run "pass  base" "$base_pid" "http://127.0.0.1:$base_port/pass"
  run "deny  sluice" "$sluice_pid" "http://127.0.0.1:$sl_port/deny"
  run "deny  nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/deny"
  run "deny  nginx+log" "$nginxlog_pid" "http://127.0.0.1:$nglog_port/deny"
  [[ -n $base_pid ]] && run "deny  base" "$base_pid" "http://127.0.0.1:$base_port/deny"
  run "auth allowed sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" \
    -H "X-Original-Method: GET" -H "X-Original-URI: /pass"
  run "auth denied sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" \
    -H "X-Original-Method: GET" -H "X-Original-URI: /deny"
  if [[ -n $base_pid ]]; then
    run "auth allowed base" "$base_pid" "http://127.0.0.1:$base_dec_port/v1/auth" \
      -H "X-Original-Method: GET" -H "X-Original-URI: /pass"
    run "auth denied base" "$base_pid" "http://127.0.0.1:$base_dec_port/v1/auth" \
      -H "X-Original-Method: GET" -H "X-Original-URI: /deny"
  fi
done
echo
echo "Ratios against nginx, means over the rounds (req/s sluice/nginx; p99 nginx/sluice and CPU"
echo "per request nginx/sluice: > 1 = sluice better):"
awk '
  function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
  $1 == "pass" || $1 == "deny" {
    key = $1; who = $2; rps[key, who] += $3; p99[key, who] += ms($6); cpu[key, who] += $7; n[key, who]++
  }
  END {
    # nginx+log is in the table above for reference, never compared against.
    for (k in n) { split(k, parts, SUBSEP); if (parts[2] != "nginx" && parts[2] != "nginx+log") pairs[parts[1], parts[2]] = 1 }
    for (k in pairs) {
      split(k, parts, SUBSEP); s = parts[1]; w = parts[2]
      if (!((s, "nginx") in n)) continue
      printf "  %-5s %-7s throughput %.2fx   p99 %.2fx   CPU/req %.2fx\n", s, w,
        (rps[s, w] / n[s, w]) / (rps[s, "nginx"] / n[s, "nginx"]),
        (p99[s, "nginx"] / n[s, "nginx"]) / (p99[s, w] / n[s, w]),
        (cpu[s, "nginx"] / n[s, "nginx"]) / (cpu[s, w] / n[s, w])
    }
  }' "$results" | sort
