#!/usr/bin/env bats
# Whole TLS connections across processes in the library that ships, behind
# KEEPALIVE_TLS_ACROSS=1 (docs/tls-across.md "The hand-out in the
# library"): a loop of one-process-per-request Python programs under
# `keepalive` against nginx (TLS 1.3), each loop run without and with the
# library, its output compared, nginx's log ($connection first) counting
# server connections.  The library's own lines go to a log file
# (KEEPALIVE_LOG_FILE), so that the program's stderr is compared too.

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
}
teardown() { servers_stop; }

# loop N CASE_AT CASE_ARGS...: N processes of tests/clients/tls_once.py
# (one urllib GET each, verified with the test CA; ONCE and LOOP_ARGS: a
# program and its arguments instead), the one at CASE_AT
# (0: none) with CASE_ARGS instead; without, then with the library (under
# `keepalive`: its private broker; KILL_AT=K: the broker killed after the
# K-th process); stdout and stderr of each run compared
loop() {
	local n=$1 at=$2 xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	shift 2
	mkdir -p -m 0700 "$xdg"
	local once="${ONCE:-$PYTHON $ROOT/tests/clients/tls_once.py 127.0.0.1 $SERVER_PORT ${LOOP_PATH:-/f}}"
	local script="" i
	for i in $(seq 1 "$n"); do
		if [ "$i" = "$at" ]; then script="$script $once $*;"; else script="$script $once ${LOOP_ARGS:---ca $TLS/ca.pem --show};"; fi
		# (keepalive names its broker; alone there is none)
		[ "$i" = "${KILL_AT:-0}" ] && script="$script [ -n \"\${KEEPALIVE_BROKER_PID:-}\" ] && kill -9 \$KEEPALIVE_BROKER_PID;"
	done
	nginx_reset
	local a0 a1
	a0=$(nginx_accepts)
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	a1=$(nginx_accepts)
	PLAIN_ACCEPTS=$((a1 - a0 - 1))
	cp "$NGINX_DIR/access.log" "$out/plain.log"
	nginx_reset
	a0=$(nginx_accepts)
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
		KEEPALIVE_LOG_FILE="$out/shim.log" "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	a1=$(nginx_accepts)
	SHIM_ACCEPTS=$((a1 - a0 - 1))
	echo "--- accepted: alone $PLAIN_ACCEPTS, with the library $SHIM_ACCEPTS"
	echo "--- the hand-outs"; grep -E 'across|connect\(\)' "$out/shim.log" || true
	echo "--- shim.out"; cat "$out/shim.out"
	echo "--- shim.err"; cat "$out/shim.err"
	echo "--- nginx"; nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	run diff "$out/plain.err" "$out/shim.err"
	assert_success
}
# connections nginx accepted (stub_status: those that never carried a
# request too), asked on the port under test without the library: its
# listening queue is first in, first out, so every connection made before
# this one is counted by the time it is
nginx_accepts() { env -u LD_PRELOAD curl -sk "https://127.0.0.1:$SERVER_PORT/status" | awk 'NR == 3 { print $1 }'; }
given_back() { grep -c 'a connection taken at connect() given back to the broker' "$BATS_TEST_TMPDIR/shim.log" || true; }
not_given_back() { grep -c "a connection taken at connect() not given back: $1" "$BATS_TEST_TMPDIR/shim.log" || true; }
handed() { grep -c 'a TLS connection from another process handed to the program' "$BATS_TEST_TMPDIR/shim.log" || true; }
not_taken() { grep -c "a connection from the broker not taken: $1" "$BATS_TEST_TMPDIR/shim.log" || true; }
plain_conns() { _distinct_first_fields "$BATS_TEST_TMPDIR/plain.log"; }
# after loop 10 0: 10 server connections alone, at most 2 with the
# library, at least 8 processes handed one; the hand-out at connect(): no
# process makes a TCP connection of its own that it then drops unused
# (before: 10 accepted, 8 of them empty)
ten_on_two() {
	assert_equal "alone $(plain_conns)" "alone 10"
	assert_equal "requests $(nginx_requests)" "requests 10"
	local c
	c=$(nginx_conns)
	[ "$c" -le 2 ] || fail "connections $c, want at most 2"
	[ "$(handed)" -ge 8 ] || fail "handed $(handed), want at least 8"
	assert_equal "accepted alone $PLAIN_ACCEPTS" "accepted alone 10"
	[ "$SHIM_ACCEPTS" -le 2 ] || fail "accepted $SHIM_ACCEPTS, want at most 2"
	assert_equal "taken at connect $(grep -c 'under fd at connect()' "$BATS_TEST_TMPDIR/shim.log")" "taken at connect $(handed)"
}

