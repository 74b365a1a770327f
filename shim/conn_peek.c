/*
 * conn_peek.c - recv(MSG_PEEK|MSG_WAITALL) on a connection of ours: does
 * the socket's queue hold the end of an answer after which we owe the
 * program an EOF?  A copy of the connection's framer is fed the queued
 * bytes as the server sent them (hooks_io.c peek_waitall waits until it
 * does; docs/replay.md "recv(MSG_WAITALL)").  Above the core: it takes
 * the connection's lock (conn_internal.h) and asks the framer.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "conn_internal.h"
#include "real.h"
#include "wbuf.h"

/* kp_conn_peek_ends with c locked: buf, n the queue's first bytes. */
static bool peek_ends_locked(const struct kp_conn *c, char *buf, size_t n)
{
	struct frm_resp r;
	enum frm_resp_event ev = FRM_EV_NONE;
	if (c->state != KP_ACTIVE || !c->n_reqs || !c->reqs[0].rewritten)
		return false; /* not rewritten: the server closes as alone */
	if (c->resp_started) {
		r = c->resp;
	} else {
		frm_resp_begin(&r, c->reqs[0].method, true);
	}
	r.insert_close = false; /* the bytes as the server sent them */
	size_t done = 0;
	while (done < n) {
		done += frm_resp_feed(&r, buf + done, n - done, &ev);
		if (ev == FRM_EV_DONE)
			return true;
		if (ev != FRM_EV_NONE && ev != FRM_EV_INTERIM)
			return false; /* to the server's close, or not HTTP */
	}
	return false;
}

bool kp_conn_peek_ends(struct kp_conn *c, int fd, size_t *queued)
{
	int saved = errno, q = 0;
	*queued = 0;
	if (c == KP_POOLED || KP_REAL(ioctl)(fd, SIOCINQ, &q) != 0 || q <= 0) {
		errno = saved;
		return false;
	}
	*queued = (size_t)q;
	size_t cap = 0;
	char *tmp = kp_wbuf_grow(NULL, &cap, (size_t)q);
	if (!tmp) {
		errno = saved;
		return true;
	}
	ssize_t got = KP_REAL(recv)(fd, tmp, (size_t)q, MSG_PEEK | MSG_DONTWAIT);
	bool ends = false;
	if (got > 0 && conn_lock(c, fd)) {
		ends = peek_ends_locked(c, tmp, (size_t)got);
		kp_unlock(&c->lock);
	}
	kp_wbuf_free(tmp, cap);
	errno = saved;
	return ends;
}

/* kp_conn_peek_take with c locked: raw, n the queue's first bytes as the
 * server sent them (the copy's mask writes on them: they are ours). */
static size_t take_locked(const struct kp_conn *c, char *raw, size_t n, bool *as_sent)
{
	struct frm_resp r;
	enum frm_resp_event ev = FRM_EV_NONE;
	if (c->state != KP_ACTIVE || !c->n_reqs)
		return n;
	*as_sent = c->resp_started && frm_resp_in_body(&c->resp) && !c->rx_extra_len;
	if (c->resp_started) {
		r = c->resp;
	} else {
		frm_resp_begin(&r, c->reqs[0].method, c->reqs[0].rewritten);
		r.insert_close = c->reqs[0].rewritten && c->reqs[0].app_close;
	}
	size_t done = 0;
	while (done < n) {
		done += frm_resp_feed(&r, raw + done, n - done, &ev);
		/* up to the close line; a take that begins there takes the line
		 * alone (the read puts the bytes it pushes past into rx_extra,
		 * which the next take reads first) */
		if (ev == FRM_EV_INSERT)
			return done ? done : FRM_CLOSE_LINE_LEN;
		if (ev == FRM_EV_DONE)
			return done;
		if (ev != FRM_EV_NONE && ev != FRM_EV_INTERIM)
			return n; /* to the server's close, or not HTTP: ours no more */
	}
	return n;
}

size_t kp_conn_peek_take(struct kp_conn *c, int fd, char *raw, size_t n, bool *as_sent)
{
	int saved = errno;
	ssize_t got = KP_REAL(recv)(fd, raw, n, MSG_PEEK | MSG_DONTWAIT);
	size_t take = n;
	*as_sent = false;
	if (got > 0 && conn_lock(c, fd)) {
		take = take_locked(c, raw, (size_t)got, as_sent);
		kp_unlock(&c->lock);
	}
	errno = saved;
	if (take > n || (got >= 0 && take > (size_t)got))
		*as_sent = false; /* (raw must hold the bytes taken) */
	return take < n ? take : n;
}
