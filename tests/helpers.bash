# tests/helpers.bash - loaded by every tests/*.bats file (`load helpers`).
#
# A test starts a server (nginx_start or scripted_start), runs a real client
# without and with the shim (run_both, or run_plain / run_shim), and asserts
# on the output and on the server's log: the server's connection ids are the
# honest witness of reuse (docs/design.md §8), the shim's own counters are not.
#
# Every client runs under `timeout $CLIENT_TIMEOUT`, so a hang fails the test
# (status 124) instead of blocking CI.  Nothing here asserts on time.
#
# Overridable from the environment:
#   KEEPALIVE_LIB      the shim (default build/libkeepalive.so)
#   KEEPALIVE_PRELOAD  the whole LD_PRELOAD value for the shim half, e.g.
#                      "$(gcc -print-file-name=libasan.so) build/libkeepalive-asan.so"
#   PYTHON RUBY NGINX CURL  interpreters/binaries (Debian's by default)
#   CLIENT_TIMEOUT     seconds (default 20)
#   BATS_LIB_DIR       where bats-support/bats-assert live (/usr/lib/bats)

# (no $(...) or dirname here: this file is loaded once per test)
ROOT="${BATS_TEST_DIRNAME%/*}"
LIB="${KEEPALIVE_LIB:-$ROOT/build/libkeepalive.so}"
PRELOAD="${KEEPALIVE_PRELOAD:-$LIB}"
PYTHON="${PYTHON:-/usr/bin/python3}"
RUBY="${RUBY:-/usr/bin/ruby}"
CURL="${CURL:-curl}"
CLIENT_TIMEOUT="${CLIENT_TIMEOUT:-20}"
# under ASan a client is 2-3 times slower, and the ASan pass runs on a
# machine the first pass left loaded: every timeout is a hang guard, not a
# measure, so it stretches (a test's own CLIENT_TIMEOUT=N stretches too)
SLOW=1
[ "${KEEPALIVE_ASAN:-0}" = 1 ] && SLOW=4
CLIENTS="$ROOT/build/clients"    # compiled C clients
SCRIPTS="$ROOT/tests/clients"    # Ruby/Python test clients
PRODUCT_CLIENTS="$ROOT/scripts/clients" # the demo's clients, tested too
CASES="$ROOT/tests/servers/cases"

# bats-support and bats-assert: the files their load.bash sources, in its
# order, sourced here directly (load.bash runs dirname 15 times per test)
for _f in output error lang; do
	source "${BATS_LIB_DIR:-/usr/lib/bats}/bats-support/src/$_f.bash"
done
for _f in assert refute assert_equal assert_not_equal assert_success assert_failure \
	assert_output refute_output assert_line refute_line assert_regex refute_regex; do
	source "${BATS_LIB_DIR:-/usr/lib/bats}/bats-assert/src/$_f.bash"
done
unset _f

# Which server the generic server_* helpers talk to: nginx or scripted.
SERVER_KIND=
SERVER_PORT=

# ------------------------------------------------------------------ setup

# Call from setup_file: builds the C clients (a no-op when up to date) and
# refuses to run without the shim: ld.so only warns about a missing preload
# object, and every "no reuse" test would then pass for the wrong reason.
suite_setup() {
	local f
	# files run in parallel (make test: bats --jobs): one make at a time
	mkdir -p "$ROOT/build"
	flock "$ROOT/build/.make.lock" make -s -C "$ROOT" clients >&2
	for f in $PRELOAD; do
		[ -f "$f" ] || {
			echo "missing $f: build the shim first (make)" >&2
			return 1
		}
	done
}

# Call from teardown: stops whatever the test started, also after a failure.
servers_stop() {
	nginx_stop
	echo_stop
	scripted_stop
	_scripted_forker_stop
	own_server_stop
}

# free_port, wait_until, _pid_gone, _stop_pid and the nginx launcher are
# shared with the demo.
source "$ROOT/scripts/lib/nginx.sh"
# one test CA for the whole bats run, copied to each test (scripts/lib/tls.sh)
export TLS_MAKE_CACHE="${TLS_MAKE_CACHE:-$BATS_RUN_TMPDIR/tls}"

