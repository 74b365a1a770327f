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
