/*
 * sockopts.c - the program's socket options carried onto a pooled socket
 * (DESIGN 1, connect()).  What the program sets on its socket before
 * connect() is recorded in its connection (c->opts); a pooled socket
 * handed to it gets those options, and the ones its previous owner set
 * and this one did not go back to their defaults (learnt once, from a
 * fresh socket), lazily: before the first request byte, before a
 * getsockopt(), or never, when the program sets the very same value.
 * Options we cannot carry make the connection unpoolable; options that
 * change the route keep the socket out of the pool.  Also O_NONBLOCK as
 * the program sets it (kp_note_nonblock).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "conn_internal.h"
#include "fdtable.h"
#include "real.h"

/* Socket options we know how to carry from the program's fresh socket to
 * a pooled one (and back to the default for the next owner).  Anything
 * else the program sets makes the connection unpoolable; options that
 * change the route (SO_MARK, SO_BINDTODEVICE...) keep it out of the pool
 * entirely (fdtable KP_FD_ROUTED). */
const int opt_levels[] = { SOL_SOCKET, IPPROTO_TCP, IPPROTO_IP, IPPROTO_IPV6 };

static int opt_level_index(int level)
{
	for (unsigned i = 0; i < sizeof(opt_levels) / sizeof(opt_levels[0]); i++)
		if (opt_levels[i] == level)
			return (int)i;
	return -1;
}

static bool opt_carried(int level, int name)
{
	switch (level) {
	case SOL_SOCKET:
		return name == SO_KEEPALIVE || name == SO_RCVTIMEO || name == SO_SNDTIMEO ||
		       name == SO_LINGER || name == SO_PRIORITY || name == SO_OOBINLINE ||
#ifdef SO_RCVTIMEO_NEW
		       name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW ||
#endif
		       /* only meaningful before bind/listen: harmless to drop */
		       name == SO_REUSEADDR || name == SO_REUSEPORT;
	case IPPROTO_TCP:
		return name == TCP_NODELAY || name == TCP_KEEPIDLE || name == TCP_KEEPINTVL ||
		       name == TCP_KEEPCNT || name == TCP_USER_TIMEOUT || name == TCP_QUICKACK;
	case IPPROTO_IP:
		return name == IP_TOS;
	case IPPROTO_IPV6:
		return name == IPV6_TCLASS || name == IPV6_V6ONLY;
	}
	return false;
}

static bool opt_routes(int level, int name)
{
	return (level == SOL_SOCKET && (name == SO_MARK || name == SO_BINDTODEVICE)) ||
	       (level == IPPROTO_IP && (name == IP_TRANSPARENT || name == IP_FREEBIND ||
					name == IP_BIND_ADDRESS_NO_PORT));
}

/* only meaningful before bind/connect (Ruby sets IPV6_V6ONLY on every
 * IPv6 socket): harmless to drop */
static bool opt_ignored(int level, int name)
{
	return (level == SOL_SOCKET && (name == SO_REUSEADDR || name == SO_REUSEPORT)) ||
	       (level == IPPROTO_IPV6 && name == IPV6_V6ONLY);
}

/* Record in c; returns false when the option cannot be carried. */
static bool opts_record(struct kp_conn *c, int level, int name, const void *val, socklen_t len)
{
	int li = opt_level_index(level);
	if (li < 0 || !opt_carried(level, name) || name > 255 || len > sizeof(c->opts[0].val) || !val)
		return false;
	if (opt_ignored(level, name))
		return true;
	struct kp_sockopt *o = NULL;
	for (unsigned i = 0; i < c->n_opts; i++)
		if (c->opts[i].level == li && c->opts[i].name == name)
			o = &c->opts[i];
	if (!o) {
		if (c->n_opts == KP_MAX_OPTS)
			return false;
		o = &c->opts[c->n_opts++];
	}
	o->level = (uint8_t)li;
	o->name = (uint8_t)name;
	o->len = (uint8_t)len;
	memcpy(o->val, val, len);
	return true;
}

static const struct kp_sockopt *opts_find(const struct kp_sockopt *opts, unsigned n,
					  const struct kp_sockopt *want)
{
	for (unsigned i = 0; i < n; i++)
		if (opts[i].level == want->level && opts[i].name == want->name)
			return &opts[i];
	return NULL;
}

/* Default values of the options we carry, learnt once from a fresh
 * socket (they come from sysctls that do not change under a running
 * program), so that resetting a previous owner's option costs no getsockopt. */
static struct kp_sockopt defaults[16];
static unsigned n_defaults;
static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;

/* fresh: an untouched socket to read a missing default from, or -1 */
static bool default_of(int fresh, const struct kp_sockopt *o, struct kp_sockopt *def)
{
	bool found = false;
	kp_lock(&defaults_lock);
	const struct kp_sockopt *d = opts_find(defaults, n_defaults, o);
	if (d) {
		*def = *d;
		found = true;
	} else if (fresh >= 0) {
		socklen_t len = sizeof(def->val);
		*def = *o;
		if (KP_REAL(getsockopt)(fresh, opt_levels[o->level], o->name, def->val, &len) == 0 &&
		    len <= sizeof(def->val)) {
			def->len = (uint8_t)len;
			found = true;
			if (n_defaults < sizeof(defaults) / sizeof(defaults[0]))
				defaults[n_defaults++] = *def;
		}
	}
	kp_unlock(&defaults_lock);
	return found;
}

