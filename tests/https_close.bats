#!/usr/bin/env bats
# HTTPS: how a connection the program asked to close ends (docs/tls.md
# "Ragged closes").  A generated matrix of the TLS end.  The library owes such a program an EOF it shows as a
# close_notify; a server that ends with the TCP FIN alone makes OpenSSL 3
# report "unexpected eof while reading" (or, with
# SSL_OP_IGNORE_UNEXPECTED_EOF, another SSL_shutdown sequence).  Every
# combination of server end (close_notify / ragged) x client option
# (strict / IGNORE_UNEXPECTED_EOF) x order (end read then SSL_shutdown
# twice / SSL_shutdown twice then the end read) runs tests/clients/tls_end.c
# without and with the library and compares all it printed.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() {
	servers_stop
	[ -z "${OWN_PID:-}" ] || _stop_pid "$OWN_PID"
	OWN_PID=
}

# close_server MODE: tests/servers/tls_close.py in MODE (notify|ragged)
close_server() {
	OWN_LOG="$BATS_TEST_TMPDIR/own.log"
	: >"$OWN_LOG"
	rm -f "$BATS_TEST_TMPDIR/port"
	"$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$OWN_LOG" "$1" 3>&- &
	OWN_PID=$!
	wait_until test -s "$BATS_TEST_TMPDIR/port"
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/port"
}

# end_both N OPT ORDER: tls_end without and with the library, the same
# status and output; OWN_PLAIN_CONNS, OWN_SHIM_CONNS
end_both() {
	: >"$OWN_LOG"
	run_plain "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" "$@"
	OWN_PLAIN_CONNS=$(_distinct_first_fields "$OWN_LOG")
	: >"$OWN_LOG"
	run_shim "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" "$@"
	OWN_SHIM_CONNS=$(_distinct_first_fields "$OWN_LOG")
	echo "$*: plain status=$PLAIN_STATUS conns=$OWN_PLAIN_CONNS; shim status=$SHIM_STATUS conns=$OWN_SHIM_CONNS"
	echo "$SHIM_STATS"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
}

@test "a server that ends without close_notify: after the first exchange that shows it, every client option and SSL_shutdown order reads as without the library (its closes are not rewritten)" {
	close_server ragged
	for opt in strict lax; do
		for order in eof shut; do
			: >"$OWN_LOG"
			run_plain "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 4 $opt $order
			run_shim "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 4 $opt $order
			echo "$opt $order: $SHIM_STATS"
			assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
			# the first exchange, rewritten before anything was known
			# of the server, may read as a clean close (README
			# "Limits"); the program that looked made the library
			# stop rewriting there: the rest is the server's own end
			sed -i 1d "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
			assert_same_output
			run cat "$BATS_TEST_TMPDIR/plain.out"
			if [ $opt = strict ] && [ $order = eof ]; then
				# proves the half without the library met the ragged end
				assert_line --regexp '^2 HTTP/1.1 200 OK body=5 read=0 err=1 reason="unexpected eof while reading"'
			fi
			if [ $opt = lax ] && [ $order = shut ]; then
				assert_line --regexp '^2 .* shut2=0/shutdown=2 '
			fi
			[ "$(stat_value rewritten)" -le 1 ] || fail "more than the first rewritten"
		done
	done
}

@test "a server that ends with close_notify: every client option and SSL_shutdown order reads as without the library, and connections are reused" {
	close_server notify
	for opt in strict lax; do
		for order in eof shut; do
			end_both 3 $opt $order
			# the first reused, then one own close that teaches how
			# the server ends, the rest reused again
			[ "$OWN_SHIM_CONNS" -le 2 ] || fail "$opt $order: $OWN_SHIM_CONNS connections"
		done
	done
}

@test "nginx (close_notify): the same output both orders, and reuse" {
	for v in 13 12; do
		use_tls $v
		for order in eof shut; do
			run_both 3 "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 3 strict $order
			assert_both_ok
			assert_same_output
			[ "$SHIM_CONNS" -le 2 ] || fail "$v $order: $SHIM_CONNS connections"
		done
	done
}

@test "Python (urllib, the default context) against a server that ends without close_notify: what it reads is the same" {
	close_server ragged
	cat >"$BATS_TEST_TMPDIR/get.py" <<'PY'
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
print("ignore_unexpected_eof", bool(ctx.options & getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)))
for i in range(3):
    try:
        with urllib.request.urlopen("https://localhost:%s/%d" % (sys.argv[1], i), context=ctx) as r:
            print(i, r.status, r.read(), r.read())
    except Exception as e:
        print(i, type(e).__name__, e)
PY
	: >"$OWN_LOG"
	run_plain "$PYTHON" "$BATS_TEST_TMPDIR/get.py" "$SERVER_PORT" "$TLS/ca.pem"
	: >"$OWN_LOG"
	run_shim "$PYTHON" "$BATS_TEST_TMPDIR/get.py" "$SERVER_PORT" "$TLS/ca.pem"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
}
