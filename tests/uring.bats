#!/usr/bin/env bats
# io_uring (docs/limits.md "io_uring"): the kernel reads and writes a
# connection for the ring past every wrapper, so a kept connection handed
# to a process with a ring could meet the server's idle close where no
# replay follows (the request's EOF reached the program).  Default deny:
# once a ring is known (syscall(SYS_io_uring_setup), or a loaded liburing
# whose system calls are inline), the process is handed nothing and parks
# nothing.  tests/clients/uring_get.c: a GET by write()/read(), close, a
# new connect(), a GET by IORING_OP_SEND/IORING_OP_RECV.

load helpers

setup_file() { suite_setup; }
setup() { nginx_start; }
teardown() { servers_stop; }

@test "io_uring set up by syscall(): the second connect() gets a fresh connection, as without the library" {
	run_both 2 "$CLIENTS/uring_get" 127.0.0.1 "$SERVER_PORT"
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "uring recv whole"
	assert_equal "shim conns $SHIM_CONNS" "shim conns $PLAIN_CONNS"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
}

@test "io_uring set up by a liburing whose system calls are inline: the second connect() gets a fresh connection, as without the library" {
	run_both 2 "$CLIENTS/uring_lib_get" 127.0.0.1 "$SERVER_PORT"
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "uring recv whole"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
}

# A ring set up after a request asking to close went out by write() (the
# library rewrote it to keep the connection): the ring's reads go past us,
# so the EOF we owe never came, and the program waited for the server's
# idle close (the review of invariant 3 at 65e1cbd: 30 s against a 30 s
# keep-alive; nginx's here is 75 s: the client's timeout).  Now the ring's
# setup settles every followed connection as a sandbox does: the server is
# told to close after its answer, the EOF comes as alone.
@test "io_uring set up after a request asking to close went out by write(): the ring's reads end at the server's close, as alone" {
	run_both 1 "$CLIENTS/uring_get" 127.0.0.1 "$SERVER_PORT" late
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "uring recv to the end: 0"
}

@test "without a ring the same two requests share a connection (the rule costs nothing elsewhere)" {
	run_both 2 "$CLIENTS/httpget" 127.0.0.1 "$SERVER_PORT" /f 2
	assert_both_ok
	[ "$SHIM_CONNS" -lt "$PLAIN_CONNS" ] || fail "no reuse: shim $SHIM_CONNS plain $PLAIN_CONNS"
}