@test "TLS across processes, shipped: a loop of 10 python processes (one HTTPS request each) runs on at most 2 server connections where alone it makes 10; the same output (TLS 1.3)" {
	use_tls 13
	loop 10 0
	ten_on_two
	# the secrets never logged: the log says sizes only
	run grep -ci 'secret\|key=' "$BATS_TEST_TMPDIR/shim.log"
	assert_output 0
}

# curl keeps sessions (a client session cache: a new-session callback on
# every context), makes its SSL context after its connect() and writes
# through a BIO of its own; under the hand-out across processes it is
# followed and handed all the same (docs/tls-across.md "Programs that
# keep sessions"): taken at its connect() (libssl linked), the gate at
# the SSL_connect after its first (its trust store is loaded then)
@test "TLS across processes, shipped: a loop of 10 curl processes runs on at most 2 server connections where alone it makes 10, no TCP connection of their own; the same output (TLS 1.3)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	use_tls 13
	ONCE="$CURL -sS -w ' %{http_code} %{ssl_verify_result}\n'" LOOP_ARGS="--cacert $TLS/ca.pem $URL/f" loop 10 0
	ten_on_two
}

# The trust cases of the issue, each between two processes of the loop,
# each compared with the same command alone: its own handshake where its
# settings differ, the loop's connection where they are the same
@test "TLS across processes, shipped: curl trust cases in a loop (no CA file, another CA, a pin that does not match, another name, -k, TLS 1.2 at most, a client certificate): identical to alone (TLS 1.3)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	use_tls 13
	local pin=sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= i=0 args
	ONCE="$CURL -sS -w ' %{http_code} %{ssl_verify_result}\n'" LOOP_ARGS="--cacert $TLS/ca.pem $URL/f"
	export ONCE LOOP_ARGS
	for args in "$URL/f" "--cacert $TLS/other-ca.pem $URL/f" "--cacert $TLS/ca.pem --pinnedpubkey $pin $URL/f" \
		"--cacert $TLS/ca.pem --resolve localhost:$SERVER_PORT:127.0.0.1 https://localhost:$SERVER_PORT/f" \
		"-k $URL/f" "--cacert $TLS/ca.pem --tls-max 1.2 $URL/f" \
		"--cacert $TLS/ca.pem --cert $TLS/client-a.pem --key $TLS/client-a.key $URL/f"; do
		loop 4 3 $args
		i=$((i + 1))
	done
	unset ONCE LOOP_ARGS
	assert_equal "cases $i" "cases 7"
}

# A program whose context keeps sessions (as curl's) handed a connection
# from another process: its callback is told of the session its SSL
# reads, at the first read, resumable at the server (its second
# connection resumes it, as alone)
@test "TLS across processes, shipped: a program with a new-session callback is handed the connection; its callback told of a resumable session before the body, which its next connection resumes, as alone (TLS 1.3)" {
	use_tls 13
	make -s -C "$ROOT" build/clients/tls_told >&2
	ONCE="$ROOT/build/clients/tls_told $SERVER_PORT $TLS/ca.pem" LOOP_ARGS=" " loop 4 0
	assert_equal "told $(grep -c '^told of a session: yes$' "$BATS_TEST_TMPDIR/shim.out")" "told 4"
	assert_equal "resumed $(grep -c '^second reused 1, peer chain 1$' "$BATS_TEST_TMPDIR/shim.out")" "resumed 4"
	[ "$(handed)" -ge 1 ] || fail "handed $(handed), want at least 1"
}

