#!/usr/bin/env python3
"""hold_cue.py PORTFILE DIR LOG - tests/servers/idle_cue.py whose new
connections are not read until the client's cue: a server that is slow to
take a large request, so a replay's copy of it cannot all go at once
(docs/replay.md "The copy's rest").

Every connection after the first is held: nothing is read from it until
the cue "release", and has a small receive buffer (2 KB) and segments
(536 bytes: the client's kernel grows its send buffer by them), so the client's
kernel takes a few KB of a large request and no more while it is held.
Each request is logged, before its answer, as "<conn id> <method> <path>
headers <n> cookie <bytes> body <bytes> <ok|CORRUPT>" (its head's header
lines, its Cookie header's length, its body and whether the body is all
"b"); a head that is no request (its bytes mixed with another's) as
"<conn id> bad head <first 30 bytes>", and the connection is closed.  The
answer is "200 OK" with the path and a newline as its body.

Lines on the fifo DIR/cue, each answered on the fifo DIR/done:
- "close": as idle_cue.py, FIN every connection that has answered at
  least one request and waits for its next one, each logged "<conn id>
  closed"; answered how many.
- "release": the held connections are read from now on; answered
  "released".
Listens on 127.0.0.1; the port is written to PORTFILE.  (tests/replay.bats
"The copy's rest".)
"""
import socket
import sys
import threading

from cue_server import close_idle, fifos, lock, logger, publish, serve_cues

port_file, d, log_file = sys.argv[1], sys.argv[2], sys.argv[3]
cue, done = fifos(d)
log = logger(log_file)
idle = {}  # conn id -> socket: answered, waiting for the next request
released = threading.Event()
ids = [0]


def head_facts(head):
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None
    fields = {}
    for line in lines[1:]:
        k, sep, v = line.partition(b":")
        if not sep:
            return None
        fields[k.strip().lower()] = v.strip()
    return parts[0].decode(), parts[1].decode(), len(lines) - 1, fields


def handle(s, cid):
    if cid > 1:
        released.wait()
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                got = s.recv(65536)
                with lock:
                    idle.pop(cid, None)
                if not got:
                    return
                buf += got
            head, _, buf = buf.partition(b"\r\n\r\n")
            facts = head_facts(head)
            if facts is None:
                log("%d bad head %r" % (cid, head[:30]))
                return
            method, path, n, fields = facts
            length = int(fields.get(b"content-length", b"0"))
            while len(buf) < length:
                got = s.recv(65536)
                if not got:
                    break
                buf += got
            body, buf = buf[:length], buf[length:]
            log("%d %s %s headers %d cookie %d body %d %s" % (
                cid, method, path, n, len(fields.get(b"cookie", b"")), len(body),
                "ok" if body == b"b" * length else "CORRUPT"))
            answer = path.encode() + b"\n"
            if not buf:
                # idle from the answer on: the client's cue may come
                # before this thread is back in its recv (idle_cue.py)
                with lock:
                    idle[cid] = s
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
    except OSError as e:
        sys.stderr.write("hold_cue: %d: %r\n" % (cid, e))
    finally:
        s.close()


def answer(line):
    if line == "close":
        return "%d" % close_idle(idle, log)
    if line == "release":
        released.set()
        return "released"
    return None


threading.Thread(target=serve_cues, args=(cue, done, answer), daemon=True).start()
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
publish(listener, port_file)
while True:
    c, _ = listener.accept()
    ids[0] += 1
    if ids[0] == 1:  # (the ones accepted later: the first keeps the default)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    threading.Thread(target=handle, args=(c, ids[0]), daemon=True).start()
