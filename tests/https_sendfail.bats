#!/usr/bin/env bats
# HTTPS: a request write that fails on a pooled connection after some of
# its records went (docs/replay.md "A send that failed").  The engine's one
# SSL_write puts the request on the socket a record (16 KiB) at a time; a
# reset met by a later record fails the write after the head's record went.
# The server may have read and executed that head: the failure is handed
# to the proof rule (docs/replay.md "The rule"), never read as "none of it
# went out".  A generated matrix: server (rst: executes the head and
# resets inside the body; idle: closed the connection while it was idle,
# so the request meets a closed socket and a replay is owed) x body size
# (2, 4 and 19 records: the last is above the 64 KiB copy bound, so it
# goes on a fresh connection in the first place) x TLS 1.2 / 1.3.  tests/clients/tls_post.c makes
# one TLS connection per POST (/pay0, then /pay1, whose connection is the
# pooled one with the library); tests/servers/tls_head_rst.py logs each
# execution.  Each cell runs without and with the library: the same
# output, and /pay1 executed as often as alone (once).

load helpers

setup_file() { suite_setup; }
teardown() { own_server_stop; }

# sendfail_run MODE TLS BODY THINK LIB: one run without and one with LIB of
# tls_post (2 POSTs of BODY bytes, THINK ms between handshake and write)
# against a fresh tls_head_rst.py in MODE; checks the executions and the
# outputs; "$BATS_TEST_TMPDIR/cells" gets a line per run.
sendfail_run() {
	local mode="$1" tlsv="$2" body="$3" think="$4" lib="$5" tls="$BATS_TEST_TMPDIR/tls" half log pf port
	[ -s "$tls/server.pem" ] || tls_make "$tls"
	for half in plain shim; do
		log="$BATS_TEST_TMPDIR/$half.exec" pf="$BATS_TEST_TMPDIR/$half.port"
		: >"$log"
		rm -f "$pf"
		"$PYTHON" "$ROOT/tests/servers/tls_head_rst.py" "$tls/server.pem" "$tls/server.key" "$pf" \
			"$log" 2 "$mode" "$tlsv" 3>&- &
		OWN_PID=$!
		wait_until test -s "$pf"
		read -r port <"$pf"
		if [ "$half" = plain ]; then
			run_plain "$CLIENTS/tls_post" "$port" "$tls/ca.pem" 2 "$body" "$think"
		else
			PRELOAD="$lib" SERVER_PORT=$port run_shim "$CLIENTS/tls_post" "$port" "$tls/ca.pem" 2 "$body" "$think"
		fi
		own_server_stop
	done
	local cell="$mode tls$tlsv body=$body" plain_x shim_x
	plain_x=$(count_matches 'EXEC POST /pay1$' "$BATS_TEST_TMPDIR/plain.exec")
	shim_x=$(count_matches 'EXEC POST /pay1$' "$BATS_TEST_TMPDIR/shim.exec")
	echo "$cell: plain [$(tr '\n' ' ' <"$BATS_TEST_TMPDIR/plain.out")] x$plain_x;" \
		"shim [$(tr '\n' ' ' <"$BATS_TEST_TMPDIR/shim.out")] x$shim_x; $SHIM_STATS" \
		>>"$BATS_TEST_TMPDIR/cells"
	assert_equal "$cell: plain status $PLAIN_STATUS shim status $SHIM_STATUS" \
		"$cell: plain status 0 shim status 0"
	assert_equal "$cell: /pay0 executed $(count_matches 'EXEC POST /pay0$' "$BATS_TEST_TMPDIR/shim.exec")" \
		"$cell: /pay0 executed 1"
	assert_equal "$cell: /pay1 executed $shim_x" "$cell: /pay1 executed $plain_x"
	assert_equal "$cell: shim output $(cat "$BATS_TEST_TMPDIR/shim.out")" \
		"$cell: shim output $(cat "$BATS_TEST_TMPDIR/plain.out")"
}

