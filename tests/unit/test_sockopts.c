/*
 * test_sockopts.c - shim/sockopts.c on real sockets (unconnected TCP
 * sockets take every option it carries): its verdicts, what a transfer
 * sets on the pooled socket and what it leaves pending, the lazy reset
 * of a previous owner's option, a program's claim of a pending one, and
 * the late record of an option we do not carry.
 * Linked with real.c only: sockopts.c sits below the connection core.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "real.h"
#include "sockopts.h"

#include "check.h"

static int tcp(void)
{
	return socket(AF_INET, SOCK_STREAM, 0);
}

static int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	return getsockopt(fd, level, name, &v, &l) == 0 ? v : -1;
}

static void test_verdicts(void)
{
	struct kp_sockopts s = { 0 };
	int one = 1, big = 1 << 20;
	CHECK(kp_sockopts_record(&s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(s.n_opts == 1);
	/* set again: the same entry */
	CHECK(kp_sockopts_record(&s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(s.n_opts == 1);
	/* only meaningful before bind/connect: kept, not recorded */
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(s.n_opts == 1);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_MARK, &one, sizeof(one)) == KP_OPT_ROUTES);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3) == KP_OPT_ROUTES);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)) == KP_OPT_UNCARRIED);
	CHECK(kp_sockopts_record(&s, 12345, 1, &one, sizeof(one)) == KP_OPT_UNCARRIED);
	char huge[64] = { 0 };
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_KEEPALIVE, huge, sizeof(huge)) == KP_OPT_UNCARRIED);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_KEEPALIVE, NULL, 4) == KP_OPT_UNCARRIED);
	CHECK(s.n_opts == 1);
	/* a full record: the next new option cannot be carried */
	const int names[] = { TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_USER_TIMEOUT };
	for (unsigned i = 0; i < 4; i++)
		CHECK(kp_sockopts_record(&s, IPPROTO_TCP, names[i], &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_PRIORITY, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(s.n_opts == KP_MAX_OPTS);
	int tos = 0x10;
	CHECK(kp_sockopts_record(&s, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) == KP_OPT_UNCARRIED);
}

static void test_transfer(void)
{
	int fresh = tcp(), pooled = tcp(), one = 1, idle = 37;
	/* the previous owner set TCP_NODELAY and SO_KEEPALIVE on the pooled
	 * socket; the program set SO_KEEPALIVE and TCP_KEEPIDLE on its own */
	struct kp_sockopts prev = { 0 }, s = { 0 };
	CHECK(kp_sockopts_record(&prev, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_record(&prev, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == KP_OPT_KEPT);
	setsockopt(pooled, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(pooled, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	CHECK(kp_sockopts_record(&s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_record(&s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_transfer(&s, fresh, pooled, prev.opts, prev.n_opts) == 0);
	CHECK(get_int(pooled, IPPROTO_TCP, TCP_KEEPIDLE) == 37);
	CHECK(get_int(pooled, SOL_SOCKET, SO_KEEPALIVE) == 1);
	/* the previous owner's TCP_NODELAY waits, reset lazily */
	CHECK(s.n_pending == 1);
	CHECK(get_int(pooled, IPPROTO_TCP, TCP_NODELAY) == 1);
	CHECK(kp_sockopts_flush(&s, pooled));
	CHECK(s.n_pending == 0);
	CHECK(get_int(pooled, IPPROTO_TCP, TCP_NODELAY) == 0);

	/* again, and this time the program claims the pending option with
	 * the value the socket holds: no syscall needed, and it is its own */
	setsockopt(pooled, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct kp_sockopts t = { 0 };
	CHECK(kp_sockopts_transfer(&t, fresh, pooled, prev.opts, prev.n_opts) == 0);
	CHECK(t.n_pending == 2); /* TCP_NODELAY and SO_KEEPALIVE */
	enum kp_opt_verdict v;
	CHECK(kp_sockopts_claim(&t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one), &v));
	CHECK(v == KP_OPT_KEPT && t.n_pending == 1 && t.n_opts == 1);
	/* a different value: not already there, and no longer pending */
	int zero = 0;
	CHECK(!kp_sockopts_claim(&t, SOL_SOCKET, SO_KEEPALIVE, &zero, sizeof(zero), &v));
	CHECK(v == KP_OPT_KEPT && t.n_pending == 0 && t.n_opts == 1);
	/* nothing pending: never already there */
	CHECK(!kp_sockopts_claim(&t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one), &v));
	CHECK(kp_sockopts_flush(&t, pooled));
	CHECK(get_int(pooled, IPPROTO_TCP, TCP_NODELAY) == 1);

	/* a socket that refuses: the transfer says so */
	close(pooled);
	struct kp_sockopts u = { 0 };
	CHECK(kp_sockopts_record(&u, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) == KP_OPT_KEPT);
	CHECK(kp_sockopts_transfer(&u, fresh, pooled, NULL, 0) < 0);
	close(fresh);
}

/* an option we do not carry, set on a handed-out connection: recorded
 * late (for a fresh connection under the fd), the same entry when set
 * again, refused past the value's room or the record's */
static void test_late(void)
{
	struct kp_sockopts s = { 0 };
	int one = 1, buf = 6000;
	CHECK(kp_sockopts_late_fits(&s, SOL_SOCKET, SO_SNDBUF, sizeof(buf)));
	CHECK(kp_sockopts_record_late(&s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf)));
	CHECK(s.n_opts == 1 && s.opts[0].late);
	CHECK(kp_sockopts_record_late(&s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf)));
	CHECK(s.n_opts == 1);
	CHECK(kp_sockopts_record_late(&s, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3));
	CHECK(s.n_opts == 2 && s.opts[1].late);
	char huge[64] = { 0 };
	CHECK(!kp_sockopts_late_fits(&s, IPPROTO_TCP, TCP_CONGESTION, sizeof(huge)));
	CHECK(!kp_sockopts_record_late(&s, IPPROTO_TCP, TCP_CONGESTION, huge, sizeof(huge)));
	CHECK(!kp_sockopts_late_fits(&s, 12345, 1, sizeof(one)));
	/* a carried one among them stays carried */
	CHECK(kp_sockopts_record(&s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == KP_OPT_KEPT);
	CHECK(s.n_opts == 3 && !s.opts[2].late);
	const int names[] = { TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_USER_TIMEOUT, TCP_CORK };
	for (unsigned i = 0; i < 5; i++)
		CHECK(kp_sockopts_record_late(&s, IPPROTO_TCP, names[i], &one, sizeof(one)));
	CHECK(s.n_opts == KP_MAX_OPTS);
	CHECK(!kp_sockopts_late_fits(&s, SOL_SOCKET, SO_RCVBUF, sizeof(one)));
	CHECK(kp_sockopts_late_fits(&s, SOL_SOCKET, SO_SNDBUF, sizeof(one))); /* its own entry */
	CHECK(!kp_sockopts_record_late(&s, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)));
}

int main(void)
{
#ifndef KP_REAL_LAZY
	kp_real_bind();
#endif
	test_verdicts();
	test_transfer();
	test_late();
	printf("test_sockopts: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
