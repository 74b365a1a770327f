#!/usr/bin/env bats
# The generated server-timing matrix (docs/replay.md, "The matrix"): every
# method x how much of the request the server reads x FIN/RST/half-close
# x when (before the request, inside or outside the delayed-ACK time,
# after a partial response) x reused or broker-handed connection x what
# the server says of the connection (close / nothing / keep-alive), and for
# GET with hdr=none the program's read path (read, preadv2(RWF_NOWAIT),
# splice, recv(MSG_TRUNC), kernel AIO: tests/clients/pair.c), and for
# every method with hdr=none, the server closing quick or delayed, a
# program that takes the connection's error by a receive of nothing after
# the head and before its read (PAIR_TAKE=zero: the library before took
# the kernel's EPIPE or EOF that follows for "the FIN came first" and
# replayed POSTs the server had executed: 12 cells executed twice), and
# for the methods with a body a loaded server (when=late: its sequence
# must be the one it meets without the library, docs/cost.md "A request
# in two writes"), each
# cell run without and with the library by tests/servers/matrix.py: the
# request under test executed at most once (a GET at most twice: its
# replay), every answer to a request the library rewrote read as a closing
# one (the program asked to close; a close request with a body goes as
# written, and its answer is compared whole), and the program's outcome
# one the same server timing gives without the library, or a replay's
# success.

load helpers

setup_file() {
	suite_setup
	make -s -C "$ROOT" build/keepalive-broker build/clients/pair >&2
}

@test "server-timing matrix (1656 cells): never executed twice, a closing answer, the same outcome or a replay's success" {
	run "$PYTHON" "$ROOT/tests/servers/matrix.py" --lib "$PRELOAD" --pair "$CLIENTS/pair" \
		--broker "$ROOT/build/keepalive-broker" --jobs 2
	echo "$output" | tail -n 40
	[ "$status" -eq 0 ]
	[[ "$output" == *"matrix: 1656 cells, 0 failed,"* ]]
}
