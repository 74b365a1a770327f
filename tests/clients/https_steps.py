"""https_steps.py CAFILE HOST PORT STEP... - Python's http.client over
HTTPS, a new HTTPSConnection (one SSL context, trusting CAFILE) per
request.  STEP is METHOD PATH (a POST carries a 5-byte body) or SLEEP
SECONDS, as separate arguments.  Prints per request "METHOD PATH -> status
body", or "ERROR <exception class>"."""
import http.client
import ssl
import sys
import time

ca, host, port, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
ctx = ssl.create_default_context(cafile=ca)
out = sys.stdout
while steps:
    method, arg, steps = steps[0], steps[1], steps[2:]
    if method == "SLEEP":
        time.sleep(float(arg))
        continue
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    try:
        conn.request(method, arg, body=b"hello" if method == "POST" else None)
        r = conn.getresponse()
        out.write("%s %s -> %d %s\n" % (method, arg, r.status, r.read().decode().strip()))
    except Exception as e:  # the same error with and without the shim
        out.write("%s %s -> ERROR %s\n" % (method, arg, type(e).__name__))
    finally:
        conn.close()
out.flush()
