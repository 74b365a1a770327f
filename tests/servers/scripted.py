#!/usr/bin/python3
"""scripted.py - a tiny HTTP/1.x server that answers with scripted raw bytes.

Python 3 standard library only.  Used by the bats tests to send responses
nginx would never send (close-delimited bodies, trailers, odd framing...)
and to witness connection reuse honestly.

Usage:
    scripted.py --case FILE --log FILE [--port N] [--port-file FILE] [--no-ipv6]
                [--tls CERT KEY] [--more-v4 N]
    scripted.py --fork-server CTL REP   (servers forked on request: see
                                         fork_server(); tests/helpers.bash)

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

Options (JSON, all optional; an unknown name or a bad value is an error):
  close          (bool, false)  after sending the response, stop answering on
                                this connection: shutdown(SHUT_WR), read and
                                discard until the client closes (at most
                                linger_ms), close.  Use it for close-delimited
                                bodies and for "Connection: close".
  linger_ms      (int, 5000)    see close.
  idle_close_ms  (int, none)    close (FIN) a connection that has been waiting
                                this long for its next request (or for its
                                first one, counted from accept).  Bytes of a
                                next request already received (pipelined) are
                                no wait; once the first byte of a request has
                                arrived, the rest is awaited without a limit.
  idle_408_ms    (int, none)    like idle_close_ms, but first write
                                "HTTP/1.1 408 Request Timeout\\r\\nConnection:
                                close\\r\\nContent-Length: 0\\r\\n\\r\\n", then close
                                as with close (so a request the client sent
                                meanwhile is read and dropped: the client reads
                                the 408, then EOF).  The 408 is not a request:
                                it is not logged, and takes no {{ID}}.
  idle_reset_ms  (int, none)    like idle_close_ms, but abort the connection:
                                SO_LINGER {1, 0}, close -> a TCP RST, not a FIN.
                                With several idle_* options the shortest wins.
  accepts        (int >= 1, none)  close the listeners after this many accepted
                                connections (a drain: new connections are
                                refused, the accepted ones still served).
  close_after    (int >= 1, none)  like close, but only after this many
                                requests on the connection, and without a word
                                in the response (no "Connection: close" unless
                                the template has it): the client just gets a
                                FIN right after the N-th response.
  reset_prob     (float 0..1, none)  after sending a response after which the
                                connection would stay open, abort it with a
                                TCP RST (as idle_reset_ms) with this
                                probability.  The response is delivered first
                                (the RST waits until the socket's send queue is
                                empty, at most 1 s).  Responses that close
                                anyway (close, close_after, the client's
                                "Connection: close") are never reset.
  seed           (int, 1)       seed of the random.Random that decides
                                reset_prob: one draw per logged request, in log
                                order, so a client making its requests one at
                                a time sees the same resets on every run.
  late_idle_ms   (int, none)    a request whose first byte arrives on a
                                connection idle at least this long is read but
                                not served (nor logged): the server's idle
                                timer fired just as the request came in, the
                                race no liveness check can see.  What the
                                client gets is late_action.
  late_close_after (int >= 1, none)  the request after the N-th on a
                                connection is read but not served (nor logged):
                                the server closes after N requests without a
                                word, and the client's next request meets that
                                close in flight.  Then late_action.
  late_logged    (bool, false)  the late request (late_idle_ms, late_close_after)
                                is logged, taking an {{ID}}, before late_action:
                                the server read it, acted on it (a payment
                                made), then failed without an answer.
  answer_before_body (bool, false)  answer as soon as a request's head is
                                read, before its body (a server refusing an
                                upload: 413, 417); the body is read and
                                dropped afterwards.  Use it with close.
  send_bytes     (int, none)    send each response in writes of at most this
                                many bytes (TCP_NODELAY), so the client reads
                                it in pieces that small ...
  send_pause_ms  (int, 0)       ... with this pause after each write.
  cycle          (bool, false)  choose the template by the server-wide request
                                number instead: request k (1, 2, ...) gets
                                template (k - 1) mod count, whatever its
                                connection, so a client's output does not
                                depend on which requests shared a connection.
  idle_random_ms (int, none)    the keep-alive timer as clients meet it in the
                                wild: after each response, a connection whose
                                next request has not begun within a deadline
                                drawn from 0..this ms is closed (FIN; over
                                TLS, close_notify first) without reading what
                                may be arriving.  Drawn from
                                random.Random(seed * 1000003 + conn id), one
                                draw per response: the same deadlines on every
                                run.  Never before the first request.
  idle_random_min_ms (int, 0)   the shortest such deadline (equal to
                                idle_random_ms: a fixed one)
  idle_random_408 (bool, false) that close begins with the 408 below
                                (Node, Apache: the server's idle timer).
  tls_hello_delay_ms (int, 0)   with --tls: each connection's handshake
                                begins this long after the accept (the
                                ClientHello waits unread): a slow server's
                                first answer to a fresh connection.
  late_action    ("close")      "close" (a FIN), "reset" (a RST), "408"
                                (the 408 above, then a FIN) or "408reset"
                                (the 408, then a RST: no FIN at all).
  ignore_client_close (bool, false)  by default the server behaves like a real
                                one and closes (as with close) after answering
                                a request that asked for it ("Connection:
                                close", or HTTP/1.0 without "Connection:
                                keep-alive"); true keeps the connection open
                                anyway (a client reading to EOF then hangs).

Diagnostics (idle closes, 408s, resets) go to stderr, one line each, never to
the --log file.

TLS (--tls CERT KEY)
--------------------
With --tls (PEM files: the certificate chain and its key) every accepted
connection is wrapped server-side (ssl.SSLContext(PROTOCOL_TLS_SERVER),
TLS 1.2 or 1.3) and its handshake is made in the connection's thread before
anything above happens: the connection id, the log, the templates and every
option then apply to the decrypted stream unchanged.  A failed handshake is
a diagnostic, takes no connection id and logs nothing.  How the closes look
over TLS (as nginx does them):
  * a close (close, close_after, the client's "Connection: close", idle_close_ms,
    idle_408_ms after its 408, late_action "close" and "408") first sends the
    TLS close_notify alert, without waiting for the client's, then the FIN
    (and, where the plain server lingers, reads and drops what the client
    still sends: raw bytes, never decrypted);
  * a reset (idle_reset_ms, reset_prob, late_action "reset") sends no alert:
    just the RST;
  * the idle timers count from the end of the handshake, and a request
    already decrypted and held by the TLS layer (SSLSocket.pending()) counts
    as arrived, as buffered bytes do.
"""

