#!/usr/bin/env python3
"""beacon_first.py KIND PORT DIR - the first request on a reused connection
sent, then close() without reading (a beacon, a webhook), after the server
closed the connection idle (docs/replay.md "Closed under the first
request"), against tests/servers/idle_cue.py.

GET /warm on its own connection (answered, closed: the library keeps it),
then a new connection; the server is cued to close its idle kept
connections, and where it closed one its FIN is awaited on the socket
connect() gave us, and then, after the request KIND is written (get: "GET
/a"; post: "POST /a" with a body), the reset our bytes meet (events only:
/proc/net/tcp; alone the fresh connection stays ESTABLISHED); then close()
with nothing read.  What the server executed is the test's to look at.
"""
import os
import socket
import sys

from tcp_state import tcp_state, until

kind, port, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
REQS = {
    "get": b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
    "post": b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nx=1",
}


def cue_close():
    with open(os.path.join(d, "cue"), "w") as f:
        f.write("close\n")
    with open(os.path.join(d, "done")) as f:
        return int(f.readline())


s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
buf = b""
while not buf.endswith(b"/warm\n"):
    got = s.recv(65536)
    if not got:
        break
    buf += got
print("warm:", buf.split(b"\r\n")[0].decode(), flush=True)
s.close()
s = socket.create_connection(("127.0.0.1", port))
ino = os.fstat(s.fileno()).st_ino
closed = cue_close() > 0
if closed:
    until(lambda: tcp_state(ino) != 1, "saw the server's FIN")
try:
    s.sendall(REQS[kind])
    print("a: sent", flush=True)
except OSError as e:
    print("a: send failed", e.errno, flush=True)
if closed:
    until(lambda: tcp_state(ino) in (0, 7), "saw the server's reset")
s.close()
print("closed", flush=True)