static bool opt_same(const struct kp_sockopt *a, const struct kp_sockopt *b)
{
	return a->len == b->len && !memcmp(a->val, b->val, a->len);
}

/* Give pooled socket `pooled` the options of the program's fresh socket
 * `fresh`: the program's own where it set them; where only the previous
 * owner had set one, its default, lazily (c->pending).  Returns 0 or -1. */
int opts_transfer(int fresh, int pooled, struct kp_conn *c, const struct kp_tag *prev)
{
	c->n_pending = 0;
	for (unsigned i = 0; i < prev->n_opts && i < KP_MAX_OPTS; i++) {
		const struct kp_sockopt *o = &prev->opts[i];
		struct kp_sockopt def;
		if (opts_find(c->opts, c->n_opts, o))
			continue;
		if (!default_of(fresh, o, &def))
			return -1;
		if (!opt_same(&def, o))
			c->pending[c->n_pending++] = *o;
	}
	for (unsigned i = 0; i < c->n_opts; i++) {
		const struct kp_sockopt *p = opts_find(prev->opts, prev->n_opts, &c->opts[i]);
		if (p && opt_same(p, &c->opts[i]))
			continue;
		if (KP_REAL(setsockopt)(pooled, opt_levels[c->opts[i].level], c->opts[i].name,
					c->opts[i].val, c->opts[i].len) < 0)
			return -1;
	}
	return 0;
}

/* Reset what the previous owner left and this one did not claim.  Caller
 * holds c->lock; runs before the first request byte goes out. */
void flush_pending(struct kp_conn *c, int fd)
{
	for (unsigned i = 0; i < c->n_pending; i++) {
		struct kp_sockopt def;
		/* opts_transfer() cached every default it deferred */
		if (!default_of(-1, &c->pending[i], &def) ||
		    KP_REAL(setsockopt)(fd, opt_levels[def.level], def.name, def.val, def.len) < 0)
			unpool(c, "a socket option of the previous owner could not be reset");
	}
	c->n_pending = 0;
}

/* kp_note_sockopt without a lock: an option we could not follow; the
 * socket is never ours (a connection of ours is never pooled again). */
static void kp_note_raw(int fd)
{
	if (!kp_fd_valid(fd) || !kp_conn_raw(kp_fd_conn(fd)))
		return;
	if (!kp_fd_conn(fd))
		kp_fl_or(fd, KP_FD_SHARED);
}

bool kp_sockopt_already(struct kp_conn *c, int fd, int level, int name, const void *val,
			socklen_t len)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return false;
	if (c == KP_POOLED || !c->n_pending)
		return false;
	int li = opt_level_index(level);
	if (li < 0 || !val || len > sizeof(c->pending[0].val))
		return false;
	bool same = false;
	if (!conn_lock(c, fd))
		return false;
	for (unsigned i = 0; i < c->n_pending; i++) {
		struct kp_sockopt *o = &c->pending[i];
		if (o->level != li || o->name != name)
			continue;
		same = o->len == len && !memcmp(o->val, val, len);
		c->pending[i] = c->pending[--c->n_pending]; /* the program owns it now */
		if (same && !opts_record(c, level, name, val, len))
			unpool(c, "too many socket options to carry");
		break;
	}
	kp_unlock(&c->lock);
	return same;
}

void kp_before_getsockopt(struct kp_conn *c, int fd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return;
	if (c == KP_POOLED || !c->n_pending)
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		flush_pending(c, fd);
		kp_unlock(&c->lock);
	}
	errno = saved;
}

void kp_note_nonblock(int fd, bool on)
{
	if (!kp_fd_valid(fd))
		return;
	if (on)
		kp_fl_or(fd, KP_FD_NONBLOCK);
	else
		kp_fl_clear(fd, KP_FD_NONBLOCK);
	struct kp_conn *c = kp_fd_conn(fd);
	if (c && c != KP_POOLED)
		c->nonblock = on; /* O_NONBLOCK belongs to the description all dups share */
}

void kp_note_sockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_note_raw(fd);
	if (!kp_fd_valid(fd))
		return;
	kp_fdfl fl = kp_fl(fd);
	if (opt_routes(level, name)) {
		kp_fl_or(fd, KP_FD_ROUTED);
		struct kp_conn *c = kp_fd_conn(fd);
		if (c && c != KP_POOLED && conn_lock(c, fd)) {
			unpool(c, "a routing socket option");
			kp_unlock(&c->lock);
		}
		return;
	}
	struct kp_conn *c = kp_fd_conn(fd);
	if (c == KP_POOLED)
		return;
	if (!c) {
		/* only unconnected TCP sockets can become ours */
		if (!(fl & KP_FD_TCP) || (fl & KP_FD_CONNECTED))
			return;
		c = kp_conn_track(fd);
		if (!c)
			return;
	}
	if (!conn_lock(c, fd))
		return;
	if (!opts_record(c, level, name, val, len))
		unpool(c, "a socket option we cannot carry");
	kp_unlock(&c->lock);
}

/* Held across fork() with the other locks of kp_conn_before_fork. */
void kp_sockopts_before_fork(void)
{
	kp_lock(&defaults_lock);
}

void kp_sockopts_after_fork_parent(void)
{
	kp_unlock(&defaults_lock);
}

void kp_sockopts_after_fork_child(void)
{
	pthread_mutex_init(&defaults_lock, NULL);
}
