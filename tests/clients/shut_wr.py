"""shut_wr.py HOST PORT PATH 1.1|1.0 - one request ("Connection: close"
with 1.1, no Connection header with 1.0), then shutdown(SHUT_WR): the
client says it has nothing more to send; then everything read to EOF is
printed."""
import socket
import sys

host, port, path, version = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.create_connection((host, port))
if version == "1.0":
    req = "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)
else:
    req = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)
s.sendall(req.encode())
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    got = s.recv(4096)
    if not got:
        break
    data += got
sys.stdout.write(data.decode("latin-1"))
s.close()
