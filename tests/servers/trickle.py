#!/usr/bin/python3
"""trickle.py PORT_FILE - an HTTP/1.1 keep-alive server on 127.0.0.1 whose
answer to any request is a head, then a 30-byte body one byte every 100 ms
(3 s); it closes after the answer when the request asked to.  For reads
whose bound (SO_RCVTIMEO, a signal) ends them before the answer does
(tests/clients/waitall.c)."""
import os
import socket
import sys
import threading
import time


def serve(s):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, _, buf = buf.partition(b"\r\n\r\n")
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n")
            for _ in range(30):
                time.sleep(0.1)
                s.sendall(b"x")
            if b"connection: close" in head.lower():
                return
    except OSError:
        pass
    finally:
        s.close()


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
