#!/usr/bin/python3
"""tls_binding.py DIR PORTFILE VER - an HTTP/1.1 server over TLS (VER 12 or
13 only, DIR/server.pem) on 127.0.0.1 that answers every request with its
own view of the connection: "reused=<session_reused> tls-unique=<hex>"
(RFC 5929's channel binding, as CPython computes it from the handshake's
Finished messages); a request asking to close is answered and the
connection shut with close_notify (docs/tls.md "Found by the HTTPS review
at 4183573")."""
import os
import socket
import ssl
import sys
import threading

d, port_file, ver = sys.argv[1:4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
v = ssl.TLSVersion.TLSv1_3 if ver == "13" else ssl.TLSVersion.TLSv1_2
ctx.minimum_version = ctx.maximum_version = v
ctx.load_cert_chain(os.path.join(d, "server.pem"), os.path.join(d, "server.key"))


def serve(sock):
    try:
        t = ctx.wrap_socket(sock, server_side=True)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                x = t.recv(65536)
                if not x:
                    return
                buf += x
            head, buf = buf.split(b"\r\n\r\n", 1)
            cb = t.get_channel_binding("tls-unique") or b""
            body = ("reused=%s tls-unique=%s\n" % (t.session_reused, cb.hex())).encode()
            close = b"connection: close" in head.lower()
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" %
                      (len(body), b"Connection: close\r\n" if close else b"") + body)
            if close:
                t.unwrap()
                return
    except (OSError, ssl.SSLError):
        pass
    finally:
        sock.close()


ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(16)
open(port_file + ".tmp", "w").write("%d\n" % ls.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
while True:
    s, _ = ls.accept()
    threading.Thread(target=serve, args=(s,), daemon=True).start()
