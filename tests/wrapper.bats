#!/usr/bin/env bats
# The keepalive wrapper is invisible (docs/wrapper.md): run by pid, by a
# shell loop, by a supervisor, it ends as the command alone ends, and its
# command line follows the conventions of env(1), timeout(1), torsocks.
# Each test compares the real wrapper (scripts/keepalive) with the command
# run without it.  Each test has its own XDG_RUNTIME_DIR (mode 0700), so no
# broker of another test or user is used.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	suite_setup
	make -s -C "$ROOT" build/keepalive-broker build/keepalive-run build/keepalive >&2
}
setup() {
	XDG="$BATS_TEST_TMPDIR/xdg"
	mkdir -m 0700 "$XDG"
	DAEMON_PID=
}
teardown() {
	[ -z "$DAEMON_PID" ] || kill "$DAEMON_PID" 2>/dev/null || true
	servers_stop
}

WRAP="${WRAP:-$ROOT/scripts/keepalive}"
wrap() { env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" "$@"; }

# a command that says when it got signal SIG and ends with its own status
SIG_CMD='trap "echo got-$1; exit 7" $1; echo $$ >"$0"; sleep 20 & wait'
# (a background job of a script starts with SIGINT ignored: undone here)
UNIGNORE='import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'

# sig_run SIG [CMD...]: start SIG_CMD (under CMD, the wrapper), send SIG
# to the pid that was started once the command runs, print what it printed
# and the status the caller's wait saw
sig_run() {
	local sig=$1 pidf="$BATS_TEST_TMPDIR/cmd.pid.$RANDOM" pid st=0
	shift
	rm -f "$pidf"
	"$PYTHON" -c "$UNIGNORE" "$@" sh -c "$SIG_CMD" "$pidf" "$sig" >"$BATS_TEST_TMPDIR/sig.out" 2>&1 &
	pid=$!
	wait_until test -s "$pidf"
	kill -"$sig" "$pid"
	wait "$pid" || st=$?
	echo "$(cat "$BATS_TEST_TMPDIR/sig.out") status=$st"
	# the command is gone when the wrapper is
	! kill -0 "$(cat "$pidf")" 2>/dev/null
}
term_run() { sig_run TERM "$@"; }

@test "wrapper: SIGTERM to the wrapper's pid (private broker) reaches the command at once; the wrapper ends with the command's status" {
	local plain
	plain=$(term_run)
	assert_equal "$plain" "got-TERM status=7"
	run term_run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_success
	assert_output "$plain"
	# and nothing of the wrapper's is left in its directory (the private
	# broker removes it just after the command ended: docs/wrapper.md)
	wait_until test -z "$(find "$XDG" -mindepth 1)" || true
	run find "$XDG" -mindepth 1
	assert_output ""
}

@test "wrapper: SIGTERM with a per-user broker running, and with KEEPALIVE_STATS=1: the same" {
	local plain
	plain=$(term_run)
	env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
	DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
	run term_run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_success
	assert_output "$plain"
	run term_run env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_success
	assert_output --partial "got-TERM"
	assert_output --partial "status=7"
}

@test "wrapper: SIGINT and SIGHUP to the wrapper's pid, with and without a per-user broker: the command gets it, the same status" {
	local sig plain
	for sig in INT HUP; do
		plain=$(sig_run $sig)
		assert_equal "$plain" "got-$sig status=7"
		run sig_run $sig env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
		assert_success
		assert_output "$plain"
	done
	env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
	DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
	for sig in INT HUP; do
		run sig_run $sig env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
		assert_success
		assert_output "got-$sig status=7"
	done
}

# how a parent sees the command end: python's returncode is -N for death
# by signal N, N for exit N
py_status() { "$PYTHON" -c 'import subprocess, sys; print(subprocess.call(sys.argv[1:]))' "$@"; }

@test "wrapper: a command that dies of SIGINT, SIGTERM, SIGQUIT, SIGHUP or SIGUSR1: the wrapper dies of the same signal, also under KEEPALIVE_STATS=1" {
	local sig plain
	for sig in INT TERM QUIT HUP USR1; do
		plain=$(py_status sh -c "kill -$sig \$\$")
		run py_status env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "kill -$sig \$\$"
		assert_output "$plain"
		# (the summed line comes from the watcher once the command has
		# ended: it may land inside the caller's own output, even between
		# Python's "-1" and its newline, docs/wrapper.md)
		run py_status env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "kill -$sig \$\$"
		assert_equal "$(printf '%s\n' "$output" | sed 's/libkeepalive: processes=[0-9]*\( [a-z_]*=[0-9.]*\)*//' | grep -v '^$')" "$plain"
		assert_output --partial "libkeepalive: processes="
	done
	run py_status env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c 'exit 42'
	assert_output 42
}

# Ctrl-C: the terminal sends SIGINT to the whole foreground group (here
# kill -INT 0 in a session of its own); the calling shell stops its loop
# only when its child died of SIGINT, as it would without the wrapper
@test "wrapper: Ctrl-C in a loop of three keepalive commands stops the loop at the first, as without the wrapper" {
	local loop plain st=0
	loop='for i in 1 2 3; do $W sh -c "kill -INT 0; sleep 5"; echo "iteration $i"; done; echo end'
	plain=$(W= setsid -w bash -c "$loop" 2>&1) || st=$?
	plain="$plain status=$st"
	assert_equal "$plain" " status=130"
	st=0
	run env W="$WRAP" XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" setsid -w bash -c "$loop"
	assert_equal "$output status=$status" "$plain"
}

@test "wrapper: -- ends the options; -h and --help print the usage on stdout; unknown options exit 2 with the usage" {
	run wrap -- echo hello
	assert_success
	assert_output hello
	run --separate-stderr wrap --help
	assert_success
	assert_line --index 0 --partial "usage: keepalive [--] CMD"
	assert_equal "$stderr" ""
	run bash -c "'$WRAP' -h | head -n 1"
	assert_output --partial "usage: keepalive"
	local opt
	for opt in --nosuch -d -x; do
		run --separate-stderr wrap "$opt" echo hi
		assert_equal "status $status" "status 2"
		assert_equal "$output" ""
		assert_equal "$(sed -n 1p <<<"$stderr")" "keepalive: unknown option: $opt"
		[[ "$stderr" == *"usage: keepalive"* ]]
	done
	run --separate-stderr wrap
	assert_equal "status $status" "status 2"
}

@test "wrapper: a command that cannot run: the status sh gives, a message naming the program, never a line number" {
	local st plainst
	for cmd in nosuchcmd-ka ./nosuchfile-ka; do
		sh -c "$cmd" 2>/dev/null && plainst=0 || plainst=$?
		run --separate-stderr wrap "$cmd"
		assert_equal "status $status" "status $plainst"
		[[ "$stderr" == "keepalive: $cmd: "* ]] || fail "stderr: $stderr"
		! grep -qE ': [0-9]+: ' <<<"$stderr" || fail "a line number: $stderr"
		# the same through keepalive-run (KEEPALIVE_STATS=1 keeps the wrapper)
		run --separate-stderr env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" "$cmd"
		assert_equal "status $status" "status $plainst"
		[[ "$stderr" == "keepalive: $cmd: "* ]] || fail "stderr: $stderr"
	done
	touch "$BATS_TEST_TMPDIR/noexec"
	for cmd in "$BATS_TEST_TMPDIR/noexec" "$BATS_TEST_TMPDIR"; do
		sh -c "$cmd" 2>/dev/null && plainst=0 || plainst=$?
		run --separate-stderr wrap "$cmd"
		assert_equal "status $status" "status $plainst"
		[[ "$stderr" == "keepalive: $cmd: "* ]] || fail "stderr: $stderr"
		run --separate-stderr env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" "$cmd"
		assert_equal "status $status" "status $plainst"
		[[ "$stderr" == "keepalive: $cmd: "* ]] || fail "stderr: $stderr"
	done
}

@test "wrapper: a bad KEEPALIVE_PORTS is said once for a loop of 10 processes and pools nothing" {
	curl_ok || skip "curl does not start under ASan"
	nginx_start
	local loop="for i in 1 2 3 4 5 6 7 8 9 10; do $CURL -sS http://127.0.0.1:$NGINX_PORT/f >/dev/null || exit 1; done"
	local v
	for v in abc "$NGINX_PORT,abc" "" ",$NGINX_PORT" "$NGINX_PORT-1"; do
		nginx_reset
		run --separate-stderr env KEEPALIVE_PORTS="$v" XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$loop"
		assert_success
		echo "$stderr"
		assert_equal "KEEPALIVE_PORTS=$v: $(grep -c 'KEEPALIVE_PORTS' <<<"$stderr") warning(s)" "KEEPALIVE_PORTS=$v: 1 warning(s)"
		server_wait_requests 10
		# never widened: not even the port it names is pooled
		assert_equal "KEEPALIVE_PORTS=$v: conns $(nginx_conns)" "KEEPALIVE_PORTS=$v: conns 10"
	done
	# a good list says nothing and pools
	nginx_reset
	run --separate-stderr env KEEPALIVE_PORTS="1-2,$NGINX_PORT," XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$loop"
	assert_success
	assert_equal "$stderr" ""
	server_wait_requests 10
	assert_equal "conns $(nginx_conns)" "conns 1"
}

@test "wrapper: --status and --stop ask the socket-activated broker (systemd-socket-activate, as the user unit runs it)" {
	curl_ok || skip "curl does not start under ASan"
	command -v systemd-socket-activate >/dev/null || skip "no systemd-socket-activate"
	mkdir -m 0700 "$XDG/keepalive"
	systemd-socket-activate --seqpacket -l "$XDG/keepalive/broker.sock" \
		env -u LD_PRELOAD "$ROOT/build/keepalive-broker" </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/sa.log" 3>&- &
	DAEMON_PID=$!
	wait_until test -S "$XDG/keepalive/broker.sock"
	run wrap --status
	assert_success
	assert_line "keepalive: broker running at $XDG/keepalive/broker.sock"
	assert_line --regexp "^counters: got=0 gave=0 "
	assert_line "idle connections: 0"
	# keepalive CMD uses it
	nginx_start
	run env KEEPALIVE_PORTS="$NGINX_PORT" KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		"$WRAP" sh -c "$CURL -sS -o /dev/null http://127.0.0.1:$NGINX_PORT/f; $CURL -sS -o /dev/null http://127.0.0.1:$NGINX_PORT/f"
	assert_success
	assert_line --regexp "^libkeepalive: processes=2 .* broker_got=1 "
	run wrap --stop
	assert_success
	assert_output "keepalive: broker stopped"
	wait_until _pid_gone "$DAEMON_PID"
	DAEMON_PID=
	run wrap --status
	assert_failure
}

# cron and ssh -T set no XDG_RUNTIME_DIR; the session's /run/user/UID is
# there all the same (a private mount of /run/user here: no other test or
# user sees it)
@test "wrapper: a cron-like environment without XDG_RUNTIME_DIR finds the session's broker at /run/user/UID (keepalive CMD and KEEPALIVE_BROKER=1)" {
	curl_ok || skip "curl does not start under ASan"
	[ "$(id -u)" = 0 ] || skip "needs root for a private mount namespace"
	command -v unshare >/dev/null || skip "no unshare"
	nginx_start
	local get="$CURL -sS -o /dev/null http://127.0.0.1:$NGINX_PORT/f"
	run unshare -m sh -c '
		mount --make-rprivate / && mount -t tmpfs -o mode=0755 none /run/user || exit 99
		mkdir -m 0700 /run/user/0
		XDG_RUNTIME_DIR=/run/user/0 "$1" --daemon 3>&- || exit 98
		# (each summed line comes just after its command ended: awaited
		# in a file, so that the two come in order)
		for i in 1 2; do
			env -i PATH=/usr/bin:/bin HOME=/root KEEPALIVE_PRELOAD="$2" KEEPALIVE_PORTS="$3" \
				KEEPALIVE_STATS=1 "$1" sh -c "$4" 2>"$5.$i"
			n=0
			while ! grep -q "^libkeepalive: processes=" "$5.$i" && [ $n -lt 400 ]; do
				sleep 0.05
				n=$((n + 1))
			done
			cat "$5.$i" >&2
		done
		# plain LD_PRELOAD, KEEPALIVE_BROKER=1: the library finds it too
		env -i PATH=/usr/bin:/bin HOME=/root LD_PRELOAD="$2" KEEPALIVE_PORTS="$3" KEEPALIVE_BROKER=1 \
			KEEPALIVE_STATS=1 sh -c "$4" 2>&1 | grep -o "broker_got=[0-9]*"
		env -i PATH=/usr/bin:/bin "$1" --status | head -n 1
		env -i PATH=/usr/bin:/bin "$1" --stop' sh "$WRAP" "$PRELOAD" "$NGINX_PORT" "$get" "$BATS_TEST_TMPDIR/err"
	echo "$output"
	assert_success
	assert_line --index 1 --regexp "^libkeepalive: processes=1 .* broker_got=0 "
	assert_line --index 2 --regexp "^libkeepalive: processes=1 .* broker_got=1 "
	assert_line --index 3 "broker_got=1"
	assert_line "keepalive: broker running at /run/user/0/keepalive/broker.sock"
	assert_line "keepalive: broker stopped"
	server_wait_requests 3
	assert_equal "conns $(nginx_conns)" "conns 1"
}

@test "plain LD_PRELOAD: an empty KEEPALIVE_PORTS warns (it pools nothing), as a bad one does" {
	local v
	for v in "" "8080,abc"; do
		run --separate-stderr env KEEPALIVE_PORTS="$v" LD_PRELOAD="$PRELOAD" /bin/true
		assert_success
		assert_equal "$stderr" "libkeepalive: ignoring KEEPALIVE_PORTS=$v (want e.g. 80,8080,9000-9010; pooling nothing)"
	done
}

# ------------------------------------------------ the command's environment
# `keepalive CMD` hands CMD the caller's environment exactly, plus or minus
# only the library's own variables (LD_PRELOAD, KEEPALIVE_*): a shell entry
# point could not (docs/wrapper.md)

# env_of [WRAPPER...]: CMD's environment, one entry a line (NUL-separated
# entries printed with their newlines escaped), the library's own left out
env_of() {
	env -i PATH="$PATH" 'a.b=1' 'x-y=2' '1x=3' 'BASH_FUNC_f%%=() {  echo fn
}' lib=USERVAL dir=D base=B sock=S here=H self=SELF e=E bpid=P IFS=: \
		XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$@" env -0 |
		"$PYTHON" -c 'import sys
for e in sys.stdin.buffer.read().split(b"\0"):
    if e and not e.startswith((b"LD_PRELOAD=", b"KEEPALIVE_")):
        print(repr(e))'
}

