/*
 * elf_sym.c - one object's symbol lookup (elf_sym.h), as glibc's
 * elf/dl-lookup.c makes it for dlsym: the bloom filter, the bucket, the
 * chain of hashes; among the definitions of the name, one with no version
 * (index 0 or 1 in DT_VERSYM) wins at once, else the only one that is not
 * hidden (the default version, "name@@V") does.  What this file does not
 * decide it answers KP_ELF_DOUBT, and the caller asks dlsym.
 */
#include <elf.h>
#include <stddef.h>
#include <string.h>

#include "elf_sym.h"

#ifndef DT_AUDIT
#define DT_AUDIT 0x6ffffefc
#endif
#ifndef DT_DEPAUDIT
#define DT_DEPAUDIT 0x6ffffefb
#endif

bool kp_elf_obj_read(const ElfW(Dyn) *dyn, uintptr_t base, struct kp_elf_obj *obj)
{
	*obj = (struct kp_elf_obj){ .base = base };
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: obj->symtab = (const void *)d->d_un.d_ptr; break;
		case DT_STRTAB: obj->strtab = (const void *)d->d_un.d_ptr; break;
		case DT_GNU_HASH: obj->gnu_hash = (const void *)d->d_un.d_ptr; break;
		case DT_VERSYM: obj->versym = (const void *)d->d_un.d_ptr; break;
		case DT_AUDIT: case DT_DEPAUDIT: obj->audit = true; break;
		}
	}
	/* the vDSO's entries are not relocated (addresses below its base) */
	return obj->symtab && obj->strtab && (uintptr_t)obj->symtab >= base && (uintptr_t)obj->strtab >= base &&
	       (!obj->gnu_hash || (uintptr_t)obj->gnu_hash >= base) &&
	       (!obj->versym || (uintptr_t)obj->versym >= base);
}

bool kp_elf_obj_of(const struct dl_phdr_info *info, struct kp_elf_obj *obj)
{
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC &&
		    kp_elf_obj_read((const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
				    info->dlpi_addr, obj))
			return true;
	*obj = (struct kp_elf_obj){ 0 };
	return false;
}

/* dl_new_hash: h * 33 + c */
static uint32_t gnu_hash(const char *name)
{
	uint32_t h = 5381;
	for (const unsigned char *s = (const unsigned char *)name; *s; s++)
		h = h * 33 + *s;
	return h;
}

/* The symbol table index of name's first chain entry, 0: not here */
static uint32_t chain_start(const uint32_t *gh, uint32_t h, const uint32_t **chain)
{
	uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2], bloom_shift = gh[3];
	if (!nbuckets)
		return 0; /* an empty table: glibc passes the object by */
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
	const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	ElfW(Addr) word = bloom[(h / bits) & (bloom_size - 1)];
	ElfW(Addr) mask = ((ElfW(Addr))1 << (h % bits)) | ((ElfW(Addr))1 << ((h >> bloom_shift) % bits));
	if ((word & mask) != mask)
		return 0;
	uint32_t idx = buckets[h % nbuckets];
	if (idx < symoffset)
		return 0;
	*chain = buckets + nbuckets - symoffset; /* indexed by symbol index */
	return idx;
}

/* One definition named name at symbol index i: what dlsym would make of
 * it.  KP_ELF_FOUND: takeable; ABSENT: glibc passes it by (a hidden,
 * non-default version); DOUBT: anything else. */
static enum kp_elf_found judge(const struct kp_elf_obj *obj, uint32_t i, bool weak_doubt, bool *versioned)
{
	const ElfW(Sym) *s = &obj->symtab[i];
	unsigned type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
	if (type != STT_FUNC || s->st_shndx == SHN_UNDEF || s->st_value == 0)
		return KP_ELF_DOUBT; /* an IFUNC, data, a PLT address... */
	if (bind != STB_GLOBAL && !(bind == STB_WEAK && !weak_doubt))
		return KP_ELF_DOUBT; /* a unique or local symbol */
	*versioned = false;
	if (!obj->versym)
		return KP_ELF_FOUND;
	ElfW(Half) v = obj->versym[i];
	if ((v & 0x7fff) == 1)
		return KP_ELF_FOUND; /* VER_NDX_GLOBAL: no version */
	if ((v & 0x7fff) == 0)
		return KP_ELF_DOUBT; /* VER_NDX_LOCAL on a definition */
	*versioned = true;
	return v & 0x8000 ? KP_ELF_ABSENT : KP_ELF_FOUND;
}

enum kp_elf_found kp_elf_obj_find(const struct kp_elf_obj *obj, const char *name, bool weak_doubt,
				  void **addr)
{
	/* none, or a bloom filter glibc would refuse to load (its size a
	 * power of two) */
	if (!obj->gnu_hash || !obj->gnu_hash[2] || (obj->gnu_hash[2] & (obj->gnu_hash[2] - 1)))
		return KP_ELF_DOUBT;
	uint32_t h = gnu_hash(name);
	const uint32_t *chain = NULL;
	uint32_t i = chain_start(obj->gnu_hash, h, &chain);
	if (!i)
		return KP_ELF_ABSENT;
	/* glibc: an unversioned definition is taken at once; of the
	 * versioned ones, the only default one (two: glibc takes none and
	 * goes on, which we leave to dlsym); hidden ones only are none */
	const ElfW(Sym) *pick = NULL;
	bool hidden_seen = false;
	for (;; i++) {
		uint32_t ch = chain[i];
		if ((ch | 1) == (h | 1) && strcmp(obj->strtab + obj->symtab[i].st_name, name) == 0) {
			bool versioned = false;
			enum kp_elf_found r = judge(obj, i, weak_doubt, &versioned);
			if (r == KP_ELF_DOUBT)
				return r;
			if (r == KP_ELF_ABSENT) {
				hidden_seen = true;
			} else if (!versioned) {
				pick = &obj->symtab[i];
				break;
			} else if (pick) {
				return KP_ELF_DOUBT;
			} else {
				pick = &obj->symtab[i];
			}
		}
		if (ch & 1)
			break;
	}
	if (!pick)
		return hidden_seen ? KP_ELF_DOUBT : KP_ELF_ABSENT;
	*addr = (void *)(obj->base + pick->st_value);
	return KP_ELF_FOUND;
}
