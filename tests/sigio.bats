#!/usr/bin/env bats
# Signal-driven I/O and the rest of what an open file description carries
# (docs/hold.md "What the description carries"): O_ASYNC (F_SETFL,
# FIOASYNC), the owner (F_SETOWN, F_SETOWN_EX, SIOCSPGRP), F_SETSIG,
# O_APPEND.  A parked socket signals no one (the server's close of it
# killed the program, or its whole process group); a program socket with
# any of them set before connect() connects its own (a pooled one, already
# connected, never gave the connect's SIGIO); a fresh socket swapped under
# the fd (a replay, before the first request) carries them.  Each case:
# tests/clients/sigio_get against tests/servers/drop_server.py, without
# and with the library, the same output and exit status.

load helpers

setup_file() { suite_setup; }
teardown() {
	[ -n "${DROP_PID:-}" ] && _stop_pid "$DROP_PID"
	DROP_PID=
	servers_stop
}

# drop_start [rst2]: tests/servers/drop_server.py; SERVER_PORT (HTTP),
# CONTROL_PORT, DROP_LOG
drop_start() {
	local dir="$BATS_TEST_TMPDIR/drop"
	mkdir -p "$dir"
	DROP_LOG="$dir/log"
	: >"$DROP_LOG"
	"$PYTHON" "$ROOT/tests/servers/drop_server.py" "$dir/ports" "$DROP_LOG" "$@" 2>"$dir/stderr" &
	DROP_PID=$!
	wait_until test -s "$dir/ports" || {
		cat "$dir/stderr" >&2
		return 1
	}
	read -r SERVER_PORT CONTROL_PORT <"$dir/ports"
}

# sigio_case MODE: sigio_get MODE without and with the library
sigio_case() {
	run_plain "$CLIENTS/sigio_get" "$1" "$SERVER_PORT" "$CONTROL_PORT"
	: >"$DROP_LOG" # (the server appends: the log is the library's half's)
	run_shim "$CLIENTS/sigio_get" "$1" "$SERVER_PORT" "$CONTROL_PORT"
	echo "plain: status=$PLAIN_STATUS; shim: status=$SHIM_STATUS"
	cat "$BATS_TEST_TMPDIR/shim.err"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_same_output
}

@test "sigio: signals asked for on a connection (F_SETOWN+O_ASYNC, SIOCSPGRP+FIOASYNC, F_SETSIG, the process group, F_SETOWN_EX to the thread), then close: the server's close of the parked socket signals no one" {
	drop_start
	local how
	for how in fcntl ioctl rtsig pgrp tid; do
		sigio_case "close-$how"
		run cat "$BATS_TEST_TMPDIR/shim.out"
		assert_output $'first: 51 bytes\ncontrol: dropped\nsecond: 51 bytes\nok'
	done
}

@test "sigio: F_SETOWN + O_ASYNC|O_NONBLOCK before connect(): the program's own connection, its SIGIO for the connect and for the answer" {
	drop_start
	sigio_case before
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'first: 51 bytes\nconnect Operation now in progress\nsecond: 51 bytes'
	# the first connection stayed in the pool: the second is the program's own
	run awk '!seen[$1]++ { n++ } END { print n }' "$DROP_LOG"
	assert_output 2
}

@test "sigio: signals asked for after connect() on a handed-out connection the server resets at the request: the replay's fresh socket gives the SIGIO" {
	drop_start rst2
	sigio_case after
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'first: 51 bytes\nsecond: 51 bytes'
	# with the library: the pooled connection reset, the request replayed
	run grep -c reset "$DROP_LOG"
	assert_output 1
}

@test "sigio: signals asked for on a handed-out connection the server closes before the first request: the fresh socket swapped in gives the SIGIO" {
	drop_start
	sigio_case unsent
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'first: 51 bytes\ncontrol: dropped\nsecond: 51 bytes'
}

@test "sigio: O_APPEND, which F_GETFL shows, neither left on a parked socket nor lost on a program's socket set before connect()" {
	drop_start
	sigio_case close-append
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'first: 51 bytes\nflags 02'
	sigio_case before-append
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'first: 51 bytes\nflags 02002'
}

@test "sigio: under scripts/keepalive, a process's socket owned by its process group goes to the broker: the server's close of it kills no process of the group" {
	drop_start
	local cmd="$CLIENTS/sigio_get exit-pgrp $SERVER_PORT $CONTROL_PORT && $CLIENTS/sigio_get drop $SERVER_PORT $CONTROL_PORT && echo alive"
	mkdir -m 0700 "$BATS_TEST_TMPDIR/xdg"
	run_plain sh -c "$cmd"
	local status=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env XDG_RUNTIME_DIR="$BATS_TEST_TMPDIR/xdg" KEEPALIVE_PRELOAD="$PRELOAD" \
		KEEPALIVE_PORTS="$SERVER_PORT" "$ROOT/scripts/keepalive" sh -c "$cmd" \
		>"$BATS_TEST_TMPDIR/shim.out" 2>"$BATS_TEST_TMPDIR/shim.err" </dev/null || status=$?
	cat "$BATS_TEST_TMPDIR/shim.err"
	assert_equal "plain status $PLAIN_STATUS; wrapped status $status" "plain status 0; wrapped status 0"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output $'first: 51 bytes\ncontrol: dropped\nalive'
}
