#!/usr/bin/env bash
# Half-open TLS handshakes (run by hand, loopback only, bounded; not in CI):
# `sluice serve` with TLS on `listen` (decision-only, 2 workers), then COUNT
# connections (default 3,000) that each send the first bytes of a
# ClientHello and nothing more, held open together. Prints the server's RSS
# before and while they are held, the growth per connection, how many the
# server closed (sluice_tls_handshakes_dropped_total), and the time a normal
# HTTPS client (curl, a new connection each) takes meanwhile, 5 times.
#
#   bench/attack/tls_half_open.sh [BUILD_DIR]     # default: build (a Release build)
#
# Environment: COUNT (default 3000), MAX_TLS_HANDSHAKES (server's, default:
# unset, the server's default), HELLO=0 (send nothing at all). The figures
# are in docs/RELIABILITY.md.
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir=${1:-build}
count=${COUNT:-3000}
py=/usr/bin/python3
sluice="$build_dir/sluice"
source bench/lib.sh
BENCH_NAME="tls half-open bench"
need_programs "$build_dir/sluice, openssl, curl and $py" "$sluice" \
  "$(command -v openssl || true)" "$(command -v curl || true)" "$py"
hard=$(ulimit -Hn)
ulimit -n "$hard"
start_work sluice-tls-half-open

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
port=$(free_port)
admin_port=$(free_port)
extra=""
[[ -n ${MAX_TLS_HANDSHAKES:-} ]] && extra=", max_tls_handshakes: $MAX_TLS_HANDSHAKES"
cat >"$work/sluice.yaml" <<YAML
listen: 127.0.0.1:$port
admin: 127.0.0.1:$admin_port
tls: {cert: $work/cert.pem, key: $work/key.pem}
server: {threads: 2, max_connections: $((count + 100)), header_timeout: 60s$extra}
logging: {level: warn}
policies:
  p: {capacity: 1000000, refill_rate: 1000000/s}
YAML
"$sluice" serve --config "$work/sluice.yaml" 2>"$work/sluice.log" &
sluice_pid=$!
pids+=($sluice_pid)
wait_port "$admin_port"

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$sluice_pid/status"; }
metric() {
  curl -s "http://127.0.0.1:$admin_port/metrics" | awk -v m="$1" '$1 == m {print $2}'
}
probe() {
  curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --cacert "$work/cert.pem" \
    "https://localhost:$port/v1/auth" -H 'X-Original-Method: GET' -H 'X-Original-URI: /x'
}
probe >/dev/null
rss_before=$(rss_kib)

# The attacker: COUNT connections, each with 11 bytes of a 512-byte record
# announced (a ClientHello begun), held until stdin closes (at most 120 s).
cat >"$work/attacker.py" <<'PY'
import socket, sys, select
port, count, send = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" if send else b""
socks = []
for i in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    if hello:
        s.sendall(hello)
    socks.append(s)
print("sent", len(socks), flush=True)
select.select([sys.stdin], [], [], 120)
PY
mkfifo "$work/hold"
"$py" "$work/attacker.py" "$port" "$count" "${HELLO:-1}" <"$work/hold" >"$work/attacker.out" 2>&1 &
attacker=$!
pids+=($attacker)
exec 7>"$work/hold"
for _ in $(seq 600); do
  grep -q '^sent' "$work/attacker.out" 2>/dev/null && break
  sleep 0.1
done
sleep 2  # the server reads the last ones
rss_during=$(rss_kib)
echo "probe (status seconds), 5 new HTTPS connections while held:"
for _ in 1 2 3 4 5; do probe; done
in_progress=$(metric sluice_tls_handshakes)
dropped=$(metric sluice_tls_handshakes_dropped_total)
open=$(metric sluice_open_connections)
exec 7>&-
echo "half-open connections: $count; in handshake: ${in_progress:-n/a}; dropped: ${dropped:-n/a}; open: $open"
echo "RSS: $((rss_before / 1024)) MiB before, $((rss_during / 1024)) MiB held, +$(((rss_during - rss_before) / 1024)) MiB ($(((rss_during - rss_before) / count)) KiB per connection)"
