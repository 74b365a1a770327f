/*
 * pool.c - the in-process idle-connection pool.
 *
 * Per destination a LIFO stack (hand out the newest: it is the least likely
 * to have been closed by the server); across destinations one list in park
 * order, so the total cap evicts the oldest.  One mutex, never held across
 * a call into the injected ops (close, liveness probe).
 */
#include "pool.h"
#include "kp_lock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "kp_mem.h"

/* every allocation of the pool from kp_mem, never malloc: a handler's
 * connect() or close() may run while the program is inside malloc */
#define uthash_malloc(sz) kp_mem_calloc(sz)
/* a table that cannot grow costs the entry being added, never the host
 * (uthash's default on a failed allocation is exit(-1)): each HASH_ADD
 * below is checked (its element's hh.tbl is NULL when it was not added) */
#define HASH_NONFATAL_OOM 1
#define uthash_free(ptr, sz) kp_mem_free(ptr)
#include <uthash.h>
#include <utlist.h>


struct idle;

struct dest {
	struct pool_key key;
	struct idle *stack; /* newest first */
	unsigned count;
	UT_hash_handle hh;
};

struct idle {
	int fd;
	uint64_t parked_ms;
	uint64_t expires_ms;  /* with the idle cap learnt when it was parked */
	uint64_t limit_ms;    /* without it: the configured or announced limit */
	struct pool_meta meta;
	struct dest *dest;
	struct idle *dnext, *dprev; /* in dest->stack */
	struct idle *gnext, *gprev; /* in all_idle, oldest first */
};

/*
 * Expiry that learns.  A server that closes idle connections sooner than
 * it says (or says nothing) costs a wasted request and a replay each time
 * a socket we kept is found dead.  So each destination keeps evidence: the
 * oldest idle age and the highest request count at which a reused socket
 * was seen to answer (pool_note_alive), and its deaths.  The first death
 * teaches nothing (one may be a restart).  At the next one:
 *  - at the same request count n >= 2, when sockets were seen to answer
 *    after n - 1 requests and never after n: the server closes after n
 *    requests (Apache's MaxKeepAliveRequests, said or not): sockets that
 *    have served n are no longer parked;
 *  - else, older than any socket seen to answer: idle time is to blame:
 *    sockets are no longer kept past max(the oldest age seen to answer,
 *    3/4 of this death's age); a later death younger than the cap shrinks
 *    it again, so it converges below the server's timeout;
 *  - else (a death no older and no more used than live ones: a reset, a
 *    restart) nothing is learnt; the replay covers it.
 * The cap must be able to grow, or it learns only from the evidence it
 * lets through: a server whose idle timer is not one fixed timeout (drawn
 * at random per connection, or shortened under load) has early deaths that
 * set a small cap, sockets older than it are then dropped unseen, so no
 * older socket is ever seen to answer (one run against a 0-30 ms random
 * timer: the cap stuck at 6 ms after two deaths, 30 of 180 requests reused
 * where about half would be).  So one in TRIAL_EVERY sockets found past
 * the cap (but within the configured or announced limit) is a trial: it
 * is probed, handed out when alive, and if it answers, the cap rises to
 * its age (the oldest age seen to answer, the same bound as above).  A
 * trial that dies teaches what any death does.  Against a fixed timeout
 * the cap then settles at the oldest age seen to work below it; a trial
 * past the timeout costs one probe (a dead socket), or a replay when its
 * close crosses our request.
 * Ages are idle times up to when the request was sent (the shim measures
 * them so).  What was learnt is forgotten LEARNT_TTL_MS after it was last
 * added to: servers are reconfigured, and a cap grows only by trials.
 * Bounded: at most MAX_LEARNT destinations are remembered.
 */
