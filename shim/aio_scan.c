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
#include "elf_sym.h"

static bool named(const char *name, const void *want)
{
	return !strcmp(name, want);
}

/* What a scan looks for: objects defining these names themselves and
 * importing no syscall (their system calls made inline, past our
 * syscall() wrapper); found: a bit per name.  One pass over the objects
 * for all of them (each object's own symbol table read: shim/elf_sym.h). */
static const char *const unseen_names[] = { "io_submit", "io_uring_queue_init_params", "io_uring_setup" };
#define UNSEEN_AIO 1u
#define UNSEEN_URING (2u | 4u)
#define UNSEEN_ALL 7u

/* the names found in this object by dlsym on its handle h (mask: those
 * still looked for): its own definition, not a dependency's */
static unsigned defined_by_dlsym(void *h, const struct dl_phdr_info *info, unsigned mask)
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
	return f;
}

/* The same from the object's own symbol table (shim/elf_sym.h: no
 * dlopen, no dlsym, ~200 instructions a name); the names it does not
 * decide (no GNU hash table, an IFUNC...) left in *doubt */
static unsigned defined_by_table(const struct dl_phdr_info *info, unsigned mask, unsigned *doubt)
{
	struct kp_elf_obj o;
	unsigned f = 0;
	*doubt = 0;
	if (!kp_elf_obj_of(info, &o)) {
		*doubt = mask;
		return 0;
	}
	for (unsigned i = 0; i < sizeof(unseen_names) / sizeof(unseen_names[0]); i++) {
		void *p;
		if (!(mask & (1u << i)))
			continue;
		switch (kp_elf_obj_find(&o, unseen_names[i], false, &p)) {
		case KP_ELF_FOUND: f |= 1u << i; break;
		case KP_ELF_ABSENT: break;
		default: *doubt |= 1u << i; break;
		}
	}
	return f;
}

/* ...and importing no syscall */
static unsigned unseen_in(unsigned f, const struct dl_phdr_info *info)
{
	return f && kp_elf_imports(info, named, "syscall") ? 0 : f;
}

/* an object that defines a name itself and imports no syscall; dlsym on
 * its own handle where its table leaves a doubt */
static int unseen_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	unsigned *found = arg, doubt;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0; /* the program itself: found through its own name below */
	/* liburing's names only in an object named so (docs/limits.md
	 * "io_uring") */
	unsigned mask = UNSEEN_ALL & ~*found;
	const char *base = strrchr(info->dlpi_name, '/');
	if (!strstr(base ? base : info->dlpi_name, "liburing"))
		mask &= ~UNSEEN_URING;
	if (!mask)
		return 0;
	unsigned f = defined_by_table(info, mask, &doubt);
	void *h = doubt ? kp_dl_open(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (h) {
		f |= defined_by_dlsym(h, info, doubt);
		dlclose(h);
	}
	*found |= unseen_in(f, info);
	return *found == UNSEEN_ALL;
}

/* the main program defining io_submit (a static libaio in it, exported) */
static int unseen_main(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	unsigned *found = arg, doubt;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0;
	unsigned f = defined_by_table(info, UNSEEN_AIO & ~*found, &doubt);
	if (doubt)
		f |= defined_by_dlsym(RTLD_DEFAULT, info, doubt);
	*found |= unseen_in(f, info);
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
