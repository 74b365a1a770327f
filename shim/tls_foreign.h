/*
 * tls_foreign.h - the foreign engine: an established TLS client connection
 * imported from another process's export message (struct tlsx_state),
 * answering what the program's own SSL would answer to its SSL_* calls
 * (docs/tls-across.md "Step 2: the foreign engine, built").  Pure: the
 * socket's bytes come and go through injected callbacks, libcrypto only for
 * the record layer and the exporter, no system call, no allocation.
 * Prefix: tlsf_.
 *
 * The answers follow OpenSSL 3.0's: the return values of SSL_read,
 * SSL_peek, SSL_write, SSL_shutdown (OpenSSL's numbers, so the hooks pass
 * them on as they are), what SSL_get_error says after each, the shutdown
 * bits, and the reason an OpenSSL error would carry.  The record is read
 * as OpenSSL reads it without read-ahead (the header, then exactly the
 * body): what stays in the socket is what stays there under the program's
 * own SSL, and so is what poll() says.
 */
#ifndef KEEPALIVE_TLS_FOREIGN_H
#define KEEPALIVE_TLS_FOREIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls_export.h"
#include "tls_record.h"

/* the socket's side: what the callbacks return besides a byte count */
#define TLSF_IO_RETRY (-1) /* EAGAIN: the call would block (BIO_should_retry) */
#define TLSF_IO_ERROR (-2) /* an error; errno is the program's to read */
/* the peer's end, which the program's BIO does not call an end (BIO_eof
 * false: curl's, while its connection is up): OpenSSL's ssl3_read_n then
 * returns 0 with nothing queued (SSL_ERROR_SYSCALL), no alert */
#define TLSF_IO_EOF_UNSAID (-3)

struct tlsf_io {
	/* up to cap bytes into buf: > 0 how many, 0 the peer's EOF,
	 * TLSF_IO_RETRY or TLSF_IO_ERROR */
	long (*recv)(void *ctx, uint8_t *buf, size_t cap);
	/* from buf[0..len): > 0 how many went, TLSF_IO_RETRY or TLSF_IO_ERROR */
	long (*send)(void *ctx, const uint8_t *buf, size_t len);
	void *ctx;
};

/* SSL_get_error's answers (OpenSSL's numbers) */
#define TLSF_ERROR_NONE 0
#define TLSF_ERROR_SSL 1
#define TLSF_ERROR_WANT_READ 2
#define TLSF_ERROR_WANT_WRITE 3
#define TLSF_ERROR_SYSCALL 5
#define TLSF_ERROR_ZERO_RETURN 6

/* SSL_get_shutdown's bits */
#define TLSF_SENT_SHUTDOWN 1
#define TLSF_RECEIVED_SHUTDOWN 2

/* the program's settings the answers depend on (OpenSSL's bits) */
#define TLSF_MODE_ENABLE_PARTIAL_WRITE 0x1u
#define TLSF_MODE_ACCEPT_MOVING_WRITE_BUFFER 0x2u
#define TLSF_MODE_AUTO_RETRY 0x4u
#define TLSF_OP_IGNORE_UNEXPECTED_EOF (1ull << 7)
#define TLSF_OP_NO_RENEGOTIATION (1ull << 30)

/* the reasons of OpenSSL's errors the engine raises (sslerr.h): the hooks
 * raise them with ERR_raise(ERR_LIB_SSL, reason) */
#define TLSF_R_BAD_WRITE_RETRY 127
#define TLSF_R_APPLICATION_DATA_AFTER_CLOSE_NOTIFY 291
#define TLSF_R_BAD_LENGTH 271
#define TLSF_R_PROTOCOL_IS_SHUTDOWN 207
#define TLSF_R_UNEXPECTED_EOF_WHILE_READING 294
#define TLSF_R_TLS_ILLEGAL_EXPORTER_LABEL 367
#define TLSF_R_ALERT_OFFSET 1000 /* SSL_AD_REASON_OFFSET: "SSL alert number N" */
#define TLSF_R_OTHER 0           /* an error whose exact reason we do not claim */

