/*
 * test_broker_proto.c - the broker's message checks (pool/broker_proto.c):
 * every well-formed message passes, and every way of being malformed
 * (length, magic, version, type for the wrong side, fd count, key, tag) is
 * refused with a reason; each message is decoded from right before a
 * PROT_NONE guard page, so an over-read crashes.  Also the pool calls the
 * broker relies on: pool_take_fd, pool_next_expiry and the eviction hook.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define GUARD_AREA 131072 /* a TLS state message: BK_MSG_MAX + 1 */
#include "broker_proto.h"
#include "guard.h"
#include "pool.h"

#include "check.h"

static struct pool_key key4(uint16_t port)
{
	struct pool_key k;
	memset(&k, 0, sizeof(k));
	k.family = AF_INET;
	k.port = port;
	inet_pton(AF_INET, "127.0.0.1", k.addr);
	return k;
}

/* decode m (len bytes of it) from behind a guard page */
static int decode(const struct bk_msg *m, size_t len, unsigned nfds, int trunc, enum bk_side side,
		  const char **why)
{
	struct bk_msg out;
	const char *buf = guarded((const char *)m, len);
	*why = NULL;
	int r = bk_decode(buf, len, nfds, trunc, side, &out, why);
	if (r == 0)
		CHECK(!memcmp(&out, m, sizeof(out)));
	else
		CHECK(*why != NULL);
	return r;
}

static int refused(const struct bk_msg *m, unsigned nfds, enum bk_side side, const char *want)
{
	const char *why;
	int r = decode(m, sizeof(*m), nfds, 0, side, &why);
	if (r == 0 || !why || !strstr(why, want)) {
		fprintf(stderr, "  want refusal containing '%s', got %s\n", want, why ? why : "(accepted)");
		return 0;
	}
	return 1;
}

/* a session message in buf: header, struct bk_sess, n bytes */
static void sess_msg(unsigned char *buf, enum bk_type type, enum bk_status status, uint32_t flags,
		     uint32_t timeout, uint32_t sflags, size_t n, const struct pool_key *k)
{
	struct bk_msg h;
	struct bk_sess sh;
	bk_encode(&h, type, status, flags, k, NULL);
	memset(&sh, 0, sizeof(sh));
	memset(sh.name, 0xab, sizeof(sh.name));
	sh.timeout_s = timeout;
	sh.flags = sflags;
	sh.len = (uint32_t)n;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &sh, sizeof(sh));
	if (n)
		memset(buf + sizeof(h) + sizeof(sh), 0x5a, n);
}

static int closed_fd = -1, evicted_fd = -1;
static int fake_close(int fd)
{
	closed_fd = fd;
	return 0;
}
static int fake_alive(int fd)
{
	return 1;
}
static int take_evicted(int fd, const struct pool_key *k, const struct pool_meta *m)
{
	evicted_fd = fd;
	return 0;
}

