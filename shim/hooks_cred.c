/*
 * hooks_cred.c - exported wrappers for the calls that change who the
 * process is or where it is: the setuid and setgid families, setgroups,
 * setfsuid and setfsgid, capset; unshare and setns (another network
 * namespace: the same address is another server there, another user
 * namespace: other credentials).  A connection made under one identity is
 * never handed to another (docs/owner.md): before the call and again after it
 * succeeds, conn.c empties the pool and marks everything made so far as
 * the old identity's.  Twice: a thread that parks between the first
 * emptying and the change is caught by the second.  None of these is a
 * hot path.
 */
#include <grp.h>
#include <sched.h>
#include <sys/fsuid.h>
#include <unistd.h>

#include "conn.h"
#include "fdtable.h"
#include "real.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* glibc has the function, no header declares it (libcap's does) */
int capset(void *hdr, const void *data);

/* glibc's set*id calls change every thread (its setxid broadcast); the
 * rest change the calling thread only (one_thread: conn.h) */
#define CRED_CALL_(one_thread, call)                       \
	({                                                 \
		if (kp_fdtab_len)                          \
			kp_conn_cred_change(one_thread);   \
		int r_ = (call);                           \
		if (kp_fdtab_len && r_ >= 0)               \
			kp_conn_cred_change(one_thread);   \
		r_;                                        \
	})
#define CRED_CALL(call) CRED_CALL_(false, call)
#define THREAD_CRED_CALL(call) CRED_CALL_(true, call)

KP_EXPORT int setuid(uid_t uid)
{
	return CRED_CALL(KP_REAL(setuid)(uid));
}

KP_EXPORT int seteuid(uid_t uid)
{
	return CRED_CALL(KP_REAL(seteuid)(uid));
}

KP_EXPORT int setreuid(uid_t ruid, uid_t euid)
{
	return CRED_CALL(KP_REAL(setreuid)(ruid, euid));
}

KP_EXPORT int setresuid(uid_t ruid, uid_t euid, uid_t suid)
{
	return CRED_CALL(KP_REAL(setresuid)(ruid, euid, suid));
}

KP_EXPORT int setgid(gid_t gid)
{
	return CRED_CALL(KP_REAL(setgid)(gid));
}

KP_EXPORT int setegid(gid_t gid)
{
	return CRED_CALL(KP_REAL(setegid)(gid));
}

KP_EXPORT int setregid(gid_t rgid, gid_t egid)
{
	return CRED_CALL(KP_REAL(setregid)(rgid, egid));
}

KP_EXPORT int setresgid(gid_t rgid, gid_t egid, gid_t sgid)
{
	return CRED_CALL(KP_REAL(setresgid)(rgid, egid, sgid));
}

KP_EXPORT int setgroups(size_t n, const gid_t *groups)
{
	return CRED_CALL(KP_REAL(setgroups)(n, groups));
}

/* these return the previous id, never an error: a change either way */
KP_EXPORT int setfsuid(uid_t uid)
{
	return THREAD_CRED_CALL(KP_REAL(setfsuid)(uid));
}

KP_EXPORT int setfsgid(gid_t gid)
{
	return THREAD_CRED_CALL(KP_REAL(setfsgid)(gid));
}

KP_EXPORT int capset(void *hdr, const void *data)
{
	return THREAD_CRED_CALL(KP_REAL(capset)(hdr, data));
}

/* glibc's initgroups calls setgroups inside libc, past our wrapper */
KP_EXPORT int initgroups(const char *user, gid_t group)
{
	return CRED_CALL(KP_REAL(initgroups)(user, group));
}

KP_EXPORT int unshare(int flags)
{
	return THREAD_CRED_CALL(KP_REAL(unshare)(flags));
}

KP_EXPORT int setns(int fd, int nstype)
{
	return THREAD_CRED_CALL(KP_REAL(setns)(fd, nstype));
}
