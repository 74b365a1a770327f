#!/usr/bin/python3
"""tls_cut.py - an HTTPS server whose every second response (counted over
the server's life, whatever the connection) is cut short: Content-Length
100, five bytes of body, then the socket closed without close_notify.
The others are whole keep-alive responses.  tests/https_config.bats uses it
to show what a truncated body reads as (SSL_OP_IGNORE_UNEXPECTED_EOF).

Usage: tls_cut.py CERT KEY PORT_FILE LOG
LOG gets "<conn_id> <request line>" per request, before the answer.
"""
import socket
import ssl
import sys
import threading

cert, key, port_file, log_path = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
lock = threading.Lock()
count = [0, 0]  # requests, connections


def serve(raw, conn_id):
    try:
        s = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ValueError):
        raw.close()
        return
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            try:
                data = s.recv(4096)
            except (OSError, ValueError):
                data = b""
            if not data:
                s.close()
                return
            buf += data
        head, buf = buf.split(b"\r\n\r\n", 1)
        with lock:
            count[0] += 1
            n = count[0]
            with open(log_path, "a") as f:
                f.write("%d %s\n" % (conn_id, head.split(b"\r\n")[0].decode()))
        if n % 2:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwhole")
            continue
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        # no close_notify: the TCP connection just ends (SSLSocket.shutdown
        # is the socket's, not TLS's)
        s.shutdown(socket.SHUT_RDWR)
        s.close()
        return


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    import os
    os.rename(port_file + ".tmp", port_file)
    while True:
        raw, _ = ls.accept()
        with lock:
            count[1] += 1
            cid = count[1]
        threading.Thread(target=serve, args=(raw, cid), daemon=True).start()


main()