int main(void)
{
	struct pool_key k = key4(8080);
	struct pool_meta meta = { .requests = 3, .ka_timeout = -1, .ka_max = -1, .tag_len = 5 };
	struct bk_msg m, bad;
	const char *why;

	guard_init();
	/* the well-formed ones */
	bk_encode(&m, BK_PUT, BK_OK, 0, &k, &meta);
	CHECK(decode(&m, sizeof(m), 1, 0, BK_AT_BROKER, &why) == 0);
	bk_encode(&m, BK_GET, BK_OK, 0, &k, NULL);
	CHECK(decode(&m, sizeof(m), 0, 0, BK_AT_BROKER, &why) == 0);
	bk_encode(&m, BK_REPLY, BK_OK, 0, &k, &meta);
	CHECK(decode(&m, sizeof(m), 1, 0, BK_AT_CLIENT, &why) == 0);
	bk_encode(&m, BK_REPLY, BK_NONE, 0, &k, NULL);
	CHECK(decode(&m, sizeof(m), 0, 0, BK_AT_CLIENT, &why) == 0);
	struct pool_key k6 = k;
	k6.family = AF_INET6;
	inet_pton(AF_INET6, "::1", k6.addr);
	bk_encode(&m, BK_GET, BK_OK, 0, &k6, NULL);
	CHECK(decode(&m, sizeof(m), 0, 0, BK_AT_BROKER, &why) == 0);
	/* v2: HELLO, and the broker's proof beside a reply's connection */
	bk_encode(&m, BK_HELLO, BK_OK, 0, NULL, NULL);
	CHECK(decode(&m, sizeof(m), 0, 0, BK_AT_BROKER, &why) == 0);
	bk_encode(&m, BK_REPLY, BK_OK, BK_F_PROOF, &k, &meta);
	CHECK(decode(&m, sizeof(m), 2, 0, BK_AT_CLIENT, &why) == 0);
	bk_encode(&m, BK_REPLY, BK_NONE, BK_F_PROOF, NULL, NULL);
	CHECK(decode(&m, sizeof(m), 1, 0, BK_AT_CLIENT, &why) == 0);
	/* the key's namespace is never the sender's word: encode zeroes it */
	{
		struct pool_key kn = k;
		kn.netns = 99;
		bk_encode(&m, BK_GET, BK_OK, 0, &kn, NULL);
		CHECK(m.key.netns == 0);
	}

	/* length: every shorter prefix, one byte more, the kernel's truncation */
	bk_encode(&m, BK_PUT, BK_OK, 0, &k, &meta);
	for (size_t len = 0; len < sizeof(m); len++)
		CHECK(decode(&m, len, 1, 0, BK_AT_BROKER, &why) < 0 && strstr(why, "short"));
	{
		char big[sizeof(m) + 1] = { 0 };
		memcpy(big, &m, sizeof(m));
		struct bk_msg out;
		CHECK(bk_decode(big, sizeof(big), 1, 0, BK_AT_BROKER, &out, &why) < 0 &&
		      strstr(why, "oversized"));
	}
	CHECK(decode(&m, sizeof(m), 1, 1, BK_AT_BROKER, &why) < 0 && strstr(why, "oversized"));

	/* header fields */
	bad = m, bad.magic ^= 1;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "magic"));
	bad = m, bad.version = 1; /* v1 took a namespace claim */
	CHECK(refused(&bad, 1, BK_AT_BROKER, "version"));
	bad = m, bad.reserved = 1;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "reserved"));
	bad = m, bad.type = 0;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "type"));
	bad = m, bad.type = 99;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "type"));
	bad = m, bad.status = 1;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "status"));
	bad = m, bad.flags = BK_F_PROOF;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "status"));
	bad = m, bad.key.netns = 4026531840u; /* a claim of the host's namespace */
	CHECK(refused(&bad, 1, BK_AT_BROKER, "key"));
	bk_encode(&bad, BK_HELLO, BK_OK, 0, &k, NULL);
	CHECK(refused(&bad, 0, BK_AT_BROKER, "hello with a key"));
	bk_encode(&bad, BK_HELLO, BK_OK, 0, NULL, NULL);
	CHECK(refused(&bad, 1, BK_AT_BROKER, "fd"));
	bk_encode(&bad, BK_REPLY, BK_OK, BK_F_PROOF, &k, &meta);
	CHECK(refused(&bad, 1, BK_AT_CLIENT, "fd"));
	bk_encode(&bad, BK_REPLY, BK_NONE, 4, NULL, NULL);
	CHECK(refused(&bad, 0, BK_AT_CLIENT, "flags"));

	/* the wrong side, the wrong number of fds */
	CHECK(refused(&m, 1, BK_AT_CLIENT, "client"));
	CHECK(refused(&m, 0, BK_AT_BROKER, "fd"));
	CHECK(refused(&m, 2, BK_AT_BROKER, "fd"));
	bk_encode(&bad, BK_GET, BK_OK, 0, &k, NULL);
	CHECK(refused(&bad, 1, BK_AT_BROKER, "fd"));
	bk_encode(&bad, BK_REPLY, BK_OK, 0, &k, &meta);
	CHECK(refused(&bad, 1, BK_AT_BROKER, "broker"));
	CHECK(refused(&bad, 0, BK_AT_CLIENT, "fd"));
	bk_encode(&bad, BK_REPLY, BK_NONE, 0, &k, NULL);
	CHECK(refused(&bad, 1, BK_AT_CLIENT, "fd"));
	bad.status = 7;
	CHECK(refused(&bad, 0, BK_AT_CLIENT, "status"));

	/* the key and the record */
	bad = m, bad.key.family = AF_UNIX;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "key"));
	bad = m, bad.key.port = 0;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "key"));
	bad = m, bad.key.addr[9] = 1; /* IPv4 with bytes past its 4 */
	CHECK(refused(&bad, 1, BK_AT_BROKER, "key"));
	bad = m, bad.key.scope = 3;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "key"));
	bad = m, bad.meta.tag_len = POOL_TAG_MAX + 1;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "tag"));
	bad = m, bad.meta.ka_max = -5;
	CHECK(refused(&bad, 1, BK_AT_BROKER, "max"));

	/* session messages (SPUT, SGET, SREPLY): a struct bk_sess and the
	 * bytes after the header, decoded by bk_decode_any */
	{
		static unsigned char buf[BK_MSG_MAX + 1];
		struct bk_msg h, out;
		struct bk_sess sh, so;
		(void)sh;
		size_t off;
		const char *w;
#define SESS(t, st, fl, to, sf, n) sess_msg(buf, t, st, fl, to, sf, n, &k)
#define DEC(len, nfds, side) bk_decode_any(guarded((const char *)buf, len), len, nfds, 0, side, &out, &so, &off, &w)
		size_t L = sizeof(h) + sizeof(sh);
		SESS(BK_SPUT, BK_OK, 0, 300, BK_S_ONCE, 100);
		CHECK(DEC(L + 100, 0, BK_AT_BROKER) == 0 && off == L && so.len == 100 && so.timeout_s == 300 &&
		      so.flags == BK_S_ONCE && !memcmp(&out.key, &k, sizeof(k)));
		CHECK(DEC(L + 100, 0, BK_AT_CLIENT) < 0 && strstr(w, "client"));
		CHECK(DEC(L + 100, 1, BK_AT_BROKER) < 0 && strstr(w, "fd"));
		CHECK(DEC(L + 99, 0, BK_AT_BROKER) < 0 && strstr(w, "length"));
		for (size_t len = sizeof(h) + 1; len < L; len++)
			CHECK(DEC(len, 0, BK_AT_BROKER) < 0 && strstr(w, "short"));
		SESS(BK_SPUT, BK_OK, 0, 0, 0, 10); /* no lifetime */
		CHECK(DEC(L + 10, 0, BK_AT_BROKER) < 0 && strstr(w, "lifetime"));
		SESS(BK_SPUT, BK_OK, 0, 10, 2, 10); /* an unknown flag */
		CHECK(DEC(L + 10, 0, BK_AT_BROKER) < 0 && strstr(w, "flags"));
		SESS(BK_SPUT, BK_OK, 0, 10, 0, BK_SESS_MAX);
		CHECK(DEC(L + BK_SESS_MAX, 0, BK_AT_BROKER) == 0);
		SESS(BK_SPUT, BK_OK, 0, 10, 0, BK_SESS_MAX + 1);
		CHECK(DEC(L + BK_SESS_MAX + 1, 0, BK_AT_BROKER) < 0 && strstr(w, "oversized"));
		SESS(BK_SGET, BK_OK, 0, 0, 0, 0);
		CHECK(DEC(L, 0, BK_AT_BROKER) == 0 && so.len == 0);
		SESS(BK_SGET, BK_OK, 0, 0, 0, 4); /* a GET carries no bytes */
		CHECK(DEC(L + 4, 0, BK_AT_BROKER) < 0 && strstr(w, "bytes"));
		SESS(BK_SREPLY, BK_OK, 0, 0, 0, 50);
		CHECK(DEC(L + 50, 0, BK_AT_CLIENT) == 0 && so.len == 50);
		CHECK(DEC(L + 50, 0, BK_AT_BROKER) < 0 && strstr(w, "broker"));
		SESS(BK_SREPLY, BK_OK, BK_F_PROOF, 0, 0, 50);
		CHECK(DEC(L + 50, 1, BK_AT_CLIENT) == 0);
		CHECK(DEC(L + 50, 0, BK_AT_CLIENT) < 0 && strstr(w, "fd"));
		SESS(BK_SREPLY, BK_NONE, 0, 0, 0, 0);
		CHECK(DEC(L, 0, BK_AT_CLIENT) == 0);
		SESS(BK_SREPLY, BK_NONE, 0, 0, 0, 5); /* none, with bytes */
		CHECK(DEC(L + 5, 0, BK_AT_CLIENT) < 0 && strstr(w, "status"));
		SESS(BK_SREPLY, BK_OK, 0, 0, 0, 0); /* ok, without */
		CHECK(DEC(L, 0, BK_AT_CLIENT) < 0 && strstr(w, "status"));
		SESS(BK_SREPLY, BK_OK, 0, 9, 0, 3); /* a lifetime in a reply */
		CHECK(DEC(L + 3, 0, BK_AT_CLIENT) < 0 && strstr(w, "lifetime"));
		/* a fixed message made longer is refused, not read as a session */
		SESS(BK_GET, BK_OK, 0, 0, 0, 0);
		CHECK(DEC(L, 0, BK_AT_BROKER) < 0 && strstr(w, "oversized"));
		/* and a session type at the fixed size is not one */
		bk_encode(&h, BK_SGET, BK_OK, 0, &k, NULL);
		memcpy(buf, &h, sizeof(h));
		CHECK(DEC(sizeof(h), 0, BK_AT_BROKER) < 0 && strstr(w, "type"));
		/* a session message with a connection record, a bad key */
		SESS(BK_SPUT, BK_OK, 0, 10, 0, 10);
		((struct bk_msg *)buf)->meta.requests = 1;
		CHECK(DEC(L + 10, 0, BK_AT_BROKER) < 0 && strstr(w, "record"));
		SESS(BK_SPUT, BK_OK, 0, 10, 0, 10);
		((struct bk_msg *)buf)->key.port = 0;
		CHECK(DEC(L + 10, 0, BK_AT_BROKER) < 0 && strstr(w, "key"));
		SESS(BK_SPUT, BK_OK, 0, 10, 0, 10);
		((struct bk_sess *)(buf + sizeof(h)))->tail = 1;
		CHECK(DEC(L + 10, 0, BK_AT_BROKER) < 0 && strstr(w, "reserved"));

		/* TLS connection messages (TPUT, TGET, TREPLY): the state's
		 * bytes as a session's, up to BK_TLS_MAX, and the connection
		 * beside it (one fd and its record) in TPUT and an OK TREPLY */
#define WITH_META(m) (((struct bk_msg *)buf)->meta = (m))
		SESS(BK_TPUT, BK_OK, 0, 60, 0, 2000);
		WITH_META(meta);
		CHECK(DEC(L + 2000, 1, BK_AT_BROKER) == 0 && off == L && so.len == 2000 && so.timeout_s == 60 &&
		      out.meta.requests == 3 && out.meta.tag_len == 5 && !memcmp(&out.key, &k, sizeof(k)));
		CHECK(DEC(L + 2000, 0, BK_AT_BROKER) < 0 && strstr(w, "exactly one fd"));
		CHECK(DEC(L + 2000, 2, BK_AT_BROKER) < 0 && strstr(w, "exactly one fd"));
		CHECK(DEC(L + 2000, 1, BK_AT_CLIENT) < 0 && strstr(w, "client"));
		CHECK(DEC(L + 1999, 1, BK_AT_BROKER) < 0 && strstr(w, "length"));
		SESS(BK_TPUT, BK_OK, 0, 60, 0, BK_TLS_MAX); /* the whole export message's bound */
		CHECK(DEC(L + BK_TLS_MAX, 1, BK_AT_BROKER) == 0 && so.len == BK_TLS_MAX);
		SESS(BK_TPUT, BK_OK, 0, 60, 0, BK_TLS_MAX + 1);
		CHECK(DEC(L + BK_TLS_MAX + 1, 1, BK_AT_BROKER) < 0 && strstr(w, "oversized"));
		/* a tail (the sealed close_notify): shorter than the bytes, at
		 * most BK_TAIL_MAX, in TPUT only */
#define WITH_TAIL(n) (((struct bk_sess *)(buf + sizeof(h)))->tail = (n))
		SESS(BK_TPUT, BK_OK, 0, 60, 0, 2000);
		WITH_META(meta);
		WITH_TAIL(24);
		CHECK(DEC(L + 2000, 1, BK_AT_BROKER) == 0 && so.tail == 24 && so.len == 2000);
		WITH_TAIL(BK_TAIL_MAX + 1);
		CHECK(DEC(L + 2000, 1, BK_AT_BROKER) < 0 && strstr(w, "tail"));
		SESS(BK_TPUT, BK_OK, 0, 60, 0, 10);
		WITH_META(meta);
		WITH_TAIL(10);
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "tail"));
		SESS(BK_SPUT, BK_OK, 0, 10, 0, 10);
		WITH_TAIL(5);
		CHECK(DEC(L + 10, 0, BK_AT_BROKER) < 0 && strstr(w, "reserved"));
		SESS(BK_TPUT, BK_OK, 0, 60, BK_S_ONCE, 10); /* always once: no flag */
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "flags"));
		SESS(BK_TPUT, BK_OK, 0, 0, 0, 10);
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "lifetime"));
		SESS(BK_TPUT, BK_OK, 0, 60, 0, 0);
		CHECK(DEC(L, 1, BK_AT_BROKER) < 0 && strstr(w, "bytes"));
		SESS(BK_TPUT, BK_OK, 0, 60, 0, 10);
		WITH_META(meta);
		((struct bk_msg *)buf)->meta.tag_len = POOL_TAG_MAX + 1;
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "tag"));
		WITH_META(meta);
		((struct bk_msg *)buf)->meta.ka_max = -2;
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "max"));
		WITH_META(meta);
		((struct bk_msg *)buf)->key.family = AF_UNIX;
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "key"));
		/* a session may not grow to a TLS state's size */
		SESS(BK_SPUT, BK_OK, 0, 60, 0, BK_TLS_MAX);
		CHECK(DEC(L + BK_TLS_MAX, 0, BK_AT_BROKER) < 0 && strstr(w, "oversized"));
		SESS(BK_TGET, BK_OK, 0, 0, 0, 0);
		CHECK(DEC(L, 0, BK_AT_BROKER) == 0 && so.len == 0);
		CHECK(DEC(L, 1, BK_AT_BROKER) < 0 && strstr(w, "fd"));
		SESS(BK_TGET, BK_OK, 0, 0, 0, 0);
		WITH_META(meta); /* a GET carries no record */
		CHECK(DEC(L, 0, BK_AT_BROKER) < 0 && strstr(w, "record"));
		SESS(BK_TGET, BK_OK, 0, 5, 0, 0);
		CHECK(DEC(L, 0, BK_AT_BROKER) < 0 && strstr(w, "bytes"));
		/* any name (the hand-out at connect): a flag, the name all zero */
		SESS(BK_TGET, BK_OK, 0, 0, BK_S_ANY, 0);
		memset(((struct bk_sess *)(buf + sizeof(h)))->name, 0, BK_SESS_NAME);
		CHECK(DEC(L, 0, BK_AT_BROKER) == 0 && so.flags == BK_S_ANY);
		((struct bk_sess *)(buf + sizeof(h)))->name[7] = 1;
		CHECK(DEC(L, 0, BK_AT_BROKER) < 0 && strstr(w, "any name with a name"));
		SESS(BK_TGET, BK_OK, 0, 0, BK_S_ONCE, 0);
		CHECK(DEC(L, 0, BK_AT_BROKER) < 0 && strstr(w, "bytes"));
		SESS(BK_TPUT, BK_OK, 0, 60, BK_S_ANY, 10); /* a put names its own */
		CHECK(DEC(L + 10, 1, BK_AT_BROKER) < 0 && strstr(w, "flags"));
		SESS(BK_TREPLY, BK_OK, 0, 0, BK_S_ANY, 700);
		WITH_META(meta);
		CHECK(DEC(L + 700, 1, BK_AT_CLIENT) < 0 && strstr(w, "lifetime"));
		SESS(BK_TREPLY, BK_OK, 0, 0, 0, 700);
		WITH_META(meta);
		CHECK(DEC(L + 700, 1, BK_AT_CLIENT) == 0 && so.len == 700 && out.meta.requests == 3);
		CHECK(DEC(L + 700, 0, BK_AT_CLIENT) < 0 && strstr(w, "fd"));
		CHECK(DEC(L + 700, 2, BK_AT_CLIENT) < 0 && strstr(w, "fd"));
		CHECK(DEC(L + 700, 1, BK_AT_BROKER) < 0 && strstr(w, "broker"));
		/* a TREPLY carries the sealed tail on: as a TPUT's */
		WITH_TAIL(24);
		CHECK(DEC(L + 700, 1, BK_AT_CLIENT) == 0 && so.tail == 24 && so.len == 700);
		WITH_TAIL(700);
		CHECK(DEC(L + 700, 1, BK_AT_CLIENT) < 0 && strstr(w, "tail"));
		SESS(BK_TGET, BK_OK, 0, 0, 0, 0);
		WITH_TAIL(1);
		CHECK(DEC(L, 0, BK_AT_BROKER) < 0 && strstr(w, "reserved"));
		SESS(BK_TREPLY, BK_OK, BK_F_PROOF, 0, 0, 700);
		WITH_META(meta);
		CHECK(DEC(L + 700, 2, BK_AT_CLIENT) == 0);
		CHECK(DEC(L + 700, 1, BK_AT_CLIENT) < 0 && strstr(w, "fd"));
		SESS(BK_TREPLY, BK_NONE, 0, 0, 0, 0);
		CHECK(DEC(L, 0, BK_AT_CLIENT) == 0);
		CHECK(DEC(L, 1, BK_AT_CLIENT) < 0 && strstr(w, "fd"));
		SESS(BK_TREPLY, BK_NONE, BK_F_PROOF, 0, 0, 0);
		CHECK(DEC(L, 1, BK_AT_CLIENT) == 0);
		SESS(BK_TREPLY, BK_NONE, 0, 0, 0, 0);
		WITH_META(meta); /* none, with a record */
		CHECK(DEC(L, 0, BK_AT_CLIENT) < 0 && strstr(w, "record"));
		SESS(BK_TREPLY, BK_NONE, 0, 0, 0, 8); /* none, with bytes */
		CHECK(DEC(L + 8, 0, BK_AT_CLIENT) < 0 && strstr(w, "status"));
		SESS(BK_TREPLY, BK_OK, 0, 0, 0, 0); /* ok, without */
		CHECK(DEC(L, 1, BK_AT_CLIENT) < 0 && strstr(w, "status"));
		SESS(BK_TREPLY, BK_OK, 0, 0, 0, BK_TLS_MAX);
		CHECK(DEC(L + BK_TLS_MAX, 1, BK_AT_CLIENT) == 0);
		/* a TLS type at the fixed size is not one */
		bk_encode(&h, BK_TGET, BK_OK, 0, &k, NULL);
		memcpy(buf, &h, sizeof(h));
		CHECK(DEC(sizeof(h), 0, BK_AT_BROKER) < 0 && strstr(w, "type"));
