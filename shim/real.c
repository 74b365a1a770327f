/*
 * real.c - the real libc functions: each bound by its first call (x86-64),
 * or all at once (elsewhere).
 *
 * Binding the whole table in the constructor cost every program ~58k
 * instructions at start-up (callgrind, /bin/true: dlsym is ~800 each),
 * most of it for functions the program never calls.  Lazily, a program
 * pays one dlsym per function it does call, on its first call, except
 * for the ones a signal handler may call (KP_REAL_SIGNAL_SAFE): those are
 * bound in the constructor, since a first call from a handler that
 * interrupted the program's own dlsym would re-enter the loader
 * (docs/binding.md).  Each binding asks our own lookup first (elf_sym.c:
 * the answer dlsym gives, a tenth of its cost, no lock), dlsym where it
 * doubts (docs/binding.md "Our own lookup").
 */
#include "real.h"
#include "dl_real.h"
#include "elf_sym.h"

#include <dlfcn.h>
#include <link.h>
#include <netinet/in.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "sys_prlimit.h" /* KP_NO_SANITIZE */

/* A symbol this libc lacks (epoll_pwait2, close_range before glibc 2.34):
 * the call fails as an unimplemented one does.  Every function in the
 * list that returns a pointer exists in every glibc. */
static long missing(void)
{
	errno = ENOSYS;
	return -1;
}

/* Our own lookup of the objects dlsym(RTLD_NEXT) searches from here
 * (docs/binding.md "Our own lookup"): the loaded objects after ours in the
 * loader's list, up to and including ld.so (ours found by its text, ld.so
 * by __libc_stack_end, its data).  The list is the load order, which for
 * the objects loaded at start-up is the global search order (ld.so moved
 * to its place in it); an object dlopen'ed later comes after them all,
 * past ld.so's place only where ld.so is the last one needed, so a name
 * not found by then is left to dlsym.  The vDSO (in the list, not in the
 * search order) comes before the preloads; seen after ours, it is a
 * doubt like any object we cannot read: every name not found before it
 * goes to dlsym. */
extern void *__libc_stack_end;
#define SCOPE_MAX 64

struct scope {
	uintptr_t self, end;
	bool past, ended, bad, weak_doubt;
	int n;
	struct kp_elf_obj obj[SCOPE_MAX];
};

static bool holds(const struct dl_phdr_info *info, uintptr_t a)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz)
			return true;
	}
	return false;
}

static int scope_add(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scope *s = arg;
	(void)size;
	if (!s->past) {
		struct kp_elf_obj o;
		/* an audit module named by the program (DT_AUDIT) may change
		 * what dlsym answers (la_symbind): all of it goes to dlsym */
		if (kp_elf_obj_of(info, &o) && o.audit)
			s->bad = true;
		s->past = holds(info, s->self);
		return s->bad;
	}
	if (s->n == SCOPE_MAX) {
		s->bad = true;
		return 1;
	}
	/* unreadable: zeroed, no GNU hash table, which kp_elf_obj_find doubts */
	kp_elf_obj_of(info, &s->obj[s->n++]);
	s->ended = holds(info, s->end);
	return s->ended;
}

/* The objects, once (dl_iterate_phdr takes the loader's lock, as dlsym
 * does; called before main only, where no handler runs on our behalf).
 * LD_AUDIT: the audit modules may change dlsym's answers; LD_DYNAMIC_WEAK:
 * a weak definition does not end the search. */
static void scope_fill(struct scope *s)
{
	s->self = (uintptr_t)(void *)scope_fill;
	s->end = (uintptr_t)&__libc_stack_end;
	s->past = s->ended = s->bad = false;
	s->n = 0;
	s->weak_doubt = getenv("LD_DYNAMIC_WEAK") != NULL;
	if (getenv("LD_AUDIT"))
		s->bad = true;
	else
		dl_iterate_phdr(scope_add, s);
}

/* name's address as dlsym(RTLD_NEXT) from here answers it, NULL: ask dlsym */
static void *scope_sym(const struct scope *s, const char *name)
{
	if (s->bad || !s->ended)
		return NULL;
	for (int i = 0; i < s->n; i++) {
		void *p = NULL;
		switch (kp_elf_obj_find(&s->obj[i], name, s->weak_doubt, &p)) {
		case KP_ELF_ABSENT: continue;
		case KP_ELF_FOUND: return p;
		default: return NULL;
		}
	}
	return NULL;
}

