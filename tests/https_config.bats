#!/usr/bin/env bats
# HTTPS: a pooled connection is handed only to a program whose whole TLS
# configuration equals the one that made it, but for a short allow-list
# (docs/tls.md).  Each test runs tests/clients/tls_config.c, a program
# with a pooled connection and then an SSL configured another way, without
# and with the library, and compares what it printed and how many
# connections the server saw.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

# config N SCENARIO [ARG]: tls_config against nginx, without and with the
# library: same status, same output
config() {
	run_both "$1" "$CLIENTS/tls_config" "$2" "$SERVER_PORT" "$TLS" "${@:3}"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}

# own_both SCENARIO [ARG]: tls_config against the test's server, without
# and with the library (its log emptied between), same status and output;
# OWN_PLAIN_CONNS, OWN_SHIM_CONNS: the connections it saw
own_both() {
	: >"$OWN_LOG"
	run_plain "$CLIENTS/tls_config" "$1" "$SERVER_PORT" "$TLS" "${@:2}"
	OWN_PLAIN_CONNS=$(_distinct_first_fields "$OWN_LOG")
	: >"$OWN_LOG"
	run_shim "$CLIENTS/tls_config" "$1" "$SERVER_PORT" "$TLS" "${@:2}"
	OWN_SHIM_CONNS=$(_distinct_first_fields "$OWN_LOG")
	echo "plain: status=$PLAIN_STATUS conns=$OWN_PLAIN_CONNS; shim: status=$SHIM_STATUS conns=$OWN_SHIM_CONNS"
	echo "$SHIM_STATS"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}

@test "verify mode without SSL_VERIFY_PEER (FAIL_IF_NO_PEER_CERT, CLIENT_ONCE, POST_HANDSHAKE alone) still aborts a failed verification: no pooled connection" {
	for v in 13 12; do
		use_tls $v
		for mode in fail once post; do
			# (1: the second request fails its handshake and never
			# reaches the server, whose log is awaited for that many)
			config 1 verify_mode $mode
			run cat "$BATS_TEST_TMPDIR/plain.out"
			assert_line "2 fail unable to get local issuer certificate"
		done
	done
}

@test "a server without secure renegotiation (GnuTLS): a context without SSL_OP_LEGACY_SERVER_CONNECT is not handed the connection of one with it" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	use_tls 12
	# (with session tickets: a TLS 1.2 connection whose session id the
	# server gave is not handed out, docs/tls.md "Sessions")
	own_server env KP_GNUTLS_TICKET=1 "$CLIENTS/gnutls_server" "$TLS/server.pem" "$TLS/server.key" \
		"NORMAL:-VERS-TLS1.3:%DISABLE_SAFE_RENEGOTIATION" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
	own_both legacy
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "2 fail unsafe legacy renegotiation disabled"
	assert_line --regexp "^3 ok HTTP/1.1 200 OK reused=0"
	# the third (LEGACY_SERVER_CONNECT again) takes the first's connection
	assert_equal "shim conns $OWN_SHIM_CONNS" "shim conns 2"  # one more than before: the request whose close teaches how the server ends (docs/tls.md "Ragged closes")
}

@test "a body cut short without close_notify reads as the program's options say (SSL_OP_IGNORE_UNEXPECTED_EOF), whoever made the connection" {
	own_server "$PYTHON" "$ROOT/tests/servers/tls_cut.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
	for order in lax_first strict_first; do
		own_both eof $order
		assert_equal "shim conns $OWN_SHIM_CONNS" "shim conns 1"
		run cat "$BATS_TEST_TMPDIR/plain.out"
		# strict second: OpenSSL 3 calls the cut an error (SSL_ERROR_SSL
		# = 1); lax second: a clean end (SSL_ERROR_ZERO_RETURN = 6)
		if [ $order = lax_first ]; then
			assert_line --regexp "^2 read ended: ret=0 SSL_get_error=1 body 5 of 100"
		else
			assert_line --regexp "^2 read ended: ret=0 SSL_get_error=6 body 5 of 100"
		fi
	done
}

