/*
 * conn_held.c - a pooled socket put under the program's fd at connect()
 * (adopt_pooled, handed_record: moved out of conn.c), and the TLS hand-out
 * at connect() across processes (docs/tls-across.md "The hand-out at
 * connect()"): a TLS connection taken from the broker by destination
 * alone, its socket under fd as a pooled one, its state held on the
 * connection (tls_held.c) until the program's first use of fd: its
 * SSL_connect takes it through the gate; anything else gets a fresh
 * connection in its place and the state goes back (swap_fresh).  Called
 * from conn.c with c->lock held (or c pinned in connect).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>

#include "config.h"
#include "conn_internal.h"
#include "real.h"
#include "replay.h"
#include "sockopts.h"
#include "tls.h"
#include "tls_held.h"
#include "watch.h"

/* Put pooled socket p in the program's fd, as if connect() had just
 * succeeded on the program's own socket.  Returns 0 or -1 (fd untouched
 * unless the dup3 succeeded). */
int adopt_pooled(int fd, int p, struct kp_conn *c, const struct pool_meta *meta, bool local)
{
	kp_fdfl fl = kp_fl(fd);
	bool nonblock, cloexec;
	if (fl & KP_FD_TCP) { /* we saw socket() and every flag change since */
		nonblock = fl & KP_FD_NONBLOCK;
		cloexec = fl & KP_FD_CLOEXEC;
	} else {
		int sfl = KP_REAL(fcntl)(fd, F_GETFL), dfl = KP_REAL(fcntl)(fd, F_GETFD);
		if (sfl < 0 || dfl < 0)
			return -1;
		nonblock = sfl & O_NONBLOCK;
		cloexec = dfl & FD_CLOEXEC;
	}
	struct kp_tag prev;
	if (meta->tag_len != sizeof(prev))
		return -1;
	memcpy(&prev, meta->tag, sizeof(prev));
	/* (a tag from the broker carries another process's epoch: the broker
	 * is not used after a change of credentials, kp_conn_cred_change) */
	if (local && !pooled_one_owner(&prev)) {
		errno = EPERM;
		return -1;
	}
	if (kp_sockopts_transfer(&c->so, fd, p, prev.opts, prev.n_opts) < 0)
		return -1;
	/* O_NONBLOCK lives in the open file description that dup3 makes fd
	 * share: make it the program's.  FD_CLOEXEC is per fd: dup3 sets it. */
	if (!prev.nonblock != !nonblock && KP_REAL(fcntl)(p, F_SETFL, nonblock ? O_NONBLOCK : 0) < 0)
		return -1;
	/* registrations made before connect() follow the fd to its new socket */
	kp_watch_detach(fd);
	int r = KP_REAL(dup3)(p, fd, cloexec ? O_CLOEXEC : 0);
	int err = errno;
	kp_watch_renew(fd);
	if (r < 0) {
		errno = err;
		return -1;
	}
	c->nonblock = nonblock;
	return 0;
}

/* c is now the pooled connection meta describes */
void handed_record(struct kp_conn *c, const struct pool_meta *meta, uint64_t now)
{
	c->reused = true;
	c->first = KP_FIRST_UNSENT;
	c->parked_ms = meta->parked_ms;
	c->sent_ms = now; /* the first request follows at once, as a rule */
	c->served_at_checkout = meta->requests;
	c->served = meta->requests;
	c->ka_timeout = meta->ka_timeout;
	c->ka_max = meta->ka_max;
	kp_count(reused);
}

int held_hand_out(int fd, struct kp_conn *c, struct kp_held *h, int p, uint64_t now)
{
	const struct pool_key *key = &c->key;
	if (adopt_pooled(fd, p, c, kp_held_meta(h), false) < 0) {
		kp_debug("fd %d: a TLS connection from another process could not be adopted: %s", fd, strerror(errno));
		kp_held_back(h, p, key, true, true); /* (fd untouched: p its one holder, as taken) */
		KP_REAL(close)(p);
		return -1;
	}
	KP_REAL(close)(p);
	c->state = KP_ACTIVE;
	c->tls_held = h;
	handed_record(c, kp_held_meta(h), now);
	kp_across_note("fd %d: a TLS connection from another process under fd at connect(), its state held", fd);
	return 0;
}

