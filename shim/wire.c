/*
 * wire.c - a request's bytes out: the socket call, the bounded send of
 * bytes the program was told went out, the held buffer, a head the
 * socket took in part (docs/hold.md), what was sent (wire_account,
 * body_span) and the watch on what the kernel sent.  Below conn.c and
 * conn_replay.c: it calls neither.
 */
#include "conn_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <time.h>
#include <unistd.h>

#include "broker_check.h"
#include "config.h"
#include "real.h"
#include "replay.h"
#include "sigwait.h"
#include "tls.h"
#include "watch.h"
#include "wbuf.h"

/* ------------------------------------------------------------ the tx watch */

/* Caller holds c->lock. */
void tx_watch_start(struct kp_conn *c, int fd)
{
	if (c->tx_watch || c->state != KP_ACTIVE || c->tls)
		return;
	int saved = errno;
	if (kp_tcp_kernel_tx(fd, &c->tx_kernel0) == 0) {
		c->tx_watch = true;
		c->tx0 = c->tx;
	} else {
		unpool(c, "stdio on a socket the kernel gives no byte count for");
	}
	errno = saved;
}

/* ------------------------------------------------------------ write side */

/* Append up to max bytes of iov starting at byte off to c->held. */
int held_append(struct kp_conn *c, const struct iovec *iov, int n, size_t off, size_t max)
{
	size_t want = iov_total(iov, n) - off;
	if (want > max)
		want = max;
	if (c->held_len + want > c->held_cap) {
		char *b = kp_wbuf_grow(c->held, &c->held_cap, c->held_len + want);
		if (!b)
			return -1;
		c->held = b;
	}
	for (int i = 0; i < n && want; i++) {
		size_t l = iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		size_t take = l - off < want ? l - off : want;
		memcpy(c->held + c->held_len, (const char *)iov[i].iov_base + off, take);
		held_set(c, c->held_len + take);
		want -= take;
		off = 0;
	}
	return 0;
}

/* The program's request bytes go out: on the socket, or through the TLS
 * connection it carries.  TLS: one buffer (the program's own) goes to the
 * engine without waiting: a record it began and could not finish is the
 * program's WANT_WRITE, and its retry, with the same buffer as OpenSSL
 * requires, comes back here with it (docs/hold.md "HTTPS"). */
ssize_t conn_sendmsg(struct kp_conn *c, int fd, const struct msghdr *m, int flags)
{
	if (c->tls && m->msg_iovlen == 1) {
		size_t w;
		return BUSY(c, kp_tls_push(c->tls, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len, &w))
			       ? (ssize_t)w
			       : -1;
	}
	if (c->tls) /* (never the program's own write: that is one buffer) */
		return BUSY(c, kp_tls_xmit(c->tls, fd, m->msg_iov, (int)m->msg_iovlen));
	/* a blocking send waits for the server to read: c is busy meanwhile,
	 * so that no other call on it waits for that (docs/hold.md "Never
	 * wait on a busy connection") */
	ssize_t r = BUSY(c, KP_REAL(sendmsg)(fd, m, flags));
	if (r > 0)
		c->tx += (uint64_t)r;
	return r;
}

/* Send all of buf (bytes the program was already told went out: held
 * head bytes, a replay's copy; a head written now never waits here:
 * part_pump).  A non-blocking socket, or MSG_DONTWAIT: the program's own
 * call never waits, so neither does a signal end ours: waited for in
 * polls of 100 ms, at most 30 s, a handler running in them as just after
 * the call.  A blocking socket: sent with MSG_DONTWAIT and waited for
 * under kp_sigwait (unbounded; under SO_SNDTIMEO, polls of that long up
 * to 30 s), so that a signal ends the wait where it would end the
 * program's call (kp_call_restarts: one without SA_RESTART; any under
 * the call's timeout or in its poll): when cut is set, -1/EINTR with
 * *sent what went, the rest the caller's to keep; else the wait goes on
 * (docs/hold.md "Signals during the library's waits"). */
static ssize_t send_all_busy(struct kp_conn *c, int fd, const char *buf, size_t len, int flags,
			     bool cut, size_t *sent);

ssize_t send_all(struct kp_conn *c, int fd, const char *buf, size_t len, int flags, bool cut,
		 size_t *sent)
{
	return BUSY(c, send_all_busy(c, fd, buf, len, flags, cut, sent));
}

