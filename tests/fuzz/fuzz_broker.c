/*
 * fuzz_broker.c - libFuzzer harness for the broker's message decoder
 * (pool/broker_proto.c, bk_decode): what a hostile or broken peer could
 * send over the broker's socket.
 *
 * Input: a 1-byte control header, then the datagram.
 *   [0]  bits 0-1: the number of fds that came with it (0-3: a reply may
 *        carry the broker's proof beside its connection); bit 2: decode at
 *        the client (else at the broker); bit 3: the kernel said truncated;
 *        bit 4: decode with bk_decode_any (the session messages too: SPUT,
 *        SGET, SREPLY, a struct bk_sess and opaque bytes after the header;
 *        and the TLS connection messages TPUT, TGET, TREPLY: the same,
 *        the connection's fd and record beside a TPUT and an OK TREPLY)
 *
 * abort() unless: the decoder reads only the bytes given (the datagram is
 * in a buffer of its own size: ASan); an accepted message is exactly one
 * struct bk_msg with our magic and version, a type the decoding side takes,
 * the fd count its type, status and proof flag call for, a valid
 * destination (port, family, an IPv4 address with nothing past its 4
 * bytes, no namespace claim) or none at all (HELLO) and a tag that fits;
 * it is accepted the same again; a refused one always says why.
 */
#include <stdbool.h>
#include <sys/socket.h>

#include "broker_proto.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned nfds = data[0] & 3;
	enum bk_side side = (data[0] & 4) ? BK_AT_CLIENT : BK_AT_BROKER;
	int truncated = (data[0] >> 3) & 1;
	size_t len = size - 1;
	char *p = fz_copy(data + 1, len);
	struct bk_msg m, again;
	const char *why = NULL;
	if (data[0] & 16) {
		struct bk_sess sess, sess2;
		size_t off, off2;
		int rc = bk_decode_any(p, len, nfds, truncated, side, &m, &sess, &off, &why);
		if (rc < 0) {
			INVARIANT(rc == -1 && why && *why, "refused without a reason");
			free(p);
			return 0;
		}
		INVARIANT(!truncated && m.magic == BK_MAGIC && m.version == BK_VERSION && !m.reserved, "header");
		if (len == sizeof(m)) {
			INVARIANT(off == 0 && sess.len == 0, "a fixed message with session bytes");
			INVARIANT(m.type >= BK_PUT && m.type <= BK_HELLO, "type %u at the fixed size", m.type);
		} else {
			bool tls = m.type == BK_TPUT || m.type == BK_TGET || m.type == BK_TREPLY;
			bool conn = m.type == BK_TPUT || (m.type == BK_TREPLY && m.status == BK_OK);
			static const struct pool_meta zero_meta;
			INVARIANT(tls || m.type == BK_SPUT || m.type == BK_SGET || m.type == BK_SREPLY, "type %u",
				  m.type);
			INVARIANT(off == sizeof(m) + sizeof(sess) && off + sess.len == len, "bytes %u at %zu of %zu",
				  sess.len, off, len);
			INVARIANT(sess.len <= (tls ? BK_TLS_MAX : BK_SESS_MAX) &&
					  (!sess.tail || ((m.type == BK_TPUT || m.type == BK_TREPLY) && sess.tail <= BK_TAIL_MAX &&
					   sess.tail < sess.len)),
				  "session header");
			INVARIANT(m.key.port && !m.key.netns, "key");
			INVARIANT(conn ? m.meta.tag_len <= POOL_TAG_MAX && m.meta.ka_max >= -1
				       : !memcmp(&m.meta, &zero_meta, sizeof(zero_meta)),
				  "a record where no connection goes");
			if (side == BK_AT_BROKER) {
				INVARIANT(m.type != BK_SREPLY && m.type != BK_TREPLY && !m.status && !m.flags, "request");
				INVARIANT(nfds == (conn ? 1u : 0u), "%u fds with type %u", nfds, m.type);
				INVARIANT((m.type != BK_SPUT && m.type != BK_TPUT) || (sess.len && sess.timeout_s),
					  "put without bytes");
				INVARIANT((m.type != BK_SGET && m.type != BK_TGET) ||
						  (!sess.len && !sess.timeout_s && !sess.flags),
					  "get");
				INVARIANT(!(sess.flags & ~(m.type == BK_SPUT ? BK_S_ONCE : 0u)), "flags");
			} else {
				INVARIANT(m.type == BK_SREPLY || m.type == BK_TREPLY, "type %u at a client", m.type);
				INVARIANT(nfds == (m.flags & BK_F_PROOF ? 1u : 0u) + (conn ? 1u : 0u), "%u fds", nfds);
				INVARIANT((m.status == BK_OK) == (sess.len > 0), "status %u with %u bytes", m.status,
					  sess.len);
			}
		}
		INVARIANT(bk_decode_any(p, len, nfds, truncated, side, &again, &sess2, &off2, &why) == 0 &&
				  !memcmp(&m, &again, sizeof(m)) && !memcmp(&sess, &sess2, sizeof(sess)) && off == off2,
			  "not the same twice");
		free(p);
		return 0;
	}
	int rc = bk_decode(p, len, nfds, truncated, side, &m, &why);
	if (rc < 0) {
		INVARIANT(rc == -1 && why && *why, "refused without a reason");
		free(p);
		return 0;
	}
	INVARIANT(rc == 0, "rc %d", rc);
	INVARIANT(len == sizeof(m) && !truncated, "accepted %zu bytes (truncated %d)", len, truncated);
	INVARIANT(m.magic == BK_MAGIC && m.version == BK_VERSION && !m.reserved, "header");
	if (side == BK_AT_BROKER) {
		INVARIANT(m.type == BK_PUT || m.type == BK_GET || m.type == BK_HELLO, "type %u at the broker",
			  m.type);
		INVARIANT(nfds == (m.type == BK_PUT ? 1u : 0u), "%u fds with type %u", nfds, m.type);
		INVARIANT(m.status == 0 && m.flags == 0, "status in a request");
	} else {
		INVARIANT(m.type == BK_REPLY, "type %u at a client", m.type);
		INVARIANT(m.status == BK_OK || m.status == BK_NONE, "status %u", m.status);
		INVARIANT(!(m.flags & ~BK_F_PROOF), "flags %u", m.flags);
		INVARIANT(nfds == (m.status == BK_OK ? 1u : 0u) + (m.flags & BK_F_PROOF ? 1u : 0u),
			  "%u fds with status %u flags %u", nfds, m.status, m.flags);
	}
	if (m.type == BK_HELLO) {
		static const struct bk_msg zero;
		INVARIANT(!memcmp(&m.key, &zero.key, sizeof(m.key)) && !memcmp(&m.meta, &zero.meta, sizeof(m.meta)),
			  "hello with a key");
	} else if (m.type != BK_REPLY || m.status == BK_OK) {
		/* v2: the key never carries a namespace (docs/broker.md) */
		INVARIANT(m.key.port && !m.key.netns && (m.key.family == AF_INET || m.key.family == AF_INET6),
			  "key");
		if (m.key.family == AF_INET)
			for (int i = 4; i < 16; i++)
				INVARIANT(!m.key.addr[i] && !m.key.scope, "IPv4 key with more");
		INVARIANT(m.meta.tag_len <= POOL_TAG_MAX, "tag_len %u", m.meta.tag_len);
	}
	INVARIANT(bk_decode(p, len, nfds, truncated, side, &again, &why) == 0 &&
			  !memcmp(&m, &again, sizeof(m)),
		  "not the same twice");
	free(p);
	return 0;
}
