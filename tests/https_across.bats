#!/usr/bin/env bats
# Whole TLS connections across processes, the integration
# (docs/tls-across.md "The integration"), under KEEPALIVE_TLS_ACROSS=1:
# what is built so far is the capture of a followed connection's state at
# its handshake and its export at park; each test compares a real client's
# output with and without the library against nginx (TLS 1.3 and 1.2).

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

N=4

# exported VERSION: the debug lines that say a parked connection's state
# made a whole export message (tls_capture.c), of TLS version VERSION
exported() { grep -c "TLS connection exportable: .* version $1," "$BATS_TEST_TMPDIR/shim.err" || true; }

@test "python urllib, KEEPALIVE_TLS_ACROSS=1: each parked TLS 1.3 connection's state exports whole (secrets from our keylog callback, records counted), same output" {
	use_tls 13
	run_both $N KEEPALIVE_TLS_ACROSS=1 KEEPALIVE_LOG=debug \
		"$PYTHON" "$PRODUCT_CLIENTS/urllib_get.py" 127.0.0.1 "$SERVER_PORT" /f $N "$TLS/ca.pem"
	assert_both_ok
	assert_plain_output_is "$NGINX_DIR/www/f" $N
	assert_same_output
	grep 'exportable' "$BATS_TEST_TMPDIR/shim.err" || true
	assert_equal "not exportable $(grep -c 'not exportable' "$BATS_TEST_TMPDIR/shim.err" || true)" "not exportable 0"
	[ "$(exported 0304)" -ge 1 ]
}
