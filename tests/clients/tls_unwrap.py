"""tls_unwrap.py PORT CAFILE N - CPython's SSLSocket.unwrap() after a
kept-alive exchange: its close_notify, then a wait for the server's
(SSL_shutdown called again), printed with what it raised
(tests/https_setters.bats; docs/tls.md "Found by the second HTTPS review")."""
import socket
import ssl
import sys

port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    t = ctx.wrap_socket(s, server_hostname="localhost")
    t.settimeout(20)
    t.sendall(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += t.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while length and len(body) < length[0]:
        body += t.recv(4096)
    print(i, head.split(b"\r\n")[0].decode(), len(body), flush=True)
    try:
        raw = t.unwrap()
        print(i, "unwrap ok", flush=True)
        raw.close()
    except (OSError, ValueError) as e:
        print(i, "unwrap", type(e).__name__, e, flush=True)
        t.close()
