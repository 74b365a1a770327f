#!/usr/bin/env bats
# keepalive --compare (scripts/compare): a user's own command without and
# with the shim, and the library settings it rests on (KEEPALIVE_OBSERVE,
# KEEPALIVE_STATS_FILE).  Real programs against nginx; no timing asserted.
#
# The connection columns are the library's own counters, summed over every
# process of the command tree.  Each curl is its own process and the pool
# is per process: a loop of 20 curls opens 20 connections with the shim
# too.  When processes share a pool, the loop tests below change to 20 -> 1
# (their "with" column of opened/reused).

load helpers

setup_file() { suite_setup; }
setup() { nginx_start; }
teardown() { servers_stop; }

# a shell script running 20 processes of our C client, one request each
# (runs under ASan, unlike curl)
httpget_loop() {
	cat >"$BATS_TEST_TMPDIR/hloop.sh" <<-EOF
		#!/bin/sh
		for i in \$(seq 20); do $CLIENTS/httpget 127.0.0.1 $NGINX_PORT /f 1 || exit 1; done
	EOF
	chmod +x "$BATS_TEST_TMPDIR/hloop.sh"
	echo "$BATS_TEST_TMPDIR/hloop.sh"
}

@test "KEEPALIVE_OBSERVE=1: counts the connects, pools and rewrites nothing (nginx: one connection per request)" {
	curl_ok || skip "curl does not start under ASan"
	local st=$BATS_TEST_TMPDIR/stats
	run_both 20 KEEPALIVE_OBSERVE=1 KEEPALIVE_STATS=0 KEEPALIVE_STATS_FILE="$st" \
		"$CURL" -s -H 'Connection: close' "http://127.0.0.1:$NGINX_PORT/f?[1-20]"
	assert_both_ok
	assert_equal "observed conns $SHIM_CONNS" "observed conns 20"
	assert_equal "$(wc -l <"$st")" 1
	run cat "$st"
	assert_output --regexp '^libkeepalive\[curl:[0-9]+\]: connects=20 fresh=20 reused=0 parked=0 closed=0 dropped=0 rewritten=0 '
	cmp "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
	# the stats went to the file, not to the program's stderr
	assert_equal "$(count_matches libkeepalive "$BATS_TEST_TMPDIR/shim.err")" 0
}

@test "KEEPALIVE_STATS_FILE: one line per process of a command tree, appended" {
	local st=$BATS_TEST_TMPDIR/stats loop
	loop=$(httpget_loop)
	run_shim KEEPALIVE_STATS=0 KEEPALIVE_STATS_FILE="$st" "$loop"
	assert_equal "status $SHIM_STATUS" "status 0"
	# sh and 20 httpget processes; each reused nothing (its own pool)
	assert_equal "$(wc -l <"$st")" 21
	assert_equal "$(count_matches '^libkeepalive\[httpget:[0-9]+\]: connects=1 fresh=1 reused=0 ' "$st")" 20
	assert_equal "$(count_matches libkeepalive "$BATS_TEST_TMPDIR/shim.err")" 0
}

@test "KEEPALIVE_STATS_FILE: a forked child counts only its own connects" {
	local st=$BATS_TEST_TMPDIR/stats
	run_shim KEEPALIVE_STATS=0 KEEPALIVE_STATS_FILE="$st" "$PYTHON" -c '
import os, sys, urllib.request
url = "http://127.0.0.1:%s/f" % sys.argv[1]
def get(): urllib.request.urlopen(url).read()
for _ in range(3): get()
pid = os.fork()
if pid == 0:
    get()
    sys.exit(0)
os.waitpid(pid, 0)' "$NGINX_PORT"
	assert_equal "status $SHIM_STATUS" "status 0"
	run sort "$st"
	assert_equal "${#lines[@]}" 2
	assert_equal "$(count_matches ': connects=3 ' "$st") $(count_matches ': connects=1 ' "$st")" "1 1"
}
