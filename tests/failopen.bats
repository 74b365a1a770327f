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
