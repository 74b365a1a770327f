#!/usr/bin/env bats
# HTTPS trust: a pooled connection or session is offered only
# where the program's own handshake would have verified it the same way
# and negotiated something it allows.  Each test runs one program that
# uses several TLS settings in turn, without and with the shim, and
# compares what it printed and what nginx saw for each request (its log
# names the key-exchange group, the cipher and the client certificate of
# every request's connection): never a hard-coded expectation alone.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() {
	[ -z "${SWAP_PID:-}" ] || _stop_pid "$SWAP_PID"
	servers_stop
}

# nginx's view of each request, from a log: "<uri> <fields...>" with the
# fields named (status, reused: the session was resumed, curve, cipher, dn).
_tls_view() {
	awk -v want="$2" 'BEGIN { n = split(want, w, " ") }
		{ line = $4; for (i = 1; i <= n; i++) {
			f = w[i] == "status" ? $5 : w[i] == "reused" ? $7 : w[i] == "curve" ? $8 \
			    : w[i] == "cipher" ? $9 : $NF
			line = line " " f }
		  print line }' "$1" | sort
}

# assert_server_saw_same FIELDS: per request, nginx saw the same group,
# cipher and/or client certificate with and without the shim
assert_server_saw_same() {
	local plain shim
	plain=$(_tls_view "$BATS_TEST_TMPDIR/plain.log" "$1")
	shim=$(_tls_view "$NGINX_DIR/access.log" "$1")
	echo "nginx without the shim:"
	echo "$plain"
	echo "nginx with it:"
	echo "$shim"
	[ -n "$plain" ]
	assert_equal "$shim" "$plain"
}

# steps N CLIENT ARGS...: a multi-step client without and with the shim,
# same exit status and output
steps() {
	local n=$1
	shift
	run_both "$n" "$@"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	cat "$BATS_TEST_TMPDIR/shim.out"
}

ruby_steps() { steps "$1" "$RUBY" "$SCRIPTS/tls_trust.rb" "$SERVER_PORT" "$TLS" "${@:2}"; }
python_steps() { steps "$1" "$PYTHON" "$SCRIPTS/tls_trust.py" "$SERVER_PORT" "$TLS" "${@:2}"; }

# ------------------------------------------------------------ 1. verification as a client

@test "ruby verify_hostname: a context that checks the name is not handed a connection made without the check (TLS 1.3, 1.2)" {
	for v in 13 12; do
		use_tls $v
		ruby_steps 1 nohost@wrong.example trust@wrong.example
		run cat "$BATS_TEST_TMPDIR/plain.out"
		assert_line "trust@wrong.example fail hostname mismatch"
		[ "$(stat_value tls_reused)" -eq 0 ]
	done
}

@test "ruby verify_hostname through resumption: no pooled connection free, no session offered to a context that checks the name" {
	use_tls 12
	ruby_steps 1 nohost@wrong.example 2xtrust@wrong.example
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "2xtrust@wrong.example connect 2 fail hostname mismatch"
	[ "$(stat_value tls_reused)" -eq 0 ] && [ "$(stat_value tls_resumed)" -eq 0 ]
}

@test "verify_hostname: a connection verified with the name check is still shared by the same settings (python; ruby makes its own: its info callback)" {
	use_tls 13
	# (it reads each answer to its end: the second step's hand-out is
	# declined and its close teaches how nginx ends, docs/tls.md "Ragged
	# closes"; the others share the first's connection)
	python_steps 4 trust@localhost trust@localhost trust@localhost trust@localhost
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK ' "$BATS_TEST_TMPDIR/shim.out")" 4
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	ruby_steps 3 trust@localhost trust@localhost trust@localhost
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK ' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_equal "shim conns $SHIM_CONNS" "shim conns 3"
}

# ------------------------------------------------------------ 2. key-exchange groups

@test "groups: python set_ecdh_curve(secp384r1) is not handed an X25519 connection (TLS 1.3, 1.2)" {
	for v in 13 12; do
		use_tls $v
		# 3 requests; 2 over TLS 1.2, where the P-384 step fails (below)
		python_steps $((v == 13 ? 3 : 2)) trust@localhost trust+p384@localhost trust@localhost
		assert_server_saw_same "curve cipher"
	done
	# over TLS 1.2 the server's P-256 certificate needs P-256 among the
	# groups: without the shim that handshake fails, and so with it
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "trust+p384@localhost fail SSLError"
}