import argparse
import errno
import fcntl
import json
import math
import os
import random
import re
import select
import selectors
import signal
import socket
import ssl
import struct
import sys
import termios
import threading
import time

MARKER = re.compile(rb"\{\{(ID|CONN|FILL \d+|PAUSE \d+)\}\}")
ESCAPE = re.compile(rb"\\(x[0-9A-Fa-f]{2}|[rnt0\\])")
ESCAPES = {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"0": b"\0", b"\\": b"\\"}
FILL_PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyz"
RESPONSE_408 = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
IDLE_OPTIONS = ("idle_close_ms", "idle_408_ms", "idle_reset_ms")


def _count(minimum):
    return lambda v: type(v) is int and v >= minimum


# option -> validity check (bool is an int in Python: checked apart)
OPTIONS = {
    "close": lambda v: type(v) is bool,
    "linger_ms": _count(0),
    "idle_close_ms": _count(1),
    "idle_408_ms": _count(1),
    "idle_reset_ms": _count(1),
    "close_after": _count(1),
    "reset_prob": lambda v: type(v) in (int, float) and 0 <= v <= 1,
    "seed": lambda v: type(v) is int,
    "ignore_client_close": lambda v: type(v) is bool,
    "late_idle_ms": _count(1),
    "late_close_after": _count(1),
    "late_action": lambda v: v in ("close", "reset", "408", "408reset"),
    "late_logged": lambda v: isinstance(v, bool),
    "answer_before_body": lambda v: type(v) is bool,
    "send_bytes": _count(1),
    "send_pause_ms": _count(0),
    "cycle": lambda v: type(v) is bool,
    "idle_random_ms": _count(0),
    "idle_random_min_ms": _count(0),
    "idle_random_408": lambda v: type(v) is bool,
    "accepts": _count(1),
    "tls_hello_delay_ms": _count(0),
}


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
    if not isinstance(options, dict):
        sys.exit("%s: the options line is not a JSON object" % path)
    for name, value in options.items():
        if name not in OPTIONS:
            sys.exit("%s: unknown option %r" % (path, name))
        if not OPTIONS[name](value):
            sys.exit("%s: bad value for %s: %r" % (path, name, value))
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
    def __init__(self, options, templates, log_path, tls=None):
        self.options = options
        self.tls = tls  # an ssl.SSLContext (server side), or None: plain
        self.templates = templates
        self.log = open(log_path, "ab", buffering=0)
        self.lock = threading.Lock()
        self.next_conn = 0
        self.next_req = 0
        self.reset_prob = options.get("reset_prob")
        self.rng = random.Random(options.get("seed", 1))
        # the idle timer that fires first: (ms, option name), or None
        idle = [(options[k], k) for k in IDLE_OPTIONS if k in options]
        self.idle = min(idle) if idle else None

    def log_request(self, conn_id, request_line):
        """Log one request; return (its {{ID}}, whether to reset after it).
        The reset draw is made under the log lock: the n-th logged request
        gets the n-th draw."""
        with self.lock:
            self.next_req += 1
            self.log.write(b"%d %s\n" % (conn_id, request_line))
            reset = self.reset_prob is not None and self.rng.random() < self.reset_prob
            return self.next_req, reset

    @staticmethod
    def diag(msg):
        """One line on stderr (never in the log: it counts requests)."""
        sys.stderr.write("scripted.py: %s\n" % msg)
        sys.stderr.flush()

    def read_request(self, rd, before_body=None):
        """Return (request line, client wants close); headers and body are
        consumed.  before_body(line, wants_close), if given, runs between
        the head and the body."""
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
        if before_body:
            before_body(line, wants_close)
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

    @staticmethod
    def wait_request(sock, rd, ms):
        """Wait at most ms for the first byte of the next request (or for
        EOF/an error, which read_request then meets).  Pipelined bytes
        already buffered count as arrived, and so do bytes the TLS layer
        has already decrypted (the socket would not show them).  False on
        timeout."""
        if rd.buf:
            return True
        pending = getattr(sock, "pending", None)  # ssl.SSLSocket only
        if pending and pending():
            return True
        poller = select.poll()  # not select(): fds may exceed FD_SETSIZE
        poller.register(sock, select.POLLIN)
        deadline = time.monotonic() + ms / 1000.0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if poller.poll(math.ceil(left * 1000)):
                return True

    @staticmethod
    def abort(sock):
        """Close with a TCP RST instead of a FIN: SO_LINGER {1, 0}, close.
        First wait (at most 1 s) until everything sent has been acknowledged
        (SIOCOUTQ == 0): the RST would throw away what is still queued."""
        outq = bytearray(4)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, outq, True)
            except OSError:
                break
            if struct.unpack("i", outq)[0] == 0:
                break
            time.sleep(0.001)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        sock.close()

    def idle_expired(self, sock, conn_id, served):
        ms, name = self.idle
        what = {"idle_close_ms": "close", "idle_408_ms": "408 and close", "idle_reset_ms": "reset"}[name]
        self.diag("conn %d: idle %d ms after %d request(s): %s" % (conn_id, ms, served, what))
        if name == "idle_408_ms":
            sock.sendall(RESPONSE_408)
            self.finish(sock)
        elif name == "idle_reset_ms":
            self.abort(sock)
        elif self.tls:
            self.close_notify(sock)
        # idle_close_ms: the caller's close() sends the FIN

    def template(self, served, req_id):
        if self.options.get("cycle"):
            return self.templates[(req_id - 1) % len(self.templates)]
        return self.templates[min(served, len(self.templates) - 1)]

    def respond(self, sock, tpl, req_id, conn_id):
        step = self.options.get("send_bytes")
        pause = self.options.get("send_pause_ms", 0) / 1000.0
        if step:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for kind, val in render(tpl, req_id, conn_id):
            if kind == "pause":
                time.sleep(val)
            elif not step:
                sock.sendall(val)
            else:
                for i in range(0, len(val), step):
                    sock.sendall(val[i : i + step])
                    if pause:
                        time.sleep(pause)

    def late(self, sock, conn_id, served, idle_ms, line):
        """A request read but not served: late_action."""
        action = self.options.get("late_action", "close")
        self.diag(
            "conn %d: %s after %d request(s), %d ms idle: not served, %s"
            % (conn_id, line.decode("latin-1"), served, idle_ms, action)
        )
        if action == "408reset":
            sock.sendall(RESPONSE_408)
        if action in ("reset", "408reset"):
            self.abort(sock)
            return
        if action == "408":
            sock.sendall(RESPONSE_408)
        self.finish(sock)

    @staticmethod
    def close_notify(sock):
        """TLS: send the close_notify alert, without waiting for the
        client's (nginx: one SSL_shutdown, then the close).  unwrap() on a
        non-blocking socket sends it, then stops at SSLWantReadError."""
        try:
            sock.settimeout(0)
            sock.unwrap()
        except (OSError, ValueError):  # ssl.SSLError is an OSError
            pass

    def finish(self, sock):
        """Half-close, let the client read everything, then close."""
        if self.tls:
            self.finish_tls(sock)
            return
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(self.options.get("linger_ms", 5000) / 1000.0)
            while sock.recv(65536):
                pass
        except OSError:
            pass

    def finish_tls(self, sock):
        """finish() over TLS: close_notify, then the same half-close and
        drain on the raw socket (what the client still sends is dropped
        undecrypted: after close_notify, OpenSSL would drop it anyway)."""
        self.close_notify(sock)
        try:
            socket.socket.shutdown(sock, socket.SHUT_WR)
            sock.settimeout(self.options.get("linger_ms", 5000) / 1000.0)
            while socket.socket.recv(sock, 65536):
                pass
        except OSError:
            pass

    def serve(self, sock):
        """A connection's thread: the TLS handshake (--tls), then handle()."""
        if self.tls:
            delay = self.options.get("tls_hello_delay_ms", 0)
            if delay:
                time.sleep(delay / 1000.0)
            try:
                sock.settimeout(10)
                sock = self.tls.wrap_socket(sock, server_side=True)
                sock.settimeout(None)
            except (OSError, ValueError) as e:
                self.diag("TLS handshake failed: %s" % e)
                sock.close()
                return
        self.handle(sock)

    def handle(self, sock):
        with self.lock:
            self.next_conn += 1
            conn_id = self.next_conn
        close_after = self.options.get("close_after")
        rd = Reader(sock)
        served = 0
        late_idle = self.options.get("late_idle_ms")
        late_after = self.options.get("late_close_after")
        idle_random = self.options.get("idle_random_ms")
        idle_rng = random.Random(self.options.get("seed", 1) * 1000003 + conn_id)
        try:
            while True:
                idle_since = time.monotonic()
                if self.idle and not self.wait_request(sock, rd, self.idle[0]):
                    self.idle_expired(sock, conn_id, served)
                    return
                if idle_random is not None and served:
                    ms = idle_rng.randint(self.options.get("idle_random_min_ms", 0), idle_random)
                    if not self.wait_request(sock, rd, ms):
                        self.diag("conn %d: idle %d ms after %d request(s): close" % (conn_id, ms, served))
                        if self.options.get("idle_random_408"):
                            sock.sendall(RESPONSE_408)
                        if self.tls:
                            self.close_notify(sock)
                        return
                if late_idle:
                    self.wait_request(sock, rd, 1 << 30)
                idle_ms = (time.monotonic() - idle_since) * 1000
                early = []

                def answer_early(line, wants_close):
                    early.append(self.log_request(conn_id, line))
                    self.respond(sock, self.template(served, early[0][0]),
                                 early[0][0], conn_id)

                try:
                    line, wants_close = self.read_request(
                        rd, answer_early if self.options.get("answer_before_body") else None
                    )
                except (Closed, ConnectionError, ValueError):
                    return
                if (late_idle and served and idle_ms >= late_idle) or (
                    late_after and served >= late_after
                ):
                    if self.options.get("late_logged"):
                        self.log_request(conn_id, line)
                    self.late(sock, conn_id, served, idle_ms, line)
                    return
                if early:
                    req_id, reset = early[0]
                else:
                    req_id, reset = self.log_request(conn_id, line)
                    self.respond(sock, self.template(served, req_id),
                                 req_id, conn_id)
                served += 1
                if (
                    self.options.get("close")
                    or (wants_close and not self.options.get("ignore_client_close"))
                    or (close_after and served >= close_after)
                ):
                    self.finish(sock)
                    return
                if reset:
                    self.diag("conn %d: reset after request %d (id %d)" % (conn_id, served, req_id))
                    self.abort(sock)
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
    # No port given: one below the kernel's ephemeral range (as the nginx
    # launcher's free_port), so that a restart on the same port cannot meet
    # a client socket of a test running beside this one sitting on it.
    chosen = port
    for _ in range(200):
        if not port:
            chosen = random.randint(20000, 32000)
        try:
            v4 = listen(socket.AF_INET, "127.0.0.1", chosen)
        except OSError as e:
            if port or e.errno != errno.EADDRINUSE:
                raise
            continue
        if not ipv6:
            return [v4]
        try:
            return [v4, listen(socket.AF_INET6, "::1", v4.getsockname()[1])]
        except OSError:
            v4.close()
            if port:
                raise
    sys.exit("no port free on both 127.0.0.1 and ::1")