# libssl marks an SSL's session not resumable when a fatal alert is sent
# or read on its connection; the connection handed to a second SSL kept
# the first owner's session object, so the second's failure marked the
# session the first had kept (docs/tls.md "The first owner's session").
@test "a fatal error on a handed-out connection leaves the session its first owner kept resumable, as alone (TLS 1.3 and 1.2)" {
	for v in 13 12; do
		if [ $v = 12 ]; then
			own_server env TLS12=1 "$PYTHON" "$ROOT/tests/servers/tls_cut.py" "$TLS/server.pem" \
				"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
		else
			own_server "$PYTHON" "$ROOT/tests/servers/tls_cut.py" "$TLS/server.pem" "$TLS/server.key" \
				"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
		fi
		own_both kept_cut
		own_server_stop
		run cat "$BATS_TEST_TMPDIR/plain.out"
		assert_line --regexp "^2 read ended: ret=0 SSL_get_error=1 body 5 of 100"
		assert_line "kept resumable=1"
		assert_line --regexp "^3 ok HTTP/1.1 200 OK reused=1 "
		# the second took the first's connection
		[ "$(stat_value tls_reused)" -ge 1 ] || fail "tls_reused $(stat_value tls_reused), want at least 1"
	done
}

@test "SSL_set_SSL_CTX: the SSL's signature algorithms are the new context's (no pooled connection its own handshake could not make)" {
	for v in 13 12; do
		use_tls $v
		config 3 set_ctx
		run cat "$BATS_TEST_TMPDIR/plain.out"
		assert_line --regexp "^2 fail "
		assert_line --regexp "^3 ok HTTP/1.1 200 OK"
		# the third, moved back to a context like the first's, takes
		# the first's connection
		assert_equal "shim conns $SHIM_CONNS" "shim conns 2"  # one more than before: the request whose close teaches how the server ends (docs/tls.md "Ragged closes")
	done
}

@test "SSL_set_max_cert_list below the server's certificate: its handshake fails, no pooled connection" {
	for v in 13 12; do
		use_tls $v
		config 1 max_cert_list
		run cat "$BATS_TEST_TMPDIR/plain.out"
		assert_line "2 fail excessive message size"
	done
}

@test "settings that act after the handshake (block padding, max send fragment, read ahead, quiet shutdown), an unknown SSL_ctrl: a connection of the program's own" {
	use_tls 13
	for s in block_padding max_send_fragment read_ahead quiet_shutdown ctrl_unknown; do
		config 2 setting $s
		# nginx saw two connections both ways: the second SSL's own
		assert_equal "$s: shim conns $SHIM_CONNS" "$s: shim conns 2"
	done
}

@test "SSL_shutdown after Connection: close, the body read by its length: 0, then 1 (get_shutdown 3), as OpenSSL" {
	for v in 13 12; do
		use_tls $v
		config 2 shutdown
		assert_line "1 shutdown: 0 1 get_shutdown=3"
		assert_line "2 shutdown: 0 1 get_shutdown=3"
		assert_equal "shim conns $SHIM_CONNS" "shim conns 2"  # one more than before: the request whose close teaches how the server ends (docs/tls.md "Ragged closes")
	done
}

@test "a program that resumes its own session is handed only that session's connection, as a resumption (reused=1, no verified chain)" {
	use_tls 12
	config 4 own_session
	assert_line --regexp "^2 ok HTTP/1.1 200 OK reused=1 chain=-1"
	assert_line --regexp "^4 ok HTTP/1.1 200 OK reused=1 chain=-1"
	use_tls 13
	config 4 own_session tls13
	assert_line --regexp "^2 ok HTTP/1.1 200 OK reused=1 chain=-1"
}

