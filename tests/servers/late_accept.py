#!/usr/bin/env python3
"""late_accept.py PORTFILE CUE LOG - an HTTP server whose accept queue is
full until the file CUE exists: a client's SYN is dropped (its blocking
connect waits, and the kernel sends the SYN again about 1 s later), then
the queue is emptied and every later connection is answered: one
request each, "<n> <request line>" appended to LOG, "HTTP/1.1 200 OK",
"Connection: close", the body "ok\\n".  Listens on 127.0.0.1 (backlog 0),
the port written to PORTFILE; serves until killed."""
import os
import socket
import sys
import time

port_file, cue, log_path = sys.argv[1:4]
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(0)
fillers = []
for i in range(3):  # the accept queue full: later SYNs are dropped
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(ls.getsockname())
    except BlockingIOError:
        pass
    fillers.append(c)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
while not os.path.exists(cue):
    time.sleep(0.01)
ls.setblocking(False)
while True:  # the fillers' connections out of the queue
    try:
        ls.accept()[0].close()
    except BlockingIOError:
        break
for c in fillers:
    c.close()
ls.setblocking(True)
n = 0
while True:
    s, _ = ls.accept()
    n += 1
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    with open(log_path, "a") as f:
        f.write("%d %s\n" % (n, got.split(b"\r\n", 1)[0].decode("latin-1")))
    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    s.close()
