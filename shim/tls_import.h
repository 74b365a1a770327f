/*
 * tls_import.h - a TLS connection's state imported from its export
 * message (tls_export.h) into the foreign engine (tls_foreign.h), over a
 * socket through the real functions: the receiving end of
 * docs/tls-across.md "The integration".  The message's bytes are the
 * import's until it is freed (the decoded state points into them), then
 * wiped.
 */
#ifndef KEEPALIVE_TLS_IMPORT_H
#define KEEPALIVE_TLS_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tls_foreign.h"

struct kp_import {
	struct tlsf f;          /* answers the program's SSL_* calls */
	struct tlsx_state st;   /* decoded: points into msg */
	unsigned char *msg;     /* the message (malloc's), wiped at free */
	size_t len;
	int fd;                 /* the socket: read(2) and write(2) as a socket BIO */
	uint64_t written;       /* bytes the socket took (a failed write's records too) */
	uint8_t name[32];       /* the name it was taken under (the next put's) */
	/* the program's own BIOs (curl's) while a call of the program's runs
	 * the engine: its records go through them (kp_tls_import_through) */
	void *rbio, *wbio;
};

/* From now until called again with NULLs, f's records go through the
 * program's BIOs rbio and wbio (BIO *) rather than straight to the
 * socket: for the span of one call of the program's on its SSL, whose own
 * engine would have called them (curl keeps the state of its last I/O in
 * its BIO, and reads its errors from it). */
void kp_tls_import_through(struct tlsf *f, void *rbio, void *wbio);

/* Import the message msg (len bytes, malloc'd: taken, whatever the
 * outcome) for the socket fd, under the program's SSL options and mode.
 * NULL with *why when it does not decode or is not a state the engine
 * carries. */
struct kp_import *kp_tls_import(unsigned char *msg, size_t len, int fd, uint64_t options, uint32_t mode,
				const char **why);

/* Wipe and free. */
void kp_tls_import_free(struct kp_import *im);

#endif