def main(argv=None, ready=None):
    """Serve until killed.  ready(port), if given, is called once the
    listeners are up (after the --port-file is written)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--no-ipv6", action="store_true")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--more-v4", type=int, default=0, metavar="N",
                    help="also listen on 127.0.0.2 .. 127.0.0.N+1, same port "
                         "(N more destinations for the pool, all loopback)")
    args = ap.parse_args(argv)

    options, templates = load_case(args.case)
    tls = None
    if args.tls:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls[0], args.tls[1])
    server = Server(options, templates, args.log, tls)
    listeners = open_listeners(args.port, not args.no_ipv6)
    port = listeners[0].getsockname()[1]
    for i in range(args.more_v4):
        listeners.append(listen(socket.AF_INET, "127.0.0.%d" % (i + 2), port))
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    if ready:
        ready(port)

    sel = selectors.DefaultSelector()
    for s in listeners:
        sel.register(s, selectors.EVENT_READ)
    accepts = options.get("accepts")
    while True:
        for key, _ in sel.select():
            try:
                conn, _ = key.fileobj.accept()
            except OSError:
                continue
            if accepts is not None:
                accepts -= 1
                if accepts == 0:
                    # a drain: new connections refused, the accepted ones
                    # served; closed before this one is answered, so no
                    # client can connect after its answer
                    for s in listeners:
                        sel.unregister(s)
                        s.close()
                    server.diag("listeners closed after %d accepts" % options["accepts"])
            threading.Thread(target=server.serve, args=(conn,), daemon=True).start()
            if accepts == 0:
                while True:
                    time.sleep(3600)


def _tell(rep_path, line):
    """One line to the fork server's caller, if it is listening (it holds
    the reply fifo open while it waits); dropped otherwise."""
    try:
        fd = os.open(rep_path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.write(fd, line.encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def _serve_child(fields, rep_path):
    """In a forked child: the server of one start, as a process of its own
    (its own listeners, connections, ids and TLS keys; its exit closes them
    all, as a fresh scripted.py's would)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    stderr_path, argv = fields[0], fields[1:]
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)
    status = 1
    try:
        main(argv, lambda port: _tell(rep_path, "ready %d %d\n" % (os.getpid(), port)))
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
        if e.code not in (None, 0) and not isinstance(e.code, int):
            sys.stderr.write("%s\n" % e.code)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        _tell(rep_path, "failed %d\n" % os.getpid())
        sys.stderr.flush()
        os._exit(status)


