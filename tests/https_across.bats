#!/usr/bin/env bats
# Whole TLS connections across processes, the integration
# (docs/tls-across.md "The integration"), under KEEPALIVE_TLS_ACROSS=1.
# Built so far: the capture of a followed connection's state at its
# handshake (our keylog callback chained before the program's, the TLS
# 1.2 master secret, the records counted both ways, KeyUpdates), its export
# message at park, and its import into the foreign engine over the socket;
# in the test build, the gate and the hand-out itself (KP_TEST_ACROSS_BROKER=2:
# the next process's SSL answered by the foreign engine).
# Each test compares a real client's output with and without the library
# against nginx (TLS 1.3 and 1.2); nginx's log ($connection,
# $connection_requests first) says which requests shared a connection.

load helpers

# the broker's answer waited for as long as a loaded machine needs: its
# default (100 ms, then a second without the broker) is a latency bound,
# not what these tests count (a CI run on a loaded machine saw TLS 1.2
# processes hand nothing across, each broker answer late)
export KEEPALIVE_BROKER_TIMEOUT_MS=10000

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
	PIDS=()
}
teardown() {
	servers_stop
	local p
	for p in "${PIDS[@]}"; do _stop_pid "$p"; done
}

# gnutls NAME PRIORITY: a GnuTLS server (tests/clients/gnutls_server.c,
# its environment GNUTLS_ENV), its port in PORT, its log NAME.log
gnutls() {
	local pf="$BATS_TEST_TMPDIR/$1.port"
	env ${GNUTLS_ENV:-} "$CLIENTS/gnutls_server" "$TLS/server.pem" "$TLS/server.key" "$2" "$pf" \
		"$BATS_TEST_TMPDIR/$1.log" 3>&- &
	PIDS+=($!)
	wait_until test -s "$pf"
	read -r PORT <"$pf"
}

N=4

# the wire's version number of 13 or 12
wire_version() { if [ "$1" = 13 ]; then echo 304; else echo 303; fi; }

# the test build whose parks prove the export (Makefile): each parked
# connection's state, imported into the foreign engine on its socket,
# makes a request of its own (GET /f?across-check) and reads its answer;
# KP_CHECK_LIB names another one (the code before's, to show a test
# fails there)
check_lib() {
	if [ -n "${KP_CHECK_LIB:-}" ]; then CHECK_LIB="$KP_CHECK_LIB"; return; fi
	flock "$ROOT/build/.make.lock" make -s -C "$ROOT" build/libkeepalive-acrosscheck.so >/dev/null
	CHECK_LIB="$ROOT/build/libkeepalive-acrosscheck.so"
}

# checked: the foreign engine's requests that were answered whole (200,
# then the server's close_notify: SSL_ERROR_ZERO_RETURN)
checked() { grep -c 'across check: version '"$1"', sent the request, read [0-9]* bytes, "HTTP/1.1 200", ended with SSL error 6' "$BATS_TEST_TMPDIR/shim.err" || true; }
# second: nginx's requests that came second on their connection
second() { awk '$2 == 2' "$NGINX_DIR/access.log" | wc -l; }

@test "python urllib, KEEPALIVE_TLS_ACROSS=1: each parked connection's state exports whole, its configuration record in it, same output, nothing else changes" {
	for v in 13 12; do
		use_tls $v
		run_both $N KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
			"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
		assert_both_ok
		assert_plain_output_is "$NGINX_DIR/www/f" $N
		assert_same_output
		grep 'exportable' "$BATS_TEST_TMPDIR/shim.err" || true
		assert_equal "TLS $v: not exportable $(grep -c 'not exportable' "$BATS_TEST_TMPDIR/shim.err" || true)" \
			"TLS $v: not exportable 0"
		[ "$(grep -c "TLS connection exportable: .* version 0$(wire_version $v)," "$BATS_TEST_TMPDIR/shim.err")" -ge 1 ]
		# the configuration record the receiving process compares is in
		# the message (docs/tls-across.md "The broker's TLS message")
		assert_equal "TLS $v: without a configuration record $(grep 'TLS connection exportable:' "$BATS_TEST_TMPDIR/shim.err" |
			grep -vc 'configuration record [1-9][0-9]* bytes' || true)" "TLS $v: without a configuration record 0"
	done
}

