#!/usr/bin/env bats
# HTTPS: what a program reads of an SSL handed a pooled connection after
# its handshake, what runs in its verification, and process-wide crypto
# state changed through the setters of the 2026-12-05 leftovers
# (docs/tls.md "Sessions", "Callbacks that watch", "Process-wide state").
# tests/clients/tls_after.c against nginx, without and with the library:
# the same output.

load helpers

setup_file() { suite_setup; }
setup() {
	NGINX_TLS=1 nginx_start
	TLS="$NGINX_DIR/tls"
}
teardown() { servers_stop; }

# after N SCENARIO [ARG]: tls_after without and with the library
after() { tls_case tls_after "$@"; }

@test "the session a handed-out SSL, or one that resumed a session of ours, reads right after its TLS 1.3 handshake has no id and is not resumable, as its own full handshake's before the server's tickets; after the answer, a ticket's" {
	use_tls 13
	after 3 session_early
	for i in 2 3; do
		assert_line "$i session after the handshake: one, id 0, resumable 0, ticket 0, the same by get1 yes"
		assert_line "$i session after the answer: one, id 32, resumable 1, ticket 1, the same by get1 yes"
	done
	# request 2 resumed a session of ours, request 3 was handed a connection
	assert_equal "resumed $(stat_value tls_resumed)" "resumed 1"
	assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
	use_tls 12
	after 3 session_early
	assert_line --partial "3 ok HTTP/1.1 200 OK"
	assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
}

@test "a certificate lookup method of the program's own runs as often as in its own handshakes: such a program is neither handed a connection nor offered a session" {
	for v in 13 12; do
		use_tls $v
		after 4 lookup
		assert_line "3 lookup method: 2 calls"
		assert_line "4 lookup method: 2 calls"
		assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
	done
}

@test "an engine registered for the ciphers after a handshake (no default set): the program's own handshake runs on it, no connection made before is handed out" {
	for v in 13 12; do
		use_tls $v
		after 2 engine
		assert_line "registered: 1"
		assert_line --partial "2 ok HTTP/1.1 200 OK"
		assert_line --partial "3 fail"
		assert_line --partial "4 fail"
		assert_equal "handed out $(stat_value tls_reused)" "handed out 0"
	done
}

@test "an info or message callback set after the handshake on an SSL handed a pooled connection (or an info callback on its context) is told what its own connection would raise: its own handshake is made before its first read or write" {
	for v in 13 12; do
		use_tls $v
		for arg in info_ssl info_ctx msg_ssl; do
			after 3 watch "$arg"
			assert_line --partial "3 ok HTTP/1.1 200 OK"
			refute_line "told after the handshake: info 0 (alerts 0), messages 0, keylog lines 0"
			# request 3 was handed request 2's connection, then made its own
			assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
		done
		# a message callback on the context (copied at SSL_new) and a
		# keylog callback are told nothing after the handshake: the
		# hand-out stands
		for arg in msg_ctx keylog; do
			after 3 watch "$arg"
			assert_line "told after the handshake: info 0 (alerts 0), messages 0, keylog lines 0"
			assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
			assert_equal "connections $SHIM_CONNS" "connections 2"
		done
	done
}


@test "an info, message or keylog callback on the context before the handshake: its connections are its own to the end (the alerts of its close told as alone, never parked), and a context without one is handed none of them nor a keylogged session" {
	for v in 13 12; do
		use_tls $v
		for arg in info_ctx msg_ctx keylog; do
			after 4 watch_early "$arg"
			assert_line --partial "4 ok HTTP/1.1 200 OK"
			assert_equal "$v $arg: handed out $(stat_value tls_reused)" "$v $arg: handed out 0"
			# request 4's own, alone (requests 2 and 3 were parked before)
			assert_equal "$v $arg: parked $(stat_value parked)" "$v $arg: parked 1"
		done
		# a keylogged session is offered to no other SSL (a TLS 1.2
		# resumption keeps the master secret the log holds)
		assert_equal "$v keylog: resumed $(stat_value tls_resumed)" "$v keylog: resumed 0"
	done
}

