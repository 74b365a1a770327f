/*
 * conn_child.c - a forked child's copy of a socket whose answer the
 * parent's framing still owes (KP_FD_FIN_OWED: handed off by inheritance,
 * our FIN waiting for the answer's end, fin_at_end in conn.c).  The
 * child's reads are the kernel's, never framed: a child that reads or
 * waits on its copy would wait for the server's idle close, since the
 * parent, who frames, may never read.  So the child's copy stays in the
 * table under a connection object of the child's own, passthrough (the
 * parent's objects are never touched: docs/hold.md), only so that the
 * child's calls on it leave the untracked fast path; the first read,
 * wait or move onto stdio sends our FIN (docs/hold.md "A child that
 * reads an inherited socket").  Every other fd costs nothing more.  An
 * exec'd image learns its copies from one environment entry, taken out
 * of its environment before the program runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config.h"
#include "conn_internal.h"
#include "real.h"
#include "replay.h"

/* The child's objects: at most this many sockets owed (more are left
 * untracked, as before: a move onto stdio still sends our FIN) */
#define CHILD_MAX 64

/* Our FIN on fd, a child's copy whose answer is owed, once: the request
 * is whole (fin_at_end is set only then).  The cost is the FIN a proxy
 * that cancels on a client's FIN may cancel on: the answer's end is not
 * framed in this process. */
void kp_fin_owed_now(int fd, const char *why)
{
	if (!kp_fd_valid(fd) || !(kp_fl(fd) & KP_FD_FIN_OWED))
		return;
	int saved = errno;
	kp_fl_clear(fd, KP_FD_FIN_OWED);
	if (KP_REAL(shutdown)(fd, SHUT_WR) == 0)
		kp_debug("fd %d: %s in a forked child, the answer owed: our FIN", fd, why);
	errno = saved;
}

/* A forked child copies its copy (dup family) to newfd: onto its stdin,
 * stdout or stderr, a reader past us (sed, cat) is certain, and only the
 * server's close can end its read, so our FIN goes, as for the parent's
 * own move; elsewhere the new number is marked as the old one. */
void kp_fin_owed_onto(int oldfd, int newfd)
{
	if (!kp_fd_valid(oldfd) || !(kp_fl(oldfd) & KP_FD_FIN_OWED))
		return;
	/* (not onto stdout or stderr for a copy written on after the
	 * parent's whole close request: a writer, bash's `(printf ... >&3)`
	 * or `cmd >&3`, whose writes are taken while the server alone would
	 * still be open: kp_fin_owed_child_write) */
	const struct kp_conn *c = kp_fd_conn(oldfd);
	bool writer = newfd >= 1 && c && c != KP_POOLED && __atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE);
	if (newfd <= 2 && !writer)
		kp_fin_owed_now(oldfd, "moved onto stdio");
	else if (kp_fd_valid(newfd))
		kp_fl_or(newfd, KP_FD_FIN_OWED);
}

/* A child's copy written on after its parent's whole close request
 * (child_object's after_close), still marked: alone the server answers
 * that request and closes without reading on, and until its close the
 * program's writes are accepted, each one (bash's printf writes a request
 * in five).  So while the server's FIN has not come (TCP's state: ours
 * may have) the write is taken and the mark kept; once it has, our FIN
 * (if not out yet) and the mark cleared: this write is taken, the next
 * meets the kernel's EPIPE, as after a server's close and reset alone. */
void kp_fin_owed_child_write(int fd)
{
	struct kp_tcp_view v;
	int saved = errno;
	bool open = kp_tcp_view(fd, &v) == 0 &&
		    (v.state == TCP_ESTABLISHED || v.state == TCP_FIN_WAIT1 || v.state == TCP_FIN_WAIT2);
	errno = saved;
	if (!open)
		kp_fin_owed_now(fd, "written on after the close request, the server's close come");
}

/* An SSL_write of the program's on fd, not ours to frame: in a forked
 * child, its copy of the SSL after its parent's whole close request, which
 * the library rewrote where it learnt the server ends with close_notify
 * (kp_fin_owed_child_mark).  Its records would be valid, and the server,
 * told keep-alive, would execute them: taken as a plain copy's write is
 * (kp_fin_owed_child_write), the whole of it said written.  True when
 * taken; once the server's close has come, this one is taken and the
 * next goes to the SSL (the kernel's EPIPE after our FIN, as after a
 * server's close and reset alone). */
