/*
 * broker.c - keepalive-broker, the per-user pool process (docs/broker.md).
 *
 * Processes that preload the library hand it their idle connections as
 * file descriptors (SCM_RIGHTS over a SOCK_SEQPACKET Unix socket) when
 * they exit, and ask it for one before dialling: a shell loop of curls
 * then runs on one TCP connection.  The policy is pool.c's, unchanged
 * (LIFO, caps, expiry with Keep-Alive hints and what it learns); this file
 * is the shell around it: the socket, the peers, the timers.
 *
 * What it never does: read or write a byte of a pooled connection (a
 * liveness MSG_PEEK aside), block on one client (every socket is
 * non-blocking and a client gets one datagram back or nothing), serve a
 * peer of another uid (SO_PEERCRED) or of another network namespace (the
 * namespace its socket was made in), take a connection that is not an
 * established TCP socket of our own namespace to the destination its
 * message names, or believe anything a peer says about itself
 * (docs/broker.md).  A malformed message costs its sender the connection
 * and a log line; a connection that died on its way is dropped quietly.
 */
#include <dirent.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "broker_check.h"
#include "broker_proto.h"
#include "pool.h"

#define MAX_CLIENTS 128
#define MAX_POOLED_POLL 1024

struct client {
	int fd;
	pid_t pid;
	uint64_t last_ms; /* its last message (or its arrival) */
	bool proved;      /* it has our proof (the first reply carries it) */
};

static struct client clients[MAX_CLIENTS];
static unsigned n_clients;
static int log_level = 2; /* 0 off, 1 error, 2 warn, 3 info, 4 debug */
static int log_fd = 2;
static volatile sig_atomic_t stop, status_asked;
static struct {
	uint64_t got, gave, missed, refused, dropped;
	uint64_t sess_got, sess_gave, sess_missed;
	uint64_t tls_got, tls_gave, tls_missed;
} counts;
static uid_t our_uid;      /* geteuid(), once */
static gid_t our_gid;      /* getegid(), once */
static struct bk_ns our_ns; /* our network namespace (docs/broker.md) */
static int lfd = -1;       /* the listening socket: also our proof */
/* the listener is not polled while accept4() has no fd to give: until one
 * of ours is closed (EMFILE), or for a while (ENFILE and the like) */
static bool accept_paused;
static uint64_t accept_retry_ms;
static uint64_t client_idle_ms = 1000; /* KEEPALIVE_BROKER_CLIENT_MS */
static struct pool_config pool_cfg; /* the pool's; TLS connections expire by it too */

static struct bk_sys bk_libc = {
	.getsockopt = getsockopt,
	.getpeername = getpeername,
	.openat = openat,
	.read = read,
	.close = close,
};

static void logmsg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logmsg(int level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	char line[512];
	int n = snprintf(line, sizeof(line), "keepalive-broker[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	size_t len = (size_t)n < sizeof(line) - 1 ? (size_t)n : sizeof(line) - 2;
	line[len++] = '\n';
	if (write(log_fd, line, len) < 0) {
		/* nowhere else to say it */
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the clock pool_meta.parked_ms uses */
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || *s == '-' || v < min || v > max) {
		logmsg(1, "ignoring %s=%s (want %llu..%llu)", name, s, (unsigned long long)min,
		       (unsigned long long)max);
		return def;
	}
	return v;
}

/* Every close of ours frees an fd: a listener paused on EMFILE resumes. */
static int close_fd(int fd)
{
	accept_paused = false;
	return close(fd);
}

/* The detached broker holds none of its starter's descriptors (a caller's
 * pipe kept open by it would keep the caller's $(...) or `| while read`
 * waiting for end of file, docs/wrapper.md): every fd from 3 up goes but
 * the ones it serves with (keep[], n of them). */
static void close_inherited(const int *keep, int n)
{
	DIR *d;
	bool more = true;
	/* read in batches (closing while reading the directory is not
	 * defined): again while a batch came full */
	while (more && (d = opendir("/proc/self/fd"))) {
		int fds[1024], nfds = 0;
		struct dirent *e;
		more = false;
		while ((e = readdir(d))) {
			char *end;
			long fd = strtol(e->d_name, &end, 10);
			bool ours = *end || end == e->d_name || fd < 3 || fd == dirfd(d);
			for (int k = 0; k < n; k++)
				ours |= keep[k] == fd;
			if (ours)
				continue;
			if (nfds == (int)(sizeof(fds) / sizeof(fds[0]))) {
				more = true;
				break;
			}
			fds[nfds++] = (int)fd;
		}
		closedir(d);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (!more)
			return;
	}
	if (!more)
		return;
	/* no /proc: every number below the limit */
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 1 << 20)
		max = 1 << 20;
	for (long fd = 3; fd < max; fd++) {
		bool ours = false;
		for (int k = 0; k < n; k++)
			ours |= keep[k] == fd;
		if (!ours)
			close((int)fd);
	}
}

/* ------------------------------------------------------------ pool ops */

static int op_close(int fd)
{
	counts.dropped++;
	return close_fd(fd);
}

/* As in the library: alive when a read would block (no EOF, no error, no
 * unsolicited bytes such as a 408).  Asked at every checkout; a PUT is not
 * probed (its state was checked, and the loop polls it from then on). */
static int op_alive(int fd)
{
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* ------------------------------------------------------------ clients */

/* Keeps the order of the others (oldest first). */
static void client_drop(unsigned i)
{
	close_fd(clients[i].fd);
	memmove(&clients[i], &clients[i + 1], (--n_clients - i) * sizeof(clients[0]));
}

/* The broker's own supplementary groups, read once: it never changes
 * them (no setgroups here), so a getgroups per client would only cost. */
static gid_t our_groups[256];
static int n_our_groups = -2; /* -2: not read yet; -1: unreadable */

/* The peer's supplementary groups (SO_PEERGROUPS, Linux 4.13) are ours,
 * as sets.  False when either cannot be read. */
static bool same_groups(int fd)
{
	gid_t theirs[256];
	socklen_t l = sizeof(theirs);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, theirs, &l) < 0)
		return false;
	if (n_our_groups == -2)
		n_our_groups = getgroups(256, our_groups);
	const gid_t *ours = our_groups;
	int nt = (int)(l / sizeof(gid_t)), no = n_our_groups;
	if (no < 0 || nt != no)
		return false;
	for (int i = 0; i < nt; i++) {
		int j = 0;
		while (j < no && ours[j] != theirs[i])
			j++;
		if (j == no)
			return false;
	}
	return true;
}

/* One client per call: the loop polls the listener again anyway, and a
 * second accept4 would mostly find EAGAIN (a syscall per client). */
