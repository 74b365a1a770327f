#!/usr/bin/env bats
# Shell redirections and stdio: bash's /dev/tcp with its
# own builtins (the socket moved onto fd 0 and 1 by dup2 and back, a head
# written a line per printf through stdio, a response read a byte per
# read()), a child process reading the response (cat <&3), and C programs
# writing requests through stdio (fdopen), also behind the shim's back.

load helpers

setup_file() { suite_setup; }
teardown() {
	[ -z "${LINE_PID:-}" ] || _stop_pid "$LINE_PID"
	servers_stop
}

DEVTCP="$ROOT/tests/clients/devtcp.sh"

# plain.out and shim.out the same but for the Date lines: byte for byte
assert_same_but_date() {
	sed '/^Date:/d' "$BATS_TEST_TMPDIR/plain.out" >"$BATS_TEST_TMPDIR/plain.nodate"
	sed '/^Date:/d' "$BATS_TEST_TMPDIR/shim.out" >"$BATS_TEST_TMPDIR/shim.nodate"
	cmp -s "$BATS_TEST_TMPDIR/plain.nodate" "$BATS_TEST_TMPDIR/shim.nodate" || {
		diff -a "$BATS_TEST_TMPDIR/plain.nodate" "$BATS_TEST_TMPDIR/shim.nodate" | head -n 20
		fail "output with the shim differs from the output without it (Date lines aside)"
	}
}

@test "bash /dev/tcp with builtins (printf/echo a line each, read -u 5 a byte at a time): 100 requests, same output, 1 server connection" {
	nginx_start
	run_both 100 bash "$DEVTCP" builtins_u "$NGINX_PORT" 100
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/plain.out")" 100
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 100"
	assert_equal "shim requests $SHIM_REQS" "shim requests 100"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	# bash's read saw the EOF it expects after each response
	assert_equal "eofs=$(stat_value eofs)" "eofs=100"
}

# The socket moved onto fd 0 for the read (`done <&5`): stdin's FILE could
# read it past us as well as bash's read() (docs/hold.md): the server is
# made to close after each response, so nothing is pooled.
@test "bash /dev/tcp with builtins, the response read through fd 0 (done <&5): 100 requests, same output, no hang" {
	nginx_start
	run_both 100 bash "$DEVTCP" builtins "$NGINX_PORT" 100
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/plain.out")" 100
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 100"
	assert_equal "shim requests $SHIM_REQS" "shim requests 100"
}

# A child reads the response (cat <&3): it sees the server's answer to the
# rewritten request, keep-alive header and all, then the server's close
# after our FIN at fork (README Limits; docs/hold.md: nothing is held).
@test "bash exec 3<>/dev/tcp, printf >&3, cat <&3 (a child reads): same output but the Connection header, the server closes" {
	nginx_start
	run_both 10 bash "$DEVTCP" cat "$NGINX_PORT" 10
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/shim.out")" 10
	assert_equal "shim requests $SHIM_REQS" "shim requests 10"
	# the server closed each connection after its response
	assert_equal "shim conns $SHIM_CONNS" "shim conns 10"
}

# docs/hold.md "A held head at a hand-off": the head's first lines were
# held (an unfinished head) when a child (a subshell: fork) wrote its end;
# the library before sent the child's bytes first, or never sent the held
# ones (nginx: 400 Bad Request, its request line "Connection: close").
@test "bash exec 3<>/dev/tcp, the head begun by printf and ended by a child: the held bytes go first, same output" {
	nginx_start
	run_both 5 bash "$DEVTCP" childend "$NGINX_PORT" 5
	assert_both_ok
	assert_same_but_date
	assert_equal "$(count_matches '^HTTP/1.1 200 OK' "$BATS_TEST_TMPDIR/shim.out")" 5
}

# docs/hold.md "A child that writes on an inherited connection": a GET
# asking to close written by printf, then a POST written by a child on the
# same fd 3 by a subshell (fork: bash's printf writes it in five writes)
# or by `sh -c` (fork, exec).  Alone the
# server executes the GET only and closes; the POST is never executed.
@test "bash exec 3<>/dev/tcp, a GET asking to close, then a POST by a subshell or by sh -c: never executed, same output" {
	local mode
	for mode in postsub postexec; do
		echo "$mode"
		scripted_start keepalive
		run_both 1 bash "$DEVTCP" "$mode" "$SCRIPTED_PORT" 1
		assert_both_ok
		assert_same_output
		assert_equal "$(cat "$BATS_TEST_TMPDIR/shim.out")" "status lines: 1"
		assert_equal "executed $(count_matches '/pay' "$SCRIPTED_LOG")" "executed 0"
		scripted_stop
	done
}

