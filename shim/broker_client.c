/*
 * broker_client.c - talk to the broker (see broker_client.h and
 * docs/broker.md).
 *
 * One SOCK_SEQPACKET connection to the broker per process at most (the
 * link), opened on first need, GETs and PUTs on the same one, one request
 * in flight.  Every socket is non-blocking and every wait is bounded, so a
 * broker that hangs costs at most KEEPALIVE_BROKER_TIMEOUT_MS once per
 * connect() that missed the local pool, then a second of leaving it alone.
 *
 * Trust nothing that arrives, and give nothing to a broker that has not
 * proved itself: the link must reach our own uid (SO_PEERCRED) through a
 * directory checked on its fd, the broker's first reply must carry its
 * listening socket, living in our network namespace and listened on by the
 * process we reached (bk_check_proof) - a broker answering at our path
 * from a sandbox has none, and gets no connection of ours; and every
 * connection it hands us must be an established TCP socket of our own
 * namespace to the destination we asked for (bk_check_conn).
 */
#include "broker_client.h"
#include "fdlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker_check.h"
#include "broker_proto.h"
#include "config.h"
#include "clock.h"
#include "fdtable.h"
#include "real.h"
#include "sigwait.h"

static bool enabled;
static uid_t our_uid;
static gid_t our_gid;
static struct bk_sys sys; /* kp_real's, never our own exports */

/* The calls broker_check.c makes: libc's (kp_real), never our wrappers. */
static struct bk_sys real_sys(void)
{
	return (struct bk_sys){
		.getsockopt = KP_REAL(getsockopt),
		.getpeername = KP_REAL(getpeername),
		.openat = KP_REAL(openat),
		.read = KP_REAL(read),
		.close = KP_REAL(close),
	};
}
/* after the broker failed us (refused, hung, gone), leave it alone for a
 * while: a loop of connects must not pay the timeout each time */
static uint64_t quiet_until_ms;
#define BROKER_BACKOFF_MS 1000

/* The link.  link_lock is only ever tried (a connect() in a signal
 * handler, or a thread while another one waits on the broker, dials
 * instead of waiting). */
static kp_mutex_t link_lock = KP_MUTEX_INITIALIZER;
static int link_fd = -1;
static bool link_proved;    /* the broker's proof arrived and passed */
static struct bk_ns our_ns; /* our namespace, from the link's own socket */
static struct ucred link_cred;
static ino_t link_ino; /* the link's socket, to know it is still ours */
static dev_t link_dev;

static void after_fork_child(void)
{
	/* the link is the parent's: its replies are not ours to read */
	if (link_fd >= 0) {
		if (kp_fd_valid(link_fd))
			kp_fd_swap(link_fd, NULL);
		KP_REAL(close)(link_fd);
	}
	link_fd = -1;
	link_proved = false;
	kp_mutex_init(&link_lock);
}

void kp_broker_init(void)
{
	if (!kp_cfg.broker_path[0])
		return;
	/* the directory, the socket and the broker are checked when first
	 * needed: a process that never dials pays nothing */
	our_uid = geteuid();
	our_gid = getegid();
	sys = real_sys();
	sys.euid = our_uid;
	pthread_atfork(NULL, NULL, after_fork_child);
	__atomic_store_n(&enabled, true, __ATOMIC_RELAXED);
}

bool kp_broker_enabled(void)
{
	return __atomic_load_n(&enabled, __ATOMIC_RELAXED);
}


/* A broker that runs and never answers (ours: never expected, a hang of
 * its loop) cost each process the reply's timeout once: a loop of one
 * process per request paid it in every process.  The first to wait it
 * out tells the others: a file beside the socket, named by the socket
 * file's inode (a new broker binds a new socket) and the network
 * namespace (the broker's refusal of another's client proves nothing of
 * it to ours: a process there was told to wait), its time when the
 * broker was last found silent.  Within SILENT_SHARED_MS of that a
 * process dials directly without asking, and after it one asks again
 * (docs/broker.md "A silent broker").  The window is the in-process
 * back-off's: a broker slow once under load costs other processes no
 * more reuse than the one that waited loses. */
#define SILENT_SHARED_MS BROKER_BACKOFF_MS
static char silent_name[64]; /* ".silent-INODE-NETNS" of the socket reached, or "" */

/* Did another process find the broker at dirfd silent just now?  Names
 * the file for this socket and namespace either way (none without the
 * kernel's namespace cookie: then nothing is told); two fstatat. */