/* the longest post-handshake message we take (a NewSessionTicket): more
 * is internal_error, and such a connection is not handed out */
#define TLSF_HS_MAX 16384
/* the latest session ticket kept (the whole NewSessionTicket message) */
#define TLSF_TICKET_MAX 4096

struct tlsf {
	struct tlsf_io io;
	uint16_t version, cipher;
	uint64_t options; /* TLSF_OP_* */
	uint32_t mode;    /* TLSF_MODE_* */
	struct tlsx_state st; /* the getters' values (its blobs point into the caller's bytes) */
	struct kp_tls_dir tx, rx;
	struct tlsrec_reader rd;
	uint8_t hs[TLSF_HS_MAX];
	/* the record being read: its header, then its body */
	uint8_t in[TLSREC_HEADER + TLSREC_MAX_BODY_12];
	size_t in_len;
	/* application data opened and not yet given (points into rd.plain) */
	const uint8_t *app;
	size_t app_len;
	/* sealed bytes not yet taken by the socket, in the order sealed */
	uint8_t out[2 * TLSREC_MAX_SEALED];
	size_t out_off, out_len;
	/* the write in progress (OpenSSL's wnum, wpend_tot, wpend_buf) */
	size_t wnum, wpend_tot;
	const void *wpend_buf;
	bool key_update_owed; /* ours goes before the next write (the peer asked, or the program) */
	bool key_update_requested; /* ... asking the peer's (SSL_key_update's type) */
	bool in_init;         /* SSL_key_update made: OpenSSL's in_init until ours is sent */
	bool alert_owed;      /* an alert sealed and not yet all sent */
	bool failed;          /* a fatal error: every call fails from now on */
	int shutdown;         /* TLSF_*_SHUTDOWN */
	uint8_t warn_alert;   /* the last warning alert received (close_notify 0) */
	/* what the last call left for tlsf_get_error */
	enum { TLSF_RW_NOTHING, TLSF_RW_READING, TLSF_RW_WRITING } rwstate;
	bool io_retry;       /* the socket said "would block" (BIO_should_retry) */
	int err_reason;      /* >= 0: the last call raised this OpenSSL error */
	bool err_syscall;    /* the socket failed: SSL_ERROR_SYSCALL */
	/* TLS 1.3 tickets: the latest kept, how many read before our close_notify */
	uint8_t ticket[TLSF_TICKET_MAX];
	size_t ticket_len;
	unsigned tickets;
	unsigned key_updates_rx, key_updates_tx;
};

/* Import: f from a decoded state (its blobs must outlive f), the program's
 * options and mode; 0, or < 0 (TLSREC_E_UNSUPPORTED: not a state we
 * carry). */
int tlsf_import(struct tlsf *f, const struct tlsx_state *st, const struct tlsf_io *io, uint64_t options,
		uint32_t mode);

/* SSL_set_options / SSL_set_mode after import */
void tlsf_set_options(struct tlsf *f, uint64_t options);
void tlsf_set_mode(struct tlsf *f, uint32_t mode);

/* SSL_read / SSL_peek (the int API: num as the program gave it) and the
 * _ex forms (1 with *readbytes, or 0). */
int tlsf_read(struct tlsf *f, void *buf, int num);
int tlsf_peek(struct tlsf *f, void *buf, int num);
int tlsf_read_ex(struct tlsf *f, void *buf, size_t num, size_t *readbytes);
int tlsf_peek_ex(struct tlsf *f, void *buf, size_t num, size_t *readbytes);
/* SSL_write / SSL_write_ex */
int tlsf_write(struct tlsf *f, const void *buf, int num);
int tlsf_write_ex(struct tlsf *f, const void *buf, size_t num, size_t *written);
int tlsf_pending(const struct tlsf *f);
int tlsf_has_pending(const struct tlsf *f);
/* SSL_shutdown: 0 once our close_notify went, 1 once the peer's was read
 * too, -1 (tlsf_get_error says why) */