@test "SSL_session_reused and the verified chain: a full handshake's for a program that offered no session (a session of ours resumed, a resumed connection handed out)" {
	for v in 13 12; do
		use_tls $v
		config 5 observe
		for i in 1 2 3 4 5; do
			assert_line "$i ok HTTP/1.1 200 OK reused=0 chain=2 verify=0 version=TLSv1.$((v - 10))"
		done
		# five full handshakes counted, none resumed
		assert_line "context: connect 5 good 5 hits 0"
		[ "$(stat_value tls_resumed)" -ge 1 ] && [ "$(stat_value tls_reused)" -ge 2 ]
	done
}

# gnutls_own [ENV=1...] PRIORITY: the test's GnuTLS server (tests/clients/
# gnutls_server.c), its environment first
gnutls_own() {
	own_server env "${@:1:$#-1}" "$CLIENTS/gnutls_server" "$TLS/server.pem" "$TLS/server.key" "${@: -1}" \
		"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
}

@test "a TLS 1.2 server asking to renegotiate before its answer: a program that allows it renegotiates on a connection of its own; one that refuses refuses the same" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	gnutls_own KP_GNUTLS_REHANDSHAKE=1 "NORMAL:-VERS-TLS1.3"
	own_both reneg
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line --regexp "^2 ok HTTP/1.1 200 OK reused=0 chain=2 verify=0 version=TLSv1.2"
	assert_line --regexp "^3 ok HTTP/1.1 200 OK"
	# the server saw each request once, and no refusal (a refused
	# GET would be sent again: the same output, applied twice)
	run cat "$OWN_LOG"
	refute_line --partial "renegotiation refused"
	assert_equal "requests $(wc -l <"$OWN_LOG")" "requests 3"
	own_both reneg refuse
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line --regexp "^2 read ended"
	assert_line --regexp "^3 read ended"
}

@test "a program's own SSL_renegotiate (TLS 1.2) succeeds as without the library; refused where its options refuse it" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	gnutls_own "NORMAL:-VERS-TLS1.3"
	own_both reneg_client
	assert_line "2 renegotiate=1 handshake=1 (-) pending=0"
	assert_line --regexp "^2 ok HTTP/1.1 200 OK"
	own_both reneg_client refuse
	assert_line --regexp "^2 renegotiate=0 "
}

@test "a keylog, info (context or SSL) or message callback sees the program's own handshake: no pooled connection" {
	for v in 13 12; do
		use_tls $v
		for w in keylog info info_ssl msg; do
			config 2 watch $w
			run cat "$BATS_TEST_TMPDIR/plain.out"
			assert_line --regexp "^keylog lines [1-9].*|info: 1 starts 1 done|handshake messages [1-9]"
			assert_equal "$w: shim conns $SHIM_CONNS" "$w: shim conns 2"
		done
		# none: handed the pooled connection; the context counts the
		# handshake its own would have made (SSL_CTX_sess_connect...)
		config 2 watch none
		assert_line "context: connect 1 good 1 hits 0"
		assert_equal "none: shim conns $SHIM_CONNS" "none: shim conns 2"  # one more than before: the request whose close teaches how the server ends (docs/tls.md "Ragged closes")
	done
}

@test "a context that keeps sessions (new-session callback) is told only of its own SSLs' sessions, never of a connection another SSL reads" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	gnutls_own KP_GNUTLS_TICKET=1 NORMAL
	own_both session_owner
	assert_line --regexp "^told [1-9][0-9]* during the first, 0 after; for an SSL not live: 0"
}

@test "a context that keeps sessions is told of what its own handshake gives (every ticket, resumable): no pooled connection" {
	for v in 13 12; do
		use_tls $v
		config 2 session_told
		run cat "$BATS_TEST_TMPDIR/plain.out"
		assert_line --regexp "^told [1-9][0-9]* sessions, [1-9][0-9]* resumable, 0 for an SSL not live"
		assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	done
}

