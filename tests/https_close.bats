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
teardown() { servers_stop; }

# close_server MODE: tests/servers/tls_close.py in MODE (notify|ragged)
close_server() {
	own_server "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" "$TLS/server.key" \
		"$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" "$1"
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

# At a request boundary the program's SSL_shutdown is answered without its
# close_notify going out, so that the connection can be pooled; a
# connection the library ended later (at exit, dropped from the pool)
# ended with the FIN alone, which a strict server reads as a truncation
# (docs/tls.md "The close_notify owed").  TLS_CLOSE_STRICT=1: the server
# logs how each connection the client ends was ended.
@test "a connection the library ends after the program's SSL_shutdown ends with the close_notify the program was told it sent, as alone (TLS 1.3 and 1.2)" {
	for v in 13 12; do
		if [ $v = 12 ]; then local max="TLS12=1"; else local max="TLS12="; fi
		own_server env $max TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
			"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
		: >"$OWN_LOG"
		run_plain "$CLIENTS/tls_config" shut_keep "$SERVER_PORT" "$TLS"
		ends_logged 3
		grep ' end ' "$OWN_LOG" | awk '{ print $2, $3 }' | sort | uniq -c >"$BATS_TEST_TMPDIR/plain.ends"
		: >"$OWN_LOG"
		run_shim "$CLIENTS/tls_config" shut_keep "$SERVER_PORT" "$TLS"
		ends_logged 1
		grep ' end ' "$OWN_LOG" | awk '{ print $2, $3 }' | sort | uniq -c >"$BATS_TEST_TMPDIR/shim.ends"
		own_server_stop
		echo "$SHIM_STATS"
		assert_same_output
		run cat "$BATS_TEST_TMPDIR/plain.ends"
		assert_output "      3 end close_notify"
		run cat "$BATS_TEST_TMPDIR/shim.ends"
		assert_output "      1 end close_notify"
		grep -q "TLSv1.$((v - 10))" "$BATS_TEST_TMPDIR/shim.out" || fail "not TLS 1.$((v - 10))"
		[ "$(stat_value tls_reused)" -ge 2 ] || fail "tls_reused $(stat_value tls_reused), want 2"
		# a pool that takes nothing: each connection closed at the
		# program's close(), after its SSL_shutdown was answered
		own_server env $max TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
			"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
		: >"$OWN_LOG"
		KEEPALIVE_MAX_IDLE_PER_HOST=0 run_shim "$CLIENTS/tls_config" shut_keep "$SERVER_PORT" "$TLS"
		ends_logged 3
		own_server_stop
		echo "$SHIM_STATS"
		assert_same_output
		run grep -c ' end close_notify$' "$OWN_LOG"
		assert_output 3
	done
}

# The same, a fork between: the child's copies of the parent's parked
# sockets are closed in the child at the fork (pool_after_fork_child)
# and must write nothing: a close_notify owed the parent's program sent
# there ends the parent's connection under its next request.
@test "a fork after a keep-alive request ended with SSL_shutdown: the child's end sends nothing on the parent's parked connection, the next requests reuse it" {
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	: >"$OWN_LOG"
	run_plain "$CLIENTS/tls_config" fork_parked "$SERVER_PORT" "$TLS"
	ends_logged 3
	: >"$OWN_LOG"
	run_shim "$CLIENTS/tls_config" fork_parked "$SERVER_PORT" "$TLS"
	ends_logged 1
	cat "$OWN_LOG"
	echo "$SHIM_STATS"
	assert_same_output
	run grep -c ' end ' "$OWN_LOG"
	assert_output 1
	run grep ' end ' "$OWN_LOG"
	assert_output --regexp ' end close_notify$'
	assert_equal "tls_reused $(stat_value tls_reused)" "tls_reused 2"
}

@test "a server that ends without close_notify: every client option and SSL_shutdown order reads as without the library, the first exchange too (its closes are not rewritten)" {
	close_server ragged
	for opt in strict lax; do
		for order in eof shut; do
			: >"$OWN_LOG"
			run_plain "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 4 $opt $order
			run_shim "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 4 $opt $order
			echo "$opt $order: $SHIM_STATS"
			assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
			# nothing is rewritten before the server's end is known
			# (docs/tls.md "Ragged closes"): the first exchange is
			# the server's own end too
			assert_same_output
			run cat "$BATS_TEST_TMPDIR/plain.out"
			if [ $opt = strict ] && [ $order = eof ]; then
				# proves the half without the library met the ragged end
				assert_line --regexp '^2 HTTP/1.1 200 OK body=5 read=0 err=1 reason="unexpected eof while reading"'
			fi
			if [ $opt = lax ] && [ $order = shut ]; then
				assert_line --regexp '^2 .* shut2=0/shutdown=2 '
			fi
			[ "$(stat_value rewritten)" -eq 0 ] || fail "a close rewritten"
		done
	done
}

@test "a server that ends with close_notify: every client option and SSL_shutdown order reads as without the library, and connections are reused" {
	close_server notify
	for opt in strict lax; do
		for order in eof shut; do
			end_both 3 $opt $order
			# the first close teaches how the server ends (strict:
			# not rewritten before), the rest are rewritten, reused
			[ "$OWN_SHIM_CONNS" -le 2 ] || fail "$opt $order: $OWN_SHIM_CONNS connections"
		done
	done
}

# "pend": SSL_pending and SSL_has_pending between the end's read and its
# SSL_get_error.  Neither is I/O, so the error stays the read's: alone
# ZERO_RETURN (nginx's close_notify).  The library took them for new calls
# and dropped the ZERO_RETURN it made for its own EOF: SSL_ERROR_SYSCALL,
# a truncation to most clients (a review of HTTPS across processes).
@test "nginx (close_notify): the same output in every order (the end read then SSL_shutdown, the reverse, SSL_pending between the read and its error), and reuse" {
	for v in 13 12; do
		use_tls $v
		for order in eof shut pend; do
			run_both 3 "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 3 strict $order
			assert_both_ok
			assert_same_output
			[ "$SHIM_CONNS" -le 2 ] || fail "$v $order: $SHIM_CONNS connections"
		done
	done
}

# "zero": after the end's read, a zero-length SSL_write and an SSL_read_ex
# whose count the program set first: alone ZERO_RETURN for both (the
# close_notify came) and the count left as it was.  The library said
# SSL_ERROR_SYSCALL for the write (its engine never got the close_notify
# the program was shown) and set the count to 0 (the HTTPS review at
# 4183573).
@test "nginx (close_notify): a zero-length SSL_write and an SSL_read_ex after the end read answer as alone (ZERO_RETURN, the count untouched)" {
	for v in 13 12; do
		use_tls $v
		run_both 3 "$CLIENTS/tls_end" "$SERVER_PORT" "$TLS/ca.pem" 3 strict zero
		assert_both_ok
		assert_same_output
		run cat "$BATS_TEST_TMPDIR/shim.out"
		assert_line --partial "3 HTTP/1.1 404 Not Found body=153 read=0 err=6 reason=\"none\" shutdown=2 write0=0 err=6 read_ex=0 count=77 err=6"
		[ "$SHIM_CONNS" -le 2 ] || fail "$v: $SHIM_CONNS connections"
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

# ------------------------------------------------------------ first exchange

# The first exchange with a destination, as a process's first and across
# processes through a broker (the wrapper runs one for the command): every
# server end x client option x SSL_shutdown order, (a) fresh: one process
# of one exchange under a broker that knows nothing; (b) learnt: the same,
# then a second process of two exchanges, whose first is what the broker
# learnt from the first process.  Each as without the library; against
# close_notify the second process's two exchanges share one connection
# (its first close rewritten), against the FIN alone they do not.

WRAP="$ROOT/scripts/keepalive"

# wrap_both SCRIPT: sh -c SCRIPT without the library and under `keepalive`
# (a private broker); outputs compared, OWN_LOG of each half kept
wrap_both() {
	: >"$OWN_LOG"
	run_plain sh -c "$1"
	cp "$OWN_LOG" "$BATS_TEST_TMPDIR/plain.log"
	: >"$OWN_LOG"
	mkdir -p -m 0700 "$BATS_TEST_TMPDIR/xdg"
	SHIM_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$BATS_TEST_TMPDIR/xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_STATS=1 "$WRAP" sh -c "$1" \
		>"$BATS_TEST_TMPDIR/shim.out" 2>"$BATS_TEST_TMPDIR/shim.err" </dev/null || SHIM_STATUS=$?
	cp "$OWN_LOG" "$BATS_TEST_TMPDIR/shim.log"
	echo "$1: plain status=$PLAIN_STATUS shim status=$SHIM_STATUS"
	grep '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" || true
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
}

# connections the server saw for the requests of the second process
# (paths /1 /2 after the first process's /1: the log's last two lines)
second_conns() { tail -n 2 "$BATS_TEST_TMPDIR/$1.log" | awk '!seen[$1]++ { n++ } END { print n + 0 }'; }

@test "first exchange matrix: server end x client option x SSL_shutdown order x (fresh broker | broker that learnt), each as without the library" {
	local e="$CLIENTS/tls_end"
	for mode in notify ragged; do
		close_server $mode
		for opt in strict lax; do
			for order in eof shut; do
				wrap_both "$e $SERVER_PORT $TLS/ca.pem 1 $opt $order"
				wrap_both "$e $SERVER_PORT $TLS/ca.pem 1 $opt $order; $e $SERVER_PORT $TLS/ca.pem 2 $opt $order"
				if [ $mode = notify ]; then
					assert_equal "$mode $opt $order: second process conns $(second_conns shim)" \
						"$mode $opt $order: second process conns 1"
				else
					assert_equal "$mode $opt $order: second process conns $(second_conns shim)" \
						"$mode $opt $order: second process conns 2"
				fi
			done
		done
		own_server_stop
	done
}

@test "first exchange, a program that never reads the end (urllib): the library reads it after the program's close, in the process and for the next process through the broker" {
	cat >"$BATS_TEST_TMPDIR/get.py" <<'PY'
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
for i in range(int(sys.argv[3])):
    with urllib.request.urlopen("https://localhost:%s/%d" % (sys.argv[1], i + 1), context=ctx) as r:
        print(i, r.status, r.read())
PY
	for mode in notify ragged; do
		close_server $mode
		local g="$PYTHON $BATS_TEST_TMPDIR/get.py $SERVER_PORT $TLS/ca.pem"
		# in one process: the second request knows how the first ended
		wrap_both "$g 3"
		run awk '!seen[$1]++ { n++ } END { print n + 0 }' "$BATS_TEST_TMPDIR/shim.log"
		if [ $mode = notify ]; then assert_output 2; else assert_output 3; fi
		# across processes: what the first process learnt at its exit
		wrap_both "$g 1; $g 2"
		if [ $mode = notify ]; then
			assert_equal "second process conns $(second_conns shim)" "second process conns 1"
		else
			assert_equal "second process conns $(second_conns shim)" "second process conns 2"
		fi
		own_server_stop
	done
}

# ------------------------------------------------------------ a server that ends by User-Agent

@test "a server that ends by User-Agent (the FIN alone for MSIE, close_notify for others): a request of the other kind is not read with the end learnt for the first, in one process and through a broker, each as without the library" {
	close_server byagent
	local e="$CLIENTS/tls_end"
	for opt in strict lax; do
		for order in eof shut; do
			# one process: two requests of one kind, then two of the other
			end_both 4 $opt $order 'curl/8+Mozilla/4.0 (compatible; MSIE 5.0)'
			end_both 4 $opt $order 'Mozilla/4.0 (compatible; MSIE 5.0)+curl/8'
			# across processes, what the broker learnt for the other kind
			wrap_both "$e $SERVER_PORT $TLS/ca.pem 2 $opt $order curl/8; $e $SERVER_PORT $TLS/ca.pem 2 $opt $order 'MSIE 5.0'"
		done
	done
	# proves the half without the library met both ends
	run_plain "$e" "$SERVER_PORT" "$TLS/ca.pem" 2 strict eof 'curl/8+MSIE 5.0'
	run cat "$BATS_TEST_TMPDIR/plain.out"
	assert_line --regexp '^1 .* read=0 err=6 '
	assert_line --regexp '^2 .* read=0 err=1 reason="unexpected eof while reading"'
}

# SSL_writes after the EOF of an answer the program asked to close
# (docs/replay.md "The program's signals"): alone the server has closed,
# the first write is taken and reset by its kernel, the second fails with
# EPIPE and the SIGPIPE of the socket BIO's write().  With the library the
# first is taken and dropped (our FIN), the second is answered EPIPE by
# the library: before, without the signal (status 0 where alone 141; a
# blocked SIGPIPE was not pending).  tests/clients/tls_write_after.c with
# SIGPIPE at its default, ignored, and blocked: the same status, output
# and pending signal as alone, and nothing written after the EOF reaches
# the server.
@test "SSL_writes after the owed EOF: the second fails with EPIPE and SIGPIPE as alone (default, ignored, blocked)" {
	close_server notify
	local mode
	for mode in dfl ign block; do
		: >"$OWN_LOG"
		run_plain "$CLIENTS/tls_write_after" "$SERVER_PORT" "$TLS/ca.pem" $mode
		: >"$OWN_LOG"
		run_shim "$CLIENTS/tls_write_after" "$SERVER_PORT" "$TLS/ca.pem" $mode
		echo "$mode: plain status=$PLAIN_STATUS shim status=$SHIM_STATUS; $SHIM_STATS"
		cat "$BATS_TEST_TMPDIR/shim.out"
		assert_equal "$mode: shim status $SHIM_STATUS" "$mode: shim status $PLAIN_STATUS"
		assert_same_output
		# (killed by the signal, the library prints no figures)
		[ $mode = dfl ] || [ "$(stat_value tls_reused)" -ge 1 ] || fail "$mode: not reused: $SHIM_STATS"
		run grep -c 'POST' "$OWN_LOG"
		assert_output 0
	done
	[ "$PLAIN_STATUS" -eq 0 ] # (block: alone the signal pends, status 0)
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line 'SIGPIPE pending: 1'
}

# A forked child's copy of the program's SSL writes valid records on the
# connection after its parent's close request (docs/hold.md "A child that
# writes on an inherited connection"): alone the server answers /a with
# its close_notify and closes, the POST never executed; the library had
# rewritten /a (the server's end learnt) and the server was told
# keep-alive.  tests/clients/tls_fork_write.c.
@test "a forked child's SSL_write of a POST after its parent's close request: never executed, the parent reads one answer, as alone" {
	close_server notify
	run_plain "$CLIENTS/tls_fork_write" "$SERVER_PORT" "$TLS/ca.pem"
	run grep -c 'POST' "$OWN_LOG"
	assert_output 0
	: >"$OWN_LOG"
	run_shim "$CLIENTS/tls_fork_write" "$SERVER_PORT" "$TLS/ca.pem"
	echo "plain status=$PLAIN_STATUS shim status=$SHIM_STATUS; $SHIM_STATS"
	cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run grep -c 'POST' "$OWN_LOG"
	assert_output 0
}

# The close_notify the program's SSL_shutdown was told it sent, held while
# the connection may be parked, goes out before the program shows the
# connection ends: its own FIN (shutdown(SHUT_WR), SHUT_RDWR), its exit
# with the socket (or the SSL) still its own, or its exec (the socket kept
# by the next image, or parked and closed by the exec), a fork or spawn
# before its close (the connection then has another owner), an SSL_clear
# (the SSL reused: its connection ends).  Before, the FIN went alone
# and the exit sent nothing ("end eof").  And a SENT bit the program set
# itself (SSL_set_shutdown, nothing sent alone) makes none: its
# SSL_shutdown or SSL_read after it waits for the server's, as alone;
# before, the library sent a close_notify the program never sent
# (docs/tls.md "The close_notify owed"; the review of HTTPS at 1f7b6aa).
@test "the close_notify SSL_shutdown was told it sent goes before the program's own FIN, its exit or its exec, a fork or SSL_clear, and none is made up for SSL_set_shutdown, as alone (TLS 1.3)" {
	local m n
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	for m in noclose nofree shutwr rdwr setshut setshut_read exec exec_closed exec_fail fork system clear \
		close_clear; do
		# (one round before an exec: the first round's connection parked
		# would be the second's)
		n=2
		case $m in exec | exec_closed) n=1 ;; esac
		: >"$OWN_LOG"
		run_plain "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" $n "$m"
		ends_logged $n
		grep ' end ' "$OWN_LOG" | awk '{ print $3 }' | sort | uniq -c >"$BATS_TEST_TMPDIR/plain.ends"
		: >"$OWN_LOG"
		run_shim "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" $n "$m"
		ends_logged $n
		grep ' end ' "$OWN_LOG" | awk '{ print $3 }' | sort | uniq -c >"$BATS_TEST_TMPDIR/shim.ends"
		echo "== $m"
		assert_same_output
		run diff "$BATS_TEST_TMPDIR/plain.ends" "$BATS_TEST_TMPDIR/shim.ends"
		assert_success
	done
}

# The other half of a lingering close: after SSL_shutdown (and SSL_free)
# the program waits on its socket for the server's end, in a read, poll,
# select or epoll_wait, or before a second SSL_shutdown.  Alone the
# server answers the close_notify at once; the library held it for the
# pool, so the server never heard and the wait lasted to the server's
# idle timeout (for ever with this one: "end=-9" after the client's 3 s
# bound).  Now a wait for input makes the close real (docs/tls.md "The
# close_notify owed"; the review of HTTPS at 1f7b6aa, item 3).  Rounds
# on a connection handed out too (TLS_OWED_TEACH=1).
@test "after SSL_shutdown a wait on the socket for the server's end (read, poll, select, epoll, a second SSL_shutdown) ends as alone, its close_notify sent (TLS 1.3)" {
	local m
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	for m in drain drain_read drain_select drain_epoll again drain_noshut; do
		owed_wait "$m" ""
		owed_wait "$m" TLS_OWED_TEACH=1
	done
	# the hand-outs were made (round 1 of TLS_OWED_TEACH=1 on round 0's)
	run_shim env TLS_OWED_TEACH=1 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 2 drain
	assert_equal "tls_reused $(stat_value tls_reused)" "tls_reused 1"
}

# The same waits where the request asked to close (Connection: close) and
# the library kept the connection: the program's raw read, past libssl,
# ends at the EOF it asked for where it waited for ever ("end=-9"
# stands for the client's 3 s bound).  The server's close_notify record,
# read raw alone where libssl had not read it, is not made up: "drained"
# differs (docs/tls.md "The close_notify owed").
@test "after a response to Connection: close the program's raw wait for the server's end sees the EOF, on a connection handed out too (TLS 1.3)" {
	local m
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	for m in drain drain_read drain_select drain_epoll again drain_noshut; do
		run_plain env TLS_OWED_TEACH=1 TLS_OWED_CLOSE=1 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 2 "$m"
		run_shim env TLS_OWED_TEACH=1 TLS_OWED_CLOSE=1 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 2 "$m"
		echo "== $m: $SHIM_STATS"
		assert_equal "rewritten $(stat_value rewritten)" "rewritten 2"
		sed -i 's/ drained=[0-9]*//' "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out"
		assert_same_output
	done
}

# owed_wait MODE "ENV...": tls_owed MODE (2 rounds) alone and with the
# library: the same output, and without a hand-out (ENV empty) the same
# kinds of end logged by the strict server (with one, the first owner's
# end is its next owner's).
owed_wait() {
	local n=2
	case "$2" in *TEACH*) n=3 ;; esac
	: >"$OWN_LOG"
	run_plain env $2 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 2 "$1"
	ends_logged $n
	grep ' end ' "$OWN_LOG" | awk '{ print $3 }' | sort -u >"$BATS_TEST_TMPDIR/plain.ends"
	: >"$OWN_LOG"
	run_shim env $2 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 2 "$1"
	ends_logged 2
	grep ' end ' "$OWN_LOG" | awk '{ print $3 }' | sort -u >"$BATS_TEST_TMPDIR/shim.ends"
	echo "== $1 $2"
	assert_same_output
	[ -n "$2" ] && return 0
	run diff "$BATS_TEST_TMPDIR/plain.ends" "$BATS_TEST_TMPDIR/shim.ends"
	assert_success
}

