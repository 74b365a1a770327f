/*
 * tls_record.h - the TLS record layer of an established connection, the
 * foundation of whole connections across processes (docs/tls-across.md
 * "Step 2: the record layer, built").  Pure: bytes, keys and sequence
 * numbers in, records and decisions out; libcrypto for the AEAD and the
 * key schedules, no system call, no allocation of ours, no globals.
 * Prefix: tlsrec_.
 *
 * The per-direction state is kTLS-shaped (linux/tls.h: version and cipher
 * numbers are the kernel's), so that it maps onto struct
 * tls12_crypto_info_* by copying fields.  Only the AEAD suites of TLS 1.3
 * and of TLS 1.2 ECDHE are supported; anything else is
 * TLSREC_E_UNSUPPORTED: such a connection is not shared.
 *
 * Return convention: >= 0 success (a length or an event), < 0 an error:
 * -A for a protocol error whose TLS alert is A (TLSREC_ALERT_OF), or one of
 * the TLSREC_E_* below (not a peer's fault).
 */
#ifndef KEEPALIVE_TLS_RECORD_H
#define KEEPALIVE_TLS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* linux/tls.h's numbers */
#define TLSREC_V12 0x0303 /* TLS_1_2_VERSION */
#define TLSREC_V13 0x0304 /* TLS_1_3_VERSION */
#define TLSREC_AES_GCM_128 51 /* TLS_CIPHER_AES_GCM_128 */
#define TLSREC_AES_GCM_256 52 /* TLS_CIPHER_AES_GCM_256 */
#define TLSREC_CHACHA20_POLY1305 54 /* TLS_CIPHER_CHACHA20_POLY1305 */

/* record content types (RFC 8446 5.1) */
#define TLSREC_CT_CCS 20
#define TLSREC_CT_ALERT 21
#define TLSREC_CT_HANDSHAKE 22
#define TLSREC_CT_DATA 23

#define TLSREC_HEADER 5
#define TLSREC_TAG 16
#define TLSREC_MAX_PLAIN 16384 /* 2^14 */
/* the longest record body OpenSSL 3.0's reader accepts (measured against
 * libssl 3.0.19, docs/tls-across.md "The reader's errors"): TLS 1.3 2^14 +
 * 256 (RFC 8446 5.2), TLS 1.2 2^14 + 320 (RFC 5246 6.2.3 allows 2^14 +
 * 2048; OpenSSL says "encrypted length too long"); past
 * TLSREC_MAX_PACKET_BODY, whatever the version, its read buffer's limit
 * ("packet length too long") */
#define TLSREC_MAX_BODY_13 (TLSREC_MAX_PLAIN + 256)
#define TLSREC_MAX_BODY_12 (TLSREC_MAX_PLAIN + 320)
#define TLSREC_MAX_PACKET_BODY (TLSREC_MAX_PLAIN + 323)
/* what a sealed record of ours takes at most: header, explicit nonce (TLS
 * 1.2 GCM), 2^14 bytes, the inner type (TLS 1.3), the tag */
#define TLSREC_MAX_SEALED (TLSREC_HEADER + 8 + TLSREC_MAX_PLAIN + 1 + TLSREC_TAG)
/* an out buffer of this size holds any record's opened bytes */
#define TLSREC_OPEN_ROOM TLSREC_MAX_BODY_12

/* alerts (RFC 8446 6) */
#define TLSREC_AD_CLOSE_NOTIFY 0
#define TLSREC_AD_UNEXPECTED_MESSAGE 10
#define TLSREC_AD_BAD_RECORD_MAC 20
#define TLSREC_AD_RECORD_OVERFLOW 22
#define TLSREC_AD_HANDSHAKE_FAILURE 40
#define TLSREC_AD_ILLEGAL_PARAMETER 47
#define TLSREC_AD_DECODE_ERROR 50
#define TLSREC_AD_PROTOCOL_VERSION 70
#define TLSREC_AD_INTERNAL_ERROR 80
#define TLSREC_AD_USER_CANCELED 90
#define TLSREC_AD_NO_RENEGOTIATION 100

/* the reasons OpenSSL 3.0 raises for a peer's error (its SSL_R_ numbers,
 * what the program reads from its error queue: tlsrec_reader.reason) */
#define TLSREC_R_WRONG_VERSION_NUMBER 267
#define TLSREC_R_BAD_RECORD_TYPE 443
#define TLSREC_R_PACKET_LENGTH_TOO_LONG 198
#define TLSREC_R_ENCRYPTED_LENGTH_TOO_LONG 150
#define TLSREC_R_BAD_RECORD_MAC 281 /* DECRYPTION_FAILED_OR_BAD_RECORD_MAC */
#define TLSREC_R_INTERNAL_ERROR (259 | (0x3 << 18)) /* ERR_R_INTERNAL_ERROR */

