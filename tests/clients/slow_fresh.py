#!/usr/bin/env python3
"""slow_fresh.py MODE PORT DIR - a connection whose fresh connect is slow,
before its first request (docs/replay.md "Before the first request", "The
program's bounds"), against tests/servers/gate_cue.py.

GET /warm on its own connection (the library keeps it), then a new
connection (the library hands the kept one out); the server is cued to
hold new connections back ("pause": a new SYN is dropped), and, but in
MODE idem, to close its idle kept connections ("close"; where it closed
one, its FIN awaited in /proc/net/tcp).  Then, by MODE:
- nbrecv: a non-blocking recv() (alone: EAGAIN); the server resumed; the
  request sent and answered on the blocking socket;
- epoll0: the same, after an epoll_wait(0) for EPOLLIN (alone: nothing);
- poll0: poll(0) of the blocking socket for POLLIN (alone: nothing), and
  a recv() if it said readable; the server resumed; the request;
- dontwait: the same with recv(MSG_DONTWAIT) on the blocking socket;
- dontwait_send: send(MSG_DONTWAIT) of the POST on the blocking socket,
  poll for POLLOUT where it says EAGAIN (alone it does not), and a thread
  resumes the server once this one waits (as below);
- asyncio: the same through asyncio's streams (through_asyncio);
- split_post: as timeout_post, the POST's head written in two sendall()s;
- timeout_post, idem: the socket has a timeout (O_NONBLOCK underneath);
  a thread resumes the server once this one waits in a syscall (the send,
  or the answer; events only: /proc/self/task/TID/syscall); POST.
What each step returned is printed, then the answer's status line and
body, and whether it came on the connection /warm was served on or on
its own.
"""
import os
import select
import socket
import sys
import threading

from tcp_state import tcp_state, sleeping_in, until

mode, port, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
WAITS = {0, 7, 23, 45, 232, 270, 271, 281}  # read poll select recvfrom epoll_wait pselect6 ppoll epoll_pwait


def answer(s):
    buf = b""
    while True:
        got = s.recv(65536)
        if not got:
            return "EOF after %d bytes" % len(buf), None
        buf += got
        head, sep, body = buf.partition(b"\r\n\r\n")
        if sep:
            lines = head.split(b"\r\n")
            hdr = dict(line.split(b": ", 1) for line in lines[1:])
            if len(body) >= int(hdr[b"Content-Length"]):
                return "%s | %s" % (lines[0].decode(), body.decode().strip()), hdr[b"X-Conn"]


def cue(c):
    with open(os.path.join(d, "cue"), "w") as f:
        f.write(c + "\n")
    with open(os.path.join(d, "done")) as f:
        # to its end: the server's writer closed, so the next cue's
        # reader never opens the fifo while this answer's writer is open
        return f.read().strip()


async def through_asyncio():
    """asyncio's streams: the connection made, the gate shut and the idle
    close cued, each from a thread (asyncio.to_thread: the loop waits in
    epoll_wait for the thread, the connection's read registered: asyncio
    reads whenever readable), the gate opened, the POST written and its
    answer read."""
    import asyncio
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ino = os.fstat(writer.get_extra_info("socket").fileno()).st_ino
    print("pause:", await asyncio.to_thread(cue, "pause"), flush=True)
    if await asyncio.to_thread(cue, "close") != "0":
        await asyncio.to_thread(until, lambda: tcp_state(ino) != 1, "saw the server's FIN")
    print("resume:", await asyncio.to_thread(cue, "resume"), flush=True)
    writer.write(b"POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        print("answer:", head.split(b"\r\n")[0].decode(), "|",
              (await reader.readexactly(5)).decode().strip(), flush=True)
    except Exception as e:
        print("request:", repr(e), flush=True)
    writer.close()


w = socket.create_connection(("127.0.0.1", port))
w.sendall(b"GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
got, warm_conn = answer(w)
print("warm:", got, flush=True)
w.close()
if mode == "asyncio":
    import asyncio
    asyncio.run(through_asyncio())
    sys.exit(0)
timed = mode in ("timeout_post", "idem", "split_post")
s = socket.create_connection(("127.0.0.1", port), timeout=20 if timed else None)
ino = os.fstat(s.fileno()).st_ino
print("pause:", cue("pause"), flush=True)
if mode != "idem" and cue("close") != "0":
    until(lambda: tcp_state(ino) != 1, "saw the server's FIN")
if mode == "nbrecv":
    s.setblocking(False)
    try:
        print("recv:", s.recv(4096), flush=True)
    except BlockingIOError as e:
        print("recv:", repr(e), flush=True)
    s.setblocking(True)
elif mode == "dontwait":
    try:
        print("recv:", s.recv(4096, socket.MSG_DONTWAIT), flush=True)
    except BlockingIOError as e:
        print("recv:", repr(e), flush=True)
elif mode == "epoll0":
    s.setblocking(False)
    ep = select.epoll()
    ep.register(s, select.EPOLLIN)
    print("epoll(0):", ep.poll(0), flush=True)
    try:
        print("recv:", s.recv(4096), flush=True)
    except BlockingIOError as e:
        print("recv:", repr(e), flush=True)
    s.setblocking(True)
elif mode == "poll0":
    p = select.poll()
    p.register(s, select.POLLIN)
    ev = p.poll(0)
    print("poll(0):", ev, flush=True)
    if ev:
        print("recv:", s.recv(4096), flush=True)
resumer = timed or mode == "dontwait_send"
if resumer:
    me = threading.get_native_id()
    # (dontwait_send: the program's own select, never the library's poll)
    waits = {23, 270} if mode == "dontwait_send" else WAITS
    finished = threading.Event()
    sent = threading.Event()  # dontwait_send: the request is out (alone, at once)
    def resume():
        # (finished: alone, or the old library, the request may end
        # without a wait; the server resumed all the same)
        until(lambda: finished.is_set() or sent.is_set() or sleeping_in(me) in waits,
              "saw the request's call wait")
        cue("resume")
    t = threading.Thread(target=resume)
    t.start()
else:
    print("resume:", cue("resume"), flush=True)
request = b"POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
try:
    if mode == "split_post":
        # the head in two writes: the library holds the first (a head not
        # yet whole), and the probe comes at the second
        s.sendall(request[:20])
        request = request[20:]
    if mode == "dontwait_send":
        # as an event loop writes: never waiting in the send, in poll instead
        while request:
            try:
                request = request[s.send(request, socket.MSG_DONTWAIT):]
            except BlockingIOError:
                select.select([], [s], [])
        # (alone the server may hold the connection itself in its queue:
        # its answer needs the gate open)
        sent.set()
    s.sendall(request)
    got, conn = answer(s)
    print("answer:", got, flush=True)
    if conn:
        print("on:", "the /warm connection" if conn == warm_conn else "its own connection",
              flush=True)
except OSError as e:
    print("request:", repr(e), flush=True)
if resumer:
    finished.set()
    t.join()
s.close()
