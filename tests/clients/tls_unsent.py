#!/usr/bin/env python3
"""tls_unsent.py host port path n cafile - n requests over TLS, each on a
connection of its own (Connection: close), printing after each request's
write whether its bytes left the socket (SIOCOUTQNSD: bytes queued and not
yet sent) and the response's status line.

After the program's own full handshake the request goes at once.  Where
the library resumed a TLS 1.2 session of its own for the program, the
client's Finished went last, unacknowledged, and Nagle held the request
behind the server's delayed ACK (docs/tls.md "Sessions": the first write
pushed).  The count is read right after the write: an event, not a time.
"""
import fcntl
import socket
import ssl
import struct
import sys

SIOCOUTQNSD = 0x894B

host, port, path, n, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
ctx = ssl.create_default_context(cafile=cafile)
for i in range(n):
    raw = socket.create_connection((host, port))
    s = ctx.wrap_socket(raw, server_hostname=host)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
    unsent = struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCOUTQNSD, b"\0" * 4))[0]
    data = b""
    while True:
        got = s.recv(65536)
        if not got:
            break
        data += got
    s.close()
    print("request %d: %s, %s" % (i, "held" if unsent else "sent", data.split(b"\r\n", 1)[0].decode()))
