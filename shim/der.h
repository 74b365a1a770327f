/*
 * der.h - a TLS session's DER (libssl's SSL_SESSION_ASN1) edited as a
 * handshake before the server's tickets would have left it.  Pure: bytes
 * in, bytes out, no allocation.  Prefix: kp_der_.
 */
#ifndef KEEPALIVE_DER_H
#define KEEPALIVE_DER_H

#include <stddef.h>

/* in (n bytes) without what a TLS 1.3 server's ticket put in it: the
 * session id (the fourth element) empty, and none of [9] ticket lifetime,
 * [10] ticket, [14] ticket age add, [15] max early data.  out has room
 * for n + 4 bytes.  Returns out's length, or 0 when in is not such a DER
 * (or its body would exceed 65535 bytes). */
size_t kp_der_unticketed(const unsigned char *in, size_t n, unsigned char *out);

#endif
