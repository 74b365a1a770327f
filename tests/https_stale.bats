#!/usr/bin/env bats
# Stale pooled HTTPS connections (docs/design.md §4 over TLS): the scripted
# server over TLS (scripted_start_tls: scripted.py --tls, a test CA made for
# the test) closes, resets or 408s idle connections, or closes one just as
# a request comes in, and a Python HTTPS client making one connection per
# request (tests/clients/pauses.py --ca) must not notice, with the shim as
# without it.  Each asserts what the server saw: its log names every request
# it served, once.  The same stories over plain HTTP: survive.bats.

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

# stale_tls CASE METHOD N MAX_PAUSE_MS [VAR=VALUE...]: the client makes N requests (METHOD
# /r/1 .. /r/N), one TLS connection each, with seeded random pauses of up
# to MAX_PAUSE_MS; without and with the shim: no error, every request
# answered 200, same output (the bodies carry the server's request numbers:
# a request lost or served twice shows), and the server's log holds each
# request exactly once, with its method.
stale_tls() {
	local case="$1" method="$2" n="$3" pause="$4" env=("${@:5}") half
	scripted_start_tls "$case"
	run_both "$n" "${env[@]}" "$PYTHON" "$SCRIPTS/pauses.py" --ca "$SCRIPTED_CA" 127.0.0.1 "$SCRIPTED_PORT" \
		"$n" "$method" 5 "$pause"
	assert_both_ok
	for half in plain shim; do
		assert_equal "$half 200s $(count_matches "^[0-9]+ 200 [0-9]{8}$" "$BATS_TEST_TMPDIR/$half.out")" \
			"$half 200s $n"
	done
	assert_same_output
	assert_equal "plain requests $PLAIN_REQS" "plain requests $n"
	assert_equal "shim requests $SHIM_REQS" "shim requests $n"
	# the shim half's log: each of the N requests once, none twice
	assert_equal "logged $method /r/i $(count_matches "^[0-9]+ $method /r/[0-9]+ HTTP/1\.1$" "$SCRIPTED_LOG")" \
		"logged $method /r/i $n"
	run bash -c "awk '{ print \$3 }' '$SCRIPTED_LOG' | sort -u | wc -l"
	assert_output "$n"
	run bash -c "awk '{ print \$3 }' '$SCRIPTED_LOG' | sort | uniq -d"
	assert_output ""
	# one SSL context, one name: every pooled TLS connection suits every
	# later handshake, including those the shim made for a replay or a POST
	assert_equal "tls_declined=$(stat_value tls_declined)" "tls_declined=0"
}

# the shim really handed out pooled TLS connections (else nothing was tested)
assert_pooled() {
	[ "$(stat_value tls_reused)" -ge 1 ] || fail "no pooled TLS connection handed out: $SHIM_STATS"
	[ "$SHIM_CONNS" -lt "$1" ] || fail "shim conns $SHIM_CONNS, not fewer than $1"
}

# a GET whose pooled connection died under it was sent again (replayed)
assert_replayed() {
	local r
	r="$(stat_value replayed)"
	[ "${r:-0}" -ge 1 ] || fail "nothing replayed: $SHIM_STATS"
}

# POSTs ride pooled TLS connections now, never twice (stale_tls
# checks the server's log)
assert_posts_reused() {
	[ "$(stat_value tls_reused)" -ge 1 ] || fail "no POST on a pooled TLS connection: $SHIM_STATS"
	assert_equal "unvouched=$(stat_value unvouched)" "unvouched=0"
}

# KEEPALIVE_METHODS=idempotent: POSTs never replayed, never on a pooled
# connection it could not vouch for
assert_post_safe() {
	assert_equal "replayed=$(stat_value replayed)" "replayed=0"
	[ "$(stat_value unvouched)" -ge 1 ] || fail "no POST went to a fresh connection: $SHIM_STATS"
}

# ---- (a) the server closes (or 408s) idle connections: a liveness check
# at hand-out sees it (FIN, close_notify), or the stale one is never used

@test "https stale: idle TLS connections closed after 300 ms (close_notify, FIN), GETs with pauses up to 450 ms: no error" {
	stale_tls idle_close300 GET 20 450
	assert_pooled 20
}

@test "https stale: idle TLS connections closed after 300 ms, POSTs: on pooled connections, each served once, no error" {
	# (pauses clear of the 300 ms timer, as in survive.bats)
	stale_tls idle_close300 POST 20 0-150,450-600
	assert_posts_reused
}

@test "https stale: 408 on TLS connections idle 300 ms, GETs: no error, no 408 shown" {
	stale_tls idle_408 GET 20 450
	assert_pooled 20
}

@test "https stale: TLS connections closed after 3 requests without a word, GETs: no error" {
	stale_tls close_after3 GET 30 30
	assert_pooled 30
}

@test "https stale: random resets after responses on TLS connections, GETs: no error" {
	stale_tls random_reset GET 30 30
	assert_pooled 30
}

# ---- (b) the race: the server's timer fires (or its request limit is hit)
# just as the GET arrives on a pooled TLS connection; it reads the request
# and closes (close_notify, FIN), resets, or answers 408: only a replay on
# a fresh TLS connection can save the GET.

@test "https stale race: idle timer fires as the GET arrives (close_notify, FIN): replayed on a fresh TLS connection, no error" {
	stale_tls late_idle_close GET 20 300
	assert_pooled 20
	assert_replayed
}

@test "https stale race: idle timer fires as the GET arrives (RST): replayed, no error" {
	stale_tls late_idle_reset GET 20 300
	assert_pooled 20
	assert_replayed
}

@test "https stale race: a 408 crosses the GET: replayed, the program never sees the 408" {
	stale_tls late_idle_408 GET 20 300
	assert_pooled 20
	assert_replayed
}

@test "https stale race: the 4th request meets a silent close after 3: replayed, and the limit learnt" {
	stale_tls late_close_after3 GET 30 20
	assert_pooled 30
	assert_replayed
	# learnt after two deaths at the same count: no more than a few replays
	[ "$(stat_value replayed)" -le 3 ] || fail "replayed $(stat_value replayed) times: the limit was not learnt"
}

# ---- (c) the race with POSTs, under the old rule (KEEPALIVE_METHODS=
# idempotent): a POST is never written on a pooled connection it cannot
# vouch for, so never replayed, never served twice.  Under the default the
# server reads these POSTs and then fails: never sent again, the program
# sees the failure (tests/methods.bats)

@test "https stale race, POSTs, KEEPALIVE_METHODS=idempotent (close_notify, FIN): never on a pooled connection, each served once, no error" {
	stale_tls late_idle_close POST 20 300 KEEPALIVE_METHODS=idempotent
	assert_post_safe
}

@test "https stale race, POSTs, KEEPALIVE_METHODS=idempotent (RST): each served once, no error" {
	stale_tls late_idle_reset POST 20 300 KEEPALIVE_METHODS=idempotent
	assert_post_safe
}

@test "https stale race, POSTs, KEEPALIVE_METHODS=idempotent (408): each served once, no error, no 408 shown" {
	stale_tls late_idle_408 POST 20 300 KEEPALIVE_METHODS=idempotent
	assert_post_safe
}