static bool send_blocks(int fd, int flags);

/* One wait for room on a blocking socket (send_all_busy): > 0 ready, 0 the
 * socket's SO_SNDTIMEO passed, -1/EINTR the program's call ends here. */
static int room_wait(int fd, struct kp_sigwait *sw, bool *begun, bool cut, int *ms)
{
	if (!*begun) {
		struct timeval tv = { 0, 0 };
		socklen_t l = sizeof(tv);
		KP_REAL(getsockopt)(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l);
		*ms = tv.tv_sec || tv.tv_usec ? (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000) : -1;
		kp_sigwait_begin(sw);
		*begun = true;
	}
	bool restartable = kp_call_restarts(fd);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int r = kp_sigwait_poll(sw, &p, 1, *ms);
		if (r >= 0 || errno != EINTR)
			return r < 0 ? 1 : r; /* (an error: the send says which) */
		if (cut && !(restartable && sw->restarts))
			return -1;
	}
}

static ssize_t send_all_busy(struct kp_conn *c, int fd, const char *buf, size_t len, int flags,
			     bool cut, size_t *sent)
{
	int waited_ms = 0, ms = -1;
	*sent = 0;
	if (c->tls) {
		struct iovec v = { (void *)buf, len };
		ssize_t r = kp_tls_xmit(c->tls, fd, &v, 1);
		if (r > 0)
			*sent = (size_t)r;
		return r;
	}
	bool blocks = send_blocks(fd, flags), begun = false;
	struct kp_sigwait sw;
	ssize_t ret = (ssize_t)len;
	while (*sent < len) {
		ssize_t r = KP_REAL(send)(fd, buf + *sent, len - *sent, flags | (blocks ? MSG_DONTWAIT : 0));
		if (r > 0) {
			*sent += (size_t)r;
			c->tx += (uint64_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && blocks) {
			int w = room_wait(fd, &sw, &begun, cut, &ms);
			if (w < 0 || (w == 0 && (waited_ms += ms) >= 30000)) {
				errno = w < 0 ? EINTR : EAGAIN;
				ret = -1;
				break;
			}
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (waited_ms >= 30000 || (flags & MSG_DONTWAIT))
				return -1;
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			KP_REAL(poll)(&pfd, 1, 100);
			waited_ms += 100;
			continue;
		}
		ret = -1;
		break;
	}
	if (begun)
		kp_sigwait_end(&sw); /* (errno kept) */
	return ret;
}

/* ------------------------------------------------------------ a torn head
 *
 * The socket took part of a head (docs/hold.md, "A head the socket took in
 * part"): the program is told which of its own bytes went out (headmap.h),
 * nothing is waited for, and the program's next write, which must offer
 * the rest of its head again, sends the rest of the head as we sent it. */

/* Bytes of R the program was told went out that the server lacks: held
 * bytes of earlier calls when this call's send was torn before them. */
size_t part_debt(const struct kp_conn *c)
{
	size_t need = kp_headmap_fwd(&c->part_map, c->part_pos);
	return need > c->part_k ? need - c->part_k : 0;
}

/* The program's own send would block: a blocking socket, no MSG_DONTWAIT. */
static bool send_blocks(int fd, int flags)
{
	if (flags & MSG_DONTWAIT)
		return false;
	int fl = KP_REAL(fcntl)(fd, F_GETFL);
	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* What the kernel says when none of a send's bytes went, the send that
 * tore the head having begun at part_t0: EAGAIN on a non-blocking socket
 * or with MSG_DONTWAIT, and on a blocking one whose SO_SNDTIMEO ran out
 * (the send lasted that long); EINTR on a blocking one a signal
 * interrupted (docs/hold.md "A head the socket took in part"). */
static int none_went(const struct kp_conn *c, int fd, int flags)
{
	if (!send_blocks(fd, flags))
		return EAGAIN;
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof(tv);
	if (KP_REAL(getsockopt)(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) < 0 ||
	    (!tv.tv_sec && !tv.tv_usec))
		return EINTR;
	uint64_t timeo = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
	/* (the clock is read in whole ms on both sides: one of slack) */
	return kp_now_ms() - c->part_t0 + 1 >= timeo ? EAGAIN : EINTR;
}

/* c->held may be held: told sent to the program, they must surely fit the
 * socket's free room now when its own send would not wait (a non-blocking
 * socket, MSG_DONTWAIT), so that sending them later never waits (the
 * socket's room only grows until then: they are its last bytes).  The
 * kernel counts an skb's memory, not its bytes: twice the bytes within
 * SO_SNDBUF is sure (docs/hold.md "Waits that remain").  A blocking
 * program alone would have waited in its write.  Caller holds c->lock. */
bool held_fits(const struct kp_conn *c, int fd, int flags)
{
	if (send_blocks(fd, flags))
		return true;
	int outq = 0, sndbuf = 0;
	socklen_t l = sizeof(sndbuf);
	if (KP_REAL(ioctl)(fd, SIOCOUTQ, &outq) < 0 ||
	    KP_REAL(getsockopt)(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &l) < 0 || outq < 0 || sndbuf < 0)
		return false;
	/* (TLS: a record's header, padding and tag) */
	return ((size_t)outq + c->held_len + (c->tls ? 64 : 0)) * 2 <= (size_t)sndbuf;
}

/* c's socket no longer carries bytes as an open connection does (the
 * server's FIN or reset came, or ours went): the program's write would get
 * the kernel's own answer (taken into CLOSE_WAIT, then EPIPE and SIGPIPE
 * once the server's reset came), which holding would hide (docs/hold.md
 * "What is held now").  A reused connection's first request is the
 * replay's to save (docs/replay.md): not asked there.  Caller holds
 * c->lock. */
bool held_dead(const struct kp_conn *c, int fd)
{
	if (c->first != KP_FIRST_DONE)
		return false;
	struct kp_tcp_view v;
	return kp_tcp_view(fd, &v) == 0 && v.state != 1 /* TCP_ESTABLISHED */;
}

/* TLS: R (v[0, nv): the head as it goes out, then this call's body bytes)
 * is copied to c->part, with room for O (ol bytes) after it, and the
 * engine takes it from there: a record it begins and cannot finish must be
 * finished by the same call from the same place (OpenSSL's write retry),
 * at the program's retry (docs/hold.md "HTTPS").  False: no memory (the
 * caller sends it as before).  Caller holds c->lock. */
bool tls_stage_push(struct kp_conn *c, const struct iovec *v, int nv, size_t ol, ssize_t *r)
{
	size_t rl = iov_total(v, nv), off = 0, w;
	if (rl + ol > c->part_cap) {
		char *b = kp_wbuf_grow(c->part, &c->part_cap, rl + ol);
		if (!b)
			return false;
		c->part = b;
	}
	for (int i = 0; i < nv; i++) {
		memcpy(c->part + off, v[i].iov_base, v[i].iov_len);
		off += v[i].iov_len;
	}
	c->part_pend = 0;
	if (BUSY(c, kp_tls_push(c->tls, c->part, rl, &w))) {
		*r = (ssize_t)w;
		return true;
	}
	if (errno == EAGAIN || errno == EINTR) {
		c->part_pend = rl;
		c->part_err = errno;
	}
	*r = -1;
	return true;
}

/* TLS: the engine took k bytes of R (rl bytes staged by tls_stage_push: the
 * head, headlen bytes, then the call's body bytes), and may have begun a
 * record for the rest (part_pend): O after it is the program's head (data,
 * hl bytes, the first pos of them told already) and the same body bytes.
 * Caller holds c->lock. */
void tls_part_begin(struct kp_conn *c, size_t rl, size_t headlen, const char *data, size_t hl, size_t k,
		    size_t pos)
{
	size_t body = rl - headlen;
	memcpy(c->part + rl, data, hl);
	memcpy(c->part + rl + hl, c->part + headlen, body);
	kp_headmap_init(&c->part_map, c->part, rl, c->part + rl, hl + body);
	c->part_k = k;
	c->part_pos = pos;
	c->part_body = body;
}

static long tls_part_send(void *ctx, size_t from, size_t len)
{
	struct kp_conn *c = ctx;
	size_t w;
	if (BUSY(c, kp_tls_push(c->tls, c->part + from, len, &w)))
		return (long)w;
	if (errno != EAGAIN && errno != EINTR)
		return -1;
	c->part_err = errno;
	return 0;
}

/* TLS: the engine takes R up to target (kp_headmap_pump: a record begun
 * goes first, by the same call again), until the program can be told some
 * of its bytes went or the engine cannot go on without the socket: -1 with
 * the errno it left (the program's WANT_WRITE).  A retry offering fewer
 * bytes than that record stands for gets OpenSSL's error for it (bad
 * length).  Never waits. */
static int tls_part_push(struct kp_conn *c, size_t pos0, size_t n, size_t target, bool sent_once)
{
	switch (kp_headmap_pump(&c->part_map, &c->part_k, &c->part_pend, pos0, n, target, sent_once,
				tls_part_send, c)) {
	case 0:
		return 0;
	case KP_HM_WANT:
		errno = c->part_err;
		return -1;
	case KP_HM_SHORT:
		kp_tls_push_fail(SSL_ERROR_SSL);
		errno = EPROTO;
		return -1;
	default: /* errno: the engine's */
		return -1;
	}
}

/* Keep R (the head as it goes out) and O (the program's), the server
 * having k bytes of R and the program having been told pos bytes of O. */
bool part_begin(struct kp_conn *c, const char *r, size_t rl, const char *o, size_t ol,
		       size_t k, size_t pos)
{
	if (rl + ol > c->part_cap) {
		char *b = kp_wbuf_grow(c->part, &c->part_cap, rl + ol);
		if (!b)
			return false;
		c->part = b;
	}
	memcpy(c->part, r, rl);
	memcpy(c->part + rl, o, ol);
	kp_headmap_init(&c->part_map, c->part, rl, c->part + rl, ol);
	c->part_k = k;
	c->part_pos = pos;
	c->part_body = c->part_pend = 0;
	return true;
}

/* The program offers O[pos0, pos0 + n): sends what of R they stand for
 * (never more, never a byte after the head: a body follows with the
 * program's next write, told of a short count); returns how many of the
 * program's bytes of this call went out, or -1 with errno (none did).
 * sent_once: that send was made already (part_k counts it).  A send that
 * took only bytes of R's span, which stand for none of the program's,
 * answers as the kernel does when none of a call's bytes went (none_went).
 * TLS: the engine is the socket (tls_part_push).  Never waits.
 * Caller holds c->lock. */
ssize_t part_pump(struct kp_conn *c, int fd, size_t pos0, size_t n, int flags,
			 bool sent_once)
{
	const struct kp_headmap *m = &c->part_map;
	size_t target = kp_headmap_target(m, c->part_k, pos0, n);
	if (c->tls) {
		if (tls_part_push(c, pos0, n, target, sent_once) < 0)
			return -1;
	} else if (!sent_once && target > c->part_k) {
		c->part_t0 = kp_now_ms();
		ssize_t r = BUSY(c, KP_REAL(send)(fd, c->part + c->part_k, target - c->part_k, flags));
		if (r < 0)
			return -1;
		c->tx += (uint64_t)r;
		c->part_k += (size_t)r;
	}
	c->part_pos = kp_headmap_told(m, pos0, n, c->part_k, target);
	if (c->part_pos > pos0)
		return (ssize_t)(c->part_pos - pos0);
	errno = none_went(c, fd, flags);
	return -1;
}

/* The head is whole as the program sees it: on to its body, or the next
 * request.  TLS: the body bytes that rode with it went too.  Returns why
 * to give up (wire_account), or NULL.  Caller holds c->lock. */
const char *part_end(struct kp_conn *c)
{
	mode_set(c, c->part_next);
	kp_debug("torn head: finished");
	if (!c->part_body)
		return NULL;
	struct iovec v = { c->part + c->part_map.rl - c->part_body, c->part_body };
	c->part_body = 0;
	return wire_account(c, &v, 1, 0, v.iov_len);
}

/* Send head bytes held from earlier calls (the program was told they went
 * out), unchanged.  Returns 0, or -1 with errno when the send failed (the
 * connection is then unpoolable).  Caller holds c->lock. */
int flush_held(struct kp_conn *c, int fd, int flags)
{
	int r = 0;
	if (c->req_mode == KP_REQ_HEAD_PART) {
		/* a torn head: what the program was told went out and the
		 * server lacks (part_debt); the rest is the program's to send */
		size_t debt = part_debt(c), sent = 0;
		if (fd >= 0 && c->tls && c->part_pend) {
			/* the engine's record begun: the same call again, to its
			 * end (it covers the debt), waited for (docs/hold.md) */
			r = send_all(c, fd, c->part + c->part_k, c->part_pend, flags | MSG_NOSIGNAL,
				     false, &sent) < 0 ? -1 : 0;
			c->part_k += sent;
			c->part_pend = 0;
			debt = part_debt(c);
			if (r < 0)
				unpool(c, "sending a begun TLS record failed");
		}
		c->part_body = 0;
		if (fd >= 0 && debt && r == 0) {
			r = send_all(c, fd, c->part + c->part_k, debt, flags | MSG_NOSIGNAL, false,
				     &sent) < 0 ? -1 : 0;
			c->part_k += sent;
			if (r < 0)
				unpool(c, "sending held request bytes failed");
		}
		mode_set(c, c->part_next);
		return r;
	}
	if (fd >= 0 && c->req_mode == KP_REQ_HEAD && c->held_len) {
		size_t sent;
		r = send_all(c, fd, c->held, c->held_len, flags | MSG_NOSIGNAL, false, &sent) < 0 ? -1 : 0;
		if (r < 0)
			unpool(c, "sending held request bytes failed");
		held_set(c, 0);
	}
	return r;
}

/* Parse a request head of which the first `seen` bytes were already
 * found unfinished.  Until the new bytes complete a line, nothing new can
 * be judged: a head trickling in a byte per write costs a parse per line,
 * not per byte. */
long head_parse(const char *buf, size_t len, size_t seen, struct frm_req_head *h)
{
	if (seen && len <= FRM_MAX_HEAD && !memchr(buf + seen, '\n', len - seen))
		return 0;
	return frm_req_parse_head(buf, len, h);
}

bool queue_request(struct kp_conn *c, const struct frm_req_head *h, bool rewritten)
{
	if (c->n_reqs == KP_MAX_PIPELINE)
		return false;
	struct kp_request *r = &c->reqs[c->n_reqs++];
	r->method = (uint8_t)h->method;
	r->app_close = h->app_close;
	r->rewritten = rewritten;
	if (h->app_close)
		__atomic_store_n(&c->close_kind, h->ua_hash, __ATOMIC_RELEASE);
	if (h->upgrade || h->method == FRM_M_CONNECT || h->doubt)
		unpool(c, "an upgrade, CONNECT or doubtful request");
	if (h->conn_bound) /* the server may take the connection as this login's */
		unpool(c, "NTLM, Negotiate or Kerberos credentials in the request");
	frm_body_init(&c->req_body, h->body_kind, h->body_len);
	/* Content-Length: 0 is as bodiless as no length at all */
	mode_set(c, c->req_body.done || h->body_kind == FRM_BODY_NONE ? KP_REQ_HEAD : KP_REQ_BODY);
	r->body = c->req_mode == KP_REQ_BODY;
	return true;
}

/* Account for n request bytes at byte offset off of iov that went out
 * unchanged: body bytes, and heads that began mid-write.  Caller holds lock. */
const char *wire_account(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off, size_t n)
{
	int i = 0;
	while (i < iovcnt && off >= iov[i].iov_len)
		off -= iov[i++].iov_len;
	while (n && i < iovcnt && c->state == KP_ACTIVE) {
		const char *p = (const char *)iov[i].iov_base + off;
		size_t l = iov[i].iov_len - off;
		if (l > n)
			l = n;
		if (!l) {
			i++;
			off = 0;
			continue;
		}
		size_t used = l;
		if (c->req_mode == KP_REQ_BODY) {
			long u = frm_body_feed(&c->req_body, p, l);
			if (u < 0) {
				return "malformed request body";
			}
			used = (size_t)u;
			if (c->req_body.done)
				mode_set(c, KP_REQ_HEAD_SENT);
		} else {
			/* a head that went out as it was: learn its facts only (and
			 * never send these bytes again: they are gone) */
			mode_set(c, KP_REQ_HEAD_SENT);
			struct iovec one = { (void *)p, l };
			size_t before = c->held_len;
			struct frm_req_head h;
			if (held_append(c, &one, 1, 0, FRM_MAX_HEAD + 1) < 0) {
				return "out of memory";
			}
			long hl = head_parse(c->held, c->held_len, before, &h);
			if (hl < 0 || (hl > 0 && !queue_request(c, &h, false))) {
				return "unparsable request";
			}
			if (hl > 0) {
				used = (size_t)hl - before;
				held_set(c, 0);
			}
		}
		off += used;
		n -= used;
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
		}
	}
	/* at a boundary after sent bytes: the next write starts a held head */
	if (c->req_mode == KP_REQ_HEAD_SENT && !c->held_len)
		mode_set(c, KP_REQ_HEAD);
	return NULL;
}

/* How many bytes of iov from byte off belong to the body b is in: a copy
 * of its framer runs over them (pure).  SIZE_MAX when the body does not
 * end within them, or is malformed (account_sent gives up on it then). */
size_t body_span(struct frm_body b, const struct iovec *iov, int iovcnt, size_t off)
{
	size_t n = 0;
	for (int i = 0; i < iovcnt; i++) {
		size_t l = iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		const char *p = (const char *)iov[i].iov_base + off;
		l -= off;
		off = 0;
		if (b.done)
			return n;
		long u = frm_body_feed(&b, p, l);
		if (u < 0)
			return SIZE_MAX;
		n += (size_t)u;
		if ((size_t)u < l)
			return n;
	}
	return b.done && n ? n : SIZE_MAX;
}

/* A request that asked the server to close (and that we rewrote) is still
 * waiting for its response.  Without us the server would answer it and
 * close, never reading what the program writes after it (RFC 9112 9.6:
 * such a client is wrong, but the server must see what it would have
 * seen): those bytes are taken from the program and not sent. */
bool after_close(const struct kp_conn *c)
{
	for (unsigned i = 0; i < c->n_reqs; i++)
		if (c->reqs[i].rewritten)
			return true;
	return false;
}

/* n bytes written after a request that asked to close (after_close):
 * taken from the program and never sent. */
void after_close_drop(int fd, size_t n)
{
	kp_debug("fd %d: %zu bytes written after a request that asked to close: "
		 "not sent (the server would have closed without reading them)",
		 fd, n);
}

/* the byte at pos of the stream iov holds */
static char *iov_byte(const struct iovec *iov, int iovcnt, size_t pos)
{
	for (int i = 0; i < iovcnt; i++) {
		if (pos < iov[i].iov_len)
			return (char *)iov[i].iov_base + pos;
		pos -= iov[i].iov_len;
	}
	return NULL;
}

/*
 * Show the program FRM_CLOSE_LINE at offset k of the n bytes its call
 * returned in iov (docs/replay.md, "A closing answer"): the bytes from k
 * on move up by its length; those that no longer fit go to extra (at most
 * the line's length, since n <= the buffer), to be read first next time.
 * The same bytes whatever the read sizes: a recv(1) loop reads the line a
 * byte at a time.  Returns the count the call now returns.
 */
size_t kp_close_line_in(const struct iovec *iov, int iovcnt, size_t n, size_t k, char *extra, uint8_t *extra_len)
{
	static const char line[] = FRM_CLOSE_LINE;
	const size_t L = FRM_CLOSE_LINE_LEN;
	size_t cap = iov_total(iov, iovcnt), total = n + L;
	size_t out = total < cap ? total : cap;
#define STREAM_AT(j) ((j) < k ? *iov_byte(iov, iovcnt, (j)) \
		      : (j) < k + L ? line[(j) - k] : *iov_byte(iov, iovcnt, (j) - L))
	for (size_t j = out; j < total; j++) /* before anything moves */
		extra[j - out] = STREAM_AT(j);
#undef STREAM_AT
	__atomic_store_n(extra_len, (uint8_t)(total - out), __ATOMIC_RELEASE);
	if (out > k + L) {
		if (iovcnt == 1) {
			memmove((char *)iov[0].iov_base + k + L, (char *)iov[0].iov_base + k,
				out - k - L);
		} else {
			for (size_t j = out; j-- > k + L;)
				*iov_byte(iov, iovcnt, j) = *iov_byte(iov, iovcnt, j - L);
		}
	}
	for (size_t j = k; j < k + L && j < out; j++)
		*iov_byte(iov, iovcnt, j) = line[j - k];
	return out;
}
