#!/usr/bin/env bats
# Fail open (invariant 3): a call the program makes alone returns, or the
# server answers, as without the library - also where the library owes the
# program an EOF it took from the server by rewriting "Connection: close"
# (docs/hold.md).  Each test compares with the run without the library;
# nothing here waits on a time.

load helpers

setup_file() { suite_setup; }
teardown() {
	[ -n "${AFTER_PID:-}" ] && _stop_pid "$AFTER_PID"
	servers_stop
}

# ---- shutdown(SHUT_WR) after a request we rewrote
#
# tests/servers/after_eof.py answers only once it has read its client's
# FIN.  A shutdown(SHUT_WR) after a request we rewrote to keep-alive was
# answered without the kernel (our EOF would come where the server's close
# would): such a server never answered (status 124 on the old code).

_after_ready() { [ -s "$BATS_TEST_TMPDIR/after.port" ] || _pid_gone "$AFTER_PID"; }

after_eof_start() {
	: >"$BATS_TEST_TMPDIR/after.log"
	"$PYTHON" "$ROOT/tests/servers/after_eof.py" "$BATS_TEST_TMPDIR/after.port" \
		"$BATS_TEST_TMPDIR/after.log" </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/after.err" 3>&- &
	AFTER_PID=$!
	wait_until _after_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/after.port"
}

shut_wr_case() {
	after_eof_start
	CLIENT_TIMEOUT=10 run_plain "$PYTHON" "$ROOT/tests/clients/shut_wr.py" 127.0.0.1 "$SERVER_PORT" /s "$1"
	CLIENT_TIMEOUT=10 run_shim "$PYTHON" "$ROOT/tests/clients/shut_wr.py" 127.0.0.1 "$SERVER_PORT" /s "$1"
	assert_both_ok
	assert_same_output --close-line
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output --partial "after"
	run cat "$BATS_TEST_TMPDIR/after.log"
	assert_output "GET /s HTTP/$1
GET /s HTTP/$1"
}

@test "failopen: shutdown(SHUT_WR) after an HTTP/1.1 Connection: close request: a server that answers after the client's FIN answers, as alone" {
	shut_wr_case 1.1
}

@test "failopen: shutdown(SHUT_WR) after an HTTP/1.0 request: a server that answers after the client's FIN answers, as alone" {
	shut_wr_case 1.0
}

# ---- a bounded read while the framing is lost
#
# The response cannot be delimited (tests/servers/lost_cue.py: "Content-
# Length: 5x"): we show EOF after a quiet period of ours.  A read the
# program bounded (MSG_DONTWAIT, SO_RCVTIMEO) while the server is quiet and
# open must end as its bound says (EAGAIN), not wait out our quiet period
# and answer EOF (the old code, whose lost_quiet looked only at
# O_NONBLOCK: status 124 here).  (splice's SPLICE_F_NONBLOCK is no bound:
# it is the pipe's, and alone the socket's read blocks.)  The quiet period
# is made long
# (30 s) so that no scheduling delay can end it before that read.

_lost_ready() { [ -s "$BATS_TEST_TMPDIR/lost.port" ] || _pid_gone "$AFTER_PID"; }

lost_bound_case() {
	rm -f "$BATS_TEST_TMPDIR/lost.port"
	"$PYTHON" "$ROOT/tests/servers/lost_cue.py" "$BATS_TEST_TMPDIR/lost.port" "$BATS_TEST_TMPDIR" \
		</dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/lost.err" 3>&- &
	AFTER_PID=$!
	wait_until _lost_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/lost.port"
	CLIENT_TIMEOUT=20 run_plain "$CLIENTS/lost_bound" 127.0.0.1 "$SERVER_PORT" "$BATS_TEST_TMPDIR" "$1"
	CLIENT_TIMEOUT=20 run_shim env KEEPALIVE_QUIET_MS=30000 "$CLIENTS/lost_bound" 127.0.0.1 \
		"$SERVER_PORT" "$BATS_TEST_TMPDIR" "$1"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "$1 read, the server quiet: EAGAIN"
	assert_line "then: EOF"
}

@test "failopen: framing lost, recv(MSG_DONTWAIT) while the server is quiet: EAGAIN at once, as alone" {
	lost_bound_case dontwait
}

@test "failopen: framing lost, recv() under SO_RCVTIMEO while the server is quiet: EAGAIN at its timeout, as alone" {
	lost_bound_case rcvtimeo
}

