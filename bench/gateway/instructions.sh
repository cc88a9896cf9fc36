#!/usr/bin/env bash
# Instructions per request (run by hand, loopback only, bounded): the user-space
# instructions Sluice executes per gateway and /v1/auth request, counted by
# valgrind's callgrind, for two builds on the same requests. Wall-clock CPU
# per request (bench/gateway/run.sh) moves 10-40 % between rounds on a shared
# machine; an instruction count moves by well under 1 %, so this is the check
# for "within a few percent of before". It does not see the kernel's share
# (the loopback and epoll work, about three quarters of the CPU per request),
# which a change in Sluice's code does not move.
#
#   bench/gateway/instructions.sh NEW_BUILD_DIR OLD_BUILD_DIR
#
# Environment: REQUESTS (counted requests per scenario, default 20000);
# KEEP=DIR keeps the callgrind dumps (new.out.N, old.out.N: N = 1, 2, 3, 4 for
# pass, deny, auth, authdeny) for callgrind_annotate.
# Scenarios (the same config as run.sh): pass (proxied), deny (429), auth
# (/v1/auth allowed, 204), authdeny (/v1/auth denied, 429). Each build serves
# under callgrind; per scenario 500 requests warm it, the counters are zeroed,
# REQUESTS requests are sent over one kept-alive connection (h2load --h1) and
# the counters dumped: instructions / REQUESTS is the figure.
set -euo pipefail

cd "$(dirname "$0")/../.."
new_dir=${1:?usage: instructions.sh NEW_BUILD_DIR OLD_BUILD_DIR}
old_dir=${2:?usage: instructions.sh NEW_BUILD_DIR OLD_BUILD_DIR}
requests=${REQUESTS:-20000}
threads=1

source bench/lib.sh
BENCH_NAME="instructions bench"
need_programs "$new_dir/sluice, $old_dir/sluice, $new_dir/sluice-demo-upstream, valgrind and h2load" \
  "$new_dir/sluice" "$old_dir/sluice" "$new_dir/sluice-demo-upstream" \
  "$(command -v valgrind || true)" "$(command -v h2load || true)"
start_work sluice-instr-bench

up_port=$(free_port)
"$new_dir/sluice-demo-upstream" --host 127.0.0.1 --port "$up_port" --threads 1 2>"$work/upstream.log" &
pids+=($!)
wait_port "$up_port"
source bench/gateway/servers.sh

# send URL COUNT [h2load args...]: COUNT requests over one connection; exits
# the script unless every one got an answer.
send() {
  local url=$1 count=$2 out
  shift 2
  out=$(h2load --h1 -n "$count" -c 1 -m 1 "$@" "$url" 2>&1)
  if ! grep -q "requests: $count total, $count started, $count done" <<<"$out"; then
    echo "instructions bench: $url did not answer $count requests:" >&2
    echo "$out" >&2
    exit 1
  fi
}

# Total instructions in the newest callgrind dump of PID.
dumped_instructions() {
  local file
  file=$(ls -t "$work/$1".out.* | head -1)
  awk '/^summary:|^totals:/ {print $2; exit}' "$file"
}

declare -A figure
measure() {
  local name=$1 dir=$2 pid scenario url
  sl_port=$(free_port)
  admin_port=$(free_port)
  dec_port=$(free_port)
  write_sluice_config "$work/$name.yaml"
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.out" \
    "$dir/sluice" serve --config "$work/$name.yaml" 2>"$work/$name.log" &
  pid=$!
  pids+=($pid)
  # Under valgrind the server starts in seconds, not milliseconds.
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$dec_port") 2>/dev/null && break
    sleep 0.1
  done
  wait_port "$dec_port"
  local allowed=(-H "X-Original-Method: GET" -H "X-Original-URI: /pass")
  local denied=(-H "X-Original-Method: GET" -H "X-Original-URI: /deny")
  for scenario in pass deny auth authdeny; do
    local args=()
    case $scenario in
    pass) url="http://127.0.0.1:$sl_port/pass" ;;
    deny) url="http://127.0.0.1:$sl_port/deny" ;;
    auth) url="http://127.0.0.1:$dec_port/v1/auth" args=("${allowed[@]}") ;;
    authdeny) url="http://127.0.0.1:$dec_port/v1/auth" args=("${denied[@]}") ;;
    esac
    send "$url" 500 "${args[@]}"
    callgrind_control -z "$pid" >/dev/null 2>&1
    send "$url" "$requests" "${args[@]}"
    callgrind_control -d "$pid" >/dev/null 2>&1
    figure[$scenario,$name]=$(dumped_instructions "$name")
  done
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  [[ -n ${KEEP:-} ]] && mkdir -p "$KEEP" && cp "$work/$name".out.* "$KEEP/"
  return 0
}

echo "User-space instructions per request (callgrind), $requests requests per scenario, one connection"
measure new "$new_dir"
measure old "$old_dir"
printf '%-9s %12s %12s %8s\n' scenario new old new/old
for scenario in pass deny auth authdeny; do
  awk -v s="$scenario" -v n="${figure[$scenario,new]}" -v o="${figure[$scenario,old]}" -v r="$requests" \
    'BEGIN { printf "%-9s %12.0f %12.0f %8.3f\n", s, n / r, o / r, n / o }'
done
