#!/usr/bin/python3
"""conn_header.py MODE HOST PORT - what a Python program reads as the
response's Connection header when it asked to close.

MODE straddle: one http.client.HTTPConnection, requests with "Connection:
  close" to nginx's /long/<path> (a 302 whose Location carries the path),
  the path's length chosen so that the Connection value begins k bytes
  before offset 8192, k = 0..11: http.client reads 8 KiB at a time, so the
  value straddles two reads.  A raw probe first finds where the header
  lies (Date and Server have fixed lengths).  Prints per request k, status,
  repr(Connection), will_close: a client that reads keep-alive keeps its
  socket and sends the next request on it itself.
MODE requests: requests.get(/f, Connection: close) three times, prints
  repr(r.headers["Connection"]).
MODE urllib: urllib.request.urlopen(/f) (it sends Connection: close) three
  times, prints repr of the Connection header.
"""
import http.client
import socket
import sys

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
hostport = "%s:%d" % (host, port)


def probe(path):
    s = socket.create_connection((host, port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: identity\r\n"
               "Connection: close\r\n\r\n" % (path, hostport)).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data.index(b"\r\nConnection:") + 2 + len(b"Connection: ")


if mode == "straddle":
    base = probe("/long/x") - 1  # value offset for a path of length 0
    conn = http.client.HTTPConnection(host, port, timeout=10)
    for k in range(12):
        path = "/long/" + "a" * (8192 - k - base - len("/long/"))
        conn.request("GET", path, headers={"Connection": "close"})
        r = conn.getresponse()
        r.read()
        print(k, r.status, repr(r.getheader("Connection")), r.will_close, flush=True)
    conn.close()
elif mode == "requests":
    import requests
    for i in range(3):
        r = requests.get("http://%s/f" % hostport, headers={"Connection": "close"})
        print(i, r.status_code, repr(r.headers.get("Connection")), len(r.content), flush=True)
elif mode == "urllib":
    import urllib.request
    for i in range(3):
        with urllib.request.urlopen("http://%s/f" % hostport) as r:
            print(i, r.status, repr(r.headers.get("Connection")), len(r.read()), flush=True)
else:
    sys.exit("unknown mode " + mode)
