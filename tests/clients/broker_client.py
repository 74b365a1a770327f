#!/usr/bin/env python3
"""broker_client.py - talk to keepalive-broker as a bad (or plain) client
would, for tests/broker.bats.  The message layout is pool/broker_proto.h's
struct bk_msg (280 bytes, host order).

  broker_client.py SOCKET junk HOST PORT     send every kind of bad message,
        each on its own connection, and print what the broker did with it
  broker_client.py SOCKET get HOST PORT      ask for a connection; print
        "got" (and check it is a TCP socket to HOST:PORT) or "none"
  broker_client.py SOCKET put HOST PORT      dial HOST:PORT, send a GET /f
        request, read the answer, hand the connection to the broker
  broker_client.py SOCKET tls-put HOST PORT NAME STATE   make an HTTPS
        request to HOST:PORT (TLS, no verification: the test's server), then
        hand the connection to the broker as a TLS one (TPUT) under NAME
        with the bytes STATE beside it; prints "sent" or why not
  broker_client.py SOCKET tls-get HOST PORT NAME   ask for a TLS connection
        under NAME (TGET); print "got STATE" (and check it is a TCP socket
        to HOST:PORT) or "none"
  broker_client.py SOCKET tls-junk HOST PORT   bad TLS connection messages,
        each on its own connection, and what the broker did with it
  broker_client.py SOCKET listen-exec CMD... create a listening socket at
        SOCKET (in a directory anyone may enter), then exec CMD with it as
        fd 3 and LISTEN_FDS=1, LISTEN_PID=its pid (socket activation)

The attacks of docs/broker.md, run inside a network namespace of their own
(unshare -U -r -n) by tests/broker.bats; each brings its namespace's lo up
and serves "the sandbox's server" at HOST:PORT there (requests logged to
LOG).  BK_PROTO=1 in the environment speaks the old protocol (v1, with a
namespace claim of NS), to show what the old code did:
  broker_client.py SOCKET attack HOST PORT LOG NS   non-dumpable, asks the
        broker for a connection and plants one to its own server; prints
        "get: got|none|closed" and "put: closed|open|reply"
  broker_client.py SOCKET fake-broker HOST PORT LOG NS   answer at SOCKET
        as a broker that hands out connections to the sandbox's server and
        takes what it is given ("put" lines in LOG); runs until killed
  broker_client.py SOCKET hog N         N connections that never say a word
  broker_client.py SOCKET stuck         listen without ever accepting, the
        backlog full (runs until killed)
"""
import array
import ctypes
import fcntl
import os
import socket
import struct
import sys
import threading
import time

MAGIC, VERSION = 0x6B61626B, 2
PUT, GET, REPLY, HELLO = 1, 2, 3, 4
F_PROOF = 1
SIZE = 280


def key(host, port, ns=0):
    addr = socket.inet_aton(host) + b"\0" * 12
    return struct.pack("=HHI16sQ", socket.AF_INET, port, 0, addr, ns)


def meta(requests=1):
    tag = b""
    return struct.pack("=IiiIQH192s6x", requests, -1, -1, 0, 0, len(tag), tag)


PROTO = int(os.environ.get("BK_PROTO", "2"))
CLAIM = 0  # v1: the namespace a message claims (the attacks set it)


def msg(typ, host, port, status=0, version=None, magic=MAGIC, ns=0, flags=0):
    """ns: a namespace claim in the key (v1 trusted one; v2 refuses it)"""
    if version is None:
        version = PROTO
    if PROTO == 1:  # v1: reserved 0, then the sender's namespace
        m = struct.pack("=IHHIIQ", magic, version, typ, status, 0, CLAIM)
    else:
        m = struct.pack("=IHHIIQ", magic, version, typ, status, flags, 0)
    m += key(host, port, ns) + meta()
    assert len(m) == SIZE, len(m)
    return m


