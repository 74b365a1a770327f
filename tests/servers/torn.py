#!/usr/bin/python3
"""torn.py PORT_FILE LOG GO_FIFO - a server that reads a request only when
the client says so.

Listens on 127.0.0.1 (a free port, written to PORT_FILE) with a small
receive buffer, so that a large request head fills it.  Before reading each
request it waits until the connection has bytes (select, nothing read),
then for a line on GO_FIFO: the client writes it once its send loop has met
EAGAIN, a short count or EINTR (or sent its whole request), so a request
head the library would send whole by waiting stays torn until then.  Then
it reads the head, logs its request line, its length and digests of it
(of its lower-case form too) with its Connection lines taken out (what a
rewrite to keep-alive may change), and answers "ok"; it closes after a request that asked to close
(HTTP/1.0 without keep-alive, or Connection: close), else reads the next
(docs/hold.md, "A head the socket took in part")."""
import hashlib
import os
import select
import socket
import sys
import threading

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
log = open(sys.argv[2], "a")
fifo = sys.argv[3]
lock = threading.Lock()


def handle(c, n):
    buf = b""
    while True:
        if not buf:
            select.select([c], [], [])
            if not c.recv(1, socket.MSG_PEEK):  # closed: no request
                return c.close()
        with open(fifo, "rb") as f:  # blocks until the client opens it
            f.readline()
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return c.close()
            buf += d
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        kept = [l for l in lines if not l.lower().startswith(b"connection:")]
        conn = b",".join(l.split(b":", 1)[1].strip().lower() for l in lines
                         if l.lower().startswith(b"connection:"))
        close = b"close" in conn or (lines[0].endswith(b"HTTP/1.0") and b"keep-alive" not in conn)
        with lock:
            k = b"\r\n".join(kept)
            log.write("%s len=%d isha=%s sha=%s\n" % (lines[0].decode("latin-1"), len(k),
                      hashlib.sha1(k.lower()).hexdigest()[:12], hashlib.sha1(k).hexdigest()[:12]))
            log.flush()
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        if close:
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):
                pass
            return c.close()


n = 0
while True:
    c, _ = ls.accept()
    n += 1
    threading.Thread(target=handle, args=(c, n), daemon=True).start()
