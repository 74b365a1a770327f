/*
 * test_tls_foreign.c - the foreign engine (shim/tls_foreign.c) against
 * OpenSSL's own client, side by side (docs/tls-across.md "Step 2: the
 * foreign engine, built").
 *
 * Two connections to two OpenSSL servers, in process, over scripted
 * "sockets" (a byte queue each way whose reader can be starved, given
 * bytes a few at a time, shown the peer's EOF or an error, and whose
 * writer can be made to block): on the first, the program's own OpenSSL
 * client (the reference, its BIO over the script); on the second, an
 * OpenSSL client makes the handshake, its state is exported
 * (tlsx_encode, tlsx_decode) and the foreign engine takes the connection
 * over (tlsf_import, its callbacks over the script).  Both servers are put
 * through the same events (data in pieces, tickets, KeyUpdates,
 * close_notify, a bare EOF, a fatal alert, a tampered record, a
 * renegotiation request on TLS 1.2) and both clients through the same
 * calls (reads, partial reads, peeks, zero-length reads and writes,
 * blocked writes and their retries, shutdowns, writes after them), and
 * after every step the two must agree: return value, SSL_get_error, the
 * reason OpenSSL raised, the data, SSL_pending, SSL_has_pending, the
 * shutdown bits, the bytes each consumed from its socket and wrote to it,
 * and what each server then read.  Every version x cipher the record
 * layer carries, with and without SSL_OP_IGNORE_UNEXPECTED_EOF,
 * SSL_MODE_AUTO_RETRY, SSL_MODE_ENABLE_PARTIAL_WRITE.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls_export.h"
#include "tls_foreign.h"
#include "tls_record.h"

#include "check.h"
#include "tls_pair.h"

/* ------------------------------------------------------------ the script socket */

#define UNLIMITED ((size_t)-1)

/* one direction of a socket */
struct wire {
	uint8_t *buf;
	size_t cap, len, off; /* written, read */
	size_t visible;       /* what the reader may have of it so far */
	bool hold;            /* new bytes are not visible until released */
	bool eof, error;      /* when the visible bytes are read: EOF, an error; else "would block" */
	size_t room;          /* what the writer may still write; UNLIMITED */
};

static void wire_init(struct wire *w)
{
	memset(w, 0, sizeof(*w));
	w->cap = 1 << 20;
	w->buf = malloc(w->cap);
	w->room = UNLIMITED;
	if (!w->buf)
		abort();
}

static long wire_read(struct wire *w, uint8_t *buf, size_t cap)
{
	if (w->off < w->visible) {
		size_t n = w->visible - w->off < cap ? w->visible - w->off : cap;
		memcpy(buf, w->buf + w->off, n);
		w->off += n;
		return (long)n;
	}
	if (w->error)
		return TLSF_IO_ERROR;
	if (w->eof && w->visible == w->len)
		return 0;
	return TLSF_IO_RETRY;
}

static long wire_write(struct wire *w, const uint8_t *buf, size_t len)
{
	if (w->room == 0)
		return TLSF_IO_RETRY;
	if (w->room == UNLIMITED - 1)
		return TLSF_IO_ERROR;
	size_t n = w->room != UNLIMITED && w->room < len ? w->room : len;
	if (w->len + n > w->cap)
		abort();
	memcpy(w->buf + w->len, buf, n);
	w->len += n;
	if (!w->hold)
		w->visible = w->len;
	if (w->room != UNLIMITED)
		w->room -= n;
	return (long)n;
}

/* a client's two directions */
struct ends {
	struct wire *rd, *wr;
};

/* the reference's BIO over the script */
static int bio_read(BIO *b, char *buf, int len)
{
	struct ends *e = BIO_get_data(b);
	BIO_clear_retry_flags(b);
	long n = wire_read(e->rd, (uint8_t *)buf, (size_t)len);
	if (n == TLSF_IO_RETRY) {
		BIO_set_retry_read(b);
		return -1;
	}
	return n == TLSF_IO_ERROR ? -1 : (int)n;
}

static int bio_write(BIO *b, const char *buf, int len)
{
	struct ends *e = BIO_get_data(b);
	BIO_clear_retry_flags(b);
	long n = wire_write(e->wr, (const uint8_t *)buf, (size_t)len);
	if (n == TLSF_IO_RETRY) {
		BIO_set_retry_write(b);
		return -1;
	}
	return n == TLSF_IO_ERROR ? -1 : (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct ends *e = BIO_get_data(b);
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_EOF:
		return e->rd->eof && e->rd->off == e->rd->len;
	}
	return 0;
}

static BIO_METHOD *wire_method;

static BIO *wire_bio(struct ends *e)
{
	if (!wire_method) {
		wire_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "script");
		BIO_meth_set_read(wire_method, bio_read);
		BIO_meth_set_write(wire_method, bio_write);
		BIO_meth_set_ctrl(wire_method, bio_ctrl);
	}
	BIO *b = BIO_new(wire_method);
	BIO_set_data(b, e);
	BIO_set_init(b, 1);
	return b;
}

/* the foreign engine's callbacks over the script */
static long io_recv(void *ctx, uint8_t *buf, size_t cap)
{
	struct ends *e = ctx;
	return wire_read(e->rd, buf, cap);
}

static long io_send(void *ctx, const uint8_t *buf, size_t len)
{
	struct ends *e = ctx;
	return wire_write(e->wr, buf, len);
}

/* ------------------------------------------------------------ a connection */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned inlen, void *arg)
{
	*out = (const unsigned char *)"http/1.1";
	*outlen = 8;
	return SSL_TLSEXT_ERR_OK;
}

struct side {
	SSL_CTX *cctx, *sctx;
	SSL *c; /* the reference client, or the one whose handshake the engine takes over */
	SSL *s;
	BIO *s_in, *s_out;
	struct wire down, up;
	struct ends ends;
	struct tlsf *f; /* the foreign engine (the second side only) */
	uint8_t *exported;
	uint8_t *srv;   /* what the server read */
	size_t srv_len;
	int srv_ret, srv_err;
};

/* what the server wrote goes on the wire to the client */
static void server_out(struct side *x)
{
	uint8_t buf[4096];
	int n;
	while ((n = BIO_read(x->s_out, buf, sizeof(buf))) > 0)
		wire_write(&x->down, buf, (size_t)n);
}

