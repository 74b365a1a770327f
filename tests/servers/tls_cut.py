#!/usr/bin/python3
"""tls_cut.py - an HTTPS server whose every second response (counted over
the server's life, whatever the connection) is cut short: Content-Length
100, five bytes of body, then the socket closed without close_notify.
The others are whole keep-alive responses.  tests/https_config.bats uses it
to show what a truncated body reads as (SSL_OP_IGNORE_UNEXPECTED_EOF).

With a MODE, the cut answer's five bytes are followed instead by bytes
that are not its next record, written on the TCP socket beneath the TLS
connection; the server then reads what the client sends until it ends
(its alert, told by its own SSL: "alert <what it read>" in LOG) and
closes.  tests/https_handout.bats compares what a client reads of it, and
the alert, with and without the library.  MODE: plain (an HTTP response
in clear), handshake (a handshake record in clear), oldversion (a data
record with version 3.1), badmac (a data record of random bytes), alert
(a fatal alert in clear), ccs (a ChangeCipherSpec), badtype (a record of
type 0x18), empty (a data record of length 0), len:N (a data record of N
random bytes), hex:BYTES.  With TLS12=1 in the environment, TLS 1.2 at
most.

Usage: tls_cut.py CERT KEY PORT_FILE LOG [MODE]
LOG gets "<conn_id> <request line>" per request, before the answer.
"""
import os
import socket
import ssl
import sys
import threading

cert, key, port_file, log_path = sys.argv[1:5]
mode = sys.argv[5] if len(sys.argv) > 5 else None
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
if os.environ.get("TLS12"):
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
lock = threading.Lock()
count = [0, 0]  # requests, connections

GARBAGE = {
    "plain": b"HTTP/1.1 200 OK\r\nContent-Length: 95\r\n\r\n" + b"x" * 95,
    "handshake": b"\x16\x03\x03\x00\x05" + b"\x01\x00\x00\x01\x00",
    "oldversion": b"\x17\x03\x01\x00\x20" + os.urandom(32),
    "badmac": b"\x17\x03\x03\x00\x30" + os.urandom(48),
    "alert": b"\x15\x03\x03\x00\x02\x02\x28",
    "ccs": b"\x14\x03\x03\x00\x01\x01",
    "badtype": b"\x18\x03\x03\x00\x20" + os.urandom(32),
    "empty": b"\x17\x03\x03\x00\x00",
}
if mode and mode.startswith("len:"):
    n = int(mode[4:])
    GARBAGE[mode] = b"\x17\x03\x03" + n.to_bytes(2, "big") + os.urandom(n)
if mode and mode.startswith("hex:"):
    GARBAGE[mode] = bytes.fromhex(mode[4:])


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def garbage(s):
    """MODE's bytes beneath the TLS connection, then the client's alert"""
    under = socket.socket(fileno=os.dup(s.fileno()))  # (wrap_socket detached raw)
    under.sendall(GARBAGE[mode])
    under.close()
    try:
        while s.recv(4096):
            pass
        what = "eof"
    except ssl.SSLError as e:
        what = e.reason or "ssl-error"
    except OSError as e:
        what = "oserror %d" % e.errno
    log("alert %s" % what)


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
        log("%d %s" % (conn_id, head.split(b"\r\n")[0].decode()))
        if n % 2:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwhole")
            continue
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        if mode:
            garbage(s)
        else:
            # no close_notify: the TCP connection just ends
            # (SSLSocket.shutdown is the socket's, not TLS's)
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
    os.rename(port_file + ".tmp", port_file)
    while True:
        raw, _ = ls.accept()
        with lock:
            count[1] += 1
            cid = count[1]
        threading.Thread(target=serve, args=(raw, cid), daemon=True).start()


main()