@test "groups: curl --curves secp384r1 after a default connection gets its own (TLS 1.3, 1.2)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	for v in 13 12; do
		use_tls $v
		local c=(-sS -H 'Connection: close' --cacert "$TLS/ca.pem" -w ' %{http_code}\n')
		# over TLS 1.2 the P-384 transfer fails as in python's (curl's
		# status is the last transfer's): 2 requests
		run_both $((v == 13 ? 3 : 2)) "$CURL" "${c[@]}" "$URL/echo/1" --next "${c[@]}" --curves secp384r1 "$URL/echo/2" \
			--next "${c[@]}" "$URL/echo/3"
		assert_both_ok
		assert_same_output
		assert_server_saw_same "curve cipher"
	done
}

@test "groups through resumption: a context limited to secp384r1 resumes nothing made with X25519" {
	use_tls 13
	run_both 3 "$PYTHON" "$SCRIPTS/tls_concurrent.py" "$SERVER_PORT" "$TLS" trust trust+p384
	assert_both_ok
	assert_same_output
	assert_server_saw_same "curve cipher"
	[ "$(stat_value tls_resumed)" -eq 0 ] && [ "$(stat_value tls_reused)" -eq 0 ]
}

# ------------------------------------------------------------ 3. client certificate from a callback

@test "client_cert_cb: a ruby context that supplies its certificate by callback is not handed an anonymous connection" {
	use_tls 13
	ruby_steps 3 trust@localhost cb+a@localhost trust@localhost
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK ' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_server_saw_same dn
	run grep -c 'CN=client-a' "$NGINX_DIR/access.log"
	assert_output 1
}

@test "client_cert_cb, the other way: an anonymous context is not handed the callback's connection (TLS 1.3, 1.2)" {
	for v in 13 12; do
		use_tls $v
		ruby_steps 3 cb+a@localhost trust@localhost cb+a@localhost
		assert_server_saw_same dn
	done
}

@test "client certificate in the context, ruby: the same certificate shares, another does not" {
	use_tls 13
	ruby_steps 4 trust+a@localhost trust+a@localhost trust@localhost trust+a@localhost
	assert_server_saw_same dn
}

# ------------------------------------------------------------ 4. cipher limits on resumption

@test "resumption respects cipher limits: an AES-128 context is offered no AES-256 session (TLS 1.2)" {
	use_tls 12
	run_both 3 "$PYTHON" "$SCRIPTS/tls_concurrent.py" "$SERVER_PORT" "$TLS" trust+aes256 trust+aes128
	assert_both_ok
	assert_same_output
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK ' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_server_saw_same cipher
}

@test "pooled connections respect cipher limits: AES-128 after AES-256, and back (TLS 1.2)" {
	use_tls 12
	python_steps 3 trust+aes256@localhost trust+aes128@localhost trust+aes256@localhost
	assert_equal "$(count_matches ' ok HTTP/1.1 200 OK ' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_server_saw_same cipher
}

# ------------------------------------------------------------ 5. SSL_clear

@test "SSL_clear: one SSL object reused for many connections verifies each as without the shim (TLS 1.3, 1.2)" {
	for v in 13 12; do
		use_tls $v
		run_both 5 "$CLIENTS/tls_clear" "$SERVER_PORT" "$TLS/ca.pem" localhost localhost \
			localhost localhost localhost
		assert_both_ok
		assert_same_output
		assert_equal "$(count_matches ' ok HTTP/1.1 200 OK ' "$BATS_TEST_TMPDIR/shim.out")" 5
	done
}

@test "SSL_clear: the session the program keeps, and what it resumes, are its own (another name between)" {
	for v in 13 12; do
		use_tls $v
		# SSL_clear keeps the session for resumption (only after a
		# close_notify: the one the shim did not send counts as sent)
		run_both 4 "$CLIENTS/tls_clear" "$SERVER_PORT" "$TLS/ca.pem" localhost localhost \
			wrong.example localhost
		assert_both_ok
		assert_same_output
		assert_server_saw_same reused
	done
}

# ------------------------------------------------------------ found by a review of the above