static void accept_clients(void)
{
	for (int once = 0; once < 1; once++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE) {
				/* the listener stays readable: polling it would spin */
				accept_paused = true;
				accept_retry_ms = now_ms() + 1000;
				logmsg(3, "out of file descriptors: not accepting until one is free");
			} else if (errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				accept_paused = true;
				accept_retry_ms = now_ms() + 100;
			}
			return;
		}
		struct ucred cred;
		socklen_t l = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0) {
			logmsg(2, "refused a client: no peer credentials (%s)", strerror(errno));
			counts.refused++;
			close_fd(fd);
			continue;
		}
		/* docs/broker.md: only processes of our own uid share connections */
		if (cred.uid != our_uid) {
			logmsg(2, "refused pid %d: uid %u is not ours (%u)", (int)cred.pid,
			       (unsigned)cred.uid, (unsigned)our_uid);
			counts.refused++;
			close_fd(fd);
			continue;
		}
		/* ... and of our own groups (docs/owner.md: nothing crosses
		 * credentials): a process of our uid under another gid or
		 * other supplementary groups (sg, setpriv, a privilege-
		 * separating daemon) is another identity */
		if (cred.gid != our_gid || !same_groups(fd)) {
			logmsg(2, "refused pid %d: its groups are not ours", (int)cred.pid);
			counts.refused++;
			close_fd(fd);
			continue;
		}
		/* ... and of our own network namespace.  The kernel makes the
		 * accepted socket in the namespace of the socket that connected,
		 * so ours says where the client made its own: checked on the fd,
		 * whatever the client is or says (a non-dumpable process hides
		 * its /proc/PID/ns/net, and a message can claim anything). */
		const char *why = bk_check_ns(&bk_libc, fd, AF_UNIX, &our_ns);
		if (why) {
			logmsg(2, "refused pid %d: %s", (int)cred.pid, why);
			counts.refused++;
			close_fd(fd);
			continue;
		}
		if (n_clients == MAX_CLIENTS) {
			/* full: the one that has been quiet longest goes, so that
			 * clients that never say a word cannot hold every slot (a
			 * client in the middle of an exchange was heard from just now) */
			unsigned q = 0;
			for (unsigned i = 1; i < n_clients; i++)
				if (clients[i].last_ms < clients[q].last_ms)
					q = i;
			logmsg(4, "%d clients: closed the quietest, pid %d", MAX_CLIENTS, (int)clients[q].pid);
			client_drop(q);
		}
		clients[n_clients++] = (struct client){ fd, cred.pid, now_ms(), false };
	}
}

/* Send m to cl with fd (or none); the first reply to a client also
 * carries our listening socket, the proof a client checks (docs/broker.md).
 * Returns whether the whole datagram went. */
static bool send_reply(struct client *cl, struct bk_msg *m, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} u;
	int fds[2];
	unsigned n = 0;
	if (!cl->proved) {
		m->flags |= BK_F_PROOF;
		fds[n++] = lfd;
	}
	if (fd >= 0)
		fds[n++] = fd;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	bk_cmsg_put(&mh, u.buf, fds, n);
	/* never wait for a client: if its buffer is full it gets nothing */
	bool ok = sendmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*m);
	if (ok)
		cl->proved = true;
	return ok;
}

/* Send a session or TLS reply: m and h at the head of out (len bytes in
 * all), with our proof if it is the client's first reply, then fd (or
 * none). */
static bool send_reply_bytes(struct client *cl, struct bk_msg *m, const struct bk_sess *h,
			     unsigned char *out, size_t len, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} u;
	int fds[2];
	unsigned n = 0;
	if (!cl->proved) {
		m->flags |= BK_F_PROOF;
		fds[n++] = lfd;
	}
	if (fd >= 0)
		fds[n++] = fd;
	memcpy(out, m, sizeof(*m));
	memcpy(out + sizeof(*m), h, sizeof(*h));
	struct iovec iov = { out, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	bk_cmsg_put(&mh, u.buf, fds, n);
	bool ok = sendmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len;
	if (ok)
		cl->proved = true;
	return ok;
}

static void reply(struct client *cl, const struct bk_msg *req)
{
	struct bk_msg m;
	/* one namespace, ours: every fd in the pool was checked to be in it */
	struct pool_key key = req->key;
	struct pool_meta meta;
	uint64_t now = now_ms();
	int fd = req->type == BK_GET ? pool_checkout(&key, now, &meta) : -1;
	bk_encode(&m, BK_REPLY, fd >= 0 ? BK_OK : BK_NONE, 0, fd >= 0 ? &req->key : NULL,
		  fd >= 0 ? &meta : NULL);
	bool sent = send_reply(cl, &m, fd);
	if (req->type != BK_GET)
		return;
	if (fd < 0) {
		counts.missed++;
		return;
	}
	if (sent) {
		counts.gave++;
		logmsg(4, "gave fd to pid %d (port %u, %u requests served)", (int)cl->pid, key.port,
		       meta.requests);
		close_fd(fd);
		return;
	}
	/* not delivered: it stays ours, as idle as it was */
	if (pool_checkin(&key, fd, &meta, now) < 0)
		close_fd(fd);
}

/* ------------------------------------------------------------ sessions */

/* TLS sessions kept for resumption in another process (docs/tls-across.md):
 * opaque bytes under destination and name, bounded in count and bytes,
 * each until its own lifetime ends, wiped when dropped.  The broker
 * cannot use them (it has no TLS); it never logs or writes them. */
#define SESS_COUNT 256
#define SESS_BYTES (1u << 20)
struct sess {
	struct pool_key key;
	uint8_t name[BK_SESS_NAME];
	uint64_t expires_ms, added_ms;
	uint32_t flags, len;
	unsigned char *bytes; /* NULL: a free slot */
};
static struct sess sessions[SESS_COUNT];
static size_t sess_bytes;

static void sess_drop(struct sess *e)
{
	if (!e->bytes)
		return;
	explicit_bzero(e->bytes, e->len);
	free(e->bytes);
	sess_bytes -= e->len;
	memset(e, 0, sizeof(*e));
}

static void sess_expire(uint64_t now)
{
	for (unsigned i = 0; i < SESS_COUNT; i++)
		if (sessions[i].bytes && sessions[i].expires_ms <= now)
			sess_drop(&sessions[i]);
}

static unsigned sess_count(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < SESS_COUNT; i++)
		n += sessions[i].bytes != NULL;
	return n;
}

static struct sess *sess_find(const struct pool_key *key, const uint8_t *name)
{
	for (unsigned i = 0; i < SESS_COUNT; i++)
		if (sessions[i].bytes && !memcmp(&sessions[i].key, key, sizeof(*key)) &&
		    !memcmp(sessions[i].name, name, BK_SESS_NAME))
			return &sessions[i];
	return NULL;
}

/* Keep a session, the newest for its destination and name (as the
 * library's own cache keeps one per destination and SNI); the oldest go
 * first when count or bytes would pass the bounds. */
static void sess_put(const struct pool_key *key, const struct bk_sess *h, const char *bytes, uint64_t now)
{
	sess_expire(now);
	struct sess *e = sess_find(key, h->name);
	if (e)
		sess_drop(e);
	for (;;) {
		struct sess *oldest = NULL, *empty = NULL;
		for (unsigned i = 0; i < SESS_COUNT; i++) {
			if (!sessions[i].bytes)
				empty = empty ? empty : &sessions[i];
			else if (!oldest || sessions[i].added_ms < oldest->added_ms)
				oldest = &sessions[i];
		}
		if (empty && sess_bytes + h->len <= SESS_BYTES) {
			e = empty;
			break;
		}
		if (!oldest)
			return;
		sess_drop(oldest);
	}
	if (!(e->bytes = malloc(h->len)))
		return;
	memcpy(e->bytes, bytes, h->len);
	e->key = *key;
	memcpy(e->name, h->name, BK_SESS_NAME);
	e->len = h->len;
	e->flags = h->flags;
	e->added_ms = now;
	e->expires_ms = now + (uint64_t)h->timeout_s * 1000;
	sess_bytes += h->len;
	counts.sess_got++;
	logmsg(4, "kept a TLS session (port %u, %u bytes)", key->port, (unsigned)h->len);
}

