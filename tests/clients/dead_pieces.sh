#!/bin/bash
# dead_pieces.sh PORT - bash's /dev/tcp: one request read to the server's
# close (tests/servers/once.py answers one request and closes), then a
# second request head written a piece per printf on the dead connection.
# Alone the first piece is taken (the socket is in CLOSE_WAIT), the
# server's TCP resets, and the second piece's write raises SIGPIPE: bash
# dies, 141 (tests/replay.bats, docs/hold.md "What is held now").
port=$1
exec 5<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /a HTTP/1.1\r\nHost: x\r\n\r\n' >&5
while IFS= read -r -u 5 line; do printf '%s\n' "$line"; done
echo "eof"
printf 'GET /b HTTP/1.1\r\n' >&5
echo "piece 1: $?"
printf 'Host: x\r\n' >&5
echo "piece 2: $?"
printf '\r\n' >&5
echo "piece 3: $?"
