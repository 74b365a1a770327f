#!/usr/bin/python3
"""late_count.py PORT_FILE LOG DELAY - a server that counts what a client
sent: each connection is left unread for DELAY seconds (its small receive
buffer fills, and the client's writes block), then read to the client's
EOF; the count of bytes is logged ("got N bytes") and answered with a
200 that closes.  Listens on 127.0.0.1, a free port written to PORT_FILE."""
import os
import socket
import sys
import threading
import time

port_file, log_path, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
lock = threading.Lock()


def handle(c):
    time.sleep(delay)
    got = 0
    try:
        while True:
            d = c.recv(1 << 20)
            if not d:
                break
            got += len(d)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    except OSError:
        pass
    with lock, open(log_path, "a") as f:
        f.write("got %d bytes\n" % got)
    c.close()


while True:
    s, _ = ls.accept()
    threading.Thread(target=handle, args=(s,), daemon=True).start()
