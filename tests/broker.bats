#!/usr/bin/env bats
# The broker (keepalive-broker, docs/design.md §8): separate processes, one per
# request, share pooled connections through it.  Each test has its own
# XDG_RUNTIME_DIR (mode 0700) under $BATS_TEST_TMPDIR, so no broker of
# another test, suite or user is ever reused; the wrapper's brokers live
# in a mktemp -d directory below it and die with the wrapper.

load helpers

# the broker's answer is awaited up to 10 s (not 100 ms): on a loaded
# machine, with the files running in parallel, a late answer makes a
# process dial, and the connection counts would measure the scheduler
export KEEPALIVE_BROKER_TIMEOUT_MS=10000
# loops of 10 to 20 interpreter processes: on a loaded 2-core machine the
# plain run alone took over 20 s (a hang guard, never a measure)
CLIENT_TIMEOUT=$((CLIENT_TIMEOUT > 60 ? CLIENT_TIMEOUT : 60))

setup_file() {
	suite_setup
	make -s -C "$ROOT" build/keepalive-broker >&2
}
setup() {
	XDG="$BATS_TEST_TMPDIR/xdg"
	mkdir -m 0700 "$XDG"
	BROKER_PID=
}
teardown() {
	[ -n "$BROKER_PID" ] && _stop_pid "$BROKER_PID"
	[ -n "${MUTE_PID:-}" ] && _stop_pid "$MUTE_PID"
	[ -n "${FULL_PID:-}" ] && _stop_pid "$FULL_PID"
	[ -n "${OPEN_DIR:-}" ] && rm -rf "$OPEN_DIR"
	servers_stop
}

BROKER="$ROOT/build/keepalive-broker"
WRAP="$ROOT/scripts/keepalive"
BROKER_CLIENT="$ROOT/tests/clients/broker_client.py"

# run_wrapped N [VAR=VALUE...] CMD...: CMD without the shim, then under
# scripts/keepalive (so with a broker for its lifetime); like run_both.
# The stats lines of all its processes -> SHIM_STATS.
run_wrapped() {
	local n="$1"
	shift
	server_reset
	run_plain "$@"
	[ "$PLAIN_STATUS" -eq 0 ] && server_wait_requests "$n"
	PLAIN_CONNS=$(server_conns)
	PLAIN_REQS=$(server_requests)
	server_reset
	SHIM_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" KEEPALIVE_STATS=1 "$WRAP" "$@" \
		>"$BATS_TEST_TMPDIR/shim.out" 2>"$BATS_TEST_TMPDIR/shim.err" </dev/null ||
		SHIM_STATUS=$?
	# the summed line comes just after the command ended (docs/wrapper.md)
	wait_until grep -q '^libkeepalive: processes=' "$BATS_TEST_TMPDIR/shim.err" || true
	SHIM_STATS="$(grep '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" || true)"
	[ "$SHIM_STATUS" -eq 0 ] && server_wait_requests "$n"
	SHIM_CONNS=$(server_conns)
	SHIM_REQS=$(server_requests)
	echo "plain: status=$PLAIN_STATUS requests=$PLAIN_REQS conns=$PLAIN_CONNS"
	echo "wrapped: status=$SHIM_STATUS requests=$SHIM_REQS conns=$SHIM_CONNS"
	echo "wrapped stderr (first lines):"
	grep -v '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" | head -n 10
}

# stat_sum NAME: NAME summed over every process's stats line
stat_sum() {
	sed -nE "s/.*[ :]$1=([0-9]+).*/\\1/p" <<<"$SHIM_STATS" | awk '{ s += $1 } END { print s + 0 }'
}

# broker_start [VAR=VALUE...]: a broker of our own at $XDG/b/broker.sock,
# its log in $BATS_TEST_TMPDIR/broker.log
broker_start() {
	mkdir -p -m 0700 "$XDG/b"
	BROKER_SOCK="$XDG/b/broker.sock"
	env -u LD_PRELOAD "$@" "$BROKER" --socket "$BROKER_SOCK" </dev/null \
		>/dev/null 2>>"$BATS_TEST_TMPDIR/broker.log" 3>&- &
	BROKER_PID=$!
	wait_until test -S "$BROKER_SOCK"
}

# shell loops: one process per request
curl_loop() { echo "for i in \$(seq $1); do $CURL -sS http://127.0.0.1:$NGINX_PORT/f || exit 1; done"; }
ruby_loop() { echo "for i in \$(seq $1); do $RUBY -rnet/http -e 'print Net::HTTP.get(URI(ARGV[0]))' http://127.0.0.1:$NGINX_PORT/f || exit 1; done"; }
# pyget URL: a command line that prints URL's body (python3 urllib)
# open_dir: OPEN_DIR, a folder anyone may enter (the checkout may sit in
# a 0700 one, as CI's does), removed by teardown
open_dir() {
	[ -n "${OPEN_DIR:-}" ] || OPEN_DIR="$(mktemp -d /tmp/keepalive-test-open.XXXXXX)"
	chmod 0755 "$OPEN_DIR"
}

# open_copy FILE: a copy of FILE that another uid can read, in OPEN_DIR
open_copy() {
	open_dir
	cp "$1" "$OPEN_DIR/" && chmod a+rx "$OPEN_DIR/$(basename "$1")"
	echo "$OPEN_DIR/$(basename "$1")"
}

pyget() { echo "$PYTHON -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' $1"; }
python_loop() { echo "for i in \$(seq $1); do $(pyget http://127.0.0.1:$NGINX_PORT/f) || exit 1; done"; }

@test "broker: a shell loop of 20 curl processes under keepalive runs on one connection, same output" {
	curl_ok || skip "curl cannot start with libasan preloaded"
	nginx_start
	run_wrapped 20 sh -c "$(curl_loop 20)"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 20
	assert_same_output
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 20"
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 20"
	# one, or two if the machine was slow enough for the broker to see a
	# process's question before the last one's hand-over
	[ "$SHIM_CONNS" -le 2 ] || fail "wrapped conns $SHIM_CONNS, want 1 (2 at most)"
	[ "$(stat_sum broker_got)" -ge 18 ] || fail "broker_got $(stat_sum broker_got)"
	[ "$(stat_sum broker_gave)" -eq 20 ] || fail "broker_gave $(stat_sum broker_gave)"
	# KEEPALIVE_STATS=1: one line for the whole command, its 20 curls (the
	# shell did nothing and adds nothing)
	assert_equal "$(grep -c '^libkeepalive: ' <<<"$SHIM_STATS")" 1
	assert_equal "$(grep -o 'processes=[0-9]*' <<<"$SHIM_STATS")" "processes=20"
	assert_equal "$(stat_sum connects)" 20
}

