#!/usr/bin/env bats
# A program that sandboxes itself with seccomp (docs/owner.md "A
# sandbox"): a filter or strict mode allows the calls the program makes
# alone, and none of the library's own.  Once it is installed the library
# steps aside for good; what it owed (an EOF it took by rewriting
# "Connection: close", a pooled socket handed out) is settled before the
# call.  tests/clients/sandboxed.c makes connections before its sandbox
# (one parked, one reused, one whose EOF the library owes, one with an
# unfinished request head the library holds, one whose answer is still to
# come) and uses them
# and a new one after: the same output and exit status as alone, and the
# same requests at nginx.

load helpers

setup_file() { suite_setup; }
setup() { nginx_start; }
teardown() { servers_stop; }

# sandbox_case MODE N [VAR=VALUE...]: sandboxed MODE, N requests
sandbox_case() {
	run_both "$2" "${@:3}" "$CLIENTS/sandboxed" "$1" "$SERVER_PORT"
	cat "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_same_output
	assert_equal "requests $SHIM_REQS" "requests $PLAIN_REQS"
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "C: read 0"
	assert_line "E: HTTP/1.1 200 OK, $NGINX_F_SIZE body bytes, then EOF"
	assert_line "F: HTTP/1.1 200 OK, $NGINX_F_SIZE body bytes, then EOF"
	assert_line "done"
}

@test "sandbox: no sandbox, the same steps (the comparison's baseline)" {
	sandbox_case none 6
	# the library was there: A's connection went to the pool and B took
	# it, D took B's or C's
	[ "$SHIM_CONNS" -lt "$PLAIN_CONNS" ] || fail "no reuse: $SHIM_CONNS connections"
}

# a vfork child runs on its parent's memory: its sandbox is not the
# parent's, whose library stays on
@test "sandbox: a vfork child enters strict mode: the parent's library stays on, as alone" {
	sandbox_case none 6
	local none_conns=$SHIM_CONNS
	sandbox_case vfork 6
	# as many connections as with no sandbox at all (stepped aside, the
	# parent would dial D afresh)
	assert_equal "vfork: $SHIM_CONNS connections" "vfork: $none_conns connections"
}

# docker's default profile and systemd's SystemCallFilter allow every call
# of ours: a filter inherited at exec leaves the library on (docs/owner.md
# "A sandbox")
@test "sandbox: a filter inherited at exec (one that refuses ptrace only): the library stays on" {
	sandbox_case inherit 6
	[ "$SHIM_CONNS" -lt "$PLAIN_CONNS" ] || fail "no reuse: $SHIM_CONNS connections"
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "sandboxed (none)"
}

@test "sandbox: a seccomp filter (prctl) that fails every other call with EPERM: every call after it as alone" {
	sandbox_case errno 6
}

@test "sandbox: a seccomp filter (syscall(SYS_seccomp)) that kills on any other call: no SIGSYS, as alone" {
	sandbox_case kill 6
}

@test "sandbox: SECCOMP_MODE_STRICT after connect: read and write only, no SIGKILL, as alone" {
	sandbox_case strict 5
}

# Our log (its getpid) and the stats line at exit (its file's open) are
# calls of ours too: none is made once the filter is in.
@test "sandbox: SECCOMP_MODE_STRICT by syscall(SYS_prctl): no SIGKILL, as alone" {
	sandbox_case strict_raw 5
}

@test "sandbox: strict mode with the debug log on: nothing logged after it, no SIGKILL" {
	sandbox_case strict 5 KEEPALIVE_LOG=debug
	run grep -c "stepping aside once installed" "$BATS_TEST_TMPDIR/shim.err"
	assert_output 1
}

@test "sandbox: a killing filter with KEEPALIVE_STATS_FILE: the exit writes no stats, no SIGSYS" {
	sandbox_case kill 6 KEEPALIVE_STATS_FILE="$BATS_TEST_TMPDIR/stats"
	[ ! -e "$BATS_TEST_TMPDIR/stats" ] || fail "stats written under the filter"
}

# HTTPS: a connection handed out to the program's SSL before the install
# goes on through our engine, which then makes only the calls an SSL
# makes alone on its socket (read, write): tests/clients/tls_sandbox.c
# parks a connection, takes it again with a new SSL, makes a request,
# sandboxes itself, and makes one more that asks to close, reading its
# end (docs/owner.md "A sandbox").
# tls_sandbox_case MODE VERSION [end]: the same output and status as alone
tls_sandbox_case() {
	use_tls "$2"
	run_both 4 "$CLIENTS/tls_sandbox" "$SERVER_PORT" "$NGINX_DIR/tls/ca.pem" "$1" ${3:+"$3"}
	cat "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_same_output
	assert_equal "requests $SHIM_REQS" "requests $PLAIN_REQS"
	# B's SSL was handed A's connection
	[ "$SHIM_CONNS" -lt "$PLAIN_CONNS" ] || fail "no reuse: $SHIM_CONNS connections"
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "B: end read=0 err=6"
	assert_line "done"
}

