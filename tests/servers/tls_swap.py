#!/usr/bin/python3
"""tls_swap.py DIR PORTFILE LOG SECOND MODE - a TLS 1.3 HTTP/1.1 keep-alive
server on 127.0.0.1 that changes its certificate: connection 1 presents
DIR/server.pem, every later one DIR/SECOND.pem (docs/tls.md "A fresh
handshake in place of a handed-out one").  On connection 1 the first
request is answered (keep-alive) and the second read, then the connection
ends without an answer: MODE close (close_notify and a FIN) or rst (a
reset, SO_LINGER 0), or, MODE none, answered too.  Later connections answer
every request.  Each request is logged before its answer: "<conn> <A|B>
<request line>", and where the request line carries "tls-unique=HEX",
" binding same" or " binding other" after it: whether that is this
connection's channel binding (RFC 5929, as CPython computes it)."""
import os
import socket
import ssl
import struct
import sys
import threading

d, port_file, log_path, second, mode = sys.argv[1:6]


def context(name):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.minimum_version = ssl.TLSVersion.TLSv1_3
    c.load_cert_chain(os.path.join(d, name + ".pem"), os.path.join(d, name + ".key"))
    c.set_alpn_protocols(["http/1.1"])  # chosen where a client offers it
    return c


first, later = context("server"), context(second)
lock = threading.Lock()


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def serve(sock, cid):
    name = "A" if cid == 1 else "B"
    try:
        t = (first if cid == 1 else later).wrap_socket(sock, server_side=True)
    except (ssl.SSLError, OSError):
        sock.close()
        return
    buf, k = b"", 0
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                x = t.recv(65536)
                if not x:
                    t.close()
                    return
                buf += x
            head, buf = buf.split(b"\r\n\r\n", 1)
            k += 1
            line = head.split(b"\r\n")[0].decode()
            if "tls-unique=" in line:
                sent = line.split("tls-unique=")[1].split()[0]
                own = (t.get_channel_binding("tls-unique") or b"").hex()
                line += " binding same" if sent == own else " binding other"
            log("%d %s %s" % (cid, name, line))
            if cid == 1 and k == 2 and mode == "rst":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
                return
            if cid == 1 and k == 2 and mode == "close":
                try:
                    t.unwrap()
                except (ssl.SSLError, OSError):
                    pass
                sock.close()
                return
            body = ("conn %d cert %s req %d\n" % (cid, name, k)).encode()
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except (ssl.SSLError, OSError):
        pass


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % listener.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
n = 0
while True:
    s, _ = listener.accept()
    n += 1
    threading.Thread(target=serve, args=(s, n), daemon=True).start()
