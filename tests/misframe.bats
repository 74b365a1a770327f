#!/usr/bin/env bats
# Never misframe (docs/design.md §3): every odd response real servers send, from the
# scripted server (tests/servers/cases/, one file per case, each with the
# RFC section or the server that does it).  Each case answers the first
# request on a connection with the odd response and any later one with a
# plain "follow-up <request number>" response.  Four real clients make two
# requests each, with and without the shim: the output must be the same
# (Connection/Keep-Alive/Date aside), the exit status too, no hang; and the
# server's log shows whether the shim reused the first connection for the
# second request (then the follow-up arrived intact on it, or the output
# would differ) or not (where the case is doubtful).

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

# check_reuse reuse|fresh: the halves of the last run_both agree, and the
# server saw 2 connections without the shim, 1 (reuse) or 2 (fresh) with it
check_reuse() {
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	[ "$SHIM_STATUS" -ne 124 ] # not a hang
	assert_same_output --headers
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 2"
	if [ "$1" = reuse ]; then
		assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	else
		assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	fi
}

# misframe CASE reuse|fresh [METHOD [no-python]]: the C client (raw bytes
# to EOF), one curl process over two URLs, Ruby Net::HTTP, Python
# http.client (no-python: http.client cannot frame the case itself, reads
# to the server's close and times out after 10 s, with and without the
# shim alike, holding its socket until exit)
misframe() {
	local case="$1" want="$2" method="${3:-GET}" python="${4-}" url curl_m=()
	scripted_start "$case"
	url="http://127.0.0.1:$SCRIPTED_PORT/x"
	[ "$method" = HEAD ] && curl_m=(-I)
	run_both 2 "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /x 2 "$method"
	check_reuse "$want"
	if curl_ok; then
		run_both 2 curl -s -i "${curl_m[@]}" -H 'Connection: close' "$url" "$url"
		check_reuse "$want"
	fi
	run_both 2 "$RUBY" "$SCRIPTS/nethttp_print.rb" 127.0.0.1 "$SCRIPTED_PORT" "$method" /x 2
	check_reuse "$want"
	[ "$python" = no-python ] && return
	run_both 2 "$PYTHON" "$SCRIPTS/http_client.py" 127.0.0.1 "$SCRIPTED_PORT" "$method" /x 2
	check_reuse "$want"
}

@test "Content-Length: 0: reused, follow-up intact" { misframe cl0 reuse; }
@test "Content-Length, small body: reused, follow-up intact" { misframe cl_small reuse; }
@test "chunked with extensions: reused, follow-up intact" { misframe chunked_ext reuse; }
@test "chunked with trailers: reused, follow-up intact" { misframe chunked_trailers reuse; }
@test "chunked, upper-case hex sizes: reused, follow-up intact" { misframe chunked_upper_hex reuse; }
@test "chunked, leading zeros and a 0000 last chunk: reused, follow-up intact" { misframe chunked_leading_zeros reuse; }
@test "chunked, a size over 64 bits: same failure, never reused, no hang" { misframe chunked_overflow fresh; }
@test "chunked, space and tab after the sizes: delivered whole, not reused" { misframe chunked_space fresh; }
@test "bare LF line endings: delivered whole, not reused" { misframe bare_lf fresh; }
@test "obs-fold header: delivered whole, not reused" { misframe obs_fold fresh; }
@test "Content-Length twice, same value: reused, follow-up intact" { misframe cl_duplicate reuse; }
@test "Content-Length: 8, 8 (a list of one value): reused, follow-up intact" { misframe cl_list reuse GET no-python; }
@test "conflicting Content-Length: not reused" { misframe conflicting_length fresh; }
@test "Transfer-Encoding and Content-Length together: not reused" { misframe te_and_cl fresh; }
@test "Transfer-Encoding: gzip, chunked: reused, follow-up intact" { misframe te_gzip_chunked reuse GET no-python; }
@test "Transfer-Encoding: gzip alone (close-delimited): not reused, no hang" { misframe te_gzip_only fresh; }
@test "100 Continue then 200: reused, follow-up intact" { misframe continue_100 reuse; }
@test "103 Early Hints then 200: reused, follow-up intact" { misframe early_hints_103 reuse; }
@test "101 Switching Protocols: not reused, no hang" { misframe switching_101 fresh; }
@test "HEAD with Content-Length, no body: reused, follow-up intact" { misframe head_cl reuse HEAD; }
@test "304 with Content-Length, no body: reused, follow-up intact" { misframe not_modified_cl reuse; }
@test "204 followed by stray bytes: not reused" { misframe no_content_stray fresh; }
@test "extra bytes after a complete response: not reused" { misframe extra_after fresh; }
@test "HTTP/1.0 response with keep-alive: reused, follow-up intact" { misframe http10_keepalive reuse; }
@test "HTTP/1.0 response without keep-alive: not reused" { misframe http10_close fresh; }
@test "Connection: close with Content-Length: not reused" { misframe conn_close fresh; }
@test "a 64 KiB header block: reused, follow-up intact" { misframe headers_64k reuse; }
@test "a response read one byte per read: reused, follow-up intact" { misframe byte_per_read reuse; }

