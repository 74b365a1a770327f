# Python urllib.request.urlopen per request (it sends Connection: close).
# Prints every body; "rate=<requests/s>" on stderr.
# Usage: python3 urllib_get.py HOST PORT PATH N
import sys, time, urllib.request
host, port, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
url = "http://%s:%d%s" % ("[%s]" % host if ":" in host else host, port, path)
out = sys.stdout.buffer
t = time.monotonic()
for _ in range(n):
    with urllib.request.urlopen(url) as r:
        out.write(r.read())
out.flush()
sys.stderr.write("rate=%d\n" % round(n / (time.monotonic() - t)))