/* Answer an SGET: the session (taken, if single use), or none. */
static void sess_reply(struct client *cl, const struct pool_key *key, const struct bk_sess *h, uint64_t now)
{
	sess_expire(now);
	struct sess *e = sess_find(key, h->name);
	static unsigned char out[BK_SESS_MSG_MAX];
	struct bk_msg m;
	struct bk_sess r;
	memset(&r, 0, sizeof(r));
	memcpy(r.name, h->name, BK_SESS_NAME);
	bk_encode(&m, BK_SREPLY, e ? BK_OK : BK_NONE, 0, key, NULL);
	r.len = e ? e->len : 0;
	size_t len = sizeof(m) + sizeof(r) + r.len;
	if (e)
		memcpy(out + sizeof(m) + sizeof(r), e->bytes, e->len);
	bool sent = send_reply_bytes(cl, &m, &r, out, len, -1);
	explicit_bzero(out, len);
	if (!e) {
		counts.sess_missed++;
		return;
	}
	if (sent) {
		counts.sess_gave++;
		logmsg(4, "gave a TLS session to pid %d (port %u)", (int)cl->pid, key->port);
	}
	/* a TLS 1.3 ticket is single use (RFC 8446 C.4): gone once given,
	 * delivered or not */
	if (e->flags & BK_S_ONCE)
		sess_drop(e);
}

/* ------------------------------------------------------------ TLS connections */

/* Whole TLS connections (docs/tls-across.md "The broker's TLS message"):
 * the socket and its state (the export message: traffic keys, sequence
 * numbers) under destination and name, kept apart from the plain pool (a
 * plain GET never gets one).  Each is handed out once; its bytes are wiped
 * when its fd leaves: given, dropped dead, expired, pushed out by the
 * bounds, at exit.  The broker never reads the bytes, nor the socket (the
 * liveness MSG_PEEK aside), and never logs them. */
#define TCONN_COUNT 32
#define TCONN_BYTES (2u << 20)
struct tconn {
	struct pool_key key;
	uint8_t name[BK_SESS_NAME];
	struct pool_meta meta;
	uint64_t expires_ms;
	int fd;
	uint32_t len;
	uint32_t tail;        /* the last bytes: written on fd if it ends here */
	unsigned char *bytes; /* NULL: a free slot */
};
static struct tconn tconns[TCONN_COUNT];
static size_t tconn_bytes;

/* The slot emptied, its state wiped, our copy of its fd closed. */
static void tconn_release(struct tconn *t)
{
	if (!t->bytes)
		return;
	explicit_bzero(t->bytes, t->len);
	free(t->bytes);
	tconn_bytes -= t->len;
	close_fd(t->fd);
	memset(t, 0, sizeof(*t));
}

/* Ended here, never handed on: the record its last process sealed for
 * that (its close_notify, docs/tls.md "The close_notify owed") goes out
 * first, never waiting, never a signal.  The broker cannot make one: it
 * only writes the bytes it was given. */
static void tconn_drop(struct tconn *t)
{
	if (!t->bytes)
		return;
	counts.dropped++;
	if (t->tail)
		(void)send(t->fd, t->bytes + t->len - t->tail, t->tail, MSG_DONTWAIT | MSG_NOSIGNAL);
	tconn_release(t);
}

static void tconn_expire(uint64_t now)
{
	for (unsigned i = 0; i < TCONN_COUNT; i++)
		if (tconns[i].bytes && tconns[i].expires_ms <= now)
			tconn_drop(&tconns[i]);
}

static unsigned tconn_count(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < TCONN_COUNT; i++)
		n += tconns[i].bytes != NULL;
	return n;
}

/* A free slot for len more bytes, the oldest going first (the oldest of
 * key's own when it has max_per_dest already). */
static struct tconn *tconn_slot(const struct pool_key *key, uint32_t len)
{
	for (;;) {
		struct tconn *oldest = NULL, *oldest_here = NULL, *empty = NULL;
		unsigned here = 0;
		for (unsigned i = 0; i < TCONN_COUNT; i++) {
			struct tconn *t = &tconns[i];
			if (!t->bytes) {
				empty = empty ? empty : t;
				continue;
			}
			if (!oldest || t->meta.parked_ms < oldest->meta.parked_ms)
				oldest = t;
			if (!memcmp(&t->key, key, sizeof(*key))) {
				here++;
				if (!oldest_here || t->meta.parked_ms < oldest_here->meta.parked_ms)
					oldest_here = t;
			}
		}
		if (oldest_here && here >= pool_cfg.max_per_dest)
			tconn_drop(oldest_here);
		else if (empty && tconn_bytes + len <= TCONN_BYTES)
			return empty;
		else if (oldest)
			tconn_drop(oldest);
		else
			return NULL;
	}
}

/* Keep fd (checked: established, ours, to key's destination) and its
 * state until the pool's own expiry for its record or the state's
 * lifetime (its session's), whichever comes first.  fd is ours either
 * way. */
static void tconn_put(const struct bk_msg *m, const struct bk_sess *h, const char *bytes, int fd, uint64_t now)
{
	tconn_expire(now);
	uint64_t expires = pool_expiry(&pool_cfg, &m->meta, now);
	uint64_t life = now + (uint64_t)h->timeout_s * 1000;
	struct tconn *e = NULL;
	if (pool_cfg.max_per_dest && pool_cfg.max_total && expires > now)
		e = tconn_slot(&m->key, h->len);
	if (!e || !(e->bytes = malloc(h->len))) {
		op_close(fd);
		return;
	}
	memcpy(e->bytes, bytes, h->len);
	e->key = m->key;
	memcpy(e->name, h->name, BK_SESS_NAME);
	e->meta = m->meta;
	e->meta.parked_ms = now;
	e->expires_ms = life < expires ? life : expires;
	e->fd = fd;
	e->len = h->len;
	e->tail = h->tail;
	tconn_bytes += h->len;
	counts.tls_got++;
	logmsg(4, "got a TLS connection (port %u, %u requests served, %u bytes of state)", m->key.port,
	       m->meta.requests, (unsigned)h->len);
}

/* Answer a TGET: the newest live TLS connection under key and name (any
 * name with BK_S_ANY), with its state (taken: once) and its own name, or
 * none. */
static void tconn_reply(struct client *cl, const struct pool_key *key, const struct bk_sess *h, uint64_t now)
{
	tconn_expire(now);
	struct tconn *e;
	for (;;) {
		e = NULL;
		for (unsigned i = 0; i < TCONN_COUNT; i++) {
			struct tconn *t = &tconns[i];
			if (t->bytes && !memcmp(&t->key, key, sizeof(*key)) &&
			    ((h->flags & BK_S_ANY) || !memcmp(t->name, h->name, BK_SESS_NAME)) &&
			    (!e || t->meta.parked_ms >= e->meta.parked_ms))
				e = t;
		}
		if (!e || op_alive(e->fd))
			break;
		tconn_drop(e); /* the server closed it, or spoke unasked */
	}
	static unsigned char out[BK_MSG_MAX];
	struct bk_msg m;
	struct bk_sess r;
	memset(&r, 0, sizeof(r));
	memcpy(r.name, e ? e->name : h->name, BK_SESS_NAME);
	bk_encode(&m, BK_TREPLY, e ? BK_OK : BK_NONE, 0, key, e ? &e->meta : NULL);
	/* (the sealed tail too: a process that gives the state back unused
	 * puts it back with it) */
	r.len = e ? e->len : 0;
	r.tail = e ? e->tail : 0;
	size_t len = sizeof(m) + sizeof(r) + r.len;
	if (e)
		memcpy(out + sizeof(m) + sizeof(r), e->bytes, r.len);
	bool sent = send_reply_bytes(cl, &m, &r, out, len, e ? e->fd : -1);
	explicit_bzero(out, len);
	if (!e) {
		counts.tls_missed++;
		return;
	}
	if (!sent)
		return; /* not delivered: still ours, as idle as it was */
	counts.tls_gave++;
	logmsg(4, "gave a TLS connection to pid %d (port %u)", (int)cl->pid, key->port);
	tconn_release(e);
}

