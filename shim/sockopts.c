/*
 * sockopts.c - the program's socket options carried onto a pooled socket
 * (docs/design.md §1, connect()).  What the program sets on its socket before
 * connect() is recorded (struct kp_sockopts, in its connection); a pooled socket
 * handed to it gets those options, and the ones its previous owner set
 * and this one did not go back to their defaults (learnt once, from a
 * fresh socket), lazily: before the first request byte, before a
 * getsockopt(), or never, when the program sets the very same value.
 * Options we cannot carry make the connection unpoolable; options that
 * change the route keep the socket out of the pool: verdicts, which the
 * connection core (conn_opts.c) acts on.  No lock of the core is taken
 * here and no function of it called.  Beside the options, the state of
 * the open file description (its signals, its flags: kp_desc_*, docs/hold.md
 * "What the description carries"): cleared at park, checked before a
 * hand-out, carried onto a fresh socket.
 */
#include "sockopts.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "kp_lock.h"
#include "real.h"

/* Socket options we know how to carry from the program's fresh socket to
 * a pooled one (and back to the default for the next owner).  Anything
 * else the program sets makes the connection unpoolable; options that
 * change the route (SO_MARK, SO_BINDTODEVICE...) keep it out of the pool
 * entirely (fdtable KP_FD_ROUTED). */
const int kp_opt_levels[] = { SOL_SOCKET, IPPROTO_TCP, IPPROTO_IP, IPPROTO_IPV6 };

