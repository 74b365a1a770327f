/*
 * send.c - the program's writes to a connection we follow: a request head
 * collected, deferred (stdio) or rewritten and sent, its body counted,
 * a head the socket took in part continued, sends we cannot see into,
 * what was sent learnt afterwards (kp_send_done).  Called by the hooks
 * and tls_calls.c; calls conn.c and what is below it (docs/structure.md).
 */
#include "conn_internal.h"
#include "aio_scan.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
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
#include "fdtable.h"
#include "real.h"
#include "replay.h"
#include "tls.h"
#include "watch.h"
#include "wbuf.h"


void kp_aio_before(struct kp_conn *c, int fd, bool write)
{
	if (c == KP_POOLED || tls_bypassed(c, fd))
		return;
	size_t any = 1;
	if (write)
		kp_send_bypass(c, fd, &any); /* a drop needs the FIN below anyway */
	int saved = errno;
	if (!conn_lock(c, fd))
		return;
	bool owed = __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE);
	/* (bytes that would begin a request: a body of the program's own
	 * request goes on as any unseen body) */
	if (write && (owed || (after_close(c) && c->req_mode == KP_REQ_HEAD && !c->held_len))) {
		/* glibc's helper thread writes with its internal write, which
		 * no wrapper sees: the bytes cannot be taken and dropped as a
		 * write of the program's is.  Our FIN goes out now, so that
		 * they never reach the server: the helper's write fails with
		 * EPIPE (its thread blocks every signal: no SIGPIPE) where
		 * the program alone would have had its first write accepted
		 * and its next one fail (docs/replay.md, "Nothing added") */
		finished_forget(-1, c);
		KP_REAL(shutdown)(fd, SHUT_WR);
		go_passthrough(c, "aio write after a request that asked to close");
	} else if (!write && owed) {
		/* the helper's read would wait for the server's idle timeout:
		 * the kernel answers it with our EOF (bytes already waiting,
		 * a server's idle 408, come first) */
		finished_forget(-1, c);
		KP_REAL(shutdown)(fd, SHUT_RD);
		go_passthrough(c, "aio read after the owed EOF");
	} else if (c->state == KP_ACTIVE) {
		/* an exchange we cannot follow: never pooled; a response read
		 * unseen cannot be framed */
		if (write)
			unpool(c, "aio write");
		else
			unseen_read_fin(c, fd);
	}
	if (!write)
		first_seen(c);
	kp_unlock(&c->lock);
	errno = saved;
}

/* A forked child's copy written after its parent's whole close request
 * (conn_child.c child_object): taken while the server alone would not
 * have closed yet (its FIN not come), the mark kept (child_keeps); once
 * it has, our FIN now, before the write is taken. */
static void child_write(struct kp_conn *c, int fd)
{
	if (__builtin_expect(kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_FIN_OWED), 0) &&
	    __atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE))
		kp_fin_owed_child_write(fd);
}

/* a write taken after our FIN keeps the rule for the next one: a child's
 * copy still marked (child_write: the server's close has not come) */
static bool child_keeps(int fd)
{
	return kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_FIN_OWED);
}

bool kp_send_bypass(struct kp_conn *c, int fd, size_t *len)
{
	if (c == KP_POOLED)
		return true;
	child_write(c, fd);
	if (tls_bypassed(c, fd))
		return true;
	int saved = errno;
	if (!conn_lock(c, fd))
		return true;
	if (c->fin_for_server && !c->shut_how && *len) {
		/* after our FIN stood for the server's close: the first send is
		 * taken, as the write path takes it (send_outside_head) */
		if (!child_keeps(fd))
			__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
		kp_debug("fd %d: %zu bytes sent past the write path after our FIN: taken", fd, *len);
		kp_unlock(&c->lock);
		errno = saved;
		return false;
	}
	if (c->shut_how && *len) {
		/* the program's own shutdown(), answered by us: made real now,
		 * as the write path makes it (send_outside_head): after SHUT_WR
		 * the kernel's EPIPE and SIGPIPE, never a count for bytes that
		 * could not go; after SHUT_RD our FIN stands for the server's
		 * close owed, and the first send is taken */
		int how = c->shut_how - 1;
		KP_REAL(shutdown)(fd, how);
		owed_close_fin(c, fd);
		go_passthrough(c, "a send past the write path after shutdown");
		bool take = how == SHUT_RD && c->fin_for_server;
		if (take) {
			c->shut_how = 0;
			__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
		}
		kp_unlock(&c->lock);
		errno = saved;
		return !take;
	}
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD && *len &&
	    ((c->eof_owed && !c->n_reqs) || after_close(c))) {
		/* as the write path (send_intercept): after the owed EOF the
		 * first send is taken, our FIN goes out and later ones meet the
		 * kernel's EPIPE; after a close request, taken and not sent */
		if (c->eof_owed && !c->n_reqs) {
			finished_forget(-1, c);
			KP_REAL(shutdown)(fd, SHUT_WR);
			go_passthrough(c, "a send after the owed EOF");
		}
		kp_debug("fd %d: %zu bytes sent past the write path after a close: not sent", fd, *len);
		kp_unlock(&c->lock);
		errno = saved;
		return false;
	}
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_BODY && c->n_reqs &&
	    c->reqs[c->n_reqs - 1].rewritten && c->req_body.kind == FRM_BODY_LENGTH &&
	    c->req_body.left < *len && c->req_body.left)
		*len = (size_t)c->req_body.left; /* the rest would be after_close */
	if (c->state == KP_ACTIVE && ((c->req_mode == KP_REQ_HEAD && c->held_len) ||
				      c->req_mode == KP_REQ_HEAD_PART)) {
		give_up(c, fd, "a send we cannot see into follows a held head");
	} else if (c->first == KP_FIRST_SENT) {
		/* zero-copy bytes the copy cannot hold: no replay for this one */
		c->first = KP_FIRST_DONE;
		kp_debug("fd %d: request bytes by sendfile/splice: not replayable", fd);
	} else {
		unvouch(c, fd, "a request we cannot see into");
	}
	kp_unlock(&c->lock);
	errno = saved;
	return true;
}