@test "an info or message callback set after the SSL read and wrote (handed a pooled connection, or its own): told the later records, the server's close_notify and its own, with its own SSL and argument, as alone" {
	for v in 13 12; do
		use_tls $v
		for arg in info_ssl info_ctx msg_ssl; do
			after 4 watch_late "$arg"
			assert_line --partial "3 ok HTTP/1.1 200 OK"
			assert_line --partial "4 ok HTTP/1.1 200 OK"
			refute_line --regexp "^[34] told after the first exchange: info 0 \(alerts 0\), messages 0"
			assert_line --regexp "^3 told after the first exchange: .* not its own SSL or argument 0$"
		done
		# request 3 was handed request 2's connection
		assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
	done
}

@test "a session its first program changed through a reference kept past SSL_free (ex_data, timeout, hostname, ALPN, master key, id context), or right after another SSL was handed its connection, shows in no other SSL's session, and no other SSL offers it (a resumption of the hand-out's own session succeeds)" {
	for v in 13 12; do
		use_tls $v
		for what in ex_data timeout hostname alpn master_key id_context; do
			after 4 sess_change "$what"
			assert_line --partial "4 ok HTTP/1.1 200 OK"
			refute_line --partial "ex_data tagged"
			# request 2 resumed request 1's session (a copy of ours
			# taken at park, before the change), request 3 was not
			# handed request 2's connection (its session changed
			# since) and resumed request 2's, request 4 offers
			# request 3's session: its own handshake (docs/tls.md
			# "Sessions"), which resumes it
			assert_equal "$v $what: resumed $(stat_value tls_resumed)" "$v $what: resumed 2"
			assert_equal "$v $what: handed out $(stat_value tls_reused)" "$v $what: handed out 0"
		done
		# the hand-out's session is made from a copy taken when it was
		# handed out: changes after that stay on the first owner's
		for what in ex_data hostname master_key; do
			after 4 sess_change "late_$what"
			assert_line --partial "4 ok HTTP/1.1 200 OK"
			refute_line --partial "ex_data tagged"
			# request 3 was handed request 2's connection
			assert_equal "$v late_$what: handed out $(stat_value tls_reused)" "$v late_$what: handed out 1"
		done
	done
}

@test "a handed-out SSL's peer certificate is an object of its own: no ex_data a first program set on its own, the peer chain's and the verified chain's first element the same object, as its own handshake's" {
	for v in 13 12; do
		use_tls $v
		after 3 peer_tag
		assert_line --partial "3 peer: tag (none), request 2's object no, get1's the same yes, the chain's first it yes, the verified chain's first it yes"
		assert_line --partial "3 ok HTTP/1.1 200 OK"
		assert_equal "$v: handed out $(stat_value tls_reused)" "$v: handed out 1"
	done
}

@test "the peer certificate a handed-out SSL's session holds (SSL_SESSION_get0_peer), or a resumed session of ours, is an object of its own: the SSL's peer, its chain's first, no ex_data a program set on another's, before and after the server's TLS 1.3 tickets" {
	for v in 13 12; do
		use_tls $v
		after 4 peer_sess
		for i in 1 2 3 4; do
			assert_line "$i session's peer after the handshake: one, tag (none), one seen before no, the SSL's peer yes, the chain's first yes"
			# (the same object after the tickets: libssl's copy for a
			# ticket shares it, with the tag this request set)
			assert_line "$i session's peer after the answer: one, tag request $i, one seen before no, the SSL's peer yes, the chain's first yes"
		done
		# request 2 resumed request 1's session (a copy of ours), 3 and
		# 4 were handed request 2's connection
		assert_equal "$v: resumed $(stat_value tls_resumed)" "$v: resumed 1"
		assert_equal "$v: handed out $(stat_value tls_reused)" "$v: handed out 2"
	done
}

