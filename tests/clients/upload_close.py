#!/usr/bin/python3
"""upload_close.py - urllib (which asks every request to close) POSTs a
body that is itself an HTTP request, then GETs /next; prints what it read.
tests/replay.bats runs it against tests/servers/early_answer.py without
and with the library: the body must never be executed as a request.

Usage: upload_close.py PORT [N]
"""
import sys
import urllib.error
import urllib.request

port = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
inner = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
for i in range(n):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/upload" % port, data=inner) as r:
            print(i, r.status, r.read())
    except urllib.error.HTTPError as e:
        print(i, e.code, e.read())
    with urllib.request.urlopen("http://127.0.0.1:%s/next" % port) as r:
        print(i, r.status, r.read())
