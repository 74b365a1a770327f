/*
 * hooks_dl.c - dlopen(), only to say when a library is loaded where the
 * shim cannot see it.
 *
 * A library opened with RTLD_DEEPBIND (PHP opens every extension so: its
 * curl.so, and through it libcurl) looks up its symbols in its own
 * dependencies before the global scope, so its connect/send/recv/close
 * bind straight to libc and never reach our wrappers: those connections
 * are neither framed nor pooled (they work as without the shim).  From
 * inside the preloaded library there is no clean way in: clearing the
 * flag changes what the library binds for every symbol, not only ours
 * (the isolation the program asked for); patching its GOT after loading
 * it rewrites another library's relocations.  The dynamic linker's own
 * way is an rtld-audit module, audit/audit.c (LD_AUDIT, opt-in): it
 * redirects exactly those bindings.  Here we name each such library in
 * the debug log, and say whether the module is there (README, "Limits").
 *
 * The wrapper must not change what dlopen does, and glibc's dlopen looks
 * at its caller's return address (the caller's namespace, and its RPATH
 * and RUNPATH for a bare name): so on x86-64 it is a tail jump to the real
 * dlopen in assembly, the program's return address left in place, after a
 * note when the flags carry RTLD_DEEPBIND.  Elsewhere dlopen is not
 * wrapped.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dl_real.h"

#if defined(__x86_64__) && defined(RTLD_DEEPBIND)

#define KP_STR2(x) #x
#define KP_STR(x) KP_STR2(x)

/* the real dlopen; bound at the first call (a constructor may dlopen
 * before ours has run) */
__attribute__((used, visibility("hidden"))) void *kp_dl_real;

__attribute__((used, visibility("hidden"))) void *kp_dl_bind(const char *file, int mode)
{
	/* what it opens is not known until the next look; RTLD_NOLOAD and
	 * the program's own handle open nothing new (OpenSSL pins its own
	 * libcrypto with RTLD_NOLOAD, no dlsym after) */
	if (file && !(mode & RTLD_NOLOAD))
		kp_dlopen_note();
	void *p = __atomic_load_n(&kp_dl_real, __ATOMIC_ACQUIRE);
	if (!p) {
		p = kp_dl_sym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&kp_dl_real, p, __ATOMIC_RELEASE);
	}
	return p;
}

__attribute__((used, visibility("hidden"))) void kp_dl_deepbind(const char *file)
{
	const char *audit = getenv("LD_AUDIT");
	if (audit && strstr(audit, "libkeepalive-audit"))
		kp_debug("dlopen(%s, RTLD_DEEPBIND): its calls into libc reach us through "
			 "libkeepalive-audit.so (LD_AUDIT)",
			 file ? file : "NULL");
	else
		kp_debug("dlopen(%s, RTLD_DEEPBIND): this library and its dependencies call "
			 "libc directly; connections they make are not seen (not pooled, not "
			 "changed) unless LD_AUDIT names libkeepalive-audit.so (README: Limits)",
			 file ? file : "NULL");
}

/* void *dlopen(const char *file, int mode): rdi, rsi.  At entry rsp is
 * 8 mod 16; after two pushes and 8 more, calls are aligned again. */
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, @function\n"
	"dlopen:\n"
	"	.cfi_startproc\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	sub $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	test $" KP_STR(RTLD_DEEPBIND) ", %esi\n"
	"	jz 1f\n"
	"	call kp_dl_deepbind\n"
	"1:	mov 16(%rsp), %rdi\n" /* the file and mode, pushed */
	"	mov 8(%rsp), %rsi\n"
	"	call kp_dl_bind\n"
	"	add $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	test %rax, %rax\n"
	"	jz 2f\n"
	"	jmp *%rax\n"
	"2:	xor %eax, %eax\n" /* no dlopen to be found: fail as dlopen fails */
	"	ret\n"
	"	.cfi_endproc\n"
	".size dlopen, .-dlopen\n");

/*
 * dlsym(): a program that gets BIO_f_ssl (or BIO_new_ssl...) by name, not
 * by import, would read a handed-out SSL through the filter past us
 * (docs/tls.md "BIO_f_ssl"): the name is noted (kp_dl_note_name, shim/dl_real.c) and
 * every later hand-out declined.  glibc's dlsym looks at its caller's
 * return address (RTLD_NEXT is "after the caller"), so, as dlopen above,
 * a tail jump to the real one with the program's return address in place.
 * The real dlsym is found with glibc's dlvsym (shim/dl_real.c).  dlvsym
 * is wrapped the same way below.  The note lives in
 * shim/dl_real.c, which the sanitizer builds leave uninstrumented: their
 * runtimes look their interceptors up with dlsym (ours) before they are
 * set up.
 */
/* kp_dlsym_note (shim/dl_real.c): notes the name, returns the real dlsym */

/* void *dlsym(void *handle, const char *name): rdi, rsi */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	sub $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	mov %rsi, %rdi\n"
	"	call kp_dlsym_note\n"
	"	add $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	test %rax, %rax\n"
	"	jz 2f\n"
	"	jmp *%rax\n"
	"2:	xor %eax, %eax\n" /* no dlsym to be found: fail as dlsym fails */
	"	ret\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");

/* void *dlvsym(void *handle, const char *name, const char *version): rdi,
 * rsi, rdx.  The same note (kp_dlvsym_note answers glibc's dlvsym, which
 * the library reaches under its GLIBC_2.2.5 name while this one is
 * exported as GLIBC_2.34: shim/exports.map).  Three pushes realign. */
__asm__(".text\n"
	".globl dlvsym\n"
	".type dlvsym, @function\n"
	"dlvsym:\n"
	"	.cfi_startproc\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rdx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	mov %rsi, %rdi\n"
	"	call kp_dlvsym_note\n"
	"	pop %rdx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	test %rax, %rax\n"
	"	jz 2f\n"
	"	jmp *%rax\n"
	"2:	xor %eax, %eax\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size dlvsym, .-dlvsym\n");

#endif
