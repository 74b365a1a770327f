/*
 * hooks_jump.c - the exported longjmp family: a jump out of a signal
 * handler that interrupted a call of ours.
 *
 * A program that bounds its reads with alarm() and siglongjmp() out of
 * the handler (POSIX allows it: read() is async-signal-safe) leaves our
 * read wrapper without passing its end, and the thread's count of calls
 * under way (kp_lock.h, KP_INSIDE_CALL) would stay up for good: every
 * later call of the thread would then step aside as a handler's does,
 * and the EOF we owe would never be given (the program waits for the
 * server's idle timeout).  So a jump made while the thread is inside
 * calls of ours but holds no lock of ours drops that count: the jump
 * leaves them (a handler jumps out, or its own setjmp inside the handler,
 * which then returns into our call: kp_call_leave finds 0 and stays 0).
 * A jump made while one of our locks is held leaves the count as it is:
 * the lock stays taken for good, and stepping aside is what fails open
 * there (docs/binding.md "A jump out of a handler").
 *
 * setjmp/sigsetjmp are not wrapped: a function that returns twice cannot
 * be.  Each wrapper costs one TLS load when not inside (Ruby jumps often).
 */
#include <setjmp.h>

#include "kp_lock.h"
#include "real.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* glibc's, behind longjmp() under _FORTIFY_SOURCE */
void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

static inline void jump_leaves_calls(void)
{
	unsigned inside = __atomic_load_n(&kp_inside, __ATOMIC_RELAXED);
	if (__builtin_expect(inside != 0, 0) && !(inside & KP_INSIDE_LOCKS))
		__atomic_store_n(&kp_inside, 0, __ATOMIC_RELAXED);
}

KP_EXPORT void longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump_leaves_calls();
	KP_REAL(longjmp)(env, val);
	__builtin_unreachable();
}

KP_EXPORT void _longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump_leaves_calls();
	KP_REAL(_longjmp)(env, val);
	__builtin_unreachable();
}

KP_EXPORT void siglongjmp(struct __jmp_buf_tag env[1], int val)
{
	jump_leaves_calls();
	KP_REAL(siglongjmp)(env, val);
	__builtin_unreachable();
}

KP_EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	jump_leaves_calls();
	KP_REAL(__longjmp_chk)(env, val);
	__builtin_unreachable();
}