@test "broker: a loop of ruby -e Net::HTTP.get processes reuses one connection, same output" {
	nginx_start
	run_wrapped 10 sh -c "$(ruby_loop 10)"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 10
	assert_same_output
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 10"
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 10"
	[ "$SHIM_CONNS" -le 2 ] || fail "wrapped conns $SHIM_CONNS, want 1 (2 at most)"
}

@test "broker: a loop of python3 urllib processes reuses one connection, same output" {
	nginx_start
	run_wrapped 10 sh -c "$(python_loop 10)"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 10
	assert_same_output
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 10"
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 10"
	[ "$SHIM_CONNS" -le 2 ] || fail "wrapped conns $SHIM_CONNS, want 1 (2 at most)"
}

@test "broker: plain LD_PRELOAD processes with a long-running broker (KEEPALIVE_BROKER) share one connection" {
	nginx_start
	broker_start
	for i in 1 2 3 4 5; do
		run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
		cat "$BATS_TEST_TMPDIR/shim.out" >>"$BATS_TEST_TMPDIR/all.out"
	done
	server_wait_requests 5
	for i in 1 2 3 4 5; do cat "$NGINX_DIR/www/f"; done | cmp - "$BATS_TEST_TMPDIR/all.out"
	assert_equal "conns $(nginx_conns)" "conns 1"
	# the broker stays, holding the connection, after they all exited
	kill -0 "$BROKER_PID"
	run "$BROKER_CLIENT" "$BROKER_SOCK" get 127.0.0.1 "$NGINX_PORT"
	assert_output "got"
}

