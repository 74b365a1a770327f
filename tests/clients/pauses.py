#!/usr/bin/python3
"""pauses.py [--ca CAFILE] HOST PORT N METHOD SEED MAX_PAUSE_MS - pauses.rb
in Python.

N requests, each on its own http.client.HTTPConnection (connect, one request,
close: the unmodified-program pattern), with random pauses between them: the
client for stale pooled connections.

  METHOD        GET or POST; request i (1..N) is METHOD /r/<i>, a POST with
                the body "id=<i>" (Content-Length, form-urlencoded)
  SEED          random.Random(SEED): the same pauses on every run (not the
                same as pauses.rb's for the same SEED)
  MAX_PAUSE_MS  after each request but the last, sleep randint(0, MAX_PAUSE_MS) ms
  --ca CAFILE   HTTPS: an http.client.HTTPSConnection per request, all with
                one SSL context trusting CAFILE (hostname checked)

Prints "<i> <status> <body>" per request (the body with one trailing newline
dropped), or "ERROR <i> <exception class>: <message>" and carries on; exits 1
if any request raised.  A non-2xx status is printed, not an error.  Timeout
10 s.  http.client never retries by itself.
"""
import http.client
import random
import ssl
import sys
import time


def main():
    ctx = None
    if sys.argv[1:2] == ["--ca"]:
        ctx = ssl.create_default_context(cafile=sys.argv[2])
        del sys.argv[1:3]
    if len(sys.argv) != 7:
        sys.exit("usage: pauses.py [--ca CAFILE] HOST PORT N METHOD SEED MAX_PAUSE_MS")
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    method = sys.argv[4].upper()
    rng = random.Random(int(sys.argv[5]))
    max_pause = int(sys.argv[6])
    if method not in ("GET", "POST"):
        sys.exit("pauses.py: METHOD must be GET or POST, not %s" % sys.argv[4])

    out = sys.stdout.buffer
    errors = 0
    for i in range(1, count + 1):
        if ctx:
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            if method == "GET":
                conn.request("GET", "/r/%d" % i)
            else:
                conn.request("POST", "/r/%d" % i, body=b"id=%d" % i,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
            res = conn.getresponse()
            body = res.read()
            if body.endswith(b"\n"):
                body = body[:-1]
            out.write(b"%d %d %s\n" % (i, res.status, body))
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors += 1
            out.write(("ERROR %d %s: %s\n" % (i, type(e).__name__, e)).encode())
        finally:
            conn.close()
        out.flush()
        if i < count:
            time.sleep(rng.randint(0, max_pause) / 1000.0)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
