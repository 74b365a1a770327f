"""fork_cue.py HOST PORT PATH DIR - urllib fetches PATH (it sends
"Connection: close") in a thread; once the request has crossed nginx (the
fifo DIR/got, tests/servers/cue.py), the main thread forks (the child
_exits), then cues the upstream's answer (DIR/cue).  Prints what urllib
read.  Each step waits for an event, never for a time."""
import os
import sys
import threading
import urllib.request

host, port, path, d = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
res = {}


def fetch():
    try:
        with urllib.request.urlopen("http://%s:%s%s" % (host, port, path), timeout=60) as r:
            res["r"] = (r.status, r.read())
    except Exception as e:  # what the program would print
        res["r"] = repr(e)


t = threading.Thread(target=fetch)
t.start()
with open(os.path.join(d, "got")) as f:
    f.readline()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
with open(os.path.join(d, "cue"), "w") as f:
    f.write("go\n")
t.join()
print("fork", res["r"])
