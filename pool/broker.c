/*
 * broker.c - keepalive-broker, the per-user pool process (DESIGN 8).
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
 * peer of another uid (SO_PEERCRED), or key a connection by anything the
 * peer could lie about (the network namespace is read from /proc/PID).
 * A malformed message costs its sender the connection and a log line.
 */
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
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
	uint64_t netns;
};

static struct client clients[MAX_CLIENTS];
static unsigned n_clients;
static int log_level = 2; /* 0 off, 1 error, 2 warn, 3 info, 4 debug */
static int log_fd = 2;
static volatile sig_atomic_t stop, status_asked;
static struct {
	uint64_t got, gave, missed, refused, dropped;
} counts;

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

/* ------------------------------------------------------------ pool ops */

static int op_close(int fd)
{
	counts.dropped++;
	return close(fd);
}

/* As in the library: alive when a read would block (no EOF, no error, no
 * unsolicited bytes such as a 408). */
static int op_alive(int fd)
{
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* ------------------------------------------------------------ checks */

/* The network namespace of process pid: the inode of /proc/PID/ns/net.
 * 0 when it cannot be read. */
static uint64_t netns_of(pid_t pid)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The network namespace a socket lives in (SIOCGSKNS, which the kernel
 * allows only with CAP_NET_ADMIN).  Returns false when it cannot tell. */
static bool socket_netns(int fd, uint64_t *ns)
{
	int nsfd = ioctl(fd, SIOCGSKNS);
	if (nsfd < 0)
		return false;
	struct stat st;
	bool ok = fstat(nsfd, &st) == 0;
	close(nsfd);
	if (ok)
		*ns = st.st_ino;
	return ok;
}

/* ------------------------------------------------------------ clients */

/* Keeps the order of the others (oldest first). */
static void client_drop(unsigned i)
{
	close(clients[i].fd);
	memmove(&clients[i], &clients[i + 1], (--n_clients - i) * sizeof(clients[0]));
}

static void accept_clients(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cred;
		socklen_t l = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0) {
			logmsg(2, "refused a client: no peer credentials (%s)", strerror(errno));
			counts.refused++;
			close(fd);
			continue;
		}
		/* DESIGN 8: only processes of our own uid share connections */
		if (cred.uid != geteuid()) {
			logmsg(2, "refused pid %d: uid %u is not ours (%u)", (int)cred.pid,
			       (unsigned)cred.uid, (unsigned)geteuid());
			counts.refused++;
			close(fd);
			continue;
		}
		/* 0 when the process is gone already (it handed over its
		 * connections as it exited): then its message's own word is taken,
		 * checked against the socket where the kernel lets us (serve) */
		uint64_t ns = netns_of(cred.pid);
		if (n_clients == MAX_CLIENTS) {
			logmsg(2, "refused pid %d: %d clients already", (int)cred.pid, MAX_CLIENTS);
			close(fd);
			continue;
		}
		clients[n_clients++] = (struct client){ fd, cred.pid, ns };
	}
}

