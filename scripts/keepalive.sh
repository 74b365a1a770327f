#!/bin/sh
# keepalive.sh - the part of the keepalive wrapper that decides, run by the
# entry point (scripts/keepalive-main.c: `keepalive`, which keeps the
# caller's environment for the command in KEEPALIVE_ENV_FD).
# keepalive [--] CMD [ARGS...] - run CMD with libkeepalive preloaded, and a
# broker (keepalive-broker, the per-user pool process) for its processes to
# share idle connections: a shell loop of curls then reuses one connection.
#   - KEEPALIVE_BROKER set: used as it is (0: no broker);
#   - else a broker answering at the per-user default path is used;
#   - else one is started for CMD's lifetime in a private directory.
# Invisible (docs/wrapper.md): it always execs CMD, through keepalive-run
# --exec (the caller's environment back, plus the library's variables);
# what must outlive it (a private broker, the summed KEEPALIVE_STATS line)
# runs in a session of its own, watching CMD's pid (this one).
# keepalive --daemon: start the long-running per-user broker (it exits after
#   KEEPALIVE_BROKER_EXIT_MS idle, default 5 min); KEEPALIVE_BROKER=1 then
#   points plain LD_PRELOAD processes at it.  --status, --stop: ask it.
# keepalive --version: the version of the library it would preload.
# Finds the library and the helpers through the two directories below,
# taken from this script's own: the build tree's here, the installed ones
# in a copy that make install wrote (a package, a PREFIX, a DESTDIR all move).
set -e
libdir=../build
helperdir=../build
me=keepalive
usage() {
	echo "usage: keepalive [--] CMD [ARGS...]        run CMD with HTTP keep-alive (settings: KEEPALIVE_* variables, man libkeepalive)"
	echo "       keepalive --compare [options] CMD    CMD without and with it, side by side (--compare --help)"
	echo "       keepalive --daemon | --status | --stop | --version | --help"
}
die_usage() {
	echo "$me: $1" >&2
	usage >&2
	exit 2
}
# physical paths without an exec where no symlink is involved (each exec is
# a process start: scripts/bench-broker counts them)
realpath_of() {
	case $1 in */*) ;; *) set -- "./$1" ;; esac
	if [ -L "$1" ]; then readlink -f "$1"; else echo "$(cd -P -- "${1%/*}" && pwd -P)/${1##*/}"; fi
}
self=$(realpath_of "$0")
here=${self%/*}
# options end at the first word that is not one, or after --
action=
case ${1-} in
-h | --help) usage; exit 0 ;;
--daemon | --stop | --status | --version)
	action=$1
	[ $# -eq 1 ] || die_usage "$1 takes no arguments" ;;
--) shift ;;
-*) die_usage "unknown option: $1" ;;
esac
[ -n "$action" ] || [ $# -gt 0 ] || die_usage "no command given"
lib=
for cand in "$here/$libdir/libkeepalive.so"; do
	if [ -f "$cand" ]; then
		lib=$(realpath_of "$cand")
		break
	fi
done
if [ -z "$lib" ]; then
	echo "keepalive: libkeepalive.so not found (run make, or make install)" >&2
	exit 127
fi
# KEEPALIVE_AUDIT=1: also the rtld-audit module beside the library, so
# that libraries opened with RTLD_DEEPBIND (PHP's curl) reach it too
if [ "${KEEPALIVE_AUDIT:-0}" = 1 ]; then
	audit="$(dirname "$lib")/libkeepalive-audit.so"
	if [ ! -f "$audit" ]; then
		echo "keepalive: $audit not found (run make)" >&2
		exit 127
	fi
	audit="$audit${LD_AUDIT:+:$LD_AUDIT}"
else
	audit=
fi
# the entry point's copy of the caller's environment: not for the helpers
# that outlive us (the broker)
nofd=
case ${KEEPALIVE_ENV_FD:-x} in *[!0-9]*) ;; *) nofd="$KEEPALIVE_ENV_FD>&-" ;; esac
broker= runner=
if [ -x "$here/$helperdir/keepalive-broker" ]; then
	broker=$(realpath_of "$here/$helperdir/keepalive-broker")
	# the last step, and the watcher (beside the broker)
	[ ! -x "${broker%/*}/keepalive-run" ] || runner=${broker%/*}/keepalive-run
fi
preload="$lib${LD_PRELOAD:+ $LD_PRELOAD}"
# the whole LD_PRELOAD value, for a sanitizer build whose runtime must come
# first (the tests' KEEPALIVE_PRELOAD)
[ -z "${KEEPALIVE_PRELOAD:-}" ] || preload=$KEEPALIVE_PRELOAD

# the version is the library's own (its KEEPALIVE_LOG=debug "loaded" line):
# one number, compiled in from debian/changelog, and proof that it loads
if [ "$action" = "--version" ]; then
	version=$(env -u KEEPALIVE_DISABLE -u KEEPALIVE_LOG_FILE KEEPALIVE_LOG=debug \
		LD_PRELOAD="$preload" true 2>&1 >/dev/null | sed -n 's/.* loaded version=\([^ ]*\)$/\1/p' | head -n 1)
	if [ -z "$version" ]; then
		echo "keepalive: $lib did not load (LD_PRELOAD=$preload true)" >&2
		exit 1
	fi
	echo "keepalive $version"
	echo "library: $lib"
	echo "broker: ${broker:-not found}"
	exit 0
fi

case "$action" in
--daemon | --stop | --status)
	[ -n "$broker" ] || { echo "keepalive: keepalive-broker not found (run make)" >&2; exit 127; }
	sock=$("$broker" --print-path)
	# the broker does the file work itself, through its directory's fd
	# once checked (ours, 0700, not a symlink, in a parent others cannot
	# rename it in): the shell never opens a file there by name
	case "$action" in
	--daemon)
		if "$broker" --check "$sock"; then
			echo "keepalive: a broker is already running at $sock" >&2
			exit 0
		fi
		eval 'env -u LD_PRELOAD "$broker" --daemon --socket "$sock" </dev/null >/dev/null '"$nofd"
		exit $? ;;
	--status) exec "$broker" --status "$sock" ;;
	--stop) exec "$broker" --stop "$sock" ;;
	esac ;;
esac

# exec CMD preloaded, with the caller's environment (keepalive-run --exec;
# a command that cannot run is said there, as env(1) says it, naming this
# program); without keepalive-run, from this shell's
run_exec() {
	if [ -n "$runner" ]; then
		exec "$runner" --exec --preload "$preload" --audit "$audit" -- "$@"
	fi
	[ -z "$audit" ] || export LD_AUDIT="$audit"
	LD_PRELOAD="$preload" exec "$@"
}

# A setting checked once for the whole command (docs/wrapper.md): a bad
# KEEPALIVE_PORTS is said here once, in the library's words, and never
# widens what is pooled: the processes under the wrapper get a library
# that pools nothing, quietly, instead of 2,000 warnings.
if [ -n "${KEEPALIVE_PORTS+set}" ]; then
	ports_ok=1
	[ -n "$KEEPALIVE_PORTS" ] || ports_ok=
	case $KEEPALIVE_PORTS in *,,* | ,*) ports_ok= ;; esac
	set -f
	IFS_=$IFS
	IFS=,
	for e in $KEEPALIVE_PORTS; do
		lo=${e%%-*} hi=${e#*-}
		case $lo$hi in '' | *[!0-9]*) ports_ok= ; continue ;; esac
		case $e in *-*-*) ports_ok= ; continue ;; esac
		[ ${#lo} -le 5 ] && [ ${#hi} -le 5 ] && [ "$lo" -ge 1 ] && [ "$lo" -le "$hi" ] &&
			[ "$hi" -le 65535 ] || ports_ok=
	done
	IFS=$IFS_
	set +f
	if [ -z "$ports_ok" ]; then
		echo "libkeepalive: ignoring KEEPALIVE_PORTS=$KEEPALIVE_PORTS (want e.g. 80,8080,9000-9010; pooling nothing)" >&2
		unset KEEPALIVE_PORTS
		KEEPALIVE_DISABLE=1
		export KEEPALIVE_DISABLE
	fi
fi

# KEEPALIVE_STATS=1: one line for the whole command, summed over its
# processes (each appends its own to KEEPALIVE_STATS_FILE; one that did
# nothing, a shell say, adds nothing)
stats=
case "${KEEPALIVE_STATS:-0}" in
0 | "") ;;
*) [ -n "${KEEPALIVE_STATS_FILE:-}" ] || stats=1 ;;
esac
# one exec tells the default path, whether a broker of ours answers and
# proves itself there, and a parent for a private directory where no other
# user can rename it (not writable by others unless sticky: a world-
# writable XDG_RUNTIME_DIR is passed over)
private= sock= running= base= dir= bpid=
if [ -n "$broker" ]; then
	eval "$("$broker" --plan)"
	if [ -z "${KEEPALIVE_BROKER+set}" ]; then
		if [ -n "$running" ]; then
			KEEPALIVE_BROKER=$sock
			export KEEPALIVE_BROKER
		else
			private=1
		fi
	fi
elif [ -d /tmp ]; then
	base=/tmp
fi
[ -n "$runner" ] || private= stats=
[ -n "$private$stats" ] || run_exec "$@"
if [ -z "$base" ]; then
	echo "$me: no safe directory for the command's files (XDG_RUNTIME_DIR, TMPDIR, /tmp)" >&2
	run_exec "$@"
fi

# This pid becomes CMD's (exec): what outlives the wrapper watches it, each
# in a session of its own (a signal to CMD's process group is not for it).
if [ -n "$private" ]; then
	# a broker for this command's lifetime, in a directory of its own
	# (made by it in $base); it removes that and goes when CMD does.  No
	# broker after all: the command runs as before (fail open)
	eval "$(eval 'env -u LD_PRELOAD "$broker" --private "$base" --watch $$ </dev/null '"$nofd")"
	if [ -n "$bpid" ]; then
		KEEPALIVE_BROKER=$dir/broker.sock KEEPALIVE_BROKER_PID=$bpid
		export KEEPALIVE_BROKER KEEPALIVE_BROKER_PID
	fi
fi
if [ -n "$stats" ]; then
	# each process appends its line; the watcher sums them to our stderr
	# when CMD ends (just after: a shell's prompt may come first) and
	# removes the directory.  No directory or no watcher: no summed line
	if sdir=$(mktemp -d "$base/keepalive.XXXXXX" 2>/dev/null) && : >"$sdir/stats" &&
		"$runner" --watch $$ --stats "$sdir/stats" --dir "$sdir" </dev/null >/dev/null; then
		KEEPALIVE_STATS_FILE=$sdir/stats
		export KEEPALIVE_STATS_FILE
	fi
fi
run_exec "$@"
