#!/usr/bin/env bats
# HTTPS: whole TLS connections pooled through the libssl 3
# wrappers.  nginx serves the same site over TLS 1.3 and TLS 1.2 with a
# test CA made for the run (scripts/lib/tls.sh); its log names the TLS
# connection ($connection) and the client certificate it carried.  Every
# test compares a real client's output with and without the shim.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

N=50

assert_one_connection() {
	assert_both_ok
	assert_equal "plain requests $PLAIN_REQS" "plain requests $1"
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $1"
	assert_equal "shim requests $SHIM_REQS" "shim requests $1"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	assert_equal "handed out $(stat_value tls_reused)" "handed out $(($1 - 1))"
}

# the same after a first connection of the program's own: its request's
# close is not rewritten while it is not known how the server ends a TLS
# connection; that close teaches it (docs/tls.md "Ragged closes"), and one
# connection serves the rest
assert_taught_then_one() {
	assert_both_ok
	assert_equal "plain requests $PLAIN_REQS" "plain requests $1"
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $1"
	assert_equal "shim requests $SHIM_REQS" "shim requests $1"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	assert_equal "handed out $(stat_value tls_reused)" "handed out $(($1 - 2))"
}

# N requests, each on a connection of the program's own handshake: one
# the library may not hand a pooled connection (docs/tls.md "Callbacks
# that watch", "Renegotiation")
assert_own_connections() {
	assert_both_ok
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $1"
	assert_equal "shim requests $SHIM_REQS" "shim requests $1"
	assert_equal "shim conns $SHIM_CONNS" "shim conns $1"
	assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
}

@test "ruby Net::HTTPS per request, TLS 1.3: its own handshakes (Ruby sets an info callback on every SSL), same output" {
	use_tls 13
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/nethttp_fresh.rb" 127.0.0.1 "$SERVER_PORT" /f $N GET "$TLS/ca.pem"
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	assert_own_connections $N
	run grep -c ' TLSv1.3 ' "$NGINX_DIR/access.log"
	assert_output $N
}

@test "ruby Net::HTTPS per request, TLS 1.2: its own handshakes, same output" {
	use_tls 12
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/nethttp_fresh.rb" 127.0.0.1 "$SERVER_PORT" /f $N GET "$TLS/ca.pem"
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	assert_own_connections $N
	run grep -c ' TLSv1.2 ' "$NGINX_DIR/access.log"
	assert_output $N
}

@test "python urllib with an SSL context: TLS 1.3 one TLS connection; TLS 1.2 its own handshakes (it allows renegotiation), resuming ours; same output" {
	for v in 13 12; do
		use_tls $v
		run_both $N "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
		assert_plain_output_is "$NGINX_DIR/www/f" $N
		assert_same_output
		if [ $v = 13 ]; then
			# (urllib never reads the end: the library reads it after
			# the program's close, docs/tls.md "Ragged closes")
			assert_taught_then_one $N
		else
			assert_own_connections $N
			# (the first connection, whose close teaches, is not
			# parked: its session is kept all the same)
			assert_equal "resumed $(stat_value tls_resumed)" "resumed $((N - 1))"
		fi
	done
}

@test "curl --cacert, Connection: close, many URLs in one process: its own handshakes (its session cache), same output" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	for v in 13 12; do
		use_tls $v
		run_both $N "$CURL" -sS --cacert "$TLS/ca.pem" -H 'Connection: close' "$URL/f?n=[1-$N]"
		assert_plain_output_is "$NGINX_DIR/www/f" $N
		assert_same_output
		# curl keeps sessions (a new-session callback, set whatever
		# --no-sessionid says): not followed (docs/tls.md "Callbacks
		# that watch")
		assert_own_connections $N
	done
}

@test "ruby TLS read to EOF: the same output (its own handshakes: its info callback)" {
	use_tls 13
	run_both 20 "$RUBY" "$SCRIPTS/tls_read_eof.rb" 127.0.0.1 "$SERVER_PORT" "$TLS/ca.pem" 20
	assert_equal "$(count_matches '^HTTP/1\.1 200 OK' "$BATS_TEST_TMPDIR/plain.out")" 20
	assert_same_output --headers
	assert_own_connections 20
}

# ------------------------------------------------------------ trust