static void reply(struct client *cl, const struct bk_msg *req)
{
	struct bk_msg m;
	struct pool_key key = req->key;
	struct pool_meta meta;
	key.netns = req->netns; /* checked against the peer's in serve() */
	uint64_t now = now_ms();
	int fd = pool_checkout(&key, now, &meta);
	bk_encode(&m, BK_REPLY, fd >= 0 ? BK_OK : BK_NONE, req->netns, &req->key, fd >= 0 ? &meta : NULL);

	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	/* never wait for a client: if its buffer is full it gets nothing */
	ssize_t r = sendmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (fd < 0) {
		counts.missed++;
		return;
	}
	if (r == (ssize_t)sizeof(m)) {
		counts.gave++;
		logmsg(4, "gave fd to pid %d (port %u, %u requests served)", (int)cl->pid, key.port,
		       meta.requests);
		close(fd);
		return;
	}
	/* not delivered: it stays ours, as idle as it was */
	if (pool_checkin(&key, fd, &meta, now) < 0)
		close(fd);
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
	char buf[sizeof(struct bk_msg) + 1]; /* one more: an oversized message shows */
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
	if (n == 0)
		return false; /* gone, perhaps mid-message: nothing half-read stays */

	int fds[8];
	unsigned nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t j = 0; j < k && nfds < 8; j++)
			memcpy(&fds[nfds++], CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
	}
	struct bk_msg m;
	const char *why = NULL;
	uint64_t ns;
	int truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	if (bk_decode(buf, (size_t)n, nfds, truncated, BK_AT_BROKER, &m, &why) == 0 &&
	    ((cl->netns && m.netns != cl->netns) || !m.netns))
		why = "network namespace is not the sender's";
	else if (why == NULL && m.type == BK_PUT)
		why = bk_check_conn(fds[0], &m.key, getsockopt);
	if (!why && m.type == BK_PUT && socket_netns(fds[0], &ns) && ns != m.netns)
		why = "connection is from another network namespace";
	if (why) {
		logmsg(2, "refused a message from pid %d: %s (%zd bytes, %u fds)", (int)cl->pid, why,
		       n, nfds);
		counts.refused++;
		for (unsigned j = 0; j < nfds; j++)
			close(fds[j]);
		return false;
	}
	if (m.type == BK_GET) {
		reply(cl, &m);
		return true;
	}
	/* BK_PUT: the key's namespace is the one the connection was made in */
	m.key.netns = m.netns;
	if (!op_alive(fds[0]) || pool_checkin(&m.key, fds[0], &m.meta, now_ms()) < 0) {
		close(fds[0]);
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
	if (xdg && *xdg == '/')
		snprintf(out, cap, "%s/keepalive/broker.sock", xdg);
	else
		snprintf(out, cap, "/tmp/keepalive-%u/broker.sock", (unsigned)geteuid());
}

/* Is a broker answering at path? */
static bool answering(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Returns the listening fd, -1 on error (logged), -2 when a broker is
 * already answering at path. */
static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		logmsg(1, "socket path too long: %s", path);
		return -1;
	}
	/* create the last component of the directory, private from the start */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			logmsg(1, "cannot create %s: %s", dir, strerror(errno));
			return -1;
		}
	}
	const char *why = bk_check_dir(path);
	if (why) {
		logmsg(1, "refusing %s: %s", path, why);
		return -1;
	}
	if (answering(path))
		return -2;
	unlink(path); /* a dead broker's */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
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

/* SIGUSR1: write what we hold and our counters to path (keepalive
 * --status shows it), whole or not at all (a rename). */
static void write_status(const char *path, const char *sock, uint64_t started)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return;
	uint64_t now = now_ms();
	static struct pool_entry e[MAX_POOLED_POLL];
	size_t n = pool_list(e, MAX_POOLED_POLL);
	fprintf(f, "keepalive-broker pid %d at %s, up %llu s, %u clients\n", (int)getpid(), sock,
		(unsigned long long)((now - started) / 1000), n_clients);
	fprintf(f, "counters: got=%llu gave=%llu missed=%llu refused=%llu dropped=%llu\n",
		(unsigned long long)counts.got, (unsigned long long)counts.gave,
		(unsigned long long)counts.missed, (unsigned long long)counts.refused,
		(unsigned long long)counts.dropped);
	fprintf(f, "idle connections: %zu\n", n);
	for (size_t i = 0; i < n; i++) {
		char addr[INET6_ADDRSTRLEN] = "?";
		inet_ntop(e[i].key.family, e[i].key.addr, addr, sizeof(addr));
		fprintf(f, "  %s%s%s:%u netns %llu: %u requests served, idle %llu ms, expires in %llu ms\n",
			e[i].key.family == AF_INET6 ? "[" : "", addr, e[i].key.family == AF_INET6 ? "]" : "",
			e[i].key.port, (unsigned long long)e[i].key.netns, e[i].meta.requests,
			(unsigned long long)(now - e[i].meta.parked_ms),
			(unsigned long long)(e[i].expires_ms > now ? e[i].expires_ms - now : 0));
	}
	if (fclose(f) == 0)
		rename(tmp, path);
	else
		unlink(tmp);
}

