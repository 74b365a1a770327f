#!/usr/bin/python3
"""tls_head_rst.py CERT KEY PORT_FILE LOG KILLN [MODE [TLS]] - an HTTPS
keep-alive server that executes each request once its head is read (a
line "EXEC METHOD PATH" in LOG), reads its body and answers 200.

MODE rst (the default): the KILLN-th request of the run is executed on its
head alone and its connection reset (SO_LINGER 0) while the client may
still be writing the body.  A request whose head reached the server must
not be executed again (docs/replay.md "A send that failed").

MODE idle: the connection that served request KILLN-1 is closed (a bare
FIN, no close_notify) 100 ms after that answer, while idle: a request
written on it later meets a closed socket (the server's TCP resets its
first record), was never read, and a replay of it is owed.

TLS: "1.2" caps the server at TLS 1.2 (else 1.3)."""
import os
import socket
import ssl
import struct
import sys
import threading
import time

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
log, killn = sys.argv[4], int(sys.argv[5])
mode = sys.argv[6] if len(sys.argv) > 6 else "rst"
if len(sys.argv) > 7 and sys.argv[7] == "1.2":
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
lock = threading.Lock()
count = [0]
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[3] + ".tmp", sys.argv[3])


def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")


def serve(raw):
    try:
        t = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        raw.close()
        return
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = t.recv(65536)
                if not d:
                    t.close()
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            length = 0
            for h in lines[1:]:
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            with lock:
                count[0] += 1
                me = count[0]
            method, path = lines[0].decode().split()[:2]
            note("EXEC %s %s" % (method, path))
            if me == killn and mode == "rst":
                # (raw is detached by wrap_socket: t holds the socket)
                t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                t.close()
                return
            while len(buf) < length:
                d = t.recv(65536)
                if not d:
                    return
                buf += d
            buf = buf[length:]
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            if me == killn - 1 and mode == "idle":
                time.sleep(0.1)
                t.close()
                return
    except (OSError, ssl.SSLError):
        pass


while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