# ------------------------------------------------------------------ nginx

# Files nginx serves (in $NGINX_DIR/www): /f (NGINX_F_SIZE bytes of
# recognisable text, mtime 2020-01-01 00:00:00 UTC for the 304 test), /big
# (100 KiB), /empty (0 bytes).  Locations: /nocontent -> 204, /close -> /f
# with "Connection: close".  See scripts/lib/nginx.conf.in.
NGINX_IMS='Wed, 01 Jan 2020 00:00:00 GMT'
NGINX_F_SIZE=
NGINX_DIR=
NGINX_PID=
NGINX_PORT=

nginx_start() {
	local www f
	NGINX_DIR="$(mktemp -d /tmp/keepalive-test-nginx.XXXXXX)"
	www="$NGINX_DIR/www"
	# (tmp: for nginx_local_start, one mkdir for both)
	mkdir -p "$www" "$NGINX_DIR/tmp"
	printf -v f 'libkeepalive test file /f, line %d of 6: the quick brown fox\n' 1 2 3 4 5 6
	printf '%s' "$f" >"$www/f"
	touch -d '2020-01-01 00:00:00 UTC' "$www/f"
	seq 1 100000 | head -c 102400 >"$www/big"
	: >"$www/empty"
	# ASCII: its length in characters is its size in bytes (no stat)
	NGINX_F_SIZE=${#f}
	nginx_local_start "$NGINX_DIR" || return 1
	SERVER_KIND=nginx
	SERVER_PORT=$NGINX_PORT
}

nginx_stop() {
	nginx_local_stop
	[ -n "$NGINX_DIR" ] && rm -rf "$NGINX_DIR"
	NGINX_DIR=
}

nginx_log() { cat "$NGINX_DIR/access.log"; }
# use_tls 13|12: the HTTPS server of that TLS version (NGINX_TLS=1), as
# SERVER_PORT (pooled) and URL
use_tls() {
	local var="NGINX_TLS$1_PORT"
	SERVER_PORT=${!var}
	URL="https://127.0.0.1:$SERVER_PORT"
}
# number of distinct nginx connections ($connection) in the access log
nginx_conns() { _distinct_first_fields "$NGINX_DIR/access.log"; }
nginx_requests() { _count_lines "$NGINX_DIR/access.log"; echo "$REPLY"; }
# nginx keeps the log open with O_APPEND: truncating it is safe
nginx_reset() { : >"$NGINX_DIR/access.log"; }

# --------------------------------------------------------- scripted server

# scripted_start CASE [PORT]: tests/servers/scripted.py answering every
# request with tests/servers/cases/CASE.  Its log has one line per request,
# "<conn_id> <request line>", written before the response is sent.
#
# SCRIPTED_MORE_V4=N: it also listens on 127.0.0.2 .. 127.0.0.N+1 (same
# port): N more destinations for the pool.
#
# SCRIPTED_TLS=1 scripted_start CASE [PORT], or scripted_start_tls CASE
# [PORT]: the same server over TLS (scripted.py --tls), with a test CA made
# for the test by tls_make (scripts/lib/tls.sh) in
# $BATS_TEST_TMPDIR/scripted/tls; SCRIPTED_CA is its ca.pem (the server's
# certificate is valid for localhost, 127.0.0.1 and ::1).  scripted_restart
# keeps TLS on (SCRIPTED_TLS_ON).
SCRIPTED_PID=
SCRIPTED_PORT=
SCRIPTED_CASE=
SCRIPTED_LOG=
SCRIPTED_TLS_ON=0
SCRIPTED_CA=

scripted_start() {
	local dir="$BATS_TEST_TMPDIR/scripted" tls=() more=()
	SCRIPTED_CASE="$1"
	SCRIPTED_LOG="$dir/requests.log"
	[ -f "$CASES/$SCRIPTED_CASE" ] || {
		echo "no case file $CASES/$SCRIPTED_CASE" >&2
		return 1
	}
	[ -d "$dir" ] || mkdir -p "$dir"
	SCRIPTED_TLS_ON="${SCRIPTED_TLS:-0}"
	SCRIPTED_CA=
	if [ "$SCRIPTED_TLS_ON" = 1 ]; then
		[ -s "$dir/tls/server.pem" ] || tls_make "$dir/tls" || {
			echo "could not make the test CA" >&2
			return 1
		}
		SCRIPTED_CA="$dir/tls/ca.pem"
		tls=(--tls "$dir/tls/server.pem" "$dir/tls/server.key")
	fi
	# (truncated, not removed: no server has it open any more, stop waited)
	: >"$SCRIPTED_LOG"
	[ -n "${SCRIPTED_MORE_V4:-}" ] && more=(--more-v4 "$SCRIPTED_MORE_V4")
	_scripted_forker_start "$dir" || return 1
	# the fork server's child answers on the reply fifo: "ready PID PORT"
	# once it listens, or "failed PID" (read -t: no polling, no sleep)
	local reply word pid port=
	exec {reply}<>"$dir/reply"
	_scripted_send "$dir" "$dir/stderr" --case "$CASES/$SCRIPTED_CASE" \
		--log "$SCRIPTED_LOG" --port "${2:-0}" "${tls[@]}" "${more[@]}"
	while read -r -t 20 -u "$reply" word pid port; do
		[ "$word" = ready ] || [ "$word" = failed ] && break
	done
	exec {reply}<&-
	if [ "${word-}" != ready ]; then
		echo "scripted server did not start:" >&2
		cat "$dir/stderr" >&2
		return 1
	fi
	SCRIPTED_PID=$pid
	SCRIPTED_PORT=$port
	SERVER_KIND=scripted
	SERVER_PORT=$SCRIPTED_PORT
}

scripted_start_tls() { SCRIPTED_TLS=1 scripted_start "$@"; }

# The servers are children of one scripted.py --fork-server per test
# (started with the first): a restart costs a fork, not Python's start-up
# and imports (~0.1 s of CPU; misframe.bats restarts 250 times).  Each
# child is still a process of its own, stopped by SIGTERM as before.
SCRIPTED_FORKER_PID=
_scripted_forker_start() {
	local dir=$1 reply word pid
	[ -n "$SCRIPTED_FORKER_PID" ] && return 0
	rm -f "$dir/control" "$dir/reply"
	mkfifo "$dir/control" "$dir/reply" || return 1
	exec {reply}<>"$dir/reply"
	"$PYTHON" "$ROOT/tests/servers/scripted.py" --fork-server "$dir/control" "$dir/reply" \
		</dev/null >>"$dir/stderr" 2>&1 3>&- {reply}<&- &
	SCRIPTED_FORKER_PID=$!
	read -r -t 20 -u "$reply" word pid || true
	exec {reply}<&-
	[ "${word-}" = forker ] && return 0
	echo "scripted.py --fork-server did not start:" >&2
	cat "$dir/stderr" >&2
	_scripted_forker_stop
	return 1
}

# _scripted_send DIR FIELD...: one line of tab-separated fields to the fork
# server (<>: the open never blocks, also if it has died)
_scripted_send() {
	local dir=$1 IFS=$'\t'
	shift
	printf '%s\n' "$*" 1<>"$dir/control"
}

scripted_stop() {
	local dir="$BATS_TEST_TMPDIR/scripted" reply word pid
	if [ -n "$SCRIPTED_PID" ]; then
		# the fork server reaps its child, then says "gone PID"
		exec {reply}<>"$dir/reply"
		if kill -TERM "$SCRIPTED_PID" 2>/dev/null; then
			while read -r -t 20 -u "$reply" word pid; do
				[ "$word $pid" = "gone $SCRIPTED_PID" ] && break
			done || kill -KILL "$SCRIPTED_PID" 2>/dev/null
		fi
		exec {reply}<&-
	fi
	SCRIPTED_PID=
}

# the fork server and any child it still has (teardown)
_scripted_forker_stop() {
	[ -n "$SCRIPTED_FORKER_PID" ] && _stop_pid "$SCRIPTED_FORKER_PID"
	SCRIPTED_FORKER_PID=
}

# A fresh server on the same port: empty log, {{ID}} and connection ids
# numbered from 1 again (so both halves of run_both see the same bytes).
scripted_restart() {
	scripted_stop
	SCRIPTED_TLS="$SCRIPTED_TLS_ON" scripted_start "$SCRIPTED_CASE" "$SCRIPTED_PORT"
}

scripted_log() { cat "$SCRIPTED_LOG"; }
scripted_conns() { _distinct_first_fields "$SCRIPTED_LOG"; }
scripted_requests() { _count_lines "$SCRIPTED_LOG"; echo "$REPLY"; }

# The counting behind *_conns and *_requests.  run_both counts twice per
# half, so without a fork where it can: every fork of the bats shell costs
# a few ms of CPU (its page tables, its DEBUG trap).
# _count_lines FILE: REPLY = its number of lines (mapfile, a builtin; both
# servers write a log line with one write(), so none is ever seen partial)
_count_lines() {
	local -a lines
	mapfile -t lines <"$1"
	REPLY=${#lines[@]}
}
# _distinct_first_fields FILE: the number of distinct first fields (one awk)
_distinct_first_fields() { awk '!seen[$1]++ { n++ } END { print n + 0 }' "$1"; }

# ------------------------------------------------------------ echo

# tests/servers/echo_server.py: answers every request with its own target
# and logs "<connection id> <target>" (the process-shape matrix, and tests
# that must see whose request a response answers).  echo_start [NAME]: a
# second one with another NAME runs beside the first (ECHO_PORT_NAME,
# ECHO_LOG_NAME); the first is the current server.
ECHO_PIDS=()
ECHO_PORT=
ECHO_LOG=

echo_start() {
	local name="${1:-echo}" dir
	dir="$BATS_TEST_TMPDIR/$name"
	mkdir -p "$dir"
	: >"$dir/log"
	"$PYTHON" "$ROOT/tests/servers/echo_server.py" "$dir/port" "$dir/log" 2>"$dir/stderr" &
	ECHO_PIDS+=($!)
	wait_until test -s "$dir/port" || {
		cat "$dir/stderr" >&2
		return 1
	}
	local port
	read -r port <"$dir/port"
	if [ "$name" = echo ]; then
		ECHO_PORT=$port
		ECHO_LOG="$dir/log"
		SERVER_KIND=echo
		SERVER_PORT=$port
	else
		printf -v "ECHO_PORT_$name" %s "$port"
		printf -v "ECHO_LOG_$name" %s "$dir/log"
	fi
}

echo_stop() {
	local p
	for p in "${ECHO_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	ECHO_PIDS=()
}

echo_log() { cat "$ECHO_LOG"; }
echo_conns() { _distinct_first_fields "$ECHO_LOG"; }
echo_requests() { _count_lines "$ECHO_LOG"; echo "$REPLY"; }
echo_reset() { : >"$ECHO_LOG"; }

# ------------------------------------------------- the current server

server_conns() { "${SERVER_KIND}_conns"; }
server_requests() { "${SERVER_KIND}_requests"; }
# _server_log_path: REPLY = the current server's log
_server_log_path() {
	case "$SERVER_KIND" in
	nginx) REPLY="$NGINX_DIR/access.log" ;;
	scripted) REPLY="$SCRIPTED_LOG" ;;
	echo) REPLY="$ECHO_LOG" ;;
	esac
}
# _server_counts: REPLY_REQS and REPLY_CONNS, as $(server_requests) and
# $(server_conns) would print them, with one fork (the awk) instead of six
_server_counts() {
	_server_log_path
	local log=$REPLY
	_count_lines "$log"
	REPLY_REQS=$REPLY
	_distinct_first_fields "$log" >"$BATS_TEST_TMPDIR/conns.count"
	read -r REPLY_CONNS <"$BATS_TEST_TMPDIR/conns.count"
}
server_log() { "${SERVER_KIND}_log"; }
server_reset() {
	case "$SERVER_KIND" in
	nginx) nginx_reset ;;
	scripted) scripted_restart ;;
	echo) echo_reset ;;
	esac
}

