"""sock_state.py HOST PORT N - N requests, a socket each: connect, then
what the program can ask of the socket before writing (getsockopt
SO_ERROR, getpeername: CPython's ssl and curl ask them), then GET /r/i
with Connection: close, read to EOF.  Prints per request the answers and
the status line."""
import socket
import sys

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(1, n + 1):
    s = socket.create_connection((host, port), timeout=10)
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    try:
        peer = "peer=%s:%d" % s.getpeername()
    except OSError as e:
        peer = "getpeername: " + e.strerror
    s.sendall(b"GET /r/%d HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % i)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    print(i, "SO_ERROR=%d" % err, peer, got.split(b"\r\n", 1)[0].decode())