def fork_server(ctl_path, rep_path):
    """--fork-server CTL REP: start servers by fork() instead of exec, so a
    test that restarts its server (tests/helpers.bash, run_both: twice per
    client run) pays Python's start-up and imports once.  Each line read
    from the fifo CTL, "STDERR<TAB>ARG<TAB>ARG...", starts a child that
    serves as "scripted.py ARG..." would, stderr appended to STDERR; the
    child writes "ready PID PORT" (or "failed PID") to the fifo REP, and
    "gone PID" follows when it has exited and been reaped (so the caller
    can wait for that line instead of polling).  It says "forker PID" once
it reads CTL (a line written before that would be lost).  SIGTERM (or the caller
    exiting) stops the children, then the fork server."""
    children = set()

    def reap(*_):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            _tell(rep_path, "gone %d\n" % pid)

    def stop(*_):
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        os._exit(0)

    # O_RDWR: no EOF between writers, and the caller's open never blocks
    ctl = os.open(ctl_path, os.O_RDWR)
    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGTERM, stop)
    _tell(rep_path, "forker %d\n" % os.getpid())
    parent = os.getppid()
    buf = b""
    while True:
        if not select.select([ctl], [], [], 1.0)[0]:
            if os.getppid() != parent:  # the test shell is gone
                stop()
            continue
        buf += os.read(ctl, 65536)
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            fields = line.decode().split("\t")
            pid = os.fork()
            if pid == 0:
                os.close(ctl)
                _serve_child(fields, rep_path)
            children.add(pid)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fork-server"]:
        fork_server(sys.argv[2], sys.argv[3])
    else:
        main()