int tlsf_shutdown(struct tlsf *f);
int tlsf_get_shutdown(const struct tlsf *f);
void tlsf_set_shutdown(struct tlsf *f, int mode);
/* The close_notify a made-up SSL_shutdown owes, sealed into out (cap
 * bytes) for the caller to send, f then shut for sending: its length, or
 * -1 where f is not at rest (a record or alert half sent, a failure, a
 * shutdown either way already) */
int tlsf_seal_goodbye(struct tlsf *f, uint8_t *out, size_t cap);
/* SSL_get_error(ssl, ret) for the last call's ret, as OpenSSL answers when
 * the program cleared its error queue before the call */
int tlsf_get_error(const struct tlsf *f, int ret);
/* the OpenSSL reason the last call raised, or -1 */
int tlsf_last_reason(const struct tlsf *f);
/* SSL_want: 1 nothing, 2 writing, 3 reading (SSL_NOTHING, SSL_WRITING,
 * SSL_READING) */
int tlsf_want(const struct tlsf *f);

/* SSL_key_update (OpenSSL 3.0's rules: TLS 1.3, the type 0 or 1, not
 * while in init or a write is pending: 0 with the reason raised); ours
 * then goes out at the next read, peek, write or tlsf_do_handshake, which
 * run OpenSSL's state machine first (SSL_in_init 1 until then).  1. */
int tlsf_key_update(struct tlsf *f, int type);
/* SSL_get_key_update_type: the type of ours owed, or -1 (SSL_KEY_UPDATE_NONE) */
int tlsf_key_update_type(const struct tlsf *f);
/* SSL_do_handshake after the handshake: ours sent where SSL_key_update
 * put the engine in init; 1, or -1 (tlsf_get_error) */
int tlsf_do_handshake(struct tlsf *f);
/* SSL_in_init: 1 between SSL_key_update and its KeyUpdate sent */
int tlsf_in_init(const struct tlsf *f);

/* SSL_export_keying_material: 1 and out filled, or 0 (an illegal TLS 1.2
 * label, libcrypto failed) */
int tlsf_export_keying_material(struct tlsf *f, uint8_t *out, size_t olen, const char *label, size_t llen,
				const uint8_t *context, size_t contextlen, int use_context);

/* Getters straight from the state: SSL_version (0x0303, 0x0304),
 * SSL_get_version's string, the suite's IANA number and OpenSSL name,
 * ALPN, SNI (NULL when none), Finished (SSL_get_finished copies at most
 * count bytes and returns the whole length), the randoms. */
int tlsf_version(const struct tlsf *f);
const char *tlsf_version_string(const struct tlsf *f);
uint16_t tlsf_cipher_id(const struct tlsf *f);
const char *tlsf_cipher_name(const struct tlsf *f);
void tlsf_alpn(const struct tlsf *f, const uint8_t **data, unsigned *len);
size_t tlsf_servername(const struct tlsf *f, char *out, size_t cap);
size_t tlsf_finished(const struct tlsf *f, void *buf, size_t count);
size_t tlsf_peer_finished(const struct tlsf *f, void *buf, size_t count);
size_t tlsf_client_random(const struct tlsf *f, uint8_t *out, size_t outlen);
size_t tlsf_server_random(const struct tlsf *f, uint8_t *out, size_t outlen);
/* the latest NewSessionTicket message kept (TLS 1.3), its length; 0 none */
size_t tlsf_ticket(const struct tlsf *f, const uint8_t **msg);

/* The connection's state now, as an export message's (for the next
 * process, when the program is done with it): the imported state with
 * both directions' current keys and sequence numbers, its blobs pointing
 * where the imported state's did (encode it before those bytes go).  Only
 * at rest: nothing opened and not given, no record in part, nothing
 * sealed and not sent, no write in progress, no KeyUpdate or alert owed,
 * no handshake message in part, no warning or empty record counted in a
 * row (a new SSL would count them from 0), not shut down, not failed.
 * The peer's KeyUpdate asked for before the import (TLSX_RX_UPDATE_PENDING)
 * stays asked until one came.  0, or -1 with *why. */
int tlsf_export(const struct tlsf *f, struct tlsx_state *out, const char **why);

/* Wipe every secret (keys, reader, buffers, ticket). */
void tlsf_wipe(struct tlsf *f);

#endif