@test "sandbox: HTTPS, a handed-out connection, then a killing filter (syscall(SYS_seccomp)): its next request through the engine, as alone" {
	nginx_stop
	NGINX_TLS=1 nginx_start
	tls_sandbox_case kill 13
}

@test "sandbox: HTTPS, a handed-out connection, then SECCOMP_MODE_STRICT: its next request through the engine, as alone" {
	nginx_stop
	NGINX_TLS=1 nginx_start
	tls_sandbox_case strict 13
}

@test "sandbox: HTTPS, a handed-out connection, then a filter (prctl) that fails other calls with EPERM: as alone" {
	nginx_stop
	NGINX_TLS=1 nginx_start
	tls_sandbox_case errno 13
}

# the EOF owed after a rewritten request's answer read before the install
@test "sandbox: HTTPS, the answer to a rewritten close request read, then SECCOMP_MODE_STRICT: the end read as alone, no wait" {
	nginx_stop
	NGINX_TLS=1 nginx_start
	CLIENT_TIMEOUT=10 tls_sandbox_case strict 13 end
}

# the same, B's SSL its own engine (the connection not handed out)
@test "sandbox: HTTPS, a fresh connection's rewritten close request answered, then SECCOMP_MODE_STRICT: the end read as alone, no wait" {
	nginx_stop
	NGINX_TLS=1 nginx_start
	use_tls 13
	CLIENT_TIMEOUT=10 run_both 3 KEEPALIVE_LOG=debug "$CLIENTS/tls_sandbox" "$SERVER_PORT" "$NGINX_DIR/tls/ca.pem" strict own
	cat "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_same_output
	# B's request was rewritten (the first, A's, taught how the server ends)
	run grep -c "request rewritten to keep-alive" "$BATS_TEST_TMPDIR/shim.err"
	assert_output 1
}

# A rewritten HTTPS request whose answer is still to come at the install:
# our close_notify and FIN make the server close after answering.  The
# answer reads as alone; its end is a truncation (SSL_ERROR_SSL,
# SSL_shutdown -1) where alone the server's close_notify came
# (docs/owner.md "A sandbox", Left): no wait, no signal.
@test "sandbox: HTTPS, a rewritten close request's answer still to come at SECCOMP_MODE_STRICT: read whole, no wait" {
	nginx_stop
	NGINX_TLS=1 nginx_start
	use_tls 13
	CLIENT_TIMEOUT=10 run_both 4 "$CLIENTS/tls_sandbox" "$SERVER_PORT" "$NGINX_DIR/tls/ca.pem" strict answer
	cat "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	run diff <(grep -v "^B: end\|^B: shutdown" "$BATS_TEST_TMPDIR/plain.out") \
		<(grep -v "^B: end\|^B: shutdown" "$BATS_TEST_TMPDIR/shim.out")
	assert_success
	run tail -4 "$BATS_TEST_TMPDIR/shim.out"
	assert_line "B: HTTP/1.1 200 OK, $NGINX_F_SIZE body bytes"
	assert_line "done"
}

# Other threads doing HTTP while one installs a filter (docs/owner.md "A
# sandbox", other threads at the install): eight threads loop GETs asking
# to close while the main thread installs an allow-all filter 14 ms in,
# five processes.  The library went on rewriting the requests of
# connections made after it had settled every fd (its "divided" state
# stopped pooling, not the rewrite), and a thread whose rewritten head was
# still going out when the settling passed its busy connection by was
# owed an EOF nobody gave once the library stepped aside: those reads
# waited for nginx's idle close (the library before: up to 8 of 8 threads
# timed out, at 5 s, in 5 of 8 processes; alone none).
@test "sandbox: threads looping GETs while another installs a filter: every answer read to its end, as alone (no wait for the server's idle close)" {
	make -s -C "$ROOT" build/clients/sandbox_threads >&2
	run_both 12000 sh -c "for i in 1 2 3 4 5; do '$CLIENTS/sandbox_threads' '$SERVER_PORT' 14 || exit 1; done"
	assert_both_ok
	assert_same_output
	run grep -c "300 read to their end, 0 timed out" "$BATS_TEST_TMPDIR/shim.out"
	assert_output 40
	run grep -c "^filter in" "$BATS_TEST_TMPDIR/shim.out"
	assert_output 5
}
