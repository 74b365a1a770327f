#!/usr/bin/env python3
"""tls_first_read.py MODE PORT CA DIR ROUNDS - tests/clients/tls_first_read.c
in CPython's ssl: an HTTPS connection read before its first request, while
the server closes the kept connection a library handed out to its SSL
(docs/replay.md "Before the first request", TLS).  Against
tests/servers/tls_idle_cue.py, whose idle close comes on our cue.

MODE recv: a recv with a 0.3 s timeout before the request (alone: timed
out, the fresh connection has nothing to say; the outcome, not the time,
is what is printed); nbrecv: a non-blocking recv (alone: SSLWantReadError).
Each round: GET /warm on a connection of its own (read, closed: a library
keeps it), then a new connection; the server is cued to close every
connection idle after an answer, and its "done" read; where it closed ours,
its FIN (or reset) is awaited on our socket (/proc/net/tcp); then MODE,
then the request /rN and its answer.  Only events are waited for.
"""
import os
import socket
import ssl
import sys
import time

from tcp_state import tcp_state

mode, port, ca, d, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
ctx = ssl.create_default_context(cafile=ca)
# (a TLS 1.2 connection is handed out only to a program that refuses
# renegotiation: docs/tls.md "Renegotiation")
ctx.options |= ssl.OP_NO_RENEGOTIATION


def cue_close(s):
    """Whether the server's idle close took our connection (one a library
    handed out)"""
    with open(os.path.join(d, "cue"), "w") as f:
        f.write("close\n")
    with open(os.path.join(d, "done")) as f:
        ports = f.readline().split()[1:]
    return str(s.getsockname()[1]) in ports


def answer(s):
    buf = b""
    while b"\r\n\r\n" not in buf or len(buf.partition(b"\r\n\r\n")[2]) < int(
            buf.lower().partition(b"content-length:")[2].split(b"\r\n")[0] or 0):
        got = s.recv(4096)
        if not got:
            return "EOF after %r" % buf
        buf += got
    head, _, body = buf.partition(b"\r\n\r\n")
    return "%s | %s" % (head.split(b"\r\n")[0].decode(), body.decode().strip())


def connect():
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")


for r in range(1, rounds + 1):
    w = connect()
    w.sendall(b"GET /warm HTTP/1.1\r\nHost: localhost\r\n\r\n")
    print(r, "warm:", answer(w), flush=True)
    w.close()

    s = connect()
    ino = os.fstat(s.fileno()).st_ino
    if cue_close(s):
        for i in range(100000):
            if tcp_state(ino) != 1:
                break
            time.sleep(0.0002)
        else:
            sys.exit("never saw the server's close")
    s.settimeout(0.3 if mode == "recv" else 0)
    try:
        print(r, "recv:", s.recv(100))
    except Exception as e:
        print(r, "recv:", type(e).__name__)
    s.settimeout(None)
    try:
        s.sendall(b"GET /r%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % r)
        print(r, "answer:", answer(s))
    except Exception as e:
        print(r, "request:", type(e).__name__, e)
    s.close()