# ... and freed without SSL_shutdown: libssl makes the session it was told
# of not resumable (and tells its remove callback), and the next
# connection makes a full handshake; the library before left a handed
# SSL's session resumable (the server saw a resumption)
@test "TLS across processes, shipped: a handed SSL freed without SSL_shutdown leaves the session its program was told of not resumable, as alone (TLS 1.3)" {
	use_tls 13
	make -s -C "$ROOT" build/clients/tls_told >&2
	ONCE="$ROOT/build/clients/tls_told $SERVER_PORT $TLS/ca.pem noshut" LOOP_ARGS=" " loop 4 0
	assert_equal "marked $(grep -c '^after SSL_free alone: resumable 0, removed 1$' "$BATS_TEST_TMPDIR/shim.out")" "marked 4"
	assert_equal "full $(grep -c '^second reused 0, peer chain 1$' "$BATS_TEST_TMPDIR/shim.out")" "full 4"
	[ "$(handed)" -ge 1 ] || fail "handed $(handed), want at least 1"
}

# A shell script of clients against a strict tls_close.py (own_server),
# alone (strict_plain) and under scripts/keepalive with the hand-over
# across processes, its own broker (strict_across); ends_to FILE: the
# server's connection ends so far, counted by how each ended.
strict_plain() {
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$1" >"$BATS_TEST_TMPDIR/plain.out" \
		2>"$BATS_TEST_TMPDIR/plain.err" </dev/null
}
strict_across() {
	mkdir -p -m 0700 "$BATS_TEST_TMPDIR/xdg"
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$BATS_TEST_TMPDIR/xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
		KEEPALIVE_LOG_FILE="$BATS_TEST_TMPDIR/shim.log" "$ROOT/scripts/keepalive" \
		sh -c "$1" >"$BATS_TEST_TMPDIR/shim.out" 2>"$BATS_TEST_TMPDIR/shim.err" </dev/null
}
ends_to() { grep ' end ' "$OWN_LOG" | awk '{ print $2, $3 }' | sort | uniq -c >"$1"; }
# after strict_across: its one connection's end, its output as alone's
strict_shim_done() {
	ends_logged 1
	ends_to "$BATS_TEST_TMPDIR/shim.ends"
	cat "$OWN_LOG"
	run diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
	assert_success
}

# A connection given to the broker after its program's SSL_shutdown (told
# sent, not sent: the connection may go on) carries that close_notify
# sealed beside its state; the broker writes it if it ends the connection
# itself (at its exit here).  It ended with the FIN alone, which a strict
# server reads as a truncation (docs/tls.md "The close_notify owed";
# TLS_CLOSE_STRICT=1: tls_close.py logs how each connection was ended).
# The broker is stopped while the last curl exits, so that it wakes to its
# message and the command's end at once: it went without reading the
# message, and the socket closed with it, without the close_notify
# (docs/broker.md "The broker's exit"; seen on a loaded CI run).
@test "TLS across processes, shipped: the connection the broker ends at its exit ends with the close_notify its last curl was told it sent, as alone (TLS 1.3)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	local out="$BATS_TEST_TMPDIR" script="" i run_pid bpid
	own_server env TLS_CLOSE_STRICT=1 TLS_CLOSE_HOLD="/x3 $out/hold" "$PYTHON" "$ROOT/tests/servers/tls_close.py" \
		"$TLS/server.pem" "$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	for i in 1 2 3; do
		script="$script $CURL -sS -w ' %{http_code}\n' --cacert $TLS/ca.pem https://127.0.0.1:$SERVER_PORT/x$i;"
	done
	: >"$out/hold"
	strict_plain "$script"
	ends_logged 3
	ends_to "$out/plain.ends"
	: >"$OWN_LOG"
	rm "$out/hold"
	strict_across "echo \$KEEPALIVE_BROKER_PID >$out/bpid; $script" &
	run_pid=$!
	for i in $(seq 1 100); do
		grep -q 'GET /x3 ' "$OWN_LOG" && break
		sleep 0.1
	done
	bpid=$(cat "$out/bpid")
	[ -n "$bpid" ] && kill -STOP "$bpid"
	: >"$out/hold"
	wait "$run_pid" || true
	[ -z "$bpid" ] || kill -CONT "$bpid"
	strict_shim_done
	run cat "$out/plain.ends"
	assert_output "      3 end close_notify"
	run cat "$out/shim.ends"
	assert_output "      1 end close_notify"
	[ "$(handed)" -ge 2 ] || fail "handed $(handed), want 2"
}

