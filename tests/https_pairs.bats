#!/usr/bin/env bats
# The configuration-pair fuzzer (docs/tls.md "The fuzzer"): tls_pairs.c
# draws, from a fixed seed, pairs of random client configurations and a
# server for each (nginx TLS 1.3 and TLS 1.2 with an ECDSA certificate, a
# GnuTLS TLS 1.2 server without secure renegotiation, a GnuTLS server that
# requires a client certificate, a GnuTLS TLS 1.2 server that asks to
# renegotiate before each answer, a GnuTLS TLS 1.3 server that sends a
# session ticket before each answer), makes one request with each, and prints
# everything the program reads.  Without and with the library: the same.
# TLS_PAIRS (default 800) and TLS_PAIRS_SEED (default 2) choose the run;
# `make tls-pairs PAIRS=N SEED=S` runs more.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
	PIDS=()
}
teardown() {
	servers_stop
	local p
	for p in "${PIDS[@]}"; do _stop_pid "$p"; done
}

# gnutls NAME PRIORITY [CA]: a GnuTLS server (the environment of
# tests/clients/gnutls_server.c: GNUTLS_ENV); its port in PORT
gnutls() {
	local pf="$BATS_TEST_TMPDIR/$1.port"
	env ${GNUTLS_ENV:-} "$CLIENTS/gnutls_server" "$TLS/server.pem" "$TLS/server.key" "$2" "$pf" "$BATS_TEST_TMPDIR/$1.log" "${@:3}" 3>&- &
	PIDS+=($!)
	wait_until test -s "$pf"
	read -r PORT <"$pf"
}

@test "configuration pairs: every request reads the same with and without the library (${TLS_PAIRS:-800} pairs, seed ${TLS_PAIRS_SEED:-2})" {
	[ -x "$CLIENTS/gnutls_server" ] || skip "no GnuTLS server (libgnutls28-dev)"
	local ports=("$NGINX_TLS13_PORT" "$NGINX_TLS12_PORT")
	gnutls legacy "NORMAL:-VERS-TLS1.3:%DISABLE_SAFE_RENEGOTIATION"
	ports+=("$PORT")
	gnutls certreq NORMAL "$TLS/ca.pem"
	ports+=("$PORT")
	GNUTLS_ENV=KP_GNUTLS_REHANDSHAKE=1 gnutls reneg "NORMAL:-VERS-TLS1.3"
	ports+=("$PORT")
	GNUTLS_ENV=KP_GNUTLS_TICKET=1 gnutls ticket NORMAL
	ports+=("$PORT")
	local IFS=,
	SERVER_PORT="${ports[*]}"
	unset IFS
	CLIENT_TIMEOUT=${TLS_PAIRS_TIMEOUT:-600}
	run_plain "$CLIENTS/tls_pairs" "$TLS" "${TLS_PAIRS_SEED:-2}" "${TLS_PAIRS:-800}" "${ports[@]}"
	run_shim "$CLIENTS/tls_pairs" "$TLS" "${TLS_PAIRS_SEED:-2}" "${TLS_PAIRS:-800}" "${ports[@]}"
	echo "plain status $PLAIN_STATUS, shim status $SHIM_STATUS"
	echo "$SHIM_STATS"
	assert_equal "shim status $SHIM_STATUS" "shim status 0"
	assert_equal "plain status $PLAIN_STATUS" "plain status 0"
	assert_equal "$(wc -l <"$BATS_TEST_TMPDIR/plain.out")" "$((2 * ${TLS_PAIRS:-800}))"
	assert_same_output
	# the run handed out pooled connections, and declined others (seed 2
	# hands out 11 on a quiet machine and 9 under the suite's load: how
	# many stay parked long enough is the machine's timing)
	[ "$(stat_value tls_reused)" -ge 5 ] && [ "$(stat_value tls_declined)" -ge 10 ]
}
