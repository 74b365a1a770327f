#!/usr/bin/env bats
# One owner per connection (docs/owner.md): a connection changes hands
# (the pool, the broker) only while the library knows its single owner.
# Programs that share, pass, re-aim or outlive a socket, and one that
# changes its identity, run with and without the library against
# tests/servers/echo_server.py, whose every answer is its own request's
# target and whose log says which connection carried each request.  And
# the generated process-shape matrix (tests/clients/owner_shapes.py).

load helpers

OWNER="$ROOT/build/clients/owner"
CASES_PY="$ROOT/tests/clients/owner_cases.py"
SHAPES="$ROOT/tests/clients/owner_shapes.py"

setup_file() {
	suite_setup
	make -s -C "$ROOT" build/keepalive-broker >&2
}
setup() { BROKER_PID=; }
teardown() {
	[ -n "$BROKER_PID" ] && _stop_pid "$BROKER_PID"
	servers_stop
}

# conn_of TAG: the connection that carried the request for /TAG (echo log)
conn_of() { awk -v t="/$1" '$2 == t { print $1; exit }' "$ECHO_LOG"; }

# assert_same_sorted_output: the two halves printed the same lines (two
# processes print in an order of their own)
assert_same_sorted_output() {
	sort "$BATS_TEST_TMPDIR/plain.out" >"$BATS_TEST_TMPDIR/plain.sorted"
	sort "$BATS_TEST_TMPDIR/shim.out" >"$BATS_TEST_TMPDIR/shim.sorted"
	diff -u "$BATS_TEST_TMPDIR/plain.sorted" "$BATS_TEST_TMPDIR/shim.sorted"
}

# every "<who> TAG: BODY" line answers its own request (BODY is /TAG)
assert_own_answers() {
	local n
	n=$(awk -F': ' '$2 ~ /^\// { split($1, w, " "); if ("/" w[length(w)] != $2) print }' "$BATS_TEST_TMPDIR/shim.out" | wc -l)
	[ "$n" = 0 ] || {
		cat "$BATS_TEST_TMPDIR/shim.out"
		fail "$n responses answer another request"
	}
}

@test "fork: the child uses the inherited connection while the parent connects again: never handed to the parent" {
	echo_start
	run_both 5 "$PYTHON" "$CASES_PY" fork "$ECHO_PORT"
	assert_both_ok
	assert_same_sorted_output
	assert_own_answers
	# the child's requests rode the inherited connection, the parent's not
	assert_equal "c1 $(conn_of c1) c2 $(conn_of c2)" "c1 $(conn_of p1) c2 $(conn_of p1)"
	[ "$(conn_of p2)" != "$(conn_of p1)" ] || fail "the parent was handed the child's connection"
	[ "$(conn_of p3)" != "$(conn_of p1)" ] || fail "the parent was handed the child's connection"
}

@test "subprocess(pass_fds): the child's connection is never handed to the parent" {
	echo_start
	run_both 5 "$PYTHON" "$CASES_PY" pass-fds "$ECHO_PORT"
	assert_both_ok
	assert_same_sorted_output
	assert_own_answers
	[ "$(conn_of p2)" != "$(conn_of p1)" ] || fail "the parent was handed the child's connection"
	[ "$(conn_of p3)" != "$(conn_of p1)" ] || fail "the parent was handed the child's connection"
	assert_equal "c2 $(conn_of c2)" "c2 $(conn_of p1)"
}

@test "SCM_RIGHTS: a socket passed to another process is never parked by the sender" {
	echo_start
	run_both 7 "$OWNER" scm-rights "$ECHO_PORT"
	assert_both_ok
	assert_same_sorted_output
	assert_own_answers
	[ "$(conn_of s2)" != "$(conn_of s1)" ] || fail "the sender was handed the socket it passed"
	[ "$(conn_of s3)" != "$(conn_of s1)" ] || fail "the sender was handed the socket it passed"
	assert_equal "r2 $(conn_of r2)" "r2 $(conn_of s1)"
}