bool kp_unseen_write(struct kp_conn *c, int fd, size_t len)
{
	if (c == KP_POOLED || !len)
		return false;
	if (!kp_send_bypass(c, fd, &len))
		return true;
	int saved = errno;
	if (conn_lock(c, fd)) {
		if (c->state == KP_ACTIVE)
			unpool(c, "a write we cannot see");
		kp_unlock(&c->lock);
	}
	errno = saved;
	return false;
}

/* Do request bytes follow, within this call, the request whose head ends
 * at byte off of iov (beyond its own body)? */
static bool bytes_follow(const struct frm_req_head *h, const struct iovec *iov, int iovcnt,
			 size_t off)
{
	struct frm_body b;
	frm_body_init(&b, h->body_kind, h->body_len);
	size_t n = body_span(b, iov, iovcnt, off);
	return n != SIZE_MAX && off + n < iov_total(iov, iovcnt);
}

/* A write after a torn head: the program must offer the rest of its head
 * again (it was told those bytes did not go out).  True when handled
 * (*ret set); false: the caller sends the program's bytes as they are.
 * Caller holds c->lock. */
static bool part_continue(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt,
			  int flags, ssize_t *ret)
{
	size_t total = iov_total(iov, iovcnt);
	size_t left = c->part_map.ol - c->part_pos;
	size_t n = total < left ? total : left;
	if (!total)
		return false;
	if (!iov_equal(iov, iovcnt, c->part + c->part_map.rl + c->part_pos, n)) {
		if (c->tls && c->part_pend) {
			/* the engine's record begun stands for bytes the program
			 * no longer offers: OpenSSL fails such a retry (bad write
			 * retry), and the connection can carry nothing else */
			mode_set(c, c->part_next);
			c->part_body = 0;
			give_up(c, fd, "a TLS write retry with other bytes");
			kp_tls_push_fail(SSL_ERROR_SSL);
			errno = EPROTO;
			*ret = -1;
			return true;
		}
		give_up(c, fd, "the rest of a torn head differs from what was torn");
		return false;
	}
	ssize_t r = part_pump(c, fd, c->part_pos, n, flags, false);
	if (r < 0) {
		int err = errno;
		if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
			go_passthrough(c, "send failed mid-head");
		errno = err;
		*ret = -1;
		return true;
	}
	if (c->part_pos == c->part_map.ol) {
		const char *why = part_end(c);
		if (why)
			give_up(c, -1, why);
		handoff_fin_if_due(c, fd);
	}
	*ret = r;
	return true;
}

/* The body of a rewritten close request ends inside this write and more
 * bytes follow it: only the body goes out (after_close: the server would
 * never have read the rest), and the program is told all were taken.  A
 * short send is reported as such (the program offers the rest again).
 * Returns false when the body does not end here: the real call as it is.
 * Caller holds c->lock. */
static bool send_body_end(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
			  ssize_t *ret)
{
	size_t n = body_span(c->req_body, iov, iovcnt, 0), total = iov_total(iov, iovcnt);
	if (n == SIZE_MAX || n >= total)
		return false;
	struct iovec small[16], *v = small;
	size_t v_cap = 0;
	if (iovcnt > 16 && !(v = kp_wbuf_grow(NULL, &v_cap, (size_t)iovcnt * sizeof(*v))))
		return false;
	int k = 0;
	for (size_t left = n; left && k < iovcnt; k++) {
		v[k] = iov[k];
		if (v[k].iov_len > left)
			v[k].iov_len = left;
		left -= v[k].iov_len;
	}
	struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)k };
	ssize_t r;
	/* the program's send: the kernel restarts it after a handler with
	 * SA_RESTART; an EINTR is the program's to see, as alone (TLS: the
	 * engine's EINTR is the program's WANT_WRITE) */
	r = conn_sendmsg(c, fd, &m, flags);
	int err = errno;
	if (v != small)
		kp_wbuf_free(v, v_cap);
	if (r < 0) {
		if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
			unpool(c, "a send failed");
		*ret = -1;
		errno = err;
		return true;
	}
	account_sent(c, iov, iovcnt, 0, (size_t)r);
	if ((size_t)r < n) {
		*ret = r;
		return true;
	}
	after_close_drop(fd, total - n);
	*ret = (ssize_t)total;
	return true;
}

/* The socket is the program's fd 0 when it writes a head: stdin's FILE
 * (fgets, scanf, getchar) may read it with libc's internal read, past us,
 * so our EOF after a rewritten response could never reach it: the head is
 * sent as written (the server's own close ends the response). */
static inline bool stdin_reads(const struct kp_conn *c)
{
	return kp_fd_conn(0) == c;
}

/* The socket took only part of a head just parsed (part_begin done): the
 * request is queued now (its response is framed as any other), the program
 * is told which of its bytes went out, and the head's rest follows with
 * the program's next write (part_continue).  A reused connection's replay
 * copy is dropped: this request is not sent again.  Unlocks c->lock. */
static bool torn_head(struct kp_conn *c, int fd, const struct frm_req_head *h, bool rewritten, bool keep_copy,
		      size_t replay_mark, size_t mine, int flags, int saved, ssize_t *ret)
{
	held_set(c, 0);
	if (keep_copy)
		c->replay_len = replay_mark;
	if (c->first != KP_FIRST_DONE)
		first_seen(c);
	/* (a rewrite needs room in the queue: a head that finds none maps 1:1) */
	bool queued = queue_request(c, h, rewritten);
	if (rewritten && queued)
		kp_count(rewritten);
	c->part_next = c->req_mode;
	mode_set(c, KP_REQ_HEAD_PART);
	kp_debug("fd %d: torn head: %zu of %zu bytes went out", fd, c->part_k, c->part_map.rl);
	(void)mine; /* the program's bytes of this call: O's rest (TLS: its body too) */
	ssize_t r = part_pump(c, fd, c->part_pos, c->part_map.ol - c->part_pos, flags, true);
	if (r < 0)
		saved = errno; /* EAGAIN or EINTR: none of this call's bytes went */
	else if (c->part_pos == c->part_map.ol)
		(void)part_end(c); /* (never: the head was torn) */
	if (!queued && c->tls && c->part_pend)
		/* the engine's record begun is the program's to finish: its
		 * response unframed, the connection is not pooled */
		unpool(c, "too many pipelined requests");
	else if (!queued) /* what held bytes the program was told of go out first */
		give_up(c, fd, "too many pipelined requests");
	*ret = r;
	kp_unlock(&c->lock);
	errno = saved;
	return true;
}

