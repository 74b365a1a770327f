#!/usr/bin/env bats
# Responses whose end is not "Content-Length bytes of body": the shim must
# find the end (and give the program its EOF there), reuse the connection
# when the response allows it, and never when it does not.  The clients read
# to EOF, so a missed end is a hang (status 124 from timeout).

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

N=50

assert_reused() {
	assert_both_ok
	assert_equal "plain requests $PLAIN_REQS" "plain requests $N"
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $N"
	assert_equal "shim requests $SHIM_REQS" "shim requests $N"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

assert_not_reused() {
	assert_both_ok
	assert_equal "plain requests $PLAIN_REQS" "plain requests $N"
	assert_equal "plain conns $PLAIN_CONNS" "plain conns $N"
	assert_equal "shim requests $SHIM_REQS" "shim requests $N"
	assert_equal "shim conns $SHIM_CONNS" "shim conns $N"
}

# ---- bodiless responses: reusable

@test "HEAD (Content-Length but no body): same output, reused" {
	nginx_start
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N HEAD
	assert_equal "$(count_matches "^Content-Length: $NGINX_F_SIZE" "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_equal "$(count_matches 'quick brown fox' "$BATS_TEST_TMPDIR/plain.out")" 0
	assert_same_output --headers
	assert_reused
}

@test "HEAD with ruby Net::HTTP: same output, reused" {
	nginx_start
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/nethttp_fresh.rb" 127.0.0.1 "$NGINX_PORT" /f $N HEAD
	assert_equal "$(count_matches "^200 $NGINX_F_SIZE\$" "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output
	assert_reused
}

@test "204 from nginx: same output, reused" {
	nginx_start
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /nocontent $N
	assert_equal "$(count_matches '^HTTP/1\.1 204 ' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused
}

@test "204 from the scripted server: same output, reused" {
	scripted_start no_content
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /nocontent $N
	assert_equal "$(count_matches '^HTTP/1\.1 204 ' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_reused
}

@test "304 Not Modified (If-Modified-Since; Content-Length but no body): same output, reused" {
	nginx_start
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f $N GET \
		"If-Modified-Since: $NGINX_IMS"
	assert_equal "$(count_matches '^HTTP/1\.1 304 ' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused
}

@test "Content-Length: 0 from nginx (empty file): same output, reused" {
	nginx_start
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /empty $N
	assert_equal "$(count_matches '^Content-Length: 0' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --headers
	assert_reused
}

@test "Content-Length: 0 from the scripted server: same output, reused" {
	scripted_start cl0
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /empty $N
	assert_equal "$(count_matches '^Content-Length: 0' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_reused
}

# ---- chunked

@test "chunked with extensions and trailers: same output, reused" {
	scripted_start chunked_trailers
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /chunked $N
	assert_equal "$(count_matches '^X-Checksum: abc123' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_reused
}

@test "chunked with trailers, ruby Net::HTTP: same output, reused" {
	scripted_start chunked_trailers
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/nethttp_fresh.rb" 127.0.0.1 "$SCRIPTED_PORT" /chunked $N
	assert_equal "$(count_matches '^hello id=000000' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output
	assert_reused
}

@test "chunked, sent in pieces split inside the framing: same output, reused" {
	scripted_start chunked_split
	run_both $N "$CLIENTS/nonblock" 127.0.0.1 "$SCRIPTED_PORT" /split $N
	assert_equal "$(count_matches '^X-Trailer: yes' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_reused
}

# ---- not reusable: the server closes

@test "close-delimited body (no length): same output, no reuse, no hang" {
	scripted_start close_delimited
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /cd $N
	assert_equal "$(count_matches '^second piece of the body' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_not_reused
}

@test "close-delimited body, non-blocking client: same output, no reuse, no hang" {
	scripted_start close_delimited
	run_both $N "$CLIENTS/nonblock" 127.0.0.1 "$SCRIPTED_PORT" /cd $N
	assert_equal "$(count_matches '^second piece of the body' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_not_reused
}

@test "close-delimited body, ruby HTTP/1.0 read to EOF: same output, no reuse, no hang" {
	scripted_start close_delimited
	run_both $N "$RUBY" "$PRODUCT_CLIENTS/tcpsocket_http10.rb" 127.0.0.1 "$SCRIPTED_PORT" /cd $N
	assert_equal "$(count_matches '^second piece of the body' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output --close-line
	assert_not_reused
}

@test "Connection: close with Content-Length (scripted): same output, no reuse" {
	scripted_start conn_close
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /cc $N
	assert_equal "$(count_matches '^Connection: close' "$BATS_TEST_TMPDIR/plain.out")" $N
	assert_same_output
	assert_not_reused
}

@test "Connection: close from nginx (keepalive_timeout 0): same output, no reuse" {
	nginx_start
	run_both $N "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /close $N
	assert_equal "$(count_matches 'quick brown fox' "$BATS_TEST_TMPDIR/plain.out")" $((6 * N))
	assert_same_output --headers
	# the shim's request said keep-alive; nginx must still have said close
	assert_equal "$(count_matches '^Connection: close' "$BATS_TEST_TMPDIR/shim.out")" $N
	assert_not_reused
}