@test "broker: a worker's inherited connection is not handed over when its parent exits" {
	echo_start
	mkdir -p -m 0700 "$BATS_TEST_TMPDIR/xdg/b"
	local sock="$BATS_TEST_TMPDIR/xdg/b/broker.sock"
	env -u LD_PRELOAD "$ROOT/build/keepalive-broker" --socket "$sock" </dev/null >/dev/null \
		2>>"$BATS_TEST_TMPDIR/broker.log" &
	BROKER_PID=$!
	wait_until test -S "$sock"
	local script="rm -f \$STRANGER_DONE; $PYTHON $CASES_PY worker $ECHO_PORT && $PYTHON $CASES_PY stranger $ECHO_PORT; while [ \$(grep -c . \$OUT) -lt 5 ]; do sleep 0.05; done"
	server_reset
	run_plain STRANGER_DONE="$BATS_TEST_TMPDIR/done" OUT="$BATS_TEST_TMPDIR/plain.out" sh -c "$script"
	server_reset
	run_shim KEEPALIVE_BROKER="$sock" KEEPALIVE_BROKER_TIMEOUT_MS=10000 \
		STRANGER_DONE="$BATS_TEST_TMPDIR/done" OUT="$BATS_TEST_TMPDIR/shim.out" sh -c "$script"
	assert_both_ok
	assert_same_sorted_output
	assert_own_answers
	assert_equal "w2 $(conn_of w2)" "w2 $(conn_of p1)"
	[ "$(conn_of x1)" != "$(conn_of p1)" ] || fail "the stranger got the worker's connection"
	[ "$(conn_of x2)" != "$(conn_of p1)" ] || fail "the stranger got the worker's connection"
}

@test "connect(AF_UNSPEC), then a connect to B: the socket is no longer keyed as A's, and B's answer stays B's" {
	echo_start
	echo_start b
	# B's port is not one of ours: what goes there is the kernel's alone
	run_both 3 "$OWNER" af-unspec "$ECHO_PORT" "$ECHO_PORT_b"
	assert_both_ok
	assert_same_output
	assert_own_answers
	grep -q '^connect(AF_UNSPEC): 0$' "$BATS_TEST_TMPDIR/shim.out"
	# A got exactly a1, a2, a3 (the shim half's log), B only b1
	assert_equal "$(awk '{ print $2 }' "$ECHO_LOG" | sort | tr '\n' ' ')" "/a1 /a2 /a3 "
	assert_equal "$(awk '{ print $2 }' "$ECHO_LOG_b" | sort | tr '\n' ' ')" "/b1 /b1 "
}

@test "connect() with the other family's address: the kernel's errno, the socket's own family" {
	echo_start
	run_both 3 "$OWNER" family "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	assert_own_answers
	grep -q 'AF_INET6 socket, sockaddr_in: EINVAL, SO_DOMAIN AF_INET6' "$BATS_TEST_TMPDIR/shim.out"
	grep -q 'AF_INET socket, sockaddr_in6: EAFNOSUPPORT, SO_DOMAIN AF_INET' "$BATS_TEST_TMPDIR/shim.out"
	# and the pool went on working
	[ "$SHIM_CONNS" -lt "$PLAIN_CONNS" ] || fail "not pooled: $SHIM_CONNS connections"
}

@test "fd numbers the program never opened (pooled sockets, twins) answer EBADF" {
	echo_start
	run_both 2 "$OWNER" hidden "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	grep -q 'numbers never opened: 0 answer F_GETFD, 0 take a write' "$BATS_TEST_TMPDIR/shim.out"
	# the junk went nowhere: the server saw the program's two requests only
	assert_equal "requests $SHIM_REQS" "requests 2"
	assert_equal "conns $SHIM_CONNS" "conns 1"
}

@test "privilege drop: root's pooled connection is never handed to nobody" {
	[ "$(id -u)" = 0 ] || skip "needs root to drop to nobody"
	echo_start
	run_both 2 "$PYTHON" "$CASES_PY" setuid "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	assert_own_answers
	assert_equal "conns $SHIM_CONNS" "conns 2"
}

@test "Authorization: Negotiate sent without a challenge: that connection is never pooled" {
	echo_start
	run_both 2 "$PYTHON" "$CASES_PY" negotiate "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	assert_equal "conns $SHIM_CONNS" "conns 2"
}

@test "KEEPALIVE_LOG_FILE: after closefrom(3) the program's own file gets none of our lines" {
	echo_start
	local f="$BATS_TEST_TMPDIR/program.txt" log="$BATS_TEST_TMPDIR/kp.log"
	run_both 2 KEEPALIVE_LOG=debug KEEPALIVE_LOG_FILE="$log" "$OWNER" closefrom-log "$ECHO_PORT" "$f"
	assert_both_ok
	assert_same_output
	assert_equal "$(cat "$f")" "the program's line"
	grep -q 'parked' "$log" # our lines went to our file
	assert_equal "conns $SHIM_CONNS" "conns 1"
}