@test "python urllib, the export proved: the foreign engine, from the state our capture exported, makes a request on the parked connection and reads its answer (TLS 1.3 and 1.2)" {
	check_lib
	for v in 13 12; do
		use_tls $v
		PRELOAD="$CHECK_LIB" run_both $N KEEPALIVE_TLS_ACROSS=1 \
			"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
		cat "$BATS_TEST_TMPDIR/shim.err"
		nginx_log
		assert_both_ok
		assert_plain_output_is "$NGINX_DIR/www/f" $N
		assert_same_output
		# the first connection's close is not rewritten (it teaches how
		# the server ends, docs/tls.md "Ragged closes"): N - 1 parked,
		# each spent by its check
		assert_equal "TLS $v: checked $(checked "$(wire_version $v)")" "TLS $v: checked $((N - 1))"
		assert_equal "TLS $v: second requests $(second)" "TLS $v: second requests $((N - 1))"
	done
}

@test "python urllib, the export proved in the next process: the state goes to the broker beside its socket (TPUT), and the next process's SSL_connect takes it under the name its own SSL makes (TGET) and makes its request (TLS 1.3 and 1.2)" {
	check_lib
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -m 0700 "$xdg"
	for v in 13 12; do
		use_tls $v
		# three processes of two requests.  The first process's first
		# connection teaches how the server ends (docs/tls.md "Ragged
		# closes"; the broker tells the next ones); every other is parked,
		# its state into the broker (5), and each SSL_connect after the
		# first process's takes the one before it (4), resumed handshakes
		# among them (their peer chain the resumed ticket's)
		local script="for i in 1 2 3; do $PYTHON $PRODUCT_CLIENTS/urllib_get.py 127.0.0.1 $SERVER_PORT /f 2 $TLS/ca.pem || exit 1; done"
		nginx_reset
		timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
		nginx_reset
		timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
			KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=1 "$ROOT/scripts/keepalive" \
			sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
		cat "$out/shim.err"
		nginx_log
		run diff "$out/plain.out" "$out/shim.out"
		assert_success
		assert_equal "TLS $v: given $(grep -c 'across check: the state given to the broker' "$out/shim.err")" "TLS $v: given 5"
		assert_equal "TLS $v: taken $(grep -c 'across check: a state from the broker' "$out/shim.err")" "TLS $v: taken 4"
		# the gate before a hand-out (docs/tls-across.md "The gate"):
		# Python sets no SSL_OP_NO_RENEGOTIATION, so its TLS 1.2 states
		# are refused (a HelloRequest would make its own SSL renegotiate);
		# TLS 1.3 passes: the same configuration, its own verification
		# X509_V_OK, the same crypto state
		if [ "$v" = 12 ]; then
			assert_equal "refused $(grep -c 'across check: refused: TLS 1.2 without SSL_OP_NO_RENEGOTIATION' "$out/shim.err")" \
				"refused 4"
			assert_equal "TLS $v: checked $(checked "$(wire_version $v)")" "TLS $v: checked 0"
			continue
		fi
		assert_equal "refused $(grep -c 'across check: refused' "$out/shim.err" || true)" "refused 0"
		# TLS 1.3: our KeyUpdate went before each state left (the checks
		# below pass only under the keys it moved on)
		if [ "$v" = 13 ]; then
			assert_equal "KeyUpdates $(grep -c 'the state given to the broker (.*, our KeyUpdate sent before)' "$out/shim.err")" \
				"KeyUpdates 5"
		fi
		# nginx took our records, we opened its answer, in another process
		# (or the same one's next SSL_connect: through the broker too)
		assert_equal "TLS $v: checked $(checked "$(wire_version $v)")" "TLS $v: checked 4"
		assert_equal "TLS $v: second requests $(second)" "TLS $v: second requests 4"
		# the state's bytes are never logged: the keys' lines nowhere
		! grep -qi 'traffic_secret' "$out/shim.err"
	done
}