# ---- recv(MSG_WAITALL) split into pieces (docs/replay.md "recv(MSG_WAITALL)")
#
# The kernel's one MSG_WAITALL read counts SO_RCVTIMEO over the whole call
# and ends at a signal once it has data (SA_RESTART or not).  The library
# reads such a call in pieces (each framed); each piece used to start its
# own timeout and be restarted after a handler, so a server trickling its
# body (tests/servers/trickle.py: 30 bytes, one per 100 ms) kept the read
# going to the body's end ("whole", 3 s) or, on a keep-alive request,
# waiting past it (124), where alone it ends at its bound ("partial").
# Which bytes came by then is the machine's timing; that it ended is not.

trickle_case() {
	rm -f "$BATS_TEST_TMPDIR/trickle.port"
	"$PYTHON" "$ROOT/tests/servers/trickle.py" "$BATS_TEST_TMPDIR/trickle.port" \
		</dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/trickle.err" 3>&- &
	AFTER_PID=$!
	wait_until _trickle_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/trickle.port"
	local how ka call
	for how in timeo signal; do
		for ka in ka close; do
			for call in recv recvmsg recvfrom; do
				CLIENT_TIMEOUT=10 run_plain "$CLIENTS/waitall_bound" "$SERVER_PORT" $how $ka $call
				CLIENT_TIMEOUT=10 run_shim "$CLIENTS/waitall_bound" "$SERVER_PORT" $how $ka $call
				echo "cell $how $ka $call"
				assert_both_ok
				assert_same_output
				run cat "$BATS_TEST_TMPDIR/shim.out"
				assert_output "partial"
			done
		done
	done
}

_trickle_ready() { [ -s "$BATS_TEST_TMPDIR/trickle.port" ] || _pid_gone "$AFTER_PID"; }

@test "failopen: recv/recvmsg/recvfrom(MSG_WAITALL) under SO_RCVTIMEO or a signal (SA_RESTART), a body trickling past the bound: the read ends at its bound, as alone (12 cells)" {
	make -s -C "$ROOT" build/clients/waitall_bound >&2
	trickle_case
}

# ---- a read under way when another thread closes its fd
#
# docs/hold.md "A read under way when another thread closes".  Alone the
# kernel keeps the socket for a read already blocked on it in another
# thread: the read goes on, on its own connection, and the program's next
# connect() makes a new one.  tests/clients/thread_close.c, 20 rounds, each
# waiting for events only (the reader is seen blocked in read() in
# /proc/self/task/TID/syscall), against tests/servers/held.py (started
# afresh for each half: its connection ids count from 1).
#
# park: thread A blocks in a second read() after its keep-alive answer;
# main closes the fd, then GET /c on a new socket.  The old code parked
# the socket and handed it to that connect(): /c went on A's connection in
# every round (the server's log), and A's read took an answer meant for
# another (main's read then timed out: the rounds after it hung, 124).
#
# rewrite: thread B reads a "Connection: close" request's answer (which
# we rewrite to keep-alive); main closes the fd before the server answers
# (held.py answers /hold?i after /release?i).  The old code dropped the
# framing at the close: B's read showed the server's keep-alive answer
# without the close line we show such a program (50 bytes where alone 69,
# then EBADF as alone).

_held_ready() { [ -s "$BATS_TEST_TMPDIR/held.port" ] || _pid_gone "$AFTER_PID"; }

held_start() {
	[ -z "${AFTER_PID:-}" ] || _stop_pid "$AFTER_PID"
	rm -f "$BATS_TEST_TMPDIR/held.port"
	: >"$BATS_TEST_TMPDIR/held.log"
	"$PYTHON" "$ROOT/tests/servers/held.py" "$BATS_TEST_TMPDIR/held.port" "$BATS_TEST_TMPDIR/held.log" \
		</dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/held.err" 3>&- &
	AFTER_PID=$!
	wait_until _held_ready
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/held.port"
}

