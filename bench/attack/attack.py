#!/usr/bin/python3
"""Attack and probe clients for bench/attack/run.sh (stdlib only, loopback only).

  attack.py idle      PORT COUNT SECONDS SOURCES
  attack.py slowloris PORT COUNT SECONDS SOURCES [INTERVAL]
  attack.py normal    PORT CLIENTS SECONDS OUTFILE [INTERVAL]

SOURCES: comma-separated loopback addresses the connections bind to, in turn
(each has its own ephemeral port range).

idle/slowloris: COUNT connection slots for SECONDS; a slot whose connection the
server closes opens a new one (an attacker keeps the pressure on). Idle sends
nothing; slowloris sends a request line then one header byte every INTERVAL
seconds (default 2), never finishing. At SECONDS the slots stop reopening and
stop sending, and keep their sockets open until the server closes them (at most
GRACE seconds more, env GRACE, default 30): the last line reports how many the
server closed and when the last one went. Prints one `key=value` summary line.

normal: CLIENTS keep-alive clients, each a GET every INTERVAL seconds (default
0.02) on its own key for SECONDS; a lost connection is reopened. Writes one line
per request to OUTFILE: `<unix time of start> <latency ms> <status or error>`.
Each request has a 2 s timeout (then: `timeout`). FRESH=1 in the environment:
a new connection for every request (what a client arriving during the attack
meets).
"""
import asyncio
import os
import socket
import sys
import time

CONNECT_CONCURRENCY = 256
FRESH = os.environ.get("FRESH") == "1"  # normal: a new connection for every request  # connects in flight at once, per process


def sources_list(s):
    return [a for a in s.split(",") if a]


async def open_conn(port, source):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.bind((source, 0))
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, ("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return sock


class Stats:
    def __init__(self):
        self.opened = 0
        self.connect_errors = 0
        self.server_closed = 0  # EOF or reset from the server
        self.refused_503 = 0  # closed with a 503 (max_connections)
        self.got_408 = 0
        self.other_answer = 0
        self.closed_after_stop = 0
        self.open_at_stop = 0
        self.last_close_after_stop = 0.0
        self.left_open = 0


async def hold(sock, stats, stop_at, give_up_at, slowloris, interval, first):
    """Holds one connection until the server closes it. Returns when it did or
    when give_up_at passed (then the socket is closed here)."""
    loop = asyncio.get_running_loop()
    if slowloris:
        await loop.sock_sendall(sock, b"GET /slow HTTP/1.1\r\nHost: x\r\n")
    stopped_counted = False
    next_send = time.monotonic() + interval
    answer = b""
    while True:
        now = time.monotonic()
        if now >= give_up_at:
            stats.left_open += 1
            sock.close()
            return
        if now >= stop_at and not stopped_counted:
            stats.open_at_stop += 1
            stopped_counted = True
        wait = give_up_at - now
        if now < stop_at:
            wait = min(wait, stop_at - now)
        if slowloris and now < stop_at:
            wait = min(wait, max(0.0, next_send - now))
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 4096), timeout=max(wait, 0.001))
        except asyncio.TimeoutError:
            if slowloris and time.monotonic() < stop_at and time.monotonic() >= next_send:
                try:
                    await loop.sock_sendall(sock, b"X")
                except OSError:
                    data = b""
                else:
                    next_send = time.monotonic() + interval
                    continue
            else:
                continue
        except OSError:
            data = b""
        if data:
            answer += data
            continue
        # Closed by the server.
        sock.close()
        stats.server_closed += 1
        if answer.startswith(b"HTTP/1.1 503"):
            stats.refused_503 += 1
        elif answer.startswith(b"HTTP/1.1 408"):
            stats.got_408 += 1
        elif answer:
            stats.other_answer += 1
        if stopped_counted:
            stats.closed_after_stop += 1
            stats.last_close_after_stop = max(stats.last_close_after_stop,
                                              time.monotonic() - stop_at)
        return


