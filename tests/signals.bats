#!/usr/bin/env bats
# Never crash the host (docs/binding.md): every wrapped function POSIX
# lists as async-signal-safe called for the first time from a signal
# handler that interrupted the program's own dlsym(), malloc() or a
# connect() inside our pool's lookup, run many
# times: no abort, no deadlock, the same output as without the library.

load helpers

setup_file() { suite_setup; }

# sig_runs MODE N: N runs of sig_first MODE, each under timeout; prints
# the count of runs that did not print "ok CALLS" and exit 0
sig_runs() {
	local mode=$1 n=$2 bad=0 i out
	shift 2
	for ((i = 1; i <= n; i++)); do
		out=$(timeout 5 "$@" "$CLIENTS/sig_first" "$mode" "$i" 2>/dev/null) || { bad=$((bad + 1)); continue; }
		[ "$out" = "ok 41" ] || bad=$((bad + 1))
	done
	echo "$bad"
}

@test "signal handler makes the first call of every async-signal-safe wrapper while the program is in dlsym: 60 runs, no abort, no hang" {
	assert_equal "plain failures $(sig_runs dlsym 60 env)" "plain failures 0"
	assert_equal "shim failures $(sig_runs dlsym 60 env LD_PRELOAD="$PRELOAD")" "shim failures 0"
}

@test "signal handler makes the first call of every async-signal-safe wrapper while the program is in malloc: 30 runs, no abort, no hang" {
	assert_equal "plain failures $(sig_runs malloc 30 env)" "plain failures 0"
	assert_equal "shim failures $(sig_runs malloc 30 env LD_PRELOAD="$PRELOAD")" "shim failures 0"
}

@test "signal handler makes the first call of every async-signal-safe wrapper while the program is in our connect(): 30 runs, no abort, no hang" {
	assert_equal "plain failures $(sig_runs connect 30 env)" "plain failures 0"
	assert_equal "shim failures $(sig_runs connect 30 env KEEPALIVE_PORTS=1 LD_PRELOAD="$PRELOAD")" "shim failures 0"
}