_has_requests() {
	_server_log_path
	_count_lines "$REPLY"
	[ "$REPLY" -ge "$1" ]
}

# server_wait_requests N: nginx logs a request just after sending the
# response, so a client can exit before its last request is in the log.
server_wait_requests() { wait_until _has_requests "$1" || true; }

# ------------------------------------------------------------ the test's own servers

# own_server CMD...: a server of the test's, CMD in the background (it
# writes its port to $BATS_TEST_TMPDIR/port, and a line per request to
# $BATS_TEST_TMPDIR/own.log, OWN_LOG, emptied first): OWN_PID, SERVER_PORT.
own_server() {
	OWN_LOG="$BATS_TEST_TMPDIR/own.log"
	: >"$OWN_LOG"
	rm -f "$BATS_TEST_TMPDIR/port"
	"$@" 3>&- &
	OWN_PID=$!
	wait_until test -s "$BATS_TEST_TMPDIR/port"
	read -r SERVER_PORT <"$BATS_TEST_TMPDIR/port"
}

# own_server_stop: the test's own server (own_server, cue_server_start)
# stopped, if one runs (servers_stop does it too)
own_server_stop() {
	[ -z "${OWN_PID:-}" ] || _stop_pid "$OWN_PID"
	OWN_PID=
}

# cue_server_start NAME SCRIPT [ARG...]: a fresh tests/servers/SCRIPT (the
# test's own server before it stopped), started as SCRIPT PORTFILE DIR LOG
# ARG... with DIR=$BATS_TEST_TMPDIR/NAME: OWN_DIR (its cue and done fifos),
# OWN_LOG (a line per request, and "... closed" per kept connection it
# closed), OWN_PID, SERVER_PORT.
cue_server_start() {
	local name=$1 script=$2
	shift 2
	own_server_stop
	OWN_DIR="$BATS_TEST_TMPDIR/$name"
	mkdir -p "$OWN_DIR"
	rm -f "$OWN_DIR/port"
	OWN_LOG="$OWN_DIR/log"
	: >"$OWN_LOG"
	"$PYTHON" "$ROOT/tests/servers/$script" "$OWN_DIR/port" "$OWN_DIR" "$OWN_LOG" "$@" \
		</dev/null >/dev/null 2>"$OWN_DIR/err" 3>&- &
	OWN_PID=$!
	wait_until test -s "$OWN_DIR/port"
	read -r SERVER_PORT <"$OWN_DIR/port"
}

