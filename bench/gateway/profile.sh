#!/usr/bin/env bash
# Where the gateway's CPU goes per request (run by hand, loopback only,
# bounded): perf samples per 1,000 requests on the deny (429) and /v1/auth
# (204) paths at one worker, Sluice and nginx at its best (configured as
# bench/gateway/servers.sh does), split into user space and kernel, with the top
# user-space symbols; and malloc calls per request (a uprobe on libc's
# malloc, counted by `perf stat` in a run of its own, since the probe slows
# the server). Sampled counts are steadier than CPU time on a shared machine:
# the sampler ticks only while the server runs.
#
#   bench/gateway/profile.sh [BUILD_DIR]      # default: build (a Release build)
#
# Environment: DURATION (wrk seconds per run, at most 10; default 3),
# CONNECTIONS (default 50), BASELINE (another build directory, profiled the
# same way in the same run, alternating with the first), TOP (user-space
# symbols listed per run; default 12), PATHS (default "deny auth"), KEEP (a
# directory to copy the perf.data files to, NAME-PATH.data, for perf report).
# Needs root (or perf_event_paranoid <= 1 and uprobes) for the malloc count.
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
duration=${DURATION:-3}
connections=${CONNECTIONS:-50}
top=${TOP:-12}
paths=${PATHS:-deny auth}
threads=1
((duration > 10)) && duration=10

source bench/lib.sh
BENCH_NAME="gateway profile"
need_programs "$build_dir/sluice, $build_dir/sluice-demo-upstream, wrk and perf" \
  "$build_dir/sluice" "$build_dir/sluice-demo-upstream" "$(command -v wrk || true)" \
  "$(command -v perf || true)"
start_work sluice-gw-profile

libc=$(ldd "$build_dir/sluice" | awk '/libc\.so/ {print $3}')
probe=""
perf probe -q -d probe_libc:malloc_count 2>/dev/null || true  # left by an interrupted run
if perf probe -q -x "$libc" malloc_count=malloc 2>/dev/null; then
  probe=probe_libc:malloc_count
  trap 'perf probe -q -d "$probe" 2>/dev/null || true; stop_work' EXIT
fi

up_port=$(free_port)
"$build_dir/sluice-demo-upstream" --host 127.0.0.1 --port "$up_port" --threads 1 \
  2>"$work/upstream.log" &
pids+=($!)
source bench/gateway/servers.sh

# start NAME DIR: a sluice from DIR with the bench's config; sets pid[NAME],
# port[NAME], dec[NAME].
declare -A pid port dec
start() {
  local name=$1 dir=$2
  sl_port=$(free_port)
  admin_port=$(free_port)
  dec_port=$(free_port)
  write_sluice_config "$work/$name.yaml"
  "$dir/sluice" serve --config "$work/$name.yaml" 2>"$work/$name.log" &
  pid[$name]=$!
  pids+=($!)
  port[$name]=$sl_port
  dec[$name]=$dec_port
  wait_port "$sl_port"
  wait_port "$dec_port"
  wrk -t1 -c10 -d1s "http://127.0.0.1:$sl_port/pass" >/dev/null
  wrk -t1 -c1 -d1s "http://127.0.0.1:$sl_port/deny" >/dev/null
}
names=(sluice)
start sluice "$build_dir"
if [[ -n ${BASELINE:-} ]]; then
  names+=(base)
  start base "$BASELINE"
fi
ng_port=$(free_port)
start_nginx nginx "$ng_port" info
pids+=($!)
wait_port "$ng_port"
wait_port "$up_port"
sleep 0.2
# perf follows threads, not child processes: nginx's one worker is profiled.
pid[nginx]=$(pgrep -P "${pids[-1]}" | head -1)
port[nginx]=$ng_port
dec[nginx]=$ng_port
wrk -t1 -c1 -d1s "http://127.0.0.1:$ng_port/deny" >/dev/null
names+=(nginx)

allowed=(-H "X-Original-Method: GET" -H "X-Original-URI: /pass")
url_of() {
  case $2 in
    deny) echo "http://127.0.0.1:${port[$1]}/deny" ;;
    auth) echo "http://127.0.0.1:${dec[$1]}/v1/auth" ;;
  esac
}
load() { # load NAME PATH: one wrk run; prints the requests completed
  local args=()
  [[ $2 == auth ]] && args=("${allowed[@]}")
  wrk -t1 -c"$connections" -d"${duration}s" "${args[@]}" "$(url_of "$1" "$2")" |
    awk '/requests in/ {print $1}'
}

echo "perf samples (-F 2000) per 1,000 requests, wrk -t1 -c$connections -d${duration}s, 1 worker;" \
  "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for path in $paths; do
  for name in "${names[@]}"; do
    data="$work/$name-$path.data"
    perf record -q -F 2000 -g -p "${pid[$name]}" -o "$data" -- sleep "$duration" 2>/dev/null &
    perf_pid=$!
    requests=$(load "$name" "$path")
    wait "$perf_pid" || true
    [[ -n ${KEEP:-} ]] && mkdir -p "$KEEP" && cp "$data" "$KEEP/"
    # Samples by privilege (u/k) of the sampled instruction, then the top
    # user-space symbols by self samples.
    perf report -i "$data" --stdio -n --no-children --sort dso,sym -g none 2>/dev/null |
      awk -v n="$requests" -v who="$path $name" -v top="$top" '
        /^ +[0-9.]+%/ {
          if ($0 ~ /\[k\]/) kernel += $2; else { user += $2; if (shown++ < top) lines[shown] = $0 }
        }
        END {
          printf "%-12s %6.1f samples/1k req: user %5.1f, kernel %5.1f  (%d requests)\n",
            who, (user + kernel) * 1000 / n, user * 1000 / n, kernel * 1000 / n, n
          for (i = 1; i <= shown && i <= top; i++) printf "    %s\n", lines[i]
        }'
  done
done

if [[ -n $probe ]]; then
  echo
  echo "malloc calls per request (uprobe on $libc malloc, perf stat):"
  for path in $paths; do
    for name in "${names[@]}"; do
      perf stat -x, -e "$probe" -p "${pid[$name]}" -o "$work/malloc.txt" -- sleep "$duration" &
      perf_pid=$!
      requests=$(load "$name" "$path")
      wait "$perf_pid" || true
      awk -F, -v n="$requests" -v who="$path $name" \
        '$3 ~ /malloc_count/ {printf "%-12s %.2f  (%d requests)\n", who, $1 / n, n}' "$work/malloc.txt"
    done
  done
fi