struct learnt {
	struct pool_key key;
	uint64_t idle_cap_ms;    /* 0: none */
	uint32_t max_requests;   /* 0: none */
	bool seen_death;
	uint32_t last_requests;  /* of the last unexplained death */
	uint64_t last_age_ms;
	uint64_t alive_age_ms;   /* oldest idle age seen to answer */
	uint32_t alive_requests; /* most requests served seen to answer */
	uint32_t over_cap;       /* sockets found past the cap since the last trial */
	uint64_t updated_ms;
	UT_hash_handle hh;
};
#define LEARNT_TTL_MS (10 * 60 * 1000)
#define MAX_LEARNT 256
#define TRIAL_EVERY 4

static kp_mutex_t lock = KP_MUTEX_INITIALIZER;
static struct learnt *learnts; /* uthash by key */
static unsigned n_learnt;
static struct pool_config cfg;
static struct pool_ops ops;
static struct dest *dests;     /* uthash by key; kept when empty */
static unsigned n_dests;
/* The destination and the learnt limits last looked up: a program talks
 * to one server at a time, and its park and hand-out then cost one
 * compare of keys instead of hashing them (docs/cost.md). */
static struct dest *last_dest;
static struct learnt *last_learnt;
/* struct idle objects no longer in use: a park takes one, a hand-out
 * gives it back, no malloc per request */
static struct idle *idle_spare;
static struct idle *all_idle;  /* oldest first */
static size_t n_idle;

uint64_t pool_expiry(const struct pool_config *c, const struct pool_meta *meta, uint64_t parked_ms)
{
	uint64_t idle = c->idle_ms;
	/* The server's own timeout, minus a second of margin for the time our
	 * request spends on the way (net-http-persistent and Go do the same). */
	if (meta->ka_timeout >= 0) {
		uint64_t hint = (uint64_t)meta->ka_timeout * 1000;
		hint = hint > 1000 ? hint - 1000 : 0;
		if (hint < idle)
			idle = hint;
	}
	return parked_ms + idle;
}

void pool_init(const struct pool_config *c, const struct pool_ops *o)
{
	cfg = *c;
	ops = *o;
	dests = NULL;
	n_dests = 0;
	last_dest = NULL;
	last_learnt = NULL;
	all_idle = NULL;
	n_idle = 0;
	struct learnt *l, *tmp;
	HASH_ITER(hh, learnts, l, tmp) {
		HASH_DEL(learnts, l);
		kp_mem_free(l);
	}
	n_learnt = 0;
}

/* What is learnt of key and still current at now_ms, or NULL.  Caller
 * holds the lock. */
static struct learnt *learnt_find(const struct pool_key *key, uint64_t now_ms)
{
	struct learnt *l = last_learnt;
	if (!l || memcmp(&l->key, key, sizeof(*key))) {
		HASH_FIND(hh, learnts, key, sizeof(*key), l);
		if (l)
			last_learnt = l; /* learnts are freed only by pool_init */
	}
	if (l && now_ms > l->updated_ms + LEARNT_TTL_MS) { /* start over */
		l->idle_cap_ms = l->last_age_ms = l->alive_age_ms = 0;
		l->max_requests = l->last_requests = l->alive_requests = 0;
		l->over_cap = 0;
		l->seen_death = false;
		l->updated_ms = now_ms;
	}
	return l;
}

/* The learnt limits applied to a socket parked at parked_ms: its expiry
 * no later than the learnt idle cap allows.  Caller holds the lock. */
static uint64_t learnt_expiry(const struct learnt *l, uint64_t expires_ms, uint64_t parked_ms)
{
	if (l && l->idle_cap_ms && parked_ms + l->idle_cap_ms < expires_ms)
		return parked_ms + l->idle_cap_ms;
	return expires_ms;
}

/* Caller holds the lock. */
static struct learnt *learnt_get(const struct pool_key *key, uint64_t now_ms)
{
	struct learnt *l = learnt_find(key, now_ms);
	if (!l && n_learnt < MAX_LEARNT && (l = kp_mem_calloc(sizeof(*l)))) {
		l->key = *key;
		HASH_ADD(hh, learnts, key, sizeof(l->key), l);
		if (l->hh.tbl) {
			n_learnt++;
		} else {
			kp_mem_free(l);
			l = NULL;
		}
	}
	if (l)
		l->updated_ms = now_ms;
	return l;
}