static int opt_level_index(int level)
{
	for (unsigned i = 0; i < sizeof(kp_opt_levels) / sizeof(kp_opt_levels[0]); i++)
		if (kp_opt_levels[i] == level)
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

bool kp_sockopt_carried(int level, int name)
{
	return opt_level_index(level) >= 0 && opt_carried(level, name) && name <= 255;
}

bool kp_sockopt_routes(int level, int name)
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

static const struct kp_sockopt *opts_find(const struct kp_sockopt *opts, unsigned n,
					  const struct kp_sockopt *want)
{
	for (unsigned i = 0; i < n; i++)
		if (opts[i].level == want->level && opts[i].name == want->name)
			return &opts[i];
	return NULL;
}

/* The slot of s for the option (its own, or a new one): NULL when there
 * is no room. */
static struct kp_sockopt *opts_slot(struct kp_sockopts *s, int li, int name)
{
	struct kp_sockopt want = { .level = (uint8_t)li, .name = (uint8_t)name };
	const struct kp_sockopt *own = opts_find(s->opts, s->n_opts, &want);
	if (own)
		return &s->opts[own - s->opts];
	if (s->n_opts == KP_MAX_OPTS)
		return NULL;
	return &s->opts[s->n_opts++];
}

/* Record in s; returns false when the option cannot be carried (late:
 * recorded as one we do not carry, kp_sockopts_record_late). */
static bool opts_record(struct kp_sockopts *s, int level, int name, const void *val, socklen_t len,
			bool late)
{
	int li = opt_level_index(level);
	if (li < 0 || (!late && !opt_carried(level, name)) || name > 255 ||
	    len > sizeof(s->opts[0].val) || !val)
		return false;
	if (opt_ignored(level, name))
		return true;
	struct kp_sockopt *o = opts_slot(s, li, name);
	if (!o)
		return false;
	o->level = (uint8_t)li;
	o->name = (uint8_t)name;
	o->len = (uint8_t)len;
	o->late = late;
	memcpy(o->val, val, len);
	return true;
}

bool kp_sockopts_record_late(struct kp_sockopts *s, int level, int name, const void *val,
			     socklen_t len)
{
	return opts_record(s, level, name, val, len, true);
}

bool kp_sockopts_late_fits(const struct kp_sockopts *s, int level, int name, socklen_t len)
{
	int li = opt_level_index(level);
	if (li < 0 || name > 255 || len > sizeof(s->opts[0].val))
		return false;
	struct kp_sockopt want = { .level = (uint8_t)li, .name = (uint8_t)name };
	return opt_ignored(level, name) || s->n_opts < KP_MAX_OPTS ||
	       opts_find(s->opts, s->n_opts, &want);
}

/* Default values of the options we carry, learnt once from a fresh
 * socket (they come from sysctls that do not change under a running
 * program), so that resetting a previous owner's option costs no getsockopt. */
static struct kp_sockopt defaults[16];
static unsigned n_defaults;
static kp_mutex_t defaults_lock = KP_MUTEX_INITIALIZER;

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
		if (KP_REAL(getsockopt)(fresh, kp_opt_levels[o->level], o->name, def->val, &len) == 0 &&
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

enum kp_opt_verdict kp_sockopts_record(struct kp_sockopts *s, int level, int name,
				       const void *val, socklen_t len)
{
	if (kp_sockopt_routes(level, name))
		return KP_OPT_ROUTES;
	return opts_record(s, level, name, val, len, false) ? KP_OPT_KEPT : KP_OPT_UNCARRIED;
}

int kp_sockopts_transfer(struct kp_sockopts *s, int fresh, int pooled,
			 const struct kp_sockopt *prev, unsigned n_prev)
{
	if (n_prev > KP_MAX_OPTS)
		n_prev = KP_MAX_OPTS;
	s->n_pending = 0;
	for (unsigned i = 0; i < n_prev; i++) {
		const struct kp_sockopt *o = &prev[i];
		struct kp_sockopt def;
		if (opts_find(s->opts, s->n_opts, o))
			continue;
		if (!default_of(fresh, o, &def))
			return -1;
		if (!opt_same(&def, o))
			s->pending[s->n_pending++] = *o;
	}
	for (unsigned i = 0; i < s->n_opts; i++) {
		const struct kp_sockopt *p = opts_find(prev, n_prev, &s->opts[i]);
		if (p && opt_same(p, &s->opts[i]))
			continue;
		if (KP_REAL(setsockopt)(pooled, kp_opt_levels[s->opts[i].level], s->opts[i].name,
					s->opts[i].val, s->opts[i].len) < 0)
			return -1;
	}
	return 0;
}

bool kp_sockopts_flush(struct kp_sockopts *s, int fd)
{
	bool all = true;
	for (unsigned i = 0; i < s->n_pending; i++) {
		struct kp_sockopt def;
		/* kp_sockopts_transfer() cached every default it deferred */
		if (!default_of(-1, &s->pending[i], &def) ||
		    KP_REAL(setsockopt)(fd, kp_opt_levels[def.level], def.name, def.val, def.len) < 0)
			all = false;
	}
	s->n_pending = 0;
	return all;
}

bool kp_sockopts_claim(struct kp_sockopts *s, int level, int name, const void *val,
		       socklen_t len, enum kp_opt_verdict *verdict)
{
	*verdict = KP_OPT_KEPT;
	int li = opt_level_index(level);
	if (li < 0 || !val || len > sizeof(s->pending[0].val))
		return false;
	for (unsigned i = 0; i < s->n_pending; i++) {
		struct kp_sockopt *o = &s->pending[i];
		if (o->level != li || o->name != name)
			continue;
		bool same = o->len == len && !memcmp(o->val, val, len);
		s->pending[i] = s->pending[--s->n_pending]; /* the program owns it now */
		if (same && !opts_record(s, level, name, val, len, false))
			*verdict = KP_OPT_UNCARRIED;
		return same;
	}
	return false;
}

/* ------------------------------------------------------------ the description */

/* the status flags F_SETFL changes on a socket beside O_NONBLOCK (O_DIRECT
 * is refused there; O_APPEND and O_NOATIME change nothing a socket does,
 * but F_GETFL shows them) */
#define DESC_FLAGS (O_ASYNC | O_APPEND | O_NOATIME)

struct desc {
	int fl;
	struct f_owner_ex own;
	int sig;
};

static int desc_read(int fd, struct desc *d)
{
	d->fl = KP_REAL(fcntl)(fd, F_GETFL);
	d->sig = KP_REAL(fcntl)(fd, F_GETSIG);
	if (d->fl < 0 || d->sig < 0 || KP_REAL(fcntl)(fd, F_GETOWN_EX, &d->own) < 0)
		return -1;
	return 0;
}

static bool desc_is_plain(const struct desc *d)
{
	return !(d->fl & DESC_FLAGS) && !d->own.pid && !d->sig;
}

bool kp_desc_plain(int fd)
{
	int saved = errno;
	struct desc d;
	bool plain = desc_read(fd, &d) == 0 && desc_is_plain(&d);
	errno = saved;
	return plain;
}

int kp_desc_clear(int fd)
{
	struct desc d;
	if (desc_read(fd, &d) < 0)
		return -1;
	if (desc_is_plain(&d))
		return 0;
	/* O_ASYNC first: no signal while the owner changes */
	if (((d.fl & DESC_FLAGS) && KP_REAL(fcntl)(fd, F_SETFL, d.fl & ~DESC_FLAGS) < 0) ||
	    (d.sig && KP_REAL(fcntl)(fd, F_SETSIG, 0) < 0) ||
	    (d.own.pid && KP_REAL(fcntl)(fd, F_SETOWN, 0) < 0))
		return -1;
	return 0;
}

int kp_desc_carry(int from, int to)
{
	struct desc d;
	if (desc_read(from, &d) < 0)
		return -1;
	if (desc_is_plain(&d))
		return 0;
	int tfl = KP_REAL(fcntl)(to, F_GETFL);
	if (tfl < 0)
		return -1;
	/* an owner gone since (ESRCH): the program's signals went nowhere,
	 * and with no owner they still do; only F_GETOWN could tell (fail
	 * open: the swap goes on) */
	int saved = errno;
	if (d.own.pid && KP_REAL(fcntl)(to, F_SETOWN_EX, &d.own) < 0) {
		if (errno != ESRCH)
			return -1;
		errno = saved;
	}
	if ((d.sig && KP_REAL(fcntl)(to, F_SETSIG, d.sig) < 0) ||
	    KP_REAL(fcntl)(to, F_SETFL, (tfl & ~DESC_FLAGS) | (d.fl & DESC_FLAGS)) < 0)
		return -1;
	return 0;
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
	kp_mutex_init(&defaults_lock);
}