@test "ex_data a handed-out SSL set on its session before the server's TLS 1.3 tickets is on the session it reads after them, as on libssl's own copy for a ticket" {
	use_tls 13
	after 4 sess_ex
	assert_line "3 session after the answer: another, ex_data mine"
	assert_line --partial "4 ok HTTP/1.1 200 OK"
	# requests 3 and 4 were handed request 2's connection
	assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
}

@test "a handed-out SSL's session resumed by the program later holds that SSL's peer objects (certificate and chain), as its own session would" {
	for v in 13 12; do
		use_tls $v
		after 4 peer_sess resume
		assert_line "4 session's peer after the handshake: one, tag request 3, one seen before yes, the SSL's peer yes, the chain's first yes"
		assert_line --regexp "^4 ok HTTP/1.1 200 OK reused=1 "
		# request 3 was handed request 2's connection; request 4 resumed
		# request 3's session on a connection of its own
		assert_equal "$v: handed out $(stat_value tls_reused)" "$v: handed out 1"
		assert_equal "$v: connections $SHIM_CONNS" "$v: connections 3"
	done
}

@test "ex_data an SSL that resumed a session of ours set on its session before the server's TLS 1.3 tickets is on the session it reads after them" {
	use_tls 13
	after 4 sess_ex 2
	assert_line "2 session after the answer: another, ex_data mine"
	assert_line --partial "4 ok HTTP/1.1 200 OK"
	# request 2 resumed request 1's session; its connection, whose
	# session it changed, was handed to no other SSL (request 3 resumed
	# request 1's session too, request 4 was handed request 3's connection)
	assert_equal "resumed $(stat_value tls_resumed)" "resumed 2"
	assert_equal "handed out $(stat_value tls_reused)" "handed out 1"
}

# The objects a getter answered from what the library kept (the full
# handshake's CA names, the engine's key exchange keys), which a program
# may change, up_ref or tag: its SSL's own (the HTTPS review of
# 2026-12-06; docs/tls.md "The program's own objects").
# tests/clients/tls_own_objs.c: 3 requests, each adds a name to its CA
# list and tags its keys; each sets OCSP responder ids of its own (a
# setting, read back from its own SSL, not the engine's).
@test "a handed-out SSL's CA names (SSL_get_client_CA_list, SSL_get0_peer_CA_list) and key exchange keys (SSL_get_peer_tmp_key, SSL_get_tmp_key) are objects of its own: no name another request added, no key another request read or tagged, TLS 1.3 and 1.2; the OCSP ids it set are its own" {
	make -s -C "$ROOT" build/clients/tls_own_objs >&2
	for v in 13 12; do
		use_tls $v
		tls_case tls_own_objs 3 3
		for i in 1 2 3; do
			assert_line "$i CA names: [/CN=libkeepalive test CA], the peer's list the same yes"
			assert_line "$i peer's key: 1, bits 253, one seen before no, tag (none)"
			assert_line "$i own key: 1, bits 253, one seen before no, tag (none)"
			assert_line "$i OCSP ids: the ones it set yes"
		done
	done
	# TLS 1.3: requests 2 and 3 were handed request 1's connection (1.2:
	# they resumed sessions of ours)
	use_tls 13
	tls_case tls_own_objs 3 3
	assert_equal "handed out $(stat_value tls_reused)" "handed out 2"
	# TLS 1.2 hand-outs (SSL_OP_NO_RENEGOTIATION): the kept full
	# handshake's list and peer key, the engine's own key pair
	use_tls 12
	tls_case tls_own_objs 3 3 norenegotiation
	for i in 1 2 3; do
		assert_line "$i CA names: [/CN=libkeepalive test CA], the peer's list the same yes"
		assert_line "$i peer's key: 1, bits 253, one seen before no, tag (none)"
		assert_line "$i own key: 1, bits 253, one seen before no, tag (none)"
	done
	assert_equal "TLS 1.2: handed out $(stat_value tls_reused)" "TLS 1.2: handed out 2"
}
