"""write_after_eof.py [--ca CAFILE] HOST PORT - a program that asks to
close, reads its answer to EOF, then writes a POST on the same socket
anyway, reads, and writes once more (SIGPIPE ignored, as Python does).
Prints what each call gave: the server closed, so the POST must never be
executed, and the program sees what a closed server gives."""
import socket
import ssl
import sys
import time

args = sys.argv[1:]
ctx = None
if args[:1] == ["--ca"]:
    ctx = ssl.create_default_context(cafile=args[1])
    args = args[2:]
host, port = args[0], int(args[1])
s = socket.create_connection((host, port), timeout=10)
if ctx:
    s = ctx.wrap_socket(s, server_hostname="localhost")


def step(name, f):
    try:
        r = f()
        print(name, "ok", r if isinstance(r, int) else len(r), flush=True)
    except Exception as e:  # the same with and without the shim
        print(name, type(e).__name__, flush=True)


s.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
print("first", got.split(b"\r\n")[0].decode(), flush=True)
time.sleep(0.1)  # the server has closed by now (or, with the shim, would have)
post = b"POST /after HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
step("write1", lambda: s.send(post))
time.sleep(0.1)
step("read", lambda: s.recv(65536))
step("write2", lambda: s.send(post))