@test "bash: builtin requests, then one read by cat: same output, no hang" {
	nginx_start
	run_both 5 bash "$DEVTCP" mixed "$NGINX_PORT" 5
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/shim.out")" 5
	assert_equal "shim requests $SHIM_REQS" "shim requests 5"
}

@test "bash: a request written through printf, the connection closed unread: the server still gets every request" {
	nginx_start
	run_both 10 bash "$DEVTCP" unread "$NGINX_PORT" 10
	assert_both_ok
	assert_same_output
	assert_equal "plain requests $PLAIN_REQS" "plain requests 10"
	assert_equal "shim requests $SHIM_REQS" "shim requests 10"
}

@test "C client: fprintf of a head bigger than the stdio buffer on fdopen(s, \"w\"), fflush: same output, 1 server connection" {
	nginx_start
	run_both 20 "$CLIENTS/stdio_http" big "$NGINX_PORT" 20
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/plain.out")" 20
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 20"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
}

@test "C client: stdio writes behind the shim's back (wide characters) on a finished connection: not pooled, the next request is not misframed" {
	nginx_start
	run_both 2 "$CLIENTS/stdio_http" behind "$NGINX_PORT"
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^HTTP/1.1 200 OK' "$BATS_TEST_TMPDIR/shim.out")" 2
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/shim.out")" 2
	# the program's two requests, each on a connection of its own (the
	# first saw half a request it never answered: a 400 once we closed)
	local first second
	first=$(awk '$3 == "GET" && $5 == 200 { print $1; exit }' "$NGINX_DIR/access.log")
	second=$(awk '$3 == "GET" && $5 == 200 { n++; if (n == 2) print $1 }' "$NGINX_DIR/access.log")
	[ -n "$first" ] && [ -n "$second" ] || fail "two answered requests expected: $(nginx_log)"
	[ "$first" != "$second" ] || fail "the second request rode the connection stdio wrote to behind our back: $(nginx_log)"
}

# A head written through stdio is held until the program's next call on the
# connection (conn.h): a program whose next call is something else must not
# hang.  Each: the same output as without the shim, one connection, and no
# timeout (CLIENT_TIMEOUT=10: a hang fails as status 124).
hold_case() {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$CLIENTS/stdio_hold" "$1" "$NGINX_PORT" "$NGINX_DIR/access.log"
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^libkeepalive test file /f, line 6 ' "$BATS_TEST_TMPDIR/shim.out")" 1
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 1"
	assert_equal "shim conns $SHIM_CONNS" "shim conns 1"
	assert_equal "shim requests $SHIM_REQS" "shim requests 1"
}

@test "C client: socket on fd 0, fprintf+fflush, response read with fgets(stdin) (libc's own read): no hang, the server's own close" {
	hold_case stdin
}

@test "C client: fprintf+fflush, then ioctl(FIONREAD) polled until the response waits: the held head goes out" {
	hold_case fionread
}

@test "C client: fprintf+fflush, then waitpid() for a child (forked before) that waits for the server to log the request: no hang" {
	hold_case waitpid
}

@test "C client: fprintf+fflush, then read() on a pipe from a child (forked before) that waits for the server to log the request: no hang" {
	hold_case pipe
}

@test "C client: fprintf+fflush, then fread on fdopen(dup(s), \"r\") made after the write, or recv(): same output" {
	hold_case rafter
	servers_stop
	hold_case recv
}

@test "C client: fprintf+fflush, sleep(1), then read, from a server that answers a connection idle 300 ms with a 408: the program's 200, as without the shim" {
	scripted_start idle_408
	CLIENT_TIMEOUT=10 run_both 1 "$CLIENTS/stdio_hold" sleep "$SERVER_PORT" /dev/null
	assert_both_ok
	assert_same_output --close-line
	assert_equal "$(count_matches '^HTTP/1.1 200 OK' "$BATS_TEST_TMPDIR/shim.out")" 1
	assert_equal "shim requests $SHIM_REQS" "shim requests 1"
}

@test "C client: fprintf+fflush, then _exit(0) without reading (sent and forgotten): the server still gets the request" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 1 "$CLIENTS/stdio_hold" _exit "$NGINX_PORT" /dev/null
	assert_both_ok
	assert_equal "plain requests $PLAIN_REQS" "plain requests 1"
	assert_equal "shim requests $SHIM_REQS" "shim requests 1"
}