@test "wrapper: the command gets the caller's environment exactly (names that are not identifiers, bash functions, the script's own names, no PWD added), private broker, per-user broker, KEEPALIVE_STATS=1" {
	local plain
	plain=$(env_of)
	[[ "$plain" == *"a.b=1"* && "$plain" == *"BASH_FUNC_f%%"* && "$plain" != *"PWD="* ]] || fail "plain: $plain"
	run env_of "$WRAP"
	assert_success
	assert_output "$plain"
	run --separate-stderr env_of env KEEPALIVE_STATS=1 "$WRAP"
	assert_output "$plain"
	env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
	DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
	run env_of "$WRAP"
	assert_output "$plain"
	# and what the library reads is there
	run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" printenv KEEPALIVE_BROKER LD_PRELOAD
	assert_line --index 0 "$XDG/keepalive/broker.sock"
	assert_line --index 1 "$PRELOAD"
}

@test "wrapper: an exported bash function reaches the command (xargs bash -c under keepalive)" {
	local cmd='fetch(){ echo "fetched $1"; }; export -f fetch; printf "a\nb\n" | $W xargs -n1 bash -c "fetch \"\$0\""'
	local plain
	plain=$(W= bash -c "$cmd" 2>&1)
	assert_equal "$plain" "fetched a
fetched b"
	run env W="$WRAP" XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" bash -c "$cmd"
	assert_success
	assert_output "$plain"
}

