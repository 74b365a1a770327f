/*
 * fdlimit.c - the library's hidden fds (pooled sockets, twins, the broker
 * link) and the program's RLIMIT_NOFILE (docs/limits.md).
 *
 * The kernel compares an fd's number with the soft limit, never a count:
 * numbers at or above the program's soft limit cost it nothing, and every
 * fd-making call, ours to see or not (mkstemp, signalfd, an SCM_RIGHTS
 * receipt, dlopen), finds the numbers and the EMFILE it would alone.  A
 * number there is made by raising the limit for one F_DUPFD, every signal
 * blocked, under rl_lock: the program's limit calls take the same lock,
 * and fork, exec and spawn wait for the window (posix_spawn, system and
 * popen keep it shut until they return) so that no child copies a raised
 * limit.  Without the room (soft == hard, a table too large to grow), the
 * old plan: the top of the program's table, given back on EMFILE.
 */
#include "fdlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdtable.h"
#include "kp_lock.h"
#include "real.h"

/* Larger tables keep the old plan: a number near a soft limit of a
 * million would grow the kernel's fd table for the process to match
 * (8 MB), for a program unlikely ever to reach its limit. */
#define KP_ABOVE_MAX_SOFT 65536u

static struct rlimit plan;  /* the program's limit the plan was made for */
static bool above;          /* hidden fds live from plan.rlim_cur up */
static rlim_t above_top;    /* one past the highest number they may take */
static unsigned spawning;   /* posix_spawn, system, popen under way */
static kp_mutex_t rl_lock = KP_MUTEX_INITIALIZER;

bool kp_limits_plan(const struct rlimit *rl, unsigned room)
{
	bool ok = rl->rlim_cur != RLIM_INFINITY && rl->rlim_cur <= KP_ABOVE_MAX_SOFT &&
		  (rl->rlim_max == RLIM_INFINITY || rl->rlim_cur + room <= rl->rlim_max) &&
		  rl->rlim_cur + room <= __atomic_load_n(&kp_fdtab_len, __ATOMIC_RELAXED);
	/* written before the flag that makes kp_fd_hide read them */
	__atomic_store_n(&plan.rlim_cur, rl->rlim_cur, __ATOMIC_RELAXED);
	__atomic_store_n(&plan.rlim_max, rl->rlim_max, __ATOMIC_RELAXED);
	__atomic_store_n(&above_top, rl->rlim_cur + room, __ATOMIC_RELAXED);
	__atomic_store_n(&above, ok, __ATOMIC_RELEASE);
	return ok;
}

bool kp_limits_fresh(const struct rlimit *rl)
{
	return rl->rlim_cur == __atomic_load_n(&plan.rlim_cur, __ATOMIC_RELAXED) &&
	       rl->rlim_max == __atomic_load_n(&plan.rlim_max, __ATOMIC_RELAXED);
}

bool kp_limits_above(void)
{
	return __atomic_load_n(&above, __ATOMIC_ACQUIRE);
}

/* Raise the soft limit for one F_DUPFD_CLOEXEC from the program's soft
 * limit up.  No handler runs in this thread meanwhile (its fork or exec
 * would copy the raised limit, its getrlimit see it), and no fork, spawn
 * or limit call in another (rl_lock, only tried: never a wait in a path
 * of ours). */