/* Caller holds the lock. */
static void learn_death(const struct pool_key *key, uint64_t age_ms, uint32_t requests,
			uint64_t now_ms)
{
	struct learnt *l = learnt_get(key, now_ms);
	if (!l || (l->max_requests && requests >= l->max_requests))
		return; /* explained (parked before we learnt it) */
	if (l->seen_death && requests == l->last_requests && requests >= 2 &&
	    l->alive_requests == requests - 1) {
		l->max_requests = requests;
	} else if (l->seen_death && age_ms > l->alive_age_ms) {
		uint64_t cap = age_ms - age_ms / 4;
		if (cap < l->alive_age_ms)
			cap = l->alive_age_ms;
		if (!l->idle_cap_ms || cap < l->idle_cap_ms)
			l->idle_cap_ms = cap ? cap : 1;
	}
	l->seen_death = true;
	l->last_requests = requests;
	l->last_age_ms = age_ms;
}

void pool_note_alive(const struct pool_key *key, uint64_t idle_ms, uint32_t requests,
		     uint64_t now_ms)
{
	kp_lock(&lock);
	struct learnt *l = learnt_get(key, now_ms);
	if (l && idle_ms > l->alive_age_ms)
		l->alive_age_ms = idle_ms;
	if (l && l->idle_cap_ms && idle_ms > l->idle_cap_ms)
		l->idle_cap_ms = idle_ms; /* a trial past the cap answered */
	if (l && requests > l->alive_requests)
		l->alive_requests = requests;
	kp_unlock(&lock);
}

void pool_note_dead(const struct pool_key *key, uint64_t idle_ms, uint32_t requests,
		    uint64_t now_ms)
{
	kp_lock(&lock);
	learn_death(key, idle_ms, requests, now_ms);
	kp_unlock(&lock);
}

void pool_note_killed(const struct pool_key *key, uint32_t requests, uint64_t now_ms)
{
	kp_lock(&lock);
	struct learnt *l = learnt_get(key, now_ms);
	/* no socket that had served as many was seen to answer again: the
	 * destination closes after `requests`, silently (a smaller limit
	 * than the truth costs reuse, never a request) */
	if (l && requests && requests > l->alive_requests &&
	    (!l->max_requests || requests < l->max_requests))
		l->max_requests = requests;
	kp_unlock(&lock);
}

void pool_learnt(const struct pool_key *key, uint64_t now_ms, uint64_t *idle_cap_ms,
		 uint32_t *max_requests)
{
	kp_lock(&lock);
	struct learnt *l = learnt_find(key, now_ms);
	*idle_cap_ms = l ? l->idle_cap_ms : 0;
	*max_requests = l ? l->max_requests : 0;
	kp_unlock(&lock);
}

/* The destination of key, or NULL.  Caller holds the lock. */
static struct dest *dest_find(const struct pool_key *key)
{
	struct dest *d = last_dest;
	if (!d || memcmp(&d->key, key, sizeof(*key))) {
		HASH_FIND(hh, dests, key, sizeof(*key), d);
		if (d)
			last_dest = d;
	}
	return d;
}

/* Destinations stay when their last socket leaves (the next park would
 * make them again); past MAX_DESTS the empty ones go.  Caller holds the
 * lock. */
#define MAX_DESTS 64
static void sweep_dests(void)
{
	struct dest *d, *tmp;
	HASH_ITER(hh, dests, d, tmp) {
		if (!d->count) {
			HASH_DEL(dests, d);
			kp_mem_free(d);
			n_dests--;
		}
	}
	last_dest = NULL;
}

/* An idle entry, from the spares or kp_mem.  Caller holds the lock. */
static struct idle *idle_new(void)
{
	struct idle *e = idle_spare;
	if (!e)
		return kp_mem_calloc(sizeof(*e));
	idle_spare = e->dnext;
	memset(e, 0, sizeof(*e));
	return e;
}

