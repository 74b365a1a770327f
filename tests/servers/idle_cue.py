#!/usr/bin/env python3
"""idle_cue.py PORTFILE DIR LOG - a keep-alive HTTP/1.1 server whose idle
close comes on the client's cue, not on a timer.

Each connection is served request after request: the request line is
logged as "<conn id> <method> <path>" (before the answer), a body framed by
Content-Length is read and dropped, and the answer is "200 OK" with the
path and a newline as its body (Content-Length, no Connection header).

A line "close" on the fifo DIR/cue closes, as an idle timer would
(shutdown: the FIN; the socket then closed: a reset for what comes after),
every connection that has answered at least one request and waits for its
next one; a fresh connection (nothing answered yet) is left alone, as
nginx's keep-alive timer leaves it.  Each close is logged as "<conn id>
closed", then how many were closed is written to the fifo DIR/done: the
client reads it and knows the server's FINs were sent.  Listens on 127.0.0.1; the port is
written to PORTFILE.  (tests/replay.bats "Before the first request".)
"""
import os
import socket
import sys
import threading

port_file, d, log_file = sys.argv[1], sys.argv[2], sys.argv[3]
cue, done = os.path.join(d, "cue"), os.path.join(d, "done")
for f in (cue, done):
    if not os.path.exists(f):
        os.mkfifo(f)

lock = threading.Lock()
idle = {}  # conn id -> socket: answered, waiting for the next request
ids = [0]


def log(line):
    with lock:
        with open(log_file, "a") as f:
            f.write(line + "\n")


def handle(s, cid):
    buf, answered = b"", 0
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                if answered and not buf:
                    with lock:
                        idle[cid] = s
                got = s.recv(65536)
                with lock:
                    idle.pop(cid, None)
                if not got:
                    return
                buf += got
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, path = lines[0].split(b" ")[:2]
            length = 0
            for h in lines[1:]:
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            while len(buf) < length:
                got = s.recv(65536)
                if not got:
                    return
                buf += got
            buf = buf[length:]
            log("%d %s %s" % (cid, method.decode(), path.decode()))
            body = path + b"\n"
            if not buf:
                # idle from the answer on: a library hands the connection
                # out with no byte on the wire, and the client's cue may
                # come before this thread is back in its recv
                with lock:
                    idle[cid] = s
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            answered += 1
    except OSError as e:
        sys.stderr.write("idle_cue: %d: %r\n" % (cid, e))
    finally:
        s.close()


def cues():
    while True:
        with open(cue) as f:
            for line in f:
                if line.strip() != "close":
                    continue
                with lock:
                    gone = list(idle.items())
                    idle.clear()
                closed = 0
                for cid, s in gone:
                    try:
                        # a client that closed it already (its FIN is in)
                        # is not idle: its thread has not seen it yet
                        if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                            continue
                    except BlockingIOError:
                        pass
                    except OSError:
                        continue
                    try:
                        s.shutdown(socket.SHUT_RDWR)  # the FIN; its recv returns
                    except OSError:
                        pass
                    log("%d closed" % cid)
                    closed += 1
                with open(done, "w") as w:
                    w.write("%d\n" % closed)


threading.Thread(target=cues, daemon=True).start()
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % listener.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
while True:
    c, _ = listener.accept()
    ids[0] += 1
    threading.Thread(target=handle, args=(c, ids[0]), daemon=True).start()