# cue_compare START CMD [ARG...]: a client alone, then with the library
# (PRELOAD; VAR=VALUE words in the array CUE_SHIM_ENV go to its run_shim
# only), each against a fresh server: `START ARG...` starts it
# (cue_server_start), then `CMD ARG...` sets CUE_CMD to the client's command
# line for it.  Both exit 0 with the same output, and the server executed
# the same requests (its log but the "closed" lines, the connection ids
# cut).  What the client printed and the log are shown on a failure.
CUE_SHIM_ENV=()
cue_compare() {
	local start=$1 cmd=$2
	shift 2
	"$start" "$@"
	"$cmd" "$@"
	run_plain "${CUE_CMD[@]}"
	grep -v ' closed$' "$OWN_LOG" | cut -d' ' -f2- >"$BATS_TEST_TMPDIR/plain.reqs" || true
	"$start" "$@"
	"$cmd" "$@"
	run_shim "${CUE_SHIM_ENV[@]}" "${CUE_CMD[@]}"
	grep -v ' closed$' "$OWN_LOG" | cut -d' ' -f2- >"$BATS_TEST_TMPDIR/shim.reqs" || true
	echo "${PRELOAD##*/} ${CUE_SHIM_ENV[*]} $*: $SHIM_STATS"
	cat "$BATS_TEST_TMPDIR/plain.out" "$BATS_TEST_TMPDIR/shim.out" "$OWN_LOG"
	head -n 5 "$BATS_TEST_TMPDIR/shim.err"
	assert_both_ok
	assert_same_output
	run cmp "$BATS_TEST_TMPDIR/plain.reqs" "$BATS_TEST_TMPDIR/shim.reqs"
	assert_success
}

