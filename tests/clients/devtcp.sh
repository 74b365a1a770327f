#!/bin/bash
# devtcp.sh MODE PORT N - N requests for /f through bash's /dev/tcp, with
# bash's own builtins (tests/shell.bats).
#   builtins  exec 5<>/dev/tcp/...; the head written a line per printf or
#             echo (bash moves the socket onto fd 1 with dup2 for each, and
#             back); the response read with `while IFS= read -r` (fd 5
#             moved onto fd 0; bash reads a socket a byte per read()) and
#             printed line by line
#   builtins_u  as builtins, but the response read with `read -u 5`
#             (bash reads fd 5 itself: the socket never goes onto fd 0)
#   cat       exec 3<>/dev/tcp/...; one printf of the head; the response
#             read by cat, a child process (fork, exec) that inherits fd 3
#   mixed     N-1 requests as in builtins, then one as in cat
#   childend  exec 3<>/dev/tcp/...; printf of the head's first lines, the
#             rest of the head (its end) written by a child (printf in a
#             subshell: fork), the response read by cat (docs/hold.md "A
#             held head at a hand-off")
#   unread    as builtins, but fd 5 closed without reading the response
#   postsub   exec 3<>/dev/tcp/...; printf of a GET asking to close, then
#             a POST /pay written by a subshell (fork), the response's
#             status lines counted by grep (docs/hold.md "A child that
#             writes on an inherited connection")
#   postexec  as postsub, the POST written by `sh -c` (fork, exec)
set -e
mode=$1 port=$2 n=$3
builtins() {
	exec 5<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /f HTTP/1.0\r\n' >&5
	echo -ne 'Host: 127.0.0.1\r\n' >&5
	printf '\r\n' >&5
	while IFS= read -r line; do printf '%s\n' "$line"; done <&5
	exec 5<&-
}
builtins_u() {
	exec 5<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /f HTTP/1.0\r\n' >&5
	echo -ne 'Host: 127.0.0.1\r\n' >&5
	printf '\r\n' >&5
	while IFS= read -r -u 5 line; do printf '%s\n' "$line"; done
	exec 5<&-
}
unread() {
	exec 5<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /f HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&5
	exec 5<&-
}
with_cat() {
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /f HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	cat <&3
	exec 3<&-
}
childend() {
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\n' >&3
	(printf 'Connection: close\r\n\r\n' >&3)
	cat <&3
	exec 3<&-
}
POST='POST /pay HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc'
post() {
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
	if [ "$1" = sub ]; then
		(printf "$POST" >&3)
	else
		sh -c 'printf "$1" >&3' sh "$POST"
	fi
	echo "status lines: $(grep -c '^HTTP/1.1 ' <&3)"
	exec 3<&-
}
for ((i = 0; i < n; i++)); do
	case $mode in
	builtins) builtins ;;
	builtins_u) builtins_u ;;
	cat) with_cat ;;
	unread) unread ;;
	childend) childend ;;
	postsub) post sub ;;
	postexec) post exec ;;
	mixed) if ((i < n - 1)); then builtins; else with_cat; fi ;;
	*) echo "unknown mode $mode" >&2; exit 2 ;;
	esac
done
