/*
 * test_elf_sym.c - shim/elf_sym.c against glibc's own lookup: the libc
 * this test runs with, its tables read as the loader relocated them, each
 * name's answer compared with dlsym on libc's handle (the same search
 * within one object).  The names with several versions in glibc
 * (realpath, posix_spawn, pthread_cond_wait, sched_setaffinity,
 * timer_create: the default one, "@@"), the plain ones, and what we leave
 * to dlsym: an IFUNC (memcpy), data (environ), a weak definition under
 * LD_DYNAMIC_WEAK.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "check.h"
#include "elf_sym.h"

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (!strstr(info->dlpi_name, "/libc.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			return kp_elf_obj_read((const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
					       info->dlpi_addr, arg);
	return 0;
}

int main(void)
{
	struct kp_elf_obj libc;
	CHECK(dl_iterate_phdr(find_libc, &libc) == 1);
	CHECK(libc.gnu_hash && libc.versym && !libc.audit);
	void *h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	CHECK(h != NULL);
	static const char *const same[] = { "realpath", "posix_spawn", "posix_spawnp", "pthread_cond_wait",
					    "sched_setaffinity", "timer_create", "read", "close", "connect",
					    "sendmsg", "execve", "setuid", "_Fork", "siglongjmp", "lio_listio" };
	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++) {
		void *p = NULL;
		enum kp_elf_found r = kp_elf_obj_find(&libc, same[i], false, &p);
		CHECK(r == KP_ELF_FOUND);
		if (r != KP_ELF_FOUND || p != dlsym(h, same[i]))
			fprintf(stderr, "%s: %d %p, dlsym %p\n", same[i], (int)r, p, dlsym(h, same[i]));
		CHECK(p == dlsym(h, same[i]));
	}
	void *p = NULL;
	CHECK(kp_elf_obj_find(&libc, "memcpy", false, &p) == KP_ELF_DOUBT);
	CHECK(kp_elf_obj_find(&libc, "environ", false, &p) == KP_ELF_DOUBT);
	CHECK(kp_elf_obj_find(&libc, "close", true, &p) == KP_ELF_DOUBT); /* weak */
	CHECK(kp_elf_obj_find(&libc, "read", true, &p) == KP_ELF_FOUND);  /* global */
	CHECK(kp_elf_obj_find(&libc, "kp_no_such_function", false, &p) == KP_ELF_ABSENT);
	CHECK(kp_elf_obj_find(&libc, "", false, &p) == KP_ELF_ABSENT);
	/* no GNU hash table: a doubt */
	struct kp_elf_obj bare = libc;
	bare.gnu_hash = NULL;
	CHECK(kp_elf_obj_find(&bare, "read", false, &p) == KP_ELF_DOUBT);
	/* an empty table: glibc passes the object by; a bloom filter of a
	 * size that is no power of two (glibc refuses it): a doubt */
	static const uint32_t empty[] = { 0, 1, 1, 0, 0, 0 }, odd[] = { 1, 1, 3, 6, 0, 0, 0, 0, 0, 0, 0, 0 };
	struct kp_elf_obj fake = libc;
	fake.gnu_hash = empty;
	CHECK(kp_elf_obj_find(&fake, "read", false, &p) == KP_ELF_ABSENT);
	fake.gnu_hash = odd;
	CHECK(kp_elf_obj_find(&fake, "read", false, &p) == KP_ELF_DOUBT);
	printf("test_elf_sym: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
