#!/usr/bin/python3
"""upload_keepalive.py - http.client, one keep-alive connection per request
(its default: no Connection header), N times: a POST of a small JSON
body, then a GET /next on a new connection; prints each status and
body.  tests/replay.bats
runs it against tests/servers/early_answer.py without and with the
library: a server that answers the POST before reading its body keeps the
body in its buffer (alone it dies with the connection), and the library
must not hand that connection to the next request, which the server would
read behind those bytes (docs/replay.md "A request with a body answered early").

Usage: upload_keepalive.py PORT [N]
"""
import http.client
import sys

port = int(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
inner = b'{"user": "x"}'
for i in range(n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/upload", body=inner)
    r = c.getresponse()
    print(i, r.status, r.read())
    c.close()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/next")
    r = c.getresponse()
    print(i, r.status, r.read())
    c.close()
