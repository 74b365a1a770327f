#!/usr/bin/python3
"""silent.py PORT_FILE LOG - a server with a silent one-request limit.

Listens on 127.0.0.1 (a free port, written to PORT_FILE).  On each
connection it reads one request (head and Content-Length body), logs its
request line to LOG (the execution), answers it without a Connection
header, then reads nothing more and closes the connection 100 ms later: a
request arriving meanwhile is acknowledged by its TCP, never read, and
reset by the close (docs/replay.md, "The residual risk")."""
import os
import socket
import sys
import threading
import time

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
log = open(sys.argv[2], "a")
lock = threading.Lock()


def handle(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return c.close()
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    cl = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while len(rest) < (cl[0] if cl else 0):
        d = c.recv(65536)
        if not d:
            return c.close()
        rest += d
    with lock:
        log.write(head.split(b"\r\n")[0].decode("latin-1") + "\n")
        log.flush()
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    time.sleep(0.1)
    c.close()


while True:
    c, _ = ls.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