/* what the client wrote reaches the server */
static void server_in_raw(struct side *x)
{
	if (x->up.off < x->up.len)
		BIO_write(x->s_in, x->up.buf + x->up.off, (int)(x->up.len - x->up.off));
	x->up.off = x->up.visible = x->up.len;
}

/* ... and the server reads it all */
static void server_reads(struct side *x)
{
	server_in_raw(x);
	for (;;) {
		ERR_clear_error();
		int n = SSL_read(x->s, x->srv + x->srv_len, 1 << 16);
		if (n <= 0) {
			x->srv_ret = n;
			x->srv_err = SSL_get_error(x->s, n);
			break;
		}
		x->srv_len += (size_t)n;
	}
	server_out(x);
}

static int side_open(struct side *x, int version, const char *suite, bool rsa)
{
	memset(x, 0, sizeof(*x));
	wire_init(&x->down);
	wire_init(&x->up);
	x->ends.rd = &x->down;
	x->ends.wr = &x->up;
	x->srv = malloc(1 << 21);
	x->cctx = SSL_CTX_new(TLS_client_method());
	x->sctx = SSL_CTX_new(TLS_server_method());
	if (!x->srv || !x->cctx || !x->sctx)
		abort();
	SSL_CTX_set_min_proto_version(x->cctx, version);
	SSL_CTX_set_max_proto_version(x->cctx, version);
	SSL_CTX_set_min_proto_version(x->sctx, version);
	SSL_CTX_set_max_proto_version(x->sctx, version);
	if (version == TLS1_3_VERSION) {
		SSL_CTX_set_ciphersuites(x->cctx, suite);
		SSL_CTX_set_ciphersuites(x->sctx, suite);
	} else if (!SSL_CTX_set_cipher_list(x->cctx, suite) || !SSL_CTX_set_cipher_list(x->sctx, suite)) {
		return -1;
	}
	SSL_CTX_use_certificate(x->sctx, rsa ? rsa_cert : ec_cert);
	SSL_CTX_use_PrivateKey(x->sctx, rsa ? rsa_key : ec_key);
	SSL_CTX_set_keylog_callback(x->cctx, keylog);
	SSL_CTX_set_alpn_protos(x->cctx, (const unsigned char *)"\x08http/1.1", 9);
	SSL_CTX_set_alpn_select_cb(x->sctx, alpn_select, NULL);
	x->c = SSL_new(x->cctx);
	x->s = SSL_new(x->sctx);
	SSL_set_tlsext_host_name(x->c, "localhost");
	BIO *b = wire_bio(&x->ends);
	SSL_set_bio(x->c, b, b);
	x->s_in = mem_bio();
	x->s_out = mem_bio();
	SSL_set_bio(x->s, x->s_in, x->s_out);
	SSL_set_connect_state(x->c);
	SSL_set_accept_state(x->s);
	k_client_len = k_server_len = k_exporter_len = 0;
	bool cdone = false, sdone = false;
	for (int i = 0; i < 50 && !(cdone && sdone); i++) {
		if (!cdone && SSL_do_handshake(x->c) == 1)
			cdone = true;
		server_in_raw(x);
		if (!sdone && SSL_do_handshake(x->s) == 1)
			sdone = true;
		server_out(x);
	}
	return cdone && sdone ? 0 : -1;
}

static void side_close(struct side *x)
{
	SSL_free(x->c);
	SSL_free(x->s);
	SSL_CTX_free(x->cctx);
	SSL_CTX_free(x->sctx);
	if (x->f) {
		tlsf_wipe(x->f);
		free(x->f);
	}
	free(x->exported);
	free(x->down.buf);
	free(x->up.buf);
	free(x->srv);
}

static void put_blob(uint8_t *store, size_t *used, struct tlsx_blob *b, const void *p, size_t len)
{
	memcpy(store + *used, p, len);
	b->p = len ? store + *used : NULL;
	b->len = (uint32_t)len;
	*used += len;
}

/* the handshake client's state, as the exporting process would make it,
 * through the export message, into the engine */
static int take_over(struct side *x, bool rsa, uint64_t options, uint32_t mode)
{
	static uint8_t store[1 << 16];
	size_t used = 0;
	struct tlsx_state st;
	bool v13 = SSL_version(x->c) == TLS1_3_VERSION;

	memset(&st, 0, sizeof(st));
	st.version = v13 ? TLSREC_V13 : TLSREC_V12;
	int cipher = tlsrec_cipher_of(st.version, SSL_CIPHER_get_protocol_id(SSL_get_current_cipher(x->c)));
	CHECK(cipher > 0);
	if (cipher < 0)
		return -1;
	st.cipher = (uint16_t)cipher;
	st.group = 29;
	st.peer_sigalg = rsa ? 0x0804 : 0x0403;
	st.suite = SSL_CIPHER_get_protocol_id(SSL_get_current_cipher(x->c));
	if (v13) {
		CHECK(k_client_len && k_server_len && k_exporter_len);
		if (tlsrec_init13(&st.tx, st.cipher, k_client, k_client_len, 0) ||
		    tlsrec_init13(&st.rx, st.cipher, k_server, k_server_len, 0))
			return -1;
		memcpy(st.exporter, k_exporter, k_exporter_len);
		st.exporter_len = (uint8_t)k_exporter_len;
	} else {
		size_t mlen = SSL_SESSION_get_master_key(SSL_get_session(x->c), st.exporter, 48);
		SSL_get_client_random(x->c, st.client_random, 32);
		SSL_get_server_random(x->c, st.server_random, 32);
		/* TLS 1.2: the Finished of each side was record 0 */
		if (tlsrec_init12(&st.tx, &st.rx, st.cipher, st.exporter, mlen, st.client_random, st.server_random, 1))
			return -1;
		st.exporter_len = (uint8_t)mlen;
	}
	SSL_get_client_random(x->c, st.client_random, 32);
	SSL_get_server_random(x->c, st.server_random, 32);
	st.finished_len = (uint8_t)SSL_get_finished(x->c, st.finished, sizeof(st.finished));
	st.peer_finished_len = (uint8_t)SSL_get_peer_finished(x->c, st.peer_finished, sizeof(st.peer_finished));
	const unsigned char *alpn;
	unsigned alpn_len;
	SSL_get0_alpn_selected(x->c, &alpn, &alpn_len);
	put_blob(store, &used, &st.alpn, alpn, alpn_len);
	put_blob(store, &used, &st.sni, "localhost", 9);
	unsigned char *der = NULL;
	int dlen = i2d_SSL_SESSION(SSL_get_session(x->c), &der);
	put_blob(store, &used, &st.session, der, (size_t)dlen);
	OPENSSL_free(der);
	STACK_OF(X509) *chain = SSL_get_peer_cert_chain(x->c);
	size_t chain_at = used;
	for (int i = 0; i < sk_X509_num(chain); i++) {
		der = NULL;
		dlen = i2d_X509(sk_X509_value(chain, i), &der);
		uint8_t len4[4] = {(uint8_t)(dlen >> 24), (uint8_t)(dlen >> 16), (uint8_t)(dlen >> 8), (uint8_t)dlen};
		memcpy(store + used, len4, 4);
		memcpy(store + used + 4, der, (size_t)dlen);
		used += 4 + (size_t)dlen;
		OPENSSL_free(der);
	}
	st.chain.p = store + chain_at;
	st.chain.len = (uint32_t)(used - chain_at);

	const char *why;
	x->exported = malloc(TLSX_MAX);
	int n = tlsx_encode(&st, x->exported, TLSX_MAX, &why);
	tlsx_wipe(&st);
	CHECK(n > 0);
	if (n <= 0) {
		fprintf(stderr, "encode: %s\n", why);
		return -1;
	}
	struct tlsx_state in;
	CHECK(tlsx_decode(x->exported, (size_t)n, &in, &why) == 0);
	struct tlsf_io io = {io_recv, io_send, &x->ends};
	x->f = malloc(sizeof(*x->f));
	return tlsf_import(x->f, &in, &io, options, mode);
}

