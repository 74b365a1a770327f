#!/usr/bin/env bats
# The KEEPALIVE_* variables.

load helpers

setup_file() { suite_setup; }
setup() { nginx_start; }
teardown() { servers_stop; }

N=50
# the documented fields; the shim may print more, in any order
STATS_FIELDS=(connects reused parked dropped replayed passthrough)

@test "a port not in KEEPALIVE_PORTS is left alone" {
	local other=$((NGINX_PORT + 1))
	run_both $N KEEPALIVE_PORTS="$other,$((NGINX_PORT + 2))-$((NGINX_PORT + 10))" \
		"$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns $N"
	assert_equal "shim requests $SHIM_REQS" "shim requests $N"
	# untouched: nginx was even asked to close (the request was not rewritten)
	assert_equal "$(count_matches '^Connection: close' "$BATS_TEST_TMPDIR/shim.out")" $N
	assert_equal "reused=$(stat_value reused)" "reused=0"
	# "connects" counts handled connects; an unhandled one may be counted as passthrough
	[ "$(stat_value connects)" = 0 ] || [ "$(stat_value passthrough)" -gt 0 ] ||
		fail "stats claim the connects were handled: $SHIM_STATS"
}

@test "KEEPALIVE_PORTS as a list with a range covering the port: reused" {
	run_both $N KEEPALIVE_PORTS="1,$((NGINX_PORT - 1))-$((NGINX_PORT + 1))" \
		"$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_both_ok
	assert_same_output --headers
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $N"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "KEEPALIVE_DISABLE=1 turns the shim off" {
	run_both $N KEEPALIVE_DISABLE=1 "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns $N"
	assert_equal "$(count_matches '^Connection: close' "$BATS_TEST_TMPDIR/shim.out")" $N
}

@test "KEEPALIVE_STATS=1 prints one stats line at exit" {
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_both_ok
	assert_equal "$(count_matches '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err")" 1
	local f
	for f in "${STATS_FIELDS[@]}"; do
		[[ "$SHIM_STATS" =~ ^libkeepalive:.*\ $f=[0-9]+(\ |$) ]] ||
			fail "no $f=<number> in the stats line: $SHIM_STATS"
	done
	# the no-shim half must not print it, of course
	assert_equal "$(count_matches '^libkeepalive: ' "$BATS_TEST_TMPDIR/plain.err")" 0
}

@test "KEEPALIVE_MAX_IDLE=0 keeps nothing idle: no reuse" {
	run_both $N KEEPALIVE_MAX_IDLE=0 "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns $N"
	assert_equal "parked=$(stat_value parked)" "parked=0"
}

@test "KEEPALIVE_MAX_IDLE_PER_HOST=1: one idle connection, still reused" {
	run_both $N KEEPALIVE_MAX_IDLE_PER_HOST=1 "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}
