"""sha1_server.py PORT_FILE - an HTTP/1.1 upload sink for scripts/bench-large:
answers every POST/PUT with the SHA-1 (hex) of the body it received
(Content-Length or chunked), keeping connections alive as HTTP/1.1 does.
Listens on 127.0.0.1, a free port, written to PORT_FILE."""
import hashlib
import http.server
import os
import sys


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        h = hashlib.sha1()
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    b = self.rfile.read(min(left, 1 << 20))
                    if not b:
                        return
                    h.update(b)
                    left -= len(b)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                b = self.rfile.read(min(left, 1 << 20))
                if not b:
                    return
                h.update(b)
                left -= len(b)
        body = (h.hexdigest() + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(tmp, sys.argv[1])
srv.serve_forever()