/* A server that closed a kept TLS connection (or sent on it) made it
 * readable: dropped now. */
static void tconn_drop_closed(const struct pollfd *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (unsigned j = 0; j < TCONN_COUNT; j++)
			if (p[i].revents && tconns[j].bytes && tconns[j].fd == p[i].fd) {
				logmsg(4, "server closed a kept TLS connection (port %u)", tconns[j].key.port);
				tconn_drop(&tconns[j]);
			}
}

/* One datagram from client i.  Returns false when the client is done
 * (gone or refused). */
static bool serve(unsigned i)
{
	struct client *cl = &clients[i];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	/* one more: an oversized message shows; static: a session's or TLS
	 * state's bytes are wiped from it once kept (sess_put, tconn_put) */
	static char buf[BK_MSG_MAX + 1];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
	if (n == 0)
		return false; /* gone, perhaps mid-message: nothing half-read stays */
	cl->last_ms = now_ms();

	int fds[4];
	unsigned nfds = bk_cmsg_fds(&mh, fds, 4);
	struct bk_msg m;
	const char *why = NULL;
	bool dead = false;
	int truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	struct bk_sess sess;
	size_t off;
	if (bk_decode_any(buf, (size_t)n, nfds, truncated, BK_AT_BROKER, &m, &sess, &off, &why) == 0 &&
	    (m.type == BK_PUT || m.type == BK_TPUT))
		why = bk_check_conn(&bk_libc, fds[0], &m.key, &our_ns, &dead);
	if (why && dead) {
		/* a server that closed an idle connection on its way here: a
		 * normal event (docs/broker.md), not the client's fault */
		logmsg(4, "dropped a dead connection from pid %d (port %u)", (int)cl->pid, m.key.port);
		close_fd(fds[0]);
		explicit_bzero(buf, (size_t)n);
		return true;
	}
	if (why) {
		logmsg(2, "refused a message from pid %d: %s (%zd bytes, %u fds)", (int)cl->pid, why,
		       n, nfds);
		counts.refused++;
		for (unsigned j = 0; j < nfds; j++)
			close_fd(fds[j]);
		explicit_bzero(buf, (size_t)n);
		return false;
	}
	if (m.type == BK_TPUT) {
		tconn_put(&m, &sess, buf + off, fds[0], now_ms());
		explicit_bzero(buf, (size_t)n);
		return true;
	}
	if (m.type == BK_TGET) {
		tconn_reply(cl, &m.key, &sess, now_ms());
		return true;
	}
	if (m.type == BK_SPUT) {
		sess_put(&m.key, &sess, buf + off, now_ms());
		explicit_bzero(buf, (size_t)n);
		return true;
	}
	if (m.type == BK_SGET) {
		sess_reply(cl, &m.key, &sess, now_ms());
		return true;
	}
	if (m.type != BK_PUT) {
		reply(cl, &m);
		return true;
	}
	/* BK_PUT: checked above (established, ours, to the key's destination);
	 * not probed: the poll below watches it from now on */
	if (pool_checkin(&m.key, fds[0], &m.meta, now_ms()) < 0) {
		close_fd(fds[0]);
		return true;
	}
	counts.got++;
	logmsg(4, "got a connection from pid %d (port %u, %u requests served)", (int)cl->pid,
	       m.key.port, m.meta.requests);
	return true;
}

/* ------------------------------------------------------------ socket */

static void default_path(char *out, size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char run[64];
	struct stat st;
	/* cron and ssh -T set no XDG_RUNTIME_DIR: the session's directory is
	 * still /run/user/UID (pam_systemd) when there, ours and closed to
	 * others; the socket's own directory is checked again when used */
	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)geteuid());
	if (!(xdg && *xdg == '/') && lstat(run, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid == geteuid() && !(st.st_mode & 077))
		xdg = run;
	if (xdg && *xdg == '/')
		snprintf(out, cap, "%s/keepalive/broker.sock", xdg);
	else
		snprintf(out, cap, "/tmp/keepalive-%u/broker.sock", (unsigned)geteuid());
}

/* Is a broker of ours answering at NAME in directory dirfd?  Connects
 * without waiting (a Unix connect either succeeds at once or fails; a full
 * backlog, EAGAIN, is a broker that does not accept: "busy").  With
 * verify, it must also pass the library's checks: our uid, and its proof
 * (a HELLO answered within wait_ms with its listening socket, in our
 * namespace).  Returns 1 answering, 0 none, -1 busy or not ours. */
static int answering(int dirfd, const char *name, bool verify, int wait_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (bk_fd_path(sa.sun_path, sizeof(sa.sun_path), dirfd, name) < 0)
		return 0;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 1 : errno == EAGAIN ? -1 : 0;
	struct ucred cred;
	socklen_t l = sizeof(cred);
	if (r == 1 && (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0 || cred.uid != our_uid))
		r = -1;
	struct bk_ns self;
	if (r == 1 && verify && bk_ns_self(&bk_libc, fd, &self) == 0) {
		struct bk_msg m;
		bk_encode(&m, BK_HELLO, BK_OK, 0, NULL, NULL);
		r = -1;
		struct pollfd p = { fd, POLLIN, 0 };
		if (send(fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(m) &&
		    poll(&p, 1, wait_ms) == 1) {
			union {
				char buf[CMSG_SPACE(sizeof(int) * 2)];
				struct cmsghdr align;
			} u;
			char buf[sizeof(m) + 1];
			struct iovec iov = { buf, sizeof(buf) };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
					     .msg_controllen = sizeof(u.buf) };
			ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			int fds[2] = { -1, -1 };
			unsigned nfds = n > 0 ? bk_cmsg_fds(&mh, fds, 2) : 0;
			const char *why;
			if (n > 0 &&
			    bk_decode(buf, (size_t)n, nfds, (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0,
				      BK_AT_CLIENT, &m, &why) == 0 &&
			    (m.flags & BK_F_PROOF) && !bk_check_proof(&bk_libc, &cred, fds[0], &self))
				r = 1;
			for (unsigned j = 0; j < nfds; j++)
				close(fds[j]);
		}
	}
	close(fd);
	return r;
}

/* Open a file in our checked directory: never following a symlink, never
 * blocking on a FIFO, and only a regular file of ours.  Returns the fd or
 * -1. */
static int open_in(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, mode);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != our_uid) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/* Returns the listening fd, -1 on error (logged), -2 when a broker is
 * already answering at path.  *dirfd gets the checked directory. */