# The state a process takes at connect() and gives back unused carries on
# the close_notify its last curl was told it sent: the broker's reply
# hands the sealed tail over with the state, the give-back puts it back.
# It went back without it, and the broker ended the connection with the
# FIN alone (docs/broker.md "TLS connections with their state").
@test "TLS across processes, at connect(): a connection given back unused still ends with the close_notify its last curl was told it sent, as alone (TLS 1.3)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	local out="$BATS_TEST_TMPDIR" script
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	script="$CURL -sS -w ' %{http_code}\n' --cacert $TLS/ca.pem https://127.0.0.1:$SERVER_PORT/x1;"
	script="$script $PYTHON $ROOT/tests/clients/tls_once.py 127.0.0.1 $SERVER_PORT /x2 --unused"
	strict_plain "$script"
	ends_logged 2
	ends_to "$out/plain.ends"
	: >"$OWN_LOG"
	strict_across "$script"
	strict_shim_done
	# alone: curl's connection ends with its close_notify, the unused
	# connection's with a FIN before any TLS (an error to the server)
	run cat "$out/plain.ends"
	assert_line "      1 end close_notify"
	run cat "$out/shim.ends"
	assert_output "      1 end close_notify"
	assert_equal "given back $(given_back)" "given back 1"
}

# curl reads the errors of its SSL_read from the state its own BIO keeps of
# the last I/O: a foreign engine that read the socket itself left it at the
# EAGAIN of the deferred first write, and curl spun on a cut answer
# forever (100% CPU) where alone it ends with exit 18.  The records now go
# through its BIO during its calls (docs/tls-across.md "Programs that keep
# sessions").  tests/servers/tls_cut.py cuts every second answer.
@test "TLS across processes, shipped: curl handed a connection whose answer is cut short (no close_notify) ends as alone (exit 18), it does not spin (TLS 1.3)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	own_server "$PYTHON" "$ROOT/tests/servers/tls_cut.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log"
	local out="$BATS_TEST_TMPDIR" xdg="$BATS_TEST_TMPDIR/xdg" script="" i
	mkdir -p -m 0700 "$xdg"
	for i in 1 2 3 4; do
		script="$script $CURL -sS -w ' %{http_code} e=%{exitcode}\n' --cacert $TLS/ca.pem https://127.0.0.1:$SERVER_PORT/x;"
	done
	# (the loop's status is its last curl's: a cut one's 18)
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null || true
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
		KEEPALIVE_LOG_FILE="$out/shim.log" "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null || true
	assert_equal "cut $(grep -c 'e=18$' "$out/plain.out")" "cut 2"
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	run diff "$out/plain.err" "$out/shim.err"
	assert_success
	[ "$(handed)" -ge 1 ] || fail "handed $(handed), want at least 1"
}

