#!/usr/bin/python3
"""tls_pipelined.py PORT CA N - N rounds over HTTPS, one connection each
(Python's ssl, a 10 s socket timeout): connect, then (from the second
round on) 250 ms before writing, then GET /a/K and POST /b/K in two
separate writes, pipelined, and both answers read (Content-Length).
Prints "K 2 answers" or "K ERROR <exception>".  Against
tests/servers/cases/idle_after_response100 (its server closes a
connection 100 ms after its last answer) a pooled connection dies while
the program thinks: the GET meets the dead socket and the POST's write
comes behind it (docs/replay.md "What the program observes", TLS)."""
import socket
import ssl
import sys
import time

port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)


def answers(s):
    """Both answers, each a head and its Content-Length body."""
    data, got = b"", 0
    while got < 2:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            length = 0
            for line in data[:head_end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(data) >= head_end + 4 + length:
                data = data[head_end + 4 + length:]
                got += 1
                continue
        more = s.recv(4096)
        if not more:
            break
        data += more
    return got


for k in range(1, n + 1):
    try:
        raw = socket.create_connection(("127.0.0.1", port))
        raw.settimeout(10)
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        if k > 1:
            time.sleep(0.25)
        s.sendall(b"GET /a/%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % k)
        s.sendall(b"POST /b/%d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello" % k)
        print(k, answers(s), "answers", flush=True)
        s.close()
    except Exception as e:  # noqa: BLE001 - the client reports what it met
        print(k, "ERROR", type(e).__name__, flush=True)
