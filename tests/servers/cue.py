#!/usr/bin/env python3
"""cue.py SOCK DIR - an upstream for nginx's /cue/ location
(scripts/lib/nginx-site.conf.in), on the Unix socket SOCK.

For each request: once its head is read, "got" is written on the fifo
DIR/got (the test client waits for it: the request has crossed nginx);
then a line is awaited on the fifo DIR/cue (the client writes it when it
has done what it tests: a fork, a system()...).  Then, if nginx is still
there, it answers "HTTP/1.1 200 OK" with the body "cued <uri>\\n" and logs
"answered URI" to DIR/cue.log; if nginx closed its side (it cancelled the
request because its client's FIN came first), it logs "cancelled URI".
No timing decides anything: each step waits for an event."""
import os
import socket
import sys
import threading

sock_path, d = sys.argv[1], sys.argv[2]
lock = threading.Lock()


def log(line):
    with lock, open(os.path.join(d, "cue.log"), "a") as f:
        f.write(line + "\n")


def gone(s):
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def handle(s):
    try:
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = s.recv(65536)
            if not got:
                return
            buf += got
        uri = buf.split(b" ", 2)[1].decode("latin-1")
        with open(os.path.join(d, "got"), "w") as f:
            f.write("got\n")
        with open(os.path.join(d, "cue")) as f:
            f.readline()
        if gone(s):
            log("cancelled " + uri)
            return
        body = ("cued %s\n" % uri).encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                  % len(body) + body)
        log("answered " + uri)
    except OSError as e:
        log("error %r" % e)
    finally:
        s.close()


for name in ("got", "cue"):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        os.mkfifo(p, 0o666)
try:
    os.unlink(sock_path)
except FileNotFoundError:
    pass
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(sock_path)
os.chmod(sock_path, 0o777)  # nginx's workers run as nobody
l.listen(16)
print("ready", flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