/* One request head on its way out: what send_intercept learns, builds and
 * sends, step by step (head_collect, head_build, head_send, head_settle). */
struct head_send {
	const struct iovec *iov;
	int iovcnt;
	int flags;      /* the program's */
	int send_flags; /* ours: MSG_NOSIGNAL added while a dead socket is ours */
	int saved;      /* errno at the program's call */
	size_t total;   /* the call's bytes */
	size_t old_held;
	const char *data; /* the program's head: its buffer, or c->held */
	size_t dlen;
	long hl;          /* the head's length in data */
	size_t mine;      /* the call's bytes in the head */
	struct frm_req_head h;
	bool keep_copy;   /* a copy kept for a replay (c->replay) */
	size_t replay_mark;
	/* the rewritten head, or out grown for it (kp_mem past this: no system
	 * call; kept small for a signal handler's stack, docs/binding.md) */
	char small[512];
	char *out;
	size_t out_cap;
	long outlen;      /* > 0: rewritten */
	const char *head; /* what goes out: out or data */
	bool staged;      /* TLS: head and body staged in c->part (tls_stage_push) */
	size_t staged_len;
	size_t headlen;
};

#define SEND_ON (-1) /* not decided by this step: the next one decides */

/* What the connection's state makes of this write before any head is
 * looked at: after our FIN, the rest of a torn head, a body, a write after
 * shutdown.  SEND_ON, or whether the call was taken (c->lock released). */
static int send_outside_head(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt,
			     int flags, int saved, ssize_t *ret)
{
	if (c->fin_for_server && !c->shut_how) {
		/* as a socket whose server closed takes them: 0 bytes, and
		 * the first write (its reset would fail the next); after our
		 * FIN the kernel would say EPIPE at once (docs/replay.md,
		 * "Nothing added") */
		size_t n = iov_total(iov, iovcnt);
		if (n && !child_keeps(fd))
			__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
		kp_debug("fd %d: %zu bytes written after our FIN (or a child's copy, after its parent's close request): taken, not sent", fd, n);
		*ret = (ssize_t)n;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD_PART && c->eof_owed && !c->n_reqs)
		/* the server answered the torn head and we owe the program its
		 * close: the rest is written after it (send_after_end) */
		mode_set(c, KP_REQ_HEAD);
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD_PART) {
		bool taken = part_continue(c, fd, iov, iovcnt, flags, ret);
		int err = errno;
		kp_unlock(&c->lock);
		errno = taken && *ret < 0 ? err : saved;
		return taken;
	}
	if (c->state != KP_ACTIVE || c->req_mode != KP_REQ_HEAD) {
		bool taken = c->state == KP_ACTIVE && c->req_mode == KP_REQ_BODY && c->n_reqs &&
			     c->reqs[c->n_reqs - 1].rewritten &&
			     send_body_end(c, fd, iov, iovcnt, flags, ret);
		int err = errno;
		kp_unlock(&c->lock);
		errno = taken && *ret < 0 ? err : saved;
		return taken;
	}
	if (c->shut_how) {
		/* writing after shutdown: the kernel's answer (EPIPE), for real;
		 * where the program is owed the server's close our FIN stands
		 * for it, and after a SHUT_RD the write meets that close as the
		 * first step above answers it */
		int how = c->shut_how - 1;
		KP_REAL(shutdown)(fd, how);
		owed_close_fin(c, fd);
		go_passthrough(c, "write after shutdown");
		if (how == SHUT_RD && c->fin_for_server) {
			c->shut_how = 0;
			return send_outside_head(c, fd, iov, iovcnt, flags, saved, ret);
		}
		kp_unlock(&c->lock);
		errno = saved;
		return false;
	}
	return SEND_ON;
}

/* Bytes written after the end the program asked for: never sent.
 * SEND_ON, or true: taken (c->lock released). */