/* errors that are not the peer's: not an alert number (those are 0-255) */
#define TLSREC_E_UNSUPPORTED (-1000) /* version or cipher we do not carry */
#define TLSREC_E_SPACE (-1001)       /* the caller's buffer is too small */
#define TLSREC_E_CRYPTO (-1002)      /* libcrypto failed (no memory...) */
#define TLSREC_E_SEQ (-1003)         /* the sequence number would wrap */
#define TLSREC_E_TOO_LONG (-1004)    /* more than 2^14 bytes to seal */
#define TLSREC_ALERT_OF(rc) ((rc) < 0 && (rc) > -256 ? -(rc) : -1)

/* One direction of a connection (docs/tls-across.md "The state"). */
struct kp_tls_dir {
	uint16_t version;           /* TLSREC_V12, TLSREC_V13 */
	uint16_t cipher;            /* TLSREC_AES_GCM_128, _AES_GCM_256, _CHACHA20_POLY1305 */
	uint8_t key[32];            /* 16 for AES-128-GCM */
	uint8_t iv[12];             /* TLS 1.3 and 1.2 ChaCha20: the static IV; 1.2 GCM: salt[4], then 0 */
	uint8_t rec_seq[8];         /* big-endian, the next record's number */
	uint8_t traffic_secret[48]; /* TLS 1.3: for KeyUpdate; its length is the suite's hash's */
};

/* The kTLS cipher of a negotiated suite (the IANA number,
 * SSL_CIPHER_get_protocol_id) under a version, or TLSREC_E_UNSUPPORTED. */
int tlsrec_cipher_of(uint16_t version, uint16_t suite);

/* The key length of a cipher (16 or 32), the length of its suite's hash
 * (32 or 48: SHA-384 goes with AES-256-GCM in both versions), 0 when
 * unknown. */
size_t tlsrec_key_len(uint16_t cipher);
size_t tlsrec_hash_len(uint16_t cipher);

/* TLS 1.3: a direction from its traffic secret (hash_len bytes: the
 * keylog's CLIENT_/SERVER_TRAFFIC_SECRET_N), its next record numbered seq.
 * Key and IV by HKDF-Expand-Label (RFC 8446 7.1, 7.3). */
int tlsrec_init13(struct kp_tls_dir *d, uint16_t cipher, const uint8_t *secret, size_t secret_len,
		  uint64_t seq);

/* TLS 1.3 KeyUpdate of a direction (RFC 8446 7.2): the next secret
 * (HKDF-Expand-Label(secret, "traffic upd", "", hash_len)), its key and IV,
 * the sequence number back to 0. */
int tlsrec_key_update(struct kp_tls_dir *d);

/* TLS 1.2 AEAD: both directions from the master secret and the randoms
 * (RFC 5246 6.3: the key block, PRF with the suite's hash; RFC 5288 3,
 * RFC 7905 2), each next record numbered seq (1 after the handshake: the
 * Finished was 0). */
int tlsrec_init12(struct kp_tls_dir *client, struct kp_tls_dir *server, uint16_t cipher,
		  const uint8_t *master, size_t master_len, const uint8_t client_random[32],
		  const uint8_t server_random[32], uint64_t seq);

/* The sequence number of a direction's next record. */
uint64_t tlsrec_seq(const struct kp_tls_dir *d);
void tlsrec_set_seq(struct kp_tls_dir *d, uint64_t seq);

/* Seal len bytes (at most 2^14) of content type `type` as the direction's
 * next record into out (cap bytes; TLSREC_MAX_SEALED always do); the
 * record's length, or < 0 (nothing counted). */
int tlsrec_seal(struct kp_tls_dir *d, uint8_t type, const uint8_t *in, size_t len, uint8_t *out,
		size_t cap);

/* Open one whole record (header and body, rec_len bytes: tlsrec_frame says
 * where it ends) as the direction's next: its content into out (cap bytes;
 * TLSREC_OPEN_ROOM always do), its inner type into *type; the content's
 * length, or < 0 (-bad_record_mac, -record_overflow, -unexpected_message:
 * then nothing counted and the connection is dead). */
int tlsrec_open(struct kp_tls_dir *d, const uint8_t *rec, size_t rec_len, uint8_t *out, size_t cap,
		uint8_t *type);