@test "python urllib, the state through the broker, the broker killed (SIGKILL) mid-loop: every process still succeeds, same output (TLS 1.3 and 1.2)" {
	check_lib
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -m 0700 "$xdg"
	for v in 13 12; do
		use_tls $v
		local get="$PYTHON $PRODUCT_CLIENTS/urllib_get.py 127.0.0.1 $SERVER_PORT /f 2 $TLS/ca.pem"
		# after the second process the wrapper's broker is killed: the
		# third's TGET and its TPUTs meet no broker
		local script="for i in 1 2 3 4; do $get || exit 1; [ -n \"\${KEEPALIVE_BROKER_PID:-}\" ] && [ \$i = 2 ] && kill -9 \$KEEPALIVE_BROKER_PID; done; exit 0"
		nginx_reset
		timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
		nginx_reset
		timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
			KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=1 "$ROOT/scripts/keepalive" \
			sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
		cat "$out/shim.err"
		nginx_log
		run diff "$out/plain.out" "$out/shim.out"
		assert_success
		assert_equal "TLS $v: requests $(nginx_requests)" "TLS $v: requests $((8 + $(checked "$(wire_version $v)")))"
		# before the kill: as in the loop above (2 taken, both answered;
		# TLS 1.2: refused by the gate, Python sets no
		# SSL_OP_NO_RENEGOTIATION)
		if [ "$v" = 12 ]; then
			assert_equal "TLS $v: checked $(checked "$(wire_version $v)")" "TLS $v: checked 0"
		else
			[ "$(checked "$(wire_version $v)")" -ge 2 ] || fail "checked $(checked "$(wire_version $v)")"
		fi
	done
}

@test "python urllib, TLS 1.3: the counts go on through in-process hand-outs (the export proved at a connection's third park, after two hand-outs)" {
	check_lib
	use_tls 13
	PRELOAD="$CHECK_LIB" run_both 6 KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_AFTER=2 \
		"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f 6 "$TLS/ca.pem"
	cat "$BATS_TEST_TMPDIR/shim.err"
	nginx_log
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 6
	assert_same_output
	# the taught connection; then one that serves three requests of the
	# program's and the check's fourth; then a fresh one for the last two
	assert_equal "checked $(checked 304)" "checked 1"
	assert_equal "fourth requests $(awk '$2 == 4' "$NGINX_DIR/access.log" | wc -l)" "fourth requests 1"
}

@test "a program's own keylog callback (Python's SSLKEYLOGFILE) under KEEPALIVE_TLS_ACROSS=1: it sees exactly its lines, same output" {
	use_tls 13
	run_plain env SSLKEYLOGFILE="$BATS_TEST_TMPDIR/plain.keys" \
		"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
	run_shim KEEPALIVE_TLS_ACROSS=1 SSLKEYLOGFILE="$BATS_TEST_TMPDIR/shim.keys" \
		"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
	assert_both_ok
	assert_same_output
	# the labels, in order (the secrets differ from run to run)
	run diff <(awk '{ print $1 }' "$BATS_TEST_TMPDIR/plain.keys") <(awk '{ print $1 }' "$BATS_TEST_TMPDIR/shim.keys")
	assert_success
	[ "$(grep -c '^CLIENT_TRAFFIC_SECRET_0 ' "$BATS_TEST_TMPDIR/shim.keys")" -eq $N ]
}

