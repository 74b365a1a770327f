# One HTTPS GET through urllib with an SSL context shaped by the options,
# for loops of one process per request (tests/https_broker.bats).  Prints
# what the program can see: the body, or the error's class and reason;
# with --show, the protocol, session_reused and the peer's subject.
# Usage: python3 tls_once.py HOST PORT PATH [--ca FILE|--system] [--name SNI]
#        [--max 1.2] [--noverify] [--cert PREFIX] [--norenego] [--show] [--getters] [--time]
#        [--drain] [--ua-urllib]
# --norenego: SSL_OP_NO_RENEGOTIATION (a TLS 1.2 connection from another
# process is handed only to such a program: docs/tls-across.md)
# --drain: read the answer to the server's end (its close_notify) before
# closing, as curl does, where urllib stops at Content-Length: the end read
# teaches the library how the server ends at once (docs/tls.md "Ragged
# closes"), not by a read at close that a late close_notify can miss
# --ua-urllib: urllib.request's User-Agent, so what this process teaches
# holds for urllib's requests (learnt per User-Agent)
# --plain: connect, then speak plain HTTP to the port (no TLS), print the
# answer's status line; --unused: connect, close at once; --fork: fork
# between connect() and the handshake, the child closing its copy and
# saying so, the parent going on when the child is gone (the hand-out at
# connect(): docs/tls-across.md); --dup: a dup of the socket made and
# closed between them; --dirty: O_ASYNC with this process as the socket's
# owner, then closed unused; --dirty-opts: TCP_NODELAY and SO_KEEPALIVE
# set, then closed unused; --sockstate: the socket's O_ASYNC, owner,
# TCP_NODELAY and SO_KEEPALIVE printed after connect() (what a socket
# handed on would carry of an earlier owner's); --peek-late: 1.5 s after
# connect() (past /short/'s keep-alive), a peek that does not wait,
# printed, then the request as usual; --poll-late: the same with poll(0)
# for POLLIN
import fcntl, os, select, socket, ssl, sys, time, urllib.request, http.client
host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opts = sys.argv[4:]
def opt(name, default=None):
    return opts[opts.index(name) + 1] if name in opts else default
if "--system" in opts:
    ctx = ssl.create_default_context()
else:
    ctx = ssl.create_default_context(cafile=opt("--ca"))
if "--noverify" in opts:
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
if opt("--cert"):
    ctx.load_cert_chain(opt("--cert") + ".pem", opt("--cert") + ".key")
if "--norenego" in opts:
    ctx.options |= ssl.OP_NO_RENEGOTIATION
if opt("--max") == "1.2":
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
name = opt("--name", host)
try:
    t0 = time.monotonic()
    c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    # SNI and the name checked: --name (the address dialled stays HOST)
    raw = c._create_connection((host, port), 10)
    if "--plain" in opts:
        raw.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
        print(raw.makefile("rb").readline().decode().strip())
        sys.exit(0)
    if "--sockstate" in opts:
        fl = fcntl.fcntl(raw.fileno(), fcntl.F_GETFL)
        print("async=%d owner=%d nodelay=%d keepalive=%d" % (
            bool(fl & os.O_ASYNC), fcntl.fcntl(raw.fileno(), fcntl.F_GETOWN) != 0,
            raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
            raw.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)))
    if "--peek-late" in opts:
        time.sleep(1.5)
        raw.settimeout(0)  # (with a timeout, Python waits for POLLIN first)
        try:
            print("peek: %d bytes" % len(raw.recv(64, socket.MSG_PEEK)))
        except BlockingIOError:
            print("peek: EAGAIN")
        raw.settimeout(10)
    if "--poll-late" in opts:
        time.sleep(1.5)
        p = select.poll()
        p.register(raw, select.POLLIN)
        print("poll:", "readable" if p.poll(0) else "nothing")
    if "--dirty" in opts:
        fcntl.fcntl(raw.fileno(), fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(raw.fileno(), fcntl.F_SETFL, fcntl.fcntl(raw.fileno(), fcntl.F_GETFL) | os.O_ASYNC)
        raw.close()
        print("closed unused, O_ASYNC")
        sys.exit(0)
    if "--dirty-opts" in opts:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        raw.close()
        print("closed unused, options set")
        sys.exit(0)
    if "--unused" in opts:
        raw.close()
        print("closed unused")
        sys.exit(0)
    if "--dup" in opts:
        os.close(os.dup(raw.fileno()))
    if "--fork" in opts:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            raw.close()
            print("child closed its copy")
            sys.stdout.flush()
            os._exit(0)
        os.waitpid(pid, 0)
    c.sock = ctx.wrap_socket(raw, server_hostname=name)
    headers = {"Connection": "close"}
    if "--ua-urllib" in opts:
        headers.update(urllib.request.build_opener().addheaders)
    c.request("GET", path, headers=headers)
    s = c.sock
    if "--show" in opts:
        print("version=%s reused=%s subject=%s" % (s.version(), s.session_reused,
              dict(x[0] for x in s.getpeercert()["subject"]) if ctx.verify_mode != ssl.CERT_NONE else "-"))
    if "--getters" in opts:  # what the SSL's getters answer after the handshake
        der = s.getpeercert(binary_form=True)
        print("cipher=%s alpn=%s compression=%s shared=%s pending=%d peer=%d bytes %s" % (
            s.cipher(), s.selected_alpn_protocol(), s.compression(), s.shared_ciphers(), s.pending(),
            len(der) if der else 0, s.getpeercert() if ctx.verify_mode != ssl.CERT_NONE else "-"))
    if "--drain" in opts:
        raw, chunk = b"", s.recv(65536)
        while chunk:
            raw += chunk
            chunk = s.recv(65536)
        head, body = raw.split(b"\r\n\r\n", 1)
        status = int(head.split()[1])
    else:
        r = c.getresponse()
        status, body = r.status, r.read()
    if "--time" in opts:  # connect, handshake and request, in ms
        sys.stderr.write("ms=%.1f\n" % ((time.monotonic() - t0) * 1000))
    sys.stdout.write("status=%d\n" % status)
    sys.stdout.buffer.write(body)
    c.close()
except (ssl.SSLError, OSError) as e:
    print("error=%s %s" % (type(e).__name__, getattr(e, "reason", None) or getattr(e, "verify_message", "")))
