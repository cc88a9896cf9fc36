#!/usr/bin/env bash
# Limits under attack (run by hand, loopback only, bounded; not in CI): the
# Sluice gateway (memory store) in front of the demo upstream, while at once
#   - IDLE connections (default 20,000) are opened and left silent,
#   - SLOWLORIS clients (default 2,000) send a header byte every 2 s, never finishing,
#   - a flood of distinct keys (wrk, a new X-Api-Key per request on a header-keyed route),
# and NORMAL keep-alive clients (default 4) make a GET every 20 ms and time it,
# one more client opens a new connection for each GET (10 a second), and the
# same keep-alive clients time the upstream straight (the control).
# Attackers whose connection the server closes open a new one until the attack
# ends; then they stop sending and wait for the server to close what they hold.
#
#   bench/attack/run.sh [BUILD_DIR]        # default: build (a Release build)
#
# Environment: ATTACK (attack seconds, default 20, at most 60), IDLE, SLOWLORIS,
# NORMAL, FLOOD (wrk connections of the flood, 0 = no flood; default 16),
# MAX_CONNECTIONS (server.max_connections, default 15000), MAX_KEYS
# (store.max_keys, default 20000: below what the flood offers, so eviction runs),
# HEADER_TIMEOUT / IDLE_TIMEOUT (seconds, default 15 / 10), PRIORITY=1 (see
# below), ACCESS_LOG=true (Sluice's access log in the work directory), KEEP=1 (keep the
# work directory: config, logs, every normal request's latency).
#
# Checks (exit 1 if one fails): normal clients' p99 during the attack < 50 ms;
# sluice_keys_held <= max_keys throughout; after the attack every attack
# connection is closed by the server (header_timeout / idle_timeout), open
# connections come back to the baseline, a new connection is served, and RSS
# after is below 2x RSS during (bounded, not growing).
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
attack_s=${ATTACK:-20}
((attack_s > 60)) && attack_s=60
idle=${IDLE:-20000}
slowloris=${SLOWLORIS:-2000}
normal=${NORMAL:-4}
max_connections=${MAX_CONNECTIONS:-15000}
max_keys=${MAX_KEYS:-20000}
flood=${FLOOD:-16}
header_timeout=${HEADER_TIMEOUT:-15}
idle_timeout=${IDLE_TIMEOUT:-10}
py=/usr/bin/python3

sluice="$build_dir/sluice"
upstream_bin="$build_dir/sluice-demo-upstream"
for program in "$sluice" "$upstream_bin" "$(command -v wrk || true)" "$(command -v curl || true)" "$py"; do
  if [[ -z $program || ! -x $program ]]; then
    echo "attack bench: needs $build_dir/sluice, $build_dir/sluice-demo-upstream, wrk, curl and $py" >&2
    exit 1
  fi
done

# 20,000 + 2,000 connections: every process here (sluice, the clients) may
# hold thousands of descriptors. Raise the soft limit to the hard one.
hard=$(ulimit -Hn)
ulimit -n "$hard"
if ((max_connections + 1000 > hard)); then
  echo "attack bench: open-file hard limit $hard too low for max_connections $max_connections" >&2
  exit 1
fi
# Source ports: each loopback source address has the whole ephemeral range.
read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
sources="127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9"

