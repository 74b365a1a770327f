#!/usr/bin/env bats
# Fail open under faults: what a program does with a connection
# behind the shim's back, and a server or a machine that misbehaves, must
# end as it would without the shim.
#  - a child process reads the response to a request we rewrote to
#    keep-alive (the fd leaves our hands across fork/vfork and exec);
#  - poll/epoll on a reused connection whose server reset it (replayed);
#  - a small fd table (RLIMIT_NOFILE) shared with the pool.

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

# ---- a child process reads the response
#
# The child (sed, wc) is exec'd: a new image whose copy of the library
# never saw the connection, so it cannot owe the program an EOF.  Without
# the shim it reads to the server's close at once; with it, it must too
# (nginx would otherwise keep the connection for its 75 s idle timeout:
# CLIENT_TIMEOUT turns that hang into status 124).

@test "child reader: fork + dup2 onto stdin + exec sed, HTTP/1.1 Connection: close: same output, no hang" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$CLIENTS/child_reader" 127.0.0.1 "$NGINX_PORT" /f 1.1 sed -e 's/\r$//'
	assert_both_ok
	assert_same_output --headers
	run grep -c 'the quick brown fox' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 6
}

@test "child reader: fork + dup2 onto stdin + exec wc -l, HTTP/1.0: same output, no hang" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$CLIENTS/child_reader" 127.0.0.1 "$NGINX_PORT" /f 1.0 wc -l
	assert_both_ok
	assert_same_output
}

@test "child reader: dup2 onto stdin + exec wc -l in the program itself, HTTP/1.1 Connection: close: same output, no hang" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$CLIENTS/child_reader" --no-fork 127.0.0.1 "$NGINX_PORT" /f 1.1 wc -l
	assert_both_ok
	assert_same_output
}

@test "child reader: python subprocess.run(sed, stdin=sock) (vfork), HTTP/1.1 Connection: close: same output, no hang" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$PYTHON" "$SCRIPTS/child_reader.py" 127.0.0.1 "$NGINX_PORT" /f 1.1 \
		sed -e 's/\r$//'
	assert_both_ok
	assert_same_output --headers
	run grep -c 'the quick brown fox' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 6
}

@test "child reader: python subprocess.run(wc -l, stdin=sock) (vfork), HTTP/1.0: same output, no hang" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$PYTHON" "$SCRIPTS/child_reader.py" 127.0.0.1 "$NGINX_PORT" /f 1.0 wc -l
	assert_both_ok
	assert_same_output
}