# thread_close_case MODE: both halves, each against a fresh server; the
# server's logs in plain.log and shim.log
thread_close_case() {
	make -s -C "$ROOT" build/clients/thread_close >&2
	held_start
	CLIENT_TIMEOUT=30 run_plain "$CLIENTS/thread_close" "$1" "$SERVER_PORT" 20
	cp "$BATS_TEST_TMPDIR/held.log" "$BATS_TEST_TMPDIR/plain.log"
	held_start
	CLIENT_TIMEOUT=30 run_shim "$CLIENTS/thread_close" "$1" "$SERVER_PORT" 20
	cp "$BATS_TEST_TMPDIR/held.log" "$BATS_TEST_TMPDIR/shim.log"
	echo "plain: status $PLAIN_STATUS; shim: status $SHIM_STATUS"
	head -n 5 "$BATS_TEST_TMPDIR/shim.err"
	assert_both_ok
	assert_same_output
	# the same requests reached the server (the order of two connections'
	# lines is the server's threads')
	cut -d' ' -f2- "$BATS_TEST_TMPDIR/plain.log" | sort >"$BATS_TEST_TMPDIR/plain.reqs"
	cut -d' ' -f2- "$BATS_TEST_TMPDIR/shim.log" | sort >"$BATS_TEST_TMPDIR/shim.reqs"
	run cmp "$BATS_TEST_TMPDIR/plain.reqs" "$BATS_TEST_TMPDIR/shim.reqs"
	assert_success
	run wc -l <"$BATS_TEST_TMPDIR/shim.reqs"
	assert_output 40
}

# rounds in LOG whose /c?i went on the connection of their /a?i
_same_conn_rounds() {
	awk '{ split($3, p, "?"); if (p[1] == "/a") a[p[2]] = $1; else if (p[1] == "/c" && a[p[2]] == $1) n++ }
	     END { print n + 0 }' "$1"
}

@test "failopen: a read blocked in another thread when the fd is closed: the socket is not parked, the next connect gets a new connection, the read takes no other's answer (20 rounds), as alone" {
	thread_close_case park
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "main 19: ok /c?19"
	refute_line --partial "A "
	run _same_conn_rounds "$BATS_TEST_TMPDIR/plain.log"
	assert_output 0
	run _same_conn_rounds "$BATS_TEST_TMPDIR/shim.log"
	assert_output 0
}

@test "failopen: a read of a rewritten exchange under way when another thread closes the fd: the answer with its close line, then EBADF (20 rounds), as alone" {
	thread_close_case rewrite
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "B 19: read -1 Bad file descriptor"
	run grep -c $'^Connection: close\r$' "$BATS_TEST_TMPDIR/shim.out"
	assert_output 20
}

# ---- a close during a connect
#
# Another thread closes a socket while its blocking connect() waits (a
# server slow to accept: a full backlog); then the connect fails.  The
# library once freed the connection under the call and dereferenced the
# table's empty entry at its failure (SIGSEGV, 5 of 5 runs on the old
# code).  tests/clients/connect_close.c makes its own listener.

@test "another thread closes a socket while its connect() waits: the connect's failure as alone, no crash" {
	SERVER_PORT=$(free_port)
	run_plain "$CLIENTS/connect_close" "$SERVER_PORT"
	run_shim "$CLIENTS/connect_close" "$SERVER_PORT"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "close during connect: 0"
	assert_line "connect: -1 Connection refused"
	assert_line "survived"
}

# ---- select() past FD_SETSIZE
#
# select(getdtablesize(), ...) over an ordinary fd_set: alone the kernel
# reads and writes the set only up to its fd table's size.  The library's
# scans read nfds bits (SIGSEGV on the old code with the set before a
# PROT_NONE page), and its hidden fds, numbered from the soft limit up,
# grow the kernel's table so that the kernel itself would read and write
# past the set (docs/limits.md "select past FD_SETSIZE").  Three requests:
# the later ones on a pooled connection, whose hidden fd grew the table.

@test "select(getdtablesize()) over an fd_set with a soft limit of 20000: the same answers, nothing read past the set" {
	[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 20000 ] || skip "hard RLIMIT_NOFILE under 20000"
	nginx_start
	run_both 3 prlimit --nofile=20000: "$CLIENTS/select_wide" "$NGINX_PORT" /f 3
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "nfds above FD_SETSIZE: yes"
	assert_equal "reused=$(stat_value reused)" "reused=2"
}

# Without /proc (a mount namespace where it is unmounted: a sandbox, a
# chroot), the program's highest fd is found by probing each number
# downward from nfds; on the old code nfds stayed as given and the kernel,
# its table grown by our hidden fds, read past the set (docs/limits.md
# "select past FD_SETSIZE").  The wrappers (sh, umount) run without the
# library: only the client's stats line is read.
noproc_or_skip() {
	# (ASan's runtime needs /proc: its exit-time leak check dies without
	# it, "Can't open /proc/PID/task", whatever the library does)
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "not under the ASan run: its runtime needs /proc"
	[ "$(id -u)" = 0 ] || skip "needs root for unshare -m"
	unshare -m sh -c 'umount -l /proc && ! [ -e /proc/self/fd ]' 2>/dev/null ||
		skip "unshare -m with /proc unmounted not permitted here"
}