@test "a server sending KeyUpdates at awkward moments (one asking ours before each answer, one between an answer's two records) and tickets: the capture follows them, the foreign engine's request on each parked connection answered, same output" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	check_lib
	GNUTLS_ENV="KP_GNUTLS_KEYUPDATE=1 KP_GNUTLS_TICKET=1" gnutls ku NORMAL
	SERVER_PORT=$PORT
	run_plain "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
	: >"$BATS_TEST_TMPDIR/ku.log"
	PRELOAD="$CHECK_LIB" run_shim KEEPALIVE_TLS_ACROSS=1 \
		"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
	cat "$BATS_TEST_TMPDIR/shim.err" "$BATS_TEST_TMPDIR/ku.log"
	assert_both_ok
	assert_same_output
	assert_equal "checked $(checked 304)" "checked $((N - 1))"
	# each check's request came second on a connection of the program's
	assert_equal "$(awk '$3 == "/f?across-check" { print $1 }' "$BATS_TEST_TMPDIR/ku.log" | sort -u | wc -l)" "$((N - 1))"
	assert_equal "$(awk '$3 == "/f" { n++ } END { print n }' "$BATS_TEST_TMPDIR/ku.log")" "$N"
}

# gate_loop PORT CASE...: under the test build's broker check, a loop of
# one-request processes (tests/clients/tls_once.py), verified, verified,
# the case, verified, without and with the library: the same output.  The
# first reads to the server's end (--drain), to teach as teacher's does
gate_loop() {
	local port=$1 xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	shift
	mkdir -p -m 0700 "$xdg"
	local ok="$PYTHON $ROOT/tests/clients/tls_once.py 127.0.0.1 $port /f --ca $TLS/ca.pem --show ${GATE_OK_ARGS:-}"
	local script="$ok --drain; $ok; ${GATE_CASE_ENV:+env $GATE_CASE_ENV} $PYTHON $ROOT/tests/clients/tls_once.py 127.0.0.1 $port /f $*; $ok"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$port" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER="${GATE_MODE:-1}" "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	cat "$out/shim.err"
	nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
}
refused() { grep -c "across check: refused: $1" "$BATS_TEST_TMPDIR/shim.err" || true; }

@test "the gate before a hand-out: a process with another CA file is refused the state (its own verification fails on the chain), its own handshake fails as alone (TLS 1.3)" {
	check_lib
	use_tls 13
	gate_loop "$SERVER_PORT" --ca "$TLS/other-ca.pem" --show
	grep -q '^error=SSLCertVerificationError' "$BATS_TEST_TMPDIR/shim.out"
	# the second process's state reached the third, which refused it
	assert_equal "refused $(refused "the program's verification fails on it")" "refused 1"
	assert_equal "checked $(checked 304)" "checked 0"
}

@test "the gate before a hand-out: a process with CERT_NONE is refused the state (its verification result is not X509_V_OK), makes its own handshake; the next verified process takes the state its connection left (TLS 1.3)" {
	check_lib
	use_tls 13
	gate_loop "$SERVER_PORT" --noverify --show
	assert_equal "refused $(refused "the program's verification result is not X509_V_OK")" "refused 1"
	assert_equal "checked $(checked 304)" "checked 1"
}

@test "the gate before a hand-out: TLS 1.2 is handed only to a program with SSL_OP_NO_RENEGOTIATION: refused to the one without, taken by the ones with" {
	check_lib
	use_tls 12
	GATE_OK_ARGS=--norenego gate_loop "$SERVER_PORT" --ca "$TLS/ca.pem" --show
	assert_equal "refused $(refused 'TLS 1.2 without SSL_OP_NO_RENEGOTIATION')" "refused 1"
	assert_equal "refused $(grep -c 'across check: refused' "$BATS_TEST_TMPDIR/shim.err" || true)" "refused 1"
	assert_equal "checked $(checked 303)" "checked 1"
}

@test "the gate before a hand-out: a process under another OpenSSL configuration (OPENSSL_CONF: the same file's copy) is refused the state, makes its own handshake (TLS 1.3)" {
	check_lib
	use_tls 13
	cp "$(openssl version -d | sed -E 's/^OPENSSLDIR: "(.*)"$/\1/')/openssl.cnf" "$BATS_TEST_TMPDIR/openssl.cnf"
	GATE_CASE_ENV="OPENSSL_CONF=$BATS_TEST_TMPDIR/openssl.cnf" gate_loop "$SERVER_PORT" --ca "$TLS/ca.pem" --show
	# the second process's state refused by the third; the third's own
	# connection (made under that configuration) refused by the fourth
	assert_equal "refused $(refused 'another OpenSSL configuration')" "refused 2"
	assert_equal "refused $(grep -c 'across check: refused' "$BATS_TEST_TMPDIR/shim.err" || true)" "refused 2"
	assert_equal "checked $(checked 304)" "checked 0"
}