# The server's reset is in before the hand-off by an event, not by the
# library's settle bound: child_reader.py --warm starts its child only once
# its socket has left ESTABLISHED (docs/tests.md).  A build without the
# hand-off's settle fails it: sed reads ECONNRESET, replayed=0.
@test "child reader on a reused connection the server resets: the child still gets the response (replayed before it leaves our hands)" {
	scripted_start late_reset_after1
	CLIENT_TIMEOUT=10 run_both 2 "$PYTHON" "$SCRIPTS/child_reader.py" --warm 127.0.0.1 "$SCRIPTED_PORT" / 1.1 \
		sed -e 's/\r$//'
	assert_both_ok
	assert_same_output --headers
	run grep -c '^00000002$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	# the program's own stats line (the child's, a new image, has its own)
	[[ "$SHIM_STATS" == *" reused=1 "*" replayed=1 "* ]]
}

# ---- readiness on a connection the shim replays
#
# tests/servers/cases/late_reset_after1 answers the first request on a
# connection and resets it when a second arrives.  Without the shim every
# request has its own connection; with it every reused connection meets
# the reset and its request is replayed on a fresh one.  poll and epoll
# must report what the program would see on that fresh connection, never
# the reset (EPOLLERR|EPOLLHUP): ab counts it as an exception, starts
# another connection and stops waiting for the one it thinks failed.

# ab_counts FILE: "complete=N failed=M" from ab's report
ab_counts() {
	echo "complete=$(sed -nE 's/^Complete requests: +([0-9]+)/\1/p' "$1")" \
		"failed=$(sed -nE 's/^Failed requests: +([0-9]+)/\1/p' "$1")"
}

@test "ab -n 4 -c 1 against a server that resets every second request on a connection: same counts as without the shim" {
	scripted_start late_reset_after1
	run_both 4 ab -s 3 -n 4 -c 1 "http://127.0.0.1:$SCRIPTED_PORT/"
	assert_both_ok
	assert_equal "without: $(ab_counts "$BATS_TEST_TMPDIR/plain.out")" "without: complete=4 failed=0"
	assert_equal "with: $(ab_counts "$BATS_TEST_TMPDIR/shim.out")" "with: complete=4 failed=0"
	[ "$(stat_value replayed)" -ge 1 ] # the resets happened, and were replayed
}

@test "ab -n 2000 -c 8 against a server that resets every second request on a connection: same counts as without the shim" {
	scripted_start late_reset_after1
	CLIENT_TIMEOUT=60 run_both 2000 ab -s 3 -n 2000 -c 8 "http://127.0.0.1:$SCRIPTED_PORT/"
	assert_both_ok
	assert_equal "without: $(ab_counts "$BATS_TEST_TMPDIR/plain.out")" "without: complete=2000 failed=0"
	assert_equal "with: $(ab_counts "$BATS_TEST_TMPDIR/shim.out")" "with: complete=2000 failed=0"
	[ "$(stat_value replayed)" -ge 100 ]
}

@test "a poll() client that treats POLLERR/POLLHUP as fatal, reused connections reset: no error, same output" {
	scripted_start late_reset_after1
	run_both 10 "$CLIENTS/ready_fatal" poll 127.0.0.1 "$SCRIPTED_PORT" / 10
	assert_both_ok
	assert_same_output --headers
	[ "$(stat_value replayed)" -ge 1 ]
}

@test "a non-blocking select() client, reused connections reset: no error, same output" {
	# select() has no error bits: a reset connection is reported readable
	# and the read that follows replays it (then EAGAIN: select again)
	scripted_start late_reset_after1
	run_both 10 "$CLIENTS/ready_fatal" select 127.0.0.1 "$SCRIPTED_PORT" / 10
	assert_both_ok
	assert_same_output --headers
	[ "$(stat_value replayed)" -ge 1 ]
}

@test "Perl LWP (a blocking select() client), reused connections reset: same output" {
	scripted_start late_reset_after1
	run_both 6 perl "$SCRIPTS/lwp_get.pl" "http://127.0.0.1:$SCRIPTED_PORT/" 6
	assert_both_ok
	# the one difference: the server says nothing of closing, and LWP asked
	# to close: with the library it reads "close" (docs/replay.md, "A
	# closing answer")
	assert_equal "plain: $(count_matches ' \[\] ne-close ' "$BATS_TEST_TMPDIR/plain.out")" "plain: 6"
	assert_equal "shim: $(count_matches ' \[close\] eq-close ' "$BATS_TEST_TMPDIR/shim.out")" "shim: 6"
	sed 's/ \[close\] eq-close / [] ne-close /' "$BATS_TEST_TMPDIR/shim.out" >"$BATS_TEST_TMPDIR/shim.out.cmp"
	mv "$BATS_TEST_TMPDIR/shim.out.cmp" "$BATS_TEST_TMPDIR/shim.out"
	assert_same_output
	[ "$(stat_value replayed)" -ge 1 ]
}

@test "an edge-triggered epoll client that treats EPOLLERR/EPOLLHUP as fatal, reused connections reset: no error, same output" {
	scripted_start late_reset_after1
	run_both 10 "$CLIENTS/ready_fatal" epoll-et 127.0.0.1 "$SCRIPTED_PORT" / 10
	assert_both_ok
	assert_same_output --headers
	[ "$(stat_value replayed)" -ge 1 ]
}

# ---- a small fd table shared with the pool
#
# The program's fd budget (the soft RLIMIT_NOFILE, here set by `ulimit -n`
# in the shell that execs it) is the program's: the pool keeps a sixteenth
# of it at its top, and an fd-making call that fails with EMFILE while the
# pool holds sockets gets them back and one more try.  The scripted server
# listens on 127.0.0.1 .. 127.0.0.100, one destination each.

# "${ULIMITED[@]}" N CMD...: CMD with its soft fd limit at N (bash runs
# under the shim too, and execs CMD)
ULIMITED=(bash -c 'ulimit -S -n "$0" && exec "$@"')

@test "ulimit -n 32: GETs to 20 destinations, then 25 files: all 25 opened, as without the shim" {
	SCRIPTED_MORE_V4=99 # kept for the restarts of run_both
	scripted_start keepalive
	run_both 20 "${ULIMITED[@]}" 32 "$PYTHON" "$SCRIPTS/fd_pressure.py" dests "$SCRIPTED_PORT" 20 25
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "$(printf 'responses=20\nfiles=25')"
}

@test "ulimit -n 32: a C program, GETs to 20 destinations, then fopen() until EMFILE: as many as without the shim" {
	SCRIPTED_MORE_V4=19 # kept for the restarts of run_both
	scripted_start keepalive
	run_both 20 "${ULIMITED[@]}" 32 "$CLIENTS/fd_fopen" "$SCRIPTED_PORT" 20
	assert_both_ok
	assert_same_output
	run grep -c '^files=[0-9]* error=Too many open files$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
}

@test "ulimit -n 64: GETs to 100 destinations, then 50 files: all 50 opened, as without the shim" {
	SCRIPTED_MORE_V4=99 # kept for the restarts of run_both
	scripted_start keepalive
	run_both 100 "${ULIMITED[@]}" 64 "$PYTHON" "$SCRIPTS/fd_pressure.py" dests "$SCRIPTED_PORT" 100 50
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "$(printf 'responses=100\nfiles=50')"
}

@test "ulimit -n 64: 20 GETs, then files until EMFILE: as many as without the shim" {
	scripted_start keepalive
	run_both 20 "${ULIMITED[@]}" 64 "$PYTHON" "$SCRIPTS/fd_pressure.py" until-emfile "$SCRIPTED_PORT" 20
	assert_both_ok
	assert_same_output
	run grep -c '^files=[0-9]* error=Too many open files$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	# and the pool was used before the files took the fds back
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "ulimit -n 32: a reused connection held open, then files until EMFILE: as many as without the shim" {
	# under the shim the held connection came from the pool and keeps its
	# hidden fd (its twin, conn.c) while in use: EMFILE must get it back
	scripted_start keepalive
	run_both 4 "${ULIMITED[@]}" 32 "$PYTHON" "$SCRIPTS/fd_pressure.py" held "$SCRIPTED_PORT" 3
	assert_both_ok
	assert_same_output
	run grep -c '^files=[0-9]* error=Too many open files$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "ulimit -n 32: 16 python threads x 50 GETs over 20 destinations: no EMFILE, as without the shim" {
	SCRIPTED_MORE_V4=19 # kept for the restarts of run_both
	scripted_start keepalive
	CLIENT_TIMEOUT=60 run_both 800 "${ULIMITED[@]}" 32 "$PYTHON" "$SCRIPTS/fd_pressure.py" threads "$SCRIPTED_PORT" 16 50 20
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "errors=0"
}

# docs/limits.md: our hidden fds live above the program's soft limit, so
# the fd-making calls we never see (mkstemp, signalfd, inotify_init, an
# fd received over SCM_RIGHTS) find every number below it, as alone; the
# program's getrlimit and its children's limit are its own.
# fd_limit_both CALLS: fd_limit at a soft limit of 64, 3 rounds of 8
# connections, then CALLS in turn until one fails, without and with us
fd_limit_both() {
	[ "$(ulimit -Hn)" -ge 200 ] || skip "hard RLIMIT_NOFILE below 200"
	nginx_start
	run_both 24 "$CLIENTS/fd_limit" 127.0.0.1 "$NGINX_PORT" 64 8 3 "$1"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "responses=24"
	assert_line "getrlimit: 64 $(ulimit -Hn)"
	assert_line "fork+exec: 64 $(ulimit -Hn)"
	assert_line "posix_spawn: 64 $(ulimit -Hn)"
	assert_line "system: 64 $(ulimit -Hn)"
	assert_line "popen: 64 $(ulimit -Hn)"
	assert_line --regexp '^fds=[0-9]+ failed=[a-z_]+ error=(Too many open files|ctrunc) highest=63$'
	# the pool was used, and kept: nothing of it was given back
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 24"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 8"
}

@test "setrlimit 64, 8 pooled connections, then mkstemp/signalfd/inotify_init/SCM_RIGHTS (calls we never see) until one fails: as many fds, the same failure, the limit its own and its children's" {
	fd_limit_both mkstemp,signalfd,inotify_init,scm_rights
}

@test "setrlimit 64, 8 pooled connections, then eventfd/memfd_create/mkstemp until one fails: as many fds, the same failure, the limit its own and its children's" {
	fd_limit_both eventfd,memfd_create,mkstemp
}

# The class, not the list: every fd-making call alone, at three soft
# limits, after 1 and 8 pooled connections, without and with us: the same
# output (the count of fds, the call that failed and how, the highest
# number, the limit the program and its children see), every pair.
@test "fd limit matrix: 12 fd-making calls x soft limits 16/64/256 x 1 or 8 pooled connections: the same fds, the same failure, the same limits as without the shim" {
	[ "$(ulimit -Hn)" -ge 400 ] || skip "hard RLIMIT_NOFILE below 400"
	nginx_start
	local call soft conns bad= cells=0
	for call in mkstemp signalfd inotify_init eventfd memfd_create scm_rights tmpfile openat2 pipe dup socket timerfd_create; do
		for soft in 16 64 256; do
			for conns in 1 8; do
				run_both "$conns" "$CLIENTS/fd_limit" 127.0.0.1 "$NGINX_PORT" "$soft" "$conns" 1 "$call"
				cells=$((cells + 1))
				if [ "$PLAIN_STATUS/$SHIM_STATUS" != 0/0 ] ||
					! cmp -s "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" ||
					[ "$SHIM_CONNS" != "$conns" ]; then
					bad+="$call soft=$soft conns=$conns: plain $(tail -1 "$BATS_TEST_TMPDIR/plain.out"), shim $(tail -1 "$BATS_TEST_TMPDIR/shim.out") (server conns $SHIM_CONNS)"$'\n'
				fi
			done
		done
	done
	assert_equal "cells $cells, differing: ${bad:-none}" "cells 72, differing: none"
}

@test "a program that lowers its own RLIMIT_NOFILE (setrlimit 64) before its requests: still pooled" {
	scripted_start keepalive
	run_both 10 "$PYTHON" "$SCRIPTS/fd_pressure.py" setrlimit "$SCRIPTED_PORT" 64 10
	assert_both_ok
	assert_same_output
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 10"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

# fork()/system() while a request on a reused connection is being worked
# on: they return as they would without the library, never after waiting
# for the server's answer (the server takes 3 s)
@test "fork() during a request on a reused connection does not wait for the server" {
	scripted_start slow3
	run_both 2 "$CLIENTS/fork_during" 127.0.0.1 "$SCRIPTED_PORT" fork
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "answer there when fork returned: no"
}

@test "system() during a request on a reused connection does not wait for the server" {
	scripted_start slow3
	run_both 2 "$CLIENTS/fork_during" 127.0.0.1 "$SCRIPTED_PORT" system
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "answer there when system returned: no"
}
