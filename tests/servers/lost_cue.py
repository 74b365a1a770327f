#!/usr/bin/env python3
"""lost_cue.py PORTFILE DIR - for each connection: reads a request head,
answers with a response no framer can delimit ("Content-Length: 5x",
body "hello"), then keeps the connection open until a line arrives on the
fifo DIR/cue, and closes it.  So alone, a read after the body finds the
server quiet and the connection open: EAGAIN for a bounded read, until the
client cues the close.  Listens on 127.0.0.1, its port written to
PORTFILE."""
import os
import socket
import sys
import threading

port_file, d = sys.argv[1], sys.argv[2]
cue = os.path.join(d, "cue")
if not os.path.exists(cue):
    os.mkfifo(cue)


def handle(s):
    try:
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = s.recv(65536)
            if not got:
                return
            buf += got
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello")
        with open(cue) as f:
            f.readline()
    except OSError as e:
        sys.stderr.write("lost_cue: %r\n" % e)
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