# handed: the processes the test build handed a connection from another
# process (docs/tls-across.md "The hand-out in another process")
handed() { grep -c 'a TLS connection from another process handed to the program' "$BATS_TEST_TMPDIR/shim.err" || true; }
# teacher PORT: the command of a loop's first process, which teaches how the
# server ends for urllib's requests (not parked): tls_once.py reading to the
# server's end (--drain) with urllib's User-Agent (--ua-urllib; learnt per
# User-Agent).  urllib's own first process learns only by what it reads at
# its close and exit, and a close_notify late under load taught nothing
# (docs/tls.md "Ragged closes"): the second process's connection was then
# not parked, and a loop's counts were off by one
teacher() { echo "$PYTHON $ROOT/tests/clients/tls_once.py 127.0.0.1 $1 /f --ca $TLS/ca.pem --drain --ua-urllib"; }

@test "the hand-out in another process (test build, KP_TEST_ACROSS_BROKER=2): a loop of python urllib processes, one request each, runs on one server connection after the first process's; the same output (TLS 1.3)" {
	check_lib
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -m 0700 "$xdg"
	use_tls 13
	# the first process's connection teaches how the server ends (not
	# parked: teacher); the second's is parked and goes to the broker;
	# each later process takes the one before it at its SSL_connect, is
	# answered by the foreign engine, and passes it on at its close
	local script="$(teacher "$SERVER_PORT") || exit 1; for i in 2 3 4 5 6; do $PYTHON $PRODUCT_CLIENTS/urllib_get.py 127.0.0.1 $SERVER_PORT /f 1 $TLS/ca.pem || exit 1; done"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=2 "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	cat "$out/shim.err"
	nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	assert_equal "handed $(handed)" "handed 4"
	assert_equal "passed on $(grep -c 'across: the connection passed on to the broker' "$out/shim.err")" "passed on 4"
	# six requests on two server connections: the first process's own,
	# then the second's, carried through the four after it
	assert_equal "requests $(nginx_requests)" "requests 6"
	assert_equal "connections $(nginx_conns)" "connections 2"
}

across_refused() { grep -c "across: a connection from the broker not taken: $1" "$BATS_TEST_TMPDIR/shim.err" || true; }

@test "the hand-out in another process: what the program reads of its SSL (version, cipher, peer certificate, session_reused, ALPN, compression, pending) is what its own handshake shows (TLS 1.3)" {
	check_lib
	use_tls 13
	GATE_MODE=2 GATE_OK_ARGS=--getters gate_loop "$SERVER_PORT" --ca "$TLS/ca.pem" --show --getters
	grep '^cipher=' "$BATS_TEST_TMPDIR/shim.out"
	# the second process's connection, then carried through the third and fourth
	assert_equal "handed $(handed)" "handed 2"
	assert_equal "connections $(nginx_conns)" "connections 2"
}

@test "the hand-out in another process: TLS 1.2 is handed to a program with SSL_OP_NO_RENEGOTIATION (the loop on two server connections), same output and getters" {
	check_lib
	use_tls 12
	GATE_MODE=2 GATE_OK_ARGS="--norenego --getters" gate_loop "$SERVER_PORT" --ca "$TLS/ca.pem" --norenego --show --getters
	assert_equal "handed $(handed)" "handed 2"
	assert_equal "connections $(nginx_conns)" "connections 2"
}

