"""subprocess_between.py HOST PORT - a kept-alive http.client connection
stays open across subprocess.run() (a vfork child that closes every fd with
close_range()); then it is closed and urllib makes 3 more requests."""
import http.client
import subprocess
import sys
import urllib.request

host, port = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
conn = http.client.HTTPConnection(host, port)
for _ in range(2):
    conn.request("GET", "/f")
    out.write(conn.getresponse().read())
    subprocess.run(["true"], check=True)
conn.close()
for _ in range(3):
    out.write(urllib.request.urlopen("http://%s:%d/f" % (host, port)).read())
    subprocess.run(["true"], check=True)
