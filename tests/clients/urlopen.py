#!/usr/bin/python3
"""urlopen.py URL COUNT - COUNT times urllib.request.urlopen(URL).read(),
printing each body.  urllib sends "Connection: close" on a new connection."""
import sys
import urllib.request

url, count = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
for _ in range(count):
    with urllib.request.urlopen(url) as r:
        out.write(r.read())
out.flush()