# probe SCENARIO [ARG]: tests/clients/tls_probe.c, without and with the shim
probe() {
	run_both "$N_REQ" "$CLIENTS/tls_probe" "$1" "$SERVER_PORT" "$TLS" "${@:2}"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	cat "$BATS_TEST_TMPDIR/shim.out"
}

@test "client certificate chain: the same leaf sent without its intermediate is not handed the chain's connection (C, python)" {
	for v in 13 12; do
		use_tls $v
		N_REQ=2 probe chain
		assert_server_saw_same "status dn"
		# nginx verified the chain, and refused the leaf alone
		run awk '{ print $5 }' "$BATS_TEST_TMPDIR/plain.log"
		assert_output "$(printf '200\n400')"
	done
	use_tls 13
	run_both 2 "$PYTHON" "$SCRIPTS/tls_chain.py" "$SERVER_PORT" "$TLS"
	assert_both_ok
	assert_same_output
	assert_server_saw_same "status dn"
}

@test "groups set through SSL_CONF_cmd (libssl's own calls) are compared too (TLS 1.3, 1.2)" {
	for v in 13 12; do
		use_tls $v
		N_REQ=1 probe conf_groups
		assert_server_saw_same "curve"
	done
}

@test "SSL_clear after its connection served another SSL: the server sees its own certificate again" {
	use_tls 13
	# (its third connection may resume a session of the pool's where it
	# set none: the fallback; what it is and presents must be its own)
	run_both 3 "$CLIENTS/tls_probe" restore "$SERVER_PORT" "$TLS" fresh
	assert_both_ok
	assert_equal "$(grep '^A ' "$BATS_TEST_TMPDIR/shim.out")" "$(grep '^A ' "$BATS_TEST_TMPDIR/plain.out")"
	assert_server_saw_same "status dn"
	run grep -c 'CN=client-a' "$NGINX_DIR/access.log"
	assert_output 3
}

@test "SSL_clear with two BIOs of the program's: they are its own again (SSL_get_fd)" {
	use_tls 13
	N_REQ=2 probe restore_bio
}

@test "SSL_clear after the next connect(), and after the pool dropped the connection: works as without the shim" {
	use_tls 13
	N_REQ=3 probe clear_after_dial
	N_REQ=4 run_both 4 env KEEPALIVE_MAX_IDLE_PER_HOST=1 "$CLIENTS/tls_probe" evict "$SERVER_PORT" "$TLS"
	assert_both_ok
	assert_same_output
}

@test "several certificates, the current one without its key: the one sent is the program's choice (TLS 1.2)" {
	use_tls 12
	N_REQ=1 probe several_certs
	assert_server_saw_same "dn"
}

@test "custom TLS extensions: the program's callback runs in its handshake (no pooled connection)" {
	use_tls 13
	N_REQ=2 probe custom_ext
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "custom extension add callback calls: 1"
}

@test "resumption is not offered to a context that turned tickets off" {
	use_tls 13
	N_REQ=3 probe no_ticket
	# B's handshake (the third) resumes nothing, as without the library.
	# (A2's hand-out is declined while nginx's end is not known, its own
	# handshake then resumes a session of ours, shown to the program as a
	# full one: docs/tls.md "Ragged closes", "Sessions")
	assert_equal "$(_tls_view "$NGINX_DIR/access.log" reused | sed -n 3p)" \
		"$(_tls_view "$BATS_TEST_TMPDIR/plain.log" reused | sed -n 3p)"
	assert_equal "$(_tls_view "$BATS_TEST_TMPDIR/plain.log" reused | sed -n 3p)" "/echo/3 ."
}

@test "SSL_set_accept_state, then SSL_connect on a connected socket: still a server's handshake" {
	use_tls 13
	# the server waits for a ClientHello it never gets: both time out
	CLIENT_TIMEOUT=3 N_REQ=0 probe accept_connect
	assert_equal "shim status $SHIM_STATUS" "shim status 124"
}

