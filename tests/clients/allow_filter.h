/*
 * allow_filter.h - a seccomp filter that allows the listed system calls
 * (x86-64 only) and answers every other with `deny` (SECCOMP_RET_ERRNO |
 * EPERM, or SECCOMP_RET_KILL_PROCESS), for the clients that install one
 * (sandboxed.c, torn_head.c, tls_sandbox.c): each installs it its own way
 * (prctl, or syscall(SYS_seccomp)), which is what their tests vary.
 */
#ifndef ALLOW_FILTER_H
#define ALLOW_FILTER_H

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>

#define ALLOW_FILTER_LEN(n) (4 + 2 * (n) + 1)

/* f has room for ALLOW_FILTER_LEN(n); the program to install */
static inline struct sock_fprog allow_filter(struct sock_filter *f, const int *allow, size_t n,
					     unsigned deny)
{
	int k = 0;
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (size_t i = 0; i < n; i++) {
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)allow[i], 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deny);
	return (struct sock_fprog){ (unsigned short)k, f };
}

#endif