@test "forks past the atfork handlers (_Fork, syscall(SYS_clone)): parent and child never get the same pooled socket" {
	echo_start
	for mode in 1 2; do
		run_both 3 "$OWNER" raw-fork "$ECHO_PORT" "$mode"
		assert_both_ok
		assert_same_sorted_output
		assert_own_answers
	done
}

@test "copies made past libc's dup (syscall(SYS_dup), syscall(SYS_fcntl, F_DUPFD), pidfd_getfd): never parked under them" {
	echo_start
	for mode in 1 2 3; do
		run_both 2 "$OWNER" raw-dup "$ECHO_PORT" "$mode"
		assert_both_ok
		assert_same_output
		grep -q '^the copy reads: EOF$' "$BATS_TEST_TMPDIR/shim.out"
	done
}

@test "SCM_RIGHTS through syscall(SYS_sendmmsg): the passed socket is never parked" {
	echo_start
	run_both 2 "$OWNER" raw-mmsg "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	grep -q '^parent p2: /p2$' "$BATS_TEST_TMPDIR/shim.out"
}

@test "unshare(CLONE_NEWNET): no connection of the old network namespace is handed out in the new one" {
	[ "$(id -u)" = 0 ] || skip "needs root for unshare(CLONE_NEWNET)"
	echo_start
	run_both 1 "$OWNER" netns "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	grep -q '^after unshare: connect ENETUNREACH$' "$BATS_TEST_TMPDIR/shim.out"
}

@test "a thread drops to nobody with a raw setresuid: its connection is never handed to root's thread" {
	[ "$(id -u)" = 0 ] || skip "needs root to drop to nobody"
	echo_start
	run_both 2 "$OWNER" thread-cred "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	grep -q '^main: socket of uid 0$' "$BATS_TEST_TMPDIR/shim.out"
}

@test "broker: a process of our uid under another gid and groups never gets our connection" {
	[ "$(id -u)" = 0 ] || skip "needs root to change its gid"
	command -v setpriv >/dev/null || skip "no setpriv"
	echo_start
	mkdir -p -m 0700 "$BATS_TEST_TMPDIR/xdg/b"
	local sock="$BATS_TEST_TMPDIR/xdg/b/broker.sock"
	env -u LD_PRELOAD "$ROOT/build/keepalive-broker" --socket "$sock" </dev/null >/dev/null \
		2>>"$BATS_TEST_TMPDIR/broker.log" &
	BROKER_PID=$!
	wait_until test -S "$sock"
	run_shim KEEPALIVE_BROKER="$sock" STRANGER_DONE="$BATS_TEST_TMPDIR/d1" "$PYTHON" "$CASES_PY" stranger "$ECHO_PORT"
	assert_equal "status $SHIM_STATUS" "status 0"
	server_wait_requests 2
	local first
	first=$(awk '{ print $1 }' "$ECHO_LOG" | sort -u)
	[ "$(echo "$first" | wc -l)" = 1 ] || fail "the first process did not pool: $first"
	echo_reset
	run_shim KEEPALIVE_BROKER="$sock" STRANGER_DONE="$BATS_TEST_TMPDIR/d2" \
		setpriv --regid=1234 --clear-groups "$PYTHON" "$CASES_PY" stranger "$ECHO_PORT"
	assert_equal "status $SHIM_STATUS" "status 0"
	server_wait_requests 2
	! grep -q "^$first " "$ECHO_LOG" || fail "gid 1234 got gid 0's connection $first"
}

# ------------------------------------------------------------ the matrix