# ------------------------------------------------------- group signals
# COUNT_CMD: counts the SIGNAL it gets, says its pid and process group once
# its handler is in place, and prints the count once told to finish
COUNT_CMD='import os, signal, sys, time
n = [0]
sig = getattr(signal, "SIG" + sys.argv[3])
signal.signal(sig, lambda *a: n.__setitem__(0, n[0] + 1))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d\n" % (os.getpid(), os.getpgrp()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
print("count=%d" % n[0])'

# group_signal SIG [WRAPPER...]: a process group of its own (setsid), SIG
# sent to the whole group (timeout(1), kill -- -PGID, systemd stop) once
# the command runs; prints how many it counted
group_signal() {
	# (names of this call's own: two calls' $RANDOM names met once in CI,
	# and a stale ready file sent the signal to a group long gone)
	local sig=$1 dir ready done pid pgid st=0
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/signal.XXXXXX")
	ready="$dir/ready" done="$dir/done"
	shift
	setsid "$@" "$PYTHON" -c "$COUNT_CMD" "$ready" "$done" "$sig" >"$dir/count.out" 2>&1 &
	pid=$!
	wait_until test -s "$ready"
	read -r _ pgid <"$ready"
	kill -"$sig" -- -"$pgid"
	# whatever a second copy would be, it is sent before kill returns
	wait_until grep -q . /proc/"$(cut -d' ' -f1 "$ready")"/status
	touch "$done"
	wait "$pid" || st=$?
	echo "$(grep count= "$dir/count.out") status=$st"
}