# docs/tls.md "A fresh handshake in place of a handed-out one": a program
# checks the peer of a handed-out connection (SSL_VERIFY_NONE and
# SSL_get_verify_result, as OpenSSL's manual says), then the library moves
# its request to a fresh connection (a replay: the server ended the pooled
# one under it; a watcher set after the check).  The fresh handshake must
# show what the program was shown, else nothing of the program's goes.
# tests/servers/tls_swap.py shows the test CA's certificate on its first
# connection and one of another CA on every later one; alone the program
# rejects request 2 and sends nothing on a B connection.  The library
# before sent request 2 to B (its answer read as from A).
_swap_server() {
	[ -z "${SWAP_PID:-}" ] || _stop_pid "$SWAP_PID"
	rm -f "$BATS_TEST_TMPDIR/swap.port"
	: >"$BATS_TEST_TMPDIR/swap.log"
	"$PYTHON" "$ROOT/tests/servers/tls_swap.py" "$TLS" "$BATS_TEST_TMPDIR/swap.port" \
		"$BATS_TEST_TMPDIR/swap.log" "${2:-server-other}" "$1" </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/swap.err" 3>&- &
	SWAP_PID=$!
	wait_until test -s "$BATS_TEST_TMPDIR/swap.port" || { cat "$BATS_TEST_TMPDIR/swap.err"; return 1; }
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/swap.port"
}

@test "a fresh handshake in place of a handed-out connection that shows another certificate carries nothing of the program's (a replay after a close or a reset, a watcher's remake)" {
	make -s -C "$ROOT" build/clients/tls_swap >&2
	_tls_cert "$TLS" server-other "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth" other-ca
	for how in close rst watch; do
		local mode=$how watch=
		[ "$how" = watch ] && mode=none watch=WATCH=1
		_swap_server "$mode"
		run_plain $watch "$CLIENTS/tls_swap" "$SERVER_PORT" "$TLS/ca.pem" 3
		cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/plain.log"
		_swap_server "$mode"
		run_shim $watch "$CLIENTS/tls_swap" "$SERVER_PORT" "$TLS/ca.pem" 3
		cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/shim.log"
		_stop_pid "$SWAP_PID"
		SWAP_PID=
		echo "== $how: plain $PLAIN_STATUS, shim $SHIM_STATUS"
		cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.out" "$BATS_TEST_TMPDIR/shim.log"
		assert_both_ok
		# alone: no request on a connection showing the other certificate
		run grep -c ' B GET' "$BATS_TEST_TMPDIR/plain.log"
		assert_output 0
		run grep -c ' B GET' "$BATS_TEST_TMPDIR/shim.log"
		assert_output 0
		# and the program was handed connection 1 for its request 2
		run grep -c '^1 A GET /x/2' "$BATS_TEST_TMPDIR/shim.log"
		[ "$how" = watch ] || assert_output 1
	done
}

# The same server, its later certificate valid too (the test CA's, another
# key: an L4 balancer over backends with keys of their own), and a program
# that never looks at its peer (SSL_VERIFY_PEER, no getter): its own
# handshake's verification is all it has alone, so the fresh handshake in
# place of the handed-out connection carries its request (the first
# version of the rule shut it: SSL_ERROR_SYSCALL where alone answered).
@test "a fresh handshake in place of a handed-out connection, another valid certificate, a program that never looks at its peer: answered as alone" {
	make -s -C "$ROOT" build/clients/tls_swap >&2
	_tls_cert "$TLS" server-b "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
	_swap_server close server-b
	run_plain BLIND=1 "$CLIENTS/tls_swap" "$SERVER_PORT" "$TLS/ca.pem" 3
	_swap_server close server-b
	run_shim BLIND=1 "$CLIENTS/tls_swap" "$SERVER_PORT" "$TLS/ca.pem" 3
	cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/shim.log"
	cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" "$BATS_TEST_TMPDIR/shim.log"
	assert_both_ok
	# the same but which connection served it (alone each its own)
	diff <(sed -E 's/conn [0-9]+ (cert .) req [0-9]+/\1/' "$BATS_TEST_TMPDIR/plain.out") \
		<(sed -E 's/conn [0-9]+ (cert .) req [0-9]+/\1/' "$BATS_TEST_TMPDIR/shim.out")
	assert_equal "$(grep -c '^  got: conn' "$BATS_TEST_TMPDIR/shim.out")" 3
	# request 2 went on connection 1 (handed out), then fresh
	run grep -c '^1 A GET /x/2' "$BATS_TEST_TMPDIR/shim.log"
	assert_output 1
}

