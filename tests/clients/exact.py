"""exact.py HOST PORT N - N GETs, each on its own socket asking to close,
each response read one byte at a time up to the end its Content-Length
gives (a careful reader: never a byte more), then the socket closed;
prints "<i> <status> <body>", or "ERROR <i> <exception class>"."""
import socket
import sys

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(1, n + 1):
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(b"GET /e/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (i, host.encode()))
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            b = s.recv(1)
            if not b:
                raise ConnectionError("EOF in the head")
            head += b
        lines = head.decode("latin-1").split("\r\n")
        if not lines[0].startswith("HTTP/1.1 "):
            raise ValueError("not a status line: %r" % lines[0])
        status = lines[0].split(" ")[1]
        length = [int(l.split(":")[1]) for l in lines if l.lower().startswith("content-length:")][0]
        body = b""
        while len(body) < length:
            b = s.recv(1)
            if not b:
                raise ConnectionError("EOF in the body")
            body += b
        print(i, status, body.decode("latin-1"), flush=True)
    except Exception as e:  # the same error with and without the shim
        print("ERROR", i, type(e).__name__, flush=True)
    finally:
        s.close()