/* KP_TEST_BIND_CHECK=1 (tests/signals.bats): our lookup against dlsym's
 * for every function of the table, at start-up: one line on stderr, the
 * names dlsym bound and every difference; a difference exits 97. */
static void say(const char *line)
{
	size_t n = strlen(line);
	while (n) {
		ssize_t w = KP_REAL(write)(2, line, n);
		if (w <= 0)
			return;
		line += w, n -= (size_t)w;
	}
}

static void bind_check(const struct scope *s)
{
	static const char *const names[] = {
#define KP_REAL_NAME(ret, name, args) #name,
		KP_REAL_FUNCS(KP_REAL_NAME)
#undef KP_REAL_NAME
	};
	int ours = 0, differ = 0;
	char left[1024] = "", line[1400];
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		void *p = scope_sym(s, names[i]), *q = kp_dl_sym(RTLD_NEXT, names[i]);
		size_t used = strlen(left);
		if (!p && used + strlen(names[i]) + 2 < sizeof(left))
			snprintf(left + used, sizeof(left) - used, " %s", names[i]);
		ours += p != NULL;
		if (p && p != q) {
			differ++;
			snprintf(line, sizeof(line), "kp bind check: %s: ours %p, dlsym %p\n", names[i], p, q);
			say(line);
		}
	}
	snprintf(line, sizeof(line), "kp bind check: %zu functions, %d by our lookup, %d differ; dlsym:%s\n",
		 sizeof(names) / sizeof(*names), ours, differ, left);
	say(line);
	if (differ)
		_exit(97);
}

static bool bind_check_asked(void)
{
	const char *v = getenv("KP_TEST_BIND_CHECK");
	return v && *v == '1';
}

#if defined(KP_REAL_LAZY)

/* dlsym(RTLD_NEXT) from here names the object after ours: libc, or what
 * the program preloaded after us.  Two threads may both get here for one
 * symbol: they store the same pointer.  errno is the caller's: a call
 * that succeeds must leave it as it was, and dlsym may touch it. */
/* The objects our lookup searches, read once by the constructor (before
 * that, and for any name it does not decide, dlsym answers); read-only
 * after, so a first call in any thread, or in a signal handler, may use
 * it without a lock: the objects loaded at start-up are never unloaded. */
static struct scope bound_scope;
static bool bound_scope_ready;

static void *resolve(void **slot, const char *name)
{
	int saved = errno;
	void *p = __atomic_load_n(&bound_scope_ready, __ATOMIC_ACQUIRE) ? scope_sym(&bound_scope, name) : NULL;
	if (!p)
		p = kp_dl_sym(RTLD_NEXT, name);
	if (!p)
		p = (void *)missing;
	__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	errno = saved;
	return p;
}

