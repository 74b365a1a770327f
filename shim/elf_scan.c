/*
 * elf_scan.c - what a loaded object imports (elf_scan.h).
 */
#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#include "elf_scan.h"

static bool rel_imports(const ElfW(Sym) *symtab, const char *strtab, const void *rel, size_t size,
			size_t entsize, bool rela, bool (*match)(const char *, const void *), const void *arg)
{
	for (size_t off = 0; entsize && off + entsize <= size; off += entsize) {
		const char *r = (const char *)rel + off;
		ElfW(Xword) info = rela ? ((const ElfW(Rela) *)r)->r_info : ((const ElfW(Rel) *)r)->r_info;
#if __WORDSIZE == 64
		size_t idx = ELF64_R_SYM(info);
#else
		size_t idx = ELF32_R_SYM(info);
#endif
		if (idx && symtab[idx].st_shndx == SHN_UNDEF && match(strtab + symtab[idx].st_name, arg))
			return true;
	}
	return false;
}

bool kp_elf_imports(const struct dl_phdr_info *info, bool (*match)(const char *name, const void *arg),
		    const void *arg)
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
			/* glibc has relocated these to addresses already */
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
		/* the vDSO's entries are not relocated: it imports nothing */
		if (!symtab || !strtab || (uintptr_t)symtab < info->dlpi_addr)
			return false;
		return (jmprel && rel_imports(symtab, strtab, jmprel, pltsz,
					      plt_rela ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel)), plt_rela,
					      match, arg)) ||
		       (rel && rel_imports(symtab, strtab, rel, relsz, relent, rela, match, arg));
	}
	return false;
}

static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

unsigned long long kp_elf_adds(void)
{
	unsigned long long adds = 0;
	dl_iterate_phdr(adds_cb, &adds);
	return adds;
}