work=$(mktemp -d /tmp/sluice-attack.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n ${KEEP:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

source bench/lib.sh
BENCH_NAME="attack bench"

up_port=$(free_port)
sl_port=$(free_port)
admin_port=$(free_port)

"$upstream_bin" --host 127.0.0.1 --port "$up_port" --threads 1 2>"$work/upstream.log" &
pids+=($!)

cat >"$work/sluice.yaml" <<EOF
listen: 127.0.0.1:$sl_port
admin: 127.0.0.1:$admin_port
upstream: http://127.0.0.1:$up_port
server:
  max_connections: $max_connections
  header_timeout: ${header_timeout}s
  idle_timeout: ${idle_timeout}s
store:
  backend: memory
  max_keys: $max_keys
logging:
  level: warn
  access_log: ${ACCESS_LOG:-false}
routes:
  - match: GET /api/normal
    key: header:x-api-key
    limits: [{capacity: 1000000, refill_rate: 1000000/s}]
  - match: GET /api/flood
    key: header:x-api-key
    limits: [{capacity: 5, refill_rate: 1/m}]
EOF
"$sluice" serve --config "$work/sluice.yaml" >"$work/access.log" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)
wait_port "$up_port"
wait_port "$sl_port"
wait_port "$admin_port"

metrics() { curl -s --max-time 5 "http://127.0.0.1:$admin_port/metrics" || true; }
metric() { awk -v n="$1" '$1 == n { printf "%d\n", $2; found = 1 } END { if (!found) print "?" }' <<<"$2"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$sluice_pid/status"; }
fds() { ls "/proc/$sluice_pid/fd" | wc -l; }
now() { date +%s.%N; }
# sample LABEL: one line of figures for the timeline.
samples="$work/samples.txt"
hz=$(getconf CLK_TCK)
last_ticks=0
last_t=0
sample() {
  local m ticks t cpu
  m=$(metrics)
  ticks=$(cpu_ticks "$sluice_pid")
  t=$(now)
  cpu=$(awk -v d=$((ticks - last_ticks)) -v hz="$hz" -v a="$t" -v b="$last_t" 'BEGIN { printf "%.0f", 100 * d / hz / (a - b) }')
  last_ticks=$ticks
  last_t=$t
  printf '%-8s cpu=%3s%% t=%6.1fs rss=%6d KiB fds=%5d open=%5s keys=%6s refused=%6s timeouts=%6s load=%s\n' \
    "$1" "$cpu" "$(awk -v a="$(now)" -v b="$t0" 'BEGIN { print a - b }')" "$(rss_kb)" "$(fds)" \
    "$(metric sluice_open_connections "$m")" "$(metric sluice_keys_held "$m")" \
    "$(metric sluice_connections_refused_total "$m")" \
    "$(metric 'sluice_http_rejected_total{reason="timeout"}' "$m")" \
    "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$samples"
}

echo "Limits under attack: $idle idle + $slowloris slowloris connections + a distinct-key flood for ${attack_s}s;"
echo "$normal normal keep-alive clients, a GET every 20 ms each. max_connections $max_connections, max_keys $max_keys,"
echo "header_timeout ${header_timeout}s, idle_timeout ${idle_timeout}s; fd limit $hard; ephemeral ports $lo-$hi on each of 8 source addresses."
echo "$(nproc) cores shared by everything; load before: $(cut -d' ' -f1-3 /proc/loadavg); $("$sluice" --version 2>/dev/null | head -1)"
echo

t0=$(now)
last_t=$t0
baseline_s=5
recovery_s=$((header_timeout + idle_timeout + 5))
normal_s=$((baseline_s + attack_s + recovery_s))
"$py" bench/attack/attack.py normal "$sl_port" "$normal" "$normal_s" "$work/normal.txt" &
normal_pid=$!
pids+=($normal_pid)
# Control: the same clients straight to the upstream (no Sluice): what the
# machine (shared cores, the attackers' own CPU, the upstream) adds by itself.
"$py" bench/attack/attack.py normal "$up_port" "$normal" "$normal_s" "$work/control.txt" &
control_pid=$!
pids+=($control_pid)
# New clients: one request per new connection, 10 a second.
FRESH=1 "$py" bench/attack/attack.py normal "$sl_port" 1 "$normal_s" "$work/fresh.txt" 0.1 &
fresh_pid=$!
pids+=($fresh_pid)
# PRIORITY=1: Sluice, the upstream and both sets of normal clients run at nice
# -10, above the attackers and the machine's other work: what is left of the
# latency is Sluice's own, not the scheduler's.
if [[ -n ${PRIORITY:-} ]]; then
  for pid in "${pids[@]}"; do
    renice -n -10 -p "$pid" >/dev/null
    for task in /proc/"$pid"/task/*; do renice -n -10 -p "${task##*/}" >/dev/null 2>&1 || true; done
  done
fi
# Warm the normal route (and a few flood keys) for the baseline.
sleep 1
sample start
sleep $((baseline_s - 1))
sample before
rss_before=$(rss_kb)
open_before=$(metric sluice_open_connections "$(metrics)")

cat >"$work/flood.lua" <<'EOF'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/flood", { ["X-Api-Key"] = "flood-" .. n })
end
done = function(summary, latency, requests)
  io.write(string.format("flood_requests=%d\n", summary.requests))
end
EOF

attack_start=$(now)
attackers=()
grace=$((header_timeout + idle_timeout + 10))
# Idle connections in processes of at most 9,000 each (descriptors per process).
left=$idle
while ((left > 0)); do
  n=$((left > 9000 ? 9000 : left))
  GRACE=$grace "$py" bench/attack/attack.py idle "$sl_port" "$n" "$attack_s" "$sources" \
    >>"$work/idle.txt" 2>>"$work/attack.err" &
  attackers+=($!)
  pids+=($!)
  left=$((left - n))
done
GRACE=$grace "$py" bench/attack/attack.py slowloris "$sl_port" "$slowloris" "$attack_s" "$sources" 2 \
  >"$work/slowloris.txt" 2>>"$work/attack.err" &
attackers+=($!)
pids+=($!)
flood_pid=""
: >"$work/flood.txt"
: >"$work/idle.txt"
if ((flood > 0)); then
  wrk -t1 -c"$flood" -d"${attack_s}s" -s "$work/flood.lua" "http://127.0.0.1:$sl_port/api/flood" \
    >"$work/flood.txt" 2>&1 &
  flood_pid=$!
  pids+=($flood_pid)
fi

rss_max=0
keys_max=0
open_max=0
attack_end=$(awk -v a="$attack_start" -v s="$attack_s" 'BEGIN { printf "%.3f", a + s }')
while awk -v a="$(now)" -v e="$attack_end" 'BEGIN { exit !(a + 1 < e) }'; do
  sleep 1
  sample attack
  r=$(rss_kb)
  ((r > rss_max)) && rss_max=$r
  m=$(metrics)
  k=$(metric sluice_keys_held "$m")
  o=$(metric sluice_open_connections "$m")
  [[ $k != "?" ]] && ((k > keys_max)) && keys_max=$k
  [[ $o != "?" ]] && ((o > open_max)) && open_max=$o
done
while awk -v a="$(now)" -v e="$attack_end" 'BEGIN { exit !(a < e) }'; do sleep 0.1; done
[[ -n $flood_pid ]] && { wait "$flood_pid" || true; }
rss_during=$rss_max
m=$(metrics)
refused_attack=$(metric sluice_connections_refused_total "$m")

# Recovery: until open connections are back to the baseline (the attackers
# now only wait for the server to close what they hold), bounded.
recovered=""
for ((i = 0; i < recovery_s * 2; i++)); do
  o=$(metric sluice_open_connections "$(metrics)")
  if [[ $o != "?" ]] && ((o <= open_before + 1)); then
    recovered=$(awk -v a="$(now)" -v b="$attack_end" 'BEGIN { printf "%.1f", a - b }')
    break
  fi
  sleep 0.5
  ((i % 2 == 1)) && sample recover
done
sample after
for pid in "${attackers[@]}"; do wait "$pid" || true; done
# A new connection is served.
new_status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -H 'X-Api-Key: after' \
  "http://127.0.0.1:$sl_port/api/normal" || true)
