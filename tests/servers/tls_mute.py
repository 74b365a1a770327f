#!/usr/bin/python3
"""tls_mute.py CERT KEY PORT_FILE [SLOW_MS] - an HTTPS server whose first
connection answers one request (keep-alive), then closes unanswered the
next request on it; every later connection is accepted and never answered,
not even its handshake.  For a replay whose fresh handshake cannot finish:
the program's own bounds must end it (docs/replay.md "The program's
bounds").  With SLOW_MS, each later connection's handshake is answered
after SLOW_MS ms (a server slow to start a TLS session), then its requests
as on the first: a replay's handshake that ends after the program's call
did."""
import os
import socket
import ssl
import sys
import threading
import time

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[3] + ".tmp", sys.argv[3])


def head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            return None
        buf += d
    return buf


def slow(s, ms):
    time.sleep(ms / 1000.0)
    try:
        c = ctx.wrap_socket(s, server_side=True)
        while head(c) is not None:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        c.close()
    except OSError:
        s.close()


slow_ms = int(sys.argv[4]) if len(sys.argv) > 4 else None
mute = []
first = True
while True:
    s, _ = ls.accept()
    if not first and slow_ms is not None:
        threading.Thread(target=slow, args=(s, slow_ms), daemon=True).start()
        continue
    if not first:
        mute.append(s)  # never a handshake
        continue
    first = False
    c = ctx.wrap_socket(s, server_side=True)
    if head(c) is not None:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    head(c)  # the next request on it: closed unanswered
    c.close()
