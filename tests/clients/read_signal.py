#!/usr/bin/python3
"""read_signal.py HOST PORT SECONDS - one GET asking to close, read to EOF,
with one SIGALRM (a handler that does nothing) SECONDS after the request:
the response's bytes and EOF, as the program reads them."""
import signal
import socket
import sys

signal.signal(signal.SIGALRM, lambda *a: None)
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[3]))
data = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    data += d
# a timer still running at exit would fire after Python's finalization put
# SIGALRM back to its default (the process killed, status 142): alone the
# EOF often comes before the timer
signal.setitimer(signal.ITIMER_REAL, 0)
sys.stdout.write(data.decode("latin-1"))
print("[EOF]")
