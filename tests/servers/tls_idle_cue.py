#!/usr/bin/env python3
"""tls_idle_cue.py PORTFILE DIR LOG CERT KEY VERSION HOW - idle_cue.py over
TLS: a keep-alive HTTPS/1.1 server whose idle close comes on the client's
cue, not on a timer.

VERSION 13 or 12 (the only TLS version offered).  No session tickets
(num_tickets 0): a TLS 1.3 connection just made has then nothing to read,
and a poll after its handshake says so, alone and with the library alike.

Each connection is served request after request: the request line is
logged as "<conn id> <method> <path>" (before the answer), a body framed by
Content-Length is read and dropped, and the answer is "200 OK" with the
path and a newline as its body (Content-Length, no Connection header).

A line "close" on the fifo DIR/cue closes, as an idle timer would, every
connection that has answered at least one request and waits for its next
one, HOW: "notify" (close_notify, then the FIN: nginx's keepalive_timeout),
"fin" (a bare FIN), "rst" (a reset: SO_LINGER 0).  The connection's own
thread closes it (an SSL socket is one thread's), woken through a pipe; a
fresh connection (nothing answered yet) is left alone, as nginx's
keep-alive timer leaves it.  Each close is logged as "<conn id> closed",
then how many were closed, and the client's port of each, is written to
the fifo DIR/done once all are ("2 41234 41236"): the client reads it and
knows the server's close went out, and whether its own connection (one a
library handed it) was among them.  Listens on
127.0.0.1; the port is written to PORTFILE.  (tests/replay.bats "Before
the first request", TLS.)
"""
import os
import select
import socket
import ssl
import struct
import sys
import threading

from cue_server import fifos, lock, logger, publish, read_request, serve_cues

port_file, d, log_file, cert, key, version, how = sys.argv[1:8]
cue, done = fifos(d)
log = logger(log_file)

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
v = ssl.TLSVersion.TLSv1_3 if version == "13" else ssl.TLSVersion.TLSv1_2
ctx.minimum_version = ctx.maximum_version = v
ctx.num_tickets = 0

idle = {}  # conn id -> (wake pipe's write end, event set once closed)
ids = [0]


def idle_close(s, raw):
    """The idle timer's close, HOW (raw: a descriptor of s's socket)."""
    if how == "rst":
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return
    if how == "notify":
        s.settimeout(0)
        try:
            s.unwrap()  # our close_notify; the client's is not awaited
        except (ssl.SSLError, OSError):
            pass
    try:
        raw.shutdown(socket.SHUT_RDWR)  # the FIN
    except OSError:
        pass


def peer_closed(s):
    """The client ended the connection already (its close is in, its
    thread has not seen it yet): not idle."""
    if not select.select([s], [], [], 0)[0]:
        return False
    s.settimeout(0)
    try:
        return s.recv(1) == b""
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except (ssl.SSLError, OSError):
        return True


def handle(conn, cid):
    try:
        s = ctx.wrap_socket(conn, server_side=True)
    except (ssl.SSLError, OSError) as e:
        sys.stderr.write("tls_idle_cue: %d: handshake: %r\n" % (cid, e))
        conn.close()
        return
    raw = socket.socket(fileno=os.dup(s.fileno()))
    buf, answered = b"", 0
    wake_r, wake_w = os.pipe()
    closed, result = threading.Event(), [0]

    def wait():
        if not answered or s.pending():
            return True
        with lock:
            idle[cid] = (wake_w, closed, result)
        ready, _, _ = select.select([s, wake_r], [], [])
        with lock:
            idle.pop(cid, None)
        if wake_r not in ready:
            return True
        if not peer_closed(s):
            port = raw.getpeername()[1]
            idle_close(s, raw)
            log("%d closed" % cid)
            result[0] = port
        return False

    try:
        while True:
            req = read_request(lambda: s.recv(65536), buf, wait)
            if req is None:
                return
            method, path, buf = req
            log("%d %s %s" % (cid, method, path))
            body = path.encode() + b"\n"
            if not buf:
                # idle from the answer on: a library hands the connection
                # out with no byte on the wire, and the client's cue may
                # come before this thread is back in its select
                with lock:
                    idle[cid] = (wake_w, closed, result)
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            answered += 1
    except (ssl.SSLError, OSError) as e:
        sys.stderr.write("tls_idle_cue: %d: %r\n" % (cid, e))
    finally:
        s.close()
        raw.close()
        os.close(wake_r)
        closed.set()


def answer(line):
    if line != "close":
        return None
    with lock:
        gone = list(idle.values())
        idle.clear()
    for wake_w, closed, result in gone:
        os.write(wake_w, b"x")
    ports = []
    for wake_w, closed, result in gone:
        closed.wait()
        os.close(wake_w)
        if result[0]:
            ports.append("%d" % result[0])
    return " ".join([str(len(ports))] + ports)


threading.Thread(target=serve_cues, args=(cue, done, answer), daemon=True).start()
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
publish(listener, port_file)
while True:
    c, _ = listener.accept()
    ids[0] += 1
    threading.Thread(target=handle, args=(c, ids[0]), daemon=True).start()