@test "wrapper: a signal sent to the command's process group (kill -- -PGID) reaches the command once, as without the wrapper" {
	local sig plain
	for sig in INT TERM HUP; do
		plain=$(group_signal $sig)
		assert_equal "$plain" "count=1 status=0"
		run group_signal $sig env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
		assert_output "$plain"
		run group_signal $sig env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
		assert_line "$plain"
	done
}

@test "wrapper: a group signal the command survives leaves the private broker serving it: later processes still reuse, one summed stats line" {
	curl_ok || skip "curl does not start under ASan"
	nginx_start
	local get="$CURL -sS -o /dev/null http://127.0.0.1:$NGINX_PORT/f"
	local ready="$BATS_TEST_TMPDIR/ready" go="$BATS_TEST_TMPDIR/go" pid st=0
	setsid env KEEPALIVE_PORTS="$NGINX_PORT" KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		"$WRAP" sh -c 'trap "" TERM; '"$get"'; cut -d" " -f5 /proc/$$/stat >"$0.tmp"; mv "$0.tmp" "$0"
			while [ ! -e "$1" ]; do sleep 0.05; done; '"$get; $get" "$ready" "$go" \
		>"$BATS_TEST_TMPDIR/out" 2>&1 &
	pid=$!
	wait_until test -s "$ready"
	kill -TERM -- -"$(cat "$ready")"
	touch "$go"
	wait "$pid" || st=$?
	assert_equal "status $st" "status 0"
	server_wait_requests 3
	assert_equal "conns $(nginx_conns)" "conns 1"
	# the summed line comes just after the command ended
	wait_until grep -q "processes=" "$BATS_TEST_TMPDIR/out"
	run grep -c "^libkeepalive: " "$BATS_TEST_TMPDIR/out"
	assert_output 1
	run grep -E "^libkeepalive: processes=3 .* broker_got=2 " "$BATS_TEST_TMPDIR/out"
	assert_success
}

