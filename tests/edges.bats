#!/usr/bin/env bats
# When the shim must step aside, give up, or refuse to keep a connection:
# non-HTTP bytes, shutdown(), framing it cannot follow, the server's
# Keep-Alive hints, our idle limit, fork, bad settings.

load helpers

setup_file() { suite_setup; }
teardown() { servers_stop; }

RAW="$ROOT/tests/clients/raw.py"
GET_CLOSE='GET /r/{N} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n'

@test "TLS bytes on a pooled port: passthrough, never pooled, same output" {
	nginx_start
	# the start of a TLS ClientHello; nginx answers 400 and closes
	run_both 10 "$PYTHON" "$RAW" 127.0.0.1 "$NGINX_PORT" 10 '\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00'
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^HTTP/1.1 400' "$BATS_TEST_TMPDIR/plain.out")" 10
	assert_equal "shim conns $SHIM_CONNS" "shim conns 10"
	assert_equal "passthrough=$(stat_value passthrough)" "passthrough=10"
	assert_equal "parked=$(stat_value parked)" "parked=0"
}

@test "shutdown(SHUT_WR) after the request: passed through, no reuse, no hang" {
	nginx_start
	run_both 20 "$PYTHON" "$RAW" 127.0.0.1 "$NGINX_PORT" 20 \
		'GET /f HTTP/1.1\r\nHost: t\r\n\r\n' --shutdown
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/shim.out")" 20
	assert_equal "shim conns $SHIM_CONNS" "shim conns 20"
	assert_equal "parked=$(stat_value parked)" "parked=0"
}

# An unframeable response to a plain request we rewrote, sent whole: our
# FIN goes out and the server's close ends the answer, as the program's own
# close would have (docs/replay.md "A response that cannot end").  The
# quiet period (KEEPALIVE_QUIET_MS) is for what cannot take our FIN (a
# request still being written, HTTPS).
@test "a response head our framer refuses, a body pausing longer than the quiet period: read whole to the server's EOF, as alone" {
	scripted_start refused_head_slow
	run_both 2 KEEPALIVE_QUIET_MS=300 "$PYTHON" "$RAW" 127.0.0.1 "$SCRIPTED_PORT" 2 "$GET_CLOSE"
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches 'helloworld' "$BATS_TEST_TMPDIR/shim.out")" 2
	assert_equal "rewritten=$(stat_value rewritten)" "rewritten=2"
}

@test "unframeable response after a rewrite: EOF (our FIN, the server's close), no reuse" {
	scripted_start conflicting_length
	run_both 3 KEEPALIVE_QUIET_MS=300 "$PYTHON" "$RAW" 127.0.0.1 "$SCRIPTED_PORT" 3 "$GET_CLOSE"
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^id=' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_equal "shim conns $SHIM_CONNS" "shim conns 3"
	assert_equal "rewritten=$(stat_value rewritten)" "rewritten=3"
	assert_equal "parked=$(stat_value parked)" "parked=0"
}

# A signal during the wait for that EOF: its handler runs and the read goes
# on (the quiet period's own wait under a signal: tests/failopen.bats, the
# splice cells; docs/hold.md).
@test "unframeable response after a rewrite, a signal during the read: EOF after it, as alone" {
	scripted_start conflicting_length
	run_both 1 KEEPALIVE_QUIET_MS=1000 "$PYTHON" "$ROOT/tests/clients/read_signal.py" 127.0.0.1 "$SCRIPTED_PORT" 0.2
	assert_both_ok
	assert_same_output --headers
	assert_equal "rewritten=$(stat_value rewritten)" "rewritten=1"
}

@test "unframeable response after a rewrite, non-blocking client in poll(): EOF (our FIN, the server's close)" {
	scripted_start conflicting_length
	run_both 3 KEEPALIVE_QUIET_MS=300 "$CLIENTS/nonblock" 127.0.0.1 "$SCRIPTED_PORT" /x 3
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^id=' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_equal "shim conns $SHIM_CONNS" "shim conns 3"
	assert_equal "parked=$(stat_value parked)" "parked=0"
}

@test "server hint Keep-Alive: timeout=1 leaves no idle time: not pooled" {
	scripted_start keepalive_timeout1
	run_both 10 "$PYTHON" "$RAW" 127.0.0.1 "$SCRIPTED_PORT" 10 "$GET_CLOSE"
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns 10"
	assert_equal "reused=$(stat_value reused)" "reused=0"
}

