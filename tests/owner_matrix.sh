#!/bin/sh
# owner_matrix.sh DEPTH [gen options] - the process-shape matrix of
# docs/owner.md at any depth, for day-to-day use (make owner-matrix): every
# shape run without and with build/libkeepalive.so against one echo
# server, then compared.  tests/owner.bats runs depth 6 in make test.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-/usr/bin/python3}
depth=${1:-7}
[ $# -gt 0 ] && shift
dir=$(mktemp -d)
trap 'kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
uid=
[ "$(id -u)" = 0 ] && uid=--uid
"$py" "$root/tests/clients/owner_shapes.py" gen "$depth" $uid "$@" >"$dir/shapes"
echo "$(wc -l <"$dir/shapes") shapes of $depth steps"
"$py" "$root/tests/servers/echo_server.py" "$dir/port" "$dir/log" &
srv=$!
while [ ! -s "$dir/port" ]; do sleep 0.05; done
port=$(cat "$dir/port")
"$py" "$root/tests/clients/owner_shapes.py" run "$port" "$dir/shapes" >"$dir/plain.out"
cp "$dir/log" "$dir/plain.log"
: >"$dir/log"
LD_PRELOAD="${KEEPALIVE_LIB:-$root/build/libkeepalive.so}" KEEPALIVE_PORTS="$port" \
	"$py" "$root/tests/clients/owner_shapes.py" run "$port" "$dir/shapes" >"$dir/shim.out"
cp "$dir/log" "$dir/shim.log"
echo "server connections: $(awk '!s[$1]++' "$dir/plain.log" | wc -l) without, $(awk '!s[$1]++' "$dir/shim.log" | wc -l) with"
"$py" "$root/tests/clients/owner_shapes.py" check "$dir/shapes" "$dir/plain.out" "$dir/shim.out" \
	"$dir/plain.log" "$dir/shim.log"
