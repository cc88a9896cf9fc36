#!/usr/bin/env bash
# `make run`: the demo upstream on 127.0.0.1:3000 and Sluice as a gateway in
# front of it (examples/quickstart.yaml: 127.0.0.1:8080, decision API
# 127.0.0.1:8082, admin 127.0.0.1:9090),
# with the lines to try printed. Ctrl-C stops both.
#
#   scripts/run-demo.sh [BUILD_DIR]      # default: build (what `make` builds)
set -euo pipefail

cd "$(dirname "$0")/.."
build_dir=${1:-build}
config=examples/quickstart.yaml
sluice="$build_dir/sluice"
upstream="$build_dir/sluice-demo-upstream"

for program in "$sluice" "$upstream"; do
  if [[ ! -x $program ]]; then
    echo "run-demo: $program is missing; run 'make' first" >&2
    exit 1
  fi
done

# Something already on one of the ports would answer instead of the demo.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in 3000 8080 8082 9090; do
  if port_busy "$port"; then
    echo "run-demo: 127.0.0.1:$port is already in use; stop what listens there first" >&2
    exit 1
  fi
done

upstream_pid=
sluice_pid=
stop_all() {
  trap - INT TERM EXIT
  # Each by its PID: SIGTERM lets Sluice drain and exit 0.
  for pid in $sluice_pid $upstream_pid; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in $sluice_pid $upstream_pid; do
    wait "$pid" 2>/dev/null || true
  done
}
trap 'echo; echo "Stopping..."; stop_all; exit 0' INT TERM
trap stop_all EXIT

"$upstream" --host 127.0.0.1 --port 3000 &
upstream_pid=$!
"$sluice" serve --config "$config" &
sluice_pid=$!

# Wait (at most 10 s) until the admin port answers /healthz.
healthy=
for _ in $(seq 100); do
  if (exec 3<>/dev/tcp/127.0.0.1/9090 && printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3 &&
      head -1 <&3 | grep -q ' 200 ') 2>/dev/null; then
    healthy=1
    break
  fi
  if ! kill -0 "$sluice_pid" 2>/dev/null || ! kill -0 "$upstream_pid" 2>/dev/null; then break; fi
  sleep 0.1
done
if [[ -z $healthy ]]; then
  echo "run-demo: Sluice did not come up (see the log above)" >&2
  exit 1
fi

cat <<'EOF'

  Sluice is running as a gateway (examples/quickstart.yaml):
    gateway        http://127.0.0.1:8080   -> demo upstream http://127.0.0.1:3000
    decision API   http://127.0.0.1:8082/v1/check   http://127.0.0.1:8082/v1/auth  (your programs only)
    dashboard      http://127.0.0.1:9090/dashboard   (live counts; open it in a browser)
    admin          http://127.0.0.1:9090/metrics   /admin/stats   /healthz  (keep it private)

  Try, from another terminal:

    # 7 in a row: 200 200 200 200 200 429 429 (a burst of 5, then one per second)
    for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code} ' http://127.0.0.1:8080/api/hello; done; echo

    # one answer in full: the upstream's 200 (or a 429 with Retry-After and the
    # JSON body) with the X-RateLimit-* and RateLimit headers
    curl -i http://127.0.0.1:8080/api/hello

    # a brute force on the login: wrong passwords (401) count, and the 4th in 15
    # minutes locks this client out for 5 (429 with Retry-After: 300, even for the
    # right password, "demo"); successful logins never count
    for i in $(seq 5); do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:8080/api/login -d '{"password":"guess"}'; done; echo

    # an explicit decision for any program (policy "login": 3, then 1 per minute)
    curl -si -X POST http://127.0.0.1:8082/v1/check -d '{"policy":"login","key":"user:42"}'

    # what Sluice counted
    curl -s http://127.0.0.1:9090/metrics | grep '^sluice_requests_total'

  Ctrl-C stops both.

EOF

# Until Ctrl-C, or until one of the two stops on its own.
set +e
wait -n "$upstream_pid" "$sluice_pid"
status=$?
echo "run-demo: a process stopped (status $status); stopping the other" >&2
exit "$status"