/* ------------------------------------------------------------ the scripts */

enum op {
	END = 0,
	S_WRITE,    /* the server writes n bytes */
	S_TICKET,   /* TLS 1.3: a NewSessionTicket */
	S_KU,       /* TLS 1.3: a KeyUpdate, n: update_requested */
	S_CLOSE,    /* the server's SSL_shutdown: close_notify */
	S_EOF,      /* the server's side closes: the client reads EOF after what is there */
	S_ERROR,    /* the client's socket fails after what is there */
	S_ALERT,    /* the server sends a fatal alert (bad_record_mac: it was sent garbage) */
	S_TAMPER,   /* the last byte on the wire to the client is flipped */
	S_RENEG,    /* TLS 1.2: a HelloRequest */
	S_RAW,      /* bytes that are not the server's record on the wire to the client: raws[n] */
	HOLD,       /* the server's next bytes reach the client only when released */
	RELEASE,    /* n more bytes reach the client (-1: all) */
	ROOM,       /* the client's socket takes n more bytes (-1: any, -2: it fails) */
	C_READ,     /* SSL_read(n) */
	C_PEEK,     /* SSL_peek(n) */
	C_READ_EX,  /* SSL_read_ex(n) */
	C_WRITE,    /* SSL_write(n) from the first buffer */
	C_WRITE_B,  /* SSL_write(n) from another buffer, same bytes */
	C_WRITE_AT, /* SSL_write(n) from the first buffer's byte 16384 */
	C_SHUTDOWN, /* SSL_shutdown */
	C_GOODBYE,  /* the close_notify owed (tlsf_seal_goodbye, sent on the socket);
		       the reference: SSL_shutdown.  Only at rest */
	C_KU,       /* SSL_key_update(n): 0 not requested, 1 requested, 2 an invalid type */
	C_HS,       /* SSL_do_handshake */
	C_EXPORT,   /* compare SSL_export_keying_material (taken-over client vs engine) */
	C_REEXPORT, /* the engine's state exported again (tlsf_export) into a new engine
		       that goes on in its place; n: 1 refused (not at rest), 0 taken */
};

struct step {
	enum op op;
	int n;
	int only; /* 0, or the one version (TLS1_2_VERSION, TLS1_3_VERSION) it is for */
};

struct script {
	const char *name;
	struct step steps[48];
};

/* a step's version is left out where it is for both */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define V12 TLS1_2_VERSION
#define V13 TLS1_3_VERSION

/* S_RAW's bytes: a record header (its body zeros, body_len of them), or
 * text; what a peer that is not (or no longer) the TLS server may write */