/* Back to the spares: at most as many as were ever idle at once.  Caller
 * holds the lock. */
static void idle_release(struct idle *e)
{
	e->dnext = idle_spare;
	idle_spare = e;
}

/* Unlink e from both lists; caller holds the lock. */
static void unlink_idle(struct idle *e)
{
	struct dest *d = e->dest;
	DL_DELETE2(d->stack, e, dprev, dnext);
	DL_DELETE2(all_idle, e, gprev, gnext);
	d->count--;
	__atomic_store_n(&n_idle, n_idle - 1, __ATOMIC_RELEASE);
}

/* Close collected fds outside the lock. */
static void close_all(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ops.close(fds[i]);
}

/* A live socket the caps pushed out: someone else (the broker) may want
 * it.  Outside the lock. */
struct victim {
	int fd;
	struct pool_key key;
	struct pool_meta meta;
};

/* Unlink e, keeping what evict_all needs. */
static struct victim victim_take(struct idle *e)
{
	struct victim v = { e->fd, e->dest->key, e->meta };
	unlink_idle(e);
	idle_release(e);
	return v;
}

static void evict_all(const struct victim *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!ops.evicted || ops.evicted(v[i].fd, &v[i].key, &v[i].meta) < 0)
			ops.close(v[i].fd);
}

#define EVICT_BATCH 4 /* one checkin adds one: 2 would do; small, for a signal handler's stack (docs/binding.md) */

int pool_checkin(const struct pool_key *key, int fd, const struct pool_meta *meta, uint64_t now_ms)
{
	struct victim victims[EVICT_BATCH];
	size_t n_victims = 0;

	if (!cfg.max_per_dest || !cfg.max_total)
		return -1;
	/* RFC 9112 9.3: the server said it serves at most max requests here */
	if (meta->ka_max >= 0 && meta->requests >= (uint32_t)meta->ka_max)
		return -1;
	if (pool_expiry(&cfg, meta, now_ms) <= now_ms)
		return -1;

	/* a socket handed back unused keeps the idle time it had */
	uint64_t parked = meta->parked_ms && meta->parked_ms <= now_ms ? meta->parked_ms : now_ms;
	uint64_t limit = pool_expiry(&cfg, meta, parked);

	kp_lock(&lock);
	struct learnt *l = learnt_find(key, now_ms);
	uint64_t expires = learnt_expiry(l, limit, parked);
	if (expires <= now_ms || (l && l->max_requests && meta->requests >= l->max_requests)) {
		kp_unlock(&lock);
		return -1;
	}
	struct dest *d = dest_find(key);
	if (!d) {
		if (n_dests >= MAX_DESTS)
			sweep_dests();
		d = kp_mem_calloc(sizeof(*d));
		if (!d) {
			kp_unlock(&lock);
			return -1;
		}
		d->key = *key;
		HASH_ADD(hh, dests, key, sizeof(d->key), d);
		if (!d->hh.tbl) {
			kp_mem_free(d);
			kp_unlock(&lock);
			return -1;
		}
		n_dests++;
		last_dest = d;
	}
	struct idle *e = idle_new();
	if (!e) {
		kp_unlock(&lock);
		return -1;
	}
	e->fd = fd;
	e->meta = *meta;
	e->parked_ms = parked;
	e->meta.parked_ms = parked;
	e->limit_ms = limit;
	e->expires_ms = expires;
	e->dest = d;
	DL_PREPEND2(d->stack, e, dprev, dnext);
	DL_APPEND2(all_idle, e, gprev, gnext);
	d->count++;
	__atomic_store_n(&n_idle, n_idle + 1, __ATOMIC_RELEASE);
	/* Per-destination cap: drop this destination's oldest (the stack's
	 * tail; utlist: head->prev is the tail). */
	while (d->count > cfg.max_per_dest && n_victims < EVICT_BATCH)
		victims[n_victims++] = victim_take(d->stack->dprev);
	/* Total cap: drop the oldest anywhere. */
	while (n_idle > cfg.max_total && n_victims < EVICT_BATCH)
		victims[n_victims++] = victim_take(all_idle);
	kp_unlock(&lock);
	evict_all(victims, n_victims);
	return 0;
}

