#!/usr/bin/env python3
"""idle_cue.py PORTFILE DIR LOG - a keep-alive HTTP/1.1 server whose idle
close comes on the client's cue, not on a timer.

Each connection is served request after request: the request line is
logged as "<conn id> <method> <path>" (before the answer), a body framed by
Content-Length is read and dropped, and the answer is "200 OK" with the
path and a newline as its body (Content-Length, no Connection header).

A line "close" on the fifo DIR/cue closes, as an idle timer would
(shutdown: the FIN; the socket then closed: a reset for what comes after),
every connection that has answered at least one request and waits for its
next one; a fresh connection (nothing answered yet) is left alone, as
nginx's keep-alive timer leaves it.  Each close is logged as "<conn id>
closed", then how many were closed is written to the fifo DIR/done: the
client reads it and knows the server's FINs were sent.  Listens on 127.0.0.1; the port is
written to PORTFILE.  (tests/replay.bats "Before the first request".)
"""
import socket
import sys
import threading

from cue_server import close_idle, fifos, lock, logger, plain_requests, publish, serve_cues

port_file, d, log_file = sys.argv[1], sys.argv[2], sys.argv[3]
cue, done = fifos(d)
log = logger(log_file)
idle = {}  # conn id -> socket: answered, waiting for the next request
ids = [0]


def handle(s, cid):
    try:
        for method, path, rest in plain_requests(s, cid, idle):
            log("%d %s %s" % (cid, method, path))
            body = path.encode() + b"\n"
            if not rest:
                # idle from the answer on: a library hands the connection
                # out with no byte on the wire, and the client's cue may
                # come before this thread is back in its recv
                with lock:
                    idle[cid] = s
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    except OSError as e:
        sys.stderr.write("idle_cue: %d: %r\n" % (cid, e))
    finally:
        s.close()


def answer(line):
    return "%d" % close_idle(idle, log) if line == "close" else None


threading.Thread(target=serve_cues, args=(cue, done, answer), daemon=True).start()
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
publish(listener, port_file)
while True:
    c, _ = listener.accept()
    ids[0] += 1
    threading.Thread(target=handle, args=(c, ids[0]), daemon=True).start()
