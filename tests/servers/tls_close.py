#!/usr/bin/python3
"""tls_close.py - an HTTPS server that keeps connections alive and ends
one when its request asks to close (Connection: close, answered with
Connection: close), in one of two ways, as MODE says:
  notify  close_notify, then the TCP FIN (as nginx, Apache)
  ragged  the TCP FIN alone, no close_notify
  byagent ragged where the request's User-Agent holds "MSIE", else notify
          (as Apache's BrowserMatch ... ssl-unclean-shutdown)
tests/https_close.bats and tests/matrix.bats use it (docs/tls.md "Ragged
closes").

Usage: tls_close.py CERT KEY PORT_FILE LOG MODE
LOG gets "<conn_id> <request line>" per request, before the answer.
With TLS_CLOSE_CUT=N in the environment, the Nth request on any
connection is read and not answered: logged "<conn_id> cut <request line>",
the connection then ended as MODE says (a keep-alive server's close of an
idle connection that crossed a request: docs/replay.md).
With TLS12=1, TLS 1.2 at most.  With TLS_CLOSE_STRICT=1, a connection the client ends is logged
"<conn_id> end close_notify" or "<conn_id> end eof" (the TCP FIN without
a close_notify: SSL_OP_IGNORE_UNEXPECTED_EOF, which Python 3.11's
contexts set, cleared), as a strict server tells them.
With TLS_CLOSE_HOLD="TARGET FILE", a request for TARGET is logged, then
answered only once FILE exists (at most 30 s): a test acts while its
client waits.
"""
import os
import socket
import ssl
import sys
import threading
import time

cert, key, port_file, log_path, mode = sys.argv[1:6]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
if os.environ.get("TLS12"):
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
strict = os.environ.get("TLS_CLOSE_STRICT") == "1"
if strict:
    ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
lock = threading.Lock()
count = [0]
cut_at = int(os.environ.get("TLS_CLOSE_CUT", "0"))
hold = os.environ.get("TLS_CLOSE_HOLD", "").split()


def held(head):
    if len(hold) != 2 or head.split(b" ")[1:2] != [hold[0].encode()]:
        return
    for _ in range(300):
        if os.path.exists(hold[1]):
            return
        time.sleep(0.1)


def log_end(conn_id, how):
    if strict:
        with lock:
            with open(log_path, "a") as f:
                f.write("%d end %s\n" % (conn_id, how))


def serve(raw, conn_id):
    try:
        s = ctx.wrap_socket(raw, server_side=True, suppress_ragged_eofs=not strict)
    except (OSError, ValueError):
        raw.close()
        return
    buf = b""
    nth = 0
    while True:
        while b"\r\n\r\n" not in buf:
            try:
                data = s.recv(4096)
                how = "close_notify"
            except ssl.SSLError as e:
                # (OpenSSL 3: UNEXPECTED_EOF_WHILE_READING; older: SSLEOFError)
                eof = isinstance(e, ssl.SSLEOFError) or e.reason == "UNEXPECTED_EOF_WHILE_READING"
                data, how = b"", "eof" if eof else "error"
            except (OSError, ValueError):
                data, how = b"", "error"
            if not data:
                log_end(conn_id, how)
                s.close()
                return
            buf += data
        head, buf = buf.split(b"\r\n\r\n", 1)
        nth += 1
        cut = nth == cut_at
        with lock:
            with open(log_path, "a") as f:
                f.write("%d %s%s\n" % (conn_id, "cut " if cut else "", head.split(b"\r\n")[0].decode()))
        held(head)
        if not cut and b"\r\nconnection: close" not in head.lower():
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            continue
        if not cut:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        agent = [l for l in head.lower().split(b"\r\n") if l.startswith(b"user-agent:")]
        ragged = mode == "ragged" or (mode == "byagent" and any(b"msie" in l for l in agent))
        if not ragged:
            # SSL_shutdown once: our close_notify, not waiting for the
            # client's (unwrap would wait)
            s.settimeout(0)
            try:
                s.unwrap()
            except (OSError, ValueError):
                pass
            raw2 = s
        else:
            raw2 = s
        try:
            raw2.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        raw2.close()
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
            count[0] += 1
            cid = count[0]
        threading.Thread(target=serve, args=(raw, cid), daemon=True).start()


main()
