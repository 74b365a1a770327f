"""gone.py HOST PORT N PAUSE_MS - N GETs with Python's http.client, a new
HTTPConnection each (asking nothing of keep-alive), PAUSE_MS between them;
prints "<i> <status> <body>" or "ERROR <i> <exception class>" for each."""
import http.client
import sys
import time

host, port, n, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i in range(1, n + 1):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/g/%d" % i)
        r = conn.getresponse()
        print(i, r.status, r.read().decode().strip(), flush=True)
    except Exception as e:  # the same error with and without the shim
        print("ERROR", i, type(e).__name__, flush=True)
    finally:
        conn.close()
    time.sleep(pause / 1000.0)