bool kp_fin_owed_tls_write(int fd)
{
	if (!kp_fd_valid(fd) || !(kp_fl(fd) & KP_FD_FIN_OWED))
		return false;
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED || !__atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE))
		return false;
	kp_fin_owed_child_write(fd);
	if (!(kp_fl(fd) & KP_FD_FIN_OWED))
		__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
	kp_debug("fd %d: an SSL_write after the parent's close request, in a forked child: taken, not sent", fd);
	return true;
}

/* In the child, before its table is forgotten: c (the parent's object
 * under fd) owes its answer's end.  Marked KP_FD_FIN_OWED, kept for
 * kp_fin_owed_child_track.  A grandchild's copy keeps the mark its
 * parent had. */
static struct {
	int fd;
	const struct kp_conn *parent;
	struct kp_conn *own;
	bool whole; /* the parent's request was written whole at the fork */
} kept[CHILD_MAX];
static unsigned n_kept;

void kp_fin_owed_child_mark(int fd, const struct kp_conn *c)
{
	if (!c || c == KP_POOLED)
		return;
	kp_fl_or(fd, KP_FD_SHARED);
	/* (TLS: no FIN at the answer's end is owed, the server's close
	 * learnt; a close request whole and rewritten is marked for its
	 * writes, kp_fin_owed_tls_write) */
	bool tls_after = c->tls && c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD && !c->held_len &&
			 after_close(c);
	if ((c->fin_at_end && !c->fin_for_server) || tls_after || (kp_fl(fd) & KP_FD_FIN_OWED)) {
		kp_fl_or(fd, KP_FD_FIN_OWED);
		/* (a grandchild's: its parent's own object, after_close) */
		bool whole = (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD && !c->held_len) ||
			     (c->handed_off && c->state == KP_PASSTHROUGH && c->fin_for_server);
		if (n_kept < CHILD_MAX)
			kept[n_kept++] = (typeof(kept[0])){ fd, c, NULL, whole };
	} else if (!c->tls && __atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE)) {
		/* our FIN already out in place of the server's close (the
		 * answer read to its end before the fork, the hand-off's FIN),
		 * nothing written since: alone the child's first write into the
		 * socket the server closed is accepted, the next fails, so its
		 * copy takes the first (the write path's rule after our FIN);
		 * untracked, it met EPIPE at once (shutdown's) */
		if (n_kept < CHILD_MAX)
			kept[n_kept++] = (typeof(kept[0])){ fd, c, NULL, true };
	}
}

/* An object of this process's own for a copy whose answer is owed:
 * passthrough, never pooled; NULL without memory (the fd then stays
 * untracked, as before).  after_close: the parent's request asking to
 * close was whole (rewritten: the server was told keep-alive), so every
 * byte this process writes on the copy comes after it, and alone the
 * server never executes it.  Its writes are taken, never sent, while
 * the server's close has not come; the first after it is taken with our
 * FIN, later ones meet the kernel's EPIPE, as after the server's close
 * and reset alone (kp_fin_owed_child_write; fin_for_server: the write
 * path's rule after our FIN, send.c send_outside_head).  Not so with the parent's body still being written:
 * the child may be what writes it (a shell's `cat file >&3`). */
static struct kp_conn *child_object(bool nonblock, bool after_close)
{
	struct kp_conn *own = conn_new();
	if (!own)
		return NULL;
	kp_lock(&own->lock);
	own->state = KP_PASSTHROUGH;
	own->handed_off = true;
	own->shared = true;
	own->nonblock = nonblock;
	own->fin_for_server = after_close;
	unpool(own, "a forked child's copy of a socket whose answer is owed");
	kp_unlock(&own->lock);
	return own;
}

/* In the child, after its table was forgotten and its free list dropped:
 * each marked fd gets an object of the child's (dups of one socket share
 * one). */
void kp_fin_owed_child_track(void)
{
	for (unsigned i = 0; i < n_kept; i++) {
		struct kp_conn *own = NULL;
		for (unsigned j = 0; j < i && !own; j++)
			if (kept[j].parent == kept[i].parent)
				own = kept[j].own;
		if (own)
			own->refs++;
		else if (!(own = child_object(kept[i].parent->nonblock, kept[i].whole)))
			continue;
		kept[i].own = own;
		kp_fd_swap(kept[i].fd, own);
	}
	n_kept = 0;
}