/* Where the first record of a byte stream ends: its whole length (header
 * and body) when all of it is in buf[0..len), 0 when more bytes are needed
 * (*need: how many in all, when the header is known, else 5), < 0 for a
 * header OpenSSL's reader refuses after the handshake, in its order and
 * with its alert: -protocol_version for a record version whose major is
 * not 3 (TLS 1.2: any but 0x0303); TLS 1.3: -unexpected_message for a
 * content type other than application_data, -decode_error for a version
 * other than 0x0303; -record_overflow for a body past the limits above.
 * (TLS 1.2's content type is checked after the record's tag:
 * tlsrec_open.) */
int tlsrec_frame(uint16_t version, const uint8_t *buf, size_t len, size_t *need);

/* ------------------------------------------------------------ the reader */

/* What the caller must do after a record (tlsrec_read). */
enum tlsrec_event {
	TLSREC_EV_MORE = 0,     /* give more bytes (ev.need in all) */
	TLSREC_EV_DATA,         /* application data: ev.data[0..ev.len) for the program */
	TLSREC_EV_NONE,         /* consumed, nothing for the program (a warning alert, a
				   fragment of a handshake message) */
	TLSREC_EV_CLOSE,        /* close_notify: the EOF the program expects */
	TLSREC_EV_ALERT,        /* a fatal alert from the peer (ev.alert): the error OpenSSL
				   reports, "SSL alert number N" */
	TLSREC_EV_TICKET,       /* TLS 1.3 NewSessionTicket: ev.data[0..ev.len) the whole message */
	TLSREC_EV_KEY_UPDATE,   /* TLS 1.3 KeyUpdate, applied to rx; ev.update_requested: send
				   ours (tlsrec_seal_key_update) before the next write */
	TLSREC_EV_RENEGOTIATE,  /* TLS 1.2 HelloRequest: refuse as the program's SSL would */
};

struct tlsrec_ev {
	enum tlsrec_event what;
	const uint8_t *data;
	size_t len;
	size_t need;           /* MORE: the bytes the next record needs in all */
	uint8_t alert;         /* ALERT: its description */
	bool update_requested; /* KEY_UPDATE */
};

/* The receiving half: its direction, the partial handshake message
 * (post-handshake messages may span records and share them: RFC 8446
 * 5.1), the warning alerts and empty records in a row. */
struct tlsrec_reader {
	struct kp_tls_dir *rx;
	uint8_t *hs;      /* the caller's buffer for handshake messages */
	size_t hs_cap;    /* a message longer than this: -internal_error (not shared) */
	size_t hs_len;    /* bytes of handshake messages in hs */
	size_t hs_done;   /* of which already given out */
	unsigned warnings;
	unsigned empty;   /* records of no content in a row (OpenSSL allows 32) */
	int reason;       /* tlsrec_read's last error: OpenSSL's reason (TLSREC_R_*),
			     0 where we do not claim one */
	uint8_t plain[TLSREC_OPEN_ROOM];
};

void tlsrec_reader_init(struct tlsrec_reader *r, struct kp_tls_dir *rx, uint8_t *hs, size_t hs_cap);

/* Read what buf[0..len) starts with: *used bytes consumed, *ev what to do
 * (data points into the reader: valid until its next call).  Call again
 * while it consumes or gives events; < 0 a fatal error whose alert the
 * program's SSL would send (the connection is then dead). */
int tlsrec_read(struct tlsrec_reader *r, const uint8_t *buf, size_t len, size_t *used,
		struct tlsrec_ev *ev);

/* TLS 1.3: seal a KeyUpdate (update_requested or not) under tx into out,
 * then update tx (RFC 8446 4.6.3: the sender's keys change after it). */
int tlsrec_seal_key_update(struct kp_tls_dir *tx, bool update_requested, uint8_t *out, size_t cap);

/* Seal a close_notify alert (the answer to the program's SSL_shutdown). */
int tlsrec_seal_close_notify(struct kp_tls_dir *tx, uint8_t *out, size_t cap);

/* Wipe a direction's secrets (OPENSSL_cleanse), and a reader's buffers. */
void tlsrec_wipe(struct kp_tls_dir *d);
void tlsrec_reader_wipe(struct tlsrec_reader *r);

/* ------------------------------------------------------------ counting */

/* The sequence numbers from the wire (docs/tls-across.md "Sequence
 * numbers"): fed the bytes one direction carries from the first record
 * under the current keys, counts the whole records whose headers it saw. */
struct tlsrec_counter {
	uint64_t records;   /* whole records seen */
	uint32_t body_left; /* of the current record */
	uint8_t hdr_have;   /* bytes of the current header seen */
	uint8_t hdr[TLSREC_HEADER];
	bool bad;           /* a header no record may have: the count is void */
};

void tlsrec_count(struct tlsrec_counter *c, const uint8_t *buf, size_t len);

/* At a record boundary (nothing partial): the count is the next number. */
bool tlsrec_count_at_boundary(const struct tlsrec_counter *c);

#endif
