#!/usr/bin/env bats
# A request head the socket takes only in part (docs/hold.md, "A head the
# socket took in part"): the program is told at once which of its own
# bytes went out, as the kernel would tell it, and never waits for the
# server to read.  tests/servers/torn.py reads a request only once the
# client (tests/clients/torn_head.c) has met its first short count, EAGAIN
# or EINTR and said so on a fifo: a library that waits for the server to
# take the rest of a rewritten head waits for ever (status 124 here).

load helpers

setup_file() { suite_setup; }
teardown() { _stop_pid "${TORN_PID:-}"; }

_torn_ready() { [ -s "$BATS_TEST_TMPDIR/torn.port" ] || _pid_gone "$TORN_PID"; }

torn_start() {
	rm -f "$BATS_TEST_TMPDIR/go" "$BATS_TEST_TMPDIR/torn.port"
	mkfifo "$BATS_TEST_TMPDIR/go"
	: >"$BATS_TEST_TMPDIR/torn.log"
	python3 "$ROOT/tests/servers/torn.py" "$BATS_TEST_TMPDIR/torn.port" \
		"$BATS_TEST_TMPDIR/torn.log" "$BATS_TEST_TMPDIR/go" 2>"$BATS_TEST_TMPDIR/torn.err" &
	TORN_PID=$!
	wait_until _torn_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/torn.port"
}

# torn_both KIND MODE PAD COUNT: the client without the library, then with
# it; the server's log of each half in plain.log / shim.log
torn_both() {
	: >"$BATS_TEST_TMPDIR/torn.log"
	run_plain "$CLIENTS/torn_head" 127.0.0.1 "$SERVER_PORT" "$BATS_TEST_TMPDIR/go" "$@"
	cp "$BATS_TEST_TMPDIR/torn.log" "$BATS_TEST_TMPDIR/plain.log"
	: >"$BATS_TEST_TMPDIR/torn.log"
	run_shim "$CLIENTS/torn_head" 127.0.0.1 "$SERVER_PORT" "$BATS_TEST_TMPDIR/go" "$@"
	cp "$BATS_TEST_TMPDIR/torn.log" "$BATS_TEST_TMPDIR/shim.log"
}

# the two halves alike: status 0, the same output (but the "Connection:
# close" line a program that asked to close reads with the library,
# docs/replay.md "A closing answer"),
# the same heads as the server saw them (Connection lines aside)
torn_same() {
	[ "$PLAIN_STATUS" = 0 ] && [ "$SHIM_STATUS" = 0 ] &&
		cmp -s <(grep -v -a $'^Connection: close\r$' "$BATS_TEST_TMPDIR/plain.out") \
			<(grep -v -a $'^Connection: close\r$' "$BATS_TEST_TMPDIR/shim.out") &&
		cmp -s "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log" &&
		[ -s "$BATS_TEST_TMPDIR/plain.log" ]
}

@test "a non-blocking socket takes part of a rewritten head (Connection: close): the short count at once, the server gets the head, the same output" {
	CLIENT_TIMEOUT=10
	torn_start
	torn_both close nb 60000 2
	assert_both_ok
	assert_same_output --close-line
	run diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
	assert_success
	run grep -c 'first write: short' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
	[[ "$SHIM_STATS" == *"rewritten=2"* ]]
}

@test "a blocking socket whose rewritten head a signal (no SA_RESTART) interrupts: the short count, as without the library, no wait" {
	CLIENT_TIMEOUT=10
	torn_start
	torn_both close-last block 60000 1
	assert_both_ok
	assert_same_output --close-line
	run diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
	assert_success
	[[ "$SHIM_STATS" == *"rewritten=1"* ]]
}

