#!/usr/bin/python3
"""slow_reader.py PORT_FILE LOG GO_FIFO [CERT KEY] - a server that reads a
request only when the client says so (tests/clients/tls_busy.c, docs/hold.md
"Never wait on a busy connection").

Listens on 127.0.0.1 (a free port, written to PORT_FILE) with a small
receive buffer; over TLS when CERT and KEY are given (the handshake is
made at once).  Each connection: its first bytes are waited for (nothing
read), then a line on GO_FIFO: the client writes it when the server may
read.  A client that never writes it holds the connection unread (the
server thread waits on the fifo).  Then it reads the head and the body
(Content-Length), logs the request line, the body's length and whether it
was whole, answers 200 "ok" with Connection: close if it was, and closes."""
import os
import select
import socket
import ssl
import sys
import threading

port_file, log_path, fifo = sys.argv[1:4]
ctx = None
if len(sys.argv) > 5:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
lock = threading.Lock()


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def handle(raw):
    c = raw
    if ctx:
        try:
            c = ctx.wrap_socket(raw, server_side=True)
        except (OSError, ValueError):
            return raw.close()
    select.select([c], [], [])
    with open(fifo, "rb") as f:  # blocks until the client opens it
        if not f.readline():
            return
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                break
            buf += d
        head, _, body = buf.partition(b"\r\n\r\n")
        want = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                want = int(v)
        got = len(body)
        while got < want:
            d = c.recv(1 << 20)
            if not d:
                break
            got += len(d)
    except OSError:
        head, got, want = buf, 0, 1
    whole = got == want and want > 0
    log("%s body %s" % (head.split(b"\r\n")[0].decode("latin-1"),
                        "whole" if whole else "cut"))
    try:
        if whole:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                      b"Connection: close\r\n\r\nok\n")
        c.close()
    except OSError:
        pass


while True:
    s, _ = ls.accept()
    threading.Thread(target=handle, args=(s,), daemon=True).start()