# ------------------------------------------------- SIGKILL of the wrapper
@test "wrapper: SIGKILL of the wrapper's pid ends the command (it is the command), and the stats directory goes, with and without a per-user broker" {
	local pidf="$BATS_TEST_TMPDIR/cmd.pid" pid round
	for round in private daemon; do
		if [ "$round" = daemon ]; then
			env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
			DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
		fi
		rm -f "$pidf"
		env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
			"$WRAP" sh -c 'echo $$ >"$0"; exec sleep 30' "$pidf" 2>/dev/null &
		pid=$!
		wait_until test -s "$pidf"
		kill -KILL "$pid"
		wait "$pid" || true
		# the wrapper's pid is the command's: gone, reaped by us
		assert_equal "$round: pid $(cat "$pidf")" "$round: pid $pid"
		_pid_gone "$(cat "$pidf")" || fail "$round: the command still runs"
		# nothing of the wrapper's left beside the per-user broker's own
		wait_until test -z "$(find "$XDG" -mindepth 1 -maxdepth 1 ! -name keepalive)" ||
			fail "$round: left $(find "$XDG" -mindepth 1)"
	done
}

# ----------------------------------------- a command that cannot run
@test "wrapper: a command that cannot run (interpreter missing, not an executable): env(1)'s status on every path, a message naming keepalive" {
	local d="$BATS_TEST_TMPDIR"
	printf '#!/nonexistent/interp\necho hi\n' >"$d/badinterp"
	printf '\177ELF\002\001\001garbage' >"$d/badelf"
	chmod +x "$d/badinterp" "$d/badelf"
	local cmd plainst plainerr round
	# env's own message (a missing interpreter), or the one of the shell
	# execvp falls back to (not an executable): the same under keepalive
	same_error() {
		stderr=$(grep -v "^libkeepalive: processes=" <<<"$stderr" || true)
		if [[ "$plainerr" == "env: "* ]]; then
			[[ "$stderr" == "keepalive: $cmd: "* ]] || fail "$1: $stderr"
		else
			assert_equal "$1: $stderr" "$1: $plainerr"
		fi
	}
	for round in private stats daemon; do
		if [ $round = daemon ]; then
			env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon 3>&-
			DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
		fi
		for cmd in "$d/badinterp" "$d/badelf"; do
			plainerr=$(env "$cmd" 2>&1) && plainst=0 || plainst=$?
			run --separate-stderr env $([ $round = stats ] && echo KEEPALIVE_STATS=1) \
				XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" "$cmd"
			assert_equal "$round $cmd: status $status" "$round $cmd: status $plainst"
			same_error "$round $cmd"
		done
	done
}

# ------------------------------------------------------ settings said once
@test "wrapper: every bad setting is said once for a loop of processes, in the library's words, and the loop behaves as under the library alone" {
	curl_ok || skip "curl does not start under ASan"
	nginx_start
	local loop="for i in 1 2 3; do $CURL -sS http://127.0.0.1:$NGINX_PORT/f >/dev/null || exit 1; done"
	local bad=(KEEPALIVE_IDLE_MS=abc KEEPALIVE_METHODS=x KEEPALIVE_LOG=bogus KEEPALIVE_STATS=maybe KEEPALIVE_MAX_IDLE=-1)
	# plain LD_PRELOAD: the same lines, once per process
	run --separate-stderr env "${bad[@]}" KEEPALIVE_PORTS="$NGINX_PORT" LD_PRELOAD="$PRELOAD" sh -c "$loop"
	assert_success
	local plain
	plain=$(sort -u <<<"$stderr")
	assert_equal "$(wc -l <<<"$plain")" 5
	nginx_reset
	run --separate-stderr env "${bad[@]}" KEEPALIVE_PORTS="$NGINX_PORT" XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		"$WRAP" sh -c "$loop"
	assert_success
	assert_equal "$(sort <<<"$stderr")" "$plain"
	# what the settings were read as is unchanged: pooled (fewer
	# connections than requests: a process's park goes to the broker
	# without waiting, so under load the next one may ask first), no
	# stats line
	server_wait_requests 3
	[ "$(nginx_conns)" -lt 3 ] || fail "conns $(nginx_conns): nothing pooled"
}

