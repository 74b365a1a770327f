#!/usr/bin/python3
"""will_close.py HOST PORT N [--ca CA] - what Python's http.client makes
of the answer to a request that asked to close (docs/replay.md, "A
closing answer"): N requests, each on a new HTTPConnection (GET, POST with
a body, alternately), "Connection: close"; prints per request the status,
repr(Connection header), will_close and the body.  A server that says
nothing of closing on keep-alive (Go, Node, http.server) must still be
read as closing once the library kept the connection open.
"""
import http.client
import ssl
import sys

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = None
if len(sys.argv) > 5 and sys.argv[4] == "--ca":
    ctx = ssl.create_default_context(cafile=sys.argv[5])
for i in range(n):
    if ctx:
        c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    else:
        c = http.client.HTTPConnection(host, port, timeout=10)
    if i % 2:
        c.request("POST", "/p%d" % i, body=b"hello", headers={"Connection": "close"})
    else:
        c.request("GET", "/g%d" % i, headers={"Connection": "close"})
    r = c.getresponse()
    print(i, r.status, repr(r.getheader("Connection")), r.will_close, r.read(), flush=True)
    c.close()
