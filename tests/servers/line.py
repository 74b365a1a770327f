#!/usr/bin/python3
"""line.py PORT_FILE LOG - a server of a protocol that is not HTTP, on a
port the library pools (a text protocol, or a client's own handshake).

Listens on 127.0.0.1 (a free port, written to PORT_FILE).  On each
connection, for every recv() it logs "<conn_id> <repr of the bytes>" to LOG
and answers "+<number of bytes>\\r\\n", until the client's EOF, then logs
"<conn_id> EOF" and closes.  A client that closes right after its last
bytes (bash: printf >&4; exec 4>&-) resets the connection when our answer
reaches it closed, and the reset may come before we read its FIN: that
ends the connection as its EOF does, and is logged as "EOF" too (whether
the answer beat the close is the scheduler's, with or without the
library)."""
import os
import socket
import sys
import threading

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
log = open(sys.argv[2], "a")
lock = threading.Lock()


def say(line):
    with lock:
        log.write(line + "\n")
        log.flush()


def handle(c, cid):
    try:
        while True:
            d = c.recv(65536)
            if not d:
                say("%d EOF" % cid)
                break
            say("%d %r" % (cid, d))
            c.sendall(b"+%d\r\n" % len(d))
    except (ConnectionResetError, BrokenPipeError):
        say("%d EOF" % cid)
    except OSError as e:
        say("%d %s" % (cid, type(e).__name__))
    finally:
        c.close()


n = 0
while True:
    c, _ = ls.accept()
    n += 1
    threading.Thread(target=handle, args=(c, n), daemon=True).start()
