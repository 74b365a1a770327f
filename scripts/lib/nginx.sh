# nginx.sh - a private nginx on loopback, for the tests (tests/helpers.bash)
# and the demo.  Bash; sourced.  Uses only its own folder.
#
#   nginx_local_start DIR   serve DIR/www (created by the caller) with
#                           nginx.conf.in on a free port of 127.0.0.1 and
#                           [::1]; sets NGINX_PORT and NGINX_PID.  nginx logs
#                           one line per request to DIR/access.log:
#                           "$connection $connection_requests $request_method $uri $status"
#   nginx_local_stop        stop it (SIGTERM, then SIGKILL)
#   free_port               a port free on 127.0.0.1 and [::1]
#
# With NGINX_TLS=1 the same site is also served over HTTPS on 127.0.0.1:
# TLS 1.3 on NGINX_TLS13_PORT, TLS 1.2 on NGINX_TLS12_PORT, with a test CA
# made in DIR/tls (scripts/lib/tls.sh: DIR/tls/ca.pem and the others).

NGINX=${NGINX:-/usr/sbin/nginx}
# (no dirname: the tests source this once per test)
NGINX_LIB_DIR=${BASH_SOURCE[0]%/*}
[ "$NGINX_LIB_DIR" != "${BASH_SOURCE[0]}" ] || NGINX_LIB_DIR=.
NGINX_LIB_DIR=$(cd "$NGINX_LIB_DIR" && pwd)
source "$NGINX_LIB_DIR/tls.sh"

# Below the kernel's ephemeral range (32768+), so the thousands of client
# sockets a run leaves in TIME_WAIT can never sit on it.  A port no TCP
# socket of this network namespace uses, at either end, in any state
# (/proc/net/tcp and tcp6): one grep, not a Python start-up (~30 ms of CPU;
# a test with NGINX_TLS=1 asks for three).  Taken meanwhile, nginx fails
# to listen and nginx_local_start tries another.
free_port() {
	local port hex i
	for ((i = 0; i < 200; i++)); do
		port=$((20000 + RANDOM % 12001))
		printf -v hex ':%04X ' "$port"
		if ! grep -qsF -e "$hex" /proc/net/tcp /proc/net/tcp6; then
			echo "$port"
			return 0
		fi
	done
	echo "no free port" >&2
	return 1
}

# retry CMD every 50 ms for at most 20 s (waits for a state, never a timing)
wait_until() {
	local i
	for ((i = 0; i < 400; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

_pid_gone() { ! kill -0 "$1" 2>/dev/null; }

# SIGTERM, wait for the exit, SIGKILL if it will not die
_stop_pid() {
	[ -n "$1" ] || return 0
	kill -TERM "$1" 2>/dev/null || return 0
	wait_until _pid_gone "$1" || kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null || true
}

_nginx_ready() { [ -s "$NGINX_DIR_RUN/nginx.pid" ] || _pid_gone "$NGINX_PID"; }

nginx_local_start() {
	local dir=$1 attempt
	NGINX_DIR_RUN=$dir
	# nginx workers run as nobody when started as root: every folder on
	# the way to the files must be readable by them (docs/design.md §8)
	chmod 0755 "$dir"
	chmod -R a+rX "$dir/www"
	[ -d "$dir/tmp" ] || mkdir -p "$dir/tmp"
	sed -e "s|@DIR@|$dir|g" "$NGINX_LIB_DIR/nginx-site.conf.in" >"$dir/site.conf"
	if [ "${NGINX_TLS:-0}" = 1 ] && [ ! -s "$dir/tls/server.pem" ]; then
		tls_make "$dir/tls" || { echo "could not make the test CA" >&2; return 1; }
	fi
	for attempt in 1 2 3 4 5; do
		NGINX_PORT="$(free_port)" || return 1
		local tls=
		if [ "${NGINX_TLS:-0}" = 1 ]; then
			NGINX_TLS13_PORT="$(free_port)" && NGINX_TLS12_PORT="$(free_port)" || return 1
			# NGINX_TLS_SESSION_TIMEOUT=S: sessions (and the tickets'
			# lifetime hint) last S seconds
			tls=$(sed -e "s|@DIR@|$dir|g" -e "s|@TLS13_PORT@|$NGINX_TLS13_PORT|g" \
				-e "s|@TLS12_PORT@|$NGINX_TLS12_PORT|g" \
				-e "${NGINX_TLS_SESSION_TIMEOUT:+s|^\( *\)ssl_protocols \(.*\)|&\n\1ssl_session_timeout ${NGINX_TLS_SESSION_TIMEOUT}s;|}" \
				"$NGINX_LIB_DIR/nginx-tls.conf.in")
		fi
		local conf
		conf=$(sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$NGINX_PORT|g" "$NGINX_LIB_DIR/nginx.conf.in")
		printf '%s\n' "${conf//@TLS@/$tls}" >"$dir/nginx.conf"
		rm -f "$dir/nginx.pid"
		# 3>&-: bats waits for fd 3 to close; a server holding it hangs bats
		"$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
			</dev/null >>"$dir/stderr" 2>&1 3>&- &
		NGINX_PID=$!
		wait_until _nginx_ready || true
		# the pid file is written after the listening sockets are open
		if [ -s "$dir/nginx.pid" ] && ! _pid_gone "$NGINX_PID"; then
			return 0
		fi
		_stop_pid "$NGINX_PID" # lost a race for the port: try another
	done
	echo "nginx did not start:" >&2
	cat "$dir/stderr" "$dir/error.log" >&2 2>/dev/null
	return 1
}

nginx_local_stop() {
	[ -n "${NGINX_PID:-}" ] && _stop_pid "$NGINX_PID"
	NGINX_PID=
}
