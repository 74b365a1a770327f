/*
 * audit.c - libkeepalive-audit.so, an rtld-audit module (rtld-audit(7)),
 * loaded with LD_AUDIT beside the preloaded libkeepalive.so.  Its one job:
 * libraries opened with RTLD_DEEPBIND (PHP's extensions: curl.so and the
 * libcurl under it) look their symbols up in their own dependencies
 * first, find libc's connect/send/recv/close..., and so never reach the
 * preloaded wrappers.  The dynamic linker asks this module about every
 * symbol binding (la_symbind64); a binding that
 *   - resolved to libc, or to libssl 3 (its SSL_* calls: the HTTPS pool),
 *   - is made by an object other than those two and libkeepalive itself,
 *   - in the program's main namespace, after start-up (la_preinit),
 *   - not through dlsym() (libkeepalive finds the real functions with
 *     dlsym(RTLD_NEXT): those must stay libc's),
 *   - for a function libkeepalive exports,
 * is given libkeepalive's function instead: the binding the object would
 * have got without RTLD_DEEPBIND.  An object loaded without that flag
 * never binds those names to libc in the first place (the preloaded
 * library comes first in the global scope), so nothing else changes.
 *
 * The module lives in a namespace of its own (audit modules do), so it
 * cannot dlsym() into the program's: it reads libkeepalive's dynamic
 * symbol table itself (DT_GNU_HASH, which our build always has).
 */
#include <link.h>
#include <stdint.h>
#include <string.h>

#define KP_EXPORT __attribute__((visibility("default")))

static struct link_map *ours, *libc, *libssl;
static int started;

KP_EXPORT unsigned la_version(unsigned v)
{
	return v < LAV_CURRENT ? v : LAV_CURRENT;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcmp(s + n - t, tail) == 0;
}

KP_EXPORT unsigned la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	*cookie = (uintptr_t)map;
	if (lmid != LM_ID_BASE)
		return 0;
	if (map->l_name && !ours && ends_with(map->l_name, ".so") &&
	    strstr(map->l_name, "libkeepalive") && !strstr(map->l_name, "audit"))
		ours = map;
	else if (map->l_name && !libc && ends_with(map->l_name, "/libc.so.6"))
		libc = map;
	else if (map->l_name && !libssl && ends_with(map->l_name, "/libssl.so.3"))
		libssl = map;
	return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

/* Start-up relocation is over: libkeepalive is relocated, its table can be
 * read.  (Start-up bindings never need us: nothing is deep-bound yet.) */
KP_EXPORT void la_preinit(uintptr_t *cookie)
{
	(void)cookie;
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}

/* The dynamic section's pointers: glibc relocates them in place on most
 * targets, not on all. */
static uintptr_t dyn_ptr(const struct link_map *m, ElfW(Addr) p)
{
	return p < m->l_addr ? m->l_addr + p : p;
}

/* Address of the function name defined by m, 0 if none (GNU hash). */
static uintptr_t lookup(const struct link_map *m, const char *name)
{
	const uint32_t *ht = NULL;
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_GNU_HASH)
			ht = (const uint32_t *)dyn_ptr(m, d->d_un.d_ptr);
		else if (d->d_tag == DT_SYMTAB)
			sym = (const ElfW(Sym) *)dyn_ptr(m, d->d_un.d_ptr);
		else if (d->d_tag == DT_STRTAB)
			str = (const char *)dyn_ptr(m, d->d_un.d_ptr);
	}
	if (!ht || !sym || !str || !ht[0])
		return 0;
	uint32_t nbuckets = ht[0], symoffset = ht[1], bloom_words = ht[2];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(ht + 4);
	const uint32_t *buckets = (const uint32_t *)(bloom + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = 5381;
	for (const char *s = name; *s; s++)
		h = h * 33 + (unsigned char)*s;
	uint32_t i = buckets[h % nbuckets];
	if (i < symoffset)
		return 0;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		if ((h | 1) == (h2 | 1) && strcmp(name, str + sym[i].st_name) == 0 &&
		    sym[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC &&
		    ELF64_ST_VISIBILITY(sym[i].st_other) == STV_DEFAULT)
			return m->l_addr + sym[i].st_value;
		if (h2 & 1)
			return 0;
	}
}

KP_EXPORT uintptr_t la_symbind64(ElfW(Sym) *sym, unsigned ndx, uintptr_t *refcook,
				 uintptr_t *defcook, unsigned *flags, const char *name)
{
	struct link_map *ref = (struct link_map *)*refcook, *def = (struct link_map *)*defcook;
	(void)ndx;
	if (!__atomic_load_n(&started, __ATOMIC_ACQUIRE) || !ours || !def ||
	    (def != libc && def != libssl) || ref == libc || ref == libssl || ref == ours ||
	    (*flags & LA_SYMB_DLSYM))
		return sym->st_value;
	uintptr_t f = lookup(ours, name);
	return f ? f : sym->st_value;
}