# The server executes /pay1 on its head and resets inside the body.  The
# reset lands inside the write in some runs only (the library before this
# rule executed /pay1 twice in 3 of 8 runs of 65,000 bytes), so each cell
# runs 4 times.  Alone every run is "1: error", /pay1 executed once; with
# the library the pooled connection's reset has no FIN before it: no proof,
# no replay, the same error.
@test "https send failed after its head went (server executes the head and resets): never sent again, every cell" {
	local tlsv body run
	for tlsv in 1.2 1.3; do
		for body in 20000 65000 300000; do
			for run in 1 2 3 4; do
				sendfail_run rst "$tlsv" "$body" 0 "$PRELOAD"
				assert_equal "$(sed -n 2p "$BATS_TEST_TMPDIR/plain.out")" "1: error"
			done
		done
	done
	cat "$BATS_TEST_TMPDIR/cells"
}

# The server closed the pooled connection while it was idle (its FIN came
# before the request); the write's first record meets the closed socket,
# the server's TCP resets, a later record fails with EPIPE.  Proof (b): FIN
# first, nothing acknowledged: the request is sent again on a fresh
# connection, answered as alone.  The test build without the pre-send
# probe (tests/methods.bats noprobe_lib), else the probe sees the close
# first and the request goes fresh without a replay.
@test "https send failed after a record went on a connection the server closed idle: replayed by the proof, every cell" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "not under the ASan run"
	flock "$ROOT/build/.make.lock" make -s -C "$ROOT" build/libkeepalive-noprobe.so >/dev/null
	local tlsv body
	for tlsv in 1.2 1.3; do
		for body in 20000 65000 300000; do
			sendfail_run idle "$tlsv" "$body" 250 "$ROOT/build/libkeepalive-noprobe.so"
			assert_equal "$(cat "$BATS_TEST_TMPDIR/shim.out")" "$(printf '0: answered\n1: answered')"
			[[ $SHIM_STATS =~ [\ :]tls_reused=1 ]] || fail "tls$tlsv $body: not reused: $SHIM_STATS"
			if [ "$body" -lt 65536 ]; then
				[[ $SHIM_STATS =~ [\ :]replayed_unacked=1 ]] ||
					fail "tls$tlsv $body: not replayed by the proof: $SHIM_STATS"
			else
				[[ $SHIM_STATS =~ [\ :]unvouched=1 ]] ||
					fail "tls$tlsv $body: not sent fresh: $SHIM_STATS"
			fi
		done
	done
	cat "$BATS_TEST_TMPDIR/cells"
}

# The same closed-idle connection, with SIGPIPE at its default action
# (docs/replay.md "The program's signals").  The engine's record that met
# the server's reset failed with EPIPE, and its socket BIO's write() raised
# SIGPIPE inside the program's SSL_write: the program was killed (status
# 141, nothing printed) where alone, on its fresh connection, it gets its
# answers; the replay the proof allows never ran for it.  The engine's
# writes inside the program's call go without the signal now; the call
# answered by the replay raises none.
@test "https send failed on a connection the server closed idle, SIGPIPE at its default: replayed, the program is not killed" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "not under the ASan run"
	flock "$ROOT/build/.make.lock" make -s -C "$ROOT" build/libkeepalive-noprobe.so >/dev/null
	export TLS_POST_SIGPIPE=1
	local tlsv
	for tlsv in 1.2 1.3; do
		sendfail_run idle "$tlsv" 20000 250 "$ROOT/build/libkeepalive-noprobe.so"
		assert_equal "$(cat "$BATS_TEST_TMPDIR/shim.out")" "$(printf '0: answered\n1: answered')"
		[[ $SHIM_STATS =~ [\ :]replayed_unacked=1 ]] || fail "tls$tlsv: not replayed by the proof: $SHIM_STATS"
	done
	cat "$BATS_TEST_TMPDIR/cells"
}

# docs/replay.md "An error taken by a read of nothing": the program writes
# the head on the pooled connection, the server executes it and resets
# (no FIN), the program takes the reset's error by a receive of nothing on
# its socket, then its body write meets the kernel's EPIPE.  The proof read
# that EPIPE as "the FIN came first" and replayed: /pay1 executed twice
# (the library before: 2 of 2 runs, TLS 1.2 and 1.3); alone once.
@test "https: the program takes a reset's error by a receive of nothing between head and body: not replayed, executed once as alone" {
	local tlsv
	for tlsv in 1.2 1.3; do
		TLS_POST_TAKE=1 sendfail_run rst "$tlsv" 2000 0 "$PRELOAD"
		assert_equal "$(count_matches 'EXEC POST /pay1$' "$BATS_TEST_TMPDIR/shim.exec")" 1
	done
	cat "$BATS_TEST_TMPDIR/cells"
}