# A close the program asked for (Connection: close) and the library took
# away: alone the server ends each connection, with its close_notify,
# and the client ends none; a program that ends without SSL_shutdown
# (CPython) left the library to end it later, at exit, with a bare FIN,
# which a strict server logs as a truncation ("end eof").  Now the
# library ends it with a close_notify (docs/tls.md "The close_notify
# owed"; the review of HTTPS at 4f8f2cb, C).
@test "a connection whose Connection: close the library took away is ended by the library with a close_notify, never a bare FIN (TLS 1.3)" {
	own_server env TLS_CLOSE_STRICT=1 "$PYTHON" "$ROOT/tests/servers/tls_close.py" "$TLS/server.pem" \
		"$TLS/server.key" "$BATS_TEST_TMPDIR/port" "$BATS_TEST_TMPDIR/own.log" notify
	for m in free; do
		: >"$OWN_LOG"
		run_plain env TLS_OWED_TEACH=1 TLS_OWED_CLOSE=1 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 3 "$m"
		: >"$OWN_LOG"
		run_shim env TLS_OWED_TEACH=1 TLS_OWED_CLOSE=1 "$CLIENTS/tls_owed" "$SERVER_PORT" "$TLS/ca.pem" 3 "$m"
		echo "== $m: $SHIM_STATS"
		assert_same_output
		ends_logged 1
		cat "$OWN_LOG"
		[ "$(stat_value tls_reused)" -ge 1 ] || fail "$m: tls_reused $(stat_value tls_reused)"
		run grep -c ' end eof' "$OWN_LOG"
		assert_output 0
		run grep -c ' end close_notify' "$OWN_LOG"
		assert_output 1
	done
}
