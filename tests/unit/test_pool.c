/*
 * test_pool.c - the pool's policy with fake sockets: LIFO per destination,
 * per-destination and total caps (oldest evicted), idle expiry with the
 * server's Keep-Alive hints, max requests, liveness, fork.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "pool.h"

#include "check.h"

static int closed[1000], n_closed;
static int dead_fd = -1;
static int n_probed;
static uint64_t unprobed_ms; /* the next reset()'s */

static int fake_close(int fd)
{
	closed[n_closed++] = fd;
	return 0;
}

static int fake_alive(int fd)
{
	n_probed++;
	return fd != dead_fd;
}

static bool was_closed(int fd)
{
	for (int i = 0; i < n_closed; i++)
		if (closed[i] == fd)
			return true;
	return false;
}

static struct pool_key key(int port)
{
	struct pool_key k;
	memset(&k, 0, sizeof(k));
	k.family = AF_INET;
	k.port = (uint16_t)port;
	k.addr[0] = 127;
	k.addr[3] = 1;
	return k;
}

static struct pool_meta meta(uint32_t requests, int timeout, int max)
{
	struct pool_meta m;
	memset(&m, 0, sizeof(m));
	m.requests = requests;
	m.ka_timeout = timeout;
	m.ka_max = max;
	return m;
}

static void reset(unsigned per_dest, unsigned total, uint64_t idle_ms)
{
	struct pool_config cfg = { .idle_ms = idle_ms, .max_per_dest = per_dest, .max_total = total,
				   .unprobed_ms = unprobed_ms };
	struct pool_ops ops = { .close = fake_close, .alive = fake_alive };
	pool_after_fork_child(); /* empties whatever the last test left */
	pool_init(&cfg, &ops);
	n_closed = 0;
	n_probed = 0;
	dead_fd = -1;
}

