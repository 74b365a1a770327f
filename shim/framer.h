/*
 * framer.h - pure, incremental HTTP/1.x framing (RFC 9112) and the
 * Connection-header rewrite.  No syscalls, no allocation, no globals:
 * bytes in, boundaries and facts out.  Prefix: frm_.
 *
 * The shim feeds the request framer with what the program writes and the
 * response framer with what the program read (after the real call).  The
 * same functions will later be fed plaintext from SSL_write/SSL_read.
 */
#ifndef KEEPALIVE_FRAMER_H
#define KEEPALIVE_FRAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frm_method {
	FRM_M_OTHER = 0, /* a valid token we do not know: not idempotent */
	FRM_M_GET,
	FRM_M_HEAD,
	FRM_M_OPTIONS,
	FRM_M_TRACE,
	FRM_M_PUT,
	FRM_M_DELETE,
	FRM_M_POST,
	FRM_M_PATCH,
	FRM_M_CONNECT,
};

enum frm_body_kind {
	FRM_BODY_NONE = 0,
	FRM_BODY_LENGTH,  /* Content-Length */
	FRM_BODY_CHUNKED, /* Transfer-Encoding ending in chunked */
	FRM_BODY_CLOSE,   /* responses only: delimited by the server's close */
};

/* The method named by s[0..n) (case-sensitive, RFC 9110 9.1); FRM_M_OTHER
 * for any other token. */
enum frm_method frm_method_id(const char *s, size_t n);

/* ---------------------------------------------------------------- bodies */

/* Incremental body framer shared by requests and responses (Content-Length
 * skipped by arithmetic, chunked decoded as framing only). */
struct frm_body {
	uint8_t kind;    /* enum frm_body_kind */
	uint8_t state;   /* private chunk-parser state */
	bool done;       /* the body (incl. last chunk + trailers) has ended */
	bool doubt;      /* framing found, but only leniently (see below) */
	uint64_t left;   /* LENGTH: bytes left; CHUNKED: bytes left in chunk */
	uint32_t line;   /* private: bytes in the current chunk-size/trailer line */
};

void frm_body_init(struct frm_body *b, enum frm_body_kind kind, uint64_t len);

/* Consume up to len bytes of body.  Returns the number of bytes that belong
 * to this body (<= len; less than len only when the body ended inside buf,
 * b->done is then true), or -1 when the chunked framing is malformed (no end
 * can be found).  FRM_BODY_CLOSE consumes everything and never ends.
 * Lenient where real servers are sloppy, setting b->doubt: SP/HTAB after the
 * chunk size, bare LF instead of CRLF.  Overflowing chunk sizes: -1. */
long frm_body_feed(struct frm_body *b, const char *buf, size_t len);

/* ---------------------------------------------------------------- requests */

/* Facts of one complete request header block. */
struct frm_req_head {
	size_t head_len;          /* bytes up to and including the blank line */
	enum frm_method method;
	uint8_t version_minor;    /* HTTP/1.<minor>: 0 or 1 */
	enum frm_body_kind body_kind; /* NONE, LENGTH or CHUNKED */
	uint64_t body_len;        /* for LENGTH */
	bool app_close;           /* the program expects the server to close:
	                             a close token, or HTTP/1.0 without a
	                             keep-alive token */
	bool has_conn_header;     /* any Connection header present */
	bool keepalive_token;     /* Connection carries keep-alive */
	bool upgrade;             /* Upgrade header, or upgrade token */
	bool idempotency_key;     /* Idempotency-Key header present */
	bool expect_continue;     /* Expect: 100-continue */
	bool conn_bound;          /* Authorization or Proxy-Authorization with
	                             a scheme that logs the connection in (NTLM,
	                             Negotiate, Kerberos): never pool it */
	bool doubt;               /* odd but parseable (obs-fold, bare LF, TE+CL
	                             ...): do not rewrite, do not pool */
	uint32_t ua_hash;         /* the User-Agent value(s) hashed, 0: none (a
	                             server may end a TLS connection by it:
	                             docs/tls.md "Ragged closes") */
	/* for frm_req_rewrite_head: the values of the Connection field lines
	 * ([start, end) offsets, OWS trimmed; the first FRM_CONN_LINES of
	 * them), how many there are (saturating at 255) and whether one
	 * carries a close token; a head whose lines were not recorded
	 * (conn_lines 0 but has_conn_header, or more than FRM_CONN_LINES) is
	 * read again whole */
#define FRM_CONN_LINES 2
	uint32_t conn_val[FRM_CONN_LINES][2];
	uint8_t conn_lines;
	bool close_token;
};

/* Parse the request header block at the start of buf.
 * Returns head_len (> 0) when the block is complete (facts in *out),
 * 0 when more bytes are needed (everything seen so far is plausible HTTP),
 * -1 when this is not an HTTP/1.x request or is malformed (including a TLS
 * ClientHello: 0x16 0x03..., HTTP/2 preface, a method that is not a token,
 * a request line or header block over FRM_MAX_HEAD bytes).  Decides -1 as
 * early as the bytes allow (the first byte for TLS). */
#define FRM_MAX_HEAD (64 * 1024)
long frm_req_parse_head(const char *buf, size_t len, struct frm_req_head *out);