# tls_trust.py runs each step on its own connection in one process: with
# the shim, earlier steps' connections wait in the pool; every step must
# end exactly as it does without the shim.
trust_steps() {
	use_tls 13
	run_both "$1" "$PYTHON" "$SCRIPTS/tls_trust.py" "$SERVER_PORT" "$TLS" "${@:2}"
	assert_both_ok
	assert_same_output
	cat "$BATS_TEST_TMPDIR/shim.out"
}

@test "trust never leaks: a context that does not trust the CA fails after trusted connections were pooled" {
	# the first step's close reaches nginx (nothing is known of how it
	# ends: not rewritten), which teaches that it ends with close_notify
	# (docs/tls.md "Ragged closes"); the second's connection then serves
	# the third and fourth, and is refused to the fifth
	trust_steps 4 trust@localhost trust@localhost trust@localhost trust@localhost other@localhost
	assert_equal "$(sed -n 5p "$BATS_TEST_TMPDIR/shim.out")" \
		"other@localhost fail unable to get local issuer certificate"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	[ "$(stat_value tls_reused)" -eq 2 ] && [ "$(stat_value tls_declined)" -eq 1 ]
}

@test "trust never leaks: the verified name is the program's own (IP 127.0.0.2 fails on 127.0.0.1's connection)" {
	# (the first step teaches how nginx ends, docs/tls.md "Ragged closes";
	# the second's connection is pooled)
	trust_steps 2 trust@127.0.0.1 trust@127.0.0.1 trust@127.0.0.2
	assert_equal "$(sed -n 3p "$BATS_TEST_TMPDIR/shim.out")" \
		"trust@127.0.0.2 fail IP address mismatch, certificate is not valid for '127.0.0.2'."
	# same SNI (none): only the program's own verification could refuse it
	[ "$(stat_value tls_declined)" -eq 1 ]
}

@test "trust never leaks: an unverified (CERT_NONE) connection is not handed to a context that verifies" {
	# (the second none@ teaches how nginx ends, docs/tls.md "Ragged
	# closes"; the third is handed the first's connection)
	trust_steps 3 none@localhost none@localhost other@localhost none@localhost
	assert_equal "$(sed -n 3p "$BATS_TEST_TMPDIR/shim.out")" \
		"other@localhost fail unable to get local issuer certificate"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	[ "$(stat_value tls_reused)" -eq 1 ]
}

@test "trust never leaks: different client certificates never share a connection" {
	# (only the newest pooled connection is tried: a repeated certificate
	# reuses, a changed one makes a new connection)
	# (the second step teaches how nginx ends, docs/tls.md "Ragged
	# closes": one connection more than the certificates)
	trust_steps 7 trust+a@localhost trust+a@localhost trust+b@localhost trust+b@localhost \
		trust@localhost trust@localhost trust+a@localhost
	assert_equal "$(count_matches ' ok HTTP/1.1 200 ' "$BATS_TEST_TMPDIR/shim.out")" 7
	assert_equal "shim conns $SHIM_CONNS" "shim conns 5"
	# each connection carried one certificate (or none), never two
	run bash -c "awk '{ print \$1, \$NF }' '$NGINX_DIR/access.log' | sort -u | awk '{ print \$1 }' | uniq -d"
	assert_output ''
	[ "$(stat_value tls_reused)" -ge 1 ]
}

@test "curl -k after a verified connection was pooled: the verify result is the program's own (20), not X509_V_OK (its own connection)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	use_tls 13
	local w='%{http_code} verify=%{ssl_verify_result}\n'
	run_both 2 "$CURL" -sS -H 'Connection: close' --cacert "$TLS/ca.pem" "$URL/echo/1" -w "$w" \
		--next -H 'Connection: close' -k --cacert "$TLS/other-ca.pem" "$URL/echo/2" -w "$w"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "200 verify=20"
	# its result differs from the connection's (0), which the connection's
	# session carries: its own connection (docs/tls.md "The allow-list")
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
}

@test "curl with other options for the next URL: a wrong name fails, other limits get their own connection" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	use_tls 13
	local c=(-sS -H 'Connection: close' --cacert "$TLS/ca.pem" -w ' %{http_code}\n')
	run_both 2 "$CURL" "${c[@]}" "$URL/echo/1" --next "${c[@]}" --tls-max 1.2 "$URL/echo/2" \
		--next "${c[@]}" --resolve "wrong.example:$SERVER_PORT:127.0.0.1" "https://wrong.example:$SERVER_PORT/echo/3"
	# curl exits with the last failure: 35 (TLS 1.2 against a 1.3-only
	# server) for the second URL, then 60 (name) for the third
	assert_equal "plain status $PLAIN_STATUS" "plain status 60"
	assert_equal "shim status $SHIM_STATUS" "shim status 60"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.err"
	assert_line --partial "curl: (35)"
	assert_line --partial "curl: (60)"
	[ "$(stat_value tls_reused)" -eq 0 ]
}