static void usage(void)
{
	fprintf(stderr, "usage: keepalive-broker [--socket PATH] [--exit-ms MS] [--with-parent]\n"
			"       keepalive-broker --print-path | --check PATH | --version\n"
			"  default socket: $XDG_RUNTIME_DIR/keepalive/broker.sock\n"
			"  (else /tmp/keepalive-UID/broker.sock); LISTEN_FDS: socket activation\n");
}

int main(int argc, char **argv)
{
	char path[PATH_MAX] = "";
	bool with_parent = false;
	uint64_t exit_ms = 0;
	bool exit_ms_given = false;

	const char *s = getenv("KEEPALIVE_LOG");
	if (s && *s) {
		static const char *names[] = { "off", "error", "warn", "info", "debug" };
		for (int i = 0; i < 5; i++)
			if (!strcmp(s, names[i]) || (s[0] == '0' + i && !s[1]))
				log_level = i;
	}
	if ((s = getenv("KEEPALIVE_LOG_FILE")) && *s) {
		int fd = open(s, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			log_fd = fd;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
			snprintf(path, sizeof(path), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--exit-ms") && i + 1 < argc) {
			exit_ms = strtoull(argv[++i], NULL, 10);
			exit_ms_given = true;
		} else if (!strcmp(argv[i], "--with-parent")) {
			with_parent = true;
		} else if (!strcmp(argv[i], "--version")) {
			printf("keepalive-broker %s\n", KP_VERSION);
			return 0;
		} else if (!strcmp(argv[i], "--print-path")) {
			/* the default path, for the wrapper: one rule, kept here */
			default_path(path, sizeof(path));
			printf("%s\n", path);
			return 0;
		} else if (!strcmp(argv[i], "--check") && i + 1 == argc - 1) {
			/* exit 0 when a broker answers at the path (and its directory
			 * is sound) */
			return bk_check_dir(argv[i + 1]) || !answering(argv[i + 1]);
		} else {
			usage();
			return 2;
		}
	}
	if (!exit_ms_given) /* ControlPersist-like: linger a while, then go */
		exit_ms = env_u64("KEEPALIVE_BROKER_EXIT_MS", 300000, 1, 7 * 24 * 3600 * 1000ull);
	if (with_parent) {
		/* run for the wrapper's command only: its death is ours */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct sigaction su = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &su, NULL);
	uint64_t started = now_ms();

	int lfd = activated_fd();
	bool bound = false;
	if (lfd < 0) {
		if (!*path)
			default_path(path, sizeof(path));
		lfd = listen_at(path);
		if (lfd == -2) {
			logmsg(3, "a broker is already answering at %s", path);
			return 0;
		}
		if (lfd < 0)
			return 1;
		bound = true;
	}
	struct stat lst;
	if (bound && stat(path, &lst) < 0)
		memset(&lst, 0, sizeof(lst));
	/* beside the socket, for "keepalive --stop" */
	char pidfile[PATH_MAX + 8] = "";
	if (bound) {
		snprintf(pidfile, sizeof(pidfile), "%s", path);
		char *slash = strrchr(pidfile, '/');
		snprintf(slash ? slash + 1 : pidfile, sizeof(pidfile) - (size_t)(slash ? slash + 1 - pidfile : 0),
			 "broker.pid");
		FILE *f = fopen(pidfile, "we");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}

	struct pool_config pc = {
		.idle_ms = env_u64("KEEPALIVE_IDLE_MS", 30000, 1, 24ull * 3600 * 1000),
		.max_per_dest = (unsigned)env_u64("KEEPALIVE_MAX_IDLE_PER_HOST", 16, 0, 65536),
		.max_total = (unsigned)env_u64("KEEPALIVE_MAX_IDLE", 64, 0, MAX_POOLED_POLL),
	};
	struct pool_ops ops = { .close = op_close, .alive = op_alive };
	pool_init(&pc, &ops);
	logmsg(3, "serving %s (exit after %llu ms idle)", bound ? path : "fd 3",
	       (unsigned long long)exit_ms);

	uint64_t last_busy = now_ms();
	static struct pollfd pfd[1 + MAX_CLIENTS + MAX_POOLED_POLL];
	static int pooled[MAX_POOLED_POLL];
	char status_path[PATH_MAX + 16] = "";
	if (bound) {
		snprintf(status_path, sizeof(status_path), "%s", pidfile);
		char *dot = strrchr(status_path, '.');
		if (dot)
			snprintf(dot, sizeof(status_path) - (size_t)(dot - status_path), ".status");
	}
	while (!stop) {
		uint64_t now = now_ms();
		if (status_asked && status_path[0]) {
			status_asked = 0;
			write_status(status_path, path, started);
		}
		pool_expire(now);
		if (n_clients || pool_size())
			last_busy = now;
		else if (now - last_busy >= exit_ms)
			break;
		/* sleep until the next expiry or the idle exit */
		uint64_t wake = pool_next_expiry();
		if (!n_clients && !pool_size())
			wake = last_busy + exit_ms;
		int timeout = wake == UINT64_MAX ? -1 : wake <= now ? 0 : wake - now > INT_MAX ? INT_MAX : (int)(wake - now);

		nfds_t n = 0;
		pfd[n++] = (struct pollfd){ lfd, POLLIN, 0 };
		for (unsigned i = 0; i < n_clients; i++)
			pfd[n++] = (struct pollfd){ clients[i].fd, POLLIN, 0 };
		/* a server that closes a pooled connection makes it readable: drop
		 * it now rather than at the next checkout */
		size_t n_pooled = pool_fds(pooled, MAX_POOLED_POLL);
		for (size_t i = 0; i < n_pooled; i++)
			pfd[n++] = (struct pollfd){ pooled[i], POLLIN | POLLRDHUP, 0 };
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			logmsg(1, "poll: %s", strerror(errno));
			break;
		}
		for (size_t i = 0; i < n_pooled; i++) {
			struct pollfd *p = &pfd[1 + n_clients + i];
			struct pool_key k;
			struct pool_meta m;
			if (p->revents && !op_alive(p->fd) && pool_take_fd(p->fd, &k, &m) == 0) {
				logmsg(4, "server closed a pooled connection (port %u)", k.port);
				op_close(p->fd);
			}
		}
		/* oldest client first: a process that exited handing over its
		 * connection was here before the one that wants it next */
		unsigned served_n = n_clients;
		bool done[MAX_CLIENTS] = { false };
		for (unsigned i = 0; i < served_n; i++) {
			short re = pfd[1 + i].revents;
			if (re)
				done[i] = !serve(i) || (re & (POLLHUP | POLLERR) && !(re & POLLIN));
		}
		for (unsigned i = served_n; i-- > 0;)
			if (done[i])
				client_drop(i);
		if (pfd[0].revents)
			accept_clients(lfd);
	}
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
	struct stat now_st;
	/* remove our socket, not one a successor bound in its place */
	if (bound && stat(path, &now_st) == 0 && now_st.st_ino == lst.st_ino) {
		unlink(path);
		unlink(pidfile);
		unlink(status_path);
	}
	logmsg(3, "exiting: got=%llu gave=%llu missed=%llu refused=%llu dropped=%llu",
	       (unsigned long long)counts.got, (unsigned long long)counts.gave,
	       (unsigned long long)counts.missed, (unsigned long long)counts.refused,
	       (unsigned long long)counts.dropped);
	return 0;
}