static const struct {
	uint8_t type;
	uint16_t version, len;
	size_t body_len;
	const char *text;
} raws[] = {
	{0, 0, 0, 0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"},
	{22, 0x0303, 5, 5, NULL},      /* a handshake record in clear */
	{23, 0x0301, 32, 32, NULL},    /* another record version */
	{23, 0x0303, 16640, 16640, NULL},
	{23, 0x0303, 16640, 0, NULL},  /* (its header alone) */
	{23, 0x0303, 16639, 16639, NULL},
	{23, 0x0303, 16641, 16641, NULL},
	{23, 0x0303, 16641, 0, NULL},
	{23, 0x0303, 16705, 0, NULL},
	{23, 0x0303, 16704, 16704, NULL},
	{23, 0x0303, 16705, 16705, NULL},
	{23, 0x0303, 16707, 16707, NULL},
	{23, 0x0303, 16708, 16708, NULL},
	{23, 0x0303, 16708, 0, NULL},
	{21, 0x0303, 2, 2, NULL},      /* an alert in clear */
	{20, 0x0303, 1, 1, NULL},      /* ChangeCipherSpec */
	{24, 0x0303, 32, 32, NULL},    /* heartbeat */
	{48, 0x0303, 32, 32, NULL},
	{23, 0x0303, 0, 0, NULL},
	{23, 0x0303, 16, 16, NULL},
	{23, 0x0303, 23, 23, NULL},
	{23, 0x0303, 24, 24, NULL},
	{23, 0x0203, 24, 24, NULL},
	{23, 0x0302, 24, 24, NULL},
	{0x17, 0x0403, 24, 24, NULL},
};
#define N_RAWS (sizeof(raws) / sizeof(raws[0]))

static const struct script scripts[] = {
	{"data in pieces, partial reads, peeks",
	 {{S_WRITE, 100}, {C_READ, 10}, {C_PEEK, 5}, {C_READ, 0}, {C_READ, 200}, {C_READ, 10},
	  {HOLD, 0}, {S_WRITE, 30}, {RELEASE, 3}, {C_READ, 10}, {C_PEEK, 10}, {RELEASE, 10}, {C_READ, 10},
	  {RELEASE, -1}, {C_READ_EX, 7}, {C_PEEK, 100}, {C_READ, 100}, {C_READ, 1},
	  {S_WRITE, 20000}, {S_WRITE, 0}, {S_WRITE, 5}, {C_READ, 16384}, {C_READ, 20000}, {C_READ, 20000},
	  {C_READ, 5}, {C_WRITE, 50}, {C_WRITE, 0}, {C_WRITE, 40000}, {C_READ, 1}, {C_EXPORT, 0},
	  {C_READ, -1}, {C_PEEK, -1}, {C_WRITE, -1}, {S_WRITE, 3}, {C_READ, -1}, {C_READ, 3}, {END, 0}}},
	{"SSL_read_ex of nothing, with nothing there, at the end: the count the caller had stays",
	 {{C_READ_EX, 0}, {S_WRITE, 10}, {C_READ_EX, 0}, {C_READ_EX, 5}, {C_READ_EX, 5}, {C_READ_EX, 5},
	  {S_TICKET, 0, V13}, {C_READ_EX, 5}, {S_CLOSE, 0}, {C_READ_EX, 0}, {C_READ_EX, 5}, {END, 0}}},
	{"tickets and key updates",
	 {{C_READ, 10}, {S_TICKET, 0, V13}, {S_WRITE, 10}, {C_READ, 100}, {C_READ, 100},
	  {S_KU, 1, V13}, {S_WRITE, 10}, {C_READ, 100}, {C_READ, 100}, {C_WRITE, 5}, {C_WRITE, 5},
	  {S_KU, 0, V13}, {S_TICKET, 0, V13}, {S_WRITE, 3}, {C_PEEK, 2}, {C_READ, 100}, {C_READ, 100},
	  {C_READ, 100}, {S_KU, 1, V13}, {C_WRITE, 0}, {S_WRITE, 4}, {C_READ, 4}, {C_WRITE, 7}, {END, 0}}},
	{"the server's close_notify",
	 {{S_WRITE, 10}, {S_CLOSE, 0}, {C_READ, 5}, {C_READ, 5}, {C_READ, 5}, {C_READ, 5}, {C_PEEK, 5},
	  {C_WRITE, 5}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {C_WRITE, 5}, {C_READ, 5}, {END, 0}}},
	{"the close_notify owed, sealed for the library to send, then the peer's",
	 {{S_WRITE, 10}, {C_READ, 100}, {C_GOODBYE, 0}, {S_WRITE, 5}, {C_READ, 100}, {C_WRITE, 5},
	  {S_CLOSE, 0}, {C_READ, 5}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {END, 0}}},
	{"the close_notify owed after tickets and key updates",
	 {{S_TICKET, 0, V13}, {S_KU, 1, V13}, {S_WRITE, 10}, {C_READ, 100}, {C_WRITE, 5}, {C_GOODBYE, 0},
	  {S_WRITE, 3}, {C_READ, 100}, {S_EOF, 0}, {C_READ, 5}, {C_SHUTDOWN, 0}, {END, 0}}},
	{"the client's close_notify first",
	 {{C_SHUTDOWN, 0}, {C_READ, 5}, {S_WRITE, 10}, {C_READ, 4}, {C_SHUTDOWN, 0}, {S_WRITE, 10},
	  {S_TICKET, 0, V13}, {C_SHUTDOWN, 0}, {S_WRITE, 10}, {S_CLOSE, 0}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0},
	  {C_READ, 5}, {C_WRITE, 5}, {END, 0}}},
	{"a bare EOF",
	 {{S_WRITE, 10}, {S_EOF, 0}, {C_READ, 5}, {C_READ, 5}, {C_READ, 5}, {C_READ, 5}, {C_WRITE, 5},
	  {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {C_READ, 1}, {END, 0}}},
	{"an EOF within a record",
	 {{HOLD, 0}, {S_WRITE, 10}, {RELEASE, 3}, {C_READ, 5}, {S_EOF, 0}, {RELEASE, 6}, {C_READ, 5},
	  {C_READ, 5}, {C_SHUTDOWN, 0}, {END, 0}}},
	{"a socket error",
	 {{S_WRITE, 10}, {S_ERROR, 0}, {C_READ, 10}, {C_READ, 10}, {C_WRITE, 5}, {C_SHUTDOWN, 0}, {END, 0}}},
	{"EOF while waiting for the peer's close_notify",
	 {{C_SHUTDOWN, 0}, {S_WRITE, 3}, {S_EOF, 0}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {C_READ, 5}, {END, 0}}},
	{"a fatal alert",
	 {{S_WRITE, 10}, {S_ALERT, 0}, {C_READ, 20}, {C_READ, 20}, {C_READ, 20}, {C_WRITE, 5},
	  {C_SHUTDOWN, 0}, {END, 0}}},
	{"a tampered record",
	 {{S_WRITE, 10}, {S_WRITE, 10}, {S_TAMPER, 0}, {C_READ, 20}, {C_READ, 20}, {C_READ, 20},
	  {C_WRITE, 5}, {C_SHUTDOWN, 0}, {END, 0}}},
	{"a renegotiation request",
	 {{S_RENEG, 0, V12}, {S_WRITE, 10}, {C_READ, 20}, {C_READ, 20}, {C_WRITE, 5}, {C_READ, 20},
	  {END, 0}}},
	{"blocked writes and their retries",
	 {{ROOM, 0}, {C_WRITE, 100}, {C_WRITE, 100}, {ROOM, 10}, {C_WRITE, 100}, {ROOM, -1}, {C_WRITE, 100},
	  {ROOM, 0}, {C_WRITE, 100}, {ROOM, -1}, {C_WRITE_B, 100}, {C_WRITE, 100}, {END, 0}}},
	{"a blocked write retried shorter",
	 {{ROOM, 0}, {C_WRITE, 100}, {ROOM, -1}, {C_WRITE, 50}, {C_WRITE, 100}, {END, 0}}},
	{"a long write across records, blocked",
	 {{ROOM, 16500}, {C_WRITE, 40000}, {C_WRITE, 40000}, {ROOM, 20000}, {C_WRITE, 40000},
	  {C_WRITE_AT, 23616}, {ROOM, -1}, {C_WRITE, 40000}, {C_WRITE_AT, 23616}, {C_WRITE, 10},
	  {END, 0}}},
	{"a key update owed while writes block",
	 {{S_KU, 1, V13}, {S_WRITE, 1}, {C_READ, 5}, {ROOM, 0}, {C_WRITE, 10}, {C_WRITE, 10}, {ROOM, -1},
	  {C_WRITE, 10}, {C_WRITE, 10}, {END, 0}}},
	{"shutdown while writes block",
	 {{ROOM, 0}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {C_WRITE, 5}, {ROOM, -1}, {C_SHUTDOWN, 0},
	  {S_CLOSE, 0}, {C_SHUTDOWN, 0}, {END, 0}}},
	{"post-handshake messages after our close_notify",
	 {{C_SHUTDOWN, 0}, {S_TICKET, 0, V13}, {S_KU, 0, V13}, {S_WRITE, 5}, {C_READ, 10}, {C_READ, 10},
	  {S_KU, 1, V13}, {S_CLOSE, 0}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {C_READ, 10}, {END, 0}}},
	{"the client's socket fails on write",
	 {{ROOM, -2}, {C_WRITE, 10}, {C_WRITE, 10}, {C_SHUTDOWN, 0}, {C_SHUTDOWN, 0}, {S_WRITE, 3},
	  {C_READ, 10}, {END, 0}}},
	{"shutdown with a data record half sent",
	 {{ROOM, 5}, {C_WRITE, 100}, {C_SHUTDOWN, 0}, {ROOM, -1}, {C_SHUTDOWN, 0}, {C_WRITE, 100},
	  {C_SHUTDOWN, 0}, {C_READ, 5}, {END, 0}}},
	{"a write retried after the peer's close_notify",
	 {{ROOM, 0}, {C_WRITE, 100}, {S_WRITE, 2}, {S_CLOSE, 0}, {C_READ, 5}, {C_READ, 5}, {ROOM, -1},
	  {C_WRITE, 100}, {C_WRITE, 0}, {C_SHUTDOWN, 0}, {END, 0}}},
	/* the program's own SSL_key_update after data (docs/tls-across.md "The
	 * hand-out in the library"): sent at the next read, write or
	 * SSL_do_handshake; the server's answer when asked; refusals */
	{"the program's SSL_key_update",
	 {{S_WRITE, 10}, {C_READ, 100}, {C_KU, 0}, {C_KU, 1}, {C_SHUTDOWN, 0, V13}, {C_WRITE, 5}, {S_WRITE, 3},
	  {C_READ, 100}, {C_KU, 1}, {C_READ, 100}, {S_WRITE, 4}, {C_READ, 100}, {C_KU, 2}, {C_HS, 0},
	  {C_KU, 0}, {C_HS, 0}, {C_HS, 0}, {C_WRITE, 6}, {C_KU, 1}, {ROOM, 0}, {C_HS, 0}, {C_HS, 0},
	  {C_WRITE, 5}, {ROOM, -1}, {C_WRITE, 5}, {S_WRITE, 2}, {C_READ, 100}, {S_KU, 1, V13}, {C_KU, 1},
	  {S_WRITE, 3}, {C_READ, 100}, {C_READ, 100}, {C_WRITE, 4}, {S_WRITE, 5}, {C_READ, 100},
	  {ROOM, 0}, {C_WRITE, 100}, {C_KU, 0}, {ROOM, -1}, {C_WRITE, 100}, {C_KU, 0}, {C_PEEK, 1},
	  {S_WRITE, 1}, {C_PEEK, 1}, {C_READ, 1}, {C_WRITE, 3}, {END, 0}}},
	{"a ticket then EOF",
	 {{S_TICKET, 0, V13}, {S_EOF, 0}, {C_READ, 5}, {C_READ, 5}, {C_READ, 5}, {END, 0}}},
	/* the next process's engine, from this one's state, carries on where
	 * it stopped: only at rest */
	{"re-exported between exchanges",
	 {{C_READ, 16384}, {C_READ, 16384}, {C_READ, 16384}, {C_REEXPORT, 0}, {S_WRITE, 100}, {C_READ, 10},
	  {C_REEXPORT, 1}, {C_READ, 200}, {C_REEXPORT, 0}, {S_WRITE, 50}, {C_READ, 50}, {C_WRITE, 30},
	  {C_REEXPORT, 0}, {S_KU, 1, V13}, {S_WRITE, 10}, {C_READ, 100}, {C_REEXPORT, 1, V13},
	  {C_READ, 100}, {C_WRITE, 5}, {C_REEXPORT, 0}, {S_WRITE, 20}, {C_READ, 100}, {C_REEXPORT, 0},
	  {C_WRITE, 7}, {S_TICKET, 0, V13}, {S_WRITE, 3}, {C_READ, 100}, {C_READ, 100}, {C_REEXPORT, 0},
	  {C_EXPORT, 0}, {ROOM, 0}, {C_WRITE, 10}, {C_REEXPORT, 1}, {ROOM, -1}, {C_WRITE, 10},
	  {C_REEXPORT, 0}, {S_KU, 0, V13}, {S_WRITE, 4}, {C_READ, 4}, {C_READ, 4}, {C_REEXPORT, 0},
	  {C_WRITE, 9}, {S_CLOSE, 0}, {C_READ, 5}, {C_REEXPORT, 1}, {C_READ, 5}, {END, 0}}},
};

static uint8_t wbuf_a[65536], wbuf_b[65536];
static uint8_t sent_pattern[1 << 20];
static char where[256];

/* one side's answer to a step */
struct answer {
	int ret, err, reason;
	uint8_t data[65536];
	size_t len;
	int pending, has_pending, shutdown;
	int ku_type, in_init; /* SSL_get_key_update_type, SSL_in_init */
};

static void server_step(struct side *x, const struct step *st, int *pattern_at)
{
	switch (st->op) {
	case S_WRITE:
		if (st->n)
			SSL_write(x->s, sent_pattern + *pattern_at, st->n);
		else
			SSL_write(x->s, "", 0);
		break;
	case S_TICKET:
		SSL_new_session_ticket(x->s);
		SSL_do_handshake(x->s);
		break;
	case S_KU:
		SSL_key_update(x->s, st->n ? SSL_KEY_UPDATE_REQUESTED : SSL_KEY_UPDATE_NOT_REQUESTED);
		SSL_do_handshake(x->s);
		break;
	case S_CLOSE:
		SSL_shutdown(x->s);
		break;
	case S_EOF:
		x->down.eof = true;
		break;
	case S_ERROR:
		x->down.error = true;
		break;
	case S_ALERT: {
		static const uint8_t garbage[5 + 32] = {0x17, 3, 3, 0, 32};
		BIO_write(x->s_in, garbage, sizeof(garbage));
		uint8_t b[16];
		SSL_read(x->s, b, sizeof(b));
		break;
	}
	case S_TAMPER:
		x->down.buf[x->down.len - 1] ^= 0x40;
		break;
	case S_RENEG:
		SSL_renegotiate(x->s);
		SSL_do_handshake(x->s);
		break;
	case S_RAW: {
		static uint8_t raw[5 + 65536];
		size_t len;
		if (raws[st->n].text) {
			len = strlen(raws[st->n].text);
			memcpy(raw, raws[st->n].text, len);
		} else {
			raw[0] = raws[st->n].type;
			raw[1] = (uint8_t)(raws[st->n].version >> 8);
			raw[2] = (uint8_t)raws[st->n].version;
			raw[3] = (uint8_t)(raws[st->n].len >> 8);
			raw[4] = (uint8_t)raws[st->n].len;
			memset(raw + 5, 0, raws[st->n].body_len);
			len = 5 + raws[st->n].body_len;
		}
		server_out(x); /* (the server's own records first) */
		wire_write(&x->down, raw, len);
		break;
	}
	case HOLD:
		x->down.hold = true;
		break;
	case RELEASE:
		x->down.visible = st->n < 0 || x->down.visible + (size_t)st->n > x->down.len ? x->down.len
											 : x->down.visible + (size_t)st->n;
		if (st->n < 0)
			x->down.hold = false;
		break;
	case ROOM:
		x->up.room = st->n == -2 ? UNLIMITED - 1 : st->n < 0 ? UNLIMITED : (size_t)st->n; /* -2: failing */
		break;
	default:
		break;
	}
	ERR_clear_error();
	server_out(x);
}

static const uint8_t *write_buf(const struct step *st)
{
	return st->op == C_WRITE_B ? wbuf_b : st->op == C_WRITE_AT ? wbuf_a + 16384 : wbuf_a;
}

static void ref_step(struct side *x, const struct step *st, struct answer *a)
{
	size_t got = 77; /* (what the call leaves of the caller's value: compared) */
	ERR_clear_error();
	switch (st->op) {
	case C_READ: a->ret = SSL_read(x->c, a->data, st->n); break;
	case C_PEEK: a->ret = SSL_peek(x->c, a->data, st->n); break;
	case C_READ_EX: a->ret = SSL_read_ex(x->c, a->data, (size_t)st->n, &got); break;
	case C_WRITE:
	case C_WRITE_B:
	case C_WRITE_AT: a->ret = SSL_write(x->c, write_buf(st), st->n); break;
	case C_SHUTDOWN:
	case C_GOODBYE: a->ret = SSL_shutdown(x->c); break;
	case C_KU: a->ret = SSL_key_update(x->c, st->n); break;
	case C_HS: a->ret = SSL_do_handshake(x->c); break;
	default: return;
	}
	a->ku_type = SSL_get_key_update_type(x->c);
	a->in_init = SSL_in_init(x->c);
	a->err = SSL_get_error(x->c, a->ret);
	/* the SSL error: TLS 1.2 AES-GCM's failed open puts a provider's
	 * error first in the queue */
	unsigned long e = ERR_peek_last_error();
	CHECK(a->err != SSL_ERROR_SSL || ERR_GET_LIB(e) == ERR_LIB_SSL);
	a->reason = a->err == SSL_ERROR_SSL ? ERR_GET_REASON(e) : -1;
	a->len = st->op == C_READ_EX ? got : (st->op == C_READ || st->op == C_PEEK) && a->ret > 0 ? (size_t)a->ret : 0;
	a->pending = SSL_pending(x->c);
	a->has_pending = SSL_has_pending(x->c);
	a->shutdown = SSL_get_shutdown(x->c);
	if (st->op == C_GOODBYE) /* (no call of the program's: the library answered it) */
		a->err = 0, a->reason = -1;
}

static void foreign_step(struct side *x, const struct step *st, struct answer *a)
{
	size_t got = 77;
	switch (st->op) {
	case C_READ: a->ret = tlsf_read(x->f, a->data, st->n); break;
	case C_PEEK: a->ret = tlsf_peek(x->f, a->data, st->n); break;
	case C_READ_EX: a->ret = tlsf_read_ex(x->f, a->data, (size_t)st->n, &got); break;
	case C_WRITE:
	case C_WRITE_B:
	case C_WRITE_AT: a->ret = tlsf_write(x->f, write_buf(st), st->n); break;
	case C_SHUTDOWN: a->ret = tlsf_shutdown(x->f); break;
	case C_GOODBYE: {
		/* sealed, then written as the library writes it (one send) */
		uint8_t rec[64];
		int n = tlsf_seal_goodbye(x->f, rec, sizeof(rec));
		a->ret = n > 0 && x->f->io.send(x->f->io.ctx, rec, (size_t)n) == n ? 0 : -1;
		break;
	}
	case C_KU: a->ret = tlsf_key_update(x->f, st->n); break;
	case C_HS: a->ret = tlsf_do_handshake(x->f); break;
	default: return;
	}
	a->ku_type = tlsf_key_update_type(x->f);
	a->in_init = tlsf_in_init(x->f);
	a->err = tlsf_get_error(x->f, a->ret);
	a->reason = a->err == TLSF_ERROR_SSL ? tlsf_last_reason(x->f) : -1;
	a->len = st->op == C_READ_EX ? got : (st->op == C_READ || st->op == C_PEEK) && a->ret > 0 ? (size_t)a->ret : 0;
	a->pending = tlsf_pending(x->f);
	a->has_pending = tlsf_has_pending(x->f);
	a->shutdown = tlsf_get_shutdown(x->f);
	if (st->op == C_GOODBYE)
		a->err = 0, a->reason = -1;
}

static int unclaimed_reasons;

#define SAME(what, a, b)                                                                              \
	do {                                                                                          \
		CHECK((a) == (b));                                                                    \
		if ((a) != (b))                                                                       \
			fprintf(stderr, "  %s: %s: openssl %ld, foreign %ld\n", where, what, (long)(a), \
				(long)(b));                                                           \
	} while (0)

static void compare_export(struct side *x)
{
	static const struct {
		const char *label;
		const char *ctx;
		int use;
	} cases[] = {{"EXPERIMENTAL one", "context", 1}, {"EXPERIMENTAL one", NULL, 0},
		     {"EXPERIMENTAL one", "", 1}, {"EXPORTER-Channel-Binding", NULL, 0},
		     {"key expansion", NULL, 0}, {"client finished", "x", 1}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t a[64], b[64];
		size_t clen = cases[i].ctx ? strlen(cases[i].ctx) : 0;
		ERR_clear_error();
		int ra = SSL_export_keying_material(x->c, a, sizeof(a), cases[i].label, strlen(cases[i].label),
						    (const uint8_t *)cases[i].ctx, clen, cases[i].use);
		int rb = tlsf_export_keying_material(x->f, b, sizeof(b), cases[i].label, strlen(cases[i].label),
						     (const uint8_t *)cases[i].ctx, clen, cases[i].use);
		SAME("export rc", ra, rb);
		if (ra == 1 && rb == 1)
			CHECK(memcmp(a, b, sizeof(a)) == 0);
	}
}

/* C_REEXPORT: the engine's state exported again (tlsf_export) through the
 * message into a new engine over the same socket, in its place (as the
 * next process would import it); refused: the old one goes on */
static int reexports;
static void reexport(struct side *x, int refused)
{
	struct tlsx_state st;
	const char *why = NULL;
	int r = tlsf_export(x->f, &st, &why);
	SAME("re-export refused", refused, r < 0);
	if (r < 0)
		return;
	/* the peer's KeyUpdate asked before the import stays asked until
	 * one came */
	bool asked = x->f->st.flags & TLSX_RX_UPDATE_PENDING;
	SAME("KeyUpdate still asked", asked && !x->f->key_updates_rx, (st.flags & TLSX_RX_UPDATE_PENDING) != 0);
	uint8_t *msg = malloc(TLSX_MAX);
	struct tlsf *g = malloc(sizeof(*g));
	struct tlsx_state in;
	struct tlsf_io io = {io_recv, io_send, &x->ends};
	int n = msg ? tlsx_encode(&st, msg, TLSX_MAX, &why) : -1;
	if (!g || n <= 0 || tlsx_decode(msg, (size_t)n, &in, &why) ||
	    tlsf_import(g, &in, &io, x->f->options, x->f->mode)) {
		CHECK(!"re-export imported");
		free(msg);
		free(g);
		return;
	}
	/* the getters' values went along */
	CHECK(memcmp(x->f->st.client_random, g->st.client_random, 32) == 0 &&
	      x->f->st.exporter_len == g->st.exporter_len && x->f->st.chain.len == g->st.chain.len);
	tlsf_wipe(x->f);
	free(x->f);
	free(x->exported);
	x->f = g;
	x->exported = msg;
	reexports++;
}

/* the getters, the taken-over client against the engine */
static void compare_getters(struct side *x)
{
	SAME("version", SSL_version(x->c), tlsf_version(x->f));
	CHECK(strcmp(SSL_get_version(x->c), tlsf_version_string(x->f)) == 0);
	SAME("cipher", SSL_CIPHER_get_protocol_id(SSL_get_current_cipher(x->c)), tlsf_cipher_id(x->f));
	CHECK(strcmp(SSL_CIPHER_get_name(SSL_get_current_cipher(x->c)), tlsf_cipher_name(x->f)) == 0);
	const unsigned char *a1, *a2;
	unsigned l1, l2;
	SSL_get0_alpn_selected(x->c, &a1, &l1);
	tlsf_alpn(x->f, &a2, &l2);
	CHECK(l1 == l2 && l1 == 8 && !memcmp(a1, a2, l1));
	char sni[64];
	CHECK(tlsf_servername(x->f, sni, sizeof(sni)) == 9 &&
	      !strcmp(sni, SSL_get_servername(x->c, TLSEXT_NAMETYPE_host_name)));
	uint8_t f1[64], f2[64];
	size_t n1 = SSL_get_finished(x->c, f1, 5), n2 = tlsf_finished(x->f, f2, 5);
	CHECK(n1 == n2 && !memcmp(f1, f2, 5));
	n1 = SSL_get_peer_finished(x->c, f1, sizeof(f1));
	n2 = tlsf_peer_finished(x->f, f2, sizeof(f2));
	CHECK(n1 == n2 && !memcmp(f1, f2, n1));
	CHECK(SSL_get_client_random(x->c, NULL, 0) == tlsf_client_random(x->f, NULL, 0));
	n1 = SSL_get_client_random(x->c, f1, 20);
	n2 = tlsf_client_random(x->f, f2, 20);
	CHECK(n1 == n2 && !memcmp(f1, f2, n1));
	n1 = SSL_get_server_random(x->c, f1, 64);
	n2 = tlsf_server_random(x->f, f2, 64);
	CHECK(n1 == n2 && !memcmp(f1, f2, n1));
	compare_export(x);
}

static void run_script(const struct script *sc, int version, const char *suite, bool rsa, uint64_t options,
		       uint32_t mode_on, uint32_t mode_off)
{
	struct side ref, fgn;
	static struct answer a, b;

	if (side_open(&ref, version, suite, rsa) || side_open(&fgn, version, suite, rsa)) {
		CHECK(!"handshake");
		side_close(&ref);
		side_close(&fgn);
		return;
	}
	SSL_set_options(ref.c, options);
	SSL_set_mode(ref.c, mode_on);
	SSL_clear_mode(ref.c, mode_off);
	uint32_t mode = (uint32_t)SSL_get_mode(ref.c);
	if (take_over(&fgn, rsa, options, mode)) {
		CHECK(!"take over");
		side_close(&ref);
		side_close(&fgn);
		return;
	}
	compare_getters(&fgn);
	/* the re-export script: as a state whose KeyUpdate went before its
	 * export (the flag only: the server's KeyUpdates come as scripted) */
	if (version == TLS1_3_VERSION && strstr(sc->name, "re-exported"))
		fgn.f->st.flags |= TLSX_RX_UPDATE_PENDING;
	int pattern_at = 0;
	for (int i = 0; sc->steps[i].op != END; i++) {
		const struct step *st = &sc->steps[i];
		if (st->only && st->only != version)
			continue;
		snprintf(where, sizeof(where), "%s / %s%s%s%s, step %d", sc->name, suite,
			 options & SSL_OP_IGNORE_UNEXPECTED_EOF ? " ignore-eof" : "",
			 mode & SSL_MODE_AUTO_RETRY ? " auto-retry" : "",
			 mode & SSL_MODE_ENABLE_PARTIAL_WRITE ? " partial-write" : "", i);
		if (st->op == C_EXPORT) {
			compare_export(&fgn);
			continue;
		}
		if (st->op == C_REEXPORT) {
			reexport(&fgn, st->n);
			continue;
		}
		if (st->op < C_READ) {
			server_step(&ref, st, &pattern_at);
			server_step(&fgn, st, &pattern_at);
			if (st->op == S_WRITE)
				pattern_at += st->n;
			continue;
		}
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		size_t ref_up = ref.up.len, fgn_up = fgn.up.len;
		ref_step(&ref, st, &a);
		foreign_step(&fgn, st, &b);
		if (getenv("TLSF_TRACE"))
			fprintf(stderr, "%s: ret %d/%d err %d/%d reason %d/%d shut %d/%d pend %d/%d has %d/%d wrote %zu/%zu\n", where,
				a.ret, b.ret, a.err, b.err, a.reason, b.reason, a.shutdown, b.shutdown, a.pending,
				b.pending, a.has_pending, b.has_pending, ref.up.len - ref_up, fgn.up.len - fgn_up);
		SAME("return", a.ret, b.ret);
		SAME("SSL_get_error", a.err, b.err);
		if (b.reason == TLSF_R_OTHER && a.reason > 0)
			unclaimed_reasons++;
		else
			SAME("reason", a.reason, b.reason);
		SAME("bytes read", a.len, b.len);
		CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
		SAME("SSL_pending", a.pending, b.pending);
		SAME("SSL_has_pending", a.has_pending, b.has_pending);
		SAME("SSL_get_shutdown", a.shutdown, b.shutdown);
		SAME("SSL_get_key_update_type", a.ku_type, b.ku_type);
		SAME("SSL_in_init", a.in_init, b.in_init);
		/* (the handshakes' lengths differ: an ECDSA signature's) */
		SAME("bytes left in the socket", ref.down.len - ref.down.off, fgn.down.len - fgn.down.off);
		SAME("bytes written to the socket", ref.up.len - ref_up, fgn.up.len - fgn_up);
		server_reads(&ref);
		server_reads(&fgn);
		SAME("bytes the server read", ref.srv_len, fgn.srv_len);
		CHECK(ref.srv_len == fgn.srv_len && memcmp(ref.srv, fgn.srv, ref.srv_len) == 0);
		SAME("the server's last SSL_read", ref.srv_ret, fgn.srv_ret);
		SAME("the server's SSL_get_error", ref.srv_err, fgn.srv_err);
	}
	/* a ticket the engine read is kept whole: the latest
	 * NewSessionTicket message */
	const uint8_t *msg;
	size_t tlen = tlsf_ticket(fgn.f, &msg);
	size_t body = tlen > 4 ? (size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3] : 0;
	CHECK(fgn.f->tickets == 0 ? tlen == 0 : tlen > 4 && msg[0] == 4 && tlen == 4 + body);
	side_close(&ref);
	side_close(&fgn);
}

static const struct {
	int version;
	const char *suite;
	bool rsa;
} suites[] = {
	{TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", false},
	{TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", false},
	{TLS1_3_VERSION, "TLS_CHACHA20_POLY1305_SHA256", false},
	{TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256", false},
	{TLS1_2_VERSION, "ECDHE-ECDSA-AES256-GCM-SHA384", false},
	{TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305", false},
	{TLS1_2_VERSION, "ECDHE-RSA-AES128-GCM-SHA256", true},
	{TLS1_2_VERSION, "ECDHE-RSA-AES256-GCM-SHA384", true},
	{TLS1_2_VERSION, "ECDHE-RSA-CHACHA20-POLY1305", true},
};

/* a script under every suite and every option and mode */
static void run_everywhere(const struct script *sc, const char *only)
{
	if (only && !strstr(sc->name, only))
		return;
	for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++)
		for (int m = 0; m < 8; m++) {
			uint64_t options = SSL_OP_NO_RENEGOTIATION | (m & 1 ? SSL_OP_IGNORE_UNEXPECTED_EOF : 0);
			uint32_t on = m & 4 ? SSL_MODE_ENABLE_PARTIAL_WRITE : 0;
			uint32_t off = m & 2 ? 0 : SSL_MODE_AUTO_RETRY;
			run_script(sc, suites[s].version, suites[s].suite, suites[s].rsa, options,
				   on | (m & 2 ? SSL_MODE_AUTO_RETRY : 0), off);
		}
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;

	pair_make_certs();
	for (size_t i = 0; i < sizeof(wbuf_a); i++)
		wbuf_a[i] = wbuf_b[i] = (uint8_t)(i * 13 + 1);
	for (size_t i = 0; i < sizeof(sent_pattern); i++)
		sent_pattern[i] = (uint8_t)(i * 7 + 3);
	for (size_t k = 0; k < sizeof(scripts) / sizeof(scripts[0]); k++)
		run_everywhere(&scripts[k], only);
	/* bytes that are not the server's records, after an exchange: the
	 * reader's errors, OpenSSL's reason and alert (docs/tls-across.md
	 * "The reader's errors") */
	for (size_t r = 0; r < N_RAWS; r++) {
		static char name[64];
		struct script sc = {name,
				    {{S_WRITE, 10}, {C_READ, 100}, {S_RAW, (int)r}, {C_READ, 100}, {C_READ, 100},
				     {S_EOF, 0}, {C_READ, 100}, {C_WRITE, 5}, {C_SHUTDOWN, 0}, {END, 0}}};
		snprintf(name, sizeof(name), "raw bytes %zu", r);
		run_everywhere(&sc, only);
	}
	pair_free_certs();
	printf("test_tls_foreign: %d passed, %d failed (%d errors whose reason the engine does not claim, "
	       "%d engines re-exported)\n",
	       passed, failed, unclaimed_reasons, reexports);
	return failed ? 1 : 0;
}