@test "C client: GET /f through stdio on one connection, then a whole exchange on a second: the server gets them in the program's order" {
	nginx_start
	CLIENT_TIMEOUT=10 run_both 2 "$CLIENTS/stdio_hold" order "$NGINX_PORT" /dev/null
	assert_both_ok
	assert_same_output --headers
	assert_equal "plain order: $(awk '{ print $4 }' "$BATS_TEST_TMPDIR/plain.log" | tr '\n' ' ')" "plain order: /f /empty "
	assert_equal "shim order: $(awk '{ print $4 }' "$NGINX_DIR/access.log" | tr '\n' ' ')" "shim order: /f /empty "
}

@test "C client: fprintf+fflush, then the response read with syscall(SYS_read): no hang" {
	hold_case syscall
}

# Nothing held can wait on the server (docs/hold.md): three programs that
# wait for the response where no wrapper sees them.
@test "C client: fdopen(s, \"r+\") before connect(), fprintf+fflush, fgets on that FILE (libc's own read): no hang, same output" {
	hold_case fdopen_first
}

@test "C client: request printed on stdout (socket on fd 1), then the socket dup2'd onto fd 0 and fread(stdin): no hang, same output" {
	hold_case stdin_later
}

@test "C client: fprintf+fflush, then accept() of a peer that calls back once the server has the request: no hang, same output" {
	hold_case accept
}

# ---- a protocol that is not HTTP on a pooled port

# line_start: tests/servers/line.py (each recv logged and answered
# "+<bytes>"); LINE_PORT, LINE_LOG.
line_start() {
	local pf="$BATS_TEST_TMPDIR/line.port"
	LINE_LOG="$BATS_TEST_TMPDIR/line.log"
	: >"$LINE_LOG"
	"$PYTHON" "$ROOT/tests/servers/line.py" "$pf" "$LINE_LOG" &
	LINE_PID=$!
	wait_until test -s "$pf"
	LINE_PORT=$(cat "$pf")
}

# line_eofs N: true once N connections have ended in the log
line_eofs() { [ "$(grep -c ' EOF$' "$LINE_LOG")" -ge "$1" ]; }

# what the connections received, their ids left out (they count on)
line_seen() { sed 's/^[0-9]* //' "$LINE_LOG" | sort; }

# Bytes that never end a line could be the start of a request head, which
# the library holds until it ends (docs/hold.md): the program that then
# waits for an answer, or closes, must have had them sent, as without the
# library.  What the server received is compared, and what the program saw.
@test "not HTTP on a pooled port: bytes without a line end reach the server when the program waits (poll, select, epoll, recv) or closes" {
	line_start
	env -u LD_PRELOAD timeout 30 "$PYTHON" "$SCRIPTS/line_client.py" "$LINE_PORT" \
		>"$BATS_TEST_TMPDIR/plain.out" 2>&1
	wait_until line_eofs 5
	line_seen >"$BATS_TEST_TMPDIR/plain.log"
	: >"$LINE_LOG"
	run env LD_PRELOAD="$PRELOAD" KEEPALIVE_PORTS="$LINE_PORT" timeout "$CLIENT_TIMEOUT" \
		"$PYTHON" "$SCRIPTS/line_client.py" "$LINE_PORT"
	assert_success
	assert_output "$(cat "$BATS_TEST_TMPDIR/plain.out")"
	wait_until line_eofs 5
	assert_equal "$(line_seen)" "$(cat "$BATS_TEST_TMPDIR/plain.log")"
	[ "$(grep -c " b'HELLO'$" "$LINE_LOG")" -eq 4 ] || fail "HELLO did not reach the server 4 times"
}

@test "not HTTP on a pooled port, bash /dev/tcp: printf without a newline, read -t; then bytes and a close" {
	line_start
	local script='exec 3<>/dev/tcp/127.0.0.1/$1; printf HELLO >&3; read -r -t 5 -u 3 x; echo "got: $x"
exec 4<>/dev/tcp/127.0.0.1/$1; printf "AUTH y" >&4; exec 4>&-; exec 3>&-; echo closed'
	env -u LD_PRELOAD timeout 30 bash -c "$script" bash "$LINE_PORT" >"$BATS_TEST_TMPDIR/plain.out" 2>&1
	wait_until line_eofs 2
	line_seen >"$BATS_TEST_TMPDIR/plain.log"
	: >"$LINE_LOG"
	run env LD_PRELOAD="$PRELOAD" KEEPALIVE_PORTS="$LINE_PORT" timeout "$CLIENT_TIMEOUT" \
		bash -c "$script" bash "$LINE_PORT"
	assert_success
	assert_output "$(cat "$BATS_TEST_TMPDIR/plain.out")"
	wait_until line_eofs 2
	assert_equal "$(line_seen)" "$(cat "$BATS_TEST_TMPDIR/plain.log")"
}
