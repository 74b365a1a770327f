#!/usr/bin/python3
"""tls_nb_replay.py PORT CA - two HTTPS requests, one connection each: the
first blocking, read to its end and closed (the library pools it); the
second on a non-blocking socket, its handshake, write and read each waited
for in select() up to 3 s (the program's own bound).  Prints how each
ended.  With tests/servers/tls_mute.py the second rides the pooled
connection, which the server closes under it, and a replay's fresh
handshake is never answered (docs/replay.md "The program's bounds")."""
import select
import socket
import ssl
import sys

port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)


def req(path):
    return ("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode()


s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
s.sendall(req("/1"))
buf = b""
while not buf.endswith(b"ok\n"):
    d = s.recv(4096)
    if not d:
        break
    buf += d
print("r1:", buf.split(b"\r\n")[0].decode())
s.close()


def wait(sock, err):
    r, w = ([sock], []) if isinstance(err, ssl.SSLWantReadError) else ([], [sock])
    return bool(select.select(r, w, [], 3)[0 if r else 1])


raw = socket.create_connection(("127.0.0.1", port))
raw.setblocking(False)
s = ctx.wrap_socket(raw, server_hostname="localhost", do_handshake_on_connect=False)
try:
    while True:
        try:
            s.do_handshake()
            break
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError) as e:
            if not wait(s, e):
                raise TimeoutError("handshake")
    s.send(req("/2"))
    while True:
        try:
            d = s.recv(4096)
            print("r2: read", d.split(b"\r\n")[0].decode() if d else "EOF")
            break
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError) as e:
            if not wait(s, e):
                raise TimeoutError("read")
except (OSError, ssl.SSLError) as e:
    print("r2: failed:", type(e).__name__)
