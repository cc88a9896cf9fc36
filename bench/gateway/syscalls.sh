#!/usr/bin/env bash
# System calls per request (run by hand, loopback only, bounded): the Sluice
# gateway and nginx (bench/gateway/servers.sh, at its best) in front of the same
# upstream, each traced by `strace -c -f` during one wrk run per path, the
# counts divided by the requests wrk completed. strace slows both servers, so
# the request rates here mean nothing; calls per request do.
#
#   bench/gateway/syscalls.sh [BUILD_DIR]     # default: build (a Release build)
#
# Environment: DURATION (wrk seconds per path, at most 10; default 3),
# CONNECTIONS (default 50), THREADS (workers each, default 1).
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
duration=${DURATION:-3}
connections=${CONNECTIONS:-50}
threads=${THREADS:-1}
((duration > 10)) && duration=10

source bench/lib.sh
BENCH_NAME="gateway syscalls"
need_programs "$build_dir/sluice, $build_dir/sluice-demo-upstream, wrk, strace and nginx" \
  "$build_dir/sluice" "$build_dir/sluice-demo-upstream" "$(command -v wrk || true)" \
  "$(command -v strace || true)" "$(command -v nginx || true)"
start_work sluice-gw-syscalls

up_port=$(free_port)
sl_port=$(free_port)
admin_port=$(free_port)
dec_port=$(free_port)
ng_port=$(free_port)
"$build_dir/sluice-demo-upstream" --host 127.0.0.1 --port "$up_port" --threads 1 \
  2>"$work/upstream.log" &
pids+=($!)
source bench/gateway/servers.sh
write_sluice_config "$work/sluice.yaml"
"$build_dir/sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)
start_nginx nginx "$ng_port" info
nginx_pid=$!
pids+=($nginx_pid)
for p in "$up_port" "$sl_port" "$dec_port" "$ng_port"; do wait_port "$p"; done
sleep 0.5
for u in "http://127.0.0.1:$sl_port" "http://127.0.0.1:$ng_port"; do
  wrk -t1 -c10 -d1s "$u/pass" >/dev/null
  wrk -t1 -c1 -d1s "$u/deny" >/dev/null
done

# traced NAME PID URL [wrk args...]: the calls per request of PID's threads
# and children (nginx: its workers), the most frequent first.
traced() {
  local name=$1 pid=$2 url=$3 out requests tids
  shift 3
  tids=$( (ls "/proc/$pid/task"; for c in $(pgrep -P "$pid"); do ls "/proc/$c/task"; done) | paste -sd,)
  strace -c -f -p "$tids" -o "$work/strace.txt" 2>/dev/null &
  local strace_pid=$!
  sleep 0.5
  out=$(wrk -t1 -c"$connections" -d"${duration}s" "$@" "$url")
  kill -INT "$strace_pid"
  wait "$strace_pid" || true
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  awk -v n="$requests" -v name="$name" '
    $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" { calls[$NF] = $4; total += $4 }
    END {
      printf "%-14s %6.2f calls/request:", name, total / n
      PROCINFO["sorted_in"] = "@val_num_desc"
      for (c in calls) if (calls[c] / n >= 0.005) printf " %s %.2f", c, calls[c] / n
      printf "  (%d requests)\n", n
    }' "$work/strace.txt"
}

auth=(-H "X-Original-Method: GET" -H "X-Original-URI: /pass")
echo "System calls per request, strace -c -f, wrk -t1 -c$connections -d${duration}s, $threads worker(s) each"
traced "pass   sluice" "$sluice_pid" "http://127.0.0.1:$sl_port/pass"
traced "pass   nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/pass"
traced "deny   sluice" "$sluice_pid" "http://127.0.0.1:$sl_port/deny"
traced "deny   nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/deny"
traced "auth   sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" "${auth[@]}"
traced "auth   nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/v1/auth" "${auth[@]}"
