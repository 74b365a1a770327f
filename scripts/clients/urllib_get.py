# Python urllib.request.urlopen per request (sends Connection: close).
# Usage: python3 urllib_get.py HOST PORT PATH N
import sys, time, urllib.request
host, port, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
url = "http://%s:%d%s" % ("[%s]" % host if ":" in host else host, port, path)
t = time.monotonic()
out = sys.stdout.buffer
for _ in range(n):
    out.write(urllib.request.urlopen(url).read())
sys.stderr.write("rate=%d\n" % round(n / (time.monotonic() - t)))