static int send_after_end(struct kp_conn *c, int fd, size_t total, int saved, ssize_t *ret)
{
	if (c->eof_owed && !c->n_reqs && !total) {
		/* a socket the server has closed takes 0 bytes; ours may have
		 * sent our FIN meanwhile (a fork handed it off), after which
		 * the kernel would answer EPIPE and SIGPIPE */
		*ret = 0;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (c->eof_owed && !c->n_reqs && total) {
		/* The program asked to close and was answered: without us the
		 * server has closed, and these bytes must never reach it
		 * (docs/replay.md, "Nothing added").  A closed server's client
		 * sees its first write accepted (the server's TCP answers it
		 * with a reset) and the next ones fail with EPIPE (and SIGPIPE):
		 * so this one is taken and dropped, our FIN goes out, and later
		 * writes meet the kernel's own EPIPE and signal. */
		finished_forget(-1, c);
		KP_REAL(shutdown)(fd, SHUT_WR);
		if (c->tls) { /* later writes: a TLS error, not the socket's */
			c->eof_written = true;
			/* our FIN went out: never parked, never another's */
			unpool(c, "a write after the owed EOF");
		} else {
			go_passthrough(c, "a write after the owed EOF");
		}
		kp_debug("fd %d: %zu bytes written after the EOF we owe: not sent", fd, total);
		*ret = (ssize_t)total;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (total && after_close(c)) {
		after_close_drop(fd, total);
		*ret = (ssize_t)total;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	return SEND_ON;
}

enum { HEAD_WHOLE, HEAD_HELD, HEAD_PASS, HEAD_PASS_FLUSH };

/* The head this write completes, in s->data (the program's buffer, or the
 * bytes held from earlier calls with this call's appended): HEAD_WHOLE;
 * part of one, held (HEAD_HELD: the call was taken, c->lock released); or
 * nothing we follow (HEAD_PASS; HEAD_PASS_FLUSH: held bytes go out first). */
static int head_collect(struct kp_conn *c, int fd, struct head_send *s, ssize_t *ret)
{
	s->old_held = c->held_len;
	if (!s->total)
		return HEAD_PASS;
	if (!s->old_held && s->iovcnt == 1) {
		s->data = s->iov[0].iov_base;
		s->dlen = s->total;
	} else {
		if (held_append(c, s->iov, s->iovcnt, 0, FRM_MAX_HEAD + 1) < 0)
			return HEAD_PASS_FLUSH;
		s->data = c->held;
		s->dlen = c->held_len;
	}
	s->hl = head_parse(s->data, s->dlen, s->old_held, &s->h);
	if (s->hl < 0) {
		held_set(c, s->old_held); /* the program's bytes go out as they are */
		unvouch(c, fd, "not an HTTP request");
		go_passthrough(c, s->dlen && (uint8_t)s->data[0] == 0x16 ? "TLS" : "not an HTTP request");
		return HEAD_PASS_FLUSH;
	}
	if (s->hl == 0) {
		if (c->no_rewrite || (s->flags & MSG_ZEROCOPY)) {
			/* a held piece would merge sends the kernel counts one
			 * by one: MSG_ZEROCOPY's completion ids, SO_TIMESTAMPING's
			 * (docs/hold.md "Sends the kernel counts") */
			held_set(c, s->old_held);
			unvouch(c, fd, "an unfinished head on a connection that may not be pooled");
			return HEAD_PASS_FLUSH;
		}
		if (s->data != c->held && held_append(c, s->iov, s->iovcnt, 0, s->total) < 0)
			return HEAD_PASS_FLUSH;
		if (!held_fits(c, fd, s->flags)) {
			/* the kernel might not take them all now: its own answer */
			held_set(c, s->old_held);
			unvouch(c, fd, "an unfinished head larger than the socket's room");
			kp_debug("fd %d: not held: the socket may not take them now", fd);
			return HEAD_PASS_FLUSH;
		}
		if (held_dead(c, fd)) {
			/* its errno and SIGPIPE are the kernel's to give */
			held_set(c, s->old_held);
			unvouch(c, fd, "an unfinished head on a closed or reset connection");
			kp_debug("fd %d: not held: the connection is closed or reset", fd);
			return HEAD_PASS_FLUSH;
		}
		kp_debug("fd %d: holding %zu bytes of a request head", fd, c->held_len);
		*ret = (ssize_t)s->total;
		kp_unlock(&c->lock);
		errno = s->saved;
		return HEAD_HELD;
	}
	s->mine = (size_t)s->hl - s->old_held;
	return HEAD_WHOLE;
}

/* May s's head be rewritten to keep the connection?  Grows s->out for the
 * rewrite. */
static bool head_rewritable(struct kp_conn *c, int fd, struct head_send *s)
{
	const struct frm_req_head *h = &s->h;
	bool may = !h->upgrade && !h->doubt && !h->conn_bound && h->method != FRM_M_CONNECT &&
		   !c->handed_off && c->n_reqs < KP_MAX_PIPELINE && !stdin_reads(c);
	/* An option a rewrite would show (SO_RCVLOWAT: its read would wait
	 * past our EOF for the server's close; conn.h no_rewrite): the request
	 * goes out as the program wrote it (docs/hold.md "Options we cannot
	 * carry").  Other unpoolable connections keep the rewrite: torn.bats
	 * tears heads with a small SO_SNDBUF. */
	if (may && c->no_rewrite) {
		kp_debug("fd %d: not rewritten: an option a rewrite would show (conn.h no_rewrite)", fd);
		return false;
	}
	/* More requests pipelined behind one that asks to close, in the same
	 * write: the server must get the close and execute nothing after it,
	 * exactly as without us; so no rewrite, and no reuse. */
	if (may && h->app_close && bytes_follow(h, s->iov, s->iovcnt, s->mine)) {
		kp_debug("fd %d: not rewritten: requests follow one that asks to close", fd);
		return false;
	}
	/* a body the server may answer before reading (a refused upload):
	 * alone it closes and never reads it; kept, it may read the body as
	 * its next request.  Nothing we see proves it read the body
	 * (docs/replay.md "A close request with a body") */
	if (may && h->app_close && h->body_kind != FRM_BODY_NONE &&
	    !(h->body_kind == FRM_BODY_LENGTH && h->body_len == 0)) {
		kp_debug("fd %d: not rewritten: a request with a body asks to close", fd);
		return false;
	}
	/* the process is divided (a sandbox being installed, another identity
	 * in a thread: docs/owner.md): no connection is parked again, so a
	 * rewrite could only owe an EOF, one a library stepping aside for a
	 * sandbox is no longer there to give (the server's 30 s idle timer) */
	if (may && h->app_close && __atomic_load_n(&divided, __ATOMIC_RELAXED)) {
		kp_debug("fd %d: not rewritten: the process is divided, nothing is parked", fd);
		return false;
	}
	/* an io_submit or an io_uring we cannot see could read where we owe
	 * the EOF (docs/replay.md "Kernel AIO", docs/limits.md "io_uring"):
	 * owe none */
	if (may && h->app_close && (kp_aio_unseen() || kp_uring_seen())) {
		kp_debug("fd %d: not rewritten: kernel AIO or io_uring makes system calls unseen", fd);
		return false;
	}
	/* TLS: the EOF we would owe shows a close_notify; only where this
	 * destination was seen to send one (docs/tls.md "Ragged closes") */
	if (may && h->app_close && c->tls && !kp_tls_closes_clean(&c->key, h->ua_hash)) {
		kp_debug("fd %d: not rewritten: not known how the server ends a TLS connection", fd);
		return false;
	}
	/* a rewrite adds one header line, or 5 bytes per "close" token */
	size_t need = (size_t)s->hl + 64 + (size_t)s->hl / 2;
	if (may && need > s->out_cap) {
		size_t cap = 0;
		char *grown = kp_wbuf_grow(NULL, &cap, need);
		if (!grown)
			return false;
		s->out = grown;
		s->out_cap = cap;
	}
	return may;
}

/* What goes out for s's whole head: rewritten to keep the connection where
 * nothing forbids it (s->head, s->headlen); on the first use of a reused
 * connection, a copy kept for a replay, or a fresh connection. */
static void head_build(struct kp_conn *c, int fd, struct head_send *s)
{
	s->keep_copy = false;
	s->send_flags = s->flags;
	if (c->first != KP_FIRST_DONE) {
		kp_call_nowait = s->flags & MSG_DONTWAIT;
		kp_call_write = true;
		s->keep_copy = first_request_plan(c, fd, &s->h, s->total - s->mine);
		kp_call_write = kp_call_nowait = false;
		if (s->keep_copy)
			s->send_flags |= MSG_NOSIGNAL; /* a dead socket is ours to handle */
	}
	s->out = s->small;
	s->out_cap = sizeof(s->small);
	s->outlen = 0;
	if (head_rewritable(c, fd, s))
		s->outlen = frm_req_rewrite_head(s->data, &s->h, s->out, s->out_cap);
	s->head = s->outlen > 0 ? s->out : s->data;
	s->headlen = s->outlen > 0 ? (size_t)s->outlen : (size_t)s->hl;
	s->replay_mark = c->replay_len;
	if (s->keep_copy && !replay_keep(c, s->head, s->headlen)) {
		s->keep_copy = false;
		c->first = KP_FIRST_DONE;
	}
}

/* TLS: the engine's write of s's head and body failed with EPIPE or
 * ECONNRESET on the first request of a reused connection after it had put
 * bytes on the socket: whole records, the head among them, may have
 * reached the server and been executed before a later one met the reset.
 * That is not "none of it went out" but a request sent on a connection
 * that died under it, and the proof rule decides (docs/replay.md "A send
 * that failed"): the method, or the server's FIN first and our bytes met a
 * closed socket.  True: a fresh connection is under fd, and the caller
 * sends the request there as for a socket found dead before its first
 * byte; false: the program's write fails as the engine's did (errno
 * kept).  Caller holds c->lock. */
static bool head_sent_died(struct kp_conn *c, int fd, struct head_send *s)
{
	int err = errno;
	if (!replay_decide(c, fd, err == EPIPE ? KP_DIED_SEND_EPIPE : KP_DIED_SEND_RESET) ||
	    swap_fresh(c, fd, false) < 0) {
		unpool(c, "died under its first request");
		errno = err;
		return false;
	}
	kp_count(replayed);
	s->keep_copy = false;
	c->replay_len = 0;
	s->send_flags = s->flags;
	return true;
}

/* s's head and the rest of this call (body bytes) in one sendmsg, as the
 * program's one call would have been: two sends would let Nagle hold the
 * second behind the server's delayed ACK (40 ms a request, seen with
 * Perl's LWP).  What the socket took, or -1 with errno. */
static ssize_t head_send(struct kp_conn *c, int fd, struct head_send *s)
{
	struct iovec v[17]; /* only v[0, nv) is read: no zeroing of the rest */
	v[0] = (struct iovec){ (void *)s->head, s->headlen };
	int nv = 1;
	size_t off = s->mine;
	for (int i = 0; i < s->iovcnt && nv < 17; i++) {
		if (off >= s->iov[i].iov_len) {
			off -= s->iov[i].iov_len;
			continue;
		}
		v[nv].iov_base = (char *)s->iov[i].iov_base + off;
		v[nv].iov_len = s->iov[i].iov_len - off;
		nv++;
		off = 0;
	}
	struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)nv };
	ssize_t r;
	s->staged = false;
	for (;;) {
		/* EINTR here: a handler without SA_RESTART (the kernel restarts
		 * the others itself) ran before a byte went; the program's own
		 * send would say EINTR.  TLS: the engine's WANT_WRITE, its
		 * record begun kept for the program's retry (tls_stage_push) */
		c->part_t0 = kp_now_ms();
		s->staged = c->tls && tls_stage_push(c, v, nv, (size_t)s->hl + iov_total(v + 1, nv - 1), &r);
		s->staged_len = s->staged ? iov_total(v, nv) : 0;
		if (c->tls && !s->staged) {
			/* no memory for R's copy (RLIMIT_AS, a large write):
			 * nothing went; the caller steps aside (send_nomem) */
			errno = ENOMEM;
			return -1;
		}
		if (!s->staged)
			r = conn_sendmsg(c, fd, &m, s->send_flags);
		if (r < 0 && s->keep_copy && c->first == KP_FIRST_UNSENT &&
		    (errno == EPIPE || errno == ECONNRESET) && s->staged && kp_tls_push_wire) {
			/* bytes went before the failure: the proof decides */
			if (!head_sent_died(c, fd, s))
				return -1;
			continue;
		}
		/* the pooled socket was dead before our request got out (a
		 * failed sendmsg queued nothing; the engine wrote no byte): a
		 * fresh one (once), and the request goes there */
		if (r < 0 && s->keep_copy && c->first == KP_FIRST_UNSENT &&
		    (errno == EPIPE || errno == ECONNRESET)) {
			conn_note_dead(c, 0);
			int err = errno;
			if (swap_fresh(c, fd, false) == 0) {
				kp_count(replayed); /* none of it went out: any method */
				if (c->first_plan == KP_PLAN_PROVE)
					kp_count(replayed_unacked);
				s->keep_copy = false;
				c->replay_len = 0;
				s->send_flags = s->flags;
				continue;
			}
			errno = err;
		}
		return r;
	}
}

/* What the socket took of s's send (r, errno), settled: the head whole
 * (the request queued, body bytes that went with it learnt), torn (the
 * rest continues at the program's next write: docs/hold.md), or nothing.
 * Takes the call; c->lock released. */
static bool head_settle(struct kp_conn *c, int fd, struct head_send *s, ssize_t r, ssize_t *ret)
{
	/* the program's own send would have raised SIGPIPE here */
	bool held_back = r < 0 && errno == EPIPE && (s->send_flags & ~s->flags & MSG_NOSIGNAL) &&
			 !c->tls; /* (the engine's own write raised it) */
	size_t sent = 0, body_sent = 0;
	ssize_t sr = 0;
	if (r >= 0 && (size_t)r >= s->headlen) {
		sent = s->headlen;
		body_sent = (size_t)r - s->headlen;
	} else if (r > 0 && !c->tls &&
		   part_begin(c, s->head, s->headlen, s->data, (size_t)s->hl, (size_t)r, s->old_held)) {
		/* the socket took part of the head: nothing waits (part_pump) */
		if (s->out != s->small)
			kp_wbuf_free(s->out, s->out_cap);
		return torn_head(c, fd, &s->h, s->outlen > 0, s->keep_copy, s->replay_mark, s->mine,
				 s->flags, s->saved, ret);
	} else if (s->staged && (r > 0 || c->part_pend)) {
		/* the engine took part of R (a partial-write engine), or began
		 * a record it could not finish: nothing waits (tls_part_push) */
		tls_part_begin(c, s->staged_len, s->headlen, s->data, (size_t)s->hl, r > 0 ? (size_t)r : 0,
			       s->old_held);
		if (s->out != s->small)
			kp_wbuf_free(s->out, s->out_cap);
		return torn_head(c, fd, &s->h, s->outlen > 0, s->keep_copy, s->replay_mark, s->mine,
				 s->flags, s->saved, ret);
	} else if (r > 0) {
		/* no memory to keep the head: the rest of it, waited for */
		size_t more;
		sent = (size_t)r;
		sr = send_all(c, fd, s->head + sent, s->headlen - sent, s->flags, false, &more);
		sent += more;
	} else {
		sr = -1; /* EAGAIN, EINTR: nothing went, the program is told so */
	}
	if (s->out != s->small)
		kp_wbuf_free(s->out, s->out_cap);
	if (sr < 0) {
		int err = errno;
		if (held_back)
			sigpipe_as_kernel(s->flags); /* our MSG_NOSIGNAL kept it back */
		if (s->keep_copy)
			c->replay_len = s->replay_mark;
		if (!sent && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
			/* nothing went out: the program will offer this call's
			 * bytes again; what earlier calls gave us stays held */
			held_set(c, s->old_held);
		} else {
			/* a dead connection, or a torn head: finished either way */
			held_set(c, 0);
			go_passthrough(c, sent ? "send failed mid-head" : "send failed");
		}
		kp_unlock(&c->lock);
		errno = err;
		*ret = -1;
		return true;
	}
	held_set(c, 0);
	if (s->keep_copy && c->first == KP_FIRST_UNSENT)
		c->first = KP_FIRST_SENT;
	if (!queue_request(c, &s->h, s->outlen > 0)) {
		go_passthrough(c, "too many pipelined requests");
		*ret = (ssize_t)s->mine;
		kp_unlock(&c->lock);
		errno = s->saved;
		return true;
	}
	if (s->outlen > 0) {
		kp_count(rewritten);
		kp_debug("fd %d: request rewritten to keep-alive", fd);
	}
	*ret = (ssize_t)s->mine;
	/* body bytes that went with the head join the copy */
	if (body_sent && s->keep_copy && c->first == KP_FIRST_SENT &&
	    !replay_keep_iov(c, s->iov, s->iovcnt, s->mine, body_sent))
		c->first = KP_FIRST_DONE;
	if (body_sent) {
		account_sent(c, s->iov, s->iovcnt, s->mine, body_sent);
		*ret += (ssize_t)body_sent;
	}
	/* the process divided while our rewritten head went out (a sandbox's
	 * settling passes a busy connection by): the server is told to close
	 * after its answer by our FIN, once the request is whole, as by the
	 * settling (docs/owner.md "A sandbox").  TLS: the settling's own */
	if (s->outlen > 0 && !c->tls && __atomic_load_n(&divided, __ATOMIC_RELAXED))
		c->fin_due = true;
	handoff_fin_if_due(c, fd);
	kp_unlock(&c->lock);
	errno = s->saved;
	return true;
}

/* Nothing we follow: the call is the kernel's (false), after the bytes we
 * held from earlier calls went out unchanged (flush). */
static bool send_pass(struct kp_conn *c, int fd, int flags, bool flush, int saved, ssize_t *ret)
{
	if (flush) {
		if (flush_held(c, fd, flags) < 0) {
			int err = errno;
			if (err == EPIPE) /* our MSG_NOSIGNAL kept the program's back */
				sigpipe_as_kernel(flags);
			go_passthrough(c, "send failed");
			kp_unlock(&c->lock);
			errno = err;
			*ret = -1;
			return true;
		}
		go_passthrough(c, "gave up on the request");
	}
	kp_unlock(&c->lock);
	errno = saved;
	return false;
}

/* TLS: no memory to stage the rewritten head and this call's body for
 * the engine (tls_stage_push): nothing went out.  Fail open: the bytes
 * held from earlier calls go first, then the program's write goes to the
 * engine as written (its own buffer, never copied, never waited for: the
 * engine's WANT_WRITE is the program's), and the connection is ours no
 * more (docs/hold.md "No memory for the staging copy").  Takes the call;
 * c->lock released. */
static bool send_nomem(struct kp_conn *c, int fd, struct head_send *s, ssize_t *ret)
{
	if (s->out != s->small)
		kp_wbuf_free(s->out, s->out_cap);
	if (s->keep_copy)
		c->replay_len = s->replay_mark;
	held_set(c, s->old_held);
	unvouch(c, fd, "no memory to stage a TLS request");
	kp_debug("fd %d: no memory to stage the request for TLS: sent as written", fd);
	return send_pass(c, fd, s->flags, true, s->saved, ret);
}

/* Does the kernel accept the bytes of this send that we would read
 * before it: a head's (up to the longest we parse), a body's we copy for a
 * replay or look through for its end.  A body we only count is the
 * kernel's to read (a system call less per send). */
static bool bytes_readable(const struct kp_conn *c, const struct iovec *iov, int iovcnt)
{
	if (c->state != KP_ACTIVE)
		return true;
	if (c->req_mode == KP_REQ_BODY && c->first != KP_FIRST_SENT &&
	    !(c->n_reqs && c->reqs[c->n_reqs - 1].rewritten))
		return true;
	return kp_readable_iov(iov, iovcnt, FRM_MAX_HEAD + 1);
}

static bool send_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		    ssize_t *ret)
{
	if (!conn_lock(c, fd))
		return false;
	if (c->eof_written) {
		/* TLS, written after the owed EOF already (send_after_end): the
		 * SSL layer reports what a close_notify gives */
		unpool(c, "a write after the owed EOF");
		kp_unlock(&c->lock);
		*ret = -1;
		errno = EPIPE;
		kp_tls_epipe = true; /* the socket's EPIPE: its SIGPIPE too */
		return true;
	}
	if (__builtin_expect(!bytes_readable(c, iov, iovcnt), 0)) {
		/* the program's bytes, which we read before the kernel does,
		 * are ones it refuses (EFAULT): the call is the kernel's alone,
		 * after what we held went out, and the connection ours no more
		 * (docs/limits.md "A pointer the kernel refuses") */
		unvouch(c, fd, "a buffer the kernel refuses");
		return send_pass(c, fd, flags, true, errno, ret);
	}
	/* an interruption this call did not meet is no answer of its own
	 * (docs/replay.md "The copy's rest": answered where it happened).
	 * TLS: the SSL call's own (replay_stepped, kp_conn_replay_cut) */
	if (!c->tls)
		kp_replay_interrupted = false;
	/* the rest of a replay's copy first: never the program's bytes in
	 * the middle of it */
	if (__builtin_expect(c->replay_rest, 0) && replay_rest_first(c, fd, flags) < 0) {
		kp_unlock(&c->lock);
		*ret = -1; /* EINTR or EAGAIN: nothing of this call taken */
		return true;
	}
	/* the body of the first request on a reused connection: it joins the
	 * copy a replay would send */
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_BODY && c->first == KP_FIRST_SENT)
		return first_body_send(c, fd, iov, iovcnt, flags, ret);
	int saved = errno;
	int step = send_outside_head(c, fd, iov, iovcnt, flags, saved, ret);
	if (step != SEND_ON)
		return step;
	if (c->so.n_pending)
		conn_flush_opts(c, fd);
	size_t total = iov_total(iov, iovcnt);
	step = send_after_end(c, fd, total, saved, ret);
	if (step != SEND_ON)
		return step;
	struct head_send s; /* not zeroed: each step sets what the next reads */
	s.iov = iov;
	s.iovcnt = iovcnt;
	s.flags = flags;
	s.saved = saved;
	s.total = total;
	switch (head_collect(c, fd, &s, ret)) {
	case HEAD_HELD:
		return true;
	case HEAD_PASS:
		return send_pass(c, fd, flags, false, saved, ret);
	case HEAD_PASS_FLUSH:
		return send_pass(c, fd, flags, true, saved, ret);
	}
	/* The head is whole: rewrite, send all of it, then the rest of the call. */
	head_build(c, fd, &s);
	if (c->fresh_refused) {
		/* docs/replay.md "A fresh connection refused" */
		int err = c->fresh_refused;
		c->fresh_refused = 0;
		if (s.out != s.small)
			kp_wbuf_free(s.out, s.out_cap);
		held_set(c, 0);
		go_passthrough(c, "the fresh connection its first request needed was refused");
		errno = err;
		*ret = -1;
		return true;
	}
	if (!c->tls && (c->replay_rest || kp_replay_interrupted)) {
		/* settling the request before this one replayed it, and the
		 * copy did not all go within this call, or a signal came in
		 * the settling: the call ends here, nothing of it taken (its
		 * retry sends the rest of the copy first); the interruption
		 * answered now, never by a later call */
		errno = kp_replay_interrupted ? EINTR : EAGAIN;
		kp_replay_interrupted = false;
		s.staged = false;
		return head_settle(c, fd, &s, -1, ret);
	}
	if (c->tls && c->replay_async) {
		/* a replay began for the request before this one and its copy
		 * waits for the fresh handshake: this head after it, never
		 * before; nothing of it taken (docs/replay.md "The program's
		 * bounds") */
		kp_tls_push_fail(kp_tls_want(c->tls));
		s.staged = false;
		errno = EAGAIN;
		return head_settle(c, fd, &s, -1, ret);
	}
	ssize_t r = head_send(c, fd, &s);
	if (r < 0 && errno == ENOMEM && c->tls && !s.staged)
		return send_nomem(c, fd, &s, ret);
	return head_settle(c, fd, &s, r, ret);
}

