# Python urllib.request.urlopen per request (it sends Connection: close).
# Prints every body; "rate=<requests/s>" on stderr.
# With CAFILE: HTTPS, with an SSL context that trusts that CA.
# Usage: python3 urllib_get.py HOST PORT PATH N [CAFILE]
import ssl, sys, time, urllib.request
host, port, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ctx = ssl.create_default_context(cafile=sys.argv[5]) if len(sys.argv) > 5 else None
url = "%s://%s:%d%s" % ("https" if ctx else "http", "[%s]" % host if ":" in host else host, port, path)
out = sys.stdout.buffer
t = time.monotonic()
for _ in range(n):
    with urllib.request.urlopen(url, context=ctx) as r:
        out.write(r.read())
out.flush()
sys.stderr.write("rate=%d\n" % round(n / (time.monotonic() - t)))
