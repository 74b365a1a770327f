#!/usr/bin/env python3
"""before_first.py MODE PORT DIR ROUNDS - tests/clients/before_first.c in
Python (docs/replay.md "Before the first request"), against
tests/servers/idle_cue.py.

MODE recv: a thread's sock.recv() waits before the main thread's sendall()
of the request; osfork: os.fork() right after connect(), before the
request (the child exits).  Each
round: GET /warm on its own connection, then a new connection; the server
is cued to close its idle kept connections, and (where it closed one) the
FIN awaited on the socket connect() gave us and the reader until it has
ended or waits again on another socket (events only: /proc/net/tcp,
/proc/self/task/TID/syscall); then GET /rN and its answer, one line.
"""
import os
import socket
import sys
import threading

from tcp_state import tcp_state, sleeping_in, until

mode, port, d, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
WAITS = {0, 7, 45, 232, 271, 281}  # read poll recvfrom epoll_wait ppoll epoll_pwait


def answer(s):
    buf = b""
    while True:
        got = s.recv(65536)
        if not got:
            return "EOF after %d bytes" % len(buf)
        buf += got
        head, sep, body = buf.partition(b"\r\n\r\n")
        if sep:
            length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")][0]
            if len(body) >= length:
                return "%s | %s" % (head.split(b"\r\n")[0].decode(), body.decode().strip())


def cue_close():
    with open(os.path.join(d, "cue"), "w") as f:
        f.write("close\n")
    with open(os.path.join(d, "done")) as f:
        return int(f.readline())


for r in range(1, rounds + 1):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
    print(r, "warm:", answer(s), flush=True)
    s.close()
    s = socket.create_connection(("127.0.0.1", port))
    ino = os.fstat(s.fileno()).st_ino
    got, tid = [], []
    if mode == "recv":
        def reader():
            tid.append(threading.get_native_id())
            try:
                got.append(answer(s))
            except OSError as e:
                got.append(repr(e))
        t = threading.Thread(target=reader)
        t.start()
        until(lambda: tid and sleeping_in(tid[0]) in WAITS, "saw the reader wait")
    elif mode == "osfork":
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    if cue_close() > 0:
        until(lambda: tcp_state(ino) != 1, "saw the server's FIN")
        if mode == "recv":
            until(lambda: got or (os.fstat(s.fileno()).st_ino != ino and
                                  sleeping_in(tid[0]) in WAITS), "saw the reader end or wait again")
    try:
        s.sendall(b"GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n" % r)
    except OSError as e:
        print(r, "send:", repr(e), flush=True)
    if mode == "recv":
        t.join()
        print(r, "reader:", got[0], flush=True)
    else:
        try:
            print(r, "read:", answer(s), flush=True)
        except OSError as e:
            print(r, "read:", repr(e), flush=True)
    s.close()
