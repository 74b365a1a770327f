/* der.c - a TLS session's DER without its ticket (der.h). */
#include "der.h"

#include <stdbool.h>
#include <string.h>

/* One DER element at p (at most n bytes): its header's size in *hdr, its
 * size with the header in *total; false when it is not one.  Definite
 * lengths of up to 3 bytes only (a session is far smaller). */
static bool element(const unsigned char *p, size_t n, size_t *hdr, size_t *total)
{
	if (n < 2)
		return false;
	size_t len = p[1], h = 2;
	if (len & 0x80) {
		size_t k = len & 0x7f;
		if (k == 0 || k > 3 || n - 2 < k)
			return false;
		len = 0;
		for (size_t i = 0; i < k; i++)
			len = len << 8 | p[2 + i];
		h += k;
	}
	if (len > n - h)
		return false;
	*hdr = h;
	*total = h + len;
	return true;
}

/* [9], [10], [14], [15], explicit and constructed: what the ticket set */
static bool ticket_field(unsigned char tag)
{
	return tag == 0xa9 || tag == 0xaa || tag == 0xae || tag == 0xaf;
}

size_t kp_der_unticketed(const unsigned char *in, size_t n, unsigned char *out)
{
	size_t hdr, total;
	if (!element(in, n, &hdr, &total) || in[0] != 0x30 || total != n)
		return 0;
	/* the body first, after room for the longest header written */
	unsigned char *b = out + 4;
	size_t body = 0, at = hdr, idx = 0;
	while (at < n) {
		size_t eh, et;
		if (!element(in + at, n - at, &eh, &et))
			return 0;
		unsigned char tag = in[at];
		if (idx == 3) { /* the session id, an OCTET STRING */
			if (tag != 0x04)
				return 0;
			b[body++] = 0x04;
			b[body++] = 0;
		} else if (!ticket_field(tag)) {
			memcpy(b + body, in + at, et);
			body += et;
		}
		at += et;
		idx++;
	}
	if (idx < 4 || body > 0xffff)
		return 0;
	size_t h = body < 0x80 ? 2 : body < 0x100 ? 3 : 4;
	unsigned char head[4] = { 0x30, (unsigned char)body, 0, 0 };
	if (h == 3) {
		head[1] = 0x81;
		head[2] = (unsigned char)body;
	} else if (h == 4) {
		head[1] = 0x82;
		head[2] = (unsigned char)(body >> 8);
		head[3] = (unsigned char)body;
	}
	memmove(out + h, b, body);
	memcpy(out, head, h);
	return h + body;
}
