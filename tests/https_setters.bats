#!/usr/bin/env bats
# HTTPS: what a program does with its SSL after the handshake, found by the
# second HTTPS review of 2026-12-05 (docs/tls.md "Found by the second HTTPS
# review"): a read mode without AUTO_RETRY, setters whose getter the
# library answers (SSL_set_verify_result, SSL_set_shutdown), the peer name
# of a hand-out standing for a resumption, shutdown state set outside
# SSL_shutdown (SSL_key_update), options and settings changed after the
# hand-out, the second SSL_shutdown.  tests/clients/tls_setters.c, without
# and with the library: the same output.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

# after N FLAGS...: tls_setters against nginx (SERVER_PORT), N requests,
# without and with the library: same status and output
after() {
	run_both "$1" "$CLIENTS/tls_setters" "$SERVER_PORT" "$TLS/ca.pem" "$@"
	echo "$SHIM_STATS"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}

# own_after N FLAGS...: the same against tests/servers/tls_close.py
own_after() {
	run_plain "$CLIENTS/tls_setters" "$SERVER_PORT" "$TLS/ca.pem" "$@"
	run_shim "$CLIENTS/tls_setters" "$SERVER_PORT" "$TLS/ca.pem" "$@"
	echo "$SHIM_STATS"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}

# moved SEEN FLAG: 3 requests, the SSL's I/O moved in the last two; the
# server sees SEEN of them
moved() {
	run_both "$1" "$CLIENTS/tls_setters" "$SERVER_PORT" "$TLS/ca.pem" 3 "$2" noreneg
	echo "$SHIM_STATS"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}

close_server() {
	own_server "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" "$1"
}

@test "AUTO_RETRY cleared: a TLS 1.3 program reads the server's tickets as WANT_READ on its own connection, so it is handed none" {
	for v in 13 12; do
		use_tls $v
		after 3 noautoretry noreneg
		[ $v = 12 ] || assert_line --partial "read r=-1 err=2 (blocking socket)"
	done
	use_tls 13
	after 3 noautoretry
	assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
}

@test "SSL_set_verify_result on a handed-out SSL: SSL_get_verify_result reads it back" {
	use_tls 13
	after 3 setvr
	assert_line --partial "set_verify_result(23): get=23"
	assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
}

@test "a hand-out standing for a resumption of the program's own session shows no verified peer name" {
	use_tls 13
	after 6 resumeodd
	assert_line --partial "reused=1 verify=0 group"
	use_tls 12
	after 6 resumeodd noreneg
}

@test "shutdown state set outside SSL_shutdown (SSL_set_shutdown, SSL_key_update): SSL_shutdown answers from it, as libssl" {
	use_tls 13
	after 2 setshut
	assert_line --partial "shutdown=1 get_shutdown=3"
	# set at a request boundary: nothing sent, as alone; still pooled
	assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
	after 3 keyupdate
	assert_line --partial "shutdown while in init"
	use_tls 12
	after 2 setshut noreneg
}

@test "SSL_set_options and SSL_set_quiet_shutdown after the hand-out reach the connection: a bare FIN read as the program's options say" {
	close_server ragged
	own_after 2 close_last drain_last ignoreeof_after
	assert_line --partial "read end r=0 err=6"
	own_after 2 close_last drain_last quiet_after
	own_after 2 quiet_after
}

@test "a second SSL_shutdown after a kept-alive exchange waits for the server's answer, as alone" {
	for v in 13 12; do
		use_tls $v
		after 2 shut2 noreneg
	done
	close_server notify
	own_after 2 shut2
	# CPython's unwrap(): SSL_shutdown until the server's answer
	for v in 13 12; do
		use_tls $v
		run_both 2 "$PYTHON" "$ROOT/tests/clients/tls_unwrap.py" "$SERVER_PORT" "$TLS/ca.pem" 2
		assert_both_ok
		assert_same_output
	done
}

@test "AUTO_RETRY cleared after the hand-out, before the first read: its own handshake on a fresh connection, so the server's tickets read as WANT_READ as alone" {
	use_tls 13
	after 3 autoretry_after noreneg
	assert_line --partial "read r=-1 err=2 (blocking socket)"
	[ "$(grep -c 'read r=-1 err=2' "$BATS_TEST_TMPDIR/shim.out")" -eq 6 ]
	use_tls 12
	after 3 autoretry_after noreneg
	# TLS 1.2: no record after the handshake, nothing to show: handed out
	assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
}

@test "the SSL's I/O moved after the hand-out (SSL_set_bio, SSL_set_fd, SSL_set0_rbio): the connection's records go where the program put them, as alone" {
	for v in 13 12; do
		use_tls $v
		moved 1 membio_after
		assert_line "  moved read=-1 err=2 get_shutdown=0"
		assert_line --regexp "^  memory wbio holds [1-9][0-9]* bytes$"
		moved 1 pair_after
		assert_line --regexp "^  the pair's other end read [1-9][0-9]* bytes, a record 1$"
		moved 3 rbio_after
		assert_line "  moved read=-1 err=2 get_shutdown=0"
		# its own socket again: the same connection, as alone
		after 3 setfd_same noreneg
		[ "$(grep -c 'status: HTTP/1.1 404 Not Found' "$BATS_TEST_TMPDIR/shim.out")" -eq 3 ]
	done
}

@test "a blocking BIO of the program's own method: its handshake on the socket it connected, pooled or not, succeeds as alone (its own handshake on a fresh connection)" {
	for v in 13 12; do
		use_tls $v
		after 3 ownbio noreneg
		[ "$(grep -c '  connect=1' "$BATS_TEST_TMPDIR/shim.out")" -eq 3 ]
		assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
	done
}