int pool_checkout(const struct pool_key *key, uint64_t now_ms, struct pool_meta *meta)
{
	for (;;) {
		int fd = -1;
		bool expired = false, trial = false;

		kp_lock(&lock);
		struct dest *d = dest_find(key);
		if (d && d->stack) {
			struct idle *e = d->stack;
			fd = e->fd;
			/* the cap as learnt by now, grown or shrunk since it was parked */
			struct learnt *l = learnt_find(key, now_ms);
			expired = learnt_expiry(l, e->limit_ms, e->parked_ms) <= now_ms;
			if (expired && e->limit_ms > now_ms && ++l->over_cap >= TRIAL_EVERY) {
				l->over_cap = 0;
				expired = false;
				trial = true;
			}
			*meta = e->meta;
			unlink_idle(e);
			idle_release(e);
		}
		kp_unlock(&lock);

		if (fd < 0)
			return -1;
		if (!expired && ((!trial && now_ms < meta->parked_ms + cfg.unprobed_ms) || ops.alive(fd)))
			return fd;
		ops.close(fd);
		if (!expired)
			pool_note_dead(key, now_ms - meta->parked_ms, meta->requests, now_ms);
		/* the newest was expired or dead: older ones of this destination
		 * are older still, but each is checked; the loop ends when the
		 * stack is empty */
		if (expired)
			pool_expire(now_ms);
	}
}

/* The idle entry of fd, or NULL.  Under the lock. */
static struct idle *idle_of_fd(int fd)
{
	struct idle *e;
	DL_FOREACH2(all_idle, e, gnext)
		if (e->fd == fd)
			return e;
	return NULL;
}

bool pool_owns_fd(int fd, bool take)
{
	kp_lock(&lock);
	struct idle *e = idle_of_fd(fd);
	bool found = e != NULL;
	if (e && take) {
		unlink_idle(e);
		idle_release(e);
	}
	kp_unlock(&lock);
	return found;
}

int pool_take_fd(int fd, struct pool_key *key, struct pool_meta *meta)
{
	kp_lock(&lock);
	struct idle *e = idle_of_fd(fd);
	int r = e ? 0 : -1;
	if (e) {
		struct victim v = victim_take(e);
		*key = v.key;
		*meta = v.meta;
	}
	kp_unlock(&lock);
	return r;
}

size_t pool_list(struct pool_entry *out, size_t cap)
{
	size_t n = 0;
	kp_lock(&lock);
	struct idle *e;
	DL_FOREACH2(all_idle, e, gnext) {
		if (n == cap)
			break;
		out[n++] = (struct pool_entry){ e->fd, e->dest->key, e->meta, e->expires_ms };
	}
	kp_unlock(&lock);
	return n;
}

uint64_t pool_next_expiry(void)
{
	uint64_t next = UINT64_MAX;
	kp_lock(&lock);
	struct idle *e;
	DL_FOREACH2(all_idle, e, gnext)
		if (e->expires_ms < next)
			next = e->expires_ms;
	kp_unlock(&lock);
	return next;
}

