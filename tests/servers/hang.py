#!/usr/bin/python3
"""hang.py PORT_FILE - a server that answers one request, then stops
accepting (its accept queue filled, so a new connection's SYN is dropped
and connect() hangs) and resets the first connection when the next request
arrives on it.  For a replay that needs a fresh connection it cannot get:
the program's own bounds must end it (docs/replay.md)."""
import os
import socket
import struct
import sys
import time

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(0)
port = ls.getsockname()[1]


def head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            return None
        buf += d
    return buf


with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % port)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, _ = ls.accept()
closing = b"connection: close" in (head(c) or b"").lower()
# fill the accept queue: later SYNs are dropped
fillers = []
for _ in range(4):
    f = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    f.setblocking(False)
    try:
        f.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    fillers.append(f)
time.sleep(0.2)
c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n%s\r\nok\n"
          % (b"Connection: close\r\n" if closing else b""))
if not closing and head(c) is not None:  # the next request on it: reset, unanswered
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
time.sleep(4)