wait "$normal_pid" || true
wait "$control_pid" || true
wait "$fresh_pid" || true
sleep 1
rss_after=$(rss_kb)
sample end
m=$(metrics)
keys_after=$(metric sluice_keys_held "$m")
open_after=$(metric sluice_open_connections "$m")

echo
echo "Attackers (idle: one line per process):"
cat "$work/idle.txt" "$work/slowloris.txt"
flood_n=$(awk -F= '/^flood_requests=/ { print $2 }' "$work/flood.txt")
flood_rps=$(awk '/^Requests\/sec:/ { print $2 }' "$work/flood.txt")
echo "flood: ${flood_n:-?} requests, each a new key (${flood_rps:-?} req/s)"
[[ -s $work/attack.err ]] && { echo "attacker stderr:"; head -5 "$work/attack.err"; }

# Normal clients' figures by phase.
phase() { # FROM TO LABEL [FILE]
  awk -v from="$1" -v to="$2" '$1 >= from && $1 < to' "$work/${4:-normal}.txt" >"$work/phase.txt"
  awk '$3 ~ /^2/ { print $2 }' "$work/phase.txt" | sort -g >"$work/lat.txt"
  local n m p50=0 p99=0 mx=0 failed
  n=$(wc -l <"$work/phase.txt")
  m=$(wc -l <"$work/lat.txt")
  if ((m > 0)); then
    p50=$(sed -n "$(((m - 1) * 50 / 100 + 1))p" "$work/lat.txt")
    p99=$(sed -n "$(((m - 1) * 99 / 100 + 1))p" "$work/lat.txt")
    mx=$(tail -1 "$work/lat.txt")
  fi
  failed=$(awk '$3 !~ /^2/ { n++; k[$3]++ } END { printf "%d", n; for (x in k) printf " %s=%d", x, k[x] }' "$work/phase.txt")
  printf '%-7s %6d requests  p50 %7.2f ms  p99 %7.2f ms  max %8.2f ms  failed %s\n' "$3" "$n" "$p50" "$p99" "$mx" "$failed"
}
echo
echo "Normal clients (latency of 2xx answers; failed = anything else):"
phase 0 "$attack_start" before
line=$(phase "$attack_start" "$attack_end" attack)
echo "$line"
p99_attack=$(awk '{ print $8 }' <<<"$line")
phase "$attack_end" 9999999999 after
echo "New clients (a new connection per request, 10/s) through Sluice:"
phase 0 "$attack_start" before fresh
phase "$attack_start" "$attack_end" attack fresh
phase "$attack_end" 9999999999 after fresh
echo "Control: the same clients straight to the upstream, same time:"
phase 0 "$attack_start" before control
phase "$attack_start" "$attack_end" attack control
phase "$attack_end" 9999999999 after control