/* The next image's copy of the library never saw the parent's
 * connection: the copies it keeps (no FD_CLOEXEC) are named to it in one
 * environment entry, KP_FIN_OWED_ENV=3,7;whole=3, that its constructor
 * takes out of the environment before the program runs
 * (kp_fin_owed_from_env).  whole= names those of them written on after
 * the parent's whole close request (child_object's after_close, not yet
 * written on here): after the list, so that an image whose parser stops
 * at the first byte that is neither a digit nor a comma reads the list
 * alone, as before.  False when there is none to name. */
#define KP_FIN_OWED_ENV "KEEPALIVE_FIN_OWED_FDS"
#define KP_FIN_OWED_WHOLE ";whole="

static bool env_named(int fd, bool whole)
{
	if (!(kp_fl(fd) & KP_FD_FIN_OWED))
		return false;
	if (whole) {
		const struct kp_conn *c = kp_fd_conn(fd);
		if (!c || c == KP_POOLED || !__atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE))
			return false;
	}
	int fl = KP_REAL(fcntl)(fd, F_GETFD);
	return fl >= 0 && !(fl & FD_CLOEXEC);
}

bool kp_fin_owed_env(char *buf, size_t cap)
{
	int high = kp_fd_high(), len = snprintf(buf, cap, "%s=", KP_FIN_OWED_ENV), start = len;
	for (int fd = 0; fd <= high && len > 0 && (size_t)len + 12 < cap; fd++)
		if (env_named(fd, false))
			len += snprintf(buf + len, cap - (size_t)len, "%s%d", len > start ? "," : "", fd);
	if (len <= start)
		return false;
	/* (a list cut short names fewer whole: those written on pass, as before) */
	int mid = len;
	if ((size_t)len + sizeof(KP_FIN_OWED_WHOLE) + 12 < cap)
		len += snprintf(buf + len, cap - (size_t)len, "%s", KP_FIN_OWED_WHOLE);
	int listed = len;
	for (int fd = 0; fd <= high && len > 0 && (size_t)len + 12 < cap && mid < listed; fd++)
		if (env_named(fd, true))
			len += snprintf(buf + len, cap - (size_t)len, "%s%d", len > listed ? "," : "", fd);
	if (len == listed)
		buf[mid] = 0; /* none whole: the entry as before */
	return true;
}

/* whether fd is named in list (digits and commas, up to its end or ';') */
static bool env_lists(const char *list, long fd)
{
	for (const char *p = list; p && *p && *p != ';';) {
		char *end;
		long n = strtol(p, &end, 10);
		if (end == p)
			break;
		if (n == fd)
			return true;
		p = *end == ',' ? end + 1 : end;
	}
	return false;
}

/* In a new image, from the constructor: the copies the image before it
 * named (kp_fin_owed_env), each a stream socket still, get the mark and
 * an object.  The entry leaves the environment: the program never sees
 * it in its environ (/proc/PID/environ still shows it). */
void kp_fin_owed_from_env(void)
{
	const char *v = getenv(KP_FIN_OWED_ENV);
	if (!v)
		return;
	const char *whole = strstr(v, KP_FIN_OWED_WHOLE);
	if (whole)
		whole += sizeof(KP_FIN_OWED_WHOLE) - 1;
	for (const char *p = v; *p;) {
		char *end;
		long fd = strtol(p, &end, 10);
		int type = 0;
		socklen_t tl = sizeof(type);
		if (end == p)
			break;
		if (fd >= 0 && kp_fd_valid((int)fd) && !kp_fd_conn((int)fd) &&
		    KP_REAL(getsockopt)((int)fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
			int fl = KP_REAL(fcntl)((int)fd, F_GETFL);
			/* (an entry without whole=, from an image before it was
			 * carried: the writes pass, as they did) */
			struct kp_conn *own = child_object(fl >= 0 && (fl & O_NONBLOCK), env_lists(whole, fd));
			if (own) {
				kp_fl_or((int)fd, KP_FD_FIN_OWED | KP_FD_SHARED);
				kp_fd_note_high((int)fd);
				kp_fd_swap((int)fd, own);
				kp_debug("fd %ld: a copy whose answer is owed, from the image before", fd);
			}
		}
		p = *end == ',' ? end + 1 : end;
	}
	unsetenv(KP_FIN_OWED_ENV);
}