# The same fresh handshake, the same certificate on every connection, and a
# program that reads RFC 5929's tls-unique right after SSL_connect and
# sends it in its request line (BINDING; BLIND: it never looks at its
# peer, so only the binding is in question).  tests/servers/tls_swap.py
# logs whether a request's binding is its connection's.  The library
# before replayed request 2 on the fresh connection with the handed-out
# one's binding ("2 B GET /x/2?tls-unique=... binding other"); now the
# fresh handshake is refused as for a peer looked at: request 2 meets a
# connection that died, and no request carries another connection's
# binding (docs/tls.md "Found by the HTTPS review at 4183573", item 2).
@test "a fresh handshake in place of a handed-out connection whose tls-unique the program read: nothing sent with another connection's binding" {
	make -s -C "$ROOT" build/clients/tls_swap >&2
	_swap_server close server
	run_plain BLIND=1 BINDING=1 "$CLIENTS/tls_swap" "$SERVER_PORT" "$TLS/ca.pem" 3
	cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/plain.log"
	_swap_server close server
	run_shim BLIND=1 BINDING=1 "$CLIENTS/tls_swap" "$SERVER_PORT" "$TLS/ca.pem" 3
	cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/shim.log"
	_stop_pid "$SWAP_PID"
	SWAP_PID=
	cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.out" "$BATS_TEST_TMPDIR/shim.log"
	assert_both_ok
	# alone: every request with its own connection's binding
	assert_equal "$(grep -c 'binding same$' "$BATS_TEST_TMPDIR/plain.log")" 3
	run grep -c 'binding other' "$BATS_TEST_TMPDIR/shim.log"
	assert_output 0
	# request 2 was handed connection 1 (the case), request 3 answered
	run grep -c '^1 A GET /x/2?tls-unique=[0-9a-f]* HTTP/1.1 binding same$' "$BATS_TEST_TMPDIR/shim.log"
	assert_output 1
	run grep -c '^  got: conn' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

# The same fresh handshake, the same certificate on every connection, and a
# program that keeps the pointers libssl's getters gave it after
# SSL_connect (tests/clients/tls_held.c): libssl keeps each valid until
# SSL_free.  The library freed what it had shown (the verified chain, the
# name its check matched, our copies, the engine's SSL behind ALPN and the
# server name) when the fresh connection took the handed one's place: the
# program read freed memory, garbage or SIGSEGV (a review of HTTPS).
# Freed memory is filled (MALLOC_PERTURB_, ASan's free_fill_byte) so that a
# read of it shows.
@test "a fresh handshake in place of a handed-out connection: the pointers the program took after SSL_connect still read what they read, as alone" {
	make -s -C "$ROOT" build/clients/tls_held >&2
	local fill="MALLOC_PERTURB_=165 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_free_fill_size=1048576:free_fill_byte=165"
	for mode in close rst; do
		_swap_server "$mode" server
		run_plain $fill "$CLIENTS/tls_held" "$SERVER_PORT" "$TLS/ca.pem" 3
		cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/plain.log"
		_swap_server "$mode" server
		run_shim $fill "$CLIENTS/tls_held" "$SERVER_PORT" "$TLS/ca.pem" 3
		cp "$BATS_TEST_TMPDIR/swap.log" "$BATS_TEST_TMPDIR/shim.log"
		_stop_pid "$SWAP_PID"
		SWAP_PID=
		echo "== $mode: plain $PLAIN_STATUS, shim $SHIM_STATUS"
		cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" "$BATS_TEST_TMPDIR/shim.log"
		assert_both_ok
		# the same but which connection served it (alone each its own)
		assert_equal "$(sed 's/got: conn.*/got: answer/' "$BATS_TEST_TMPDIR/shim.out")" \
			"$(sed 's/got: conn.*/got: answer/' "$BATS_TEST_TMPDIR/plain.out")"
		run grep -c 'got: conn' "$BATS_TEST_TMPDIR/shim.out"
		assert_output 3
		# request 2 was handed connection 1 and moved to a fresh one
		run grep -c '^1 A GET /x/2' "$BATS_TEST_TMPDIR/shim.log"
		assert_output 1
		run grep -c 'alpn: http/1.1' "$BATS_TEST_TMPDIR/shim.out"
		assert_output 3
	done
}