# What a handed connection's reader says of bytes that are not the
# server's next record (plain text, records in clear, another version,
# lengths past OpenSSL's limits, a bad tag, an empty record): curl prints
# OpenSSL's reason, and the server reads the client's alert.  The foreign
# engine said "SSL routines" with no reason, and sent unexpected_message
# where OpenSSL sends protocol_version for plain text
# (docs/tls-across.md "The reader's errors"; tests/servers/tls_cut.py MODE
# writes them after every second answer).
@test "TLS across processes, shipped: curl handed a connection on which the server writes bytes that are not a record reads OpenSSL's reason and sends its alert, as alone (TLS 1.3)" {
	curl_ok || skip "curl cannot run with libasan preloaded"
	local out="$BATS_TEST_TMPDIR" xdg="$BATS_TEST_TMPDIR/xdg" mode script i all_handed=0
	mkdir -p -m 0700 "$xdg"
	for mode in plain handshake oldversion len:16640 len:16641 len:16708 badmac alert ccs badtype empty; do
		own_server "$PYTHON" "$ROOT/tests/servers/tls_cut.py" "$TLS/server.pem" "$TLS/server.key" \
			"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" "$mode"
		script=""
		for i in 1 2 3 4; do
			script="$script $CURL -sS -w ' %{http_code} e=%{exitcode}\n' --cacert $TLS/ca.pem https://127.0.0.1:$SERVER_PORT/x;"
		done
		timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>&1 </dev/null || true
		grep '^alert' "$OWN_LOG" >"$out/plain.alerts" || true
		: >"$OWN_LOG"
		timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
			KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
			KEEPALIVE_LOG_FILE="$out/shim.log" "$ROOT/scripts/keepalive" \
			sh -c "$script" >"$out/shim.out" 2>&1 </dev/null || true
		own_server_stop
		grep '^alert' "$OWN_LOG" >"$out/shim.alerts" || true
		assert_equal "$mode: cut $(grep -c 'e=56$' "$out/plain.out")" "$mode: cut 2"
		run diff "$out/plain.out" "$out/shim.out"
		assert_success
		assert_equal "$mode: $(tr '\n' ' ' <"$out/shim.alerts")" "$mode: $(tr '\n' ' ' <"$out/plain.alerts")"
		all_handed=$(handed)
	done
	# (the log is the whole loop's: two hand-outs a mode)
	[ "$all_handed" -ge 11 ] || fail "handed $all_handed, want at least 11"
}

@test "TLS across processes, shipped: a process in the middle with another CA file is not handed the connection, fails as alone; the loop goes on (TLS 1.3)" {
	use_tls 13
	loop 6 3 --ca "$TLS/other-ca.pem" --show
	grep -q '^error=SSLCertVerificationError' "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "refused $(not_taken "the program's verification fails on it")" "refused 1"
	# taken at its connect(), refused at its SSL_connect: its own
	# connection made there, the state back to the broker, and the
	# fourth to the sixth handed it: the second's connection, a third's
	# own; nothing else accepted
	assert_equal "given back $(given_back)" "given back 1"
	assert_equal "handed $(handed)" "handed 3"
	assert_equal "accepted $SHIM_ACCEPTS" "accepted 3"
}

@test "TLS across processes, shipped: a process in the middle without verification (CERT_NONE) is not handed the connection, makes its own handshake as alone (TLS 1.3)" {
	use_tls 13
	loop 6 3 --noverify --show
	assert_equal "refused $(not_taken "the program's verification result is not X509_V_OK")" "refused 1"
}

@test "TLS across processes, shipped: a process in the middle with another SNI is not handed the connection, makes its own handshake as alone; the one after it takes the loop's (TLS 1.3)" {
	use_tls 13
	# (python sends no SNI to an address; this one sends localhost, the
	# certificate's name: it verifies, alone and with the library)
	loop 6 3 --ca "$TLS/ca.pem" --name localhost --show
	assert_equal "requests $(nginx_requests)" "requests 6"
	# another SNI makes another broker name: the third request on a
	# connection of its own (and its connection, put under its name at
	# exit, is not handed to the fourth either), the loop's connection
	# carried on by the fourth to the sixth
	assert_equal "connections $(nginx_conns)" "connections 3"
	local third
	third=$(awk 'NR == 3 { print $1 }' "$NGINX_DIR/access.log")
	assert_equal "third's requests $(awk -v c="$third" '$1 == c' "$NGINX_DIR/access.log" | wc -l)" "third's requests 1"
	assert_equal "handed $(handed)" "handed 3"
	# its connect() took the loop's state (by destination alone), its
	# SSL_connect's name was not the state's: given back; the fourth's
	# connect() takes the newest, the third's (put at its exit), refuses
	# it for its name, gives it back and asks under its own: the loop's
	assert_equal "given back $(given_back)" "given back 2"
	assert_equal "under its name $(grep -c 'handed to the program.s SSL, under its name' "$BATS_TEST_TMPDIR/shim.log")" "under its name 1"
	assert_equal "accepted $SHIM_ACCEPTS" "accepted 3"
}

