#!/usr/bin/env bats
# TLS sessions across processes (docs/tls-across.md): a loop of one HTTPS
# process per request under `keepalive` (a broker for its lifetime) resumes
# in each process a session another process made, under exactly the rule
# a session of the same process follows (docs/tls.md "Sessions"): the
# same recorded configuration, the program's own verification passing on
# the session's peer chain.  Every loop runs without the library too; the
# outputs must be the same, nginx's $ssl_session_reused (7th field of its
# log) says which handshakes resumed.

load helpers

export KEEPALIVE_BROKER_TIMEOUT_MS=10000
CLIENT_TIMEOUT=$((CLIENT_TIMEOUT > 60 ? CLIENT_TIMEOUT : 60))

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

WRAP="$ROOT/scripts/keepalive"
ONCE="$ROOT/tests/clients/tls_once.py"

# loop_both SCRIPT: the shell script SCRIPT (one process per request)
# without the library, then under `keepalive`; outputs in plain.out and
# shim.out, nginx's log of each run in plain.log and shim.log, the summed
# stats line in SHIM_STATS.
loop_both() {
	local script=$1
	nginx_reset
	PLAIN_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" \
		>"$BATS_TEST_TMPDIR/plain.out" 2>"$BATS_TEST_TMPDIR/plain.err" </dev/null || PLAIN_STATUS=$?
	cp "$NGINX_DIR/access.log" "$BATS_TEST_TMPDIR/plain.log"
	nginx_reset
	SHIM_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$NGINX_TLS13_PORT,$NGINX_TLS12_PORT" KEEPALIVE_STATS=1 "$WRAP" sh -c "$script" \
		>"$BATS_TEST_TMPDIR/shim.out" 2>"$BATS_TEST_TMPDIR/shim.err" </dev/null || SHIM_STATUS=$?
	cp "$NGINX_DIR/access.log" "$BATS_TEST_TMPDIR/shim.log"
	SHIM_STATS="$(grep '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" || true)"
	echo "plain: status=$PLAIN_STATUS; shim: status=$SHIM_STATUS; $SHIM_STATS"
	echo "--- plain log"; cat "$BATS_TEST_TMPDIR/plain.log"
	echo "--- shim log"; cat "$BATS_TEST_TMPDIR/shim.log"
	echo "--- shim stderr"; grep -v '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" | head -n 20
	echo "--- diff"; diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" | head -n 40
}

# resumed LOG: the handshakes nginx resumed ($ssl_session_reused "r")
resumed() { awk '$7 == "r"' "$BATS_TEST_TMPDIR/$1.log" | wc -l; }
stat_sum() {
	sed -nE "s/.*[ :]$1=([0-9]+).*/\\1/p" <<<"$SHIM_STATS" | awk '{ s += $1 } END { print s + 0 }'
}
assert_same_loop() {
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
	run diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
	assert_success
}

# what nginx saw of each request but which connection and whether it
# resumed: method, path, status, protocol, cipher, client DN
server_view() { awk '{ print $3, $4, $5, $6, $9, $10 }' "$BATS_TEST_TMPDIR/$1.log"; }
assert_same_server_view() {
	run diff <(server_view plain) <(server_view shim)
	assert_success
}

N=10

@test "python urllib, one process per request, TLS 1.3 and 1.2: sessions resumed across processes through the broker, same output" {
	for port in "$NGINX_TLS13_PORT" "$NGINX_TLS12_PORT"; do
		loop_both "for i in \$(seq $N); do $PYTHON $ONCE 127.0.0.1 $port /f --ca $TLS/ca.pem --show; done"
		assert_same_loop
		assert_same_server_view
		assert_equal "plain resumed $(resumed plain)" "plain resumed 0"
		# the first process makes the session, every later one resumes
		assert_equal "shim resumed $(resumed shim)" "shim resumed $((N - 1))"
		assert_equal "resumed across $(stat_sum tls_resumed_across)" "resumed across $((N - 1))"
		assert_equal "not shared $(stat_sum tls_not_shared)" "not shared $N"
		# the program reads its own full handshake: reused False
		run grep -c 'reused=False' "$BATS_TEST_TMPDIR/shim.out"
		assert_output "$N"
	done
}