def dial(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(path)
    return s


def send(path, data, fds=()):
    """send one datagram, return what came back: 'closed', 'reply' or 'open'"""
    s = dial(path)
    try:
        if fds:
            s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            s.send(data)
    except (BrokenPipeError, ConnectionResetError):
        # refused as it connected: the broker closed before our message
        s.close()
        return "closed"
    # a refusal closes at once; the broker also closes a client quiet for
    # a second (KEEPALIVE_BROKER_CLIENT_MS): "open" is decided well before
    s.settimeout(0.4)
    try:
        r = s.recv(SIZE + 1)
        return "closed" if not r else "reply"
    except (socket.timeout, TimeoutError):
        return "open"
    except ConnectionResetError:
        return "closed"
    finally:
        s.close()


def tcp(host, port):
    c = socket.create_connection((host, port))
    c.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
    while len(body) < length:
        body += c.recv(65536)
    return c


def junk(path, host, port):
    good_get = msg(GET, host, port)
    r, w = os.pipe()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect((host, port))
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind((host, 0))
    lst.listen(1)
    conn = tcp(host, port)  # a real connection to host:port
    cases = [
        ("garbage", b"\xff" * SIZE, ()),
        ("empty", b"", ()),
        ("truncated", good_get[:100], ()),
        ("oversized", good_get + b"x" * 100, ()),
        ("bad-version", msg(GET, host, port, version=9), ()),
        ("bad-magic", msg(GET, host, port, magic=1), ()),
        ("reply-to-broker", msg(REPLY, host, port), ()),
        ("other-netns", msg(GET, host, port, ns=4026531840), ()),
        ("put-without-fd", msg(PUT, host, port), ()),
        ("put-pipe", msg(PUT, host, port), (r,)),
        ("put-udp", msg(PUT, host, port), (udp.fileno(),)),
        ("put-listening", msg(PUT, host, port), (lst.fileno(),)),
        ("put-other-destination", msg(PUT, host, port + 1), (conn.fileno(),)),
        ("put-two-fds", msg(PUT, host, port), (conn.fileno(), conn.fileno())),
    ]
    for name, data, fds in cases:
        print(name, send(path, data, fds))
    # a client that dies mid-conversation: connects, says nothing, goes
    dial(path).close()
    print("vanished ok")


def get(path, host, port):
    s = dial(path)
    s.send(msg(GET, host, port))
    data, anc, flags, _ = s.recvmsg(SIZE + 1, socket.CMSG_SPACE(4 * 4))
    fds = array.array("i")
    for level, typ, d in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(d[: len(d) - len(d) % 4])
    if len(data) != SIZE:
        print("bad reply", len(data))
        return 1
    status, flags = struct.unpack_from("=II", data, 8)
    if flags & F_PROOF:  # the broker's listening socket, its proof
        os.close(fds.pop(0))
    if status != 0 or not fds:
        print("none")
        return 0
    c = socket.socket(fileno=fds[0])
    ok = c.type == socket.SOCK_STREAM and c.getpeername() == (host, port)
    print("got" if ok else "got-wrong")
    return 0


def put(path, host, port):
    c = tcp(host, port)
    print(send(path, msg(PUT, host, port), (c.fileno(),)))
    return 0


TPUT, TGET, TREPLY = 8, 9, 10


def tls_msg(typ, host, port, name, state=b"", timeout=60, flags=0, with_meta=True):
    """a TLS connection message: the header (with the connection's record
    in a TPUT), a struct bk_sess (name, lifetime, flags, length), the bytes"""
    m = struct.pack("=IHHIIQ", MAGIC, PROTO, typ, 0, 0, 0) + key(host, port)
    m += meta() if with_meta else b"\0" * (SIZE - len(m))
    return m + name.encode().ljust(32, b"\0")[:32] + struct.pack("=IIII", timeout, flags, len(state), 0) + state


def https(host, port):
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = ctx.wrap_socket(socket.create_connection((host, port)))
    c.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
    while len(body) < length:
        body += c.recv(65536)
    return c


def tls_put(path, host, port, name, state):
    c = https(host, port)
    s = dial(path)
    s.sendmsg([tls_msg(TPUT, host, port, name, state.encode())],
              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [c.fileno()]))])
    print("sent")
    return 0


