/*
 * aio_scan.c - kp_aio_unseen(): a kernel AIO library whose io_submit makes
 * the system call inline.  A read of the response by such an io_submit
 * never reaches us, so an EOF we owed could not be delivered there: the
 * program would wait for the server's idle close.  By default deny, a
 * process with such an object owes no EOF at all: requests that ask to
 * close are not rewritten (shim/conn.c send_intercept; docs/replay.md
 * "Kernel AIO").  libaio since 0.3.111 (Debian 12's 0.3.113) calls libc's
 * syscall(), which we wrap (hooks_io.c), and is not affected.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "aio_scan.h"
#include "dl_real.h"

/* the object at base imports name (an undefined symbol among its
 * relocations, PLT or not) */
static bool imports(const ElfW(Sym) *symtab, const char *strtab, const void *rel, size_t size, size_t entsize,
		    bool rela, const char *name)
{
	for (size_t off = 0; entsize && off + entsize <= size; off += entsize) {
		const char *r = (const char *)rel + off;
		ElfW(Xword) info = rela ? ((const ElfW(Rela) *)r)->r_info : ((const ElfW(Rel) *)r)->r_info;
		size_t idx = ELF64_R_SYM(info);
		if (idx && symtab[idx].st_shndx == SHN_UNDEF && !strcmp(strtab + symtab[idx].st_name, name))
			return true;
	}
	return false;
}

static bool object_imports(struct dl_phdr_info *info, const char *name)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		const ElfW(Sym) *symtab = NULL;
		const char *strtab = NULL;
		const void *jmprel = NULL, *rel = NULL;
		size_t pltsz = 0, relsz = 0, relent = 0;
		bool rela = true, plt_rela = true;
		for (; d->d_tag != DT_NULL; d++) {
			switch (d->d_tag) {
			case DT_SYMTAB: symtab = (const void *)d->d_un.d_ptr; break;
			case DT_STRTAB: strtab = (const void *)d->d_un.d_ptr; break;
			case DT_JMPREL: jmprel = (const void *)d->d_un.d_ptr; break;
			case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
			case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
			case DT_RELA: rel = (const void *)d->d_un.d_ptr; rela = true; break;
			case DT_REL: rel = (const void *)d->d_un.d_ptr; rela = false; break;
			case DT_RELASZ: case DT_RELSZ: relsz = d->d_un.d_val; break;
			case DT_RELAENT: case DT_RELENT: relent = d->d_un.d_val; break;
			}
		}
		if (!symtab || !strtab || (uintptr_t)symtab < info->dlpi_addr)
			return false;
		return (jmprel && imports(symtab, strtab, jmprel, pltsz,
					  plt_rela ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel)), plt_rela, name)) ||
		       (rel && imports(symtab, strtab, rel, relsz, relent, rela, name));
	}
	return false;
}

/* an object that defines io_submit itself (dlsym on its own handle finds
 * it in the object, not in a dependency) and imports no syscall */
static int unseen_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0; /* the program itself: found through its own name below */
	void *h = kp_dl_open(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	void *p = kp_dl_sym(h, "io_submit");
	dlclose(h);
	Dl_info di;
	if (!p || !dladdr(p, &di) || (uintptr_t)di.dli_fbase != (uintptr_t)info->dlpi_addr)
		return 0;
	if (object_imports(info, "syscall"))
		return 0;
	*(int *)arg = 1;
	return 1;
}

/* the main program defining io_submit (a static libaio in it) */
static int unseen_main(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0;
	void *p = kp_dl_sym(RTLD_DEFAULT, "io_submit");
	Dl_info di;
	if (p && dladdr(p, &di) && (uintptr_t)di.dli_fbase == (uintptr_t)info->dlpi_addr &&
	    !object_imports(info, "syscall"))
		*(int *)arg = 1;
	return 1;
}

static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
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
	unsigned long long adds = 0;
	unsigned begun = __atomic_load_n(&dlopens, __ATOMIC_ACQUIRE);
	dl_iterate_phdr(adds_cb, &adds);
	if (adds != __atomic_load_n(&seen_adds, __ATOMIC_ACQUIRE)) {
		int f = 0;
		dl_iterate_phdr(unseen_object, &f);
		if (!f)
			dl_iterate_phdr(unseen_main, &f);
		__atomic_store_n(&found, f, __ATOMIC_RELAXED);
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