# the response arrives before the request body is written (docs/design.md §3.8)
early() {
	local case="$1" url
	scripted_start "$case"
	url="http://127.0.0.1:$SCRIPTED_PORT/upload"
	head -c 4000000 /dev/zero >"$BATS_TEST_TMPDIR/body"
	run_both 2 "$PYTHON" "$SCRIPTS/http_client.py" 127.0.0.1 "$SCRIPTED_PORT" POST /upload 2 4000000
	check_reuse fresh
	curl_ok || return 0
	run_both 2 curl -s -i -H 'Connection: close' -H 'Expect:' --data-binary "@$BATS_TEST_TMPDIR/body" "$url" "$url"
	check_reuse fresh
}

@test "413 before a 4 MB upload was written: same answer, not reused" { early early_413; }
@test "417 before a 4 MB upload was written: same answer, not reused" { early early_417; }

@test "100 MB Content-Length body: the same bytes, reused" {
	# 200 MB through grep and sha1sum: over 20 s on a loaded machine, for
	# the run without the library too (a hang guard, never a measure)
	local CLIENT_TIMEOUT=90
	scripted_start cl_100mb
	local url="http://127.0.0.1:$SCRIPTED_PORT/x"
	if curl_ok; then
		run_both 2 curl -s -o /dev/null -w '%{http_code} %{size_download}\n' -H 'Connection: close' "$url" "$url"
		check_reuse reuse
		run grep -c '^200 104857600$' "$BATS_TEST_TMPDIR/shim.out"
		assert_output 1
	fi
	# (the close line the server's silence earns, dropped before the sum)
	run_both 2 bash -c "'$CLIENTS/httpget' 127.0.0.1 $SCRIPTED_PORT /x 2 | grep -v -a \$'^Connection: close\\r\$' | sha1sum"
	check_reuse reuse
}

# The heads after the first in one write go out as written (only the first
# of a write is rewritten): the last asks to close, so the server closes.
@test "a client that pipelines 3 requests in one write: every response in order, same output" {
	scripted_start keepalive
	run_both 6 "$PYTHON" "$SCRIPTS/raw.py" 127.0.0.1 "$SCRIPTED_PORT" 2 \
		'GET /a{N} HTTP/1.1\r\nHost: t\r\n\r\nGET /b{N} HTTP/1.1\r\nHost: t\r\n\r\nGET /c{N} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n'
	assert_both_ok
	assert_same_output --headers
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 2"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
	run awk '{ print $3 }' "$SCRIPTED_LOG"
	assert_output "$(printf '/a0\n/b0\n/c0\n/a1\n/b1\n/c1')"
	# the server closes after /c0: that connection is never parked
	assert_equal "reused=$(stat_value reused)" "reused=0"
}