static int listen_at(const char *path, int *dirfd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *why;
	*dirfd = bk_open_sock_dir(&bk_libc, path, BK_DIR_CREATE | BK_DIR_PARENT, &why);
	if (*dirfd < 0) {
		logmsg(1, "refusing %s: %s", path, why);
		return -1;
	}
	const char *name = bk_base(path);
	if (!*name || bk_fd_path(sa.sun_path, sizeof(sa.sun_path), *dirfd, name) < 0) {
		logmsg(1, "bad socket name: %s", path);
		return -1;
	}
	int a = answering(*dirfd, name, false, 0);
	if (a == 1 || a == -1)
		return -2;
	unlinkat(*dirfd, name, 0); /* a dead broker's (in our own checked directory) */
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* bound through the directory's fd: the name is never resolved again */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fchmodat(*dirfd, name, 0600, 0) < 0 || listen(fd, SOMAXCONN) < 0) {
		logmsg(1, "cannot listen at %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* systemd socket activation: LISTEN_PID is us, LISTEN_FDS >= 1, fd 3. */
static int activated_fd(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	if (!pid || !n || atol(pid) != (long)getpid() || atoi(n) < 1)
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	int type, acc;
	socklen_t l = sizeof(type);
	if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_SEQPACKET) {
		logmsg(1, "LISTEN_FDS: fd 3 is not a SOCK_SEQPACKET socket");
		return -1;
	}
	l = sizeof(acc);
	if (getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 || !acc) {
		logmsg(1, "LISTEN_FDS: fd 3 is not listening");
		return -1;
	}
	int fl = fcntl(3, F_GETFL);
	fcntl(3, F_SETFL, fl | O_NONBLOCK);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	return 3;
}

/* ------------------------------------------------------------ main */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	status_asked = 1;
}

/* SIGUSR1: write what we hold and our counters to broker.status in our
 * directory (keepalive --status shows it), whole or not at all (a rename
 * inside the checked directory). */
static void write_status(int dirfd, const char *sock, uint64_t started)
{
	int fd = open_in(dirfd, "broker.status.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	uint64_t now = now_ms();
	static struct pool_entry e[MAX_POOLED_POLL];
	size_t n = pool_list(e, MAX_POOLED_POLL);
	fprintf(f, "keepalive-broker pid %d at %s, up %llu s, %u clients\n", (int)getpid(), sock,
		(unsigned long long)((now - started) / 1000), n_clients);
	fprintf(f, "counters: got=%llu gave=%llu missed=%llu refused=%llu dropped=%llu\n",
		(unsigned long long)counts.got, (unsigned long long)counts.gave,
		(unsigned long long)counts.missed, (unsigned long long)counts.refused,
		(unsigned long long)counts.dropped);
	fprintf(f, "tls sessions: %u kept, got=%llu gave=%llu missed=%llu\n", sess_count(),
		(unsigned long long)counts.sess_got, (unsigned long long)counts.sess_gave,
		(unsigned long long)counts.sess_missed);
	fprintf(f, "tls connections: %u kept, got=%llu gave=%llu missed=%llu\n", tconn_count(),
		(unsigned long long)counts.tls_got, (unsigned long long)counts.tls_gave,
		(unsigned long long)counts.tls_missed);
	fprintf(f, "idle connections: %zu\n", n);
	for (size_t i = 0; i < n; i++) {
		char addr[INET6_ADDRSTRLEN] = "?";
		inet_ntop(e[i].key.family, e[i].key.addr, addr, sizeof(addr));
		fprintf(f, "  %s%s%s:%u: %u requests served, idle %llu ms, expires in %llu ms\n",
			e[i].key.family == AF_INET6 ? "[" : "", addr, e[i].key.family == AF_INET6 ? "]" : "",
			e[i].key.port, e[i].meta.requests, (unsigned long long)(now - e[i].meta.parked_ms),
			(unsigned long long)(e[i].expires_ms > now ? e[i].expires_ms - now : 0));
	}
	if (fclose(f) == 0)
		renameat(dirfd, "broker.status.tmp", dirfd, "broker.status");
	else
		unlinkat(dirfd, "broker.status.tmp", 0);
}

/* The pid of the broker answering at NAME in dirfd, when it wrote its pid
 * file there and that pid is the one that listens on the socket
 * (SO_PEERCRED): never a stale file's pid.  0 when none. */
static pid_t broker_pid(int dirfd, const char *name)
{
	int fd = open_in(dirfd, "broker.pid", O_RDONLY, 0);
	if (fd < 0)
		return 0;
	char buf[32];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	long pid = strtol(buf, NULL, 10);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (pid <= 1 || bk_fd_path(sa.sun_path, sizeof(sa.sun_path), dirfd, name) < 0)
		return 0;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct ucred cred = { 0 };
	socklen_t l = sizeof(cred);
	bool ok = s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &l) == 0 && cred.uid == our_uid &&
		  cred.pid == (pid_t)pid;
	if (s >= 0)
		close(s);
	return ok ? (pid_t)pid : 0;
}

/* Beside the socket, for "keepalive --stop" and --status (which check it
 * against the socket's SO_PEERCRED before they signal it). */
static void write_pid(int dirfd, pid_t pid)
{
	int fd = open_in(dirfd, "broker.pid", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		dprintf(fd, "%d\n", (int)pid);
		close(fd);
	}
}

/* keepalive --status / --stop, in C: the files live in the broker's
 * checked directory and are only ever opened through its fd. */