@test "TLS across processes, at connect(): a process in the middle that speaks plain HTTP to the HTTPS port is answered as alone (nginx's 400), the state goes back, the next process is handed it (TLS 1.3)" {
	use_tls 13
	loop 6 3 --plain
	grep -q '^HTTP/1.1 400 Bad Request' "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "given back $(given_back)" "given back 1"
	assert_equal "handed $(handed)" "handed 3"
	# (the plain request's fresh connection is the third)
	assert_equal "accepted $SHIM_ACCEPTS" "accepted 3"
}

@test "TLS across processes, at connect(): a process in the middle that connects and closes unused: the state goes back, the next process is handed it; nothing accepted for it (TLS 1.3)" {
	use_tls 13
	loop 6 3 --unused
	assert_equal "given back $(given_back)" "given back 1"
	assert_equal "handed $(handed)" "handed 3"
	# alone its connect() is a connection nginx accepts; here none
	assert_equal "accepted alone $PLAIN_ACCEPTS" "accepted alone 6"
	assert_equal "accepted $SHIM_ACCEPTS" "accepted 2"
}

# A process that sets its socket's flags (O_ASYNC, itself the owner) or
# options (TCP_NODELAY, SO_KEEPALIVE) between connect() and a handshake it
# never makes, then closes: the library before gave the socket back as it
# was, and the next process was handed it with that O_ASYNC and owner
# (a SIGIO to an owner, the whole group where the owner is a group: the
# review at 4183573 saw the shell killed) or those options.  Now flags go
# back to the broker's record of them before the state goes back, and a
# socket with options of the program's is not given back (closed).
@test "TLS across processes, at connect(): a process in the middle that sets O_ASYNC and an owner on its socket, then closes it unused: given back clean, the next process's socket shows none of it, as alone (TLS 1.3)" {
	use_tls 13
	LOOP_ARGS="--ca $TLS/ca.pem --show --sockstate" loop 6 3 --dirty
	assert_equal "given back $(given_back)" "given back 1"
	assert_equal "handed $(handed)" "handed 3"
}

@test "TLS across processes, at connect(): a process in the middle that sets TCP_NODELAY and SO_KEEPALIVE, then closes unused: not given back, the next process's socket shows neither, as alone (TLS 1.3)" {
	use_tls 13
	LOOP_ARGS="--ca $TLS/ca.pem --show --sockstate" loop 6 3 --dirty-opts
	assert_equal "not given back $(not_given_back "the program changed its socket")" "not given back 1"
}

# A peek between connect() and the handshake, after the server closed the
# connection handed at connect() (nginx's /short/: 1 s of keep-alive; the
# process sleeps 1.5 s first): the library before gave the program the
# first owner's close_notify record (a peek of 1 byte, then its request
# lost: the end read at its first read, SIGPIPE).  Now a read or a peek
# there gives it a fresh connection first: EAGAIN and its answer, as alone.
@test "TLS across processes, at connect(): a process in the middle that peeks at its socket after the server closed the connection handed to it: EAGAIN and its answer, as alone (TLS 1.3)" {
	use_tls 13
	LOOP_PATH=/short/f loop 4 3 --ca "$TLS/ca.pem" --show --peek-late
	grep -q '^peek: EAGAIN' "$BATS_TEST_TMPDIR/shim.out"
}

# The same with poll(0) for POLLIN (an event loop's look before its
# handshake): the library before reported the handed connection readable
# (the server's close_notify and FIN waiting on it), where the program's
# own fresh connection reports nothing.  Now readiness there gives it a
# fresh connection first (kp_conn_held_settle), the state going back.
@test "TLS across processes, at connect(): a process in the middle that polls its socket for POLLIN after the server closed the connection handed to it: nothing, then its answer, as alone (TLS 1.3)" {
	use_tls 13
	LOOP_PATH=/short/f loop 4 3 --ca "$TLS/ca.pem" --show --poll-late
	grep -q '^poll: nothing' "$BATS_TEST_TMPDIR/shim.out"
}

