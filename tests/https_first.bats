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
teardown() { servers_stop; }

# first_server VERSION HOW: tests/servers/tls_idle_cue.py, a fresh one
# (any further arguments ignored)
first_server() {
	local tls="$BATS_TEST_TMPDIR/cue/tls"
	[ -s "$tls/server.pem" ] || tls_make "$tls"
	cue_server_start cue tls_idle_cue.py "$tls/server.pem" "$tls/server.key" "$1" "$2"
}

# first_case VERSION HOW KIND MODE: the client (KIND c or py) alone, then
# with the library, each against a fresh server; the same status, output
# and requests, and the library did meet the server's close
first_case() {
	cue_compare first_server first_cmd "$@"
	# the library did hand the kept connection out, and the server closed it
	assert_kept_closed "$*"
	[ "$(stat_value tls_reused)" -ge 1 ] || fail "$*: no TLS connection was handed out"
}

# first_cmd VERSION HOW KIND MODE: the client's command line for the
# server running now, as CUE_CMD
first_cmd() {
	if [ "$3" = c ]; then
		CUE_CMD=("$CLIENTS/tls_first_read" "$4" "$SERVER_PORT" "$OWN_DIR/tls/ca.pem" "$OWN_DIR" 2)
	else
		CUE_CMD=("$PYTHON" "$ROOT/tests/clients/tls_first_read.py" "$4" "$SERVER_PORT"
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