static int status_or_stop(const char *path, bool stop_it)
{
	const char *why;
	int dirfd = bk_open_sock_dir(&bk_libc, path, BK_DIR_PARENT, &why);
	const char *name = bk_base(path);
	if (dirfd < 0 || answering(dirfd, name, false, 0) != 1) {
		fprintf(stderr, "keepalive: no broker at %s%s%s\n", path, dirfd < 0 ? ": " : "",
			dirfd < 0 ? why : "");
		return 1;
	}
	pid_t pid = broker_pid(dirfd, name);
	/* socket-activated, our connect may just have started it: it says
	 * its pid once it listens as itself (up to a second) */
	for (int i = 0; !pid && i < 100; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		pid = broker_pid(dirfd, name);
	}
	if (stop_it) {
		if (!pid || kill(pid, SIGTERM) < 0) {
			fprintf(stderr, "keepalive: the broker at %s was not started by keepalive (socket activation?): not stopped\n",
				path);
			return 1;
		}
		fprintf(stderr, "keepalive: broker stopped\n");
		return 0;
	}
	printf("keepalive: broker running at %s\n", path);
	fflush(stdout);
	if (!pid)
		return 0;
	unlinkat(dirfd, "broker.status", 0);
	if (kill(pid, SIGUSR1) < 0)
		return 0;
	for (int i = 0; i < 200; i++) {
		int fd = open_in(dirfd, "broker.status", O_RDONLY, 0);
		if (fd >= 0) {
			char buf[4096];
			ssize_t n;
			while ((n = read(fd, buf, sizeof(buf))) > 0)
				if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
					break;
			close(fd);
			return 0;
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* Is dir a safe parent for the wrapper's private directory (mktemp -d):
 * ours or root's, not writable by others unless sticky? */
static int safe_dir(const char *dir)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	const char *why = bk_check_parent(&bk_libc, fd);
	close(fd);
	if (why)
		logmsg(2, "not using %s: %s", dir, why);
	return why != NULL;
}

/* NAME='VALUE' for the wrapper's eval, VALUE quoted for sh. */
static void print_sh(const char *name, const char *v)
{
	printf("%s='", name);
	for (; *v; v++)
		if (*v == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*v);
	puts("'");
}

/* The first safe parent for the wrapper's private directory, quietly. */
static const char *safe_base(void)
{
	const char *cands[] = { getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR"), "/tmp" };
	for (int i = 0; i < 3; i++) {
		if (!cands[i] || cands[i][0] != '/')
			continue;
		int fd = open(cands[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		const char *why = bk_check_parent(&bk_libc, fd);
		close(fd);
		/* and one we can make our directory in: a read-only or another
		 * user's XDG_RUNTIME_DIR (sudo -E, runuser -p) is passed over,
		 * as it was not, with a warning per command and no broker */
		if (!why && faccessat(AT_FDCWD, cands[i], W_OK | X_OK, AT_EACCESS) == 0)
			return cands[i];
	}
	return NULL;
}

/* keepalive-broker --plan: what the wrapper needs, in one exec (each one
 * costs a process ~130 syscalls: scripts/bench-broker): the default path,
 * whether a broker of ours answers there and proves itself, and a safe
 * parent for a private directory. */
static int plan(void)
{
	char path[PATH_MAX];
	const char *why;
	default_path(path, sizeof(path));
	int dirfd = bk_open_sock_dir(&bk_libc, path, BK_DIR_PARENT, &why);
	bool running = dirfd >= 0 && answering(dirfd, bk_base(path), true, 1000) == 1;
	const char *base = safe_base();
	print_sh("sock", path);
	print_sh("running", running ? "1" : "");
	print_sh("base", base ? base : "");
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: keepalive-broker [--socket PATH] [--exit-ms MS] [--with-parent | --daemon]\n"
			"       keepalive-broker --print-path | --check PATH | --status PATH | --stop PATH\n"
			"       keepalive-broker --safe-dir DIR | --plan | --private BASE [--watch PID] | --version\n"
			"  default socket: $XDG_RUNTIME_DIR/keepalive/broker.sock\n"
			"  (else /tmp/keepalive-UID/broker.sock); LISTEN_FDS: socket activation\n");
}

/* What the command line asks of this run, and what setting it up made. */
struct run {
	char path[PATH_MAX]; /* our socket */
	bool with_parent, daemonize;
	const char *private_base; /* --private BASE */
	pid_t watch;              /* --watch PID: go when it does (the wrapper) */
	uint64_t exit_ms;
	bool exit_ms_given;
	int dirfd, basefd; /* the socket's directory; --private's BASE */
	char private_name[64];
	pid_t wrapper; /* private: its end is ours */
	bool bound;     /* we bound the socket (not socket-activated) */
	bool activated; /* systemd's socket */
	struct stat lst; /* the socket as we bound it */
	uint64_t started;
};

/* KEEPALIVE_LOG and KEEPALIVE_LOG_FILE */
static void log_setup(void)
{
	const char *s = getenv("KEEPALIVE_LOG");
	if (s && *s) {
		static const char *names[] = { "off", "error", "warn", "info", "debug" };
		for (int i = 0; i < 5; i++)
			if (!strcmp(s, names[i]) || (s[0] == '0' + i && !s[1]))
				log_level = i;
	}
	if ((s = getenv("KEEPALIVE_LOG_FILE")) && *s) {
		/* O_NONBLOCK: a FIFO there must not hang us in open() */
		int fd = open(s, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == our_uid)
			log_fd = fd;
		else if (fd >= 0)
			close(fd);
	}
}

/* The command line: -1 to serve, or the exit status of a one-shot
 * question (--check, --status, --plan...) or of a usage error. */
static int parse_args(struct run *r, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
			snprintf(r->path, sizeof(r->path), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--exit-ms") && i + 1 < argc) {
			r->exit_ms = strtoull(argv[++i], NULL, 10);
			r->exit_ms_given = true;
		} else if (!strcmp(argv[i], "--with-parent")) {
			r->with_parent = true;
		} else if (!strcmp(argv[i], "--daemon")) {
			r->daemonize = true;
		} else if (!strcmp(argv[i], "--version")) {
			printf("keepalive-broker %s\n", KP_VERSION);
			return 0;
		} else if (!strcmp(argv[i], "--print-path")) {
			/* the default path, for the wrapper: one rule, kept here */
			default_path(r->path, sizeof(r->path));
			printf("%s\n", r->path);
			return 0;
		} else if (!strcmp(argv[i], "--check") && i + 1 == argc - 1) {
			/* exit 0 when a broker of ours answers at the path, in a sound
			 * directory, and proves itself as the library will check it:
			 * never waiting long (a broker that does not accept, or does not
			 * answer within a second, is no broker) */
			const char *why;
			int dirfd = bk_open_sock_dir(&bk_libc, argv[i + 1], BK_DIR_PARENT, &why);
			return dirfd < 0 || answering(dirfd, bk_base(argv[i + 1]), true, 1000) != 1;
		} else if ((!strcmp(argv[i], "--status") || !strcmp(argv[i], "--stop")) && i + 1 == argc - 1) {
			return status_or_stop(argv[i + 1], !strcmp(argv[i], "--stop"));
		} else if (!strcmp(argv[i], "--safe-dir") && i + 1 == argc - 1) {
			return safe_dir(argv[i + 1]);
		} else if (!strcmp(argv[i], "--plan") && argc == 2) {
			return plan();
		} else if (!strcmp(argv[i], "--private") && i + 1 < argc) {
			r->private_base = argv[++i];
		} else if (!strcmp(argv[i], "--watch") && i + 1 < argc) {
			r->watch = (pid_t)atol(argv[++i]);
		} else {
			usage();
			return 2;
		}
	}
	return -1;
}

static void signals_setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct sigaction su = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &su, NULL);
}

/* --private BASE: a directory of its own for the wrapper's command
 * (mkdtemp in a parent no other user can rename it in), served until
 * the wrapper exits, removed after.  -1 to go on, else the exit status. */
static int private_dir(struct run *r)
{
	char tmpl[PATH_MAX];
	r->basefd = open(r->private_base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *why = r->basefd < 0 ? "cannot open it" : bk_check_parent(&bk_libc, r->basefd);
	if (why || snprintf(tmpl, sizeof(tmpl), "%s/keepalive.XXXXXX", r->private_base) >= (int)sizeof(tmpl) ||
	    !mkdtemp(tmpl)) {
		logmsg(1, "no private directory in %s: %s", r->private_base, why ? why : strerror(errno));
		return 1;
	}
	snprintf(r->private_name, sizeof(r->private_name), "%s", bk_base(tmpl));
	if (snprintf(r->path, sizeof(r->path), "%.*s/broker.sock", (int)(sizeof(r->path) - 16), tmpl) >=
	    (int)sizeof(r->path))
		return 1;
	r->wrapper = r->watch > 1 ? r->watch : getppid();
	r->daemonize = true;
	return -1;
}

/* Our listening socket: systemd's, or bound at r->path.  -1 to go on,
 * else the exit status (0: a broker already answers there). */
static int listen_socket(struct run *r)
{
	lfd = r->daemonize ? -1 : activated_fd();
	if (lfd < 0) {
		if (!*r->path)
			default_path(r->path, sizeof(r->path));
		lfd = listen_at(r->path, &r->dirfd);
		if (lfd == -2) {
			if (r->daemonize)
				fprintf(stderr, "keepalive: a broker is already running at %s\n", r->path);
			logmsg(3, "a broker is already answering at %s", r->path);
			return 0;
		}
		if (lfd < 0) {
			/* our private directory, empty: not left behind */
			if (r->private_base)
				unlinkat(r->basefd, r->private_name, AT_REMOVEDIR);
			return 1;
		}
		r->bound = true;
	}
	if (r->bound && fstatat(r->dirfd, bk_base(r->path), &r->lst, AT_SYMLINK_NOFOLLOW) < 0)
		memset(&r->lst, 0, sizeof(r->lst));
	return -1;
}

/* The parent's half of detaching: back once the child listens as itself
 * (a client's SO_PEERCRED and our proof's must name the same pid). */
_Noreturn static void detached_parent(struct run *r, int ready, pid_t child)
{
	struct pollfd p = { ready, POLLIN, 0 };
	char c;
	if (poll(&p, 1, 5000) != 1 || read(ready, &c, 1) != 1)
		_exit(1);
	write_pid(r->dirfd, child);
	if (r->private_base) {
		char dir[PATH_MAX], pid[24];
		snprintf(dir, sizeof(dir), "%s/%s", r->private_base, r->private_name);
		snprintf(pid, sizeof(pid), "%d", (int)child);
		print_sh("dir", dir);
		print_sh("bpid", pid);
		fflush(stdout);
		_exit(0);
	}
	fprintf(stderr, "keepalive: broker at %s (KEEPALIVE_BROKER=1 uses it; keepalive CMD does anyway)\n", r->path);
	_exit(0);
}

/* --daemon and --private: detached, in its own session, no terminal, its
 * log in its own directory, opened through the checked fd (never by
 * name).  Returns in the child, -1; else the exit status. */
static int detach(struct run *r)
{
	int log = r->private_base ? dup(2) : open_in(r->dirfd, "broker.log", O_WRONLY | O_APPEND | O_CREAT, 0600);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (log < 0 || null < 0) {
		logmsg(1, "cannot open %s/broker.log: %s", r->path, strerror(errno));
		return 1;
	}
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		return 1;
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child > 0) {
		close(ready[1]);
		detached_parent(r, ready[0], child);
	}
	close(ready[0]);
	/* listen() again: the socket's credentials become ours, the pid
	 * that serves it */
	if (listen(lfd, SOMAXCONN) < 0 || write(ready[1], "", 1) != 1)
		_exit(1);
	close(ready[1]);
	/* its own session, also the private one (its log is the command's
	 * stderr; it goes when the command does): a signal to the command's
	 * process group (timeout, kill -- -PGID, systemd stop) is not for it
	 * (docs/wrapper.md) */
	setsid();
	dup2(null, 0);
	dup2(null, 1);
	dup2(log, 2);
	close(null);
	close(log);
	int keep[] = { lfd, r->dirfd, r->basefd, log_fd };
	close_inherited(keep, 4);
	return -1;
}

/* Socket-activated: listen() again, so that the socket's credentials
 * (SO_PEERCRED) name the pid that serves it rather than systemd, and say
 * that pid beside it, for keepalive --status and --stop (which check the
 * one against the other); the directory is opened checked, never by
 * name.  docs/wrapper.md */
static void adopt_activated(struct run *r)
{
	struct sockaddr_un ua;
	socklen_t sl = sizeof(ua);
	const char *why;
	memset(&ua, 0, sizeof(ua));
	if (listen(lfd, SOMAXCONN) == 0 && getsockname(lfd, (struct sockaddr *)&ua, &sl) == 0 &&
	    ua.sun_family == AF_UNIX && ua.sun_path[0] == '/' && (size_t)sl < sizeof(ua) &&
	    (r->dirfd = bk_open_sock_dir(&bk_libc, ua.sun_path, BK_DIR_PARENT, &why)) >= 0) {
		snprintf(r->path, sizeof(r->path), "%s", ua.sun_path);
		write_pid(r->dirfd, getpid());
	}
}

/* When the loop must wake: the next expiry, client timeout, the idle
 * exit, a paused accept, a session's end, or a second to ask after a
 * wrapper without a pidfd.  UINT64_MAX: never. */
static uint64_t next_wake(const struct run *r, uint64_t now, uint64_t last_busy, int wrapper_fd)
{
	uint64_t wake = pool_next_expiry();
	if (!n_clients && !pool_size() && !tconn_count())
		wake = last_busy + r->exit_ms;
	for (unsigned i = 0; i < n_clients; i++)
		if (clients[i].last_ms + client_idle_ms < wake)
			wake = clients[i].last_ms + client_idle_ms;
	if (accept_paused && accept_retry_ms < wake)
		wake = accept_retry_ms;
	for (unsigned i = 0; i < SESS_COUNT; i++) /* wiped at their own end */
		if (sessions[i].bytes && sessions[i].expires_ms < wake)
			wake = sessions[i].expires_ms;
	for (unsigned i = 0; i < TCONN_COUNT; i++)
		if (tconns[i].bytes && tconns[i].expires_ms < wake)
			wake = tconns[i].expires_ms;
	if (r->wrapper > 1 && wrapper_fd < 0 && wake > now + 1000)
		wake = now + 1000;
	return wake;
}

/* A server that closed a pooled connection made it readable: dropped now
 * rather than at the next checkout. */
static void drop_closed(const struct pollfd *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct pool_key k;
		struct pool_meta m;
		if (p[i].revents && !op_alive(p[i].fd) && pool_take_fd(p[i].fd, &k, &m) == 0) {
			logmsg(4, "server closed a pooled connection (port %u)", k.port);
			op_close(p[i].fd);
		}
	}
}

