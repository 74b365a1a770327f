/*
 * hooks_sandbox.c - the exported prctl(), and what syscall() does with
 * SYS_seccomp and SYS_prctl: a seccomp filter or strict mode installed by
 * the process makes the library step aside for good (conn_sandbox.c,
 * docs/owner.md "A sandbox").  glibc exports no seccomp(): libseccomp
 * and programs reach it through syscall() or prctl().  Not a hot path.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "conn.h"
#include "fdtable.h"
#include "hooks_syscall.h"
#include "real.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* Does this seccomp(op, flags) call install a filter or strict mode when
 * it returns r?  A filter with SECCOMP_FILTER_FLAG_NEW_LISTENER returns
 * a listener fd; with TSYNC alone a positive answer is the thread that
 * could not be synchronised (nothing installed). */
static bool seccomp_installed(unsigned long op, unsigned long flags, long r)
{
	if (op == SECCOMP_SET_MODE_STRICT)
		return r == 0;
	if (op != SECCOMP_SET_MODE_FILTER || r < 0)
		return false;
	if (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER)
		return true;
	return r == 0;
}

long kp_sandbox_syscall(long number, const long a[6])
{
	bool installs = number == SYS_seccomp ? a[0] == SECCOMP_SET_MODE_STRICT || a[0] == SECCOMP_SET_MODE_FILTER
					      : a[0] == PR_SET_SECCOMP;
	if (!installs || !kp_fdtab_len)
		return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	kp_conn_sandbox_before();
	long r = KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	int saved = errno;
	kp_conn_sandbox_after(number == SYS_seccomp ? seccomp_installed((unsigned long)a[0], (unsigned long)a[1], r)
						    : r == 0);
	errno = saved;
	return r;
}

/* glibc reads four more arguments whatever the option: so do we */
KP_EXPORT int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
		      a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (option != PR_SET_SECCOMP || !kp_fdtab_len)
		return KP_REAL(prctl)(option, a2, a3, a4, a5);
	kp_conn_sandbox_before();
	int r = KP_REAL(prctl)(option, a2, a3, a4, a5);
	int saved = errno;
	kp_conn_sandbox_after(r == 0);
	errno = saved;
	return r;
}