# ------------------------------------------------------------ first use

@test "a POST on a pooled TLS connection: sent once, answered, on the pooled connection (KEEPALIVE_METHODS=idempotent: a fresh one)" {
	use_tls 13
	run_both 3 "$PYTHON" "$SCRIPTS/https_steps.py" "$TLS/ca.pem" localhost "$SERVER_PORT" \
		GET /echo/1 POST /echo/2 GET /echo/3
	assert_both_ok
	assert_same_output
	# nginx saw the POST once, as the second request of the connection
	run awk '$3 == "POST" { print $2 }' "$NGINX_DIR/access.log"
	assert_output 2
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	# the old rule: never written on the pooled connection, the first
	# request of its own
	run_both 3 KEEPALIVE_METHODS=idempotent "$PYTHON" "$SCRIPTS/https_steps.py" "$TLS/ca.pem" \
		localhost "$SERVER_PORT" GET /echo/1 POST /echo/2 GET /echo/3
	assert_both_ok
	assert_same_output
	run awk '$3 == "POST" { print $2 }' "$NGINX_DIR/access.log"
	assert_output 1
	[ "$(stat_value unvouched)" -ge 1 ]
}

@test "a pooled TLS connection the server closed while idle is not handed out" {
	use_tls 13
	run_both 2 "$PYTHON" "$SCRIPTS/https_steps.py" "$TLS/ca.pem" localhost "$SERVER_PORT" \
		GET /short/f SLEEP 1.5 GET /short/f
	assert_both_ok
	assert_same_output
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	[ "$(stat_value tls_reused)" -eq 0 ]
}

# ------------------------------------------------------------ cost

@test "a program that never touches TLS does not load libssl" {
	run env LD_PRELOAD="$PRELOAD" cat /proc/self/maps
	assert_success
	refute_output --partial libssl
	refute_output --partial libcrypto
	run objdump -T "$LIB"
	assert_output --regexp 'OPENSSL_3\.0\.0 +SSL_read'
	refute_output --partial 'libssl'
}

@test "a ruby verify callback that runs the garbage collector: same output (its own handshakes: its info callback)" {
	use_tls 13
	# a full GC in each of 30 verifications: ~6 s a half on an idle 2-core
	# VM, over 20 s (the default timeout) on one running 20 jobs
	CLIENT_TIMEOUT=60 run_both 30 "$RUBY" "$SCRIPTS/nethttp_verify_gc.rb" 127.0.0.1 "$SERVER_PORT" /f 30 "$TLS/ca.pem"
	assert_plain_output_is "$NGINX_DIR/www/f" 30
	assert_same_output
	assert_own_connections 30
}

@test "trust never leaks: a stricter security level is not handed a connection made at a laxer one" {
	# (the first step teaches how nginx ends, docs/tls.md "Ragged
	# closes"; the second's connection is pooled)
	trust_steps 3 trust@localhost trust@localhost trust+sec4@localhost trust@localhost
	assert_equal "$(sed -n 3p "$BATS_TEST_TMPDIR/shim.out")" "trust+sec4@localhost fail SSLError"
	[ "$(stat_value tls_declined)" -eq 1 ] && [ "$(stat_value tls_reused)" -eq 1 ]
}