# assert_kept_closed [WHAT]: the cue server closed a kept connection of the
# library's (the library did meet the server's close)
assert_kept_closed() {
	[ "$(count_matches ' closed$' "$OWN_LOG")" -ge 1 ] || fail "${1:+$1: }no kept connection was closed"
}

# ------------------------------------------------------------ running

# run_plain [VAR=VALUE...] CMD...: run CMD without the shim.
#   stdout -> $BATS_TEST_TMPDIR/plain.out, stderr -> plain.err,
#   exit status -> PLAIN_STATUS.
run_plain() {
	PLAIN_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env -u LD_PRELOAD "$@" \
		>"$BATS_TEST_TMPDIR/plain.out" 2>"$BATS_TEST_TMPDIR/plain.err" </dev/null ||
		PLAIN_STATUS=$?
}

# run_shim [VAR=VALUE...] CMD...: run CMD with the shim preloaded,
# KEEPALIVE_PORTS=$SERVER_PORT and KEEPALIVE_STATS=1 (VAR=VALUE arguments
# come later and override these).  Only CMD is preloaded, not timeout(1).
#   stdout -> shim.out, stderr -> shim.err, status -> SHIM_STATUS,
#   the "libkeepalive: ..." stats line(s) -> SHIM_STATS.
run_shim() {
	SHIM_STATUS=0
	timeout "$((CLIENT_TIMEOUT * SLOW))" env LD_PRELOAD="$PRELOAD" KEEPALIVE_PORTS="$SERVER_PORT" \
		KEEPALIVE_STATS=1 "$@" \
		>"$BATS_TEST_TMPDIR/shim.out" 2>"$BATS_TEST_TMPDIR/shim.err" </dev/null ||
		SHIM_STATUS=$?
	# (into a file and read back: $(grep) would fork the bats shell too)
	grep '^libkeepalive: ' "$BATS_TEST_TMPDIR/shim.err" >"$BATS_TEST_TMPDIR/shim.stats" || true
	SHIM_STATS=
	IFS= read -r -d '' SHIM_STATS <"$BATS_TEST_TMPDIR/shim.stats" || true
	SHIM_STATS=${SHIM_STATS%$'\n'}
}