@test "wrapper and library read settings alike: KEEPALIVE_PORTS with a leading zero pools, KEEPALIVE_STATS=off|no|false is off, an unknown switch warns" {
	curl_ok || skip "curl does not start under ASan"
	nginx_start
	local get="$CURL -sS -o /dev/null http://127.0.0.1:$NGINX_PORT/f"
	run --separate-stderr env KEEPALIVE_PORTS="0$NGINX_PORT" XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" \
		"$WRAP" sh -c "$get; $get"
	assert_success
	assert_equal "$stderr" ""
	server_wait_requests 2
	assert_equal "conns $(nginx_conns)" "conns 1"
	local v
	for v in off no false OFF 0; do
		run --separate-stderr env KEEPALIVE_STATS=$v LD_PRELOAD="$PRELOAD" /bin/true
		assert_equal "plain $v: $stderr" "plain $v: "
		run --separate-stderr env KEEPALIVE_STATS=$v XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" /bin/true
		assert_equal "wrapper $v: $stderr" "wrapper $v: "
	done
	run --separate-stderr env KEEPALIVE_STATS=on LD_PRELOAD="$PRELOAD" /bin/true
	assert_equal "$(grep -c '^libkeepalive: connects=' <<<"$stderr")" 1
	run --separate-stderr env KEEPALIVE_STATS=maybe LD_PRELOAD="$PRELOAD" /bin/true
	assert_equal "$stderr" "libkeepalive: ignoring KEEPALIVE_STATS=maybe (want 1|on|yes|true or 0|off|no|false, using 0)"
}

# ------------------------------------------------- the differential matrix
# tests/wrapper_matrix.py: 35 command shapes (exit statuses, death by each
# signal, signals to the whole group handled and not, exec errors, stdin,
# arguments, a caller's environment no shell passes on) x the wrapper's
# three paths, the wrapper run by the wrapper, a caller with fds 3-9
# open and a removed working directory, each compared with the same command under env(1): the raw wait
# status, stdout, stderr and the environment must be the same (the library
# once in LD_PRELOAD)
@test "wrapper: the differential matrix (command shapes x private broker, per-user broker, KEEPALIVE_STATS=1, nested, fds 3-9 open, removed cwd) finds no difference from env(1)" {
	run "$PYTHON" "$ROOT/tests/wrapper_matrix.py" "$WRAP" "$PRELOAD" "$BATS_TEST_TMPDIR/matrix"
	echo "$output"
	assert_success
	assert_line --regexp "^[0-9]+ cases, 0 differences$"
}

# The command closes its copy of the pipe at fd $1 (3, or EOF_FD) at
# once, then waits (at most 10 s) for the caller, who reads that pipe to
# its end, to say it saw the end of file: "saw" unless something else
# holds the pipe open.
EOF_CMD='eval "exec $1>&-"; i=0; while [ ! -e "$0" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; if [ -e "$0" ]; then echo saw; else echo waited; fi'
# eof_run [LAUNCHER...]: EOF_CMD under the launcher, fd 3 (EOF_FD) a pipe the caller
# reads to its end (as `$(...)` and `| while read` do); what it printed
eof_run() {
	local flag="$BATS_TEST_TMPDIR/eof.$RANDOM" out="$BATS_TEST_TMPDIR/eof.out" fd=${EOF_FD:-3}
	rm -f "$out"
	eval '("$@" bash -c "$EOF_CMD" "$flag" "$fd" '"$fd"'>&1 >"$out" 2>&1 &) | {
		cat >/dev/null
		touch "$flag"
	}'
	wait_until grep -q -e saw -e waited "$out"
	grep -e saw -e waited "$out"
}

