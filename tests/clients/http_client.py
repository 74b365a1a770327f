"""http_client.py HOST PORT METHOD PATH N [BODY_BYTES] - Python's
http.client, a new HTTPConnection per request (the unmodified-program
pattern), N requests; prints for each the status line, the headers as
received (Connection, Keep-Alive and Date aside: the shim may change the
first two) and the body, or "ERROR <exception class>" and carries on.
BODY_BYTES: send a body of that many bytes ("x"), with Content-Length."""
import http.client
import sys

host, port, method, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
body = b"x" * int(sys.argv[6]) if len(sys.argv) > 6 else None
out = sys.stdout.buffer
SKIP = {"connection", "keep-alive", "date"}
for i in range(n):
    out.write(b"== %d\n" % (i + 1))
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, body=body)
        r = conn.getresponse()
        out.write(b"%d %s\n" % (r.status, r.reason.encode("latin-1")))
        for k, v in r.getheaders():
            if k.lower() not in SKIP:
                out.write(("%s: %s\n" % (k, v)).encode("latin-1"))
        out.write(b"\n" + r.read() + b"\n")
    except Exception as e:  # the same error with and without the shim
        out.write(b"ERROR %s\n" % type(e).__name__.encode())
    finally:
        conn.close()
out.flush()
