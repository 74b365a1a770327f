#!/usr/bin/env python3
"""gate_cue.py PORTFILE DIR LOG - tests/servers/idle_cue.py with a gate: a
keep-alive HTTP/1.1 server whose new connections can be held back, so a
fresh connect() is not complete within poll(0), as with any server that
is not on this host (docs/replay.md "Before the first request").

Each connection is served request after request: the request line is
logged as "<conn id> <method> <path>" (before the answer), a body framed by
Content-Length is read and dropped, and the answer is "200 OK" with the
path and a newline as its body and "X-Conn: <conn id>" (Content-Length, no
Connection header).

Lines on the fifo DIR/cue, each answered on the fifo DIR/done once done:
- "pause": stop accept()ing and fill the accept queue (listen(0): one
  connection waiting fills it; a filler is connected unless the queue is
  full already, and awaited in /proc/net/tcp): a new SYN is dropped and
  the connect that sent it is retried by the kernel a second later.
  Answered "paused".
- "resume": accept() again.  Answered "resumed".
- "close": as idle_cue.py, FIN every connection that has answered at least
  one request and waits for its next one, each logged "<conn id> closed";
  answered how many were closed.
Listens on 127.0.0.1; the port is written to PORTFILE.
"""
import select
import socket
import sys
import threading

from cue_server import close_idle, fifos, lock, logger, plain_requests, publish, serve_cues

port_file, d, log_file = sys.argv[1], sys.argv[2], sys.argv[3]
cue, done = fifos(d)
log = logger(log_file)
gate = threading.Condition(lock)
paused = [False]
idle = {}  # conn id -> socket: answered, waiting for the next request
ids = [0]
fillers = []


def handle(s, cid):
    try:
        for method, path, rest in plain_requests(s, cid, idle):
            log("%d %s %s" % (cid, method, path))
            body = path.encode() + b"\n"
            s.sendall(b"HTTP/1.1 200 OK\r\nX-Conn: %d\r\nContent-Length: %d\r\n\r\n%s"
                      % (cid, len(body), body))
    except OSError as e:
        sys.stderr.write("gate_cue: %d: %r\n" % (cid, e))
    finally:
        s.close()


def queue_full(port):
    """The listener's accept queue is full: /proc/net/tcp shows a listening
    socket's waiting connections as rx_queue, its backlog as tx_queue."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if int(p[1].split(":")[1], 16) == port and p[3] == "0A":
                tx, rx = (int(x, 16) for x in p[4].split(":"))
                return rx > tx
    return False


def pause(port):
    with lock:
        paused[0] = True  # no accept() begins after this
    while not queue_full(port):
        x = socket.socket()
        x.setblocking(False)
        try:
            x.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(x)
        # room was left: it connects (into the queue)
        select.select([], [x], [])


def answer(line, port):
    if line == "pause":
        pause(port)
        return "paused"
    if line == "resume":
        with lock:
            paused[0] = False
            gate.notify_all()
        return "resumed"
    if line == "close":
        return "%d" % close_idle(idle, log)
    return None


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(0)
listener.setblocking(False)
port = publish(listener, port_file)
threading.Thread(target=serve_cues, args=(cue, done, lambda line: answer(line, port)),
                 daemon=True).start()
while True:
    select.select([listener], [], [])
    with lock:
        while paused[0]:
            gate.wait()
        try:
            c, _ = listener.accept()
        except BlockingIOError:
            continue
    c.setblocking(True)
    ids[0] += 1
    threading.Thread(target=handle, args=(c, ids[0]), daemon=True).start()
