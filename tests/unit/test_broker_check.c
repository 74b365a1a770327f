/*
 * test_broker_check.c - the fd checks of pool/broker_check.c on real
 * descriptors: a generated matrix of socket kind x state x network
 * namespace x key x way of placing it (SO_NETNS_COOKIE, or our own
 * /proc/self/net tables as on a kernel without the cookie), each verdict
 * compared with the rule of docs/broker.md: accepted only an established
 * TCP socket of our own namespace whose peer is the key's destination.
 * The other namespace is made by a child (unshare(CLONE_NEWUSER |
 * CLONE_NEWNET), no privileges needed) that sends its sockets back over
 * SCM_RIGHTS; where the kernel refuses, those rows are skipped, said so.
 * Also the broker's proof (bk_check_proof) and the /proc table parser at
 * every split offset.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker_check.h"

#include "check.h"

/* CHECK as an expression */
#define OK(cond)                                                                          \
	((cond) ? (passed++, 1)                                                           \
		: (failed++, fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond), 0))

static const struct bk_sys sys = {
	.getsockopt = getsockopt,
	.getpeername = getpeername,
	.openat = openat,
	.read = read,
	.close = close,
};

/* the kinds of descriptor a peer could send */
enum kind {
	K_TCP4_EST,	  /* established, the key's destination */
	K_TCP6_EST,	  /* established over ::1 */
	K_TCP4_CLOSE_WAIT, /* its server closed it */
	K_TCP4_RESET,	  /* reset by its server */
	K_TCP4_UNCONNECTED,
	K_TCP4_LISTEN,
	K_UDP4_CONNECTED,
	K_UNIX_STREAM,
	K_PIPE,
	K_FILE,
	K_N
};
static const char *kind_name[K_N] = { "tcp4-established", "tcp6-established", "tcp4-close-wait",
				      "tcp4-reset", "tcp4-unconnected", "tcp4-listening",
				      "udp4-connected", "unix-stream", "pipe", "file" };

struct made {
	int fd[K_N];
	struct pool_key key[K_N]; /* the destination each was made to */
	int keep[8];		  /* the far ends, kept open */
	unsigned n_keep;
};

static void key_of(int fd, struct pool_key *k)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	memset(k, 0, sizeof(*k));
	if (getpeername(fd, (struct sockaddr *)&ss, &l) < 0)
		return;
	k->family = ss.ss_family;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (void *)&ss;
		k->port = ntohs(in->sin_port);
		memcpy(k->addr, &in->sin_addr, 4);
	} else {
		struct sockaddr_in6 *in6 = (void *)&ss;
		k->port = ntohs(in6->sin6_port);
		memcpy(k->addr, &in6->sin6_addr, 16);
		k->scope = in6->sin6_scope_id;
	}
}

/* a connected pair over family's loopback: *c the client end */
static int tcp_pair(int family, int *c, int *srv, int *lst)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t l;
	if (family == AF_INET) {
		struct sockaddr_in *in = (void *)&ss;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		l = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (void *)&ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		l = sizeof(*in6);
	}
	*lst = socket(family, SOCK_STREAM, 0);
	if (*lst < 0 || bind(*lst, (struct sockaddr *)&ss, l) < 0 || listen(*lst, 4) < 0)
		return -1;
	getsockname(*lst, (struct sockaddr *)&ss, &l);
	*c = socket(family, SOCK_STREAM, 0);
	if (*c < 0 || connect(*c, (struct sockaddr *)&ss, l) < 0)
		return -1;
	*srv = accept(*lst, NULL, NULL);
	return *srv < 0 ? -1 : 0;
}

static void settle(void)
{
	usleep(20 * 1000); /* a FIN or RST crossing loopback */
}