@test "wrapper: the private broker and a --daemon broker hold none of the caller's descriptors (a caller reading a pipe to its end is not kept waiting)" {
	local plain
	plain=$(eof_run)
	assert_equal "$plain" "saw"
	# private broker, and with the stats watcher
	run eof_run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_output "$plain"
	run eof_run env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_output "$plain"
	# a pipe above fd 1023 (the stats watcher closed only those below)
	EOF_FD=1500 run eof_run env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_output "$plain"
	EOF_FD=1500 run eof_run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP"
	assert_output "$plain"
	# what the private broker holds: its own files, none of the caller's
	run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" \
		sh -c 'ls -l /proc/$KEEPALIVE_BROKER_PID/fd' 7>"$BATS_TEST_TMPDIR/held7" 9</etc/passwd
	assert_success
	assert_output --partial "socket:"
	refute_output --partial "held7"
	refute_output --partial "/etc/passwd"
	# keepalive --daemon, started where fd 3 is a pipe read to its end
	# (bats' own fd 3, a $(...) in a script): the reader ends at once,
	# not when the broker goes 5 min later
	run timeout 10 bash -c 'env XDG_RUNTIME_DIR="$1" "$2" --daemon 3>&1 >/dev/null 2>&1 | cat; echo ended' _ "$XDG" "$WRAP"
	DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
	assert_success
	assert_output "ended"
	run ls -l "/proc/$DAEMON_PID/fd"
	refute_output --partial "pipe:"
}

# a program that writes its environment (NUL-separated, sorted, the
# library's own variables aside) to $0.with or $0.without, by whether the
# wrapper gave it a broker
ENV_DUMP='import os, sys
side = "with" if "KEEPALIVE_BROKER" in os.environ else "without"
env = sorted(k + b"=" + v for k, v in os.environb.items() if not k.startswith((b"KEEPALIVE_", b"LD_PRELOAD")))
open(sys.argv[1] + "." + side, "wb").write(b"\0".join(env))'

@test "wrapper: keepalive --compare runs the command, on both sides, in the caller's environment exactly (names that are not identifiers, bash functions, SHLVL), as env(1) does" {
	local d="$BATS_TEST_TMPDIR/envs"
	mkdir "$d"
	local -a caller=(env -i PATH="$PATH" HOME="$HOME" XDG_RUNTIME_DIR="$XDG" 'a.b=1' 'x-y=2'
		'BASH_FUNC_f%%=() {  echo fn
}' SHLVL=7 lib=USERVAL work=W here=H _=/caller)
	"${caller[@]}" env "$PYTHON" -c "$ENV_DUMP" "$d/plain"
	run "${caller[@]}" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" --compare --runs 1 --no-census \
		"$PYTHON" -c "$ENV_DUMP" "$d/cmp"
	assert_success
	cmp "$d/plain.without" "$d/cmp.without"
	cmp "$d/plain.without" "$d/cmp.with"
}

@test "wrapper: a read-only XDG_RUNTIME_DIR is passed over for the private broker (no warning per command; the broker is made in /tmp)" {
	[ "$(id -u)" = 0 ] || skip "needs root to mount a read-only tmpfs"
	local ro="$BATS_TEST_TMPDIR/ro"
	mkdir -m 0700 "$ro"
	mount -t tmpfs -o ro,size=64k,mode=0700 tmpfs "$ro" 2>/dev/null || skip "cannot mount a tmpfs here"
	local cmd='[ -S "$KEEPALIVE_BROKER" ] && echo shared || echo alone; echo out'
	run --separate-stderr env XDG_RUNTIME_DIR="$ro" sh -c "$cmd"
	local plain_err=$stderr
	run --separate-stderr env XDG_RUNTIME_DIR="$ro" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$cmd"
	umount "$ro"
	assert_success
	assert_equal "$stderr" "$plain_err"
	assert_output "shared
out"
}

@test "wrapper: keepalive keepalive CMD (a script under the wrapper that runs it again) gives CMD the environment one wrapper gives, the library once in LD_PRELOAD" {
	[ "$PRELOAD" = "$LIB" ] || skip "the preload is KEEPALIVE_PRELOAD's, taken whole"
	local show='printf "%s\n" "$LD_PRELOAD"'
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" sh -c "$show"
	assert_success
	local once=$output
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" "$WRAP" sh -c "$show"
	assert_success
	assert_output "$once"
	# and the caller's own preload kept, after the library, once
	run env XDG_RUNTIME_DIR="$XDG" LD_PRELOAD=/nonexistent-x.so "$WRAP" "$WRAP" sh -c "$show"
	assert_output --partial "$once /nonexistent-x.so"
	refute_output --partial "$LIB $LIB"
}

@test "wrapper: keepalive --compare reads -r1 and --runs=1 as getopt(1) does (they were unknown options)" {
	local form
	for form in "-r1" "--runs=1" "-r 1"; do
		# shellcheck disable=SC2086
		run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" --compare $form -w0 --ports=80 --no-census true
		assert_success
		assert_output --partial "1 interleaved rounds, pooled ports 80"
	done
	run env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" --compare -rx true
	assert_failure 2
}