@test "TLS across processes, at connect(): a process in the middle that forks between connect() and SSL_connect: parent and child as alone, the state never given back (TLS 1.3)" {
	use_tls 13
	loop 6 3 --ca "$TLS/ca.pem" --fork --show
	grep -q '^child closed its copy' "$BATS_TEST_TMPDIR/shim.out"
	# the fork shares the socket: a fresh connection under the fd before
	# it (the hand-off's), the state wiped, its socket closed
	assert_equal "not given back $(not_given_back "it may have had another owner")" "not given back 1"
	assert_equal "given back $(given_back)" "given back 0"
	assert_equal "requests $(nginx_requests)" "requests 6"
}

@test "TLS across processes, at connect(): a process in the middle that dups its socket (and closes the copy) before a handshake the gate refuses (another CA file): as alone, the state never given back (TLS 1.3)" {
	use_tls 13
	loop 6 3 --ca "$TLS/other-ca.pem" --dup --show
	grep -q '^error=SSLCertVerificationError' "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "refused $(not_taken "the program's verification fails on it")" "refused 1"
	assert_equal "not given back $(not_given_back "it may have had another owner")" "not given back 1"
	assert_equal "given back $(given_back)" "given back 0"
}

@test "TLS across processes, shipped: the broker killed mid-loop, every process still succeeds with the same output (TLS 1.3)" {
	use_tls 13
	KILL_AT=4 loop 8 0
	assert_equal "requests $(nginx_requests)" "requests 8"
	# the third and fourth handed the second's connection; the fourth's
	# put at exit finds no broker (closed), and every later process makes
	# its own handshake
	assert_equal "handed $(handed)" "handed 2"
}

# getters FLAGS1 FLAGS2...: tests/clients/tls_getters.c processes (one
# request each, renegotiation refused), process i with FLAGSi, as loop does
# (KP_HANDOUT_ENV: more of the environment, e.g. KP_TEST_ACROSS_BROKER=2
# to run the code before's test build, which handed out)
getters() {
	local n=$# xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR" script=: f
	mkdir -p -m 0700 "$xdg"
	for f in "$@"; do script="$script && $ROOT/build/clients/tls_getters $SERVER_PORT $TLS/ca.pem 1 $f"; done
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	wait_until test "$(nginx_requests)" -ge "$n"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
		KEEPALIVE_LOG_FILE="$out/shim.log" ${KP_HANDOUT_ENV:-} "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	wait_until test "$(nginx_requests)" -ge "$n"
	echo "--- the hand-outs"; grep -E 'across|handed|not exportable|broker' "$out/shim.log" || true
	echo "--- shim.out"; cat "$out/shim.out"
	echo "--- nginx"; nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	run diff "$out/plain.err" "$out/shim.err"
	assert_success
}

@test "TLS across processes, shipped: SSL_key_update after the first read or write is the foreign engine's (pending, in init, sent by SSL_do_handshake, as libssl), nginx takes the records after it; the getters as alone, the own key-exchange key included (TLS 1.3)" {
	make -s -C "$ROOT" build/clients/tls_getters >&2
	use_tls 13
	# (a program's own SSL asked for a KeyUpdate is never parked after:
	# the in-process rule for a call that may start a handshake; the
	# first process's connection is, and goes to the broker at its exit)
	getters "" lateku=0 lateku=0 lateku=0
	assert_equal "asked $(grep -c 'late key update 1 type 0 in init 1 finished 0 handshake 1 type -1 in init 0' "$BATS_TEST_TMPDIR/plain.out")" "asked 3"
	# the first process's connection carried through the three after it,
	# each sending its KeyUpdate on it and passing it on
	assert_equal "handed $(handed)" "handed 3"
	assert_equal "connections $(nginx_conns)" "connections 1"
}

