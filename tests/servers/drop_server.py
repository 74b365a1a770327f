#!/usr/bin/env python3
"""drop_server.py PORTFILE LOG [rst2] - a keep-alive HTTP/1.1 server with a
control port, for tests/sigio.bats.

HTTP port: answers every request with "hello world\n" (Content-Length),
logs "<connection id> <target>"; with rst2, a connection's second request
is answered with a reset instead (logged "<id> <target> reset").
Control port: a connection there makes the server close every HTTP
connection that served a request and is idle (a FIN, as an idle timer
would), then answer "dropped\n" and close: the client knows the FINs went
out before its answer.  PORTFILE gets "HTTP_PORT CONTROL_PORT".
"""
import socket
import struct
import sys
import threading

portfile, logpath = sys.argv[1], sys.argv[2]
rst2 = len(sys.argv) > 3 and sys.argv[3] == "rst2"
lock = threading.Lock()
idle = {}  # connection id -> socket, served a request and waiting for the next
next_id = [1]
log = open(logpath, "a", buffering=1)


def handle(c, cid):
    buf = b""
    served = 0
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                with lock:
                    idle.pop(cid, None)
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            target = head.split(b" ")[1].decode() if b" " in head else "?"
            if rst2 and served == 1:
                log.write("%d %s reset\n" % (cid, target))
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            served += 1
            with lock:
                idle[cid] = c
            # logged before the answer: a client that has its answer and
            # exits finds its request in the log (a test that empties the
            # log between two runs never finds a late line of the first)
            log.write("%d %s\n" % (cid, target))
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello world\n")
    except OSError:
        pass
    finally:
        with lock:
            idle.pop(cid, None)
        c.close()


def serve_http(s):
    while True:
        c, _ = s.accept()
        with lock:
            cid = next_id[0]
            next_id[0] += 1
        threading.Thread(target=handle, args=(c, cid), daemon=True).start()


def serve_control(s):
    while True:
        c, _ = s.accept()
        with lock:
            for conn in idle.values():
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            idle.clear()
        c.sendall(b"dropped\n")
        c.close()


def listener():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s


http, control = listener(), listener()
threading.Thread(target=serve_control, args=(control,), daemon=True).start()
with open(portfile + ".tmp", "w") as f:
    f.write("%d %d\n" % (http.getsockname()[1], control.getsockname()[1]))
import os
os.rename(portfile + ".tmp", portfile)
serve_http(http)