/*
 * A write of the program's went out on c (ret > 0).  On a reused
 * connection one that follows another with no response byte read between
 * is pushed past Nagle: the kernel holds it until the server acknowledges
 * the one before, and a pooled connection's server delays that ACK (its
 * request/response mode: 40 ms) where a fresh connection's acknowledges at
 * once (its quick-ACK mode), so a request written as head then body waited
 * 40 ms with the library and not without it (docs/cost.md "A request in
 * two writes").  Not where the program set TCP_NODELAY or TCP_CORK itself
 * (its segments are its own: a push would pull its cork), nor after
 * MSG_MORE (it said more follows), nor on a socket another process holds
 * too.  Two system calls a push; none for a request in one write, nor on
 * a fresh or untracked connection.  (Another thread's TCP_NODELAY set
 * between our two calls would be lost: a window of two system calls.)
 */
static void nagle_after_write(struct kp_conn *c, int fd, int flags)
{
	uint8_t n = __atomic_load_n(&c->writes_since_rx, __ATOMIC_RELAXED);
	if (n < 255)
		__atomic_store_n(&c->writes_since_rx, (uint8_t)(n + 1), __ATOMIC_RELAXED);
	/* (shared: another process's options on the same socket, unknown) */
	if (n && __atomic_load_n(&c->reused, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&c->nagle_own, __ATOMIC_RELAXED) && !(flags & MSG_MORE) &&
	    !__atomic_load_n(&c->shared, __ATOMIC_RELAXED))
		kp_tcp_push(fd);
}

