/*
 * tls_capture.h - what a followed TLS connection's state is made of,
 * captured at its handshake and kept up while it is used, so that it can
 * be exported at park (docs/tls-across.md "The integration"): its traffic
 * secrets (TLS 1.3: a keylog callback of ours, chained before the
 * program's, which still sees exactly its own lines; TLS 1.2: the master
 * secret and the randoms), its record sequence numbers both ways and the
 * KeyUpdates (a message callback of ours on the engine's SSL: libssl
 * reports every record header it reads or writes, and every handshake
 * message).  Only under KEEPALIVE_TLS_ACROSS.
 *
 * Anything the capture cannot follow (a message callback of the
 * program's replacing ours, a handshake message after the handshake other
 * than a ticket or a KeyUpdate, a line of a secret missing) marks the
 * capture lost: such a connection is never exported.
 */
#ifndef KEEPALIVE_TLS_CAPTURE_H
#define KEEPALIVE_TLS_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>

#include "tls_export.h"
#include "tls_real.h"

/* ssl's own handshake starts (its first SSL_connect / SSL_do_handshake):
 * follow it (our keylog callback on its context, our message callback on
 * it) when KEEPALIVE_TLS_ACROSS is on and the program set no message
 * callback (prog_msg_cb: it would replace ours; such an SSL is declined
 * anyway, docs/tls.md "Callbacks that watch"). */
void kp_tls_capture_begin(SSL *ssl, bool prog_msg_cb);

/* ssl's own handshake returned 1: from now on records are counted under
 * the traffic keys. */
void kp_tls_capture_done(SSL *ssl);

/* The program (or our own code) replaced ssl's message callback: the
 * counts can no longer be trusted. */
void kp_tls_capture_lost(const SSL *ssl);

/* The message callback that keeps ssl's counts (NULL when it is not
 * followed): what the library sets on an engine where it would set none. */
kp_msg_cb kp_tls_capture_msg_cb(const SSL *ssl);

/* ssl is freed or cleared: forget (and wipe) its capture. */
void kp_tls_capture_forget(const SSL *ssl);

/* The program's keylog callback on ctx (SSL_CTX_get_keylog_callback's
 * answer: ours, where installed, is not the program's). */
kp_keylog_cb kp_tls_keylog_of(const SSL_CTX *ctx);

/* The program sets ctx's keylog callback: kept behind ours where ours is
 * installed (true), else false (the caller sets it). */
bool kp_tls_keylog_set(SSL_CTX *ctx, kp_keylog_cb cb);

/* ssl's state as the export message (tls_export.h), its configuration
 * record conf (conf_len bytes, opaque here) and the peer chain peer (NULL:
 * the one ssl holds) in it, in a buffer of
 * malloc's that the caller wipes (OPENSSL_cleanse) and frees: its length,
 * or -1 with *why.  ssl must stand at a record boundary with nothing
 * pending either way (kp_tls_park checks it). */
long kp_tls_capture_export(SSL *ssl, const unsigned char *conf, size_t conf_len, STACK_OF(X509) *peer,
			   unsigned char **out, const char **why);

#endif