/* kp_resolve_<name>(): what the stub of <name> calls to learn where to go */
#define KP_REAL_RESOLVER(ret, name, args)                                            \
	__attribute__((used, visibility("hidden"))) void *kp_resolve_##name(void);   \
	void *kp_resolve_##name(void)                                                \
	{                                                                            \
		return resolve((void **)&kp_real.name, #name);                      \
	}
KP_REAL_FUNCS(KP_REAL_RESOLVER)
#undef KP_REAL_RESOLVER

/* kp_lazy_<name>: where kp_real.<name> points until its first call.  The
 * caller's arguments are in registers (none of these functions takes more
 * than six integer arguments, syscall()'s seventh aside, which is on the
 * stack and stays there): the stub saves them, asks kp_resolve_<name>(),
 * puts them back and jumps, so the real function returns straight to the
 * caller.  %rax too (%al counts a variadic call's vector registers), and
 * %xmm0-7, which dlsym may use. */
#define KP_REAL_STUB(ret, name, args)                                                \
	".globl kp_lazy_" #name "\n"                                                 \
	".hidden kp_lazy_" #name "\n"                                                \
	".type kp_lazy_" #name ", @function\n"                                       \
	".p2align 4\n"                                                               \
	"kp_lazy_" #name ":\n"                                                       \
	"	.cfi_startproc\n"                                                    \
	"	endbr64\n"                                                           \
	"	lea kp_resolve_" #name "(%rip), %r11\n"                              \
	"	jmp kp_lazy_common\n"                                                \
	"	.cfi_endproc\n"                                                      \
	".size kp_lazy_" #name ", .-kp_lazy_" #name "\n"

/* At entry %rsp is 8 mod 16; seven pushes make it 0 again for the call. */
__asm__(".text\n"
	".p2align 4\n"
	".type kp_lazy_common, @function\n"
	"kp_lazy_common:\n"
	"	.cfi_startproc\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rdx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rcx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %r8\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %r9\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rax\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	sub $128, %rsp\n"
	"	.cfi_adjust_cfa_offset 128\n"
	"	movaps %xmm0, 0(%rsp)\n"
	"	movaps %xmm1, 16(%rsp)\n"
	"	movaps %xmm2, 32(%rsp)\n"
	"	movaps %xmm3, 48(%rsp)\n"
	"	movaps %xmm4, 64(%rsp)\n"
	"	movaps %xmm5, 80(%rsp)\n"
	"	movaps %xmm6, 96(%rsp)\n"
	"	movaps %xmm7, 112(%rsp)\n"
	"	call *%r11\n"
	"	mov %rax, %r11\n"
	"	movaps 0(%rsp), %xmm0\n"
	"	movaps 16(%rsp), %xmm1\n"
	"	movaps 32(%rsp), %xmm2\n"
	"	movaps 48(%rsp), %xmm3\n"
	"	movaps 64(%rsp), %xmm4\n"
	"	movaps 80(%rsp), %xmm5\n"
	"	movaps 96(%rsp), %xmm6\n"
	"	movaps 112(%rsp), %xmm7\n"
	"	add $128, %rsp\n"
	"	.cfi_adjust_cfa_offset -128\n"
	"	pop %rax\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %r9\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %r8\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rcx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%r11\n"
	"	.cfi_endproc\n"
	".size kp_lazy_common, .-kp_lazy_common\n" KP_REAL_FUNCS(KP_REAL_STUB));
#undef KP_REAL_STUB

/* docs/binding.md: a first call from a signal handler that interrupted
 * the loader (the program's own dlsym) would re-enter it; these are bound
 * before main instead. */
void kp_real_bind_signal_safe(void)
{
	int saved = errno;
	if (!__atomic_load_n(&bound_scope_ready, __ATOMIC_ACQUIRE)) {
		scope_fill(&bound_scope);
		__atomic_store_n(&bound_scope_ready, true, __ATOMIC_RELEASE);
	}
	if (bind_check_asked())
		bind_check(&bound_scope);
	errno = saved;
	/* our lookup, else dlsym (resolve) */
#define KP_REAL_EAGER(name) kp_resolve_##name();
	KP_REAL_SIGNAL_SAFE(KP_REAL_EAGER)
#undef KP_REAL_EAGER
}

#define KP_REAL_STUB_DECL(ret, name, args) __attribute__((visibility("hidden"))) extern ret kp_lazy_##name args;
KP_REAL_FUNCS(KP_REAL_STUB_DECL)
#undef KP_REAL_STUB_DECL

/* Filled in by the dynamic linker's relocations, before any code of the
 * process runs: no call ever finds a NULL here. */
#define KP_REAL_STUB_INIT(ret, name, args) .name = kp_lazy_##name,
struct kp_real_table kp_real = { KP_REAL_FUNCS(KP_REAL_STUB_INIT) };
#undef KP_REAL_STUB_INIT

#else /* !KP_REAL_LAZY */

struct kp_real_table kp_real;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static void bind_all(void)
{
	/* dlsym returns void *; the cast through the field's type is the POSIX way */
#define KP_REAL_BIND(ret, name, args)                                  \
	*(void **)&kp_real.name = kp_dl_sym(RTLD_NEXT, #name);             \
	if (!kp_real.name)                                             \
		*(void **)&kp_real.name = (void *)missing;
	KP_REAL_FUNCS(KP_REAL_BIND)
#undef KP_REAL_BIND
}

void kp_real_bind(void)
{
	pthread_once(&bind_once, bind_all);
}

void kp_real_bind_signal_safe(void)
{
	if (bind_check_asked()) {
		struct scope s;
		scope_fill(&s);
		bind_check(&s);
	}
	kp_real_bind();
}

#endif

/* kp_readable: the kernel's answer, one 8-byte word a page.  Whether a
 * byte can be read is the page's to say, so one word in each page the
 * range touches (aligned down to 8: inside that page) answers for the
 * range.  The question is rt_sigprocmask with an invalid how: the kernel
 * copies the set in (EFAULT where it cannot), then refuses the how
 * (EINVAL) before it changes anything (kernel/signal.c).  A system call
 * of our own (no libc symbol, nothing instrumented), ~0.1 us a page;
 * process_vm_readv of ourselves, tried first, cost ~5 us (it pins the
 * pages).  Any other answer (a seccomp filter's EPERM, a tool that
 * checks how first): true, and the wrapper reads as it did before (a
 * crash where alone EFAULT).  Async-signal-safe. */
#define PROBE_PAGE 4096u
#define PROBE_BAD_HOW 0x7fff

static KP_NO_SANITIZE long probe_word(const void *word)
{
#if defined(__x86_64__)
	long r;
	register long r10 __asm__("r10") = 8;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_rt_sigprocmask), "D"((long)PROBE_BAD_HOW), "S"(word), "d"(0L), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
#else
	int saved = errno;
	long r = KP_REAL(syscall)(SYS_rt_sigprocmask, PROBE_BAD_HOW, word, NULL, 8);
	r = r < 0 ? -errno : r;
	errno = saved;
	return r;
#endif
}

/* Without a probe: a range on the main thread's stack between our frame
 * and the stack's top (the program's own frames, mapped as one; the
 * strace test of a reused connection in tests/edges.bats counts every
 * call the kernel sees).  ld.so's __libc_stack_end is that top; a stack
 * pointer within MAIN_STACK_SPAN below it is the main thread's (the
 * kernel puts mmap'd thread stacks farther down). */
extern void *__libc_stack_end;
#define MAIN_STACK_SPAN ((uintptr_t)64 << 20)

static bool on_main_stack(uintptr_t a, uintptr_t last)
{
	char here;
	uintptr_t sp = (uintptr_t)&here, top = (uintptr_t)__libc_stack_end;
	return sp < top && top - sp < MAIN_STACK_SPAN && a >= sp && last < top;
}

/* Under valgrind the probe answers nothing and costs an error: valgrind
 * emulates rt_sigprocmask itself (an invalid how is EINVAL, never EFAULT)
 * and memcheck first checks the 8 bytes we point at as a set the program
 * passed, reporting "uninitialised byte(s)" where a buffer's word starts
 * before it or its end is unwritten; a program checked with
 * --error-exitcode then fails where alone it passed.  Valgrind starts
 * every program with its vgpreload objects first in LD_PRELOAD, which is
 * how we know (set once by the constructor, before any wrapper probes);
 * there every range is readable, as with any tool that answers EINVAL
 * first, and memcheck reports a bad pointer itself. */
static bool probe_off;

void kp_readable_init(void)
{
	const char *preload = getenv("LD_PRELOAD");
	probe_off = preload && strstr(preload, "/vgpreload_");
}

bool kp_readable(const void *p, size_t len)
{
	if (!len || probe_off)
		return true;
	uintptr_t a = (uintptr_t)p, last = a + len - 1;
	if (last < a)
		return false; /* past the end of the address space */
	if (on_main_stack(a, last))
		return true;
	for (;;) {
		/* the word at address 0 cannot be asked (a NULL set is no
		 * set to the kernel: it answers 0): its page's next word */
		uintptr_t w = a & ~(uintptr_t)7;
		if (probe_word((const void *)(w ? w : 8)) == -EFAULT)
			return false;
		uintptr_t next = (a | (PROBE_PAGE - 1)) + 1;
		if (next == 0 || next > last)
			return true;
		a = next;
	}
}

bool kp_sockaddr_readable(const struct sockaddr *addr, socklen_t len)
{
	size_t most = sizeof(struct sockaddr_in6);
	return len >= sizeof(struct sockaddr_in) && kp_readable(addr, len < most ? len : most);
}

bool kp_readable_iov(const struct iovec *iov, int iovcnt, size_t most)
{
	for (int i = 0; i < iovcnt && most; i++) {
		size_t len = iov[i].iov_len < most ? iov[i].iov_len : most;
		if (!kp_readable(iov[i].iov_base, len))
			return false;
		most -= len;
	}
	return true;
}
