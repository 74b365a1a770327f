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
 * wait, exec or move onto stdio sends our FIN (docs/hold.md "A child
 * that reads an inherited socket").  Every other fd costs nothing more.
 */
#include <errno.h>
#include <sys/socket.h>

#include "config.h"
#include "conn_internal.h"
#include "real.h"

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

/* A forked child moves its copy onto its stdin, stdout or stderr: a
 * reader past us (sed, cat) is certain, and only the server's close can
 * end its read; so our FIN goes, as for the parent's own move. */
void kp_fin_owed_onto(int oldfd, int newfd)
{
	if (newfd <= 2)
		kp_fin_owed_now(oldfd, "moved onto stdio");
}

/* In the child, before its table is forgotten: c (the parent's object
 * under fd) owes its answer's end.  Marked KP_FD_FIN_OWED, kept for
 * kp_fin_owed_child_track.  A grandchild's copy keeps the mark its
 * parent had. */
static struct {
	int fd;
	const struct kp_conn *parent;
	struct kp_conn *own;
} kept[CHILD_MAX];
static unsigned n_kept;

void kp_fin_owed_child_mark(int fd, const struct kp_conn *c)
{
	if (!c || c == KP_POOLED)
		return;
	kp_fl_or(fd, KP_FD_SHARED);
	if ((c->fin_at_end && !c->fin_for_server) || (kp_fl(fd) & KP_FD_FIN_OWED)) {
		kp_fl_or(fd, KP_FD_FIN_OWED);
		if (n_kept < CHILD_MAX)
			kept[n_kept++] = (typeof(kept[0])){ fd, c, NULL };
	}
}

/* In the child, after its table was forgotten and its free list dropped:
 * each marked fd gets an object of the child's (dups of one socket share
 * one), passthrough, never pooled. */
void kp_fin_owed_child_track(void)
{
	for (unsigned i = 0; i < n_kept; i++) {
		struct kp_conn *own = NULL;
		for (unsigned j = 0; j < i && !own; j++)
			if (kept[j].parent == kept[i].parent)
				own = kept[j].own;
		if (own) {
			own->refs++;
		} else if ((own = conn_new())) {
			kp_lock(&own->lock);
			own->state = KP_PASSTHROUGH;
			own->handed_off = true;
			own->shared = true;
			own->nonblock = kept[i].parent->nonblock;
			unpool(own, "a forked child's copy of a socket whose answer is owed");
			kp_unlock(&own->lock);
		} else {
			continue;
		}
		kept[i].own = own;
		kp_fd_swap(kept[i].fd, own);
	}
	n_kept = 0;
}
