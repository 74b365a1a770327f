#!/usr/bin/env python3
"""shut_first.py KIND PORT DIR|- - the first request on a reused connection,
then the program's shutdown(SHUT_WR) and a read to EOF (netcat -N,
`printf | socat`), after the server closed the connection idle
(docs/replay.md "After the program's shutdown(SHUT_WR)"), against
tests/servers/idle_cue.py.

GET /warm on its own connection (answered, closed: the library keeps it),
then a new connection; the server is cued to close its idle kept
connections, and where it closed one the FIN is awaited on the socket
connect() gave us (events only: /proc/net/tcp); then the request KIND:
getclose "GET /a" with "Connection: close" (the library rewrites it and
owes the close), get "GET /a" with no Connection header, postclose
"POST /a" with a body and "Connection: close" (never rewritten); then
shutdown(SHUT_WR), and everything read to EOF: the status line, the body,
and how the read ended.  DIR "-": no cue, against a server that closes
the kept connection as the request lands (tests/servers/cases/
late_reset_after1: read, not served, a reset).
"""
import errno
import os
import socket
import sys

from tcp_state import tcp_state, until

kind, port, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
REQS = {
    "getclose": b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "get": b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
    "postclose": b"POST /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 b"Content-Length: 3\r\n\r\nx=1",
}


def cue_close():
    with open(os.path.join(d, "cue"), "w") as f:
        f.write("close\n")
    with open(os.path.join(d, "done")) as f:
        return int(f.readline())


def to_eof(s):
    buf = b""
    while True:
        try:
            got = s.recv(65536)
        except OSError as e:
            return buf, "error " + errno.errorcode.get(e.errno, str(e.errno))
        if not got:
            return buf, "EOF"
        buf += got


def answered(buf):
    """A whole answer framed by Content-Length in buf."""
    head, sep, body = buf.partition(b"\r\n\r\n")
    lengths = [int(h.split(b":")[1]) for h in head.split(b"\r\n")
               if h.lower().startswith(b"content-length:")]
    return sep and lengths and len(body) >= lengths[0]


s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
buf = b""
while not answered(buf):
    got = s.recv(65536)
    if not got:
        break
    buf += got
print("warm:", buf.split(b"\r\n")[0].decode(), flush=True)
s.close()
s = socket.create_connection(("127.0.0.1", port))
ino = os.fstat(s.fileno()).st_ino
if d != "-" and cue_close() > 0:
    until(lambda: tcp_state(ino) != 1, "saw the server's FIN")
try:
    s.sendall(REQS[kind])
    s.shutdown(socket.SHUT_WR)
except OSError as e:
    print("send/shutdown:", errno.errorcode.get(e.errno, str(e.errno)), flush=True)
buf, end = to_eof(s)
head, _, body = buf.partition(b"\r\n\r\n")
print("a:", head.split(b"\r\n")[0].decode() if buf else "-", "|", body.decode().strip(), "|", end)
s.close()
