"""fd_pressure.py MODE PORT ... - a program near its fd limit (ulimit -n),
its requests made with urllib (Connection: close, so pooled under the
shim), then files opened.  Prints what it got; the test compares with the
run without the shim.

  dests PORT N FILES     GET http://127.0.0.i:PORT/ for i = 1..N, then open
                         /dev/null FILES times (kept open): "files=K" and
                         the first error
  until-emfile PORT N    N GETs to 127.0.0.1:PORT, then open /dev/null until
                         EMFILE: "files=K"
  threads PORT T R D     T threads, R GETs each, request k of thread t to
                         127.0.0.((t + k) % D + 1):PORT, and a file opened
                         and closed after each: "errors=E"
  setrlimit PORT LIMIT N lower the soft RLIMIT_NOFILE to LIMIT first, then N
                         GETs: "responses=N" (the server counts connections)
  held PORT N            N GETs, then one more on a socket of its own (a
                         pooled one under the shim) read to EOF and held
                         open, then open /dev/null until EMFILE: "files=K"
"""
import os
import resource
import socket
import sys
import threading
import urllib.request


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def open_files(limit):
    fds, err = [], ""
    while limit is None or len(fds) < limit:
        try:
            fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            err = " error=" + e.strerror
            break
    print("files=%d%s" % (len(fds), err))


mode, port = sys.argv[1], int(sys.argv[2])
if mode == "dests":
    n, files = int(sys.argv[3]), int(sys.argv[4])
    for i in range(1, n + 1):
        get("http://127.0.0.%d:%d/" % (i, port))
    print("responses=%d" % n)
    open_files(files)
elif mode == "until-emfile":
    n = int(sys.argv[3])
    for _ in range(n):
        get("http://127.0.0.1:%d/" % port)
    print("responses=%d" % n)
    open_files(None)
elif mode == "threads":
    t, r, d = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    errors = []

    def worker(me):
        for k in range(r):
            try:
                get("http://127.0.0.%d:%d/" % ((me + k) % d + 1, port))
                os.close(os.open("/dev/null", os.O_RDONLY))
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(t)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print("errors=%d" % len(errors))
    for e in sorted(set(errors))[:5]:
        print(e)
elif mode == "setrlimit":
    limit, n = int(sys.argv[3]), int(sys.argv[4])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    for _ in range(n):
        get("http://127.0.0.1:%d/" % port)
    print("responses=%d" % n)
elif mode == "held":
    n = int(sys.argv[3])
    for _ in range(n):
        get("http://127.0.0.1:%d/" % port)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    print("responses=%d status=%s" % (n + 1, got.split(b"\r\n", 1)[0].decode()))
    open_files(None)  # s still open
    s.close()
else:
    sys.exit("unknown mode " + mode)
