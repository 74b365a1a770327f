#!/usr/bin/env python3
"""held.py PORTFILE LOG - a keep-alive HTTP/1.1 server whose answers to
"/hold?K" wait for a "/release?K" request (on any connection): the client
decides, by an event of its own, when that answer goes out (no timing).

Each accepted connection gets an id (1, 2, ...).  For each request it
appends "<conn id> <request line>" to LOG (before answering), then
answers "HTTP/1.1 200 OK", "Content-Length", "Connection: close" when the
request asked to close (then it closes), and the body "ok <path>\\n".
Listens on 127.0.0.1; the port is written to PORTFILE."""
import os
import socket
import sys
import threading

port_file, log_path = sys.argv[1], sys.argv[2]
lock = threading.Lock()
released = {}  # K -> threading.Event


def release_event(key):
    with lock:
        return released.setdefault(key, threading.Event())


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def handle(s, cid):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                got = s.recv(65536)
                if not got:
                    return
                buf += got
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            line = lines[0].decode("latin-1")
            path = line.split(" ")[1]
            close = any(l.lower().startswith(b"connection:") and b"close" in l.lower()
                        for l in lines[1:])
            log("%d %s" % (cid, line))
            if path.startswith("/release?"):
                release_event(path.split("?", 1)[1]).set()
            if path.startswith("/hold?"):
                key = path.split("?", 1)[1]
                release_event(key).wait()
                with lock:
                    del released[key]  # (one release per hold)
            body = ("ok %s\n" % path).encode()
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s"
                      % (len(body), b"Connection: close\r\n" if close else b"", body))
            if close:
                return
    except OSError as e:
        sys.stderr.write("held: %r\n" % e)
    finally:
        s.close()


l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 0))
l.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % l.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
n = 0
while True:
    c, _ = l.accept()
    n += 1
    threading.Thread(target=handle, args=(c, n), daemon=True).start()