# A session's ticket and master key are new at every full handshake; a
# hand-out would show its first owner's (the HTTPS review of 2026-12-05,
# the third: the same ticket and master key three times).  A process that
# can read them (SSL_SESSION_get0_ticket, SSL_SESSION_print_keylog, ...)
# is handed no pooled connection (docs/tls.md).
@test "a program that reads its sessions' tickets and master keys: each request's are new, as alone (no hand-out)" {
	make -s -C "$ROOT" build/clients/tls_ticket >&2
	for v in 13 12; do
		use_tls $v
		run_both 3 "$CLIENTS/tls_ticket" "$SERVER_PORT" "$TLS/ca.pem" 3
		assert_both_ok
		assert_same_output
		run cat "$BATS_TEST_TMPDIR/shim.out"
		assert_line "2: answered, reused 0, ticket new, master key new"
		assert_line "3: answered, reused 0, ticket new, master key new"
	done
}

# What a full handshake shows and a resumption does not (the server's
# Certificate and CertificateRequest, the client's own CertificateVerify):
# the peer's chain, the CA names, the signature algorithms, the
# certificate types, the peer's and the client's own signature.  A
# handed-out SSL read its engine's (whatever handshake made it), a session
# of ours resumed the resumption's, the client's own signature was never
# answered, the certificate types never routed (the HTTPS review of
# 2026-12-05, the third; docs/tls.md "What a full handshake shows").
# tests/clients/tls_getters.c prints them after each request.
# getters N FLAGS...: the same output, without and with the library
getters() {
	run_both "$@"
	echo "$SHIM_STATS"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}
@test "getters a full handshake answers (chain, CA names, signature algorithms, certificate types, own signature): as the program's own handshake, handed out or resumed, TLS 1.3 and 1.2" {
	make -s -C "$ROOT" build/clients/tls_getters >&2
	local g="$CLIENTS/tls_getters" cert="cert=$TLS/client-a.pem:$TLS/client-a.key"
	for v in 13 12; do
		use_tls $v
		# request 2 handed out, 3 finds none parked: a session of ours
		getters 4 "$g" "$SERVER_PORT" "$TLS/ca.pem" 4 hold=2
		assert_regex "$SHIM_STATS" ' tls_reused=[1-9].* tls_resumed=[1-9]'
		assert_line "  client CA list 1 [/CN=libkeepalive test CA]"
		# the program offers its own first session from request 2 on:
		# its own handshakes, which resume it (none of the full
		# handshake's values), no pooled connection handed to it
		getters 4 "$g" "$SERVER_PORT" "$TLS/ca.pem" 4 ownsess=first hold=2
		assert_regex "$SHIM_STATS" ' tls_reused=0 '
		run grep -c '^  client CA list -1$' "$BATS_TEST_TMPDIR/shim.out"
		assert_output 3
		# a client certificate: its own signature, handed out and resumed
		getters 4 "$g" "$SERVER_PORT" "$TLS/ca.pem" 4 hold=2 "$cert"
		assert_regex "$SHIM_STATS" ' tls_reused=[1-9].* tls_resumed=[1-9]'
		getters 4 "$g" "$SERVER_PORT" "$TLS/ca.pem" 4 ownsess=first hold=2 "$cert"
	done
}

# A session's bytes (i2d_SSL_SESSION) carry its master key: a hand-out's
# session, and a TLS 1.2 session of ours resumed, carry the first one's,
# where alone every full handshake makes a new one.  A process that can
# write them out (but CPython's _ssl) is handed no pooled connection and
# offered no session of ours (docs/tls.md "What a session shows").
@test "a program that serializes its sessions: the master key in each request's DER is new, as alone (no hand-out, no session of ours)" {
	make -s -C "$ROOT" build/clients/tls_der >&2
	for v in 13 12; do
		use_tls $v
		for h in "" hold=2; do
			run_both 4 "$CLIENTS/tls_der" "$SERVER_PORT" "$TLS/ca.pem" 4 $h
			assert_both_ok
			assert_same_output
			run cat "$BATS_TEST_TMPDIR/shim.out"
			for i in 2 3 4; do
				assert_line "$i: answered, reused 0, master key in the DER new"
			done
		done
	done
}

# docs/tls.md "The handshake's clean slate": OpenSSL's handshake begins
# with ERR_clear_error() and errno = 0; a handed-out SSL_connect returned 1
# without, and the error a program left on the queue made its next
# non-blocking read say SSL_ERROR_SSL (1) where alone WANT_READ (2): such
# a program drops a sound connection.  (Found by the fourth HTTPS review.)
@test "a handed-out SSL_connect clears the error queue and errno as the program's own handshake does, TLS 1.3 and 1.2" {
	make -s -C "$ROOT" build/clients/tls_errq >&2
	for v in 13 12; do
		use_tls $v
		run_both 3 "$CLIENTS/tls_errq" "$SERVER_PORT" "$TLS/ca.pem" 3
		echo "$SHIM_STATS"
		assert_both_ok
		assert_same_output
		assert_regex "$SHIM_STATS" ' tls_reused=[1-9]'
		run cat "$BATS_TEST_TMPDIR/shim.out"
		for i in 1 2 3; do
			assert_line "$i: connect 1, errors queued 0, errno 0"
			assert_line "$i: a read before the request: -1, SSL_get_error 2"
		done
	done
}