@test "server hint Keep-Alive: max: a new connection after the announced last request" {
	scripted_start keepalive_max2
	run_both 9 "$PYTHON" "$RAW" 127.0.0.1 "$SCRIPTED_PORT" 9 "$GET_CLOSE"
	assert_both_ok
	assert_same_output --headers
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 9"
	# 3 requests per connection, as the server announced; never a 4th
	assert_equal "shim conns $SHIM_CONNS" "shim conns 3"
	run awk '{ n[$1]++ } END { for (c in n) if (n[c] != 3) print "conn " c ": " n[c] }' "$SCRIPTED_LOG"
	assert_output ""
	# the shim knew: it never parked a connection the server was about to
	# close (parking it would show up as a dead one dropped at the next connect)
	assert_equal "dropped=$(stat_value dropped)" "dropped=0"
	assert_equal "parked=$(stat_value parked)" "parked=6"
}

@test "KEEPALIVE_IDLE_MS: a connection idle longer is not handed out" {
	nginx_start
	# 300 ms between requests; with a 100 ms limit each connect finds the
	# pooled connection expired (the inequality, not a speed, is tested)
	run_both 4 KEEPALIVE_IDLE_MS=100 "$PYTHON" "$RAW" 127.0.0.1 "$NGINX_PORT" 4 \
		'GET /f HTTP/1.0\r\nHost: t\r\n\r\n' --sleep 0.3
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns 4"
	assert_equal "dropped=$(stat_value dropped)" "dropped=3"
	# and with the default limit the same pauses keep one connection
	run_shim "$PYTHON" "$RAW" 127.0.0.1 "$NGINX_PORT" 4 'GET /f HTTP/1.0\r\nHost: t\r\n\r\n' --sleep 0.3
	server_reset
	run_shim "$PYTHON" "$RAW" 127.0.0.1 "$NGINX_PORT" 4 'GET /f HTTP/1.0\r\nHost: t\r\n\r\n' --sleep 0.3
	server_wait_requests 4
	assert_equal "default idle limit: conns $(server_conns)" "default idle limit: conns 1"
}

@test "fork after pooling: no connection carries requests of both processes" {
	scripted_start keepalive
	run_both 12 "$PYTHON" "$RAW" 127.0.0.1 "$SCRIPTED_PORT" 8 \
		'GET /{who}/{N} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' --fork
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^== child' "$BATS_TEST_TMPDIR/shim.out")" 8
	assert_equal "$(count_matches '^== parent' "$BATS_TEST_TMPDIR/shim.out")" 8
	# each connection served one process only...
	run awk '{ split($3, p, "/"); w[$1] = w[$1] " " p[2] } END { for (c in w) if (w[c] ~ /parent/ && w[c] ~ /child/) print "conn " c ":" w[c] }' "$SCRIPTED_LOG"
	assert_output ""
	# ...and both reused: the parent its pre-fork connection, the child its own
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
}

@test "bad settings: one warning line each, defaults, the program runs" {
	nginx_start
	run_shim KEEPALIVE_PORTS=eighty KEEPALIVE_IDLE_MS=-5 KEEPALIVE_LOG=loud \
		"$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f 3
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "$(count_matches '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/shim.out")" 3
	run grep -c '^libkeepalive: ignoring ' "$BATS_TEST_TMPDIR/shim.err"
	assert_output 3
	run grep '^libkeepalive: ignoring KEEPALIVE_PORTS=eighty' "$BATS_TEST_TMPDIR/shim.err"
	assert_success
	# the default ports (80,8080) do not include nginx's: untouched
	assert_equal "connects=$(stat_value connects)" "connects=0"
}

@test "a close the shim never saw (raw syscall instruction): the fd number's next file reads as itself" {
	nginx_start
	run_both 5 "$CLIENTS/missed_close" 127.0.0.1 "$NGINX_PORT" /f 5 "$NGINX_DIR/www/f" raw
	assert_both_ok
	assert_same_output --headers
	# each response, then the file read through the same fd number
	assert_equal "$(count_matches '^libkeepalive test file /f, line 1 ' "$BATS_TEST_TMPDIR/shim.out")" 10
	assert_equal "parked=$(stat_value parked)" "parked=0"
}

