#!/usr/bin/env bats
# A child that reads an inherited socket by number (docs/hold.md "A child
# that reads an inherited socket"): bash's /dev/tcp with "Connection:
# close", the answer read to EOF by a forked child (a subshell, an exec'd
# python3, a C child) that never moves it onto its stdin.  Alone the
# server's close ends the read at once; with the library the request went
# out rewritten to keep-alive, so only our FIN makes the server close, and
# the parent, who frames, never reads.  nginx keeps an idle connection
# 75 s: CLIENT_TIMEOUT turns a wait for it into status 124.  The child
# reads the server's bytes as they are, without the close line the
# library's reads would show: compared without Connection, Keep-Alive and
# Date (--headers).

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

child_case() {
	CLIENT_TIMEOUT=10 run_both 1 "$@"
	assert_both_ok
	assert_same_output --headers
	run grep -c 'the quick brown fox' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 6
}

@test "child fin: bash /dev/tcp, a subshell reads fd 3 with read -u: same output, EOF without the server's idle timeout" {
	nginx_start
	child_case bash "$SCRIPTS/child_fd.sh" sub "$NGINX_PORT" /f
	run tail -n 1 "$BATS_TEST_TMPDIR/shim.out"
	assert_output 'subshell: EOF'
}

@test "child fin: bash /dev/tcp, an exec'd python3 reads fd 3 with os.read: same output, EOF without the server's idle timeout" {
	nginx_start
	child_case bash "$SCRIPTS/child_fd.sh" py "$NGINX_PORT" /f
	run tail -n 1 "$BATS_TEST_TMPDIR/shim.out"
	assert_output 'python: EOF'
}

@test "child fin: bash /dev/tcp, an exec'd python3 waits in select() on fd 3 before each read: same output, EOF without the idle timeout" {
	nginx_start
	child_case bash "$SCRIPTS/child_fd.sh" pypoll "$NGINX_PORT" /f
	run tail -n 1 "$BATS_TEST_TMPDIR/shim.out"
	assert_output 'python: EOF'
}

@test "child fin: C fork(), the child reads the socket by number to EOF, the parent closes its copy: same output, no hang" {
	nginx_start
	child_case "$CLIENTS/child_reader" --child-reads 127.0.0.1 "$NGINX_PORT" /f 1.1 -
}

# The control: bash reads its own socket through our wrappers (framed: the
# owed EOF at the answer's end, the close line shown).
@test "child fin: bash /dev/tcp read by bash itself (the control): same output" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 bash "$SCRIPTS/child_fd.sh" self "$NGINX_PORT" /f
	assert_both_ok
	assert_same_output --headers
}

# An HTTP/1.0 answer with a Content-Length and no Connection header to a
# request that asked to close, which we rewrote: the server keeps the
# connection open (30 s); alone it was asked to close and did.
@test "child fin: an HTTP/1.0 answer without keep-alive from a server that keeps the connection: EOF at the answer's end, as alone" {
	scripted_start http10_open
	CLIENT_TIMEOUT=10 run_both 1 bash "$SCRIPTS/child_fd.sh" self "$SCRIPTED_PORT" /
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\n00000001\nbash: EOF'
}

@test "child fin: C fork(), the child poll()s the socket before each read to EOF: same output, no hang" {
	nginx_start
	child_case "$CLIENTS/child_reader" --child-polls 127.0.0.1 "$NGINX_PORT" /f 1.1 -
}