# run_both N [VAR=VALUE...] CMD...: CMD without the shim, then with it; the
# server is reset before each half.  N is how many requests CMD makes (the
# server log is awaited up to N lines after each half).  Sets PLAIN_STATUS,
# PLAIN_CONNS, PLAIN_REQS, SHIM_STATUS, SHIM_CONNS, SHIM_REQS, SHIM_STATS.
run_both() {
	local n="$1"
	shift
	server_reset
	run_plain "$@"
	[ "$PLAIN_STATUS" -eq 0 ] && server_wait_requests "$n"
	_server_counts
	PLAIN_CONNS=$REPLY_CONNS
	PLAIN_REQS=$REPLY_REQS
	# what nginx saw without the shim, for tests that compare it
	[ "$SERVER_KIND" != nginx ] || cp "$NGINX_DIR/access.log" "$BATS_TEST_TMPDIR/plain.log"
	server_reset
	run_shim "$@"
	[ "$SHIM_STATUS" -eq 0 ] && server_wait_requests "$n"
	_server_counts
	SHIM_CONNS=$REPLY_CONNS
	SHIM_REQS=$REPLY_REQS
	# shown by bats only when the test fails
	echo "plain: status=$PLAIN_STATUS requests=$PLAIN_REQS conns=$PLAIN_CONNS"
	echo "shim:  status=$SHIM_STATUS requests=$SHIM_REQS conns=$SHIM_CONNS"
	echo "shim stderr (first lines):"
	local -a first
	mapfile -t -n 5 first <"$BATS_TEST_TMPDIR/shim.err"
	[ "${#first[@]}" -eq 0 ] || printf '%s\n' "${first[@]}"
	# a client that failed: the lines of its output that say where
	if [ "$SHIM_STATUS" -ne "$PLAIN_STATUS" ]; then
		echo "shim stdout, its ERROR lines:"
		grep -m 5 -i "error" "$BATS_TEST_TMPDIR/shim.out" || true
	fi
}