/* Rewrite a complete request header block (as parsed into *h) so that the
 * server keeps the connection open: every "close" token of every Connection
 * header becomes "keep-alive" (other tokens and all other bytes kept as they
 * are, e.g. "Connection: TE, close" -> "Connection: TE, keep-alive"); an
 * HTTP/1.0 request without a keep-alive token gets "Connection: keep-alive"
 * (added as a new header line before the blank line if it had no Connection
 * header, or the token appended to the existing header).
 * Writes into out (cap out_cap).  Returns the new length, 0 when no change is
 * needed or the rewritten head would reach FRM_MAX_HEAD, which
 * frm_req_parse_head refuses (out's contents then undefined: the head goes
 * as it is), -1 when out_cap is too small. */
long frm_req_rewrite_head(const char *head, const struct frm_req_head *h,
			  char *out, size_t out_cap);

/* ---------------------------------------------------------------- responses */

enum frm_resp_event {
	FRM_EV_NONE = 0,   /* all bytes consumed, response not finished */
	FRM_EV_INTERIM,    /* a 1xx (not 101) ended; the final response follows */
	FRM_EV_DONE,       /* the final response ended exactly here */
	FRM_EV_CLOSE_BODY, /* head ended; body is close-delimited (to EOF) */
	FRM_EV_UPGRADE,    /* 101, or 2xx to CONNECT: head ended; what follows
	                      is not HTTP */
	FRM_EV_ERROR,      /* malformed: the end cannot be found */
	FRM_EV_INSERT,     /* insert_close: the blank line ending a final
	                      response head that says nothing of closing
	                      begins right here; the caller shows the
	                      program FRM_CLOSE_LINE before it, then feeds
	                      the rest (the framer is not changed by it) */
};

/* What FRM_EV_INSERT asks the caller to show (docs/replay.md) */
#define FRM_CLOSE_LINE "Connection: close\r\n"
#define FRM_CLOSE_LINE_LEN (sizeof(FRM_CLOSE_LINE) - 1)

struct frm_resp {
	/* set by the caller before the first feed (frm_resp_begin) */
	enum frm_method req_method;
	bool rewrite_ka_to_close; /* show "Connection: keep-alive" to the
	                             program as "Connection:      close":
	                             the same length, the spaces before the
	                             value (see frm_resp_feed) */
	bool insert_close;        /* the program asked to close and we
	                             rewrote: a final HTTP/1.1 head with no
	                             close token (and no keep-alive one the
	                             mask turns into close) stops once with
	                             FRM_EV_INSERT before its blank line.
	                             Set after frm_resp_begin(); kept across
	                             interim responses */
	/* facts, valid once the head is parsed */
	uint16_t status;
	uint8_t version_minor;
	bool head_done;
	bool server_close;   /* Connection: close, or HTTP/1.0 without
	                        keep-alive: the server will close */
	bool conn_bound;     /* WWW-/Proxy-Authenticate: NTLM or Negotiate */
	bool doubt;          /* framed, but not safe to reuse (TE+CL, obs-fold,
	                        bare LF, lenient chunk size, ...) */
	int32_t ka_timeout;  /* Keep-Alive: timeout=N seconds, -1 if absent */
	int32_t ka_max;      /* Keep-Alive: max=M, -1 if absent */
	struct frm_body body;
	/* private parser state */
	uint8_t st;
	uint8_t hdr;          /* which header we are in */
	uint8_t mask_pos;     /* the keep-alive mask's place in a Connection
	                         list element (framer.c mask_byte) */
	uint16_t vlen;        /* bytes in val[] */
	uint32_t line_len;
	uint64_t clen;
	bool have_clen, have_te, te_chunked_last, ka_token, close_token;
	bool close_inserted;  /* FRM_EV_INSERT was given for this head */
	char val[256];        /* value of the current interesting header */
};

/* Start framing a response to a request with method m. */
void frm_resp_begin(struct frm_resp *r, enum frm_method m, bool rewrite_ka_to_close);

/* Feed bytes the program has read.  Returns the number of bytes consumed
 * (<= len) and sets *ev.  Consumption stops right after an event boundary
 * (INTERIM, DONE, CLOSE_BODY, UPGRADE), so the caller loops over the rest.
 * After INTERIM the framer is ready for the final response of the same
 * request; after DONE call frm_resp_begin again for the next request.
 * buf is written only when rewrite_ka_to_close is set, only inside
 * Connection header values: each byte of a "keep-alive" list element
 * becomes, as it passes, the byte at the same offset of "     close" (OWS
 * then close: the program reads the value as exactly "close", never
 * "keep-alive", and the same bytes however the response is split). */
size_t frm_resp_feed(struct frm_resp *r, char *buf, size_t len, enum frm_resp_event *ev);

/* May this (DONE) response leave the connection reusable? (not
 * server_close, not doubt, not conn_bound, explicit framing) */
bool frm_resp_reusable(const struct frm_resp *r);

/* Is r inside a final response's body (delimited: by length or chunks)?
 * Its bytes are then the program's as the server sent them: feeding them
 * writes nothing (the mask and the close line live in the head). */
bool frm_resp_in_body(const struct frm_resp *r);

#endif