noproc_select_case() {
	[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 20000 ] || skip "hard RLIMIT_NOFILE under 20000"
	noproc_or_skip
	nginx_start
	run_both 3 unshare -m sh -c 'env -u LD_PRELOAD umount -l /proc && exec "$@"' sh \
		prlimit --nofile=20000: "$CLIENTS/select_wide" "$NGINX_PORT" /f 3 "$1"
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "nfds above FD_SETSIZE: yes"
	assert_equal "reused=$(stat_value reused)" "reused=2"
}

@test "select(getdtablesize()) without /proc, soft limit 20000: the same answers, nothing read past the set" {
	noproc_select_case select
}

@test "pselect(getdtablesize()) without /proc, soft limit 20000: the same answers, nothing read past the set" {
	noproc_select_case pselect
}

# The review's case: soft limit 4096, two requests (one on a pooled
# connection, whose hidden fd grew the table), then one select on stdin
# over a 1024-bit set followed by nonzero bytes: on the old code the
# kernel read them as set bits, EBADF where alone select returned 1.
# Soft = hard: no room above the limit, the hidden fd is at 1024.
noproc_garbage_case() {
	[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4096 ] || skip "hard RLIMIT_NOFILE under 4096"
	noproc_or_skip
	nginx_start
	run_both 2 unshare -m sh -c 'env -u LD_PRELOAD umount -l /proc && exec "$@"' sh \
		prlimit --nofile="${2:-4096:}" "$CLIENTS/select_garbage" "$NGINX_PORT" /f 2 "$1"
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "nfds above FD_SETSIZE: yes"
	assert_line "$1: 1 errno=- fd 0 set=1 bytes past the set changed=0"
	assert_equal "reused=$(stat_value reused)" "reused=1"
}

@test "select(getdtablesize()) on stdin without /proc after a pooled request: 1 as alone, no EBADF from bytes past the set" {
	noproc_garbage_case select
}

@test "pselect(getdtablesize()) on stdin without /proc after a pooled request: 1 as alone, no EBADF from bytes past the set" {
	noproc_garbage_case pselect
}

@test "select(getdtablesize()) on stdin without /proc, soft = hard 4096 (hidden fds from 1024, under nfds): 1 as alone" {
	# no room above the soft limit: the pooled socket's hidden fd lies
	# below nfds, and the probes must pass over it
	noproc_garbage_case select 4096:4096
}

# ---- epoll through a closed number
#
# A socket registered through a dup of the epoll fd, that dup closed: the
# library forgot its record of the registration with the number, so at
# park it could not remove it, and the pooled socket woke the set with
# the closed socket's data (docs/hold.md "epoll through a closed number").

@test "epoll: a socket registered through a closed dup of the set's fd: once closed, the set reports nothing of it, as alone" {
	nginx_start
	run_both 2 "$CLIENTS/epoll_dup" "$NGINX_PORT" /f
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "events in the set after its socket's close: 0"
}

@test "epoll: a socket registered by syscall(SYS_epoll_ctl): once closed, the set reports nothing of it, as alone" {
	# the registration went past our epoll_ctl: the parked socket kept it
	# and woke the set with the closed socket's data when handed out
	nginx_start
	run_both 2 "$CLIENTS/epoll_dup" "$NGINX_PORT" /f raw
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "events in the set after its socket's close: 0"
}

# ---- a timeout the kernel refuses
#
# ppoll, pselect, select and epoll_pwait2 with a timeout the kernel
# refuses fail with EINVAL before any fd is looked at; on a connection
# whose EOF the library owed, its wait reported the EOF (ready) instead,
# and read a negative timeout as none.

@test "waits with a timeout the kernel refuses: EINVAL as alone, even where the library owes an EOF" {
	nginx_start
	run_both 1 "$CLIENTS/bad_timeout" "$NGINX_PORT"
	assert_both_ok
	assert_same_output --headers
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "ppoll tv_nsec 10^9: -1 EINVAL"
	assert_line "epoll_pwait2 tv_nsec 2*10^9: -1 EINVAL"
	assert_line "syscall ppoll tv_nsec 10^9: -1 EINVAL"
	assert_line "ppoll 2*10^6 s: 1 -"
	assert_line "epoll_pwait2 2*10^6 s: 1 -"
	assert_line "read 0"
	[ "$(stat_value rewritten)" -ge 1 ] || fail "nothing rewritten: no EOF owed, nothing shown"
}

