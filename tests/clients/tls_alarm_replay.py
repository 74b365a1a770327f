#!/usr/bin/python3
"""tls_alarm_replay.py PORT CA - two HTTPS requests on blocking sockets,
one connection each: the first read to its end and closed (the library
pools it); then signal.alarm(2), its handler raising TimeoutError (CPython
installs it without SA_RESTART and makes the call again only when the
handler returns), and the second request.  Prints "r1: <status line>",
then "r2: <status line>" or "r2: TimeoutError in <handshake|write|read>",
and "within 5 s" or "after N s".  With tests/servers/tls_mute.py the
second rides the pooled connection, which the server closes under it,
and a replay's fresh handshake is never answered; alone the program's own
handshake waits, and the alarm ends it (docs/hold.md "Signals during the
library's waits")."""
import signal
import socket
import ssl
import sys
import time

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


def on_alarm(sig, frame):
    raise TimeoutError()


signal.signal(signal.SIGALRM, on_alarm)
t0 = time.monotonic()
signal.alarm(2)
phase = "handshake"
try:
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    phase = "write"
    s.sendall(req("/2"))
    phase = "read"
    d = s.recv(4096)
    print("r2:", d.split(b"\r\n")[0].decode() if d else "EOF")
except TimeoutError:
    print("r2: TimeoutError in", phase)
except OSError as e:
    print("r2: %s in %s" % (type(e).__name__, phase))
signal.alarm(0)
took = time.monotonic() - t0
print("within 5 s" if took < 5 else "after %d s" % took)
