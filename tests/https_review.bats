#!/usr/bin/env bats
# HTTPS: the ways to tell found by the review of 2026-12-05 (docs/tls.md
# "Found by the HTTPS review of 2026-12-05"): program code in the trust
# store, process-wide crypto state, SSL_clear on a handed-out SSL, an SSL
# kept after its socket closed, BIO callbacks and chains, the handshake
# values.  tests/clients/tls_config.c against nginx, without and with the
# library: the same output.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

# config N SCENARIO [ARG]: tls_config without and with the library
config() { tls_case tls_config "$@"; }

@test "a verify callback or a function of the program's X509_STORE runs as often as in its own handshakes: such a program is neither handed a connection nor offered a session" {
	for v in 13 12; do
		use_tls $v
		for arg in cb revocation; do
			config 3 store_cb "$arg"
			assert_line --partial "3 ok HTTP/1.1 200 OK"
			assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
			assert_equal "resumed $(stat_value tls_resumed)" "resumed 0"
		done
	done
}

@test "process-wide crypto state changed after a handshake (fips=yes): the program's own handshake runs under it, no connection made before is handed out" {
	for v in 13 12; do
		use_tls $v
		for arg in fips fips_nv; do
			config 2 crypto_state $arg
			assert_line --partial "2 ok HTTP/1.1 200 OK"
			assert_line --partial "3 fail"
		done
		assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
	done
}

@test "process-wide crypto state set again after a handshake: the generation moved, so the next hand-out is declined; the one after is served" {
	use_tls 13
	config 5 crypto_state nop
	assert_line --partial "5 ok HTTP/1.1 200 OK"
	# request 1 teaches how the server ends (not rewritten: its own
	# connection, never pooled), request 2's connection is parked, request
	# 3 was offered that connection, made before the change (declined: its
	# own connection), requests 4 and 5 were handed connections made under
	# the new state
	assert_equal "declined $(stat_value tls_declined)" "declined 1"
	assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
}

@test "SSL_clear then a new connection on an SSL handed a pooled one: its next handshake offers the session its own would have left (resumed)" {
	for v in 13 12; do
		use_tls $v
		config 4 clear_again
		assert_line "SSL_clear: 1"
		assert_line --partial "4 ok HTTP/1.1 200 OK reused=1"
		# request 3 was handed a pooled connection
		assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
	done
}

# F1 of the pair fuzzer's seed 1234 (pair 1508b): request 2 resumed a
# session of ours (read as its own full handshake: chain=2); after
# SSL_clear and the resumption of the session it kept, libssl alone still
# reads that first chain (it keeps its verified chain through SSL_clear);
# the old library read none (chain=-1).
@test "SSL_clear then a new connection on an SSL that resumed a session of ours: the chain it read stays readable, as libssl keeps it" {
	for v in 12 13; do
		use_tls $v
		config 3 clear_resumed
		assert_line "SSL_clear: 1"
		assert_line --partial "3 ok HTTP/1.1 200 OK reused=1 chain=2 verify=0"
		assert_equal "resumed $(stat_value tls_resumed)" "resumed 1"
	done
}

@test "an SSL kept after its socket closed answers its own descriptor, and SSL_shutdown acts on that number as without the library" {
	for v in 13 12; do
		use_tls $v
		for arg in closed reuse; do
			config 3 kept_fd "$arg"
			assert_line --partial "SSL_get_fd: its own number"
			assert_line --partial "3 ok HTTP/1.1 200 OK"
		done
	done
}

@test "a BIO callback on the program's socket BIO, or a filter of its own under the SSL, sees the program's traffic: no pooled connection" {
	for v in 13 12; do
		use_tls $v
		for arg in cb chain; do
			config 3 bio_watch "$arg"
			assert_line "2 the program's BIO saw: read some, written some"
			assert_line "3 the program's BIO saw: read some, written some"
			assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
		done
	done
}

@test "client and server random and the keying-material exporter differ between two requests, as between two handshakes (a program that can read them is not handed a connection)" {
	for v in 13 12; do
		use_tls $v
		config 3 values
		assert_line "repeated: client random no, server random no, exporter no"
	done
}

