#!/usr/bin/env bats
# Fail open under faults (issue 17): what a program does with a connection
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
