#!/usr/bin/env bats
# HTTPS before the first request (docs/replay.md "Before the first
# request", TLS; docs/tls.md "Before the first request"): a pooled TLS
# connection handed out to the program's SSL at SSL_connect is, to the
# program, the fresh connection it just made; the server's idle close of
# the kept one (close_notify then FIN, a bare FIN, a reset) must not reach
# a program that reads or polls before it writes.
#
# tests/servers/tls_idle_cue.py closes its idle kept connections on the
# client's cue (a fifo; close_notify, fin or rst) and says how many it
# closed; the clients (tests/clients/tls_first_read.c, tls_first_read.py)
# GET /warm, connect again (the library hands the kept connection out),
# cue the close, await the server's FIN or reset on their socket
# (/proc/net/tcp), and then, before the request: a non-blocking
# SSL_read, SSL_read_ex or SSL_peek (alone: WANT_READ, SSL_get_shutdown
# 0); poll, select or epoll with no wait (alone: nothing to read); a
# blocking SSL_read bounded by SO_RCVTIMEO (alone: WANT_READ once the bound
# is spent); CPython's recv with a timeout or non-blocking (alone:
# TimeoutError, SSLWantReadError).  The library before returned the
# server's end (ZERO_RETURN with shutdown 2, "unexpected eof", ECONNRESET;
# readable, then that end): every cell fails there.  The C client prints
# its context's handshake counts last (SSL_CTX_sess_connect, _good, hits,
# misses): the program's own handshake on the fresh connection and the
# hand-out's were both counted before (6 where alone 4, the write path's
# swap too: the "write" cell, which reads nothing before its request).  Events only: the
# outcome of each call, never its time, is compared.

load helpers

setup_file() { suite_setup; }
teardown() {
	[ -z "${OWN_PID:-}" ] || _stop_pid "$OWN_PID"
	OWN_PID=
	servers_stop
}

# first_server VERSION HOW: tests/servers/tls_idle_cue.py, a fresh one
first_server() {
	[ -z "${OWN_PID:-}" ] || _stop_pid "$OWN_PID"
	OWN_DIR="$BATS_TEST_TMPDIR/cue"
	mkdir -p "$OWN_DIR"
	[ -s "$OWN_DIR/tls/server.pem" ] || tls_make "$OWN_DIR/tls"
	rm -f "$OWN_DIR/port"
	OWN_LOG="$OWN_DIR/log"
	: >"$OWN_LOG"
	"$PYTHON" "$ROOT/tests/servers/tls_idle_cue.py" "$OWN_DIR/port" "$OWN_DIR" "$OWN_LOG" \
		"$OWN_DIR/tls/server.pem" "$OWN_DIR/tls/server.key" "$1" "$2" \
		</dev/null >/dev/null 2>"$OWN_DIR/err" 3>&- &
	OWN_PID=$!
	wait_until test -s "$OWN_DIR/port"
	read -r SERVER_PORT <"$OWN_DIR/port"
}

# first_case VERSION HOW KIND MODE: the client (KIND c or py) alone, then
# with the library, each against a fresh server; the same status, output
# and requests, and the library did meet the server's close
first_case() {
	first_server "$1" "$2"
	first_cmd "$3" "$4"
	run_plain "${FIRST_CMD[@]}"
	grep -v ' closed$' "$OWN_LOG" | cut -d' ' -f2- >"$BATS_TEST_TMPDIR/plain.reqs" || true
	first_server "$1" "$2"
	first_cmd "$3" "$4"
	run_shim "${FIRST_CMD[@]}"
	grep -v ' closed$' "$OWN_LOG" | cut -d' ' -f2- >"$BATS_TEST_TMPDIR/shim.reqs" || true
	echo "$*: $SHIM_STATS"
	cat "$BATS_TEST_TMPDIR/shim.out" "$OWN_LOG"
	head -n 5 "$BATS_TEST_TMPDIR/shim.err"
	assert_both_ok
	assert_same_output
	run cmp "$BATS_TEST_TMPDIR/plain.reqs" "$BATS_TEST_TMPDIR/shim.reqs"
	assert_success
	# the library did hand the kept connection out, and the server closed it
	[ "$(count_matches ' closed$' "$OWN_LOG")" -ge 1 ] || fail "$*: no kept connection was closed"
	[ "$(stat_value tls_reused)" -ge 1 ] || fail "$*: no TLS connection was handed out"
}

# first_cmd KIND MODE: the client's command line for the server running now
first_cmd() {
	if [ "$1" = c ]; then
		FIRST_CMD=("$CLIENTS/tls_first_read" "$2" "$SERVER_PORT" "$OWN_DIR/tls/ca.pem" "$OWN_DIR" 2)
	else
		FIRST_CMD=("$PYTHON" "$ROOT/tests/clients/tls_first_read.py" "$2" "$SERVER_PORT"
			"$OWN_DIR/tls/ca.pem" "$OWN_DIR" 2)
	fi
}

# first_all KIND MODE: TLS 1.3 and 1.2, each server end
first_all() {
	local v how
	for v in 13 12; do
		for how in notify fin rst; do
			first_case "$v" "$how" "$@"
		done
	done
}

@test "TLS before the first request: a non-blocking SSL_read meets no server's close (WANT_READ, as alone)" { first_all c nbread; }
@test "TLS before the first request: a non-blocking SSL_read_ex meets no server's close" { first_all c nbreadex; }
@test "TLS before the first request: a non-blocking SSL_peek meets no server's close" { first_all c nbpeek; }
@test "TLS before the first request: poll reports nothing to read, as alone" { first_all c poll; }
@test "TLS before the first request: poll in another thread than the SSL's, then the read: nothing to read, as alone" { first_all c pollthread; }
@test "TLS before the first request: select reports nothing to read, as alone" { first_all c select; }
@test "TLS before the first request: epoll reports nothing to read, as alone" { first_all c epoll; }
@test "TLS before the first request: a blocking SSL_read bounded by SO_RCVTIMEO waits on the fresh connection" { first_all c rcvtimeo; }
@test "TLS before the first request: the write meets the server's close, the context counts one handshake a connection, as alone" { first_all c write; }
@test "TLS before the first request, CPython: recv with a timeout times out, as alone" { first_all py recv; }
@test "TLS before the first request, CPython: a non-blocking recv says SSLWantReadError, as alone" { first_all py nbrecv; }