@test "the hand-out in another process, trust: a process with another CA file is not handed the connection (its own handshake fails as alone); one with CERT_NONE is not either (its own handshake); the verified ones after are (TLS 1.3)" {
	check_lib
	use_tls 13
	GATE_MODE=2 gate_loop "$SERVER_PORT" --ca "$TLS/other-ca.pem" --show
	grep -q '^error=SSLCertVerificationError' "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "refused $(across_refused "the program's verification fails on it")" "refused 1"
	# the refused state's socket is closed: the fourth process finds none
	assert_equal "handed $(handed)" "handed 0"
	GATE_MODE=2 gate_loop "$SERVER_PORT" --noverify --show
	assert_equal "refused $(across_refused "the program's verification result is not X509_V_OK")" "refused 1"
	# the fourth takes the connection CERT_NONE's process made and passed on
	assert_equal "handed $(handed)" "handed 1"
}

@test "the hand-out in another process, the broker killed (SIGKILL) mid-loop: every process still succeeds, same output (TLS 1.3)" {
	check_lib
	use_tls 13
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -m 0700 "$xdg"
	local get="$PYTHON $PRODUCT_CLIENTS/urllib_get.py 127.0.0.1 $SERVER_PORT /f 1 $TLS/ca.pem"
	local script="$(teacher "$SERVER_PORT") || exit 1; for i in 2 3 4 5; do $get || exit 1; [ -n \"\${KEEPALIVE_BROKER_PID:-}\" ] && [ \$i = 3 ] && kill -9 \$KEEPALIVE_BROKER_PID; done; exit 0"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=2 "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	cat "$out/shim.err"
	nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	assert_equal "requests $(nginx_requests)" "requests 5"
	# the third took the second's; after the kill no process is handed one
	assert_equal "handed $(handed)" "handed 1"
}

@test "the hand-out in another process: a server that closed the connection parked in the broker (nginx reloaded): the next process gets its answer on its own connection, as alone (TLS 1.3)" {
	check_lib
	use_tls 13
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -m 0700 "$xdg"
	local get="$PYTHON $PRODUCT_CLIENTS/urllib_get.py 127.0.0.1 $SERVER_PORT /f 1 $TLS/ca.pem"
	# after the third process nginx is reloaded: its old workers close the
	# idle connections, the one in the broker among them
	local reload="kill -HUP $NGINX_PID"
	# until no connection to the server is established any more (the
	# broker's, under the library, closed by the old worker: the broker
	# then drops it), an event, not a delay
	local closed="while ss -Htn state established '( dport = :$SERVER_PORT )' | grep -q .; do sleep 0.05; done"
	local script="$(teacher "$SERVER_PORT") || exit 1; for i in 2 3 4 5; do $get || exit 1; if [ \$i = 3 ]; then $reload || exit 2; $closed; fi; done; exit 0"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=2 "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	cat "$out/shim.err"
	nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	assert_equal "requests $(nginx_requests)" "requests 5"
	# the third took the second's; the fourth found it closed (or none)
	# and made its own; the fifth takes the fourth's
	assert_equal "handed $(handed)" "handed 2"
}

@test "the hand-out in another process: a server that ends the handed connection under the process's request (its second on that connection, unanswered): the request is replayed on the program's own fresh handshake, same output (TLS 1.3)" {
	check_lib
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR" log="$BATS_TEST_TMPDIR/own.log"
	mkdir -m 0700 "$xdg"
	# tests/servers/tls_close.py: every connection's second request is read
	# and not answered (close_notify, then the FIN)
	: >"$log"
	TLS_CLOSE_CUT=2 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$log" notify 3>&- &
	PIDS+=($!)
	wait_until test -s "$BATS_TEST_TMPDIR/port"
	local port
	read -r port <"$BATS_TEST_TMPDIR/port"
	local script="$(teacher "$port") || exit 1; for i in 2 3 4 5; do $PYTHON $PRODUCT_CLIENTS/urllib_get.py 127.0.0.1 $port /f 1 $TLS/ca.pem || exit 1; done"
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	: >"$log"
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$port" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=2 KEEPALIVE_LOG=debug "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	grep -E 'across|replay|fresh' "$out/shim.err" || true
	cat "$log"
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	# the third, fourth and fifth processes are each handed the one before
	# theirs, whose server ends it under their request: each replayed on
	# its own fresh handshake, answered once
	assert_equal "handed $(handed)" "handed 3"
	assert_equal "cut $(grep -c ' cut GET' "$log")" "cut 3"
	assert_equal "answered $(grep -vc ' cut ' "$log")" "answered 5"
}

