/*
 * fdtable.c - the flat fd -> connection array (socket_wrapper's design).
 * Sized from RLIMIT_NOFILE's hard limit, mapped lazily: untouched pages
 * cost nothing.  fds beyond it are simply never tracked.
 */
#include "fdtable.h"
#include "sys_prlimit.h"

#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

struct kp_conn **kp_fdtab;
kp_fdfl *kp_fdflags;
unsigned kp_fdtab_len;
unsigned kp_fd_live;
int kp_fd_pooled_low = INT_MAX;

static int fd_high = -1;
static int hidden_base = 3;

#define KP_FDTAB_MAX (1u << 20)

int kp_fdtab_init(struct rlimit *rl)
{
	rlim_t n = 1024, soft = 1024;
	if (kp_sys_prlimit(0, RLIMIT_NOFILE, NULL, rl) == 0) {
		n = rl->rlim_max;
		soft = rl->rlim_cur;
	} else {
		rl->rlim_cur = rl->rlim_max = 1024;
	}
	if (n == RLIM_INFINITY || n > KP_FDTAB_MAX)
		n = KP_FDTAB_MAX;
	if (n < 64)
		n = 64;
	if (soft > n)
		soft = n;
	size_t bytes = n * (sizeof(*kp_fdtab) + sizeof(*kp_fdflags));
	void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (mem == MAP_FAILED)
		return -1;
	kp_fdtab = mem;
	kp_fdflags = (kp_fdfl *)(kp_fdtab + n);
	/* Pooled sockets live high, out of the way of the program's own
	 * lowest-first fd numbers and of select()'s FD_SETSIZE. */
	hidden_base = soft >= 2048 ? 1024 : (int)(soft / 2);
	__atomic_store_n(&kp_fdtab_len, (unsigned)n, __ATOMIC_RELEASE);
	return 0;
}

struct kp_conn *kp_fd_swap(int fd, struct kp_conn *c)
{
	if (!kp_fd_valid(fd))
		return NULL;
	if (c)
		kp_fd_note_high(fd);
	if (c == KP_POOLED) {
		int low = __atomic_load_n(&kp_fd_pooled_low, __ATOMIC_RELAXED);
		while (fd < low && !__atomic_compare_exchange_n(&kp_fd_pooled_low, &low, fd, false,
								__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	/* seq-cst: a close's swap and its load of the reads under way pair
	 * with a read's count and its load of the table (conn.h
	 * kp_read_begin); on x86-64 the same xchg */
	struct kp_conn *old = __atomic_exchange_n(&kp_fdtab[fd], c, __ATOMIC_SEQ_CST);
	int live = (c && c != KP_POOLED) - (old && old != KP_POOLED);
	if (live)
		__atomic_add_fetch(&kp_fd_live, (unsigned)live, __ATOMIC_ACQ_REL);
	return old;
}

bool kp_fd_drop_if(int fd, struct kp_conn *c)
{
	if (!kp_fd_valid(fd) || !c || c == KP_POOLED)
		return false;
	struct kp_conn *want = c;
	/* (seq-cst, as kp_fd_swap: pairs with kp_read_begin's re-read) */
	if (!__atomic_compare_exchange_n(&kp_fdtab[fd], &want, NULL, false, __ATOMIC_SEQ_CST,
					 __ATOMIC_SEQ_CST))
		return false;
	__atomic_sub_fetch(&kp_fd_live, 1, __ATOMIC_ACQ_REL);
	return true;
}

void kp_fd_note_high(int fd)
{
	int high = __atomic_load_n(&fd_high, __ATOMIC_RELAXED);
	while (fd > high && !__atomic_compare_exchange_n(&fd_high, &high, fd, false, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED))
		;
}

int kp_fd_hidden_base(void)
{
	return __atomic_load_n(&hidden_base, __ATOMIC_RELAXED);
}

void kp_fd_set_hidden_base(int base)
{
	__atomic_store_n(&hidden_base, base, __ATOMIC_RELAXED);
}

int kp_fd_high(void)
{
	return __atomic_load_n(&fd_high, __ATOMIC_RELAXED);
}

void kp_fdtab_after_fork_child(void)
{
	int high = kp_fd_high();
	if (high >= 0)
		memset(kp_fdtab, 0, (size_t)(high + 1) * sizeof(*kp_fdtab));
	__atomic_store_n(&kp_fd_live, 0, __ATOMIC_RELEASE);
}

bool kp_fdtab_aside;

void kp_fdtab_step_aside(void)
{
	__atomic_store_n(&kp_fdtab_aside, true, __ATOMIC_RELEASE);
	__atomic_store_n(&kp_fdtab_len, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&kp_fd_live, 0, __ATOMIC_RELEASE);
}
