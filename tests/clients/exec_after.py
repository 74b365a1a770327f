"""exec_after.py HOST PORT - 3 urllib requests (under the shim the
connection is pooled, on a hidden fd), then os.execv() of ls on
/proc/self/fd: the exec'd program must hold the same fds as without the
shim (pooled sockets are close-on-exec)."""
import os
import sys
import urllib.request

host, port = sys.argv[1], int(sys.argv[2])
for _ in range(3):
    sys.stdout.buffer.write(urllib.request.urlopen("http://%s:%d/f" % (host, port)).read())
sys.stdout.flush()
os.execv("/bin/ls", ["ls", "-1", "/proc/self/fd"])