# The never-hang matrix of a head's first write: the socket blocking (a
# signal interrupts it), non-blocking, or blocking with MSG_DONTWAIT x the
# head written whole or begun by an earlier write (held by the library) x
# the head fits, is torn, or is torn on a reused connection x the rewrite
# (close -> keep-alive with the header first or last, so that the tear
# falls after or before the changed span; HTTP/1.0, a header added).  Every
# cell against the same run without the library.  (HTTPS: not in it, see
# docs/hold.md.)  Tears inside the changed span: tests/unit/test_headmap.c.
@test "torn-head matrix: blocking/non-blocking/MSG_DONTWAIT x whole/split x fits/torn/torn on a reused connection x close first/close last/HTTP/1.0: as without the library" {
	CLIENT_TIMEOUT=10
	torn_start
	local mode split kind pad bad=() cells=0
	for mode in nb dontwait block; do
		for split in "" +split; do
			for kind in close close-last http10; do
				for pad in 0 60000 0,60000; do
					cells=$((cells + 1))
					torn_both "$kind" "$mode$split" "$pad" 2
					torn_same || {
						bad+=("$mode$split/$kind/$pad: plain $PLAIN_STATUS shim $SHIM_STATUS")
						diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" | head -5
						diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log" | head -5
					}
					[[ "$SHIM_STATS" == *"rewritten=2"* ]] ||
						bad+=("$mode$split/$kind/$pad: not rewritten: $SHIM_STATS")
					[ "$pad" != 0,60000 ] || [[ "$SHIM_STATS" == *"reused=1"* ]] ||
						bad+=("$mode$split/$kind/$pad: not reused: $SHIM_STATS")
				done
			done
		done
	done
	echo "$cells cells"
	printf '%s\n' "${bad[@]}"
	[ "$cells" = 54 ] && [ "${#bad[@]}" = 0 ]
}

# A program told that the rest of its head did not go out may send other
# bytes (here the rest of a header value in capitals, from wherever its
# count ended): the library steps aside, the server gets a well-formed head
# of the program's bytes, each once (the same up to case as without the
# library, whose tear falls elsewhere), and the program its answer.
@test "a torn head whose rest the program changes: the library steps aside, the server gets one well-formed head, the same output" {
	CLIENT_TIMEOUT=20
	torn_start
	local kind bad=()
	for kind in close close-last http10; do
		torn_both "$kind" nb+change 60000 1
		sed -i 's/ sha=.*//' "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
		torn_same || {
			bad+=("$kind: plain $PLAIN_STATUS shim $SHIM_STATUS")
			diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
		}
	done
	printf '%s\n' "${bad[@]}"
	[ "${#bad[@]}" = 0 ]
}

# HTTPS (docs/hold.md "HTTPS"): the head goes out as TLS records, and a
# record the socket takes only in part is the engine's, which OpenSSL
# finishes only when it is called again with the same bytes.  The program
# alone gets SSL_ERROR_WANT_WRITE (errno EAGAIN; EINTR on a blocking socket
# a signal interrupts), waits and calls again; with the library it must get
# the same at once and its retry must finish the rewritten head, never a
# wait on the server (tests/servers/tls_torn.py reads only once the first
# SSL_write returned).  tests/clients/tls_torn.c prints what each first
# SSL_write met, whether later calls kept OpenSSL's promise, SSL_pending,
# and the response to its end.

_tls_torn_ready() { [ -s "$BATS_TEST_TMPDIR/torn.port" ] || _pid_gone "$TORN_PID"; }

tls_torn_start() {
	TLS="$BATS_TEST_TMPDIR/tls"
	tls_make "$TLS" || return 1
	rm -f "$BATS_TEST_TMPDIR/go" "$BATS_TEST_TMPDIR/torn.port"
	mkfifo "$BATS_TEST_TMPDIR/go"
	: >"$BATS_TEST_TMPDIR/torn.log"
	python3 "$ROOT/tests/servers/tls_torn.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/torn.port" "$BATS_TEST_TMPDIR/torn.log" "$BATS_TEST_TMPDIR/go" \
		2>"$BATS_TEST_TMPDIR/torn.err" &
	TORN_PID=$!
	wait_until _tls_torn_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/torn.port"
}

