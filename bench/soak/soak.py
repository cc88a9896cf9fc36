#!/usr/bin/python3
"""Helpers of bench/soak/run.sh (Debian's python3, stdlib only).

  soak.py upstream PORT LOG           an HTTP/1.1 upstream that logs every request it serves
  soak.py load GW DEC SECONDS OUT     mixed, paced client traffic (bounded in time), counts to OUT
  soak.py check LOG LIMIT WINDOW_S    admissions per fixed window on /strict, from the upstream log
"""
import http.client
import json
import random
import socket
import sys
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def upstream(port, log_path):
    log = open(log_path, "a", buffering=1)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            now = time.time()
            # One line per request served: time received, path, key, client's send time.
            with lock:
                log.write("%.6f %s %s %s\n" % (now, self.path.split("?")[0],
                                               self.headers.get("X-Soak-Key", "-"),
                                               self.headers.get("X-Soak-Sent", "-")))
            if self.path.startswith("/slow"):
                time.sleep(1.5)
            body = b'{"ok":true}\n'
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 128
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


class Paced:
    """Calls fn at about `rate` per second until the deadline (and at most max_calls)."""

    def __init__(self, rate, deadline):
        self.period = 1.0 / rate
        self.deadline = deadline
        self.next = time.time()

    def wait(self):
        self.next += self.period
        now = time.time()
        if self.next > now:
            time.sleep(self.next - now)
        else:
            self.next = now
        return time.time() < self.deadline


def load(gw, dec, seconds, out):
    deadline = time.time() + seconds
    counts = Counter()
    lock = threading.Lock()

    def count(kind, status):
        with lock:
            counts["%s %s" % (kind, status)] += 1

    def keepalive_loop(kind, port, rate, make):
        conn = None
        pace = Paced(rate, deadline)
        for _ in range(int(rate * seconds) + 10):
            if not pace.wait():
                break
            method, path, body, headers = make()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                count(kind, resp.status)
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                count(kind, "error:" + type(e).__name__)
                if conn:
                    conn.close()
                conn = None
        if conn:
            conn.close()

    def gateway():
        n = random.randrange(100000)
        return ("GET" if random.random() < 0.7 else "POST", "/api/items/%d" % random.randrange(100),
                b"x" * random.randrange(0, 200),
                {"X-Api-Key": "k%d" % random.randrange(500)})

    def default_route():
        return ("GET", "/other/%d" % random.randrange(1000), None, {})

    def strict():
        # Fixed windows are aligned to the epoch: skip the last 150 ms of each
        # window so a request's send time and the upstream's receive time fall
        # in the window that decided it (the check counts the rest apart).
        while True:
            now = time.time()
            into = now % STRICT_WINDOW
            if into < STRICT_WINDOW - 0.15:
                break
            time.sleep(STRICT_WINDOW - into + 0.005)
        return ("GET", "/strict", None, {"X-Soak-Key": "strict", "X-Soak-Sent": "%.6f" % time.time()})

    def check():
        return ("POST", "/v1/check",
                json.dumps({"policy": "soak-check", "key": "user:%d" % random.randrange(1000)}).encode(),
                {"Content-Type": "application/json"})

    def auth():
        return ("GET", "/v1/auth", None,
                {"X-Original-Method": "GET", "X-Original-URI": "/api/auth/%d" % random.randrange(50),
                 "X-Api-Key": "a%d" % random.randrange(300)})

    def misbehave():
        """Slow clients and clients that leave mid-request, a few a second."""
        pace = Paced(6, deadline)
        for i in range(int(6 * seconds) + 10):
            if not pace.wait():
                break
            kind = i % 6
            try:
                s = socket.create_connection(("127.0.0.1", dec if kind in (2, 5) else gw), timeout=3)
                if kind == 0:    # half a request line, then gone
                    s.sendall(b"GET /api/items/1 HT")
                    time.sleep(random.uniform(0.05, 0.5))
                    name = "half_request"
                elif kind == 1:  # a proxied request whose upstream is slow; gone before the answer
                    s.sendall(b"GET /slow HTTP/1.1\r\nHost: soak\r\n\r\n")
                    time.sleep(random.uniform(0.05, 0.4))
                    name = "left_during_upstream"
                elif kind == 2:  # a /v1/check body cut short
                    s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 200\r\n\r\n{\"policy\":\"soak-")
                    time.sleep(random.uniform(0.05, 0.3))
                    name = "short_body"
                elif kind == 3:  # slow writer: the header byte by byte, then read the answer
                    req = b"GET /api/items/2 HTTP/1.1\r\nHost: soak\r\nX-Api-Key: slow\r\nConnection: close\r\n\r\n"
                    for b in range(0, len(req), 8):
                        s.sendall(req[b:b + 8])
                        time.sleep(0.05)
                    s.recv(4096)
                    name = "slow_writer"
                elif kind == 4:  # pipelined requests, answers never read, reset on close
                    s.sendall(b"GET /api/items/3 HTTP/1.1\r\nHost: soak\r\nX-Api-Key: pipe\r\n\r\n" * 20)
                    time.sleep(0.1)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    name = "pipelined_unread_reset"
                else:            # a connection that never sends (closed by header_timeout or by us)
                    time.sleep(random.uniform(0.1, 1.0))
                    name = "silent"
                s.close()
                count("misbehave", name)
            except OSError as e:
                count("misbehave", "error:" + type(e).__name__)

    threads = [
        threading.Thread(target=keepalive_loop, args=("gateway", gw, 40, gateway)),
        threading.Thread(target=keepalive_loop, args=("gateway", gw, 10, default_route)),
        threading.Thread(target=keepalive_loop, args=("strict", gw, 20, strict)),
        threading.Thread(target=keepalive_loop, args=("check", dec, 30, check)),
        threading.Thread(target=keepalive_loop, args=("auth", dec, 20, auth)),
        threading.Thread(target=misbehave),
    ]
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join(max(0.1, deadline + 10 - time.time()))
    with open(out, "w") as f:
        for k, v in sorted(counts.items()):
            f.write("%s %d\n" % (k, v))


STRICT_WINDOW = 2.0


def check(log_path, limit, window):
    definite = Counter()
    straddling = 0
    total = 0
    with open(log_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 4 or parts[1] != "/strict":
                continue
            total += 1
            recv, sent = float(parts[0]), float(parts[3])
            w_sent, w_recv = int(sent // window), int(recv // window)
            if w_sent == w_recv:
                definite[w_recv] += 1
            else:
                straddling += 1
    worst = max(definite.values()) if definite else 0
    over = sorted(w for w, c in definite.items() if c > limit)
    print("strict_admitted %d windows %d max_per_window %d limit %d straddling %d over_windows %d"
          % (total, len(definite), worst, limit, straddling, len(over)))
    for w in over[:10]:
        print("over-admission: window starting %.1f admitted %d > %d" % (w * window, definite[w], limit))
    return 1 if over else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "upstream":
        upstream(int(sys.argv[2]), sys.argv[3])
    elif cmd == "load":
        load(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif cmd == "check":
        sys.exit(check(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    else:
        sys.exit("usage: soak.py upstream|load|check ...")
