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
# BUILDS (optional: more of them, "NAME=DIR NAME=DIR", e.g. one per allocator),
# NEWCONN=0 (skip the connection-per-request rows),
# TLS=1 (both gateways terminate TLS with the same certificate, ECDSA P-256
# made here by openssl; wrk speaks https; nginx has TLS 1.2 and 1.3 as Sluice
# does and its shared session cache).
#
# Scenarios, each with the same wrk command against Sluice and against nginx
# (nginx's configuration: bench/gateway/servers.sh):
#   pass   GET /pass   limit far above the offered load: every request is proxied
#   deny   GET /deny   limit of 1 per hour: every request after the first gets 429
#   auth   GET /v1/auth allowed (204, Sluice's decision API port) against
#          nginx's `return 204`; authdeny: denied (429), Sluice alone
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

source bench/gateway/servers.sh
write_sluice_config "$work/sluice.yaml"
"$sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)

# Other builds, each a `sluice` beside the first with the same config on
# ports of its own: BASELINE is "base=DIR"; BUILDS adds "NAME=DIR ...".
others=()
[[ -n ${BASELINE:-} ]] && others+=("base=$BASELINE")
for b in ${BUILDS:-}; do others+=("$b"); done
other_names=()
declare -A other_pid other_port other_dec_port
for b in "${others[@]}"; do
  name=${b%%=*}
  dir=${b#*=}
  if [[ ! -x $dir/sluice ]]; then
    echo "gateway bench: $name=$dir has no sluice" >&2
    exit 1
  fi
  port=$(free_port)
  o_admin_port=$(free_port)
  o_dec_port=$(free_port)
  sed -e "s/^listen: .*/listen: 127.0.0.1:$port/" -e "s/^admin: .*/admin: 127.0.0.1:$o_admin_port/" \
    -e "s/^  listen: 127.0.0.1:$dec_port/  listen: 127.0.0.1:$o_dec_port/" \
    "$work/sluice.yaml" >"$work/$name.yaml"
  # A build from before decision_api answered /v1/auth on its listen port.
  if ! "$dir/sluice" validate --config "$work/$name.yaml" >/dev/null 2>&1; then
    sed -i -e '/^decision_api:/d' -e "/^  listen: 127.0.0.1:$o_dec_port/d" "$work/$name.yaml"
    o_dec_port=$port
  fi
  "$dir/sluice" serve --config "$work/$name.yaml" 2>"$work/$name.log" &
  other_pid[$name]=$!
  pids+=($!)
  other_port[$name]=$port
  other_dec_port[$name]=$o_dec_port
  other_names+=("$name")
done

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
for name in "${other_names[@]}"; do wait_port "${other_port[$name]}"; done
sleep 0.5

results="$work/results.txt"
: >"$results"

echo "Gateway benchmark ($scheme): wrk -t1 -c$connections -d${duration}s --latency; $threads server thread(s)/worker(s);"
echo "$(nproc) cores shared by wrk, the server under test and the upstream; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sluice $("$sluice" --version 2>/dev/null | head -1), $(nginx -v 2>&1)"
echo
# Warm both paths (pools, caches) and spend /deny's single token.
urls=("$scheme://127.0.0.1:$sl_port" "$scheme://127.0.0.1:$ng_port" "$scheme://127.0.0.1:$nglog_port")
for name in "${other_names[@]}"; do urls+=("$scheme://127.0.0.1:${other_port[$name]}"); done
for u in "${urls[@]}"; do
  wrk -t1 -c10 -d1s "$u/pass" >/dev/null
  wrk -t1 -c1 -d1s "$u/deny" >/dev/null
done
allowed=(-H "X-Original-Method: GET" -H "X-Original-URI: /pass")
denied=(-H "X-Original-Method: GET" -H "X-Original-URI: /deny")
for ((r = 1; r <= rounds; r++)); do
  wrk_run "pass  sluice" "$sluice_pid" "$scheme://127.0.0.1:$sl_port/pass"
  wrk_run "pass  nginx" "$nginx_pid" "$scheme://127.0.0.1:$ng_port/pass"
  for name in "${other_names[@]}"; do
    wrk_run "pass  $name" "${other_pid[$name]}" "$scheme://127.0.0.1:${other_port[$name]}/pass"
  done
  wrk_run "deny  sluice" "$sluice_pid" "$scheme://127.0.0.1:$sl_port/deny"
  wrk_run "deny  nginx" "$nginx_pid" "$scheme://127.0.0.1:$ng_port/deny"
  wrk_run "deny  nginx+log" "$nginxlog_pid" "$scheme://127.0.0.1:$nglog_port/deny"
  for name in "${other_names[@]}"; do
    wrk_run "deny  $name" "${other_pid[$name]}" "$scheme://127.0.0.1:${other_port[$name]}/deny"
  done
  if [[ ${NEWCONN:-1} == 1 ]]; then
    wrk_run "newconn sluice" "$sluice_pid" "$scheme://127.0.0.1:$sl_port/deny" -H "Connection: close"
    wrk_run "newconn nginx" "$nginx_pid" "$scheme://127.0.0.1:$ng_port/deny" -H "Connection: close"
    for name in "${other_names[@]}"; do
      wrk_run "newconn $name" "${other_pid[$name]}" "$scheme://127.0.0.1:${other_port[$name]}/deny" \
        -H "Connection: close"
    done
  fi
  # auth: allowed (204) against nginx's `return 204`; authdeny: denied (429),
  # Sluice's builds alone. The decision API port is plain HTTP.
  wrk_run "auth  sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" "${allowed[@]}"
  [[ $tls == 0 ]] && wrk_run "auth  nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/v1/auth" "${allowed[@]}"
  for name in "${other_names[@]}"; do
    wrk_run "auth  $name" "${other_pid[$name]}" "http://127.0.0.1:${other_dec_port[$name]}/v1/auth" \
      "${allowed[@]}"
  done
  wrk_run "authdeny sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" "${denied[@]}"
  for name in "${other_names[@]}"; do
    wrk_run "authdeny $name" "${other_pid[$name]}" \
      "http://127.0.0.1:${other_dec_port[$name]}/v1/auth" "${denied[@]}"
  done
done
echo
ratios "$results"