# A handshake moves the SSL to its version's method (TLS 1.3: libssl's
# own, whose supported list holds the 3 TLS 1.3 suites); a handed-out SSL
# kept TLS_client_method() and its 30 (the review of 2026-12-07, item 5)
@test "the SSL's method and its supported suites after each request are its version's, as after its own handshake (a program that can read them is not handed a connection)" {
	for v in 13 12; do
		use_tls $v
		config 3 method
		assert_line "3 method the version's own, $([ $v = 13 ] && echo 3 || echo 27) suites supported"
	done
}

# SSL_set_SSL_CTX after the handshake to a context with an info callback:
# libssl calls that callback at every event after (two TLS 1.3 tickets and
# the close_notify: 9 events a request; 1 in TLS 1.2); a handed-out SSL
# told none, its own missed the close_notify's (the review of HTTPS at
# 6eba2ea, F2).
@test "SSL_set_SSL_CTX after the handshake to a context with an info callback: the events are told as alone" {
	for v in 13 12; do
		use_tls $v
		config 3 ctx_info_after
		assert_line --regexp "^3 info events [1-9]"
	done
}

# A record padding callback the program sets after its handshake stayed on
# the engine (its own SSL) when the connection was parked: libssl called it
# for every later SSL's records, with the first SSL and its argument (a
# use after free where the program frees the argument with its SSL), and
# the later SSL's own callback never ran (the review of HTTPS at 6eba2ea).
@test "a record padding callback set after the handshake: its connection is never parked, no later SSL's records reach it, each SSL's own runs as alone" {
	for v in 13 12; do
		use_tls $v
		for only1 in 1 ""; do
			ONLY1=$only1 run_both 3 "$CLIENTS/tls_padcb" "$SERVER_PORT" "$TLS/ca.pem" 3
			echo "ONLY1=$only1 $SHIM_STATS"
			assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
			assert_same_output
			run cat "$BATS_TEST_TMPDIR/shim.out"
			# (padding is TLS 1.3's: libssl never calls it in 1.2)
			[ $v = 12 ] || assert_line --regexp "^1 connect=1 got=[0-9]+ padcb_request=1 padcb_shutdown=1 "
		done
	done
}

# SSL_sendfile writes through the kernel's TLS (SSL_OP_ENABLE_KTLS), which a
# handed-out SSL's handshake never set up; it is not wrapped (the review of
# HTTPS at c1a4d78)
@test "a program that can reach SSL_sendfile is not handed a pooled connection (it writes past the SSL_* wrappers)" {
	for v in 13 12; do
		use_tls $v
		TLS_CONFIG_TEACH=1 config 4 sendfile_named
		assert_line "SSL_sendfile found"
		assert_regex "$SHIM_STATS" ' tls_reused=0 '
	done
}

# F2 of the pair fuzzer's seed 1234 (pair 162b): an SSL handed a pooled
# connection, its response read to the end (the server's close_notify),
# its socket closed, then SSL_shutdown: libssl alone marks its
# close_notify sent, fails to write it (EBADF) and answers -1 with
# SSL_get_error 6 (the server's was read), SSL_get_shutdown 3; the old
# library answered SSL_get_error 5 and SSL_get_shutdown 2.
@test "an SSL handed a pooled connection, kept after its socket closed: SSL_shutdown answers as libssl's on the closed descriptor" {
	for v in 13 12; do
		use_tls $v
		for arg in eof body shut_first body_shut quiet; do
			config 3 kept_handed "$arg"
			assert_line --partial "3 ok HTTP/1.1 200 OK"
			# (a quiet shutdown is not handed a connection: its own)
			[ "$arg" = quiet ] ||
				assert_equal "$v $arg: handed out $(stat_value tls_reused)" "$v $arg: handed out 1"
			grep '^SSL_shutdown' "$BATS_TEST_TMPDIR/shim.out" | sed "s/^/$v $arg: /" >&3
		done
	done
}

