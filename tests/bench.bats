#!/usr/bin/env bats
# The bundled measurement (scripts/bench, scripts/bench-large) in a tiny
# configuration: it runs, finishes, prints its table, and the shim's column
# shows reuse.  No timing is asserted (shared, noisy machines).

load helpers

setup_file() { suite_setup; }

@test "scripts/bench: the table, one row per client, reuse in the conns column" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	run "$ROOT/scripts/bench" -n 20 -r 1 -c nethttp,nethttp_post,tcpsocket,c
	assert_success
	assert_line --regexp '^client +req/s off +req/s on +speedup +CPU us/req +syscalls/req +conns +TIME_WAIT +identical$'
	assert_line --regexp '^Net::HTTP.start per request +[0-9]+ +[0-9]+ +[0-9.]+x +[0-9]+/[0-9]+ +[0-9.]+/[0-9.]+ +20/1 +[0-9]+/[0-9]+ +yes$'
	# POSTs ride the pooled connection too
	assert_line --regexp '^Net::HTTP.post per request +[0-9]+ +[0-9]+ +[0-9.]+x .* 20/1 .* yes$'
	assert_line --regexp '^TCPSocket HTTP/1.0, read to EOF +[0-9]+ +[0-9]+ +[0-9.]+x .* 20/1 '
	assert_line --regexp '^C client, socket per request +[0-9]+ +[0-9]+ +[0-9.]+x .* 20/1 '
}

@test "scripts/bench --json: valid JSON with the same facts" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	run "$ROOT/scripts/bench" -n 10 -r 1 -c c --no-strace --json
	assert_success
	run "$PYTHON" -c 'import json, sys; d = json.loads(sys.stdin.read()); c = d["clients"][0]; print(d["requests"], c["client"], c["conns_off"], c["conns_on"], c["syscalls_per_req_on"], c["identical"])' <<<"$output"
	assert_output "10 c 10 1 None True"
}

@test "scripts/bench --tls 13 and --tls 12: HTTPS rows, same output; two TLS connections where a hand-out is allowed (python, TLS 1.3: the first teaches how the server ends)" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	for v in 13 12; do
		run "$ROOT/scripts/bench" --tls $v -n 10 -r 1 --no-strace -c nethttp,urllib,curl
		assert_success
		assert_line --regexp "HTTPS TLS 1\.${v#1}\$"
		# Ruby sets an info callback, curl keeps sessions: their own
		# handshakes; python allows renegotiation: its own over TLS 1.2
		# (docs/tls.md "Callbacks that watch", "Renegotiation"); over TLS
		# 1.3 its first close request is not rewritten, the end of that
		# connection teaches (docs/tls.md "Ragged closes"), then one
		# connection serves the other nine
		assert_line --regexp '^Net::HTTP.start per request +[0-9]+ +[0-9]+ +[0-9.]+x .* 10/10 .* yes$'
		assert_line --regexp "^Python urllib.urlopen +[0-9]+ +[0-9]+ +[0-9.]+x .* 10/$((v == 13 ? 2 : 10)) .* yes\$"
		assert_line --regexp '^curl, N URLs, Connection: close +[0-9]+ +[0-9]+ +[0-9.]+x .* 10/10 .* yes$'
	done
}

@test "scripts/bench-large (8 MiB): uploads and download arrive whole (SHA-1), with and without the shim" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	run "$ROOT/scripts/bench-large" -m 8 -r 1
	assert_success
	assert_line --regexp '^upload, sendfile .* yes$'
	assert_line --regexp '^upload, chunked .* yes$'
	assert_line --regexp '^download, curl \| sha1sum .* yes$'
}

@test "scripts/bench-broker: a loop of curls without and under keepalive, the whole tree's CPU and syscalls per process, one connection with" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	curl_ok || skip "curl cannot start with libasan preloaded"
	make -s -C "$ROOT" build/keepalive-broker >&2
	# the broker's answer waited for as long as a loaded machine needs
	# (its default 100 ms is a latency bound, not what the count tests)
	run env KEEPALIVE_BROKER_TIMEOUT_MS=10000 "$ROOT/scripts/bench-broker" -n 5 -r 1
	assert_success
	assert_line --regexp '^mode +ms/process +CPU ms/proc +CPU ratio +syscalls/proc +vs plain +conns$'
	assert_line --regexp '^plain +[0-9.]+ +[0-9.]+ +1\.000x +[0-9.]+ +\+0\.0 +5$'
	assert_line --regexp '^new +[0-9.]+ +[0-9.]+ +[0-9.]+x +[0-9.]+ +[-+][0-9.]+ +1$'
}

@test "scripts/bench-broker --tls 13 --across: a loop of curl https:// without and under keepalive, side by side; one server connection with" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	curl_ok || skip "curl cannot start with libasan preloaded"
	make -s -C "$ROOT" build/keepalive-broker >&2
	run env KEEPALIVE_BROKER_TIMEOUT_MS=10000 "$ROOT/scripts/bench-broker" -n 4 -r 1 --tls 13 --across --no-strace
	assert_success
	assert_line --partial 'HTTPS TLS 1.3, connections across processes'
	assert_line --regexp '^plain +[0-9.]+ +[0-9.]+ +1\.000x +- +- +4 +0$'
	assert_line --regexp '^new +[0-9.]+ +[0-9.]+ +[0-9.]+x +- +- +1 +0$'
}

@test "scripts/bench-split: a server answering in two writes, a loop of GETs without and with the library, the same output" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	run "$ROOT/scripts/bench-split" -n 20 -r 1
	assert_success
	assert_line --regexp '^mode +ms/request +ratio +same-output$'
	assert_line --regexp '^plain +[0-9.]+ +1\.000x +yes$'
	assert_line --regexp '^library +[0-9.]+ +[0-9.]+x +yes$'
}

@test "scripts/bench-split -w: a program writing each POST in two writes, a loop without and with the library, the same output" {
	[ -z "${KEEPALIVE_ASAN-}" ] || skip "measures the plain build"
	run "$ROOT/scripts/bench-split" -w -n 20 -r 1
	assert_success
	assert_line --regexp '^20 POSTs per loop'
	assert_line --regexp '^plain +[0-9.]+ +1\.000x +yes$'
	assert_line --regexp '^library +[0-9.]+ +[0-9.]+x +yes$'
}