# tls_case CLIENT N SCENARIO [ARG...]: tests/clients/CLIENT SCENARIO
# against the TLS nginx of the test's setup ($TLS its test CA), without and
# with the library (run_both N): the same status and output; then `run cat`
# of what the client printed with the library, for the test's own asserts
tls_case() {
	run_both "$2" "$CLIENTS/$1" "$3" "$SERVER_PORT" "$TLS" "${@:4}"
	echo "$SHIM_STATS"
	assert_equal "shim status $SHIM_STATUS" "shim status $PLAIN_STATUS"
	assert_same_output
	run cat "$BATS_TEST_TMPDIR/shim.out"
}


# ------------------------------------------------------------ assertions

# Both halves exited 0 (124 = killed by timeout: a hang).
assert_both_ok() {
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
}

# Strip what legitimately differs once the shim turns "Connection: close"
# into keep-alive, and the clock: Connection, Keep-Alive and Date lines.
_strip_volatile_headers() {
	sed -E '/^(Connection|Keep-Alive|Date):/Id' "$1"
}

# assert_same_output [--headers|--close-line]: shim.out byte-identical to
# plain.out; with --headers (clients that print the raw response) after
# dropping the Connection/Keep-Alive/Date lines from both; with
# --close-line after dropping only lines that are exactly
# "Connection: close\r" from both (a server that says nothing of closing:
# the program that asked to close reads that line with the shim,
# docs/replay.md "A closing answer").
assert_same_output() {
	local a="$BATS_TEST_TMPDIR/plain.out" b="$BATS_TEST_TMPDIR/shim.out"
	if [ "${1-}" = --headers ]; then
		_strip_volatile_headers "$a" >"$a.cmp"
		_strip_volatile_headers "$b" >"$b.cmp"
		a="$a.cmp" b="$b.cmp"
	elif [ "${1-}" = --close-line ]; then
		grep -v -a $'^Connection: close\r$' "$a" >"$a.cmp" || true
		grep -v -a $'^Connection: close\r$' "$b" >"$b.cmp" || true
		a="$a.cmp" b="$b.cmp"
	fi
	if ! cmp -s "$a" "$b"; then
		echo "plain: $(wc -c <"$a") bytes, shim: $(wc -c <"$b") bytes; diff (first lines):"
		diff -a "$a" "$b" | head -n 30
		fail "output with the shim differs from the output without it"
	fi
}

# assert_plain_output_is FILE N: plain.out is FILE's content N times over
# (proves the no-shim half tested what we think it did).
# (one cat of FILE named N times, not N cats: N is 200 in core.bats, and a
# fork of the bats shell costs a few ms)
assert_plain_output_is() {
	local names
	printf -v names "%$2s" ''
	names=${names// /"$1"$'\n'}
	local IFS=$'\n' -
	set -f
	# shellcheck disable=SC2086 # split on newlines only, no globbing
	cat /dev/null $names >"$BATS_TEST_TMPDIR/expected.out"
	cmp -s "$BATS_TEST_TMPDIR/expected.out" "$BATS_TEST_TMPDIR/plain.out" ||
		fail "plain output is not $1 x $2 ($(wc -c <"$BATS_TEST_TMPDIR/plain.out") bytes)"
}

# curl hangs at start-up (setlocale lock) whenever libasan is preloaded:
# the ASan run leaves curl out
curl_ok() { [ -z "${KEEPALIVE_ASAN:-}" ]; }

# count_matches REGEX FILE: number of lines matching (grep -c without its
# exit status)
count_matches() { grep -c -a -E "$1" "$2" || true; }

# stat_value NAME: NAME=<n> from the shim's stats line
# (a bash regex, not sed | head: the first line that has NAME, which every
# stats line has once)
# ends_logged N: the own server's log has N connection ends (tests/servers/
# tls_close.py with TLS_CLOSE_STRICT=1: its threads log each as they read
# it, after the client is gone), or 10 s went by
ends_logged() {
	local i
	for i in $(seq 1 100); do
		[ "$(grep -c ' end ' "$OWN_LOG")" -ge "$1" ] && return 0
		sleep 0.1
	done
}

stat_value() {
	local re="[ :]$1=([0-9]+)"
	[[ $SHIM_STATS =~ $re ]] && echo "${BASH_REMATCH[1]}"
	return 0
}
