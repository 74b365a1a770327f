#!/usr/bin/python3
"""unread.py PORT_FILE LOG [late] - a server with little room (SO_RCVBUF 1024, TCP_MAXSEG 536 on
its sockets) that answers one request, then resets that connection when the
next request's head has arrived on it (whole), and never reads from any
later connection, holding it open 20 s.  A replay's copy of a big request
then waits for room on its fresh connection, as the program's own write
would alone: the program's signals must end that wait (docs/hold.md
"Signals during the library's waits").  LOG gets a line per request head
read: "conn N <request line>".  late: a later connection is read after
4 s (its head whole, logged "conn N head of B bytes") and answered.
body: every connection's requests heads are read, never a body after
them: the kept connection's second head read, then silence."""
import os
import socket
import struct
import sys
import threading
import time

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
# a small segment: the client's send buffer grows with its window in
# segments (loopback's 64 KiB ones would take a whole request)
ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
ls.bind(("127.0.0.1", 0))
ls.listen(8)
port = ls.getsockname()[1]
log = open(sys.argv[2], "a", buffering=1)


late = len(sys.argv) > 3 and sys.argv[3] == "late"
body = len(sys.argv) > 3 and sys.argv[3] == "body"


def head(c, n):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return None
        buf += d
    log.write("conn %d %s\n" % (n, buf.split(b"\r\n")[0].decode()))
    return buf


def first(c):
    closing = b"connection: close" in (head(c, 1) or b"").lower()
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n%s\r\nok\n"
              % (b"Connection: close\r\n" if closing else b""))
    if not closing and head(c, 1) is not None:  # the next: reset, unanswered
        if body:  # (body: its head read, never its body)
            time.sleep(20)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % port)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, _ = ls.accept()
threading.Thread(target=first, args=(c,), daemon=True).start()


def later(c, n):
    if body:
        head(c, n)
    if not late:
        if not body:
            log.write("conn %d accepted, never read\n" % n)
        time.sleep(20)
        return
    time.sleep(4)
    h = head(c, n)
    log.write("conn %d head of %d bytes\n" % (n, len(h or b"")))
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    c.close()


n = 1
ls.settimeout(20)
while True:
    try:
        c, _ = ls.accept()
    except socket.timeout:
        break
    n += 1
    threading.Thread(target=later, args=(c, n), daemon=True).start()
time.sleep(20)
