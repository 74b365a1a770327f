#!/usr/bin/env python3
"""after_eof.py PORTFILE LOG - an HTTP responder in the inetd style: it
reads the client's bytes up to the client's FIN, then answers (a 200 with
Content-Length) and closes.  Logs each request line it read to LOG (the
Connection header is the one line the library may change, so it is not
logged).  Listens on a free port of 127.0.0.1, written to PORTFILE."""
import os
import socket
import sys
import threading

port_file, log_path = sys.argv[1], sys.argv[2]
lock = threading.Lock()


def handle(s):
    try:
        buf = b""
        while True:
            got = s.recv(65536)
            if not got:
                break
            buf += got
        with lock, open(log_path, "a") as f:
            f.write(buf.split(b"\r\n", 1)[0].decode("latin-1") + "\n")
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nafter\n")
    except OSError as e:
        sys.stderr.write("after_eof: %r\n" % e)
    finally:
        s.close()


l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % l.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
while True:
    c, _ = l.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