# tls_torn_both KIND MODE PAD COUNT VERSION: as torn_both, with tls_torn,
# after one exchange that teaches how the server ends (a TLS close request
# is rewritten only where that is known: docs/tls.md "Ragged closes"; the
# client reads its end); each run is one process
tls_torn_both() {
	local kind="close,$1" mode=$2 pad="0,$3" count=$(($4 + 1)) v=$5
	set -- "$kind" "$mode" "$pad" "$count" "$v"
	: >"$BATS_TEST_TMPDIR/torn.log"
	run_plain "$CLIENTS/tls_torn" "$SERVER_PORT" "$TLS/ca.pem" "$BATS_TEST_TMPDIR/go" "$@"
	cp "$BATS_TEST_TMPDIR/torn.log" "$BATS_TEST_TMPDIR/plain.log"
	: >"$BATS_TEST_TMPDIR/torn.log"
	run_shim "$CLIENTS/tls_torn" "$SERVER_PORT" "$TLS/ca.pem" "$BATS_TEST_TMPDIR/go" "$@"
	cp "$BATS_TEST_TMPDIR/torn.log" "$BATS_TEST_TMPDIR/shim.log"
}

@test "HTTPS: a non-blocking socket takes part of the TLS record of a rewritten head: WANT_WRITE at once, the retry finishes it, as without the library" {
	CLIENT_TIMEOUT=10
	tls_torn_start
	tls_torn_both close nb 60000 1 13
	assert_both_ok
	assert_same_output --close-line
	run diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
	assert_success
	run grep -c 'first SSL_write: -1 WANT_WRITE errno EAGAIN; later calls as promised' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	[[ "$SHIM_STATS" == *"rewritten=1"* ]]
}

# The TLS axis of the never-hang matrix: TLS 1.3 / 1.2 x a non-blocking
# socket / a blocking one a signal interrupts / non-blocking with
# SSL_MODE_ENABLE_PARTIAL_WRITE x the request fits / its head is torn / it
# is torn on a pooled TLS connection handed out (the first request keeps the
# connection alive) x Connection: close first / last / HTTP/1.0 (a header
# added).  Every cell against the same run without the library, the torn
# request rewritten.
@test "HTTPS torn matrix: TLS 1.3/1.2 x non-blocking/blocking+signal/partial writes x fits/torn/torn on a reused connection x close first/close last/HTTP/1.0: as without the library" {
	CLIENT_TIMEOUT=10
	tls_torn_start
	local v mode shape kind bad=() cells=0
	for v in 13 12; do
		for mode in nb block nb+partial; do
			for shape in fits torn reused; do
				for kind in close close-last http10; do
					cells=$((cells + 1))
					local cell="TLS$v/$mode/$shape/$kind"
					case $shape in
					fits) tls_torn_both "$kind" "$mode" 0 1 "$v" ;;
					torn) tls_torn_both "$kind" "$mode" 60000 1 "$v" ;;
					reused) tls_torn_both "keep,$kind" "$mode" 0,60000 2 "$v" ;;
					esac
					torn_same || {
						bad+=("$cell: plain $PLAIN_STATUS shim $SHIM_STATUS")
						diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" | head -5
						diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log" | head -5
					}
					grep -q 'later calls as promised' "$BATS_TEST_TMPDIR/shim.out" ||
						bad+=("$cell: a later SSL_write broke OpenSSL's promise")
					[[ "$SHIM_STATS" == *"rewritten=1"* ]] ||
						bad+=("$cell: not rewritten: $SHIM_STATS")
					[ "$shape" != reused ] || [[ "$SHIM_STATS" == *"tls_reused=1"* ]] ||
						bad+=("$cell: not handed a pooled connection: $SHIM_STATS")
					[ "$shape" != torn ] || grep -q 'first SSL_write: -1 WANT_WRITE' "$BATS_TEST_TMPDIR/plain.out" ||
						bad+=("$cell: the plain run was not torn (the cell tests nothing)")
				done
			done
		done
	done
	echo "$cells cells"
	printf '%s\n' "${bad[@]}"
	[ "$cells" = 54 ] && [ "${#bad[@]}" = 0 ]
}