# Trust in the same loop: after verified processes, each of these makes
# the handshake (and sees the outcome) its own settings make, as without
# the library, and the verified process after it still resumes.  Each
# fails when the rule is bypassed (docs/tls-across.md, "Tests").
# trust_case OUTCOME RESUMED ARGS...: ok; ok; tls_once ARGS; ok
trust_case() {
	local outcome=$1 want=$2
	shift 2
	local ok="$PYTHON $ONCE 127.0.0.1 $NGINX_TLS13_PORT /f --ca $TLS/ca.pem --show"
	loop_both "$ok; $ok; $PYTHON $ONCE 127.0.0.1 $*; $ok"
	assert_same_loop
	# the server saw the same: requests, protocols, ciphers, the client
	# certificate each carried
	assert_same_server_view
	run grep -c '^error=' "$BATS_TEST_TMPDIR/shim.out"
	assert_output "$outcome"
	assert_equal "plain resumed $(resumed plain)" "plain resumed 0"
	assert_equal "shim resumed $(resumed shim)" "shim resumed $want"
}

@test "trust after verified processes: no CA file (the system's): fails as without the library" {
	trust_case 1 2 "$NGINX_TLS13_PORT" /f --system --show
}

@test "trust after verified processes: another CA: fails as without the library" {
	trust_case 1 2 "$NGINX_TLS13_PORT" /f --ca "$TLS/other-ca.pem" --show
}

@test "trust after verified processes: another name (SNI and host check): wrong.example fails, localhost makes its own handshake" {
	trust_case 1 2 "$NGINX_TLS13_PORT" /f --ca "$TLS/ca.pem" --name wrong.example --show
	trust_case 0 2 "$NGINX_TLS13_PORT" /f --ca "$TLS/ca.pem" --name localhost --show
}

@test "trust after verified processes: no verification (CERT_NONE): its own full handshake" {
	trust_case 0 2 "$NGINX_TLS13_PORT" /f --noverify --show
}

@test "trust after verified processes: a client certificate: its own handshake, the server sees the certificate" {
	trust_case 0 2 "$NGINX_TLS13_PORT" /f --ca "$TLS/ca.pem" --cert "$TLS/client-a" --show
}

@test "trust after verified processes: TLS 1.2 at most, after TLS 1.3 sessions: its own TLS 1.2 handshake" {
	trust_case 0 2 "$NGINX_TLS12_PORT" /f --ca "$TLS/ca.pem" --max 1.2 --show
	# (the TLS 1.3 server refuses it, with the library as without)
	trust_case 1 2 "$NGINX_TLS13_PORT" /f --ca "$TLS/ca.pem" --max 1.2 --show
}

@test "keepalive --compare on a loop of python HTTPS processes: the TLS count under the connections per destination" {
	command -v strace >/dev/null || skip "no strace: no census"
	local loop="for i in \$(seq 5); do $PYTHON $ONCE 127.0.0.1 $NGINX_TLS13_PORT /f --ca $TLS/ca.pem; done"
	run timeout 300 env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" --compare \
		--ports "$NGINX_TLS13_PORT" -r 1 --same-output sh -c "$loop"
	assert_success
	assert_line --regexp "^  127\.0\.0\.1:$NGINX_TLS13_PORT +5 +5\$"
	assert_line --regexp '^  of them TLS, not shared +- +5 '
	assert_line --regexp '^  TLS sessions resumed +- +4 '
}

# curl keeps sessions (a new-session callback on every context): not
# followed (docs/tls.md "Callbacks that watch"), in one process or across
# (docs/tls-across.md "What it does for whom"): the loop and its trust
# cases are curl's own handshakes, identical, nothing resumed.
@test "curl loop, TLS 1.3 and 1.2, and its trust cases: identical, not served (its session cache declines)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	local u13="https://127.0.0.1:$NGINX_TLS13_PORT/f" u12="https://127.0.0.1:$NGINX_TLS12_PORT/f"
	local ok="$CURL -sS --cacert $TLS/ca.pem $u13"
	local pin=sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
	loop_both "$ok; $ok; $CURL -sS $u13; $ok; $CURL -sS --cacert $TLS/other-ca.pem $u13;
		$ok; $CURL -sS --cacert $TLS/ca.pem --pinnedpubkey $pin $u13;
		$ok; $CURL -sS --cacert $TLS/ca.pem --resolve localhost:$NGINX_TLS13_PORT:127.0.0.1 https://localhost:$NGINX_TLS13_PORT/f;
		$ok; $CURL -sS -k $u13; $ok; $CURL -sS --cacert $TLS/ca.pem --tls-max 1.2 $u12;
		$ok; $CURL -sS --cacert $TLS/ca.pem --cert $TLS/client-a.pem --key $TLS/client-a.key $u13;
		$CURL -sS --cacert $TLS/ca.pem --tls-max 1.2 $u12; $CURL -sS --cacert $TLS/ca.pem --tls-max 1.2 $u12; true"
	assert_same_loop
	assert_same_server_view
	run diff "$BATS_TEST_TMPDIR/plain.err" <(grep -v '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err")
	assert_success
	assert_equal "shim resumed $(resumed shim)" "shim resumed 0"
	assert_equal "resumed across $(stat_sum tls_resumed_across)" "resumed across 0"
}

