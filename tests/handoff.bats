#!/usr/bin/env bats
# The program's socket crosses into another process (fork, exec, system,
# vfork) while a request we rewrote to keep-alive is unanswered.  The
# server is nginx proxying to an upstream that answers on the client's cue
# (tests/servers/cue.py): nginx cancels a proxied request whose client sent
# its FIN first (499), as relays and anything that cancels on the client's
# EOF do.  Alone the program reads its 200; with the library it must too:
# our FIN waits for the answer's end (docs/replay.md "After our FIN stood
# in").  Each step waits for an event (fifos), never for a time.

load helpers

setup_file() { suite_setup; }
setup() {
	nginx_start
	CUE_DIR="$NGINX_DIR/cue"
	mkdir -p "$CUE_DIR"
	"$PYTHON" "$ROOT/tests/servers/cue.py" "$NGINX_DIR/cue.sock" "$CUE_DIR" \
		</dev/null >"$CUE_DIR/ready" 2>"$CUE_DIR/stderr" 3>&- &
	CUE_PID=$!
	wait_until _cue_ready || true
	[ -s "$CUE_DIR/ready" ] || {
		cat "$CUE_DIR/stderr" >&2
		return 1
	}
}
teardown() {
	[ -n "${CUE_PID:-}" ] && _stop_pid "$CUE_PID"
	servers_stop
}

_cue_ready() { [ -s "$CUE_DIR/ready" ] || _pid_gone "$CUE_PID"; }

# what the upstream did, in the plain run and in the shim's (run_both
# resets nothing of it: the two runs' lines, in order)
assert_upstream_answered_both() {
	run cat "$CUE_DIR/cue.log"
	assert_output "answered $1
answered $1"
}

fork_cue_case() {
	CLIENT_TIMEOUT=20 run_both 1 "$CLIENTS/fork_cue" 127.0.0.1 "$NGINX_PORT" /cue/x "$CUE_DIR" "$1"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "$1: status: HTTP/1.1 200 OK; body: cued /cue/x"
	assert_upstream_answered_both /cue/x
}

@test "handoff: fork() (the child _exits) while a proxied request is unanswered: the answer, as alone (no 499)" {
	fork_cue_case fork
}

@test "handoff: fork() + exec while a proxied request is unanswered: the answer, as alone" {
	fork_cue_case forkexec
}

@test "handoff: system() while a proxied request is unanswered: the answer, as alone" {
	fork_cue_case system
}

@test "handoff: Python os.fork() beside a urllib thread waiting for its answer: the answer, as alone" {
	CLIENT_TIMEOUT=20 run_both 1 "$PYTHON" "$ROOT/tests/clients/fork_cue.py" 127.0.0.1 "$NGINX_PORT" /cue/py "$CUE_DIR"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output "fork (200, b'cued /cue/py\\n')"
	assert_upstream_answered_both /cue/py
}

@test "handoff: no other process (the control): the answer, as alone" {
	fork_cue_case none
}

# ---- a vfork() child shares our memory, not our fd table
#
# Its close() of the socket (before exec) closed the child's copy alone,
# but freed the parent's connection in our table: the parent's read of the
# answer to the request we rewrote then waited for nginx's idle close (75 s;
# status 124 here).

@test "handoff: vfork(), the child closes the socket and execs: the parent reads its answer, as alone" {
	fork_cue_case vfork-close
}

@test "handoff: vfork(), the child dups the socket, closes both, execs: the parent reads its answer, as alone" {
	fork_cue_case vfork-dup
}

@test "handoff: Ruby fork beside a Net::HTTP thread waiting for its answer: the answer once, as alone (no retried GET)" {
	CLIENT_TIMEOUT=20 run_both 1 "$RUBY" "$ROOT/tests/clients/fork_cue.rb" 127.0.0.1 "$NGINX_PORT" /cue/rb "$CUE_DIR"
	assert_both_ok
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
	assert_output '["200", "cued /cue/rb\n"]'
	assert_upstream_answered_both /cue/rb
}
