# Helpers the benchmark scripts share; `source bench/lib.sh` from the repo root.

# need_programs "WHAT" PROGRAM...: exits saying the bench needs WHAT unless
# every PROGRAM is an executable path (pass "$(command -v x || true)" for x on PATH).
need_programs() {
  local what=$1 program
  shift
  for program in "$@"; do
    if [[ -z $program || ! -x $program ]]; then
      echo "${BENCH_NAME:-bench}: needs $what" >&2
      exit 1
    fi
  done
}

# start_work PREFIX: sets $work to a new temporary directory and $pids to
# (), and on exit stops every PID in $pids (TERM, then waits) and removes $work.
start_work() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  pids=()
  trap stop_work EXIT
}
stop_work() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}

# A loopback port nothing listens on now (probed; another process may still
# take it before the caller binds it). Below Linux's ephemeral range
# (32768-60999): a port there may be the local end of a live connection,
# which no probe sees and which makes the server's bind fail.
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "no free loopback port" >&2
  exit 1
}

# utime+stime of a process and its children, in clock ticks (getconf CLK_TCK).
cpu_ticks() {
  local total=0 pid rest
  for pid in "$1" $(pgrep -P "$1" || true); do
    if [[ -r /proc/$pid/stat ]]; then
      # The fields after the command name (which may hold spaces and
      # parentheses): utime and stime are the 12th and 13th of them.
      rest=$(sed 's/^.*) //' "/proc/$pid/stat")
      set -- $rest
      total=$((total + ${12} + ${13}))
    fi
  done
  echo "$total"
}

# Waits (at most 10 s) until something accepts on 127.0.0.1:PORT; else says
# so, named by $BENCH_NAME, and exits the script.
wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "${BENCH_NAME:-bench}: nothing listens on port $1" >&2
  exit 1
}

# wrk_run NAME PID URL [wrk args...]: one wrk run (-t1, $connections
# connections, $duration seconds, --latency) against URL, served by PID (and
# its children). Prints and appends to $results one line: NAME (two words:
# scenario and server), requests/s, p99, the server's CPU microseconds per
# request (utime+stime over the run / requests) and the request counts.
wrk_run() {
  local name=$1 pid=$2 url=$3
  shift 3
  local before after out requests rps p99 non2xx us hz
  hz=$(getconf CLK_TCK)
  before=$(cpu_ticks "$pid")
  out=$(wrk -t1 -c"$connections" -d"${duration}s" --latency "$@" "$url")
  after=$(cpu_ticks "$pid")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" \
    'BEGIN { printf "%.1f", (n > 0 ? t * 1000000 / hz / n : 0) }')
  printf '%-22s %10s req/s  p99 %8s  %7s us CPU/req  (%s requests, %s non-2xx)\n' \
    "$name" "$rps" "$p99" "$us" "$requests" "${non2xx:-0}" | tee -a "$results"
}

# ratios RESULTS: for each scenario, every server but nginx against "nginx"
# (means over the rounds). nginx+log rows are shown in the table, never
# compared against.
ratios() {
  echo "Ratios against nginx, means over the rounds (req/s sluice/nginx; p99 nginx/sluice and CPU"
  echo "per request nginx/sluice: > 1 = sluice better):"
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    $2 != "" && $3 ~ /^[0-9.]+$/ {
      key = $1; who = $2; rps[key, who] += $3; p99[key, who] += ms($6); cpu[key, who] += $7; n[key, who]++
    }
    END {
      for (k in n) { split(k, parts, SUBSEP); if (parts[2] != "nginx" && parts[2] != "nginx+log") pairs[parts[1], parts[2]] = 1 }
      for (k in pairs) {
        split(k, parts, SUBSEP); s = parts[1]; w = parts[2]
        if (!((s, "nginx") in n)) continue
        printf "  %-9s %-7s throughput %.2fx   p99 %.2fx   CPU/req %.2fx\n", s, w,
          (rps[s, w] / n[s, w]) / (rps[s, "nginx"] / n[s, "nginx"]),
          (p99[s, "nginx"] / n[s, "nginx"]) / (p99[s, w] / n[s, w]),
          (cpu[s, "nginx"] / n[s, "nginx"]) / (cpu[s, w] / n[s, w])
      }
    }' "$1" | sort
}