# RFC 5929's tls-unique (CPython's get_channel_binding), one request asking
# to close per connection, against tests/servers/tls_binding.py, which
# answers the binding it computed.  The library offers a session it kept
# from the first connection to the next ones (its resumption fallback) and
# shows the resumed handshake as the full one the program's own would
# have been (session_reused 0), but the Finished messages were the
# resumption's, whose first is the server's: the program took its own,
# and its binding was another than the server's (the HTTPS review at
# 4183573).  Now the two Finished getters answer swapped for such a
# handshake: the binding is the server's, as alone.
@test "tls-unique after a resumption of a session the library offered is the server's, as alone (TLS 1.3 and 1.2)" {
	for v in 13 12; do
		[ -z "${BIND_PID:-}" ] || { kill "$BIND_PID"; wait "$BIND_PID" 2>/dev/null || true; }
		rm -f "$BATS_TEST_TMPDIR/bind.port"
		"$PYTHON" "$ROOT/tests/servers/tls_binding.py" "$TLS" "$BATS_TEST_TMPDIR/bind.port" "$v" \
			</dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/bind.err" 3>&- &
		BIND_PID=$!
		wait_until test -s "$BATS_TEST_TMPDIR/bind.port"
		read -r SERVER_PORT <"$BATS_TEST_TMPDIR/bind.port"
		run_plain "$PYTHON" "$ROOT/tests/clients/tls_binding.py" "$SERVER_PORT" "$TLS/ca.pem" 3
		run_shim "$PYTHON" "$ROOT/tests/clients/tls_binding.py" "$SERVER_PORT" "$TLS/ca.pem" 3
		echo "TLS $v: $SHIM_STATS"
		assert_both_ok
		assert_same_output
		run cat "$BATS_TEST_TMPDIR/shim.out"
		assert_line --partial "3 TLSv1."
		refute_line --partial "another binding"
		# (the library did offer a session of its own: the case)
		[ "$(stat_value tls_resumed)" -ge 1 ] || fail "TLS $v: no session of ours resumed"
	done
	kill "$BIND_PID"
	wait "$BIND_PID" 2>/dev/null || true
}


# libssl's SSL_free marks a session whose close_notify was not sent not
# resumable (ssl_clear_bad_session), so a program that kept it
# (SSL_get1_session) and offers it on a later SSL makes a full handshake.
# tests/clients/tls_freed.c, keep-alive requests so that the library pools
# each connection: round 1 is the program's own SSL (parked as the engine:
# its real SSL_free never runs), round 2 offers nothing and is handed the
# pooled connection, round 3 offers round 2's session, round 4 round 1's.
# The library before left both resumable: rounds 3 and 4 "reused=1" and
# "kept session resumable=1" where alone 0 (docs/tls.md "Found by the
# HTTPS review at 4183573", item 3).  With SSL_shutdown first both stay
# resumable, with and without the library.
@test "SSL_free without SSL_shutdown leaves the session it kept not resumable, the program's own SSL parked or a handed-out one: a later SSL that offers it makes a full handshake, as alone" {
	make -s -C "$ROOT" build/clients/tls_freed >&2
	for v in 13 12; do
		use_tls $v
		for mode in free shut; do
			run_both 4 "$CLIENTS/tls_freed" "$SERVER_PORT" "$TLS/ca.pem" "$mode" 0,0,2,1
			echo "TLS $v $mode: $SHIM_STATS"
			cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
			assert_both_ok
			assert_same_output
			run cat "$BATS_TEST_TMPDIR/shim.out"
			local r=1
			[ $mode = free ] && r=0
			assert_line "3 reused=$r HTTP/1.1 200 OK"
			assert_line "4 reused=$r HTTP/1.1 200 OK"
			# (round 2 was handed round 1's connection: the case; in
			# mode free rounds 3 and 4 too, pooling kept)
			[ "$(stat_value tls_reused)" -ge $([ $mode = free ] && echo 3 || echo 1) ] ||
				fail "TLS $v $mode: handed out $(stat_value tls_reused)"
		done
	done
}

# ------------------------------------------- the review of HTTPS in one process at 003d4b2

# tests/clients/tls_unread.c: three connections in one process, what the
# program sees of each printed, compared with the same run alone

# A session secret callback (SSL_set_session_secret_cb: no getter reads
# it back) runs in a TLS 1.2 handshake that offers a session with a
# ticket, and its 0 fails it: alone the third connection fails; the
# library before handed it a pooled connection as the resumption of its
# own session (the callback never ran), and offered a session of ours to
# a program that set it on every SSL (which then failed where alone all
# succeed).  Now such an SSL is not followed (NEVER_SECRET_CB).
@test "a session secret callback (TLS 1.2) runs and refuses as in the program's own handshakes: no pooled connection, no session of ours" {
	use_tls 12
	make -s -C "$ROOT" build/clients/tls_unread >&2
	run_both 2 "$ROOT/build/clients/tls_unread" secret "$SERVER_PORT" "$TLS/ca.pem"
	assert_equal "$(count_matches '^3 handshake failed: internal error; secret callback 1$' "$BATS_TEST_TMPDIR/shim.out")" 1
	assert_same_output
	run_both 3 "$ROOT/build/clients/tls_unread" secret-all "$SERVER_PORT" "$TLS/ca.pem"
	assert_equal "$(count_matches 'reused 0, verified chain 2, secret callback 0' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_same_output
}

