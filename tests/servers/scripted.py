#!/usr/bin/python3
"""scripted.py - a tiny HTTP/1.x server that answers with scripted raw bytes.

Python 3 standard library only.  Used by the bats tests to send responses
nginx would never send (close-delimited bodies, trailers, odd framing...)
and to witness connection reuse honestly.

Usage:
    scripted.py --case FILE --log FILE [--port N] [--port-file FILE] [--no-ipv6]

Listens on 127.0.0.1 and, unless --no-ipv6, on [::1] with the same port.
--port 0 (the default) picks a free port; the chosen port is written to
--port-file (atomically, once both listeners are up), so the caller can wait
for that file instead of probing the port.

Each accepted connection gets an id (1, 2, 3, ... per server lifetime).  The
server reads requests on it (request line, headers, and a body framed by
Content-Length or Transfer-Encoding: chunked, which is read and discarded),
and for every request:
  1. appends one line "<conn_id> <request line>" to the --log file and
     flushes it -- before answering, so once a client has a response its
     request is already in the log;
  2. sends the response built from the case file.
Nothing else is written to the log: its line count is the request count and
its distinct first fields are the connection count.

Case file format
----------------
    # any number of comment lines starting with '#'
    {"close": true}                 <- one line of JSON options ({} for none)
    ---                             <- separator line: exactly three dashes
    HTTP/1.1 200 OK\\r\\n             <- response template (see below)
    Content-Length: 8\\r\\n
    \\r\\n
    {{ID}}
    ---                             <- optional: more templates
    ...

Template rules (so every byte is explicit and the file survives editors):
  * Physical line breaks in the file are dropped.  Bytes come only from the
    text and these escapes: \\r \\n \\t \\0 \\\\ \\xHH.  Bare-LF responses are
    therefore simply "\\n" without "\\r".
  * {{ID}}     -> the server-wide request number, 1-based, zero-padded to
                  exactly 8 digits (so Content-Length stays right).  Restart
                  the server to restart the numbering.
  * {{CONN}}   -> the connection id, zero-padded to exactly 8 digits.
  * {{FILL n}} -> n bytes of the repeating pattern "0123456789abcdef...".
  * {{PAUSE ms}} -> send what was built so far, sleep ms milliseconds, then
                  go on: the response arrives in pieces (several reads).
  * With several templates, the k-th request on a connection (k = 0, 1, ...)
    gets template min(k, last): "first answer X, every later one Y".

Options (JSON, all optional):
  close          (bool, false)  after sending the response, stop answering on
                                this connection: shutdown(SHUT_WR), read and
                                discard until the client closes (at most
                                linger_ms), close.  Use it for close-delimited
                                bodies and for "Connection: close".
  linger_ms      (int, 5000)    see close.
  idle_close_ms  (int, none)    close a connection that has been waiting this
                                long for its next request.
  close_after    (int, none)    like close, but only after this many requests
                                on the connection.
  ignore_client_close (bool, false)  by default the server behaves like a real
                                one and closes (as with close) after answering
                                a request that asked for it ("Connection:
                                close", or HTTP/1.0 without "Connection:
                                keep-alive"); true keeps the connection open
                                anyway (a client reading to EOF then hangs).
"""

import argparse
import json
import os
import re
import selectors
import socket
import sys
import threading
import time

MARKER = re.compile(rb"\{\{(ID|CONN|FILL \d+|PAUSE \d+)\}\}")
ESCAPE = re.compile(rb"\\(x[0-9A-Fa-f]{2}|[rnt0\\])")
ESCAPES = {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"0": b"\0", b"\\": b"\\"}
FILL_PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyz"


def unescape(raw):
    """Drop physical line breaks, then expand the backslash escapes."""
    raw = raw.replace(b"\r", b"").replace(b"\n", b"")

    def one(m):
        e = m.group(1)
        if e[:1] == b"x":
            return bytes([int(e[1:], 16)])
        return ESCAPES[e]

    return ESCAPE.sub(one, raw)


def load_case(path):
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    while lines and lines[0].startswith(b"#"):
        lines.pop(0)
    if not lines:
        sys.exit("%s: no options line" % path)
    options = json.loads(lines.pop(0).decode() or "{}")
    templates, cur = [], None
    for line in lines:
        if line.rstrip(b"\r") == b"---":
            cur = []
            templates.append(cur)
        elif cur is None:
            sys.exit("%s: expected '---' after the options line" % path)
        else:
            cur.append(line)
    if not templates:
        sys.exit("%s: no response template" % path)
    return options, [unescape(b"\n".join(t)) for t in templates]


