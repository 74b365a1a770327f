#!/usr/bin/python3
"""raw.py - one TCP connection per request, raw bytes out, read to EOF.

Usage: raw.py HOST PORT N PAYLOAD [--shutdown] [--sleep SECONDS] [--fork]
              [--recv BYTES] [--peek] [--resets]

PAYLOAD is sent in one sendall() with the escapes \\r \\n \\xHH expanded and
{N} replaced by the request number; a {SEND} in it ends one sendall() and
starts the next (two writes, no read between).  --recv: read at most this
many bytes per recv() (default 65536).  --peek: each read is a
recv(MSG_PEEK) whose bytes are printed, then a recv() of as many.
--resets: a reset (or EPIPE) ends that request with a line on stderr,
"raw.py: reset on request <i>", and the next request follows.  --shutdown: shutdown(SHUT_WR) after
sending.  --sleep: pause between requests.  --fork: after half of the
requests, fork; the child makes N requests with "child" in {who}, the parent
waits for it, then makes the rest with "parent" (before the fork: "parent").
Everything read is printed; each response is preceded by "== <who> <i>".
"""
import os
import socket
import sys
import time

args = sys.argv[1:]
host, port, n, payload = args[0], int(args[1]), int(args[2]), args[3]
shut = "--shutdown" in args
sleep = float(args[args.index("--sleep") + 1]) if "--sleep" in args else 0
fork = "--fork" in args
rsize = int(args[args.index("--recv") + 1]) if "--recv" in args else 65536
peek = "--peek" in args
resets = "--resets" in args
payload = payload.encode().decode("unicode_escape").encode("latin-1")
out = sys.stdout.buffer


def one(who, i):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.connect((host, port))
    try:
        exchange(s, who, i)
    except (ConnectionResetError, BrokenPipeError):
        if not resets:
            raise
        sys.stderr.write("raw.py: reset on request %d\n" % i)
    s.close()
    out.flush()


def exchange(s, who, i):
    data = payload.replace(b"{N}", str(i).encode()).replace(b"{who}", who.encode())
    for part in data.split(b"{SEND}"):
        s.sendall(part)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out.write(b"== %s %d\n" % (who.encode(), i))
    while True:
        if peek:
            b = s.recv(rsize, socket.MSG_PEEK)
            if b:
                s.recv(len(b))
        else:
            b = s.recv(rsize)
        if not b:
            break
        out.write(b)


for i in range(n):
    if fork and i == n // 2:
        pid = os.fork()
        if pid == 0:
            for j in range(n):
                one("child", j)
            os._exit(0)
        os.waitpid(pid, 0)
    one("parent", i)
    if sleep:
        time.sleep(sleep)
