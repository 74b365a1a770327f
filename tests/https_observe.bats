#!/usr/bin/env bats
# HTTPS: what a program can observe of an SSL handed a pooled connection,
# or of the SSL whose connection was pooled, is what its own handshake
# would have shown; where the library cannot make it so, it declines
# (docs/tls.md "The first owner's SSL", "Callbacks that watch", "After the
# handshake").  tests/clients/tls_config.c against nginx, without and with
# the library: the same output.  (More observables are compared by the
# configuration-pair fuzzer, tests/https_pairs.bats.)

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

# config N SCENARIO [ARG]: tls_config without and with the library
config() { tls_case tls_config "$@"; }

@test "an SSL kept after its socket closed keeps its ex_data and context while another SSL makes a request; its connection is handed out once it is freed" {
	for v in 13 12; do
		use_tls $v
		config 3 kept_ssl
		assert_line "after 2: ex_data first SSL's data, context its own, verify mode 1"
		assert_line --partial "3 ok HTTP/1.1 200 OK reused=0 chain=2 verify=0"
		# the second request made its own connection; the third was
		# handed the first's
		assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
		assert_equal "connections $SHIM_CONNS" "connections 2"
	done
}

@test "a verify callback runs as often as in the program's own handshake: such a program is neither handed a connection nor offered a session" {
	for v in 13 12; do
		use_tls $v
		config 3 verify_cb
		assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
		assert_equal "resumed $(stat_value tls_resumed)" "resumed 0"
	done
}

@test "an SSL ex_data index with a free callback: the callback runs at each SSL_free with the SSL's data, as without the library (such a program's SSLs are not followed)" {
	for v in 13 12; do
		use_tls $v
		config 3 kept_ssl free
		assert_line "after 2: ex_data first SSL's data, context its own, verify mode 1"
		assert_line "ex_data freed: first SSL's data"
		assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
	done
}

@test "ex_data callbacks of a context's or a session's index run as without the library: at the program's own free, never on an object of ours (such a program is not followed)" {
	for v in 13 12; do
		use_tls $v
		for kind in ctx session; do
			# (config compares the whole output with the run without
			# the library: each callback's line where it ran)
			config 3 ctx_free "$kind"
			assert_line "freeing the first context"
			assert_line "freed"
		done
	done
}

@test "SSL_clear on an SSL kept after its socket closed, after another SSL's request: a new connection of its own, as without the library" {
	for v in 13 12; do
		use_tls $v
		config 3 kept_clear
		assert_line "SSL_clear: 1"
		assert_line --partial "3 ok HTTP/1.1 200 OK"
	done
}
