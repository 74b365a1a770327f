# Python requests.get per request (a Session per call: a new connection each
# time, the pattern one process per request makes).  Prints every body;
# "rate=<requests/s>" on stderr.
# With CAFILE: HTTPS, verifying the server with that CA.
# Usage: python3 requests_get.py HOST PORT PATH N [CAFILE]
import sys, time
import requests
host, port, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ca = sys.argv[5] if len(sys.argv) > 5 else None
url = "%s://%s:%d%s" % ("https" if ca else "http", "[%s]" % host if ":" in host else host, port, path)
out = sys.stdout.buffer
t = time.monotonic()
for _ in range(n):
    out.write(requests.get(url, verify=ca if ca else True).content)
out.flush()
sys.stderr.write("rate=%d\n" % round(n / (time.monotonic() - t)))