# run_matrix DEPTH [gen options]: every interesting shape of DEPTH steps
# (owner_shapes.py gen), run without and with the library against one echo
# server, compared by owner_shapes.py check.
run_matrix() {
	local depth="$1" uid=()
	shift
	[ "$(id -u)" = 0 ] && uid=(--uid)
	echo_start
	"$PYTHON" "$SHAPES" gen "$depth" "${uid[@]}" "$@" >"$BATS_TEST_TMPDIR/shapes"
	local n
	n=$(wc -l <"$BATS_TEST_TMPDIR/shapes")
	[ "$n" -gt 100 ] || fail "only $n shapes"
	CLIENT_TIMEOUT=600
	run_plain "$PYTHON" "$SHAPES" run "$ECHO_PORT" "$BATS_TEST_TMPDIR/shapes"
	cp "$ECHO_LOG" "$BATS_TEST_TMPDIR/plain.log"
	echo_reset
	run_shim "$PYTHON" "$SHAPES" run "$ECHO_PORT" "$BATS_TEST_TMPDIR/shapes"
	cp "$ECHO_LOG" "$BATS_TEST_TMPDIR/shim.log"
	assert_both_ok
	run "$PYTHON" "$SHAPES" check "$BATS_TEST_TMPDIR/shapes" \
		"$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" \
		"$BATS_TEST_TMPDIR/plain.log" "$BATS_TEST_TMPDIR/shim.log"
	echo "$output" | tail -n 40
	assert_success
	# and the library did pool: fewer server connections than without
	local pc sc
	pc=$(awk '!s[$1]++' "$BATS_TEST_TMPDIR/plain.log" | wc -l)
	sc=$(awk '!s[$1]++' "$BATS_TEST_TMPDIR/shim.log" | wc -l)
	echo "connections: $pc without, $sc with"
	[ "$sc" -lt "$pc" ] || fail "nothing was pooled ($sc connections)"
}

@test "process-shape matrix: fork, spawn, SCM_RIGHTS, dup, close orders, setuid, exits (6 steps)" {
	run_matrix 6
}

@test "process-shape matrix through a broker: the same shapes, idle connections handed over at exit" {
	mkdir -p -m 0700 "$BATS_TEST_TMPDIR/xdg/b"
	local sock="$BATS_TEST_TMPDIR/xdg/b/broker.sock"
	env -u LD_PRELOAD "$ROOT/build/keepalive-broker" --socket "$sock" </dev/null >/dev/null \
		2>>"$BATS_TEST_TMPDIR/broker.log" &
	BROKER_PID=$!
	wait_until test -S "$sock"
	export KEEPALIVE_BROKER="$sock" KEEPALIVE_BROKER_TIMEOUT_MS=10000
	# a sample: the broker pass costs more per shape
	run_matrix 6 --limit 120 --seed 23
}

# docs/owner.md "A task of its own on our memory": a clone(CLONE_VM)
# child that is not a thread shares our pool and our broker link, but its
# namespaces and credentials are its own.  The library before gave the
# CLONE_NEWNET child the parent's pooled connection (a request served in
# the old namespace where alone ENETUNREACH), and the child that dropped
# to nobody root's socket (uid 0).
@test "clone(CLONE_VM|CLONE_NEWNET) child: no connection of the parent's namespace, ENETUNREACH as alone" {
	[ "$(id -u)" = 0 ] || skip "needs root for CLONE_NEWNET"
	echo_start
	run_both 2 "$OWNER" clone-netns "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	grep -q '^child: connect ENETUNREACH$' "$BATS_TEST_TMPDIR/shim.out"
}

@test "clone(CLONE_VM) child that drops to nobody: never handed root's socket" {
	[ "$(id -u)" = 0 ] || skip "needs root to drop to nobody"
	echo_start
	run_both 2 "$OWNER" clone-uid "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	grep -q '^child: socket of uid 65534$' "$BATS_TEST_TMPDIR/shim.out"
}

# close_range(CLOSE_RANGE_UNSHARE) gives the calling thread a fd table of
# its own, as unshare(CLONE_FILES): the two tables shared one pool, whose
# hidden numbers named other sockets in each, and each request went to
# the other server (the library before: A's log held /thread-to-B).
@test "close_range(CLOSE_RANGE_UNSHARE) in a thread: each destination's requests reach it alone" {
	echo_start
	echo_start b
	run_both 2 KEEPALIVE_PORTS="$ECHO_PORT,$ECHO_PORT_b" "$OWNER" range-unshare "$ECHO_PORT" "$ECHO_PORT_b"
	assert_both_ok
	assert_same_output
	run grep -c 'to-B' "$ECHO_LOG"
	assert_output 0
	run grep -c 'to-A' "$ECHO_LOG_b"
	assert_output 0
}

# glibc's initgroups calls setgroups inside libc, past our wrapper: the
# connection made before it carried the request after it (the library
# before: one connection).
@test "initgroups: the connection made before is not handed out after" {
	[ "$(id -u)" = 0 ] || skip "needs root for initgroups"
	echo_start
	run_both 2 "$OWNER" initgroups "$ECHO_PORT"
	assert_both_ok
	assert_same_output
	[ "$(conn_of g1)" != "$(conn_of g2)" ] || fail "g1 and g2 on one connection"
}