# What a full handshake shows (the peer's chain, CA names, signature
# algorithms, certificate types, the client's own signature) after a
# session resumed from another process, and on the later hand-outs of the
# connection that resumption made: a session from the broker carries no
# peer chain (d2i_SSL_SESSION keeps none) and a resumption shows none of
# the rest, where the program's own full handshake shows them all (the
# HTTPS review of 2026-12-05, the third; docs/tls.md "What a full
# handshake shows").  tests/clients/tls_getters.c: one process of one
# request, then one of three.
@test "getters a full handshake answers, after a session resumed across processes and on its connection's hand-outs: as the program's own handshake, TLS 1.3 and 1.2" {
	make -s -C "$ROOT" build/clients/tls_getters >&2
	local g="$ROOT/build/clients/tls_getters" cert="cert=$TLS/client-a.pem:$TLS/client-a.key"
	for port in "$NGINX_TLS13_PORT" "$NGINX_TLS12_PORT"; do
		for c in "" "$cert"; do
			loop_both "$g $port $TLS/ca.pem 1 $c; $g $port $TLS/ca.pem 3 $c"
			assert_same_loop
			assert_equal "resumed across $(stat_sum tls_resumed_across)" "resumed across 1"
			assert_equal "handed out $(stat_sum tls_reused)" "handed out 2"
			run grep -c '^  peer chain 1 \[/CN=localhost\]$' "$BATS_TEST_TMPDIR/shim.out"
			assert_output 4
		done
	done
}

@test "a process that changed its session before its SSL_free (master key, id context, hostname, ALPN, timeout) gives it to no other process: the next makes a full handshake, as without the library, and the one after resumes that one's" {
	local after="$ROOT/build/clients/tls_after"
	for port in "$NGINX_TLS13_PORT" "$NGINX_TLS12_PORT"; do
		for what in master_key id_context hostname alpn timeout; do
			loop_both "$after sess_once $port $TLS $what; $after sess_once $port $TLS none; $after sess_once $port $TLS none"
			assert_same_loop
			assert_same_server_view
			run grep -c '^1 ok HTTP/1.1 200 OK' "$BATS_TEST_TMPDIR/shim.out"
			assert_output 3
			assert_equal "$port $what: resumed across $(stat_sum tls_resumed_across)" "$port $what: resumed across 1"
		done
	done
}

# The CA names a program's SSL was answered are its own copy: what it
# adds there never reaches the session ticket the broker gives another
# process, nor the keys another SSL reads (the HTTPS review of
# 2026-12-06; docs/tls.md "The program's own objects").
# tests/clients/tls_own_objs.c: 3 processes of 2 requests, each request
# adding a name and tagging its keys.
@test "CA names and key exchange keys a process changed or tagged reach no other SSL, in it or in the next process (through the session it resumes across), TLS 1.3 and 1.2" {
	make -s -C "$ROOT" build/clients/tls_own_objs >&2
	local c="$ROOT/build/clients/tls_own_objs"
	for port in "$NGINX_TLS13_PORT" "$NGINX_TLS12_PORT"; do
		loop_both "for i in 1 2 3; do $c 2 $port $TLS; done"
		assert_same_loop
		run grep -c '^[12] CA names: \[/CN=libkeepalive test CA\], the peer' "$BATS_TEST_TMPDIR/shim.out"
		assert_output 6
		assert_equal "$port: resumed across $(stat_sum tls_resumed_across)" "$port: resumed across 2"
	done
}