# A message callback set with SSL_callback_ctrl (or SSL_CTX_callback_ctrl)
# rather than SSL_set_msg_callback: the library before did not note it, and
# handed the program pooled connections whose handshake its callback never
# saw (messages none where alone seen)
@test "a message callback set through SSL_callback_ctrl or SSL_CTX_callback_ctrl watches every handshake, as alone (TLS 1.3 and 1.2)" {
	make -s -C "$ROOT" build/clients/tls_unread >&2
	for v in 13 12; do
		use_tls $v
		for mode in msg ctx-msg; do
			run_both 3 "$ROOT/build/clients/tls_unread" "$mode" "$SERVER_PORT" "$TLS/ca.pem"
			assert_equal "$(count_matches 'messages seen' "$BATS_TEST_TMPDIR/shim.out")" 3
			assert_same_output
		done
	done
}

# libssl's client offers no TLS 1.3 ticket past the lifetime its server
# gave it (tls_construct_ctos_psk): its handshake is a full one, verified.
# The library before handed the program a pooled connection as the
# resumption of that session (reused 1, no verified chain).
@test "TLS 1.3: a session offered past its ticket's lifetime is not handed a pooled connection as its resumption: a full handshake, as alone" {
	servers_stop
	NGINX_TLS=1 NGINX_TLS_SESSION_TIMEOUT=2 nginx_start
	TLS="$NGINX_DIR/tls"
	use_tls 13
	make -s -C "$ROOT" build/clients/tls_unread >&2
	run_both 3 "$ROOT/build/clients/tls_unread" stale "$SERVER_PORT" "$TLS/ca.pem" 4
	assert_equal "$(count_matches '^3 TLSv1.3 reused 0, verified chain 2,' "$BATS_TEST_TMPDIR/shim.out")" 1
	assert_same_output
}

# The review of 2026-12-07, item 4: a TLS 1.3 server's ticket after a
# resumption makes the SSL's session a new one; an SSL handed a pooled
# connection as the resumption of its session read the one it offered, and
# offered it again.  A program that offers a session of its own now makes
# its own handshake (docs/tls.md "Sessions").
@test "TLS 1.3: an SSL that offers its own session makes its own handshake, and reads a new session after the answer (another object, another id), as alone" {
	use_tls 13
	TLS_CONFIG_TEACH=1 config 5 session_after
	for i in 2 3 4; do
		assert_line "$i session after the answer: another, id another, resumable=1"
	done
	# pooled connections were there for requests 2-4 and declined
	assert_regex "$SHIM_STATS" ' tls_reused=0 tls_declined=[1-9]'
	[ "$SHIM_CONNS" -eq "$PLAIN_CONNS" ]
}

# The review of HTTPS at 1f7b6aa, item 5: the engine reads and writes a
# handed-out SSL's socket through its own BIO, and the program's own
# socket BIO kept the flags of nothing: after a WANT_READ,
# BIO_should_retry(SSL_get_rbio(ssl)) read 0 where alone 1.  The flags
# the engine's BIO was left with are now the program's BIO's (docs/tls.md
# "What the program's BIO shows").
# (TLS 1.2: not handed out, the program would accept a renegotiation.)
@test "after a WANT_READ on a handed-out SSL the program's own socket BIO says retry and read, as alone (TLS 1.3 and 1.2)" {
	local handed
	for v in 13 12; do
		use_tls $v
		run_both 3 "$CLIENTS/tls_bioflags" "$SERVER_PORT" "$TLS/ca.pem" 3
		handed=2
		[ $v = 13 ] || handed=0
		assert_equal "handed out $(stat_value tls_reused)" "handed out $handed"
		assert_equal "$(count_matches 'err=2 want=3 should_retry=1 should_read=1 ' "$BATS_TEST_TMPDIR/plain.out")" 3
		assert_same_output
	done
}
