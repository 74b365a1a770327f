/*
 * tls_sandbox - an HTTPS program that sandboxes itself with seccomp in the
 * middle of a TLS session (docs/owner.md "A sandbox").
 *
 * Usage: tls_sandbox PORT CA MODE [direct|direct-end|end|own|answer]
 *   MODE  errno   an allow-list filter of the calls this program makes
 *                 alone (read, write, close, exit, memory), anything else
 *                 fails with EPERM (prctl)
 *         kill    the same list, anything else kills the process (SIGSYS)
 *                 (syscall(SYS_seccomp))
 *         strict  SECCOMP_MODE_STRICT: read, write, _exit, sigreturn only
 *         none    no sandbox (the same steps)
 *
 * Against 127.0.0.1:PORT over TLS (verified as "localhost" with CA):
 *   A  connect, GET /f asking to close, its response, the end read,
 *      SSL_shutdown, close; twice     (the first teaches the library how
 *      the server ends, the second it rewrites and parks)
 *   B  connect, SSL_connect           (the library hands A's out: its
 *      engine answers B's SSL calls), GET /f, its response
 * Then the sandbox, then on B:
 *   GET /f asking to close, its response, the end read (SSL_read's
 *   return, SSL_get_error), SSL_shutdown
 * end: B's request that asks to close and its response before the
 * sandbox, only the end read after it (an EOF the library owes then).
 * own: as end, with A once (it teaches, nothing is parked): B's SSL is its
 * own engine, not handed a connection.  answer: B's request that asks
 * to close written before the sandbox, its response and end read after.
 * direct-end: as direct, with B's request and response before the sandbox
 * as in end.
 * direct: B only, the sandbox right after its SSL_connect (a process whose
 * first connection is handed one parked by another: docs/tls-across.md).
 * Each step prints one line.  Then B's SSL freed and its socket closed,
 * and exit() (its destructors: the library's passes the parked connection
 * to the broker); in strict mode _exit (it allows no exit_group).
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "allow_filter.h"
#include <sys/syscall.h>
#include <unistd.h>

#include "tls_common.h"

static bool strict;

static void quit(int code)
{
	if (!strict)
		exit(code);
	syscall(SYS_exit, code);
	for (;;)
		;
}

static void sandbox(const char *mode)
{
	if (!strcmp(mode, "none"))
		return;
	if (!strcmp(mode, "strict")) {
		strict = true;
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0)
			quit(9);
		return;
	}
	/* what this program calls alone from here on (libcrypto's
	 * allocations included) */
	static const int allow[] = { SYS_read,	 SYS_write,  SYS_close,	     SYS_exit, SYS_exit_group,
				     SYS_brk,	 SYS_mmap,   SYS_munmap,     SYS_mremap, SYS_futex,
				     SYS_rt_sigreturn };
	bool kill = !strcmp(mode, "kill");
	struct sock_filter f[ALLOW_FILTER_LEN(sizeof(allow) / sizeof(allow[0]))];
	struct sock_fprog prog = allow_filter(f, allow, sizeof(allow) / sizeof(allow[0]),
					       kill ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    (kill ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
		  : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) != 0)
		quit(9);
}

/* GET /f on ssl (asking to close: close), its status line and body size */
static void get(SSL *ssl, const char *name, int close)
{
	char req[128], resp[8192];
	int n = snprintf(req, sizeof(req), "GET /f HTTP/1.1\r\nHost: localhost\r\n%s\r\n",
			 close ? "Connection: close\r\n" : "");
	if (SSL_write(ssl, req, n) != n) {
		printf("%s: SSL_write failed: %s\n", name, reason());
		quit(1);
	}
	size_t got;
	char *body = read_response(ssl, resp, sizeof(resp), &got);
	char *eol = strstr(resp, "\r\n");
	printf("%s: %.*s, %zu body bytes\n", name, eol ? (int)(eol - resp) : 0, resp,
	       body ? got - (size_t)(body - resp) : 0);
}

/* the end after a response that asked to close */
static void end(SSL *ssl, const char *name)
{
	char b[64];
	ERR_clear_error();
	int r = SSL_read(ssl, b, sizeof(b));
	printf("%s: end read=%d err=%d\n", name, r, r > 0 ? 0 : SSL_get_error(ssl, r));
	r = SSL_shutdown(ssl);
	printf("%s: shutdown=%d\n", name, r);
}

int main(int argc, char **argv)
{
	const char *how = argc == 5 ? argv[4] : "";
	bool direct = !strncmp(how, "direct", 6), own = !strcmp(how, "own"), answer = !strcmp(how, "answer"),
	     late_end = own || !strcmp(how, "end") || !strcmp(how, "direct-end");
	if (argc != 4 && !direct && !late_end && !answer) {
		fprintf(stderr, "usage: tls_sandbox PORT CA errno|kill|strict|none [direct|direct-end|end|own|answer]\n");
		return 2;
	}
	/* stdout unbuffered: no fstat or buffer allocation under the filter */
	setvbuf(stdout, NULL, _IONBF, 0);
	int port = atoi(argv[1]);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		return 2;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);

	for (int i = direct ? 2 : own ? 1 : 0; i < 2; i++) {
		SSL *a = tls_new(ctx, port);
		if (SSL_connect(a) != 1) {
			printf("A: SSL_connect: %s\n", reason());
			return 1;
		}
		get(a, "A", 1);
		end(a, "A");
		int afd = SSL_get_fd(a);
		SSL_free(a);
		close(afd);
	}

	SSL *b = tls_new(ctx, port);
	if (SSL_connect(b) != 1) {
		printf("B: SSL_connect: %s\n", reason());
		return 1;
	}
	if (!direct)
		get(b, "B", 0);
	if (late_end)
		get(b, "B", 1);
	static const char close_req[] = "GET /f HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
	if (answer && SSL_write(b, close_req, (int)sizeof(close_req) - 1) != (int)sizeof(close_req) - 1) {
		printf("B: SSL_write failed: %s\n", reason());
		quit(1);
	}

	sandbox(argv[3]);
	printf("sandboxed (%s)\n", argv[3]);
	if (answer) {
		char resp[8192];
		size_t got;
		char *body = read_response(b, resp, sizeof(resp), &got);
		char *eol = strstr(resp, "\r\n");
		printf("B: %.*s, %zu body bytes\n", eol ? (int)(eol - resp) : 0, resp,
		       body ? got - (size_t)(body - resp) : 0);
	} else if (!late_end)
		get(b, "B", 1);
	end(b, "B");
	printf("done\n");
	if (!strict) {
		int bfd = SSL_get_fd(b);
		SSL_free(b);
		close(bfd);
	}
	quit(0);
}
