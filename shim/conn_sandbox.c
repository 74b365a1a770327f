/*
 * conn_sandbox.c - the process installs a seccomp filter or enters strict
 * mode (prctl(PR_SET_SECCOMP), syscall(SYS_seccomp): hooks_sandbox.c).
 * From then on any call of ours the program never makes may be refused,
 * or kill the process; strict mode allows read, write, _exit and
 * sigreturn only.  So the library steps aside for good: before the call,
 * while it may still make its own calls, it settles what it owes; once
 * the call has succeeded, every wrapper makes only the kernel's call, for
 * every fd (docs/owner.md "A sandbox").
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker_client.h"
#include "config.h"
#include "conn_internal.h"
#include "real.h"
#include "tls.h"
#include "watch.h"

/* A rewritten head the socket took in part (docs/hold.md "A head the
 * socket took in part"), torn before the bytes the rewrite changed: the
 * server has the program's own bytes, and the rest the program offers
 * again, written past us once the filter is in, carries its own
 * Connection: close; the server closes after answering, as alone.  The
 * request is the program's again: no FIN of ours is owed for it (sent at
 * the install, it failed that write with EPIPE and SIGPIPE).  Torn at or
 * after the change, the server has our keep-alive: docs/owner.md "A
 * sandbox".  Caller holds c->lock. */
static void torn_before_change(struct kp_conn *c, int fd)
{
	if (c->state != KP_ACTIVE || c->tls || c->req_mode != KP_REQ_HEAD_PART || !c->n_reqs ||
	    c->part_k > c->part_map.p || !c->reqs[c->n_reqs - 1].rewritten)
		return;
	c->reqs[c->n_reqs - 1].rewritten = false;
	kp_debug("fd %d: a head torn before its rewrite: the program's own from here on", fd);
}

/* An HTTPS connection whose server was told keep-alive where the program
 * asked it to close: a request we rewrote is out, and whole (a FIN before
 * a record's end would cut it).  Caller holds c->lock. */
static bool tls_close_owed(const struct kp_conn *c)
{
	bool owed = false;
	if (c->req_mode != KP_REQ_HEAD || c->held_len)
		return false;
	for (unsigned i = 0; c->state == KP_ACTIVE && i < c->n_reqs; i++)
		owed |= c->reqs[i].rewritten;
	return owed;
}

/* One connection, before the call: it leaves our hands as to a reader
 * past us (the server gets our FIN once its request is whole, held head
 * bytes go out: conn.c "hand-off"); an EOF we owe is made the kernel's
 * own (SHUT_RD: its reads answer 0 at once, and poll, select and epoll
 * say readable), and over TLS the engine's, so nothing needs us
 * afterwards. */
static void settle(int fd, const char *why)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED)
		return;
	if (conn_lock(c, fd)) {
		torn_before_change(c, fd);
		kp_unlock(&c->lock);
	}
	kp_conn_handoff_fd(fd, KP_HANDOFF_READER, why);
	if (!conn_lock(c, fd))
		return;
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE)) {
		KP_REAL(shutdown)(fd, SHUT_RD);
		/* TLS: the EOF the SSL_* wrappers answered through our state
		 * is made the engine's own (no FIN: the program's SSL_shutdown
		 * writes its close_notify, as alone after the server's) */
		if (c->tls)
			kp_tls_sandbox_eof(c->tls);
	}
	else if (c->tls && tls_close_owed(c)) {
		/* a rewritten request's answer still to come: our
		 * close_notify and FIN, so that the server closes after it */
		kp_debug("fd %d: HTTPS, the server's close owed: our close_notify and FIN", fd);
		kp_tls_sandbox_close(c->tls);
		KP_REAL(shutdown)(fd, SHUT_WR);
	}
	kp_unlock(&c->lock);
}

/* The call is this process's own: not a vfork child's, whose memory
 * (our table, the pool) is its parent's and whose filter is not.  Found
 * before the call: after it even getpid may be refused. */
static __thread bool call_ours;

void kp_conn_sandbox_before(void)
{
	int saved = errno;
	call_ours = kp_fdtab_len && getpid() == kp_conn_pid;
	/* a signal handler inside our locks (kp_lock.h): nothing settled,
	 * the library still steps aside */
	if (!call_ours || kp_reentered()) {
		errno = saved;
		return;
	}
	/* first the whole process stops making what settle() undoes: other
	 * threads go on while we settle, and a request they rewrote, a
	 * connection they were handed or parked after its fd was settled
	 * would owe an EOF nobody gives once we step aside (the review of
	 * invariant 3 at 65e1cbd: 30 s waits).  Divided, nothing is
	 * rewritten, handed out or parked from now on (docs/owner.md) */
	kp_conn_divide("seccomp");
	/* nothing is handed out or shared any more */
	kp_broker_disable();
	kp_tls_forget_sessions();
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++)
		settle(fd, "seccomp");
	/* then the hidden fds: idle sockets (a reused connection settled
	 * before its first request put its pooled socket back), twins (one
	 * left open keeps the socket up after the program's close) */
	unsigned n = hidden_drain_all();
	/* our copies of the program's epoll sets go; its own sets hold its
	 * sockets, whose readiness is the kernel's from now on */
	kp_watch_drop_all();
	/* the last word: after the call even the log's getpid may be refused */
	kp_debug("seccomp: %u pooled sockets closed, connections settled; stepping aside once installed", n);
	errno = saved;
}

void kp_conn_sandbox_after(bool installed)
{
	/* the table's length is what every wrapper looks at first: 0 sends
	 * each to the kernel, as before our constructor ran.  No log here */
	if (installed && call_ours && kp_fdtab_len)
		kp_fdtab_step_aside();
}

/* The process set up an io_uring (docs/owner.md "io_uring"): its reads
 * and writes may go past us from now on, so every followed connection is
 * settled as for a sandbox (an owed EOF the kernel's own, a rewritten
 * request's server told to close after its answer); the library goes on
 * for new connections, unpooled (kp_conn_divide). */
void kp_conn_settle_all(const char *why)
{
	if (kp_reentered() || !kp_fdtab_len)
		return;
	int saved = errno;
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++)
		settle(fd, why);
	errno = saved;
}
