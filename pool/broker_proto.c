/*
 * broker_proto.c - encoding and checking the broker's messages (see
 * broker_proto.h).  Pure: no syscalls, no allocation.
 */
#include "broker_proto.h"

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

void bk_encode(struct bk_msg *m, enum bk_type type, enum bk_status status, uint32_t flags,
	       const struct pool_key *key, const struct pool_meta *meta)
{
	memset(m, 0, sizeof(*m));
	m->magic = BK_MAGIC;
	m->version = BK_VERSION;
	m->type = (uint16_t)type;
	m->status = (uint32_t)status;
	m->flags = flags;
	if (key) {
		m->key = *key;
		m->key.netns = 0;
	}
	if (meta)
		m->meta = *meta;
}

static int key_ok(const struct pool_key *k)
{
	static const uint8_t zero[12];
	if (!k->port || k->netns)
		return 0;
	if (k->family == AF_INET)
		return !k->scope && !memcmp(k->addr + 4, zero, sizeof(zero));
	return k->family == AF_INET6;
}

#define REFUSE(text)             \
	do {                     \
		*why = (text);   \
		return -1;       \
	} while (0)

int bk_decode(const void *buf, size_t len, unsigned nfds, int truncated, enum bk_side side,
	      struct bk_msg *out, const char **why)
{
	if (truncated || len > sizeof(*out))
		REFUSE("oversized message");
	if (len < sizeof(*out))
		REFUSE("short message");
	memcpy(out, buf, sizeof(*out)); /* buf may be unaligned */
	if (out->magic != BK_MAGIC)
		REFUSE("bad magic");
	if (out->version != BK_VERSION)
		REFUSE("unknown protocol version");
	if (out->reserved)
		REFUSE("reserved field set");
	switch (out->type) {
	case BK_PUT:
	case BK_GET:
	case BK_HELLO:
		if (side != BK_AT_BROKER)
			REFUSE("request sent to a client");
		if (out->status || out->flags)
			REFUSE("status set in a request");
		if (nfds != (out->type == BK_PUT ? 1u : 0u))
			REFUSE(out->type == BK_PUT ? "put without exactly one fd" : "request with an fd");
		if (out->type == BK_HELLO) {
			static const struct bk_msg zero;
			if (memcmp(&out->key, &zero.key, sizeof(zero.key)) ||
			    memcmp(&out->meta, &zero.meta, sizeof(zero.meta)))
				REFUSE("hello with a key");
			return 0;
		}
		break;
	case BK_REPLY:
		if (side != BK_AT_CLIENT)
			REFUSE("reply sent to the broker");
		if (out->status != BK_OK && out->status != BK_NONE)
			REFUSE("unknown reply status");
		if (out->flags & ~BK_F_PROOF)
			REFUSE("unknown reply flags");
		if (nfds != (out->status == BK_OK ? 1u : 0u) + (out->flags & BK_F_PROOF ? 1u : 0u))
			REFUSE("reply fd count does not match its status");
		if (out->status == BK_NONE)
			return 0;
		break;
	default:
		REFUSE("unknown message type");
	}
	if (!key_ok(&out->key))
		REFUSE("bad destination key");
	if (out->meta.tag_len > POOL_TAG_MAX)
		REFUSE("tag too long");
	if (out->type != BK_GET && out->meta.ka_max < -1)
		REFUSE("bad keep-alive max");
	return 0;
}

static int sess_type(uint16_t t)
{
	return t >= BK_SPUT && t <= BK_TREPLY;
}

static int tls_type(uint16_t t)
{
	return t == BK_TPUT || t == BK_TGET || t == BK_TREPLY;
}

/* The struct bk_sess and the fds of a message after the fixed header:
 * a session message carries no fd and no connection record; a TLS one
 * carries its connection (one fd, its record) in TPUT and an OK TREPLY,
 * nothing else in TGET and a NONE TREPLY. */
