#!/usr/bin/env bats
# keepalive --compare (scripts/compare): a user's own command without and
# with the shim, and the library settings it rests on (KEEPALIVE_OBSERVE,
# KEEPALIVE_STATS_FILE).  Real programs against nginx; no timing asserted.
#
# The connection columns are the library's own counters, summed over every
# process of the command tree.  The "with" side runs through the wrapper,
# so the processes of a loop share one pool (the broker): a loop of 20
# curls opens 20 connections without the shim and one or two with it.

load helpers
bats_require_minimum_version 1.5.0

setup_file() { suite_setup; }

# the broker's answer is awaited up to 10 s (not 100 ms): on a loaded
# machine, with the files running in parallel, a late answer makes a
# process dial, and the connection counts would measure the scheduler
export KEEPALIVE_BROKER_TIMEOUT_MS=10000
setup() { nginx_start; }
teardown() { servers_stop; }

# assert_few_with N MAX: N connections opened without the shim, at most MAX
# with it (the processes share one pool), and the rest reused
assert_few_with() {
	local off on roff ron
	read -r off on <<<"$(row 'TCP connections opened')"
	read -r roff ron <<<"$(row 'connections reused')"
	echo "opened $off $on, reused $roff $ron"
	[ "$off" -eq "$1" ] && [ "$on" -ge 1 ] && [ "$on" -le "$2" ]
	[ "$roff" -eq 0 ] && [ "$ron" -eq $(($1 - on)) ]
}

COMPARE="${COMPARE:-$ROOT/scripts/keepalive}"

# a shell script running 20 curl processes, one request each
curl_loop() {
	cat >"$BATS_TEST_TMPDIR/loop.sh" <<-EOF
		#!/bin/sh
		for i in \$(seq 20); do $CURL -s http://127.0.0.1:$NGINX_PORT/f || exit 1; done
	EOF
	chmod +x "$BATS_TEST_TMPDIR/loop.sh"
	echo "$BATS_TEST_TMPDIR/loop.sh"
}

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

compare() { timeout 300 "$COMPARE" --compare --ports "$NGINX_PORT" "$@"; }

# the table's row NAME: prints "<without> <with>"
row() { awk -v n="$1" 'index($0, n " ") == 1 { split(substr($0, length(n) + 1), f, " "); print f[1], f[2] }' <<<"$output"; }

