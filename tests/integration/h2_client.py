#!/usr/bin/python3
"""A scripted HTTP/2 client (h2c, prior knowledge) for tests/integration/http2_test.cc.

  h2_client.py streams PORT N PATH        N requests as N concurrent streams on one
                                          connection; one line per stream, in stream order:
                                          "<stream> <status> <remaining> <body>"
  h2_client.py flood PORT N PATH          N streams opened and reset at once; prints
                                          "goaway <error code>" or "no goaway"
  h2_client.py header PORT BYTES PATH     one request with a header of BYTES bytes;
                                          prints "<status> <body>" or "reset <code>"
"""
import socket
import sys

import h2.config
import h2.connection
import h2.events


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def request(path, extra=()):
    return [(":method", "GET"), (":path", path), (":scheme", "http"),
            (":authority", "localhost")] + list(extra)


def pump(sock, conn, on_event):
    """Reads and hands events to on_event until it returns True or the server closes."""
    while True:
        data = sock.recv(65536)
        if not data:
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if on_event(event):
                sock.sendall(conn.data_to_send())
                return
        sock.sendall(conn.data_to_send())


def streams(port, n, path):
    sock, conn = connect(port)
    ids = []
    for _ in range(n):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, request(path), end_stream=True)
        ids.append(sid)
    sock.sendall(conn.data_to_send())
    results = {sid: {"status": None, "headers": {}, "body": b"", "ended": False} for sid in ids}

    def on_event(event):
        if isinstance(event, h2.events.ResponseReceived):
            r = results[event.stream_id]
            r["headers"] = {k.decode(): v.decode() for k, v in event.headers}
            r["status"] = r["headers"][":status"]
        elif isinstance(event, h2.events.DataReceived):
            results[event.stream_id]["body"] += event.data
        elif isinstance(event, h2.events.StreamEnded):
            results[event.stream_id]["ended"] = True
        elif isinstance(event, h2.events.StreamReset):
            results[event.stream_id]["status"] = "reset"
            results[event.stream_id]["ended"] = True
        return all(r["ended"] for r in results.values())

    pump(sock, conn, on_event)
    for sid in ids:
        r = results[sid]
        remaining = r["headers"].get("x-ratelimit-remaining", "-")
        print(sid, r["status"], remaining, r["body"].decode())


def flood(port, n, path):
    sock, conn = connect(port)
    for _ in range(n):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, request(path), end_stream=True)
        conn.reset_stream(sid)
    try:
        sock.sendall(conn.data_to_send())
    except OSError:
        pass
    outcome = ["no goaway"]

    def on_event(event):
        if isinstance(event, h2.events.ConnectionTerminated):
            outcome[0] = "goaway %d" % event.error_code
            return True
        return False

    try:
        pump(sock, conn, on_event)
    except Exception:  # the server closed after its GOAWAY
        pass
    print(outcome[0])


def header(port, size, path):
    sock, conn = connect(port)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, request(path, [("x-big", "a" * size)]), end_stream=True)
    sock.sendall(conn.data_to_send())
    result = {"status": None, "body": b""}

    def on_event(event):
        if isinstance(event, h2.events.ResponseReceived):
            result["status"] = dict(event.headers)[b":status"].decode()
        elif isinstance(event, h2.events.DataReceived):
            result["body"] += event.data
        elif isinstance(event, h2.events.StreamReset):
            result["status"] = "reset %d" % event.error_code
            return True
        return isinstance(event, h2.events.StreamEnded)

    pump(sock, conn, on_event)
    print(result["status"], result["body"].decode())


if __name__ == "__main__":
    mode, port, arg, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    {"streams": streams, "flood": flood, "header": header}[mode](port, arg, path)