/* ssl's handshake refused the state held (another configuration's: the
 * broker's newest to the destination, taken by destination alone): the
 * broker asked again under the name ssl's settings make
 * (kp_tls_across_take); one found and passing the gate is put in fd's
 * place, and the held state goes back with the socket fd had.  True:
 * handed (c->tls_held gone). */
static bool held_own_name(struct kp_conn *c, int fd, void *ssl)
{
	struct pool_meta meta = { 0 };
	int p, keep = KP_REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0);
	struct kp_tls *t = keep >= 0 ? kp_tls_across_take(ssl, &c->key, fd, &p, &meta) : NULL;
	if (!t) {
		if (keep >= 0)
			KP_REAL(close)(keep);
		return false;
	}
	int ok = kp_desc_plain(fd) ? adopt_pooled(fd, p, c, &meta, false) : (errno = EPERM, -1);
	KP_REAL(close)(p);
	if (ok < 0) {
		kp_tls_across_drop(t, ssl);
		KP_REAL(close)(keep);
		return false;
	}
	/* fd holds the new socket: keep is the old one's last holder here */
	kp_held_back(c->tls_held, keep, &c->key, c->refs == 1 && one_owner(c), !held_opts_set(c));
	KP_REAL(close)(keep);
	c->tls_held = NULL;
	handed_record(c, &meta, kp_now_ms());
	conn_tls_handed(c, ssl, t);
	kp_across_note("fd %d: a TLS connection from another process handed to the program's SSL, under its name (%u requests served)",
		       fd, meta.requests);
	return true;
}

bool held_start(struct kp_conn *c, int fd, void *ssl)
{
	const char *why = "plain bytes on a TLS connection from another process";
	struct kp_tls *t = ssl ? kp_held_claim(c->tls_held, ssl, &c->key, fd, &why) : NULL;
	if (t) {
		kp_held_free(c->tls_held);
		c->tls_held = NULL;
		conn_tls_handed(c, ssl, t);
		kp_across_note("fd %d: a TLS connection from another process handed to the program's SSL (%u requests served)",
			       fd, c->served);
		return true;
	}
	/* one under the program's own name, if the broker has one (the take
	 * at SSL_connect): in fd's place, the state back */
	if (ssl && held_own_name(c, fd, ssl))
		return true;
	/* else the program gets a fresh connection, its round trip paid here;
	 * the state goes back to the broker (swap_fresh) */
	first_request_fresh(c, fd, why);
	if (c->tls_held) { /* no fresh connection: the program's bytes meet it */
		kp_held_free(c->tls_held);
		c->tls_held = NULL;
		unpool(c, "a TLS connection from another process, and no fresh one");
	}
	return false;
}

bool kp_conn_held_settle(struct kp_conn *c, int fd)
{
	if (kp_reentered() || c == KP_POOLED || !__atomic_load_n(&c->tls_held, __ATOMIC_ACQUIRE))
		return false;
	int saved = errno;
	bool swapped = false;
	if (conn_lock(c, fd)) {
		struct kp_tcp_view v;
		int inq = 0;
		/* (quiet and established: what the kernel reports stands) */
		if (c->tls_held && c->state == KP_ACTIVE && !c->shut_how && kp_tcp_view(fd, &v) == 0 &&
		    KP_REAL(ioctl)(fd, FIONREAD, &inq) == 0 && (inq > 0 || v.state != TCP_ESTABLISHED)) {
			(void)held_start(c, fd, NULL);
			swapped = true;
		}
		kp_unlock(&c->lock);
	}
	errno = saved;
	return swapped;
}
