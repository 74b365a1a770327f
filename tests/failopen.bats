#!/usr/bin/env bats
# Fail open (invariant 3): a call the program makes alone returns, or the
# server answers, as without the library - also where the library owes the
# program an EOF it took from the server by rewriting "Connection: close"
# (docs/hold.md).  Each test compares with the run without the library;
# nothing here waits on a time.

load helpers

setup_file() { suite_setup; }
teardown() {
	[ -n "${AFTER_PID:-}" ] && _stop_pid "$AFTER_PID"
	servers_stop
}

# ---- shutdown(SHUT_WR) after a request we rewrote
#
# tests/servers/after_eof.py answers only once it has read its client's
# FIN.  A shutdown(SHUT_WR) after a request we rewrote to keep-alive was
# answered without the kernel (our EOF would come where the server's close
# would): such a server never answered (status 124 on the old code).

_after_ready() { [ -s "$BATS_TEST_TMPDIR/after.port" ] || _pid_gone "$AFTER_PID"; }

after_eof_start() {
	: >"$BATS_TEST_TMPDIR/after.log"
	"$PYTHON" "$ROOT/tests/servers/after_eof.py" "$BATS_TEST_TMPDIR/after.port" \
		"$BATS_TEST_TMPDIR/after.log" </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/after.err" 3>&- &
	AFTER_PID=$!
	wait_until _after_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/after.port"
}

shut_wr_case() {
	after_eof_start
	CLIENT_TIMEOUT=10 run_plain "$PYTHON" "$ROOT/tests/clients/shut_wr.py" 127.0.0.1 "$SERVER_PORT" /s "$1"
	CLIENT_TIMEOUT=10 run_shim "$PYTHON" "$ROOT/tests/clients/shut_wr.py" 127.0.0.1 "$SERVER_PORT" /s "$1"
	assert_both_ok
	assert_same_output --close-line
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output --partial "after"
	run cat "$BATS_TEST_TMPDIR/after.log"
	assert_output "GET /s HTTP/$1
GET /s HTTP/$1"
}

@test "failopen: shutdown(SHUT_WR) after an HTTP/1.1 Connection: close request: a server that answers after the client's FIN answers, as alone" {
	shut_wr_case 1.1
}

@test "failopen: shutdown(SHUT_WR) after an HTTP/1.0 request: a server that answers after the client's FIN answers, as alone" {
	shut_wr_case 1.0
}

# ---- a bounded read while the framing is lost
#
# The response cannot be delimited (tests/servers/lost_cue.py: "Content-
# Length: 5x"): we show EOF after a quiet period of ours.  A read the
# program bounded (MSG_DONTWAIT, SO_RCVTIMEO) while the server is quiet and
# open must end as its bound says (EAGAIN), not wait out our quiet period
# and answer EOF (the old code, whose lost_quiet looked only at
# O_NONBLOCK: status 124 here).  (splice's SPLICE_F_NONBLOCK is no bound:
# it is the pipe's, and alone the socket's read blocks.)  The quiet period
# is made long
# (30 s) so that no scheduling delay can end it before that read.

_lost_ready() { [ -s "$BATS_TEST_TMPDIR/lost.port" ] || _pid_gone "$AFTER_PID"; }

lost_bound_case() {
	rm -f "$BATS_TEST_TMPDIR/lost.port"
	"$PYTHON" "$ROOT/tests/servers/lost_cue.py" "$BATS_TEST_TMPDIR/lost.port" "$BATS_TEST_TMPDIR" \
		</dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/lost.err" 3>&- &
	AFTER_PID=$!
	wait_until _lost_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/lost.port"
	CLIENT_TIMEOUT=20 run_plain "$CLIENTS/lost_bound" 127.0.0.1 "$SERVER_PORT" "$BATS_TEST_TMPDIR" "$1"
	CLIENT_TIMEOUT=20 run_shim env KEEPALIVE_QUIET_MS=30000 "$CLIENTS/lost_bound" 127.0.0.1 \
		"$SERVER_PORT" "$BATS_TEST_TMPDIR" "$1"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "$1 read, the server quiet: EAGAIN"
	assert_line "then: EOF"
}

@test "failopen: framing lost, recv(MSG_DONTWAIT) while the server is quiet: EAGAIN at once, as alone" {
	lost_bound_case dontwait
}

@test "failopen: framing lost, recv() under SO_RCVTIMEO while the server is quiet: EAGAIN at its timeout, as alone" {
	lost_bound_case rcvtimeo
}

# ---- recv(MSG_WAITALL) split into pieces (docs/replay.md "recv(MSG_WAITALL)")
#
# The kernel's one MSG_WAITALL read counts SO_RCVTIMEO over the whole call
# and ends at a signal once it has data (SA_RESTART or not).  The library
# reads such a call in pieces (each framed); each piece used to start its
# own timeout and be restarted after a handler, so a server trickling its
# body (tests/servers/trickle.py: 30 bytes, one per 100 ms) kept the read
# going to the body's end ("whole", 3 s) or, on a keep-alive request,
# waiting past it (124), where alone it ends at its bound ("partial").
# Which bytes came by then is the machine's timing; that it ended is not.

trickle_case() {
	rm -f "$BATS_TEST_TMPDIR/trickle.port"
	"$PYTHON" "$ROOT/tests/servers/trickle.py" "$BATS_TEST_TMPDIR/trickle.port" \
		</dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/trickle.err" 3>&- &
	AFTER_PID=$!
	wait_until _trickle_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/trickle.port"
	local how ka call
	for how in timeo signal; do
		for ka in ka close; do
			for call in recv recvmsg recvfrom; do
				CLIENT_TIMEOUT=10 run_plain "$CLIENTS/waitall_bound" "$SERVER_PORT" $how $ka $call
				CLIENT_TIMEOUT=10 run_shim "$CLIENTS/waitall_bound" "$SERVER_PORT" $how $ka $call
				echo "cell $how $ka $call"
				assert_both_ok
				assert_same_output
				run cat "$BATS_TEST_TMPDIR/shim.out"
				assert_output "partial"
			done
		done
	done
}

_trickle_ready() { [ -s "$BATS_TEST_TMPDIR/trickle.port" ] || _pid_gone "$AFTER_PID"; }

@test "failopen: recv/recvmsg/recvfrom(MSG_WAITALL) under SO_RCVTIMEO or a signal (SA_RESTART), a body trickling past the bound: the read ends at its bound, as alone (12 cells)" {
	make -s -C "$ROOT" build/clients/waitall_bound >&2
	trickle_case
}
