/*
 * aio_scan.c - kp_aio_unseen(): a kernel AIO library whose io_submit makes
 * the system call inline.  A read of the response by such an io_submit
 * never reaches us, so an EOF we owed could not be delivered there: the
 * program would wait for the server's idle close.  By default deny, a
 * process with such an object owes no EOF at all: requests that ask to
 * close are not rewritten (shim/send.c head_rewritable; docs/replay.md
 * "Kernel AIO").  libaio since 0.3.111 (Debian 12's 0.3.113) calls libc's
 * syscall(), which we wrap (hooks_conn.c), and is not affected.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "aio_scan.h"
#include "dl_real.h"
#include "elf_scan.h"

static bool named(const char *name, const void *want)
{
	return !strcmp(name, want);
}

/* What a scan looks for: objects defining these names themselves and
 * importing no syscall (their system calls made inline, past our
 * syscall() wrapper); found: a bit per name.  One pass over the objects
 * for all of them (each costs a dlopen and a dlsym a name). */
static const char *const unseen_names[] = { "io_submit", "io_uring_queue_init_params", "io_uring_setup" };
#define UNSEEN_AIO 1u
#define UNSEEN_URING (2u | 4u)
#define UNSEEN_ALL 7u

/* the names found in this object (mask: those still looked for) */
static unsigned defined_in(void *h, const struct dl_phdr_info *info, unsigned mask)
{
	unsigned f = 0;
	for (unsigned i = 0; i < sizeof(unseen_names) / sizeof(unseen_names[0]); i++) {
		if (!(mask & (1u << i)))
			continue;
		void *p = kp_dl_sym(h, unseen_names[i]);
		Dl_info di;
		if (p && dladdr(p, &di) && (uintptr_t)di.dli_fbase == (uintptr_t)info->dlpi_addr)
			f |= 1u << i;
	}
	if (f && kp_elf_imports(info, named, "syscall"))
		return 0;
	return f;
}

/* an object that defines a name itself (dlsym on its own handle finds
 * it in the object, not in a dependency) and imports no syscall */
static int unseen_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	unsigned *found = arg;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0; /* the program itself: found through its own name below */
	/* liburing's names only in an object named so: each name costs a
	 * dlsym an object at every start-up (docs/limits.md "io_uring") */
	unsigned mask = UNSEEN_ALL & ~*found;
	const char *base = strrchr(info->dlpi_name, '/');
	if (!strstr(base ? base : info->dlpi_name, "liburing"))
		mask &= ~UNSEEN_URING;
	if (!mask)
		return 0;
	void *h = kp_dl_open(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	*found |= defined_in(h, info, mask);
	dlclose(h);
	return *found == UNSEEN_ALL;
}

/* the main program defining io_submit (a static libaio in it, exported) */
static int unseen_main(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	unsigned *found = arg;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0;
	*found |= defined_in(RTLD_DEFAULT, info, UNSEEN_AIO & ~*found);
	return 1;
}

/* io_uring in the process: set for good (kp_uring_seen) */
static bool uring;

void kp_uring_note(void)
{
	__atomic_store_n(&uring, true, __ATOMIC_RELAXED);
}

bool kp_uring_seen(void)
{
	return __atomic_load_n(&uring, __ATOMIC_RELAXED);
}

static int found;
/* the program's dlopen calls begun, and how many of them the last scan
 * came after: an object opened since is not known yet (its loader may
 * never call dlsym: a plugin whose constructor registers its functions),
 * so until the next scan (the program's next dlsym, dlvsym or dlopen)
 * the process owes no EOF (default deny) */
static unsigned dlopens, dlopens_scanned;

void kp_aio_dlopen(void)
{
	__atomic_add_fetch(&dlopens, 1, __ATOMIC_RELEASE);
}

void kp_aio_rescan(void)
{
	static unsigned long long seen_adds = ~0ull;
	unsigned begun = __atomic_load_n(&dlopens, __ATOMIC_ACQUIRE);
	unsigned long long adds = kp_elf_adds();
	if (adds != __atomic_load_n(&seen_adds, __ATOMIC_ACQUIRE)) {
		unsigned f = 0;
		dl_iterate_phdr(unseen_object, &f);
		if (!(f & UNSEEN_AIO))
			dl_iterate_phdr(unseen_main, &f);
		__atomic_store_n(&found, (f & UNSEEN_AIO) != 0, __ATOMIC_RELAXED);
		/* liburing since 2.2 makes io_uring_setup inline on x86-64 and
		 * aarch64: its ring, once set up, is never seen; an older one
		 * calls syscall(), which kp_uring_note hears */
		if (f & UNSEEN_URING)
			kp_uring_note();
		__atomic_store_n(&seen_adds, adds, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&dlopens_scanned, begun, __ATOMIC_RELEASE);
}

/* a load: asked on the request path, maybe in a signal handler that
 * interrupted malloc or dlopen, where the scan (dlopen, dlsym, the
 * loader's lock) would deadlock */
bool kp_aio_unseen(void)
{
	return __atomic_load_n(&found, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&dlopens, __ATOMIC_ACQUIRE) != __atomic_load_n(&dlopens_scanned, __ATOMIC_ACQUIRE);
}
