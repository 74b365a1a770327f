"""tls_binding.py PORT CA N - N connections to tests/servers/tls_binding.py
on 127.0.0.1, one GET asking to close on each (CPython's ssl, verified as
"localhost"): prints per connection whether the channel binding the
program computes (get_channel_binding("tls-unique")) is the one the
server computed, which it answers in its body (docs/tls.md "Found by the
HTTPS review at 4183573")."""
import socket
import ssl
import sys

port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
for i in range(1, n + 1):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    mine = (s.get_channel_binding("tls-unique") or b"").hex()
    s.sendall(b"GET /%d HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % i)
    data = b""
    while True:
        x = s.recv(4096)
        if not x:
            break
        data += x
    body = data.split(b"\r\n\r\n", 1)[-1].decode()
    server = body.split("tls-unique=")[-1].strip()
    print(i, s.version(), "reused", s.session_reused, "the same binding" if mine == server else
          "another binding (server: %s)" % body.strip())
    s.close()
