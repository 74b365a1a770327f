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
  broker_client.py SOCKET listen-exec CMD... create a listening socket at
        SOCKET (in a directory anyone may enter), then exec CMD with it as
        fd 3 and LISTEN_FDS=1, LISTEN_PID=its pid (socket activation)
"""
import array
import os
import socket
import struct
import sys

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


def msg(typ, host, port, status=0, version=VERSION, magic=MAGIC, ns=0):
    """ns: a namespace claim in the key (v1 trusted one; v2 refuses it)"""
    m = struct.pack("=IHHIIQ", magic, version, typ, status, 0, 0)
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
    if fds:
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        s.send(data)
    s.settimeout(1)
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


def main():
    path, cmd = sys.argv[1], sys.argv[2]
    if cmd == "listen-exec":
        return listen_exec(path, sys.argv[3:])
    host, port = sys.argv[3], int(sys.argv[4])
    return {"junk": junk, "get": get, "put": put}[cmd](path, host, port) or 0


if __name__ == "__main__":
    sys.exit(main())
