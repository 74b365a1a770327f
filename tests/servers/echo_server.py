#!/usr/bin/python3
"""echo_server.py - an HTTP/1.1 keep-alive server that answers every request
with its own request target, and logs which connection carried it.

Usage: echo_server.py PORT_FILE LOG_FILE

Listens on 127.0.0.1 (a free port, written to PORT_FILE once it listens).
Each connection gets an id (1, 2, ...).  For every request it appends
"<conn_id> <target>" to LOG_FILE (flushed before the answer: once a client
has its response, the request is in the log) and answers 200 with the
target as the body (Content-Length framed).  Keep-alive unless the request
asks to close (or is HTTP/1.0 without keep-alive).  Request bodies framed by
Content-Length are read and discarded.  Python's standard library only.
"""
import os
import socketserver
import sys
import threading

lock = threading.Lock()
next_id = [0]


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            self.serve()
        except OSError:
            pass  # a client that resets: nothing to say

    def serve(self):
        with lock:
            next_id[0] += 1
            cid = next_id[0]
        f = self.rfile
        while True:
            line = f.readline(65537)
            if not line:
                return
            parts = line.split()
            if len(parts) != 3:
                return
            target = parts[1].decode("latin-1")
            version = parts[2]
            close = version == b"HTTP/1.0"
            length = 0
            while True:
                h = f.readline(65537)
                if not h or h in (b"\r\n", b"\n"):
                    break
                name, _, value = h.partition(b":")
                name = name.strip().lower()
                value = value.strip().lower()
                if name == b"connection":
                    if b"close" in value:
                        close = True
                    elif b"keep-alive" in value:
                        close = False
                elif name == b"content-length":
                    length = int(value)
            if length:
                f.read(length)
            with lock:
                LOG.write("%d %s\n" % (cid, target))
                LOG.flush()
            body = target.encode("latin-1")
            head = "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" % (
                len(body), "Connection: close\r\n" if close else "")
            self.wfile.write(head.encode() + body)
            self.wfile.flush()
            if close:
                return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


if __name__ == "__main__":
    port_file, log_file = sys.argv[1], sys.argv[2]
    LOG = open(log_file, "a")
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as pf:
        pf.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    srv.serve_forever()