def tls_get(path, host, port, name):
    s = dial(path)
    s.send(tls_msg(TGET, host, port, name, timeout=0, with_meta=False))
    data, anc, flags, _ = s.recvmsg(SIZE + 48 + 65536 + 1, socket.CMSG_SPACE(4 * 4))
    fds = array.array("i")
    for level, typ, d in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(d[: len(d) - len(d) % 4])
    typ, = struct.unpack_from("=H", data, 6)
    status, flags = struct.unpack_from("=II", data, 8)
    if typ != TREPLY or len(data) < SIZE + 48:
        print("bad reply", typ, len(data))
        return 1
    if flags & F_PROOF:  # the broker's listening socket, its proof
        os.close(fds.pop(0))
    n, = struct.unpack_from("=I", data, SIZE + 40)
    if status != 0 or not fds:
        print("none" if not fds and not n else "bad none")
        return 0
    c = socket.socket(fileno=fds[0])
    ok = c.type == socket.SOCK_STREAM and c.getpeername() == (host, port)
    print(("got " if ok else "got-wrong ") + data[SIZE + 48:SIZE + 48 + n].decode())
    return 0


def tls_junk(path, host, port):
    r, w = os.pipe()
    conn = https(host, port)
    big = b"x" * 65537
    cases = [
        ("tput-without-fd", tls_msg(TPUT, host, port, "n", b"state"), ()),
        ("tput-pipe", tls_msg(TPUT, host, port, "n", b"state"), (r,)),
        ("tput-other-destination", tls_msg(TPUT, host, port + 1, "n", b"state"), (conn.fileno(),)),
        ("tput-no-state", tls_msg(TPUT, host, port, "n", b""), (conn.fileno(),)),
        ("tput-no-lifetime", tls_msg(TPUT, host, port, "n", b"state", timeout=0), (conn.fileno(),)),
        ("tput-oversized", tls_msg(TPUT, host, port, "n", big), (conn.fileno(),)),
        ("tget-with-fd", tls_msg(TGET, host, port, "n", timeout=0, with_meta=False), (conn.fileno(),)),
        ("tget-with-record", tls_msg(TGET, host, port, "n", timeout=0), ()),
        ("treply-to-broker", tls_msg(TREPLY, host, port, "n", b"state", timeout=0), (conn.fileno(),)),
    ]
    for name, data, fds in cases:
        print(name, send(path, data, fds))


def listen_exec(path, argv):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(16)
    if s.fileno() != 3:
        os.dup2(s.fileno(), 3)
    os.set_inheritable(3, True)  # the socket may be fd 3 already
    env = dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
    os.execve(argv[0], argv, env)


def lo_up():
    """bring this namespace's loopback up (root in our user namespace; or
    it is up already: the test did it before dropping to another uid)"""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sh14x", b"lo", 0))  # SIOCGIFFLAGS
    flags = struct.unpack("16sh14x", ifr)[1]
    if not flags & 1:
        fcntl.ioctl(s, 0x8914, struct.pack("16sh14x", b"lo", flags | 1))  # SIOCSIFFLAGS
    s.close()


def sandbox_server(host, port, log):
    """keep-alive HTTP server in our namespace, every request logged"""
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((host, port))
    lst.listen(16)
    body = b"the sandbox's server\n"

    def serve(c):
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                d = c.recv(65536)
                if not d:
                    return
                data += d
            head, _, data = data.partition(b"\r\n\r\n")
            with open(log, "a") as f:
                f.write("request " + head.split(b"\r\n")[0].decode() + "\n")
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(body) + body)

    def loop():
        while True:
            c, _ = lst.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()


def own_conn(host, port):
    c = socket.create_connection((host, port))
    c.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"sandbox" not in data:
        data += c.recv(65536)
    return c