@test "a program that reads its BIO counters (BIO_number_read/written) is never handed a pooled TLS connection: its own BIOs carried its connection" {
	scripted_start_tls keepalive
	# (the first connection's close teaches how the server ends, the
	# second would be handed out: docs/tls.md "Ragged closes")
	# (the body's length differs by the Connection header the server
	# echoes: hop-by-hop, allowed)
	run_both 4 "$CLIENTS/tls_counters" "$SCRIPTED_PORT" "$SCRIPTED_CA" localhost 4
	assert_both_ok
	run cat "$BATS_TEST_TMPDIR/plain.out"
	for i in 1 2 3 4; do
		assert_line --regexp "^$i ok HTTP/1.1 200 OK bytes [0-9]+ read counted written counted$"
	done
	run cat "$BATS_TEST_TMPDIR/shim.out"
	for i in 1 2 3 4; do
		assert_line --regexp "^$i ok HTTP/1.1 200 OK bytes [0-9]+ read counted written counted$"
	done
	assert_equal "shim requests $SHIM_REQS" "shim requests 4"
}

@test "a program that reads its SSL through BIO_f_ssl, imported or found by dlsym or dlvsym, is never handed a pooled TLS connection (its BIO reads the SSL past us)" {
	scripted_start_tls keepalive
	for client in tls_bio tls_bio_dlsym tls_bio_dlvsym; do
		# (the first connection's close teaches how the server ends, the
		# second is pooled: docs/tls.md "Ragged closes")
		run_both 4 "$CLIENTS/$client" "$SCRIPTED_PORT" "$SCRIPTED_CA" localhost 4 mixed
		assert_both_ok
		run cat "$BATS_TEST_TMPDIR/shim.out"
		assert_line --regexp "^3 ok HTTP/1.1 200 OK bytes 77 end 0 6$"
		assert_line --regexp "^4 ok HTTP/1.1 200 OK bytes 77 end 0 6$"
		assert_equal "shim requests $SHIM_REQS" "shim requests 4"
		[ "$(stat_value tls_declined)" -ge 1 ] || fail "$client: no hand-out declined"
	done
}

# Calls that reset an established SSL (its method, its state, its session)
# break its connection alone: its next write or read fails.  On a
# handed-out SSL they acted on the program's own SSL, which carries no
# connection, and the request was answered (the review of HTTPS at
# 6eba2ea, item 4).  Its engine takes them now, unframed: the failure is
# the program's, no fresh connection takes the request (docs/tls.md
# "Calls that reset an established SSL").
@test "calls that reset an established SSL (SSL_set_session, SSL_set_ssl_method, connect and accept state, SSL_stateless, SSL_clear) break a handed-out connection as alone (TLS 1.3 and 1.2)" {
	local c
	for v in 13 12; do
		use_tls $v
		for c in set_session set_session_null set_method connect_state accept_state stateless clear; do
			TLS_CONFIG_TEACH=1 config 2 reset "$c"
			run cat "$BATS_TEST_TMPDIR/plain.out"
			assert_line --regexp "^2 (fail write|read ended)"
			# the second request's SSL was handed the first's connection
			[ "$(stat_value tls_reused)" -ge 1 ] || fail "$v $c: tls_reused $(stat_value tls_reused), want at least 1"
		done
	done
}

# The same calls between two keep-alive requests on one SSL, after its
# first I/O: alone the second request fails.  On a handed-out SSL
# (reset_mid) and on the connection's own SSL (reset_mid_own), whose
# SSL_set_connect_state at a request boundary was skipped to keep the
# connection whole (curl sets it after SSL_shutdown, before SSL_free):
# the second request succeeded ("2 ok" where alone "2 fail write ...
# unexpected message").  Now only one shut down is spared (docs/tls.md
# "Calls that reset an established SSL").
@test "calls that reset an established SSL between two requests on it break the second as alone, handed out or its own (TLS 1.3 and 1.2)" {
	local c sc
	for v in 13 12; do
		use_tls $v
		for sc in reset_mid reset_mid_own; do
			for c in set_session set_method connect_state accept_state stateless clear; do
				TLS_CONFIG_TEACH=1 config 3 $sc "$c"
				run cat "$BATS_TEST_TMPDIR/plain.out"
				assert_line --regexp "^2 (fail write|read ended)"
				if [ $sc = reset_mid ] && [ $v = 13 ]; then
					[ "$(stat_value tls_reused)" -ge 1 ] || fail "$v $sc $c: tls_reused $(stat_value tls_reused), want at least 1"
				fi
			done
		done
	done
}

