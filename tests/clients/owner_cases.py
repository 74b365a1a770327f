#!/usr/bin/python3
"""owner_cases.py - Python programs that share or hand over a connection,
for tests/owner.bats (docs/owner.md).  The server is
tests/servers/echo_server.py: every response's body is its request's
target, so a response that answers another request shows.

    owner_cases.py fork PORT        a request; fork; the child makes requests
                                    on the inherited socket while the parent
                                    closes its copy and makes its own (with
                                    a timeout: O_NONBLOCK on the description)
    owner_cases.py pass-fds PORT    the same with subprocess(pass_fds=...):
                                    the child is this script's "child" mode
    owner_cases.py child FD PORT    (the pass-fds child)
    owner_cases.py worker PORT      a request; fork; the parent exits while
                                    the child still uses the socket (its
                                    requests before and after the exit)
    owner_cases.py stranger PORT    two requests on fresh sockets
    owner_cases.py setuid PORT      as root: a request, close, drop to nobody,
                                    a request
    owner_cases.py negotiate PORT   a request with Authorization: Negotiate
                                    (no 401 first), close; a request without
"""
import os
import socket
import subprocess
import sys
import time


def ask(s, tag, close=False, who=""):
    req = "GET /%s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (tag, "Connection: close\r\n" if close else "")
    try:
        s.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(body) < n:
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        print("%s%s: %s" % (who, tag, body.decode("latin-1") or "(nothing)"), flush=True)
    except OSError as e:
        print("%s%s: %s" % (who, tag, type(e).__name__), flush=True)


def dial(port, timeout=None):
    s = socket.create_connection(("127.0.0.1", port))
    if timeout:
        s.settimeout(timeout)
    return s


def fork_case(port):
    s = dial(port)
    ask(s, "p1", who="parent ")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        for i in (1, 2):
            os.read(r, 1)
            ask(s, "c%d" % i, who="child ")
        os._exit(0)
    os.close(r)
    s.close()
    for i in (2, 3):
        t = dial(port, timeout=2)
        ask(t, "p%d" % i, who="parent ")
        os.write(w, b"g")
        time.sleep(0.2)
        t.close()
    os.waitpid(pid, 0)


def pass_fds_case(port):
    s = dial(port)
    ask(s, "p1", who="parent ")
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, __file__, "child", str(s.fileno()), str(r)],
                             pass_fds=[s.fileno(), r])
    os.close(r)
    s.close()
    for i in (2, 3):
        t = dial(port, timeout=2)
        ask(t, "p%d" % i, who="parent ")
        os.write(w, b"g")
        time.sleep(0.3)
        t.close()
    os.close(w)
    child.wait()


def child_case(fd, r):
    s = socket.socket(fileno=fd)
    for i in (1, 2):
        if not os.read(r, 1):
            break
        ask(s, "c%d" % i, who="child ")


def worker_case(port):
    s = dial(port)
    ask(s, "p1", who="parent ")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        ask(s, "w1", who="worker ")
        os.read(r, 1)  # EOF: the parent has exited
        # the test runs the stranger now; it makes this file when done
        done = os.environ["STRANGER_DONE"]
        for _ in range(200):
            if os.path.exists(done):
                break
            time.sleep(0.05)
        ask(s, "w2", who="worker ")
        os._exit(0)
    # the parent exits with the socket idle (its response read), the
    # worker still holding it
    time.sleep(0.2)
    sys.exit(0)


def stranger_case(port):
    for i in (1, 2):
        s = dial(port)
        ask(s, "x%d" % i, close=True, who="stranger ")
        s.close()
    open(os.environ["STRANGER_DONE"], "w").close()


def setuid_case(port):
    s = dial(port)
    ask(s, "root", close=True)
    s.close()
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    s = dial(port)
    ask(s, "nobody", close=True)
    s.close()


def negotiate_case(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /login HTTP/1.1\r\nHost: t\r\nAuthorization: Negotiate YIIBgwYGKwYBBQUCoIIBdzCC\r\n"
              b"Connection: close\r\n\r\n")
    buf = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    print("login:", buf.partition(b"\r\n\r\n")[2].decode(), flush=True)
    s.close()
    s = dial(port)
    ask(s, "anonymous", close=True)
    s.close()


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "child":
        child_case(int(sys.argv[2]), int(sys.argv[3]))
    else:
        port = int(sys.argv[2])
        {"fork": fork_case, "pass-fds": pass_fds_case, "worker": worker_case,
         "stranger": stranger_case, "setuid": setuid_case,
         "negotiate": negotiate_case}[what](port)
