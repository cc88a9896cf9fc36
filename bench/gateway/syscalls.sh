#!/usr/bin/env bash
# System calls per request (run by hand, loopback only, bounded): the Sluice
# gateway and nginx (bench/gateway/servers.sh, at its best) in front of the same
# upstream, counted by `perf stat` on the syscall tracepoints during one wrk run
# per path, divided by the requests wrk completed. Not strace: it slows the
# server so much that the next request is always there when a read starts,
# which hides the reads that find nothing (see bench/results/2026-gateway.md).
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
need_programs "$build_dir/sluice, $build_dir/sluice-demo-upstream, wrk, perf and nginx" \
  "$build_dir/sluice" "$build_dir/sluice-demo-upstream" "$(command -v wrk || true)" \
  "$(command -v perf || true)" "$(command -v nginx || true)"
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

# traced NAME PID URL [wrk args...]: the calls per request of PID and its
# children (nginx: its workers): all, and those a request makes.
events=raw_syscalls:sys_enter
for c in recvfrom recvmsg sendto sendmsg writev epoll_wait epoll_ctl getsockopt io_uring_enter; do
  events+=",syscalls:sys_enter_$c"
done
traced() {
  local name=$1 pid=$2 url=$3 out requests targets=$2 c
  shift 3
  for c in $(pgrep -P "$pid" || true); do targets+=",$c"; done
  perf stat -x, -e "$events" -p "$targets" -o "$work/stat.txt" -- sleep "$duration" &
  local perf_pid=$!
  out=$(wrk -t1 -c"$connections" -d"${duration}s" "$@" "$url")
  wait "$perf_pid" || true
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  awk -F, -v n="$requests" -v name="$name" '
    $3 ~ /sys_enter/ {
      call = $3; sub(/.*sys_enter_?/, "", call)
      printf "%s %s %.2f", (printed++ ? "" : sprintf("%-14s", name)), (call == "" ? "all" : call), $1 / n
    }
    END { printf "  (%d requests)\n", n }' "$work/stat.txt"
}

auth=(-H "X-Original-Method: GET" -H "X-Original-URI: /pass")
echo "System calls per request (perf stat), wrk -t1 -c$connections -d${duration}s, $threads worker(s) each"
traced "pass   sluice" "$sluice_pid" "http://127.0.0.1:$sl_port/pass"
traced "pass   nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/pass"
traced "deny   sluice" "$sluice_pid" "http://127.0.0.1:$sl_port/deny"
traced "deny   nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/deny"
traced "auth   sluice" "$sluice_pid" "http://127.0.0.1:$dec_port/v1/auth" "${auth[@]}"
traced "auth   nginx" "$nginx_pid" "http://127.0.0.1:$ng_port/v1/auth" "${auth[@]}"
