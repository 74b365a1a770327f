#!/usr/bin/env bats
# HTTPS: the program's own SSL_shutdown on a keep-alive connection, and
# what it does after it (docs/tls.md "The program's SSL_shutdown").  At a
# request boundary the library keeps the close_notify from the server so
# the connection can be parked; a program that then writes must be
# refused as libssl refuses ("protocol is shutdown", nothing sent), and one
# that waits for the server's close_notify (a second SSL_shutdown, or
# SSL_read: the bidirectional shutdown) must get it, as the server answers
# a close_notify at once.  A generated matrix: pattern after SSL_shutdown
# (once | twice | bidi | write) x request (GET | POST with a body) x server
# (nginx TLS 1.3 and 1.2, which read bodies; tests/servers/tls_close.py,
# which never reads one, ending with close_notify or the FIN alone),
# tests/clients/tls_shut.c without and with the library.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

# close_server MODE: tests/servers/tls_close.py in MODE (notify|ragged): a
# server that never reads a body (its bytes wait as the start of the next
# request), where nginx reads it
close_server() {
	own_server "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" "$1"
}

@test "after the program's SSL_shutdown on a kept-alive connection: every pattern x GET/POST x TLS 1.3/1.2 reads as without the library, nothing after it reaches the server, and no wait" {
	for v in 13 12; do
		use_tls $v
		for pattern in once twice bidi write; do
			for req in get post; do
				run_both 3 "$CLIENTS/tls_shut" "$SERVER_PORT" "$TLS/ca.pem" 3 $pattern $req
				echo "$v $pattern $req: $SHIM_STATS"
				assert_both_ok
				assert_same_output
				run grep -c ' /after ' "$NGINX_DIR/access.log"
				assert_output 0
				case $pattern in
				once)
					# nothing went out: the connection is parked and reused
					assert_equal "$v $pattern $req conns $SHIM_CONNS" "$v $pattern $req conns 1" ;;
				*)
					# the close made real (write: its last SSL_shutdown
					# waits): each its own, as alone
					assert_equal "$v $pattern $req conns $SHIM_CONNS" "$v $pattern $req conns 3" ;;
				esac
			done
		done
	done
	# proves the half without the library met libssl's refusal and the
	# server's answer to its close_notify (nginx: its FIN at once)
	run_plain "$CLIENTS/tls_shut" "$SERVER_PORT" "$TLS/ca.pem" 1 write get
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_output --partial 'write=-1/err=1/"protocol is shutdown"'
	run_plain "$CLIENTS/tls_shut" "$SERVER_PORT" "$TLS/ca.pem" 1 bidi get
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_output --partial ' read=0/'
}

@test "the same matrix against a server that never reads bodies (tests/servers/tls_close.py, both ends): as without the library, nothing after SSL_shutdown reaches it" {
	for mode in notify ragged; do
		close_server $mode
		for pattern in once twice bidi write; do
			for req in get post; do
				: >"$OWN_LOG"
				run_plain "$CLIENTS/tls_shut" "$SERVER_PORT" "$TLS/ca.pem" 3 $pattern $req
				: >"$OWN_LOG"
				run_shim "$CLIENTS/tls_shut" "$SERVER_PORT" "$TLS/ca.pem" 3 $pattern $req
				echo "$mode $pattern $req: $SHIM_STATS"
				assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
				assert_equal "plain status $PLAIN_STATUS" "plain status 0"
				assert_same_output
				run grep -c '/after' "$OWN_LOG"
				assert_output 0
			done
		done
		own_server_stop
	done
}
