#!/usr/bin/env python3
"""Holds N requests in a server's queue and measures what they cost it.

    hold.py PORT N PID RATE DECIDED_CMD

Opens N connections to 127.0.0.1:PORT and waits until all are accepted
(measures the server, PID and its children: RSS, threads), then sends one
GET /q on each and runs DECIDED_CMD (a shell command that prints how many
requests the server has queued so far) until it prints N - 1: one request
goes at once, the rest wait their turns, released at RATE per second from
the first send on. Measures again; the requests held then are N - 1 less
those released. Closes every connection. Bounded: 60 s for each phase,
N <= 10800. Prints one line of key=value.
"""
import os
import selectors
import socket
import subprocess
import sys
import time

LIMIT_S = 60


def with_children(pid):
    """pid and its children (nginx's workers)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [pid] + [int(p) for p in f.read().split()]
    except OSError:
        return [pid]


def proc_status(pid):
    """(RSS in KiB, threads) of pid and its children."""
    rss = threads = 0
    for p in with_children(pid):
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads += int(line.split()[1])
    return rss, threads


def cpu_ticks(pid):
    """utime + stime of pid and its children, in clock ticks."""
    total = 0
    for p in with_children(pid):
        with open(f"/proc/{p}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        total += int(rest[11]) + int(rest[12])
    return total


def main():
    port, n, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rate, decided_cmd = float(sys.argv[4]), sys.argv[5]
    if not 1 < n <= 10800:
        sys.exit("hold.py: N must be from 2 to 10800")
    before_rss, before_threads = proc_status(pid)

    sel = selectors.DefaultSelector()
    socks = []
    deadline = time.monotonic() + LIMIT_S
    pending = 0
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE)
        socks.append(s)
        pending += 1
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            sel.unregister(key.fileobj)
            pending -= 1
    if pending:
        sys.exit(f"hold.py: {pending} connections did not complete")
    # Accepted by the server, not only by the kernel's backlog: let the
    # server's own count of connections settle (its RSS stops moving).
    idle_rss, idle_threads = proc_status(pid)
    for _ in range(100):
        time.sleep(0.1)
        rss, idle_threads = proc_status(pid)
        if rss == idle_rss:
            break
        idle_rss = rss

    ticks = cpu_ticks(pid)
    request = b"GET /q HTTP/1.1\r\nHost: bench\r\n\r\n"
    first_sent = time.monotonic()
    for s in socks:
        s.send(request)
    decided = -1
    while time.monotonic() < deadline + LIMIT_S:
        out = subprocess.run(decided_cmd, shell=True, capture_output=True, text=True).stdout
        decided = int(float(out.strip() or "-1"))
        if decided >= n - 1:
            break
        time.sleep(0.2)
    if decided < n - 1:
        sys.exit(f"hold.py: the server queued {decided} requests, not {n - 1}")
    cpu_us = (cpu_ticks(pid) - ticks) * 1e6 / os.sysconf("SC_CLK_TCK")
    held_rss, held_threads = proc_status(pid)
    held = n - 1 - int(rate * (time.monotonic() - first_sent))
    for s in socks:
        s.close()
    print(
        f"requests={n} held={held} rss_before_kib={before_rss} rss_idle_conns_kib={idle_rss} "
        f"rss_held_kib={held_rss} threads_before={before_threads} threads_held={held_threads} "
        f"bytes_per_held={(held_rss - idle_rss) * 1024 / held:.0f} "
        f"bytes_per_conn_and_held={(held_rss - before_rss) * 1024 / n:.0f} "
        f"cpu_us_per_request={cpu_us / n:.1f}"
    )


if __name__ == "__main__":
    main()