static bool silent_told(int dirfd)
{
	struct stat st;
	silent_name[0] = 0;
	if (fstatat(dirfd, bk_base(kp_cfg.broker_path), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	/* (and by our network namespace: a process of another, which the
	 * broker refuses, proves nothing of it to us; without the kernel's
	 * cookie, no file) */
	if (!our_ns.known || !our_ns.cookie)
		return false;
	snprintf(silent_name, sizeof(silent_name), ".silent-%llu-%llu", (unsigned long long)st.st_ino,
		 (unsigned long long)our_ns.cookie);
	struct timespec now;
	if (fstatat(dirfd, silent_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != our_uid || clock_gettime(CLOCK_REALTIME, &now) < 0)
		return false;
	int64_t ago_ms = ((int64_t)now.tv_sec - st.st_mtim.tv_sec) * 1000 +
			 ((int64_t)now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
	return ago_ms >= 0 && ago_ms < SILENT_SHARED_MS;
}

/* Tell the other processes the broker did not answer in time: the file
 * silent_told reads, made or its time set to now. */
static void silent_tell(void)
{
	const char *why;
	if (!silent_name[0])
		return;
	int dirfd = bk_open_sock_dir(&sys, kp_cfg.broker_path, 0, &why);
	if (dirfd < 0)
		return;
	int f = KP_REAL(openat)(dirfd, silent_name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (f >= 0) {
		futimens(f, NULL);
		KP_REAL(close)(f);
	}
	KP_REAL(close)(dirfd);
}

static void back_off(const char *why)
{
	kp_info("broker: %s; dialling directly for %d ms", why, BROKER_BACKOFF_MS);
	__atomic_store_n(&quiet_until_ms, kp_now_ms() + BROKER_BACKOFF_MS, __ATOMIC_RELAXED);
}

static void refuse_broker(const char *why)
{
	kp_warn("not using the broker at %s: %s", kp_cfg.broker_path, why);
	__atomic_store_n(&enabled, false, __ATOMIC_RELAXED);
}


/* Is the link still ours?  A program that closed our number behind our
 * back took the mark with it (close, dup2 onto it); close_range and
 * closefrom keep only the pool's hidden fds and may leave the mark on a
 * number the program has since reused: the socket itself must still be
 * the one we opened (its inode). */
static bool link_ok(void)
{
	struct stat st;
	if (link_fd >= 0 &&
	    (kp_fd_conn(link_fd) != KP_POOLED || fstat(link_fd, &st) < 0 || st.st_ino != link_ino ||
	     st.st_dev != link_dev)) {
		if (kp_fd_valid(link_fd) && kp_fd_conn(link_fd) == KP_POOLED)
			kp_fd_swap(link_fd, NULL);
		link_fd = -1; /* the number is not ours any more: never touch it */
		link_proved = false;
	}
	return link_fd >= 0;
}

static void link_drop(void)
{
	/* closed only while still ours (link_ok), never a number the program
	 * has taken since */
	if (link_ok()) {
		kp_fd_swap(link_fd, NULL);
		KP_REAL(close)(link_fd);
	}
	link_fd = -1;
	link_proved = false;
}

void kp_broker_disable(void)
{
	__atomic_store_n(&enabled, false, __ATOMIC_RELAXED);
	/* the link was checked as the old identity's */
	kp_lock(&link_lock);
	link_drop();
	kp_unlock(&link_lock);
}

/* Open the link (link_lock held): the directory checked on its fd, the
 * socket reached through that fd, the peer our own uid.  Returns 0 or -1. */
static int link_open(void)
{
	if (kp_now_ms() < __atomic_load_n(&quiet_until_ms, __ATOMIC_RELAXED))
		return -1;
	const char *why;
	int dirfd = bk_open_sock_dir(&sys, kp_cfg.broker_path, 0, &why);
	if (dirfd < 0) {
		/* no directory: no broker was ever started there; another
		 * user's: the broker of the user we were before a setuid,
		 * su or sudo inside a keepalive (its environment is
		 * inherited): nothing odd, nothing to say on the program's
		 * stderr (a directory it cannot reach: another user's
		 * within another user's 0700 one).  (A directory of ours
		 * that is not safe is.) */
		if (bk_dir_not_ours(why)) {
			kp_info("not using the broker at %s: %s", kp_cfg.broker_path, why);
			__atomic_store_n(&enabled, false, __ATOMIC_RELAXED);
		} else {
			refuse_broker(why);
		}
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = -1;
	if (bk_fd_path(sa.sun_path, sizeof(sa.sun_path), dirfd, bk_base(kp_cfg.broker_path)) == 0)
		s = KP_REAL(socket)(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* a Unix connect does not wait: it succeeds, or fails at once (EAGAIN
	 * when the broker's backlog is full) */
	int r = s >= 0 ? KP_REAL(connect)(s, (struct sockaddr *)&sa, sizeof(sa)) : -1;
	int err = errno;
	if (r < 0) {
		KP_REAL(close)(dirfd);
		if (s >= 0)
			KP_REAL(close)(s);
		back_off(err == ENOENT || err == ECONNREFUSED ? "none running" : strerror(err));
		return -1;
	}
	socklen_t l = sizeof(link_cred);
	const char *off = NULL;
	if (KP_REAL(getsockopt)(s, SOL_SOCKET, SO_PEERCRED, &link_cred, &l) < 0 || link_cred.uid != our_uid ||
	    link_cred.gid != our_gid) {
		KP_REAL(close)(dirfd);
		KP_REAL(close)(s);
		refuse_broker("it is not run by our uid");
		return -1;
	}
	if (bk_pid_stopped(&sys, link_cred.pid))
		/* stopped (SIGSTOP, a debugger): it would answer nobody, and each
		 * process would pay the whole timeout to learn it once
		 * (docs/broker.md "A stopped broker") */
		off = "it is stopped";
	else if (bk_ns_self(&sys, s, &our_ns) < 0)
		off = "";
	else if (silent_told(dirfd))
		off = "another process found it silent";
	KP_REAL(close)(dirfd);
	if (off) {
		KP_REAL(close)(s);
		if (*off)
			back_off(off);
		return -1;
	}
	/* hidden where pooled sockets hide: the program's next fd numbers stay
	 * what they would be, and its calls on this number are refused; none
	 * to be had now (docs/limits.md): no link, rather than one at a number
	 * of the program's */
	int h = kp_fd_hide(s);
	KP_REAL(close)(s);
	if (h < 0)
		return -1;
	s = h;
	if (!kp_fd_valid(s)) { /* cannot be marked ours: not kept */
		KP_REAL(close)(s);
		return -1;
	}
	struct stat st;
	if (fstat(s, &st) < 0) {
		KP_REAL(close)(s);
		return -1;
	}
	link_ino = st.st_ino;
	link_dev = st.st_dev;
	kp_fd_swap(s, KP_POOLED);
	link_fd = s;
	link_proved = false;
	return 0;
}

__thread bool kp_broker_cut;

/* Wait for one datagram until the deadline; returns the bytes read or -1. */
static ssize_t recv_reply(int s, struct msghdr *mh, uint64_t deadline)
{
	/* waiting first: the broker has not answered yet, as a rule (a
	 * recvmsg first would cost an EAGAIN each time) */
	for (;;) {
		struct pollfd p = { s, POLLIN, 0 };
		uint64_t now = kp_now_ms();
		int r = KP_REAL(poll)(&p, 1, now >= deadline ? 0 : (int)(deadline - now));
		if (r < 0 && errno == EINTR) {
			/* a handler that would have ended the program's connect
			 * ends our wait in it: the call says EINTR (kp_broker_cut) */
			if (kp_eintr_ends_call()) {
				kp_broker_cut = true;
				return -1;
			}
			continue;
		}
		if (r <= 0)
			return -1;
		ssize_t n = KP_REAL(recvmsg)(s, mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return n;
	}
}

/* The reply a request calls for. */
static uint16_t reply_type(uint16_t req)
{
	return req == BK_SGET ? BK_SREPLY : req == BK_TGET ? BK_TREPLY : BK_REPLY;
}

/* Send req (type GET or HELLO) and read its reply: *out decoded, the
 * proof checked when it comes, *conn the connection or -1.  Returns 0, or
 * -1 (the link is dropped: a late reply must never answer a later
 * request). */
/* A session or TLS reply under another name than asked (a TGET for any
 * name, BK_S_ANY, takes the state's own) */
static bool reply_name_differs(const struct bk_msg *req, const void *bytes, const struct bk_sess *rs)
{
	const struct bk_sess *q = (const struct bk_sess *)((const char *)bytes + sizeof(*req));
	if (req->type == BK_TGET && (q->flags & BK_S_ANY))
		return false;
	return memcmp(rs->name, q->name, BK_SESS_NAME) != 0;
}

static int exchange_bytes(const struct bk_msg *req, const void *bytes, size_t len, struct bk_msg *out,
			  int *conn, char *buf, size_t cap, struct bk_sess *rs, size_t *roff, uint64_t deadline)
{
	*conn = -1;
	if (KP_REAL(send)(link_fd, bytes, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
		return -1; /* EPIPE: the broker closed an idle link; the caller retries once */
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recv_reply(link_fd, &mh, deadline);
	if (n <= 0) {
		link_drop();
		/* (a wait a signal cut proves nothing of the broker) */
		if (n < 0 && !kp_broker_cut)
			silent_tell();
		back_off(n == 0 ? "it closed our link" : kp_broker_cut ? "a signal ended the wait" : "no reply in time");
		return -2;
	}
	int fds[4];
	unsigned nfds = bk_cmsg_fds(&mh, fds, 4);
	const char *why = NULL;
	int truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	bool proof = false;
	if (bk_decode_any(buf, (size_t)n, nfds, truncated, BK_AT_CLIENT, out, rs, roff, &why) == 0) {
		proof = out->flags & BK_F_PROOF;
		if (!link_proved && !proof)
			why = "its first reply has no proof";
		else if (link_proved && proof)
			why = "a second proof";
		else if (proof && (why = bk_check_proof(&sys, &link_cred, fds[0], &our_ns)))
			;
		else if (out->type != reply_type(req->type))
			why = "a reply of another kind";
		else if (out->status == BK_OK && req->type != BK_GET && req->type != BK_SGET &&
			 req->type != BK_TGET)
			why = "a connection nobody asked for";
		else if ((out->type == BK_SREPLY || out->type == BK_TREPLY) &&
			 (memcmp(&out->key, &req->key, sizeof(req->key)) || reply_name_differs(req, bytes, rs)))
			why = "reply for another session";
		else if (out->status == BK_OK && out->type == BK_REPLY &&
			 memcmp(&out->key, &req->key, sizeof(req->key)))
			why = "reply for another destination";
	}
	if (proof && nfds)
		KP_REAL(close)(fds[0]);
	if (why) {
		for (unsigned j = proof ? 1 : 0; j < nfds; j++)
			KP_REAL(close)(fds[j]);
		kp_warn("broker reply refused: %s", why);
		link_drop();
		back_off("bad reply");
		/* a broker that cannot prove itself stays unproved: not used */
		if (!link_proved && strstr(why, "proof"))
			refuse_broker(why);
		return -2;
	}
	link_proved = true;
	if (out->status == BK_OK && (out->type == BK_REPLY || out->type == BK_TREPLY))
		*conn = fds[proof ? 1 : 0];
	return 0;
}

static int exchange(const struct bk_msg *req, struct bk_msg *out, int *conn, uint64_t deadline)
{
	char buf[sizeof(*out) + 1];
	struct bk_sess rs;
	size_t off;
	return exchange_bytes(req, req, sizeof(*req), out, conn, buf, sizeof(buf), &rs, &off, deadline);
}

/* Have a proved link (link_lock held).  hello: prove it now if it is new
 * (a PUT must not go to a broker that has not proved itself).  Returns 0
 * or -1. */
static int link_ready(bool hello, uint64_t deadline)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!link_ok() && link_open() < 0)
			return -1;
		if (link_proved || !hello)
			return 0;
		struct bk_msg m, out;
		int conn;
		bk_encode(&m, BK_HELLO, BK_OK, 0, NULL, NULL);
		int r = exchange(&m, &out, &conn, deadline);
		if (r == 0)
			return 0;
		if (r == -2)
			return -1;
		link_drop(); /* a stale link (the broker closed it idle): once more */
	}
	return -1;
}

int kp_broker_get(const struct pool_key *key, struct pool_meta *meta)
{
	kp_broker_cut = false;
	if (!kp_broker_enabled() || kp_trylock(&link_lock))
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	int conn = -1;
	struct bk_msg m, out;
	bk_encode(&m, BK_GET, BK_OK, 0, key, NULL);
	for (int attempt = 0; attempt < 2 && conn < 0 && !kp_broker_cut; attempt++) {
		if (link_ready(false, deadline) < 0)
			break;
		int r = exchange(&m, &out, &conn, deadline);
		if (r == -2 || (r == 0 && conn < 0))
			break;
		if (r < 0)
			link_drop(); /* a stale link: once more on a new one */
	}
	if (conn < 0) {
		kp_unlock(&link_lock);
		return -1;
	}
	bool dead;
	const char *why = bk_check_conn(&sys, conn, key, &our_ns, &dead);
	if (why) {
		KP_REAL(close)(conn);
		/* a connection that died on its way here is no lie: just a miss */
		if (dead) {
			kp_debug("broker gave a dead connection: dialling");
		} else {
			kp_warn("broker reply refused: %s", why);
			link_drop();
			refuse_broker(why);
		}
		kp_unlock(&link_lock);
		return -1;
	}
	kp_unlock(&link_lock);
	*meta = out.meta;
	kp_count(broker_got);
	return conn;
}

/* Send mh (want bytes) to a broker that proved itself on this link: a
 * connection, a session's secret or a TLS state goes nowhere else
 * (docs/broker.md).  Never waits: a broker whose queue is full simply
 * does not get it; a link closed while idle, once more on a new one.
 * Caller holds link_lock.  0 or -1. */
static int send_proved(const struct msghdr *mh, ssize_t want, uint64_t deadline)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (link_ready(true, deadline) < 0)
			return -1;
		if (KP_REAL(sendmsg)(link_fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL) == want)
			return 0;
		if (errno == EAGAIN)
			return -1;
		link_drop();
	}
	return -1;
}

int kp_broker_put(int *link, const struct pool_key *key, int fd, const struct pool_meta *meta)
{
	(void)link; /* the process's one link is kept here */
	if (!kp_broker_enabled() || kp_trylock(&link_lock))
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	struct bk_msg m;
	bk_encode(&m, BK_PUT, BK_OK, 0, key, meta);
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	bk_cmsg_put(&mh, u.buf, &fd, 1);
	int r = send_proved(&mh, (ssize_t)sizeof(m), deadline);
	kp_unlock(&link_lock);
	if (r == 0)
		kp_count(broker_gave);
	return r;
}

/* ------------------------------------------------------------ sessions */

int kp_broker_sess_put(const struct pool_key *key, const uint8_t name[BK_SESS_NAME], uint32_t timeout_s,
		       bool once, const void *bytes, size_t len)
{
	if (!kp_broker_enabled() || !len || len > BK_SESS_MAX || !timeout_s || kp_trylock(&link_lock))
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	struct bk_msg m;
	struct bk_sess h;
	bk_encode(&m, BK_SPUT, BK_OK, 0, key, NULL);
	memset(&h, 0, sizeof(h));
	memcpy(h.name, name, BK_SESS_NAME);
	h.timeout_s = timeout_s;
	h.flags = once ? BK_S_ONCE : 0;
	h.len = (uint32_t)len;
	struct iovec iov[3] = { { &m, sizeof(m) }, { &h, sizeof(h) }, { (void *)bytes, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
	ssize_t want = (ssize_t)(sizeof(m) + sizeof(h) + len);
	int r = send_proved(&mh, want, deadline);
	kp_unlock(&link_lock);
	return r;
}

ssize_t kp_broker_sess_get(const struct pool_key *key, const uint8_t name[BK_SESS_NAME], void *out, size_t cap)
{
	if (!kp_broker_enabled() || kp_trylock(&link_lock))
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	struct {
		struct bk_msg m;
		struct bk_sess h;
	} req;
	_Static_assert(sizeof(req) == sizeof(struct bk_msg) + sizeof(struct bk_sess), "packed");
	bk_encode(&req.m, BK_SGET, BK_OK, 0, key, NULL);
	memset(&req.h, 0, sizeof(req.h));
	memcpy(req.h.name, name, BK_SESS_NAME);
	static char buf[BK_SESS_MSG_MAX + 1]; /* under link_lock */
	struct bk_msg reply;
	struct bk_sess rs;
	size_t off = 0;
	ssize_t got = -1;
	int conn;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (link_ready(false, deadline) < 0)
			break;
		int r = exchange_bytes(&req.m, &req, sizeof(req), &reply, &conn, buf, sizeof(buf), &rs, &off,
				       deadline);
		if (r == 0) {
			if (reply.status == BK_OK && rs.len <= cap) {
				memcpy(out, buf + off, rs.len);
				got = rs.len;
			}
			break;
		}
		if (r == -2)
			break;
		link_drop(); /* a stale link: once more on a new one */
	}
	explicit_bzero(buf, sizeof(buf)); /* the resumption secret */
	kp_unlock(&link_lock);
	return got;
}

/* ------------------------------------------------------------ TLS connections */

int kp_broker_tls_put(const struct pool_key *key, const uint8_t name[BK_SESS_NAME], uint32_t timeout_s, int fd,
		      const struct pool_meta *meta, const void *state, size_t len, const void *tail, size_t tail_len)
{
	if (!kp_broker_enabled() || !len || len + tail_len > BK_TLS_MAX || tail_len > BK_TAIL_MAX || !timeout_s ||
	    kp_trylock(&link_lock))
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	struct bk_msg m;
	struct bk_sess h;
	bk_encode(&m, BK_TPUT, BK_OK, 0, key, meta);
	memset(&h, 0, sizeof(h));
	memcpy(h.name, name, BK_SESS_NAME);
	h.timeout_s = timeout_s;
	h.len = (uint32_t)(len + tail_len);
	h.tail = (uint32_t)tail_len;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov[4] = { { &m, sizeof(m) }, { &h, sizeof(h) }, { (void *)state, len }, { (void *)tail, tail_len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = tail_len ? 4 : 3 };
	bk_cmsg_put(&mh, u.buf, &fd, 1);
	ssize_t want = (ssize_t)(sizeof(m) + sizeof(h) + len + tail_len);
	int r = send_proved(&mh, want, deadline);
	kp_unlock(&link_lock);
	if (r == 0)
		kp_count(broker_gave);
	return r;
}

static int tls_get(const struct pool_key *key, uint8_t name[BK_SESS_NAME], bool any, struct pool_meta *meta,
		   void *out, size_t cap, size_t *len, size_t *tail);

int kp_broker_tls_get(const struct pool_key *key, const uint8_t name[BK_SESS_NAME], struct pool_meta *meta,
		      void *out, size_t cap, size_t *len)
{
	uint8_t n[BK_SESS_NAME];
	memcpy(n, name, sizeof(n));
	return tls_get(key, n, false, meta, out, cap, len, NULL);
}

int kp_broker_tls_get_any(const struct pool_key *key, uint8_t name[BK_SESS_NAME], struct pool_meta *meta,
			  void *out, size_t cap, size_t *len, size_t *tail)
{
	memset(name, 0, BK_SESS_NAME);
	return tls_get(key, name, true, meta, out, cap, len, tail);
}

static int tls_get(const struct pool_key *key, uint8_t name[BK_SESS_NAME], bool any, struct pool_meta *meta,
		   void *out, size_t cap, size_t *len, size_t *tail)
{
	if (!kp_broker_enabled() || kp_trylock(&link_lock))
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	struct {
		struct bk_msg m;
		struct bk_sess h;
	} req;
	bk_encode(&req.m, BK_TGET, BK_OK, 0, key, NULL);
	memset(&req.h, 0, sizeof(req.h));
	memcpy(req.h.name, name, BK_SESS_NAME);
	req.h.flags = any ? BK_S_ANY : 0;
	static char buf[BK_MSG_MAX + 1]; /* under link_lock */
	struct bk_msg reply;
	struct bk_sess rs;
	size_t off = 0;
	int conn = -1;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (link_ready(false, deadline) < 0)
			break;
		int r = exchange_bytes(&req.m, &req, sizeof(req), &reply, &conn, buf, sizeof(buf), &rs, &off,
				       deadline);
		if (r == 0 || r == -2)
			break;
		link_drop(); /* a stale link: once more on a new one */
	}
	const char *why = NULL;
	bool dead = false;
	if (conn >= 0 && rs.len > cap)
		why = "its state does not fit";
	else if (conn >= 0)
		why = bk_check_conn(&sys, conn, key, &our_ns, &dead);
	if (conn >= 0 && !why) {
		/* the state, then its sealed tail (a broker before it sent none) */
		memcpy(out, buf + off, rs.len);
		*len = rs.len - rs.tail;
		if (tail)
			*tail = rs.tail;
		*meta = reply.meta;
		memcpy(name, rs.name, BK_SESS_NAME); /* (asked: the same; any: its own) */
	}
	explicit_bzero(buf, sizeof(buf)); /* the traffic keys */
	if (why && !dead) {
		kp_warn("broker reply refused: %s", why);
		link_drop();
		refuse_broker(why);
	}
	kp_unlock(&link_lock);
	if (why && conn >= 0) {
		KP_REAL(close)(conn);
		conn = -1;
	}
	if (conn >= 0)
		kp_count(broker_got);
	return conn;
}

void kp_broker_close(int link)
{
	(void)link; /* the link stays for the process's next request */
}

const char *kp_broker_check_own(int fd, const struct pool_key *key)
{
	struct bk_sys s = real_sys();
	return bk_check_conn(&s, fd, key, NULL, NULL);
}