def attack(path, host, port, log, ns):
    """finding 1: a non-dumpable process in another namespace claims ours"""
    global CLAIM
    CLAIM = ns
    lo_up()
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/PID/ns/net unreadable
    sandbox_server(host, port, log)
    s = dial(path)
    try:
        # (a refusal as it connected: the broker closed before our message)
        s.send(msg(GET, host, port))
        data, anc, _, _ = s.recvmsg(SIZE + 1, socket.CMSG_SPACE(4 * 4))
        fds = array.array("i")
        for level, typ, d in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(d[: len(d) - len(d) % 4])
        status, flags = struct.unpack_from("=II", data, 8) if data else (1, 0)
        if flags & F_PROOF and PROTO == 2:
            os.close(fds.pop(0))
        print("get:", "closed" if not data else "got" if status == 0 and fds else "none")
        for fd in fds:
            os.close(fd)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        print("get: closed")
    s.close()
    c = own_conn(host, port)
    print("put:", send(path, msg(PUT, host, port), (c.fileno(),)))
    return 0


def fake_broker(path, host, port, log, ns):
    """finding 2: a broker answering at the user's path from a sandbox"""
    global CLAIM
    CLAIM = ns
    lo_up()
    sandbox_server(host, port, log)
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lst.bind(path)
    lst.listen(16)

    def client(c):
        proved = False
        while True:
            try:
                data, anc, _, _ = c.recvmsg(SIZE + 1, socket.CMSG_SPACE(4 * 4))
            except OSError:
                return
            if not data:
                return
            fds = array.array("i")
            for level, typ, d in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(d[: len(d) - len(d) % 4])
            typ = struct.unpack_from("=H", data, 6)[0]
            if typ == PUT:
                with open(log, "a") as f:
                    f.write("put %d fds\n" % len(fds))
                continue
            give = []
            if PROTO == 2 and not proved:
                give.append(lst.fileno())  # our listener: the "proof"
            flags = F_PROOF if give else 0
            proved = True
            if typ == GET:
                p = struct.unpack_from("=H", data, 26)[0]
                conn = own_conn(host, p)
                give.append(conn.fileno())
                m = msg(REPLY, host, p, status=0, flags=flags)
            else:
                conn = None
                m = msg(REPLY, host, port, status=1, flags=flags)
            c.sendmsg([m], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", give))])
            with open(log, "a") as f:
                f.write("gave %s\n" % ("a connection" if conn else "nothing"))
            if conn:
                conn.close()

    with open(log, "a") as f:
        f.write("listening\n")
    while True:
        c, _ = lst.accept()
        threading.Thread(target=client, args=(c,), daemon=True).start()


def hog(path, n):
    """finding 7: connections that never send anything"""
    keep = [dial(path) for _ in range(n)]
    print("holding", len(keep), flush=True)
    time.sleep(3600)


def stuck(path):
    """finding 5: a broker that does not accept, its backlog full"""
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lst.bind(path)
    lst.listen(0)
    keep = []
    for _ in range(4):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            break
        keep.append(c)
    print("stuck", len(keep), flush=True)
    time.sleep(3600)


def main():
    path, cmd = sys.argv[1], sys.argv[2]
    if cmd == "listen-exec":
        return listen_exec(path, sys.argv[3:])
    if cmd == "hog":
        return hog(path, int(sys.argv[3]))
    if cmd == "stuck":
        return stuck(path)
    host, port = sys.argv[3], int(sys.argv[4])
    if cmd == "tls-put":
        return tls_put(path, host, port, sys.argv[5], sys.argv[6])
    if cmd == "tls-get":
        return tls_get(path, host, port, sys.argv[5])
    if cmd == "tls-junk":
        return tls_junk(path, host, port) or 0
    if cmd in ("attack", "fake-broker"):
        f = attack if cmd == "attack" else fake_broker
        return f(path, host, port, sys.argv[5], int(sys.argv[6])) or 0
    return {"junk": junk, "get": get, "put": put}[cmd](path, host, port) or 0


if __name__ == "__main__":
    sys.exit(main())
