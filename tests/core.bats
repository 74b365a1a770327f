#!/usr/bin/env bats
# Unmodified clients that open one connection per request: under the shim
# the server must see ONE connection, and the program must print exactly
# what it prints without the shim.

load helpers

setup_file() { suite_setup; }
setup() { nginx_start; }
teardown() { servers_stop; }

N=200

# the checks every "one connection per request" client shares
assert_reused_all() {
	assert_both_ok
	assert_equal "plain requests $PLAIN_REQS" "plain requests $1"
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $1"
	assert_equal "shim requests $SHIM_REQS" "shim requests $1"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "ruby Net::HTTP.get_response: 200 requests on one connection, same output" {
	run_both $N "$RUBY" "$SCRIPTS/get_response.rb" "http://127.0.0.1:$NGINX_PORT/f" $N
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	assert_reused_all $N
}

@test "ruby Net::HTTP.start per request: 200 requests on one connection, same output" {
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/nethttp_fresh.rb" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	assert_reused_all $N
}

@test "ruby TCPSocket HTTP/1.0 read to EOF: 200 requests on one connection, same output" {
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/tcpsocket_http10.rb" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_equal "$(count_matches '^HTTP/1\.1 200 OK' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused_all $N
}

@test "python urllib.request.urlopen: 200 requests on one connection, same output" {
	run_both $N "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	assert_reused_all $N
}

@test "C httpget (blocking, read to EOF): 200 requests on one connection, same output" {
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_equal "$(count_matches '^HTTP/1\.1 200 OK' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused_all $N
}

@test "curl -H 'Connection: close', 200 URLs in one process: one connection, same output" {
	# curl hangs at start-up (setlocale lock) whenever libasan is preloaded,
	# with or without our library: the sanitizer run cannot include it
	curl_ok || skip "curl cannot run with libasan preloaded"
	run_both $N "$CURL" -sS -H 'Connection: close' "http://127.0.0.1:$NGINX_PORT/f?n=[1-$N]"
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	assert_reused_all $N
}

@test "node http.get with agent: false (libuv, epoll, syscall close): 200 requests on one connection, same output" {
	run_both $N node "$SCRIPTS/node_get.js" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_equal "$(count_matches '^== [0-9]+ 200 ' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output
	assert_reused_all $N
}

@test "O_NONBLOCK before connect (poll, EINPROGRESS): one connection, same output" {
	run_both $N "$CLIENTS/nonblock" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_equal "$(count_matches '^HTTP/1\.1 200 OK' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused_all $N
}

# A non-blocking connect handed a pooled connection answers as the kernel
# would for a fresh one: EINPROGRESS, then writable, SO_ERROR 0, a second
# connect() 0 and a third EISCONN (an instant 0 made curl -Z's parallel
# queue stall).
@test "O_NONBLOCK connect handed a pooled connection: EINPROGRESS, then 0, then EISCONN, as the kernel answers" {
	run_both $N NB_AGAIN=1 "$CLIENTS/nonblock" 127.0.0.1 "$NGINX_PORT" /f $N
	assert_equal "$(count_matches '^connect: Operation now in progress, again: 0, third: Transport endpoint is already connected' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused_all $N
}

@test "IPv6 [::1]: one connection, same output" {
	run_both $N "$CLIENTS/httpget" ::1 "$NGINX_PORT" /f $N
	assert_equal "$(count_matches '^HTTP/1\.1 200 OK' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused_all $N
}

@test "100 KiB body over many reads: one connection, same output" {
	run_both 20 "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /big 20
	assert_equal "$(count_matches '^Content-Length: 102400' "$BATS_TEST_TMPDIR/plain.out")" 20
	assert_same_output --headers
	assert_reused_all 20
}
