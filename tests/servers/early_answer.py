#!/usr/bin/python3
"""early_answer.py - Python's http.server (HTTP/1.1, keep-alive) whose
POST handler answers 401 without reading the request's body, as an
upload refused before its body is read; a body that is itself a request
is then read as the next request on a kept connection.  With MODE "reads"
the handler reads the body (by Content-Length) first.  GET answers 200.
tests/replay.bats uses it (docs/replay.md "A close request with a body").

Usage: early_answer.py PORT_FILE LOG MODE
LOG gets "<conn_id> <request line>" per request, before the answer.
"""
import http.server
import sys
import threading

port_file, log_path, mode = sys.argv[1:4]
lock = threading.Lock()
count = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with lock:
            count[0] += 1
            self.conn_id = count[0]

    def log_request(self, code="-", size="-"):
        pass

    def note(self):
        with lock:
            with open(log_path, "a") as f:
                f.write("%d %s\n" % (self.conn_id, self.requestline))

    def answer(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.note()
        if mode == "reads":
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer(401, b"upload refused\n")

    def do_GET(self):
        self.note()
        self.answer(200, b"got %s\n" % self.path.encode())


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
import os
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
