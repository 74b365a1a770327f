#!/usr/bin/env bats
# Kernel AIO the library cannot see (docs/replay.md, "Kernel AIO"): a
# process with an object that defines io_submit and imports no syscall()
# (an older libaio: the system call instruction inline) reads past our
# wrappers, so no EOF may be owed to it: its requests that ask to close
# reach the server as written.  tests/clients/inline_aio_get.c, linked
# with build/clients/libinline_aio.so, reads each response with such an
# io_submit; without the rule its read waited for nginx's idle close.

load helpers

setup_file() { suite_setup; }
setup() { nginx_start; }
teardown() { servers_stop; }

@test "a libaio whose io_submit makes the system call inline: a request that asks to close is not rewritten, the response read by AIO ends as without the library" {
	run_both 2 "$CLIENTS/inline_aio_get" 127.0.0.1 "$SERVER_PORT" 2
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "end 0"
	# nginx saw each request's close: a connection each
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	[ "$(stat_value rewritten)" -eq 0 ] || fail "a request rewritten"
}

@test "the same library opened with dlopen() and reached without dlsym (its constructor registers its functions): not rewritten either, ends as without the library" {
	# the object appears after our scans at start: the program's dlopen
	# leaves it unknown, and unknown owes no EOF until the next dlsym
	run_both 2 "$CLIENTS/inline_aio_plugin_get" 127.0.0.1 "$SERVER_PORT" 2
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line "end 0"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	[ "$(stat_value rewritten)" -eq 0 ] || fail "a request rewritten"
}

@test "Debian's libaio (io_submit through libc's syscall(), which we wrap) is not affected: the same program without the inline object still reuses" {
	# httpget asks to close and reads with read(): rewritten and reused
	run_both 2 "$CLIENTS/httpget" 127.0.0.1 "$SERVER_PORT" /f 2
	assert_both_ok
	[ "$(stat_value rewritten)" -ge 1 ] || fail "nothing rewritten"
}
