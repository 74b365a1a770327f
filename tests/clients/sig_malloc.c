/*
 * sig_malloc - connect() from a signal handler that interrupts malloc and
 * free (a timer every 700 us, 300 times): connect is async-signal-safe,
 * so the program must neither crash nor hang, with or without a second
 * thread (which makes glibc lock its arena).
 *
 * With "write", each handler also makes a whole request and reads its
 * answer to EOF, with async-signal-safe calls only: the head written in
 * three pieces (write of an unfinished head, send, then writev of 12
 * pieces that end it), a 3000-byte header (a rewrite larger than any
 * stack buffer), "Connection: close" (rewritten), so that the library's
 * write path (the held head, the rewrite, the writev copy, the replay
 * copy of a reused connection) runs inside the handler.
 *
 *   sig_malloc HOST PORT [thread|write|thread-write] [PATH]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/time.h>
#include <unistd.h>

#define SIGNALS 300
static struct sockaddr_in to;
static volatile sig_atomic_t fired, conns;
static int with_request;
static char head1[64], big[3100];
static const char *path = "/f";

/* the request, in three calls; its answer read to EOF: true when it was
 * a 200 (async-signal-safe calls only) */
static int request(int fd)
{
	size_t l1 = strlen(head1);
	if (write(fd, head1, l1) != (ssize_t)l1)
		return 0;
	static const char host[] = "Host: 127.0.0.1\r\n";
	if (send(fd, host, sizeof(host) - 1, 0) != (ssize_t)(sizeof(host) - 1))
		return 0;
	static const char *rest[12] = { "Accept: */*\r\n", "X-A: 1\r\n", "X-B: 2\r\n", "X-C: 3\r\n",
					"X-D: 4\r\n", "X-E: 5\r\n", "X-F: 6\r\n", "X-G: 7\r\n",
					"X-H: 8\r\n", NULL, "Connection: close\r\n", "\r\n" };
	struct iovec v[12];
	size_t total = 0;
	for (int i = 0; i < 12; i++) {
		v[i].iov_base = (void *)(rest[i] ? rest[i] : big);
		v[i].iov_len = strlen(v[i].iov_base);
		total += v[i].iov_len;
	}
	if (writev(fd, v, 12) != (ssize_t)total)
		return 0;
	char buf[4096], first[12] = "";
	ssize_t n, got = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (!got)
			memcpy(first, buf, n < 12 ? (size_t)n : 12);
		got += n;
	}
	return n == 0 && !memcmp(first, "HTTP/1.1 200", 12);
}

static void handler(int sig)
{
	(void)sig;
	int saved = errno;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0) {
		if (!with_request)
			conns++; /* kept open: each connect makes a new connection */
		else if (request(fd))
			conns++;
		if (with_request)
			close(fd); /* parked: the next handler reuses it */
	} else if (fd >= 0) {
		close(fd);
	}
	fired++;
	errno = saved;
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	to.sin_family = AF_INET;
	to.sin_port = htons((uint16_t)atoi(argv[2]));
	inet_pton(AF_INET, argv[1], &to.sin_addr);
	with_request = argc > 3 && strstr(argv[3], "write") != NULL;
	if (argc > 4)
		path = argv[4];
	snprintf(head1, sizeof(head1), "GET %s HTTP/1.1\r\n", path);
	memcpy(big, "X-Big: ", 7);
	memset(big + 7, 'b', sizeof(big) - 10);
	memcpy(big + sizeof(big) - 3, "\r\n", 3);
	if (argc > 3 && strstr(argv[3], "thread")) {
		pthread_t t;
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old); /* the timer hits main */
		pthread_create(&t, NULL, idle, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_RESTART };
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 700 }, { 0, 700 } };
	setitimer(ITIMER_REAL, &it, NULL);
	void *p[64] = { 0 };
	unsigned x = 1;
	while (fired < SIGNALS) {
		x = x * 1103515245 + 12345;
		unsigned k = (x >> 8) % 64;
		free(p[k]);
		p[k] = malloc(16 + ((x >> 16) % 3000));
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_BLOCK, &alrm, NULL); /* one may still be on its way */
	/* how many fired is the timer's business: one more may land before
	 * the loop sees the count; every one of them must have connected */
	printf("signals %s, every one %s: %s\n", fired >= SIGNALS ? "all" : "missing",
	       with_request ? "answered" : "connected", conns == fired ? "yes" : "no");
	return 0;
}