# ---- a pointer the kernel refuses
#
# A call that fails with EFAULT alone fails so with the library, on a
# socket it never follows (with the library off too) and on a connection
# it does: the library read the program's msghdr, iovec, pollfd array,
# fd_set or head bytes before the kernel did, and the process died of
# SIGSEGV (every one of these cells on the old code).  After a refused
# write the connection still carries the request, and its whole answer
# (docs/limits.md "A pointer the kernel refuses").

@test "failopen: calls with a pointer the kernel refuses (poll, select, readv, writev, sendmsg, recvmsg, sendmmsg, recvmmsg, write, ...): EFAULT as alone, no crash, the connection still answers" {
	nginx_start
	# (libasan's getpeername reads the length itself: that cell dies in
	# libasan under ASan, with or without the library)
	local skip=
	[ "${KEEPALIVE_ASAN:-0}" != 1 ] || skip=getpeername-len
	run_both 11 env BAD_POINTER_SKIP="$skip" "$CLIENTS/bad_pointer" "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	refute_output --partial "killed"
	assert_line "write-held -> -1 Bad address"
	assert_line "  then: HTTP/1.1 200 OK, EOF (read 0)"
	run_shim KEEPALIVE_DISABLE=1 BAD_POINTER_SKIP="$skip" "$CLIENTS/bad_pointer" "$NGINX_PORT"
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
	assert_same_output
}

# The same calls with NULL (and the connect, getsockopt and getpeername
# cells with 8 too, above): the library's probe asks the kernel about the
# 8-byte word a pointer falls in, and the word at 0 is no word to it (a
# NULL set: "readable"); connect()'s address (on any socket, a Unix one
# too) and the lengths getsockopt and getpeername take were read with no
# probe.  Every cell that crashed on the old code crashed with SIGSEGV.

@test "failopen: a NULL pointer the kernel refuses (the calls above, connect, getsockopt's and getpeername's lengths): EFAULT as alone, no crash" {
	nginx_start
	run_both 11 env BAD_POINTER=null "$CLIENTS/bad_pointer" "$NGINX_PORT"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	refute_output --partial "killed"
	assert_line "write -> -1 Bad address"
	assert_line "connect -> -1 Bad address"
	assert_line "getpeername-len -> -1 Bad address"
}

# ---- an option we cannot carry stops the rewrite
#
# SO_RCVLOWAT above an answer's size: the kernel's read and poll wait for
# that much or the server's close.  The library logged it as an option
# it cannot carry (the connection never pooled again) and still rewrote
# the request that asked to close: the read waited for nginx's idle close
# (75 s; status 124 on the old code).  Request 0 is pooled and rewritten;
# 1 and 2 are each handed the pooled connection, and each setsockopt
# moves them to a fresh one first (kp_sockopt_before), the option then on
# the socket they keep (docs/hold.md "Options we cannot carry").

@test "failopen: SO_RCVLOWAT set before a request that asks to close: not rewritten, read and poll end at the server's close, as alone" {
	nginx_start
	for mode in read poll; do
		run_both 3 "$CLIENTS/rcvlowat" "$NGINX_PORT" "$mode" 3 1
		assert_both_ok
		assert_same_output
		assert_equal "rewritten $mode $(stat_value rewritten)" "rewritten $mode 1"
		assert_equal "unvouched $mode $(stat_value unvouched)" "unvouched $mode 2"
	done
}

# ---- MSG_WAITALL reads the split once left to the kernel
#
# recv/recvmsg(MSG_PEEK|MSG_WAITALL), recvmsg(MSG_WAITALL) over more than
# 64 iovecs, recvmmsg(MSG_WAITALL): each asks for more than the answer to
# a rewritten close request holds; the kernel's wait lasted until nginx's
# idle close (75 s; status 124 on the old code for every mode).  Two
# requests each: the second on the pooled connection (docs/replay.md
# "recv(MSG_WAITALL)").

@test "failopen: recv/recvmsg(MSG_PEEK|MSG_WAITALL), recvmsg(MSG_WAITALL) over 65 and 300 iovecs, recvmmsg(MSG_WAITALL) after a close request: the answer, then EOF, as alone" {
	nginx_start
	for mode in peek peekmsg iov65 iov300 mmsg; do
		run_both 2 "$CLIENTS/waitall_more" "$NGINX_PORT" "$mode" 2
		assert_both_ok
		assert_same_output
		assert_equal "reused $mode $(stat_value reused)" "reused $mode 1"
	done
}

