# One process, many SSL contexts, one HTTPS request per step on its own
# connection (raw socket + ctx.wrap_socket, "Connection: close", read to
# EOF).  Under the shim the connections of earlier steps sit in the pool:
# each step must get exactly what it gets without the shim -- its own
# trust store, verify mode, hostname and client certificate decide.
# Prints one line per step: "<step> ok <status line> <body>" or
# "<step> fail <reason>".
# Usage: python3 tls_trust.py PORT TLSDIR STEP...
#   STEP = CTX@NAME: CTX one of trust (the test CA), other (a CA that did
#   not sign the server), none (CERT_NONE), trust+a / trust+b (client
#   certificate a or b), trust+sec4 (security level 4: the server's P-256
#   key is too weak for it), trust+p384 (key exchange limited to the
#   group secp384r1), trust+aes128 / trust+aes256 (TLS 1.2 ciphers limited
#   to AES-128-GCM / AES-256-GCM); NAME the name to verify (and send as SNI
#   unless it is an IP address).
import socket, ssl, sys

def context(tls, kind):
    if kind == "none":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    base, _, cert = kind.partition("+")
    ctx = ssl.create_default_context(cafile="%s/%s-ca.pem" % (tls, "other") if base == "other" else "%s/ca.pem" % tls)
    if cert == "sec4":
        ctx.set_ciphers("DEFAULT:@SECLEVEL=4")
    elif cert == "p384":
        ctx.set_ecdh_curve("secp384r1")
    elif cert in ("aes128", "aes256"):
        ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256" if cert == "aes128" else "ECDHE-ECDSA-AES256-GCM-SHA384")
    elif cert:
        ctx.load_cert_chain("%s/client-%s.pem" % (tls, cert), "%s/client-%s.key" % (tls, cert))
    return ctx


def fetch(s, i, name):
    """GET /echo/<i> with "Connection: close" on s, read to EOF: "<status line> <body>"."""
    s.sendall(b"GET /echo/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (i, name.encode()))
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode() + " " + body.decode().strip()


def report(label, fn):
    """Print "<label> ok <fn()>" or "<label> fail <reason>"."""
    try:
        print(label, "ok", fn())
    except ssl.SSLCertVerificationError as e:
        print(label, "fail", e.verify_message)
    except (ssl.SSLError, OSError) as e:
        print(label, "fail", type(e).__name__)


def run_step(port, tls, i, step):
    kind, _, name = step.partition("@")

    def one():
        with socket.create_connection(("127.0.0.1", port)) as sock:
            with context(tls, kind).wrap_socket(sock, server_hostname=name) as s:
                return fetch(s, i, name)

    report(step, one)


def main():
    port, tls = int(sys.argv[1]), sys.argv[2]
    for i, step in enumerate(sys.argv[3:]):
        run_step(port, tls, i, step)


if __name__ == "__main__":
    main()