@test "the hand-out in another process: the getters of a full handshake's messages (tests/clients/tls_getters.c: peer chain, CA names, signature algorithms, certificate types, signatures, group, extended master secret, renegotiation_info, the peer's key-exchange key) as the program's own handshake shows them, TLS 1.3 and 1.2; the own key-exchange key excepted (not carried)" {
	check_lib
	make -s -C "$ROOT" build/clients/tls_getters >&2
	local out="$BATS_TEST_TMPDIR"
	for v in 13 12; do
		# (renegotiation refused: a TLS 1.2 connection may be handed)
		getters_loop "$v" "" "" "" ""
		# the peer's key-exchange key, the group and RI support come
		# from the state; the own ephemeral key (SSL_get_tmp_key), read
		# after the first read or write, is not in it (a private key:
		# docs/tls-across.md "What keeps it in the test build")
		keyless() { sed -E 's/ own key [^ ]* / /' "$1"; }
		run diff <(keyless "$out/plain.out") <(keyless "$out/shim.out")
		assert_success
		grep -q ' ri 1$' "$out/plain.out" || [ "$v" = 13 ]
		# (its first connection ends with close_notify both ways: the
		# server's end is known at once, and that connection is the one
		# carried through the loop)
		assert_equal "TLS $v: handed $(handed)" "TLS $v: handed 3"
		assert_equal "TLS $v: connections $(nginx_conns)" "TLS $v: connections 1"
	done
}

# getters_loop V FLAGS1 FLAGS2 FLAGS3 FLAGS4: four tls_getters processes
# (one request each, process i with FLAGSi) against nginx's TLS V,
# without the library then in the test build with the hand-out
# (CHECK_LIB, KP_TEST_ACROSS_BROKER=2); outputs in plain.out, shim.out
getters_loop() {
	local v="$1" xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR" script=: f
	shift
	mkdir -p -m 0700 "$xdg"
	use_tls "$v"
	for f in "$@"; do
		script="$script && $ROOT/build/clients/tls_getters $SERVER_PORT $TLS/ca.pem 1 $f"
	done
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	# (nginx logs a request after its response: the last one's line may
	# come after the client's exit, and would count in the run after)
	wait_until test "$(nginx_requests)" -ge "$#"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=2 KEEPALIVE_LOG=debug \
		"$ROOT/scripts/keepalive" sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	grep -E 'handed|passed on|after the hand-out' "$out/shim.err" || true
	nginx_log
}

remade() { grep -c "a call the foreign engine cannot answer after the hand-out: its own handshake on a fresh connection" "$BATS_TEST_TMPDIR/shim.err" || true; }

@test "the hand-out in another process: the key exchange's keys read before the first read or write (SSL_get_peer_tmp_key, SSL_get_tmp_key) are the program's own handshake's, made on a fresh connection first: the same output, keys included (TLS 1.3 and 1.2)" {
	check_lib
	make -s -C "$ROOT" build/clients/tls_getters >&2
	for v in 13 12; do
		getters_loop "$v" early early early early
		run diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
		assert_success
		# the second to fourth processes are each handed the connection
		# the one before passed on; the first key getter makes its own
		# handshake on a fresh connection, which it then passes on: four
		# server connections
		assert_equal "TLS $v: handed $(handed)" "TLS $v: handed 3"
		assert_equal "TLS $v: remade $(remade)" "TLS $v: remade 3"
		assert_equal "TLS $v: connections $(nginx_conns)" "TLS $v: connections 4"
	done
}

