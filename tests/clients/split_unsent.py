#!/usr/bin/env python3
"""split_unsent.py host port n [more] - n POSTs, each on a connection of its
own, its head and its body in two writes (no TCP_NODELAY), the response
read by its Content-Length and the connection closed (a keep-alive
request: the library parks it, the next one reuses it).  After each
body's write it prints whether the body left the socket (SIOCOUTQNSD:
bytes queued and not yet sent), then the response's status line and body.

Alone the body goes at once: a fresh connection's server acknowledges the
head at once (its quick-ACK mode), and Nagle holds nothing.  A reused
connection's server delays that ACK (40 ms): the library pushes the body
(docs/cost.md "A request in two writes").  more: the body but its last
byte goes with MSG_MORE, then the count, then the last byte: the program
said more follows, and the kernel holds the body, with the library or
without (never pushed by us).
The count is read right after the write: an event, not a time.
"""
import fcntl
import http.client
import socket
import struct
import sys

SIOCOUTQNSD = 0x894B

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
more = "more" in sys.argv[4:]
body = b"x" * 1000
for i in range(n):
    s = socket.create_connection((host, port))
    s.sendall(b"POST /post/split%d HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
              % (i, host.encode(), len(body)))
    if more:
        s.sendall(body[:-1], socket.MSG_MORE)
    else:
        s.sendall(body)
    unsent = struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCOUTQNSD, b"\0" * 4))[0]
    if more:
        s.sendall(body[-1:])
    res = http.client.HTTPResponse(s)  # read by its Content-Length
    res.begin()
    answer = res.read().decode().strip()
    s.close()
    print("request %d: body %s, HTTP/1.1 %d %s %s" % (i, "held" if unsent else "sent",
                                                     res.status, res.reason, answer))
