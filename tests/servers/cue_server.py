"""What the cued keep-alive servers share (idle_cue.py, gate_cue.py,
tls_idle_cue.py): their fifos, their log, the request reader, the idle
close of plain connections, the cue loop and the published port.  Each
step waits for an event, never for a time (tests/replay.bats, "Before the
first request").
"""
import os
import socket
import threading

lock = threading.Lock()


def fifos(d):
    """The fifos DIR/cue (the client's lines) and DIR/done (the answers)."""
    paths = os.path.join(d, "cue"), os.path.join(d, "done")
    for f in paths:
        if not os.path.exists(f):
            os.mkfifo(f)
    return paths


def logger(log_file):
    def log(line):
        with lock, open(log_file, "a") as f:
            f.write(line + "\n")
    return log


def read_request(recv, buf, wait):
    """One request from buf and recv(): (method, path, the bytes after it),
    or None at the end.  wait() is called before each recv() with nothing
    buffered (the connection is idle); it returns False to end it.  A body
    framed by Content-Length is read and dropped."""
    while b"\r\n\r\n" not in buf:
        if not buf and not wait():
            return None
        got = recv()
        if not got:
            return None
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
        got = recv()
        if not got:
            return None
        buf += got
    return method.decode(), path.decode(), buf[length:]


def plain_requests(s, cid, idle):
    """The requests of plain connection s (conn id cid), one by one:
    (method, path, the bytes after it).  While it waits for a request after
    its first answer (the generator resumed: the caller answered), s is in
    idle (conn id -> socket), where close_idle finds it."""
    buf, answered = b"", False

    def wait():
        if answered:
            with lock:
                idle[cid] = s
        return True

    def recv():
        got = s.recv(65536)
        with lock:
            idle.pop(cid, None)
        return got

    while True:
        req = read_request(recv, buf, wait)
        if req is None:
            return
        buf = req[2]
        yield req
        answered = True


def close_idle(idle, log):
    """The idle timer's close of plain connections: FIN every socket in
    idle (conn id -> socket: answered, waiting for its next request), each
    logged "<conn id> closed"; how many were closed."""
    with lock:
        gone = list(idle.items())
        idle.clear()
    closed = 0
    for cid, s in gone:
        try:
            # a client that closed it already (its FIN is in) is not
            # idle: its thread has not seen it yet
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
    return closed


def serve_cues(cue, done, answer):
    """Forever: each line on the fifo cue given to answer(line); what it
    returns (not None) is written, one line, to the fifo done.

    cue is opened once, for reading and writing: with a writer of our own
    it never reads EOF.  Opened for reading alone, each client's close was
    an EOF, and a client that opened it between our read of that EOF and
    our close wrote its line into a pipe about to be dropped: the line was
    lost and both sides waited for ever."""
    with open(os.open(cue, os.O_RDWR)) as f:
        for line in f:
            said = answer(line.strip())
            if said is not None:
                with open(done, "w") as w:
                    w.write(said + "\n")


def publish(listener, port_file):
    """The listener's port, written to port_file whole (a rename)."""
    port = listener.getsockname()[1]
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(port_file + ".tmp", port_file)
    return port