@test "the hand-out in another process: SSL_key_update (TLS 1.3) and SSL_renegotiate (TLS 1.2) before the first read or write act on the program's own handshake, made on a fresh connection first: the same output" {
	check_lib
	make -s -C "$ROOT" build/clients/tls_getters >&2
	for v in 13 12; do
		local act=renego
		[ "$v" = 13 ] && act=keyupdate
		# (a connection that took the call is never parked: the
		# processes between take none, make their own and pass it on)
		getters_loop "$v" "" "$act" "" "$act"
		run diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
		assert_success
		assert_equal "TLS $v: handed $(handed)" "TLS $v: handed 2"
		assert_equal "TLS $v: remade $(remade)" "TLS $v: remade 2"
		assert_equal "TLS $v: connections $(nginx_conns)" "TLS $v: connections 4"
	done
}

@test "the hand-out in another process: SSL_renegotiate and SSL_verify_client_post_handshake after the first read or write are refused as libssl refuses them (its reason from the state's version and the program's options), the connection passed on (TLS 1.3 and 1.2)" {
	check_lib
	make -s -C "$ROOT" build/clients/tls_getters >&2
	for v in 13 12; do
		# (the first process's own SSL, asked, is never parked after:
		# the in-process rule for a call that may start a handshake)
		getters_loop "$v" "" late late late
		# (the own key-exchange key after the first read or write: not
		# in the state, left)
		keyless() { sed -E 's/ own key [^ ]* / /' "$1"; }
		run diff <(keyless "$BATS_TEST_TMPDIR/plain.out") <(keyless "$BATS_TEST_TMPDIR/shim.out")
		assert_success
		grep -q 'late renegotiate 0 .*post-handshake auth 0' "$BATS_TEST_TMPDIR/plain.out"
		# refused with nothing changed: each connection passed on
		assert_equal "TLS $v: handed $(handed)" "TLS $v: handed 3"
		assert_equal "TLS $v: connections $(nginx_conns)" "TLS $v: connections 1"
	done
}

# A seccomp filter over a connection the foreign engine answers (docs/owner.md
# "A sandbox"): after the install its writes are the program's own SSL's
# call, write(2) (a filter that allows read and write only), not our
# send(MSG_NOSIGNAL).  Three tests/clients/tls_sandbox.c processes, one
# request each that asks to close: the first teaches how the server ends,
# the second's connection is parked and passed to the broker, the third
# is handed it at its SSL_connect and sandboxes itself at once.
# across_sandbox MODE [direct-end]: the same output as alone, one
# connection handed (direct-end: its request and answer before the
# install, the EOF we owe read after it)
across_sandbox() {
	check_lib
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -p -m 0700 "$xdg"
	use_tls 13
	local c="$CLIENTS/tls_sandbox $SERVER_PORT $TLS/ca.pem"
	local script="$c none direct && $c none direct && $c $1 ${2:-direct}"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	wait_until test "$(nginx_requests)" -ge 3
	nginx_reset
	local status=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$CHECK_LIB" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KP_TEST_ACROSS_BROKER=2 KEEPALIVE_LOG=debug \
		"$ROOT/scripts/keepalive" sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null || status=$?
	grep -E 'handed|passed on|seccomp' "$out/shim.err" || true
	cat "$out/shim.out"
	assert_equal "status $status" "status 0"
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	assert_equal "handed $(handed)" "handed 1"
	run grep -c "B: end read=0 err=6" "$out/shim.out"
	assert_output 3
}

@test "the hand-out in another process, then a killing seccomp filter (read and write allowed): the foreign engine writes with write(2), as alone (TLS 1.3)" {
	across_sandbox kill
}

@test "the hand-out in another process, then SECCOMP_MODE_STRICT: the foreign engine writes with write(2), as alone (TLS 1.3)" {
	across_sandbox strict
}

@test "the hand-out in another process, an answer read with its EOF owed, then SECCOMP_MODE_STRICT: the foreign engine's end as alone (TLS 1.3)" {
	across_sandbox strict direct-end
}