#undef WITH_META

		/* fixed messages through bk_decode_any: as bk_decode */
		bk_encode(&h, BK_GET, BK_OK, 0, &k, NULL);
		memcpy(buf, &h, sizeof(h));
		CHECK(DEC(sizeof(h), 0, BK_AT_BROKER) == 0 && off == 0 && so.len == 0);
#undef DEC
#undef SESS
	}

	/* the pool calls the broker uses */
	struct pool_config pc = { .idle_ms = 1000, .max_per_dest = 1, .max_total = 8 };
	struct pool_ops ops = { .close = fake_close, .alive = fake_alive, .evicted = take_evicted };
	pool_init(&pc, &ops);
	CHECK(pool_next_expiry() == UINT64_MAX);
	CHECK(pool_checkin(&k, 10, &meta, 100) == 0);
	CHECK(pool_next_expiry() == 1100);
	CHECK(pool_checkin(&k, 11, &meta, 200) == 0); /* cap 1: 10 is evicted, to the hook */
	CHECK(evicted_fd == 10 && closed_fd == -1);
	struct pool_key kout;
	struct pool_meta mout;
	CHECK(pool_take_fd(10, &kout, &mout) < 0);
	CHECK(pool_take_fd(11, &kout, &mout) == 0 && !memcmp(&kout, &k, sizeof(k)) &&
	      mout.requests == 3 && mout.parked_ms == 200);
	CHECK(pool_size() == 0 && closed_fd == -1);

	/* a key in another network namespace is another destination */
	struct pool_key kn = k;
	kn.netns = 7;
	CHECK(pool_checkin(&kn, 12, &meta, 300) == 0);
	CHECK(pool_checkout(&k, 400, &mout) == -1);
	CHECK(pool_checkout(&kn, 400, &mout) == 12);
	CHECK(pool_checkin(&kn, 12, &meta, 450) == 0);
	CHECK(pool_checkin(&k, 13, &meta, 460) == 0);
	struct pool_entry ents[4];
	CHECK(pool_list(ents, 4) == 2 && ents[0].fd == 12 && ents[1].fd == 13 &&
	      ents[0].key.netns == 7 && ents[1].expires_ms == 1460 && ents[0].meta.parked_ms == 450);
	CHECK(pool_list(ents, 1) == 1);

	printf("test_broker_proto: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
