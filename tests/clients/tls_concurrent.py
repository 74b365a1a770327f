# TLS session resumption as the fallback where no pooled connection can
# serve: one HTTPS request on its own connection (CTX1), then two
# connections opened together (CTX2, both handshakes before either
# request), a request on each, both closed.  Under the shim the first
# connection is pooled: one of the two gets it, the other must make a
# handshake of its own.  Prints "<step> ok <status line> <body>" or
# "<step> fail <reason>" per request.
# Usage: python3 tls_concurrent.py PORT TLSDIR CTX1[,CTX1b] CTX2 (CTX as in tls_trust.py)
import socket, ssl, sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tls_trust import context, fetch, report  # noqa: E402

port, tls, kinds = int(sys.argv[1]), sys.argv[2], sys.argv[3:5]


def connect(kind):
    sock = socket.create_connection(("127.0.0.1", port))
    return context(tls, kind).wrap_socket(sock, server_hostname="localhost")


def first(kind, i=0):
    with connect(kind) as s:
        return fetch(s, i, "localhost")


# CTX1 "A,B": a request with A first (step "0"), then the one with B
firsts = kinds[0].split(",")
if len(firsts) > 1:
    report("0", lambda: first(firsts[0], 9))
report("1", lambda: first(firsts[-1]))
socks = []
for i in (1, 2):
    try:
        socks.append(connect(kinds[1]))
    except ssl.SSLCertVerificationError as e:
        print("connect", i, "fail", e.verify_message)
    except (ssl.SSLError, OSError) as e:
        print("connect", i, "fail", type(e).__name__)
for i, s in enumerate(socks, 1):
    report(str(i + 1), lambda: fetch(s, i, "localhost"))
    s.close()
