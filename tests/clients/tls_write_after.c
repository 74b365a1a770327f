/*
 * tls_write_after.c - SSL_writes after the EOF of an answer the program
 * asked to close, with SIGPIPE as SIGMODE says (docs/replay.md "The
 * program's signals").  Three connections to PORT, each asking the
 * server (tests/servers/tls_close.py notify) for /learnN first: /learn1
 * asking to close (the server's end is learnt), /warm kept alive (its
 * connection parked with the library), then /a asking to close, read to
 * its end, and two SSL_writes of a POST.  Alone the server has closed:
 * the first write is taken by its kernel, which resets; the program waits
 * for that reset (poll, no events: POLLERR/POLLHUP), and the second write
 * fails with EPIPE and SIGPIPE from its socket BIO's write().
 *
 *   tls_write_after PORT CA dfl|ign|block
 *
 * dfl: killed by SIGPIPE at the second write (status 141); ign: prints
 * the second write's error; block: prints it and whether SIGPIPE is
 * pending on the thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static SSL_CTX *ctx;
static struct sockaddr_in addr;

static SSL *dial(int *pfd)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("connect");
		exit(1);
	}
	SSL *s = SSL_new(ctx);
	SSL_set_tlsext_host_name(s, "localhost");
	SSL_set_fd(s, fd);
	if (SSL_connect(s) != 1) {
		printf("handshake failed\n");
		exit(1);
	}
	*pfd = fd;
	return s;
}

static void put(SSL *s, const char *what, const char *req)
{
	errno = 0;
	int r = SSL_write(s, req, (int)strlen(req));
	int e = SSL_get_error(s, r), err = errno;
	printf("%s: SSL_write %d err %d errno %s\n", what, r, e, r > 0 ? "-" : strerror(err));
	ERR_clear_error();
	fflush(stdout);
}

/* reads to the end (when) or one answer of 5 bytes of body */
static void get(SSL *s, const char *what, int to_end)
{
	char b[4096];
	int total = 0, r;
	for (;;) {
		r = SSL_read(s, b + (to_end ? 0 : total), (int)sizeof(b) - (to_end ? 0 : total));
		if (r <= 0)
			break;
		total += r;
		if (!to_end && total >= 4 && memmem(b, (size_t)total, "hello", 5))
			break;
	}
	printf("%s: read %d bytes%s\n", what, total, to_end ? (r == 0 ? ", then the end" : ", then an error") : "");
	ERR_clear_error();
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tls_write_after PORT CA dfl|ign|block\n");
		return 2;
	}
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (!strcmp(argv[3], "ign"))
		signal(SIGPIPE, SIG_IGN);
	else if (!strcmp(argv[3], "block"))
		sigprocmask(SIG_BLOCK, &pipe_set, NULL);
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		return 1;
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)atoi(argv[1]));
	inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
	int fd;
	SSL *s = dial(&fd);
	put(s, "learn", "GET /learn HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
	get(s, "learn", 1);
	SSL_free(s);
	close(fd);
	s = dial(&fd);
	put(s, "warm", "GET /warm HTTP/1.1\r\nHost: localhost\r\n\r\n");
	get(s, "warm", 0);
	SSL_shutdown(s);
	SSL_free(s);
	close(fd);
	s = dial(&fd);
	put(s, "a", "GET /a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
	get(s, "a", 1);
	put(s, "b", "POST /b HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nhi");
	/* the closed server's reset (alone): an event, not a time */
	struct pollfd p = { .fd = fd, .events = 0 };
	poll(&p, 1, 5000);
	put(s, "c", "POST /c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nhi");
	sigset_t pending;
	sigpending(&pending);
	printf("SIGPIPE pending: %d\n", sigismember(&pending, SIGPIPE));
	return 0;
}
