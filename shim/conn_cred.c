/*
 * conn_cred.c - the process changed hands: its credentials or namespace
 * changed (setuid, setns, unshare...), or it was divided (a clone of a
 * task of its own, io_uring unseen).  Nothing made before changes hands
 * again (docs/owner.md).  Moved out of conn.c, whose size it kept over the
 * limit; called by the hooks only.
 */
#include <errno.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>

#include "broker_client.h"
#include "config.h"
#include "conn_internal.h"
#include "tls.h"

/* kp_conn_cred_change without a lock: nothing made before changes hands
 * again, in this process (the pool is emptied lazily: its sockets fail
 * pooled_one_owner). */
static void cred_change_raw(void)
{
	__atomic_store_n(&divided, true, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cred_epoch, 1, __ATOMIC_ACQ_REL);
}

void kp_conn_cred_change(bool one_thread)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return cred_change_raw();
	int saved = errno;
	if (one_thread && !__libc_single_threaded && !__atomic_load_n(&divided, __ATOMIC_RELAXED)) {
		__atomic_store_n(&divided, true, __ATOMIC_RELAXED);
		kp_debug("a thread changed its own identity or namespace: no more pooling");
	}
	__atomic_add_fetch(&cred_epoch, 1, __ATOMIC_ACQ_REL);
	/* the broker is per user, checked when we dial it: the simple sound
	 * answer is not to share any more from a process that changed hands */
	kp_broker_disable();
	kp_tls_forget_sessions();
	unsigned n = pool_drain();
	/* sockets made and not connected yet: their socket() was the old
	 * identity's (its uid stays on the socket) */
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++)
		if (!kp_fd_conn(fd) && (kp_fl(fd) & KP_FD_TCP))
			kp_fl_or(fd, KP_FD_SHARED);
	if (n)
		kp_debug("credentials change: %u pooled connections closed", n);
	errno = saved;
}

void kp_conn_divide(const char *why)
{
	if (!__atomic_exchange_n(&divided, true, __ATOMIC_RELAXED))
		kp_debug("%s: no more pooling", why);
	kp_conn_cred_change(false);
}