@test "wrapper: a caller's PATH without the standard directories: the wrapper still works (no 'env: not found' with a line number, a private broker), the command is looked up in the caller's PATH as env(1) does" {
	local cmd='echo "$PATH"; [ -S "$KEEPALIVE_BROKER" ] && echo shared || echo alone'
	run --separate-stderr env -i PATH=/nonexistent XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" /bin/sh -c "$cmd"
	assert_success
	assert_equal "$stderr" ""
	assert_output "/nonexistent
shared"
	# not found there, as env(1) says
	run -127 env -i PATH=/nonexistent /usr/bin/env sh -c 'exit 0'
	run -127 env -i PATH=/nonexistent XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c 'exit 0'
}

@test "wrapper: a caller with fds 3 to 9 open (the entry point's copy of the environment then lands at 10 or above): no broker usage on stderr, the private broker serves" {
	local cmd='[ -S "$KEEPALIVE_BROKER" ] && echo shared || echo alone'
	run --separate-stderr env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$cmd" \
		3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null 8</dev/null 9</dev/null
	assert_success
	assert_equal "$stderr" ""
	assert_output "shared"
	run --separate-stderr env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$cmd" \
		3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null 8</dev/null 9</dev/null
	assert_success
	refute_regex "$stderr" "usage"
	assert_output "shared"
	# and keepalive --daemon from there
	run env XDG_RUNTIME_DIR="$XDG" "$WRAP" --daemon \
		3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null 8</dev/null 9</dev/null
	DAEMON_PID=$(cat "$XDG/keepalive/broker.pid")
	assert_success
	refute_output --partial "usage"
}

@test "wrapper: in a working directory that was removed, the command runs there and prints what it prints alone (no extra 'getcwd() failed' from the wrapper)" {
	local gone="$BATS_TEST_TMPDIR/gone" cmd='pwd; [ . -ef / ] && echo at-root || echo not-root; ls -a | wc -l; env | grep -c KEEPALIVE_CWD || :'
	in_gone() { (mkdir "$gone" && cd "$gone" && rmdir "$gone" && "$@"); }
	run --separate-stderr in_gone env sh -c "$cmd"
	local out=$output err=$stderr
	run --separate-stderr in_gone env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$cmd"
	assert_success
	assert_equal "$stderr" "$err"
	assert_output "$out"
	assert_line not-root
	run --separate-stderr in_gone env KEEPALIVE_STATS=1 XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c "$cmd"
	assert_success
	assert_equal "$(printf '%s\n' "$stderr" | grep -v '^libkeepalive: processes=')" "$err"
	assert_output "$out"
}

@test "wrapper: with a descriptor limit of 10 (too few for the shell part) the command still runs, as env(1) runs it (fail open: without the library)" {
	run -3 bash -c 'ulimit -n 10; env sh -c "echo ok; exit 3"'
	local plain=$output
	run -3 bash -c 'ulimit -n 10; env XDG_RUNTIME_DIR="$1" KEEPALIVE_PRELOAD="$2" "$3" -- sh -c "echo ok; exit 3"' _ "$XDG" "$PRELOAD" "$WRAP"
	assert_output "$plain"
	run -127 bash -c 'ulimit -n 10; "$1" nosuchcmd-ka' _ "$WRAP"
	assert_output "keepalive: nosuchcmd-ka: command not found"
}

@test "wrapper: without /proc (a chroot, a container) the command still runs with its own status, and nothing is left in the private directory's parent" {
	[ "$(id -u)" = 0 ] || skip "needs root for a mount namespace"
	unshare -m true 2>/dev/null || skip "no mount namespaces here"
	local bin="$BATS_TEST_TMPDIR/bin" noproc='umount -l /proc && exec "$@"'
	mkdir "$bin"
	ln -s "$ROOT/build/keepalive" "$bin/keepalive"
	run -3 unshare -m sh -c "$noproc" sh env sh -c 'echo ok; exit 3'
	local plain=$output
	# found through PATH: it cannot tell where it is installed, and steps aside
	run -3 unshare -m sh -c "$noproc" sh env PATH="$bin:$PATH" XDG_RUNTIME_DIR="$XDG" keepalive sh -c 'echo ok; exit 3'
	assert_output "$plain"
	# by its path: it runs (the broker, if it cannot listen, removes its directory)
	run -3 unshare -m sh -c "$noproc" sh env XDG_RUNTIME_DIR="$XDG" KEEPALIVE_PRELOAD="$PRELOAD" "$WRAP" sh -c 'echo ok; exit 3'
	assert_line "ok"
	run ls -A "$XDG"
	assert_output ""
}