@test "syscall(SYS_close) (libuv's way to close): seen, parked, reused" {
	nginx_start
	run_both 5 "$CLIENTS/missed_close" 127.0.0.1 "$NGINX_PORT" /f 5 "$NGINX_DIR/www/f" syscall
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 1 ' "$BATS_TEST_TMPDIR/shim.out")" 10
	assert_equal "parked=$(stat_value parked)" "parked=5"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

# ---- fd life: odd but legal uses of sockets and fd numbers (fdlife.c)

@test "pipelined requests with the second head split across writes: sent once, same output" {
	nginx_start
	run_both 2 "$CLIENTS/fdlife" pipeline-split "$NGINX_PORT"
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/shim.out")" 2
	assert_equal "shim requests $SHIM_REQS" "shim requests 2"
}

@test "a head begun with sendto(address) and ended with write(): sent once, same output" {
	nginx_start
	run_both 1 "$CLIENTS/fdlife" sendto-split "$NGINX_PORT"
	assert_both_ok
	assert_same_output --headers
	run grep -c '^HTTP/1.1 400' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 0
}

@test "dup2/dup3 onto a pooled socket that fail leave it alone" {
	nginx_start
	run_both 2 "$CLIENTS/fdlife" dup2-fails "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "fclose(fdopen(socket)): the number's next socket and file are themselves" {
	nginx_start
	run_both 2 "$CLIENTS/fdlife" fclose "$NGINX_PORT" "$NGINX_DIR/www/f"
	assert_both_ok
	assert_same_output
	assert_equal "$(count_matches 'on the same number: 1' "$BATS_TEST_TMPDIR/shim.out")" 2
	assert_equal "$(count_matches '^libkeepalive test file /f, line 1 ' "$BATS_TEST_TMPDIR/shim.out")" 1
}

@test "select() waits for EOF: wakes at the synthetic EOF" {
	nginx_start
	run_both 1 "$CLIENTS/fdlife" select-eof "$NGINX_PORT"
	assert_both_ok
	assert_same_output --headers
	assert_equal "eofs>0 $(( $(stat_value eofs) > 0 ))" "eofs>0 1"
}

@test "select() after an unframeable response: EOF (our FIN, the server's close)" {
	scripted_start conflicting_length
	run_both 1 KEEPALIVE_QUIET_MS=300 "$CLIENTS/fdlife" select-eof "$SCRIPTED_PORT"
	assert_both_ok
	assert_same_output --headers
}

@test "closefrom(3) with pooled sockets: the program's later files stay its own" {
	nginx_start
	# a small fd limit puts the pool's hidden fds (at half the limit) in reach
	run_both 4 bash -c 'ulimit -n 64 && exec "$0" closefrom "$1"' "$CLIENTS/fdlife" "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run grep -c '^0 of the files no longer /dev/null' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	# and the pool kept its connection through closefrom()
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "POST with Content-Length: 0 is bodiless: parked, and sent on pooled connections (KEEPALIVE_METHODS=idempotent: never)" {
	scripted_start keepalive
	run_both 5 "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /p 5 POST 'Content-Length: 0'
	assert_both_ok
	assert_same_output --headers
	# framed to the end each time (parked) and reused: a POST rides a
	# pooled connection, replayed only if TCP proves the server never got
	# it (docs/design.md §4)
	assert_equal "parked=$(stat_value parked) unvouched=$(stat_value unvouched)" "parked=5 unvouched=0"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	# the old rule: each POST on a fresh connection, the pooled one given back
	run_both 5 KEEPALIVE_METHODS=idempotent "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /p 5 POST 'Content-Length: 0'
	assert_both_ok
	assert_equal "parked=$(stat_value parked) unvouched=$(stat_value unvouched)" "parked=5 unvouched=4"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 5"
}

@test "POST with an Idempotency-Key rides pooled connections (replayed only on proof, as any POST: docs/replay.md)" {
	scripted_start keepalive
	run_both 5 "$CLIENTS/httpget" 127.0.0.1 "$SCRIPTED_PORT" /p 5 POST 'Content-Length: 0' 'Idempotency-Key: 7'
	assert_both_ok
	assert_same_output --headers
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "request heads written a byte at a time: rewritten, reused, same output" {
	nginx_start
	run_both 3 "$CLIENTS/fdlife" trickle "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	assert_equal "$(count_matches '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/shim.out")" 3
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	assert_equal "rewritten=$(stat_value rewritten)" "rewritten=3"
}

@test "POST bodies sent with sendfile() (Content-Length): followed by arithmetic, parked" {
	scripted_start keepalive
	head -c 300000 /dev/zero | tr '\0' x >"$BATS_TEST_TMPDIR/upload"
	run_both 3 "$CLIENTS/fdlife" sendfile "$SCRIPTED_PORT" "$BATS_TEST_TMPDIR/upload"
	assert_both_ok
	assert_same_output
	assert_equal "$(count_matches '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/shim.out")" 3
	# each POST on a fresh connection (docs/design.md §4), each parked after it
	assert_equal "parked=$(stat_value parked) unvouched=$(stat_value unvouched)" "parked=3 unvouched=2"
}

@test "shutdown(SHUT_WR) after a Connection: close request: the FIN goes out, the whole response, not reused" {
	nginx_start
	run_both 5 "$PYTHON" "$RAW" 127.0.0.1 "$NGINX_PORT" 5 \
		'GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' --shutdown
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^Content-Length: 102400' "$BATS_TEST_TMPDIR/shim.out")" 5
	# the EOF after the response is still ours (framed), but the FIN goes
	# out: a server may wait for it before answering (tests/failopen.bats),
	# and the connection, its write side shut, is not reused
	assert_equal "shim conns $SHIM_CONNS" "shim conns 5"
	assert_equal "eofs=$(stat_value eofs)" "eofs=5"
}

@test "a head begun with write() and ended with sendmmsg(): sent in order, same output" {
	nginx_start
	run_both 2 "$CLIENTS/fdlife" sendmmsg-split "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run grep -c '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 2
}

@test "response read through stdio (fdopen, fgets): no hang, same output, not pooled" {
	nginx_start
	run_both 2 "$CLIENTS/fdlife" stdio "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/shim.out")" 2
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
}

@test "response read with splice(): the whole response, then EOF" {
	nginx_start
	run_both 2 KEEPALIVE_QUIET_MS=300 "$CLIENTS/fdlife" splice-read "$NGINX_PORT" big
	assert_both_ok
	assert_same_output
	run grep -c 'more than 100000 bytes: 1, then EOF' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
}

@test "a pooled socket handed to a blocking fd number that was non-blocking before stays blocking" {
	nginx_start
	run_both 2 "$CLIENTS/fdlife" stale-flags "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run grep -c '^O_NONBLOCK after connect: 0' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "subprocess (vfork + close_range in the child) while a connection is open: the parent's state survives" {
	nginx_start
	run_both 5 "$PYTHON" "$ROOT/tests/clients/subprocess_between.py" 127.0.0.1 "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	assert_plain_output_is "$NGINX_DIR/www/f" 5
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 4"
	# the kept-alive connection, parked at its close, serves urllib too
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "dup2 over a finished connection parks it; a dup'ed socket is parked at its last close" {
	nginx_start
	run_both 3 "$CLIENTS/fdlife" dup2-over "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run grep -c '^after dup2 the number is /dev/null: 1' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	assert_equal "parked=$(stat_value parked)" "parked=3"
}

@test "socket options: a pooled socket carries its new owner's options, not the last owner's" {
	nginx_start
	run_both 3 "$CLIENTS/fdlife" sockopts "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run grep -c '^socket 1: TCP_NODELAY=0 SO_KEEPALIVE=0 SO_RCVTIMEO=0s' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 1
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "a program waiting with epoll_wait gets the synthetic EOF: no hang, reused" {
	nginx_start
	run_both 4 "$CLIENTS/fdlife" epoll-eof "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run grep -c 'read a response, then EOF' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 4
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	assert_equal "eofs=$(stat_value eofs)" "eofs=4"
}

@test "I/O before our constructor (.preinit_array: pipe, dup, fcntl, poll, one request) works as without the shim; later requests pooled" {
	# a preloaded libasan maps its shadow memory in its own constructor:
	# any instrumented code before that faults (the build before lazy
	# binding did too), so only the plain build can run this
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "instrumented code cannot run before libasan's constructor"
	nginx_start
	run_both 6 "$CLIENTS/early_io" 127.0.0.1 "$NGINX_PORT" /f 5
	assert_both_ok
	assert_same_output --headers
	run grep -c -e '^pipe ok$' -e '^dup ok$' -e '^early request done$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 3
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 6"
	# the early request passed through untouched: the server closed its
	# connection; the five after it shared one
	assert_equal "shim requests $SHIM_REQS" "shim requests 6"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 2"
}

# socket-level calls between the 2nd and 3rd socket() of a strace log (the
# 2nd request's, a reused connection under the shim), reads and writes of
# the response aside, one line
second_request_calls() {
	awk '/socket\(AF_INET/ { n++ } n == 2 { sub(/^[0-9]+ +/, ""); sub(/\(.*/, ""); print }' "$1" |
		grep -Ev '^(read|write|newfstatat|ioctl)$' | tr '\n' ' '
}

@test "a reused connection costs the kernel a probe, the address's probe, a dup3 and the description's fcntls beside the program's calls (strace)" {
	# the blocking C client makes socket, connect, write, reads
	# and close per request.  Reused, its connect is one dup3 of the pooled
	# socket (no close of the hidden fd: it stays the connection's twin)
	# after one liveness probe (recvfrom MSG_PEEK: every hand-out is probed,
	# docs/replay.md), and its close parks the socket with no F_DUPFD.
	# Each of connect and close asks the kernel what the description
	# carries (F_GETFL, F_GETSIG, F_GETOWN_EX: docs/hold.md "What the
	# description carries"): a program with signals on it connects its own,
	# a parked socket signals no one.  The address connect() is given
	# (getaddrinfo's, on the heap) is probed before we read it for the
	# pool's key (rt_sigprocmask: docs/limits.md "A pointer the kernel
	# refuses"); one on the main thread's stack would not be.
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "counts the plain build's calls (ASan's allocator maps memory)"
	command -v strace >/dev/null || skip "strace missing (scripts/deps)"
	nginx_start
	run_plain strace -o "$BATS_TEST_TMPDIR/plain.trace" "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f 3
	run_shim strace -o "$BATS_TEST_TMPDIR/shim.trace" "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f 3
	assert_both_ok
	assert_same_output --headers
	assert_equal "without: $(second_request_calls "$BATS_TEST_TMPDIR/plain.trace")" "without: socket connect close "
	assert_equal "with: $(second_request_calls "$BATS_TEST_TMPDIR/shim.trace")" "with: socket rt_sigprocmask fcntl fcntl fcntl recvfrom dup3 sendmsg fcntl fcntl fcntl close "
	assert_equal "reused=$(stat_value reused)" "reused=2"
}

# syscall() on fds and arguments of no concern to the library answers as
# glibc's: the kernel's call (raw syscalls are no cancellation points, a
# bad clone3 argument is the kernel's EFAULT or EINVAL, not our fault, and
# F_GETOWN is the kernel's answer, not libc's fcntl's).
@test "syscall() the library has no business with: no cancellation point, clone3's bad arguments refused by the kernel, F_GETOWN raw" {
	run env -u LD_PRELOAD timeout 10 "$CLIENTS/raw_syscall"
	assert_success
	local plain="$output"
	run env LD_PRELOAD="$PRELOAD" KEEPALIVE_PORTS=80 timeout "$CLIENT_TIMEOUT" "$CLIENTS/raw_syscall"
	assert_success
	assert_output "$plain"
	assert_line "cancel: thread returned 42"
}

# select() with the program's own sets, larger than an fd_set (nfds past
# FD_SETSIZE) and smaller (one word sized to nfds, at the end of a page):
# read as far as nfds says, never past it; the EOF the shim owes reported
# at fd 1600 too.
@test "select() with sets past FD_SETSIZE and smaller than an fd_set: the owed EOF reported, nothing read past nfds" {
	[ "$(ulimit -Hn)" -ge 1700 ] || skip "hard RLIMIT_NOFILE below 1700"
	nginx_start
	run_both 2 "$CLIENTS/select_sets" "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	grep -qx "big: select 1 isset 1" "$BATS_TEST_TMPDIR/shim.out" || fail "fd 1600 not readable"
}