# A context that starts keeping sessions after a handed-out SSL's
# handshake, before its first read, is told of what its own connection's
# server sends after the handshake: TLS 1.3 tickets, at that read.  The
# engine's went to its first owner: it was told none, and its store kept
# none (the review of HTTPS at 6eba2ea, item 3).  Its own handshake on a
# fresh connection first now, as for a watcher set late (docs/tls.md
# "Callbacks that watch").  TLS 1.2: the session came with the handshake,
# before the context told: nothing either way.
@test "a session cache or new-session callback switched on after a handed-out SSL_connect is told the tickets its own connection gets, as alone (TLS 1.3 and 1.2)" {
	local a
	for v in 13 12; do
		use_tls $v
		for a in nostore store; do
			TLS_CONFIG_TEACH=1 config 2 told_late "$a"
			echo "$SHIM_STATS"
		done
		if [ $v = 13 ]; then
			run cat "$BATS_TEST_TMPDIR/plain.out"
			assert_line --regexp "^2 told [1-9] sessions"
		fi
	done
}

# The same calls on the connection's own SSL after its request and its
# SSL_shutdown reset that connection, which the library then parked (its
# socket closed) or parked at the close to come: the next SSL was handed
# a connection whose state was gone, and failed ("cipher operation
# failed", "wrong version number") where alone its own handshake works.
# Now such a connection is never parked, and the close_notify its
# SSL_shutdown was told it sent goes out before the call, as alone.
# (SSL_stateless with the socket open: alone a race with the server's
# close, SIGPIPE or not.)
@test "a connection whose own SSL is reset after its request (SSL_set_session, SSL_set_ssl_method, accept state, SSL_stateless) is never handed to the next SSL, as alone (TLS 1.3 and 1.2)" {
	local c sc
	for v in 13 12; do
		use_tls $v
		for sc in own_reset own_reset_open; do
			for c in set_session set_method accept_state stateless; do
				[ "$sc/$c" != own_reset_open/stateless ] || continue
				TLS_CONFIG_TEACH=1 config 2 $sc "$c"
				assert_line --regexp "^2 ok HTTP/1.1 200 OK"
				assert_line --regexp "^3 ok HTTP/1.1 200 OK"
			done
		done
	done
}

# The review of HTTPS at 1f7b6aa, item 6: a new-session callback switched
# on after a handed-out SSL's first read, told a ticket the server sends
# later (GnuTLS, KP_GNUTLS_TICKET=1: one before each answer), was called
# with the engine's SSL (its first owner's, freed: "none of the
# program's", ex_data NULL, or at index 40 the first owner's), and with
# two contexts the first owner's context was told of another's
# connection: libssl tells the engine's session_ctx, its first owner's
# context.  The library's own callback now stands in the context, and
# tells the program's callback of the SSL alone would have been told
# (docs/tls.md "Callbacks that watch").
@test "a new-session callback switched on after a handed-out SSL's first read is told of that SSL's tickets, with that SSL, as alone (TLS 1.3)" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	own_server env KP_GNUTLS_TICKET=1 "$CLIENTS/gnutls_server" "$TLS/server.pem" "$TLS/server.key" \
		"NORMAL" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
	for e in ONE=1 TWO=1 MANY=1; do
		run_plain env $e "$CLIENTS/tls_latecb" "$SERVER_PORT" "$TLS/ca.pem"
		run_shim env $e "$CLIENTS/tls_latecb" "$SERVER_PORT" "$TLS/ca.pem"
		echo "== $e: $SHIM_STATS"
		assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
		assert_same_output
	done
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "   told: the SSL of round 2 (-1: none of the program's), ex_data round 2, resumable 1"
}
