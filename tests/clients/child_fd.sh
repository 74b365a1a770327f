#!/bin/bash
# child_fd.sh MODE PORT PATH - one request through bash's /dev/tcp
# (exec 3<>, one printf of a head with "Connection: close"), its answer
# read to EOF by number, never moved onto stdin (docs/hold.md "A child
# that reads an inherited socket"):
#   sub     by a subshell (a forked child, no exec): `read -u 3`
#   py      by python3, a forked and exec'd child: os.read(3)
#   pypoll  as py, each read after a select.select() on fd 3
#   self    by bash itself: `read -u 3` (the program's own reads)
# Each line read is printed; the answer's last line has no newline.
set -e
mode=$1 port=$2 path=$3
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
lines() { while IFS= read -r -u 3 l || [ -n "$l" ]; do printf '%s\n' "$l"; done; }
case $mode in
sub) (lines; echo 'subshell: EOF') ;;
self) lines; echo 'bash: EOF' ;;
py | pypoll)
	"${PYTHON:-python3}" -c '
import os, select, sys
# (the library names the copy to the new image in an entry it takes
# out of the environment before the program runs)
print([k for k in os.environ if k.startswith("KEEPALIVE_FIN")])
while True:
    if sys.argv[1] == "pypoll":
        select.select([3], [], [])
    d = os.read(3, 4096)
    if not d:
        break
    sys.stdout.buffer.write(d)
print("python: EOF")' "$mode" ;;
esac
