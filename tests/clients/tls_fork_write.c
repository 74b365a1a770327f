/*
 * tls_fork_write.c - a forked child's SSL_write on the connection its
 * parent asked to close (docs/hold.md "A child that writes on an
 * inherited connection"), over HTTPS.  Three connections to PORT (the
 * server: tests/servers/tls_close.py notify): /learn asking to close (the
 * server's end is learnt), /warm kept alive (parked with the library),
 * then GET /a asking to close; the process forks, the child's copy of the
 * SSL writes a POST /pay (SSL_write, valid records), and the parent then
 * reads its connection to its end.  Alone the server answers /a with its
 * close_notify and closes: the POST is never executed.
 *
 *   tls_fork_write PORT CA
 *
 * Prints what the child's SSL_write returned and the parent's reads.
 */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tls_common.h"

static SSL_CTX *ctx;

static SSL *open_ssl(int port, int *pfd)
{
	SSL *s = tls_new(ctx, port);
	if (SSL_connect(s) != 1) {
		printf("handshake failed\n");
		exit(1);
	}
	*pfd = SSL_get_fd(s);
	return s;
}

static void put(SSL *s, const char *req)
{
	if (SSL_write(s, req, (int)strlen(req)) <= 0) {
		printf("SSL_write failed\n");
		exit(1);
	}
}

/* reads to the end (to_end) or one answer ("hello"): the bytes read */
static int get(SSL *s, int to_end)
{
	char b[8192];
	int total = 0, r;
	while ((r = SSL_read(s, b + total, (int)sizeof(b) - 1 - total)) > 0) {
		total += r;
		b[total] = 0;
		if (!to_end && strstr(b, "hello"))
			break;
	}
	ERR_clear_error();
	return total;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int port = atoi(argv[1]), fd;
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		return 1;
	SSL *s = open_ssl(port, &fd);
	put(s, "GET /learn HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
	get(s, 1);
	SSL_free(s);
	close(fd);
	s = open_ssl(port, &fd);
	put(s, "GET /warm HTTP/1.1\r\nHost: localhost\r\n\r\n");
	get(s, 0);
	SSL_shutdown(s);
	SSL_free(s);
	close(fd);
	s = open_ssl(port, &fd);
	put(s, "GET /a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
	int told[2];
	if (pipe(told) < 0)
		return 1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		const char *post = "POST /pay HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc";
		errno = 0;
		int r = SSL_write(s, post, (int)strlen(post));
		char line[96];
		int n = snprintf(line, sizeof(line), "child SSL_write %d err %d\n", r, r > 0 ? 0 : SSL_get_error(s, r));
		if (write(told[1], line, (size_t)n) != n)
			_exit(4);
		_exit(0);
	}
	close(told[1]);
	char line[96];
	ssize_t k = read(told[0], line, sizeof(line) - 1);
	if (k > 0)
		fwrite(line, 1, (size_t)k, stdout);
	int st;
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st))
		printf("child killed by signal %d\n", WTERMSIG(st));
	char b[8192];
	int total = 0, r, statuses = 0;
	while ((r = SSL_read(s, b + total, (int)sizeof(b) - 1 - total)) > 0)
		total += r;
	b[total] = 0;
	for (char *p = b; (p = strstr(p, "HTTP/1.1 ")); p++)
		statuses++;
	printf("parent read %d status lines, then %d (err %d)\n", statuses, r, SSL_get_error(s, r));
	return 0;
}
