/*
 * broker_client.c - talk to the broker (see broker_client.h).
 *
 * One SOCK_SEQPACKET connection per hand-out (a GET and its REPLY) or per
 * batch of PUTs at exit.  Every socket is non-blocking and every wait is
 * bounded, so a broker that hangs costs at most KEEPALIVE_BROKER_TIMEOUT_MS
 * once per connect() that missed the local pool.  Trust nothing that
 * arrives: the peer must be our own uid (SO_PEERCRED), the reply well
 * formed, the fd a TCP connection to the destination we asked for.
 */
#include "broker_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker_check.h"
#include "broker_proto.h"
#include "config.h"
#include "conn.h"
#include "real.h"

static bool enabled;
static uint64_t our_netns;
/* after the broker failed us (refused, hung, gone), leave it alone for a
 * while: a loop of connects must not pay the timeout each time */
static uint64_t quiet_until_ms;
#define BROKER_BACKOFF_MS 1000

void kp_broker_init(void)
{
	if (!kp_cfg.broker_path[0])
		return;
	const char *why = bk_check_dir(kp_cfg.broker_path);
	if (why) {
		/* no directory: no broker was ever started there, nothing odd */
		if (!strcmp(why, "socket directory missing"))
			kp_info("not using the broker at %s: %s", kp_cfg.broker_path, why);
		else
			kp_warn("not using the broker at %s: %s", kp_cfg.broker_path, why);
		return;
	}
	struct stat st;
	if (stat("/proc/self/ns/net", &st) < 0) {
		kp_warn("not using the broker: no /proc/self/ns/net");
		return;
	}
	our_netns = st.st_ino;
	__atomic_store_n(&enabled, true, __ATOMIC_RELAXED);
}

bool kp_broker_enabled(void)
{
	return __atomic_load_n(&enabled, __ATOMIC_RELAXED);
}

void kp_broker_disable(void)
{
	__atomic_store_n(&enabled, false, __ATOMIC_RELAXED);
}

static void back_off(const char *why)
{
	kp_info("broker: %s; dialling directly for %d ms", why, BROKER_BACKOFF_MS);
	__atomic_store_n(&quiet_until_ms, kp_now_ms() + BROKER_BACKOFF_MS, __ATOMIC_RELAXED);
}

/* Connect to the broker and check it is our own user's.  Returns the
 * socket or -1. */
static int dial(void)
{
	if (kp_now_ms() < __atomic_load_n(&quiet_until_ms, __ATOMIC_RELAXED))
		return -1;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, kp_cfg.broker_path, sizeof(sa.sun_path));
	int s = KP_REAL(socket)(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	/* a Unix connect does not wait: it succeeds, or fails at once (EAGAIN
	 * when the broker's backlog is full) */
	if (KP_REAL(connect)(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;
		KP_REAL(close)(s);
		back_off(err == ENOENT || err == ECONNREFUSED ? "none running" : strerror(err));
		return -1;
	}
	struct ucred cred;
	socklen_t l = sizeof(cred);
	if (KP_REAL(getsockopt)(s, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0 || cred.uid != geteuid()) {
		KP_REAL(close)(s);
		kp_warn("broker at %s is not run by our uid: not used", kp_cfg.broker_path);
		__atomic_store_n(&enabled, false, __ATOMIC_RELAXED);
		return -1;
	}
	return s;
}

void kp_broker_close(int link)
{
	if (link >= 0)
		KP_REAL(close)(link);
}

/* Wait for the reply until the deadline; returns the bytes read or -1. */
static ssize_t recv_reply(int s, struct msghdr *mh, uint64_t deadline)
{
	for (;;) {
		ssize_t n = KP_REAL(recvmsg)(s, mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return n;
		uint64_t now = kp_now_ms();
		if (now >= deadline)
			return -1;
		struct pollfd p = { s, POLLIN, 0 };
		if (KP_REAL(poll)(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return -1;
	}
}

int kp_broker_get(const struct pool_key *key, struct pool_meta *meta)
{
	if (!kp_broker_enabled())
		return -1;
	uint64_t deadline = kp_now_ms() + kp_cfg.broker_timeout_ms;
	int s = dial();
	if (s < 0)
		return -1;
	struct bk_msg m;
	bk_encode(&m, BK_GET, BK_OK, our_netns, key, NULL);
	if (KP_REAL(send)(s, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
		KP_REAL(close)(s);
		back_off("it does not take requests");
		return -1;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	char buf[sizeof(m) + 1];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recv_reply(s, &mh, deadline);
	KP_REAL(close)(s);
	if (n < 0) {
		back_off("no reply in time");
		return -1;
	}
	int fds[4];
	unsigned nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t j = 0; j < k && nfds < 4; j++)
			memcpy(&fds[nfds++], CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
	}
	const char *why = NULL;
	int truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	if (bk_decode(buf, (size_t)n, nfds, truncated, BK_AT_CLIENT, &m, &why) == 0 &&
	    m.status == BK_OK &&
	    (m.netns != our_netns || memcmp(&m.key, key, sizeof(*key))))
		why = "reply for another destination";
	else if (!why && m.status == BK_OK)
		why = bk_check_conn(fds[0], key, KP_REAL(getsockopt));
	if (why) {
		for (unsigned j = 0; j < nfds; j++)
			KP_REAL(close)(fds[j]);
		/* a connection that died on its way here is no lie: just a miss */
		if (!strcmp(why, "not an established connection")) {
			kp_debug("broker gave a dead connection: dialling");
			return -1;
		}
		kp_warn("broker reply refused: %s", why);
		back_off("bad reply");
		return -1;
	}
	if (m.status != BK_OK)
		return -1;
	*meta = m.meta;
	kp_count(broker_got);
	return fds[0];
}

int kp_broker_put(int *link, const struct pool_key *key, int fd, const struct pool_meta *meta)
{
	if (!kp_broker_enabled())
		return -1;
	if (*link < 0 && (*link = dial()) < 0)
		return -1;
	struct bk_msg m;
	struct pool_key k = *key;
	k.netns = 0; /* the broker keys by the namespace it sees us in */
	bk_encode(&m, BK_PUT, BK_OK, our_netns, &k, meta);
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	/* never wait: a broker whose queue is full simply does not get it */
	if (KP_REAL(sendmsg)(*link, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -1;
	kp_count(broker_gave);
	return 0;
}