async def slot(i, port, sources, stats, sem, stop_at, give_up_at, slowloris, interval):
    source = sources[i % len(sources)]
    first = True
    while time.monotonic() < stop_at:
        async with sem:
            if time.monotonic() >= stop_at:
                return
            try:
                sock = await asyncio.wait_for(open_conn(port, source), timeout=5)
            except (OSError, asyncio.TimeoutError):
                stats.connect_errors += 1
                await asyncio.sleep(0.5)
                continue
        stats.opened += 1
        await hold(sock, stats, stop_at, give_up_at, slowloris, interval, first)
        first = False
        if time.monotonic() < stop_at:
            await asyncio.sleep(0.05)  # bounded reconnect rate per slot


async def attack(kind, port, count, seconds, sources, interval):
    stats = Stats()
    grace = float(os.environ.get("GRACE", "30"))
    start = time.monotonic()
    stop_at = start + seconds
    give_up_at = stop_at + grace
    sem = asyncio.Semaphore(CONNECT_CONCURRENCY)
    tasks = [asyncio.create_task(slot(i, port, sources, stats, sem, stop_at, give_up_at,
                                      kind == "slowloris", interval)) for i in range(count)]
    await asyncio.gather(*tasks)
    print(f"kind={kind} slots={count} opened={stats.opened} connect_errors={stats.connect_errors} "
          f"server_closed={stats.server_closed} refused_503={stats.refused_503} "
          f"got_408={stats.got_408} other_answer={stats.other_answer} "
          f"open_at_stop={stats.open_at_stop} closed_after_stop={stats.closed_after_stop} "
          f"last_close_after_stop_s={stats.last_close_after_stop:.2f} left_open={stats.left_open}",
          flush=True)


async def read_response(reader):
    """Reads one HTTP/1.1 response with Content-Length (or none). Returns status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    close = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        n = name.strip().lower()
        if n == b"content-length":
            length = int(value.strip())
        elif n == b"connection" and value.strip().lower() == b"close":
            close = True
    if length:
        await reader.readexactly(length)
    return status, close


async def normal_client(i, port, seconds, interval, out):
    end = time.monotonic() + seconds
    reader = writer = None
    req = (f"GET /api/normal HTTP/1.1\r\nHost: x\r\nX-Api-Key: normal-{i}\r\n\r\n").encode()
    while time.monotonic() < end:
        t0 = time.monotonic()
        wall = time.time()
        result = ""
        try:
            async def one():
                nonlocal reader, writer
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(req)
                await writer.drain()
                return await read_response(reader)
            status, close = await asyncio.wait_for(one(), timeout=2)
            result = str(status)
            if close or FRESH:
                writer.close()
                writer = None
        except asyncio.TimeoutError:
            result = "timeout"
            if writer is not None:
                writer.close()
            writer = None
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            result = "error:" + type(e).__name__
            if writer is not None:
                writer.close()
            writer = None
        ms = (time.monotonic() - t0) * 1000
        out.write(f"{wall:.3f} {ms:.3f} {result}\n")
        rest = interval - (time.monotonic() - t0)
        if rest > 0:
            await asyncio.sleep(rest)
    if writer is not None:
        writer.close()


async def normal(port, clients, seconds, path, interval):
    with open(path, "w") as out:
        await asyncio.gather(*(normal_client(i, port, seconds, interval, out)
                               for i in range(clients)))


def main():
    kind = sys.argv[1]
    port = int(sys.argv[2])
    if kind in ("idle", "slowloris"):
        count = int(sys.argv[3])
        seconds = min(float(sys.argv[4]), 120.0)
        sources = sources_list(sys.argv[5])
        interval = float(sys.argv[6]) if len(sys.argv) > 6 else 2.0
        asyncio.run(attack(kind, port, count, seconds, sources, interval))
    elif kind == "normal":
        clients = min(int(sys.argv[3]), 64)
        seconds = min(float(sys.argv[4]), 300.0)
        interval = float(sys.argv[6]) if len(sys.argv) > 6 else 0.02
        asyncio.run(normal(port, clients, seconds, sys.argv[5], interval))
    else:
        sys.exit(f"unknown kind {kind}")


if __name__ == "__main__":
    main()