# the TIME_WAIT row: no more with the shim than without, over all rounds
# (a row shows one number when the rounds agree, else each round's)
assert_tw_not_more() {
	local tw
	read -r -a tw <<<"$(row 'TIME_WAIT left behind')"
	[[ ${tw[0]} =~ ^[0-9,]+$ && ${tw[1]} =~ ^[0-9,]+$ ]] || fail "TIME_WAIT row: ${tw[*]}"
	local off=$((${tw[0]//,/+})) on=$((${tw[1]//,/+}))
	[[ ${tw[0]} == *,* ]] || off=$((off * ROUNDS))
	[[ ${tw[1]} == *,* ]] || on=$((on * ROUNDS))
	((on <= off)) || fail "more TIME_WAIT with the shim: ${tw[*]}"
}

@test "KEEPALIVE_OBSERVE=1: counts the connects, pools and rewrites nothing (nginx: one connection per request)" {
	local st=$BATS_TEST_TMPDIR/stats
	# one process, a socket per request, each asking "Connection: close"
	run_both 20 KEEPALIVE_OBSERVE=1 KEEPALIVE_STATS=0 KEEPALIVE_STATS_FILE="$st" \
		"$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f 20
	assert_both_ok
	assert_equal "observed conns $SHIM_CONNS" "observed conns 20"
	assert_equal "$(wc -l <"$st")" 1
	run cat "$st"
	assert_output --regexp '^libkeepalive\[httpget:[0-9]+\]: connects=20 fresh=20 reused=0 parked=0 closed=0 dropped=0 rewritten=0 '
	# not rewritten: nginx answered "Connection: close" every time
	assert_equal "$(count_matches '^Connection: close' "$BATS_TEST_TMPDIR/shim.out")" 20
	assert_same_output --headers
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

@test "keepalive --compare --help: says the command runs 2 x (rounds + warm-up) times" {
	run "$COMPARE" --compare --help
	assert_success
	assert_output --partial 'CMD runs 2 x (rounds + warm-up) times'
	run "$COMPARE" --compare -r 0 true
	assert_failure 2
}

@test "keepalive --compare, 20 curl processes: the table; 20 connections without, 1-2 with (one pool for the tree), TIME_WAIT no higher, same output" {
	curl_ok || skip "curl does not start under ASan"
	local loop
	loop=$(curl_loop)
	ROUNDS=2
	run compare -r $ROUNDS --warmup 1 --same-output "$loop"
	assert_success
	assert_line "keepalive --compare: 2 interleaved rounds (after 1 warm-up), pooled ports $NGINX_PORT"
	assert_line "command: $loop"
	assert_line --regexp '^ +without +with the shim *$'
	assert_line --regexp '^wall time, median \(s\) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +speed-up [0-9]+\.[0-9]{2}x '
	assert_line --regexp '^wall time, min-max \(s\) +[0-9.]+-[0-9.]+ +[0-9.]+-[0-9.]+ *$'
	assert_line --regexp '^CPU user\+sys, median \(s\) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} *$'
	# the curls share the wrapper's pool (see the top)
	assert_few_with 20 2
	assert_equal "processes $(row processes)" "processes 21 21"
	assert_equal "exit $(row 'exit status')" "exit 0 0"
	assert_equal "same $(row 'same stdout')" "same yes "
	# new TIME_WAIT sockets on nginx's port only (other tests make theirs)
	assert_tw_not_more
}

@test "keepalive --compare, one curl over 20 URLs: 20 connections without, 1 with, 19 reused" {
	curl_ok || skip "curl does not start under ASan"
	ROUNDS=1
	run compare -r $ROUNDS --same-output "$CURL" -s -H 'Connection: close' "http://127.0.0.1:$NGINX_PORT/f?[1-20]"
	assert_success
	assert_equal "opened $(row 'TCP connections opened')" "opened 20 1"
	assert_equal "reused $(row 'connections reused')" "reused 0 19"
	assert_equal "processes $(row processes)" "processes 1 1"
	assert_equal "same $(row 'same stdout')" "same yes "
	assert_tw_not_more
}

@test "keepalive --compare, a shell loop of our C client (also under ASan): counts summed over the tree" {
	local loop
	loop=$(httpget_loop)
	run compare -r 1 "$loop"
	assert_success
	assert_few_with 20 2
	assert_equal "processes $(row processes)" "processes 21 21"
	assert_equal "exit $(row 'exit status')" "exit 0 0"
	assert_equal "same $(row 'same stdout')" "same - "
}

@test "keepalive --compare --json: valid JSON, hyperfine-like fields, the library's counts" {
	local loop
	loop=$(httpget_loop)
	# (no --same-output: our client prints the headers, Date among them)
	run compare -r 2 --json "$loop"
	assert_success
	echo "$output" | "$PYTHON" -m json.tool >/dev/null
	run "$PYTHON" -c '
import json, sys
d = json.loads(sys.stdin.read())
off, on = d["results"]
for r in off, on:
    assert len(r["times"]) == 2 and r["min"] <= r["median"] <= r["max"], r
    assert r["user"] >= 0 and r["system"] >= 0 and r["mean"] > 0
print(d["rounds"], off["label"], on["label"], off["exit_codes"], on["exit_codes"],
      off["connections_opened"], on["connections_opened"], on["connections_reused"],
      off["processes"], d["same_output"], len(d["speedup_per_round"]), d["speedup"] > 0)' <<<"$output"
	assert_success
	assert_output --regexp '^2 without with \[0, 0\] \[0, 0\] \[20, 20\] \[[12], [12]\] \[(19|18), (19|18)\] \[21, 21\] None 2 True$'
}

@test "keepalive --compare, a failing command: both exit statuses, the table still printed, non-zero exit" {
	local loop
	loop=$(httpget_loop)
	printf 'echo it broke >&2\nexit 3\n' >>"$loop"
	run compare -r 2 "$loop"
	assert_failure 1
	assert_equal "exit $(row 'exit status')" "exit 3 3"
	assert_few_with 20 2
	assert_line --regexp '^wall time, median \(s\) +[0-9.]+ +[0-9.]+ +speed-up '
	assert_line --partial "exit status 3 without the shim; its stderr ends:"
	assert_line --partial "exit status 3 with the shim; its stderr ends:"
	assert_line "  it broke"
}

@test "keepalive --compare --plot: a PNG of the rounds" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "gnuplot under ASan: nothing of ours to check"
	run compare -r 2 --plot "$BATS_TEST_TMPDIR/c.png" "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f 5
	assert_success
	assert_line "plot: $BATS_TEST_TMPDIR/c.png"
	assert_equal "opened $(row 'TCP connections opened')" "opened 5 1"
	run file "$BATS_TEST_TMPDIR/c.png"
	assert_output --partial 'PNG image data'
}

@test "keepalive --compare --same-output: a difference is shown and fails the run" {
	# a command that prints which side it is on
	run compare -r 3 --same-output sh -c 'echo "observing: $KEEPALIVE_OBSERVE"'
	assert_failure 1
	assert_line --regexp '^same stdout +NO \(3 of 3 rounds\)$'
	assert_equal "exit $(row 'exit status')" "exit 0 0"
}

@test "keepalive --compare: connections per destination without and with; ports that are not pooled are said, and no speed-up is claimed for them" {
	curl_ok || skip "curl does not start under ASan"
	command -v strace >/dev/null || skip "no strace: no census"
	local loop
	loop=$(curl_loop)
	run compare -r 1 "$loop"
	assert_success
	assert_line "TCP connections per destination (one more run each side, under strace):"
	assert_equal "$(row "  127.0.0.1:$NGINX_PORT")" "20 1"
	refute_output --partial "not pooled"
	# the same script with another port pooled: every connection said
	run timeout 300 "$COMPARE" --compare --ports 1 -r 1 "$loop"
	assert_success
	assert_line --regexp "^  127\.0\.0\.1:$NGINX_PORT +20 +20 +port $NGINX_PORT not pooled\$"
	assert_line "note: 20 of its connections went to ports that are not pooled (--ports, KEEPALIVE_PORTS)"
	assert_line --partial "note: no connection to the pooled ports (1)"
}

@test "keepalive --compare usage errors: the usage on stderr, exit 2, nothing on stdout; --help on stdout" {
	local args
	for args in "--nosuch echo" "" "--runs x echo"; do
		# shellcheck disable=SC2086
		run --separate-stderr "$COMPARE" --compare $args
		assert_equal "[$args] status $status stdout [$output]" "[$args] status 2 stdout []"
		[ -n "$stderr" ]
	done
	run --separate-stderr "$COMPARE" --compare --help
	assert_success
	assert_output --partial "keepalive --compare [options] CMD"
	assert_equal "$stderr" ""
}

@test "keepalive --compare without strace: a line says the per-destination rows are missing" {
	curl_ok || skip "curl does not start under ASan"
	command -v strace >/dev/null || skip "needs strace to hide"
	# a PATH with every command of the run but strace
	local bin="$BATS_TEST_TMPDIR/bin" c
	mkdir "$bin"
	for c in $(compgen -c | sort -u); do
		[ "$c" = strace ] && continue
		c=$(type -P "$c") && ln -sf "$c" "$bin/" 2>/dev/null || true
	done
	run env PATH="$bin" "$COMPARE" --compare --runs 1 --ports "$NGINX_PORT" "$(curl_loop)"
	assert_success
	assert_line --partial "note: strace not installed"
	refute_line --partial "TCP connections per destination"
}

@test "keepalive --compare from make install with BINDIR and HELPERDIR apart: finds its wrapper and library" {
	curl_ok || skip "curl does not start under ASan"
	local dest="$BATS_TEST_TMPDIR/dest"
	make -s -C "$ROOT" install DESTDIR="$dest" PREFIX=/opt/ka BINDIR=/opt/bin2 HELPERDIR=/opt/helpers LIBDIR=/opt/libs >/dev/null
	run env -u KEEPALIVE_PRELOAD "$dest/opt/bin2/keepalive" --compare --runs 1 --ports "$NGINX_PORT" "$(curl_loop)"
	assert_success
	assert_few_with 20 2
	run env -u KEEPALIVE_PRELOAD "$dest/opt/bin2/keepalive" --version
	assert_line --index 1 "library: $dest/opt/libs/libkeepalive.so"
	make -s -C "$ROOT" uninstall DESTDIR="$dest" PREFIX=/opt/ka BINDIR=/opt/bin2 HELPERDIR=/opt/helpers LIBDIR=/opt/libs >/dev/null
	# nothing it wrote, no directory it made for it
	run find "$dest" -mindepth 1 \( ! -type d -o -name bin2 -o -name helpers -o -name libs -o -name 'man[17]' -o -name systemd \)
	assert_output ""
}
