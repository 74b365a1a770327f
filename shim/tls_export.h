/*
 * tls_export.h - a whole TLS connection's state as bytes, for the broker
 * (docs/tls-across.md "Step 2: the record layer, built", "The export
 * message"): what the foreign engine in another process needs to carry the
 * connection on and to answer the program's getters.  Pure: lengths
 * checked, nothing trusted, no system call, no allocation.  Prefix: tlsx_.
 *
 * The decoder points into the bytes it was given (the blobs are not
 * copied): keep them while the state is used, wipe them after
 * (OPENSSL_cleanse: they hold the traffic keys).
 */
#ifndef KEEPALIVE_TLS_EXPORT_H
#define KEEPALIVE_TLS_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tls_record.h"

#define TLSX_MAGIC 0x6b707831u /* "kpx1" */
#define TLSX_MAX 65536         /* a whole message, at most */
#define TLSX_MAX_CHAIN 16      /* certificates in the peer chain */

/* flags */
#define TLSX_RX_UPDATE_PENDING 1 /* TLS 1.3: ours asked for the peer's KeyUpdate before export
				    (docs/tls-across.md "Security"): the receiving keys change
				    when it comes */
#define TLSX_EXTMS 2 /* TLS 1.2: the handshake used the extended master secret (RFC 7627):
			what SSL_get_extms_support answers (TLS 1.3: 0) */
#define TLSX_RI 4 /* TLS 1.2: the server sent renegotiation_info (RFC 5746): what
		     SSL_get_secure_renegotiation_support answers (TLS 1.3: 0) */

struct tlsx_blob {
	const uint8_t *p; /* into the decoded bytes (NULL when len is 0) */
	uint32_t len;
};

struct tlsx_state {
	uint16_t version, cipher;
	uint8_t flags;
	uint16_t group;           /* the negotiated group (IANA number; SSL_get_negotiated_group) */
	uint16_t peer_sigalg;     /* the peer's signature scheme (IANA number), 0: not known */
	uint16_t suite;           /* the suite (IANA number): the cipher's, and in TLS 1.2
				     its key exchange and authentication */
	struct kp_tls_dir tx, rx; /* the client's writing and reading directions */
	/* TLS 1.3: the exporter master secret (hash length); TLS 1.2: the
	 * master secret (48), which with the randoms makes the exporter
	 * (RFC 5705) */
	uint8_t exporter[48];
	uint8_t exporter_len;
	uint8_t client_random[32], server_random[32];
	/* SSL_get_finished, SSL_get_peer_finished: TLS 1.3 the hash length,
	 * 1.2 12 bytes */
	uint8_t finished[48], peer_finished[48];
	uint8_t finished_len, peer_finished_len;
	struct tlsx_blob alpn;    /* the protocol selected, or empty */
	struct tlsx_blob sni;     /* the name sent, or empty */
	struct tlsx_blob session; /* i2d_SSL_SESSION: the program's own session */
	struct tlsx_blob chain;   /* the peer chain: [u32 length][DER] per certificate, >= 1 */
	struct tlsx_blob conf;    /* the record of the configuration (docs/tls.md), opaque here */
	uint32_t chain_count;     /* set by tlsx_decode */
};

/* The message's length for s (> TLSX_MAX: it cannot go). */
size_t tlsx_encoded_len(const struct tlsx_state *s);

/* s as bytes into out (cap bytes): the length, or -1 with *why when s is
 * not a state that decodes (tlsx_decode's checks: such a connection is
 * not exported) or cap is too small. */
int tlsx_encode(const struct tlsx_state *s, uint8_t *out, size_t cap, const char **why);

/* The state the bytes p[0..len) make: 0, or -1 with *why (every length,
 * the version and cipher, the keys' unused bytes zero, the lengths each
 * version calls for, the chain's certificates, nothing left over). */
int tlsx_decode(const uint8_t *p, size_t len, struct tlsx_state *s, const char **why);

/* The i-th certificate (DER) of a decoded state's chain; -1 past the end. */
int tlsx_chain_cert(const struct tlsx_state *s, uint32_t i, const uint8_t **der, uint32_t *len);

/* A group's IANA number (the message's) and OpenSSL's NID for it
 * (SSL_get_negotiated_group's answer: an unknown group's NID is
 * TLSX_NID_UNKNOWN | number, as libssl makes it); 0 both ways: none, or
 * a NID no number is known for. */
#define TLSX_NID_UNKNOWN 0x1000000
int tlsx_group_nid(uint16_t group);
uint16_t tlsx_group_iana(int nid);

/* Wipe the secrets a state holds (not the bytes it points into). */
void tlsx_wipe(struct tlsx_state *s);

#endif