unsigned pool_expire(uint64_t now_ms)
{
	unsigned total = 0;
	for (;;) {
		int victims[EVICT_BATCH];
		size_t n = 0;
		kp_lock(&lock);
		struct idle *e, *tmp;
		DL_FOREACH_SAFE2(all_idle, e, tmp, gnext) {
			if (n == EVICT_BATCH)
				break;
			if (e->expires_ms <= now_ms) {
				victims[n++] = e->fd;
				unlink_idle(e);
				idle_release(e);
			}
		}
		kp_unlock(&lock);
		close_all(victims, n);
		total += (unsigned)n;
		if (n < EVICT_BATCH)
			return total;
	}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

size_t pool_fds(int *fds, size_t cap)
{
	size_t n = 0;
	kp_lock(&lock);
	struct idle *e;
	DL_FOREACH2(all_idle, e, gnext) {
		if (n == cap)
			break;
		fds[n++] = e->fd;
	}
	kp_unlock(&lock);
	qsort(fds, n, sizeof(*fds), cmp_int);
	return n;
}

void pool_before_fork(void)
{
	kp_lock(&lock);
}

void pool_after_fork_parent(void)
{
	kp_unlock(&lock);
}

void pool_after_fork_child(void)
{
	kp_mutex_init(&lock);
	kp_mem_after_fork_child();
	struct idle *e, *tmp;
	DL_FOREACH_SAFE2(all_idle, e, tmp, gnext) {
		ops.close(e->fd);
		idle_release(e);
	}
	struct dest *d, *dtmp;
	HASH_ITER(hh, dests, d, dtmp) {
		HASH_DEL(dests, d);
		kp_mem_free(d);
	}
	n_dests = 0;
	last_dest = NULL;
	all_idle = NULL;
	n_idle = 0;
	/* what was learnt of the servers stays true in the child */
}

void pool_fd_plan(uint64_t soft, unsigned max_total, unsigned *cap, int *base)
{
	uint64_t c = soft / 16;
	if (c > max_total)
		c = max_total;
	*cap = (unsigned)c;
	if (soft >= 2048)
		*base = 1024;
	else if (soft > c + 1)
		*base = (int)(soft - c - 1);
	else
		*base = soft ? (int)soft - 1 : 0;
}

/* Close idle sockets, oldest first, until at most keep are left. */
static unsigned trim(size_t keep)
{
	unsigned total = 0;
	for (;;) {
		int victims[EVICT_BATCH];
		size_t n = 0;
		kp_lock(&lock);
		while (n_idle > keep && n < EVICT_BATCH) {
			struct idle *old = all_idle;
			victims[n++] = old->fd;
			unlink_idle(old);
			idle_release(old);
		}
		kp_unlock(&lock);
		close_all(victims, n);
		total += (unsigned)n;
		if (n < EVICT_BATCH)
			return total;
	}
}

unsigned pool_set_max_total(unsigned max_total)
{
	kp_lock(&lock);
	cfg.max_total = max_total;
	kp_unlock(&lock);
	return trim(max_total);
}

unsigned pool_drain(void)
{
	return trim(0);
}

/* (a count changed under the lock, read without it: the park path asks
 * it once a request) */
size_t pool_size(void)
{
	return __atomic_load_n(&n_idle, __ATOMIC_ACQUIRE);
}

bool pool_key_from_sockaddr(const struct sockaddr *addr, socklen_t len, struct pool_key *key)
{
	memset(key, 0, sizeof(*key));
	if (!addr)
		return false;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)addr;
		key->family = AF_INET;
		key->port = ntohs(in->sin_port);
		memcpy(key->addr, &in->sin_addr, 4);
		return true;
	}
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)addr;
		key->family = AF_INET6;
		key->port = ntohs(in6->sin6_port);
		key->scope = in6->sin6_scope_id;
		memcpy(key->addr, &in6->sin6_addr, 16);
		return true;
	}
	return false;
}

socklen_t pool_key_to_sockaddr(const struct pool_key *key, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (key->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		in->sin_port = htons(key->port);
		memcpy(&in->sin_addr, key->addr, 4);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(key->port);
	in6->sin6_scope_id = key->scope;
	memcpy(&in6->sin6_addr, key->addr, 16);
	return sizeof(*in6);
}

bool pool_key_same_peer(const struct pool_key *a, const struct pool_key *b)
{
	return a->family == b->family && a->port == b->port && a->scope == b->scope &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}