/* Oldest client first: a process that exited handing over its connection
 * was here before the one that wants it next. */
static void serve_clients(const struct pollfd *p)
{
	unsigned served_n = n_clients;
	bool done[MAX_CLIENTS] = { false };
	for (unsigned i = 0; i < served_n; i++) {
		short re = p[i].revents;
		if (re)
			done[i] = !serve(i) || (re & (POLLHUP | POLLERR) && !(re & POLLIN));
	}
	for (unsigned i = served_n; i-- > 0;)
		if (done[i])
			client_drop(i);
}

/* Serve until told to stop, idle for exit_ms, or the wrapper is gone. */
static void serve_loop(struct run *r)
{
	/* private: the wrapper's end is ours (a pidfd turns readable when it
	 * exits; without one, kernel < 5.3, it is asked every second) */
	int wrapper_fd = -1;
	if (r->wrapper > 1) {
		wrapper_fd = (int)syscall(SYS_pidfd_open, r->wrapper, 0);
		if (kill(r->wrapper, 0) < 0 && errno == ESRCH)
			stop = 1;
	}
	uint64_t last_busy = now_ms();
	static struct pollfd pfd[2 + MAX_CLIENTS + MAX_POOLED_POLL + TCONN_COUNT];
	static int pooled[MAX_POOLED_POLL];
	while (!stop) {
		uint64_t now = now_ms();
		if (status_asked && r->dirfd >= 0) {
			status_asked = 0;
			write_status(r->dirfd, r->path, r->started);
		}
		pool_expire(now);
		sess_expire(now);
		tconn_expire(now);
		/* a client that has said nothing for a while goes: idle ones must
		 * not hold every slot (it opens a new link when it needs one) */
		for (unsigned i = n_clients; i-- > 0;)
			if (now - clients[i].last_ms >= client_idle_ms) {
				logmsg(4, "closed idle client pid %d", (int)clients[i].pid);
				client_drop(i);
			}
		if (accept_paused && now >= accept_retry_ms)
			accept_paused = false;
		if (n_clients || pool_size() || tconn_count())
			last_busy = now;
		else if (now - last_busy >= r->exit_ms)
			break;
		if (r->wrapper > 1 && wrapper_fd < 0 && kill(r->wrapper, 0) < 0 && errno == ESRCH)
			break;
		uint64_t wake = next_wake(r, now, last_busy, wrapper_fd);
		int timeout = wake == UINT64_MAX ? -1 : wake <= now ? 0 : wake - now > INT_MAX ? INT_MAX : (int)(wake - now);

		nfds_t n = 0;
		/* a paused listener is left out: it stays readable, and polling it
		 * would spin (an fd of -1 is skipped by poll) */
		pfd[n++] = (struct pollfd){ accept_paused ? -1 : lfd, POLLIN, 0 };
		for (unsigned i = 0; i < n_clients; i++)
			pfd[n++] = (struct pollfd){ clients[i].fd, POLLIN, 0 };
		size_t n_pooled = pool_fds(pooled, MAX_POOLED_POLL);
		for (size_t i = 0; i < n_pooled; i++)
			pfd[n++] = (struct pollfd){ pooled[i], POLLIN | POLLRDHUP, 0 };
		size_t n_tls = 0;
		for (unsigned i = 0; i < TCONN_COUNT; i++)
			if (tconns[i].bytes) {
				pfd[n++] = (struct pollfd){ tconns[i].fd, POLLIN | POLLRDHUP, 0 };
				n_tls++;
			}
		nfds_t w = n;
		if (wrapper_fd >= 0)
			pfd[n++] = (struct pollfd){ wrapper_fd, POLLIN, 0 };
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			logmsg(1, "poll: %s", strerror(errno));
			break;
		}
		if (wrapper_fd >= 0 && pfd[w].revents)
			break; /* the wrapper is gone: so is its command */
		drop_closed(&pfd[1 + n_clients], n_pooled);
		tconn_drop_closed(&pfd[1 + n_clients + n_pooled], n_tls);
		serve_clients(&pfd[1]);
		if (pfd[0].revents)
			accept_clients();
	}
}

