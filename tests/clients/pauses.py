#!/usr/bin/python3
"""pauses.py [--ca CAFILE] [--think MS [--sndbuf N]] HOST PORT N METHOD SEED MAX_PAUSE_MS - pauses.rb
in Python.

N requests, each on its own http.client.HTTPConnection (connect, one request,
close: the unmodified-program pattern), with random pauses between them: the
client for stale pooled connections.

  METHOD        GET or POST; request i (1..N) is METHOD /r/<i>, a POST with
                the body "id=<i>" (Content-Length, form-urlencoded); or any
                other single method (PUT, PATCH, DELETE: DELETE bodiless, the
                others with that body); or MIX: request i takes, in turn,
                GET, POST, PUT, PATCH, DELETE and a POST whose body is
                "id=<i>&" padded with "x" to 20 KiB (20480 bytes)
  SEED          random.Random(SEED): the same pauses on every run (not the
                same as pauses.rb's for the same SEED)
  MAX_PAUSE_MS  after each request but the last, sleep randint(0, MAX_PAUSE_MS) ms;
                or MIN-MAX: randint(MIN, MAX) ms; or MIN-MAX,MIN-MAX...:
                a range drawn first (choice), then a pause in it: pauses
                kept clear of a server's idle timer, whose firing late
                under load must not cross a request the test sends
  --think MS    connect, then wait MS ms before writing the request (a
                program building its body): the pooled connection it got may
                die meanwhile
  --sndbuf N    with --think: for each even i, SO_SNDBUF set to N right
                after connect (an option the library does not carry onto a
                pooled socket: its connection is not parked again, the odd
                ones are), and the line ends with " sndbuf=<getsockopt
                after the response>": the socket that answered has it
  --ca CAFILE   HTTPS: an http.client.HTTPSConnection per request, all with
                one SSL context trusting CAFILE (hostname checked)

Prints "<i> <status> <body>" per request (the body with one trailing newline
dropped), or "ERROR <i> <exception class>: <message>" and carries on; exits 1
if any request raised.  A non-2xx status is printed, not an error.  Timeout
10 s.  http.client never retries by itself.
"""
import http.client
import random
import socket
import ssl
import sys
import time


def main():
    ctx = None
    if sys.argv[1:2] == ["--ca"]:
        ctx = ssl.create_default_context(cafile=sys.argv[2])
        del sys.argv[1:3]
    think = 0
    if sys.argv[1:2] == ["--think"]:
        think = int(sys.argv[2]) / 1000.0
        del sys.argv[1:3]
    sndbuf = 0
    if sys.argv[1:2] == ["--sndbuf"]:
        sndbuf = int(sys.argv[2])
        del sys.argv[1:3]
    if len(sys.argv) != 7:
        sys.exit("usage: pauses.py [--ca CAFILE] HOST PORT N METHOD SEED MAX_PAUSE_MS")
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    method = sys.argv[4].upper()
    rng = random.Random(int(sys.argv[5]))
    ranges = [(int(lo or 0), int(hi)) for lo, _, hi in
              (r.rpartition("-") for r in sys.argv[6].split(","))]
    mix = ("GET", "POST", "PUT", "PATCH", "DELETE", "POST20K")
    if method not in mix + ("MIX",):
        sys.exit("pauses.py: METHOD must be GET, POST, PUT, PATCH, DELETE or MIX, not %s"
                 % sys.argv[4])

    out = sys.stdout.buffer
    errors = 0
    for i in range(1, count + 1):
        if ctx:
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            if think:
                conn.connect()
                if sndbuf and i % 2 == 0:
                    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
                time.sleep(think)
            m = mix[(i - 1) % len(mix)] if method == "MIX" else method
            if m in ("GET", "DELETE"):
                conn.request(m, "/r/%d" % i)
            else:
                body = b"id=%d" % i
                if m == "POST20K":
                    m, body = "POST", (body + b"&").ljust(20480, b"x")
                conn.request(m, "/r/%d" % i, body=body,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
            res = conn.getresponse()
            body = res.read()
            if body.endswith(b"\n"):
                body = body[:-1]
            line = b"%d %d %s" % (i, res.status, body)
            if sndbuf and i % 2 == 0:
                line += b" sndbuf=%d" % conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            out.write(line + b"\n")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors += 1
            out.write(("ERROR %d %s: %s\n" % (i, type(e).__name__, e)).encode())
        finally:
            conn.close()
        out.flush()
        if i < count:
            lo, hi = rng.choice(ranges) if len(ranges) > 1 else ranges[0]
            time.sleep(rng.randint(lo, hi) / 1000.0)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
