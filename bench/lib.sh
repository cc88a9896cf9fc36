# Helpers the benchmark scripts share; `source bench/lib.sh` from the repo root.

# A loopback port nothing listens on now (probed; another process may still
# take it before the caller binds it).
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
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