# SO_SNDTIMEO (docs/hold.md "A head the socket took in part"): a blocking
# send that times out having taken nothing says EAGAIN, not EINTR (no
# signal ran); OpenSSL reports WANT_WRITE with that errno.  Plain and TLS,
# each kind, against the run without the library.  (A timeout whose bytes
# all fell inside the rewritten span, which the library must report as
# none, is the same rule, none_went in shim/conn.c; no test makes the
# kernel tear there on purpose.)
@test "SO_SNDTIMEO: a blocking send that times out on a torn head reads as without the library (a short count, or WANT_WRITE with EAGAIN), plain and HTTPS" {
	CLIENT_TIMEOUT=10
	local kind v bad=()
	torn_start
	for kind in close close-last http10; do
		torn_both "$kind" timeo 60000 1
		torn_same || bad+=("plain/$kind: plain $PLAIN_STATUS shim $SHIM_STATUS")
	done
	_stop_pid "$TORN_PID"
	tls_torn_start
	for v in 13 12; do
		for kind in close close-last http10; do
			tls_torn_both "$kind" timeo 60000 1 "$v"
			torn_same || bad+=("TLS$v/$kind: plain $PLAIN_STATUS shim $SHIM_STATUS")
			grep -q 'first SSL_write: -1 WANT_WRITE errno EAGAIN; later calls as promised' \
				"$BATS_TEST_TMPDIR/shim.out" || bad+=("TLS$v/$kind: $(head -1 "$BATS_TEST_TMPDIR/shim.out")")
			[[ "$SHIM_STATS" == *"rewritten=1"* ]] || bad+=("TLS$v/$kind: not rewritten")
		done
	done
	printf '%s\n' "${bad[@]}"
	[ "${#bad[@]}" = 0 ]
}

# An unfinished head is held (told sent) only where the kernel would surely
# have taken it at once (docs/hold.md "Waits that remain"): on a
# non-blocking socket, an unfinished head larger than the socket's free
# room meets the kernel's own short count, never a "sent" that a later
# flush would have to wait for.  (Before: the middle write was told
# "all", and the next one EAGAIN.)
@test "a non-blocking write of an unfinished head larger than the socket takes: the kernel's short count, as without the library" {
	CLIENT_TIMEOUT=10
	torn_start
	local kind bad=()
	for kind in close close-last http10; do
		torn_both "$kind" nb+pieces 60000 2
		torn_same || {
			bad+=("$kind: plain $PLAIN_STATUS shim $SHIM_STATUS")
			diff "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" | head -5
		}
		grep -q 'middle write: short' "$BATS_TEST_TMPDIR/plain.out" || bad+=("$kind: the plain run was not short")
	done
	printf '%s\n' "${bad[@]}"
	[ "${#bad[@]}" = 0 ]
}

# A torn rewritten head at a seccomp install (docs/owner.md "A sandbox"):
# the rest of the head is written past the library, under a filter that
# fails every other call with EPERM, then the program reads to EOF.
# Alone the server closes after answering the head's Connection: close.
# torn_sandbox KIND: the same output, status and heads at the server
torn_sandbox() {
	CLIENT_TIMEOUT=10
	torn_start
	torn_both "$1" nb+sandbox 60000 1
	cat "$BATS_TEST_TMPDIR/shim.out"
	assert_both_ok
	assert_same_output --close-line
	run diff "$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
	assert_success
}

# the tear falls before the changed Connection line: the server has the
# program's own bytes, its rest carries its own close
@test "a torn rewritten head at a seccomp install, torn before the Connection line: the rest goes past the library, as without it" {
	torn_sandbox close-last
}