@test "TLS across processes, shipped: SSL_key_update asking the server's after the first read or write, as libssl (type 1); the same output (TLS 1.3)" {
	make -s -C "$ROOT" build/clients/tls_getters >&2
	use_tls 13
	getters "" lateku lateku lateku
	assert_equal "asked $(grep -c 'late key update 1 type 1 in init 1 finished 0 handshake 1 type -1 in init 0' "$BATS_TEST_TMPDIR/plain.out")" "asked 3"
	# (the server's answer to the program's request may arrive while the
	# connection waits in the broker, which then drops it as one its
	# server spoke on: the next process dials; so at least the second)
	[ "$(handed)" -ge 1 ] || fail "handed $(handed)"
}

@test "TLS across processes, shipped: a parked TLS 1.3 connection the pool's per-host cap pushes out goes to the broker with its state (before, closed); the next process is handed it (TLS 1.3)" {
	use_tls 13
	local xdg="$BATS_TEST_TMPDIR/xdg" out="$BATS_TEST_TMPDIR"
	mkdir -p -m 0700 "$xdg"
	# two keep-alive connections open at once (http.client), closed in
	# turn: under a cap of one idle per host the second's park pushes the
	# first out; then a process of one request
	cat >"$out/two.py" <<'PY'
import http.client, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[3])
cs = [http.client.HTTPSConnection(sys.argv[1], int(sys.argv[2]), context=ctx) for _ in range(int(sys.argv[4]))]
for c in cs:
    c.request("GET", "/f")
    sys.stdout.buffer.write(c.getresponse().read())
for c in cs:
    c.close()
PY
	local script="$PYTHON $out/two.py 127.0.0.1 $SERVER_PORT $TLS/ca.pem 2 && $PYTHON $out/two.py 127.0.0.1 $SERVER_PORT $TLS/ca.pem 1"
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD sh -c "$script" >"$out/plain.out" 2>"$out/plain.err" </dev/null
	wait_until test "$(nginx_requests)" -ge 3
	nginx_reset
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_MAX_IDLE_PER_HOST=1 KEEPALIVE_LOG=debug \
		KEEPALIVE_LOG_FILE="$out/shim.log" "$ROOT/scripts/keepalive" \
		sh -c "$script" >"$out/shim.out" 2>"$out/shim.err" </dev/null
	wait_until test "$(nginx_requests)" -ge 3
	grep -E 'across|handed|TLS connection' "$out/shim.log" || true
	nginx_log
	run diff "$out/plain.out" "$out/shim.out"
	assert_success
	run diff "$out/plain.err" "$out/shim.err"
	assert_success
	# both of the first process's connections reached the broker: the one
	# pushed out at once, the other at exit
	assert_equal "given $(grep -c 'the state given to the broker' "$out/shim.log")" "given 2"
	assert_equal "handed $(handed)" "handed 1"
	assert_equal "connections $(nginx_conns)" "connections 2"
}

# A connection taken from another process, its program's SSL_shutdown
# made up, then a wait on the raw socket for the server's end (a lingering
# close after SSL_free): the close_notify owed is sealed by our record
# layer and goes out, and the server's answer ends the wait, as alone.
# It waited for ever (the client's 3 s bound: "end=-9"), and the
# connection ended with the FIN alone (docs/tls.md "The close_notify
# owed").
@test "TLS across processes: after SSL_shutdown on a connection taken from another process, a raw wait for the server's end ends as alone, with the close_notify (TLS 1.3)" {
	local out="$BATS_TEST_TMPDIR" script m
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	for m in drain again; do
		script="$CLIENTS/tls_owed $SERVER_PORT $TLS/ca.pem 1 drain_noshut >/dev/null;"
		script="$script $CLIENTS/tls_owed $SERVER_PORT $TLS/ca.pem 1 $m"
		: >"$OWN_LOG"
		strict_plain "$script"
		ends_logged 2
		: >"$OWN_LOG"
		strict_across "$script"
		strict_shim_done
		run cat "$out/shim.ends"
		assert_output "      1 end close_notify"
		grep -q 'the close_notify owed sent' "$out/shim.log" || fail "$m: not sent by our record layer"
		[ "$(handed)" -ge 1 ] || fail "$m: handed $(handed), want 1"
	done
}
