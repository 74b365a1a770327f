#!/usr/bin/env bats
# HTTPS: hand out only what is proved the same (docs/tls.md "Found by the
# fifth HTTPS review"): a client-side servername callback, openssl.cnf's
# settings, the session id context, the error queue and errno around the
# first read and made-up answers, a write after SSL_shutdown, SSL_dup and
# SSL_copy_session_id of a handed-out SSL.  tests/clients/tls_proved.c
# against nginx, without and with the library (in one process, and one
# process per request under `keepalive`): the same output.

load helpers

export KEEPALIVE_BROKER_TIMEOUT_MS=10000

setup_file() {
	suite_setup
	make -s -C "$ROOT" build/keepalive-broker >&2
}
setup() {
	XDG="$BATS_TEST_TMPDIR/xdg"
	mkdir -m 0700 "$XDG"
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

C="$CLIENTS/tls_proved"
proved() { tls_case tls_proved "$@"; }

# loop_both SCRIPT: one process per request, without the library, then
# under `keepalive` (a broker for its lifetime): plain.out, shim.out, and
# nginx's log of each run (plain.log, shim.log)
loop_both() {
	nginx_reset
	PLAIN_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$1" \
		>"$BATS_TEST_TMPDIR/plain.out" 2>&1 </dev/null || PLAIN_STATUS=$?
	cp "$NGINX_DIR/access.log" "$BATS_TEST_TMPDIR/plain.log"
	nginx_reset
	SHIM_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$NGINX_TLS13_PORT,$NGINX_TLS12_PORT" "$ROOT/scripts/keepalive" sh -c "$1" \
		>"$BATS_TEST_TMPDIR/shim.out" 2>&1 </dev/null || SHIM_STATUS=$?
	cp "$NGINX_DIR/access.log" "$BATS_TEST_TMPDIR/shim.log"
	echo "plain: status=$PLAIN_STATUS; shim: status=$SHIM_STATUS"
	echo "--- plain log"; cat "$BATS_TEST_TMPDIR/plain.log"
	echo "--- shim log"; cat "$BATS_TEST_TMPDIR/shim.log"
	echo "--- diff"; diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" | head -n 40
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	run diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
	assert_success
	# what nginx saw, but which connection and whether it resumed
	run diff <(awk '{ print $3, $4, $5, $6, $8 }' "$BATS_TEST_TMPDIR/plain.log") \
		<(awk '{ print $3, $4, $5, $6, $8 }' "$BATS_TEST_TMPDIR/shim.log")
	assert_success
}
# resumed: which requests nginx resumed ($ssl_session_reused "r"), by line
resumed() { awk '$7 == "r" { printf "%d ", NR }' "$BATS_TEST_TMPDIR/shim.log"; }

@test "a client-side servername callback is called in every handshake, and its refusal fails it: such a program makes its own handshakes, in one process and across processes" {
	for v in 13 12; do
		use_tls $v
		proved 3 sni count
		assert_line "  calls=2"
		proved 1 sni reject
		assert_line --partial "3: connect=-1"
		loop_both "$C once $SERVER_PORT $TLS; $C sni $SERVER_PORT $TLS reject"
	done
}

@test "openssl.cnf's Groups and SignatureAlgorithms stay in the record: a process with another configuration file is neither offered another's session nor handed its connection" {
	printf '%s\n' 'openssl_conf = openssl_init' '[openssl_init]' 'ssl_conf = ssl_sect' '[ssl_sect]' \
		'system_default = system_default_sect' '[system_default_sect]' >"$BATS_TEST_TMPDIR/head.cnf"
	{ cat "$BATS_TEST_TMPDIR/head.cnf"; echo 'Groups = P-384:X25519'; } >"$BATS_TEST_TMPDIR/groups.cnf"
	# (nginx's certificate is ECDSA: RSA signatures only fail its own handshake)
	{ cat "$BATS_TEST_TMPDIR/head.cnf"; echo 'SignatureAlgorithms = RSA+SHA256:RSA-PSS+SHA256'; } \
		>"$BATS_TEST_TMPDIR/sigs.cnf"
	for v in 13 12; do
		use_tls $v
		local once="$C once $SERVER_PORT $TLS"
		loop_both "$once; OPENSSL_CONF=$BATS_TEST_TMPDIR/groups.cnf $once; OPENSSL_CONF=$BATS_TEST_TMPDIR/sigs.cnf $once; $once"
		# (the last resumes the first's session, the others make their own)
		assert_equal "resumed $(resumed)" "resumed $(grep -c . "$BATS_TEST_TMPDIR/shim.log") "
	done
}

@test "the session id context is recorded and compared: a connection or session made under another is neither handed out nor offered, in one process and across processes" {
	for v in 13 12; do
		use_tls $v
		proved 3 sid_ctx
		assert_line "  session id context [B]"
		assert_line --partial "3: connect=1  reused=1"
		loop_both "$C once $SERVER_PORT $TLS A; $C once $SERVER_PORT $TLS B; $C once $SERVER_PORT $TLS B"
		run grep -c 'connect=1' "$BATS_TEST_TMPDIR/shim.out"
		assert_output 3
		# (the third resumes the second's session)
		assert_equal "resumed $(resumed)" "resumed 3 "
	done
}

@test "a handed-out TLS 1.3 SSL's first read clears the error queue as its own (the server's tickets, state_machine); SSL_get_error and errno after made-up answers are libssl's" {
	for v in 13 12; do
		use_tls $v
		proved 3 errq_read
		assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
		proved 3 errq_calls
		assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
		assert_line "  write after shutdown r=-1 SSL_get_error=1 queue=error errno=77"
	done
}

@test "a zero-length SSL_write_ex is no failure of the connection, and a write after SSL_shutdown is refused on every path" {
	for v in 13 12; do
		use_tls $v
		proved 3 shut_write
		refute_line --partial "write after shutdown r=1"
		# the connection stays poolable: one for the three
		assert_equal "conns $SHIM_CONNS" "conns 1"
	done
}

@test "SSL_dup of a handed-out SSL returns it with a reference taken; SSL_copy_session_id from one gives the session its program reads" {
	for v in 13 12; do
		use_tls $v
		proved 3 dup
		assert_line "dup: ok, the same SSL: yes"
		assert_line "  body=no"
		proved 4 copy
		assert_line "3: connect=1  reused=1"
		proved 4 get1
	done
}