def render(template, req_id, conn_id):
    """Yield ('data', bytes) and ('pause', seconds) steps for one response."""
    pos, buf = 0, bytearray()
    for m in MARKER.finditer(template):
        buf += template[pos : m.start()]
        pos = m.end()
        word = m.group(1)
        if word == b"ID":
            buf += b"%08d" % req_id
        elif word == b"CONN":
            buf += b"%08d" % conn_id
        elif word.startswith(b"FILL "):
            n = int(word[5:])
            reps = n // len(FILL_PATTERN) + 1
            buf += (FILL_PATTERN * reps)[:n]
        else:  # PAUSE
            if buf:
                yield ("data", bytes(buf))
                buf = bytearray()
            yield ("pause", int(word[6:]) / 1000.0)
    buf += template[pos:]
    if buf:
        yield ("data", bytes(buf))


class Closed(Exception):
    pass


class Reader:
    """Buffered reads from a socket: lines and exact byte counts."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise Closed()
        self.buf += data

    def until(self, sep_re):
        while True:
            m = sep_re.search(self.buf)
            if m:
                out, self.buf = self.buf[: m.start()], self.buf[m.end() :]
                return out
            if len(self.buf) > 1 << 20:
                raise Closed()
            self._more()

    def line(self):
        return self.until(re.compile(rb"\r?\n"))

    def skip(self, n):
        while n > 0:
            if not self.buf:
                self._more()
            take = min(n, len(self.buf))
            self.buf = self.buf[take:]
            n -= take


class Server:
    def __init__(self, options, templates, log_path):
        self.options = options
        self.templates = templates
        self.log = open(log_path, "ab", buffering=0)
        self.lock = threading.Lock()
        self.next_conn = 0
        self.next_req = 0

    def log_request(self, conn_id, request_line):
        with self.lock:
            self.next_req += 1
            self.log.write(b"%d %s\n" % (conn_id, request_line))
            return self.next_req

    def read_request(self, rd):
        """Return (request line, client wants close); headers and body are
        consumed."""
        line = rd.line()
        while line == b"":  # RFC 9112 2.2: ignore empty lines before a request
            line = rd.line()
        head = []
        while True:
            h = rd.line()
            if h == b"":
                break
            head.append(h)
        length, chunked = 0, False
        # RFC 9112 9.3: HTTP/1.0 persists only with "Connection: keep-alive"
        wants_close = line.rstrip().endswith(b"HTTP/1.0")
        for h in head:
            name, _, value = h.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value.split(b",")[0])
            elif name == b"transfer-encoding" and value.endswith(b"chunked"):
                chunked = True
            elif name == b"connection":
                tokens = [t.strip() for t in value.split(b",")]
                if b"close" in tokens:
                    wants_close = True
                elif b"keep-alive" in tokens:
                    wants_close = False
        if chunked:
            while True:
                size = int(rd.line().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while rd.line() != b"":  # trailers
                        pass
                    break
                rd.skip(size)
                rd.line()
        else:
            rd.skip(length)
        return line, wants_close

    def finish(self, sock):
        """Half-close, let the client read everything, then close."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(self.options.get("linger_ms", 5000) / 1000.0)
            while sock.recv(65536):
                pass
        except OSError:
            pass

    def handle(self, sock):
        with self.lock:
            self.next_conn += 1
            conn_id = self.next_conn
        idle = self.options.get("idle_close_ms")
        close_after = self.options.get("close_after")
        rd = Reader(sock)
        served = 0
        try:
            while True:
                sock.settimeout(idle / 1000.0 if idle else None)
                try:
                    line, wants_close = self.read_request(rd)
                except (Closed, socket.timeout, ConnectionError, ValueError):
                    return
                sock.settimeout(None)
                req_id = self.log_request(conn_id, line)
                tpl = self.templates[min(served, len(self.templates) - 1)]
                served += 1
                for kind, val in render(tpl, req_id, conn_id):
                    if kind == "data":
                        sock.sendall(val)
                    else:
                        time.sleep(val)
                if (
                    self.options.get("close")
                    or (wants_close and not self.options.get("ignore_client_close"))
                    or (close_after and served >= close_after)
                ):
                    self.finish(sock)
                    return
        except OSError:
            pass
        finally:
            sock.close()


def listen(family, host, port):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((host, port))
    s.listen(128)
    return s


def open_listeners(port, ipv6):
    for _ in range(50):
        v4 = listen(socket.AF_INET, "127.0.0.1", port)
        if not ipv6:
            return [v4]
        try:
            return [v4, listen(socket.AF_INET6, "::1", v4.getsockname()[1])]
        except OSError:
            v4.close()
            if port:
                raise
    sys.exit("no port free on both 127.0.0.1 and ::1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--no-ipv6", action="store_true")
    args = ap.parse_args()

    options, templates = load_case(args.case)
    server = Server(options, templates, args.log)
    listeners = open_listeners(args.port, not args.no_ipv6)
    port = listeners[0].getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)

    sel = selectors.DefaultSelector()
    for s in listeners:
        sel.register(s, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            try:
                conn, _ = key.fileobj.accept()
            except OSError:
                continue
            threading.Thread(target=server.handle, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
