#!/usr/bin/python3
"""line_client.py PORT - a client of a protocol that is not HTTP, on a port
the library pools (tests/servers/line.py answers each recv with "+<n>").

One connection per way of waiting for the answer to bytes that never end a
line: "HELLO" sent, then the answer awaited by poll, select, epoll or a
blocking recv (5 s at most); then "AUTH x" sent and the socket closed
without waiting.  Prints what each wait saw."""
import select
import socket
import sys

port = int(sys.argv[1])


def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(5)
    return s


for how in ("poll", "select", "epoll", "recv"):
    s = conn()
    s.send(b"HELLO")
    if how == "poll":
        p = select.poll()
        p.register(s, select.POLLIN)
        ready = bool(p.poll(5000))
    elif how == "select":
        ready = bool(select.select([s], [], [], 5)[0])
    elif how == "epoll":
        e = select.epoll()
        e.register(s.fileno(), select.EPOLLIN)
        ready = bool(e.poll(5))
        e.close()
    else:
        ready = True
    try:
        got = s.recv(100) if ready else b"(nothing)"
    except socket.timeout:
        got = b"(timeout)"
    print(how, got)
    s.close()
s = conn()
s.send(b"AUTH x")
s.close()
print("closed")
