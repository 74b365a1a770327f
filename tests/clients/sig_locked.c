/*
 * sig_locked.c - a signal handler that calls our wrappers while the
 * thread it interrupted may be inside one of the library's locked paths
 * (the pool's lookup in connect, the send path, the read path that learns
 * and frames, the park in close): docs/binding.md, "Signal handlers inside
 * our locks".
 *
 *   sig_locked HOST PORT PATH ROUNDS MODE SEED
 *
 * Each round: connection A (a GET asking to close, read to EOF), then
 * connection B the same, then both closed.  While B runs, A is "done" (its
 * EOF read).  An interval timer (a period from SEED, 150-400 us) fires
 * all along; the handler, by MODE:
 *   connect   socket() + connect() to HOST:PORT + close()
 *   dup       dup(A) + close() of the copy
 *   read      read(A) (0: A's EOF was read)
 *   recv      recv(A, MSG_DONTWAIT) (0)
 *   write     write(A, "", 0) (0)
 *   send      send(A, "", 0, MSG_NOSIGNAL) (0)
 *   poll      poll(A, POLLIN, 0) (POLLIN)
 *   shutdown  shutdown(A, SHUT_RDWR) once a round (0)
 *   fork      fork() once a round, the child _exit()s at once
 *   all       every one of them in turn
 *   exit      exit(3) at the handler's first call, the timer then firing
 *             once, 0.2 to 20 ms in (from SEED), the rounds going on
 *             until then: the library's exit work runs inside the handler
 * Prints "responses N body BYTES handler CALLS odd ODD": ODD counts the
 * handler's calls whose answer was not the one above; CALLS, the calls
 * made (they vary with the timer, so the test compares only N, BYTES and
 * ODD).  A hang is the failure (run under timeout).
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
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

enum { M_CONNECT, M_DUP, M_READ, M_RECV, M_WRITE, M_SEND, M_POLL, M_SHUTDOWN, M_FORK, M_ALL, M_EXIT };
static const char *const modes[] = { "connect", "dup", "read", "recv", "write", "send",
				     "poll", "shutdown", "fork", "all", "exit" };
enum { N_OPS = M_ALL };

static struct sockaddr_in srv;
static int mode;
static volatile sig_atomic_t done_fd = -1, shut_done, fork_done, next_op;
static volatile sig_atomic_t calls, odd;
static volatile sig_atomic_t odd_by[N_OPS]; /* on stderr: which call */
static volatile sig_atomic_t odd_errno[N_OPS]; /* and its first errno */

static void op(int which)
{
	int a = done_fd, r;
	char b[1];
	if (which != M_CONNECT && a < 0)
		return;
	/* after this round's shutdown a write's answer is the kernel's EPIPE
	 * or a drop: not what this test is about */
	if ((which == M_WRITE || which == M_SEND) && shut_done)
		return;
	calls++;
	switch (which) {
	case M_CONNECT: {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&srv, sizeof(srv)) != 0)
			odd++;
		if (s >= 0 && close(s) != 0)
			odd++;
		break;
	}
	case M_DUP: {
		int d = dup(a);
		if (d < 0 || close(d) != 0)
			odd++;
		break;
	}
	case M_READ:
		if (read(a, b, 1) != 0)
			odd++;
		break;
	case M_RECV:
		if (recv(a, b, 1, MSG_DONTWAIT) != 0)
			odd++;
		break;
	case M_WRITE:
		if (write(a, "", 0) != 0)
			odd++;
		break;
	case M_SEND:
		if (send(a, "", 0, MSG_NOSIGNAL) != 0)
			odd++;
		break;
	case M_POLL: {
		struct pollfd p = { .fd = a, .events = POLLIN };
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
			odd++;
		break;
	}
	case M_SHUTDOWN:
		if (shut_done) {
			calls--;
			break;
		}
		shut_done = 1;
		r = shutdown(a, SHUT_RDWR);
		if (r != 0)
			odd++;
		break;
	case M_FORK: {
		/* once a round: a fork takes longer than the timer's period,
		 * and the kernel restarts it while a signal is pending */
		if (fork_done) {
			calls--;
			break;
		}
		fork_done = 1;
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0)
			odd++;
		break;
	}
	}
}

static void op_counted(int which)
{
	int before = odd;
	errno = 0;
	op(which);
	if (odd != before && !odd_by[which]++)
		odd_errno[which] = errno;
}

static void on_alarm(int sig)
{
	(void)sig;
	int saved = errno;
	if (mode == M_EXIT)
		exit(3);
	if (mode == M_ALL) {
		op_counted(next_op);
		next_op = (next_op + 1) % N_OPS;
	} else {
		op_counted(mode);
	}
	errno = saved;
}

/* one GET asking to close, read to EOF; the fd left open */
static int get(const char *path, long *responses, long *body)
{
	int s;
	while ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0 && errno == EINTR)
		;
	if (s < 0 || connect(s, (struct sockaddr *)&srv, sizeof(srv)) != 0) {
		perror("connect");
		exit(1);
	}
	char req[512], buf[65536];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	for (int off = 0; off < n;) {
		ssize_t w = write(s, req + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			perror("write");
			exit(1);
		}
		off += (int)w;
	}
	size_t got = 0;
	for (;;) {
		ssize_t r = read(s, buf + got, sizeof(buf) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			perror("read");
			exit(1);
		}
		if (r == 0 || (got += (size_t)r) == sizeof(buf))
			break;
	}
	const char *end = memmem(buf, got, "\r\n\r\n", 4);
	if (got > 12 && !memcmp(buf, "HTTP/1.1 200", 12) && end) {
		++*responses;
		*body += (long)(got - (size_t)(end + 4 - buf));
	}
	return s;
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s HOST PORT PATH ROUNDS MODE SEED\n", argv[0]);
		return 2;
	}
	srv.sin_family = AF_INET;
	srv.sin_port = htons((unsigned short)atoi(argv[2]));
	inet_pton(AF_INET, argv[1], &srv.sin_addr);
	long rounds = atol(argv[4]);
	mode = -1;
	for (int i = 0; i <= M_EXIT; i++)
		if (!strcmp(argv[5], modes[i]))
			mode = i;
	if (mode < 0) {
		fprintf(stderr, "unknown mode %s\n", argv[5]);
		return 2;
	}
	unsigned seed = (unsigned)atoi(argv[6]);
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	long us = 150 + (long)(seed * 2654435761u % 250);
	struct itimerval it = { { 0, us }, { 0, us } };
	if (mode == M_EXIT)
		it = (struct itimerval){ { 0, 0 }, { 0, 200 + (long)(seed * 2654435761u % 19800) } };
	setitimer(ITIMER_REAL, &it, NULL);

	long responses = 0, body = 0;
	for (long i = 0; i < rounds || mode == M_EXIT; i++) { /* (exit: until the handler's) */
		int a = get(argv[3], &responses, &body);
		shut_done = fork_done = 0;
		done_fd = a;
		int b = get(argv[3], &responses, &body);
		done_fd = -1;
		close(a);
		close(b);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	for (int i = 0; i < N_OPS; i++)
		if (odd_by[i])
			fprintf(stderr, "odd answers of %s: %d (the first: %s)\n", modes[i],
				(int)odd_by[i], strerror(odd_errno[i]));
	printf("responses %ld body %ld handler %d odd %d\n", responses, body, (int)calls, (int)odd);
	return 0;
}
