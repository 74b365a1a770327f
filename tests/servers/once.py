#!/usr/bin/python3
"""once.py PORT_FILE - a server that answers one request and goes away.

Listens on 127.0.0.1 (a free port, written to PORT_FILE), accepts one
connection, reads one request head, answers it keeping the connection open
("HTTP/1.1 200 OK", Content-Length 3, no Connection header), then closes the
connection and the listener and exits: a server restarted (or stopped) just
after its answer.  The next connect() to the port is refused."""
import os
import socket
import sys

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(8)
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(tmp, sys.argv[1])
c, _ = ls.accept()
buf = b""
while b"\r\n\r\n" not in buf:
    d = c.recv(4096)
    if not d:
        break
    buf += d
c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
ls.close()
c.close()