/* A fresh connection's handshake, through a BIO that hid its socket
 * from SSL_connect (curl's), that the broker may still be asked a
 * connection of another process for (conn.c tls_taken_across).  Once:
 * asked, it is not deferred again. */
static bool may_take_across(const struct kp_conn *c, void *ssl)
{
	return !c->tls && !c->tls_held_asked && !c->reused && kp_tls_across_on() && kp_tls_fd_hidden(ssl);
}

bool kp_send_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret)
{
	if (c == KP_POOLED)
		return false;
	child_write(c, fd);
	raw_settle(c, fd);
	struct kp_tls *t = __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE);
	void *hs = kp_tls_handshaking;
	if (t && !__atomic_load_n(&c->tls_pending, __ATOMIC_ACQUIRE))
		return false; /* ciphertext: the SSL_* wrappers frame its plaintext */
	if (hs && (t || __atomic_load_n(&c->tls_held, __ATOMIC_ACQUIRE) || may_take_across(c, hs)) &&
	    kp_tls_defer_may_hand(hs)) {
		/* A handshake's first write on a pooled TLS connection (or one
		 * from another process, held, or still to be asked for:
		 * conn_held.c), through a BIO of the program's own (curl): it
		 * tells us the fd.  Nothing goes out; the decision waits for the
		 * program's next call, as curl loads its trust store only after
		 * its first SSL_connect. */
		kp_tls_defer(hs, fd);
		*ret = -1;
		errno = EAGAIN;
		return true;
	}
	if (t || hs || __atomic_load_n(&c->tls_held, __ATOMIC_ACQUIRE)) {
		/* a fresh connection's handshake (the fd of a BIO of the
		 * program's own), or plain bytes on a pooled TLS connection
		 * (or on a TLS one from the broker: conn_held.c) */
		int saved = errno;
		switch (kp_conn_tls_start(fd, hs)) {
		case KP_TLS_HANDED: /* nothing may go out: the handshake is over */
			*ret = -1;
			errno = EAGAIN;
			return true;
		case KP_TLS_FRESH:
			errno = saved;
			return false;
		}
		errno = saved;
	}
	bool taken = send_intercept(c, fd, iov, iovcnt, flags, ret);
	if (taken && *ret > 0)
		nagle_after_write(c, fd, flags);
	conn_reap(c); /* closes that came while the send was busy */
	return taken;
}

