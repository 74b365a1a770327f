"""child_reader.py [--warm] HOST PORT PATH 1.0|1.1 CMD [ARG...] - send one
request and let a child read the response: subprocess.run(CMD, stdin=sock)
(CPython starts it with vfork, dup2 of the socket onto the child's stdin,
exec).  1.1: "Connection: close"; 1.0: no Connection header.  --warm: one
urllib GET of PATH first, read by the program itself (under the shim its
connection is pooled, and the child's request goes on it), and the child
is started only once the server is done with the request: the socket has
left ESTABLISHED (/proc/net/tcp: alone the server's FIN after its answer;
with a library that handed the pooled connection out, the server's reset
of it), an event, so that the reset is in before the socket leaves the
program's hands and not merely within some bound.  Exit status: the
child's."""
import socket
import subprocess
import sys
import urllib.request

from tcp_state import inode, tcp_state, until

warm = len(sys.argv) > 1 and sys.argv[1] == "--warm"
if warm:
    del sys.argv[1]
host, port, path, version = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if warm:
    urllib.request.urlopen("http://%s:%d%s" % (host, port, path)).read()
if version == "1.0":
    req = "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)
else:
    req = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)
sock = socket.create_connection((host, port))
sock.sendall(req.encode())
if warm:
    ino = inode(sock)
    until(lambda: tcp_state(ino) != 1, "saw the server's answer end or reset")
r = subprocess.run(sys.argv[5:], stdin=sock)
sock.close()
sys.exit(r.returncode)
