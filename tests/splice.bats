#!/usr/bin/env bats
# A response read with splice() from the socket into a pipe (a proxy, a
# zero-copy downloader), after a request the library rewrote from
# "Connection: close" to keep-alive (docs/replay.md "splice() from a
# connection").  The library used to give the framing up at such a read
# (it could not see the bytes): the EOF it owes came only after
# KEEPALIVE_QUIET_MS of quiet, a 2 s wait on every answer, and a body
# whose server paused longer than that was cut short with a normal-looking
# EOF.  Now the read is framed as read() is: the same bytes and EOF as
# without the library, at the answer's end, and the connection is reused.
# tests/clients/splice_read.c; each test compares with the run without
# the library and with what the server saw.

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

# splice_case --headers|--close-line [VAR=VALUE...] PATH LEN [nonblock]: two
# requests, each asking to close, each read by splice(LEN); the same output
# (assert_same_output's option) and requests as alone, on one connection
# with the library
splice_case() {
	local cmp="$1" env=()
	shift
	while [[ "$1" == *=* ]]; do
		env+=("$1")
		shift
	done
	CLIENT_TIMEOUT=10 run_both 2 "${env[@]}" "$CLIENTS/splice_read" 127.0.0.1 "$SERVER_PORT" "$@"
	assert_both_ok
	assert_same_output "$cmp"
	assert_equal "shim requests $SHIM_REQS" "shim requests $PLAIN_REQS"
	assert_equal "shim requests $SHIM_REQS" "shim requests 2"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	run grep -c -a '^END [12] EOF$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

# nginx answers at once.  The quiet period made 30 s: the old library's
# EOF came only after it (status 124 at the client's 10 s)

@test "splice: a small answer from nginx read by splice(64 KiB), then EOF at its end, as alone" {
	nginx_start
	splice_case --headers KEEPALIVE_QUIET_MS=30000 /f 2 65536
	run grep -c -a 'line 6 of 6: the quick brown fox' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

@test "splice: 100 KB from nginx read by splice(4096) on a non-blocking socket (SPLICE_F_NONBLOCK), as alone" {
	nginx_start
	splice_case --headers KEEPALIVE_QUIET_MS=30000 /big 2 4096 nonblock
}

# tests/servers/cases/slow_body: Content-Length 14, sent as 7 bytes, a 1 s
# pause, 7 bytes, nothing said of closing (the program that asked to close
# reads the close line we show, docs/replay.md "A closing answer").  The
# quiet period made 300 ms: the old library gave EOF in the pause, after
# "tick 0" (the body cut short, "tick 1" never read)

@test "splice: a body with a pause mid-way read by splice(64 KiB): the whole body, then EOF, as alone" {
	scripted_start slow_body
	splice_case --close-line KEEPALIVE_QUIET_MS=300 /s 2 65536
	run grep -c -a '^tick 1$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

@test "splice: the same body by splice(5): the close line shown across calls, the whole body, then EOF, as alone" {
	scripted_start slow_body
	splice_case --close-line KEEPALIVE_QUIET_MS=300 /s 2 5
	run grep -c -a $'^Connection: close\r$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
	run grep -c -a '^tick 1$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

@test "splice: the same body by splice(7, SPLICE_F_NONBLOCK) on a non-blocking socket: the whole body, then EOF, as alone" {
	scripted_start slow_body
	splice_case --close-line KEEPALIVE_QUIET_MS=300 /s 2 7 nonblock
	run grep -c -a '^tick 1$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

# tests/servers/cases/close_delimited: a body the server's close ends (the
# library steps aside: the rest is the kernel's own splice), by splice(5)
# across the head, the close line and the body

@test "splice: a close-delimited answer by splice(5): the same bytes and the server's EOF, as alone" {
	scripted_start close_delimited
	CLIENT_TIMEOUT=10 run_both 2 KEEPALIVE_QUIET_MS=30000 "$CLIENTS/splice_read" 127.0.0.1 "$SERVER_PORT" /s 2 5
	assert_both_ok
	assert_same_output --close-line
	assert_equal "shim requests $SHIM_REQS" "shim requests 2"
	run grep -c -a '^second piece of the body$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

# ---- the other reads the library cannot see
#
# preadv2() with a flag no wrapper routes (RWF_NOAPPEND, which this kernel
# takes on a socket read) is answered by the kernel from the socket: the
# library gives the framing up, and our EOF cannot reach such a read.  It
# used to wait for the server's idle close (nginx: 75 s; status 124 at the
# client's 10 s).  Now our FIN goes out with the framing given up, as for
# AIO reads (send.c unseen_read_fin): nginx closes once it has answered.
# What cannot be better: the program reads the answer as the server sent
# it, keep-alive and all (no mask, no close line, no reuse).

@test "unseen read: preadv2(RWF_NOAPPEND) after a request we rewrote ends at the server's close, not its idle timeout" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 2 "$CLIENTS/unseen_read" 127.0.0.1 "$SERVER_PORT" /f 2
	if grep -q 'EOPNOTSUPP' "$BATS_TEST_TMPDIR/plain.out"; then
		skip "this kernel refuses RWF_NOAPPEND on a socket read"
	fi
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim requests $SHIM_REQS" "shim requests 2"
	run grep -c -a '^END [12] EOF$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}
