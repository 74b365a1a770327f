#!/usr/bin/env bats
# scripts/latency-proxy.c, the WAN emulator of the benchmarks, in front of
# nginx: the round trips an HTTP request costs through it (a fresh connection
# 2 RTT, a reused one 1 RTT), and bytes that arrive intact.  No shim here.
# Times are lower bounds, but for the one upper bound the reuse test needs,
# with generous slack.

load helpers

setup_file() { make -s -C "$ROOT" build/latency-proxy >&2; }
setup() { nginx_start; }
teardown() {
	proxy_stop
	servers_stop
}

RTT=100
PROXY_PID=
PROXY_PORT=

# proxy_start RTT_MS: the proxy on a free port in front of nginx; sets
# PROXY_PID and PROXY_PORT
proxy_start() {
	local dir="$BATS_TEST_TMPDIR/proxy"
	mkdir -p "$dir"
	rm -f "$dir/port"
	# 3>&-: bats waits for fd 3 to close
	"$ROOT/build/latency-proxy" --listen 127.0.0.1:0 --to "127.0.0.1:$NGINX_PORT" --rtt "$1" \
		--port-file "$dir/port" </dev/null >>"$dir/stderr" 2>&1 3>&- &
	PROXY_PID=$!
	wait_until _proxy_ready || true
	if ! [ -s "$dir/port" ] || _pid_gone "$PROXY_PID"; then
		echo "latency-proxy did not start:" >&2
		cat "$dir/stderr" >&2
		return 1
	fi
	PROXY_PORT="$(cat "$dir/port")"
}

_proxy_ready() { [ -s "$BATS_TEST_TMPDIR/proxy/port" ] || _pid_gone "$PROXY_PID"; }

proxy_stop() {
	[ -n "$PROXY_PID" ] && _stop_pid "$PROXY_PID"
	PROXY_PID=
}

# seconds A >= B, as decimals (lower bounds only: the proxy guarantees them)
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

@test "proxy --rtt 100: a request on a fresh connection takes 2 RTT (>= 0.2 s)" {
	proxy_start $RTT
	run timeout "$((CLIENT_TIMEOUT * SLOW))" "$CURL" -s -o /dev/null -w '%{http_code} %{time_total}' \
		"http://127.0.0.1:$PROXY_PORT/f"
	assert_success
	read -r code t <<<"$output"
	assert_equal "$code" 200
	at_least "$t" 0.2 || fail "fresh request took $t s, less than 2 RTT"
}

# The delays are lower bounds the proxy guarantees; how much longer a
# request takes is up to the machine's load (an upper bound failed in CI
# under load), so that the reused connection paid no handshake is asserted
# by curl's and nginx's count of connections, not by a time
@test "proxy --rtt 100: the second request reuses the first's connection (one connect), each paying at least its round trips (2 RTT, then 1)" {
	proxy_start $RTT
	run timeout "$((CLIENT_TIMEOUT * SLOW))" "$CURL" -s -o /dev/null -o /dev/null \
		-w '%{http_code} %{num_connects} %{time_total}\n' \
		"http://127.0.0.1:$PROXY_PORT/f?1" "http://127.0.0.1:$PROXY_PORT/f?2"
	assert_success
	echo "$output"
	local code1 conn1 t1 code2 conn2 t2
	{
		read -r code1 conn1 t1
		read -r code2 conn2 t2
	} <<<"$output"
	assert_equal "$code1 $code2" "200 200"
	# curl's own word and nginx's that the second request reused the first's connection
	assert_equal "connects $conn1 $conn2" "connects 1 0"
	server_wait_requests 2
	assert_equal "nginx conns $(nginx_conns)" "nginx conns 1"
	local total
	total=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.6f", a + b }')
	at_least "$t1" 0.2 || fail "first request took $t1 s, less than 2 RTT"
	at_least "$t2" 0.1 || fail "second request took $t2 s, less than 1 RTT"
	at_least "$total" 0.3 || fail "both took $total s, less than 3 RTT"
}

@test "proxy --rtt 100: a 50 MiB download arrives intact" {
	head -c $((50 * 1024 * 1024)) /dev/urandom >"$NGINX_DIR/www/blob"
	chmod a+r "$NGINX_DIR/www/blob" # nginx's workers run as nobody
	proxy_start $RTT
	run timeout "$((CLIENT_TIMEOUT * SLOW))" "$CURL" -s -o "$BATS_TEST_TMPDIR/blob" -w '%{http_code}' \
		"http://127.0.0.1:$PROXY_PORT/blob"
	assert_success
	assert_output 200
	assert_equal "$(sha1sum <"$BATS_TEST_TMPDIR/blob")" "$(sha1sum <"$NGINX_DIR/www/blob")"
}

@test "proxy --rtt 100: a half-close is relayed (HTTP/1.0 request, then shutdown(SHUT_WR))" {
	proxy_start $RTT
	run timeout "$((CLIENT_TIMEOUT * SLOW))" "$PYTHON" -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /f HTTP/1.0\r\nHost: x\r\n\r\n")
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
head, body = data.split(b"\r\n\r\n", 1)
sys.stdout.buffer.write(head.split(b"\r\n", 1)[0] + b"\n" + body)
' "$PROXY_PORT"
	assert_success
	assert_equal "$output" "$(printf 'HTTP/1.1 200 OK\n'; cat "$NGINX_DIR/www/f")"
}

@test "proxy --rtt 100: 200 concurrent connections" {
	proxy_start $RTT
	run timeout "$((CLIENT_TIMEOUT * SLOW))" "$CURL" -s --parallel --parallel-immediate --parallel-max 200 \
		-o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$PROXY_PORT/f?n=[1-200]"
	assert_success
	assert_equal "$(grep -c '^200$' <<<"$output")" 200
	server_wait_requests 200
	assert_equal "nginx requests $(nginx_requests)" "nginx requests 200"
	# --parallel-immediate: a connection each, not a few reused
	[ "$(nginx_conns)" -ge 100 ] || fail "only $(nginx_conns) connections"
}

@test "proxy: SIGTERM ends it with status 0" {
	proxy_start $RTT
	kill -TERM "$PROXY_PID"
	wait_until _pid_gone "$PROXY_PID" || fail "still running 20 s after SIGTERM"
	local status=0
	wait "$PROXY_PID" || status=$?
	PROXY_PID=
	assert_equal "exit status $status" "exit status 0"
}
