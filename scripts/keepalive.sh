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
# the helpers this part runs (env, mktemp, readlink, sed) are found also
# when the caller's PATH lacks them (PATH=/opt/app/bin, a sandbox): the
# standard directories after the caller's.  The command is looked up in
# the caller's PATH, restored before the exec (run_exec)
caller_path=${PATH-} caller_path_set=${PATH+1}
PATH=${PATH:+$PATH:}/usr/bin:/bin
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
# 1|on|yes|true, as the library reads a switch (the settings' check below
# takes any other value of the library's out)
is_on() { case $1 in 1 | [oO][nN] | [yY][eE][sS] | [tT][rR][uU][eE]) return 0 ;; esac; return 1; }
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
if is_on "${KEEPALIVE_AUDIT:-0}"; then
	audit="$(dirname "$lib")/libkeepalive-audit.so"
	if [ ! -f "$audit" ]; then
		echo "keepalive: $audit not found (run make)" >&2
		exit 127
	fi
	audit="$audit${LD_AUDIT:+:$LD_AUDIT}"
else
	audit=
fi
# the entry point's copy of the caller's environment (KEEPALIVE_ENV_FD) is
# no concern of the helpers that outlive us: a detached broker and the
# stats watcher close every fd from 3 up but their own.  (Closing it here
# by a redirection named its number, which dash reads only for 0-9: a
# caller with fds 3-9 open got the broker's usage on stderr and no broker.)
broker= runner=
if [ -x "$here/$helperdir/keepalive-broker" ]; then
	broker=$(realpath_of "$here/$helperdir/keepalive-broker")
	# the last step, and the watcher (beside the broker)
	[ ! -x "${broker%/*}/keepalive-run" ] || runner=${broker%/*}/keepalive-run
fi
# once: `keepalive keepalive CMD` (a script under the wrapper that runs
# keepalive again) gives CMD the same LD_PRELOAD as one would
case " ${LD_PRELOAD:-} " in
*[[:space:]:]"$lib"[[:space:]:]*) preload=$LD_PRELOAD ;;
*) preload="$lib${LD_PRELOAD:+ $LD_PRELOAD}" ;;
esac
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
		env -u LD_PRELOAD "$broker" --daemon --socket "$sock" </dev/null >/dev/null
		exit $? ;;
	--status) exec "$broker" --status "$sock" ;;
	--stop) exec "$broker" --stop "$sock" ;;
	esac ;;
esac

# exec CMD preloaded, with the caller's environment (keepalive-run --exec;
# a command that cannot run is said there, as env(1) says it, naming this
# program); without keepalive-run, from this shell's
run_exec() {
	if [ -n "$caller_path_set" ]; then PATH=$caller_path; else unset PATH; fi
	if [ -n "$runner" ]; then
		exec "$runner" --exec --preload "$preload" --audit "$audit" -- "$@"
	fi
	[ -z "$audit" ] || export LD_AUDIT="$audit"
	LD_PRELOAD="$preload" exec "$@"
}

# Settings checked once for the whole command tree (docs/wrapper.md): the
# library itself reads them, in one run of /bin/true, and says what it
# ignores (parsed as every process would parse them); each setting said is
# then taken out of the command's environment (its default is what the
# library used anyway), so that no process under it says it again.  A bad
# KEEPALIVE_PORTS pools nothing, never more than asked: KEEPALIVE_DISABLE=1.
checked=
for n in LOG_FILE LOG DISABLE STATS STATS_FILE OBSERVE PORTS BROKER BROKER_TIMEOUT_MS \
	IDLE_MS QUIET_MS REPLAY_MAX METHODS MAX_IDLE_PER_HOST MAX_IDLE; do
	eval "[ -z \"\${KEEPALIVE_$n+x}\" ]" || { checked=1; break; }
done
if [ -n "$checked" ]; then
	said=$(KEEPALIVE_STATS_FILE= LD_PRELOAD="$preload" /bin/true 2>&1 >/dev/null </dev/null) || :
	while IFS= read -r line; do
		case $line in "libkeepalive: ignoring KEEPALIVE_"*=*) ;; *) continue ;; esac
		name=${line#libkeepalive: ignoring }
		name=${name%%=*}
		case $name in *[!A-Z_]*) continue ;; esac
		echo "$line" >&2
		case $name in
		KEEPALIVE_PORTS) unset KEEPALIVE_PORTS; KEEPALIVE_DISABLE=1; export KEEPALIVE_DISABLE ;;
		KEEPALIVE_DISABLE) KEEPALIVE_DISABLE=1 ;;
		KEEPALIVE_BROKER) KEEPALIVE_BROKER=0 ;;
		*) unset "$name" ;;
		esac
	done <<EOF
$said
EOF
fi
# KEEPALIVE_STATS=1: one line for the whole command, summed over its
# processes (each appends its own to KEEPALIVE_STATS_FILE; one that did
# nothing, a shell say, adds nothing)
stats=
if is_on "${KEEPALIVE_STATS:-0}" && [ -z "${KEEPALIVE_STATS_FILE:-}" ]; then
	stats=1
fi
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
	eval "$(env -u LD_PRELOAD "$broker" --private "$base" --watch $$ </dev/null)"
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
