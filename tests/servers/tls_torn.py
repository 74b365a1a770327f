#!/usr/bin/python3
"""tls_torn.py CERT KEY PORT_FILE LOG GO_FIFO - tests/servers/torn.py over
TLS: reads a request only when the client says so.

Listens on 127.0.0.1 (a free port, written to PORT_FILE) with a small
receive buffer.  After the handshake, before reading each request it waits
until the connection has bytes (select on the socket, nothing read), then
for a line on GO_FIFO: the client (tests/clients/tls_torn.c) writes it once
its first SSL_write returned, so a TLS record the library would finish by
waiting stays torn until then.  Logs each head as torn.py does (request
line, length and digests with the Connection lines taken out), answers
"ok"; after a request that asked to close it sends close_notify and closes
(docs/hold.md "HTTPS")."""
import hashlib
import os
import select
import socket
import ssl
import sys
import threading

cert, key, port_file, log_path, fifo = sys.argv[1:6]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
log = open(log_path, "a")
lock = threading.Lock()


def handle(raw):
    try:
        c = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ValueError):
        return raw.close()
    buf = b""
    while True:
        if not buf and not c.pending():
            select.select([c], [], [])
            if not raw_has_bytes(c):  # closed: no request
                return c.close()
        with open(fifo, "rb") as f:  # blocks until the client opens it
            f.readline()
        while b"\r\n\r\n" not in buf:
            try:
                d = c.recv(65536)
            except (OSError, ValueError):
                d = b""
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
        ans = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
        c.sendall(ans + (b"Connection: close\r\n" if close else b"") + b"\r\nok\n")
        if close:
            c.settimeout(0)
            try:
                c.unwrap()  # our close_notify (not waiting for the client's)
            except (OSError, ValueError):
                pass
            try:
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return c.close()


def raw_has_bytes(c):
    """the socket has bytes of a request; False: its peer closed, or ended
    the connection with its close_notify (an alert record: outer type 21
    in TLS 1.2; in TLS 1.3 type 23 and 19 bytes, 2 of alert, 1 of type and
    16 of tag, where any request's record is longer), which must not take
    the next client's line on GO_FIFO"""
    s = socket.socket(fileno=os.dup(c.fileno()))
    try:
        head = s.recv(5, socket.MSG_PEEK)
    except OSError:
        return False
    finally:
        s.close()
    if len(head) == 5 and (head[0] == 21 or (head[0] == 23 and int.from_bytes(head[3:5], "big") == 19)):
        return False
    return bool(head)


while True:
    r, _ = ls.accept()
    threading.Thread(target=handle, args=(r,), daemon=True).start()