echo
printf 'RSS (KiB): before %d, during (max) %d, after %d\n' "$rss_before" "$rss_during" "$rss_after"
printf 'keys held: max during %d (max_keys %d), after %s\n' "$keys_max" "$max_keys" "$keys_after"
printf 'open connections: before %s, max during %d, after %s\n' "$open_before" "$open_max" "$open_after"
printf 'connections refused (max_connections): %s\n' "$refused_attack"
printf 'recovered (open connections back to baseline) %ss after the attack stopped; new connection: HTTP %s\n' \
  "${recovered:-not within ${recovery_s}s}" "$new_status"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
echo
check "normal p99 during the attack < 50 ms ($p99_attack ms)" "awk -v p='$p99_attack' 'BEGIN { exit !(p + 0 < 50) }'"
check "keys held <= max_keys ($keys_max <= $max_keys)" "((keys_max <= max_keys))"
check "recovered: open connections back to baseline" "[[ -n '$recovered' ]]"
left_open=$(cat "$work/idle.txt" "$work/slowloris.txt" | grep -o 'left_open=[0-9]*' | cut -d= -f2 | awk '{ n += $1 } END { print n + 0 }')
check "every attack connection closed by the server ($left_open left open)" "((left_open == 0))"
check "new connection served (HTTP $new_status)" "[[ '$new_status' == 200 ]]"
check "RSS after < 2x RSS during" "((rss_after < 2 * rss_during))"
exit $fail