static int sess_check(const struct bk_msg *out, const struct bk_sess *sess, unsigned nfds, enum bk_side side,
		      const char **why)
{
	static const struct pool_meta zero_meta;
	bool tls = tls_type(out->type);
	bool conn = out->type == BK_TPUT || (out->type == BK_TREPLY && out->status == BK_OK);
	if (!conn && memcmp(&out->meta, &zero_meta, sizeof(zero_meta)))
		REFUSE(tls ? "TLS message with a connection record and no connection"
			   : "session message with a connection record");
	if (conn && out->meta.tag_len > POOL_TAG_MAX)
		REFUSE("tag too long");
	if (conn && out->meta.ka_max < -1)
		REFUSE("bad keep-alive max");
	if (out->type == BK_SREPLY || out->type == BK_TREPLY) {
		if (side != BK_AT_CLIENT)
			REFUSE("reply sent to the broker");
		if (out->status != BK_OK && out->status != BK_NONE)
			REFUSE("unknown reply status");
		if (out->flags & ~BK_F_PROOF)
			REFUSE("unknown reply flags");
		if (nfds != (out->flags & BK_F_PROOF ? 1u : 0u) + (conn ? 1u : 0u))
			REFUSE(tls ? "reply fd count does not match its status"
				   : "reply fd count does not match its flags");
		if (sess->timeout_s || sess->flags)
			REFUSE("session reply with a lifetime");
		if ((out->status == BK_OK) != (sess->len > 0))
			REFUSE("session reply length does not match its status");
		return 0;
	}
	if (side != BK_AT_BROKER)
		REFUSE("request sent to a client");
	if (out->status || out->flags)
		REFUSE("status set in a request");
	if (nfds != (conn ? 1u : 0u))
		REFUSE(conn ? "TLS put without exactly one fd" : "request with an fd");
	if ((out->type == BK_SGET || out->type == BK_TGET) &&
	    (sess->len || sess->timeout_s || (sess->flags & ~(out->type == BK_TGET ? BK_S_ANY : 0u))))
		REFUSE("session request with bytes");
	if (out->type == BK_TGET && (sess->flags & BK_S_ANY) &&
	    memcmp(sess->name, (const uint8_t[BK_SESS_NAME]){ 0 }, BK_SESS_NAME))
		REFUSE("TLS request for any name with a name");
	if ((out->type == BK_SPUT || out->type == BK_TPUT) && (!sess->len || !sess->timeout_s))
		REFUSE("session without bytes or lifetime");
	if (sess->flags & ~(out->type == BK_SPUT ? BK_S_ONCE : out->type == BK_TGET ? BK_S_ANY : 0u))
		REFUSE("unknown session flags");
	return 0;
}

int bk_decode_any(const void *buf, size_t len, unsigned nfds, int truncated, enum bk_side side,
		  struct bk_msg *out, struct bk_sess *sess, size_t *blob_off, const char **why)
{
	memset(sess, 0, sizeof(*sess));
	*blob_off = 0;
	if (truncated || len > BK_MSG_MAX)
		REFUSE("oversized message");
	if (len <= sizeof(*out)) {
		if (bk_decode(buf, len, nfds, truncated, side, out, why) < 0)
			return -1;
		return 0;
	}
	if (len < sizeof(*out) + sizeof(*sess))
		REFUSE("short message");
	memcpy(out, buf, sizeof(*out));
	memcpy(sess, (const char *)buf + sizeof(*out), sizeof(*sess));
	if (out->magic != BK_MAGIC)
		REFUSE("bad magic");
	if (out->version != BK_VERSION)
		REFUSE("unknown protocol version");
	if (out->reserved)
		REFUSE("reserved field set");
	if (!sess_type(out->type))
		REFUSE(out->type >= BK_PUT && out->type <= BK_HELLO ? "oversized message"
								     : "unknown message type");
	/* a session is at most BK_SESS_MAX bytes; a TLS state BK_TLS_MAX */
	if (!tls_type(out->type) && len > BK_SESS_MSG_MAX)
		REFUSE("oversized message");
	if (sess->tail && ((out->type != BK_TPUT && out->type != BK_TREPLY) || sess->tail > BK_TAIL_MAX ||
			   sess->tail >= sess->len))
		REFUSE(out->type != BK_TPUT && out->type != BK_TREPLY ? "reserved field set" : "bad tail length");
	if ((size_t)sess->len != len - sizeof(*out) - sizeof(*sess))
		REFUSE("session length does not match the message");
	if (sess_check(out, sess, nfds, side, why) < 0)
		return -1;
	if (!key_ok(&out->key))
		REFUSE("bad destination key");
	*blob_off = sizeof(*out) + sizeof(*sess);
	return 0;
}

void bk_cmsg_put(struct msghdr *mh, void *ctl, const int *fds, unsigned n)
{
	if (!n)
		return;
	mh->msg_control = ctl;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * n);
	struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
}

unsigned bk_cmsg_fds(struct msghdr *mh, int *fds, unsigned cap)
{
	unsigned n = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t j = 0; j < k && n < cap; j++)
			memcpy(&fds[n++], CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
	}
	return n;
}