static void send_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t ret)
{
	int saved = errno;
	if (!conn_lock(c, fd))
		return;
	if (ret < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		unpool(c, "a send failed");
	if (ret > 0)
		c->tx += (uint64_t)ret;
	if (ret > 0 && c->state == KP_ACTIVE)
		account_sent(c, iov, iovcnt, 0, (size_t)ret);
	handoff_fin_if_due(c, fd);
	kp_unlock(&c->lock);
	errno = saved;
}

void kp_send_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t ret,
		  int flags)
{
	if (c == KP_POOLED)
		return;
	/* (TLS: the engine's records, the program's writes one by one) */
	if (ret > 0)
		nagle_after_write(c, fd, flags);
	if (__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return;
	send_done(c, fd, iov, iovcnt, ret);
}

void kp_sendfile_done(struct kp_conn *c, int out_fd, ssize_t ret)
{
	if (c == KP_POOLED || ret == 0 || tls_bypassed(c, out_fd))
		return;
	int saved = errno;
	if (!conn_lock(c, out_fd))
		return;
	if (ret > 0)
		c->tx += (uint64_t)ret;
	if (ret < 0) {
		if (errno != EAGAIN && errno != EINTR)
			unpool(c, "sendfile failed");
	} else if (c->state == KP_ACTIVE) {
		/* zero-copy: we never see the bytes, so only a Content-Length body
		 * can be followed (by arithmetic) */
		if (c->req_mode == KP_REQ_BODY && c->req_body.kind == FRM_BODY_LENGTH &&
		    (uint64_t)ret <= c->req_body.left) {
			c->req_body.left -= (uint64_t)ret;
			if (!c->req_body.left)
				mode_set(c, KP_REQ_HEAD);
		} else {
			give_up(c, out_fd, "sendfile outside a Content-Length body");
		}
	}
	handoff_fin_if_due(c, out_fd);
	kp_unlock(&c->lock);
	if (ret > 0)
		nagle_after_write(c, out_fd, 0);
	errno = saved;
}

/* Send what Nagle holds behind the resumed handshake's last flight.
 * Not where the program set TCP_NODELAY or TCP_CORK itself: its
 * segments are its own (as nagle_after_write). */
static void push_held(struct kp_conn *c, int fd)
{
	if (!__atomic_load_n(&c->nagle_own, __ATOMIC_RELAXED))
		kp_tcp_push(fd);
}

bool kp_conn_tls_send(struct kp_conn *c, int fd, const void *buf, size_t n, ssize_t *ret)
{
	struct iovec iov = { (void *)buf, n };
	bool taken = send_intercept(c, fd, &iov, 1, 0, ret);
	if (taken && *ret > 0 && __atomic_exchange_n(&c->tls_push_first, false, __ATOMIC_ACQ_REL))
		push_held(c, fd);
	conn_reap(c);
	return taken;
}

void kp_conn_tls_resumed(int fd)
{
	struct kp_conn *c = kp_fd_valid(fd) ? kp_fd_conn(fd) : NULL;
	if (c && c != KP_POOLED)
		__atomic_store_n(&c->tls_push_first, true, __ATOMIC_RELEASE);
}

void kp_conn_tls_send_done(struct kp_conn *c, int fd, const void *buf, size_t n, ssize_t ret)
{
	struct iovec iov = { (void *)buf, n };
	send_done(c, fd, &iov, 1, ret);
	if (ret > 0 && __atomic_exchange_n(&c->tls_push_first, false, __ATOMIC_ACQ_REL))
		push_held(c, fd);
}