# ---- sends the kernel counts one by one
#
# A head written in two sends on a socket with SO_ZEROCOPY (MSG_ZEROCOPY
# sends) or SO_TIMESTAMPING (OPT_ID): the kernel reports each send, a
# completion id or a TX timestamp keyed by its byte count.  The library
# held the first piece to rewrite the head and sent both as one: one
# report, and the program's wait for the second never ended (124 on the
# old code, both modes).  Such a connection is never pooled, so nothing
# is held and nothing rewritten.  Request 0 is a plain keep-alive one: the
# option is set on a handed-out connection, which is left for a fresh one
# before the option reaches the kernel (a fresh one made later lacked
# it: no report at all, 124 too) (docs/hold.md "Sends the kernel
# counts").

@test "failopen: a head in two MSG_ZEROCOPY sends, or two sends under SO_TIMESTAMPING, on fresh and handed-out connections: a report for each, the same keys, the answer, as alone" {
	nginx_start
	for mode in zerocopy timestamp; do
		run_both 3 "$CLIENTS/counted_sends" "$NGINX_PORT" "$mode" 3 1
		assert_both_ok
		assert_same_output
		# (each counted request was handed a pooled connection first)
		assert_equal "reused $mode $(stat_value reused)" "reused $mode 2"
	done
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_line "request 2: TX timestamp 1, key 46"
}

# Valgrind emulates the system call the library asks whether a pointer is
# readable, and memcheck checks the word it names as if the program had
# passed it: a request written from a buffer whose first bytes were never
# written was an "uninitialised byte(s)" error, and a program run with
# --error-exitcode failed where alone it passed (shim/real.c kp_readable).

@test "failopen: under valgrind, requests written from a buffer whose first bytes were never written (write, send, writev, sendmsg): no memcheck error, as alone" {
	curl_ok || skip "the ASan run preloads libasan, which valgrind cannot follow"
	nginx_start
	CLIENT_TIMEOUT=120 run_both 8 valgrind -q --error-exitcode=99 "$CLIENTS/uninit_send" "$NGINX_PORT" 8
	assert_both_ok
	assert_same_output
	assert_equal "$(tail -n 1 "$BATS_TEST_TMPDIR/shim.out")" "7: HTTP/1.1 200 OK"
	[ "$(stat_value reused)" -ge 4 ]
}

# ---- a signal during the library's own wait (docs/hold.md "Signals
# during the library's waits")
#
# tests/clients/eintr_mixed.c has SIGALRM with SA_RESTART (every 250 ms)
# and SIGUSR1 without.  The kernel restarts a blocking read after SIGALRM
# and ends it with EINTR after SIGUSR1.  The library's waits inside the
# read (the pieces of a MSG_WAITALL read: tests/servers/cases/late1
# answers 1 s late; the quiet period of a splice's lost framing, nginx)
# asked whether every installed handler restarts: the idle SIGUSR1 handler
# made each SIGALRM an EINTR (0 bytes, EINTR at the first tick, where
# alone the whole answer).  "fire": SIGUSR1 comes 375 ms in, between two
# SIGALRMs, EINTR both ways.

# eintr_case SERVER PATH CALL MODE: one run each way, the server reset
eintr_case() {
	local half
	servers_stop
	if [ "$1" = nginx ]; then nginx_start; else scripted_start "$1"; fi
	for half in plain shim; do
		server_reset
		CLIENT_TIMEOUT=10 run_$half "$CLIENTS/eintr_mixed" "$SERVER_PORT" "$2" "$3" "$4"
	done
	echo "cell $*"
	assert_both_ok
	assert_same_output --headers
	run tail -n 1 "$BATS_TEST_TMPDIR/shim.out"
}

@test "failopen: a SA_RESTART signal during the library's wait in recv(MSG_WAITALL) (late server) or splice (nginx), with an idle handler without SA_RESTART: the read goes on, as alone" {
	make -s -C "$ROOT" build/clients/eintr_mixed >&2
	eintr_case late1 / waitall quiet
	assert_output "end r=0 errno=- usr1=0"
	eintr_case nginx /big splice quiet
	assert_output "end r=0 errno=- usr1=0"
}

@test "failopen: a signal without SA_RESTART during the library's wait in recv(MSG_WAITALL), other handlers restarting: EINTR, as alone" {
	make -s -C "$ROOT" build/clients/eintr_mixed >&2
	eintr_case late1 / waitall fire
	assert_output "end r=-1 errno=EINTR usr1=1"
}