/* What clients sent before we were told to go is served before we go: a
 * process that exited handing its TLS connection over, then the command
 * that ran it, seen in one wake-up (a broker not scheduled between them).
 * Left unread, the connection's socket closed with the message, without
 * the close_notify sealed beside its state (docs/broker.md "The broker's
 * exit").  Bounded: a client that keeps talking does not keep us. */
static void serve_pending(void)
{
	static struct pollfd pfd[1 + MAX_CLIENTS];
	for (int round = 0; round < 16; round++) {
		pfd[0] = (struct pollfd){ accept_paused ? -1 : lfd, POLLIN, 0 };
		for (unsigned i = 0; i < n_clients; i++)
			pfd[1 + i] = (struct pollfd){ clients[i].fd, POLLIN, 0 };
		if (poll(pfd, 1 + n_clients, 0) <= 0)
			return;
		serve_clients(&pfd[1]);
		if (pfd[0].revents)
			accept_clients();
	}
}

/* Everything we hold goes; our files too, not those a successor made. */
static void shut_down(struct run *r)
{
	int fds[MAX_POOLED_POLL];
	size_t nf = pool_fds(fds, MAX_POOLED_POLL);
	for (size_t i = 0; i < nf; i++) {
		struct pool_key k;
		struct pool_meta m;
		if (pool_take_fd(fds[i], &k, &m) == 0)
			close(fds[i]);
	}
	while (n_clients)
		client_drop(n_clients - 1);
	/* what clients left beside our socket when we did not answer them in
	 * time (docs/broker.md "A silent broker"): named by its inode */
	char silent[64];
	snprintf(silent, sizeof(silent), ".silent-%llu-%llu", (unsigned long long)r->lst.st_ino,
		 (unsigned long long)our_ns.cookie);
	if (r->bound && r->lst.st_ino)
		unlinkat(r->dirfd, silent, 0);
	struct stat now_st;
	/* remove our socket, not one a successor bound in its place */
	if (r->bound && fstatat(r->dirfd, bk_base(r->path), &now_st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    now_st.st_ino == r->lst.st_ino) {
		unlinkat(r->dirfd, bk_base(r->path), 0);
		unlinkat(r->dirfd, "broker.pid", 0);
		unlinkat(r->dirfd, "broker.status", 0);
	}
	if (r->activated && r->dirfd >= 0) {
		unlinkat(r->dirfd, "broker.pid", 0);
		unlinkat(r->dirfd, "broker.status", 0);
	}
	if (r->private_base) { /* ours alone: the wrapper's files too */
		unlinkat(r->dirfd, bk_base(r->path), 0);
		unlinkat(r->dirfd, "broker.pid", 0);
		unlinkat(r->dirfd, "stats", 0);
		unlinkat(r->basefd, r->private_name, AT_REMOVEDIR);
	}
	for (unsigned i = 0; i < SESS_COUNT; i++)
		sess_drop(&sessions[i]);
	for (unsigned i = 0; i < TCONN_COUNT; i++)
		tconn_drop(&tconns[i]);
}

int main(int argc, char **argv)
{
	static struct run r = { .dirfd = -1, .basefd = -1 };
	our_uid = bk_libc.euid = geteuid();
	our_gid = getegid();
	log_setup();
	int status = parse_args(&r, argc, argv);
	if (status >= 0)
		return status;
	if (!r.exit_ms_given) /* ControlPersist-like: linger a while, then go */
		r.exit_ms = env_u64("KEEPALIVE_BROKER_EXIT_MS", 300000, 1, 7 * 24 * 3600 * 1000ull);
	client_idle_ms = env_u64("KEEPALIVE_BROKER_CLIENT_MS", 1000, 10, 3600 * 1000);
	/* it holds TLS sessions (resumption secrets): no core dump, no
	 * ptrace by other processes of the user (docs/tls-across.md) */
	prctl(PR_SET_DUMPABLE, 0);
	if (r.with_parent) {
		/* run for the wrapper's command only: its death is ours */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			return 0;
	}
	signals_setup();
	r.started = now_ms();

	/* our namespace, from a socket of our own making */
	int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (probe < 0 || bk_ns_self(&bk_libc, probe, &our_ns) < 0) {
		logmsg(1, "cannot tell our own network namespace");
		return 1;
	}
	close(probe);

	if (r.private_base && (status = private_dir(&r)) >= 0)
		return status;
	if ((status = listen_socket(&r)) >= 0)
		return status;
	if (r.daemonize && (status = detach(&r)) >= 0)
		return status;
	if (r.bound && !r.daemonize)
		write_pid(r.dirfd, getpid());
	r.activated = !r.bound && !r.daemonize;
	if (r.activated)
		adopt_activated(&r);

	pool_cfg = (struct pool_config){
		.idle_ms = env_u64("KEEPALIVE_IDLE_MS", 30000, 1, 24ull * 3600 * 1000),
		.max_per_dest = (unsigned)env_u64("KEEPALIVE_MAX_IDLE_PER_HOST", 16, 0, 65536),
		.max_total = (unsigned)env_u64("KEEPALIVE_MAX_IDLE", 64, 0, MAX_POOLED_POLL),
		/* probed at every checkout (docs/broker.md): the library does not
		 * probe what the broker hands it, and a socket checked in and out
		 * within one wake of the loop was never polled (a stray 408 may
		 * wait on it) */
		.unprobed_ms = 0,
	};
	struct pool_ops ops = { .close = op_close, .alive = op_alive };
	pool_init(&pool_cfg, &ops);
	logmsg(3, "serving %s (exit after %llu ms idle)", r.bound ? r.path : "fd 3", (unsigned long long)r.exit_ms);
	serve_loop(&r);
	serve_pending();
	shut_down(&r);
	logmsg(3, "exiting: got=%llu gave=%llu missed=%llu refused=%llu dropped=%llu",
	       (unsigned long long)counts.got, (unsigned long long)counts.gave,
	       (unsigned long long)counts.missed, (unsigned long long)counts.refused,
	       (unsigned long long)counts.dropped);
	return 0;
}