@test "broker: a process of another uid never gets a connection a root process pooled" {
	[ "$(id -u)" = 0 ] || skip "needs root to run a client as nobody"
	command -v setpriv >/dev/null || skip "no setpriv"
	nginx_start
	local nobody="setpriv --reuid=65534 --regid=65534 --clear-groups" f preload=
	# nobody's processes load the library too: from where nobody can read it
	for f in $PRELOAD; do
		case $f in "$ROOT"/*) f=$(open_copy "$f") ;; esac
		preload="$preload${preload:+ }$f"
	done
	PRELOAD=$preload
	local get
	get=$(pyget http://127.0.0.1:$NGINX_PORT/f)
	run_wrapped 5 sh -c "$get && for i in 1 2 3; do $nobody $get || exit 1; done && $get"
	assert_both_ok
	assert_same_output
	# root: 1 connection, reused by the last root curl; nobody: 3 of its own
	assert_equal "wrapped conns $SHIM_CONNS" "wrapped conns 4"
	assert_equal "got $(stat_sum broker_got)" "got 1"
	# nobody's library refused root's socket directory, and said nothing
	# on its stderr (alone there is nothing: a process whose uid changed
	# inside a keepalive is no attack; docs/broker.md "Another user's
	# broker"); it said it on stderr before
	assert_equal "$(count_matches 'not using the broker ' "$BATS_TEST_TMPDIR/shim.err")" 0
}

@test "broker: refuses a peer of another uid (SO_PEERCRED), served by socket activation (LISTEN_FDS)" {
	[ "$(id -u)" = 0 ] || skip "needs root to run a client as nobody"
	command -v setpriv >/dev/null || skip "no setpriv"
	nginx_start
	# a socket anyone may reach, so that only the broker's own check stands
	open_dir
	local open="$OPEN_DIR" client
	client=$(open_copy "$BROKER_CLIENT") # nobody runs it
	"$PYTHON" "$BROKER_CLIENT" "$open/broker.sock" listen-exec "$BROKER" </dev/null \
		>/dev/null 2>"$BATS_TEST_TMPDIR/broker.log" 3>&- &
	BROKER_PID=$!
	wait_until test -S "$open/broker.sock"
	# root hands in a connection, nobody asks for it, root still gets it
	run "$PYTHON" "$BROKER_CLIENT" "$open/broker.sock" put 127.0.0.1 "$NGINX_PORT"
	assert_output "open"
	run setpriv --reuid=65534 --regid=65534 --clear-groups "$PYTHON" "$client" "$open/broker.sock" get 127.0.0.1 "$NGINX_PORT"
	refute_output "got"
	grep -q "refused pid [0-9]*: uid 65534 is not ours" "$BATS_TEST_TMPDIR/broker.log"
	run "$PYTHON" "$BROKER_CLIENT" "$open/broker.sock" get 127.0.0.1 "$NGINX_PORT"
	assert_output "got"
}

@test "broker: killed (SIGKILL) in the middle of a loop: every request still succeeds; reuse resumes when a broker is back" {
	nginx_start
	# 1-5 share a connection; after 5 the broker is killed; 6 and 7 dial
	# their own; after 7 a new broker comes up at the same path; 8 dials
	# and hands its connection over, 9 and 10 reuse it
	local get restart
	get=$(pyget http://127.0.0.1:$NGINX_PORT/f)
	restart="env -u LD_PRELOAD $BROKER --socket \$KEEPALIVE_BROKER --with-parent </dev/null & while ! $BROKER --check \$KEEPALIVE_BROKER; do sleep 0.01; done"
	# (the plain half has no broker to kill or restart)
	run_wrapped 10 sh -c "for i in \$(seq 10); do $get || exit 1; [ -n \"\$KEEPALIVE_BROKER_PID\" ] || continue; [ \$i = 5 ] && kill -9 \$KEEPALIVE_BROKER_PID; [ \$i = 7 ] && { $restart; }; done; exit 0"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 10
	assert_same_output
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 10"
	# 1-5, 6, 7, 8-10: 4 connections (5 if the machine was slow)
	[ "$SHIM_CONNS" -ge 4 ] && [ "$SHIM_CONNS" -le 5 ] || fail "wrapped conns $SHIM_CONNS, want 4"
	[ "$(stat_sum broker_got)" -ge 5 ] || fail "broker_got $(stat_sum broker_got), want 6"
}

@test "broker: junk, truncated, oversized messages and wrong fds are refused with a log line; it keeps serving" {
	nginx_start
	broker_start
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" junk 127.0.0.1 "$NGINX_PORT"
	assert_success
	# every bad message costs its sender the connection
	for c in garbage truncated oversized bad-version bad-magic reply-to-broker other-netns \
		put-without-fd put-pipe put-udp put-listening put-other-destination put-two-fds; do
		assert_line "$c closed"
	done
	assert_line "vanished ok"
	local log="$BATS_TEST_TMPDIR/broker.log"
	cat "$log"
	for why in "short message" "oversized message" "unknown protocol version" "bad magic" \
		"reply sent to the broker" "bad destination key" \
		"put without exactly one fd" "not a socket" "not TCP" "a listening socket" \
		"peer is not the key's destination"; do
		grep -q "refused a message from pid [0-9]*: $why" "$log" || fail "no log line: $why"
	done
	kill -0 "$BROKER_PID"
	# and it still serves: four processes share one connection
	nginx_reset
	for i in 1 2 3 4; do
		run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
	done
	server_wait_requests 4
	assert_equal "conns $(nginx_conns)" "conns 1"
}

@test "broker: a TLS connection with its state (TPUT): apart from the plain pool, given once under its name with its bytes; bad TLS messages refused" {
	NGINX_TLS=1 nginx_start
	broker_start
	local port="$NGINX_TLS13_PORT"
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" tls-put 127.0.0.1 "$port" name-a state-of-a
	assert_output "sent"
	# a plain GET to the same destination never gets a TLS connection
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" get 127.0.0.1 "$port"
	assert_output "none"
	# nor a TGET under another name (another configuration)
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" tls-get 127.0.0.1 "$port" name-b
	assert_output "none"
	# its own name: the socket (to the server) and the very bytes, once
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" tls-get 127.0.0.1 "$port" name-a
	assert_output "got state-of-a"
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" tls-get 127.0.0.1 "$port" name-a
	assert_output "none"
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" tls-junk 127.0.0.1 "$port"
	assert_success
	for c in tput-without-fd tput-pipe tput-other-destination tput-no-state tput-no-lifetime \
		tput-oversized tget-with-fd tget-with-record treply-to-broker; do
		assert_line "$c closed"
	done
	local log="$BATS_TEST_TMPDIR/broker.log"
	cat "$log"
	for why in "TLS put without exactly one fd" "not a socket" "peer is not the key's destination" \
		"session without bytes or lifetime" "oversized message" "request with an fd" \
		"TLS message with a connection record and no connection" "reply sent to the broker"; do
		grep -q "refused a message from pid [0-9]*: $why" "$log" || fail "no log line: $why"
	done
	# the state's bytes are never in its log
	! grep -q "state-of-a" "$log"
	kill -0 "$BROKER_PID"
}

@test "broker: exits after KEEPALIVE_BROKER_EXIT_MS idle with nothing pooled, and removes its socket" {
	broker_start KEEPALIVE_BROKER_EXIT_MS=300
	wait_until _pid_gone "$BROKER_PID"
	_pid_gone "$BROKER_PID"
	[ ! -e "$BROKER_SOCK" ]
	BROKER_PID=
}

@test "broker: a connection its server closed while in the broker is not handed out" {
	# the server closes a connection idle for 300 ms (without a word)
	scripted_start idle_close300
	broker_start KEEPALIVE_LOG=debug
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SCRIPTED_PORT" / 1
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "gave $(stat_value broker_gave)" "gave 1"
	sleep 0.8
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SCRIPTED_PORT" / 1
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "got $(stat_value broker_got)" "got 0"
	assert_equal "replayed $(stat_value replayed)" "replayed 0"
	assert_equal "conns $(scripted_conns)" "conns 2"
	grep -q "server closed a pooled connection" "$BATS_TEST_TMPDIR/broker.log"
}

@test "broker: none running at KEEPALIVE_BROKER, or its directory open to others: requests go on as before" {
	nginx_start
	run_shim KEEPALIVE_BROKER="$XDG/none/broker.sock" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	mkdir -m 0777 "$XDG/open"
	run_shim KEEPALIVE_BROKER="$XDG/open/broker.sock" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	grep -q "not using the broker .*open to group or others" "$BATS_TEST_TMPDIR/shim.err"
	ln -s "$XDG/open" "$XDG/link"
	run_shim KEEPALIVE_BROKER="$XDG/link/broker.sock" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	grep -q "not using the broker .*symlink" "$BATS_TEST_TMPDIR/shim.err"
	# and the broker itself refuses such a directory, saying why
	run env -u LD_PRELOAD "$BROKER" --socket "$XDG/open/broker.sock"
	assert_failure
	assert_output --partial "group or others"
}

# _stopped PID: /proc says the process is stopped (state T)
_stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }

# docs/broker.md "A stopped broker": the link's peer credentials name the
# broker's pid, and /proc says it is stopped: no process waits for it.  The
# library before waited KEEPALIVE_BROKER_TIMEOUT_MS in every process for a
# reply that never came ("no reply in time"), each learning it alone.
@test "broker: a stopped broker (SIGSTOP) is not waited for: each process sees it is stopped and dials directly, same output" {
	nginx_start
	broker_start
	kill -STOP "$BROKER_PID"
	# (kill returns once the signal is sent; the broker is stopped when it
	# next runs, later on a loaded machine: until then it answers)
	wait_until _stopped "$BROKER_PID"
	for i in 1 2 3; do
		run_shim KEEPALIVE_LOG=info KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
		cmp "$NGINX_DIR/www/f" "$BATS_TEST_TMPDIR/shim.out"
		run grep -c "broker: it is stopped" "$BATS_TEST_TMPDIR/shim.err"
		assert_output 1
		run grep -c "no reply in time" "$BATS_TEST_TMPDIR/shim.err"
		assert_output 0
	done
	# running again, it is used again
	kill -CONT "$BROKER_PID"
	run_shim KEEPALIVE_LOG=info KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	run grep -c "broker: it is stopped" "$BATS_TEST_TMPDIR/shim.err"
	assert_output 0
	run "$BROKER_CLIENT" "$BROKER_SOCK" get 127.0.0.1 "$NGINX_PORT"
	assert_output "got"
}

# docs/broker.md "A silent broker": a broker that accepts and never answers
# (mute_broker_start; ours never should, but a hang of its loop would look
# so).  The library before waited KEEPALIVE_BROKER_TIMEOUT_MS (100 ms) in
# every process ("no reply in time" in each of 6), each learning it
# alone.  Now the first to wait says so beside the socket, and a process
# within the next second dials directly ("another process found it
# silent"); after that second one asks again.  The same output as alone.
@test "broker: a silent broker (accepts, never answers) is waited for by one process, not by each; the others dial directly, same output" {
	nginx_start
	mute_broker_start
	local i waited=0 told=0
	for i in 1 2 3 4 5 6; do
		run_shim KEEPALIVE_LOG=info KEEPALIVE_BROKER="$XDG/mute/broker.sock" "$CLIENTS/httpget" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
		# (the body: the head's Connection line is rewritten, hop-by-hop)
		sed '1,/^\r$/d' "$BATS_TEST_TMPDIR/shim.out" | cmp - "$NGINX_DIR/www/f"
		waited=$((waited + $(count_matches "no reply in time" "$BATS_TEST_TMPDIR/shim.err")))
		told=$((told + $(count_matches "another process found it silent" "$BATS_TEST_TMPDIR/shim.err")))
	done
	kill "$MUTE_PID" 2>/dev/null || true
	echo "waited $waited, told $told"
	# (a process more than a second after the last wait asks again: on a
	# loaded machine more than one may wait, never all six)
	[ "$waited" -ge 1 ] && [ "$waited" -lt 6 ] && [ "$told" -ge 1 ] ||
		fail "waited $waited, told $told"
	[ $((waited + told)) -eq 6 ] || fail "waited $waited + told $told is not 6"
	ls "$XDG/mute/.silent-$(stat -c %i "$XDG/mute/broker.sock")-"*
}

# exit() from a signal handler (a common SIGALRM/SIGTERM pattern) that
# interrupted the library inside a connection's lock (the read path's
# framing, the park in close): the library's exit work (the idle
# connections to the broker) waited for that lock, which only the
# interrupted code could release, for ever: 5 of 150 processes hung in
# the review of invariant 3 at e985afe.  Now the exit work steps aside in
# a handler inside our locks (docs/binding.md "Signal handlers inside our
# locks").  100 runs of tests/clients/sig_locked.c exit (the timer firing
# once, 0.2 to 20 ms in), each bounded by 5 s: none hung.
@test "broker: exit() from a signal handler that interrupted the library inside a lock: the process exits, never hangs at exit (100 runs)" {
	nginx_start
	broker_start
	local i hung=0 st odd=
	for ((i = 1; i <= 100; i++)); do
		st=0
		timeout -s KILL "$((5 * SLOW))" env LD_PRELOAD="$PRELOAD" KEEPALIVE_PORTS="$NGINX_PORT" \
			KEEPALIVE_BROKER="$BROKER_SOCK" "$CLIENTS/sig_locked" 127.0.0.1 "$NGINX_PORT" /f 30 exit "$i" \
			>/dev/null 2>&1 || st=$?
		case $st in
		137) hung=$((hung + 1)) ;;
		0 | 3) ;;
		*) odd+=" $st" ;;
		esac
	done
	assert_equal "hung $hung, other statuses:$odd" "hung 0, other statuses:"
}

@test "broker: keepalive --daemon, --status, --stop: a per-user broker for plain LD_PRELOAD processes (KEEPALIVE_BROKER=1)" {
	nginx_start
	# (3>&-: the detached broker must not hold bats' output open)
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
	assert_success
	BROKER_PID=$(cat "$XDG/keepalive/broker.pid")
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --status
	assert_success
	assert_output --partial "running at $XDG/keepalive/broker.sock"
	# a second --daemon finds it and starts nothing
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
	assert_success
	assert_output --partial "already running"
	for i in 1 2 3; do
		run_shim XDG_RUNTIME_DIR="$XDG" KEEPALIVE_BROKER=1 "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
	done
	server_wait_requests 3
	assert_equal "conns $(nginx_conns)" "conns 1"
	# --status shows what it holds and its counters
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --status
	assert_success
	assert_line --partial "counters: got=3 gave=2 missed=1 refused=0"
	assert_line "idle connections: 1"
	assert_line --regexp "^  127\.0\.0\.1:$NGINX_PORT: 3 requests served, idle [0-9]+ ms, expires in [0-9]+ ms$"
	# keepalive CMD uses the running one rather than starting its own
	run_shim XDG_RUNTIME_DIR="$XDG" "$WRAP" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "got $(stat_sum broker_got)" "got 1"
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --stop
	assert_success
	wait_until _pid_gone "$BROKER_PID"
	_pid_gone "$BROKER_PID"
	BROKER_PID=
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --status
	assert_failure
}

@test "broker: a process that exits without closing its finished connection hands it over too" {
	nginx_start
	run_wrapped 5 sh -c "for i in 1 2 3 4 5; do $CLIENTS/exit_open 127.0.0.1 $NGINX_PORT /f || exit 1; done"
	assert_both_ok
	assert_same_output --headers
	assert_equal "$(count_matches '^HTTP/1\.1 200 OK' "$BATS_TEST_TMPDIR/plain.out")" 5
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 5"
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 5"
	[ "$SHIM_CONNS" -le 2 ] || fail "wrapped conns $SHIM_CONNS, want 1 (2 at most)"
	[ "$(stat_sum broker_gave)" -eq 5 ] || fail "broker_gave $(stat_sum broker_gave)"
}

@test "broker: xargs -P 8 running 200 curls: same output, about 8 server connections" {
	curl_ok || skip "curl cannot start with libasan preloaded"
	nginx_start
	run_wrapped 200 sh -c "seq 200 | xargs -P 8 -I{} $CURL -sS http://127.0.0.1:$NGINX_PORT/f"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 200
	assert_same_output
	assert_equal "plain conns $PLAIN_CONNS" "plain conns 200"
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 200"
	# at most 8 at a time are in use; a process dials only when the broker
	# has none idle (a little slack for a hand-over still on its way)
	[ "$SHIM_CONNS" -le 10 ] || fail "wrapped conns $SHIM_CONNS, want about 8"
}

@test "broker: a shell loop of 10 wget processes under keepalive runs on one connection, same output" {
	command -v wget >/dev/null || skip "no wget"
	nginx_start
	run_wrapped 10 sh -c "for i in \$(seq 10); do wget -q -O - http://127.0.0.1:$NGINX_PORT/f || exit 1; done"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" 10
	assert_same_output
	assert_equal "wrapped requests $SHIM_REQS" "wrapped requests 10"
	[ "$SHIM_CONNS" -le 2 ] || fail "wrapped conns $SHIM_CONNS, want 1 (2 at most)"
}

@test "broker: a process in another network namespace never gets a connection pooled in ours" {
	[ "$(id -u)" = 0 ] || skip "needs root for unshare -n"
	unshare -n true 2>/dev/null || skip "unshare -n not permitted here"
	nginx_start
	broker_start
	# ours: a connection to 127.0.0.1:PORT goes to the broker
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "gave $(stat_value broker_gave)" "gave 1"
	# another namespace: its own server at the same address and port
	local other="$BATS_TEST_TMPDIR/other"
	mkdir -p "$other"
	echo "the other namespace's server" >"$other/f"
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" unshare -n sh -c "
		ip link set lo up
		cd '$other' && env -u LD_PRELOAD '$PYTHON' -m http.server --bind 127.0.0.1 $NGINX_PORT >/dev/null 2>&1 3>&- &
		srv=\$!
		for i in \$(seq 200); do
			env -u LD_PRELOAD '$PYTHON' -c 'import socket, sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])))' $NGINX_PORT 2>/dev/null && break
			sleep 0.05
		done
		'$PYTHON' '$PRODUCT_CLIENTS/urllib_get.py' 127.0.0.1 $NGINX_PORT /f 1; rc=\$?
		kill \$srv; wait \$srv; exit \$rc"
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/shim.out")" "the other namespace's server"
	assert_equal "got $(stat_sum broker_got)" "got 0"
	# and ours is still there for us
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "got $(stat_value broker_got)" "got 1"
	server_wait_requests 2
	assert_equal "conns $(nginx_conns)" "conns 1"
}

# ------------------------------------------------------------------
# The attacks of docs/broker.md ("What each end checks"), each as it was
# found: a same-uid process in another network namespace, a second user,
# a broker that does not accept, one out of fds, clients that say nothing.

# as_other_ns CMD...: CMD in a network namespace of its own.  As root: a
# plain `unshare -n` with lo up, CMD then run as $AS_USER; otherwise an
# unprivileged `unshare -U -r -n` (skipped where the kernel refuses it).
# as_other_ns_exec: the same in place of the shell that runs it, so that
# `as_other_ns_exec CMD &` leaves $! naming CMD itself (a function run in
# the background is a subshell of its own: killing it left the command
# running after the test)
as_other_ns_exec() {
	if [ "$(id -u)" = 0 ]; then
		exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh $AS_USER "$@"
	else
		exec unshare -U -r -n "$@"
	fi
}
as_other_ns() { (as_other_ns_exec "$@"); }
other_ns_ok() {
	if [ "$(id -u)" = 0 ]; then
		unshare -n true 2>/dev/null || skip "the kernel refuses unshare -n"
		command -v ip >/dev/null || skip "no ip (iproute2) to bring lo up"
	else
		unshare -U -r -n true 2>/dev/null || skip "the kernel refuses unprivileged user namespaces (unshare -U -r -n)"
	fi
}

# as_user_setup: run the scenario as a user whose broker cannot read a
# non-dumpable process's /proc entry nor ask SIOCGSKNS (the finding is
# about a non-root broker): as root, nobody (65534), with copies of what
# it runs that nobody can read, and its own socket directory; otherwise
# ourselves.  Sets AS_USER, U_BROKER, U_CLIENT, U_GET, U_DIR.
as_user_setup() {
	AS_USER=
	U_BROKER=$BROKER U_CLIENT=$BROKER_CLIENT U_GET=$PRODUCT_CLIENTS/urllib_get.py
	open_dir
	U_DIR="$OPEN_DIR/b"
	mkdir -m 0700 "$U_DIR"
	if [ "$(id -u)" = 0 ]; then
		command -v setpriv >/dev/null || skip "no setpriv"
		AS_USER="setpriv --reuid=65534 --regid=65534 --clear-groups"
		chown 65534:65534 "$U_DIR"
		U_BROKER=$(open_copy "$BROKER")
		U_CLIENT=$(open_copy "$BROKER_CLIENT")
		U_GET=$(open_copy "$PRODUCT_CLIENTS/urllib_get.py")
		local f preload=
		for f in $PRELOAD; do
			case $f in "$ROOT"/*) f=$(open_copy "$f") ;; esac
			preload="$preload${preload:+ }$f"
		done
		PRELOAD=$preload
	fi
}

@test "broker: a non-dumpable process of another network namespace claiming ours neither gets a connection nor plants one (finding 1)" {
	other_ns_ok
	nginx_start
	as_user_setup
	BROKER_SOCK="$U_DIR/broker.sock"
	env -u LD_PRELOAD $AS_USER "$U_BROKER" --socket "$BROKER_SOCK" </dev/null \
		>/dev/null 2>>"$BATS_TEST_TMPDIR/broker.log" 3>&- &
	BROKER_PID=$!
	wait_until test -S "$BROKER_SOCK"
	# a host process hands the broker its connection to 127.0.0.1:PORT
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" $AS_USER "$PYTHON" "$U_GET" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	assert_equal "gave $(stat_value broker_gave)" "gave 1"
	# the sandbox: no network of its own but a server at the same address
	# and port; it makes itself non-dumpable, claims the host's namespace,
	# asks for a connection and plants one to its own server
	local log="$OPEN_DIR/sandbox.log" ns
	: >"$log"
	chmod 0666 "$log"
	ns=$(stat -L -c %i /proc/self/ns/net)
	run as_other_ns timeout 20 env -u LD_PRELOAD "$PYTHON" "$U_CLIENT" "$BROKER_SOCK" attack 127.0.0.1 "$NGINX_PORT" "$log" "$ns"
	echo "$output"
	refute_line "get: got"
	assert_line "put: closed"
	# the host's next process gets the host's connection: nginx's answer,
	# on the connection the first one made
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" $AS_USER "$PYTHON" "$U_GET" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	cmp "$NGINX_DIR/www/f" "$BATS_TEST_TMPDIR/shim.out"
	assert_equal "got $(stat_value broker_got)" "got 1"
	server_wait_requests 2
	assert_equal "conns $(nginx_conns)" "conns 1"
	# the sandbox's server saw its own request only
	assert_equal "sandbox requests $(grep -c '^request' "$log")" "sandbox requests 1"
	grep -q "refused pid [0-9]*: socket of another network namespace" "$BATS_TEST_TMPDIR/broker.log"
}

@test "broker: a broker answering at our path from another network namespace gets no connection and gives none (finding 2)" {
	other_ns_ok
	nginx_start
	AS_USER=
	mkdir -m 0700 "$XDG/b"
	BROKER_SOCK="$XDG/b/broker.sock"
	local log="$BATS_TEST_TMPDIR/sandbox.log" ns
	: >"$log"
	# (the namespace it would claim, were there still claims to make)
	ns=$(stat -L -c %i /proc/self/ns/net)
	as_other_ns_exec env -u LD_PRELOAD "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" fake-broker 127.0.0.1 "$NGINX_PORT" \
		"$log" "$ns" </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/fake.err" 3>&- &
	BROKER_PID=$!
	wait_until grep -q listening "$log"
	# host processes told to use the broker at that path
	local i
	for i in 1 2 3; do
		run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
		cmp "$NGINX_DIR/www/f" "$BATS_TEST_TMPDIR/shim.out"
		assert_equal "got $(stat_value broker_got)" "got 0"
		assert_equal "gave $(stat_value broker_gave)" "gave 0"
	done
	if curl_ok; then
		run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$CURL" -sS "http://127.0.0.1:$NGINX_PORT/f"
		assert_equal "status $SHIM_STATUS" "status 0"
		cmp "$NGINX_DIR/www/f" "$BATS_TEST_TMPDIR/shim.out"
	fi
	server_wait_requests 3
	# every request reached nginx; the sandbox's server saw none of ours,
	# and the fake broker was handed nothing
	cat "$log"
	assert_equal "sandbox requests from us $(grep -c '^request' "$log")" \
		"sandbox requests from us $(grep -c '^gave a connection' "$log")"
	assert_equal "puts $(grep -c '^put' "$log")" "puts 0"
	grep -q "broker reply refused: its listening socket is not in our network namespace" "$BATS_TEST_TMPDIR/shim.err"
}

@test "broker: keepalive --daemon in a socket directory another user prepared appends to no file and does not hang on a FIFO (findings 3, 4)" {
	[ "$(id -u)" = 0 ] || skip "needs root to act as a second user"
	command -v setpriv >/dev/null || skip "no setpriv"
	local nobody="setpriv --reuid=65534 --regid=65534 --clear-groups" x s victim="$BATS_TEST_TMPDIR/victim"
	echo precious >"$victim"
	open_dir
	# 1. a world-writable (not sticky) XDG_RUNTIME_DIR: the other user made
	# keepalive/ in it, broker.log a symlink to the victim's file
	x="$OPEN_DIR/xdg"
	mkdir -m 0777 "$x"
	$nobody sh -c "mkdir -m 0777 '$x/keepalive' && ln -s '$victim' '$x/keepalive/broker.log'"
	run timeout 20 env XDG_RUNTIME_DIR="$x" "$WRAP" --daemon 3>&-
	echo "$output"
	[ "$status" -ne 124 ] || fail "keepalive --daemon hung"
	assert_failure
	assert_equal "$(cat "$victim")" "precious"
	# 2. a sticky parent (as /tmp is), the directory made by the other user
	s="$OPEN_DIR/sticky"
	mkdir -m 1777 "$s"
	$nobody sh -c "mkdir -m 0777 '$s/keepalive' && ln -s '$victim' '$s/keepalive/broker.log'"
	run timeout 20 env XDG_RUNTIME_DIR="$s" "$WRAP" --daemon 3>&-
	echo "$output"
	[ "$status" -ne 124 ] || fail "keepalive --daemon hung"
	assert_failure
	assert_output --partial "belongs to another user"
	assert_equal "$(cat "$victim")" "precious"
	# 3. a FIFO where the log goes: nothing may block in open()
	$nobody sh -c "rm '$s/keepalive/broker.log' && mkfifo -m 0666 '$s/keepalive/broker.log'"
	run timeout 20 env XDG_RUNTIME_DIR="$s" "$WRAP" --daemon 3>&-
	[ "$status" -ne 124 ] || fail "keepalive --daemon hung on a FIFO"
	assert_failure
	[ -p "$s/keepalive/broker.log" ]
	# --status and --stop do no file work there either
	run timeout 20 env XDG_RUNTIME_DIR="$s" "$WRAP" --status
	[ "$status" -ne 124 ] || fail "keepalive --status hung"
	assert_failure
}

@test "broker: with a world-writable XDG_RUNTIME_DIR, keepalive CMD makes its files in a parent no other user can rename them in (finding 4)" {
	nginx_start
	local x="$BATS_TEST_TMPDIR/open-xdg"
	mkdir -m 0777 "$x"
	run timeout 20 env XDG_RUNTIME_DIR="$x" KEEPALIVE_PRELOAD="$PRELOAD" KEEPALIVE_STATS=1 \
		"$WRAP" sh -c 'echo "broker=$KEEPALIVE_BROKER"; echo "stats=$KEEPALIVE_STATS_FILE"'
	echo "$output"
	assert_success
	assert_line --regexp '^broker=/.+/broker\.sock$'
	assert_line --regexp '^stats=/.+/stats$'
	refute_output --partial "=$x/"
	# and the broker itself refuses to listen there
	run env -u LD_PRELOAD "$BROKER" --socket "$x/keepalive/broker.sock"
	assert_failure
	assert_output --partial "writable by others and not sticky"
	# sharing still works
	run_wrapped 3 sh -c "$(python_loop 3)"
	assert_both_ok
	assert_same_output
	[ "$SHIM_CONNS" -le 2 ] || fail "wrapped conns $SHIM_CONNS, want 1 (2 at most)"
}

@test "broker: a broker that does not accept, its backlog full, makes no keepalive command wait (finding 5)" {
	nginx_start
	mkdir -m 0700 "$XDG/keepalive"
	local out="$BATS_TEST_TMPDIR/stuck.out"
	"$PYTHON" "$BROKER_CLIENT" "$XDG/keepalive/broker.sock" stuck </dev/null >"$out" 2>&1 3>&- &
	BROKER_PID=$!
	wait_until grep -q stuck "$out"
	# the wrapper's check, its --status, and the library under it
	run timeout 20 env XDG_RUNTIME_DIR="$XDG" "$WRAP" --status
	[ "$status" -ne 124 ] || fail "keepalive --status hung"
	run_wrapped 3 sh -c "$(python_loop 3)"
	[ "$SHIM_STATUS" -ne 124 ] || fail "keepalive CMD hung"
	assert_both_ok
	assert_same_output
	run_shim KEEPALIVE_BROKER=1 XDG_RUNTIME_DIR="$XDG" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	cmp "$NGINX_DIR/www/f" "$BATS_TEST_TMPDIR/shim.out"
}

# cpu_ticks PID: its user+system CPU time so far, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

@test "broker: out of file descriptors (EMFILE on accept) it does not spin, and serves again once fds free up (finding 6)" {
	command -v prlimit >/dev/null || skip "no prlimit"
	nginx_start
	mkdir -p -m 0700 "$XDG/b"
	BROKER_SOCK="$XDG/b/broker.sock"
	# 12 fds: 8 clients fill it; idle clients are kept (60 s) so they stay
	env -u LD_PRELOAD KEEPALIVE_BROKER_CLIENT_MS=60000 prlimit --nofile=12 "$BROKER" --socket "$BROKER_SOCK" \
		</dev/null >/dev/null 2>>"$BATS_TEST_TMPDIR/broker.log" 3>&- &
	BROKER_PID=$!
	wait_until test -S "$BROKER_SOCK"
	local out="$BATS_TEST_TMPDIR/hog.out" hog t0 t1
	"$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" hog 20 </dev/null >"$out" 2>&1 3>&- &
	hog=$!
	wait_until grep -q holding "$out"
	sleep 0.3
	t0=$(cpu_ticks "$BROKER_PID")
	sleep 2
	t1=$(cpu_ticks "$BROKER_PID")
	echo "broker CPU while out of fds: $((t1 - t0)) ticks in 2 s"
	kill "$hog"
	wait "$hog" 2>/dev/null || true
	# a spin is ~200 ticks (100 Hz); idle is 0
	[ $((t1 - t0)) -le 20 ] || fail "the broker spun: $((t1 - t0)) ticks while idle"
	# the hogs gone, it accepts again
	run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
	assert_equal "status $SHIM_STATUS" "status 0"
	run "$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" get 127.0.0.1 "$NGINX_PORT"
	assert_output "got"
}

@test "broker: 128 clients that never say a word do not stop sharing (finding 7)" {
	nginx_start
	broker_start
	local out="$BATS_TEST_TMPDIR/hog.out" hog
	"$PYTHON" "$BROKER_CLIENT" "$BROKER_SOCK" hog 128 </dev/null >"$out" 2>&1 3>&- &
	hog=$!
	wait_until grep -q holding "$out"
	local i
	for i in 1 2 3; do
		run_shim KEEPALIVE_BROKER="$BROKER_SOCK" "$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$NGINX_PORT" /f 1
		assert_equal "status $SHIM_STATUS" "status 0"
	done
	kill "$hog"
	wait "$hog" 2>/dev/null || true
	server_wait_requests 3
	assert_equal "conns $(nginx_conns)" "conns 1"
}

@test "broker: a server that closes idle connections makes no noise on the command's stderr (finding 8)" {
	# the server closes a connection idle for 300 ms; the process exits
	# after 600 ms, handing the broker a connection its server closed
	scripted_start idle_close300
	local get="$PYTHON -c 'import sys, time, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read()); time.sleep(0.6)' http://127.0.0.1:$SCRIPTED_PORT/"
	run_wrapped 2 sh -c "$get && $get"
	assert_both_ok
	assert_same_output
	grep -v '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" >"$BATS_TEST_TMPDIR/noise" || true
	cat "$BATS_TEST_TMPDIR/noise"
	assert_equal "noise lines $(grep -c . "$BATS_TEST_TMPDIR/noise")" "noise lines 0"
}

# mute_broker_start: a broker socket, $XDG/mute/broker.sock, that accepts
# and never answers (MUTE_PID), as a hung broker would
mute_broker_start() {
	mkdir -m 0700 "$XDG/mute"
	"$PYTHON" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); s.listen(64)
held = []
while True:
    held.append(s.accept()[0])  # never answers
' "$XDG/mute/broker.sock" &
	MUTE_PID=$!
	wait_until test -S "$XDG/mute/broker.sock"
}

# full_listener_start: a listener on FULL_PORT whose accept queue is full
# (later SYNs are dropped: a blocking connect waits) (FULL_PID)
full_listener_start() {
	"$PYTHON" -c '
import socket, sys, time
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(0)
open(sys.argv[1] + ".tmp", "w").write("%d\n" % ls.getsockname()[1])
held = []
for i in range(3):  # the accept queue full: later SYNs are dropped
    c = socket.socket(); c.setblocking(False)
    try: c.connect(ls.getsockname())
    except BlockingIOError: pass
    held.append(c)
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
' "$BATS_TEST_TMPDIR/full.port" &
	FULL_PID=$!
	wait_until test -s "$BATS_TEST_TMPDIR/full.port"
	read -r FULL_PORT <"$BATS_TEST_TMPDIR/full.port"
}

# A broker that accepts and never answers, and a blocking connect() bounded
# by the program's alarm (SIGALRM without SA_RESTART, 50 ms) to a server
# whose accept queue is full (its SYN dropped: the kernel's connect waits).
# Alone the alarm ends the connect with EINTR.  The library asks the
# broker first (a local miss); the alarm ran in that wait, which went on
# (up to its 100 ms), and the real connect after it then waited for the
# kernel's SYN retries (the library before: killed by the client's
# timeout).  Now the alarm ends the wait and the connect says EINTR.
@test "broker: a silent broker, a blocking connect bounded by the program's alarm: EINTR as alone, never a wait past it" {
	mute_broker_start
	full_listener_start
	local port=$FULL_PORT
	CLIENT_TIMEOUT=10
	SERVER_PORT=$port run_plain "$CLIENTS/alarm_connect" "$port" 50
	SERVER_PORT=$port run_shim KEEPALIVE_BROKER="$XDG/mute/broker.sock" "$CLIENTS/alarm_connect" "$port" 50
	kill "$MUTE_PID" "$FULL_PID" 2>/dev/null || true
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line --index 0 "connect: EINTR"
}

# POSIX: a blocking connect() cut by a signal says EINTR and the connection
# goes on in the kernel; the program waits for POLLOUT and reads SO_ERROR
# (CPython's socket.connect does), or connects again.  The alarm (50 ms)
# runs in the library's wait for a broker that never answers (awaited
# 120 s: a wait the alarm did not cut is killed by the client's timeout).
# The library before said EINTR without the kernel's connect: POLLOUT|
# POLLHUP on an unconnected socket, SO_ERROR 0, and the request's send
# failed (EPIPE).  Now the kernel's connect begins at the cut, and answers
# as alone (docs/broker.md "A signal in the wait").  To nginx on loopback
# alone the connect is done long before the alarm, and the library's too
# is done as its call returns: 0.
@test "broker: a silent broker, an alarm cuts a blocking connect to nginx: connect says 0 and the response comes, as alone" {
	nginx_start
	mute_broker_start
	CLIENT_TIMEOUT=10
	run_both 1 KEEPALIVE_BROKER="$XDG/mute/broker.sock" KEEPALIVE_BROKER_TIMEOUT_MS=120000 \
		"$CLIENTS/connect_eintr" recover "$NGINX_PORT" 50
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_same_output
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line --index 0 "connected"
	assert_line --index 1 "/f HTTP/1.1 200 OK"
	grep -qx 'connect: 0' "$BATS_TEST_TMPDIR/plain.err" || fail "alone: $(cat "$BATS_TEST_TMPDIR/plain.err")"
	grep -qx 'connect: 0' "$BATS_TEST_TMPDIR/shim.err" || fail "library: $(cat "$BATS_TEST_TMPDIR/shim.err")"
	assert_equal "requests $PLAIN_REQS $SHIM_REQS" "requests 1 1"
	assert_equal "fresh $(stat_value fresh)" "fresh 1"
}

# late_run HALF [VAR=VALUE...] CMD...: run_HALF (plain or shim) of CMD
# against a fresh tests/servers/late_accept.py (FULL_PID), @PORT@ and
# @CUE@ in CMD its port and cue; its log -> $BATS_TEST_TMPDIR/HALF.log
late_run() {
	local half=$1 d="$BATS_TEST_TMPDIR/late-$1" port
	shift
	mkdir -p "$d"
	: >"$BATS_TEST_TMPDIR/$half.log"
	"$PYTHON" "$ROOT/tests/servers/late_accept.py" "$d/port" "$d/cue" "$BATS_TEST_TMPDIR/$half.log" &
	FULL_PID=$!
	wait_until test -s "$d/port"
	read -r port <"$d/port"
	local -a cmd=("${@//@PORT@/$port}")
	SERVER_PORT=$port "run_$half" "${cmd[@]//@CUE@/$d/cue}"
	_stop_pid "$FULL_PID"
	FULL_PID=
}

# The same against a server whose accept queue is full until the client's
# connect returned (tests/servers/late_accept.py): the SYN is dropped, so
# alone the alarm cuts the kernel's wait (EINTR) and the connection is
# made by the SYN sent again; the program's POLLOUT and SO_ERROR then say
# connected, and its request is answered.  The library before: send: EPIPE.
@test "broker: a silent broker, an alarm cuts a blocking connect still under way: the program's POLLOUT and SO_ERROR recovery gets its response as alone" {
	mute_broker_start
	CLIENT_TIMEOUT=10
	late_run plain "$CLIENTS/connect_eintr" recover @PORT@ 50 @CUE@
	late_run shim KEEPALIVE_BROKER="$XDG/mute/broker.sock" KEEPALIVE_BROKER_TIMEOUT_MS=120000 \
		"$CLIENTS/connect_eintr" recover @PORT@ 50 @CUE@
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_same_output
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line --index 0 "connected"
	assert_line --index 1 "/f HTTP/1.1 200 OK"
	grep -qx 'connect: EINTR' "$BATS_TEST_TMPDIR/plain.err" || fail "alone: $(cat "$BATS_TEST_TMPDIR/plain.err")"
	grep -qx 'connect: EINTR' "$BATS_TEST_TMPDIR/shim.err" || fail "library: $(cat "$BATS_TEST_TMPDIR/shim.err")"
	assert_equal "server saw $(cat "$BATS_TEST_TMPDIR/shim.log")" "server saw 1 GET /f HTTP/1.1"
	assert_equal "fresh $(stat_value fresh)" "fresh 1"
}

# Refused at once alone (no listener on loopback): the library's connect,
# begun at the cut, is refused as it returns and says so.  The library
# before said EINTR unbegun, and the program's recovery met an unconnected
# socket: "connected", then send: EPIPE.
@test "broker: a silent broker, an alarm cuts a blocking connect to a closed port: ECONNREFUSED as alone" {
	mute_broker_start
	local port
	port=$(free_port)
	CLIENT_TIMEOUT=10
	SERVER_PORT=$port run_plain "$CLIENTS/connect_eintr" recover "$port" 50
	SERVER_PORT=$port run_shim KEEPALIVE_BROKER="$XDG/mute/broker.sock" KEEPALIVE_BROKER_TIMEOUT_MS=120000 \
		"$CLIENTS/connect_eintr" recover "$port" 50
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "connect: ECONNREFUSED"
}

@test "broker: a silent broker, python3 create_connection cut by its SIGALRM handler: its request answered as alone" {
	nginx_start
	mute_broker_start
	# the broker's answer awaited 120 s: a wait the alarm did not cut is
	# killed by the client's timeout
	CLIENT_TIMEOUT=10
	run_both 1 KEEPALIVE_BROKER="$XDG/mute/broker.sock" KEEPALIVE_BROKER_TIMEOUT_MS=120000 \
		"$PYTHON" "$SCRIPTS/alarm_create_connection.py" "$NGINX_PORT" 50
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "HTTP/1.1 200 OK"
	assert_equal "requests $PLAIN_REQS $SHIM_REQS" "requests 1 1"
	# begun at the cut, the connection is the library's fresh one
	assert_equal "fresh $(stat_value fresh)" "fresh 1"
}

# Against a listener whose accept queue is full the kernel's connect waits
# for the SYN's answer: alone the alarm ends it (EINTR) and a connect again
# (non-blocking) says EALREADY, the first one under way.  The library
# before had begun none: its second connect began one (EINPROGRESS).
@test "broker: a silent broker, a connect again after the alarm's EINTR says EALREADY as alone" {
	mute_broker_start
	full_listener_start
	CLIENT_TIMEOUT=10
	SERVER_PORT=$FULL_PORT run_plain "$CLIENTS/connect_eintr" retry "$FULL_PORT" 50
	SERVER_PORT=$FULL_PORT run_shim KEEPALIVE_BROKER="$XDG/mute/broker.sock" \
		"$CLIENTS/connect_eintr" retry "$FULL_PORT" 50
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line --index 0 "connect: EINTR"
	assert_line --index 1 "again: EALREADY"
}