int main(void)
{
	struct pool_meta m = meta(1, -1, -1), out;
	struct pool_key a = key(80), b = key(8080);

	/* LIFO per destination, never across destinations */
	reset(4, 10, 30000);
	CHECK(pool_checkin(&a, 10, &m, 0) == 0);
	CHECK(pool_checkin(&a, 11, &m, 1) == 0);
	CHECK(pool_checkin(&b, 20, &m, 2) == 0);
	CHECK(pool_size() == 3);
	CHECK(pool_checkout(&a, 5, &out) == 11);
	CHECK(pool_checkout(&a, 5, &out) == 10);
	CHECK(pool_checkout(&a, 5, &out) == -1);
	CHECK(pool_checkout(&b, 5, &out) == 20);
	CHECK(n_closed == 0);

	/* per-destination cap evicts that destination's oldest */
	reset(2, 10, 30000);
	pool_checkin(&a, 10, &m, 0);
	pool_checkin(&a, 11, &m, 1);
	pool_checkin(&b, 20, &m, 1);
	pool_checkin(&a, 12, &m, 2);
	CHECK(was_closed(10) && n_closed == 1);
	CHECK(pool_size() == 3);

	/* total cap evicts the oldest anywhere */
	reset(4, 2, 30000);
	pool_checkin(&a, 10, &m, 0);
	pool_checkin(&b, 20, &m, 1);
	pool_checkin(&b, 21, &m, 2);
	CHECK(was_closed(10) && n_closed == 1);
	CHECK(pool_checkout(&a, 3, &out) == -1);

	/* idle expiry: our limit, and the server's timeout minus a second */
	reset(4, 10, 5000);
	pool_checkin(&a, 10, &m, 0);
	CHECK(pool_checkout(&a, 5000, &out) == -1 && was_closed(10));
	struct pool_meta hinted = meta(1, 3, -1);
	pool_checkin(&a, 11, &hinted, 0);
	CHECK(pool_checkout(&a, 1999, &out) == 11);
	pool_checkin(&a, 11, &hinted, 0);
	CHECK(pool_checkout(&a, 2000, &out) == -1 && was_closed(11));
	struct pool_meta zero = meta(1, 1, -1); /* timeout=1: no margin left */
	CHECK(pool_checkin(&a, 12, &zero, 0) == -1);
	struct pool_config cfg = { .idle_ms = 5000 };
	CHECK(pool_expiry(&cfg, &hinted, 100) == 2100);
	CHECK(pool_expiry(&cfg, &m, 100) == 5100);

	/* Keep-Alive max: a connection that served max requests is not kept */
	reset(4, 10, 30000);
	struct pool_meta full = meta(5, -1, 5), room = meta(4, -1, 5);
	CHECK(pool_checkin(&a, 10, &full, 0) == -1);
	CHECK(pool_checkin(&a, 11, &room, 0) == 0);
	CHECK(pool_checkout(&a, 1, &out) == 11 && out.requests == 4 && out.ka_max == 5);

	/* the fd budget: a sixteenth of the table at its top, one spare */
	unsigned fcap;
	int base;
	pool_fd_plan(32, 64, &fcap, &base);
	CHECK(fcap == 2 && base == 29);
	pool_fd_plan(64, 64, &fcap, &base);
	CHECK(fcap == 4 && base == 59);
	pool_fd_plan(1024, 64, &fcap, &base);
	CHECK(fcap == 64 && base == 959);
	pool_fd_plan(1024, 10, &fcap, &base); /* KEEPALIVE_MAX_IDLE=10 */
	CHECK(fcap == 10 && base == 1013);
	pool_fd_plan(4096, 64, &fcap, &base); /* above select()'s FD_SETSIZE */
	CHECK(fcap == 64 && base == 1024);
	pool_fd_plan(8, 64, &fcap, &base); /* too small to share */
	CHECK(fcap == 0);
	pool_fd_plan(0, 64, &fcap, &base);
	CHECK(fcap == 0 && base == 0);

	/* lowering the cap closes the oldest; drain closes everything */
	reset(4, 10, 30000);
	pool_checkin(&a, 10, &m, 0);
	pool_checkin(&b, 20, &m, 1);
	pool_checkin(&a, 11, &m, 2);
	CHECK(pool_set_max_total(2) == 1 && was_closed(10) && pool_size() == 2);
	pool_checkin(&b, 21, &m, 3); /* the cap holds for later check-ins */
	CHECK(was_closed(20) && pool_size() == 2);
	CHECK(pool_drain() == 2 && pool_size() == 0 && was_closed(11) && was_closed(21));
	CHECK(pool_drain() == 0);

	/* a dead socket is closed and the next one handed out */
	reset(4, 10, 30000);
	pool_checkin(&a, 10, &m, 0);
	pool_checkin(&a, 11, &m, 1);
	dead_fd = 11;
	CHECK(pool_checkout(&a, 2, &out) == 10 && was_closed(11));

	/* unprobed_ms: a socket parked less than that long ago is handed out
	 * without the probe (a dead one is the caller's replay to make) */
	reset(4, 10, 30000);
	struct pool_config quick = { .idle_ms = 30000, .max_per_dest = 4, .max_total = 10,
				     .unprobed_ms = 10 };
	struct pool_ops fake = { .close = fake_close, .alive = fake_alive };
	pool_init(&quick, &fake);
	dead_fd = 12;
	pool_checkin(&a, 12, &m, 100);
	CHECK(pool_checkout(&a, 109, &out) == 12 && !was_closed(12));
	pool_checkin(&a, 12, &m, 100);
	CHECK(pool_checkout(&a, 110, &out) == -1 && was_closed(12));

	/* pool_expire, pool_owns_fd, pool_fds */
	reset(4, 10, 1000);
	pool_checkin(&a, 30, &m, 0);
	pool_checkin(&b, 31, &m, 500);
	int fds[4];
	CHECK(pool_fds(fds, 4) == 2 && fds[0] == 30 && fds[1] == 31);
	CHECK(pool_owns_fd(31, false) && !pool_owns_fd(32, false));
	CHECK(pool_expire(1000) == 1 && was_closed(30));
	CHECK(pool_owns_fd(31, true) && !was_closed(31) && pool_size() == 0);

	/* disabled by caps of 0 */
	reset(0, 10, 1000);
	CHECK(pool_checkin(&a, 10, &m, 0) == -1);

	/* after fork the child's copies are closed and forgotten */
	reset(4, 10, 30000);
	pool_checkin(&a, 40, &m, 0);
	pool_checkin(&b, 41, &m, 0);
	pool_after_fork_child();
	CHECK(was_closed(40) && was_closed(41) && pool_size() == 0);

	/* expiry that learns: the first death teaches nothing; a second,
	 * older than any socket seen to answer, an idle cap of
	 * max(oldest age seen to answer, 3/4 of the younger death's age) */
	reset(4, 10, 30000);
	uint64_t cap;
	uint32_t maxr;
	const uint64_t T = 3000; /* the clock of the learning calls */
	struct pool_meta m2 = meta(2, -1, -1), m3 = meta(3, -1, -1);
	pool_checkin(&a, 50, &m, 0);
	dead_fd = 50;
	CHECK(pool_checkout(&a, 400, &out) == -1 && was_closed(50));
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 0 && maxr == 0);
	pool_note_alive(&a, 100, 1, T);
	pool_note_dead(&a, 320, 1, T); /* same count, but 1: idle time is blamed */
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 240 && maxr == 0);
	/* sockets parked before are held to it too; younger ones are handed out */
	pool_checkin(&a, 51, &m2, 1000);
	CHECK(pool_checkout(&a, 1241, &out) == -1 && was_closed(51));
	pool_checkin(&a, 52, &m2, 2000);
	CHECK(pool_checkout(&a, 2239, &out) == 52 && out.parked_ms == 2000);
	/* a younger death shrinks it, not below the oldest age seen to answer */
	pool_note_dead(&a, 200, 5, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 150);
	pool_note_alive(&a, 145, 1, T);
	pool_note_dead(&a, 210, 6, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 150); /* max(145, 158) = 158 is not below 150 */
	/* a socket seen to answer past the cap (a trial, below) raises it */
	pool_note_alive(&a, 180, 1, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 180);
	/* a death no older than a live socket: a reset; nothing learnt */
	pool_note_dead(&a, 100, 7, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 180 && maxr == 0);
	pool_learnt(&b, T, &cap, &maxr);
	CHECK(cap == 0 && maxr == 0);

	/* deaths at the same count n, sockets seen to answer after n - 1:
	 * the server closes after n requests; those sockets are not parked,
	 * and idle time is not blamed */
	reset(4, 10, 30000);
	pool_note_alive(&a, 50, 2, T);
	pool_note_dead(&a, 5, 3, T);
	pool_note_dead(&a, 7, 3, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 0 && maxr == 3);
	CHECK(pool_checkin(&a, 60, &m3, 0) == -1);
	CHECK(pool_checkin(&a, 61, &m2, 0) == 0);
	pool_note_dead(&a, 9, 4, T); /* explained by the max: nothing new */
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 0 && maxr == 3);
	/* forgotten ten minutes after it was last added to */
	pool_learnt(&a, T + 10 * 60 * 1000 + 1, &cap, &maxr);
	CHECK(cap == 0 && maxr == 0);
	CHECK(pool_checkin(&a, 62, &m3, T + 10 * 60 * 1000 + 2) == 0);

	/* killed under a request that could not be replayed: a request
	 * limit at once, unless sockets that had served as many answered */
	reset(4, 10, 30000);
	pool_note_killed(&a, 1, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 0 && maxr == 1);
	CHECK(pool_checkin(&a, 63, &m, 0) == -1); /* served 1: never parked */
	pool_note_killed(&a, 3, T); /* a higher count: the lower limit stands */
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(maxr == 1);
	pool_learnt(&b, T, &cap, &maxr);
	CHECK(maxr == 0);
	reset(4, 10, 30000);
	pool_note_alive(&a, 5, 4, T);
	pool_note_killed(&a, 3, T); /* a socket that had served 4 answered */
	pool_note_killed(&a, 0, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(maxr == 0);
	pool_note_killed(&a, 5, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(maxr == 5);

	/* the cap can grow: one in four sockets found past it (within the
	 * configured limit) is a trial, probed even when parked less than
	 * unprobed_ms ago, and handed out when alive; one that answers
	 * raises the cap to its age.  (A 0-30 ms random server timer: the cap
	 * stuck at 6 ms without this.) */
	unprobed_ms = 10;
	reset(4, 10, 30000);
	unprobed_ms = 0;
	pool_note_alive(&a, 2, 1, T);
	pool_note_dead(&a, 8, 1, T);
	pool_note_dead(&a, 8, 1, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 6);
	for (int i = 0; i < 3; i++) {
		pool_checkin(&a, 80 + i, &m, 100);
		CHECK(pool_checkout(&a, 108, &out) == -1 && was_closed(80 + i));
	}
	CHECK(n_probed == 0);
	pool_checkin(&a, 83, &m, 100);
	CHECK(pool_checkout(&a, 108, &out) == 83 && n_probed == 1); /* the trial */
	pool_note_alive(&a, 8, 1, T);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 8);
	pool_checkin(&a, 84, &m, 200);
	CHECK(pool_checkout(&a, 207, &out) == 84 && n_probed == 1); /* under it, unprobed */
	/* a trial found dead is dropped, and a death older than every socket
	 * seen to answer cannot shrink the cap below them */
	dead_fd = 93;
	for (int i = 0; i < 4; i++) {
		pool_checkin(&a, 90 + i, &m, 300);
		CHECK(pool_checkout(&a, 320, &out) == -1 && was_closed(90 + i));
	}
	CHECK(n_probed == 2 && pool_size() == 0);
	pool_learnt(&a, T, &cap, &maxr);
	CHECK(cap == 8);
	/* never past the configured limit */
	reset(4, 10, 50);
	pool_note_alive(&a, 2, 1, T);
	pool_note_dead(&a, 8, 1, T);
	pool_note_dead(&a, 8, 1, T);
	for (int i = 0; i < 4; i++) {
		pool_checkin(&a, 95, &m, 0);
		CHECK(pool_checkout(&a, 60, &out) == -1);
	}
	CHECK(n_probed == 0);

	/* a socket handed back unused keeps its idle time */
	reset(4, 10, 1000);
	struct pool_meta back = meta(1, -1, -1);
	back.parked_ms = 100;
	CHECK(pool_checkin(&a, 70, &back, 700) == 0);
	CHECK(pool_checkout(&a, 1100, &out) == -1 && was_closed(70));
	CHECK(pool_checkin(&a, 71, &back, 1200) == -1); /* idle 1100 ms already */

	/* destinations stay when emptied, and go past MAX_DESTS (64): many
	 * destinations parked and taken between two sockets of one, whose
	 * socket and learnt limits are still its own afterwards (the caches
	 * of the last destination and the last learnt limits) */
	reset(4, 200, 30000);
	pool_note_killed(&b, 3, 0); /* b: at most 3 requests */
	CHECK(pool_checkin(&a, 300, &m, 0) == 0);
	for (int i = 0; i < 150; i++) {
		struct pool_key k = key(1000 + i);
		CHECK(pool_checkin(&k, 400 + i, &m, 0) == 0);
		CHECK(pool_checkout(&k, 1, &out) == 400 + i);
		CHECK(pool_checkout(&k, 1, &out) == -1);
		CHECK(pool_checkout(&a, 1, &out) == 300);
		CHECK(pool_checkin(&a, 300, &m, 1) == 0);
	}
	CHECK(pool_size() == 1);
	CHECK(pool_checkout(&a, 2, &out) == 300);
	CHECK(pool_checkin(&b, 301, &m3, 2) == -1); /* b's limit, learnt first */
	CHECK(pool_checkin(&b, 302, &m2, 2) == 0);
	CHECK(pool_checkout(&b, 3, &out) == 302 && pool_size() == 0);

	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