static int make_all(struct made *m)
{
	int c, s, lst;
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < K_N; i++)
		m->fd[i] = -1;
	if (tcp_pair(AF_INET, &c, &s, &lst) < 0)
		return -1;
	m->fd[K_TCP4_EST] = c;
	m->keep[m->n_keep++] = s;
	m->fd[K_TCP4_LISTEN] = lst;
	key_of(c, &m->key[K_TCP4_EST]);
	m->key[K_TCP4_LISTEN] = m->key[K_TCP4_EST];
	if (tcp_pair(AF_INET6, &c, &s, &lst) == 0) {
		m->fd[K_TCP6_EST] = c;
		m->keep[m->n_keep++] = s;
		close(lst);
		key_of(c, &m->key[K_TCP6_EST]);
	}
	if (tcp_pair(AF_INET, &c, &s, &lst) < 0)
		return -1;
	close(s); /* FIN: the client end goes to CLOSE_WAIT */
	close(lst);
	m->fd[K_TCP4_CLOSE_WAIT] = c;
	key_of(c, &m->key[K_TCP4_CLOSE_WAIT]);
	if (tcp_pair(AF_INET, &c, &s, &lst) < 0)
		return -1;
	key_of(c, &m->key[K_TCP4_RESET]);
	struct linger lg = { 1, 0 };
	setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(s); /* RST */
	close(lst);
	m->fd[K_TCP4_RESET] = c;
	m->fd[K_TCP4_UNCONNECTED] = socket(AF_INET, SOCK_STREAM, 0);
	m->key[K_TCP4_UNCONNECTED] = m->key[K_TCP4_EST];
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(m->key[K_TCP4_EST].port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	connect(u, (struct sockaddr *)&to, sizeof(to));
	m->fd[K_UDP4_CONNECTED] = u;
	m->key[K_UDP4_CONNECTED] = m->key[K_TCP4_EST];
	int sp[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
	m->fd[K_UNIX_STREAM] = sp[0];
	m->keep[m->n_keep++] = sp[1];
	m->key[K_UNIX_STREAM] = m->key[K_TCP4_EST];
	int pp[2];
	if (pipe(pp) < 0)
		return -1;
	m->fd[K_PIPE] = pp[0];
	m->keep[m->n_keep++] = pp[1];
	m->key[K_PIPE] = m->key[K_TCP4_EST];
	m->fd[K_FILE] = open("/proc/self/status", O_RDONLY);
	m->key[K_FILE] = m->key[K_TCP4_EST];
	settle();
	return 0;
}

/* A child in a namespace of its own makes the same kinds and sends them
 * back (with their keys) over sp.  Returns 0, or -1 when the kernel
 * refuses the namespace. */
static int from_other_ns(struct made *m)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(sp[0]);
		char ok = 0;
		if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
			int s = socket(AF_INET, SOCK_DGRAM, 0);
			struct ifreq ifr;
			memset(&ifr, 0, sizeof(ifr));
			strcpy(ifr.ifr_name, "lo");
			if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
				ifr.ifr_flags |= IFF_UP;
				if (ioctl(s, SIOCSIFFLAGS, &ifr) == 0)
					ok = 1;
			}
			close(s);
		}
		struct made o;
		if (!ok || make_all(&o) < 0) {
			ok = 0;
			if (write(sp[1], &ok, 1) < 0)
				_exit(1);
			_exit(0);
		}
		/* the fds, then the keys; the far ends stay with us until the
		 * parent says it is done */
		int fds[K_N + 8];
		unsigned n = 0;
		for (int i = 0; i < K_N; i++)
			fds[n++] = o.fd[i] >= 0 ? o.fd[i] : o.fd[K_FILE];
		union {
			char buf[CMSG_SPACE(sizeof(fds))];
			struct cmsghdr align;
		} u;
		struct iovec iov[2] = { { &ok, 1 }, { o.key, sizeof(o.key) } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf,
				     .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
		if (sendmsg(sp[1], &mh, 0) < 0)
			_exit(1);
		char c;
		if (read(sp[1], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(sp[1]);
	char ok = 0;
	union {
		char buf[CMSG_SPACE(sizeof(int) * K_N)];
		struct cmsghdr align;
	} u;
	memset(m, 0, sizeof(*m));
	struct iovec iov[2] = { { &ok, 1 }, { m->key, sizeof(m->key) } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t r = recvmsg(sp[0], &mh, MSG_WAITALL);
	if (r <= 0 || !ok) {
		close(sp[0]);
		waitpid(pid, NULL, 0);
		return -1;
	}
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	memcpy(m->fd, CMSG_DATA(cm), sizeof(int) * K_N);
	m->keep[m->n_keep++] = sp[0]; /* closing it lets the child go */
	m->keep[m->n_keep++] = -pid;
	return 0;
}

static int check_matrix(const struct made *m, bool own, const struct bk_ns *self, const char *how)
{
	int bad = 0;
	for (int k = 0; k < K_N; k++) {
		if (m->fd[k] < 0)
			continue;
		for (int variant = 0; variant < 3; variant++) {
			struct pool_key key = m->key[k];
			if (variant == 1)
				key.port++; /* another destination */
			if (variant == 2)
				key.family = key.family == AF_INET ? AF_INET6 : AF_INET;
			bool dead = false;
			const char *why = bk_check_conn(&sys, m->fd[k], &key, self, &dead);
			bool want = own && variant == 0 && (k == K_TCP4_EST || k == K_TCP6_EST);
			/* a dead one is dropped quietly whatever its namespace (it
			 * is never used); its destination, while it has one, must
			 * still be the key's */
			bool want_dead = (k == K_TCP4_CLOSE_WAIT && variant == 0) || k == K_TCP4_RESET;
			/* the reset's pending error (SO_ERROR) is read once: the
			 * first check of it says dead, later ones "not connected" */
			bool either = k == K_TCP4_RESET;
			if ((why == NULL) != want || (!either && want_dead != dead)) {
				fprintf(stderr, "  %s, %s namespace, key variant %d: %s (dead %d)\n",
					kind_name[k], own ? "our" : "another", variant, why ? why : "accepted",
					dead);
				bad++;
			}
		}
	}
	printf("  matrix (%s), %s namespace: %d wrong verdicts\n", how, own ? "our" : "another", bad);
	return bad == 0;
}

/* the broker's proof: a listening Unix socket of our namespace whose
 * listener is the one the link reached */
static int check_proof(const struct bk_ns *self, const struct made *other)
{
	char path[] = "/tmp/test_broker_check.XXXXXX";
	if (!mkdtemp(path))
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s", path);
	int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	CHECK(bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 4) == 0);
	int c = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	CHECK(connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	CHECK(getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0);
	int ok = 1;
	ok &= OK(bk_check_proof(&sys, &cred, l, self) == NULL);
	struct ucred other_pid = cred;
	other_pid.pid++;
	ok &= OK(bk_check_proof(&sys, &other_pid, l, self) != NULL);
	ok &= OK(bk_check_proof(&sys, &cred, c, self) != NULL); /* not listening */
	int sp[2];
	socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp);
	ok &= OK(bk_check_proof(&sys, &cred, sp[0], self) != NULL);
	ok &= OK(bk_check_proof(&sys, &cred, other->fd[K_TCP4_LISTEN] >= 0 ? other->fd[K_TCP4_LISTEN] : l,
				   self) != NULL || other->fd[K_TCP4_LISTEN] < 0);
	int pp[2];
	if (pipe(pp) == 0) {
		ok &= OK(bk_check_proof(&sys, &cred, pp[0], self) != NULL);
		close(pp[0]);
		close(pp[1]);
	}
	close(sp[0]);
	close(sp[1]);
	close(c);
	close(l);
	unlink(sa.sun_path);
	rmdir(path);
	return ok;
}

static int check_table_parser(void)
{
	static const char tcp[] =
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
		"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n"
		"   1: 0100007F:D2A4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 987654321 1 0000000000000000 20 4 30 10 -1\n";
	static const char unx[] = "Num       RefCount Protocol Flags    Type St Inode Path\n"
				  "0000000000000000: 00000002 00000000 00010000 0005 01 4242 /run/x.sock\n"
				  "0000000000000000: 00000003 00000000 00000000 0001 03 777\n";
	int ok = 1;
	size_t partial;
	for (size_t cut = 0; cut <= sizeof(tcp) - 1; cut++) {
		/* whatever the first read returned, the whole table finds it */
		int a = bk_table_has_inode(tcp, cut, AF_INET, 987654321, &partial);
		char buf[sizeof(tcp)];
		memcpy(buf, tcp + cut - partial, partial);
		memcpy(buf + partial, tcp + cut, sizeof(tcp) - 1 - cut);
		int b = bk_table_has_inode(buf, partial + sizeof(tcp) - 1 - cut, AF_INET, 987654321, &partial);
		ok &= OK(a || b);
	}
	ok &= OK(bk_table_has_inode(tcp, sizeof(tcp) - 1, AF_INET, 12345, &partial) == 1);
	/* the uid and timeout columns are 0: never taken for an inode */
	ok &= OK(bk_table_has_inode(tcp, sizeof(tcp) - 1, AF_INET, 0, &partial) == 0);
	ok &= OK(bk_table_has_inode(tcp, sizeof(tcp) - 1, AF_INET, 98765432, &partial) == 0);
	ok &= OK(bk_table_has_inode(unx, sizeof(unx) - 1, AF_UNIX, 4242, &partial) == 1);
	ok &= OK(bk_table_has_inode(unx, sizeof(unx) - 1, AF_UNIX, 777, &partial) == 1);
	ok &= OK(bk_table_has_inode(unx, sizeof(unx) - 1, AF_UNIX, 2, &partial) == 0);
	return ok;
}

static int check_stat_state(void)
{
	static const char plain[] = "1234 (keepalive-brok) S 1 1234 1234 0 -1 4194560 183 0";
	static const char odd[] = "77 (a) T (b) x) T 1 77";
	int ok = 1;
	ok &= OK(bk_stat_state(plain, sizeof(plain) - 1) == 'S');
	/* the last ')' ends the name, whatever it holds */
	ok &= OK(bk_stat_state(odd, sizeof(odd) - 1) == 'T');
	ok &= OK(bk_stat_state("12 (x", 5) == 0);
	ok &= OK(bk_stat_state("12 (x)", 6) == 0);
	ok &= OK(bk_stat_state("12 (x) ", 7) == 0);
	ok &= OK(bk_stat_state("12 (x)T", 7) == 0);
	/* this process runs; pid 0 (another pid namespace) is never stopped */
	ok &= OK(!bk_pid_stopped(&sys, getpid()));
	ok &= OK(!bk_pid_stopped(&sys, 0));
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	kill(child, SIGSTOP);
	int st;
	ok &= OK(waitpid(child, &st, WUNTRACED) == child && WIFSTOPPED(st));
	ok &= OK(bk_pid_stopped(&sys, child));
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	return ok;
}

int main(void)
{
	struct made own, other;
	memset(&other, 0, sizeof(other));
	for (int i = 0; i < K_N; i++)
		other.fd[i] = -1;
	CHECK(make_all(&own) == 0);
	bool have_other = from_other_ns(&other) == 0;
	if (!have_other) {
		printf("  SKIP the other namespace's rows: the kernel refused unshare(CLONE_NEWUSER|CLONE_NEWNET) (%s)\n",
		       strerror(errno));
		for (int i = 0; i < K_N; i++)
			other.fd[i] = -1;
	}
	int probe = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct bk_ns cookie, proc;
	CHECK(bk_ns_self(&sys, probe, &cookie) == 0 && cookie.known);
	close(probe);
	if (!cookie.cookie)
		printf("  (no SO_NETNS_COOKIE on this kernel: both passes use /proc)\n");
	proc = (struct bk_ns){ .cookie = 0, .known = true };
	CHECK(check_matrix(&own, true, &cookie, "SO_NETNS_COOKIE"));
	CHECK(check_matrix(&own, true, &proc, "/proc/self/net"));
	if (have_other) {
		CHECK(check_matrix(&other, false, &cookie, "SO_NETNS_COOKIE"));
		CHECK(check_matrix(&other, false, &proc, "/proc/self/net"));
	}
	/* an unknown namespace of our own refuses everything */
	struct bk_ns unknown = { 0 };
	CHECK(bk_check_conn(&sys, own.fd[K_TCP4_EST], &own.key[K_TCP4_EST], &unknown, NULL) != NULL);
	/* NULL: the process's own socket, no namespace asked */
	CHECK(bk_check_conn(&sys, own.fd[K_TCP4_EST], &own.key[K_TCP4_EST], NULL, NULL) == NULL);
	CHECK(check_proof(&cookie, &other));
	CHECK(check_proof(&proc, &other));
	CHECK(check_table_parser());
	CHECK(check_stat_state());
	for (unsigned i = 0; i < other.n_keep; i++)
		if (other.keep[i] >= 0)
			close(other.keep[i]);
		else
			waitpid(-other.keep[i], NULL, 0);
	printf("test_broker_check: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
