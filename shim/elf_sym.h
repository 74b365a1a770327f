/*
 * elf_sym.h - one loaded object's dynamic symbol lookup, as the dynamic
 * linker makes it for dlsym (the GNU hash table, the default version):
 * what shim/real.c binds the real functions with before main, without
 * dlsym's lock and cost (docs/binding.md "Our own lookup").  Pure: reads
 * the object's tables as the loader relocated them, nothing else.
 */
#ifndef KP_ELF_SYM_H
#define KP_ELF_SYM_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* What one object's dynamic section gives a lookup (pointers relocated by
 * glibc's loader: absolute addresses) */
struct kp_elf_obj {
	uintptr_t base;		      /* dlpi_addr: added to st_value */
	const ElfW(Sym) *symtab;
	const char *strtab;
	const uint32_t *gnu_hash;     /* DT_GNU_HASH, NULL: none */
	const ElfW(Half) *versym;     /* DT_VERSYM, NULL: unversioned */
	bool audit;		      /* DT_AUDIT or DT_DEPAUDIT (the main program's) */
};

/* Reads the dynamic section dyn of an object loaded at base.  False where
 * there is no symbol or string table, or the tables are not relocated
 * (the vDSO's). */
bool kp_elf_obj_read(const ElfW(Dyn) *dyn, uintptr_t base, struct kp_elf_obj *obj);

/* The same from the program headers dl_iterate_phdr gives (PT_DYNAMIC);
 * false (obj zeroed: no GNU hash table) where that fails. */
bool kp_elf_obj_of(const struct dl_phdr_info *info, struct kp_elf_obj *obj);

enum kp_elf_found {
	KP_ELF_ABSENT, /* no definition of the name here: the lookup goes on */
	KP_ELF_FOUND,  /* *addr is what dlsym(RTLD_NEXT) answers if it gets here */
	KP_ELF_DOUBT,  /* a case we do not decide (no GNU hash table, an IFUNC,
			* not a function, two default versions...): ask dlsym */
};

/* The definition of name in obj as glibc's do_lookup_x finds it for a
 * dlsym (no version asked: the one unversioned or default-version
 * definition), a defined global or weak STT_FUNC; weak_doubt: a weak
 * definition is a doubt (LD_DYNAMIC_WEAK). */
enum kp_elf_found kp_elf_obj_find(const struct kp_elf_obj *obj, const char *name, bool weak_doubt,
				  void **addr);

#pragma GCC visibility pop

#endif