@test "under valgrind (memcheck): park, hand-out, re-verification, a declined hand-out (tls_config); curl passing through: no error" {
	# curl cannot start with libasan preloaded: valgrind watches it instead
	curl_ok || skip "the ASan run preloads libasan, which valgrind cannot follow"
	use_tls 13
	# valgrind runs tens of times slower, and the parallel run shares the
	# cores: more than the default 20 s before calling it a hang
	CLIENT_TIMEOUT=120 run_both 5 valgrind -q --error-exitcode=99 "$CLIENTS/tls_config" observe "$SERVER_PORT" "$TLS"
	assert_both_ok
	assert_same_output
	# (no resumption of ours in this sequence since a close is rewritten
	# only where close_notify is known: the first connection teaches and
	# no hand-out is declined, docs/tls.md "Ragged closes"; the fallback
	# is left to the test "no pooled connection free" without valgrind)
	[ "$(stat_value tls_reused)" -ge 2 ]
	# (one exchange first, whose close teaches how nginx ends: the
	# scenario's first connection is then pooled, and declined)
	CLIENT_TIMEOUT=120 run_both 3 TLS_CONFIG_TEACH=1 valgrind -q --error-exitcode=99 "$CLIENTS/tls_config" setting "$SERVER_PORT" "$TLS" block_padding
	assert_both_ok
	assert_same_output
	[ "$(stat_value tls_declined)" -ge 1 ]
	# curl keeps sessions: not followed (docs/tls.md "Callbacks that watch")
	local c=(-sS -H 'Connection: close' --cacert "$TLS/ca.pem" -o /dev/null -w '%{http_code}\n')
	CLIENT_TIMEOUT=120 run_both 7 valgrind -q --error-exitcode=99 "$CURL" "${c[@]}" "$URL/f?n=[1-5]" \
		--next "${c[@]}" -k "$URL/echo/6" --next "${c[@]}" --cert "$TLS/client-a.pem" \
		--key "$TLS/client-a.key" "$URL/echo/7"
	assert_both_ok
	assert_same_output
	assert_equal "shim conns $SHIM_CONNS" "shim conns 7"
}

# ------------------------------------------------------------ resumption

# concurrent [N] CTX1 CTX2: tls_concurrent.py, one request (CTX1), then two
# connections opened together (CTX2): the second cannot have the pooled
# connection.  N: the requests the server gets (default 3)
concurrent() {
	local n=3
	[ $# -lt 3 ] || { n=$1 && shift; }
	use_tls 13
	run_both "$n" "$PYTHON" "$SCRIPTS/tls_concurrent.py" "$SERVER_PORT" "$TLS" "$@"
	assert_both_ok
	assert_same_output
	cat "$BATS_TEST_TMPDIR/shim.out"
}

@test "no pooled connection free: a fresh handshake resumes the session of a pooled one (fallback)" {
	# (a first request whose close teaches how nginx ends, docs/tls.md
	# "Ragged closes"; the second's connection, which resumed the first's
	# session, is pooled)
	concurrent 4 trust,trust trust
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK /echo/' "$BATS_TEST_TMPDIR/shim.out")" 4
	assert_equal "shim conns $SHIM_CONNS" "shim conns 3"
	# nginx's $ssl_session_reused: the new connection resumed ("r")
	run awk '!($1 in seen) { seen[$1] = ++n } seen[$1] > 2 { print $7 }' "$NGINX_DIR/access.log"
	assert_output r
	[ "$(stat_value tls_resumed)" -eq 2 ] && [ "$(stat_value tls_reused)" -eq 1 ]
}

@test "trust never leaks through resumption: a context that does not trust the CA is offered no session" {
	concurrent 1 trust other # CTX2's handshakes fail: one request
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "1 ok HTTP/1.1 200 OK /echo/0"
	assert_line "connect 1 fail unable to get local issuer certificate"
	assert_line "connect 2 fail unable to get local issuer certificate"
	[ "$(stat_value tls_resumed)" -eq 0 ] && [ "$(stat_value tls_reused)" -eq 0 ]
}

@test "trust never leaks through resumption: a client certificate's session is not offered to a program without one" {
	concurrent trust+a trust
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK /echo/' "$BATS_TEST_TMPDIR/shim.out")" 3
	[ "$(stat_value tls_resumed)" -eq 0 ]
	# no connection without a certificate was taken for client-a's
	run awk '$NF == "CN=client-a" { print $4 }' "$NGINX_DIR/access.log"
	assert_output /echo/0
}

# A TLS 1.2 session of ours resumed for a program that offered none: the
# abbreviated handshake ends with the client's Finished, unacknowledged,
# so Nagle held the program's first request until the server's delayed
# ACK (~40 ms a request) where after its own full handshake (the server's
# Finished last) the request goes at once.  The client reads, right after
# its write, whether the bytes left the socket (SIOCOUTQNSD): "held" on
# the old library for every resumed request (docs/tls.md "Sessions").
@test "python ssl, TLS 1.2, a session of ours resumed: the first request leaves at once, as after its own handshake (not held by Nagle)" {
	use_tls 12
	run_both 5 "$PYTHON" "$SCRIPTS/tls_unsent.py" 127.0.0.1 "$SERVER_PORT" /f 5 "$TLS/ca.pem"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "request 4: sent, HTTP/1.1 200 OK"
	[ "$(stat_value tls_resumed)" -ge 1 ] || fail "no session of ours resumed: nothing tested"
}