static int dup_above(int fd)
{
	sigset_t all, old;
	sigfillset(&all);
	if (pthread_sigmask(SIG_SETMASK, &all, &old) != 0)
		return -1;
	int h = -1, err = EBUSY;
	if (kp_trylock(&rl_lock) == 0) {
		struct rlimit want = { __atomic_load_n(&plan.rlim_cur, __ATOMIC_RELAXED),
				       __atomic_load_n(&plan.rlim_max, __ATOMIC_RELAXED) };
		struct rlimit up = { __atomic_load_n(&above_top, __ATOMIC_RELAXED), want.rlim_max };
		struct rlimit prev;
		if (__atomic_load_n(&spawning, __ATOMIC_SEQ_CST)) {
			err = EBUSY;
		} else if (kp_sys_prlimit(0, RLIMIT_NOFILE, &up, &prev) < 0) {
			err = EINVAL; /* the hard limit went down behind us */
		} else {
			if (prev.rlim_cur == want.rlim_cur && prev.rlim_max == want.rlim_max) {
				h = KP_REAL(fcntl)(fd, F_DUPFD_CLOEXEC, (int)want.rlim_cur);
				err = errno;
			} else {
				err = EINVAL; /* changed behind us (a raw syscall) */
			}
			kp_sys_prlimit(0, RLIMIT_NOFILE, &prev, NULL);
		}
		kp_unlock(&rl_lock);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return h;
}

int kp_fd_hide(int fd)
{
	if (kp_limits_above())
		return dup_above(fd);
	return KP_REAL(fcntl)(fd, F_DUPFD_CLOEXEC, kp_fd_hidden_base());
}

bool kp_rl_enter(void)
{
	/* not from a handler that interrupted a region of ours: the lock may
	 * be this thread's (the kernel's call then, as every wrapper's) */
	if (!__atomic_load_n(&kp_fdtab_len, __ATOMIC_RELAXED) || kp_reentered())
		return false;
	kp_lock(&rl_lock);
	return true;
}

void kp_rl_leave(bool locked)
{
	if (locked)
		kp_unlock(&rl_lock);
}

void kp_spawn_enter(bool counted)
{
	if (!__atomic_load_n(&kp_fdtab_len, __ATOMIC_RELAXED))
		return;
	if (counted)
		__atomic_add_fetch(&spawning, 1, __ATOMIC_SEQ_CST);
	/* a window open now closes before the child is made */
	if (!kp_reentered()) {
		kp_lock(&rl_lock);
		kp_unlock(&rl_lock);
	}
}

void kp_spawn_leave(void)
{
	if (__atomic_load_n(&kp_fdtab_len, __ATOMIC_RELAXED))
		__atomic_sub_fetch(&spawning, 1, __ATOMIC_SEQ_CST);
}

void kp_limits_before_fork(void)
{
	kp_lock(&rl_lock);
}

void kp_limits_after_fork_parent(void)
{
	kp_unlock(&rl_lock);
}

void kp_limits_after_fork_child(void)
{
	kp_mutex_init(&rl_lock);
	__atomic_store_n(&spawning, 0, __ATOMIC_RELAXED);
}

/* Without /proc: probe the numbers downward from below - 1, a hidden fd
 * of ours skipped, until an open one: 256 at a time in one poll() with no
 * events and no wait (ppoll; POLLNVAL: not open; the raw call: no hook,
 * async-signal-safe), one F_GETFD each where poll refuses.  At most
 * KP_PROBE_MAX numbers: past that, -2 (docs/limits.md "select past
 * FD_SETSIZE"). */
#define KP_PROBE_MAX 65536
#define KP_PROBE_BATCH 256
static int program_high_probed(int below)
{
	/* nor once stepped aside for a seccomp filter (conn_sandbox.c): it
	 * may kill on a call the program never makes */
	if (below > KP_PROBE_MAX || __atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE))
		return -2;
	struct pollfd p[KP_PROBE_BATCH];
	for (int top = below - 1; top >= 0; top -= KP_PROBE_BATCH) {
		int n = top + 1 < KP_PROBE_BATCH ? top + 1 : KP_PROBE_BATCH;
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = top - i };
		struct timespec now = { 0, 0 };
		bool polled = KP_REAL(syscall)(SYS_ppoll, p, (unsigned long)n, &now, NULL, 0) >= 0;
		for (int i = 0; i < n; i++) {
			int fd = top - i;
			bool open = polled ? !(p[i].revents & POLLNVAL)
					   : KP_REAL(syscall)(SYS_fcntl, fd, F_GETFD) >= 0;
			if (open && !kp_fd_pooled(fd))
				return fd;
		}
	}
	return -1;
}

/* The program's highest open fd below `below` (a hidden fd of ours
 * aside), from /proc/self/fd read with the raw calls (select is
 * async-signal-safe: no opendir, no malloc), or without /proc by probing
 * each number; -1 when it has none there, -2 when neither can say. */
int kp_fd_program_high(int below)
{
	int dir = (int)KP_REAL(syscall)(SYS_openat, AT_FDCWD, "/proc/self/fd",
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return program_high_probed(below);
	int high = -1;
	char buf[4096];
	long n;
	while ((n = KP_REAL(syscall)(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
			unsigned short reclen;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			const char *name = buf + off + 19;
			int fd = 0;
			bool num = *name != 0;
			for (const char *c = name; *c && num; c++) {
				num = *c >= '0' && *c <= '9' && fd < 100000000;
				fd = fd * 10 + (*c - '0');
			}
			if (num && fd != dir && fd < below && fd > high && !kp_fd_pooled(fd))
				high = fd;
			off += reclen;
		}
	}
	KP_REAL(close)(dir);
	return n < 0 ? program_high_probed(below) : high;
}
